//! Series of runs over increasing concurrency, written as CSV and as a
//! throughput-bars / latency-line chart like the reference reports' plots.
//!
//! A sweep is requested either with `durakv bench sweep [--out PREFIX] ycsb
//! ...|memtier ...` or by giving a comma list to `-threads` (YCSB) or
//! `-t`/`-c` (memtier). Each point is a complete run with its own report;
//! while it runs, a progress bar is drawn when stdout is a terminal, and
//! plain status lines are printed otherwise (or with `-s`).

use crate::chart::BarLineChart;
use crate::cli::{parse_ycsb, YcsbCli};
use crate::memtier::{parse_memtier, run_memtier, MemtierCli};
use crate::runner::{run_ycsb, Progress};
use indicatif::{ProgressBar, ProgressStyle};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

pub const SWEEP_USAGE: &str = "\
usage: durakv bench sweep [--out PREFIX] ycsb load|run DB ... -threads 10,20,50
       durakv bench sweep [--out PREFIX] memtier ... -c 5,10,20,40
writes PREFIX.csv and PREFIX.svg (default PREFIX: sweep)";

/// One measured point of a sweep.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SweepPoint {
    /// Client connections in total.
    pub concurrency: usize,
    pub ops_per_sec: f64,
    pub avg_latency_ms: f64,
    pub p99_latency_ms: f64,
    pub avg_read_ms: Option<f64>,
    pub avg_write_ms: Option<f64>,
    pub errors: u64,
}

/// Progress display for a sweep: an indicatif bar on a terminal, plain
/// lines otherwise.
pub struct Display {
    bar: Option<ProgressBar>,
}

impl Display {
    pub fn new(plain: bool) -> Display {
        let bar = (!plain).then(|| {
            let b = ProgressBar::new(0);
            let style =
                ProgressStyle::with_template("{prefix:>14} [{bar:36}] {pos}/{len} ops {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
            b.set_style(style);
            b
        });
        Display { bar }
    }

    pub fn start(&self, label: &str, total_ops: u64, point: usize, points: usize) {
        match &self.bar {
            Some(b) => {
                b.reset();
                b.set_length(total_ops);
                b.set_position(0);
                b.set_prefix(format!("{point}/{points} {label}"));
            }
            None => eprintln!("sweep point {point}/{points}: {label} ..."),
        }
    }

    pub fn update(&self, p: Progress) {
        match &self.bar {
            Some(b) => {
                if p.total_ops == 0 {
                    b.set_length(p.done_ops.max(1));
                }
                b.set_position(p.done_ops.min(b.length().unwrap_or(u64::MAX)));
                b.set_message(format!(
                    "{:.0} ops/s, {} s",
                    p.current_ops_per_sec,
                    p.elapsed.as_secs()
                ));
            }
            None => eprintln!(
                "  {} s: {} operations; {:.0} current ops/sec",
                p.elapsed.as_secs(),
                p.done_ops,
                p.current_ops_per_sec
            ),
        }
    }

    pub fn done(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v:.4}"))
}

/// The sweep as CSV (one row per point).
pub fn to_csv(points: &[SweepPoint]) -> String {
    let mut s = String::from(
        "concurrency,ops_per_sec,avg_latency_ms,p99_latency_ms,avg_read_ms,avg_write_ms,errors\n",
    );
    for p in points {
        let _ = writeln!(
            s,
            "{},{:.2},{:.4},{:.4},{},{},{}",
            p.concurrency,
            p.ops_per_sec,
            p.avg_latency_ms,
            p.p99_latency_ms,
            opt(p.avg_read_ms),
            opt(p.avg_write_ms),
            p.errors
        );
    }
    s
}

/// Writes `PREFIX.csv` and `PREFIX.svg`.
pub fn write_outputs(
    prefix: &str,
    title: &str,
    x_label: &str,
    points: &[SweepPoint],
) -> Result<Vec<PathBuf>, String> {
    let csv = PathBuf::from(format!("{prefix}.csv"));
    let svg = PathBuf::from(format!("{prefix}.svg"));
    std::fs::write(&csv, to_csv(points))
        .map_err(|e| format!("cannot write {}: {e}", csv.display()))?;
    let chart = BarLineChart {
        title: title.to_string(),
        x_label: x_label.to_string(),
        categories: points.iter().map(|p| p.concurrency.to_string()).collect(),
        bar_label: "throughput (ops/sec)".into(),
        bars: points.iter().map(|p| p.ops_per_sec).collect(),
        line_label: "average latency (ms)".into(),
        line: points.iter().map(|p| Some(p.avg_latency_ms)).collect(),
    };
    std::fs::write(&svg, chart.to_svg())
        .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    Ok(vec![csv, svg])
}

fn summary_table(points: &[SweepPoint]) -> String {
    let mut s = format!(
        "{:>12} {:>14} {:>14} {:>14} {:>8}\n",
        "connections", "ops/sec", "avg lat (ms)", "p99 (ms)", "errors"
    );
    for p in points {
        let _ = writeln!(
            s,
            "{:>12} {:>14.2} {:>14.3} {:>14.3} {:>8}",
            p.concurrency, p.ops_per_sec, p.avg_latency_ms, p.p99_latency_ms, p.errors
        );
    }
    s
}

fn finish(prefix: &str, title: &str, x_label: &str, points: &[SweepPoint], failed: bool) -> i32 {
    print!("\n# sweep summary\n{}", summary_table(points));
    match write_outputs(prefix, title, x_label, points) {
        Ok(files) => {
            for f in files {
                eprintln!("wrote {}", f.display());
            }
            i32::from(failed)
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// Runs a YCSB command once per `-threads` value.
pub fn ycsb_sweep(cli: &YcsbCli) -> i32 {
    let plain = !std::io::stdout().is_terminal() || cli.opts.status;
    let display = Display::new(plain);
    let mut points = Vec::new();
    let mut jsons = Vec::new();
    let mut failed = false;
    let n = cli.threads_list.len();
    for (i, threads) in cli.threads_list.iter().enumerate() {
        let mut opts = cli.opts.clone();
        opts.threads = *threads;
        let label = format!("threads={threads}");
        let workload_ops = match opts.phase {
            crate::workload::Phase::Load => opts.props.u64_or("recordcount", 0).unwrap_or(0),
            crate::workload::Phase::Run => opts.props.u64_or("operationcount", 0).unwrap_or(0),
        };
        display.start(&label, workload_ops, i + 1, n);
        let update = |p: Progress| display.update(p);
        match run_ycsb(&opts, Some(&update)) {
            Ok(r) => {
                print!("\n# sweep point {label}\n{}", r.to_text());
                let total = r
                    .ops
                    .iter()
                    .filter(|o| o.name != "CLEANUP" && o.name != "READ-MODIFY-WRITE")
                    .fold((0u64, 0.0), |(n, s), o| {
                        (
                            n + o.ok.operations,
                            s + o.ok.average_us * o.ok.operations as f64,
                        )
                    });
                let avg = if total.0 > 0 {
                    total.1 / total.0 as f64 / 1000.0
                } else {
                    0.0
                };
                display.done(&format!(
                    "{label}: {:.0} ops/s, avg {:.3} ms, p99 {:.3} ms, errors {}",
                    r.throughput_ops_per_sec,
                    avg,
                    r.overall_p99_us as f64 / 1000.0,
                    r.errors_total
                ));
                failed |= r.errors_total > 0;
                points.push(SweepPoint {
                    concurrency: *threads,
                    ops_per_sec: r.throughput_ops_per_sec,
                    avg_latency_ms: avg,
                    p99_latency_ms: r.overall_p99_us as f64 / 1000.0,
                    avg_read_ms: r.avg_read_ms(),
                    avg_write_ms: r.avg_write_ms(),
                    errors: r.errors_total,
                });
                jsons.push(r.to_json());
            }
            Err(e) => {
                display.done(&format!("{label}: failed: {e}"));
                failed = true;
            }
        }
    }
    display.finish();
    if let Some(path) = &cli.json {
        if let Err(e) = crate::write_json(path, &serde_json::Value::Array(jsons)) {
            eprintln!("{e}");
            failed = true;
        }
    }
    let prefix = cli.sweep_out.clone().unwrap_or_else(|| "sweep".into());
    let title = format!("YCSB {} on {}", cli.opts.phase.name(), cli.opts.db);
    finish(
        &prefix,
        &title,
        "client connections (-threads)",
        &points,
        failed,
    )
}

/// Runs a memtier command once per `-t` x `-c` combination.
pub fn memtier_sweep(cli: &MemtierCli) -> i32 {
    let plain = !std::io::stdout().is_terminal();
    let display = Display::new(plain);
    let mut points = Vec::new();
    let mut jsons = Vec::new();
    let mut failed = false;
    let combos: Vec<(usize, usize)> = cli
        .threads_list
        .iter()
        .flat_map(|t| cli.clients_list.iter().map(move |c| (*t, *c)))
        .collect();
    for (i, (t, c)) in combos.iter().enumerate() {
        let mut o = cli.opts.clone();
        o.threads = *t;
        o.clients = *c;
        o.quiet = true;
        let label = format!("t={t} c={c}");
        let expected = match (o.test_time_secs, o.requests) {
            (None, crate::memtier::Requests::PerClient(n)) => n * (*t * *c) as u64,
            _ => 0,
        };
        display.start(&label, expected, i + 1, combos.len());
        let update = |p: Progress| display.update(p);
        match run_memtier(&o, Some(&update)) {
            Ok(r) => {
                print!("\n# sweep point {label}{}", r.to_text(o.hide_histogram));
                let totals = r.totals();
                let h = totals.latency.as_ref().filter(|h| !h.is_empty());
                let avg = h.map_or(0.0, |h| h.mean() / 1000.0);
                let p99 = h.map_or(0.0, |h| h.value_at_quantile(0.99) as f64 / 1000.0);
                let mean_ms = |s: &crate::report::MemtierTypeStats| {
                    s.latency
                        .as_ref()
                        .filter(|h| !h.is_empty())
                        .map(|h| h.mean() / 1000.0)
                };
                let errors = totals.errors + r.connection_errors;
                display.done(&format!(
                    "{label}: {:.0} ops/s, avg {avg:.3} ms, p99 {p99:.3} ms, errors {errors}",
                    r.ops_per_sec()
                ));
                failed |= errors > 0;
                points.push(SweepPoint {
                    concurrency: t * c,
                    ops_per_sec: r.ops_per_sec(),
                    avg_latency_ms: avg,
                    p99_latency_ms: p99,
                    avg_read_ms: mean_ms(&r.gets),
                    avg_write_ms: mean_ms(&r.sets),
                    errors,
                });
                jsons.push(r.to_json());
            }
            Err(e) => {
                display.done(&format!("{label}: failed: {e}"));
                failed = true;
            }
        }
        // Give the server a moment to close the previous point's connections.
        std::thread::sleep(Duration::from_millis(200));
    }
    display.finish();
    if let Some(path) = &cli.opts.json_out {
        if let Err(e) = crate::write_json(path, &serde_json::Value::Array(jsons)) {
            eprintln!("{e}");
            failed = true;
        }
    }
    let prefix = cli.sweep_out.clone().unwrap_or_else(|| "sweep".into());
    let title = format!(
        "memtier {}:{} on {}:{}",
        cli.opts.ratio_set, cli.opts.ratio_get, cli.opts.host, cli.opts.port
    );
    finish(
        &prefix,
        &title,
        "connections (threads x clients)",
        &points,
        failed,
    )
}

/// `durakv bench sweep [--out PREFIX] ycsb ...|memtier ...`
pub fn main(args: &[String]) -> i32 {
    let mut out = None;
    let mut rest = args;
    if let Some(first) = rest.first() {
        if first == "--out" {
            out = rest.get(1).cloned();
            rest = rest.get(2..).unwrap_or(&[]);
        } else if let Some(v) = first.strip_prefix("--out=") {
            out = Some(v.to_string());
            rest = &rest[1..];
        }
    }
    match rest.first().map(String::as_str) {
        Some("ycsb") => match parse_ycsb(&rest[1..]) {
            Ok(mut cli) => {
                cli.sweep_out = cli.sweep_out.or(out);
                ycsb_sweep(&cli)
            }
            Err(e) => {
                eprintln!("{e}");
                2
            }
        },
        Some("memtier") => match parse_memtier(&rest[1..]) {
            Ok(mut cli) => {
                cli.sweep_out = cli.sweep_out.or(out);
                memtier_sweep(&cli)
            }
            Err(e) => {
                eprintln!("{e}");
                2
            }
        },
        _ => {
            eprintln!("{SWEEP_USAGE}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_one_row_per_point() {
        let p = SweepPoint {
            concurrency: 10,
            ops_per_sec: 1234.5,
            avg_latency_ms: 0.5,
            p99_latency_ms: 2.0,
            avg_read_ms: Some(0.4),
            avg_write_ms: None,
            errors: 0,
        };
        let csv = to_csv(&[
            p.clone(),
            SweepPoint {
                concurrency: 20,
                ..p
            },
        ]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], "10,1234.50,0.5000,2.0000,0.4000,,0");
    }
}
