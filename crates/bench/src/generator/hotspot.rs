//! A hot set / cold set split (YCSB's `HotspotIntegerGenerator`,
//! `requestdistribution=hotspot`): `hot_opn_fraction` of requests go,
//! uniformly, to the lowest `hot_set_fraction` of the range.

use super::BenchRng;
use rand::Rng;

#[derive(Clone, Debug)]
pub struct Hotspot {
    lower: i64,
    hot_interval: i64,
    cold_interval: i64,
    hot_opn_fraction: f64,
}

impl Hotspot {
    /// Out-of-range fractions fall back to 0 as in YCSB; empty hot or cold
    /// sets are tolerated instead of dividing by zero.
    pub fn new(lower: i64, upper: i64, hot_set_fraction: f64, hot_opn_fraction: f64) -> Self {
        let (lower, upper) = if lower <= upper {
            (lower, upper)
        } else {
            (upper, lower)
        };
        let hot_set_fraction = if (0.0..=1.0).contains(&hot_set_fraction) {
            hot_set_fraction
        } else {
            0.0
        };
        let hot_opn_fraction = if (0.0..=1.0).contains(&hot_opn_fraction) {
            hot_opn_fraction
        } else {
            0.0
        };
        let interval = upper - lower + 1;
        let hot_interval = (interval as f64 * hot_set_fraction) as i64;
        Hotspot {
            lower,
            hot_interval,
            cold_interval: interval - hot_interval,
            hot_opn_fraction,
        }
    }

    pub fn next(&self, rng: &mut BenchRng) -> i64 {
        let hot = rng.gen::<f64>() < self.hot_opn_fraction;
        if (hot && self.hot_interval > 0) || self.cold_interval <= 0 {
            self.lower + rng.gen_range(0..self.hot_interval.max(1))
        } else {
            self.lower + self.hot_interval + rng.gen_range(0..self.cold_interval)
        }
    }
}
