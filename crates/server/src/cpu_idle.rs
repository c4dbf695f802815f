//! Whether the machine has idle CPU, for the log's batching on slow disks
//! (`Wal::set_cpu_scarce`): from the first line of `/proc/stat`, idle and
//! I/O-wait time against all time, over windows of at least a second of
//! one CPU's time.
//!
//! Measured under `../shared/slowsync` at 1 ms per fsync on two vCPUs:
//! memtier 1:10 at 200 connections left 3% of the CPU idle, and there
//! batches spaced by `wal-sync-overlap-us` served 17-25% more requests
//! than batches started evenly through each fsync; YCSB-A at 64
//! connections left 31% idle, and there the even spacing served 9% more.
//! The thresholds sit between, apart so that the mode does not flip with
//! each window.
//!
//! The file counts the whole machine: a server held to part of it by a
//! container's CPU quota sees the host's idle time, not its own lack of
//! it, and keeps the even spacing.

use std::time::{Duration, Instant};

/// Below this share of idle time, the CPU is scarce.
const SCARCE_BELOW: f64 = 0.10;
/// Above this share it is not (any more).
const PLENTY_ABOVE: f64 = 0.18;
/// The shortest window, in `/proc/stat` ticks summed over CPUs (100 per
/// CPU-second): a window of a few ticks would flip on one of them.
const WINDOW_TICKS: u64 = 100;
/// Readings closer together than this are skipped: at a high `hz` the
/// background loop would read the file hundreds of times a second for a
/// verdict that needs a window of half a second on two CPUs.
const READ_EVERY: Duration = Duration::from_millis(100);

/// Reads `/proc/stat` and keeps the verdict between windows.
#[derive(Default)]
pub struct IdleMeter {
    /// (all ticks, idle ticks) at the start of the window.
    start: Option<(u64, u64)>,
    scarce: bool,
    read_at: Option<Instant>,
}

impl IdleMeter {
    /// Takes a reading; returns whether the CPU is scarce once a window
    /// closed with it, None until then (or where `/proc/stat` is absent).
    pub fn sample(&mut self) -> Option<bool> {
        let now = Instant::now();
        if self
            .read_at
            .is_some_and(|at| now.duration_since(at) < READ_EVERY)
        {
            return None;
        }
        self.read_at = Some(now);
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        self.observe(parse(&text)?)
    }

    fn observe(&mut self, (all, idle): (u64, u64)) -> Option<bool> {
        let Some((all0, idle0)) = self.start else {
            self.start = Some((all, idle));
            return None;
        };
        let span = all.checked_sub(all0)?;
        if span < WINDOW_TICKS {
            return None;
        }
        let share = idle.saturating_sub(idle0) as f64 / span as f64;
        self.start = Some((all, idle));
        if share < SCARCE_BELOW {
            self.scarce = true;
        } else if share > PLENTY_ABOVE {
            self.scarce = false;
        }
        Some(self.scarce)
    }
}

/// (all ticks, idle + iowait ticks) from `/proc/stat`'s aggregate line:
/// `cpu user nice system idle iowait irq softirq steal ...`. Guest time
/// is inside user time already, so only the first eight fields count.
fn parse(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().next()?;
    let mut f = line.split_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 5 {
        return None;
    }
    Some((v.iter().sum(), v[3] + v[4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aggregate_line_gives_all_time_and_idle_with_iowait() {
        let text = "cpu  100 5 50 800 40 1 4 0 0 0\ncpu0 50 2 25 400 20 0 2 0 0 0\n";
        assert_eq!(parse(text), Some((1000, 840)));
        assert_eq!(parse("intr 1 2 3\n"), None);
        assert_eq!(parse("cpu 1 2 x 4 5\n"), None);
    }

    #[test]
    fn a_busy_window_makes_it_scarce_until_a_window_with_plenty_idle() {
        let mut m = IdleMeter::default();
        assert_eq!(
            m.observe((1000, 500)),
            None,
            "the first reading opens a window"
        );
        assert_eq!(m.observe((1050, 500)), None, "too short a window");
        // 200 ticks, 5% idle.
        assert_eq!(m.observe((1200, 510)), Some(true));
        // 15% idle: between the thresholds, the verdict stands.
        assert_eq!(m.observe((1400, 540)), Some(true));
        // 30% idle.
        assert_eq!(m.observe((1600, 600)), Some(false));
        // 15% again: stays not scarce.
        assert_eq!(m.observe((1800, 630)), Some(false));
    }

    #[test]
    fn this_machine_has_a_reading() {
        let mut m = IdleMeter::default();
        assert_eq!(m.sample(), None);
        let text = std::fs::read_to_string("/proc/stat").unwrap();
        assert!(parse(&text).is_some(), "{text}");
    }
}
