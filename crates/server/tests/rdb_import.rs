//! Moving a dataset from Redis: durakv's first start on a directory with
//! Redis's dump.rdb imports it, once, durably.

mod common;

use common::*;
use std::collections::HashMap;

/// The one value big enough to show in INFO memory.
const HUGE_BYTES: usize = 1_000_000;

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
    let huge = "y".repeat(HUGE_BYTES);
    let _: () = q(&mut c, &["SET", "huge", &huge]);
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
    assert_eq!(q::<usize>(c, &["STRLEN", "huge"]), HUGE_BYTES);
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
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 10);
    // What was imported is data, not memory the server holds for itself.
    let memory: String = q(&mut c, &["INFO", "memory"]);
    let dataset: usize = memory
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_dataset:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{memory}"));
    assert!(dataset >= HUGE_BYTES, "{memory}");

    // Imported durably: a crash right after keeps it all.
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 10);
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

    // Cut short again, and the file removed meanwhile: the partial data
    // goes and the server starts empty.
    srv.kill9();
    std::fs::write(srv.dir.path().join("rdb-import.in-progress"), b"").unwrap();
    std::fs::remove_file(srv.dir.path().join("dump.rdb")).unwrap();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
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

/// Copies a directory's files (not recursively).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        std::fs::copy(e.path(), to.join(e.file_name()))?;
    }
    Ok(())
}

/// What the AOF test checks, read from either server.
fn aof_state(c: &mut redis::Connection) -> Vec<String> {
    let mut out = Vec::new();
    for db in ["0", "2"] {
        let _: () = q(c, &["SELECT", db]);
        let mut keys: Vec<String> = q(c, &["KEYS", "*"]);
        keys.sort();
        for k in keys {
            let t: String = q(c, &["TYPE", &k]);
            let v = match t.as_str() {
                "string" => q::<String>(c, &["GET", &k]),
                "hash" => format!(
                    "{:?}",
                    q::<std::collections::BTreeMap<String, String>>(c, &["HGETALL", &k])
                ),
                "list" => strs(c, &["LRANGE", &k, "0", "-1"]).join(","),
                _ => t.clone(),
            };
            let ttl: i64 = q(c, &["TTL", &k]);
            out.push(format!("{db}/{k}={v} ttl>0:{}", ttl > 0));
        }
    }
    let _: () = q(c, &["SELECT", "0"]);
    out
}

/// `appendonly yes`, as Redis users who need every write keep it: the
/// manifest's base RDB and increments (SELECT, MULTI/EXEC, expiries,
/// deletes) are replayed, a torn last command is dropped as Redis drops
/// it, and the result matches what Redis serves.
#[test]
fn first_start_imports_redis_append_only_file() {
    let Some(redis) = RealRedis::start(&["--appendonly", "yes", "--appendfsync", "always"]) else {
        return;
    };
    let mut c = redis.conn();
    let _: () = q(&mut c, &["SET", "before-rewrite", "1"]);
    let _: i64 = q(&mut c, &["RPUSH", "l", "a", "b"]);
    let _: String = q(&mut c, &["BGREWRITEAOF"]);
    eventually("the AOF rewrite", || {
        info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(&mut c, "persistence", "aof_rewrite_scheduled") == "0"
    });
    let _: () = q(&mut c, &["SET", "s", "v1"]);
    let _: () = q(&mut c, &["SET", "s", "v2", "EX", "1000"]);
    let _: i64 = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    let _: i64 = q(&mut c, &["DEL", "before-rewrite"]);
    let _: i64 = q(&mut c, &["LPUSH", "l", "z"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["INCR", "n"]);
    let _: String = q(&mut c, &["INCR", "n"]);
    let _: Vec<i64> = q(&mut c, &["EXEC"]);
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: () = q(&mut c, &["SET", "in2", "x"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let expected = aof_state(&mut c);
    assert_eq!(expected.len(), 5, "{expected:?}");
    let rdir: Vec<String> = q(&mut c, &["CONFIG", "GET", "dir"]);
    let aof_dir = std::path::Path::new(&rdir[1]).join("appendonlydir");

    let dir = tempfile::tempdir().unwrap();
    copy_dir(&aof_dir, &dir.path().join("appendonlydir")).unwrap();
    drop(redis);
    // A command Redis was writing when it died.
    let manifest =
        std::fs::read_to_string(dir.path().join("appendonlydir/appendonly.aof.manifest")).unwrap();
    let incr = manifest
        .lines()
        .filter(|l| l.ends_with("type i"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .next_back()
        .unwrap()
        .to_string();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("appendonlydir").join(&incr))
        .unwrap();
    std::io::Write::write_all(&mut f, b"*3\r\n$3\r\nSET\r\n$4\r\ntorn").unwrap();
    drop(f);

    // Redis 6's single file is the base RDB with the commands after it.
    let legacy = tempfile::tempdir().unwrap();
    let mut one = Vec::new();
    for line in manifest.lines().filter(|l| !l.ends_with("type h")) {
        let name = line.split_whitespace().nth(1).unwrap();
        one.extend(std::fs::read(dir.path().join("appendonlydir").join(name)).unwrap());
    }
    assert!(one.starts_with(b"REDIS"));
    std::fs::write(legacy.path().join("appendonly.aof"), one).unwrap();

    let mut srv = Server::start_in(dir, &["--appendonly", "yes"]);
    let mut c = srv.conn();
    assert_eq!(aof_state(&mut c), expected);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "torn"]), None);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(aof_state(&mut c), expected);

    let srv = Server::start_in(legacy, &["--appendonly", "yes"]);
    let mut c = srv.conn();
    assert_eq!(aof_state(&mut c), expected);
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
    assert!(
        err.contains("has no") && err.contains("BGREWRITEAOF"),
        "{err}"
    );
    // With appendonly no, as durakv's own default, it starts.
    let (mut child, _) = try_spawn(dir.path(), &[]).unwrap();
    let _ = child.kill();
    let _ = child.wait();
}
