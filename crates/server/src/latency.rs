//! The latency monitor (LATENCY LATEST, HISTORY, RESET, GRAPH, DOCTOR):
//! events that took at least `latency-monitor-threshold` milliseconds,
//! kept per event as Redis keeps them, one sample per second (the worst
//! of that second) for the last 160 seconds that had one, and the worst
//! ever seen since the event was last reset.
//!
//! Events: `command` and `fast-command` (a command that ran that long,
//! by its `fast` flag, as Redis names them) and `expire-cycle` (one pass
//! of active expiry). A threshold of 0 turns the monitor off.

use crate::state::Shared;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Takes the latency monitor's, the slow log's and the per-command
/// histograms' settings from the configuration (at start-up and after
/// CONFIG SET): each is read on every command, so each keeps its own copy.
pub fn apply_config(shared: &Shared) {
    let c = shared.config.read();
    shared.latency.configure(c.latency_monitor_threshold);
    shared
        .slowlog
        .configure(c.slowlog_log_slower_than, c.slowlog_max_len as usize);
    shared.cmdstats.configure(
        c.latency_tracking,
        c.latency_tracking_info_percentiles.clone(),
    );
}

/// Samples kept per event.
const SAMPLES: usize = 160;

#[derive(Default)]
pub struct Series {
    /// (Unix seconds, milliseconds), oldest first.
    samples: VecDeque<(u64, u64)>,
    max_ms: u64,
}

#[derive(Default)]
pub struct LatencyMonitor {
    threshold_ms: AtomicU64,
    events: Mutex<BTreeMap<&'static str, Series>>,
}

impl LatencyMonitor {
    pub fn configure(&self, threshold_ms: u64) {
        self.threshold_ms.store(threshold_ms, Ordering::Relaxed);
    }

    /// Whether a run of `took` is worth a sample: the caller may then look
    /// up what it needs for the event's name.
    pub fn notable(&self, took: Duration) -> bool {
        let t = self.threshold_ms.load(Ordering::Relaxed);
        t != 0 && took.as_millis() >= u128::from(t)
    }

    /// Adds a sample of `took` to `event` if it reaches the threshold.
    pub fn add(&self, event: &'static str, took: Duration) {
        if !self.notable(took) {
            return;
        }
        let ms = took.as_millis().min(u128::from(u32::MAX)) as u64;
        let now = unix_now();
        let mut events = self.events.lock();
        let s = events.entry(event).or_default();
        s.max_ms = s.max_ms.max(ms);
        match s.samples.back_mut() {
            Some((t, worst)) if *t == now => *worst = (*worst).max(ms),
            _ => {
                if s.samples.len() == SAMPLES {
                    s.samples.pop_front();
                }
                s.samples.push_back((now, ms));
            }
        }
    }

    /// LATENCY LATEST: per event, (name, time of its last sample, that
    /// sample, the worst).
    pub fn latest(&self) -> Vec<(&'static str, u64, u64, u64)> {
        self.events
            .lock()
            .iter()
            .filter_map(|(name, s)| {
                let &(t, ms) = s.samples.back()?;
                Some((*name, t, ms, s.max_ms))
            })
            .collect()
    }

    /// LATENCY HISTORY: the event's samples, oldest first.
    pub fn history(&self, event: &[u8]) -> Vec<(u64, u64)> {
        self.events
            .lock()
            .iter()
            .find(|(name, _)| name.as_bytes() == event)
            .map(|(_, s)| s.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// LATENCY RESET: forgets the named events (all for an empty list);
    /// returns how many there were.
    pub fn reset(&self, names: &[&[u8]]) -> usize {
        let mut events = self.events.lock();
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        let before = events.len();
        events.retain(|name, _| !names.contains(&name.as_bytes()));
        before - events.len()
    }

    /// LATENCY GRAPH: the event's samples as rows of bars, newest last;
    /// None without samples.
    pub fn graph(&self, event: &[u8]) -> Option<String> {
        let (samples, all_time) = {
            let events = self.events.lock();
            let s = events.iter().find(|(name, _)| name.as_bytes() == event)?.1;
            (s.samples.clone(), s.max_ms)
        };
        let worst = samples.iter().map(|s| s.1).max()?;
        let best = samples.iter().map(|s| s.1).min().unwrap_or(0);
        let now = unix_now();
        let mut out = format!(
            "{} - high {worst} ms, low {best} ms (all time high {all_time} ms)\n",
            String::from_utf8_lossy(event)
        );
        out.push_str(&"-".repeat(72));
        out.push('\n');
        for (t, ms) in samples {
            let width = (ms * 50).div_ceil(worst.max(1)) as usize;
            let _ = writeln!(
                out,
                "{:>8} ago {:>7} ms |{}",
                age(now.saturating_sub(t)),
                ms,
                "#".repeat(width.max(1))
            );
        }
        Some(out)
    }

    /// LATENCY DOCTOR: a plain-language reading of what was recorded.
    pub fn doctor(&self) -> String {
        let threshold = self.threshold_ms.load(Ordering::Relaxed);
        let events = self.events.lock();
        let mut out = String::new();
        if threshold == 0 && events.is_empty() {
            out.push_str(
                "The latency monitor is off (latency-monitor-threshold is 0), so no \
                 latency events were recorded. Turn it on with, for example, \
                 CONFIG SET latency-monitor-threshold 100 to record every event that \
                 takes 100 milliseconds or more.\n",
            );
            return out;
        }
        if events.is_empty() {
            let _ = writeln!(
                out,
                "No event took {threshold} milliseconds or more since the monitor was \
                 last reset: nothing to report."
            );
            return out;
        }
        let now = unix_now();
        let _ = writeln!(
            out,
            "Events that took at least {threshold} ms (latency-monitor-threshold):\n"
        );
        for (i, (name, s)) in events.iter().enumerate() {
            let n = s.samples.len() as u64;
            let sum: u64 = s.samples.iter().map(|x| x.1).sum();
            let first = s.samples.front().map_or(now, |x| x.0);
            let _ = writeln!(
                out,
                "{}. {name}: {n} latency spikes (average {} ms, mean deviation {} ms, \
                 period {}); worst {} ms.",
                i + 1,
                sum / n.max(1),
                mean_deviation(&s.samples, sum / n.max(1)),
                period(now.saturating_sub(first), n),
                s.max_ms
            );
        }
        out.push('\n');
        for name in events.keys() {
            if let Some(advice) = advice(name) {
                let _ = writeln!(out, "- {advice}");
            }
        }
        out
    }
}

fn unix_now() -> u64 {
    crate::util::now_ms() / 1000
}

fn mean_deviation(samples: &VecDeque<(u64, u64)>, mean: u64) -> u64 {
    let n = samples.len() as u64;
    samples.iter().map(|x| x.1.abs_diff(mean)).sum::<u64>() / n.max(1)
}

/// How often spikes came, as "every N seconds" over the samples' span.
fn period(span_secs: u64, n: u64) -> String {
    if n < 2 {
        return "a single spike".to_string();
    }
    format!("one every {} s", (span_secs / (n - 1)).max(1))
}

fn age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{}s", s / 60, s % 60),
        s => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}

fn advice(event: &str) -> Option<&'static str> {
    Some(match event {
        "command" => {
            "command: slow commands were run. SLOWLOG GET shows which (set \
             slowlog-log-slower-than below latency-monitor-threshold to catch them); \
             commands that walk whole keys, such as KEYS, SMEMBERS or LRANGE over \
             large values, SORT and long scripts, are the usual cause."
        }
        "fast-command" => {
            "fast-command: commands that are normally O(1) or O(log N) took long, \
             which usually means the process was starved of CPU (other processes, \
             swapping, or a noisy virtual machine neighbour)."
        }
        "expire-cycle" => {
            "expire-cycle: active expiry took long, usually because many keys expired \
             at the same moment or a large collection expired; spreading expiry times \
             helps."
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_below_the_threshold_or_with_it_off_are_dropped() {
        let m = LatencyMonitor::default();
        m.add("command", Duration::from_secs(1));
        assert!(m.latest().is_empty());
        m.configure(100);
        m.add("command", Duration::from_millis(99));
        assert!(m.latest().is_empty());
        m.add("command", Duration::from_millis(150));
        m.add("command", Duration::from_millis(120));
        let l = m.latest();
        assert_eq!(l.len(), 1);
        // One sample per second: the worst of it.
        assert_eq!((l[0].0, l[0].2, l[0].3), ("command", 150, 150));
        assert_eq!(m.history(b"command").len(), 1);
        assert!(m.graph(b"command").unwrap().contains("high 150 ms"));
        assert!(m.graph(b"nope").is_none());
        assert!(m.doctor().contains("command"));
    }

    #[test]
    fn reset_counts_the_events_it_forgot() {
        let m = LatencyMonitor::default();
        m.configure(1);
        m.add("command", Duration::from_millis(5));
        m.add("fast-command", Duration::from_millis(5));
        assert_eq!(m.reset(&[b"nope"]), 0);
        assert_eq!(m.reset(&[b"command", b"nope"]), 1);
        assert_eq!(m.reset(&[]), 1);
        assert!(m.latest().is_empty());
    }
}
