//! Redis's LFU access counter: eight bits that grow logarithmically with
//! accesses (`lfu-log-factor`) and lose one per `lfu-decay-time` minutes
//! without access. Counted only while an LFU `maxmemory-policy` is chosen:
//! the parameters are process-wide, so an access costs one relaxed load
//! when LFU is off.

use crate::db::{Access, LFU_INIT};
use std::sync::atomic::{AtomicU32, Ordering};

/// 0 while LFU is off; otherwise `ON | decay_minutes << 8 | log_factor`.
static PARAMS: AtomicU32 = AtomicU32::new(0);
const ON: u32 = 1 << 31;
const FACTOR_BITS: u32 = 8;
const FIELD_MASK: u32 = (1 << 16) - 1;

/// Turns counting on with Redis's `lfu-log-factor` and `lfu-decay-time`
/// (both clamped to the 0..=65535 the packing holds), or off.
pub fn configure(on: bool, log_factor: u32, decay_minutes: u32) {
    let v = if on {
        ON | (decay_minutes.min(FIELD_MASK) << FACTOR_BITS) | log_factor.min(255)
    } else {
        0
    };
    PARAMS.store(v, Ordering::Relaxed);
}

pub fn is_on() -> bool {
    PARAMS.load(Ordering::Relaxed) != 0
}

/// Records an access at `now_s`: decays the counter for the time since the
/// last access, then maybe counts this one.
#[inline]
pub(crate) fn touch(a: &mut Access, now_s: u32) {
    let p = PARAMS.load(Ordering::Relaxed);
    if p != 0 {
        a.freq = log_incr(decay(*a, now_s, p), p & 0xff);
    }
    a.secs = now_s;
}

/// The counter as of `now_s`, decayed (what OBJECT FREQ reports and what
/// eviction compares).
pub fn decayed(a: Access, now_s: u32) -> u8 {
    decay(a, now_s, PARAMS.load(Ordering::Relaxed))
}

fn decay(a: Access, now_s: u32, p: u32) -> u8 {
    let decay_minutes = (p >> FACTOR_BITS) & FIELD_MASK;
    if decay_minutes == 0 {
        return a.freq;
    }
    let periods = a.idle_secs(now_s) / 60 / decay_minutes;
    a.freq.saturating_sub(periods.min(255) as u8)
}

/// Adds one with probability 1 / ((counter - LFU_INIT) * factor + 1), so
/// the counter reaches 255 after about a million accesses at factor 10.
fn log_incr(counter: u8, factor: u32) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = counter.saturating_sub(LFU_INIT) as f64;
    let p = 1.0 / (base * factor as f64 + 1.0);
    if rand::random::<f64>() < p {
        counter + 1
    } else {
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_up_logarithmically_and_decays_per_period() {
        let p = ON | (1 << FACTOR_BITS) | 10;
        let mut c = LFU_INIT;
        for _ in 0..1000 {
            c = log_incr(c, 10);
        }
        assert!(
            c > 10 && c < 40,
            "1000 hits at factor 10 give a modest counter: {c}"
        );
        let a = Access {
            secs: 1000,
            freq: 20,
        };
        assert_eq!(decay(a, 1000 + 59, p), 20);
        assert_eq!(decay(a, 1000 + 3 * 60, p), 17);
        assert_eq!(decay(a, 1000 + 100 * 60, p), 0);
    }
}
