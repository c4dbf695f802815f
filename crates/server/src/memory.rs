//! Memory in use, for `maxmemory` and INFO memory: the bytes the process
//! has allocated and not freed, as counted by the binary's global allocator
//! through [`note_alloc`]/[`note_free`] (what Redis's zmalloc counts);
//! without that allocator (embedded use), the resident set size sampled by
//! the background task.

use crate::stripe::Counter;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes allocated and not freed, striped by thread (`crate::stripe`) so
/// threads allocating at once do not contend on one counter. A stripe goes
/// below zero when its threads free what others allocated; the sum does
/// not.
static ALLOCATED: Counter = Counter::new();

/// Called by the global allocator for every allocation of `bytes`.
#[inline]
pub fn note_alloc(bytes: usize) {
    ALLOCATED.add(bytes as u64);
}

/// Called by the global allocator for every release of `bytes`.
#[inline]
pub fn note_free(bytes: usize) {
    ALLOCATED.sub(bytes as u64);
}

/// Bytes allocated and not freed, if the counting allocator is installed
/// (a live process always holds some, so 0 means it is not).
pub fn counted_bytes() -> Option<u64> {
    let sum = ALLOCATED.get() as i64;
    (sum > 0).then_some(sum as u64)
}

/// [`counted_bytes`], 0 without the counting allocator: the engine's
/// `StoreConfig::memory_probe`.
pub fn counted_or_zero() -> u64 {
    counted_bytes().unwrap_or(0)
}

static USED_MEMORY_BYTES: AtomicU64 = AtomicU64::new(0);
static PEAK_MEMORY_BYTES: AtomicU64 = AtomicU64::new(0);
static STARTUP_MEMORY_BYTES: AtomicU64 = AtomicU64::new(0);

/// Records the memory in use now as Redis's `used_memory_startup`, before
/// the data directory is opened; `memory_breakdown::note_startup` raises
/// it to what the server holds for itself once it is ready to serve.
pub fn note_startup() {
    set_startup_memory_bytes(used_memory_bytes());
}

pub fn set_startup_memory_bytes(bytes: u64) {
    STARTUP_MEMORY_BYTES.store(bytes, Ordering::Relaxed);
}

/// See [`note_startup`] (0 if it was never called).
pub fn startup_memory_bytes() -> u64 {
    STARTUP_MEMORY_BYTES.load(Ordering::Relaxed)
}

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

/// What the binary's allocator does to give freed memory back to the
/// system (see [`set_release_hook`]).
static RELEASE_HOOK: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Installs `f`, run about once a second by the server's background task
/// to return freed memory to the system. mimalloc only returns it (after
/// its purge delay) when the allocator is called again, so a server that
/// went idle after a FLUSHALL kept its whole resident set.
pub fn set_release_hook(f: fn()) {
    let _ = RELEASE_HOOK.set(f);
}

/// What the binary's allocator reports of itself: Redis's `allocator_*`
/// figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocatorStats {
    /// Memory the allocator has in pages it uses (`allocator_active`).
    pub active: u64,
    /// Memory of the allocator that is resident (`allocator_resident`).
    pub resident: u64,
}

struct Allocator {
    name: String,
    stats: fn() -> AllocatorStats,
}

static ALLOCATOR: std::sync::OnceLock<Allocator> = std::sync::OnceLock::new();

/// Names the binary's allocator (INFO's `mem_allocator`) and how to read
/// its figures.
pub fn set_allocator(name: String, stats: fn() -> AllocatorStats) {
    let _ = ALLOCATOR.set(Allocator { name, stats });
}

/// INFO's `mem_allocator`: the system's malloc unless the binary named
/// another.
pub fn allocator_name() -> &'static str {
    ALLOCATOR.get().map_or("libc", |a| a.name.as_str())
}

/// The allocator's figures, if the binary installed a way to read them.
pub fn allocator_stats() -> Option<AllocatorStats> {
    ALLOCATOR.get().map(|a| (a.stats)())
}

/// Runs the release hook, if the binary installed one.
pub fn release_freed() {
    if let Some(f) = RELEASE_HOOK.get() {
        f();
    }
}

/// Refreshes the sampled value; called by the server's background task.
pub fn sample() -> u64 {
    let used = counted_bytes().unwrap_or_else(read_rss_bytes);
    USED_MEMORY_BYTES.store(used, Ordering::Relaxed);
    PEAK_MEMORY_BYTES.fetch_max(used, Ordering::Relaxed);
    used
}

/// Memory in use now (see the module comment).
pub fn used_memory_bytes() -> u64 {
    if let Some(n) = counted_bytes() {
        return n;
    }
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

/// Turns transparent huge pages off for this process (Redis's
/// `disable-thp`). mimalloc advises huge pages on the arenas it reserves;
/// with the kernel in `madvise` mode, a touched page then makes 2 MiB
/// resident, which cost about a fifth of the resident set per record in a
/// bulk load. Faults after this call get normal pages.
pub fn disable_thp() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and
        // changes nothing but the process's THP flag.
        let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if r != 0 {
            tracing::warn!(
                "could not disable transparent huge pages: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}
