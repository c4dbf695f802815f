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
//! relaxed atomic load for it. From then on every database records the keys
//! it expires; a transaction takes those of its shards before each mutation
//! it applies and after (so each removal keeps its place among the
//! mutations, which matters across a SWAPDB), and when it ends uncommitted
//! (a read); active expiry hands over what it removed under the shard's
//! lock. So no removal waits in a database for a later write to overtake.

use crate::mutation::Mutation;
use bytes::Bytes;

/// A key removed because it had expired (lazily, by a command that met it,
/// or by active expiry). Expiry is not logged (replay finds the same keys
/// expired by the records' times), but a replica must be told: a Redis
/// replica never expires a key of its own accord, and a write that makes a
/// new key where an expired one was would otherwise reach it as a write to
/// the old value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredKey {
    /// Removed before the transaction's mutation at this index
    /// (`muts.len()`: after all of them).
    pub before: usize,
    pub db: u32,
    pub key: Bytes,
}

pub trait ReplicationFeed: Send + Sync {
    /// `muts` were committed at `time_ms` in the record `lsn` (0: none was
    /// written, the databases are unlogged), and `expired` were removed
    /// among them, at the places they say.
    fn committed(&self, lsn: u64, time_ms: u64, muts: &[Mutation], expired: &[ExpiredKey]);
}
