//! Expiry replays exactly even when a command read the clock before it got
//! its locks: the regression test for a write that, waiting behind another
//! lock holder, acted on a key that had meanwhile expired and been removed
//! without a log record. Replayed at its stale time it used to see the old,
//! unexpired value instead, and the restart lost the acknowledged result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::store::{Store, StoreConfig};
use durakv_engine::value::Value;
use durakv_engine::Durability;

const T0: u64 = 1_700_000_000_000;

fn set(store: &Store, now: u64, value: &str, expire: ExpireMode) {
    let key = Bytes::from_static(b"k");
    let mut txn = store.keyspace.lock_keys_at([&key[..]], now);
    let op = KeyOp::SetString {
        value: Bytes::copy_from_slice(value.as_bytes()),
        expire,
    };
    txn.apply(Mutation::key(0, key.clone(), op)).unwrap();
    let out = txn.commit(&*store.wal, Durability::Full).unwrap();
    store.wal.wait_durable(out.lsn).unwrap();
}

fn read(store: &Store, now: u64) -> Option<(Value, u64)> {
    let mut txn = store.keyspace.lock_keys_at([&b"k"[..]], now);
    txn.get_with_expiry(0, b"k", true)
        .map(|(e, at)| (e.value.clone(), at))
}

#[test]
fn a_write_with_a_stale_clock_replays_as_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig::new(dir.path());
    let store = Store::open(&cfg).unwrap();
    set(&store, T0, "5", ExpireMode::At(T0 + 1_000));
    // A reader at T0 + 2000 finds k expired and removes it (not logged).
    assert_eq!(read(&store, T0 + 2_000), None);
    // An INCR that read the clock at T0 + 500, before waiting for the lock:
    // k is gone, so it creates "1" and keeps no TTL.
    let stale = T0 + 500;
    let key = Bytes::from_static(b"k");
    let mut txn = store.keyspace.lock_keys_at([&key[..]], stale);
    assert!(
        txn.now_ms >= T0 + 2_000,
        "a transaction's time never goes below its shard's clock"
    );
    assert!(txn.get(0, &key).is_none());
    let op = KeyOp::SetString {
        value: Bytes::from_static(b"1"),
        expire: ExpireMode::Keep,
    };
    txn.apply(Mutation::key(0, key.clone(), op)).unwrap();
    let out = txn.commit(&*store.wal, Durability::Full).unwrap();
    drop(txn);
    store.wal.wait_durable(out.lsn).unwrap();
    let live = read(&store, T0 + 3_000);
    assert_eq!(live, Some((Value::Str(Bytes::from_static(b"1").into()), 0)));
    store.close().unwrap();
    drop(store);

    let store = Store::open(&cfg).unwrap();
    assert_eq!(
        read(&store, T0 + 3_000),
        live,
        "replay must rebuild what the live server acknowledged"
    );
}
