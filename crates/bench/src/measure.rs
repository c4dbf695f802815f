//! Latency and outcome accounting with HdrHistograms.
//!
//! Every client records into the shard of the OS thread it runs on, so the
//! hot path takes an uncontended lock; the status reporter periodically
//! drains all shards (interval figures for `-s` lines) and accumulates the
//! drained intervals into the run's totals, the same interval/total split
//! YCSB's HdrHistogram measurement uses. Histograms resize on demand, so
//! memory grows with the latencies actually seen rather than with the
//! number of clients.

use crate::db::Status;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// Significant decimal digits kept by every histogram (YCSB uses 3).
pub const HISTOGRAM_SIGFIGS: u8 = 3;

/// The measured series, in the order the report prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
    Delete,
    Cleanup,
}

pub const OP_KINDS: [OpKind; 7] = [
    OpKind::Read,
    OpKind::Update,
    OpKind::Insert,
    OpKind::Scan,
    OpKind::ReadModifyWrite,
    OpKind::Delete,
    OpKind::Cleanup,
];

impl OpKind {
    /// YCSB's measurement name.
    pub fn label(self) -> &'static str {
        match self {
            OpKind::Read => "READ",
            OpKind::Update => "UPDATE",
            OpKind::Insert => "INSERT",
            OpKind::Scan => "SCAN",
            OpKind::ReadModifyWrite => "READ-MODIFY-WRITE",
            OpKind::Delete => "DELETE",
            OpKind::Cleanup => "CLEANUP",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn from_label(s: &str) -> Option<OpKind> {
        OP_KINDS.iter().copied().find(|k| k.label() == s)
    }

    /// Whether the operation changes data (for "avg write" summaries).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            OpKind::Update | OpKind::Insert | OpKind::Delete | OpKind::ReadModifyWrite
        )
    }
}

pub fn new_histogram() -> Histogram<u64> {
    // Starts tiny and auto-resizes; only an invalid precision (outside
    // 0..=5) can fail, and HISTOGRAM_SIGFIGS is a constant inside it.
    #[allow(clippy::expect_used)]
    Histogram::new(HISTOGRAM_SIGFIGS).expect("3 significant figures is a valid precision")
}

fn record_into(slot: &mut Option<Histogram<u64>>, value_us: u64) {
    let h = slot.get_or_insert_with(new_histogram);
    // Auto-resizing histograms only fail for values beyond u64 range.
    let _ = h.record(value_us);
}

fn merge_into(dst: &mut Option<Histogram<u64>>, src: Option<Histogram<u64>>) {
    if let Some(src) = src {
        match dst {
            Some(d) => {
                let _ = d.add(&src);
            }
            None => *dst = Some(src),
        }
    }
}

/// Everything measured for one operation type.
#[derive(Clone, Debug, Default)]
pub struct OpStats {
    /// Latency of successful operations (YCSB's `[READ]` series).
    pub ok: Option<Histogram<u64>>,
    /// Latency of failed operations (YCSB's `[READ-FAILED]` series).
    pub failed: Option<Histogram<u64>>,
    /// Time from actually sending to completion, kept separately when the
    /// main series is measured from intended start times.
    pub service: Option<Histogram<u64>>,
    /// Return-code counts, indexed by [`Status::index`].
    pub status: [u64; 4],
}

impl OpStats {
    pub fn merge(&mut self, other: OpStats) {
        merge_into(&mut self.ok, other.ok);
        merge_into(&mut self.failed, other.failed);
        merge_into(&mut self.service, other.service);
        for (a, b) in self.status.iter_mut().zip(other.status) {
            *a += b;
        }
    }

    pub fn count(&self, s: Status) -> u64 {
        self.status[s.index()]
    }

    pub fn total_count(&self) -> u64 {
        self.status.iter().sum()
    }

    pub fn ok_count(&self) -> u64 {
        self.ok.as_ref().map_or(0, |h| h.len())
    }
}

/// Measurements of all operation types plus operation counters.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub ops: [OpStats; 7],
    /// Top-level operations (transactions) completed and measured.
    pub done_ops: u64,
    /// Operations completed during the warm-up and therefore not measured.
    pub warmup_ops: u64,
}

impl Snapshot {
    pub fn merge(&mut self, other: Snapshot) {
        for (a, b) in self.ops.iter_mut().zip(other.ops) {
            a.merge(b);
        }
        self.done_ops += other.done_ops;
        self.warmup_ops += other.warmup_ops;
    }

    pub fn op(&self, k: OpKind) -> &OpStats {
        &self.ops[k.index()]
    }

    /// All measured latencies of the given kinds in one histogram (for
    /// overall percentiles).
    pub fn combined(&self, pick: impl Fn(OpKind) -> bool) -> Option<Histogram<u64>> {
        let mut out: Option<Histogram<u64>> = None;
        for k in OP_KINDS {
            if k != OpKind::Cleanup && pick(k) {
                merge_into(&mut out, self.ops[k.index()].ok.clone());
                merge_into(&mut out, self.ops[k.index()].failed.clone());
            }
        }
        out
    }
}

/// One lock-protected [`Snapshot`] per OS thread of the run.
pub struct Stats {
    shards: Vec<Mutex<Snapshot>>,
}

impl Stats {
    pub fn new(shards: usize) -> Stats {
        Stats {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(Snapshot::default()))
                .collect(),
        }
    }

    pub fn shard(&self, i: usize) -> &Mutex<Snapshot> {
        &self.shards[i % self.shards.len()]
    }

    /// Takes everything recorded since the previous drain.
    pub fn drain(&self) -> Snapshot {
        let mut out = Snapshot::default();
        for s in &self.shards {
            let taken = std::mem::take(&mut *s.lock());
            out.merge(taken);
        }
        out
    }

    /// Completed operations so far that have not been drained yet.
    pub fn pending_done(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| {
                let g = s.lock();
                g.done_ops + g.warmup_ops
            })
            .sum()
    }
}

/// How one client times its operations.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// Measure from the intended (scheduled) start instead of the actual send
    /// (coordinated-omission correction under `-target`).
    pub from_intended: bool,
    /// Operations that complete before this instant are warm-up.
    pub measure_from: Instant,
}

/// The timing context of one top-level operation.
#[derive(Clone, Copy, Debug)]
pub struct OpTiming {
    pub intended: Instant,
    pub clock: Clock,
}

impl OpTiming {
    /// Records one measured call of kind `kind` that ran `start..end`.
    pub fn record(
        &self,
        shard: &Mutex<Snapshot>,
        kind: OpKind,
        status: Status,
        start: Instant,
        end: Instant,
    ) {
        if end < self.clock.measure_from {
            return;
        }
        let service = micros(end.saturating_duration_since(start));
        let latency = if self.clock.from_intended {
            micros(end.saturating_duration_since(self.intended))
        } else {
            service
        };
        let mut g = shard.lock();
        let op = &mut g.ops[kind.index()];
        op.status[status.index()] += 1;
        if status.is_ok() {
            record_into(&mut op.ok, latency);
        } else {
            record_into(&mut op.failed, latency);
        }
        if self.clock.from_intended {
            record_into(&mut op.service, service);
        }
    }

    /// Counts a status without a latency (rows of a failed batch).
    pub fn record_status_only(
        &self,
        shard: &Mutex<Snapshot>,
        kind: OpKind,
        status: Status,
        n: u64,
    ) {
        if n > 0 {
            shard.lock().ops[kind.index()].status[status.index()] += n;
        }
    }

    /// Counts one completed top-level operation.
    pub fn finish(&self, shard: &Mutex<Snapshot>, end: Instant) {
        let mut g = shard.lock();
        if end < self.clock.measure_from {
            g.warmup_ops += 1;
        } else {
            g.done_ops += 1;
        }
    }
}

pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_intervals_and_merges() {
        let stats = Stats::new(2);
        let now = Instant::now();
        let clock = Clock {
            from_intended: false,
            measure_from: now,
        };
        let t = OpTiming {
            intended: now,
            clock,
        };
        t.record(
            stats.shard(0),
            OpKind::Read,
            Status::Ok,
            now,
            now + Duration::from_micros(100),
        );
        t.record(
            stats.shard(1),
            OpKind::Read,
            Status::Error,
            now,
            now + Duration::from_micros(50),
        );
        t.finish(stats.shard(0), now + Duration::from_micros(100));
        let a = stats.drain();
        assert_eq!(a.op(OpKind::Read).count(Status::Ok), 1);
        assert_eq!(a.op(OpKind::Read).count(Status::Error), 1);
        assert_eq!(a.op(OpKind::Read).ok_count(), 1);
        assert_eq!(a.done_ops, 1);
        let b = stats.drain();
        assert_eq!(b.op(OpKind::Read).total_count(), 0);
    }

    #[test]
    fn intended_start_is_charged() {
        let stats = Stats::new(1);
        let now = Instant::now();
        let t = OpTiming {
            intended: now,
            clock: Clock {
                from_intended: true,
                measure_from: now,
            },
        };
        let start = now + Duration::from_millis(5);
        t.record(
            stats.shard(0),
            OpKind::Update,
            Status::Ok,
            start,
            start + Duration::from_micros(100),
        );
        let s = stats.drain();
        let u = s.op(OpKind::Update);
        assert!(u.ok.as_ref().map_or(0, |h| h.max()) >= 5_000);
        assert!(u.service.as_ref().map_or(u64::MAX, |h| h.max()) < 1_000);
    }
}
