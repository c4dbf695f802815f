//! Weighted choice among a few values (YCSB's `DiscreteGenerator`), used to
//! pick the next operation from the `*proportion` properties.

use super::BenchRng;
use rand::Rng;

#[derive(Clone, Debug)]
pub struct Discrete<T: Copy> {
    values: Vec<(f64, T)>,
    sum: f64,
}

impl<T: Copy> Discrete<T> {
    pub fn new() -> Self {
        Discrete {
            values: Vec::new(),
            sum: 0.0,
        }
    }

    pub fn add(&mut self, weight: f64, value: T) {
        self.values.push((weight, value));
        self.sum += weight;
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `None` only when no value has a positive weight.
    pub fn next(&self, rng: &mut BenchRng) -> Option<T> {
        let mut val: f64 = rng.gen();
        for (w, v) in &self.values {
            let p = w / self.sum;
            if val < p {
                return Some(*v);
            }
            val -= p;
        }
        // Rounding can leave `val` a hair above the last weight.
        self.values.last().map(|(_, v)| *v)
    }
}

impl<T: Copy> Default for Discrete<T> {
    fn default() -> Self {
        Self::new()
    }
}
