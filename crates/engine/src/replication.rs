//! The hook through which committed writes reach replicas.
//!
//! A transaction hands its applied mutations to the [`ReplicationFeed`]
//! while it still holds its shard locks, right after its LSN is assigned.
//! Two writes to one key are serialized by that key's shard lock, so the
//! feed sees them in commit (LSN) order; writes to different shards may
//! reach it in either order, which commutes. Writes to databases that are
//! not logged (level `none`) are fed too (their LSN is 0): replicas get
//! everything, as in Redis.
//!
//! Until a replica first attaches the feed is off, and a commit pays one
//! relaxed atomic load for it.

use crate::mutation::Mutation;

pub trait ReplicationFeed: Send + Sync {
    /// `muts` were committed at `time_ms` in the record `lsn` (0: none was
    /// written, the databases are unlogged).
    fn committed(&self, lsn: u64, time_ms: u64, muts: &[Mutation]);
}
