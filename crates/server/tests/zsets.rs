//! Sorted set commands over real sockets: replies, errors and RESP3 shapes
//! as Redis gives them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{bulk, err, q, resp3, strs, Server, WRONGTYPE};
use common::{err as error, q as ok};
use redis::{Connection, Value};
use std::collections::HashSet;

/// z: a=1 b=2 c=3 d=4 e=5
fn five(c: &mut Connection) {
    assert_eq!(
        q::<i64>(
            c,
            &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]
        ),
        5
    );
}

#[test]
fn zadd_options() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(q::<i64>(c, &["ZADD", "z", "1", "a", "2", "b"]), 2);
    assert_eq!(q::<i64>(c, &["ZADD", "z", "10", "a", "3", "c"]), 1);
    assert_eq!(
        q::<i64>(c, &["ZADD", "z", "CH", "10", "a", "20", "b", "4", "d"]),
        2
    );
    assert_eq!(q::<i64>(c, &["ZADD", "z", "NX", "0", "a", "5", "e"]), 1);
    assert_eq!(q::<String>(c, &["ZSCORE", "z", "a"]), "10");
    assert_eq!(
        q::<i64>(c, &["ZADD", "z", "XX", "CH", "11", "a", "6", "f"]),
        1
    );
    assert_eq!(q::<Option<String>>(c, &["ZSCORE", "z", "f"]), None);
    // GT/LT only gate updates; new members are still added.
    assert_eq!(
        q::<i64>(c, &["ZADD", "z", "GT", "CH", "5", "a", "12", "b", "1", "g"]),
        1
    );
    assert_eq!(q::<String>(c, &["ZSCORE", "z", "a"]), "11");
    assert_eq!(q::<String>(c, &["ZSCORE", "z", "b"]), "20");
    assert_eq!(
        q::<i64>(c, &["ZADD", "z", "LT", "CH", "5", "a", "30", "b"]),
        1
    );
    assert_eq!(q::<String>(c, &["ZSCORE", "z", "a"]), "5");
    assert_eq!(q::<i64>(c, &["ZADD", "z", "XX", "GT", "CH", "6", "a"]), 1);
    // A member named twice: the last pair wins.
    assert_eq!(q::<i64>(c, &["ZADD", "dup", "1", "m", "2", "m"]), 1);
    assert_eq!(q::<String>(c, &["ZSCORE", "dup", "m"]), "2");

    // INCR answers the new score, or nil when an option stopped it.
    assert_eq!(q::<String>(c, &["ZADD", "z", "INCR", "1.5", "a"]), "7.5");
    assert_eq!(q::<String>(c, &["ZADD", "z", "INCR", "2", "new"]), "2");
    assert_eq!(
        q::<Option<String>>(c, &["ZADD", "z", "NX", "INCR", "1", "a"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(c, &["ZADD", "z", "XX", "INCR", "1", "nope"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(c, &["ZADD", "z", "GT", "INCR", "-1", "a"]),
        None
    );
    assert_eq!(
        q::<String>(c, &["ZADD", "z", "GT", "INCR", "1", "a"]),
        "8.5"
    );
    assert_eq!(
        q::<Option<String>>(c, &["ZADD", "nokey", "XX", "INCR", "1", "a"]),
        None
    );
    assert_eq!(q::<i64>(c, &["ZADD", "nokey", "XX", "1", "a"]), 0);
    assert_eq!(q::<i64>(c, &["EXISTS", "nokey"]), 0);
    assert_eq!(q::<String>(c, &["ZADD", "z", "0", "inf"]), "1");
    assert_eq!(q::<i64>(c, &["ZADD", "i", "+inf", "m", "-inf", "n"]), 2);
    assert_eq!(q::<String>(c, &["ZSCORE", "i", "m"]), "inf");

    assert_eq!(
        err(c, &["ZADD", "z", "NX", "XX", "1", "a"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    for flags in [["GT", "LT"], ["NX", "GT"], ["LT", "NX"]] {
        assert_eq!(
            err(c, &["ZADD", "z", flags[0], flags[1], "1", "a"]),
            "ERR GT, LT, and/or NX options at the same time are not compatible"
        );
    }
    assert_eq!(
        err(c, &["ZADD", "z", "INCR", "1", "a", "2", "b"]),
        "ERR INCR option supports a single increment-element pair"
    );
    assert_eq!(
        err(c, &["ZADD", "z", "x", "a"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(c, &["ZADD", "z", "nan", "a"]),
        "ERR value is not a valid float"
    );
    assert_eq!(err(c, &["ZADD", "z", "1", "a", "2"]), "ERR syntax error");
    assert_eq!(err(c, &["ZADD", "z", "CH", "1"]), "ERR syntax error");
    assert_eq!(
        err(c, &["ZADD", "z"]),
        "ERR wrong number of arguments for 'zadd' command"
    );
    // Errors change nothing.
    assert_eq!(
        err(c, &["ZADD", "z", "1", "zz", "x", "yy"]),
        "ERR value is not a valid float"
    );
    assert_eq!(q::<Option<String>>(c, &["ZSCORE", "z", "zz"]), None);
}

#[test]
fn scores_ranks_and_counts() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    five(c);
    assert_eq!(q::<String>(c, &["ZINCRBY", "z", "0.5", "a"]), "1.5");
    assert_eq!(q::<String>(c, &["ZINCRBY", "z", "-3", "new"]), "-3");
    assert_eq!(
        err(c, &["ZINCRBY", "z", "x", "a"]),
        "ERR value is not a valid float"
    );
    q::<i64>(c, &["ZADD", "i", "inf", "m"]);
    assert_eq!(
        err(c, &["ZINCRBY", "i", "-inf", "m"]),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(
        err(c, &["ZADD", "i", "INCR", "-inf", "m"]),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(q::<i64>(c, &["ZCARD", "z"]), 6);
    assert_eq!(q::<i64>(c, &["ZCARD", "nokey"]), 0);
    assert_eq!(
        q::<Vec<Option<String>>>(c, &["ZMSCORE", "z", "a", "zz", "e"]),
        vec![Some("1.5".into()), None, Some("5".into())]
    );
    assert_eq!(
        q::<Vec<Option<String>>>(c, &["ZMSCORE", "nokey", "a"]),
        vec![None]
    );
    assert_eq!(q::<i64>(c, &["ZRANK", "z", "new"]), 0);
    assert_eq!(q::<i64>(c, &["ZRANK", "z", "e"]), 5);
    assert_eq!(q::<i64>(c, &["ZREVRANK", "z", "e"]), 0);
    assert_eq!(q::<Option<i64>>(c, &["ZRANK", "z", "zz"]), None);
    assert_eq!(q::<Option<i64>>(c, &["ZRANK", "nokey", "zz"]), None);
    assert_eq!(
        q::<(i64, String)>(c, &["ZRANK", "z", "a", "WITHSCORE"]),
        (1, "1.5".into())
    );
    assert_eq!(
        q::<(i64, String)>(c, &["ZREVRANK", "z", "a", "withscore"]),
        (4, "1.5".into())
    );
    assert_eq!(
        q::<Value>(c, &["ZRANK", "z", "zz", "WITHSCORE"]),
        Value::Nil
    );
    assert_eq!(
        err(c, &["ZRANK", "z", "a", "WITHSCORES"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["ZRANK", "z", "a", "WITHSCORE", "x"]),
        "ERR wrong number of arguments for 'zrank' command"
    );
    assert_eq!(q::<i64>(c, &["ZCOUNT", "z", "-inf", "+inf"]), 6);
    assert_eq!(q::<i64>(c, &["ZCOUNT", "z", "(1.5", "4"]), 3);
    assert_eq!(q::<i64>(c, &["ZCOUNT", "z", "(2", "(2"]), 0);
    assert_eq!(q::<i64>(c, &["ZCOUNT", "z", "5", "1"]), 0);
    assert_eq!(q::<i64>(c, &["ZCOUNT", "nokey", "0", "1"]), 0);
    assert_eq!(
        err(c, &["ZCOUNT", "z", "a", "1"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        err(c, &["ZCOUNT", "nokey", "1", "(x"]),
        "ERR min or max is not a float"
    );
    assert_eq!(q::<i64>(c, &["ZREM", "z", "a", "a", "zz"]), 1);
    assert_eq!(q::<i64>(c, &["ZREM", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(c, &["ZREM", "z", "b", "c", "d", "e", "new"]), 5);
    assert_eq!(q::<i64>(c, &["EXISTS", "z"]), 0);
}

#[test]
fn ranges() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    five(c);
    assert_eq!(
        strs(c, &["ZRANGE", "z", "0", "-1"]),
        ["a", "b", "c", "d", "e"]
    );
    assert_eq!(strs(c, &["ZRANGE", "z", "-2", "100"]), ["d", "e"]);
    assert_eq!(strs(c, &["ZRANGE", "z", "3", "1"]), Vec::<String>::new());
    assert_eq!(strs(c, &["ZRANGE", "z", "9", "10"]), Vec::<String>::new());
    assert_eq!(
        strs(c, &["ZRANGE", "nokey", "0", "-1"]),
        Vec::<String>::new()
    );
    assert_eq!(strs(c, &["ZRANGE", "z", "0", "1", "REV"]), ["e", "d"]);
    assert_eq!(
        strs(c, &["ZRANGE", "z", "0", "1", "WITHSCORES"]),
        ["a", "1", "b", "2"]
    );
    assert_eq!(
        strs(c, &["ZREVRANGE", "z", "0", "1", "WITHSCORES"]),
        ["e", "5", "d", "4"]
    );
    assert_eq!(strs(c, &["ZRANGE", "z", "(1", "3", "BYSCORE"]), ["b", "c"]);
    assert_eq!(
        strs(
            c,
            &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"]
        ),
        ["b", "c"]
    );
    assert_eq!(
        strs(
            c,
            &["ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "-1"]
        ),
        ["d", "c", "b", "a"]
    );
    assert_eq!(
        strs(
            c,
            &["ZRANGE", "z", "0", "10", "BYSCORE", "LIMIT", "-1", "2"]
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        strs(c, &["ZRANGE", "z", "0", "10", "BYSCORE", "LIMIT", "0", "0"]),
        Vec::<String>::new()
    );
    assert_eq!(
        strs(c, &["ZRANGEBYSCORE", "z", "2", "(4", "WITHSCORES"]),
        ["b", "2", "c", "3"]
    );
    assert_eq!(
        strs(
            c,
            &["ZRANGEBYSCORE", "z", "-inf", "inf", "LIMIT", "4", "10"]
        ),
        ["e"]
    );
    assert_eq!(strs(c, &["ZREVRANGEBYSCORE", "z", "(5", "3"]), ["d", "c"]);
    assert_eq!(
        strs(c, &["ZREVRANGEBYSCORE", "z", "3", "5"]),
        Vec::<String>::new()
    );
    assert_eq!(
        err(c, &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"]),
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    assert_eq!(
        err(c, &["ZREVRANGE", "z", "0", "-1", "LIMIT", "0", "1"]),
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    assert_eq!(
        err(c, &["ZRANGE", "z", "0", "-1", "BYSCORE", "BYLEX"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["ZRANGE", "z", "0", "-1", "REV", "REV"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["ZRANGEBYSCORE", "z", "0", "1", "BYSCORE"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "x", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(c, &["ZRANGE", "z", "a", "1", "BYSCORE"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        err(c, &["ZRANGE", "z", "a", "1"]),
        "ERR value is not an integer or out of range"
    );

    // Lex ranges over equal scores.
    q::<i64>(
        c,
        &[
            "ZADD", "lex", "0", "alpha", "0", "bravo", "0", "charlie", "0", "delta",
        ],
    );
    assert_eq!(
        strs(c, &["ZRANGEBYLEX", "lex", "[bravo", "[charlie"]),
        ["bravo", "charlie"]
    );
    assert_eq!(
        strs(c, &["ZRANGEBYLEX", "lex", "(bravo", "+"]),
        ["charlie", "delta"]
    );
    assert_eq!(
        strs(c, &["ZRANGEBYLEX", "lex", "-", "(c"]),
        ["alpha", "bravo"]
    );
    assert_eq!(
        strs(c, &["ZRANGEBYLEX", "lex", "+", "-"]),
        Vec::<String>::new()
    );
    assert_eq!(
        strs(c, &["ZRANGEBYLEX", "lex", "[d", "[a"]),
        Vec::<String>::new()
    );
    assert_eq!(
        strs(c, &["ZRANGEBYLEX", "lex", "-", "+", "LIMIT", "1", "2"]),
        ["bravo", "charlie"]
    );
    assert_eq!(
        strs(
            c,
            &["ZRANGE", "lex", "+", "-", "BYLEX", "REV", "LIMIT", "0", "2"]
        ),
        ["delta", "charlie"]
    );
    assert_eq!(
        strs(c, &["ZREVRANGEBYLEX", "lex", "[charlie", "-"]),
        ["charlie", "bravo", "alpha"]
    );
    assert_eq!(q::<i64>(c, &["ZLEXCOUNT", "lex", "-", "+"]), 4);
    assert_eq!(q::<i64>(c, &["ZLEXCOUNT", "lex", "(alpha", "[charlie"]), 2);
    assert_eq!(q::<i64>(c, &["ZLEXCOUNT", "nokey", "-", "+"]), 0);
    for bad in [["bravo", "+"], ["[a", "c"], ["-x", "+"], ["", "+"]] {
        assert_eq!(
            err(c, &["ZRANGEBYLEX", "lex", bad[0], bad[1]]),
            "ERR min or max not valid string range item"
        );
    }
    assert_eq!(
        err(c, &["ZLEXCOUNT", "lex", "a", "+"]),
        "ERR min or max not valid string range item"
    );
    // Mixed scores: Redis walks from the first member past the near bound
    // while the far bound holds, and so do we (checked against redis-server).
    q::<i64>(
        c,
        &["ZADD", "mixed", "0", "b", "0", "c", "0", "d", "5", "a"],
    );
    assert_eq!(strs(c, &["ZRANGEBYLEX", "mixed", "[a", "[c"]), ["b", "c"]);
    assert_eq!(
        strs(c, &["ZRANGEBYLEX", "mixed", "[c", "+"]),
        Vec::<String>::new()
    );
    assert_eq!(
        strs(c, &["ZREVRANGEBYLEX", "mixed", "[c", "-"]),
        ["a", "d", "c", "b"]
    );
    assert_eq!(
        strs(
            c,
            &["ZRANGE", "mixed", "[c", "-", "BYLEX", "REV", "LIMIT", "1", "2"]
        ),
        ["d", "c"]
    );
    assert_eq!(q::<i64>(c, &["ZLEXCOUNT", "mixed", "-", "[c"]), 2);
    assert_eq!(
        err(c, &["ZRANGE", "lex", "-", "+", "BYLEX", "WITHSCORES"]),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
}

#[test]
fn removals_and_pops() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    five(c);
    assert_eq!(q::<i64>(c, &["ZREMRANGEBYSCORE", "z", "(1", "2"]), 1);
    assert_eq!(q::<i64>(c, &["ZREMRANGEBYRANK", "z", "-1", "-1"]), 1);
    assert_eq!(strs(c, &["ZRANGE", "z", "0", "-1"]), ["a", "c", "d"]);
    assert_eq!(q::<i64>(c, &["ZREMRANGEBYRANK", "z", "5", "10"]), 0);
    assert_eq!(q::<i64>(c, &["ZREMRANGEBYSCORE", "nokey", "0", "1"]), 0);
    assert_eq!(
        err(c, &["ZREMRANGEBYSCORE", "z", "x", "1"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        err(c, &["ZREMRANGEBYRANK", "z", "0", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<i64>(c, &["ZREMRANGEBYRANK", "z", "0", "-1"]), 3);
    assert_eq!(q::<i64>(c, &["EXISTS", "z"]), 0);
    q::<i64>(c, &["ZADD", "lex", "0", "a", "0", "b", "0", "c"]);
    assert_eq!(q::<i64>(c, &["ZREMRANGEBYLEX", "lex", "[a", "(c"]), 2);
    assert_eq!(
        err(c, &["ZREMRANGEBYLEX", "lex", "a", "c"]),
        "ERR min or max not valid string range item"
    );
    assert_eq!(q::<i64>(c, &["ZREMRANGEBYLEX", "lex", "-", "+"]), 1);
    assert_eq!(q::<i64>(c, &["EXISTS", "lex"]), 0);

    five(c);
    assert_eq!(strs(c, &["ZPOPMIN", "z"]), ["a", "1"]);
    assert_eq!(strs(c, &["ZPOPMAX", "z"]), ["e", "5"]);
    assert_eq!(strs(c, &["ZPOPMIN", "z", "2"]), ["b", "2", "c", "3"]);
    assert_eq!(strs(c, &["ZPOPMAX", "z", "0"]), Vec::<String>::new());
    assert_eq!(strs(c, &["ZPOPMAX", "z", "10"]), ["d", "4"]);
    assert_eq!(q::<i64>(c, &["EXISTS", "z"]), 0);
    assert_eq!(strs(c, &["ZPOPMIN", "z"]), Vec::<String>::new());
    assert_eq!(strs(c, &["ZPOPMIN", "z", "3"]), Vec::<String>::new());
    assert_eq!(
        err(c, &["ZPOPMIN", "z", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err(c, &["ZPOPMIN", "z", "x"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(err(c, &["ZPOPMIN", "z", "1", "2"]), "ERR syntax error");
}

#[test]
fn zscan_and_zrandmember() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    five(c);
    let (cur, items): (String, Vec<String>) = q(c, &["ZSCAN", "z", "0"]);
    assert_eq!(cur, "0");
    assert_eq!(items, ["a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]);
    let (_, items): (String, Vec<String>) = q(c, &["ZSCAN", "z", "0", "MATCH", "*[bd]"]);
    assert_eq!(items, ["b", "2", "d", "4"]);
    assert_eq!(
        err(c, &["ZSCAN", "z", "0", "NOVALUES"]),
        "ERR NOVALUES option can only be used in HSCAN"
    );
    assert_eq!(err(c, &["ZSCAN", "z", " 1"]), "ERR invalid cursor");
    assert_eq!(
        err(c, &["ZSCAN", "z", "18446744073709551616"]),
        "ERR invalid cursor"
    );
    // strtoul's reading, as Redis's: a negative cursor wraps, no error.
    let (cur, _): (String, Vec<String>) = q(c, &["ZSCAN", "z", "-1"]);
    assert_eq!(cur, "0");
    let (cur, items): (String, Vec<String>) = q(c, &["ZSCAN", "nokey", "0"]);
    assert_eq!((cur.as_str(), items.len()), ("0", 0));
    // A compact set scans in one call in its listpack's order, by score
    // then member, whatever order the members came in (walrus iterates a
    // small sorted set with ZSCAN and expects ZRANGE's order).
    let _: i64 = q(
        c,
        &["ZADD", "o", "1", "foo", "2", "bar", "1", "baz", "3", "nug"],
    );
    let _: i64 = q(c, &["ZADD", "o", "0", "first"]);
    let (cur, items): (String, Vec<String>) = q(c, &["ZSCAN", "o", "0"]);
    assert_eq!(cur, "0");
    assert_eq!(
        items,
        ["first", "0", "baz", "1", "foo", "1", "bar", "2", "nug", "3"]
    );
    let (_, items): (String, Vec<String>) = q(c, &["ZSCAN", "o", "0", "MATCH", "b*"]);
    assert_eq!(items, ["baz", "1", "bar", "2"]);

    let mut args = vec!["ZADD".to_string(), "big".into()];
    for i in 0..400 {
        args.push(format!("{i}.5"));
        args.push(format!("m{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(c, &refs), 400);
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) = q(c, &["ZSCAN", "big", &cursor, "COUNT", "50"]);
        for p in items.chunks(2) {
            assert_eq!(format!("{}.5", &p[0][1..]), p[1]);
            seen.insert(p[0].clone());
        }
        calls += 1;
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 400);
    assert!(calls >= 8);

    let m: String = q(c, &["ZRANDMEMBER", "z"]);
    assert!(["a", "b", "c", "d", "e"].contains(&m.as_str()));
    assert_eq!(q::<Option<String>>(c, &["ZRANDMEMBER", "nokey"]), None);
    assert_eq!(
        strs(c, &["ZRANDMEMBER", "nokey", "2"]),
        Vec::<String>::new()
    );
    let three: HashSet<String> = strs(c, &["ZRANDMEMBER", "z", "3"]).into_iter().collect();
    assert_eq!(three.len(), 3);
    assert_eq!(strs(c, &["ZRANDMEMBER", "z", "9"]).len(), 5);
    assert_eq!(strs(c, &["ZRANDMEMBER", "z", "-9"]).len(), 9);
    let pairs = strs(c, &["ZRANDMEMBER", "z", "-4", "WITHSCORES"]);
    assert_eq!(pairs.len(), 8);
    for p in pairs.chunks(2) {
        assert_eq!(q::<String>(c, &["ZSCORE", "z", &p[0]]), p[1]);
    }
    assert_eq!(
        err(c, &["ZRANDMEMBER", "z", "1", "WITHVALUES"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["ZRANDMEMBER", "z", "x"]),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn wrong_type_everywhere() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<String>(c, &["SET", "s", "v"]);
    for args in [
        &["ZADD", "s", "1", "a"][..],
        &["ZADD", "s", "XX", "1", "a"],
        &["ZINCRBY", "s", "1", "a"],
        &["ZREM", "s", "a"],
        &["ZSCORE", "s", "a"],
        &["ZMSCORE", "s", "a"],
        &["ZCARD", "s"],
        &["ZCOUNT", "s", "0", "1"],
        &["ZLEXCOUNT", "s", "-", "+"],
        &["ZRANK", "s", "a"],
        &["ZREVRANK", "s", "a", "WITHSCORE"],
        &["ZRANGE", "s", "0", "-1"],
        &["ZREVRANGE", "s", "0", "-1"],
        &["ZRANGEBYSCORE", "s", "0", "1"],
        &["ZREVRANGEBYSCORE", "s", "1", "0"],
        &["ZRANGEBYLEX", "s", "-", "+"],
        &["ZREVRANGEBYLEX", "s", "+", "-"],
        &["ZREMRANGEBYSCORE", "s", "0", "1"],
        &["ZREMRANGEBYRANK", "s", "0", "1"],
        &["ZREMRANGEBYLEX", "s", "-", "+"],
        &["ZPOPMIN", "s"],
        &["ZPOPMAX", "s", "0"],
        &["ZSCAN", "s", "0"],
        &["ZRANDMEMBER", "s"],
        &["ZRANDMEMBER", "s", "1"],
    ] {
        assert_eq!(err(c, args), WRONGTYPE, "{args:?}");
    }
}

#[test]
fn resp3_shapes() {
    let srv = Server::start(&[]);
    let c = &mut resp3(&srv);
    q::<i64>(c, &["ZADD", "z", "1.5", "a", "2", "b", "3", "c"]);
    assert_eq!(q::<Value>(c, &["ZSCORE", "z", "a"]), Value::Double(1.5));
    assert_eq!(q::<Value>(c, &["ZSCORE", "z", "zz"]), Value::Nil);
    assert_eq!(
        q::<Value>(c, &["ZINCRBY", "z", "1", "b"]),
        Value::Double(3.0)
    );
    assert_eq!(
        q::<Value>(c, &["ZADD", "z", "INCR", "1", "c"]),
        Value::Double(4.0)
    );
    assert_eq!(
        q::<Value>(c, &["ZMSCORE", "z", "a", "zz"]),
        Value::Array(vec![Value::Double(1.5), Value::Nil])
    );
    let pair = |m: &str, s: f64| Value::Array(vec![bulk(m), Value::Double(s)]);
    assert_eq!(
        q::<Value>(c, &["ZRANGE", "z", "0", "1", "WITHSCORES"]),
        Value::Array(vec![pair("a", 1.5), pair("b", 3.0)])
    );
    assert_eq!(
        q::<Value>(c, &["ZRANK", "z", "b", "WITHSCORE"]),
        Value::Array(vec![Value::Int(1), Value::Double(3.0)])
    );
    // Without a count ZPOPMIN answers one flat pair; with one, nested pairs.
    assert_eq!(
        q::<Value>(c, &["ZPOPMIN", "z"]),
        Value::Array(vec![bulk("a"), Value::Double(1.5)])
    );
    assert_eq!(
        q::<Value>(c, &["ZPOPMAX", "z", "1"]),
        Value::Array(vec![pair("c", 4.0)])
    );
    assert_eq!(
        q::<Value>(c, &["ZRANDMEMBER", "z", "1", "WITHSCORES"]),
        Value::Array(vec![pair("b", 3.0)])
    );

    let c2 = &mut srv.conn();
    assert_eq!(q::<Value>(c2, &["ZSCORE", "z", "b"]), bulk("3"));
    assert_eq!(
        q::<Value>(c2, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        Value::Array(vec![bulk("b"), bulk("3")])
    );
    assert_eq!(
        q::<Value>(c2, &["ZPOPMAX", "z", "1"]),
        Value::Array(vec![bulk("b"), bulk("3")])
    );
}

/// ZUNION/ZINTER/ZDIFF, their STORE forms, ZINTERCARD and ZRANGESTORE,
/// with plain sets as inputs, weights, aggregates and Redis's errors.
#[test]
fn zset_algebra_and_rangestore() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: i64 = ok(&mut c, &["ZADD", "a", "1", "x", "2", "y", "3", "z"]);
    let _: i64 = ok(&mut c, &["ZADD", "b", "10", "y", "20", "z", "30", "w"]);
    let _: i64 = ok(&mut c, &["SADD", "s", "x", "w"]);
    let u: Vec<String> = ok(&mut c, &["ZUNION", "2", "a", "b", "WITHSCORES"]);
    assert_eq!(u, ["x", "1", "y", "12", "z", "23", "w", "30"]);
    let i: Vec<String> = ok(
        &mut c,
        &[
            "ZINTER",
            "2",
            "a",
            "b",
            "WEIGHTS",
            "2",
            "0.5",
            "AGGREGATE",
            "MAX",
            "WITHSCORES",
        ],
    );
    assert_eq!(i, ["y", "5", "z", "10"]);
    let d: Vec<String> = ok(&mut c, &["ZDIFF", "2", "a", "s"]);
    assert_eq!(d, ["y", "z"]);
    assert_eq!(ok::<i64>(&mut c, &["ZUNIONSTORE", "u", "2", "a", "s"]), 4);
    let u: Vec<String> = ok(&mut c, &["ZRANGE", "u", "0", "-1", "WITHSCORES"]);
    assert_eq!(u, ["w", "1", "x", "2", "y", "2", "z", "3"]);
    assert_eq!(ok::<i64>(&mut c, &["ZINTERSTORE", "u", "2", "a", "s"]), 1);
    assert_eq!(
        ok::<i64>(&mut c, &["ZINTERSTORE", "u", "2", "a", "nosuch"]),
        0
    );
    assert_eq!(
        ok::<i64>(&mut c, &["EXISTS", "u"]),
        0,
        "an empty result deletes the destination"
    );
    assert_eq!(ok::<i64>(&mut c, &["ZDIFFSTORE", "u", "2", "b", "a"]), 1);
    assert_eq!(ok::<i64>(&mut c, &["ZINTERCARD", "2", "a", "b"]), 2);
    assert_eq!(
        ok::<i64>(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "1"]),
        1
    );
    assert_eq!(
        ok::<i64>(&mut c, &["ZRANGESTORE", "r", "b", "(10", "+inf", "BYSCORE"]),
        2
    );
    let r: Vec<String> = ok(&mut c, &["ZRANGE", "r", "0", "-1"]);
    assert_eq!(r, ["z", "w"]);
    // inf + -inf sums to 0, not NaN.
    let _: i64 = ok(&mut c, &["ZADD", "p", "inf", "m"]);
    let _: i64 = ok(&mut c, &["ZADD", "n", "-inf", "m"]);
    let s: Vec<String> = ok(&mut c, &["ZUNION", "2", "p", "n", "WITHSCORES"]);
    assert_eq!(s, ["m", "0"]);

    assert_eq!(
        error(&mut c, &["ZUNION", "0", "a"]),
        "ERR at least 1 input key is needed for 'zunion' command"
    );
    assert_eq!(
        error(&mut c, &["ZUNIONSTORE", "u", "3", "a"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["ZUNIONSTORE", "u", "1", "a", "WITHSCORES"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["ZUNION", "2", "a", "b", "WEIGHTS", "1", "x"]),
        "ERR weight value is not a float"
    );
    assert_eq!(
        error(&mut c, &["ZINTERCARD", "0", "a"]),
        "ERR at least 1 input key is needed for 'zintercard' command"
    );
    assert_eq!(
        error(&mut c, &["ZINTERCARD", "1", "a", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
    let _: () = ok(&mut c, &["SET", "str", "v"]);
    assert!(error(&mut c, &["ZUNION", "2", "a", "str"]).starts_with("WRONGTYPE"));
    assert_eq!(
        error(&mut c, &["ZRANGESTORE", "r", "a", "0", "-1", "WITHSCORES"]),
        "ERR syntax error"
    );
}

/// Scores are read as Redis's `strtod` reads them: hexadecimal floats too,
/// but not a value outside a double's range. Range bounds, read with a
/// bare `strtod`, saturate instead.
#[test]
fn scores_parse_as_strtod_with_the_range_check() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(
        q::<i64>(
            c,
            &["ZADD", "z", "0x10", "a", "-0X1.8P1", "b", "4.9e-324", "c"]
        ),
        3
    );
    assert_eq!(q::<String>(c, &["ZSCORE", "z", "a"]), "16");
    assert_eq!(q::<String>(c, &["ZSCORE", "z", "b"]), "-3");
    for bad in [
        "1e309", "-1e309", "1e-400", "0x1p1024", "0x", "0x1p", "1e", " 5", "nan",
    ] {
        assert_eq!(
            err(c, &["ZADD", "z", bad, "x"]),
            "ERR value is not a valid float",
            "{bad:?}"
        );
        assert_eq!(
            err(c, &["ZINCRBY", "z", bad, "a"]),
            "ERR value is not a valid float"
        );
    }
    assert_eq!(
        strs(c, &["ZRANGEBYSCORE", "z", "1e-400", "1e309"]),
        ["c", "a"]
    );
    assert_eq!(q::<i64>(c, &["ZCOUNT", "z", "(0x1", "0x20"]), 1);
    // strtod skips leading white space, and an empty bound is 0.
    assert_eq!(q::<i64>(c, &["ZCOUNT", "z", " 0x10", "+inf"]), 1);
    assert_eq!(q::<i64>(c, &["ZCOUNT", "z", "", "+inf"]), 2);
    assert_eq!(q::<i64>(c, &["ZCOUNT", "z", "(", "+inf"]), 2);
    assert_eq!(
        err(c, &["ZCOUNT", "z", "1 ", "+inf"]),
        "ERR min or max is not a float"
    );
    // INCRBYFLOAT reads a long double in Redis: hex is taken there too.
    assert_eq!(q::<String>(c, &["INCRBYFLOAT", "f", "0x10"]), "16");
    assert_eq!(q::<String>(c, &["HINCRBYFLOAT", "h", "f", "1e-400"]), "0");
}

/// Scores go out as Redis 7.0 prints them (`%.17g`), in RESP2 and RESP3,
/// from every command that replies with a score; ZSCAN of a small set gives
/// the listpack's stored form, where whole numbers within ±2^62 are
/// integers. Redis 7.0's own ZSCORE tests compare these strings.
#[test]
fn scores_print_as_redis_7_0_does() {
    use common::RespConn;
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let scores = [
        ("0.1", "0.10000000000000001"),
        ("1e17", "1e+17"),
        ("123456789012345678", "1.2345678901234568e+17"),
        ("0.00001", "1.0000000000000001e-05"),
        ("-1e-7", "-9.9999999999999995e-08"),
        ("1e16", "10000000000000000"),
        ("4.7e18", "4.7e+18"),
        ("2.5", "2.5"),
    ];
    for (i, (given, _)) in scores.iter().enumerate() {
        q::<i64>(c, &["ZADD", "small", given, &format!("m{i}")]);
    }
    for (i, (_, text)) in scores.iter().enumerate() {
        assert_eq!(
            q::<String>(c, &["ZSCORE", "small", &format!("m{i}")]),
            *text
        );
    }
    assert_eq!(
        q::<Vec<String>>(c, &["ZMSCORE", "small", "m0", "m1"]),
        ["0.10000000000000001", "1e+17"]
    );
    assert_eq!(
        q::<String>(c, &["ZINCRBY", "small", "0.2", "m0"]),
        "0.30000000000000004"
    );
    assert_eq!(
        strs(c, &["ZRANGE", "small", "-2", "-1", "WITHSCORES"]),
        ["m2", "1.2345678901234568e+17", "m6", "4.7e+18"]
    );
    let scanned = |c: &mut Connection, key: &str| -> HashSet<String> {
        let (_, items): (String, Vec<String>) = q(c, &["ZSCAN", key, "0", "COUNT", "1000"]);
        items
            .chunks(2)
            .map(|p| format!("{}={}", p[0], p[1]))
            .collect()
    };
    let small = scanned(c, "small");
    for want in [
        "m1=100000000000000000",
        "m2=123456789012345680",
        "m6=4.7e+18",
    ] {
        assert!(small.contains(want), "{want} in {small:?}");
    }
    // Past the listpack limit the set is a skiplist, which scans as ZSCORE.
    let mut args = vec!["ZADD".to_string(), "big".into()];
    for i in 0..200 {
        args.extend([format!("{i}.5"), format!("n{i}")]);
    }
    args.extend(["1e17".into(), "top".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    q::<i64>(c, &args);
    assert!(scanned(c, "big").contains("top=1e+17"));

    let mut r = RespConn::new(srv.raw());
    r.send(&["HELLO", "3"]);
    r.frame();
    r.send(&["ZSCORE", "small", "m3"]);
    r.expect(",1.0000000000000001e-05\r\n");
}

/// Redis aggregates ZUNION/ZINTER inputs smallest first, and the order
/// shows in float sums and in which NaN product becomes 0 (answers taken
/// from redis-server 7.0.15).
#[test]
fn algebra_aggregates_the_smallest_input_first() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["ZADD", "big", "1e16", "m", "5", "p", "6", "q"]);
    q::<i64>(c, &["ZADD", "mid", "1", "m", "7", "p"]);
    q::<i64>(c, &["ZADD", "small", "1", "m"]);
    // 1 + 1 + 1e16 is 1e16 + 2; 1e16 + 1 + 1 rounds to 1e16.
    let inter = strs(c, &["ZINTER", "3", "big", "mid", "small", "WITHSCORES"]);
    assert_eq!(inter, ["m", "10000000000000002"]);
    let union = strs(c, &["ZUNION", "3", "big", "mid", "small", "WITHSCORES"]);
    assert_eq!(union, ["q", "6", "p", "12", "m", "10000000000000002"]);
    // -inf × -1, then -inf × 0 (NaN, which the sum makes 0), then
    // -inf × 2: inf, 0, -inf. Only the first product is made 0 when NaN.
    q::<i64>(c, &["ZADD", "a", "-inf", "x"]);
    let w: Vec<&str> = "ZINTER 3 a a a WEIGHTS -1 0 2 WITHSCORES"
        .split(' ')
        .collect();
    assert_eq!(strs(c, &w), ["x", "-inf"]);
    // MIN keeps the first of a tie.
    q::<i64>(c, &["ZADD", "z1", "2", "x"]);
    q::<i64>(c, &["ZADD", "z2", "-0", "x"]);
    let min: Vec<&str> = "ZINTER 2 z1 z2 WEIGHTS 0 1 AGGREGATE MIN WITHSCORES"
        .split(' ')
        .collect();
    assert_eq!(strs(c, &min), ["x", "0"]);
    // Fewer keys than numkeys: the shared check's syntax error, not
    // SINTERCARD's wording.
    assert_eq!(err(c, &["ZINTERCARD", "2", "a"]), "ERR syntax error");
}
