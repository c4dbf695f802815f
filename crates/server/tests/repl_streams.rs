//! Consumer groups reach replicas: deliveries (XREADGROUP, with and
//! without NOACK, new entries and history), claims (XCLAIM with LASTID,
//! XAUTOCLAIM over a deleted entry), XSETID and XGROUP CREATE MKSTREAM leave
//! a real Redis replica and a durakv replica with the primary's entries,
//! groups, consumers and pending lists, so a failover neither loses
//! pending entries nor delivers entries again; and a durakv replica of
//! Redis applies the trims Redis propagates. The Redis parts skip with a
//! message when `redis-server` is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{caught_up, eventually, info_field, q, RealRedis, Server};
use redis::{Connection, Value};

fn ok(c: &mut Connection, args: &[&str]) {
    let _: Value = q(c, args);
}

fn link_up(r: &mut Connection) -> bool {
    info_field(r, "replication", "master_link_status") == "up"
}

/// A reply flattened to text, leaving out what each server reads from its
/// own clock: consumers' seen and active times, and idle times.
fn flat(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Array(items) | Value::Set(items) => {
            let mut skip = false;
            for item in items {
                if skip {
                    skip = false;
                    continue;
                }
                if let Value::BulkString(b) = item {
                    if matches!(&b[..], b"seen-time" | b"active-time") {
                        skip = true;
                        continue;
                    }
                }
                flat(item, out);
            }
        }
        Value::Map(pairs) => {
            for (k, v) in pairs {
                flat(k, out);
                flat(v, out);
            }
        }
        Value::BulkString(b) => out.push(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => out.push(s.clone()),
        Value::Int(n) => out.push(n.to_string()),
        Value::Nil => out.push("nil".into()),
        other => out.push(format!("{other:?}")),
    }
}

/// What a server holds for the streams `s` and `empty`: everything XINFO
/// STREAM FULL shows, and the pending lists with delivery counts.
fn groups_state(c: &mut Connection) -> Vec<String> {
    let mut out = Vec::new();
    flat(&q(c, &["XINFO", "STREAM", "s", "FULL"]), &mut out);
    let pending: Vec<Vec<Value>> = q(c, &["XPENDING", "s", "g", "-", "+", "100"]);
    for p in pending {
        // ID, consumer, idle (own clock), count.
        flat(&p[0], &mut out);
        flat(&p[1], &mut out);
        flat(&p[3], &mut out);
    }
    flat(&q(c, &["XINFO", "STREAM", "empty", "FULL"]), &mut out);
    out
}

/// Every consumer-group change that has a propagated form.
fn group_traffic(p: &mut Connection) {
    for i in 1..=8 {
        ok(p, &["XADD", "s", &format!("{i}-0"), "f", &format!("v{i}")]);
    }
    ok(p, &["XGROUP", "CREATE", "s", "g", "0"]);
    ok(p, &["XGROUP", "CREATE", "empty", "g2", "$", "MKSTREAM"]);
    ok(
        p,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    ok(
        p,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "bob",
            "NOACK",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">",
        ],
    );
    // Nothing pending for carol: she is only seen.
    ok(
        p,
        &["XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"],
    );
    // alice's history: delivered again.
    ok(
        p,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"],
    );
    ok(p, &["XDEL", "s", "2-0"]);
    ok(p, &["XCLAIM", "s", "g", "carol", "0", "1-0"]);
    // 2-0 was deleted: XAUTOCLAIM drops it from the pending list.
    ok(
        p,
        &["XAUTOCLAIM", "s", "g", "dave", "0", "0-0", "COUNT", "10"],
    );
    ok(
        p,
        &["XCLAIM", "s", "g", "erin", "0", "9-9", "LASTID", "5-0"],
    );
    ok(
        p,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "frank",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    ok(p, &["XACK", "s", "g", "6-0"]);
    ok(p, &["XGROUP", "CREATECONSUMER", "s", "g", "gina"]);
    ok(p, &["XGROUP", "DELCONSUMER", "s", "g", "alice"]);
    ok(p, &["XTRIM", "s", "MINID", "3-0"]);
    ok(
        p,
        &[
            "XSETID",
            "s",
            "20-0",
            "ENTRIESADDED",
            "30",
            "MAXDELETEDID",
            "3-0",
        ],
    );
    ok(p, &["XGROUP", "SETID", "s", "g", "7-0", "ENTRIESREAD", "6"]);
    ok(
        p,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "frank",
            "COUNT",
            "5",
            "STREAMS",
            "s",
            ">",
        ],
    );
}

#[test]
fn consumer_groups_reach_a_durakv_replica() {
    let primary = Server::start(&[]);
    let mut p = primary.conn();
    let replica = Server::start(&[]);
    let mut r = replica.conn();
    ok(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
    );
    eventually("the link is up", || link_up(&mut r));
    group_traffic(&mut p);
    caught_up(&mut p, &mut r);
    let want = groups_state(&mut p);
    assert_eq!(groups_state(&mut r), want);
    // After a failover the group goes on where it was: nothing new to
    // deliver, and the pending entries are still there to claim.
    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    let next: Value = q(
        &mut r,
        &["XREADGROUP", "GROUP", "g", "h", "STREAMS", "s", ">"],
    );
    assert_eq!(next, Value::Nil);
    let pending: Vec<Value> = q(&mut r, &["XPENDING", "s", "g"]);
    assert_eq!(pending[0], Value::Int(3), "{pending:?}");
}

#[test]
fn consumer_groups_reach_a_redis_replica() {
    let primary = Server::start(&[]);
    let mut p = primary.conn();
    let port = primary.port.to_string();
    let Some(redis) = RealRedis::start(&["--replicaof", "127.0.0.1", &port]) else {
        return;
    };
    let mut r = redis.conn();
    eventually("the link is up", || link_up(&mut r));
    group_traffic(&mut p);
    caught_up(&mut p, &mut r);
    let want = groups_state(&mut p);
    assert_eq!(groups_state(&mut r), want);
}

/// Redis propagates an approximate trim as the exact one it made and
/// keeps its LIMIT (`XADD s MAXLEN = 202 LIMIT 50 ...`), which only a
/// primary may send: a durakv replica of Redis applies it.
#[test]
fn a_durakv_replica_of_redis_applies_its_trims() {
    let Some(redis) = RealRedis::start(&[]) else {
        return;
    };
    let mut p = redis.conn();
    let replica = Server::start(&["--replicaof", &format!("127.0.0.1 {}", redis.port)]);
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    for i in 1..=300 {
        ok(&mut p, &["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    ok(
        &mut p,
        &[
            "XADD", "s", "MAXLEN", "~", "100", "LIMIT", "50", "301-0", "f", "v",
        ],
    );
    ok(
        &mut p,
        &["XADD", "s", "MINID", "~", "200-0", "302-0", "f", "v"],
    );
    ok(&mut p, &["XTRIM", "s", "MAXLEN", "~", "10", "LIMIT", "120"]);
    caught_up(&mut p, &mut r);
    for args in [&["XLEN", "s"][..], &["XRANGE", "s", "-", "+", "COUNT", "1"]] {
        assert_eq!(
            q::<Value>(&mut r, args),
            q::<Value>(&mut p, args),
            "{args:?}"
        );
    }
    // From a client it is still Redis's syntax error.
    let e = common::err(&mut p, &["XTRIM", "s", "MAXLEN", "=", "10", "LIMIT", "5"]);
    let mine = common::err(
        &mut Server::start(&[]).conn(),
        &["XTRIM", "s", "MAXLEN", "=", "10", "LIMIT", "5"],
    );
    assert_eq!(mine, e);
}
