//! The text reports are parsed back: every YCSB series carries the lines
//! YCSB prints, with numbers in YCSB's formats, consistent with each other
//! and with the JSON output; memtier's table keeps memtier's columns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{args, scratch_dir, MockServer};
use durakv_bench::memtier::{parse_memtier, run_memtier};
use durakv_bench::report::parse_ycsb_text;

fn metric<'a>(
    m: &'a std::collections::BTreeMap<(String, String), String>,
    name: &str,
    k: &str,
) -> &'a str {
    m.get(&(name.to_string(), k.to_string()))
        .map(String::as_str)
        .unwrap_or_else(|| panic!("missing [{name}], {k}"))
}

#[test]
fn ycsb_report_parses_back() {
    let dir = scratch_dir("report");
    let db = dir.join("r.db").display().to_string();
    let json = dir.join("r.json");
    let common_args = format!(
        "-p recordcount=200 -p operationcount=300 -p readproportion=0.5 -p updateproportion=0.5 \
         -p sqlite.path={db} -threads 3"
    );
    assert_eq!(
        durakv_bench::run(args(&format!("ycsb load sqlite {common_args}"))),
        0
    );
    // The report goes to stdout; re-run through the library to capture it.
    let cli = durakv_bench::cli::parse_ycsb(&args(&format!(
        "run sqlite {common_args} --json {}",
        json.display()
    )))
    .expect("parse");
    let report = durakv_bench::runner::run_ycsb(&cli.opts, None).expect("run");
    let text = report.to_text();
    let m = parse_ycsb_text(&text);

    let runtime: u64 = metric(&m, "OVERALL", "RunTime(ms)")
        .parse()
        .expect("RunTime is an integer");
    let throughput: f64 = metric(&m, "OVERALL", "Throughput(ops/sec)")
        .parse()
        .expect("throughput");
    assert!(throughput > 0.0);
    assert!(runtime as f64 <= report.runtime_ms + 1.0);

    let mut total = 0;
    for op in ["READ", "UPDATE"] {
        let n: u64 = metric(&m, op, "Operations").parse().expect("ops");
        let ok: u64 = metric(&m, op, "Return=OK").parse().expect("ok");
        let err: u64 = metric(&m, op, "Return=ERROR").parse().expect("error");
        let nf: u64 = metric(&m, op, "Return=NOT_FOUND")
            .parse()
            .expect("not found");
        assert_eq!(n, ok, "{op}: Operations counts successful operations");
        assert_eq!((err, nf), (0, 0));
        total += ok;
        let avg: f64 = metric(&m, op, "AverageLatency(us)").parse().expect("avg");
        assert!(
            metric(&m, op, "AverageLatency(us)").contains('.'),
            "Java double format"
        );
        let min: u64 = metric(&m, op, "MinLatency(us)").parse().expect("min");
        let max: u64 = metric(&m, op, "MaxLatency(us)").parse().expect("max");
        let p95: u64 = metric(&m, op, "95thPercentileLatency(us)")
            .parse()
            .expect("p95");
        let p99: u64 = metric(&m, op, "99thPercentileLatency(us)")
            .parse()
            .expect("p99");
        assert!(min as f64 <= avg && avg <= max as f64);
        assert!(min <= p95 && p95 <= p99 && p99 <= max);
    }
    assert_eq!(total, 300);
    assert!(m.contains_key(&("CLEANUP".to_string(), "Operations".to_string())));
    // Line order as YCSB: the two OVERALL lines first.
    let first: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with('['))
        .take(2)
        .collect();
    assert!(first[0].starts_with("[OVERALL], RunTime(ms), "));
    assert!(first[1].starts_with("[OVERALL], Throughput(ops/sec), "));

    // The JSON written by the CLI path has the same structure.
    assert_eq!(
        durakv_bench::run(args(&format!(
            "ycsb run sqlite {common_args} --json {}",
            json.display()
        ))),
        0
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json file"))
            .expect("valid json");
    assert_eq!(v["operations"], 300);
    assert_eq!(v["config"]["recordcount"], "200");
    assert_eq!(v["db"], "sqlite");
    assert!(v["ops"]
        .as_array()
        .is_some_and(|a| a.iter().any(|o| o["name"] == "READ")));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn memtier_against_in_process_server() {
    let server = MockServer::start();
    let cli = parse_memtier(&args(&format!(
        "-s 127.0.0.1 -p {} -t 2 -c 3 --ratio=1:3 --requests=40 --key-maximum=50 -d 16 --random-data \
         --distinct-client-seed --pipeline 4",
        server.port
    )))
    .expect("parse");
    let mut o = cli.opts.clone();
    o.quiet = true;
    let r = run_memtier(&o, None).expect("memtier run");
    // 6 connections x 40 requests, SET:GET 1:3.
    assert_eq!(r.sets.ops + r.gets.ops, 240);
    assert_eq!(r.sets.ops, 60);
    assert_eq!(r.gets.hits + r.gets.misses, r.gets.ops);
    assert_eq!(r.totals().errors, 0);
    assert!(server.string_count() > 0 && server.string_count() <= 51);
    assert_eq!(r.durability, "full");

    let text = r.to_text(false);
    let lines: Vec<&str> = text.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("Type "))
        .expect("header");
    assert_eq!(
        lines[header].trim_end(),
        "Type         Ops/sec     Hits/sec   Misses/sec    Avg. Latency     p50 Latency     p99 Latency   p99.9 Latency       KB/sec"
    );
    assert_eq!(lines[header - 1], "=".repeat(124));
    assert_eq!(lines[header + 1], "-".repeat(124));
    for (i, name) in ["Sets", "Gets", "Waits", "Totals"].iter().enumerate() {
        let row = lines[header + 2 + i];
        assert!(row.starts_with(name), "{row}");
        assert_eq!(row.len(), 124, "row width: {row:?}");
    }
    let totals: Vec<&str> = lines[header + 5].split_whitespace().collect();
    let sets: Vec<&str> = lines[header + 2].split_whitespace().collect();
    let gets: Vec<&str> = lines[header + 3].split_whitespace().collect();
    let f = |s: &str| s.parse::<f64>().expect("number");
    assert!((f(totals[1]) - f(sets[1]) - f(gets[1])).abs() < 0.02);
    assert_eq!(sets[2], "---");
    assert!(text.contains("Request Latency Distribution"));
    let json = r.to_json();
    assert_eq!(json["ALL STATS"]["Sets"]["Count"], 60);
    assert!(json["ALL STATS"]["Gets"]["Percentile Latencies"]["p99.90"].is_number());
}

#[test]
fn memtier_against_redis_server() {
    let Ok(port) = std::env::var("DURAKV_TEST_REDIS_PORT") else {
        eprintln!("DURAKV_TEST_REDIS_PORT not set; skipping");
        return;
    };
    let cli = parse_memtier(&args(&format!(
        "-s 127.0.0.1 -p {port} -t 1 -c 4 --ratio=1:1 --requests=100 --key-prefix=memtier-test- \
         --key-maximum=100 -d 32 --hide-histogram"
    )))
    .expect("parse");
    let mut o = cli.opts;
    o.quiet = true;
    let r = run_memtier(&o, None).expect("run");
    assert_eq!(r.sets.ops + r.gets.ops, 400);
    assert_eq!(r.totals().errors, 0);
    assert_eq!(r.connection_errors, 0);
}

#[test]
fn sweep_writes_csv_and_chart() {
    let server = MockServer::start();
    let dir = scratch_dir("sweep");
    let prefix = dir.join("s").display().to_string();
    let code = durakv_bench::run(args(&format!(
        "memtier -s 127.0.0.1 -p {} -t 1 -c 1,2 --requests=20 --key-maximum=10 --hide-histogram --sweep-out {prefix}",
        server.port
    )));
    assert_eq!(code, 0);
    let csv = std::fs::read_to_string(format!("{prefix}.csv")).expect("csv");
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 3);
    assert!(rows[1].starts_with("1,") && rows[2].starts_with("2,"));
    let svg = std::fs::read_to_string(format!("{prefix}.svg")).expect("svg");
    assert!(svg.starts_with("<svg") && svg.contains("<polyline"));
    let _ = std::fs::remove_dir_all(dir);
}
