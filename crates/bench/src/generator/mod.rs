//! Number generators that decide which record, field length, scan length and
//! operation each YCSB request uses.
//!
//! They follow YCSB 0.17's generators one-for-one so that a workload file
//! produces the same access pattern here as in YCSB. Each generator is shared
//! by all connections of a run (`&self` methods, atomics for shared
//! counters) while the randomness comes from the calling connection's own
//! RNG, so connections never contend on a random-number source.

pub mod counter;
pub mod discrete;
pub mod exponential;
pub mod histogram;
pub mod hotspot;
pub mod latest;
pub mod sequential;
pub mod uniform;
pub mod zipfian;

pub use counter::{AcknowledgedCounter, Counter};
pub use discrete::Discrete;
pub use exponential::Exponential;
pub use histogram::HistogramGen;
pub use hotspot::Hotspot;
pub use latest::SkewedLatest;
pub use sequential::Sequential;
pub use uniform::UniformLong;
pub use zipfian::{ScrambledZipfian, Zipfian};

/// The per-connection random source. Small and fast: generating a key or a
/// value must cost far less than the request it feeds.
pub type BenchRng = rand::rngs::SmallRng;

/// A generator of integers (record numbers, lengths) as YCSB's
/// `NumberGenerator`s are used by CoreWorkload.
pub enum IntGen {
    Constant(i64),
    Uniform(UniformLong),
    Zipfian(Zipfian),
    Histogram(HistogramGen),
}

impl IntGen {
    pub fn next(&self, rng: &mut BenchRng) -> i64 {
        match self {
            IntGen::Constant(v) => *v,
            IntGen::Uniform(g) => g.next(rng),
            IntGen::Zipfian(g) => g.next_value(rng),
            IntGen::Histogram(g) => g.next(rng),
        }
    }
}
