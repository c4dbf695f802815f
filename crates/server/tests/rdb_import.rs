//! Moving a dataset from Redis: durakv's first start on a directory with
//! Redis's dump.rdb imports it, once, durably.

mod common;

use common::*;
use std::collections::HashMap;

/// A dump.rdb written by a real Redis with one key of each type, a TTL,
/// a key in another database and a function library; None without Redis.
fn redis_dump() -> Option<Vec<u8>> {
    let redis = RealRedis::start(&[])?;
    let mut c = redis.conn();
    let _: () = q(&mut c, &["SET", "s", "hello"]);
    let _: () = q(&mut c, &["SET", "n", "12345"]);
    let _: () = q(&mut c, &["SET", "ttl", "v", "EX", "1000"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"]);
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    let _: i64 = q(&mut c, &["SADD", "set", "1", "2", "3"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "1.5", "m1", "2", "m2"]);
    let _: String = q(&mut c, &["XADD", "x", "1-1", "f", "v"]);
    let big = "x".repeat(5000);
    let _: () = q(&mut c, &["SET", "big", &big]);
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: () = q(&mut c, &["SET", "in3", "yes"]);
    let _: String = q(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=mylib\nredis.register_function('hi', function() return 'hi' end)",
        ],
    );
    let _: () = q(&mut c, &["SAVE"]);
    let dir: Vec<String> = q(&mut c, &["CONFIG", "GET", "dir"]);
    std::fs::read(std::path::Path::new(&dir[1]).join("dump.rdb")).ok()
}

fn check_dataset(c: &mut redis::Connection) {
    let got: Option<String> = q(c, &["GET", "s"]);
    assert_eq!(got.as_deref(), Some("hello"));
    let got: i64 = q(c, &["INCR", "n"]);
    assert_eq!(got, 12346);
    let ttl: i64 = q(c, &["TTL", "ttl"]);
    assert!((900..=1000).contains(&ttl), "{ttl}");
    let h: HashMap<String, String> = q(c, &["HGETALL", "h"]);
    assert_eq!(h.len(), 2);
    assert_eq!(h["f2"], "v2");
    assert_eq!(strs(c, &["LRANGE", "l", "0", "-1"]), ["a", "b", "c"]);
    assert_eq!(q::<i64>(c, &["SCARD", "set"]), 3);
    assert_eq!(q::<String>(c, &["ZSCORE", "z", "m1"]), "1.5");
    assert_eq!(q::<i64>(c, &["XLEN", "x"]), 1);
    assert_eq!(q::<i64>(c, &["STRLEN", "big"]), 5000);
    let _: () = q(c, &["SELECT", "3"]);
    assert_eq!(q::<String>(c, &["GET", "in3"]), "yes");
    let _: () = q(c, &["SELECT", "0"]);
    assert_eq!(q::<String>(c, &["FCALL", "hi", "0"]), "hi");
}

#[test]
fn first_start_imports_redis_dump_once_and_keeps_it() {
    let Some(dump) = redis_dump() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dump.rdb"), &dump).unwrap();
    let mut srv = Server::start_in(dir, &[]);
    let mut c = srv.conn();
    check_dataset(&mut c);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 9);

    // Imported durably: a crash right after keeps it all.
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 9);
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), "12346");

    // Never again: the store holds the data now, and the file is a
    // leftover that must not bring deleted keys back.
    let _: () = q(&mut c, &["FLUSHALL"]);
    let _: () = q(&mut c, &["SET", "after", "1"]);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
}

#[test]
fn an_import_cut_short_is_done_again_from_the_start() {
    let Some(dump) = redis_dump() else { return };
    let dir = tempfile::tempdir().unwrap();
    // A store that logged a key of its own, then a marker as an import
    // killed part-way leaves it.
    let mut srv = Server::start_in(dir, &["--dbfilename", "none.rdb"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SET", "partial", "1"]);
    srv.kill9();
    std::fs::write(srv.dir.path().join("dump.rdb"), &dump).unwrap();
    std::fs::write(srv.dir.path().join("rdb-import.in-progress"), b"").unwrap();
    srv.args.clear();
    srv.restart();
    let mut c = srv.conn();
    check_dataset(&mut c);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "partial"]), None);
    assert!(!srv.dir.path().join("rdb-import.in-progress").exists());
}

#[test]
fn a_damaged_dump_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dump.rdb"), b"REDIS0010garbage").unwrap();
    let err = match try_spawn(dir.path(), &[]) {
        Err(e) => e,
        Ok((mut child, _)) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("started on a damaged dump.rdb");
        }
    };
    assert!(err.contains("importing"), "{err}");
}

#[test]
fn a_redis_directory_kept_in_an_aof_is_refused_not_started_empty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("appendonlydir")).unwrap();
    let err = match try_spawn(dir.path(), &["--appendonly".to_string(), "yes".to_string()]) {
        Err(e) => e,
        Ok((mut child, _)) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("started empty beside Redis's AOF");
        }
    };
    assert!(err.contains("does not import"), "{err}");
    // With appendonly no, as durakv's own default, it starts.
    let (mut child, _) = try_spawn(dir.path(), &[]).unwrap();
    let _ = child.kill();
    let _ = child.wait();
}
