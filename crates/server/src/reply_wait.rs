//! How long replies wait for durability: from the moment a reply is ready
//! but held (its write, or a write it reveals, is not yet durable, or a
//! held reply is ahead of it) until it is released to the socket.
//!
//! This is what `full` adds to a client's latency, measured where the
//! client feels it. The fsync histogram only suggests it: a write that
//! arrives while an fsync runs waits for the rest of that one and all of
//! the next, and a busy event loop adds its own delay before it releases
//! what an fsync made durable.

use crate::stripe::Counter;
use durakv_engine::wal::FSYNC_BUCKETS_US;

/// Microseconds on a monotonic clock, from an arbitrary start: a held
/// reply's timestamp, which wall-clock steps must not turn negative.
#[inline]
pub fn now_us() -> u64 {
    crate::util::mono_ns() / 1000
}

/// Held-reply waits by bucket (not cumulative), and their total, striped
/// by thread as the other per-request counters are. The buckets are the
/// fsync histogram's ([`FSYNC_BUCKETS_US`]), so the two read side by
/// side; one more counts the slower waits.
pub struct ReplyWaits {
    buckets: [Counter; FSYNC_BUCKETS_US.len() + 1],
    total_us: Counter,
}

impl Default for ReplyWaits {
    fn default() -> Self {
        ReplyWaits {
            buckets: [const { Counter::new() }; FSYNC_BUCKETS_US.len() + 1],
            total_us: Counter::new(),
        }
    }
}

/// A reading of [`ReplyWaits`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Waits per bucket of [`FSYNC_BUCKETS_US`] plus one past the last
    /// (not cumulative).
    pub buckets: Vec<u64>,
    pub count: u64,
    pub total_us: u64,
}

impl ReplyWaits {
    /// Counts one reply that was held for `us` microseconds.
    #[inline]
    pub fn record(&self, us: u64) {
        self.buckets[FSYNC_BUCKETS_US.partition_point(|&ub| ub < us)].add(1);
        self.total_us.add(us);
    }

    pub fn snapshot(&self) -> Snapshot {
        let buckets: Vec<u64> = self.buckets.iter().map(Counter::get).collect();
        Snapshot {
            count: buckets.iter().sum(),
            buckets,
            total_us: self.total_us.get(),
        }
    }
}

impl Snapshot {
    /// The mean wait in µs (0 before any).
    pub fn avg_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_us as f64 / self.count as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_land_in_the_bucket_their_bound_closes() {
        let w = ReplyWaits::default();
        for us in [0, 50, 51, 900, 3_000_000] {
            w.record(us);
        }
        let s = w.snapshot();
        assert_eq!(s.count, 5);
        assert_eq!(s.total_us, 3_001_001);
        assert_eq!(s.avg_us(), 600_200.2);
        assert_eq!(&s.buckets[..5], &[2, 1, 0, 0, 1]);
        assert_eq!(s.buckets[FSYNC_BUCKETS_US.len()], 1, "past the last bound");
        assert_eq!(s.buckets.len(), FSYNC_BUCKETS_US.len() + 1);
    }

    #[test]
    fn the_clock_does_not_go_back() {
        let a = now_us();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(now_us() >= a + 2_000);
    }
}
