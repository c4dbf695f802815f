//! Record numbers in order, wrapping at the end of the range (YCSB's
//! `SequentialGenerator`, `requestdistribution=sequential`). The position is
//! shared by all connections so together they sweep the keyspace once per
//! lap, as YCSB's threads do.

use std::sync::atomic::{AtomicI64, Ordering};

#[derive(Debug)]
pub struct Sequential {
    start: i64,
    interval: i64,
    counter: AtomicI64,
}

impl Sequential {
    pub fn new(start: i64, end_inclusive: i64) -> Self {
        Sequential {
            start,
            interval: (end_inclusive - start + 1).max(1),
            counter: AtomicI64::new(0),
        }
    }

    pub fn next(&self) -> i64 {
        self.start + self.counter.fetch_add(1, Ordering::Relaxed) % self.interval
    }
}
