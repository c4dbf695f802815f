//! A vector kept in fixed-size chunks, for the key maps' entries.
//!
//! A `Vec` doubles when full, so between two doublings a quarter to a half
//! of it is unused, and each doubling copies every element into a new
//! block while the allocator may keep the old one. Those empty slots count
//! in `used_memory`, and so towards `maxmemory`: with 48-byte entries and
//! 128-byte values they were about 30 of 215 bytes per key. A doubling
//! near the limit also jumped past it at once. Here only the first chunk
//! grows by doubling, up to [`CHUNK`] elements; every later chunk is
//! allocated at its full size once and never moves, so at most one chunk
//! per map is partly empty.
//!
//! Positions are as in a `Vec`: element `i` is in chunk `i / CHUNK`, and
//! [`Chunked::swap_remove`] moves the last element into the hole.

use std::ops::{Index, IndexMut};

const SHIFT: u32 = 8;
/// Elements per chunk: a chunk of key map entries is 12 KiB, small beside
/// a shard's data yet large enough that the table of chunks stays short.
pub const CHUNK: usize = 1 << SHIFT;
const MASK: usize = CHUNK - 1;

pub struct Chunked<T> {
    /// Element `i` is in chunk `i / CHUNK`, so every chunk before the one
    /// holding the last element is full. One empty chunk may follow it:
    /// the last one emptied by removals is kept, so that a map whose size
    /// hovers at a chunk boundary does not allocate and free a chunk at
    /// each insertion and removal.
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Clone> Clone for Chunked<T> {
    fn clone(&self) -> Self {
        Chunked {
            chunks: self
                .chunks
                .iter()
                .filter(|c| !c.is_empty())
                .cloned()
                .collect(),
            len: self.len,
        }
    }
}

impl<T> Chunked<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements it holds room for without allocating.
    pub fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> SHIFT)?.get(i & MASK)
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks.get_mut(i >> SHIFT)?.get_mut(i & MASK)
    }

    /// Appends `value`. The first chunk doubles until it reaches
    /// [`CHUNK`]; later chunks are allocated whole.
    pub fn push(&mut self, value: T) {
        let i = self.len;
        if i & MASK == 0 && self.chunks.len() == i >> SHIFT {
            let cap = if i == 0 { 4 } else { CHUNK };
            self.chunks.push(Vec::with_capacity(cap));
        } else {
            let chunk = &mut self.chunks[i >> SHIFT];
            if chunk.len() == chunk.capacity() {
                // Double, by at least 4, never past CHUNK: a first chunk
                // shrunk to a few short of CHUNK has less than 4 to go.
                let more = chunk.len().max(4).min(CHUNK - chunk.len());
                chunk.reserve_exact(more);
            }
        }
        self.chunks[i >> SHIFT].push(value);
        self.len += 1;
    }

    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        let at = self.len >> SHIFT;
        let v = self.chunks[at].pop();
        if self.chunks[at].is_empty() {
            // This chunk becomes the spare; an older spare goes.
            self.chunks.truncate(at + 1);
        }
        v
    }

    /// Removes element `i`, moving the last element into its place; None
    /// if there is no element `i`.
    pub fn swap_remove(&mut self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let last = self.pop()?;
        Some(if i == self.len {
            last
        } else {
            std::mem::replace(&mut self[i], last)
        })
    }

    /// Room for `additional` more elements. Only the first chunk is
    /// allocated ahead (up to [`CHUNK`]); later chunks are allocated whole
    /// when reached, which wastes nothing.
    pub fn reserve(&mut self, additional: usize) {
        let want = self.len.saturating_add(additional);
        if self.len < CHUNK {
            if self.chunks.is_empty() {
                self.chunks.push(Vec::new());
            }
            let first = &mut self.chunks[0];
            if want.min(CHUNK) > first.capacity() {
                first.reserve_exact(want.min(CHUNK) - first.len());
            }
        }
        self.chunks
            .reserve(want.div_ceil(CHUNK).saturating_sub(self.chunks.len()));
    }

    /// Gives back room beyond `max(len, min)` elements: emptied chunks,
    /// and the first chunk's slack while it is the only one.
    pub fn shrink_to(&mut self, min: usize) {
        let keep_chunks = self.len.max(min).div_ceil(CHUNK);
        while self.chunks.len() > keep_chunks.max(1)
            && self.chunks.last().is_some_and(Vec::is_empty)
        {
            self.chunks.pop();
        }
        if self.chunks.len() == 1 {
            self.chunks[0].shrink_to(min.min(CHUNK));
        }
        self.chunks.shrink_to(keep_chunks);
    }

    /// Keeps the elements `keep` accepts, in their order.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let old = std::mem::take(self);
        for v in old {
            if keep(&v) {
                self.push(v);
            }
        }
    }

    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            chunks: self.chunks.iter(),
            chunk: [].iter(),
            left: self.len,
        }
    }

    /// Bytes allocated for the elements and the table of chunks.
    pub fn allocated_bytes(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<T>>()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> SHIFT][i & MASK]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> SHIFT][i & MASK]
    }
}

/// The elements in position order.
pub struct Iter<'a, T> {
    chunks: std::slice::Iter<'a, Vec<T>>,
    chunk: std::slice::Iter<'a, T>,
    left: usize,
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        loop {
            if let Some(v) = self.chunk.next() {
                self.left -= 1;
                return Some(v);
            }
            self.chunk = self.chunks.next()?.iter();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

impl<T> IntoIterator for Chunked<T> {
    type Item = T;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<T>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.chunks.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_seeds::seeds;
    use rand::{Rng, SeedableRng};

    #[test]
    fn a_first_chunk_shrunk_near_full_grows_to_chunk() {
        for len in CHUNK - 5..CHUNK {
            let mut v = Chunked::default();
            for i in 0..len {
                v.push(i);
            }
            v.shrink_to(0);
            v.push(len);
            v.push(len + 1);
            assert_eq!(v.len(), len + 2);
            assert!((0..len + 2).all(|i| v[i] == i));
        }
    }

    /// Random pushes, pops, swap-removes, reserves and shrinks keep it
    /// equal to a `Vec` given the same operations.
    #[test]
    fn behaves_as_a_vec() {
        for seed in 0..20u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut ours: Chunked<u64> = Chunked::default();
            let mut model: Vec<u64> = Vec::new();
            // Long runs of one kind cross chunk boundaries both ways.
            let mut bias = 5;
            for step in 0..30_000u64 {
                if step % 2_000 == 0 {
                    bias = rng.gen_range(2..9);
                }
                match rng.gen_range(0..10) {
                    n if n < bias => {
                        ours.push(step);
                        model.push(step);
                    }
                    9 if rng.gen_range(0..20) == 0 => {
                        let min = rng.gen_range(0..600);
                        ours.shrink_to(min);
                        assert!(ours.capacity() >= model.len());
                    }
                    9 => {
                        let n = rng.gen_range(0..700);
                        ours.reserve(n);
                        assert!(ours.capacity() >= model.len().min(CHUNK));
                    }
                    _ if !model.is_empty() && rng.gen_bool(0.5) => {
                        let i = rng.gen_range(0..model.len());
                        assert_eq!(ours.swap_remove(i), Some(model.swap_remove(i)));
                    }
                    _ => {
                        assert_eq!(ours.pop(), model.pop());
                        assert_eq!(ours.swap_remove(model.len()), None);
                    }
                }
                assert_eq!(ours.len(), model.len());
                if step % 97 == 0 {
                    assert!(ours.iter().eq(model.iter()));
                    assert_eq!(ours.iter().len(), model.len());
                    assert_eq!(ours.get(model.len()), None);
                }
            }
            for (i, v) in model.iter().enumerate() {
                assert_eq!(ours.get(i), Some(v));
                assert_eq!(ours[i], *v);
            }
            let cloned = ours.clone();
            assert!(cloned.iter().eq(model.iter()));
            let mut kept = ours.clone();
            kept.retain(|v| v % 3 == 0);
            assert!(kept
                .iter()
                .copied()
                .eq(model.iter().copied().filter(|v| v % 3 == 0)));
            assert!(ours.into_iter().eq(model.into_iter()));
        }
    }

    /// The point of it: past the first chunk, what is allocated exceeds
    /// what is held by less than one chunk, whatever the length.
    #[test]
    fn room_beyond_the_elements_stays_under_one_chunk() {
        let mut c: Chunked<[u8; 48]> = Chunked::default();
        for n in 1..=20_000usize {
            c.push([0; 48]);
            assert!(c.capacity() - n < CHUNK, "{} for {n}", c.capacity());
        }
        // Removals keep at most one emptied chunk, and a size hovering at
        // a boundary reuses it instead of allocating again.
        for _ in 0..(3 * CHUNK + 10) {
            c.pop();
        }
        let len = c.len();
        assert!(c.capacity() - len < 2 * CHUNK, "{} for {len}", c.capacity());
        let before = c.capacity();
        for _ in 0..5 {
            c.push([1; 48]);
            c.pop();
        }
        assert_eq!(c.capacity(), before);
        c.shrink_to(0);
        assert!(c.capacity() - c.len() < CHUNK);
    }

    /// The layout every operation must leave: full chunks up to the last
    /// element, then at most one empty spare.
    fn check_shape<T: PartialEq + std::fmt::Debug>(ours: &Chunked<T>, model: &[T]) {
        let full = model.len() >> SHIFT;
        for (k, c) in ours.chunks.iter().enumerate() {
            let want = match k.cmp(&full) {
                std::cmp::Ordering::Less => CHUNK,
                std::cmp::Ordering::Equal => model.len() & MASK,
                std::cmp::Ordering::Greater => 0,
            };
            assert_eq!(
                c.len(),
                want,
                "chunk {k} of {} for {}",
                ours.chunks.len(),
                model.len()
            );
            assert!(c.capacity() >= c.len());
        }
        let tail = ours.chunks.len().saturating_sub(full + 1);
        assert!(tail <= 1, "{tail} chunks past the last element");
        assert_eq!(ours.len(), model.len());
        assert!(ours.capacity() >= model.len());
        assert!(ours.iter().eq(model.iter()));
        assert_eq!(ours.iter().len(), model.len());
        assert_eq!(ours.get(model.len()), None);
    }

    /// A length near a chunk boundary (or near zero), where the first
    /// chunk's doubling, the spare chunk and shrinking all change course.
    fn boundary_len(rng: &mut rand::rngs::StdRng) -> usize {
        let k = rng.gen_range(0..5usize);
        (k * CHUNK).saturating_add_signed(rng.gen_range(-6isize..=6))
    }

    /// Walks the length to targets at and around every chunk boundary, up
    /// and down and up again, with reserves and shrinks aimed at the same
    /// boundaries, clones taken midway, and retains, swap-removes and pops
    /// in between; the layout and contents must match a `Vec` after every
    /// step.
    #[test]
    fn hovers_at_every_chunk_boundary_as_a_vec() {
        for seed in seeds(60) {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut ours: Chunked<u64> = Chunked::default();
            let mut model: Vec<u64> = Vec::new();
            let mut next = 0u64;
            for _phase in 0..40 {
                let target = if rng.gen_bool(0.8) {
                    boundary_len(&mut rng)
                } else {
                    rng.gen_range(0..5 * CHUNK)
                };
                let steps = target.abs_diff(model.len()) + rng.gen_range(0..40);
                for _ in 0..steps {
                    let grow = if model.len() == target {
                        rng.gen_bool(0.5)
                    } else {
                        (model.len() < target) == rng.gen_bool(0.85)
                    };
                    match rng.gen_range(0..100) {
                        0..=2 => {
                            let min = if rng.gen_bool(0.5) {
                                boundary_len(&mut rng)
                            } else {
                                rng.gen_range(0..=model.len() + 8)
                            };
                            ours.shrink_to(min);
                        }
                        3..=5 => {
                            let to = boundary_len(&mut rng);
                            let extra = if rng.gen_bool(0.8) {
                                to.saturating_sub(model.len())
                            } else {
                                rng.gen_range(0..8)
                            };
                            ours.reserve(extra);
                            assert!(ours.capacity() >= (model.len() + extra).min(CHUNK));
                        }
                        6 => {
                            ours = ours.clone();
                        }
                        7 if rng.gen_bool(0.3) => {
                            let modulus = rng.gen_range(1..6);
                            let rest = rng.gen_range(0..modulus);
                            ours.retain(|v| v % modulus != rest);
                            model.retain(|v| v % modulus != rest);
                        }
                        _ if grow => {
                            ours.push(next);
                            model.push(next);
                            next += 1;
                        }
                        _ if !model.is_empty() && rng.gen_bool(0.4) => {
                            let i = rng.gen_range(0..model.len());
                            assert_eq!(ours.swap_remove(i), Some(model.swap_remove(i)));
                        }
                        _ => {
                            assert_eq!(ours.pop(), model.pop());
                        }
                    }
                    check_shape(&ours, &model);
                    if let Some(i) = (!model.is_empty()).then(|| rng.gen_range(0..model.len())) {
                        ours[i] += 1;
                        model[i] += 1;
                        assert_eq!(ours.get_mut(i).copied(), Some(model[i]));
                    }
                }
            }
            assert!(ours.into_iter().eq(model.into_iter()));
        }
    }

    #[test]
    fn a_small_one_doubles_its_first_chunk() {
        let mut c: Chunked<u32> = Chunked::default();
        let mut caps = Vec::new();
        for n in 0..(CHUNK as u32 + 1) {
            c.push(n);
            if caps.last() != Some(&c.capacity()) {
                caps.push(c.capacity());
            }
        }
        assert_eq!(caps, [4, 8, 16, 32, 64, 128, 256, 512]);
        let mut r: Chunked<u32> = Chunked::default();
        r.reserve(10);
        assert_eq!(r.capacity(), 10);
        r.reserve(10_000);
        assert_eq!(r.capacity(), CHUNK);
        r.shrink_to(3);
        assert_eq!(r.capacity(), 3);
    }
}
