//! `Store::loaded_bytes`: what opening a store allocated for the data it
//! loaded (log replay, a checkpoint, a redistribution to another shard
//! count), which the server leaves out of its start-up memory. This binary
//! counts its own allocations, so it holds a single test: another running
//! beside it would allocate into the figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;

use bytes::Bytes;
use checkpoint_support::commit;
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::store::{Store, StoreConfig};
use durakv_engine::Durability;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCATED: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size as u64, Ordering::Relaxed);
        ALLOCATED.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated() -> u64 {
    ALLOCATED.load(Ordering::Relaxed)
}

const KEYS: usize = 4_000;
const VALUE_BYTES: usize = 1_000;
const DATA_BYTES: u64 = (KEYS * VALUE_BYTES) as u64;

fn config(dir: &Path, shards: usize) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.shards = shards;
    c.memory_probe = Some(allocated);
    c
}

fn open(cfg: &StoreConfig) -> Store {
    Store::open(cfg).unwrap_or_else(|e| panic!("open failed: {e}"))
}

/// Loaded bytes cover the values, and less than half as much again: the
/// maps that find them, and nothing loaded twice.
fn assert_loaded_data(store: &Store, how: &str) {
    let n = store.loaded_bytes;
    assert!(
        (DATA_BYTES..DATA_BYTES * 3 / 2).contains(&n),
        "{how}: loaded {n} bytes for {DATA_BYTES} of values"
    );
}

#[test]
fn opening_counts_what_loading_the_data_allocated() {
    let dir = tempfile::tempdir().unwrap();

    // An empty directory loads nothing: the keyspace, the log's buffers
    // and its threads are the store's own.
    let store = open(&config(dir.path(), 8));
    assert_eq!(store.loaded_bytes, 0);

    for i in 0..KEYS {
        let m = Mutation::Key {
            db: 0,
            key: Bytes::from(format!("key:{i}")),
            op: KeyOp::SetString {
                value: Bytes::from(vec![b'v'; VALUE_BYTES]),
                expire: ExpireMode::Clear,
            },
        };
        commit(&store, vec![m], Durability::Full, 1_700_000_000_000);
    }
    store.close().unwrap();
    drop(store);

    let store = open(&config(dir.path(), 8));
    assert_eq!(store.keyspace.db_len(0), KEYS);
    assert_loaded_data(&store, "log replay");
    store.checkpoint().unwrap();
    store.close().unwrap();
    drop(store);

    let store = open(&config(dir.path(), 8));
    assert_loaded_data(&store, "checkpoint");
    store.close().unwrap();
    drop(store);

    // Loaded into 8 shards, then moved into 4: the first keyspace is
    // freed, so the data counts once.
    let store = open(&config(dir.path(), 4));
    assert!(store.checkpoint_recovery.resharded);
    assert_eq!(store.keyspace.db_len(0), KEYS);
    assert_loaded_data(&store, "redistribution");
}
