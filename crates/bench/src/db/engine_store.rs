//! The durakv engine behind the embedded target's [`EmbeddedStore`]
//! interface.
//!
//! Each write is one engine transaction committed as one write-ahead-log
//! record at the configured durability level; at `full` the call returns only
//! once the record is on disk, which is when the server would release its
//! reply. Reads wait for the writes they observed to become durable for the
//! same reason. This is the only file that knows the engine's API, so engine
//! changes are absorbed here.

use super::embedded::EmbeddedStore;
use bytes::Bytes;
use durakv_engine::db::Entry;
use durakv_engine::mutation::{KeyOp, Mutation};
use durakv_engine::store::{wait_durable, Store, StoreConfig};
use durakv_engine::txn::CommitOutcome;
use durakv_engine::value::Value;
use durakv_engine::Durability;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long a `full` write may wait for its record to reach the disk
/// before it is reported as failed.
const DURABLE_WAIT_TIMEOUT_MS: u64 = 30_000;

/// All benchmark records live in database 0, as with a RESP server.
const DB: usize = 0;

pub struct EngineStore {
    store: Store,
    level: Durability,
}

/// Opens (or recovers) the engine in `dir` at `durability`.
pub fn open_engine(dir: &Path, durability: &str) -> Result<Arc<dyn EmbeddedStore>, String> {
    let level: Durability = durability
        .parse()
        .map_err(|_| format!("durability={durability:?} must be full, delayed or none"))?;
    let store = Store::open(&StoreConfig::new(dir))
        .map_err(|e| format!("cannot open the engine in {}: {e}", dir.display()))?;
    // A `none` store is an unlogged database, as in the server.
    store.keyspace.set_logged_at_start(DB, level.is_logged());
    Ok(Arc::new(EngineStore { store, level }))
}

impl EngineStore {
    /// Holds the caller until what it wrote or read is as durable as the
    /// configured level promises.
    fn settle(&self, out: CommitOutcome) -> Result<(), String> {
        if self.level != Durability::Full || out.dependency_lsn == 0 {
            return Ok(());
        }
        match wait_durable(
            &self.store.wal,
            out.dependency_lsn,
            Duration::from_millis(DURABLE_WAIT_TIMEOUT_MS),
        ) {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!(
                "write not durable after {DURABLE_WAIT_TIMEOUT_MS} ms"
            )),
            Err(e) => Err(format!("write-ahead log: {e}")),
        }
    }

    fn write(&self, key: &[u8], op: KeyOp) -> Result<(), String> {
        let mut txn = self.store.keyspace.lock_keys([key]);
        txn.apply(Mutation::key(DB as u32, Bytes::copy_from_slice(key), op))
            .map_err(|e| e.to_string())?;
        let out = txn
            .commit(&*self.store.wal, self.level)
            .map_err(|e| e.to_string())?;
        self.settle(out)
    }
}

fn wrong_type() -> String {
    "WRONGTYPE Operation against a key holding the wrong kind of value".into()
}

impl EmbeddedStore for EngineStore {
    fn hset(&self, key: &[u8], fields: &[(&[u8], &[u8])]) -> Result<(), String> {
        let pairs = fields
            .iter()
            .map(|(f, v)| (Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)))
            .collect();
        self.write(key, KeyOp::HSet(pairs))
    }

    fn hget_count(&self, key: &[u8], fields: &[&[u8]]) -> Result<usize, String> {
        let mut txn = self.store.keyspace.lock_keys([key]);
        // Values are copied out (reference-counted) as an embedding
        // application would receive them.
        let found: Vec<Bytes> = match txn.get(DB, key) {
            None => Vec::new(),
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => {
                if fields.is_empty() {
                    h.values().collect()
                } else {
                    fields.iter().filter_map(|f| h.get(f)).collect()
                }
            }
            Some(_) => return Err(wrong_type()),
        };
        let out = txn
            .commit(&*self.store.wal, self.level)
            .map_err(|e| e.to_string())?;
        self.settle(out)?;
        Ok(found.len())
    }

    fn zadd(&self, key: &[u8], score: f64, member: &[u8]) -> Result<(), String> {
        self.write(
            key,
            KeyOp::ZAdd(vec![(score, Bytes::copy_from_slice(member))]),
        )
    }

    fn zrange_by_score(&self, key: &[u8], min: f64, limit: usize) -> Result<Vec<Vec<u8>>, String> {
        let mut txn = self.store.keyspace.lock_keys([key]);
        let members = match txn.get(DB, key) {
            None => Vec::new(),
            Some(Entry {
                value: Value::ZSet(z),
                ..
            }) => z
                .range_by_score(Bound::Included(min), Bound::Unbounded)
                .take(limit)
                .map(|(m, _)| m.to_vec())
                .collect(),
            Some(_) => return Err(wrong_type()),
        };
        let out = txn
            .commit(&*self.store.wal, self.level)
            .map_err(|e| e.to_string())?;
        self.settle(out)?;
        Ok(members)
    }

    fn del(&self, key: &[u8]) -> Result<bool, String> {
        let mut txn = self.store.keyspace.lock_keys([key]);
        let existed = txn.get(DB, key).is_some();
        if existed {
            txn.apply(Mutation::key(
                DB as u32,
                Bytes::copy_from_slice(key),
                KeyOp::Del,
            ))
            .map_err(|e| e.to_string())?;
        }
        let out = txn
            .commit(&*self.store.wal, self.level)
            .map_err(|e| e.to_string())?;
        self.settle(out)?;
        Ok(existed)
    }

    fn zrem(&self, key: &[u8], member: &[u8]) -> Result<bool, String> {
        let mut txn = self.store.keyspace.lock_keys([key]);
        let present = match txn.get(DB, key) {
            None => false,
            Some(Entry {
                value: Value::ZSet(z),
                ..
            }) => z.score(member).is_some(),
            Some(_) => return Err(wrong_type()),
        };
        if present {
            txn.apply(Mutation::key(
                DB as u32,
                Bytes::copy_from_slice(key),
                KeyOp::ZRem(vec![Bytes::copy_from_slice(member)]),
            ))
            .map_err(|e| e.to_string())?;
        }
        let out = txn
            .commit(&*self.store.wal, self.level)
            .map_err(|e| e.to_string())?;
        self.settle(out)?;
        Ok(present)
    }

    fn durability(&self) -> String {
        self.level.as_str().to_string()
    }

    fn close(&self) -> Result<(), String> {
        self.store.close().map_err(|e| e.to_string())
    }
}
