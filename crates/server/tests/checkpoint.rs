//! Checkpoints against the real binary: SAVE shrinks the log, BGSAVE moves
//! LASTSAVE, a kill -9 after a checkpoint loses nothing (including a
//! `durability none` database's data written before it), SHUTDOWN keeps
//! that data and SHUTDOWN NOSAVE does not. Waits are bounded polls; no
//! timing is asserted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Server;
use redis::{Commands, Connection};
use std::path::Path;
use std::time::{Duration, Instant};

/// Generous bound on any wait (a slow CI machine, a debug build).
const WAIT_LIMIT_SECS: u64 = 60;

fn info_field(c: &mut Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO persistence has no {name}:\n{info}"))
        .trim()
        .to_string()
}

fn info_u64(c: &mut Connection, name: &str) -> u64 {
    info_field(c, name).parse().unwrap()
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// `n` keys `{prefix}{i}` with `value_bytes`-byte values, pipelined.
fn fill(c: &mut Connection, prefix: &str, n: usize, value_bytes: usize) {
    let value = "v".repeat(value_bytes);
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET")
                .arg(format!("{prefix}{i}"))
                .arg(&value)
                .ignore();
        }
        let _: () = p.query(c).unwrap();
    }
}

fn count_present(c: &mut Connection, prefix: &str, n: usize) -> usize {
    let keys: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    let mut present = 0;
    for chunk in keys.chunks(1000) {
        let vals: Vec<Option<String>> = redis::cmd("MGET").arg(chunk).query(c).unwrap();
        present += vals.iter().filter(|v| v.is_some()).count();
    }
    present
}

fn select(c: &mut Connection, db: usize) {
    let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
}

/// Sends SHUTDOWN (with `arg`), waits for the process to exit, and starts
/// a new server on the same directory.
fn shutdown_and_restart(srv: &mut Server, arg: Option<&str>) -> Server {
    let mut c = srv.conn();
    let mut cmd = redis::cmd("SHUTDOWN");
    if let Some(a) = arg {
        cmd.arg(a);
    }
    // The server closes the connection without replying.
    let _: redis::RedisResult<()> = cmd.query(&mut c);
    let mut child = srv.child.take().expect("running");
    let deadline = Instant::now() + Duration::from_secs(WAIT_LIMIT_SECS);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "server exited with {status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after SHUTDOWN"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = std::mem::replace(&mut srv.dir, tempfile::tempdir().unwrap());
    Server::start_in(
        dir,
        &srv.args.iter().map(String::as_str).collect::<Vec<_>>(),
    )
}

#[test]
fn save_shrinks_the_log() {
    let srv = Server::start(&["--wal-segment-size-mb", "1"]);
    let mut c = srv.conn();
    // About 6 MiB of log: several 1 MiB segments per stream.
    fill(&mut c, "k", 6_000, 1_000);
    let wal_dir = srv.dir.path().join("wal");
    let before_files = dir_bytes(&wal_dir);
    let before_info = info_u64(&mut c, "wal_disk_usage_bytes");
    assert!(
        before_files > 4 << 20,
        "the log should span several segments: {before_files}"
    );
    assert!(info_u64(&mut c, "rdb_changes_since_last_save") >= 6_000);
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    let after_files = dir_bytes(&wal_dir);
    let after_info = info_u64(&mut c, "wal_disk_usage_bytes");
    assert!(
        after_files < before_files / 2,
        "log files: {before_files} -> {after_files} bytes"
    );
    assert!(
        after_info < before_info / 2,
        "wal_disk_usage_bytes: {before_info} -> {after_info}"
    );
    assert_eq!(info_u64(&mut c, "rdb_changes_since_last_save"), 0);
    assert_eq!(info_u64(&mut c, "checkpoint_last_keys"), 6_000);
    assert!(info_u64(&mut c, "checkpoint_last_size_bytes") > 0);
    assert!(info_u64(&mut c, "checkpoint_replay_lsn") >= 12);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_u64(&mut c, "checkpoint_in_progress"), 0);
    let names = std::fs::read_dir(srv.dir.path().join("checkpoints"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".dkcp"))
        .count();
    assert_eq!(names, 1);
}

#[test]
fn bgsave_then_lastsave_advances() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    fill(&mut c, "k", 1_000, 100);
    let first: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    // LASTSAVE has one-second resolution.
    std::thread::sleep(Duration::from_millis(1_100));
    let reply: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(reply, "Background saving started");
    // A second one is refused while the first runs, or starts after it.
    match redis::cmd("BGSAVE").query::<String>(&mut c) {
        Ok(r) => assert_eq!(r, "Background saving started"),
        Err(e) => assert!(
            e.to_string()
                .contains("Background save already in progress"),
            "{e}"
        ),
    }
    let deadline = Instant::now() + Duration::from_secs(WAIT_LIMIT_SECS);
    loop {
        let last: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
        if last > first && info_u64(&mut c, "rdb_bgsave_in_progress") == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "LASTSAVE did not advance after BGSAVE"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert!(info_u64(&mut c, "checkpoint_count") >= 1);
    let err = redis::cmd("BGSAVE")
        .arg("bogus")
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
}

#[test]
fn kill9_after_save_and_more_writes_loses_nothing() {
    let mut srv = Server::start(&["--durability-db-1", "none", "--wal-segment-size-mb", "1"]);
    let mut c = srv.conn();
    fill(&mut c, "a", 3_000, 500);
    select(&mut c, 1);
    fill(&mut c, "n", 500, 50);
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("ttl")
        .arg("x")
        .arg("EX")
        .arg(3600)
        .query(&mut c)
        .unwrap();
    select(&mut c, 0);
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    fill(&mut c, "b", 2_000, 500);
    let _: () = redis::cmd("RPUSH")
        .arg("list")
        .arg("x")
        .arg("y")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("DEL").arg("a7").query(&mut c).unwrap();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(count_present(&mut c, "a", 3_000), 2_999);
    assert_eq!(count_present(&mut c, "b", 2_000), 2_000);
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg("list")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(list, vec!["x", "y"]);
    select(&mut c, 1);
    assert_eq!(
        count_present(&mut c, "n", 500),
        500,
        "none-db keys written before SAVE"
    );
    let v: Option<String> = redis::cmd("HGET").arg("h").arg("f").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let ttl: i64 = redis::cmd("TTL").arg("ttl").query(&mut c).unwrap();
    assert!(
        (3000..=3600).contains(&ttl),
        "TTL survived as an absolute time: {ttl}"
    );
}

#[test]
fn shutdown_saves_the_none_database() {
    let mut srv = Server::start(&["--durability-db-1", "none"]);
    let mut c = srv.conn();
    fill(&mut c, "f", 200, 10);
    select(&mut c, 1);
    fill(&mut c, "n", 200, 10);
    let mut srv = shutdown_and_restart(&mut srv, None);
    let mut c = srv.conn();
    assert_eq!(count_present(&mut c, "f", 200), 200);
    select(&mut c, 1);
    assert_eq!(
        count_present(&mut c, "n", 200),
        200,
        "SHUTDOWN should checkpoint the none database"
    );
    // SIGTERM is a clean shutdown too.
    fill(&mut c, "m", 50, 10);
    assert_eq!(srv.terminate(), Some(0));
    let dir = std::mem::replace(&mut srv.dir, tempfile::tempdir().unwrap());
    let srv = Server::start_in(dir, &["--durability-db-1", "none"]);
    let mut c = srv.conn();
    select(&mut c, 1);
    assert_eq!(
        count_present(&mut c, "m", 50),
        50,
        "SIGTERM should checkpoint the none database"
    );
}

#[test]
fn shutdown_nosave_keeps_logged_data_only() {
    let mut srv = Server::start(&["--durability-db-1", "none"]);
    let mut c = srv.conn();
    fill(&mut c, "f", 200, 10);
    select(&mut c, 1);
    fill(&mut c, "n", 200, 10);
    let srv = shutdown_and_restart(&mut srv, Some("NOSAVE"));
    let mut c = srv.conn();
    assert_eq!(count_present(&mut c, "f", 200), 200);
    select(&mut c, 1);
    assert_eq!(
        count_present(&mut c, "n", 200),
        0,
        "NOSAVE must not checkpoint"
    );
}

#[test]
fn info_persistence_reports_checkpoints() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for name in [
        "rdb_bgsave_in_progress",
        "rdb_last_save_time",
        "rdb_last_bgsave_status",
        "rdb_changes_since_last_save",
        "checkpoint_last_duration_ms",
        "checkpoint_last_size_bytes",
        "checkpoint_last_keys",
        "checkpoint_replay_lsn",
        "checkpoint_in_progress",
        "estimated_recovery_secs",
        "wal_disk_usage_bytes",
    ] {
        info_field(&mut c, name);
    }
    let _: () = c.set("x", "1").unwrap();
    assert_eq!(info_u64(&mut c, "rdb_changes_since_last_save"), 1);
    let est: f64 = info_field(&mut c, "estimated_recovery_secs")
        .parse()
        .unwrap();
    assert!(est >= 0.0);
    let err = redis::cmd("SAVE")
        .arg("x")
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(
        err.to_string().contains("wrong number of arguments"),
        "{err}"
    );
}

/// BGREWRITEAOF shortens the log as Redis's shortens its AOF: it takes a
/// checkpoint, after which the log before it is dropped; one asked for
/// while a checkpoint runs is scheduled behind it.
#[test]
fn bgrewriteaof_takes_a_checkpoint() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    fill(&mut c, "k", 1_000, 100);
    let before = info_u64(&mut c, "checkpoint_count");
    let reply: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert_eq!(reply, "Background append only file rewriting started");
    let again: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert!(
        again == "Background append only file rewriting scheduled"
            || again == "Background append only file rewriting started",
        "{again}"
    );
    let deadline = Instant::now() + Duration::from_secs(WAIT_LIMIT_SECS);
    while info_u64(&mut c, "checkpoint_count") < before + 2
        || info_u64(&mut c, "rdb_bgsave_in_progress") != 0
    {
        assert!(
            Instant::now() < deadline,
            "no checkpoint after BGREWRITEAOF"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
}

/// The checkpoint header's format version of the newest checkpoint file.
fn newest_checkpoint_version(dir: &Path) -> u32 {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".dkcp"))
        .collect();
    names.sort();
    let newest = names.last().expect("a checkpoint");
    let bytes = std::fs::read(dir.join("checkpoints").join(newest)).unwrap();
    u32::from_le_bytes(bytes[8..12].try_into().unwrap())
}

/// A rollback to a build that reads checkpoint format 5: with
/// `checkpoint-format-version 5`, SAVE writes version 5, and a restart after
/// kill -9 loads it, packed hash included (its database is unlogged, so the
/// checkpoint is the only copy).
#[test]
fn checkpoint_format_version_5_is_written_for_a_rollback() {
    let mut srv = Server::start(&["--durability-db-1", "none"]);
    let mut c = srv.conn();
    let get = |c: &mut Connection| -> Vec<String> {
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("checkpoint-format-version")
            .query(c)
            .unwrap()
    };
    assert_eq!(get(&mut c), vec!["checkpoint-format-version", "6"]);
    for bad in ["4", "7", "x"] {
        let err = redis::cmd("CONFIG")
            .arg("SET")
            .arg("checkpoint-format-version")
            .arg(bad)
            .query::<()>(&mut c)
            .unwrap_err();
        assert!(
            err.to_string().contains("checkpoint-format-version"),
            "{bad}: {err}"
        );
    }
    select(&mut c, 1);
    let fields: Vec<(String, String)> = (0..10)
        .map(|i| (format!("field{i}"), "v".repeat(50)))
        .collect();
    let _: () = c.hset_multiple("record", &fields).unwrap();
    let encoding = |c: &mut Connection| -> String {
        redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg("record")
            .query(c)
            .unwrap()
    };
    assert_eq!(encoding(&mut c), "listpack");
    assert_eq!(info_u64(&mut c, "checkpoint_last_format_version"), 0);
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    assert_eq!(newest_checkpoint_version(srv.dir.path()), 6);
    assert_eq!(info_u64(&mut c, "checkpoint_last_format_version"), 6);

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("checkpoint-format-version")
        .arg("5")
        .query(&mut c)
        .unwrap();
    assert_eq!(get(&mut c), vec!["checkpoint-format-version", "5"]);
    let _: () = c.hset("record", "field0", "changed").unwrap();
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    assert_eq!(newest_checkpoint_version(srv.dir.path()), 5);
    assert_eq!(info_u64(&mut c, "checkpoint_last_format_version"), 5);

    srv.restart();
    let mut c = srv.conn();
    select(&mut c, 1);
    let mut got: Vec<(String, String)> = c.hgetall("record").unwrap();
    got.sort();
    let mut want = fields;
    want[0].1 = "changed".into();
    assert_eq!(got, want);
    assert_eq!(encoding(&mut c), "listpack");
}
