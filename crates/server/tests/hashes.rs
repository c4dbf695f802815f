//! Hash commands over real sockets: replies, errors and RESP3 shapes as
//! Redis gives them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{bulk, err, q, resp3, Server, WRONGTYPE};
use redis::Value;
use std::collections::{HashMap, HashSet};

#[test]
fn set_get_and_lengths() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(q::<i64>(c, &["HSET", "h", "a", "1", "b", "2"]), 2);
    // A field named twice in one call counts once.
    assert_eq!(q::<i64>(c, &["HSET", "h", "b", "3", "c", "4", "c", "5"]), 1);
    assert_eq!(q::<String>(c, &["HGET", "h", "b"]), "3");
    assert_eq!(q::<String>(c, &["HGET", "h", "c"]), "5");
    // A new field named twice takes its place at its first mention, as in
    // Redis's listpack.
    assert_eq!(
        q::<i64>(c, &["HSET", "order", "x", "1", "y", "2", "x", "3"]),
        2
    );
    assert_eq!(
        q::<Vec<String>>(c, &["HGETALL", "order"]),
        ["x", "3", "y", "2"]
    );
    assert_eq!(q::<Option<String>>(c, &["HGET", "h", "zz"]), None);
    assert_eq!(q::<Option<String>>(c, &["HGET", "nokey", "a"]), None);
    assert_eq!(
        q::<Vec<Option<String>>>(c, &["HMGET", "h", "a", "zz", "c"]),
        vec![Some("1".into()), None, Some("5".into())]
    );
    assert_eq!(
        q::<Vec<Option<String>>>(c, &["HMGET", "nokey", "a", "b"]),
        vec![None, None]
    );
    assert_eq!(q::<String>(c, &["HMSET", "h", "d", "x", "a", "y"]), "OK");
    assert_eq!(q::<i64>(c, &["HLEN", "h"]), 4);
    assert_eq!(q::<i64>(c, &["HLEN", "nokey"]), 0);
    assert_eq!(q::<i64>(c, &["HSETNX", "h", "a", "new"]), 0);
    assert_eq!(q::<i64>(c, &["HSETNX", "h", "e", "new"]), 1);
    assert_eq!(q::<String>(c, &["HGET", "h", "a"]), "y");
    assert_eq!(q::<i64>(c, &["HEXISTS", "h", "e"]), 1);
    assert_eq!(q::<i64>(c, &["HEXISTS", "h", "zz"]), 0);
    assert_eq!(q::<i64>(c, &["HEXISTS", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(c, &["HSTRLEN", "h", "e"]), 3);
    assert_eq!(q::<i64>(c, &["HSTRLEN", "h", "zz"]), 0);
    assert_eq!(q::<i64>(c, &["HSTRLEN", "nokey", "zz"]), 0);
    // Insertion order, as Redis's listpack keeps it.
    assert_eq!(
        q::<Vec<String>>(c, &["HKEYS", "h"]),
        ["a", "b", "c", "d", "e"]
    );
    assert_eq!(
        q::<Vec<String>>(c, &["HVALS", "h"]),
        ["y", "3", "5", "x", "new"]
    );
    assert_eq!(
        q::<Vec<String>>(c, &["HKEYS", "nokey"]),
        Vec::<String>::new()
    );
    let all: HashMap<String, String> = q(c, &["HGETALL", "h"]);
    assert_eq!(all.len(), 5);
    assert_eq!(all["d"], "x");
    assert_eq!(q::<Value>(c, &["HGETALL", "nokey"]), Value::Array(vec![]));
    assert_eq!(
        err(c, &["HSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        err(c, &["HMSET", "h", "a"]),
        "ERR wrong number of arguments for 'hmset' command"
    );
    assert_eq!(
        err(c, &["HGET", "h"]),
        "ERR wrong number of arguments for 'hget' command"
    );
}

#[test]
fn hdel_and_emptied_keys() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(q::<i64>(c, &["HDEL", "h", "a", "a", "zz"]), 1);
    assert_eq!(q::<i64>(c, &["HDEL", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(c, &["HLEN", "h"]), 2);
    assert_eq!(q::<i64>(c, &["HDEL", "h", "b", "c"]), 2);
    assert_eq!(q::<i64>(c, &["EXISTS", "h"]), 0);
    // A TTL survives field updates.
    q::<i64>(c, &["HSET", "t", "a", "1"]);
    q::<i64>(c, &["EXPIRE", "t", "100"]);
    q::<i64>(c, &["HSET", "t", "b", "1"]);
    q::<i64>(c, &["HINCRBY", "t", "a", "1"]);
    assert!(q::<i64>(c, &["TTL", "t"]) > 0);
}

#[test]
fn increments() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(q::<i64>(c, &["HINCRBY", "h", "n", "5"]), 5);
    assert_eq!(q::<i64>(c, &["HINCRBY", "h", "n", "-7"]), -2);
    assert_eq!(q::<String>(c, &["HGET", "h", "n"]), "-2");
    q::<i64>(
        c,
        &[
            "HSET",
            "h",
            "s",
            "abc",
            "big",
            "9223372036854775807",
            "f",
            "10.5",
        ],
    );
    assert_eq!(
        err(c, &["HINCRBY", "h", "s", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        err(c, &["HINCRBY", "h", "f", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        err(c, &["HINCRBY", "h", "big", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(c, &["HINCRBY", "h", "n", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<String>(c, &["HINCRBYFLOAT", "h", "f", "0.1"]), "10.6");
    assert_eq!(q::<String>(c, &["HINCRBYFLOAT", "h", "n", "2"]), "0");
    assert_eq!(q::<String>(c, &["HINCRBYFLOAT", "h", "g", "5.0e3"]), "5000");
    // Printed as INCRBYFLOAT prints: no exponent, exact decimal sums.
    assert_eq!(
        q::<String>(c, &["HINCRBYFLOAT", "h", "e", "1e20"]),
        "100000000000000000000"
    );
    assert_eq!(q::<String>(c, &["HINCRBYFLOAT", "h", "p", "0.1"]), "0.1");
    assert_eq!(q::<String>(c, &["HINCRBYFLOAT", "h", "p", "0.2"]), "0.3");
    assert_eq!(
        q::<String>(c, &["HINCRBYFLOAT", "h", "g", "-5000.25"]),
        "-0.25"
    );
    assert_eq!(
        err(c, &["HINCRBYFLOAT", "h", "s", "1"]),
        "ERR hash value is not a float"
    );
    assert_eq!(
        err(c, &["HINCRBYFLOAT", "h", "f", "x"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(c, &["HINCRBYFLOAT", "h", "f", "inf"]),
        "ERR value is NaN or Infinity"
    );
    // A `long double` holds 3.4e308 (Redis on x86-64 answers it too);
    // past about 1.19e4932 is infinity.
    q::<i64>(c, &["HSET", "h", "huge", "1.7e308"]);
    let sum = q::<String>(c, &["HINCRBYFLOAT", "h", "huge", "1.7e308"]);
    assert_eq!((sum.len(), &sum[..2]), (309, "34"));
    q::<i64>(c, &["HSET", "h", "huge", "1.1e4932"]);
    assert_eq!(
        err(c, &["HINCRBYFLOAT", "h", "huge", "1e4931"]),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(q::<String>(c, &["HGET", "h", "huge"]), "1.1e4932");
}

#[test]
fn wrong_type_everywhere() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<String>(c, &["SET", "s", "v"]);
    for args in [
        &["HSET", "s", "a", "1"][..],
        &["HSETNX", "s", "a", "1"],
        &["HMSET", "s", "a", "1"],
        &["HGET", "s", "a"],
        &["HMGET", "s", "a"],
        &["HGETALL", "s"],
        &["HDEL", "s", "a"],
        &["HEXISTS", "s", "a"],
        &["HLEN", "s"],
        &["HKEYS", "s"],
        &["HVALS", "s"],
        &["HINCRBY", "s", "a", "1"],
        &["HINCRBYFLOAT", "s", "a", "1"],
        &["HSTRLEN", "s", "a"],
        &["HSCAN", "s", "0"],
        &["HRANDFIELD", "s"],
        &["HRANDFIELD", "s", "2"],
    ] {
        assert_eq!(err(c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(q::<String>(c, &["GET", "s"]), "v");
}

#[test]
fn hscan_cursor_walk() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    // Small hashes come back whole in one call, as Redis's listpack does.
    q::<i64>(c, &["HSET", "small", "a", "1", "b", "2", "c", "3"]);
    let (cur, items): (String, Vec<String>) = q(c, &["HSCAN", "small", "0", "COUNT", "1"]);
    assert_eq!(cur, "0");
    assert_eq!(items, ["a", "1", "b", "2", "c", "3"]);
    let (_, items): (String, Vec<String>) = q(c, &["HSCAN", "small", "0", "NOVALUES"]);
    assert_eq!(items, ["a", "b", "c"]);
    let (_, items): (String, Vec<String>) = q(c, &["HSCAN", "small", "0", "MATCH", "[ab]"]);
    assert_eq!(items, ["a", "1", "b", "2"]);
    let (cur, items): (String, Vec<String>) = q(c, &["HSCAN", "nokey", "0", "COUNT", "0"]);
    assert_eq!((cur.as_str(), items.len()), ("0", 0));
    assert_eq!(err(c, &["HSCAN", "small", "x"]), "ERR invalid cursor");
    // strtoul's reading, as SCAN's: a negative cursor wraps, so no error.
    let _: (String, Vec<String>) = q(c, &["HSCAN", "small", "-1"]);
    assert_eq!(
        err(c, &["HSCAN", "small", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["HSCAN", "small", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(c, &["HSCAN", "small", "0", "BOGUS"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["HSCAN", "small", "0", "MATCH"]),
        "ERR syntax error"
    );

    // A large hash is walked in steps; fields deleted along the way may be
    // missed, every field present throughout must be returned.
    let n = 600;
    let mut args = vec!["HSET".to_string(), "big".into()];
    for i in 0..n {
        args.push(format!("f{i}"));
        args.push(i.to_string());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(c, &refs), n);
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    let mut deleted = HashSet::new();
    loop {
        let (next, items): (String, Vec<String>) = q(c, &["HSCAN", "big", &cursor, "COUNT", "25"]);
        calls += 1;
        for pair in items.chunks(2) {
            assert_eq!(pair[0][1..], pair[1], "field and value belong together");
            seen.insert(pair[0].clone());
        }
        if calls == 3 {
            for i in (0..n).step_by(7) {
                let f = format!("f{i}");
                q::<i64>(c, &["HDEL", "big", &f]);
                deleted.insert(f);
            }
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
        assert!(calls < 1000, "scan does not terminate");
    }
    assert!(calls > 10, "COUNT bounds the work per call");
    for i in 0..n {
        let f = format!("f{i}");
        assert!(deleted.contains(&f) || seen.contains(&f), "{f} missed");
    }
}

#[test]
fn hrandfield_counts() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    let f: String = q(c, &["HRANDFIELD", "h"]);
    assert!(["a", "b", "c"].contains(&f.as_str()));
    assert_eq!(q::<Option<String>>(c, &["HRANDFIELD", "nokey"]), None);
    assert_eq!(
        q::<Vec<String>>(c, &["HRANDFIELD", "nokey", "3"]),
        Vec::<String>::new()
    );
    assert_eq!(
        q::<Vec<String>>(c, &["HRANDFIELD", "h", "0"]),
        Vec::<String>::new()
    );
    let two: HashSet<String> = q::<Vec<String>>(c, &["HRANDFIELD", "h", "2"])
        .into_iter()
        .collect();
    assert_eq!(two.len(), 2);
    let mut all: Vec<String> = q(c, &["HRANDFIELD", "h", "10"]);
    all.sort();
    assert_eq!(all, ["a", "b", "c"]);
    let many: Vec<String> = q(c, &["HRANDFIELD", "h", "-20"]);
    assert_eq!(many.len(), 20);
    assert!(many.iter().all(|f| ["a", "b", "c"].contains(&f.as_str())));
    let pairs: Vec<String> = q(c, &["HRANDFIELD", "h", "-5", "WITHVALUES"]);
    assert_eq!(pairs.len(), 10);
    for p in pairs.chunks(2) {
        let want = match p[0].as_str() {
            "a" => "1",
            "b" => "2",
            _ => "3",
        };
        assert_eq!(p[1], want);
    }
    assert_eq!(
        err(c, &["HRANDFIELD", "h", "1", "WITHSCORES"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["HRANDFIELD", "h", "1", "WITHVALUES", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["HRANDFIELD", "h", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(c, &["HRANDFIELD", "h", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(
        err(
            c,
            &["HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"]
        ),
        "ERR value is out of range"
    );
}

#[test]
fn resp3_shapes() {
    let srv = Server::start(&[]);
    let c = &mut resp3(&srv);
    q::<i64>(c, &["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(
        q::<Value>(c, &["HGETALL", "h"]),
        Value::Map(vec![(bulk("a"), bulk("1")), (bulk("b"), bulk("2"))])
    );
    assert_eq!(q::<Value>(c, &["HGETALL", "nokey"]), Value::Map(vec![]));
    assert_eq!(q::<Value>(c, &["HGET", "h", "zz"]), Value::Nil);
    let Value::Array(pairs) = q::<Value>(c, &["HRANDFIELD", "h", "2", "WITHVALUES"]) else {
        panic!("expected an array");
    };
    assert_eq!(pairs.len(), 2);
    for p in pairs {
        let Value::Array(p) = p else {
            panic!("expected nested pairs")
        };
        assert_eq!(p.len(), 2);
    }
    assert_eq!(
        q::<Value>(c, &["HINCRBYFLOAT", "h", "a", "1.5"]),
        bulk("2.5")
    );
    // RESP2 flattens the same replies.
    let c2 = &mut srv.conn();
    assert_eq!(
        q::<Value>(c2, &["HGETALL", "h"]),
        Value::Array(vec![bulk("a"), bulk("2.5"), bulk("b"), bulk("2")])
    );
    let Value::Array(flat) = q::<Value>(c2, &["HRANDFIELD", "h", "2", "WITHVALUES"]) else {
        panic!("expected an array");
    };
    assert_eq!(flat.len(), 4);
    assert!(flat.iter().all(|v| matches!(v, Value::BulkString(_))));
}
