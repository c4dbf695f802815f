//! A commit log that hands out LSNs and keeps nothing, for tests of the
//! keyspace alone.

use durakv_engine::txn::CommitLog;
use durakv_engine::wal::WalError;
use durakv_engine::Durability;
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
