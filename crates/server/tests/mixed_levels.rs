//! Mixed durability levels and databases: the log stays replayable, the
//! server restarts by itself, and no reply at `full` reveals a write a
//! crash could still lose. One test per scenario of the issue that found
//! them (see `docs/durability.md`, "Which writes are logged").
//!
//! The delayed window is at its maximum (10 s), so a write acknowledged only
//! under `delayed` is certainly not on disk at a kill -9 unless something
//! made it durable: that is what these tests observe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, q, strs, Server};

const LONG_WINDOW: &[&str] = &["--delayed-flush-ms", "10000"];

fn level(c: &mut redis::Connection, level: &str) {
    let _: () = q(c, &["CLIENT", "DURABILITY", level]);
}

fn args<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

#[test]
fn unlogged_connection_history_under_a_logged_record_replays() {
    let mut srv = Server::start(&[]);
    let mut a = srv.conn();
    level(&mut a, "none");
    let _: i64 = q(&mut a, &["RPUSH", "L", "a", "b"]);
    let mut b = srv.conn();
    let _: () = q(&mut b, &["LSET", "L", "0", "x"]);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(strs(&mut c, &["LRANGE", "L", "0", "-1"]), ["x", "b"]);
}

#[test]
fn move_from_an_unlogged_database_is_logged_whole() {
    let mut srv = Server::start(&["--durability-db-1", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: i64 = q(&mut c, &["RPUSH", "L", "a", "b"]);
    let _: i64 = q(&mut c, &["HSET", "H", "f", "1"]);
    let _: i64 = q(&mut c, &["MOVE", "L", "0"]);
    let _: i64 = q(&mut c, &["COPY", "H", "H", "DB", "0"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let _: i64 = q(&mut c, &["RPUSH", "L", "c"]);
    let _: i64 = q(&mut c, &["HSET", "H", "g", "2"]);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(strs(&mut c, &["LRANGE", "L", "0", "-1"]), ["a", "b", "c"]);
    assert_eq!(strs(&mut c, &["HMGET", "H", "f", "g"]), ["1", "2"]);
}

#[test]
fn swapdb_with_an_unlogged_database_logs_the_new_content() {
    let mut srv = Server::start(&["--durability-db-1", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SET", "old", "gone"]);
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: i64 = q(&mut c, &["RPUSH", "L", "a"]);
    let _: () = q(&mut c, &["SET", "ttl", "v", "EX", "1000"]);
    let _: () = q(&mut c, &["SWAPDB", "0", "1"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let _: i64 = q(&mut c, &["RPUSH", "L", "b"]);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(strs(&mut c, &["LRANGE", "L", "0", "-1"]), ["a", "b"]);
    let ttl: i64 = q(&mut c, &["TTL", "ttl"]);
    assert!((990..=1000).contains(&ttl), "ttl {ttl}");
    let old: Option<String> = q(&mut c, &["GET", "old"]);
    assert_eq!(old, None, "db 0's old content moved to the unlogged db 1");
}

#[test]
fn config_set_makes_a_database_logged_with_its_content() {
    let mut srv = Server::start(&["--durability-db-1", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: i64 = q(&mut c, &["RPUSH", "L", "a", "b"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "durability-db-1", "full"]);
    let _: () = q(&mut c, &["LSET", "L", "0", "x"]);
    srv.kill9();
    srv.args.extend(["--durability-db-1".into(), "full".into()]);
    srv.restart();
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SELECT", "1"]);
    assert_eq!(strs(&mut c, &["LRANGE", "L", "0", "-1"]), ["x", "b"]);
}

#[test]
fn a_command_writing_several_databases_takes_the_strictest_level() {
    // db 1 is `none`: a MULTI that writes it first and db 0 second used to
    // take db 1's level for the whole transaction and go unlogged.
    let mut srv = Server::start(&args(LONG_WINDOW, &["--durability-db-1", "none"]));
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SELECT", "1"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["SET", "scratch", "1"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let _: () = q(&mut c, &["SET", "kept", "1"]);
    let _: redis::Value = q(&mut c, &["EXEC"]);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    let v: Option<String> = q(&mut c, &["GET", "kept"]);
    assert_eq!(v.as_deref(), Some("1"), "EXEC was acknowledged at full");
}

#[test]
fn exec_aborted_by_watch_waits_for_the_conflicting_write() {
    let mut srv = Server::start(LONG_WINDOW);
    let mut watcher = srv.conn();
    let mut writer = srv.conn();
    level(&mut writer, "delayed");
    let _: () = q(&mut watcher, &["WATCH", "k"]);
    let _: () = q(&mut writer, &["SET", "k", "v"]);
    let _: () = q(&mut watcher, &["MULTI"]);
    let _: () = q(&mut watcher, &["SET", "other", "1"]);
    let out: redis::Value = q(&mut watcher, &["EXEC"]);
    assert_eq!(out, redis::Value::Nil);
    // The nil told a `full` client that someone wrote k: that write must
    // survive.
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    let v: Option<String> = q(&mut c, &["GET", "k"]);
    assert_eq!(v.as_deref(), Some("v"));
}

#[test]
fn whole_database_replies_wait_for_the_writes_they_count() {
    let mut srv = Server::start(LONG_WINDOW);
    let checks: [&[&str]; 3] = [&["DBSIZE"], &["KEYS", "*"], &["INFO", "keyspace"]];
    for (round, check) in checks.iter().enumerate() {
        let mut writer = srv.conn();
        let mut reader = srv.conn();
        level(&mut writer, "delayed");
        let key = format!("k{round}");
        let _: () = q(&mut writer, &["SET", &key, "v"]);
        let _: redis::Value = q(&mut reader, check);
        srv.kill9();
        srv.restart();
        let mut c = srv.conn();
        let n: i64 = q(&mut c, &["DBSIZE"]);
        assert_eq!(
            n,
            round as i64 + 1,
            "{check:?} revealed a write that was lost"
        );
    }
}

#[test]
fn an_oversized_write_is_refused_before_it_changes_anything() {
    let mut srv = Server::start(&["--wal-max-record-size-mb", "1"]);
    let mut c = srv.conn();
    let chunk = "x".repeat(100 * 1024);
    for _ in 0..20 {
        let _: i64 = q(&mut c, &["RPUSH", "big", &chunk]);
    }
    let e = err(&mut c, &["RENAME", "big", "big2"]);
    assert!(
        e.contains("exceeds the write-ahead log's record limit"),
        "{e}"
    );
    let exists: i64 = q(&mut c, &["EXISTS", "big", "big2"]);
    assert_eq!(exists, 1, "RENAME changed nothing");
    // Inside MULTI only the oversized command fails, as a runtime error.
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["SET", "small", "1"]);
    let _: () = q(&mut c, &["COPY", "big", "big3"]);
    let _: () = q(&mut c, &["SET", "after", "1"]);
    // (redis-rs reports EXEC's one error reply as the query's error.)
    let e = err(&mut c, &["EXEC"]);
    assert!(e.contains("record limit"), "{e}");
    let ran: i64 = q(&mut c, &["EXISTS", "small", "after", "big3"]);
    assert_eq!(ran, 2, "the other commands of the EXEC ran");
    // Nothing is left waiting on a write that was never logged.
    let mut reader = srv.conn();
    reader
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let len: i64 = q(&mut reader, &["LLEN", "big"]);
    assert_eq!(len, 20);
    let _: () = q(&mut reader, &["SET", "later", "1"]);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    let len: i64 = q(&mut c, &["LLEN", "big"]);
    assert_eq!(len, 20);
    let n: i64 = q(
        &mut c,
        &["EXISTS", "small", "after", "later", "big2", "big3"],
    );
    assert_eq!(n, 3);
}
