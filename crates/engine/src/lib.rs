//! durakv's storage engine: the keyspace, the write-ahead log, checkpoints
//! and recovery.
//!
//! The engine is synchronous and has no networking or async dependencies, so
//! it can be embedded (the benchmark's `embedded` target does) and driven
//! deterministically by tests. All file I/O goes through [`io::FileSystem`]
//! so tests can inject faults.
//!
//! Module map:
//! - [`durability`]: the `full` / `delayed` / `none` levels.
//! - [`value`], [`zset`], [`stream`]: the data types a key can hold
//!   ([`stream_op`]: stream writes as mutations).
//! - [`db`], [`shard`], [`keyspace`]: databases partitioned into shards, each
//!   behind its own lock, with lazy expiry; [`lfu`]: the access counter
//!   LFU eviction compares.
//! - [`mutation`]: every state change as a deterministic, loggable value, and
//!   how it is applied; [`codec`] encodes it for the log.
//! - [`txn`]: a command's or transaction's view of the locked shards; it
//!   collects mutations and commits them as one log record.
//! - [`functions`]: the server's function libraries (opaque name → code),
//!   logged and checkpointed beside the shards.
//! - [`replication`]: the hook that hands committed writes to replicas;
//!   [`snapshot`]: a point-in-time copy of the keyspace that writers do not
//!   wait for (a replica's full sync, and each shard of a checkpoint).
//! - [`io`]: the file-system trait and its OS and fault-injecting implementations.
//! - [`wal`]: segments, records, group commit, parallel streams, recovery.
//! - [`checkpoint`]: snapshots of the keyspace that bound recovery time and
//!   let the log be truncated; [`store`] opens a directory (checkpoint + log).

pub mod checkpoint;
mod chunked;
pub mod codec;
mod cow;
pub mod db;
pub mod dep;
pub mod durability;
pub mod functions;
pub mod hash;
pub mod io;
pub mod key;
pub mod keymap;
pub mod keyspace;
pub mod lfu;
pub mod list;
pub mod lock;
pub mod mutation;
pub mod replication;
pub mod set;
pub mod shard;
pub mod snapshot;
pub mod store;
pub mod stream;
mod stream_codec;
pub mod stream_op;
pub mod txn;
pub mod unwind;
pub mod value;
mod varint;
pub mod wal;
pub mod zset;

pub use durability::Durability;

/// Seeds for the randomized model tests of the collections: a few by
/// default, as many as `DURAKV_COLLECTION_SEEDS` asks for when hunting.
#[cfg(test)]
mod test_seeds {
    pub fn seeds(default: u64) -> std::ops::Range<u64> {
        let n = std::env::var("DURAKV_COLLECTION_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default);
        0..n
    }
}
