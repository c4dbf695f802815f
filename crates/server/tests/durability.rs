//! Durability levels end to end: what a client was told must survive kill -9.
//!
//! The delayed window is set to its maximum (10 s) so that a write which was
//! only acknowledged under `delayed` is certainly not on disk yet when the
//! process is killed, unless something made it durable: that is what these
//! tests observe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{eventually, info_field, Server};
use redis::Commands;

const LONG_WINDOW: &[&str] = &["--delayed-flush-ms", "10000", "--wal-segment-size-mb", "1"];

#[test]
fn full_reads_of_delayed_writes_wait_until_durable() {
    let mut srv = Server::start(LONG_WINDOW);
    for round in 0..10 {
        let mut writer = srv.conn();
        let mut reader = srv.conn();
        let _: () = redis::cmd("CLIENT")
            .arg("DURABILITY")
            .arg("delayed")
            .query(&mut writer)
            .unwrap();
        let key = format!("k{round}");
        let _: () = writer.set(&key, "v").unwrap();
        // The reader runs at `full`: seeing the value means it is on disk.
        let v: Option<String> = reader.get(&key).unwrap();
        assert_eq!(v.as_deref(), Some("v"));
        srv.kill9();
        srv.restart();
        let mut c = srv.conn();
        let v: Option<String> = c.get(&key).unwrap();
        assert_eq!(
            v.as_deref(),
            Some("v"),
            "round {round}: a value a full reader saw was lost"
        );
    }
}

#[test]
fn own_delayed_write_read_back_at_full_is_durable() {
    let mut srv = Server::start(LONG_WINDOW);
    let mut c = srv.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("DURABILITY")
        .arg("delayed")
        .query(&mut c)
        .unwrap();
    let _: () = c.hset("h", "f", "1").unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("DURABILITY")
        .arg("full")
        .query(&mut c)
        .unwrap();
    let v: Option<String> = c.hget("h", "f").unwrap();
    assert_eq!(v.as_deref(), Some("1"));
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    let v: Option<String> = c.hget("h", "f").unwrap();
    assert_eq!(v.as_deref(), Some("1"));
}

#[test]
fn waitaof_makes_delayed_writes_durable() {
    let mut srv = Server::start(LONG_WINDOW);
    let mut c = srv.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("DURABILITY")
        .arg("delayed")
        .query(&mut c)
        .unwrap();
    for i in 0..100 {
        let _: () = c.set(format!("w{i}"), i).unwrap();
    }
    let r: Vec<i64> = redis::cmd("WAITAOF")
        .arg(1)
        .arg(0)
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, vec![1, 0]);
    // Asking for a replica when there is none: the timeout, then no replica.
    let r: Vec<i64> = redis::cmd("WAITAOF")
        .arg(1)
        .arg(1)
        .arg(50)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, vec![1, 0]);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    for i in 0..100 {
        let v: Option<i64> = c.get(format!("w{i}")).unwrap();
        assert_eq!(v, Some(i));
    }
}

#[test]
fn delayed_writes_after_the_last_barrier_may_be_lost_but_only_as_a_suffix() {
    let mut srv = Server::start(LONG_WINDOW);
    let mut c = srv.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("durability")
        .arg("delayed")
        .query(&mut c)
        .unwrap();
    for i in 0..50 {
        let _: () = c.set(format!("d{i}"), i).unwrap();
    }
    let _: Vec<i64> = redis::cmd("WAITAOF")
        .arg(1)
        .arg(0)
        .arg(0)
        .query(&mut c)
        .unwrap();
    for i in 50..100 {
        let _: () = c.set(format!("d{i}"), i).unwrap();
    }
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    let present: Vec<bool> = (0..100)
        .map(|i| c.exists::<_, bool>(format!("d{i}")).unwrap())
        .collect();
    assert!(
        present[..50].iter().all(|p| *p),
        "writes before WAITAOF were lost"
    );
    let survivors = present.iter().take_while(|p| **p).count();
    assert!(
        present[survivors..].iter().all(|p| !*p),
        "lost writes are not a suffix: {present:?}"
    );
}

#[test]
fn none_database_is_not_logged_and_full_database_is() {
    let mut srv = Server::start(&["--durability-db-1", "none", "--wal-segment-size-mb", "1"]);
    let mut c = srv.conn();
    let _: () = c.set("kept", "1").unwrap();
    let _: () = redis::cmd("SELECT").arg(1).query(&mut c).unwrap();
    let _: () = c.set("volatile", "1").unwrap();
    let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    assert!(info.contains("db1_durability:none"), "{info}");
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    let v: Option<String> = c.get("kept").unwrap();
    assert_eq!(v.as_deref(), Some("1"));
    let _: () = redis::cmd("SELECT").arg(1).query(&mut c).unwrap();
    let v: Option<String> = c.get("volatile").unwrap();
    assert_eq!(v, None, "a durability-none database was logged");
}

#[test]
fn client_durability_is_read_back_and_policy_decides() {
    // Database default `delayed`; the connection asks for `none`. The
    // database decides what is logged, so under either policy the write is
    // logged and WAITAOF makes it durable; the policy decides only when the
    // reply goes out.
    for (policy, survives) in [("strictest", true), ("connection", true)] {
        let mut srv = Server::start(&["--durability", "delayed", "--durability-policy", policy]);
        let mut c = srv.conn();
        let level = |c: &mut redis::Connection| -> String {
            redis::cmd("CLIENT").arg("DURABILITY").query(c).unwrap()
        };
        assert_eq!(level(&mut c), "default");
        let _: () = redis::cmd("CLIENT")
            .arg("DURABILITY")
            .arg("none")
            .query(&mut c)
            .unwrap();
        assert_eq!(level(&mut c), "none");
        // Not in CLIENT INFO: go-redis refuses a field Redis does not send.
        let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
        assert!(!info.contains("durability"), "{info}");
        let last = info.split_whitespace().last().unwrap_or_default();
        assert!(last.starts_with("lib-ver="), "{info}");
        let e = redis::cmd("CLIENT")
            .arg("DURABILITY")
            .arg("sometimes")
            .query::<()>(&mut c)
            .unwrap_err();
        assert!(e.to_string().contains("invalid durability level"), "{e}");
        let _: () = c.set("x", "1").unwrap();
        let _: Vec<i64> = redis::cmd("WAITAOF")
            .arg(1)
            .arg(0)
            .arg(0)
            .query(&mut c)
            .unwrap();
        srv.kill9();
        srv.restart();
        let mut c = srv.conn();
        let v: Option<String> = c.get("x").unwrap();
        assert_eq!(v.is_some(), survives, "policy {policy}");
    }
}

#[test]
fn second_server_on_same_directory_is_refused() {
    let srv = Server::start(&[]);
    let out = std::process::Command::new(common::binary())
        .args(["serve", "--port", "0", "--dir"])
        .arg(srv.dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("LOCK"), "message should name the lock: {err}");
}

/// DEBUG POPULATE writes through the log like SET (Redis leaves its keys
/// out of the AOF): what it acknowledged survives kill -9, across several
/// of its batches, and keys that existed keep their values.
#[test]
fn debug_populate_is_logged_and_survives_kill9() {
    let mut srv = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = srv.conn();
    let _: () = c.set("key:7", "mine").unwrap();
    let ok: String = redis::cmd("DEBUG")
        .arg(&["POPULATE", "3000"])
        .query(&mut c)
        .unwrap();
    assert_eq!(ok, "OK");
    let ok: String = redis::cmd("DEBUG")
        .arg(&["POPULATE", "10", "sized", "12"])
        .query(&mut c)
        .unwrap();
    assert_eq!(ok, "OK");
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    let n: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 3010);
    let got: Vec<String> = c.mget(&["key:0", "key:7", "key:2999"]).unwrap();
    assert_eq!(got, ["value:0", "mine", "value:2999"]);
    let sized: Vec<u8> = c.get("sized:3").unwrap();
    assert_eq!(sized, b"value:3\0\0\0\0\0");
    let e = redis::cmd("DEBUG")
        .arg(&["POPULATE", "-1"])
        .query::<String>(&mut c)
        .unwrap_err();
    assert_eq!(
        common::error_text(&e),
        "ERR value is out of range, must be positive"
    );
    // A size no request could carry is refused rather than allocated.
    let e = redis::cmd("DEBUG")
        .arg(&["POPULATE", "1", "huge", "1000000000000"])
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(common::error_text(&e).contains("proto-max-bulk-len"), "{e}");
    // Over maxmemory it stops with Redis's OOM error.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "1"])
        .query(&mut c)
        .unwrap();
    let e = redis::cmd("DEBUG")
        .arg(&["POPULATE", "10", "more"])
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(common::error_text(&e).starts_with("OOM "), "{e}");
    let n: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 3010);
}

/// A `delayed` write is on disk within `delayed-flush-ms` with `full`
/// writers beside it, whose fsyncs an event loop may run itself (the end of
/// such an fsync once woke nobody for a `delayed` write made during it; the
/// WAL's unit test `a_delayed_append_during_a_leaders_fsync_keeps_its_flush_deadline`
/// pins that case): with nothing more written, the durable LSN reaches the
/// last one, and kill -9 keeps every such write.
#[test]
fn delayed_writes_reach_the_disk_within_their_window_beside_full_writers() {
    let mut srv = Server::start(&["--delayed-flush-ms", "20"]);
    let mut delayed = srv.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("DURABILITY")
        .arg("delayed")
        .query(&mut delayed)
        .unwrap();
    let mut full = srv.conn();
    let mut probe = srv.conn();
    for round in 0..40 {
        std::thread::scope(|sc| {
            sc.spawn(|| {
                for i in 0..20 {
                    let _: () = full.set(format!("f{i}"), round).unwrap();
                }
            });
            for i in 0..20 {
                let _: () = delayed.set(format!("d{i}"), round).unwrap();
            }
        });
        eventually(
            &format!("round {round}: every LSN durable with nothing written after them"),
            || {
                let last = info_field(&mut probe, "persistence", "wal_last_lsn");
                let durable = info_field(&mut probe, "persistence", "wal_durable_lsn");
                durable.parse::<u64>().unwrap() >= last.parse::<u64>().unwrap()
            },
        );
    }
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    for i in 0..20 {
        let v: Option<u32> = c.get(format!("d{i}")).unwrap();
        assert_eq!(v, Some(39), "d{i} lost after its window had passed");
    }
}
