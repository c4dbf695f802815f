//! Zipf-distributed integers (YCSB's `ZipfianGenerator` and
//! `ScrambledZipfianGenerator`), the default request distribution of the
//! standard workloads.
//!
//! The algorithm is the one from Gray et al., "Quickly Generating
//! Billion-Record Synthetic Databases" (SIGMOD 1994), as YCSB uses it: the
//! most popular item is `min`, then `min + 1`, and so on. The scrambled
//! variant hashes the drawn rank so the popular records are scattered over
//! the keyspace instead of clustered at its start.

use super::BenchRng;
use crate::keys::fnvhash64;
use parking_lot::RwLock;
use rand::Rng;

/// YCSB's default skew.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// The scrambled generator draws ranks from this many items and folds them
/// onto the real range, so its popularity profile does not depend on the
/// record count; zeta for it is precomputed (YCSB's constants).
pub const SCRAMBLED_ITEM_COUNT: i64 = 10_000_000_000;
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// `sum_{i=st}^{n-1} 1 / (i+1)^theta`, continuing from `initial`.
pub fn zeta_static(st: i64, n: i64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    let mut i = st;
    while i < n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
        i += 1;
    }
    sum
}

#[derive(Clone, Copy, Debug)]
struct ZetaState {
    count_for_zeta: i64,
    zetan: f64,
    eta: f64,
}

pub struct Zipfian {
    base: i64,
    items: i64,
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    half_pow_theta: f64,
    /// Parameters for the constructor's item count: the common case, read
    /// without any synchronisation.
    initial: ZetaState,
    /// Only the `latest` distribution asks for a growing item count; zeta is
    /// then extended incrementally (never recomputed downwards, as YCSB).
    grown: RwLock<ZetaState>,
}

impl Zipfian {
    /// Items `min..=max` with YCSB's default constant.
    pub fn new(min: i64, max: i64) -> Self {
        Self::with_constant(min, max, ZIPFIAN_CONSTANT)
    }

    pub fn with_constant(min: i64, max: i64, theta: f64) -> Self {
        let items = max - min + 1;
        Self::with_zetan(min, max, theta, zeta_static(0, items, theta, 0.0))
    }

    pub fn with_zetan(min: i64, max: i64, theta: f64, zetan: f64) -> Self {
        let items = (max - min + 1).max(1);
        let zeta2theta = zeta_static(0, 2, theta, 0.0);
        let eta = Self::eta(items, theta, zeta2theta, zetan);
        let initial = ZetaState {
            count_for_zeta: items,
            zetan,
            eta,
        };
        Zipfian {
            base: min,
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta,
            half_pow_theta: 0.5f64.powf(theta),
            initial,
            grown: RwLock::new(initial),
        }
    }

    fn eta(items: i64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
    }

    pub fn items(&self) -> i64 {
        self.items
    }

    pub fn next_value(&self, rng: &mut BenchRng) -> i64 {
        self.next_long(self.items, rng)
    }

    /// A draw over `itemcount` items (which may exceed the constructor's).
    pub fn next_long(&self, itemcount: i64, rng: &mut BenchRng) -> i64 {
        let state = if itemcount == self.initial.count_for_zeta {
            self.initial
        } else {
            self.state_for(itemcount)
        };
        let u: f64 = rng.gen();
        let uz = u * state.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + self.half_pow_theta {
            return self.base + 1;
        }
        let spread = (state.eta * u - state.eta + 1.0).powf(self.alpha);
        self.base + (itemcount as f64 * spread) as i64
    }

    fn state_for(&self, itemcount: i64) -> ZetaState {
        let current = *self.grown.read();
        if itemcount <= current.count_for_zeta {
            return current;
        }
        let mut w = self.grown.write();
        if itemcount > w.count_for_zeta {
            w.zetan = zeta_static(w.count_for_zeta, itemcount, self.theta, w.zetan);
            w.count_for_zeta = itemcount;
            // YCSB recomputes eta with the constructor's item count here;
            // kept so the `latest` distribution matches YCSB's.
            w.eta = Self::eta(self.items, self.theta, self.zeta2theta, w.zetan);
        }
        *w
    }
}

pub struct ScrambledZipfian {
    min: i64,
    itemcount: i64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    /// Items `min..=max`, popular ones scattered by hashing.
    pub fn new(min: i64, max: i64) -> Self {
        ScrambledZipfian {
            min,
            itemcount: (max - min + 1).max(1),
            gen: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    pub fn next(&self, rng: &mut BenchRng) -> i64 {
        let rank = self.gen.next_value(rng);
        // Java's `%` keeps the dividend's sign, like Rust's.
        self.min + fnvhash64(rank) % self.itemcount
    }
}
