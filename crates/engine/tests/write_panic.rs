//! A panic in the middle of a write (a bug) aborts the process instead of
//! releasing the keyspace with a change its log record will never carry;
//! the next open recovers exactly what was committed. A panic in a read
//! leaves the process running. The test re-runs its own binary as the
//! process that panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;

use checkpoint_support::{commit, rerun_as_child, set, CHILD_DEADLINE, START_MS};
use durakv_engine::store::{Store, StoreConfig};
use durakv_engine::Durability;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

/// Set in the child: the data directory it writes to.
const CHILD_DIR: &str = "DURAKV_WRITE_PANIC_DIR";
const TEST: &str = "a_panic_inside_a_write_aborts_and_the_log_decides";

fn open(dir: &Path) -> Store {
    Store::open(&StoreConfig::new(dir)).unwrap_or_else(|e| panic!("open failed: {e}"))
}

fn get(store: &Store, key: &str) -> Option<Vec<u8>> {
    let mut txn = store.keyspace.lock_keys_at([key.as_bytes()], START_MS);
    txn.get(0, key.as_bytes()).map(|e| match &e.value {
        durakv_engine::value::Value::Str(s) => s.to_vec(),
        other => panic!("{key} is not a string: {other:?}"),
    })
}

/// What the child runs: a committed write, a read that panics (caught, as
/// a connection's task is), then a write that panics after changing the
/// keyspace.
fn child(dir: &Path) {
    let store = open(dir);
    commit(&store, vec![set("kept", "1")], Durability::Full, START_MS);
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut txn = store.keyspace.lock_keys_at([&b"kept"[..]], START_MS);
        let _ = txn.get(0, b"kept");
        panic!("a bug in a read");
    }));
    assert!(read.is_err());
    std::fs::write(dir.join("read-panic-survived"), b"").unwrap();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut txn = store.keyspace.lock_keys_at([&b"lost"[..]], START_MS);
        txn.apply(set("lost", "2")).unwrap();
        panic!("a bug after a write changed the keyspace");
    }));
    // Not reached: the unwinding write aborted the process.
    std::fs::write(dir.join("write-panic-survived"), b"").unwrap();
}

#[test]
fn a_panic_inside_a_write_aborts_and_the_log_decides() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        child(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (status, said) = rerun_as_child(TEST, CHILD_DIR, dir.path(), CHILD_DEADLINE)
        .expect("the child still runs: the write did not abort");
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}: {said}");
    assert!(dir.path().join("read-panic-survived").exists(), "{said}");
    assert!(!dir.path().join("write-panic-survived").exists(), "{said}");

    let store = open(dir.path());
    assert_eq!(get(&store, "kept").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&store, "lost"), None);
}
