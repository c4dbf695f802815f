//! Streams over real sockets: ID generation and its errors, trimming
//! (exact, `~` by whole nodes, LIMIT), ranges, consumer groups with their
//! PEL, claims, XINFO, blocking XREAD/XREADGROUP, and durability of entries
//! and group state across kill -9, from the log and from a checkpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use durakv_protocol::Frame;
use redis::{Connection, Value};
use std::collections::HashMap;

type Entries = Vec<(String, Vec<String>)>;

fn ok(c: &mut Connection, args: &[&str]) {
    let _: () = q(c, args);
}

fn ids(entries: &Entries) -> Vec<&str> {
    entries.iter().map(|e| e.0.as_str()).collect()
}

/// A RESP2 map reply (XINFO) as name → value.
fn info(c: &mut Connection, args: &[&str]) -> HashMap<String, Value> {
    let flat: Vec<Value> = q(c, args);
    flat.chunks(2)
        .map(|p| {
            (
                redis::from_redis_value::<String>(p[0].clone()).unwrap(),
                p[1].clone(),
            )
        })
        .collect()
}

fn text(v: &Value) -> String {
    redis::from_redis_value(v.clone()).unwrap()
}

fn int(v: &Value) -> i64 {
    redis::from_redis_value(v.clone()).unwrap()
}

#[test]
fn ids_are_generated_as_redis_does_and_bad_ones_refused() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(q::<String>(c, &["XADD", "s", "5-3", "f", "v"]), "5-3");
    assert_eq!(q::<String>(c, &["XADD", "s", "5-*", "f", "v"]), "5-4");
    assert_eq!(q::<String>(c, &["XADD", "s", "7-*", "f", "v"]), "7-0");
    assert_eq!(q::<String>(c, &["XADD", "s", "8", "f", "v"]), "8-0");
    let auto: String = q(c, &["XADD", "s", "*", "f", "v"]);
    let ms: u64 = auto.split('-').next().unwrap().parse().unwrap();
    assert!(ms > 1_600_000_000_000, "{auto}");
    let smaller =
        "ERR The ID specified in XADD is equal or smaller than the target stream top item";
    assert_eq!(err(c, &["XADD", "s", "8-0", "f", "v"]), smaller);
    assert_eq!(err(c, &["XADD", "s", "6-*", "f", "v"]), smaller);
    assert_eq!(
        err(c, &["XADD", "new", "0-0", "f", "v"]),
        "ERR The ID specified in XADD must be greater than 0-0"
    );
    assert_eq!(q::<i64>(c, &["EXISTS", "new"]), 0);
    assert_eq!(q::<String>(c, &["XADD", "zero", "0-*", "f", "v"]), "0-1");
    assert_eq!(
        err(c, &["XADD", "s", "x-1", "f", "v"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        err(c, &["XADD", "s", "*", "f"]),
        "ERR wrong number of arguments for 'xadd' command"
    );
    let max = "18446744073709551615-18446744073709551615";
    assert_eq!(q::<String>(c, &["XADD", "top", max, "f", "v"]), max);
    assert_eq!(
        err(c, &["XADD", "top", "*", "f", "v"]),
        "ERR The stream has exhausted the last possible ID, unable to add more items"
    );
    // NOMKSTREAM: nil for a missing key, which stays missing.
    assert_eq!(
        q::<Value>(c, &["XADD", "none", "NOMKSTREAM", "*", "f", "v"]),
        Value::Nil
    );
    assert_eq!(q::<i64>(c, &["EXISTS", "none"]), 0);
    // Type, encoding, WRONGTYPE both ways.
    assert_eq!(q::<String>(c, &["TYPE", "s"]), "stream");
    assert_eq!(q::<String>(c, &["OBJECT", "ENCODING", "s"]), "stream");
    ok(c, &["SET", "str", "x"]);
    assert!(err(c, &["XADD", "str", "*", "f", "v"]).starts_with("WRONGTYPE"));
    assert!(err(c, &["GET", "s"]).starts_with("WRONGTYPE"));
}

#[test]
fn trimming_exact_approximate_and_limited() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    for i in 1..=10 {
        let _: String = q(
            c,
            &[
                "XADD",
                "s",
                "MAXLEN",
                "3",
                &format!("{i}-0"),
                "n",
                &i.to_string(),
            ],
        );
    }
    let e: Entries = q(c, &["XRANGE", "s", "-", "+"]);
    assert_eq!(ids(&e), ["8-0", "9-0", "10-0"]);
    assert_eq!(e[0].1, ["n", "8"]);
    // MINID keeps IDs at or above it.
    assert_eq!(q::<i64>(c, &["XTRIM", "s", "MINID", "=", "9"]), 1);
    assert_eq!(q::<i64>(c, &["XLEN", "s"]), 2);
    // `~` removes whole nodes only: 10 entries per node here.
    ok(c, &["CONFIG", "SET", "stream-node-max-entries", "10"]);
    for i in 0..100 {
        let _: String = q(c, &["XADD", "big", "*", "f", &i.to_string()]);
    }
    assert_eq!(q::<i64>(c, &["XTRIM", "big", "MAXLEN", "~", "55"]), 40);
    assert_eq!(q::<i64>(c, &["XLEN", "big"]), 60);
    assert_eq!(
        q::<i64>(c, &["XTRIM", "big", "MAXLEN", "~", "0", "LIMIT", "25"]),
        20
    );
    assert_eq!(q::<i64>(c, &["XTRIM", "big", "MAXLEN", "=", "5"]), 35);
    assert_eq!(q::<i64>(c, &["XLEN", "big"]), 5);
    assert_eq!(
        err(c, &["XTRIM", "big", "MAXLEN", "1", "LIMIT", "3"]),
        "ERR syntax error, LIMIT cannot be used without the special ~ option"
    );
    assert_eq!(
        err(c, &["XTRIM", "big", "MAXLEN", "-1"]),
        "ERR The MAXLEN argument must be >= 0."
    );
    // Trimming everything leaves an empty stream that keeps its last ID.
    let _: String = q(c, &["XADD", "e", "MAXLEN", "0", "5-5", "f", "v"]);
    assert_eq!(q::<i64>(c, &["XLEN", "e"]), 0);
    let i = info(c, &["XINFO", "STREAM", "e"]);
    assert_eq!(text(&i["last-generated-id"]), "5-5");
    assert_eq!(int(&i["entries-added"]), 1);
    assert_eq!(i["first-entry"], Value::Nil);
}

#[test]
fn ranges_counts_exclusive_bounds_and_deletes() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    for i in 1..=6 {
        let _: String = q(c, &["XADD", "s", &format!("{i}-1"), "f", &i.to_string()]);
    }
    let e: Entries = q(c, &["XRANGE", "s", "2", "4"]);
    assert_eq!(ids(&e), ["2-1", "3-1", "4-1"]);
    let e: Entries = q(c, &["XRANGE", "s", "(2-1", "(5-1"]);
    assert_eq!(ids(&e), ["3-1", "4-1"]);
    let e: Entries = q(c, &["XREVRANGE", "s", "+", "-", "COUNT", "2"]);
    assert_eq!(ids(&e), ["6-1", "5-1"]);
    // As Redis: a null array for a zero or negative COUNT, an empty one
    // for a missing key.
    for n in ["0", "-1"] {
        let v: redis::Value = q(c, &["XRANGE", "s", "-", "+", "COUNT", n]);
        assert_eq!(v, redis::Value::Nil);
    }
    let v: redis::Value = q(c, &["XREVRANGE", "nokey", "+", "-", "COUNT", "0"]);
    assert_eq!(v, redis::Value::Array(vec![]));
    assert_eq!(
        err(c, &["XRANGE", "s", "(-", "+"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(q::<i64>(c, &["XDEL", "s", "2-1", "4-1", "4-1", "9-9"]), 2);
    let e: Entries = q(c, &["XRANGE", "s", "-", "+"]);
    assert_eq!(ids(&e), ["1-1", "3-1", "5-1", "6-1"]);
    let i = info(c, &["XINFO", "STREAM", "s"]);
    assert_eq!(text(&i["max-deleted-entry-id"]), "4-1");
    assert_eq!(text(&i["recorded-first-entry-id"]), "1-1");
    assert_eq!(q::<i64>(c, &["XLEN", "missing"]), 0);
    let e: Entries = q(c, &["XRANGE", "missing", "-", "+"]);
    assert!(e.is_empty());
    assert_eq!(
        err(c, &["XSETID", "s", "2-0"]),
        "ERR The ID specified in XSETID is smaller than the target stream top item"
    );
    ok(
        c,
        &[
            "XSETID",
            "s",
            "100-0",
            "ENTRIESADDED",
            "50",
            "MAXDELETEDID",
            "7-0",
        ],
    );
    assert_eq!(
        q::<String>(c, &["XADD", "s", "*", "f", "v"])
            .split('-')
            .count(),
        2
    );
    assert_eq!(err(c, &["XSETID", "nokey", "1-0"]), "ERR no such key");
    // Either option alone, as in Redis 7; MAXDELETEDID 0-0 keeps the one
    // recorded.
    let _: String = q(c, &["XADD", "t", "1-1", "f", "v"]);
    ok(c, &["XSETID", "t", "5-0", "ENTRIESADDED", "60"]);
    ok(c, &["XSETID", "t", "5-0", "MAXDELETEDID", "3-0"]);
    ok(c, &["XSETID", "t", "5-0", "MAXDELETEDID", "0-0"]);
    let i = info(c, &["XINFO", "STREAM", "t"]);
    assert_eq!(i["entries-added"], Value::Int(60));
    assert_eq!(text(&i["max-deleted-entry-id"]), "3-0");
}

#[test]
fn groups_deliver_track_pending_ack_and_claim() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    for i in 1..=4 {
        let _: String = q(c, &["XADD", "s", &format!("{i}-0"), "n", &i.to_string()]);
    }
    ok(c, &["XGROUP", "CREATE", "s", "g", "0"]);
    assert_eq!(
        err(c, &["XGROUP", "CREATE", "s", "g", "0"]),
        "BUSYGROUP Consumer Group name already exists"
    );
    assert!(err(c, &["XGROUP", "CREATE", "nokey", "g", "$"])
        .starts_with("ERR The XGROUP subcommand requires the key to exist"));
    // CREATE takes a strict ID, SETID also - and +, as in Redis.
    for id in ["-", "+"] {
        assert_eq!(
            err(c, &["XGROUP", "CREATE", "s", "g2", id]),
            "ERR Invalid stream ID specified as stream command argument"
        );
        assert_eq!(
            err(c, &["XGROUP", "CREATE", "new", "g2", id, "MKSTREAM"]),
            "ERR Invalid stream ID specified as stream command argument"
        );
    }
    ok(c, &["XGROUP", "CREATE", "s", "g2", "0"]);
    ok(c, &["XGROUP", "SETID", "s", "g2", "+"]);
    ok(c, &["XGROUP", "SETID", "s", "g2", "-"]);
    ok(c, &["XGROUP", "DESTROY", "s", "g2"]);
    let r: Vec<(String, Entries)> = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "3",
            "STREAMS",
            "s",
            ">",
        ],
    );
    assert_eq!(r[0].0, "s");
    assert_eq!(ids(&r[0].1), ["1-0", "2-0", "3-0"]);
    let r: Vec<(String, Entries)> = q(c, &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]);
    assert_eq!(ids(&r[0].1), ["4-0"]);
    // Nothing new: nil, and a consumer that got nothing is not created.
    let v: Value = q(c, &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]);
    assert_eq!(v, Value::Nil);
    let v: Value = q(
        c,
        &["XREADGROUP", "GROUP", "g", "nobody", "STREAMS", "s", ">"],
    );
    assert_eq!(v, Value::Nil);
    // History: what alice holds, after the given ID.
    let r: Vec<(String, Entries)> = q(
        c,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "1-0"],
    );
    assert_eq!(ids(&r[0].1), ["2-0", "3-0"]);
    // Summary: count, smallest, largest, per consumer.
    let v: (i64, String, String, Vec<(String, String)>) = q(c, &["XPENDING", "s", "g"]);
    assert_eq!(v.0, 4);
    assert_eq!((v.1.as_str(), v.2.as_str()), ("1-0", "4-0"));
    assert_eq!(
        v.3,
        [("alice".into(), "3".into()), ("bob".into(), "1".into())]
    );
    // Extended: delivery counts (history reads count as deliveries).
    let v: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10", "alice"]);
    assert_eq!(v.iter().map(|p| p.3).collect::<Vec<_>>(), [1, 2, 2]);
    assert_eq!(q::<i64>(c, &["XACK", "s", "g", "1-0", "1-0", "9-0"]), 1);
    assert_eq!(q::<i64>(c, &["XACK", "s", "nogroup", "2-0"]), 0);
    // XCLAIM moves ownership and counts a delivery; a deleted entry leaves
    // the PEL instead.
    assert_eq!(q::<i64>(c, &["XDEL", "s", "3-0"]), 1);
    let claimed: Entries = q(c, &["XCLAIM", "s", "g", "carol", "0", "2-0", "3-0"]);
    assert_eq!(ids(&claimed), ["2-0"]);
    let v: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10"]);
    assert_eq!(
        v.iter()
            .map(|p| (p.0.as_str(), p.1.as_str(), p.3))
            .collect::<Vec<_>>(),
        [("2-0", "carol", 3), ("4-0", "bob", 1)]
    );
    // JUSTID leaves the count alone; RETRYCOUNT sets it.
    let j: Vec<String> = q(
        c,
        &[
            "XCLAIM",
            "s",
            "g",
            "bob",
            "0",
            "2-0",
            "JUSTID",
            "RETRYCOUNT",
            "7",
        ],
    );
    assert_eq!(j, ["2-0"]);
    // XAUTOCLAIM scans from a cursor.
    let (next, got, deleted): (String, Entries, Vec<String>) =
        q(c, &["XAUTOCLAIM", "s", "g", "dave", "0", "-", "COUNT", "1"]);
    assert_eq!(
        (next.as_str(), ids(&got), deleted.len()),
        ("4-0", vec!["2-0"], 0)
    );
    let v: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10", "dave"]);
    assert_eq!(v[0].3, 8);
    assert_eq!(
        err(c, &["XAUTOCLAIM", "s", "g", "dave", "0", "-", "COUNT", "0"]),
        "ERR COUNT must be > 0"
    );
    // Groups and consumers as XINFO reports them.
    let groups: Vec<Vec<Value>> = q(c, &["XINFO", "GROUPS", "s"]);
    assert_eq!(text(&groups[0][1]), "g");
    assert_eq!(int(&groups[0][3]), 4, "alice, bob, carol, dave");
    assert_eq!(int(&groups[0][5]), 2, "pending");
    assert_eq!(text(&groups[0][7]), "4-0");
    assert_eq!(q::<i64>(c, &["XGROUP", "DELCONSUMER", "s", "g", "dave"]), 1);
    assert_eq!(
        q::<i64>(c, &["XGROUP", "CREATECONSUMER", "s", "g", "erin"]),
        1
    );
    assert_eq!(
        q::<i64>(c, &["XGROUP", "CREATECONSUMER", "s", "g", "erin"]),
        0
    );
    assert!(err(c, &["XGROUP", "CREATECONSUMER", "s", "nog", "x"]).starts_with("NOGROUP"));
    assert!(
        err(c, &["XREADGROUP", "GROUP", "nog", "x", "STREAMS", "s", ">"]).starts_with("NOGROUP")
    );
    assert_eq!(q::<i64>(c, &["XGROUP", "DESTROY", "s", "g"]), 1);
    assert_eq!(q::<i64>(c, &["XGROUP", "DESTROY", "s", "g"]), 0);
}

#[test]
fn read_counters_and_lag_follow_redis() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    for i in 1..=5 {
        let _: String = q(c, &["XADD", "x", &format!("{i}-0"), "d", "v"]);
    }
    ok(c, &["XGROUP", "CREATE", "x", "g1", "0"]);
    let group = |c: &mut Connection| -> HashMap<String, Value> {
        let full = info(c, &["XINFO", "STREAM", "x", "FULL"]);
        let Value::Array(groups) = &full["groups"] else {
            panic!("{full:?}")
        };
        let Value::Array(g) = &groups[0] else {
            panic!()
        };
        g.chunks(2).map(|p| (text(&p[0]), p[1].clone())).collect()
    };
    let g = group(c);
    assert_eq!((g["entries-read"].clone(), int(&g["lag"])), (Value::Nil, 5));
    let _: Value = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "c",
            "COUNT",
            "2",
            "STREAMS",
            "x",
            ">",
        ],
    );
    let g = group(c);
    assert_eq!((int(&g["entries-read"]), int(&g["lag"])), (2, 3));
    let _: String = q(c, &["XADD", "x", "6-0", "d", "v"]);
    assert_eq!(int(&group(c)["lag"]), 4);
}

const READ_GROUP: &[&str] = &[
    "XREADGROUP",
    "GROUP",
    "g",
    "alice",
    "BLOCK",
    "0",
    "STREAMS",
    "s",
    ">",
];

#[test]
fn blocked_readers_are_served_by_later_writes() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let blocked_count = |c: &mut Connection, n: usize| {
        eventually("clients block", || {
            let info: String = q(c, &["INFO", "clients"]);
            info.contains(&format!("blocked_clients:{n}"))
        });
    };
    // XREAD with `$` waits for entries newer than the last one now.
    let _: String = q(c, &["XADD", "s", "1-0", "old", "x"]);
    let mut reader = RespConn::new(srv.raw());
    reader.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    blocked_count(c, 1);
    let _: String = q(c, &["XADD", "s", "2-0", "new", "y"]);
    let Frame::Array(streams) = reader.frame() else {
        panic!()
    };
    assert_eq!(
        streams,
        [Frame::Array(vec![
            Frame::Bulk("s".into()),
            Frame::Array(vec![Frame::Array(vec![
                Frame::Bulk("2-0".into()),
                Frame::Array(vec![Frame::Bulk("new".into()), Frame::Bulk("y".into())]),
            ])]),
        ])]
    );
    // A timeout answers nil.
    let v: Value = q(c, &["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]);
    assert_eq!(v, Value::Nil);
    // XREADGROUP `>` blocks; its delivery lands in the PEL.
    ok(c, &["XGROUP", "CREATE", "s", "g", "$"]);
    let mut group_reader = RespConn::new(srv.raw());
    group_reader.send(READ_GROUP);
    blocked_count(c, 1);
    // A delete does not serve it (nothing new); an add does.
    assert_eq!(q::<i64>(c, &["XDEL", "s", "1-0"]), 1);
    let _: String = q(c, &["XADD", "s", "3-0", "a", "1"]);
    let Frame::Array(streams) = group_reader.frame() else {
        panic!()
    };
    assert_eq!(streams.len(), 1);
    let v: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10"]);
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].0.as_str(), v[0].1.as_str()), ("3-0", "alice"));
    // Destroying the group ends the wait with NOGROUP.
    group_reader.send(READ_GROUP);
    blocked_count(c, 1);
    assert_eq!(q::<i64>(c, &["XGROUP", "DESTROY", "s", "g"]), 1);
    let f = group_reader.frame();
    assert!(
        matches!(&f, Frame::Error(e) if e.starts_with(b"NOGROUP")),
        "{f:?}"
    );
    // Deleting the key ends it with UNBLOCKED.
    ok(c, &["XGROUP", "CREATE", "s", "g", "$"]);
    group_reader.send(READ_GROUP);
    blocked_count(c, 1);
    assert_eq!(q::<i64>(c, &["DEL", "s"]), 1);
    let f = group_reader.frame();
    assert!(
        matches!(&f, Frame::Error(e) if e.starts_with(b"UNBLOCKED")),
        "{f:?}"
    );
}

/// Entries, IDs and group state (PEL, last-delivered ID, consumers) as
/// they must be after a restart.
fn check_recovered(c: &mut Connection) {
    let e: Entries = q(c, &["XRANGE", "s", "-", "+"]);
    assert_eq!(ids(&e), ["2-0", "3-0", "5-0"]);
    let i = info(c, &["XINFO", "STREAM", "s"]);
    assert_eq!(text(&i["last-generated-id"]), "5-0");
    assert_eq!(text(&i["max-deleted-entry-id"]), "4-0");
    assert_eq!(int(&i["entries-added"]), 5);
    let v: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10"]);
    assert_eq!(
        v.iter()
            .map(|p| (p.0.as_str(), p.1.as_str(), p.3))
            .collect::<Vec<_>>(),
        [("3-0", "bob", 2)]
    );
    let groups: Vec<Vec<Value>> = q(c, &["XINFO", "GROUPS", "s"]);
    assert_eq!(text(&groups[0][7]), "3-0", "last-delivered-id");
    assert_eq!(int(&groups[0][3]), 3, "alice, bob and carol");
    // IDs stay monotonic: an auto ID never goes back, an old one is refused.
    assert!(err(c, &["XADD", "s", "5-0", "f", "v"]).contains("equal or smaller"));
    assert_eq!(q::<String>(c, &["XADD", "s", "5-*", "f", "v"]), "5-1");
}

fn write_group_state(c: &mut Connection) {
    for i in 1..=5 {
        let _: String = q(c, &["XADD", "s", &format!("{i}-0"), "f", &i.to_string()]);
    }
    ok(c, &["XGROUP", "CREATE", "s", "g", "0"]);
    let _: Value = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "3",
            "STREAMS",
            "s",
            ">",
        ],
    );
    assert_eq!(q::<i64>(c, &["XACK", "s", "g", "1-0", "2-0"]), 2);
    let _: Entries = q(c, &["XCLAIM", "s", "g", "bob", "0", "3-0"]);
    assert_eq!(q::<i64>(c, &["XDEL", "s", "4-0", "1-0"]), 2);
    assert_eq!(
        q::<i64>(c, &["XGROUP", "CREATECONSUMER", "s", "g", "carol"]),
        1
    );
}

/// Each consumer of group `g` of `s`: (name, seen-time, active-time), from
/// XINFO STREAM FULL.
fn consumer_times(c: &mut Connection) -> Vec<(String, i64, i64)> {
    let full = info(c, &["XINFO", "STREAM", "s", "FULL"]);
    let groups: Vec<Vec<Value>> = redis::from_redis_value(full["groups"].clone()).unwrap();
    let g: HashMap<String, Value> = groups[0]
        .chunks(2)
        .map(|p| (text(&p[0]), p[1].clone()))
        .collect();
    let consumers: Vec<Vec<Value>> = redis::from_redis_value(g["consumers"].clone()).unwrap();
    consumers
        .iter()
        .map(|c| {
            let m: HashMap<String, Value> =
                c.chunks(2).map(|p| (text(&p[0]), p[1].clone())).collect();
            (
                text(&m["name"]),
                int(&m["seen-time"]),
                int(&m["active-time"]),
            )
        })
        .collect()
}

/// Writes group state, optionally checkpoints it, kills the server and
/// checks what recovery brought back.
fn survives_kill_9(checkpoint: bool) {
    let mut srv = Server::start(&["--durability", "full"]);
    let times = {
        let c = &mut srv.conn();
        write_group_state(c);
        if checkpoint {
            ok(c, &["SAVE"]);
        }
        consumer_times(c)
    };
    srv.kill9();
    srv.restart();
    let c = &mut srv.conn();
    check_recovered(c);
    // Seen and active times come back as they were, from the checkpoint
    // or from the log's deliveries and claims.
    assert_eq!(consumer_times(c), times);
}

#[test]
fn entries_and_group_state_survive_kill_9() {
    survives_kill_9(false);
}

#[test]
fn streams_survive_a_checkpoint_and_kill_9() {
    survives_kill_9(true);
}

#[test]
fn a_delivery_served_while_blocked_survives_kill_9() {
    let mut srv = Server::start(&["--durability", "full"]);
    {
        let c = &mut srv.conn();
        ok(c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        let mut reader = RespConn::new(srv.raw());
        reader.send(READ_GROUP);
        eventually("the reader blocks", || {
            let info: String = q(c, &["INFO", "clients"]);
            info.contains("blocked_clients:1")
        });
        let _: String = q(c, &["XADD", "s", "7-0", "f", "v"]);
        // The reply went out, so the delivery it reports is durable.
        let Frame::Array(streams) = reader.frame() else {
            panic!()
        };
        assert_eq!(streams.len(), 1);
    }
    srv.kill9();
    srv.restart();
    let c = &mut srv.conn();
    let v: Vec<(String, String, i64, i64)> = q(c, &["XPENDING", "s", "g", "-", "+", "10"]);
    assert_eq!(v.len(), 1);
    assert_eq!(
        (v[0].0.as_str(), v[0].1.as_str(), v[0].3),
        ("7-0", "alice", 1)
    );
    let groups: Vec<Vec<Value>> = q(c, &["XINFO", "GROUPS", "s"]);
    assert_eq!(text(&groups[0][7]), "7-0", "last-delivered-id");
    // Nothing is delivered twice.
    let v: Value = q(c, &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]);
    assert_eq!(v, Value::Nil);
}

/// XADD and XTRIM report what Redis reports first: an invalid ID before a
/// bad count of fields, the 0-0 ID after it, and a trimming strategy given
/// twice or missing by name.
#[test]
fn xadd_and_xtrim_errors_come_in_redis_order() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        err(&mut c, &["XADD", "s", "NOMKSTREAM", "~", "v"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        err(&mut c, &["XADD", "s", "0", "MAXLEN", "0", "~"]),
        "ERR wrong number of arguments for 'xadd' command"
    );
    assert_eq!(
        err(&mut c, &["XADD", "s", "0", "f", "v"]),
        "ERR The ID specified in XADD must be greater than 0-0"
    );
    assert_eq!(
        err(&mut c, &["XTRIM", "s", "MAXLEN", "1", "MINID", "1"]),
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["XTRIM", "s", "LIMIT", "0"]),
        "ERR syntax error, XTRIM must be called with a trimming strategy"
    );
    assert_eq!(
        err(&mut c, &["XADD", "s", "LIMIT", "1", "*", "f", "v"]),
        "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
    );
    // A nonzero LIMIT wants a strategy before XTRIM's own check; LIMIT 0
    // only wants the `~`, even without a strategy.
    assert_eq!(
        err(&mut c, &["XTRIM", "s", "LIMIT", "1"]),
        "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
    );
    for cmd in [
        &["XADD", "s", "LIMIT", "0", "0", "f", "v"][..],
        &["XADD", "s", "NOMKSTREAM", "LIMIT", "0", "1-1", "f", "v"],
        &["XTRIM", "s", "MINID", "0", "LIMIT", "0"],
    ] {
        assert_eq!(
            err(&mut c, cmd),
            "ERR syntax error, LIMIT cannot be used without the special ~ option"
        );
    }
    // ZRANGE by rank lets a LIMIT that takes everything through.
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    let got: Vec<String> = q(&mut c, &["ZRANGE", "z", "0", "-1", "LIMIT", "5", "-1"]);
    assert_eq!(got, ["a", "b"]);
    assert!(err(&mut c, &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"])
        .contains("LIMIT is only supported"));
}

/// IDs are read as Redis's `string2ull` reads them: C's `strtoull` takes
/// leading white space and a plus sign, nothing after the digits, and
/// nothing past 2^64-1. Replies from Redis 7.0.15.
#[test]
fn ids_are_read_as_redis_reads_them() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for (i, (given, id)) in [
        (" 1", Some("1-0")),
        ("+2", Some("2-0")),
        ("\t3", Some("3-0")),
        ("1-+3", Some("1-3")),
        ("8-\t2", Some("8-2")),
        ("18446744073709551615", Some("18446744073709551615-0")),
        ("5 ", None),
        (" -1", None),
        ("1--5", None),
        ("0x10", None),
        ("18446744073709551616", None),
        ("", None),
    ]
    .into_iter()
    .enumerate()
    {
        let key = format!("k{i}");
        let args = ["XADD", &key, given, "f", "v"];
        match id {
            Some(id) => assert_eq!(q::<String>(&mut c, &args), id, "{given:?}"),
            None => assert_eq!(
                err(&mut c, &args),
                "ERR Invalid stream ID specified as stream command argument",
                "{given:?}"
            ),
        }
    }
    let _: String = q(&mut c, &["XADD", "x", "3-0", "a", "1"]);
    // A group subcommand with an option it does not know answers with the
    // subcommand's usage, as named.
    let _: () = q(&mut c, &["XGROUP", "CREATE", "x", "g", "0"]);
    assert_eq!(
        err(&mut c, &["XGROUP", "SETID", "x", "g", "0", "FOO", "1"]),
        "ERR unknown subcommand or wrong number of arguments for 'SETID'. Try XGROUP HELP."
    );
    assert_eq!(
        err(&mut c, &["XGROUP", "create", "nokey", "g", "0", "FOO"]),
        "ERR unknown subcommand or wrong number of arguments for 'create'. Try XGROUP HELP."
    );
    for cmd in [
        &["XREAD", "STREAMS", "a", "b", "0"][..],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", "0"],
    ] {
        assert_eq!(
            err(&mut c, cmd),
            "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
        );
    }
    assert_eq!(
        err(&mut c, &["XSETID", "x", " 1"]),
        "ERR The ID specified in XSETID is smaller than the target stream top item"
    );
}

/// Redis 7.2's consumer times: seen when a consumer last read or
/// claimed, active when it last got an entry; XINFO CONSUMERS shows the
/// second as `inactive` (-1 for never).
#[test]
fn consumers_seen_and_active_times_as_redis_7_2() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    write_group_state(c);
    let times = consumer_times(c);
    let by = |name: &str| times.iter().find(|t| t.0 == name).unwrap().clone();
    let (alice, bob, carol) = (by("alice"), by("bob"), by("carol"));
    assert!(alice.1 > 0 && alice.2 == alice.1, "{alice:?}");
    assert!(bob.1 > 0 && bob.2 == bob.1, "{bob:?}");
    assert_eq!(carol.2, -1, "created, never read: {carol:?}");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let consumers: Vec<Vec<Value>> = q(c, &["XINFO", "CONSUMERS", "s", "g"]);
    let fields: Vec<String> = consumers[0].iter().step_by(2).map(text).collect();
    assert_eq!(fields, ["name", "pending", "idle", "inactive"]);
    let inactive: Vec<i64> = consumers.iter().map(|c| int(&c[7])).collect();
    assert!(inactive[0] >= 5 && inactive[1] >= 0, "{inactive:?}");
    assert_eq!(inactive[2], -1);
}

/// XGROUP SETID names a missing group before it reads the ID, as Redis
/// 7.0.15 does.
#[test]
fn setid_reports_a_missing_group_before_a_bad_id() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let _: String = redis::cmd("XADD")
        .arg("s")
        .arg("1-1")
        .arg("f")
        .arg("v")
        .query(c)
        .unwrap();
    let e = redis::cmd("XGROUP")
        .arg("SETID")
        .arg("s")
        .arg("nope")
        .arg("not-an-id")
        .query::<redis::Value>(c)
        .unwrap_err();
    assert_eq!(
        common::error_text(&e),
        "NOGROUP No such consumer group 'nope' for key name 's'"
    );
}

/// An entry at the largest ID a stream can hold is trimmed like any
/// other: no cutoff lies past it, so it once stayed while XTRIM counted
/// it. Expected values from redis-server 7.0.15, which keeps
/// `max-deleted-entry-id` across a trim; the same after a restart, which
/// replays the log.
#[test]
fn the_entry_at_the_largest_id_is_trimmed_like_any_other() {
    const MAX: &str = "18446744073709551615-18446744073709551615";
    const BELOW: &str = "18446744073709551615-18446744073709551614";
    let mut srv = Server::start(&[]);
    let c = &mut srv.conn();
    for id in ["1-0", MAX] {
        let _: String = q(c, &["XADD", "all", id, "f", "v"]);
    }
    assert_eq!(q::<i64>(c, &["XTRIM", "all", "MAXLEN", "0"]), 2);
    for id in ["1-0", BELOW, MAX] {
        let _: String = q(c, &["XADD", "one", id, "f", "v"]);
    }
    assert_eq!(q::<i64>(c, &["XTRIM", "one", "MAXLEN", "1"]), 2);
    for round in ["live", "after a restart"] {
        assert_eq!(q::<i64>(c, &["XLEN", "all"]), 0, "{round}");
        let i = info(c, &["XINFO", "STREAM", "all"]);
        assert_eq!(text(&i["last-generated-id"]), MAX, "{round}");
        assert_eq!(text(&i["max-deleted-entry-id"]), "0-0", "{round}");
        assert_eq!(int(&i["entries-added"]), 2, "{round}");
        let left: Entries = q(c, &["XRANGE", "one", "-", "+"]);
        assert_eq!(ids(&left), [MAX], "{round}");
        if round == "live" {
            srv.kill9();
            srv.restart();
            *c = srv.conn();
        }
    }
}
