//! The Prometheus endpoint (`metrics-port`): INFO's fields as metrics over
//! HTTP, read from the real server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `request` and returns (status line, headers, body).
fn http(port: u16, request: &str) -> (String, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (
        status.to_string(),
        headers.to_ascii_lowercase(),
        body.to_string(),
    )
}

fn scrape(port: u16) -> String {
    let (status, headers, body) = http(
        port,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("content-type: text/plain; version=0.0.4"),
        "{headers}"
    );
    body
}

/// The value of the sample `series` (name and labels as printed).
fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in:\n{body}"))
        .parse()
        .unwrap()
}

fn start() -> (Server, u16) {
    Server::start_with_free_port(|port| vec!["--metrics-port".into(), port.to_string()])
}

#[test]
fn info_fields_are_served_as_prometheus_metrics() {
    let (server, port) = start();
    let mut c = server.conn();
    for k in ["a", "b", "c"] {
        let _: () = q(&mut c, &["SET", k, "v"]);
    }
    let _: Option<String> = q(&mut c, &["GET", "a"]);
    let _: Option<String> = q(&mut c, &["GET", "missing"]);
    assert!(try_q::<()>(&mut c, &["INCR", "a"]).is_err());
    let fsyncs: f64 = info_field(&mut c, "persistence", "wal_fsyncs")
        .parse()
        .unwrap();

    let body = scrape(port);
    assert_eq!(sample(&body, "durakv_db_keys{db=\"0\"}"), 3.0);
    assert_eq!(
        sample(&body, "durakv_cmdstat_calls_total{cmd=\"set\"}"),
        3.0
    );
    assert_eq!(sample(&body, "durakv_keyspace_hits_total"), 1.0);
    assert_eq!(sample(&body, "durakv_keyspace_misses_total"), 1.0);
    assert_eq!(
        sample(&body, "durakv_errorstat_count_total{error=\"ERR\"}"),
        1.0
    );
    assert_eq!(sample(&body, "durakv_role_info{value=\"master\"}"), 1.0);
    assert_eq!(sample(&body, "durakv_durability_info{value=\"full\"}"), 1.0);
    // Each `full` SET waited for its fsync, and INFO counted them all
    // before the scrape.
    assert!(sample(&body, "durakv_wal_fsyncs_total") >= fsyncs.max(3.0));
    assert!(sample(&body, "durakv_wal_durable_lsn") >= 3.0);
    // Whether the log batches as on a machine without idle CPU: a 0/1
    // gauge, as INFO gives it.
    let scarce = sample(&body, "durakv_wal_cpu_scarce");
    assert!(scarce == 0.0 || scarce == 1.0, "{scarce}");
    // Every fsync is in the histogram, in some bucket.
    let in_histogram = sample(
        &body,
        "durakv_wal_fsync_seconds_bucket{stream=\"0\",le=\"+Inf\"}",
    );
    assert_eq!(in_histogram, sample(&body, "durakv_wal_fsyncs_total"));
    assert_eq!(
        in_histogram,
        sample(&body, "durakv_wal_fsync_seconds_count{stream=\"0\"}")
    );
    assert!(sample(&body, "durakv_used_memory") > 0.0);
    assert!(body.contains("# TYPE durakv_wal_fsyncs_total counter"));
    assert!(body.contains("# TYPE durakv_used_memory gauge"));

    // Read at each scrape, not at start-up.
    let _: () = q(&mut c, &["SET", "d", "v"]);
    assert_eq!(sample(&scrape(port), "durakv_db_keys{db=\"0\"}"), 4.0);
}

/// Each reply a `full` write held for its fsync is counted once, with how
/// long it was held, in INFO and in `durakv_reply_wait_seconds`; replies
/// at `none` are never held, so they add nothing.
#[test]
fn replies_held_for_durability_are_timed() {
    let (server, port) = start();
    let mut c = server.conn();
    let held = |c: &mut redis::Connection| -> u64 {
        info_field(c, "persistence", "wal_replies_held")
            .parse()
            .unwrap()
    };
    let _: () = q(&mut c, &["CLIENT", "DURABILITY", "none"]);
    let before = held(&mut c);
    for i in 0..20 {
        let _: () = q(&mut c, &["SET", &format!("n{i}"), "v"]);
    }
    assert_eq!(held(&mut c), before, "no reply at `none` is held");

    let _: () = q(&mut c, &["CLIENT", "DURABILITY", "full"]);
    for i in 0..20 {
        let _: () = q(&mut c, &["SET", &format!("f{i}"), "v"]);
    }
    let after = held(&mut c);
    // Each waits for its own fsync, unless (a preempted thread) the fsync
    // was done before its reply was ready: then it goes out unheld.
    assert!(
        after > before && after <= before + 20,
        "{} of 20 `full` SET replies held",
        after - before
    );
    let avg: f64 = info_field(&mut c, "persistence", "wal_avg_reply_wait_us")
        .parse()
        .unwrap();
    assert!(avg > 0.0, "an fsync takes time: {avg}");

    let body = scrape(port);
    let count = sample(&body, "durakv_reply_wait_seconds_count");
    assert_eq!(count, after as f64);
    assert_eq!(
        sample(&body, "durakv_reply_wait_seconds_bucket{le=\"+Inf\"}"),
        count
    );
    assert!(sample(&body, "durakv_reply_wait_seconds_sum") > 0.0);
    assert_eq!(sample(&body, "durakv_wal_replies_held_total"), count);
    assert!(body.contains("# TYPE durakv_reply_wait_seconds histogram"));
}

/// Every line is a comment or a sample Prometheus can parse: a name, labels
/// in braces, and a number; and every name was given a TYPE.
#[test]
fn the_exposition_is_well_formed() {
    let (server, port) = start();
    let mut c = server.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let body = scrape(port);
    let mut typed = std::collections::HashSet::new();
    let mut samples = 0;
    for line in body.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.insert(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let name = series.split('{').next().unwrap();
        assert!(
            name.starts_with("durakv_")
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{line}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|x| name.strip_suffix(x).filter(|f| typed.contains(*f)))
            .unwrap_or(name);
        assert!(typed.contains(family), "no TYPE before {line}");
        if let Some(labels) = series.strip_prefix(name) {
            assert!(
                labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                "{line}"
            );
        }
        assert!(value.parse::<f64>().is_ok(), "{line}");
        samples += 1;
    }
    assert!(samples > 100, "only {samples} samples");
}

#[test]
fn other_paths_and_methods_are_refused_and_bad_requests_harm_nothing() {
    let (server, port) = start();
    let (status, _, _) = http(
        port,
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, headers, _) = http(
        port,
        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    assert!(headers.contains("allow: get, head"), "{headers}");
    // Not HTTP at all.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"*1\r\n$4\r\nPING\r\n\xff\xfe\r\n\r\n")
        .unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert!(
        reply.starts_with(b"HTTP/1.1 400"),
        "{:?}",
        String::from_utf8_lossy(&reply)
    );
    // Idle connections past the endpoint's 16 are closed at once, and
    // scrapes work again once they go. Which ones are closed depends on
    // when the connections above let go of their slots (on a loaded
    // machine, after some of these are accepted), so the test counts:
    // of 17 idle connections, at most 16 stay open.
    let idle: Vec<TcpStream> = (0..17)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let mut closed = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while closed == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        closed = idle
            .iter()
            .filter(|s| {
                s.set_nonblocking(true).unwrap();
                let mut buf = [0u8; 16];
                matches!((&**s).read(&mut buf), Ok(0))
            })
            .count();
    }
    assert!(closed >= 1, "17 idle connections were all left open");
    drop(idle);
    eventually("scrapes are served again", || {
        TcpStream::connect(("127.0.0.1", port))
            .and_then(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(5)))?;
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
                let mut r = Vec::new();
                s.read_to_end(&mut r)?;
                Ok(r.starts_with(b"HTTP/1.1 200"))
            })
            .unwrap_or(false)
    });
    let mut c = server.conn();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

/// CONFIG SET turns the endpoint on, moves it and turns it off, as it moves
/// `port`; a port that cannot be bound is refused and changes nothing.
#[test]
fn config_set_moves_the_endpoint() {
    let server = Server::start(&[]);
    let mut c = server.conn();
    let first = free_port();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "metrics-port", &first.to_string()],
    );
    assert!(scrape(first).contains("durakv_used_memory "));

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let e = try_q::<()>(&mut c, &["CONFIG", "SET", "metrics-port", &port]).unwrap_err();
    assert!(
        error_text(&e).contains("'metrics-port') - Unable to listen on this port"),
        "{e}"
    );
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "metrics-port"]);
    assert_eq!(got, ["metrics-port", &first.to_string()]);
    assert!(
        scrape(first).contains("durakv_used_memory "),
        "still served"
    );

    let second = free_port();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "metrics-port", &second.to_string()],
    );
    assert!(scrape(second).contains("durakv_used_memory "));
    eventually("the old port is closed", || {
        TcpStream::connect(("127.0.0.1", first)).is_err()
    });

    let _: () = q(&mut c, &["CONFIG", "SET", "metrics-port", "0"]);
    eventually("the endpoint is off", || {
        TcpStream::connect(("127.0.0.1", second)).is_err()
    });
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn the_endpoint_is_off_unless_a_port_is_set_and_a_taken_port_stops_the_start() {
    let server = Server::start(&[]);
    let mut c = server.conn();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "metrics-port"]);
    assert_eq!(got, ["metrics-port", "0"]);
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "metrics-bind"]);
    assert_eq!(got, ["metrics-bind", "127.0.0.1"]);

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(binary())
        .args(["serve", "--port", "0", "--metrics-port", &port, "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("metrics endpoint"), "{stderr}");
}
