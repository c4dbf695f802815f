//! The replication stream's recent bytes (`repl-backlog-size`), from which
//! a replica that lost its link resumes with `+CONTINUE`, and the offset
//! bookkeeping Redis reports (`master_repl_offset`, first byte, histlen).
//!
//! Offsets count stream bytes since the replication ID began, 1-based as
//! in Redis: the stream's byte number `end` is the last one written.

use super::chunks::{Chunks, BLOCK};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Entries the LSN -> offset index keeps; past it the oldest two merge.
const INDEX_CAP: usize = 1 << 16;

/// How far a connected replica may fall behind before it is disconnected
/// (and resyncs fully), by default: the stream it still needs is kept past
/// `repl-backlog-size` up to `client-output-buffer-limit replica`'s hard
/// limit, as Redis keeps a replica's output buffer up to it (256mb by
/// default). With only the 1 MiB backlog, a replica that paused for 50 ms
/// under a 20 MB/s stream was cut off, and its full sync fell behind again
/// under the same load.
pub const REPLICA_BUFFER_LIMIT: usize = 256 << 20;

/// Memory the backlog holds past `repl-backlog-size` while it keeps stream
/// for lagging replicas, which `maxmemory` does not count, as Redis does
/// not count replicas' output buffers: evicting for them would stream more
/// deletes to the replica that is already behind, which would grow them
/// again. INFO's `mem_not_counted_for_evict`. Only while something is kept
/// past that size: leaving out even 44 KB more let `used_memory` sit over
/// `maxmemory` for good once the stream had passed the backlog's size
/// (Redis's unit/maxmemory).
static HELD_PAST_BACKLOG_BYTES: AtomicUsize = AtomicUsize::new(0);

/// What [`HELD_PAST_BACKLOG_BYTES`] holds now.
pub fn held_past_backlog_bytes() -> usize {
    HELD_PAST_BACKLOG_BYTES.load(Ordering::Relaxed)
}

pub struct Backlog {
    buf: Chunks,
    cap: usize,
    /// `master_repl_offset`: bytes of stream ever produced.
    pub end: u64,
    /// The database the stream last SELECTed; None forces a SELECT before
    /// the next command (after a full sync starts, as Redis does).
    pub seldb: Option<u32>,
    /// A replica attached at least once (`repl_backlog_active`).
    pub active: bool,
    /// This server is a replica: the stream it applies is its primary's,
    /// and its own writes (none, it is read-only) are not streamed.
    pub paused: bool,
    /// Logged commits not yet known to be on enough replicas, in stream
    /// order: (offset of the commit's last byte, its LSN). LSNs are not in
    /// order here (commits in different shards race to the stream); see
    /// [`Backlog::covered_lsn`].
    index: VecDeque<(u64, u64)>,
    /// The highest LSN fed (or covered by a full sync's snapshot).
    max_lsn: u64,
    /// Per connected replica (by client id): the next byte it needs.
    pins: Vec<(u64, u64)>,
    /// Most of the stream kept for a connected replica
    /// ([`REPLICA_BUFFER_LIMIT`] unless configured).
    replica_limit: usize,
}

impl Backlog {
    pub fn new(cap: usize) -> Backlog {
        Backlog {
            buf: Chunks::default(),
            cap: cap.max(16 * 1024),
            end: 0,
            seldb: None,
            active: false,
            paused: false,
            index: VecDeque::new(),
            max_lsn: 0,
            pins: Vec::new(),
            replica_limit: REPLICA_BUFFER_LIMIT,
        }
    }

    pub fn append(&mut self, bytes: &[u8]) {
        self.buf.push(bytes);
        self.end += bytes.len() as u64;
        self.trim();
    }

    /// Drops what neither `repl-backlog-size` nor a connected replica
    /// (within its limit) still needs.
    fn trim(&mut self) {
        let needed = self
            .pins
            .iter()
            .map(|&(_, pos)| (self.end + 1).saturating_sub(pos) as usize)
            .max()
            .unwrap_or(0)
            .min(self.replica_limit);
        let keep = self.cap.max(needed);
        if self.buf.len() > keep {
            self.buf.drop_front(self.buf.len() - keep);
        }
        self.note_held();
    }

    fn note_held(&self) {
        HELD_PAST_BACKLOG_BYTES.store(self.held_for_replicas(), Ordering::Relaxed);
    }

    /// The allocation past `repl-backlog-size` (and the block it ends in)
    /// while stream is kept past it for lagging replicas; 0 when nothing is.
    fn held_for_replicas(&self) -> usize {
        if self.buf.len() > self.cap {
            self.buf.allocated().saturating_sub(self.cap + BLOCK)
        } else {
            0
        }
    }

    /// Notes that replica `id` needs the stream from byte `pos` on.
    pub fn pin(&mut self, id: u64, pos: u64) {
        match self.pins.iter_mut().find(|(i, _)| *i == id) {
            Some(p) => p.1 = pos,
            None => self.pins.push((id, pos)),
        }
    }

    /// Replica `id` is gone.
    pub fn unpin(&mut self, id: u64) {
        self.pins.retain(|(i, _)| *i != id);
    }

    /// Records that the commit `lsn` ends at the stream's current end. The
    /// index stays bounded: its oldest two entries merge into one that
    /// waits for the later offset and the lower LSN, which only delays.
    pub fn index_commit(&mut self, lsn: u64) {
        if lsn == 0 {
            return;
        }
        self.max_lsn = self.max_lsn.max(lsn);
        if self.pins.is_empty() {
            // No replica can cover anything until one attaches and reaches
            // the stream's end: one entry stands for every commit until
            // then. Kept one per commit, they grew the index to its cap
            // (1 MiB) on a server whose replica had gone, in doublings
            // that `maxmemory` saw as sudden growth with nothing to evict.
            if let Some(last) = self.index.back_mut() {
                *last = (self.end, last.1.min(lsn));
                return;
            }
        }
        if self.index.len() >= INDEX_CAP {
            if let (Some((_, l0)), Some((o1, l1))) =
                (self.index.pop_front(), self.index.pop_front())
            {
                self.index.push_front((o1, l0.min(l1)));
            }
        }
        self.index.push_back((self.end, lsn));
    }

    /// A full sync's snapshot at the stream's current end holds every
    /// commit up to `lsn`.
    pub fn index_snapshot(&mut self, lsn: u64) {
        self.max_lsn = self.max_lsn.max(lsn);
    }

    /// Once the stream up to `offset` is durable somewhere: the highest LSN
    /// L such that every logged commit with LSN <= L is in that prefix (or
    /// in a snapshot before it). A commit reaches the stream while it still
    /// holds its shard locks, so no reply can depend on an LSN that has not
    /// been fed yet; fed ones past `offset` are still in the index.
    pub fn covered_lsn(&mut self, offset: u64) -> u64 {
        while self.index.front().is_some_and(|&(o, _)| o <= offset) {
            self.index.pop_front();
        }
        match self.index.iter().map(|&(_, l)| l).min() {
            Some(l) => l - 1,
            None => self.max_lsn,
        }
    }

    pub fn histlen(&self) -> u64 {
        self.buf.len() as u64
    }

    /// `repl_backlog_first_byte_offset`.
    pub fn first_byte(&self) -> u64 {
        self.end - self.histlen() + 1
    }

    /// Whether a replica whose next byte is `pos` can continue from here.
    pub fn can_continue_from(&self, pos: u64) -> bool {
        self.active && pos >= self.first_byte() && pos <= self.end + 1
    }

    /// Up to `max` bytes starting at byte `pos`; None once they have left
    /// the backlog (the replica fell too far behind).
    pub fn read_from(&self, pos: u64, max: usize) -> Option<Vec<u8>> {
        if pos < self.first_byte() {
            return None;
        }
        let skip = (pos - self.first_byte()) as usize;
        Some(self.buf.copy_from(skip, max))
    }

    /// Starts the stream over at `offset` with nothing kept (promotion of
    /// a replica: it continues its primary's offsets under a new ID).
    pub fn reset_to(&mut self, offset: u64) {
        self.buf.clear();
        self.note_held();
        self.end = offset;
        self.seldb = None;
    }

    pub fn set_capacity(&mut self, cap: usize) {
        self.cap = cap.max(16 * 1024);
        self.trim();
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// `client-output-buffer-limit replica`'s hard limit (0: none).
    pub fn set_replica_limit(&mut self, bytes: u64) {
        self.replica_limit = match bytes {
            0 => usize::MAX,
            b => usize::try_from(b).unwrap_or(usize::MAX),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connected_replica_keeps_what_it_still_needs() {
        let mut b = Backlog::new(16 * 1024);
        b.active = true;
        b.pin(7, 1);
        let chunk = vec![b'x'; 10 * 1024];
        for _ in 0..10 {
            b.append(&chunk);
        }
        // Past repl-backlog-size, the lagging replica's bytes are still here.
        assert_eq!(b.histlen(), 100 * 1024);
        assert_eq!(b.read_from(1, 4).unwrap().len(), 4);
        // It caught up to byte 90K: what is before is no longer needed.
        b.pin(7, 90 * 1024 + 1);
        b.append(&chunk);
        assert_eq!(b.histlen(), 20 * 1024);
        b.unpin(7);
        b.append(&chunk);
        assert_eq!(b.histlen(), 16 * 1024);
        assert!(b.read_from(1, 4).is_none());
    }

    #[test]
    fn a_replica_is_kept_only_up_to_its_limit() {
        let mut b = Backlog::new(16 * 1024);
        b.active = true;
        b.set_replica_limit(40 * 1024);
        b.pin(7, 1);
        let chunk = vec![b'x'; 10 * 1024];
        for _ in 0..10 {
            b.append(&chunk);
        }
        assert_eq!(b.histlen(), 40 * 1024);
        assert!(b.read_from(1, 4).is_none(), "cut off");
    }

    #[test]
    fn what_a_lagging_replica_grew_is_given_back_once_it_is_gone() {
        let mut b = Backlog::new(16 * 1024);
        b.active = true;
        b.pin(7, 1);
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..64 {
            b.append(&chunk);
        }
        assert!(b.buf.allocated() >= 4 << 20);
        assert!(b.held_for_replicas() >= 64 * 64 * 1024 - 32 * 1024);
        b.unpin(7);
        b.append(&chunk);
        assert_eq!(b.histlen(), 16 * 1024);
        assert!(b.buf.allocated() <= 2 * BLOCK, "{}", b.buf.allocated());
        assert_eq!(b.held_for_replicas(), 0);
    }

    #[test]
    fn a_full_backlog_allocates_no_more() {
        let mut b = Backlog::new(1 << 20);
        b.active = true;
        let chunk = vec![b'x'; 100];
        let mut most = 0;
        for i in 0..100_000u64 {
            b.append(&chunk);
            b.index_commit(i + 1);
            if i > 20_000 {
                most = most.max(b.buf.allocated());
            }
        }
        assert!(most <= (1 << 20) + BLOCK, "{most}");
        // With no replica attached, the commits wait as one entry.
        assert_eq!(b.index.len(), 1);
        assert_eq!(b.covered_lsn(b.end - 1), 0);
        assert_eq!(b.covered_lsn(b.end), 100_000);
    }

    #[test]
    fn an_attached_replica_covers_commits_one_by_one() {
        let mut b = Backlog::new(1 << 20);
        b.active = true;
        b.append(b"before");
        b.index_commit(1);
        b.pin(7, b.end + 1);
        b.append(b"one");
        b.index_commit(2);
        let one = b.end;
        b.append(b"two");
        b.index_commit(3);
        assert_eq!(b.covered_lsn(one), 2);
        assert_eq!(b.covered_lsn(b.end), 3);
    }
}
