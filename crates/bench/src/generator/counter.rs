//! Monotonic record counters: the load phase's key sequence (YCSB's
//! `CounterGenerator`) and the run phase's insert sequence whose visible
//! high-water mark only advances over inserts that have completed
//! (`AcknowledgedCounterGenerator`), so reads never target a record that is
//! still being written.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

/// Hands out consecutive numbers to all connections.
#[derive(Debug)]
pub struct Counter {
    next: AtomicI64,
}

impl Counter {
    pub fn new(start: i64) -> Self {
        Counter {
            next: AtomicI64::new(start),
        }
    }

    pub fn next(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// Size of the window of handed-out-but-unacknowledged numbers; YCSB uses
/// 2^20, far more than any number of in-flight inserts.
const WINDOW_SIZE: usize = 1 << 20;
const WINDOW_MASK: i64 = WINDOW_SIZE as i64 - 1;

pub struct AcknowledgedCounter {
    next: AtomicI64,
    /// Highest number below which every number has been acknowledged.
    limit: AtomicI64,
    window: Mutex<Vec<bool>>,
}

impl AcknowledgedCounter {
    pub fn new(start: i64) -> Self {
        AcknowledgedCounter {
            next: AtomicI64::new(start),
            limit: AtomicI64::new(start - 1),
            window: Mutex::new(Vec::new()),
        }
    }

    pub fn next(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The largest record number known to exist (YCSB's `lastValue()`).
    pub fn last_value(&self) -> i64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Marks `value` as inserted and advances the visible limit over any
    /// contiguous run of acknowledged numbers.
    pub fn acknowledge(&self, value: i64) {
        let mut window = self.window.lock();
        if window.is_empty() {
            // Allocated on first insert so read-only workloads pay nothing.
            window.resize(WINDOW_SIZE, false);
        }
        window[(value & WINDOW_MASK) as usize] = true;
        let mut limit = self.limit.load(Ordering::Acquire);
        loop {
            let slot = ((limit + 1) & WINDOW_MASK) as usize;
            if !window[slot] {
                break;
            }
            window[slot] = false;
            limit += 1;
        }
        self.limit.store(limit, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_waits_for_gaps() {
        let c = AcknowledgedCounter::new(10);
        assert_eq!(c.last_value(), 9);
        let a = c.next();
        let b = c.next();
        assert_eq!((a, b), (10, 11));
        c.acknowledge(b);
        assert_eq!(c.last_value(), 9);
        c.acknowledge(a);
        assert_eq!(c.last_value(), 11);
    }
}
