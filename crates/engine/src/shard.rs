//! A shard: one lock's worth of the keyspace, holding its slice of every
//! logical database.
//!
//! Keys are assigned to shards by a fixed hash, so the assignment is the same
//! after a restart; checkpoints rely on that to record one replay LSN per shard.

use crate::db::Db;

#[derive(Debug)]
pub struct Shard {
    pub dbs: Vec<Db>,
    /// Highest LSN applied to this shard (live or during replay).
    pub applied_lsn: u64,
}

impl Shard {
    pub fn new(num_dbs: usize) -> Shard {
        Shard {
            dbs: (0..num_dbs).map(|_| Db::default()).collect(),
            applied_lsn: 0,
        }
    }

    pub fn key_count(&self) -> usize {
        self.dbs.iter().map(Db::len).sum()
    }
}
