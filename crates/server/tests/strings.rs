//! String commands over real sockets: options, edge cases and Redis's exact
//! replies and error texts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{bulk, err, q as run, Server, NOT_INTEGER, WRONGTYPE};
use redis::{Connection, Value};

#[test]
fn set_options() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(run::<Value>(c, &["SET", "k", "v1", "NX"]), Value::Okay);
    assert_eq!(run::<Value>(c, &["SET", "k", "v2", "NX"]), Value::Nil);
    assert_eq!(run::<Value>(c, &["SET", "missing", "v", "XX"]), Value::Nil);
    assert_eq!(
        run::<Value>(c, &["SET", "k", "v3", "XX", "GET"]),
        bulk("v1")
    );
    assert_eq!(run::<Value>(c, &["SET", "new", "v", "GET"]), Value::Nil);
    assert_eq!(
        run::<Value>(c, &["SET", "k", "v4", "NX", "GET"]),
        bulk("v3")
    );
    assert_eq!(run::<String>(c, &["GET", "k"]), "v3");

    assert_eq!(
        run::<Value>(c, &["SET", "t", "v", "EX", "100"]),
        Value::Okay
    );
    let pttl: i64 = run(c, &["PTTL", "t"]);
    assert!(pttl > 90_000 && pttl <= 100_000, "{pttl}");
    run::<()>(c, &["SET", "t", "w", "KEEPTTL"]);
    assert!(run::<i64>(c, &["PTTL", "t"]) > 90_000);
    run::<()>(c, &["SET", "t", "w"]);
    assert_eq!(run::<i64>(c, &["PTTL", "t"]), -1);
    run::<()>(c, &["SET", "t", "w", "PX", "5000"]);
    assert!(run::<i64>(c, &["PTTL", "t"]) > 4000);
    run::<()>(c, &["SET", "t", "w", "EXAT", "99999999999"]);
    assert_eq!(run::<i64>(c, &["EXPIRETIME", "t"]), 99999999999);
    run::<()>(c, &["SET", "t", "w", "PXAT", "99999999999000"]);
    assert_eq!(run::<i64>(c, &["PEXPIRETIME", "t"]), 99999999999000);

    assert_eq!(err(c, &["SET", "k", "v", "NX", "XX"]), "ERR syntax error");
    assert_eq!(
        err(c, &["SET", "k", "v", "EX", "1", "PX", "1"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["SET", "k", "v", "EX", "1", "KEEPTTL"]),
        "ERR syntax error"
    );
    assert_eq!(err(c, &["SET", "k", "v", "EX"]), "ERR syntax error");
    assert_eq!(err(c, &["SET", "k", "v", "BOGUS"]), "ERR syntax error");
    assert_eq!(
        err(c, &["SET", "k", "v", "EX", "0"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(err(c, &["SET", "k", "v", "EX", "x"]), NOT_INTEGER);

    run::<()>(c, &["RPUSH", "list", "a"]);
    assert_eq!(err(c, &["GET", "list"]), WRONGTYPE);
    assert_eq!(err(c, &["SET", "list", "v", "GET"]), WRONGTYPE);
    // Plain SET overwrites any type.
    run::<()>(c, &["SET", "list", "v"]);
    assert_eq!(run::<String>(c, &["GET", "list"]), "v");
}

#[test]
fn setnx_setex_getset_getdel() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(run::<i64>(c, &["SETNX", "k", "a"]), 1);
    assert_eq!(run::<i64>(c, &["SETNX", "k", "b"]), 0);
    assert_eq!(run::<String>(c, &["GET", "k"]), "a");

    assert_eq!(run::<Value>(c, &["SETEX", "e", "100", "v"]), Value::Okay);
    let ttl: i64 = run(c, &["TTL", "e"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(
        run::<Value>(c, &["PSETEX", "p", "100000", "v"]),
        Value::Okay
    );
    assert!(run::<i64>(c, &["PTTL", "p"]) > 90_000);
    for bad in ["0", "-5"] {
        assert_eq!(
            err(c, &["SETEX", "e", bad, "v"]),
            "ERR invalid expire time in 'setex' command"
        );
        assert_eq!(
            err(c, &["PSETEX", "e", bad, "v"]),
            "ERR invalid expire time in 'psetex' command"
        );
    }
    assert_eq!(
        err(c, &["SETEX", "e", "9223372036854775807", "v"]),
        "ERR invalid expire time in 'setex' command"
    );
    assert_eq!(err(c, &["SETEX", "e", "ten", "v"]), NOT_INTEGER);
    assert_eq!(
        err(c, &["SETEX", "e", "1"]),
        "ERR wrong number of arguments for 'setex' command"
    );

    assert_eq!(run::<Value>(c, &["GETSET", "e", "new"]), bulk("v"));
    assert_eq!(run::<i64>(c, &["TTL", "e"]), -1, "GETSET clears the TTL");
    assert_eq!(run::<Value>(c, &["GETSET", "fresh", "x"]), Value::Nil);
    assert_eq!(run::<String>(c, &["GET", "fresh"]), "x");

    assert_eq!(run::<Value>(c, &["GETDEL", "fresh"]), bulk("x"));
    assert_eq!(run::<i64>(c, &["EXISTS", "fresh"]), 0);
    assert_eq!(run::<Value>(c, &["GETDEL", "fresh"]), Value::Nil);

    run::<()>(c, &["SADD", "set", "m"]);
    assert_eq!(err(c, &["GETSET", "set", "v"]), WRONGTYPE);
    assert_eq!(err(c, &["GETDEL", "set"]), WRONGTYPE);
    assert_eq!(run::<i64>(c, &["SETNX", "set", "v"]), 0);
}

#[test]
fn getex_options() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    run::<()>(c, &["SET", "k", "v"]);
    assert_eq!(run::<Value>(c, &["GETEX", "k"]), bulk("v"));
    assert_eq!(run::<i64>(c, &["TTL", "k"]), -1);
    assert_eq!(run::<Value>(c, &["GETEX", "k", "EX", "100"]), bulk("v"));
    assert!(run::<i64>(c, &["TTL", "k"]) >= 99);
    assert_eq!(run::<Value>(c, &["GETEX", "k", "PX", "200000"]), bulk("v"));
    assert!(run::<i64>(c, &["PTTL", "k"]) > 190_000);
    assert_eq!(
        run::<Value>(c, &["GETEX", "k", "EXAT", "99999999999"]),
        bulk("v")
    );
    assert_eq!(run::<i64>(c, &["EXPIRETIME", "k"]), 99999999999);
    assert_eq!(
        run::<Value>(c, &["GETEX", "k", "PXAT", "99999999998000"]),
        bulk("v")
    );
    assert_eq!(run::<i64>(c, &["EXPIRETIME", "k"]), 99999999998);
    assert_eq!(run::<Value>(c, &["GETEX", "k", "PERSIST"]), bulk("v"));
    assert_eq!(run::<i64>(c, &["TTL", "k"]), -1);
    // An absolute time in the past deletes the key, returning its value.
    assert_eq!(run::<Value>(c, &["GETEX", "k", "PXAT", "1"]), bulk("v"));
    assert_eq!(run::<i64>(c, &["EXISTS", "k"]), 0);
    assert_eq!(run::<Value>(c, &["GETEX", "k"]), Value::Nil);

    run::<()>(c, &["SET", "k", "v"]);
    assert_eq!(
        err(c, &["GETEX", "k", "EX", "1", "PX", "1"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["GETEX", "k", "PERSIST", "EX", "1"]),
        "ERR syntax error"
    );
    assert_eq!(err(c, &["GETEX", "k", "EX"]), "ERR syntax error");
    assert_eq!(err(c, &["GETEX", "k", "KEEPTTL"]), "ERR syntax error");
    assert_eq!(
        err(c, &["GETEX", "k", "EX", "0"]),
        "ERR invalid expire time in 'getex' command"
    );
    assert_eq!(
        err(c, &["GETEX", "k", "PXAT", "-1"]),
        "ERR invalid expire time in 'getex' command"
    );
    run::<()>(c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(c, &["GETEX", "h", "EX", "10"]), WRONGTYPE);
}

#[test]
fn mget_mset_msetnx() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(
        run::<Value>(c, &["MSET", "a", "1", "b", "2", "a", "3"]),
        Value::Okay
    );
    run::<()>(c, &["LPUSH", "l", "x"]);
    assert_eq!(
        run::<Value>(c, &["MGET", "a", "b", "nope", "l"]),
        Value::Array(vec![bulk("3"), bulk("2"), Value::Nil, Value::Nil])
    );
    assert_eq!(
        err(c, &["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(c, &["MSETNX", "a"]),
        "ERR wrong number of arguments for 'msetnx' command"
    );
    assert_eq!(run::<i64>(c, &["MSETNX", "x", "1", "a", "9"]), 0);
    assert_eq!(
        run::<i64>(c, &["EXISTS", "x"]),
        0,
        "MSETNX sets nothing if any key exists"
    );
    assert_eq!(run::<i64>(c, &["MSETNX", "x", "1", "y", "2"]), 1);
    assert_eq!(
        run::<Vec<String>>(c, &["MGET", "x", "y"]),
        vec!["1".to_string(), "2".to_string()]
    );
    // MSET clears TTLs, as SET does.
    run::<()>(c, &["SETEX", "x", "100", "v"]);
    run::<()>(c, &["MSET", "x", "w"]);
    assert_eq!(run::<i64>(c, &["TTL", "x"]), -1);
}

#[test]
fn counters() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(run::<i64>(c, &["INCR", "n"]), 1);
    assert_eq!(run::<i64>(c, &["INCRBY", "n", "41"]), 42);
    assert_eq!(run::<i64>(c, &["DECR", "n"]), 41);
    assert_eq!(run::<i64>(c, &["DECRBY", "n", "50"]), -9);
    assert_eq!(run::<i64>(c, &["INCRBY", "n", "-1"]), -10);
    assert_eq!(run::<String>(c, &["GET", "n"]), "-10");
    assert_eq!(run::<i64>(c, &["DECR", "fresh"]), -1);

    // INCR keeps the TTL.
    run::<()>(c, &["SET", "t", "5", "EX", "100"]);
    assert_eq!(run::<i64>(c, &["INCR", "t"]), 6);
    assert!(run::<i64>(c, &["TTL", "t"]) >= 99);

    for bad in ["abc", "1.5", " 1", "01", "", "99999999999999999999"] {
        run::<()>(c, &["SET", "s", bad]);
        assert_eq!(err(c, &["INCR", "s"]), NOT_INTEGER, "{bad:?}");
    }
    assert_eq!(err(c, &["INCRBY", "n", "x"]), NOT_INTEGER);
    assert_eq!(err(c, &["DECRBY", "n", "1.0"]), NOT_INTEGER);

    run::<()>(c, &["SET", "big", "9223372036854775807"]);
    assert_eq!(
        err(c, &["INCR", "big"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(run::<String>(c, &["GET", "big"]), "9223372036854775807");
    run::<()>(c, &["SET", "small", "-9223372036854775808"]);
    assert_eq!(
        err(c, &["DECR", "small"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(c, &["INCRBY", "small", "-1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(c, &["DECRBY", "n", "-9223372036854775808"]),
        "ERR decrement would overflow"
    );
    run::<()>(c, &["SADD", "set", "m"]);
    assert_eq!(err(c, &["INCR", "set"]), WRONGTYPE);
    assert_eq!(err(c, &["INCRBYFLOAT", "set", "1"]), WRONGTYPE);
}

#[test]
fn incrbyfloat() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    run::<()>(c, &["SET", "f", "10.50"]);
    assert_eq!(run::<String>(c, &["INCRBYFLOAT", "f", "0.1"]), "10.6");
    assert_eq!(run::<String>(c, &["INCRBYFLOAT", "f", "-5"]), "5.6");
    run::<()>(c, &["SET", "f", "5.0e3"]);
    assert_eq!(run::<String>(c, &["INCRBYFLOAT", "f", "2.0e2"]), "5200");
    assert_eq!(run::<String>(c, &["GET", "f"]), "5200");
    assert_eq!(run::<String>(c, &["INCRBYFLOAT", "g", "0.1"]), "0.1");
    assert_eq!(run::<String>(c, &["INCRBYFLOAT", "g", "0.2"]), "0.3");
    assert_eq!(run::<String>(c, &["INCRBYFLOAT", "g", "-0.3"]), "0");
    run::<()>(c, &["SET", "h", "17179869184"]);
    assert_eq!(
        run::<String>(c, &["INCRBYFLOAT", "h", "1.5"]),
        "17179869185.5"
    );
    run::<()>(c, &["SET", "i", "1"]);
    assert_eq!(run::<String>(c, &["INCRBYFLOAT", "i", "-1.1"]), "-0.1");

    run::<()>(c, &["SET", "t", "1", "EX", "100"]);
    run::<()>(c, &["INCRBYFLOAT", "t", "1"]);
    assert!(
        run::<i64>(c, &["TTL", "t"]) >= 99,
        "INCRBYFLOAT keeps the TTL"
    );

    run::<()>(c, &["SET", "s", " 11"]);
    assert_eq!(
        err(c, &["INCRBYFLOAT", "s", "1"]),
        "ERR value is not a valid float"
    );
    run::<()>(c, &["SET", "s", "abc"]);
    assert_eq!(
        err(c, &["INCRBYFLOAT", "s", "1"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(c, &["INCRBYFLOAT", "f", "x"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(c, &["INCRBYFLOAT", "f", "nan"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(c, &["INCRBYFLOAT", "f", "+inf"]),
        "ERR increment would produce NaN or Infinity"
    );
    run::<()>(c, &["SET", "m", "1e4932"]);
    assert_eq!(
        err(c, &["INCRBYFLOAT", "m", "1e4932"]),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(run::<String>(c, &["GET", "m"]), "1e4932");
}

#[test]
fn append_strlen_getrange_setrange() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(run::<i64>(c, &["APPEND", "k", "Hello"]), 5);
    assert_eq!(run::<i64>(c, &["APPEND", "k", " World"]), 11);
    assert_eq!(run::<String>(c, &["GET", "k"]), "Hello World");
    assert_eq!(run::<i64>(c, &["STRLEN", "k"]), 11);
    assert_eq!(run::<i64>(c, &["STRLEN", "nope"]), 0);

    run::<()>(c, &["SET", "s", "This is a string"]);
    let range =
        |c: &mut Connection, a: &str, b: &str| -> String { run(c, &["GETRANGE", "s", a, b]) };
    assert_eq!(range(c, "0", "3"), "This");
    assert_eq!(range(c, "-3", "-1"), "ing");
    assert_eq!(range(c, "0", "-1"), "This is a string");
    assert_eq!(range(c, "10", "100"), "string");
    assert_eq!(range(c, "5", "3"), "");
    assert_eq!(range(c, "-100", "2"), "Thi");
    assert_eq!(range(c, "-1", "-5"), "");
    // Redis 7.2 clamps a negative end to 0 rather than returning nothing.
    assert_eq!(range(c, "0", "-100"), "T");
    assert_eq!(range(c, "100", "200"), "");
    assert_eq!(run::<String>(c, &["SUBSTR", "s", "0", "3"]), "This");
    assert_eq!(run::<String>(c, &["GETRANGE", "nope", "0", "-1"]), "");
    assert_eq!(err(c, &["GETRANGE", "s", "a", "1"]), NOT_INTEGER);

    run::<()>(c, &["SET", "r", "Hello World"]);
    assert_eq!(run::<i64>(c, &["SETRANGE", "r", "6", "Redis"]), 11);
    assert_eq!(run::<String>(c, &["GET", "r"]), "Hello Redis");
    assert_eq!(run::<i64>(c, &["SETRANGE", "pad", "3", "ab"]), 5);
    assert_eq!(run::<Vec<u8>>(c, &["GET", "pad"]), b"\0\0\0ab".to_vec());
    assert_eq!(run::<i64>(c, &["SETRANGE", "r", "0", ""]), 11);
    assert_eq!(run::<i64>(c, &["SETRANGE", "none", "5", ""]), 0);
    assert_eq!(run::<i64>(c, &["EXISTS", "none"]), 0);
    assert_eq!(
        err(c, &["SETRANGE", "r", "-1", "x"]),
        "ERR offset is out of range"
    );
    assert_eq!(
        err(c, &["SETRANGE", "r", "536870912", "x"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    assert_eq!(err(c, &["SETRANGE", "r", "x", "x"]), NOT_INTEGER);

    // A small proto-max-bulk-len bounds APPEND too.
    run::<()>(c, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    let half = "x".repeat(600 * 1024);
    run::<()>(c, &["SET", "big", &half]);
    assert_eq!(
        err(c, &["APPEND", "big", &half]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    assert_eq!(run::<i64>(c, &["STRLEN", "big"]), 600 * 1024);

    run::<()>(c, &["RPUSH", "l", "a"]);
    for args in [
        &["APPEND", "l", "x"][..],
        &["STRLEN", "l"],
        &["GETRANGE", "l", "0", "1"],
        &["SETRANGE", "l", "0", "x"],
    ] {
        assert_eq!(err(c, args), WRONGTYPE, "{args:?}");
    }
}

#[test]
fn lcs() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    run::<()>(c, &["MSET", "key1", "ohmytext", "key2", "mynewtext"]);
    assert_eq!(run::<String>(c, &["LCS", "key1", "key2"]), "mytext");
    assert_eq!(run::<i64>(c, &["LCS", "key1", "key2", "LEN"]), 6);
    let idx: Value = run(c, &["LCS", "key1", "key2", "IDX"]);
    let pair = |a: i64, b: i64| Value::Array(vec![Value::Int(a), Value::Int(b)]);
    let expected = Value::Array(vec![
        bulk("matches"),
        Value::Array(vec![
            Value::Array(vec![pair(4, 7), pair(5, 8)]),
            Value::Array(vec![pair(2, 3), pair(0, 1)]),
        ]),
        bulk("len"),
        Value::Int(6),
    ]);
    assert_eq!(idx, expected);
    let idx: Value = run(
        c,
        &[
            "LCS",
            "key1",
            "key2",
            "IDX",
            "MINMATCHLEN",
            "4",
            "WITHMATCHLEN",
        ],
    );
    let expected = Value::Array(vec![
        bulk("matches"),
        Value::Array(vec![Value::Array(vec![
            pair(4, 7),
            pair(5, 8),
            Value::Int(4),
        ])]),
        bulk("len"),
        Value::Int(6),
    ]);
    assert_eq!(idx, expected);
    assert_eq!(run::<String>(c, &["LCS", "key1", "missing"]), "");
    assert_eq!(
        err(c, &["LCS", "key1", "key2", "LEN", "IDX"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(err(c, &["LCS", "key1", "key2", "FOO"]), "ERR syntax error");
    run::<()>(c, &["SADD", "set", "m"]);
    assert_eq!(
        err(c, &["LCS", "key1", "set"]),
        "ERR The specified keys must contain string values"
    );
}

#[test]
fn mset_inside_multi_is_atomic() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let (a, b): (i64, Vec<String>) = redis::pipe()
        .atomic()
        .cmd("MSETNX")
        .arg("p")
        .arg("1")
        .arg("q")
        .arg("2")
        .cmd("MGET")
        .arg("p")
        .arg("q")
        .query(c)
        .unwrap();
    assert_eq!(a, 1);
    assert_eq!(b, vec!["1".to_string(), "2".to_string()]);
}

#[test]
fn string_writes_survive_a_crash() {
    let mut srv = Server::start(&[]);
    {
        let c = &mut srv.conn();
        run::<()>(c, &["SET", "n", "10", "EX", "1000"]);
        run::<()>(c, &["INCRBY", "n", "5"]);
        run::<()>(c, &["INCRBYFLOAT", "f", "0.1"]);
        run::<()>(c, &["INCRBYFLOAT", "f", "0.2"]);
        run::<()>(c, &["APPEND", "s", "abc"]);
        run::<()>(c, &["SETRANGE", "s", "5", "xy"]);
        run::<()>(c, &["MSET", "m1", "a", "m2", "b"]);
        run::<()>(c, &["GETDEL", "m2"]);
        run::<()>(c, &["SETEX", "e", "1000", "v"]);
        run::<()>(c, &["GETEX", "e", "PERSIST"]);
    }
    srv.restart();
    let c = &mut srv.conn();
    assert_eq!(run::<String>(c, &["GET", "n"]), "15");
    assert!(run::<i64>(c, &["TTL", "n"]) > 990);
    assert_eq!(run::<String>(c, &["GET", "f"]), "0.3");
    assert_eq!(run::<Vec<u8>>(c, &["GET", "s"]), b"abc\0\0xy".to_vec());
    assert_eq!(
        run::<Value>(c, &["MGET", "m1", "m2"]),
        Value::Array(vec![bulk("a"), Value::Nil])
    );
    assert_eq!(run::<i64>(c, &["TTL", "e"]), -1);
}

/// SET and GETEX read their options as Redis does: syntax first, values
/// after; the same expiry option again takes its last value, another
/// unit is a syntax error.
#[test]
fn set_and_getex_options_are_checked_in_redis_order() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let syntax = "ERR syntax error";
    assert_eq!(err(c, &["SET", "k", "v", "EX", "0", "-1", "x"]), syntax);
    assert_eq!(err(c, &["SET", "k", "v", "EX", "10", "PX", "10"]), syntax);
    assert_eq!(
        err(c, &["SET", "k", "v", "EX", "KEEPTTL", "EX", "x"]),
        NOT_INTEGER
    );
    run::<()>(c, &["SET", "k", "v", "EX", "0x", "EX", "100"]);
    let ttl: i64 = run(c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(err(c, &["GETEX", "k", "PX", "-1", "PERSIST"]), syntax);
    assert_eq!(err(c, &["GETEX", "k", "PERSIST", "EX", "5"]), syntax);
    assert_eq!(run::<String>(c, &["GETEX", "k", "PERSIST", "PERSIST"]), "v");
    assert_eq!(
        run::<String>(c, &["GETEX", "k", "PX", "0", "PX", "50000"]),
        "v"
    );
    let pttl: i64 = run(c, &["PTTL", "k"]);
    assert!((49_000..=50_000).contains(&pttl), "{pttl}");
    // BITPOS: a missing key answers before its range is read; then start,
    // unit, end.
    assert_eq!(run::<i64>(c, &["BITPOS", "nokey", "1", "x"]), -1);
    assert_eq!(err(c, &["BITPOS", "k", "1", "-1", "BIT", "x"]), syntax);
}

/// INCRBYFLOAT reads as C's `long double`, as Redis does: past a double's
/// range is still a number, and only what `strtold` overflows or
/// underflows is not one (redis-server 7.0.15 answers the same errors).
#[test]
fn incrbyfloat_takes_a_long_doubles_range() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    run::<()>(c, &["SET", "big", "1e400"]);
    let sum = run::<String>(c, &["INCRBYFLOAT", "big", "1"]);
    assert_eq!(
        (sum.len(), &sum[..3], sum.ends_with('1')),
        (401, "100", true)
    );
    run::<()>(c, &["SET", "over", "1e5000"]);
    let not_float = "ERR value is not a valid float";
    assert_eq!(err(c, &["INCRBYFLOAT", "over", "1"]), not_float);
    run::<()>(c, &["SET", "under", "1e-5000"]);
    assert_eq!(err(c, &["INCRBYFLOAT", "under", "1"]), not_float);
    assert_eq!(
        err(c, &["INCRBYFLOAT", "n", "1e318446744073709551616"]),
        not_float
    );
    run::<()>(c, &["SET", "top", "1.1e4932"]);
    assert_eq!(
        err(c, &["INCRBYFLOAT", "top", "1e4931"]),
        "ERR increment would produce NaN or Infinity"
    );
    run::<i64>(c, &["HSET", "h", "f", "1e400"]);
    let sum = run::<String>(c, &["HINCRBYFLOAT", "h", "f", "1e400"]);
    assert_eq!((sum.len(), &sum[..3]), (401, "200"));
    assert_eq!(
        err(c, &["HINCRBYFLOAT", "h", "g", "inf"]),
        "ERR value is NaN or Infinity"
    );
    assert_eq!(err(c, &["HINCRBYFLOAT", "h", "g", "1e5000"]), not_float);
    run::<i64>(c, &["HSET", "h", "bad", "1e5000"]);
    assert_eq!(
        err(c, &["HINCRBYFLOAT", "h", "bad", "1"]),
        "ERR hash value is not a float"
    );
}
