//! Generic keyspace commands over real sockets: deletion, expiry, renaming,
//! iteration, database management, and Redis's exact replies and errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, q as run, Server, NOT_INTEGER};
use redis::{Connection, Value};
use std::collections::HashSet;
use std::time::Duration;

fn status(s: &str) -> Value {
    Value::SimpleString(s.to_string())
}

#[test]
fn del_exists_touch_type() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    run::<()>(c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(run::<i64>(c, &["EXISTS", "a", "a", "nope", "b"]), 3);
    assert_eq!(run::<i64>(c, &["TOUCH", "a", "nope", "c"]), 2);
    assert_eq!(run::<i64>(c, &["DEL", "a", "nope", "a"]), 1);
    assert_eq!(run::<i64>(c, &["UNLINK", "b", "c"]), 2);
    assert_eq!(run::<i64>(c, &["EXISTS", "a", "b", "c"]), 0);
    assert_eq!(
        err(c, &["DEL"]),
        "ERR wrong number of arguments for 'del' command"
    );

    run::<()>(c, &["SET", "s", "v"]);
    run::<()>(c, &["RPUSH", "l", "v"]);
    run::<()>(c, &["SADD", "st", "v"]);
    run::<()>(c, &["HSET", "h", "f", "v"]);
    run::<()>(c, &["ZADD", "z", "1", "v"]);
    for (k, t) in [
        ("s", "string"),
        ("l", "list"),
        ("st", "set"),
        ("h", "hash"),
        ("z", "zset"),
        ("nope", "none"),
    ] {
        assert_eq!(run::<Value>(c, &["TYPE", k]), status(t), "{k}");
    }
}

#[test]
fn expire_family_and_ttls() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(run::<i64>(c, &["EXPIRE", "nope", "100"]), 0);
    assert_eq!(run::<i64>(c, &["TTL", "nope"]), -2);
    assert_eq!(run::<i64>(c, &["PTTL", "nope"]), -2);
    assert_eq!(run::<i64>(c, &["EXPIRETIME", "nope"]), -2);
    run::<()>(c, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(c, &["TTL", "k"]), -1);
    assert_eq!(run::<i64>(c, &["PEXPIRETIME", "k"]), -1);
    assert_eq!(run::<i64>(c, &["PERSIST", "k"]), 0);

    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "100"]), 1);
    assert_eq!(run::<i64>(c, &["TTL", "k"]), 100);
    let pttl: i64 = run(c, &["PTTL", "k"]);
    assert!(pttl > 99_000 && pttl <= 100_000, "{pttl}");
    assert_eq!(run::<i64>(c, &["PEXPIRE", "k", "200000"]), 1);
    assert_eq!(run::<i64>(c, &["TTL", "k"]), 200);
    assert_eq!(run::<i64>(c, &["EXPIREAT", "k", "99999999999"]), 1);
    assert_eq!(run::<i64>(c, &["EXPIRETIME", "k"]), 99999999999);
    assert_eq!(run::<i64>(c, &["PEXPIREAT", "k", "99999999999123"]), 1);
    assert_eq!(run::<i64>(c, &["PEXPIRETIME", "k"]), 99999999999123);
    assert_eq!(run::<i64>(c, &["EXPIRETIME", "k"]), 99999999999);
    assert_eq!(run::<i64>(c, &["PERSIST", "k"]), 1);
    assert_eq!(run::<i64>(c, &["TTL", "k"]), -1);

    // NX / XX / GT / LT, with "no TTL" counting as an infinite TTL.
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "100", "GT"]), 0);
    assert_eq!(run::<i64>(c, &["TTL", "k"]), -1);
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "100", "LT"]), 1);
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "50", "NX"]), 0);
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "200", "LT"]), 0);
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(run::<i64>(c, &["TTL", "k"]), 200);
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "300", "xx", "gt"]), 1);
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "50", "XX", "LT"]), 1);
    assert_eq!(run::<i64>(c, &["TTL", "k"]), 50);
    run::<()>(c, &["SET", "fresh", "v"]);
    assert_eq!(run::<i64>(c, &["PEXPIRE", "fresh", "100000", "NX"]), 1);

    assert_eq!(
        err(c, &["EXPIRE", "k", "10", "NX", "XX"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        err(c, &["EXPIRE", "k", "10", "NX", "GT"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        err(c, &["EXPIRE", "k", "10", "GT", "LT"]),
        "ERR GT and LT options at the same time are not compatible"
    );
    assert_eq!(
        err(c, &["EXPIRE", "k", "10", "FOO"]),
        "ERR Unsupported option FOO"
    );
    assert_eq!(err(c, &["EXPIRE", "k", "ten"]), NOT_INTEGER);
    assert_eq!(
        err(c, &["EXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        err(c, &["PEXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'pexpire' command"
    );
    assert_eq!(
        err(c, &["EXPIREAT", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'expireat' command"
    );
    assert_eq!(run::<i64>(c, &["EXISTS", "k"]), 1, "errors change nothing");

    // A time not in the future deletes the key and still answers 1.
    assert_eq!(run::<i64>(c, &["EXPIRE", "k", "-1"]), 1);
    assert_eq!(run::<i64>(c, &["EXISTS", "k"]), 0);
    run::<()>(c, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(c, &["EXPIREAT", "k", "1"]), 1);
    assert_eq!(run::<i64>(c, &["EXISTS", "k"]), 0);
    run::<()>(c, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(c, &["PEXPIRE", "k", "0"]), 1);
    assert_eq!(run::<Value>(c, &["GET", "k"]), Value::Nil);
}

#[test]
fn keys_expire_in_time() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    run::<()>(c, &["SET", "k", "v"]);
    run::<()>(c, &["SET", "stays", "v"]);
    assert_eq!(run::<i64>(c, &["PEXPIRE", "k", "50"]), 1);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(run::<i64>(c, &["EXISTS", "k"]), 0);
    assert_eq!(run::<i64>(c, &["TTL", "k"]), -2);
    assert_eq!(
        run::<Vec<String>>(c, &["KEYS", "*"]),
        vec!["stays".to_string()]
    );
}

#[test]
fn rename_copy_move() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(err(c, &["RENAME", "nope", "x"]), "ERR no such key");
    assert_eq!(err(c, &["RENAMENX", "nope", "x"]), "ERR no such key");
    run::<()>(c, &["SET", "a", "1", "EX", "100"]);
    assert_eq!(run::<Value>(c, &["RENAME", "a", "a"]), Value::Okay);
    assert_eq!(run::<i64>(c, &["RENAMENX", "a", "a"]), 0);
    assert_eq!(run::<Value>(c, &["RENAME", "a", "b"]), Value::Okay);
    assert_eq!(run::<i64>(c, &["EXISTS", "a"]), 0);
    assert_eq!(run::<String>(c, &["GET", "b"]), "1");
    assert!(run::<i64>(c, &["TTL", "b"]) >= 99, "RENAME keeps the TTL");
    run::<()>(c, &["RPUSH", "l", "x", "y"]);
    assert_eq!(run::<Value>(c, &["RENAME", "l", "b"]), Value::Okay);
    assert_eq!(
        run::<i64>(c, &["TTL", "b"]),
        -1,
        "the destination takes the source's TTL"
    );
    assert_eq!(
        run::<Vec<String>>(c, &["LRANGE", "b", "0", "-1"]),
        vec!["x", "y"]
    );
    run::<()>(c, &["SET", "c", "3"]);
    assert_eq!(run::<i64>(c, &["RENAMENX", "c", "b"]), 0);
    assert_eq!(run::<i64>(c, &["RENAMENX", "c", "d"]), 1);
    assert_eq!(run::<String>(c, &["GET", "d"]), "3");

    // COPY
    run::<()>(c, &["HSET", "h", "f", "v"]);
    assert_eq!(run::<i64>(c, &["COPY", "h", "h2"]), 1);
    assert_eq!(run::<String>(c, &["HGET", "h2", "f"]), "v");
    run::<()>(c, &["HSET", "h", "f", "changed"]);
    assert_eq!(
        run::<String>(c, &["HGET", "h2", "f"]),
        "v",
        "a copy, not a share"
    );
    assert_eq!(run::<i64>(c, &["COPY", "h", "h2"]), 0);
    assert_eq!(run::<i64>(c, &["COPY", "h", "h2", "REPLACE"]), 1);
    assert_eq!(run::<String>(c, &["HGET", "h2", "f"]), "changed");
    assert_eq!(run::<i64>(c, &["COPY", "nope", "x"]), 0);
    assert_eq!(
        err(c, &["COPY", "h", "h"]),
        "ERR source and destination objects are the same"
    );
    run::<()>(c, &["SET", "t", "v", "EX", "100"]);
    assert_eq!(run::<i64>(c, &["COPY", "t", "t", "DB", "1"]), 1);
    assert_eq!(
        err(c, &["COPY", "t", "x", "DB", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(c, &["COPY", "t", "x", "DB", "-1"]),
        "ERR DB index is out of range"
    );
    assert_eq!(err(c, &["COPY", "t", "x", "DB", "one"]), NOT_INTEGER);
    assert_eq!(
        err(c, &["COPY", "t", "x", "DB", "99999999999"]),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(err(c, &["COPY", "t", "x", "DB"]), "ERR syntax error");
    assert_eq!(err(c, &["COPY", "t", "x", "FOO"]), "ERR syntax error");

    // MOVE
    run::<()>(c, &["SET", "m", "v", "EX", "100"]);
    assert_eq!(run::<i64>(c, &["MOVE", "m", "2"]), 1);
    assert_eq!(run::<i64>(c, &["EXISTS", "m"]), 0);
    assert_eq!(
        err(c, &["MOVE", "m", "0"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(err(c, &["MOVE", "m", "99"]), "ERR DB index is out of range");
    assert_eq!(err(c, &["MOVE", "m", "x"]), NOT_INTEGER);
    assert_eq!(run::<i64>(c, &["MOVE", "nope", "2"]), 0);
    run::<()>(c, &["SET", "m", "here"]);
    run::<()>(c, &["SELECT", "1"]);
    assert_eq!(run::<String>(c, &["GET", "t"]), "v");
    assert!(run::<i64>(c, &["TTL", "t"]) >= 99, "COPY keeps the TTL");
    run::<()>(c, &["SELECT", "2"]);
    assert_eq!(run::<String>(c, &["GET", "m"]), "v");
    assert!(run::<i64>(c, &["TTL", "m"]) >= 99, "MOVE keeps the TTL");
    assert_eq!(run::<i64>(c, &["MOVE", "m", "0"]), 0, "the target exists");
    assert_eq!(run::<String>(c, &["GET", "m"]), "v");
}

fn scan_all(c: &mut Connection, extra: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(extra);
        let (next, keys): (String, Vec<String>) = run(c, &args);
        out.extend(keys);
        calls += 1;
        assert!(calls < 10_000, "SCAN does not terminate");
        if next == "0" {
            return out;
        }
        cursor = next;
    }
}

#[test]
fn keys_and_scan() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    for i in 0..100 {
        pipe.cmd("SADD").arg(format!("set:{i}")).arg("m").ignore();
    }
    pipe.query::<()>(c).unwrap();

    let strings: HashSet<String> = (0..1000).map(|i| format!("key:{i}")).collect();
    let sets: HashSet<String> = (0..100).map(|i| format!("set:{i}")).collect();
    let everything: HashSet<String> = strings.union(&sets).cloned().collect();

    let got: HashSet<String> = scan_all(c, &["COUNT", "10"]).into_iter().collect();
    assert_eq!(got, everything);
    let got: HashSet<String> = scan_all(c, &["MATCH", "key:*", "COUNT", "10"])
        .into_iter()
        .collect();
    assert_eq!(got, strings);
    let got: HashSet<String> = scan_all(c, &["TYPE", "set", "COUNT", "10"])
        .into_iter()
        .collect();
    assert_eq!(got, sets);
    let got: HashSet<String> = scan_all(c, &["TYPE", "string", "MATCH", "key:1?", "COUNT", "7"])
        .into_iter()
        .collect();
    let tens: HashSet<String> = (10..20).map(|i| format!("key:{i}")).collect();
    assert_eq!(got, tens);
    assert!(scan_all(c, &["TYPE", "stream"]).is_empty());
    let got: HashSet<String> = scan_all(c, &[]).into_iter().collect();
    assert_eq!(got, everything, "default COUNT");

    let got: HashSet<String> = run::<Vec<String>>(c, &["KEYS", "*"]).into_iter().collect();
    assert_eq!(got, everything);
    let got: HashSet<String> = run::<Vec<String>>(c, &["KEYS", "set:[0-4]"])
        .into_iter()
        .collect();
    let low: HashSet<String> = (0..5).map(|i| format!("set:{i}")).collect();
    assert_eq!(got, low);
    assert!(run::<Vec<String>>(c, &["KEYS", "nothing*"]).is_empty());

    assert_eq!(err(c, &["SCAN", "abc"]), "ERR invalid cursor");
    // A sign alone is no number to strtoul.
    assert_eq!(err(c, &["SCAN", "-"]), "ERR invalid cursor");
    assert_eq!(err(c, &["SCAN", "+"]), "ERR invalid cursor");
    // SELECT reads a C int first, as MOVE and COPY do.
    for db in ["2147483648", "-2147483649"] {
        assert_eq!(
            err(c, &["SELECT", db]),
            "ERR value is out of range, value must between -2147483648 and 2147483647"
        );
    }
    assert_eq!(err(c, &["SELECT", "16"]), "ERR DB index is out of range");
    assert_eq!(
        err(c, &["SCAN", "99999999999999999999999"]),
        "ERR invalid cursor"
    );
    assert_eq!(err(c, &["SCAN", "0", "COUNT", "0"]), "ERR syntax error");
    assert_eq!(err(c, &["SCAN", "0", "COUNT", "x"]), NOT_INTEGER);
    assert_eq!(err(c, &["SCAN", "0", "MATCH"]), "ERR syntax error");
    assert_eq!(err(c, &["SCAN", "0", "FOO", "bar"]), "ERR syntax error");
    // Any well-formed cursor is accepted, even one SCAN never handed out.
    let (_next, _keys): (String, Vec<String>) = run(c, &["SCAN", "18446744073709551615"]);

    // An empty database finishes at once.
    run::<()>(c, &["SELECT", "3"]);
    let (next, keys): (String, Vec<String>) = run(c, &["SCAN", "0"]);
    assert_eq!((next.as_str(), keys.len()), ("0", 0));
}

/// SCAN removes the expired keys it walks over, as Redis's does: with
/// active expiry off, DBSIZE still counts them until then, and each one
/// raises an `expired` event. KEYS only skips them, as in Redis 7.0.
#[test]
fn scan_expires_the_expired_keys_it_meets() {
    let srv = Server::start(&["--enable-debug-command", "yes"]);
    let c = &mut srv.conn();
    run::<()>(c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    run::<()>(c, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    for i in 0..5 {
        run::<()>(c, &["SET", &format!("gone:{i}"), "v", "PX", "1"]);
    }
    run::<()>(c, &["SET", "kept", "v"]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 6);
    assert_eq!(run::<Vec<String>>(c, &["KEYS", "*"]), ["kept"]);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 6, "KEYS deletes nothing");

    let mut sub = srv.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("__keyevent@0__:expired").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(scan_all(c, &["COUNT", "100"]), ["kept"]);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 1);
    let mut events: Vec<String> = (0..5)
        .map(|_| pubsub.get_message().unwrap().get_payload().unwrap())
        .collect();
    events.sort();
    let want: Vec<String> = (0..5).map(|i| format!("gone:{i}")).collect();
    assert_eq!(events, want);
    let stats: String = run(c, &["INFO", "stats"]);
    assert!(stats.contains("expired_keys:5\r\n"), "{stats}");
    run::<()>(c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
}

#[test]
fn randomkey_dbsize_flush_swapdb() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(run::<Value>(c, &["RANDOMKEY"]), Value::Nil);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 0);
    run::<()>(c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 3);
    let mut seen = HashSet::new();
    for _ in 0..200 {
        seen.insert(run::<String>(c, &["RANDOMKEY"]));
    }
    let all: HashSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    assert_eq!(seen, all);

    run::<()>(c, &["SELECT", "1"]);
    run::<()>(c, &["SET", "one", "1"]);
    run::<()>(c, &["SELECT", "0"]);
    assert_eq!(run::<Value>(c, &["SWAPDB", "0", "1"]), Value::Okay);
    assert_eq!(
        run::<Vec<String>>(c, &["KEYS", "*"]),
        vec!["one".to_string()]
    );
    assert_eq!(run::<Value>(c, &["SWAPDB", "1", "1"]), Value::Okay);
    assert_eq!(err(c, &["SWAPDB", "x", "1"]), "ERR invalid first DB index");
    assert_eq!(err(c, &["SWAPDB", "0", "x"]), "ERR invalid second DB index");
    assert_eq!(
        err(c, &["SWAPDB", "0", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(c, &["SWAPDB", "-1", "0"]),
        "ERR DB index is out of range"
    );
    assert_eq!(run::<Value>(c, &["SWAPDB", "1", "0"]), Value::Okay);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 3);

    assert_eq!(err(c, &["FLUSHDB", "NOW"]), "ERR syntax error");
    assert_eq!(err(c, &["FLUSHALL", "ASYNC", "SYNC"]), "ERR syntax error");
    assert_eq!(run::<Value>(c, &["FLUSHDB", "ASYNC"]), Value::Okay);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 0);
    run::<()>(c, &["SELECT", "1"]);
    assert_eq!(
        run::<i64>(c, &["DBSIZE"]),
        1,
        "FLUSHDB leaves other databases"
    );
    run::<()>(c, &["SELECT", "0"]);
    run::<()>(c, &["SET", "z", "1"]);
    assert_eq!(run::<Value>(c, &["FLUSHALL", "sync"]), Value::Okay);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 0);
    run::<()>(c, &["SELECT", "1"]);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 0);
    assert_eq!(run::<Value>(c, &["FLUSHALL"]), Value::Okay);
}

#[test]
fn object_subcommands() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    run::<()>(c, &["SET", "int", "12345"]);
    run::<()>(c, &["SET", "small", "100"]);
    run::<()>(c, &["SET", "emb", "hello"]);
    run::<()>(c, &["SET", "raw", &"x".repeat(100)]);
    run::<()>(c, &["RPUSH", "list", "a"]);
    run::<()>(c, &["SADD", "ints", "1", "2"]);
    run::<()>(c, &["SADD", "words", "a", "b"]);
    for (k, enc) in [
        ("int", "int"),
        ("emb", "embstr"),
        ("raw", "raw"),
        ("list", "listpack"),
        ("ints", "intset"),
        ("words", "listpack"),
    ] {
        assert_eq!(run::<String>(c, &["OBJECT", "ENCODING", k]), enc, "{k}");
    }
    assert_eq!(run::<Value>(c, &["OBJECT", "ENCODING", "nope"]), Value::Nil);
    assert_eq!(run::<i64>(c, &["OBJECT", "REFCOUNT", "emb"]), 1);
    assert_eq!(run::<i64>(c, &["OBJECT", "REFCOUNT", "small"]), 2147483647);
    // Whole seconds: the clock may tick between the write and this read.
    assert!(run::<i64>(c, &["OBJECT", "IDLETIME", "emb"]) <= 1);
    assert!(err(c, &["OBJECT", "FREQ", "emb"])
        .starts_with("ERR An LFU maxmemory policy is not selected"));
    let help: Vec<String> = run(c, &["OBJECT", "HELP"]);
    assert_eq!(
        help[0],
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(
        help.last().map(String::as_str),
        Some("    Show this list of subcommands.")
    );
    assert_eq!(
        err(c, &["OBJECT", "FOO", "k"]),
        "ERR unknown subcommand 'FOO'. Try OBJECT HELP."
    );
    assert_eq!(
        err(c, &["OBJECT", "ENCODING"]),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    assert_eq!(
        err(c, &["OBJECT", "ENCODING", "a", "b"]),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
}

#[test]
fn whole_keyspace_commands_inside_multi() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let (set, n, keys, flushed, after): (String, i64, Vec<String>, String, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .cmd("DBSIZE")
        .cmd("KEYS")
        .arg("*")
        .cmd("FLUSHDB")
        .cmd("DBSIZE")
        .query(c)
        .unwrap();
    assert_eq!(
        (set.as_str(), n, keys, flushed.as_str(), after),
        ("OK", 1, vec!["k".to_string()], "OK", 0)
    );
}

#[test]
fn scan_returns_keys_present_throughout_despite_writes() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("SET").arg(format!("keep:{i}")).arg(i).ignore();
        pipe.cmd("SET").arg(format!("gone:{i}")).arg(i).ignore();
    }
    pipe.query::<()>(c).unwrap();
    let mut cursor = "0".to_string();
    let mut seen = HashSet::new();
    let mut round = 0;
    loop {
        let (next, keys): (String, Vec<String>) = run(c, &["SCAN", &cursor, "COUNT", "20"]);
        seen.extend(keys);
        // Deletions move entries around inside a shard and additions grow it.
        let mut pipe = redis::pipe();
        for i in round * 10..round * 10 + 10 {
            pipe.cmd("DEL").arg(format!("gone:{i}")).ignore();
            pipe.cmd("SET")
                .arg(format!("new:{round}:{i}"))
                .arg(1)
                .ignore();
        }
        pipe.query::<()>(c).unwrap();
        round += 1;
        assert!(round < 10_000, "SCAN does not terminate");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    let missing: Vec<String> = (0..500)
        .map(|i| format!("keep:{i}"))
        .filter(|k| !seen.contains(k))
        .collect();
    assert!(missing.is_empty(), "SCAN missed {missing:?}");
}

#[test]
fn keyspace_writes_survive_a_crash() {
    let mut srv = Server::start(&[]);
    {
        let c = &mut srv.conn();
        run::<()>(c, &["MSET", "a", "1", "b", "2", "gone", "x"]);
        run::<()>(c, &["EXPIRE", "a", "1000"]);
        run::<()>(c, &["PEXPIRE", "gone", "1"]);
        run::<()>(c, &["RENAME", "b", "renamed"]);
        run::<()>(c, &["COPY", "a", "copied", "DB", "1"]);
        run::<()>(c, &["RPUSH", "l", "x", "y"]);
        run::<()>(c, &["MOVE", "l", "2"]);
        run::<()>(c, &["SELECT", "3"]);
        run::<()>(c, &["SET", "in3", "v"]);
        run::<()>(c, &["SWAPDB", "3", "4"]);
        run::<()>(c, &["SELECT", "5"]);
        run::<()>(c, &["SET", "flushed", "v"]);
        run::<()>(c, &["FLUSHDB"]);
    }
    srv.restart();
    let c = &mut srv.conn();
    let mut keys: Vec<String> = run(c, &["KEYS", "*"]);
    keys.sort();
    assert_eq!(keys, vec!["a", "renamed"]);
    assert!(run::<i64>(c, &["TTL", "a"]) > 990);
    assert_eq!(run::<String>(c, &["GET", "renamed"]), "2");
    run::<()>(c, &["SELECT", "1"]);
    assert_eq!(run::<String>(c, &["GET", "copied"]), "1");
    assert!(run::<i64>(c, &["TTL", "copied"]) > 990);
    run::<()>(c, &["SELECT", "2"]);
    assert_eq!(
        run::<Vec<String>>(c, &["LRANGE", "l", "0", "-1"]),
        vec!["x", "y"]
    );
    run::<()>(c, &["SELECT", "3"]);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 0);
    run::<()>(c, &["SELECT", "4"]);
    assert_eq!(run::<String>(c, &["GET", "in3"]), "v");
    run::<()>(c, &["SELECT", "5"]);
    assert_eq!(run::<i64>(c, &["DBSIZE"]), 0);
}
