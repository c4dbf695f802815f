//! The `replicated` durability level, WAIT/WAITAOF with replicas, Redis's
//! `min-replicas-to-write`, and a replica's partial resync after a restart,
//! over real sockets between durakv servers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{eventually, info_field, q, Server};
use redis::Connection;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];

fn ok(c: &mut Connection, args: &[&str]) {
    let _: redis::Value = q(c, args);
}

fn link_up(r: &mut Connection) -> bool {
    info_field(r, "replication", "master_link_status") == "up"
}

fn replica_of(primary: &Server, extra: &[&str]) -> Server {
    let target = format!("127.0.0.1 {}", primary.port);
    let mut args = vec!["--replicaof", &target];
    args.extend_from_slice(&DEBUG);
    args.extend_from_slice(extra);
    let replica = Server::start(&args);
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    replica
}

#[test]
fn replicated_write_without_replica_fails_after_timeout_then_succeeds() {
    let primary = Server::start(&[
        "--durability",
        "replicated",
        "--replicated-timeout-ms",
        "300",
    ]);
    let mut p = primary.conn();
    let started = Instant::now();
    let e = common::err(&mut p, &["SET", "k", "v1"]);
    assert!(e.starts_with("NOREPLICAS "), "{e}");
    assert!(started.elapsed() >= Duration::from_millis(250));
    // Applied and durable here: a `full` read sees it.
    ok(&mut p, &["CLIENT", "DURABILITY", "full"]);
    let v: String = q(&mut p, &["GET", "k"]);
    assert_eq!(v, "v1");
    // At `replicated` the read would reveal it, so it fails the same way.
    ok(&mut p, &["CLIENT", "DURABILITY", "replicated"]);
    let e = common::err(&mut p, &["GET", "k"]);
    assert!(e.starts_with("NOREPLICAS "), "{e}");

    let _replica = replica_of(&primary, &[]);
    ok(&mut p, &["CONFIG", "SET", "replicated-timeout-ms", "10000"]);
    let started = Instant::now();
    ok(&mut p, &["SET", "k", "v2"]);
    assert!(started.elapsed() < Duration::from_secs(5));
    let v: String = q(&mut p, &["GET", "k"]);
    assert_eq!(v, "v2");
    let v: Vec<String> = q(&mut p, &["CONFIG", "GET", "min-replicas-to-ack"]);
    assert_eq!(v, ["min-replicas-to-ack", "1"]);
    // With min-replicas-to-ack 0 the level is `full`.
    ok(&mut p, &["CONFIG", "SET", "min-replicas-to-ack", "0"]);
    ok(&mut p, &["SET", "k", "v3"]);
}

#[test]
fn waitaof_counts_replicas_with_the_write_durable() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    let none: Vec<i64> = q(&mut p, &["WAITAOF", "0", "1", "100"]);
    assert_eq!(none, vec![1, 0]);
    let replica = replica_of(&primary, &[]);
    ok(&mut p, &["SET", "a", "1"]);
    let got: Vec<i64> = q(&mut p, &["WAITAOF", "0", "1", "5000"]);
    assert_eq!(got, vec![1, 1]);
    ok(&mut p, &["INCR", "a"]);
    let got: Vec<i64> = q(&mut p, &["WAITAOF", "1", "1", "5000"]);
    assert_eq!(got, vec![1, 1]);
    let n: i64 = q(&mut p, &["WAIT", "1", "5000"]);
    assert_eq!(n, 1);
    // Asking for two when there is one: the timeout, then the count.
    let started = Instant::now();
    let got: Vec<i64> = q(&mut p, &["WAITAOF", "1", "2", "200"]);
    assert_eq!(got, vec![1, 1]);
    assert!(started.elapsed() >= Duration::from_millis(150));
    let mut r = replica.conn();
    let v: String = q(&mut r, &["GET", "a"]);
    assert_eq!(v, "2");
    let e = common::err(&mut r, &["WAITAOF", "0", "1", "10"]);
    assert!(e.contains("replica"), "{e}");
}

#[test]
fn min_replicas_to_write_refuses_writes() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    ok(&mut p, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    let e = common::err(&mut p, &["SET", "a", "1"]);
    assert_eq!(e, "NOREPLICAS Not enough good replicas to write.");
    assert_eq!(
        info_field(&mut p, "replication", "min_slaves_good_slaves"),
        "0"
    );
    // Reads still work.
    let v: Option<String> = q(&mut p, &["GET", "a"]);
    assert_eq!(v, None);
    let _replica = replica_of(&primary, &[]);
    eventually("the replica counts as good", || {
        info_field(&mut p, "replication", "min_slaves_good_slaves") == "1"
    });
    ok(&mut p, &["SET", "a", "1"]);
    ok(&mut p, &["CONFIG", "SET", "min-replicas-to-write", "2"]);
    let e = common::err(&mut p, &["SET", "a", "2"]);
    assert_eq!(e, "NOREPLICAS Not enough good replicas to write.");
    ok(&mut p, &["CONFIG", "SET", "min-replicas-to-write", "0"]);
    ok(&mut p, &["SET", "a", "2"]);
}

/// Writers at `replicated` under load; the primary is killed with kill -9,
/// then the replica too; every acknowledged write is on the restarted
/// replica, which is then promoted and read.
#[test]
fn acknowledged_replicated_writes_survive_primary_and_replica_crash() {
    let mut primary = Server::start(&["--durability", "replicated"]);
    let mut replica = replica_of(&primary, &[]);
    let acked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for t in 0..6 {
        let client = primary.client();
        let acked = acked.clone();
        let stop = stop.clone();
        writers.push(std::thread::spawn(move || {
            let Ok(mut c) = client.get_connection() else {
                return;
            };
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("k{t}:{}", i % 50);
                let val = format!("{t}-{i}");
                let r: redis::RedisResult<redis::Value> =
                    redis::cmd("SET").arg(&key).arg(&val).query(&mut c);
                match r {
                    Ok(_) => acked.lock().unwrap().push((key, val)),
                    Err(e) if e.is_io_error() || e.is_connection_dropped() => return,
                    Err(e) => panic!("unexpected error: {e}"),
                }
                i += 1;
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(1500));
    primary.kill9();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 100,
        "only {} writes acknowledged",
        acked.len()
    );
    // The last acknowledged value of each key (each key has one writer).
    let mut last = std::collections::HashMap::new();
    let mut order = std::collections::HashMap::new();
    for (n, (k, v)) in acked.iter().enumerate() {
        last.insert(k.clone(), v.clone());
        order.insert(v.clone(), n);
    }
    replica.kill9();
    replica.restart();
    let mut r = replica.conn();
    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    for (k, v) in &last {
        let got: Option<String> = q(&mut r, &["GET", k]);
        let got = got.unwrap_or_else(|| panic!("acknowledged key {k} lost"));
        // The replica may hold a later write (applied, not acknowledged),
        // never an earlier one.
        let seq = |v: &str| v.split('-').nth(1).unwrap().parse::<u64>().unwrap();
        assert!(
            seq(&got) >= seq(v),
            "key {k}: acknowledged {v}, replica has {got}"
        );
    }
    ok(&mut r, &["SET", "after", "promotion"]);
}

fn stat(c: &mut Connection, field: &str) -> String {
    info_field(c, "stats", field)
}

fn same_data(p: &mut Connection, r: &mut Connection) -> bool {
    let dp: String = q(p, &["DEBUG", "DIGEST"]);
    let dr: String = q(r, &["DEBUG", "DIGEST"]);
    let sizes = |c: &mut Connection| {
        (0..4)
            .map(|db| {
                ok(c, &["SELECT", &db.to_string()]);
                let n: i64 = q(c, &["DBSIZE"]);
                n
            })
            .collect::<Vec<_>>()
    };
    dp == dr && sizes(p) == sizes(r)
}

/// A replica killed with kill -9 and restarted continues from the offset
/// its log recorded (+CONTINUE, counted in `sync_partial_ok`), including
/// the database the stream had selected, and converges.
#[test]
fn replica_restart_resumes_with_partial_resync() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    for i in 0..200 {
        ok(&mut p, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    ok(&mut p, &["RPUSH", "l", "a", "b"]);
    let mut replica = replica_of(&primary, &[]);
    ok(&mut p, &["MULTI"]);
    ok(&mut p, &["INCR", "n"]);
    ok(&mut p, &["LPUSH", "l", "z"]);
    ok(&mut p, &["EXEC"]);
    ok(&mut p, &["SELECT", "3"]);
    ok(&mut p, &["SET", "in3", "x"]);
    let got: Vec<i64> = q(&mut p, &["WAITAOF", "0", "1", "5000"]);
    assert_eq!(got, vec![1, 1]);
    assert_eq!(stat(&mut p, "sync_full"), "1");

    replica.kill9();
    // Still in database 3 on the stream: no SELECT precedes these.
    ok(&mut p, &["SET", "in3b", "y"]);
    ok(&mut p, &["INCR", "in3n"]);
    ok(&mut p, &["SELECT", "0"]);
    ok(&mut p, &["DEL", "k1"]);
    ok(&mut p, &["LPOP", "l"]);

    replica.restart();
    let mut r = replica.conn();
    eventually("the link is up again", || link_up(&mut r));
    eventually("partial resync", || stat(&mut p, "sync_partial_ok") == "1");
    assert_eq!(stat(&mut p, "sync_full"), "1");
    ok(&mut p, &["SET", "after", "restart"]);
    let n: i64 = q(&mut p, &["WAIT", "1", "5000"]);
    assert_eq!(n, 1);
    eventually("the replica converges", || same_data(&mut p, &mut r));
    ok(&mut r, &["SELECT", "3"]);
    let v: String = q(&mut r, &["GET", "in3b"]);
    assert_eq!(v, "y");
}

/// A read at `replicated` of a write that is durable here but not yet on a
/// replica (its replica is stopped) is held, then fails past the timeout;
/// once the replica runs again the same read is answered.
#[test]
fn replicated_reads_wait_for_the_replica() {
    let primary = Server::start(&[
        "--durability",
        "replicated",
        "--replicated-timeout-ms",
        "400",
    ]);
    let replica = replica_of(&primary, &[]);
    let mut p = primary.conn();
    ok(&mut p, &["SET", "k", "1"]);
    replica.signal("STOP");
    let mut w = primary.conn();
    ok(&mut w, &["CLIENT", "DURABILITY", "full"]);
    ok(&mut w, &["SET", "k", "2"]);
    let e = common::err(&mut p, &["GET", "k"]);
    assert!(e.starts_with("NOREPLICAS "), "{e}");
    let e = common::err(&mut p, &["DBSIZE"]);
    assert!(e.starts_with("NOREPLICAS "), "{e}");
    replica.signal("CONT");
    ok(&mut p, &["CONFIG", "SET", "replicated-timeout-ms", "10000"]);
    let v: String = q(&mut p, &["GET", "k"]);
    assert_eq!(v, "2");
}

/// A replica shut down cleanly (its final checkpoint covers every record)
/// still continues from its position: recovery reads the position from
/// records the checkpoint covers.
#[test]
fn replica_restart_after_checkpoint_resumes_with_partial_resync() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    let mut replica = replica_of(&primary, &[]);
    for i in 0..100 {
        ok(&mut p, &["RPUSH", "l", &i.to_string()]);
    }
    let got: Vec<i64> = q(&mut p, &["WAITAOF", "0", "1", "5000"]);
    assert_eq!(got, vec![1, 1]);
    let mut r = replica.conn();
    ok(&mut r, &["SAVE"]);
    assert_eq!(replica.terminate(), Some(0));
    ok(&mut p, &["RPUSH", "l", "after"]);
    replica.restart();
    let mut r = replica.conn();
    eventually("partial resync", || stat(&mut p, "sync_partial_ok") == "1");
    assert_eq!(stat(&mut p, "sync_full"), "1");
    let n: i64 = q(&mut p, &["WAIT", "1", "5000"]);
    assert_eq!(n, 1);
    eventually("the replica converges", || same_data(&mut p, &mut r));
    ok(&mut r, &["SELECT", "0"]);
    let n: i64 = q(&mut r, &["LLEN", "l"]);
    assert_eq!(n, 101);
}
