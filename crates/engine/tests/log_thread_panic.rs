//! A panic on a log writer thread (a bug) aborts the process instead of
//! leaving the writes of its batch waiting for ever; the next open recovers
//! what was made durable before it. The test re-runs its own binary as the
//! process whose writer panics, with a file system whose fdatasync panics
//! once told to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;
mod panicky_fs;

use checkpoint_support::{commit, set, START_MS};
use durakv_engine::store::{Store, StoreConfig};
use durakv_engine::Durability;
use panicky_fs::panicky_fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_DIR: &str = "DURAKV_LOG_THREAD_PANIC_DIR";
const TEST: &str = "a_panicking_log_writer_aborts_the_process";
const SIGABRT: i32 = 6;
/// Far beyond a healthy commit; a child still running then is stuck.
const CHILD_DEADLINE: Duration = Duration::from_secs(30);

/// What the child runs: a durable write, then one whose fdatasync panics.
fn child(dir: &Path) {
    let (fs, panics) = panicky_fs();
    let store = Store::open_with(&StoreConfig::new(dir), fs).unwrap();
    let wal = &store.wal;
    let lsn = commit(&store, vec![set("kept", "v")], Durability::Full, START_MS);
    wal.wait_durable(lsn).unwrap();
    std::fs::write(dir.join("first-write-durable"), b"").unwrap();
    panics.under(Some(dir));
    let lsn = commit(
        &store,
        vec![set("unsynced", "v")],
        Durability::Full,
        START_MS,
    );
    // Not reached: the writer's panic aborts the process first.
    let _ = wal.wait_durable(lsn);
    std::fs::write(dir.join("second-write-returned"), b"").unwrap();
}

#[test]
fn a_panicking_log_writer_aborts_the_process() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        child(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let began = Instant::now();
    let status = loop {
        if let Some(status) = proc.try_wait().unwrap() {
            break status;
        }
        if began.elapsed() > CHILD_DEADLINE {
            let _ = proc.kill();
            let _ = proc.wait();
            panic!(
                "the child still runs after {CHILD_DEADLINE:?}: its write waits for a dead writer"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), Some(SIGABRT), "{status:?}");
    assert!(dir.path().join("first-write-durable").exists());
    assert!(!dir.path().join("second-write-returned").exists());

    let store = Store::open(&StoreConfig::new(dir.path())).unwrap();
    let mut txn = store.keyspace.lock_keys_at([&b"kept"[..]], START_MS);
    assert!(txn.get(0, b"kept").is_some(), "the durable write was lost");
}
