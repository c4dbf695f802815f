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
    /// Highest LSN of a record in another WAL stream than this shard's
    /// that wrote here (a multi-key write): a later record of this shard
    /// depends on it (see `Txn::commit`).
    pub other_stream_lsn: u64,
    /// The latest "now" any command used in this shard. Commands take
    /// `max(wall clock, clock_ms)`, so the times of the records touching a
    /// shard never decrease in LSN order. That is what makes expiry replay
    /// exactly: a key that some command found expired (and removed without a
    /// log record) is also expired for every later record replayed here.
    pub clock_ms: u64,
}

impl Shard {
    pub fn new(num_dbs: usize) -> Shard {
        Shard {
            dbs: (0..num_dbs).map(|_| Db::default()).collect(),
            applied_lsn: 0,
            other_stream_lsn: 0,
            clock_ms: 0,
        }
    }

    /// Advances this shard's clock to `wall_ms` (if later) and returns the
    /// time a command here must use.
    pub fn tick(&mut self, wall_ms: u64) -> u64 {
        self.clock_ms = self.clock_ms.max(wall_ms);
        self.clock_ms
    }

    pub fn key_count(&self) -> usize {
        self.dbs.iter().map(Db::len).sum()
    }
}
