//! A list's elements, packed into blocks of a few KiB (in the spirit of
//! Redis's quicklist of listpacks): an element costs its bytes and one or
//! two length bytes at each end, where a ring of separate strings cost 24
//! bytes a slot plus a heap block for each element past 23 bytes.
//!
//! Each element is `len | bytes | len`: the length before it lets a walk go
//! forwards, the one after it backwards, so both ends pop in O(1) and an
//! index is found from whichever end of its block is nearer. A length
//! under 128 is one byte; a longer one is a 0x80 marker and four bytes
//! (marker first in front, last behind). A block takes elements up to
//! [`BLOCK_BYTES`]; a longer element gets a block of its own, and a block
//! that an insertion in the middle grows past twice that is split.

use std::collections::VecDeque;

/// Bytes a block fills up to before a new one starts: pushing at the front
/// moves the block's bytes, so blocks stay small.
const BLOCK_BYTES: usize = 4096;

const LONG: u8 = 0x80;

#[derive(Clone, Default)]
pub struct ListValue {
    blocks: VecDeque<Block>,
    len: usize,
}

#[derive(Clone, Default)]
struct Block {
    buf: Vec<u8>,
    count: usize,
}

fn len_bytes(n: usize) -> usize {
    if n < LONG as usize {
        1
    } else {
        5
    }
}

/// Bytes an element of `n` bytes takes in a block.
fn entry_bytes(n: usize) -> usize {
    n + 2 * len_bytes(n)
}

/// Writes `item`'s entry into `out`, which is exactly its size.
fn write_entry(out: &mut [u8], item: &[u8]) {
    let n = item.len();
    let end = out.len();
    if n < LONG as usize {
        out[0] = n as u8;
        out[1..1 + n].copy_from_slice(item);
        out[end - 1] = n as u8;
    } else {
        let len = (n as u32).to_le_bytes();
        out[0] = LONG;
        out[1..5].copy_from_slice(&len);
        out[5..5 + n].copy_from_slice(item);
        out[end - 5..end - 1].copy_from_slice(&len);
        out[end - 1] = LONG;
    }
}

fn u32_at(buf: &[u8], at: usize) -> usize {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b) as usize
}

/// The element starting at `at`, and where the next one starts.
fn read_at(buf: &[u8], at: usize) -> (&[u8], usize) {
    let first = buf[at];
    let (n, head) = if first < LONG {
        (first as usize, 1)
    } else {
        (u32_at(buf, at + 1), 5)
    };
    let start = at + head;
    (&buf[start..start + n], start + n + head)
}

/// The element ending at `end`, and where it starts.
fn read_back(buf: &[u8], end: usize) -> (&[u8], usize) {
    let last = buf[end - 1];
    let (n, tail) = if last < LONG {
        (last as usize, 1)
    } else {
        (u32_at(buf, end - 5), 5)
    };
    let stop = end - tail;
    (&buf[stop - n..stop], stop - n - tail)
}

impl Block {
    fn with(item: &[u8]) -> Block {
        let mut b = Block {
            buf: Vec::with_capacity(entry_bytes(item.len())),
            count: 0,
        };
        b.insert_at(0, item);
        b
    }

    /// Whether `item` may join this block.
    fn takes(&self, item: &[u8]) -> bool {
        self.buf.len() + entry_bytes(item.len()) <= BLOCK_BYTES
    }

    /// Grows the buffer by `extra` bytes without overshooting a block's
    /// size by the doubling `Vec` would do.
    fn grow(&mut self, extra: usize) {
        let want = self.buf.len() + extra;
        if want > self.buf.capacity() {
            let cap = (self.buf.capacity() * 2).clamp(want, want.max(BLOCK_BYTES));
            self.buf.reserve_exact(cap - self.buf.len());
        }
    }

    /// Gives back spare room once no more elements are pushed here.
    fn seal(&mut self) {
        if self.buf.capacity() - self.buf.len() > self.buf.len() / 8 {
            self.buf.shrink_to_fit();
        }
    }

    /// Byte offset of the `i`th element, walking from the nearer end.
    fn offset_of(&self, i: usize) -> usize {
        if i <= self.count / 2 {
            (0..i).fold(0, |at, _| read_at(&self.buf, at).1)
        } else {
            (i..self.count).fold(self.buf.len(), |end, _| read_back(&self.buf, end).1)
        }
    }

    fn get(&self, i: usize) -> &[u8] {
        read_at(&self.buf, self.offset_of(i)).0
    }

    /// Inserts `item`'s entry at byte offset `at`.
    fn insert_at(&mut self, at: usize, item: &[u8]) {
        let n = entry_bytes(item.len());
        self.grow(n);
        let old = self.buf.len();
        self.buf.resize(old + n, 0);
        self.buf.copy_within(at..old, at + n);
        write_entry(&mut self.buf[at..at + n], item);
        self.count += 1;
    }

    /// Replaces bytes `from..to` with `item`'s entry (or nothing).
    fn splice(&mut self, from: usize, to: usize, item: Option<&[u8]>) {
        self.buf.drain(from..to);
        self.count -= 1;
        if let Some(item) = item {
            self.insert_at(from, item);
        }
    }

    /// Splits off the back half, as a block of its own.
    fn split(&mut self) -> Block {
        let (mut at, mut i) = (0, 0);
        while at < self.buf.len() / 2 && i + 1 < self.count {
            at = read_at(&self.buf, at).1;
            i += 1;
        }
        let back = Block {
            buf: self.buf[at..].to_vec(),
            count: self.count - i,
        };
        self.buf.truncate(at);
        self.count = i;
        self.seal();
        back
    }
}

impl ListValue {
    pub fn new() -> ListValue {
        ListValue::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push_back(&mut self, item: &[u8]) {
        self.len += 1;
        if let Some(b) = self.blocks.back_mut() {
            if b.takes(item) {
                let end = b.buf.len();
                b.insert_at(end, item);
                return;
            }
            b.seal();
        }
        self.blocks.push_back(Block::with(item));
    }

    pub fn push_front(&mut self, item: &[u8]) {
        self.len += 1;
        if let Some(b) = self.blocks.front_mut() {
            if b.takes(item) {
                b.insert_at(0, item);
                return;
            }
            b.seal();
        }
        self.blocks.push_front(Block::with(item));
    }

    /// Removes the first element; false if there was none.
    pub fn pop_front(&mut self) -> bool {
        self.remove(0)
    }

    /// Removes the last element; false if there was none.
    pub fn pop_back(&mut self) -> bool {
        self.len.checked_sub(1).is_some_and(|i| self.remove(i))
    }

    pub fn front(&self) -> Option<&[u8]> {
        self.blocks.front().map(|b| read_at(&b.buf, 0).0)
    }

    pub fn back(&self) -> Option<&[u8]> {
        self.blocks.back().map(|b| read_back(&b.buf, b.buf.len()).0)
    }

    /// The block holding element `i` (< len) and its index there, walking
    /// the blocks from the nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut left = i;
            for (bi, b) in self.blocks.iter().enumerate() {
                if left < b.count {
                    return (bi, left);
                }
                left -= b.count;
            }
        } else {
            let mut from_end = self.len - i;
            for (bi, b) in self.blocks.iter().enumerate().rev() {
                if from_end <= b.count {
                    return (bi, b.count - from_end);
                }
                from_end -= b.count;
            }
        }
        unreachable!("index {i} within a list of {}", self.len)
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len {
            return None;
        }
        let (bi, j) = self.locate(i);
        Some(self.blocks[bi].get(j))
    }

    /// Replaces element `i`; false if there is none.
    pub fn set(&mut self, i: usize, item: &[u8]) -> bool {
        if i >= self.len {
            return false;
        }
        let (bi, at, next) = self.span(i);
        self.blocks[bi].splice(at, next, Some(item));
        self.split_if_large(bi);
        true
    }

    /// The block of element `i` (< len), and where in it the element
    /// starts and ends.
    fn span(&self, i: usize) -> (usize, usize, usize) {
        let (bi, j) = self.locate(i);
        let b = &self.blocks[bi];
        let at = b.offset_of(j);
        (bi, at, read_at(&b.buf, at).1)
    }

    /// Inserts `item` so that it becomes element `i` (i <= len).
    pub fn insert(&mut self, i: usize, item: &[u8]) {
        if i >= self.len {
            return self.push_back(item);
        }
        if i == 0 {
            return self.push_front(item);
        }
        let (bi, j) = self.locate(i);
        let b = &mut self.blocks[bi];
        let at = b.offset_of(j);
        b.insert_at(at, item);
        self.len += 1;
        self.split_if_large(bi);
    }

    fn split_if_large(&mut self, bi: usize) {
        let b = &mut self.blocks[bi];
        if b.buf.len() > 2 * BLOCK_BYTES && b.count > 1 {
            let back = b.split();
            self.blocks.insert(bi + 1, back);
        }
    }

    /// Removes element `i`; false if there is none.
    pub fn remove(&mut self, i: usize) -> bool {
        if i >= self.len {
            return false;
        }
        let (bi, at, next) = self.span(i);
        let b = &mut self.blocks[bi];
        b.splice(at, next, None);
        if b.count == 0 {
            self.blocks.remove(bi);
        }
        self.len -= 1;
        true
    }

    /// Keeps the first `n` elements.
    pub fn truncate(&mut self, n: usize) {
        while self.len > n {
            let Some(b) = self.blocks.back_mut() else {
                break;
            };
            let drop = self.len - n;
            if drop >= b.count {
                self.len -= b.count;
                self.blocks.pop_back();
            } else {
                let at = b.offset_of(b.count - drop);
                b.buf.truncate(at);
                b.count -= drop;
                self.len = n;
            }
        }
    }

    /// Removes the first `n` elements.
    pub fn remove_front(&mut self, n: usize) {
        let mut left = n.min(self.len);
        while left > 0 {
            let Some(b) = self.blocks.front_mut() else {
                break;
            };
            if left >= b.count {
                left -= b.count;
                self.len -= b.count;
                self.blocks.pop_front();
            } else {
                let at = b.offset_of(left);
                b.buf.drain(..at);
                b.count -= left;
                self.len -= left;
                left = 0;
            }
        }
    }

    pub fn clear(&mut self) {
        self.blocks.clear();
        self.len = 0;
    }

    /// LREM: removes up to |count| elements equal to `item` (from the head
    /// if count > 0, from the tail if < 0, all if 0); returns how many.
    pub fn remove_matching(&mut self, count: i64, item: &[u8]) -> usize {
        let found = self.iter().filter(|x| *x == item).count();
        let limit = if count == 0 {
            found
        } else {
            found.min(count.unsigned_abs() as usize)
        };
        if limit == 0 {
            return 0;
        }
        // Matches numbered from the head: the ones in `skip` go.
        let skip = if count >= 0 {
            0..limit
        } else {
            found - limit..found
        };
        let mut kept = ListValue::new();
        let mut nth = 0;
        for x in self.iter() {
            if x == item {
                nth += 1;
                if skip.contains(&(nth - 1)) {
                    continue;
                }
            }
            kept.push_back(x);
        }
        *self = kept;
        limit
    }

    pub fn iter(&self) -> Iter<'_> {
        let back = match self.blocks.back() {
            Some(b) => (self.blocks.len() - 1, b.buf.len()),
            None => (0, 0),
        };
        Iter {
            blocks: &self.blocks,
            front: (0, 0),
            back,
            left: self.len,
        }
    }

    /// Elements `start..=stop` (both within the list).
    pub fn range(&self, start: usize, stop: usize) -> Iter<'_> {
        if start > stop || stop >= self.len {
            return Iter {
                blocks: &self.blocks,
                front: (0, 0),
                back: (0, 0),
                left: 0,
            };
        }
        let (fb, fj) = self.locate(start);
        let (bb, bj) = self.locate(stop);
        let b = &self.blocks[bb];
        let end = read_at(&b.buf, b.offset_of(bj)).1;
        Iter {
            blocks: &self.blocks,
            front: (fb, self.blocks[fb].offset_of(fj)),
            back: (bb, end),
            left: stop - start + 1,
        }
    }

    /// Heap bytes the list holds (for MEMORY USAGE and INFO).
    pub fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.blocks.iter().map(|b| b.buf.capacity()).sum::<usize>()
    }
}

/// Elements front to back (or back to front, reversed): `front` is the
/// block and offset of the next element, `back` the block and end offset
/// of the last one (an offset of 0: the end of the block before).
pub struct Iter<'a> {
    blocks: &'a VecDeque<Block>,
    front: (usize, usize),
    back: (usize, usize),
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (mut bi, mut at) = self.front;
        if at >= self.blocks[bi].buf.len() {
            bi += 1;
            at = 0;
        }
        let (item, next) = read_at(&self.blocks[bi].buf, at);
        self.front = (bi, next);
        self.left -= 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<'a> DoubleEndedIterator for Iter<'a> {
    fn next_back(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (mut bi, mut end) = self.back;
        if end == 0 {
            bi -= 1;
            end = self.blocks[bi].buf.len();
        }
        let (item, start) = read_back(&self.blocks[bi].buf, end);
        self.back = (bi, start);
        self.left -= 1;
        Some(item)
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl PartialEq for ListValue {
    fn eq(&self, other: &ListValue) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for ListValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(bytes::Bytes::copy_from_slice))
            .finish()
    }
}

impl<T: AsRef<[u8]>> Extend<T> for ListValue {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for it in items {
            self.push_back(it.as_ref());
        }
    }
}

impl<'a> IntoIterator for &'a ListValue {
    type Item = &'a [u8];
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<T: AsRef<[u8]>> FromIterator<T> for ListValue {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> ListValue {
        let mut l = ListValue::new();
        for it in items {
            l.push_back(it.as_ref());
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_seeds::seeds;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn item(rng: &mut StdRng) -> Vec<u8> {
        let n = match rng.gen_range(0..10) {
            0 => rng.gen_range(128..300),
            1 if rng.gen_bool(0.1) => rng.gen_range(BLOCK_BYTES..3 * BLOCK_BYTES),
            _ => rng.gen_range(0..40),
        };
        (0..n).map(|_| rng.gen_range(b'a'..=b'c')).collect()
    }

    fn check(l: &ListValue, model: &VecDeque<Vec<u8>>) {
        for b in &l.blocks {
            let (mut at, mut n) = (0, 0);
            while at < b.buf.len() {
                at = read_at(&b.buf, at).1;
                n += 1;
            }
            assert_eq!((at, n), (b.buf.len(), b.count), "a block's entries");
        }
        assert_eq!(l.len(), model.len());
        assert!(l.iter().eq(model.iter().map(|v| &v[..])));
        assert!(l.iter().rev().eq(model.iter().rev().map(|v| &v[..])));
        assert_eq!(l.blocks.iter().map(|b| b.count).sum::<usize>(), l.len());
        assert!(l.blocks.iter().all(|b| b.count > 0));
        assert_eq!(l.front(), model.front().map(|v| &v[..]));
        assert_eq!(l.back(), model.back().map(|v| &v[..]));
    }

    /// Every operation against a ring of separate strings, the layout this
    /// replaces, over short, long and block-sized elements.
    #[test]
    fn behaves_as_a_ring_of_strings() {
        for seed in 0..40 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut l = ListValue::new();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            for _ in 0..3000 {
                let len = model.len();
                match rng.gen_range(0..100) {
                    0..=24 => {
                        let it = item(&mut rng);
                        l.push_back(&it);
                        model.push_back(it);
                    }
                    25..=44 => {
                        let it = item(&mut rng);
                        l.push_front(&it);
                        model.push_front(it);
                    }
                    45..=54 => {
                        assert_eq!(l.pop_front(), model.pop_front().is_some());
                    }
                    55..=64 => {
                        assert_eq!(l.pop_back(), model.pop_back().is_some());
                    }
                    65..=72 => {
                        let i = rng.gen_range(0..=len);
                        let it = item(&mut rng);
                        l.insert(i, &it);
                        model.insert(i, it);
                    }
                    73..=78 if len > 0 => {
                        let i = rng.gen_range(0..len);
                        let it = item(&mut rng);
                        assert!(l.set(i, &it));
                        model[i] = it;
                    }
                    79..=83 if len > 0 => {
                        let i = rng.gen_range(0..len);
                        assert!(l.remove(i));
                        model.remove(i);
                    }
                    84..=87 => {
                        let n = rng.gen_range(0..=len + 2);
                        l.truncate(n);
                        model.truncate(n);
                    }
                    88..=90 => {
                        let n = rng.gen_range(0..=len / 4 + 1);
                        l.remove_front(n);
                        model.drain(..n.min(len));
                    }
                    91..=94 => {
                        let it = item(&mut rng);
                        let count = rng.gen_range(-3..=3);
                        let want = model_remove(&mut model, count, &it);
                        assert_eq!(l.remove_matching(count, &it), want);
                    }
                    95..=98 if len > 0 => {
                        let s = rng.gen_range(0..len);
                        let e = rng.gen_range(s..len);
                        let got: Vec<&[u8]> = l.range(s, e).collect();
                        let want: Vec<&[u8]> = model.range(s..=e).map(|v| &v[..]).collect();
                        assert_eq!(got, want);
                        let got: Vec<&[u8]> = l.range(s, e).rev().collect();
                        let want: Vec<&[u8]> = model.range(s..=e).rev().map(|v| &v[..]).collect();
                        assert_eq!(got, want);
                        let i = rng.gen_range(0..len);
                        assert_eq!(l.get(i), Some(&model[i][..]));
                    }
                    99 if rng.gen_bool(0.05) => {
                        l.clear();
                        model.clear();
                    }
                    _ => {}
                }
                check(&l, &model);
            }
        }
    }

    fn model_remove(m: &mut VecDeque<Vec<u8>>, count: i64, item: &[u8]) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        let mut removed = 0;
        if count >= 0 {
            let mut i = 0;
            while i < m.len() && removed < limit {
                if m[i] == item {
                    m.remove(i);
                    removed += 1;
                } else {
                    i += 1;
                }
            }
        } else {
            let mut i = m.len();
            while i > 0 && removed < limit {
                i -= 1;
                if m[i] == item {
                    m.remove(i);
                    removed += 1;
                }
            }
        }
        removed
    }

    /// An element whose length sits at a layout edge: the one- and
    /// five-byte length forms, an entry that exactly fills a block or just
    /// misses, one twice a block (the split point). Its bytes depend on
    /// its length and one of two letters only, so equal elements recur.
    fn edge_item(rng: &mut StdRng, regime: u8) -> Vec<u8> {
        // An entry of n >= 128 bytes takes n + 10.
        let fills_block = BLOCK_BYTES - 10;
        let n = match (regime, rng.gen_range(0..10)) {
            (0, _) => rng.gen_range(0..6),
            (1, _) => rng.gen_range(120..136),
            (2, k) if k < 7 => fills_block - 1 + rng.gen_range(0..3),
            (2, _) => fills_block + BLOCK_BYTES - 1 + rng.gen_range(0..3),
            (_, 0..=3) => rng.gen_range(0..4),
            (_, 4..=5) => rng.gen_range(125..131),
            (_, 6..=7) => rng.gen_range(500..1500),
            (_, 8) => fills_block - 1 + rng.gen_range(0..3),
            (_, _) => rng.gen_range(BLOCK_BYTES..3 * BLOCK_BYTES),
        };
        vec![if rng.gen_bool(0.5) { b'a' } else { b'b' }; n]
    }

    /// Walks lists of tiny, length-edge, block-sized and mixed elements to
    /// target lengths and back, with every mutation (both ends, the
    /// middle, truncations, LREM in both directions) and reads by index,
    /// ranges and iterators consumed from both ends at once; the blocks and
    /// contents must match a `VecDeque` after every step.
    #[test]
    fn hovers_around_block_edges_as_a_deque() {
        for seed in seeds(40) {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut l = ListValue::new();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            for _phase in 0..12 {
                let regime = rng.gen_range(0..4u8);
                let target: usize = match regime {
                    0 => rng.gen_range(0..2500),
                    1 => rng.gen_range(0..200),
                    _ => rng.gen_range(0..12),
                };
                let steps = target.abs_diff(model.len()) + rng.gen_range(50..200);
                for _ in 0..steps {
                    let len = model.len();
                    let grow = (len < target) == rng.gen_bool(0.8);
                    match rng.gen_range(0..100) {
                        0..=1 => {
                            let n = rng.gen_range(0..=len + 1);
                            l.truncate(n);
                            model.truncate(n);
                        }
                        2..=3 => {
                            let n = rng.gen_range(0..=len / 3 + 1);
                            l.remove_front(n);
                            model.drain(..n.min(len));
                        }
                        4..=6 => {
                            let it = edge_item(&mut rng, regime);
                            let count = [-2, -1, 0, 1, 2, 100, -100][rng.gen_range(0..7)];
                            let want = model_remove(&mut model, count, &it);
                            assert_eq!(l.remove_matching(count, &it), want);
                        }
                        7 if rng.gen_bool(0.1) => {
                            l.clear();
                            model.clear();
                        }
                        8..=12 => {
                            let i = rng.gen_range(0..len + 2);
                            let it = edge_item(&mut rng, regime);
                            assert_eq!(l.set(i, &it), i < len);
                            if i < len {
                                model[i] = it;
                            }
                        }
                        _ if grow => {
                            let it = edge_item(&mut rng, regime);
                            match rng.gen_range(0..3) {
                                0 => {
                                    l.push_back(&it);
                                    model.push_back(it);
                                }
                                1 => {
                                    l.push_front(&it);
                                    model.push_front(it);
                                }
                                _ => {
                                    let i = rng.gen_range(0..=len);
                                    l.insert(i, &it);
                                    model.insert(i, it);
                                }
                            }
                        }
                        _ => match rng.gen_range(0..3) {
                            0 => assert_eq!(l.pop_front(), model.pop_front().is_some()),
                            1 => assert_eq!(l.pop_back(), model.pop_back().is_some()),
                            _ => {
                                let i = rng.gen_range(0..len + 1);
                                assert_eq!(l.remove(i), model.remove(i).is_some());
                            }
                        },
                    }
                    check(&l, &model);
                    let len = model.len();
                    let i = rng.gen_range(0..len + 2);
                    assert_eq!(l.get(i), model.get(i).map(|v| &v[..]));
                    if len > 0 {
                        let s = rng.gen_range(0..len);
                        let e = rng.gen_range(s..len);
                        // Alternating ends meet in the middle exactly once.
                        let mut ours = l.range(s, e);
                        let mut want = model.range(s..=e).map(|v| &v[..]);
                        assert_eq!(ours.len(), e - s + 1);
                        loop {
                            let (a, b) = if rng.gen_bool(0.5) {
                                (ours.next(), want.next())
                            } else {
                                (ours.next_back(), want.next_back())
                            };
                            assert_eq!(a, b);
                            if a.is_none() {
                                break;
                            }
                        }
                        assert_eq!(l.range(e, s).count(), usize::from(s == e));
                    }
                    assert_eq!(l.range(0, len).count(), 0);
                }
            }
            let copy: ListValue = model.iter().collect();
            assert_eq!(copy, l);
        }
    }

    /// A list of many blocks, with elements of every length class, is
    /// logged and checkpointed element by element and comes back equal.
    #[test]
    fn round_trips_through_the_value_codec() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut l = ListValue::new();
        for _ in 0..5000 {
            let it = item(&mut rng);
            if rng.gen_bool(0.5) {
                l.push_back(&it);
            } else {
                l.push_front(&it);
            }
        }
        assert!(l.blocks.len() > 10);
        let v = crate::value::Value::List(std::sync::Arc::new(l));
        let mut out = Vec::new();
        crate::codec::encode_value(&v, &mut out);
        let back = crate::codec::decode_value(&mut crate::codec::Reader::new(&out)).unwrap();
        assert_eq!(back, v);
    }

    /// What the layout is for: a short element costs its bytes and two.
    #[test]
    fn a_short_element_costs_two_bytes_more_than_itself() {
        let l: ListValue = (0..100_000).map(|i| format!("{i:016}")).collect();
        let per = l.heap_bytes() as f64 / l.len() as f64;
        assert!(per < 18.5, "{per} bytes per 16-byte element");
    }
}
