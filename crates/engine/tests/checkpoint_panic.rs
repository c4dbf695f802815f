//! A checkpoint that panics (a bug) counts as a failed one: the status no
//! longer says one runs, so the next checkpoint is not refused as already
//! in progress, and it succeeds and recovers as any other.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;
mod panicky_fs;

use checkpoint_support::{commit, set, START_MS};
use durakv_engine::store::{Store, StoreConfig};
use durakv_engine::Durability;
use panicky_fs::panicky_fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

#[test]
fn a_checkpoint_that_panics_counts_as_failed_and_the_next_one_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig::new(dir.path());
    let (fs, panics) = panicky_fs();
    let store = Store::open_with(&cfg, fs).unwrap();
    let lsn = commit(&store, vec![set("a", "v")], Durability::Full, START_MS);
    store.wal.wait_durable(lsn).unwrap();

    let checkpoints = cfg.checkpoint_dir();
    panics.when(Some(Arc::new(move |p: &Path| p.starts_with(&checkpoints))));
    let panicked = catch_unwind(AssertUnwindSafe(|| store.checkpoint()));
    assert!(panicked.is_err(), "the checkpoint did not reach a sync");
    let status = store.checkpointer.status();
    assert!(!status.in_progress, "{status:?}");
    assert_eq!(status.current_started_unix_ms, 0);
    assert_eq!((status.succeeded, status.failed), (0, 1));
    assert!(status.last_error.is_some());

    panics.when(None);
    let lsn = commit(&store, vec![set("b", "v")], Durability::Full, START_MS);
    store.wal.wait_durable(lsn).unwrap();
    store.checkpoint().expect("the checkpoint after the panic");
    let status = store.checkpointer.status();
    assert_eq!((status.succeeded, status.failed), (1, 1));
    drop(store);

    let store = Store::open(&cfg).unwrap();
    let recovery = &store.checkpoint_recovery;
    assert!(
        recovery.loaded.is_some(),
        "the second checkpoint was not loaded"
    );
    assert!(recovery.fallbacks.is_empty(), "{:?}", recovery.fallbacks);
    let mut txn = store
        .keyspace
        .lock_keys_at([&b"a"[..], &b"b"[..]], START_MS);
    assert!(txn.get(0, b"a").is_some() && txn.get(0, b"b").is_some());
}
