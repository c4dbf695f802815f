//! INFO's instantaneous rates (`instantaneous_ops_per_sec`, the input and
//! output kbps): recent readings of the traffic counters, taken by the
//! server's periodic task and by INFO itself, so the rates stay current
//! however rarely INFO is asked.

use crate::state::Stats;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::time::Instant;

/// Readings older than this no longer count as "instantaneous".
const RATE_WINDOW_SECS: f64 = 2.0;
/// Readings closer together than this give too noisy a rate.
const MIN_RATE_INTERVAL_SECS: f64 = 0.1;
/// Bounds the queue even at the highest `hz`.
const MAX_SAMPLES: usize = 1024;

/// A reading of the traffic counters.
struct Sample {
    at: Instant,
    commands: u64,
    net_in: u64,
    net_out: u64,
}

impl Sample {
    fn now(st: &Stats) -> Sample {
        Sample {
            at: Instant::now(),
            commands: st.total_commands_processed.get(),
            net_in: st.total_net_input_bytes.get(),
            net_out: st.total_net_output_bytes.get(),
        }
    }

    fn age(&self) -> f64 {
        self.at.elapsed().as_secs_f64()
    }
}

/// Recent readings, oldest first.
#[derive(Default)]
pub struct Rates {
    samples: Mutex<VecDeque<Sample>>,
}

impl Rates {
    /// Adds a reading (the periodic task calls this `hz` times a second).
    pub fn record(&self, st: &Stats) {
        let mut q = self.samples.lock();
        prune(&mut q);
        q.push_back(Sample::now(st));
    }

    /// CONFIG RESETSTAT: rates restart from the reset counters.
    pub fn reset(&self) {
        self.samples.lock().clear();
    }

    /// (ops/sec, input kbps, output kbps), averaged from the oldest reading
    /// in the window (or, with none there, the newest usable one) to now.
    pub fn instantaneous(&self, st: &Stats) -> (u64, f64, f64) {
        let now = Sample::now(st);
        let mut q = self.samples.lock();
        prune(&mut q);
        let base = q
            .iter()
            .find(|s| (MIN_RATE_INTERVAL_SECS..=RATE_WINDOW_SECS).contains(&s.age()))
            .or_else(|| q.iter().rev().find(|s| s.age() >= MIN_RATE_INTERVAL_SECS));
        let rates = match base {
            Some(b) => {
                let dt = now.at.duration_since(b.at).as_secs_f64();
                (
                    (now.commands.saturating_sub(b.commands) as f64 / dt) as u64,
                    now.net_in.saturating_sub(b.net_in) as f64 / dt / 1024.0,
                    now.net_out.saturating_sub(b.net_out) as f64 / dt / 1024.0,
                )
            }
            None => (0, 0.0, 0.0),
        };
        q.push_back(now);
        rates
    }
}

/// Drops readings that fell out of the window, keeping the newest of them
/// as a fallback base for callers that sample rarely.
fn prune(q: &mut VecDeque<Sample>) {
    while q.len() > MAX_SAMPLES || (q.len() > 1 && q[1].age() > RATE_WINDOW_SECS) {
        q.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_counts_commands_since_a_reading_in_the_window() {
        let st = Stats::default();
        let r = Rates::default();
        r.samples.lock().push_back(Sample {
            at: Instant::now() - std::time::Duration::from_millis(500),
            commands: 0,
            net_in: 0,
            net_out: 0,
        });
        st.total_commands_processed.set(1000);
        let (ops, _, _) = r.instantaneous(&st);
        // 1000 commands over about half a second.
        assert!((1500..=2100).contains(&ops), "{ops}");
        r.reset();
        assert_eq!(r.instantaneous(&st).0, 0);
    }
}
