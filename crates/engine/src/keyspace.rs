//! The keyspace: every logical database, partitioned into shards that each
//! sit behind their own lock, so connections on different cores rarely wait
//! for each other.
//!
//! A command locks the shards of the keys it names (in ascending shard order,
//! so two commands can never deadlock) and works through a [`Txn`]. Commands
//! that span the whole keyspace (FLUSHALL, SWAPDB, KEYS inside MULTI) lock
//! every shard.

use crate::shard::Shard;
use crate::txn::Txn;
use parking_lot::Mutex;

/// Default number of shards; a power of two so the mapping is a mask.
pub const DEFAULT_SHARD_COUNT: usize = 64;
/// Redis's default `databases`.
pub const DEFAULT_DATABASES: usize = 16;

pub struct Keyspace {
    shards: Box<[Mutex<Shard>]>,
    num_dbs: usize,
}

/// The shard of `key` for a keyspace of `shard_count` shards. Uses CRC32C,
/// a fixed function, so the mapping survives restarts (checkpoints record a
/// replay position per shard).
pub fn shard_for_key(key: &[u8], shard_count: usize) -> usize {
    debug_assert!(shard_count.is_power_of_two());
    (crc32c::crc32c(key) as usize) & (shard_count - 1)
}

impl Keyspace {
    pub fn new(num_dbs: usize, shard_count: usize) -> Keyspace {
        assert!(
            shard_count.is_power_of_two(),
            "shard count must be a power of two"
        );
        assert!(num_dbs > 0, "at least one database");
        Keyspace {
            shards: (0..shard_count)
                .map(|_| Mutex::new(Shard::new(num_dbs)))
                .collect(),
            num_dbs,
        }
    }

    pub fn num_dbs(&self) -> usize {
        self.num_dbs
    }

    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    pub fn shard_index(&self, key: &[u8]) -> usize {
        shard_for_key(key, self.shards.len())
    }

    /// Direct access to one shard's lock (checkpoints, active expiry, stats).
    pub fn shard(&self, index: usize) -> &Mutex<Shard> {
        &self.shards[index]
    }

    /// Locks the shards holding `keys` and returns a transaction over them.
    pub fn lock_keys<'k, I>(&self, keys: I, now_ms: u64) -> Txn<'_>
    where
        I: IntoIterator<Item = &'k [u8]>,
    {
        let mut idx: Vec<usize> = keys.into_iter().map(|k| self.shard_index(k)).collect();
        idx.sort_unstable();
        idx.dedup();
        Txn::new(self, idx, now_ms)
    }

    /// Locks every shard.
    pub fn lock_all(&self, now_ms: u64) -> Txn<'_> {
        Txn::new(self, (0..self.shards.len()).collect(), now_ms)
    }

    /// Live key count of database `db`, summed shard by shard (not atomic
    /// across shards, like Redis's DBSIZE under concurrent writes).
    pub fn db_len(&self, db: usize) -> usize {
        self.shards.iter().map(|s| s.lock().dbs[db].len()).sum()
    }

    /// (keys, keys with a TTL) for database `db`.
    pub fn db_stats(&self, db: usize) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(k, v), s| {
            let s = s.lock();
            (k + s.dbs[db].len(), v + s.dbs[db].volatile_len())
        })
    }

    /// Approximate bytes held by values, for INFO memory.
    pub fn approx_memory_bytes(&self) -> usize {
        const PER_KEY_OVERHEAD_BYTES: usize = 64;
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.dbs
                    .iter()
                    .flat_map(|d| d.iter())
                    .map(|(k, e)| k.len() + e.value.approx_size_bytes() + PER_KEY_OVERHEAD_BYTES)
                    .sum::<usize>()
            })
            .sum()
    }
}
