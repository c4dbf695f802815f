//! INFO commandstats, errorstats and latencystats, and LATENCY HISTOGRAM:
//! per command (and per subcommand, as `client|list`) calls, time,
//! rejections, failures and a latency histogram, and per error code the
//! number of error replies. Cheap enough for every command: one clock
//! read around the handler, a few relaxed atomic adds on counters indexed
//! by the command's table position, and (with `latency-tracking` on) one
//! uncontended lock to record the run time. Each thread stripe
//! (`crate::stripe`) has a table of its own, so threads running the same
//! command at once never write the same cache line; readers merge them.

use crate::command::{CommandSpec, COMMANDS};
use crate::stripe::STRIPES;
use bytes::Bytes;
use durakv_protocol::Frame;
use hdrhistogram::Histogram;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Histogram range and precision, in nanoseconds, as Redis's: runs past a
/// second count as a second and runs under 1,024 ns as 1,024 ns, with two
/// significant digits. From 1 ns each histogram took 24 KB instead of 13,
/// made at a command's first run on each thread stripe, and `used_memory`
/// jumped by that much at such moments, enough to push it over
/// `maxmemory` with nothing left to evict (Redis's unit/maxmemory allows
/// 100 KB of growth).
const HIST_MIN_NS: u64 = 1024;
const HIST_MAX_NS: u64 = 1_000_000_000;
const HIST_DIGITS: u8 = 2;
/// LATENCY HISTOGRAM's first bucket (about a microsecond); each next one
/// is twice as wide.
const HIST_FIRST_BUCKET_NS: u64 = 1024;

/// Redis keeps at most this many distinct error codes; replies with later
/// new codes count only in `total_error_replies`.
const MAX_ERROR_CODES: usize = 128;

#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    /// Run times in nanoseconds, made at the first call.
    hist: Mutex<Option<Box<Histogram<u64>>>>,
}

/// One command's counts, merged over the stripes.
#[derive(Default, Clone, Copy)]
struct Totals {
    calls: u64,
    usec: u64,
    rejected: u64,
    failed: u64,
}

impl Counters {
    fn totals(&self) -> Totals {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Totals {
            calls: get(&self.calls),
            usec: get(&self.usec),
            rejected: get(&self.rejected),
            failed: get(&self.failed),
        }
    }

    fn reset(&self) {
        for c in [&self.calls, &self.usec, &self.rejected, &self.failed] {
            c.store(0, Ordering::Relaxed);
        }
        *self.hist.lock() = None;
    }

    fn record(&self, took: Duration) {
        let ns = (took.as_nanos().min(u128::from(HIST_MAX_NS)) as u64).max(HIST_MIN_NS);
        let mut slot = self.hist.lock();
        if slot.is_none() {
            // Constant bounds: this never fails.
            *slot = Histogram::new_with_bounds(HIST_MIN_NS, HIST_MAX_NS, HIST_DIGITS)
                .ok()
                .map(Box::new);
        }
        if let Some(h) = slot.as_mut() {
            h.saturating_record(ns);
        }
    }

    /// A copy of the histogram, if the command ran since the last reset.
    fn histogram(&self) -> Option<Histogram<u64>> {
        self.hist
            .lock()
            .as_deref()
            .filter(|h| !h.is_empty())
            .cloned()
    }
}

impl Totals {
    fn add(&mut self, o: Totals) {
        self.calls += o.calls;
        self.usec += o.usec;
        self.rejected += o.rejected;
        self.failed += o.failed;
    }

    fn line(&self, out: &mut String, name: &str) {
        let Totals {
            calls,
            usec,
            rejected,
            failed,
        } = *self;
        if calls + rejected + failed == 0 {
            return;
        }
        let per_call = if calls > 0 {
            usec as f64 / calls as f64
        } else {
            0.0
        };
        let _ = write!(
            out,
            "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n"
        );
    }
}

pub struct CommandStats {
    /// Per stripe, made when a thread of it first runs a command: counters
    /// indexed by `CommandSpec::id`.
    tables: [OnceLock<Box<[Counters]>>; STRIPES],
    /// `container|sub` → counters; subcommands are rare enough for a lock.
    subs: Mutex<HashMap<String, Counters>>,
    errors: Mutex<BTreeMap<String, u64>>,
    /// `latency-tracking`: whether run times go into histograms.
    tracking: AtomicBool,
    /// `latency-tracking-info-percentiles`.
    percentiles: RwLock<Vec<f64>>,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats {
            tables: std::array::from_fn(|_| OnceLock::new()),
            subs: Mutex::new(HashMap::new()),
            errors: Mutex::new(BTreeMap::new()),
            tracking: AtomicBool::new(true),
            percentiles: RwLock::new(vec![50.0, 99.0, 99.9]),
        }
    }
}

impl CommandStats {
    /// Runs `counters` on the subcommand's entry when `sub` names one
    /// (`client|list`), else on the command's.
    fn with(&self, spec: &CommandSpec, sub: &str, f: impl FnOnce(&Counters)) {
        if sub.contains('|') {
            f(self.subs.lock().entry(sub.to_string()).or_default());
        } else if let Some(c) = self.mine().get(spec.id) {
            f(c);
        }
    }

    /// This thread's stripe's table.
    fn mine(&self) -> &[Counters] {
        self.tables[crate::stripe::index()]
            .get_or_init(|| (0..COMMANDS.len()).map(|_| Counters::default()).collect())
    }

    /// Every stripe's counters of command `id`.
    fn of(&self, id: usize) -> impl Iterator<Item = &Counters> {
        self.tables
            .iter()
            .filter_map(move |t| t.get().and_then(|t| t.get(id)))
    }

    /// Command `id`'s counts over every stripe.
    fn totals(&self, id: usize) -> Totals {
        let mut t = Totals::default();
        self.of(id).for_each(|c| t.add(c.totals()));
        t
    }

    /// Command `id`'s histogram over every stripe, if it ran.
    fn histogram(&self, id: usize) -> Option<Histogram<u64>> {
        let mut merged: Option<Histogram<u64>> = None;
        for h in self.of(id).filter_map(Counters::histogram) {
            match merged.as_mut() {
                // Same bounds everywhere: adding cannot fail.
                Some(m) => {
                    let _ = m.add(&h);
                }
                None => merged = Some(h),
            }
        }
        merged
    }

    /// Takes `latency-tracking` and its percentiles from the configuration.
    pub fn configure(&self, tracking: bool, percentiles: Vec<f64>) {
        self.tracking.store(tracking, Ordering::Relaxed);
        *self.percentiles.write() = percentiles;
    }

    /// A command that ran; `failed` when it answered with an error.
    pub fn call(&self, spec: &CommandSpec, sub: &str, took: Duration, failed: bool) {
        let tracking = self.tracking.load(Ordering::Relaxed);
        self.with(spec, sub, |c| {
            c.calls.fetch_add(1, Ordering::Relaxed);
            c.usec.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
            if failed {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
            if tracking {
                c.record(took);
            }
        });
    }

    /// A blocked command whose wait ended with an error: its call was
    /// counted when it blocked, its failure only now.
    pub fn failed_after_block(&self, spec: &CommandSpec) {
        self.with(spec, "", |c| {
            c.failed.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// A command refused before it ran (arity, auth, a busy script, ...).
    pub fn rejected(&self, spec: &CommandSpec) {
        self.with(spec, "", |c| {
            c.rejected.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// Counts an error reply under its code (the error's first word); the
    /// total is INFO stats' `total_error_replies`, counted as replies go out.
    pub fn error_reply(&self, frame: &Frame) {
        let Frame::Error(text) = frame else {
            return;
        };
        let code = text
            .split(|&b| b == b' ')
            .next()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .unwrap_or_default();
        let mut errors = self.errors.lock();
        if let Some(n) = errors.get_mut(&code) {
            *n += 1;
        } else if errors.len() < MAX_ERROR_CODES {
            errors.insert(code, 1);
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for t in self.tables.iter().filter_map(OnceLock::get) {
            t.iter().for_each(Counters::reset);
        }
        self.subs.lock().clear();
        self.errors.lock().clear();
    }

    /// The body of INFO commandstats, sorted by name.
    pub fn commandstats(&self) -> String {
        let mut out = String::new();
        let mut names: Vec<(&str, usize)> = COMMANDS.values().map(|s| (s.name, s.id)).collect();
        names.sort_unstable();
        for (name, id) in names {
            self.totals(id).line(&mut out, name);
        }
        let subs = self.subs.lock();
        let mut sub_names: Vec<&String> = subs.keys().collect();
        sub_names.sort_unstable();
        for name in sub_names {
            subs[name].totals().line(&mut out, name);
        }
        out
    }

    /// Every command and subcommand that ran since the last reset, by
    /// full name (`client|list`), sorted, with its histogram.
    fn histograms(&self) -> Vec<(String, Histogram<u64>)> {
        let mut out: Vec<(String, Histogram<u64>)> = COMMANDS
            .values()
            .filter_map(|s| {
                let h = self.histogram(s.id)?;
                Some((s.name.to_string(), h))
            })
            .collect();
        out.extend(
            self.subs
                .lock()
                .iter()
                .filter_map(|(name, c)| Some((name.clone(), c.histogram()?))),
        );
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// LATENCY HISTOGRAM: for each command that ran and that `names`
    /// selects (all for an empty list; a container's name selects its
    /// subcommands; unknown names select nothing), its calls and the
    /// cumulative count per doubling bucket in microseconds.
    pub fn latency_histogram(&self, names: &[Bytes]) -> Frame {
        let selected = |name: &str| {
            names.is_empty()
                || names.iter().any(|n| {
                    let n = n.as_ref();
                    name.as_bytes().eq_ignore_ascii_case(n)
                        || name
                            .split_once('|')
                            .is_some_and(|(parent, _)| parent.as_bytes().eq_ignore_ascii_case(n))
                })
        };
        let entries = self
            .histograms()
            .into_iter()
            .filter(|(name, _)| selected(name))
            .map(|(name, h)| {
                let mut buckets = Vec::new();
                let mut cumulative = 0;
                for step in h.iter_log(HIST_FIRST_BUCKET_NS, 2.0) {
                    let before = cumulative;
                    cumulative += step.count_since_last_iteration();
                    if cumulative > before {
                        let micros = h.highest_equivalent(step.value_iterated_to()) / 1000;
                        buckets.push((
                            Frame::Integer(micros as i64),
                            Frame::Integer(cumulative as i64),
                        ));
                    }
                }
                let body = Frame::Map(vec![
                    (
                        Frame::Bulk(Bytes::from_static(b"calls")),
                        Frame::Integer(h.len() as i64),
                    ),
                    (
                        Frame::Bulk(Bytes::from_static(b"histogram_usec")),
                        Frame::Map(buckets),
                    ),
                ]);
                (Frame::Bulk(Bytes::from(name)), body)
            })
            .collect();
        Frame::Map(entries)
    }

    /// The body of INFO latencystats: the configured percentiles of each
    /// command's run time, in microseconds.
    pub fn latencystats(&self) -> String {
        let percentiles = self.percentiles.read().clone();
        let mut out = String::new();
        for (name, h) in self.histograms() {
            let values: Vec<String> = percentiles
                .iter()
                .map(|&p| {
                    let us = h.value_at_quantile(p / 100.0) as f64 / 1000.0;
                    format!("p{}={us:.3}", crate::config::percentile_label(p))
                })
                .collect();
            let _ = write!(
                out,
                "latency_percentiles_usec_{name}:{}\r\n",
                values.join(",")
            );
        }
        out
    }

    /// The body of INFO errorstats.
    pub fn errorstats(&self) -> String {
        let mut out = String::new();
        for (code, n) in self.errors.lock().iter() {
            let _ = write!(out, "errorstat_{code}:count={n}\r\n");
        }
        out
    }
}
