//! List and set commands over real sockets: replies, errors and RESP3
//! shapes as Redis gives them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{bulk, err, q, resp3, strs, Server, WRONGTYPE};
use redis::{Connection, Value};
use std::collections::HashSet;

fn sorted(c: &mut Connection, args: &[&str]) -> Vec<String> {
    let mut v = strs(c, args);
    v.sort();
    v
}

#[test]
fn push_pop_and_ranges() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(q::<i64>(c, &["RPUSH", "l", "a", "b", "c"]), 3);
    assert_eq!(q::<i64>(c, &["LPUSH", "l", "y", "x"]), 5);
    assert_eq!(
        strs(c, &["LRANGE", "l", "0", "-1"]),
        ["x", "y", "a", "b", "c"]
    );
    assert_eq!(strs(c, &["LRANGE", "l", "-2", "100"]), ["b", "c"]);
    assert_eq!(strs(c, &["LRANGE", "l", "-100", "0"]), ["x"]);
    assert_eq!(strs(c, &["LRANGE", "l", "3", "1"]), Vec::<String>::new());
    assert_eq!(
        strs(c, &["LRANGE", "nokey", "0", "-1"]),
        Vec::<String>::new()
    );
    assert_eq!(
        err(c, &["LRANGE", "l", "0", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<i64>(c, &["LPUSHX", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(c, &["RPUSHX", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(c, &["EXISTS", "nokey"]), 0);
    assert_eq!(q::<i64>(c, &["RPUSHX", "l", "d", "e"]), 7);
    assert_eq!(q::<i64>(c, &["LPUSHX", "l", "w"]), 8);
    assert_eq!(q::<i64>(c, &["LLEN", "l"]), 8);
    assert_eq!(q::<i64>(c, &["LLEN", "nokey"]), 0);

    assert_eq!(q::<String>(c, &["LPOP", "l"]), "w");
    assert_eq!(q::<String>(c, &["RPOP", "l"]), "e");
    assert_eq!(strs(c, &["LPOP", "l", "2"]), ["x", "y"]);
    assert_eq!(strs(c, &["RPOP", "l", "2"]), ["d", "c"]);
    assert_eq!(strs(c, &["LPOP", "l", "0"]), Vec::<String>::new());
    assert_eq!(strs(c, &["RPOP", "l", "10"]), ["b", "a"]);
    assert_eq!(q::<i64>(c, &["EXISTS", "l"]), 0);
    assert_eq!(q::<Option<String>>(c, &["LPOP", "l"]), None);
    assert_eq!(q::<Value>(c, &["LPOP", "l", "2"]), Value::Nil);
    assert_eq!(
        err(c, &["LPOP", "l", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err(c, &["RPOP", "l", "x"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err(c, &["LPOP", "l", "1", "2"]),
        "ERR wrong number of arguments for 'lpop' command"
    );
    assert_eq!(
        err(c, &["LPUSH", "l"]),
        "ERR wrong number of arguments for 'lpush' command"
    );

    // LRANGE as redis-benchmark runs it.
    let mut args = vec!["LPUSH", "mylist"];
    args.extend(std::iter::repeat_n("xxx", 600));
    assert_eq!(q::<i64>(c, &args), 600);
    for stop in ["99", "299", "449", "599"] {
        let n: usize = stop.parse::<usize>().unwrap() + 1;
        assert_eq!(strs(c, &["LRANGE", "mylist", "0", stop]).len(), n);
    }
}

#[test]
fn index_set_rem_trim_insert() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["RPUSH", "l", "a", "b", "a", "c", "a"]);
    assert_eq!(q::<String>(c, &["LINDEX", "l", "1"]), "b");
    assert_eq!(q::<String>(c, &["LINDEX", "l", "-1"]), "a");
    assert_eq!(q::<Option<String>>(c, &["LINDEX", "l", "5"]), None);
    assert_eq!(q::<Option<String>>(c, &["LINDEX", "nokey", "0"]), None);
    assert_eq!(
        err(c, &["LINDEX", "l", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<String>(c, &["LSET", "l", "-2", "C"]), "OK");
    assert_eq!(err(c, &["LSET", "l", "5", "z"]), "ERR index out of range");
    assert_eq!(err(c, &["LSET", "l", "-6", "z"]), "ERR index out of range");
    assert_eq!(err(c, &["LSET", "nokey", "0", "z"]), "ERR no such key");
    assert_eq!(
        strs(c, &["LRANGE", "l", "0", "-1"]),
        ["a", "b", "a", "C", "a"]
    );

    assert_eq!(q::<i64>(c, &["LREM", "l", "-1", "a"]), 1);
    assert_eq!(strs(c, &["LRANGE", "l", "0", "-1"]), ["a", "b", "a", "C"]);
    assert_eq!(q::<i64>(c, &["LREM", "l", "0", "a"]), 2);
    assert_eq!(q::<i64>(c, &["LREM", "l", "1", "zz"]), 0);
    assert_eq!(q::<i64>(c, &["LREM", "nokey", "1", "zz"]), 0);
    assert_eq!(
        err(c, &["LREM", "l", "x", "a"]),
        "ERR value is not an integer or out of range"
    );

    assert_eq!(q::<i64>(c, &["LINSERT", "l", "BEFORE", "C", "x"]), 3);
    assert_eq!(q::<i64>(c, &["LINSERT", "l", "after", "C", "y"]), 4);
    assert_eq!(q::<i64>(c, &["LINSERT", "l", "AFTER", "zz", "y"]), -1);
    assert_eq!(q::<i64>(c, &["LINSERT", "nokey", "AFTER", "zz", "y"]), 0);
    assert_eq!(
        err(c, &["LINSERT", "l", "MIDDLE", "C", "y"]),
        "ERR syntax error"
    );
    assert_eq!(strs(c, &["LRANGE", "l", "0", "-1"]), ["b", "x", "C", "y"]);

    assert_eq!(q::<String>(c, &["LTRIM", "l", "1", "-2"]), "OK");
    assert_eq!(strs(c, &["LRANGE", "l", "0", "-1"]), ["x", "C"]);
    assert_eq!(q::<String>(c, &["LTRIM", "nokey", "0", "1"]), "OK");
    assert_eq!(q::<String>(c, &["LTRIM", "l", "5", "1"]), "OK");
    assert_eq!(q::<i64>(c, &["EXISTS", "l"]), 0);
    q::<i64>(c, &["RPUSH", "r", "a", "a"]);
    assert_eq!(q::<i64>(c, &["LREM", "r", "0", "a"]), 2);
    assert_eq!(q::<i64>(c, &["EXISTS", "r"]), 0);
}

#[test]
fn lpos() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c"]);
    assert_eq!(q::<i64>(c, &["LPOS", "l", "c"]), 2);
    assert_eq!(q::<i64>(c, &["LPOS", "l", "c", "RANK", "2"]), 6);
    assert_eq!(q::<i64>(c, &["LPOS", "l", "c", "RANK", "-1"]), 7);
    assert_eq!(q::<Option<i64>>(c, &["LPOS", "l", "c", "RANK", "4"]), None);
    assert_eq!(q::<Vec<i64>>(c, &["LPOS", "l", "c", "COUNT", "2"]), [2, 6]);
    assert_eq!(
        q::<Vec<i64>>(c, &["LPOS", "l", "c", "COUNT", "0"]),
        [2, 6, 7]
    );
    assert_eq!(
        q::<Vec<i64>>(c, &["LPOS", "l", "c", "RANK", "-1", "COUNT", "2"]),
        [7, 6]
    );
    assert_eq!(
        q::<Vec<i64>>(c, &["LPOS", "l", "c", "COUNT", "0", "MAXLEN", "7"]),
        [2, 6]
    );
    assert_eq!(
        q::<Vec<i64>>(
            c,
            &["LPOS", "l", "c", "RANK", "-1", "MAXLEN", "1", "COUNT", "0"]
        ),
        [7]
    );
    assert_eq!(
        q::<Vec<i64>>(c, &["LPOS", "l", "zz", "COUNT", "0"]),
        Vec::<i64>::new()
    );
    assert_eq!(q::<Option<i64>>(c, &["LPOS", "l", "zz"]), None);
    assert_eq!(q::<Option<i64>>(c, &["LPOS", "nokey", "zz"]), None);
    assert_eq!(
        q::<Vec<i64>>(c, &["LPOS", "nokey", "zz", "COUNT", "1"]),
        Vec::<i64>::new()
    );
    assert_eq!(
        err(c, &["LPOS", "l", "c", "RANK", "0"]),
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
    );
    assert_eq!(
        err(c, &["LPOS", "l", "c", "COUNT", "-1"]),
        "ERR COUNT can't be negative"
    );
    assert_eq!(
        err(c, &["LPOS", "l", "c", "MAXLEN", "-1"]),
        "ERR MAXLEN can't be negative"
    );
    assert_eq!(err(c, &["LPOS", "l", "c", "RANK"]), "ERR syntax error");
    assert_eq!(err(c, &["LPOS", "l", "c", "FOO", "1"]), "ERR syntax error");
    assert_eq!(
        err(c, &["LPOS", "l", "c", "RANK", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
}

#[test]
fn lmove_and_rpoplpush() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["RPUSH", "src", "a", "b", "c"]);
    assert_eq!(q::<String>(c, &["RPOPLPUSH", "src", "dst"]), "c");
    assert_eq!(
        q::<String>(c, &["LMOVE", "src", "dst", "LEFT", "RIGHT"]),
        "a"
    );
    assert_eq!(strs(c, &["LRANGE", "dst", "0", "-1"]), ["c", "a"]);
    assert_eq!(
        q::<String>(c, &["LMOVE", "src", "dst", "right", "left"]),
        "b"
    );
    assert_eq!(q::<i64>(c, &["EXISTS", "src"]), 0);
    assert_eq!(
        q::<Option<String>>(c, &["LMOVE", "src", "dst", "LEFT", "LEFT"]),
        None
    );
    assert_eq!(
        err(c, &["LMOVE", "dst", "x", "UP", "LEFT"]),
        "ERR syntax error"
    );
    // Same key: rotation, keeping the key (and its TTL) even at one element.
    assert_eq!(
        q::<String>(c, &["LMOVE", "dst", "dst", "LEFT", "RIGHT"]),
        "b"
    );
    assert_eq!(strs(c, &["LRANGE", "dst", "0", "-1"]), ["c", "a", "b"]);
    assert_eq!(q::<String>(c, &["RPOPLPUSH", "dst", "dst"]), "b");
    assert_eq!(strs(c, &["LRANGE", "dst", "0", "-1"]), ["b", "c", "a"]);
    q::<i64>(c, &["RPUSH", "one", "x"]);
    q::<i64>(c, &["EXPIRE", "one", "100"]);
    assert_eq!(q::<String>(c, &["RPOPLPUSH", "one", "one"]), "x");
    assert_eq!(strs(c, &["LRANGE", "one", "0", "-1"]), ["x"]);
    assert!(q::<i64>(c, &["TTL", "one"]) > 0);
    // A wrong-typed destination fails before anything is popped.
    q::<String>(c, &["SET", "str", "v"]);
    assert_eq!(err(c, &["LMOVE", "dst", "str", "LEFT", "LEFT"]), WRONGTYPE);
    assert_eq!(err(c, &["RPOPLPUSH", "str", "dst"]), WRONGTYPE);
    assert_eq!(q::<i64>(c, &["LLEN", "dst"]), 3);
    assert_eq!(q::<Option<String>>(c, &["RPOPLPUSH", "nokey", "str"]), None);
    // Inside MULTI, across keys in different shards.
    let mut pipe = redis::pipe();
    pipe.atomic();
    for i in 0..20 {
        pipe.cmd("LMOVE")
            .arg("dst")
            .arg(format!("k{i}"))
            .arg("LEFT")
            .arg("LEFT");
        pipe.cmd("LMOVE")
            .arg(format!("k{i}"))
            .arg("dst")
            .arg("LEFT")
            .arg("RIGHT");
    }
    let _: Vec<String> = pipe.query(c).unwrap();
    assert_eq!(q::<i64>(c, &["LLEN", "dst"]), 3);
}

#[test]
fn list_wrong_type() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["SADD", "s", "v"]);
    for args in [
        &["LPUSH", "s", "a"][..],
        &["RPUSH", "s", "a"],
        &["LPUSHX", "s", "a"],
        &["RPUSHX", "s", "a"],
        &["LPOP", "s"],
        &["RPOP", "s", "2"],
        &["LRANGE", "s", "0", "-1"],
        &["LLEN", "s"],
        &["LINDEX", "s", "0"],
        &["LSET", "s", "0", "a"],
        &["LREM", "s", "0", "a"],
        &["LTRIM", "s", "0", "1"],
        &["LINSERT", "s", "BEFORE", "a", "b"],
        &["LPOS", "s", "a"],
        &["LMOVE", "s", "d", "LEFT", "LEFT"],
        &["RPOPLPUSH", "s", "d"],
    ] {
        assert_eq!(err(c, args), WRONGTYPE, "{args:?}");
    }
}

#[test]
fn set_basics_and_random() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(q::<i64>(c, &["SADD", "s", "a", "b", "a", "c"]), 3);
    assert_eq!(q::<i64>(c, &["SADD", "s", "a", "d"]), 1);
    assert_eq!(sorted(c, &["SMEMBERS", "s"]), ["a", "b", "c", "d"]);
    assert_eq!(strs(c, &["SMEMBERS", "nokey"]), Vec::<String>::new());
    assert_eq!(q::<i64>(c, &["SISMEMBER", "s", "a"]), 1);
    assert_eq!(q::<i64>(c, &["SISMEMBER", "s", "z"]), 0);
    assert_eq!(q::<i64>(c, &["SISMEMBER", "nokey", "z"]), 0);
    assert_eq!(
        q::<Vec<i64>>(c, &["SMISMEMBER", "s", "a", "z", "d"]),
        [1, 0, 1]
    );
    assert_eq!(q::<Vec<i64>>(c, &["SMISMEMBER", "nokey", "a"]), [0]);
    assert_eq!(q::<i64>(c, &["SCARD", "s"]), 4);
    assert_eq!(q::<i64>(c, &["SCARD", "nokey"]), 0);
    assert_eq!(q::<i64>(c, &["SREM", "s", "a", "a", "z"]), 1);
    assert_eq!(q::<i64>(c, &["SREM", "nokey", "a"]), 0);

    let m: String = q(c, &["SRANDMEMBER", "s"]);
    assert!(["b", "c", "d"].contains(&m.as_str()));
    assert_eq!(q::<Option<String>>(c, &["SRANDMEMBER", "nokey"]), None);
    assert_eq!(
        strs(c, &["SRANDMEMBER", "nokey", "5"]),
        Vec::<String>::new()
    );
    assert_eq!(strs(c, &["SRANDMEMBER", "s", "0"]), Vec::<String>::new());
    assert_eq!(
        strs(c, &["SRANDMEMBER", "s", "2"])
            .into_iter()
            .collect::<HashSet<_>>()
            .len(),
        2
    );
    assert_eq!(sorted(c, &["SRANDMEMBER", "s", "10"]), ["b", "c", "d"]);
    let rep = strs(c, &["SRANDMEMBER", "s", "-10"]);
    assert_eq!(rep.len(), 10);
    assert!(rep.iter().all(|m| ["b", "c", "d"].contains(&m.as_str())));
    assert_eq!(err(c, &["SRANDMEMBER", "s", "1", "2"]), "ERR syntax error");
    assert_eq!(
        err(c, &["SRANDMEMBER", "s", "x"]),
        "ERR value is not an integer or out of range"
    );

    let popped: String = q(c, &["SPOP", "s"]);
    assert_eq!(q::<i64>(c, &["SISMEMBER", "s", &popped]), 0);
    assert_eq!(strs(c, &["SPOP", "s", "0"]), Vec::<String>::new());
    assert_eq!(strs(c, &["SPOP", "s", "1"]).len(), 1);
    assert_eq!(strs(c, &["SPOP", "s", "5"]).len(), 1);
    assert_eq!(q::<i64>(c, &["EXISTS", "s"]), 0);
    assert_eq!(q::<Option<String>>(c, &["SPOP", "s"]), None);
    assert_eq!(strs(c, &["SPOP", "s", "3"]), Vec::<String>::new());
    assert_eq!(
        err(c, &["SPOP", "s", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(err(c, &["SPOP", "s", "1", "2"]), "ERR syntax error");
    q::<i64>(c, &["SADD", "t", "a", "b"]);
    assert_eq!(q::<i64>(c, &["SREM", "t", "a", "b"]), 2);
    assert_eq!(q::<i64>(c, &["EXISTS", "t"]), 0);
}

#[test]
fn set_algebra_and_moves() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["SADD", "s1", "a", "b", "c", "d"]);
    q::<i64>(c, &["SADD", "s2", "c", "d", "e"]);
    q::<i64>(c, &["SADD", "s3", "d", "x"]);
    assert_eq!(sorted(c, &["SINTER", "s1", "s2"]), ["c", "d"]);
    assert_eq!(sorted(c, &["SINTER", "s1", "s2", "s3"]), ["d"]);
    assert_eq!(sorted(c, &["SINTER", "s1", "nokey"]), Vec::<String>::new());
    assert_eq!(
        sorted(c, &["SUNION", "s2", "s3", "nokey"]),
        ["c", "d", "e", "x"]
    );
    assert_eq!(sorted(c, &["SDIFF", "s1", "s2"]), ["a", "b"]);
    assert_eq!(sorted(c, &["SDIFF", "s1", "nokey", "s3"]), ["a", "b", "c"]);
    assert_eq!(sorted(c, &["SDIFF", "nokey", "s1"]), Vec::<String>::new());
    assert_eq!(q::<i64>(c, &["SINTERCARD", "2", "s1", "s2"]), 2);
    assert_eq!(
        q::<i64>(c, &["SINTERCARD", "2", "s1", "s2", "LIMIT", "1"]),
        1
    );
    assert_eq!(
        q::<i64>(c, &["SINTERCARD", "2", "s1", "s2", "LIMIT", "0"]),
        2
    );
    assert_eq!(q::<i64>(c, &["SINTERCARD", "1", "nokey"]), 0);
    assert_eq!(
        err(c, &["SINTERCARD", "0", "s1"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(c, &["SINTERCARD", "x", "s1"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(c, &["SINTERCARD", "3", "s1", "s2"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        err(c, &["SINTERCARD", "1", "s1", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
    assert_eq!(
        err(c, &["SINTERCARD", "1", "s1", "LIMIT"]),
        "ERR syntax error"
    );

    // Stores replace whatever the destination held, TTL included.
    q::<String>(c, &["SET", "dest", "old", "EX", "100"]);
    assert_eq!(q::<i64>(c, &["SINTERSTORE", "dest", "s1", "s2"]), 2);
    assert_eq!(sorted(c, &["SMEMBERS", "dest"]), ["c", "d"]);
    assert_eq!(q::<i64>(c, &["TTL", "dest"]), -1);
    assert_eq!(q::<i64>(c, &["SUNIONSTORE", "dest", "dest", "s3"]), 3);
    assert_eq!(q::<i64>(c, &["SDIFFSTORE", "dest", "s1", "dest"]), 2);
    assert_eq!(sorted(c, &["SMEMBERS", "dest"]), ["a", "b"]);
    assert_eq!(q::<i64>(c, &["SINTERSTORE", "dest", "s1", "nokey"]), 0);
    assert_eq!(q::<i64>(c, &["EXISTS", "dest"]), 0);
    assert_eq!(q::<i64>(c, &["SUNIONSTORE", "dest", "nokey"]), 0);
    assert_eq!(q::<i64>(c, &["EXISTS", "dest"]), 0);

    assert_eq!(q::<i64>(c, &["SMOVE", "s1", "s2", "a"]), 1);
    assert_eq!(q::<i64>(c, &["SMOVE", "s1", "s2", "c"]), 1);
    assert_eq!(q::<i64>(c, &["SMOVE", "s1", "s2", "zz"]), 0);
    assert_eq!(q::<i64>(c, &["SMOVE", "nokey", "s2", "a"]), 0);
    assert_eq!(q::<i64>(c, &["SMOVE", "s2", "s2", "a"]), 1);
    assert_eq!(q::<i64>(c, &["SMOVE", "s2", "s2", "zz"]), 0);
    assert_eq!(sorted(c, &["SMEMBERS", "s1"]), ["b", "d"]);
    assert_eq!(sorted(c, &["SMEMBERS", "s2"]), ["a", "c", "d", "e"]);
    assert_eq!(q::<i64>(c, &["SMOVE", "s3", "fresh", "x"]), 1);
    assert_eq!(q::<i64>(c, &["SMOVE", "s3", "fresh", "d"]), 1);
    assert_eq!(q::<i64>(c, &["EXISTS", "s3"]), 0);
    assert_eq!(sorted(c, &["SMEMBERS", "fresh"]), ["d", "x"]);

    q::<String>(c, &["SET", "str", "v"]);
    for args in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SPOP", "str", "2"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "-2"],
        &["SSCAN", "str", "0"],
        &["SINTER", "nokey", "str"],
        &["SUNION", "s1", "str"],
        &["SDIFF", "nokey", "str"],
        &["SINTERSTORE", "d", "s1", "str"],
        &["SUNIONSTORE", "d", "str"],
        &["SDIFFSTORE", "d", "s1", "str"],
        &["SMOVE", "str", "s1", "a"],
        &["SMOVE", "s1", "str", "b"],
        &["SINTERCARD", "2", "s1", "str"],
    ] {
        assert_eq!(err(c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(q::<i64>(c, &["SISMEMBER", "s1", "b"]), 1);
    // A store onto a string key overwrites it.
    assert_eq!(q::<i64>(c, &["SUNIONSTORE", "str", "s1"]), 2);
    assert_eq!(q::<String>(c, &["TYPE", "str"]), "set");
}

#[test]
fn an_integer_set_lists_in_ascending_order_everywhere() {
    // Redis keeps a small all-integer set as a sorted intset, so every
    // command that lists a whole one lists it ascending, not only SMEMBERS.
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["SADD", "si", "3", "1", "2", "10", "-5"]);
    q::<i64>(c, &["SADD", "sj", "10", "3", "99"]);
    let all = ["-5", "1", "2", "3", "10"];
    assert_eq!(strs(c, &["SMEMBERS", "si"]), all);
    assert_eq!(strs(c, &["SORT", "si", "BY", "nosort"]), all);
    assert_eq!(
        strs(c, &["SORT", "si", "BY", "nosort", "LIMIT", "1", "2"]),
        ["1", "2"]
    );
    assert_eq!(strs(c, &["SRANDMEMBER", "si", "5"]), all);
    assert_eq!(strs(c, &["SRANDMEMBER", "si", "100"]), all);
    assert_eq!(strs(c, &["SINTER", "si", "si"]), all);
    assert_eq!(strs(c, &["SINTER", "si", "sj"]), ["3", "10"]);
    assert_eq!(
        strs(c, &["SUNION", "sj", "si"]),
        ["-5", "1", "2", "3", "10", "99"]
    );
    assert_eq!(strs(c, &["SDIFF", "si", "sj"]), ["-5", "1", "2"]);
    assert_eq!(strs(c, &["SPOP", "si", "9"]), all);
    assert_eq!(q::<i64>(c, &["EXISTS", "si"]), 0);
}

#[test]
fn sscan_walk() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<i64>(c, &["SADD", "small", "1", "2", "3"]);
    let (cur, mut items): (String, Vec<String>) = q(c, &["SSCAN", "small", "0", "COUNT", "1"]);
    items.sort();
    assert_eq!(
        (cur.as_str(), items),
        ("0", vec!["1".into(), "2".into(), "3".into()])
    );
    assert_eq!(
        err(c, &["SSCAN", "small", "0", "NOVALUES"]),
        "ERR NOVALUES option can only be used in HSCAN"
    );
    let mut args = vec!["SADD".to_string(), "big".into()];
    for i in 0..1000 {
        args.push(format!("m{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(c, &refs), 1000);
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut deleted = HashSet::new();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) =
            q(c, &["SSCAN", "big", &cursor, "COUNT", "40", "MATCH", "m*"]);
        seen.extend(items);
        calls += 1;
        if calls == 5 {
            for i in (0..1000).step_by(3) {
                let m = format!("m{i}");
                q::<i64>(c, &["SREM", "big", &m]);
                deleted.insert(m);
            }
            q::<i64>(c, &["SADD", "big", "late1", "late2"]);
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    for i in 0..1000 {
        let m = format!("m{i}");
        assert!(deleted.contains(&m) || seen.contains(&m), "{m} missed");
    }
    assert!(!seen.contains("late1"), "MATCH filters");
}

#[test]
fn resp3_shapes() {
    let srv = Server::start(&[]);
    let c = &mut resp3(&srv);
    q::<i64>(c, &["SADD", "s", "a"]);
    q::<i64>(c, &["SADD", "t", "a", "b"]);
    assert_eq!(
        q::<Value>(c, &["SMEMBERS", "s"]),
        Value::Set(vec![bulk("a")])
    );
    assert_eq!(q::<Value>(c, &["SMEMBERS", "nokey"]), Value::Set(vec![]));
    assert_eq!(
        q::<Value>(c, &["SINTER", "s", "t"]),
        Value::Set(vec![bulk("a")])
    );
    assert_eq!(
        q::<Value>(c, &["SDIFF", "t", "s"]),
        Value::Set(vec![bulk("b")])
    );
    assert!(matches!(q::<Value>(c, &["SUNION", "s", "t"]), Value::Set(v) if v.len() == 2));
    assert_eq!(
        q::<Value>(c, &["SRANDMEMBER", "s", "-2"]),
        Value::Array(vec![bulk("a"), bulk("a")])
    );
    assert_eq!(
        q::<Value>(c, &["SPOP", "s", "1"]),
        Value::Set(vec![bulk("a")])
    );
    assert_eq!(q::<Value>(c, &["SPOP", "s", "1"]), Value::Set(vec![]));
    assert_eq!(q::<Value>(c, &["SPOP", "s"]), Value::Nil);
    assert_eq!(q::<Value>(c, &["LPOP", "nokey", "1"]), Value::Nil);
    q::<i64>(c, &["RPUSH", "l", "a"]);
    assert_eq!(
        q::<Value>(c, &["LPOP", "l", "1"]),
        Value::Array(vec![bulk("a")])
    );

    let c2 = &mut srv.conn();
    assert!(matches!(q::<Value>(c2, &["SMEMBERS", "t"]), Value::Array(v) if v.len() == 2));
}

/// A list of many packed blocks, built and edited at both ends and in the
/// middle with short, long and block-sized elements, reads back as a model
/// of it says after every step, and again after kill -9 and a restart (as
/// do the TTLs, which live beside the keys), from a checkpoint taken
/// halfway and the log after it.
#[test]
fn a_long_list_of_mixed_elements_survives_kill_9() {
    let mut srv = Server::start(&[]);
    let c = &mut srv.conn();
    let mut model: std::collections::VecDeque<Vec<u8>> = Default::default();
    // A fixed LCG: the same sequence every run, without a dependency.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let element = |next: &mut dyn FnMut(u64) -> u64| -> Vec<u8> {
        let len = match next(20) {
            0 => 5000 + next(4000),
            1..=3 => 128 + next(200),
            _ => next(40),
        };
        let b = b'a' + next(3) as u8;
        vec![b; len as usize]
    };
    let all = |c: &mut Connection| -> Vec<Vec<u8>> {
        redis::cmd("LRANGE")
            .arg("l")
            .arg(0)
            .arg(-1)
            .query(c)
            .unwrap()
    };
    for step in 0..600 {
        let len = model.len() as u64;
        match next(10) {
            0..=2 => {
                let e = element(&mut next);
                let _: i64 = redis::cmd("RPUSH").arg("l").arg(&e).query(c).unwrap();
                model.push_back(e);
            }
            3..=4 => {
                let e = element(&mut next);
                let _: i64 = redis::cmd("LPUSH").arg("l").arg(&e).query(c).unwrap();
                model.push_front(e);
            }
            5 if len > 0 => {
                let i = next(len) as usize;
                let e = element(&mut next);
                let _: () = redis::cmd("LSET").arg("l").arg(i).arg(&e).query(c).unwrap();
                model[i] = e;
            }
            6 if len > 0 => {
                let i = next(len) as usize;
                let e = element(&mut next);
                let pivot = model[i].clone();
                let at = model.iter().position(|x| *x == pivot).unwrap();
                let _: i64 = redis::cmd("LINSERT")
                    .arg("l")
                    .arg("BEFORE")
                    .arg(&pivot)
                    .arg(&e)
                    .query(c)
                    .unwrap();
                model.insert(at, e);
            }
            7 if len > 0 => {
                let e = model[next(len) as usize].clone();
                let removed: usize = redis::cmd("LREM")
                    .arg("l")
                    .arg(-1)
                    .arg(&e)
                    .query(c)
                    .unwrap();
                assert_eq!(removed, 1);
                let at = model.iter().rposition(|x| *x == e).unwrap();
                model.remove(at);
            }
            8 if len > 4 => {
                let _: Option<Vec<u8>> = redis::cmd("LPOP").arg("l").query(c).unwrap();
                let _: Option<Vec<u8>> = redis::cmd("RPOP").arg("l").query(c).unwrap();
                model.pop_front();
                model.pop_back();
            }
            9 if len > 50 => {
                let _: () = redis::cmd("LTRIM")
                    .arg("l")
                    .arg(1)
                    .arg(-2)
                    .query(c)
                    .unwrap();
                model.pop_front();
                model.pop_back();
            }
            _ => {}
        }
        if step == 300 {
            // The restart then loads a checkpoint and replays the rest.
            let saved: redis::RedisResult<()> = redis::cmd("SAVE").query(c);
            saved.unwrap();
        }
        if step % 50 == 0 || step == 599 {
            assert_eq!(all(c), Vec::from(model.clone()), "step {step}");
            if !model.is_empty() {
                let i = next(model.len() as u64) as usize;
                let got: Vec<u8> = redis::cmd("LINDEX").arg("l").arg(i).query(c).unwrap();
                assert_eq!(got, model[i]);
            }
        }
    }
    assert!(model.len() > 100, "the list grew past a few blocks");
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("v")
        .arg("EX")
        .arg(1000)
        .query(c)
        .unwrap();
    let _: i64 = redis::cmd("EXPIRE").arg("l").arg(2000).query(c).unwrap();
    srv.kill9();
    srv.restart();
    let c = &mut srv.conn();
    assert_eq!(all(c), Vec::from(model));
    let ttl_t: i64 = redis::cmd("TTL").arg("t").query(c).unwrap();
    let ttl_l: i64 = redis::cmd("TTL").arg("l").query(c).unwrap();
    assert!(
        (990..=1000).contains(&ttl_t),
        "TTL of t after restart: {ttl_t}"
    );
    assert!(
        (1990..=2000).contains(&ttl_l),
        "TTL of l after restart: {ttl_l}"
    );
}
