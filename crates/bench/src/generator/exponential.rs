//! Exponentially distributed offsets back from the newest record (YCSB's
//! `ExponentialGenerator`, `requestdistribution=exponential`): `percentile`
//! percent of requests fall within the newest `range` records.

use super::BenchRng;
use rand::Rng;

#[derive(Clone, Debug)]
pub struct Exponential {
    gamma: f64,
}

impl Exponential {
    pub fn new(percentile: f64, range: f64) -> Self {
        Exponential {
            gamma: -(1.0 - percentile / 100.0).ln() / range,
        }
    }

    pub fn next(&self, rng: &mut BenchRng) -> f64 {
        // 1 - u keeps the argument in (0, 1], so ln never sees zero.
        let u: f64 = rng.gen();
        -(1.0 - u).ln() / self.gamma
    }
}
