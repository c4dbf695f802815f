//! A byte queue kept in fixed-size blocks, for the replication backlog.
//!
//! One contiguous ring buffer grows by doubling: a 1 MiB backlog filling
//! up took half a megabyte more at one arbitrary write, which `maxmemory`
//! then saw as a dataset that had grown by that much with nothing to
//! evict (Redis's unit/maxmemory allows 100 KB of growth). In blocks, the
//! allocation follows the bytes held, 16 KiB at a time as Redis's shared
//! replication buffer does, nothing is ever copied to grow, and what a
//! lagging replica made it hold is freed block by block as it catches up.

use std::collections::VecDeque;

/// Bytes per block.
pub const BLOCK: usize = 16 * 1024;

#[derive(Default)]
pub struct Chunks {
    blocks: VecDeque<Vec<u8>>,
    /// Bytes of the front block already dropped.
    head: usize,
    len: usize,
}

impl Chunks {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated for the blocks.
    pub fn allocated(&self) -> usize {
        self.blocks.len() * BLOCK
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len();
        while !bytes.is_empty() {
            match self.blocks.back_mut() {
                Some(last) if last.len() < BLOCK => {
                    let n = (BLOCK - last.len()).min(bytes.len());
                    last.extend_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                }
                _ => self.blocks.push_back(Vec::with_capacity(BLOCK)),
            }
        }
    }

    /// Drops the oldest `n` bytes (all of them if fewer are held).
    pub fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len);
        self.len -= n;
        self.head += n;
        while let Some(front) = self.blocks.front() {
            if self.head < front.len() {
                break;
            }
            // A block is freed once all of it is dropped, the last one too
            // (the next push starts a new one).
            self.head -= front.len();
            self.blocks.pop_front();
        }
        if self.blocks.is_empty() {
            self.head = 0;
        }
    }

    pub fn clear(&mut self) {
        self.blocks.clear();
        self.head = 0;
        self.len = 0;
    }

    /// Up to `max` bytes starting `skip` bytes after the oldest.
    pub fn copy_from(&self, skip: usize, max: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(max.min(self.len.saturating_sub(skip)));
        let mut skip = skip + self.head;
        for b in &self.blocks {
            if out.len() == max {
                break;
            }
            if skip >= b.len() {
                skip -= b.len();
                continue;
            }
            let n = (b.len() - skip).min(max - out.len());
            out.extend_from_slice(&b[skip..skip + n]);
            skip = 0;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_come_back_in_order_across_blocks() {
        let mut c = Chunks::default();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for piece in data.chunks(7_000) {
            c.push(piece);
        }
        assert_eq!(c.len(), data.len());
        assert_eq!(c.copy_from(0, usize::MAX), data);
        assert_eq!(c.copy_from(16_380, 10), data[16_380..16_390]);
        c.drop_front(40_000);
        assert_eq!(c.len(), 60_000);
        assert_eq!(c.copy_from(0, 5), data[40_000..40_005]);
        assert_eq!(c.copy_from(59_998, 10), data[99_998..]);
        // Only the blocks still holding kept bytes stay allocated.
        assert_eq!(c.allocated(), 5 * BLOCK);
    }

    #[test]
    fn a_fully_dropped_queue_holds_nothing() {
        let mut c = Chunks::default();
        c.push(&[1; BLOCK + 1]);
        c.drop_front(BLOCK);
        assert_eq!(c.allocated(), BLOCK);
        c.drop_front(5);
        assert_eq!((c.len(), c.allocated()), (0, 0));
        c.push(b"ab");
        assert_eq!(c.copy_from(0, 10), b"ab");
        c.drop_front(2);
        assert_eq!((c.len(), c.allocated()), (0, 0));
        c.push(b"cd");
        assert_eq!(c.copy_from(1, 10), b"d");
        c.clear();
        assert_eq!((c.len(), c.allocated()), (0, 0));
    }
}
