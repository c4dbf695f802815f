//! A real disk-full failure: the log lives on a tiny tmpfs, writes continue
//! until the log cannot grow, and then the server must refuse writes with
//! `-MISCONF`, keep serving reads, report the failure in INFO persistence,
//! and never have acknowledged a write that is not on disk.
//!
//! Mounting needs root (CI runs as root); elsewhere the test says so and
//! passes without running.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Server;
use redis::Commands;
use std::process::Command;

struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount_tmpfs(path: &std::path::Path, size: &str) -> Option<Mount> {
    std::fs::create_dir_all(path).ok()?;
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(path)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then(|| Mount(path.to_path_buf()))
}

#[test]
fn full_log_disk_refuses_writes_but_serves_reads() {
    let base = tempfile::tempdir().unwrap();
    let wal_dir = base.path().join("wal");
    let Some(_mount) = mount_tmpfs(&wal_dir, "3m") else {
        println!("skipping: cannot mount a tmpfs here (needs root)");
        return;
    };
    let wal = wal_dir.to_string_lossy().to_string();
    let mut srv = Server::start(&["--wal-dir", &wal, "--wal-segment-size-mb", "1"]);
    let mut c = srv.conn();
    let value = "x".repeat(4096);
    let mut acknowledged = Vec::new();
    let mut refusal = None;
    for i in 0..10_000 {
        let key = format!("k{i}");
        match c.set::<_, _, ()>(&key, &value) {
            Ok(()) => acknowledged.push(key),
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    let err = refusal.expect("a 3 MB log disk never filled up");
    assert!(
        err.code() == Some("MISCONF") || err.to_string().contains("MISCONF"),
        "unexpected error: {err}"
    );
    assert!(!acknowledged.is_empty());
    // Later writes are refused too; reads keep working.
    let e = c.set::<_, _, ()>("after", "1").unwrap_err();
    assert!(
        e.to_string().contains("MISCONF") || e.code() == Some("MISCONF"),
        "{e}"
    );
    let first: Option<String> = c.get(&acknowledged[0]).unwrap();
    assert_eq!(first.as_deref(), Some(value.as_str()));
    let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    let failure = info
        .lines()
        .find_map(|l| l.strip_prefix("wal_failure:"))
        .unwrap_or("")
        .trim();
    assert!(
        !failure.is_empty(),
        "INFO persistence should show the failure:\n{info}"
    );
    // INFO with its keyspace section (plain, and every section, as
    // monitors ask) answers too: it is how the failure is found.
    for args in [&[][..], &["all"][..], &["keyspace"][..]] {
        let info: String = redis::cmd("INFO").arg(args).query(&mut c).unwrap();
        assert!(
            info.contains("aof_last_write_status:err") || args == ["keyspace"],
            "{info}"
        );
        assert!(info.contains("db0:keys="), "{info}");
    }
    // Every acknowledged write survives a crash.
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    for k in &acknowledged {
        let v: Option<String> = c.get(k).unwrap();
        assert_eq!(v.as_deref(), Some(value.as_str()), "acknowledged {k} lost");
    }
}
