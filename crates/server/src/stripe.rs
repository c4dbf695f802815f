//! Counters that every command updates, striped by thread.
//!
//! Connections run on several threads at once, and a counter all of them
//! add to lives on one cache line that moves between their cores on every
//! add. A counter here keeps one line per stripe; each thread adds to its
//! own stripe, and readers (INFO, at human rates) sum the stripes.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes per counter. Threads beyond this share stripes, which is still
/// correct, only slower.
pub const STRIPES: usize = 16;

static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without a destructor: safe to touch from inside
    // the global allocator (`crate::memory`).
    static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's stripe, in `0..STRIPES`: threads take stripes in the
/// order they first ask, so the few threads that run commands get their
/// own.
#[inline]
pub fn index() -> usize {
    MINE.try_with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
        s.set(n);
        n
    })
    .unwrap_or(0)
}

/// One stripe's value, alone on its cache line.
#[repr(align(64))]
struct Line(AtomicU64);

/// A counter added to from many threads and read rarely.
pub struct Counter([Line; STRIPES]);

impl Default for Counter {
    fn default() -> Self {
        Counter::new()
    }
}

impl Counter {
    pub const fn new() -> Counter {
        Counter([const { Line(AtomicU64::new(0)) }; STRIPES])
    }

    #[inline]
    pub fn add(&self, n: u64) {
        self.0[index()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// Takes `n` off the total, which must be at least `n` (one stripe may
    /// go below zero; the sum wraps back). Never allocates: the global
    /// allocator calls it (`crate::memory`).
    #[inline]
    pub fn sub(&self, n: u64) {
        self.0[index()].0.fetch_sub(n, Ordering::Relaxed);
    }

    /// The sum over the stripes (adds racing with it may or may not count).
    pub fn get(&self) -> u64 {
        self.0
            .iter()
            .fold(0u64, |sum, l| sum.wrapping_add(l.0.load(Ordering::Relaxed)))
    }

    /// Sets the total (CONFIG RESETSTAT; tests).
    pub fn set(&self, v: u64) {
        for (i, l) in self.0.iter().enumerate() {
            l.0.store(if i == 0 { v } else { 0 }, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_add_up_across_threads() {
        let c = std::sync::Arc::new(Counter::default());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(2);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.get(), 16_000);
        c.sub(15_999);
        assert_eq!(c.get(), 1);
        c.set(5);
        assert_eq!(c.get(), 5);
    }
}
