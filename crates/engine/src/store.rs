//! Opening a data directory: take its lock, rebuild the keyspace from the
//! write-ahead log, and hand back everything a server (or the embedded
//! benchmark) needs to commit writes.

use crate::codec;
use crate::io::FileSystem;
use crate::keyspace::Keyspace;
use crate::lock::DirLock;
use crate::txn::CommitLog;
use crate::wal::{RecoveryMode, RecoveryStats, Wal, WalConfig, WalError};
use crate::Durability;
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything needed to open a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub dir: PathBuf,
    pub databases: usize,
    pub shards: usize,
    /// Log directories; empty means `<dir>/wal`.
    pub wal_dirs: Vec<PathBuf>,
    pub wal_segment_size_bytes: u64,
    pub delayed_flush_ms: u64,
    pub delayed_flush_bytes: u64,
    pub recovery_mode: RecoveryMode,
}

impl StoreConfig {
    pub fn new(dir: impl Into<PathBuf>) -> StoreConfig {
        StoreConfig {
            dir: dir.into(),
            databases: crate::keyspace::DEFAULT_DATABASES,
            shards: crate::keyspace::DEFAULT_SHARD_COUNT,
            wal_dirs: Vec::new(),
            wal_segment_size_bytes: crate::wal::DEFAULT_SEGMENT_SIZE_BYTES,
            delayed_flush_ms: crate::wal::DEFAULT_DELAYED_FLUSH_MS,
            delayed_flush_bytes: crate::wal::DEFAULT_DELAYED_FLUSH_BYTES,
            recovery_mode: RecoveryMode::Strict,
        }
    }

    pub fn wal_dirs(&self) -> Vec<PathBuf> {
        if self.wal_dirs.is_empty() {
            vec![self.dir.join("wal")]
        } else {
            self.wal_dirs.clone()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Lock(#[from] crate::lock::LockError),
    #[error("cannot create data directory {dir}: {source}")]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Wal(#[from] WalError),
}

/// An open data directory.
pub struct Store {
    pub keyspace: Keyspace,
    pub wal: Arc<Wal>,
    pub recovery: RecoveryStats,
    _lock: DirLock,
}

impl Store {
    /// Opens `cfg.dir` on the real file system.
    pub fn open(cfg: &StoreConfig) -> Result<Store, OpenError> {
        Self::open_with(cfg, Arc::new(crate::io::OsFs))
    }

    pub fn open_with(cfg: &StoreConfig, fs: Arc<dyn FileSystem>) -> Result<Store, OpenError> {
        std::fs::create_dir_all(&cfg.dir).map_err(|source| OpenError::Dir {
            dir: cfg.dir.clone(),
            source,
        })?;
        let lock = DirLock::acquire(&cfg.dir)?;
        let keyspace = Keyspace::new(cfg.databases, cfg.shards);
        let mut wal_cfg = WalConfig::new(cfg.wal_dirs());
        wal_cfg.segment_size_bytes = cfg.wal_segment_size_bytes;
        wal_cfg.delayed_flush_ms = cfg.delayed_flush_ms;
        wal_cfg.delayed_flush_bytes = cfg.delayed_flush_bytes;
        wal_cfg.recovery_mode = cfg.recovery_mode;
        let mut apply = |lsn: u64, time_ms: u64, payload: &[u8]| replay(&keyspace, lsn, time_ms, payload);
        let (wal, recovery) = Wal::open(fs, wal_cfg, 0, &mut apply)?;
        Ok(Store {
            keyspace,
            wal: Arc::new(wal),
            recovery,
            _lock: lock,
        })
    }

    /// Splits the store into its parts (the lock must live as long as the
    /// server uses the directory).
    pub fn into_parts(self) -> (Keyspace, Arc<Wal>, RecoveryStats, DirLock) {
        (self.keyspace, self.wal, self.recovery, self._lock)
    }

    /// Closes the log cleanly (flush and fsync everything pending).
    pub fn close(&self) -> Result<(), WalError> {
        self.wal.close()
    }
}

/// Applies one recovered record to the keyspace, with the record's commit
/// time as "now" so expiry decisions replay exactly as they were made.
pub fn replay(keyspace: &Keyspace, lsn: u64, time_ms: u64, payload: &[u8]) -> Result<(), String> {
    let payload = Bytes::copy_from_slice(payload);
    let muts = codec::decode_mutations(&payload).map_err(|e| format!("record {lsn}: {e}"))?;
    let whole = muts.iter().any(|m| m.target_key().is_none());
    let mut txn = if whole {
        keyspace.lock_all(time_ms)
    } else {
        keyspace.lock_keys(muts.iter().filter_map(|m| m.target_key().map(|k| &k[..])), time_ms)
    };
    for m in muts {
        if let Some(db) = mutation_db(&m) {
            if db >= keyspace.num_dbs() {
                return Err(format!("record {lsn}: database {db} does not exist (databases is {})", keyspace.num_dbs()));
            }
        }
        txn.apply(m).map_err(|e| format!("record {lsn}: {e}"))?;
    }
    txn.finish_replayed(lsn);
    Ok(())
}

fn mutation_db(m: &crate::mutation::Mutation) -> Option<usize> {
    use crate::mutation::Mutation;
    match m {
        Mutation::Key { db, .. } | Mutation::FlushDb { db } => Some(*db as usize),
        Mutation::SwapDb { a, b } => Some((*a).max(*b) as usize),
        Mutation::FlushAll => None,
    }
}

impl CommitLog for Wal {
    fn num_streams(&self) -> usize {
        Wal::num_streams(self)
    }

    fn append(
        &self,
        stream: usize,
        time_ms: u64,
        level: Durability,
        encode: &mut dyn FnMut(&mut Vec<u8>),
    ) -> Result<u64, String> {
        Wal::append(self, stream, time_ms, level, encode).map_err(|e| e.to_string())
    }
}

/// Waits (bounded) for `lsn` to be durable; used by synchronous callers
/// such as the embedded benchmark.
pub fn wait_durable(wal: &Wal, lsn: u64, timeout: Duration) -> Result<bool, WalError> {
    wal.wait_durable_timeout(lsn, timeout)
}
