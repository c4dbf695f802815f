//! `repl-timeout` over real sockets: a replica drops a primary that went
//! silent (a SIGSTOPped process keeps its connections open, as a host cut
//! off by the network does), a primary drops a replica that stopped
//! acknowledging or stopped reading, and both links come back when the
//! peer does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{eventually, info_field, q, raw_full_sync_and_link, Server};
use redis::Connection;
use std::io::Read;
use std::time::{Duration, Instant};

fn link_up(r: &mut Connection) -> bool {
    info_field(r, "replication", "master_link_status") == "up"
}

fn replicas(p: &mut Connection) -> String {
    info_field(p, "replication", "connected_slaves")
}

/// Polls `f` for up to `secs` seconds; how long it took.
fn within(secs: u64, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// A replica with `extra` settings following `primary`, link up.
fn follow(primary: &Server, extra: &[&str]) -> (Server, Connection) {
    let replicaof = format!("127.0.0.1 {}", primary.port);
    let mut args = vec!["--replicaof", replicaof.as_str()];
    args.extend_from_slice(extra);
    let replica = Server::start(&args);
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    (replica, r)
}

#[test]
fn a_replica_drops_a_primary_gone_silent_and_resumes_when_it_returns() {
    // An idle primary is heard from only through its PINGs: their period
    // must stay below the replica's repl-timeout, as in Redis.
    let primary = Server::start(&["--repl-ping-replica-period", "1"]);
    let mut p = primary.conn();
    let _: () = q(&mut p, &["SET", "before", "1"]);
    let (_replica, mut r) = follow(&primary, &["--repl-timeout", "2"]);
    let v: Vec<String> = q(&mut r, &["CONFIG", "GET", "repl-timeout"]);
    assert_eq!(v, ["repl-timeout", "2"]);
    primary.signal("STOP");
    // Its ACKs every second must not keep the silent link alive.
    let took = within(15, "the replica to drop the link", || !link_up(&mut r));
    // The last PING or ACK came up to a second before the stop.
    assert!(took >= Duration::from_millis(900), "dropped after {took:?}");
    primary.signal("CONT");
    within(15, "the link to come back", || link_up(&mut r));
    let _: () = q(&mut p, &["SET", "after", "2"]);
    eventually("the write after the return", || {
        q::<Option<String>>(&mut r, &["GET", "after"]).as_deref() == Some("2")
    });
    assert_eq!(info_field(&mut p, "stats", "sync_full"), "1");
    assert_eq!(info_field(&mut p, "stats", "sync_partial_ok"), "1");
}

#[test]
fn a_primary_drops_a_replica_gone_silent_and_takes_it_back() {
    let primary = Server::start(&["--repl-timeout", "2"]);
    let mut p = primary.conn();
    let (replica, mut r) = follow(&primary, &[]);
    eventually("the primary counts it", || replicas(&mut p) == "1");
    // Live, it ACKs every second, well within 2 s.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(replicas(&mut p), "1", "a live replica was dropped");
    replica.signal("STOP");
    let took = within(15, "the primary to drop it", || replicas(&mut p) == "0");
    // The last PING or ACK came up to a second before the stop.
    assert!(took >= Duration::from_millis(900), "dropped after {took:?}");
    replica.signal("CONT");
    within(15, "the replica back", || {
        replicas(&mut p) == "1" && link_up(&mut r)
    });
    let _: () = q(&mut p, &["SET", "k", "v"]);
    eventually("the write to reach it", || {
        q::<Option<String>>(&mut r, &["GET", "k"]).as_deref() == Some("v")
    });
    // CONFIG SET applies at once: at 60 s a stopped replica stays.
    let _: () = q(&mut p, &["CONFIG", "SET", "repl-timeout", "60"]);
    replica.signal("STOP");
    std::thread::sleep(Duration::from_secs(4));
    let still = replicas(&mut p);
    replica.signal("CONT");
    assert_eq!(still, "1");
}

/// A replica that stops reading stalls the primary's write to it; its
/// output limit is enforced during that write, so what it has yet to take
/// (which the backlog keeps for it) stops growing at the limit, long
/// before repl-timeout.
#[test]
fn a_replica_that_stops_reading_is_dropped_at_its_output_limit() {
    let primary = Server::start(&[
        "--client-output-buffer-limit",
        "replica 4mb 0 0",
        "--repl-backlog-size",
        "1mb",
    ]);
    let mut p = primary.conn();
    let (rdb, link) = raw_full_sync_and_link(primary.port, &["REPLCONF capa psync2", "PSYNC ? -1"]);
    assert!(rdb.starts_with(b"REDIS"));
    eventually("the primary counts it", || replicas(&mut p) == "1");
    let value = "x".repeat(64 * 1024);
    let start = Instant::now();
    let mut written = 0;
    // Far more than the socket buffers hold: 40 MB, never read.
    while written < 640 && replicas(&mut p) == "1" {
        for i in 0..32 {
            let _: () = q(&mut p, &["SET", &format!("k{}", written + i), &value]);
        }
        written += 32;
    }
    within(10, "the primary to drop it", || replicas(&mut p) == "0");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "dropped by repl-timeout, not by its limit"
    );
    let n: i64 = q(&mut p, &["DBSIZE"]);
    assert_eq!(n, written as i64);
    drop(link);
}

/// A client that came with SYNC never acknowledges (`redis-cli --replica`
/// does that), and repl-timeout leaves it alone, as in Redis.
#[test]
fn a_sync_client_is_not_timed_out_for_its_silence() {
    let primary = Server::start(&["--repl-timeout", "1"]);
    let mut p = primary.conn();
    let (_, mut reader) = raw_full_sync_and_link(primary.port, &["SYNC"]);
    eventually("the primary counts it", || replicas(&mut p) == "1");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(replicas(&mut p), "1");
    let _: () = q(&mut p, &["SET", "k", "v"]);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("SET") {
        let n = reader.read(&mut buf).unwrap();
        assert!(n > 0, "the primary closed the link");
        seen.extend_from_slice(&buf[..n]);
    }
}
