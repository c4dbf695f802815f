//! SORT and SORT_RO over real sockets: orders, patterns, STORE, errors,
//! transactions, and the durability of what STORE acknowledged and of
//! what BY/GET read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, q, strs, Server, NOT_INTEGER, WRONGTYPE};
use redis::{Connection, Value};

const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";
const SYNTAX: &str = "ERR syntax error";

fn ok(c: &mut Connection, args: &[&str]) {
    let _: Value = q(c, args);
}

fn opt_strs(c: &mut Connection, args: &[&str]) -> Vec<Option<String>> {
    q(c, args)
}

#[test]
fn numeric_alpha_desc_and_limit() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    ok(c, &["RPUSH", "l", "3", "10", "-1.5", "2", "1e1", "inf"]);
    // Equal scores (10 and 1e1) fall back to the elements' bytes.
    assert_eq!(
        strs(c, &["SORT", "l"]),
        ["-1.5", "2", "3", "10", "1e1", "inf"]
    );
    assert_eq!(
        strs(c, &["SORT", "l", "DESC"]),
        ["inf", "1e1", "10", "3", "2", "-1.5"]
    );
    assert_eq!(
        strs(c, &["SORT", "l", "ALPHA"]),
        ["-1.5", "10", "1e1", "2", "3", "inf"]
    );
    assert_eq!(strs(c, &["SORT", "l", "LIMIT", "1", "2"]), ["2", "3"]);
    assert_eq!(
        strs(c, &["SORT", "l", "LIMIT", "4", "100", "DESC"]),
        ["2", "-1.5"]
    );
    assert_eq!(strs(c, &["SORT", "l", "LIMIT", "-5", "1"]), ["-1.5"]);
    assert!(strs(c, &["SORT", "l", "LIMIT", "6", "1"]).is_empty());
    assert!(strs(c, &["SORT", "l", "LIMIT", "0", "0"]).is_empty());
    assert_eq!(strs(c, &["SORT", "l", "LIMIT", "4", "-1"]), ["1e1", "inf"]);
    assert_eq!(err(c, &["SORT", "l", "LIMIT", "x", "1"]), NOT_INTEGER);
    assert_eq!(err(c, &["SORT", "l", "LIMIT", "1"]), SYNTAX);
    assert_eq!(err(c, &["SORT", "l", "BOGUS"]), SYNTAX);
    // Sets and sorted sets sort by their members; a missing key is empty.
    ok(c, &["SADD", "s", "b", "a", "c"]);
    assert_eq!(strs(c, &["SORT", "s", "ALPHA", "DESC"]), ["c", "b", "a"]);
    ok(c, &["ZADD", "z", "1", "5", "2", "3", "3", "4"]);
    assert_eq!(strs(c, &["SORT", "z"]), ["3", "4", "5"]);
    assert!(strs(c, &["SORT", "nokey"]).is_empty());
    assert_eq!(strs(c, &["SORT_RO", "l", "LIMIT", "0", "1"]), ["-1.5"]);
}

#[test]
fn by_nosort_keeps_native_order() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    ok(c, &["LPUSH", "l", "2", "1", "4", "3", "5"]);
    assert_eq!(
        strs(c, &["SORT", "l", "BY", "nosort"]),
        ["5", "3", "4", "1", "2"]
    );
    assert_eq!(
        strs(c, &["SORT", "l", "BY", "nosort", "LIMIT", "1", "2"]),
        ["3", "4"]
    );
    ok(
        c,
        &[
            "ZADD", "z", "1", "a", "5", "b", "2", "c", "10", "d", "3", "e",
        ],
    );
    assert_eq!(
        strs(c, &["SORT", "z", "BY", "nosort"]),
        ["a", "c", "e", "b", "d"]
    );
    assert_eq!(
        strs(c, &["SORT", "z", "BY", "nosort", "DESC"]),
        ["d", "b", "e", "c", "a"]
    );
    assert_eq!(
        strs(c, &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"]),
        ["b", "e"]
    );
    assert!(strs(c, &["SORT", "z", "BY", "nosort", "LIMIT", "5", "10"]).is_empty());
    // A set stored unsorted would depend on its iteration order: Redis
    // sorts it (ALPHA), and so does durakv.
    ok(c, &["SADD", "s", "b", "aa", "c", "a"]);
    assert_eq!(
        q::<i64>(c, &["SORT", "s", "BY", "const", "STORE", "out"]),
        4
    );
    assert_eq!(
        strs(c, &["LRANGE", "out", "0", "-1"]),
        ["a", "aa", "b", "c"]
    );
}

#[test]
fn by_patterns_strings_hash_fields_and_missing_keys() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    ok(c, &["RPUSH", "ids", "1", "2", "3", "4"]);
    ok(c, &["MSET", "w_1", "30", "w_2", "10", "w_3", "20"]);
    // w_4 is missing: score 0.
    assert_eq!(strs(c, &["SORT", "ids", "BY", "w_*"]), ["4", "2", "3", "1"]);
    assert_eq!(
        strs(c, &["SORT", "ids", "BY", "w_*", "DESC", "LIMIT", "0", "2"]),
        ["1", "3"]
    );
    ok(c, &["HSET", "o_1", "name", "dave", "age", "3"]);
    ok(c, &["HSET", "o_2", "name", "alice", "age", "40"]);
    ok(c, &["HSET", "o_3", "name", "carol", "age", "5"]);
    ok(c, &["HSET", "o_4", "age", "1"]);
    assert_eq!(
        strs(c, &["SORT", "ids", "BY", "o_*->age"]),
        ["4", "1", "3", "2"]
    );
    // ALPHA BY: a missing value sorts first.
    assert_eq!(
        strs(c, &["SORT", "ids", "BY", "o_*->name", "ALPHA"]),
        ["4", "2", "3", "1"]
    );
    // A key of another type, or a string read as a hash, is missing.
    ok(c, &["RPUSH", "w_x", "1"]);
    ok(c, &["RPUSH", "ids2", "x", "1"]);
    assert_eq!(strs(c, &["SORT", "ids2", "BY", "w_*", "ALPHA"]), ["x", "1"]);
    assert_eq!(strs(c, &["SORT", "ids2", "BY", "w_*->f"]), ["1", "x"]);
    // `->` with nothing after it is part of the key name.
    ok(c, &["SET", "x:1->", "100"]);
    assert_eq!(
        opt_strs(c, &["SORT", "ids2", "BY", "nosort", "GET", "x:*->"]),
        [None, Some("100".into())]
    );
}

#[test]
fn get_hash_element_and_several_patterns() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    ok(c, &["RPUSH", "ids", "2", "1", "3"]);
    ok(c, &["MSET", "name_1", "one", "name_2", "two"]);
    ok(c, &["HSET", "h_1", "n", "uno"]);
    ok(c, &["HSET", "h_3", "n", "tres"]);
    assert_eq!(
        opt_strs(
            c,
            &["SORT", "ids", "GET", "#", "GET", "name_*", "GET", "h_*->n"]
        ),
        [
            Some("1".into()),
            Some("one".into()),
            Some("uno".into()),
            Some("2".into()),
            Some("two".into()),
            None,
            Some("3".into()),
            None,
            Some("tres".into()),
        ]
    );
    // A GET pattern without `*` names no key.
    ok(c, &["SET", "const", "v"]);
    assert_eq!(
        opt_strs(c, &["SORT", "ids", "GET", "const"]),
        [None, None, None]
    );
    assert_eq!(
        strs(c, &["SORT_RO", "ids", "BY", "nosort", "GET", "#"]),
        ["2", "1", "3"]
    );
}

#[test]
fn store_writes_a_list_and_an_empty_result_deletes() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    ok(c, &["RPUSH", "ids", "2", "1", "3"]);
    ok(c, &["MSET", "name_1", "one", "name_3", "three"]);
    ok(c, &["SET", "dst", "old", "EX", "100"]);
    assert_eq!(
        q::<i64>(
            c,
            &["SORT", "ids", "GET", "#", "GET", "name_*", "STORE", "dst"]
        ),
        6
    );
    assert_eq!(q::<String>(c, &["TYPE", "dst"]), "list");
    assert_eq!(q::<i64>(c, &["TTL", "dst"]), -1);
    // A missing GET value is stored as an empty string.
    assert_eq!(
        strs(c, &["LRANGE", "dst", "0", "-1"]),
        ["1", "one", "2", "", "3", "three"]
    );
    // The last STORE wins.
    assert_eq!(
        q::<i64>(c, &["SORT", "ids", "DESC", "STORE", "a", "STORE", "b"]),
        3
    );
    assert_eq!(q::<i64>(c, &["EXISTS", "a"]), 0);
    assert_eq!(strs(c, &["LRANGE", "b", "0", "-1"]), ["3", "2", "1"]);
    // Empty results: 0, the destination deleted and never created.
    assert_eq!(q::<i64>(c, &["SORT", "nokey", "STORE", "dst"]), 0);
    assert_eq!(q::<i64>(c, &["EXISTS", "dst"]), 0);
    assert_eq!(
        q::<i64>(c, &["SORT", "ids", "LIMIT", "10", "10", "STORE", "dst"]),
        0
    );
    assert_eq!(q::<i64>(c, &["EXISTS", "dst"]), 0);
    // Sorting into itself.
    assert_eq!(q::<i64>(c, &["SORT", "ids", "STORE", "ids"]), 3);
    assert_eq!(strs(c, &["LRANGE", "ids", "0", "-1"]), ["1", "2", "3"]);
    // COMMAND GETKEYS reports the key and the last destination.
    assert_eq!(
        strs(
            c,
            &["COMMAND", "GETKEYS", "SORT", "k", "STORE", "x", "STORE", "d"]
        ),
        ["k", "d"]
    );
    assert_eq!(strs(c, &["COMMAND", "GETKEYS", "SORT_RO", "k"]), ["k"]);
}

#[test]
fn errors_wrong_type_bad_doubles_and_sort_ro_store() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    ok(c, &["SET", "str", "1"]);
    ok(c, &["HSET", "h", "f", "1"]);
    assert_eq!(err(c, &["SORT", "str"]), WRONGTYPE);
    assert_eq!(err(c, &["SORT_RO", "h"]), WRONGTYPE);
    ok(c, &["SADD", "s", "1", "2", "not-a-double"]);
    assert_eq!(err(c, &["SORT", "s"]), NOT_DOUBLE);
    assert_eq!(err(c, &["SORT", "s", "STORE", "dst"]), NOT_DOUBLE);
    assert_eq!(q::<i64>(c, &["EXISTS", "dst"]), 0);
    ok(c, &["SADD", "n", "1", "2"]);
    ok(c, &["MSET", "sc_1", "5", "sc_2", "nan"]);
    assert_eq!(err(c, &["SORT", "n", "BY", "sc_*"]), NOT_DOUBLE);
    ok(c, &["MSET", "sc_2", "1e400"]);
    assert_eq!(err(c, &["SORT", "n", "BY", "sc_*"]), NOT_DOUBLE);
    ok(c, &["MSET", "sc_2", " 7"]);
    assert_eq!(strs(c, &["SORT", "n", "BY", "sc_*"]), ["1", "2"]);
    assert_eq!(strs(c, &["SORT", "s", "ALPHA"]), ["1", "2", "not-a-double"]);
    assert_eq!(err(c, &["SORT_RO", "s", "STORE", "dst"]), SYNTAX);
    assert_eq!(err(c, &["SORT", "s", "ALPHA", "STORE"]), SYNTAX);
}

#[test]
fn inside_multi_and_watch() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    ok(c, &["RPUSH", "ids", "2", "1"]);
    ok(c, &["MSET", "w_1", "9", "w_2", "1"]);
    ok(c, &["MULTI"]);
    ok(c, &["SET", "w_1", "0"]);
    ok(
        c,
        &["SORT", "ids", "BY", "w_*", "GET", "w_*", "STORE", "out"],
    );
    ok(c, &["SORT_RO", "ids", "BY", "w_*"]);
    let got: Value = q(c, &["EXEC"]);
    let Value::Array(replies) = got else {
        panic!("{got:?}")
    };
    assert_eq!(replies[1], Value::Int(2));
    assert_eq!(
        redis::from_redis_value::<Vec<String>>(replies[2].clone()).unwrap(),
        ["1", "2"]
    );
    assert_eq!(strs(c, &["LRANGE", "out", "0", "-1"]), ["0", "1"]);
    // A SORT ... STORE with an empty result still modifies a watched key.
    let other = &mut srv.conn();
    ok(c, &["WATCH", "out"]);
    assert_eq!(q::<i64>(other, &["SORT", "nokey", "STORE", "out"]), 0);
    ok(c, &["MULTI"]);
    ok(c, &["PING"]);
    assert_eq!(q::<Value>(c, &["EXEC"]), Value::Nil);
}

#[test]
fn concurrent_writers_never_see_a_torn_sort() {
    // BY/GET patterns lock every shard, so a SORT sees either all or none
    // of a MSET of the weights it reads.
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let ids: Vec<String> = (0..50).map(|i| i.to_string()).collect();
    let mut push = vec!["RPUSH", "ids"];
    push.extend(ids.iter().map(String::as_str));
    ok(c, &push);
    let port = srv.port;
    let writer = std::thread::spawn(move || {
        let mut w = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        for round in 0..200 {
            let mut mset = redis::cmd("MSET");
            for i in 0..50 {
                mset.arg(format!("w_{i}")).arg(round);
            }
            let _: () = mset.query(&mut w).unwrap();
        }
    });
    for _ in 0..200 {
        let got = opt_strs(c, &["SORT", "ids", "BY", "nosort", "GET", "w_*"]);
        assert!(got.windows(2).all(|p| p[0] == p[1]), "torn read: {got:?}");
    }
    writer.join().unwrap();
}

#[test]
fn acknowledged_store_survives_kill_9() {
    let mut srv = Server::start(&["--durability", "full"]);
    let c = &mut srv.conn();
    ok(c, &["RPUSH", "ids", "3", "1", "2"]);
    ok(c, &["HSET", "o_1", "n", "a"]);
    ok(c, &["HSET", "o_2", "n", "b"]);
    assert_eq!(
        q::<i64>(c, &["SORT", "ids", "GET", "o_*->n", "STORE", "dst"]),
        3
    );
    ok(c, &["SET", "gone", "x"]);
    assert_eq!(q::<i64>(c, &["SORT", "nokey", "STORE", "gone"]), 0);
    srv.kill9();
    srv.restart();
    let c = &mut srv.conn();
    assert_eq!(strs(c, &["LRANGE", "dst", "0", "-1"]), ["a", "b", ""]);
    assert_eq!(q::<i64>(c, &["EXISTS", "gone"]), 0);
}

#[test]
fn full_reader_of_delayed_pattern_keys_waits_until_durable() {
    let mut srv = Server::start(&["--delayed-flush-ms", "10000", "--wal-segment-size-mb", "1"]);
    {
        let c = &mut srv.conn();
        ok(c, &["RPUSH", "ids", "1"]);
        let writer = &mut srv.conn();
        ok(writer, &["CLIENT", "DURABILITY", "delayed"]);
        ok(writer, &["SET", "w_1", "seen"]);
        // A full reader that saw the delayed value through GET made it durable.
        assert_eq!(strs(c, &["SORT_RO", "ids", "GET", "w_*"]), ["seen"]);
    }
    srv.kill9();
    srv.restart();
    let c = &mut srv.conn();
    assert_eq!(q::<String>(c, &["GET", "w_1"]), "seen");
}

/// Redis reads a weight with C's `strtod`, which stops at a NUL byte: the
/// rest of the value is never seen (redis-server 7.0.15 sorts these).
#[test]
fn a_weight_ends_at_a_nul_byte() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let mut set = redis::cmd("SET");
    set.arg("w_a").arg(&b"2\x00junk"[..]);
    let _: () = set.query(c).unwrap();
    let _: () = redis::cmd("SET").arg("w_b").arg("1").query(c).unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg("l")
        .arg("a")
        .arg("b")
        .query(c)
        .unwrap();
    let sorted: Vec<String> = redis::cmd("SORT")
        .arg("l")
        .arg("BY")
        .arg("w_*")
        .query(c)
        .unwrap();
    assert_eq!(sorted, ["b", "a"]);
}
