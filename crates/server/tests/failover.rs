//! FAILOVER over real sockets: a primary hands over to a replica under a
//! write load without losing an acknowledged write; Redis's errors in
//! Redis's order; a timeout, ABORT, FORCE, and a target that refuses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, eventually, info_field, q, try_q, RealRedis, Server};
use redis::Connection;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn info(c: &mut Connection, field: &str) -> String {
    info_field(c, "replication", field)
}

fn stat(c: &mut Connection, field: &str) -> u64 {
    info_field(c, "stats", field).parse().unwrap_or(0)
}

fn role(c: &mut Connection) -> String {
    info(c, "role")
}

fn replica_of(primary: &Server) -> Server {
    Server::start(&["--replicaof", &format!("127.0.0.1 {}", primary.port)])
}

/// Waits until `r` streams from its primary `p` and has applied all of it.
fn synced(p: &mut Connection, r: &mut Connection) {
    eventually("the replica to catch up", || {
        info(r, "master_link_status") == "up"
            && info(r, "master_repl_offset") == info(p, "master_repl_offset")
    });
}

fn state(c: &mut Connection) -> String {
    info(c, "master_failover_state")
}

/// FAILOVER TO the server on `port`, waited for to its end.
fn hand_over(c: &mut Connection, port: u16) {
    let _: () = q(c, &["FAILOVER", "TO", "127.0.0.1", &port.to_string()]);
    wait_state(c, "no-failover");
}

/// Waits for `master_failover_state` to read `want`; on a timeout, says
/// where the server stood.
fn wait_state(c: &mut Connection, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while state(c) != want {
        if Instant::now() > deadline {
            let now: String = q(c, &["INFO", "replication"]);
            panic!("master_failover_state never became {want}:\n{now}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn failover_under_writes_loses_no_acknowledged_write() {
    let a = Server::start(&[]);
    let b = replica_of(&a);
    let c = replica_of(&a);
    let (mut ac, mut bc, mut cc) = (a.conn(), b.conn(), c.conn());
    let _: () = q(&mut ac, &["SET", "before", "1"]);
    synced(&mut ac, &mut bc);
    synced(&mut ac, &mut cc);
    let psyncs = stat(&mut bc, "sync_partial_ok");
    let fulls = stat(&mut bc, "sync_full");

    // Writes until the old primary answers READONLY: every OK it gave
    // must be on the new primary.
    let mut wc = a.conn();
    let writer = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut acked = Vec::new();
        for i in 0u64.. {
            assert!(Instant::now() < deadline, "writes never turned READONLY");
            let k = format!("w:{i}");
            match try_q::<()>(&mut wc, &["SET", &k, &i.to_string()]) {
                Ok(()) => acked.push(k),
                Err(e) if e.to_string().contains("read only replica") => break,
                Err(e) => panic!("SET {k}: {e}"),
            }
        }
        acked
    });
    std::thread::sleep(Duration::from_millis(300));
    hand_over(&mut ac, b.port);
    let acked = writer.join().unwrap();
    assert!(acked.len() > 10, "the writer ran ({} writes)", acked.len());

    assert_eq!(role(&mut ac), "slave");
    assert_eq!(role(&mut bc), "master");
    assert_eq!(info(&mut ac, "master_port"), b.port.to_string());
    let mut keys = vec!["before".to_string()];
    keys.extend(acked);
    for k in &keys {
        let v: Option<String> = q(&mut bc, &["GET", k]);
        assert!(v.is_some(), "{k} was acknowledged by the old primary");
    }
    // The old primary continued from the new one's backlog.
    assert_eq!(stat(&mut bc, "sync_partial_ok"), psyncs + 1);
    assert_eq!(stat(&mut bc, "sync_full"), fulls);
    // Writes go to the new primary; both others follow it.
    let _: () = q(&mut cc, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    let _: () = q(&mut bc, &["SET", "after", "1"]);
    synced(&mut bc, &mut ac);
    synced(&mut bc, &mut cc);
    let n: i64 = q(&mut bc, &["DBSIZE"]);
    assert_eq!(n, keys.len() as i64 + 1);
    for r in [&mut ac, &mut cc] {
        let m: i64 = q(r, &["DBSIZE"]);
        assert_eq!(m, n);
    }
}

#[test]
fn failover_errors_in_redis_order() {
    let a = Server::start(&[]);
    let mut ac = a.conn();
    for (args, want) in [
        (
            &["FAILOVER"][..],
            "ERR FAILOVER requires connected replicas.",
        ),
        (&["FAILOVER", "ABORT"], "ERR No failover in progress."),
        (&["FAILOVER", "ABORT", "TIMEOUT", "5"], "ERR syntax error"),
        (&["FAILOVER", "TO", "h"], "ERR syntax error"),
        (
            &["FAILOVER", "TIMEOUT", "1", "TIMEOUT", "2"],
            "ERR syntax error",
        ),
        (
            &["FAILOVER", "TO", "h", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["FAILOVER", "TIMEOUT", "0"],
            "ERR FAILOVER timeout must be greater than 0",
        ),
        (
            &["FAILOVER", "FORCE"],
            "ERR FAILOVER requires connected replicas.",
        ),
        (
            &["PSYNC", "x", "1", "FAILOVER"],
            "ERR PSYNC FAILOVER can't be sent to a master.",
        ),
    ] {
        assert_eq!(err(&mut ac, args), want, "{args:?}");
    }
    let b = replica_of(&a);
    let mut bc = b.conn();
    synced(&mut ac, &mut bc);
    let bport = b.port.to_string();
    for (args, want) in [
        (
            &["FAILOVER", "FORCE"][..],
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ),
        (
            &["FAILOVER", "TO", "127.0.0.1", &bport, "FORCE"],
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ),
        (
            &["FAILOVER", "TO", "127.0.0.1", "1"],
            "ERR FAILOVER target HOST and PORT is not a replica.",
        ),
        (
            &["FAILOVER", "TO", "localhost", &bport],
            "ERR FAILOVER target HOST and PORT is not a replica.",
        ),
    ] {
        assert_eq!(err(&mut ac, args), want, "{args:?}");
    }
    assert_eq!(
        err(&mut bc, &["FAILOVER"]),
        "ERR FAILOVER is not valid when server is a replica."
    );
    assert_eq!(
        err(&mut bc, &["PSYNC", "not-my-id", "1", "FAILOVER"]),
        "ERR PSYNC FAILOVER replid must match my replid."
    );
    assert_eq!(state(&mut ac), "no-failover");
    assert_eq!(state(&mut bc), "no-failover");
}

#[test]
fn a_failover_times_out_or_is_aborted_and_writes_go_on() {
    let a = Server::start(&[]);
    let b = replica_of(&a);
    let (mut ac, mut bc) = (a.conn(), b.conn());
    synced(&mut ac, &mut bc);
    let bport = b.port.to_string();

    // A replica that never acknowledges: the timeout gives up.
    b.signal("STOP");
    let _: () = q(&mut ac, &["SET", "k", "1"]);
    let _: () = q(
        &mut ac,
        &["FAILOVER", "TO", "127.0.0.1", &bport, "TIMEOUT", "300"],
    );
    assert_eq!(state(&mut ac), "waiting-for-sync");
    wait_state(&mut ac, "no-failover");
    assert_eq!(role(&mut ac), "master");
    let _: () = q(&mut ac, &["SET", "k", "2"]);

    // Writes wait while it waits for sync, reads do not; ABORT frees them.
    let _: () = q(
        &mut ac,
        &["FAILOVER", "TO", "127.0.0.1", &bport, "TIMEOUT", "60000"],
    );
    assert_eq!(state(&mut ac), "waiting-for-sync");
    let v: String = q(&mut ac, &["GET", "k"]);
    assert_eq!(v, "2");
    let mut wc = a.conn();
    let (tx, rx) = mpsc::channel();
    let held = std::thread::spawn(move || {
        let r = try_q::<String>(&mut wc, &["SET", "k", "3"]).map_err(|e| e.to_string());
        tx.send(r).unwrap();
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "a write ran while the failover waited for sync"
    );
    // CLIENT UNPAUSE ends CLIENT PAUSE only, not the failover's hold.
    let _: () = q(&mut ac, &["CLIENT", "UNPAUSE"]);
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    let _: () = q(&mut ac, &["FAILOVER", "ABORT"]);
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap(),
        "OK"
    );
    held.join().unwrap();
    assert_eq!(state(&mut ac), "no-failover");
    assert_eq!(role(&mut ac), "master");

    b.signal("CONT");
    synced(&mut ac, &mut bc);
    let v: String = q(&mut bc, &["GET", "k"]);
    assert_eq!(v, "3");
}

#[test]
fn force_hands_over_to_a_replica_that_did_not_catch_up() {
    let a = Server::start(&[]);
    let b = replica_of(&a);
    let (mut ac, mut bc) = (a.conn(), b.conn());
    synced(&mut ac, &mut bc);
    b.signal("STOP");
    let _: () = q(&mut ac, &["SET", "case", "2"]);
    let _: () = q(
        &mut ac,
        &[
            "FAILOVER",
            "TO",
            "127.0.0.1",
            &b.port.to_string(),
            "TIMEOUT",
            "100",
            "FORCE",
        ],
    );
    eventually("the forced hand-over", || {
        state(&mut ac) == "failover-in-progress"
    });
    // Never two primaries: the old one is already a replica.
    assert_eq!(role(&mut ac), "slave");
    b.signal("CONT");
    wait_state(&mut ac, "no-failover");
    assert_eq!(role(&mut bc), "master");
    assert_eq!(role(&mut ac), "slave");
    let _: () = q(&mut bc, &["SET", "after", "1"]);
    synced(&mut bc, &mut ac);
    let v: Option<String> = q(&mut ac, &["GET", "after"]);
    assert_eq!(v.as_deref(), Some("1"));
}

#[test]
fn a_target_that_refuses_leaves_the_primary_in_charge() {
    let a = Server::start(&[]);
    let b = replica_of(&a);
    let (mut ac, mut bc) = (a.conn(), b.conn());
    let _: () = q(&mut ac, &["SET", "k", "1"]);
    synced(&mut ac, &mut bc);
    let _: () = q(&mut bc, &["ACL", "SETUSER", "default", "-psync"]);
    hand_over(&mut ac, b.port);
    assert_eq!(role(&mut ac), "master");
    assert_eq!(role(&mut bc), "slave");
    let _: () = q(&mut bc, &["ACL", "SETUSER", "default", "+psync"]);
    let _: () = q(&mut ac, &["SET", "k", "2"]);
    synced(&mut ac, &mut bc);
    let v: String = q(&mut bc, &["GET", "k"]);
    assert_eq!(v, "2");
}

/// The migration path both ways with Redis 7: a Redis primary hands over
/// to its durakv replica, then durakv hands back, each with a partial
/// resync and every key on both.
#[test]
fn failover_between_redis_and_durakv_both_ways() {
    let Some(redis) = RealRedis::start(&["--repl-diskless-sync-delay", "0"]) else {
        return;
    };
    let mut rc = redis.conn();
    let _: () = q(&mut rc, &["SET", "from-redis", "1"]);
    let _: () = q(&mut rc, &["HSET", "h", "a", "1", "b", "2"]);
    let d = Server::start(&["--replicaof", &format!("127.0.0.1 {}", redis.port)]);
    let mut dc = d.conn();
    synced(&mut rc, &mut dc);
    // Redis counts a replica online from its first acknowledgement.
    eventually("Redis to see its replica online", || {
        info(&mut rc, "slave0").contains("state=online")
    });

    hand_over(&mut rc, d.port);
    assert_eq!(role(&mut dc), "master");
    assert_eq!(role(&mut rc), "slave");
    assert_eq!(stat(&mut dc, "sync_partial_ok"), 1);
    let _: () = q(&mut dc, &["SET", "from-durakv", "2"]);
    synced(&mut dc, &mut rc);
    let v: Option<String> = q(&mut rc, &["GET", "from-durakv"]);
    assert_eq!(v.as_deref(), Some("2"));

    let (fulls, psyncs) = (stat(&mut rc, "sync_full"), stat(&mut rc, "sync_partial_ok"));
    hand_over(&mut dc, redis.port);
    assert_eq!(role(&mut rc), "master");
    assert_eq!(role(&mut dc), "slave");
    assert_eq!(stat(&mut rc, "sync_full"), fulls);
    assert_eq!(stat(&mut rc, "sync_partial_ok"), psyncs + 1);
    let _: () = q(&mut rc, &["SET", "back", "3"]);
    synced(&mut rc, &mut dc);
    for k in ["from-redis", "from-durakv", "back"] {
        let v: Option<String> = q(&mut dc, &["GET", k]);
        assert!(v.is_some(), "{k}");
    }
    let n: i64 = q(&mut dc, &["HLEN", "h"]);
    assert_eq!(n, 2);
}
