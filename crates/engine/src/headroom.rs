//! How much more the dataset may allocate before `maxmemory`, so that
//! structures growing near the limit grow by a little instead of doubling.
//!
//! A key map's entries double when full. Near the limit that jump, paid at
//! whichever write crossed a power of two, put `used_memory` over
//! `maxmemory` by more than the write itself: a shard of a million keys
//! takes 80 MB more at once, and eviction then removes a million keys'
//! worth in one burst (or, with nothing left it may evict, writes are
//! refused with memory standing over the limit). Redis's dictionaries
//! likewise do not expand when that would go over `maxmemory`.

use std::sync::atomic::{AtomicU64, Ordering};

static HEADROOM: AtomicU64 = AtomicU64::new(u64::MAX);

/// Sets the bytes that may still be allocated before the limit is reached
/// (`u64::MAX` without a limit). The server sets it as it checks memory
/// before each command; kept in steps of 64 KiB (rounded down), so that
/// threads running commands write the shared line only when a step is
/// crossed, not at every allocation.
pub fn set(bytes: u64) {
    let stepped = bytes & !0xFFFF;
    if HEADROOM.load(Ordering::Relaxed) != stepped {
        HEADROOM.store(stepped, Ordering::Relaxed);
    }
}

/// What [`set`] last set.
pub fn get() -> u64 {
    HEADROOM.load(Ordering::Relaxed)
}

/// How many more elements a full vector of `len` elements of `size` bytes
/// should make room for: as many again (doubling), unless that would not
/// fit the headroom, then an eighth (at least one).
pub fn growth(len: usize, size: usize) -> usize {
    growth_within(len, size, get())
}

fn growth_within(len: usize, size: usize, headroom: u64) -> usize {
    let double = len.max(4);
    if (double.saturating_mul(size) as u64) <= headroom {
        double
    } else {
        (len / 8).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_restrained_only_near_the_limit() {
        assert_eq!(growth_within(64, 80, 10_000), 64);
        assert_eq!(growth_within(1000, 80, 10_000), 125);
        assert_eq!(growth_within(4, 10_000, 10_000), 1);
        assert_eq!(growth_within(0, 80, 0), 1);
        assert_eq!(growth_within(1 << 20, 80, u64::MAX), 1 << 20);
    }
}
