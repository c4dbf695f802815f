//! `Txn::commit` takes the transaction by reference and releases its locks
//! itself: what is left holds no lock, so others go on while it lives, and
//! a change made through it afterwards is refused, never applied outside a
//! record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::store::{Store, StoreConfig};
use durakv_engine::value::Value;
use durakv_engine::Durability;
use std::time::Duration;

fn set_op(value: &'static [u8]) -> KeyOp {
    KeyOp::SetString {
        value: Bytes::from_static(value),
        expire: ExpireMode::Clear,
    }
}

#[test]
fn a_committed_transaction_holds_no_lock_and_takes_no_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&StoreConfig::new(dir.path())).unwrap();
    let key = Bytes::from_static(b"k");
    let log = &*store.wal;

    let mut first = store.keyspace.lock_keys([&key[..]]);
    first
        .apply(Mutation::key(0, key.clone(), set_op(b"1")))
        .unwrap();
    let out = first.commit(log, Durability::Full).unwrap();
    assert!(out.lsn > 0);

    // `first` is still alive, and the same shard locks at once.
    let mut second = store
        .keyspace
        .try_lock_keys_for([&key[..]], Duration::from_secs(5), None)
        .expect("a committed transaction still held its lock");
    match second.get(0, &key).map(|e| e.value.clone()) {
        Some(Value::Str(v)) => assert_eq!(v.to_bytes(), Bytes::from_static(b"1")),
        other => panic!("expected the committed value, got {other:?}"),
    }
    second
        .apply(Mutation::key(0, key.clone(), set_op(b"2")))
        .unwrap();
    second.commit(log, Durability::Full).unwrap();

    // Through the committed transaction: refused, and nothing changes.
    assert!(first
        .apply(Mutation::key(0, key.clone(), set_op(b"3")))
        .is_err());
    assert!(first.get(0, &key).is_none());
    // Committing it again logs nothing.
    assert_eq!(first.commit(log, Durability::Full).unwrap().lsn, 0);
    drop(first);
    drop(second);

    let mut check = store.keyspace.lock_keys([&key[..]]);
    match check.get(0, &key).map(|e| e.value.clone()) {
        Some(Value::Str(v)) => assert_eq!(v.to_bytes(), Bytes::from_static(b"2")),
        other => panic!("expected the second value, got {other:?}"),
    }
    drop(check);
    store.close().unwrap();
}
