//! Recency-skewed record numbers (YCSB's `SkewedLatestGenerator`,
//! `requestdistribution=latest`): a Zipfian offset back from the newest
//! acknowledged insert, so freshly inserted records are the most popular.

use super::{AcknowledgedCounter, BenchRng, Zipfian};
use std::sync::Arc;

pub struct SkewedLatest {
    basis: Arc<AcknowledgedCounter>,
    zipfian: Zipfian,
}

impl SkewedLatest {
    pub fn new(basis: Arc<AcknowledgedCounter>) -> Self {
        let items = basis.last_value().max(1);
        SkewedLatest {
            zipfian: Zipfian::new(0, items - 1),
            basis,
        }
    }

    pub fn next(&self, rng: &mut BenchRng) -> i64 {
        let max = self.basis.last_value();
        if max <= 0 {
            return 0;
        }
        max - self.zipfian.next_long(max, rng)
    }
}
