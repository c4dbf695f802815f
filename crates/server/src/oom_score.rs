//! `oom-score-adj`: the process's Linux OOM score (`/proc/self/oom_score_adj`)
//! set by its role, as Redis sets it, so that under memory pressure the
//! kernel kills a replica before its primary. Applied at start, on CONFIG
//! SET and when the role changes. The score the process had before durakv
//! first set it is put back when the setting is turned off.

use crate::config::{Config, OomScoreAdj};
use crate::state::Shared;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;

const PROC_FILE: &str = "/proc/self/oom_score_adj";

/// The kernel's range for the score.
const SCORE_MIN: i64 = -1000;
const SCORE_MAX: i64 = 1000;

/// The score the process had when durakv took it over; None while durakv
/// has not set it.
static BASE: Mutex<Option<i64>> = Mutex::new(None);

/// The error CONFIG SET answers when the score cannot be written (an
/// unprivileged process lowering it), as Redis words it.
pub const FAILED: &str = "Failed to set current oom_score_adj. Check server logs.";

/// Sets the score for this server's role as `config` says. Err: it could
/// not be read or written (logged); the caller keeps the setting before.
pub fn apply(shared: &Shared, config: &Config) -> Result<(), &'static str> {
    let replica = shared.repl.is_replica.load(Ordering::Acquire);
    apply_for(config, replica)
}

fn apply_for(config: &Config, replica: bool) -> Result<(), &'static str> {
    let mut base = BASE.lock();
    let (score, taking_over) = match (config.oom_score_adj, *base) {
        (OomScoreAdj::No, None) => return Ok(()),
        (OomScoreAdj::No, Some(b)) => (b, false),
        (mode, known) => {
            let b = match known {
                Some(b) => b,
                None => read().map_err(|e| {
                    tracing::warn!("cannot read {PROC_FILE}: {e}");
                    FAILED
                })?,
            };
            let value = i64::from(config.oom_score_adj_values[usize::from(replica)]);
            let score = match mode {
                OomScoreAdj::Relative => b + value,
                _ => value,
            };
            *base = Some(b);
            (score.clamp(SCORE_MIN, SCORE_MAX), known.is_none())
        }
    };
    if let Err(e) = std::fs::write(PROC_FILE, score.to_string()) {
        tracing::warn!("cannot set {PROC_FILE} to {score}: {e}");
        if taking_over {
            // Nothing was changed, so nothing is to be restored.
            *base = None;
        }
        return Err(FAILED);
    }
    if config.oom_score_adj == OomScoreAdj::No {
        *base = None;
    }
    Ok(())
}

fn read() -> std::io::Result<i64> {
    std::fs::read_to_string(PROC_FILE)?
        .trim()
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
