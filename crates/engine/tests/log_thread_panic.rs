//! A panic on a log writer thread (a bug) aborts the process instead of
//! leaving the writes of its batch waiting for ever; the next open recovers
//! what was made durable before it. The test re-runs its own binary as the
//! process whose writer panics, with a file system whose fdatasync panics
//! once told to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;
mod panicky_fs;

use checkpoint_support::{commit, rerun_as_child, set, CHILD_DEADLINE, START_MS};
use durakv_engine::store::{Store, StoreConfig};
use durakv_engine::Durability;
use panicky_fs::panicky_fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::Arc;

const CHILD_DIR: &str = "DURAKV_LOG_THREAD_PANIC_DIR";
const TEST: &str = "a_panicking_log_writer_aborts_the_process";

/// What the child runs: a durable write, then one whose fdatasync panics.
fn child(dir: &Path) {
    let (fs, panics) = panicky_fs();
    let store = Store::open_with(&StoreConfig::new(dir), fs).unwrap();
    let wal = &store.wal;
    let lsn = commit(&store, vec![set("kept", "v")], Durability::Full, START_MS);
    wal.wait_durable(lsn).unwrap();
    std::fs::write(dir.join("first-write-durable"), b"").unwrap();
    // The log's segments only, not the preallocator's spares: the writer
    // is the thread that panics.
    panics.when(Some(Arc::new(|p: &Path| {
        p.extension().is_some_and(|e| e == "log")
    })));
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
    let (status, said) = rerun_as_child(TEST, CHILD_DIR, dir.path(), CHILD_DEADLINE)
        .unwrap_or_else(|| {
            panic!(
                "the child still runs after {CHILD_DEADLINE:?}: its write waits for a dead writer"
            )
        });
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}: {said}");
    assert!(dir.path().join("first-write-durable").exists());
    assert!(!dir.path().join("second-write-returned").exists());

    let store = Store::open(&StoreConfig::new(dir.path())).unwrap();
    let mut txn = store.keyspace.lock_keys_at([&b"kept"[..]], START_MS);
    assert!(txn.get(0, b"kept").is_some(), "the durable write was lost");
}
