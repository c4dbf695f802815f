//! For tests of the keyspace alone: a commit log that hands out LSNs and
//! keeps nothing, and the keyspace's whole content to compare.

use durakv_engine::keyspace::Keyspace;
use durakv_engine::txn::CommitLog;
use durakv_engine::value::Value;
use durakv_engine::wal::WalError;
use durakv_engine::Durability;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Counter(pub AtomicU64);

impl CommitLog for Counter {
    fn num_streams(&self) -> usize {
        1
    }
    fn append(
        &self,
        _stream: usize,
        _time_ms: u64,
        _level: Durability,
        _depends_on: u64,
        encode: &mut dyn FnMut(&mut Vec<u8>),
    ) -> Result<u64, WalError> {
        encode(&mut Vec::new());
        Ok(self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn is_met(&self, _dep: u64) -> bool {
        true
    }
}

/// Every key, by (database, key), with its value and expiry time.
pub type State = BTreeMap<(usize, Vec<u8>), (Value, u64)>;

/// Every key of every database, expired or not.
pub fn everything(ks: &Keyspace) -> State {
    let mut s = State::new();
    for i in 0..ks.num_shards() {
        for (db, d) in ks.shard(i).lock().dbs.iter().enumerate() {
            for (k, e) in d.iter() {
                s.insert((db, k.to_vec()), (e.value.clone(), d.expire_of(k, e)));
            }
        }
    }
    s
}
