//! Result output in the formats of the tools being replaced: YCSB's final
//! report and `-s` status lines, memtier_benchmark's summary table and
//! latency distribution, plus JSON with the same figures and the full
//! configuration.
//!
//! Scripts written against YCSB and memtier parse these texts, so line
//! shapes, names, number formats and column widths follow those tools.
//! Extra information (durability, coordinated-omission correction, error
//! samples) goes on `#` comment lines that such parsers skip.

use crate::db::Status;
use crate::measure::{OpKind, OpStats, Snapshot, OP_KINDS};
use crate::runner::YcsbOptions;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

/// Java's `Double.toString`, which YCSB's text exporter uses for averages
/// and throughput: plain decimal with at least one fractional digit for
/// magnitudes in [1e-3, 1e7), scientific (`1.2345E7`) otherwise. Digits are
/// Rust's shortest round-trip form, which can differ from older JDKs in the
/// last place but parses back to the same double.
pub fn java_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let a = d.abs();
    if d == 0.0 || (1e-3..1e7).contains(&a) {
        let s = format!("{d}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = format!("{d:E}");
        match s.split_once('E') {
            Some((m, e)) if !m.contains('.') => format!("{m}.0E{e}"),
            _ => s,
        }
    }
}

/// Java's `DecimalFormat("#.##")`: at most two decimals, no trailing zeros.
pub fn decimal_2(d: f64) -> String {
    if !d.is_finite() {
        return java_double(d);
    }
    let s = format!("{d:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// YCSB's percentile label: `95` -> `95th`, `99.9` -> `99.9`.
pub fn ordinal(p: f64) -> String {
    if p.fract() == 0.0 {
        let j = p as i64;
        let suffix = match j % 100 {
            11..=13 => "th",
            _ => match j % 10 {
                1 => "st",
                2 => "nd",
                3 => "rd",
                _ => "th",
            },
        };
        format!("{j}{suffix}")
    } else {
        java_double(p)
    }
}

/// `yyyy-MM-dd HH:mm:ss:SSS` in UTC (YCSB prints its local time; UTC keeps
/// runs on different hosts comparable and needs no time-zone database).
pub fn format_timestamp(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02} {:02}:{:02}:{:02}:{:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// YCSB's remaining-time wording ("est completion in 2 minutes ").
fn remaining(mut secs: u64) -> String {
    let mut out = String::new();
    let days = secs / 86_400;
    if days > 0 {
        let _ = write!(out, "{days} {}", if days == 1 { "day " } else { "days " });
        secs -= days * 86_400;
    }
    let hours = secs / 3600;
    if hours > 0 {
        let _ = write!(
            out,
            "{hours} {}",
            if hours == 1 { "hour " } else { "hours " }
        );
        secs -= hours * 3600;
    }
    if days < 1 {
        let minutes = secs / 60;
        if minutes > 0 {
            let _ = write!(
                out,
                "{minutes} {}",
                if minutes == 1 { "minute " } else { "minutes " }
            );
            secs -= minutes * 60;
        }
    }
    if out.is_empty() {
        let _ = write!(out, "{secs} seconds ");
    }
    out
}

fn interval_summary(name: &str, h: &Histogram<u64>) -> String {
    format!(
        "[{name}: Count={}, Max={}, Min={}, Avg={}, 90={}, 99={}, 99.9={}, 99.99={}]",
        h.len(),
        h.max(),
        h.min(),
        decimal_2(h.mean()),
        h.value_at_quantile(0.90),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.value_at_quantile(0.9999),
    )
}

/// One `-s` status line in YCSB's format.
#[allow(clippy::too_many_arguments)]
pub fn status_line(
    label: &str,
    now: SystemTime,
    elapsed: Duration,
    total_ops: u64,
    interval_ops: u64,
    interval: Duration,
    todo_ops: u64,
    acc: &Snapshot,
) -> String {
    let mut msg = format!(
        "{label}{} {} sec: {total_ops} operations; ",
        format_timestamp(now),
        elapsed.as_secs()
    );
    if total_ops != 0 {
        let cur = interval_ops as f64 / interval.as_secs_f64().max(1e-9);
        let _ = write!(msg, "{} current ops/sec; ", decimal_2(cur));
    }
    if todo_ops != 0 {
        let rate = total_ops as f64 / elapsed.as_secs_f64().max(1e-9);
        let est = if rate > 0.0 {
            (todo_ops as f64 / rate).ceil() as u64
        } else {
            0
        };
        let _ = write!(msg, "est completion in {}", remaining(est));
    }
    for k in OP_KINDS {
        let op = acc.op(k);
        if let Some(h) = op.ok.as_ref().filter(|h| !h.is_empty()) {
            msg.push_str(&interval_summary(k.label(), h));
            msg.push(' ');
        }
        if let Some(h) = op.failed.as_ref().filter(|h| !h.is_empty()) {
            msg.push_str(&interval_summary(&format!("{}-FAILED", k.label()), h));
            msg.push(' ');
        }
    }
    msg
}

/// Summary statistics of one latency series, in microseconds.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesSummary {
    pub operations: u64,
    pub average_us: f64,
    pub min_us: u64,
    pub max_us: u64,
    /// Keyed by YCSB's label, e.g. "95th".
    pub percentiles_us: BTreeMap<String, u64>,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
}

impl SeriesSummary {
    pub fn from_histogram(h: &Histogram<u64>, percentiles: &[f64]) -> SeriesSummary {
        let empty = h.is_empty();
        let q = |p: f64| {
            if empty {
                0
            } else {
                h.value_at_quantile(p / 100.0)
            }
        };
        SeriesSummary {
            operations: h.len(),
            average_us: if empty { 0.0 } else { h.mean() },
            min_us: if empty { 0 } else { h.min() },
            max_us: if empty { 0 } else { h.max() },
            percentiles_us: percentiles.iter().map(|p| (ordinal(*p), q(*p))).collect(),
            p50_us: q(50.0),
            p90_us: q(90.0),
            p99_us: q(99.0),
            p999_us: q(99.9),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct OpReport {
    pub name: String,
    /// Successful operations (`[READ]`).
    pub ok: SeriesSummary,
    /// Failed operations (`[READ-FAILED]`), if any.
    pub failed: Option<SeriesSummary>,
    /// Send-to-reply time, when the main series is measured from intended
    /// start times.
    pub service: Option<SeriesSummary>,
    /// `Return=` counts keyed by YCSB status name.
    pub returns: BTreeMap<String, u64>,
}

/// Everything a YCSB-style run produced.
#[derive(Clone, Debug, Serialize)]
pub struct YcsbReport {
    pub tool: String,
    pub phase: String,
    pub db: String,
    pub threads: usize,
    pub client_os_threads: usize,
    pub target_ops_per_sec: Option<f64>,
    pub started_at_utc: String,
    pub runtime_ms: f64,
    pub operations: u64,
    pub throughput_ops_per_sec: f64,
    /// "intended_start" (coordinated-omission corrected) or "request_start".
    pub latency_measured_from: String,
    pub warmup_secs: f64,
    pub warmup_operations: u64,
    pub max_execution_secs: u64,
    pub durability: String,
    pub seed: u64,
    pub percentiles: Vec<f64>,
    pub ops: Vec<OpReport>,
    pub errors_total: u64,
    pub error_samples: Vec<String>,
    pub notes: Vec<String>,
    pub overall_average_us: f64,
    pub overall_p99_us: u64,
    pub config: BTreeMap<String, String>,
}

/// What [`YcsbReport::build`] needs from the runner.
pub struct YcsbReportInput<'a> {
    pub opts: &'a YcsbOptions,
    pub snapshot: &'a Snapshot,
    pub runtime: Duration,
    pub start_wall: SystemTime,
    pub durability: String,
    pub target_notes: Vec<String>,
    pub errors: Vec<String>,
    pub warmup_secs: f64,
    pub corrected: bool,
    pub os_threads: usize,
    pub seed: u64,
    pub max_execution_secs: u64,
}

fn parse_percentiles(spec: Option<&str>) -> Vec<f64> {
    let parsed: Option<Vec<f64>> = spec.map(|s| {
        s.split(',')
            .filter_map(|p| p.trim().parse::<f64>().ok())
            .filter(|p| (0.0..=100.0).contains(p))
            .collect()
    });
    match parsed {
        Some(v) if !v.is_empty() => v,
        _ => vec![95.0, 99.0],
    }
}

impl YcsbReport {
    pub fn build(input: YcsbReportInput<'_>) -> YcsbReport {
        let opts = input.opts;
        let snap = input.snapshot;
        let percentiles = parse_percentiles(opts.props.get("hdrhistogram.percentiles"));
        let mut ops = Vec::new();
        let mut errors_total = 0;
        for k in OP_KINDS {
            let op: &OpStats = snap.op(k);
            let has_data = op.total_count() > 0 || op.ok.is_some() || op.failed.is_some();
            if !has_data {
                continue;
            }
            let empty = crate::measure::new_histogram();
            let ok = SeriesSummary::from_histogram(op.ok.as_ref().unwrap_or(&empty), &percentiles);
            let mut returns = BTreeMap::new();
            if k != OpKind::Cleanup {
                for s in [Status::Ok, Status::Error, Status::NotFound] {
                    returns.insert(s.name().to_string(), op.count(s));
                }
                if op.count(Status::BatchedOk) > 0 {
                    returns.insert(Status::BatchedOk.name().into(), op.count(Status::BatchedOk));
                }
                errors_total += op.count(Status::Error);
            }
            ops.push(OpReport {
                name: k.label().to_string(),
                ok,
                failed: op
                    .failed
                    .as_ref()
                    .filter(|h| !h.is_empty())
                    .map(|h| SeriesSummary::from_histogram(h, &percentiles)),
                service: op
                    .service
                    .as_ref()
                    .filter(|h| !h.is_empty())
                    .map(|h| SeriesSummary::from_histogram(h, &percentiles)),
                returns,
            });
        }
        let runtime_ms = input.runtime.as_secs_f64() * 1000.0;
        let throughput = if runtime_ms > 0.0 {
            snap.done_ops as f64 * 1000.0 / runtime_ms
        } else {
            0.0
        };
        // Every individual call; a read-modify-write's read and update are
        // already counted in their own series.
        let overall = snap.combined(|k| k != OpKind::ReadModifyWrite);
        let (overall_average_us, overall_p99_us) = match &overall {
            Some(h) if !h.is_empty() => (h.mean(), h.value_at_quantile(0.99)),
            _ => (0.0, 0),
        };
        let mut notes = input.target_notes;
        if input.corrected {
            notes.push(format!(
                "latency measured from each request's intended start time (open loop at -target {} ops/s): coordinated omission corrected; [SERVICE-*] series give send-to-reply time",
                opts.target_ops_per_sec.map_or(String::new(), decimal_2)
            ));
        } else {
            notes.push(
                "latency measured from each request's actual start (closed loop); use -target for coordinated-omission-corrected latency".into(),
            );
        }
        let mut config: BTreeMap<String, String> = opts.props.as_map().clone();
        config.insert("threadcount".into(), opts.threads.to_string());
        if let Some(t) = opts.target_ops_per_sec {
            config.insert("target".into(), t.to_string());
        }
        YcsbReport {
            tool: "durakv bench ycsb".into(),
            phase: opts.phase.name().into(),
            db: opts.db.clone(),
            threads: opts.threads,
            client_os_threads: input.os_threads,
            target_ops_per_sec: opts.target_ops_per_sec,
            started_at_utc: format_timestamp(input.start_wall),
            runtime_ms,
            operations: snap.done_ops,
            throughput_ops_per_sec: throughput,
            latency_measured_from: if input.corrected {
                "intended_start".into()
            } else {
                "request_start".into()
            },
            warmup_secs: input.warmup_secs,
            warmup_operations: snap.warmup_ops,
            max_execution_secs: input.max_execution_secs,
            durability: input.durability,
            seed: input.seed,
            percentiles,
            ops,
            errors_total,
            error_samples: input.errors,
            notes,
            overall_average_us,
            overall_p99_us,
            config,
        }
    }

    pub fn op(&self, name: &str) -> Option<&OpReport> {
        self.ops.iter().find(|o| o.name == name)
    }

    /// Average latency of successful reads, in milliseconds.
    pub fn avg_read_ms(&self) -> Option<f64> {
        self.op("READ")
            .filter(|o| o.ok.operations > 0)
            .map(|o| o.ok.average_us / 1000.0)
    }

    /// Operation-weighted average latency of successful writes, in ms.
    pub fn avg_write_ms(&self) -> Option<f64> {
        let (mut n, mut sum) = (0u64, 0.0);
        for name in ["UPDATE", "INSERT", "DELETE"] {
            if let Some(o) = self.op(name) {
                n += o.ok.operations;
                sum += o.ok.average_us * o.ok.operations as f64;
            }
        }
        (n > 0).then(|| sum / n as f64 / 1000.0)
    }

    /// YCSB's text report, preceded by `#` notes.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# durakv bench ycsb {} {}: threads={} target={} durability={}",
            self.phase,
            self.db,
            self.threads,
            self.target_ops_per_sec
                .map_or("unthrottled".to_string(), decimal_2),
            self.durability
        );
        for n in &self.notes {
            let _ = writeln!(out, "# {n}");
        }
        if self.warmup_secs > 0.0 {
            let _ = writeln!(
                out,
                "# warm-up: operations completing in the first {} s are excluded ({} operations)",
                decimal_2(self.warmup_secs),
                self.warmup_operations
            );
        }
        if self.errors_total > 0 {
            let _ = writeln!(out, "# errors: {} operations failed", self.errors_total);
        }
        for e in &self.error_samples {
            let _ = writeln!(out, "# error sample: {e}");
        }
        let line = |out: &mut String, m: &str, k: &str, v: String| {
            let _ = writeln!(out, "[{m}], {k}, {v}");
        };
        line(
            &mut out,
            "OVERALL",
            "RunTime(ms)",
            (self.runtime_ms as u64).to_string(),
        );
        line(
            &mut out,
            "OVERALL",
            "Throughput(ops/sec)",
            java_double(self.throughput_ops_per_sec),
        );
        for op in &self.ops {
            write_series(&mut out, &op.name, &op.ok);
            // YCSB's order: OK first, then the failure codes.
            for status in Status::ALL {
                if let Some(count) = op.returns.get(status.name()) {
                    line(
                        &mut out,
                        &op.name,
                        &format!("Return={}", status.name()),
                        count.to_string(),
                    );
                }
            }
            if let Some(f) = &op.failed {
                write_series(&mut out, &format!("{}-FAILED", op.name), f);
            }
        }
        for op in &self.ops {
            if let Some(s) = &op.service {
                write_series(&mut out, &format!("SERVICE-{}", op.name), s);
            }
        }
        out
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

fn write_series(out: &mut String, name: &str, s: &SeriesSummary) {
    let _ = writeln!(out, "[{name}], Operations, {}", s.operations);
    let _ = writeln!(
        out,
        "[{name}], AverageLatency(us), {}",
        java_double(s.average_us)
    );
    let _ = writeln!(out, "[{name}], MinLatency(us), {}", s.min_us);
    let _ = writeln!(out, "[{name}], MaxLatency(us), {}", s.max_us);
    for (label, v) in sorted_percentiles(s) {
        let _ = writeln!(out, "[{name}], {label}PercentileLatency(us), {v}");
    }
}

fn sorted_percentiles(s: &SeriesSummary) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = s
        .percentiles_us
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let num = |l: &str| {
        l.trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse::<f64>()
            .unwrap_or(0.0)
    };
    v.sort_by(|a, b| num(&a.0).total_cmp(&num(&b.0)));
    v
}

/// The `[NAME], metric, value` lines of a YCSB text report, keyed by
/// (name, metric); `#` lines are ignored. Used by tests and by tooling that
/// post-processes saved output.
pub fn parse_ycsb_text(text: &str) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if !line.starts_with('[') {
            continue;
        }
        let mut parts = line.splitn(3, ", ");
        let (Some(name), Some(metric), Some(value)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let name = name.trim_start_matches('[').trim_end_matches(']');
        out.insert((name.to_string(), metric.to_string()), value.to_string());
    }
    out
}

// ---------------------------------------------------------------------------
// memtier_benchmark output

/// Counters and latencies of one request type (SET or GET).
#[derive(Clone, Debug, Default)]
pub struct MemtierTypeStats {
    pub ops: u64,
    pub hits: u64,
    pub misses: u64,
    /// Request plus reply bytes, as memtier counts them.
    pub bytes: u64,
    /// Latency in microseconds.
    pub latency: Option<Histogram<u64>>,
    pub errors: u64,
}

impl MemtierTypeStats {
    pub fn merge(&mut self, o: MemtierTypeStats) {
        self.ops += o.ops;
        self.hits += o.hits;
        self.misses += o.misses;
        self.bytes += o.bytes;
        self.errors += o.errors;
        if let Some(h) = o.latency {
            match &mut self.latency {
                Some(d) => {
                    let _ = d.add(&h);
                }
                None => self.latency = Some(h),
            }
        }
    }

    pub fn record(&mut self, latency_us: u64) {
        let h = self
            .latency
            .get_or_insert_with(crate::measure::new_histogram);
        let _ = h.record(latency_us);
    }
}

/// The figures memtier prints in its "ALL STATS" table.
#[derive(Clone, Debug)]
pub struct MemtierReport {
    pub sets: MemtierTypeStats,
    pub gets: MemtierTypeStats,
    pub duration: Duration,
    pub start_wall: SystemTime,
    pub percentiles: Vec<f64>,
    pub connection_errors: u64,
    pub durability: String,
    pub error_samples: Vec<String>,
    pub config: BTreeMap<String, String>,
    pub threads: usize,
    pub clients_per_thread: usize,
}

/// Latency histogram resolution for memtier's distribution section
/// (its `LATENCY_HDR_GRANULARITY`).
const MEMTIER_HISTOGRAM_TICKS: u32 = 10;

fn percentile_header(p: f64) -> String {
    // As few decimals as the value needs (at most three): 50 -> "p50",
    // 99.9 -> "p99.9", 99.99 -> "p99.99".
    let digits = (0..3)
        .find(|d| {
            let scaled = p * 10f64.powi(*d);
            (scaled - scaled.round()).abs() < 1e-6
        })
        .unwrap_or(3) as usize;
    format!("p{p:.digits$} Latency")
}

impl MemtierReport {
    fn secs(&self) -> f64 {
        self.duration.as_secs_f64().max(1e-9)
    }

    pub fn totals(&self) -> MemtierTypeStats {
        let mut t = self.sets.clone();
        t.merge(self.gets.clone());
        t
    }

    pub fn ops_per_sec(&self) -> f64 {
        (self.sets.ops + self.gets.ops) as f64 / self.secs()
    }

    /// The "ALL STATS" table (and the latency distribution unless hidden).
    pub fn to_text(&self, hide_histogram: bool) -> String {
        let secs = self.secs();
        let totals = self.totals();
        let ncols_latency = 1 + self.percentiles.len();
        let mut out = String::new();
        let width = 8 + 13 * 3 + 16 * ncols_latency + 13;
        let _ = write!(out, "\n\nALL STATS\n{}\n", "=".repeat(width));
        // Header.
        let _ = write!(
            out,
            "{:<7} {:>12} {:>12} {:>12} {:>15} ",
            "Type", "Ops/sec", "Hits/sec", "Misses/sec", "Avg. Latency"
        );
        for p in &self.percentiles {
            let _ = write!(out, "{:>15} ", percentile_header(*p));
        }
        let _ = writeln!(out, "{:>12} ", "KB/sec");
        let _ = writeln!(out, "{}", "-".repeat(width));
        let lat = |h: &Option<Histogram<u64>>, q: Option<f64>, force: bool| -> String {
            match h.as_ref().filter(|h| !h.is_empty()) {
                Some(h) => {
                    let v = match q {
                        None => h.mean(),
                        Some(p) => h.value_at_quantile(p / 100.0) as f64,
                    };
                    format!("{:>15.5} ", v / 1000.0)
                }
                None if force => format!("{:>15.5} ", 0.0),
                None => format!("{:>15} ", "---"),
            }
        };
        let row = |out: &mut String,
                   name: &str,
                   s: &MemtierTypeStats,
                   hits: Option<(f64, f64)>,
                   force: bool| {
            let _ = write!(out, "{:<7} {:>12.2} ", name, s.ops as f64 / secs);
            match hits {
                Some((h, m)) => {
                    let _ = write!(out, "{h:>12.2} {m:>12.2} ");
                }
                None => {
                    let _ = write!(out, "{:>12} {:>12} ", "---", "---");
                }
            }
            out.push_str(&lat(&s.latency, None, force));
            for p in &self.percentiles {
                out.push_str(&lat(&s.latency, Some(*p), force));
            }
            let _ = writeln!(out, "{:>12.2} ", s.bytes as f64 / 1024.0 / secs);
        };
        row(&mut out, "Sets", &self.sets, None, false);
        row(
            &mut out,
            "Gets",
            &self.gets,
            Some((self.gets.hits as f64 / secs, self.gets.misses as f64 / secs)),
            false,
        );
        // memtier's WAIT row: this tool never sends WAIT.
        let _ = write!(
            out,
            "{:<7} {:>12.2} {:>12} {:>12} ",
            "Waits", 0.0, "---", "---"
        );
        for _ in 0..ncols_latency {
            let _ = write!(out, "{:>15} ", "---");
        }
        let _ = writeln!(out, "{:>12} ", "---");
        row(
            &mut out,
            "Totals",
            &totals,
            Some((totals.hits as f64 / secs, totals.misses as f64 / secs)),
            true,
        );
        let _ = writeln!(
            out,
            "# errors: {} error replies, {} connection errors; server durability: {}",
            totals.errors, self.connection_errors, self.durability
        );
        for e in &self.error_samples {
            let _ = writeln!(out, "# error sample: {e}");
        }
        if !hide_histogram {
            let _ = write!(
                out,
                "\n\nRequest Latency Distribution\n{:<6} {:>12} {:>12}\n{}\n",
                "Type",
                "<= msec   ",
                "Percent",
                "-".repeat(72)
            );
            for (name, s) in [("SET", &self.sets), ("GET", &self.gets)] {
                if let Some(h) = s.latency.as_ref().filter(|h| !h.is_empty()) {
                    let mut last = String::new();
                    for v in h.iter_quantiles(MEMTIER_HISTOGRAM_TICKS) {
                        let line = format!(
                            "{:<6} {:>8.3} {:>12.2}",
                            name,
                            v.value_iterated_to() as f64 / 1000.0,
                            v.quantile_iterated_to() * 100.0
                        );
                        // Steps that land in the same bucket print alike.
                        if line != last {
                            let _ = writeln!(out, "{line}");
                            last = line;
                        }
                    }
                }
                let _ = writeln!(out, "---");
            }
        }
        out
    }

    /// memtier's `--json-out-file` layout ("ALL STATS" with Sets, Gets,
    /// Waits, Totals and Runtime), plus configuration and durability.
    pub fn to_json(&self) -> serde_json::Value {
        let secs = self.secs();
        let block = |s: &MemtierTypeStats, hits: bool| {
            let h = s.latency.as_ref().filter(|h| !h.is_empty());
            // Microseconds to milliseconds, rounded as memtier's "%.3f".
            let ms = |us: f64| (us).round() / 1000.0;
            let mut pct = serde_json::Map::new();
            for p in &self.percentiles {
                let v = h.map_or(0.0, |h| h.value_at_quantile(p / 100.0) as f64);
                pct.insert(format!("p{p:.2}"), serde_json::json!(ms(v)));
            }
            serde_json::json!({
                "Count": s.ops,
                "Ops/sec": s.ops as f64 / secs,
                "Hits/sec": if hits { s.hits as f64 / secs } else { 0.0 },
                "Misses/sec": if hits { s.misses as f64 / secs } else { 0.0 },
                "Latency": h.map_or(0.0, |h| h.mean() / 1000.0),
                "Average Latency": h.map_or(0.0, |h| h.mean() / 1000.0),
                "Min Latency": h.map_or(0.0, |h| h.min() as f64 / 1000.0),
                "Max Latency": h.map_or(0.0, |h| h.max() as f64 / 1000.0),
                "KB/sec": s.bytes as f64 / 1024.0 / secs,
                "Errors": s.errors,
                "Percentile Latencies": pct,
            })
        };
        let totals = self.totals();
        let start_ms = self
            .start_wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let dur_ms = self.duration.as_millis() as u64;
        serde_json::json!({
            "configuration": self.config,
            "durability": self.durability,
            "ALL STATS": {
                "Sets": block(&self.sets, false),
                "Gets": block(&self.gets, true),
                "Waits": block(&MemtierTypeStats::default(), false),
                "Totals": {
                    "Connection Errors": self.connection_errors,
                    "Error Samples": self.error_samples,
                    "stats": block(&totals, true),
                },
                "Runtime": {
                    "Start time": start_ms,
                    "Finish time": start_ms + dur_ms,
                    "Total duration": dur_ms,
                    "Time unit": "MILLISECONDS",
                },
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_number_formats() {
        assert_eq!(java_double(449.5), "449.5");
        assert_eq!(java_double(100.0), "100.0");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(12_345_678.0), "1.2345678E7");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(decimal_2(1234.5), "1234.5");
        assert_eq!(decimal_2(1234.0), "1234");
        assert_eq!(decimal_2(0.004), "0");
        assert_eq!(ordinal(95.0), "95th");
        assert_eq!(ordinal(99.0), "99th");
        assert_eq!(ordinal(1.0), "1st");
        assert_eq!(ordinal(11.0), "11th");
        assert_eq!(ordinal(99.9), "99.9");
    }

    #[test]
    fn timestamps_are_utc_civil_dates() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_741_323_456);
        assert_eq!(format_timestamp(t), "2026-11-27 01:02:03:456");
        assert_eq!(
            format_timestamp(SystemTime::UNIX_EPOCH),
            "1970-01-01 00:00:00:000"
        );
    }

    #[test]
    fn remaining_time_wording() {
        assert_eq!(remaining(30), "30 seconds ");
        assert_eq!(remaining(60), "1 minute ");
        assert_eq!(remaining(3725), "1 hour 2 minutes ");
    }

    #[test]
    fn percentile_headers_like_memtier() {
        assert_eq!(percentile_header(50.0), "p50 Latency");
        assert_eq!(percentile_header(99.9), "p99.9 Latency");
        assert_eq!(percentile_header(99.99), "p99.99 Latency");
        assert_eq!(percentile_header(99.999), "p99.999 Latency");
    }
}
