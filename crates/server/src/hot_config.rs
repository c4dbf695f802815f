//! Settings that every write consults, copied out of the configuration
//! after each change (`apply_config`). Reading the configuration takes its
//! read lock, whose counter is a cache line every thread writes to: two
//! such reads per write moved that line between the cores running
//! connections on every command. These are plain atomics each thread only
//! reads.

use crate::config::{
    combine_levels, Config, DurabilityPolicy, OutputBufferLimit, SharedOutputLimit,
};
use crate::state::Shared;
use durakv_engine::Durability;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

pub struct HotConfig {
    /// Each database's level (`durability`, `durability-db-N`).
    db_levels: Box<[AtomicU8]>,
    /// `durability-policy strictest`.
    strictest: AtomicBool,
    min_replicas_to_write: AtomicU64,
    min_replicas_max_lag: AtomicU64,
    /// `client-output-buffer-limit`, by class (`config::OUTPUT_CLASSES`).
    output_limits: [SharedOutputLimit; 3],
}

const LEVELS: [Durability; 4] = [
    Durability::Full,
    Durability::Delayed,
    Durability::None,
    Durability::Replicated,
];

fn code(l: Durability) -> u8 {
    LEVELS.iter().position(|&x| x == l).unwrap_or(0) as u8
}

impl HotConfig {
    pub fn new(cfg: &Config) -> HotConfig {
        let hot = HotConfig {
            db_levels: (0..cfg.databases).map(|_| AtomicU8::new(0)).collect(),
            strictest: AtomicBool::new(false),
            min_replicas_to_write: AtomicU64::new(0),
            min_replicas_max_lag: AtomicU64::new(0),
            output_limits: Default::default(),
        };
        hot.refresh(cfg);
        hot
    }

    fn refresh(&self, cfg: &Config) {
        for (db, l) in self.db_levels.iter().enumerate() {
            l.store(code(cfg.db_durability(db)), Ordering::Relaxed);
        }
        self.strictest.store(
            cfg.durability_policy == DurabilityPolicy::Strictest,
            Ordering::Relaxed,
        );
        self.min_replicas_to_write
            .store(cfg.min_replicas_to_write, Ordering::Relaxed);
        self.min_replicas_max_lag
            .store(cfg.min_replicas_max_lag, Ordering::Relaxed);
        for (l, c) in self
            .output_limits
            .iter()
            .zip(cfg.client_output_buffer_limit)
        {
            l.store(c);
        }
    }

    /// `client-output-buffer-limit` of class `class` (an index of
    /// `config::OUTPUT_CLASSES`).
    pub fn output_limit(&self, class: usize) -> OutputBufferLimit {
        self.output_limits[class].load()
    }

    /// As `Config::effective_durability`; None for a database the
    /// configuration does not have.
    pub fn effective_durability(&self, conn: Option<Durability>, db: usize) -> Option<Durability> {
        let level = LEVELS[usize::from(self.db_levels.get(db)?.load(Ordering::Relaxed)) % 4];
        let policy = if self.strictest.load(Ordering::Relaxed) {
            DurabilityPolicy::Strictest
        } else {
            DurabilityPolicy::Connection
        };
        Some(combine_levels(conn, level, policy))
    }

    /// `min-replicas-to-write` and `min-replicas-max-lag`.
    pub fn min_replicas(&self) -> (u64, u64) {
        (
            self.min_replicas_to_write.load(Ordering::Relaxed),
            self.min_replicas_max_lag.load(Ordering::Relaxed),
        )
    }
}

/// Copies the settings out again (after CONFIG SET).
pub fn apply_config(shared: &Shared) {
    shared.hot.refresh(&shared.config.read());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_match_the_configuration() {
        let mut cfg = Config::default();
        cfg.durability_db.insert(3, Durability::None);
        cfg.durability_db.insert(5, Durability::Delayed);
        cfg.min_replicas_to_write = 2;
        cfg.min_replicas_max_lag = 7;
        for policy in [DurabilityPolicy::Connection, DurabilityPolicy::Strictest] {
            cfg.durability_policy = policy;
            let hot = HotConfig::new(&cfg);
            for db in 0..cfg.databases {
                for conn in [None, Some(Durability::None), Some(Durability::Full)] {
                    assert_eq!(
                        hot.effective_durability(conn, db),
                        Some(cfg.effective_durability(conn, db))
                    );
                }
            }
            assert_eq!(hot.effective_durability(None, cfg.databases), None);
        }
        assert_eq!(HotConfig::new(&cfg).min_replicas(), (2, 7));
        cfg.client_output_buffer_limit[1].soft_secs = 9;
        let hot = HotConfig::new(&cfg);
        for (class, l) in cfg.client_output_buffer_limit.iter().enumerate() {
            assert_eq!(hot.output_limit(class), *l);
        }
    }
}
