//! Process memory as the OS sees it (resident set size), sampled rather than
//! computed per command, for `maxmemory` and INFO memory.

use std::sync::atomic::{AtomicU64, Ordering};

static USED_MEMORY_BYTES: AtomicU64 = AtomicU64::new(0);
static PEAK_MEMORY_BYTES: AtomicU64 = AtomicU64::new(0);

/// Reads the current RSS from `/proc/self/statm` (0 where unavailable).
pub fn read_rss_bytes() -> u64 {
    const PAGE_SIZE_BYTES: u64 = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|pages| pages * PAGE_SIZE_BYTES)
        .unwrap_or(0)
}

/// Refreshes the sampled value; called by the server's background task.
pub fn sample() -> u64 {
    let rss = read_rss_bytes();
    USED_MEMORY_BYTES.store(rss, Ordering::Relaxed);
    PEAK_MEMORY_BYTES.fetch_max(rss, Ordering::Relaxed);
    rss
}

pub fn used_memory_bytes() -> u64 {
    let v = USED_MEMORY_BYTES.load(Ordering::Relaxed);
    if v == 0 {
        sample()
    } else {
        v
    }
}

pub fn peak_memory_bytes() -> u64 {
    PEAK_MEMORY_BYTES
        .load(Ordering::Relaxed)
        .max(used_memory_bytes())
}
