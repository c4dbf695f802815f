//! Uniformly distributed integers in an inclusive range (YCSB's
//! `UniformLongGenerator`), used for `requestdistribution=uniform`, field
//! choice and uniform field/scan lengths.

use super::BenchRng;
use rand::Rng;

#[derive(Clone, Debug)]
pub struct UniformLong {
    lb: i64,
    ub: i64,
}

impl UniformLong {
    /// Both bounds are inclusive; a reversed range is normalised rather than
    /// panicking, because it comes from user-supplied properties.
    pub fn new(lb: i64, ub: i64) -> Self {
        if lb <= ub {
            UniformLong { lb, ub }
        } else {
            UniformLong { lb: ub, ub: lb }
        }
    }

    pub fn next(&self, rng: &mut BenchRng) -> i64 {
        rng.gen_range(self.lb..=self.ub)
    }
}
