//! Opening a data directory: take its lock, load the newest checkpoint that
//! verifies, replay the write-ahead log after it, and hand back everything a
//! server (or the embedded benchmark) needs to commit writes and take
//! further checkpoints.
//!
//! Recovery, step by step:
//! 1. Lock `<dir>/LOCK` (on the real file system: the lock is a kernel
//!    `flock`), then go through [`FileSystem`] for everything else.
//! 2. Open the checkpoint directory (deleting temp files of an interrupted
//!    checkpoint) and try checkpoints newest first. A damaged one is logged,
//!    set aside as `*.dkcp.corrupt` once an older one has loaded, and the
//!    next older one is tried; if files exist but none loads, start-up stops
//!    (the log alone may no longer be complete).
//! 3. Open the log with `start_after_lsn` = the checkpoint's replay LSN and
//!    apply each record only to the shards whose recorded LSN is below it
//!    ([`replay`]).
//! 4. Check the log reaches every LSN the checkpoint contains.
//! 5. If the checkpoint was written with another shard or database count,
//!    redistribute its keys into a keyspace of the configured shape.

use crate::checkpoint::{
    self, CheckpointConfig, CheckpointError, CheckpointStats, CheckpointStatus, Checkpointer,
    LoadedCheckpoint,
};
use crate::codec;
use crate::io::FileSystem;
use crate::keyspace::Keyspace;
use crate::lock::{DirLock, DirLocks};
use crate::mutation::Mutation;
use crate::txn::{self, CommitLog};
use crate::wal::{RecoveryMode, RecoveryStats, Wal, WalConfig, WalError};
use crate::Durability;
use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Largest record payload (`wal-max-record-size-mb`); larger
    /// transactions are refused before they change anything.
    pub wal_max_record_bytes: u64,
    /// See `WalConfig::syncs_in_flight`.
    pub wal_syncs_in_flight: usize,
    /// See `WalConfig::sync_overlap_us`.
    pub wal_sync_overlap_us: u64,
    /// `WalConfig::inline_sync`.
    pub wal_sync_inline: bool,
    /// See `WalConfig::sync_gather_writers`.
    pub wal_sync_gather_writers: u64,
    /// See `WalConfig::page_end_min_bytes`.
    pub wal_page_end_min_bytes: u64,
    /// See `WalConfig::preallocate`.
    pub wal_preallocate: crate::wal::Preallocate,
    /// See `WalConfig::total_order`.
    pub wal_total_order: bool,
    /// See `WalConfig::assume_bandwidth_bound`.
    pub wal_assume_bandwidth_bound: bool,
    pub recovery_mode: RecoveryMode,
    /// Checkpoint directory; `None` means `<dir>/checkpoints`.
    pub checkpoint_dir: Option<PathBuf>,
    /// Checkpoints kept besides the newest (`checkpoint-keep`, default 2).
    pub checkpoint_keep: usize,
    /// Threads loading a checkpoint at start-up (0: one per CPU).
    pub checkpoint_load_threads: usize,
    /// Serialized bytes per checkpoint block (default 1 MiB).
    pub checkpoint_block_target_bytes: usize,
    /// Reads the bytes the process has allocated and not freed (the
    /// server's counting allocator). With it, opening measures what
    /// loading the data took ([`Store::loaded_bytes`]), so that the server
    /// can tell the memory it holds for itself from the data's.
    pub memory_probe: Option<fn() -> u64>,
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
            wal_max_record_bytes: crate::wal::MAX_RECORD_BYTES,
            wal_syncs_in_flight: crate::wal::DEFAULT_SYNCS_IN_FLIGHT,
            wal_sync_overlap_us: crate::wal::DEFAULT_SYNC_OVERLAP_US,
            wal_sync_inline: true,
            wal_sync_gather_writers: 0,
            wal_page_end_min_bytes: crate::wal::DEFAULT_PAGE_END_MIN_BYTES,
            wal_total_order: false,
            wal_assume_bandwidth_bound: false,
            wal_preallocate: crate::wal::Preallocate::Auto,
            recovery_mode: RecoveryMode::Strict,
            checkpoint_dir: None,
            checkpoint_keep: checkpoint::DEFAULT_KEEP,
            checkpoint_load_threads: 0,
            checkpoint_block_target_bytes: checkpoint::DEFAULT_BLOCK_TARGET_BYTES,
            memory_probe: None,
        }
    }

    pub fn wal_dirs(&self) -> Vec<PathBuf> {
        if self.wal_dirs.is_empty() {
            vec![self.dir.join("wal")]
        } else {
            self.wal_dirs.clone()
        }
    }

    pub fn checkpoint_dir(&self) -> PathBuf {
        self.checkpoint_dir
            .clone()
            .unwrap_or_else(|| self.dir.join("checkpoints"))
    }

    fn checkpoint_config(&self) -> CheckpointConfig {
        let mut c = CheckpointConfig::new(self.checkpoint_dir());
        c.keep = self.checkpoint_keep;
        c.load_threads = self.checkpoint_load_threads;
        c.block_target_bytes = self.checkpoint_block_target_bytes;
        c
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
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

/// What recovery did with checkpoints.
#[derive(Debug, Clone, Default)]
pub struct CheckpointRecovery {
    /// The checkpoint loaded, if any.
    pub loaded: Option<LoadedCheckpoint>,
    /// Newer checkpoints that could not be loaded (newest first), and why.
    /// Non-empty means recovery fell back and replayed more log.
    pub fallbacks: Vec<(PathBuf, String)>,
    /// The checkpoint had another shard or database count than configured,
    /// so its keys were redistributed.
    pub resharded: bool,
    /// Time spent loading (and redistributing), excluding log replay.
    pub duration: Duration,
}

/// An open data directory.
pub struct Store {
    pub keyspace: Keyspace,
    pub wal: Arc<Wal>,
    /// What log replay found and did.
    pub recovery: RecoveryStats,
    pub checkpoint_recovery: CheckpointRecovery,
    pub checkpointer: Arc<Checkpointer>,
    /// What loading the data (checkpoint, log replay, redistribution)
    /// allocated, as `StoreConfig::memory_probe` counted it: 0 without a
    /// probe. The empty keyspace, the log's buffers and its threads are
    /// not in it.
    pub loaded_bytes: u64,
    _lock: DirLocks,
}

/// A [`Store`] taken apart (the lock must live as long as the directory is used).
pub struct StoreParts {
    pub keyspace: Keyspace,
    pub wal: Arc<Wal>,
    pub recovery: RecoveryStats,
    pub checkpoint_recovery: CheckpointRecovery,
    pub checkpointer: Arc<Checkpointer>,
    pub loaded_bytes: u64,
    pub lock: DirLocks,
}

impl Store {
    /// Opens `cfg.dir` on the real file system, locking the data directory
    /// and every WAL directory (a WAL directory shared by two servers would
    /// be destroyed even if their data directories differ).
    pub fn open(cfg: &StoreConfig) -> Result<Store, OpenError> {
        let mut dirs = vec![cfg.dir.clone()];
        dirs.extend(cfg.wal_dirs());
        Self::open_locked(cfg, Arc::new(crate::io::OsFs), &dirs)
    }

    /// Opens `cfg.dir` on `fs`. Only the data directory is locked (on the
    /// real file system): the WAL directories may exist only inside `fs`.
    pub fn open_with(cfg: &StoreConfig, fs: Arc<dyn FileSystem>) -> Result<Store, OpenError> {
        Self::open_locked(cfg, fs, std::slice::from_ref(&cfg.dir))
    }

    fn open_locked(
        cfg: &StoreConfig,
        fs: Arc<dyn FileSystem>,
        lock_dirs: &[PathBuf],
    ) -> Result<Store, OpenError> {
        std::fs::create_dir_all(&cfg.dir).map_err(|source| OpenError::Dir {
            dir: cfg.dir.clone(),
            source,
        })?;
        let lock = DirLock::acquire_all(lock_dirs)?;
        let checkpointer = Checkpointer::open(fs.clone(), cfg.checkpoint_config())?;
        let load_started = Instant::now();
        let mut meter = LoadMeter::new(cfg.memory_probe);
        let (keyspace, loaded, fallbacks) =
            load_newest(fs.as_ref(), &checkpointer, cfg, &mut meter)?;
        let mut load_duration = load_started.elapsed();

        let mut wal_cfg = WalConfig::new(cfg.wal_dirs());
        wal_cfg.segment_size_bytes = cfg.wal_segment_size_bytes;
        wal_cfg.delayed_flush_ms = cfg.delayed_flush_ms;
        wal_cfg.delayed_flush_bytes = cfg.delayed_flush_bytes;
        wal_cfg.recovery_mode = cfg.recovery_mode;
        wal_cfg.max_record_bytes = cfg.wal_max_record_bytes;
        wal_cfg.syncs_in_flight = cfg.wal_syncs_in_flight;
        wal_cfg.sync_overlap_us = cfg.wal_sync_overlap_us;
        wal_cfg.inline_sync = cfg.wal_sync_inline;
        wal_cfg.sync_gather_writers = cfg.wal_sync_gather_writers;
        wal_cfg.page_end_min_bytes = cfg.wal_page_end_min_bytes;
        wal_cfg.total_order = cfg.wal_total_order;
        wal_cfg.assume_bandwidth_bound = cfg.wal_assume_bandwidth_bound;
        wal_cfg.preallocate = cfg.wal_preallocate;
        // A checkpoint of version 4 or later stores the stream position
        // with the LSN of its record, and replay starts at or before that
        // record, so no covered record holds a newer one: the log it covers
        // need not be read (see `StreamReader::covered_whole`). Its
        // position can only miss one logged while it was being written,
        // below every shard it had yet to write; then the replica resyncs
        // in full, as after damage to covered batches (below).
        if loaded.as_ref().is_some_and(|l| l.repl.is_none()) {
            wal_cfg.read_covered = Some(codec::covered_state);
        }
        let start_after = loaded.as_ref().map_or(0, |l| l.replay_lsn);
        let mut apply = |lsn: u64, time_ms: u64, payload: &[u8]| {
            meter.measure(|| {
                if lsn <= start_after {
                    replay_covered(&keyspace, lsn, payload)
                } else {
                    replay(&keyspace, lsn, time_ms, payload)
                }
            })
        };
        let (wal, recovery) = Wal::open(fs, wal_cfg, start_after, &mut apply)?;
        // A damaged batch the checkpoint covers was stepped over: it may
        // have held a later stream position than the one found, unless
        // that one's record is at or past the replay start (a version 4
        // checkpoint's position always is: replay starts at its record).
        if !recovery.skipped_checkpointed_damage.is_empty()
            && keyspace.repl_origin_lsn() < start_after
        {
            keyspace.clear_repl_origin();
        }

        if let Some(l) = &loaded {
            if recovery.last_lsn < l.max_shard_lsn {
                let err = CheckpointError::LogBehindCheckpoint {
                    file: l.path.clone(),
                    log_last_lsn: recovery.last_lsn,
                    checkpoint_lsn: l.max_shard_lsn,
                };
                if cfg.recovery_mode == RecoveryMode::Strict {
                    return Err(err.into());
                }
                // New LSNs restart after the log's end; no shard may claim
                // to contain them already.
                tracing::error!("{err}; continuing (tolerate-corruption)");
                for i in 0..keyspace.num_shards() {
                    let mut s = keyspace.shard(i).lock();
                    s.applied_lsn = s.applied_lsn.min(recovery.last_lsn);
                }
                let mut f = keyspace.functions().lock();
                f.applied_lsn = f.applied_lsn.min(recovery.last_lsn);
                drop(f);
                // The data is no longer a prefix of any stream: a replica
                // must resync fully.
                keyspace.clear_repl_origin();
            }
        }
        let mut resharded = false;
        let keyspace = match &loaded {
            Some(l)
                if keyspace.num_shards() != cfg.shards || keyspace.num_dbs() != cfg.databases =>
            {
                let started = Instant::now();
                tracing::warn!(
                    "checkpoint {} has {} shards and {} databases, the configuration {} and {}: redistributing keys",
                    l.path.display(),
                    l.shard_count,
                    l.db_count,
                    cfg.shards,
                    cfg.databases
                );
                let ks = meter.measure_ok(|| -> Result<Keyspace, OpenError> {
                    let ks = reshard(
                        &keyspace,
                        cfg.databases,
                        cfg.shards,
                        recovery.last_lsn,
                        &l.path,
                    )?;
                    if let Some(o) = keyspace.repl_origin() {
                        ks.set_repl_origin(&o, keyspace.repl_origin_lsn());
                    }
                    drop(keyspace);
                    Ok(ks)
                })?;
                resharded = true;
                load_duration += started.elapsed();
                ks
            }
            _ => keyspace,
        };
        keyspace.set_max_record_bytes(cfg.wal_max_record_bytes);
        keyspace.set_num_streams(wal.num_streams());
        Ok(Store {
            keyspace,
            wal: Arc::new(wal),
            recovery,
            checkpoint_recovery: CheckpointRecovery {
                loaded,
                fallbacks,
                resharded,
                duration: load_duration,
            },
            checkpointer: Arc::new(checkpointer),
            loaded_bytes: meter.bytes(),
            _lock: lock,
        })
    }

    /// Splits the store into its parts.
    pub fn into_parts(self) -> StoreParts {
        StoreParts {
            keyspace: self.keyspace,
            wal: self.wal,
            recovery: self.recovery,
            checkpoint_recovery: self.checkpoint_recovery,
            checkpointer: self.checkpointer,
            loaded_bytes: self.loaded_bytes,
            lock: self._lock,
        }
    }

    /// Takes a checkpoint now, on the calling thread (see
    /// [`Checkpointer::checkpoint`]); then deletes old checkpoints and
    /// truncates the log.
    pub fn checkpoint(&self) -> Result<CheckpointStats, CheckpointError> {
        self.checkpointer
            .checkpoint(&self.keyspace, Some(&self.wal))
    }

    pub fn checkpoint_status(&self) -> CheckpointStatus {
        self.checkpointer.status()
    }

    /// Closes the log cleanly (flush and fsync everything pending).
    pub fn close(&self) -> Result<(), WalError> {
        self.wal.close()
    }
}

/// A keyspace shaped like the loaded checkpoint, the checkpoint, and the
/// newer ones that failed.
type Loaded = (Keyspace, Option<LoadedCheckpoint>, Vec<(PathBuf, String)>);

/// Sums what the steps that load data allocate, less what they free, as
/// `StoreConfig::memory_probe` counts it.
struct LoadMeter {
    probe: Option<fn() -> u64>,
    bytes: i64,
}

impl LoadMeter {
    fn new(probe: Option<fn() -> u64>) -> LoadMeter {
        LoadMeter { probe, bytes: 0 }
    }

    fn measure<T>(&mut self, step: impl FnOnce() -> T) -> T {
        self.measure_if(step, |_| true)
    }

    /// Like `measure`, but a step that fails counts nothing: what it
    /// loaded is dropped with the keyspace it loaded into.
    fn measure_ok<T, E>(&mut self, step: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        self.measure_if(step, Result::is_ok)
    }

    fn measure_if<T>(&mut self, step: impl FnOnce() -> T, counts: impl Fn(&T) -> bool) -> T {
        let Some(probe) = self.probe else {
            return step();
        };
        let before = probe();
        let out = step();
        if counts(&out) {
            self.bytes += probe() as i64 - before as i64;
        }
        out
    }

    fn bytes(&self) -> u64 {
        self.bytes.max(0) as u64
    }
}

/// Loads the newest checkpoint that verifies into a keyspace shaped like
/// it; falls back to older ones. Returns an empty keyspace of the
/// configured shape when there are no checkpoints.
fn load_newest(
    fs: &dyn FileSystem,
    ckpt: &Checkpointer,
    cfg: &StoreConfig,
    meter: &mut LoadMeter,
) -> Result<Loaded, OpenError> {
    use checkpoint::format::FileKind;
    let files = ckpt.files()?;
    let snapshots: Vec<_> = files
        .iter()
        .filter(|f| f.kind == FileKind::Snapshot)
        .collect();
    if snapshots.is_empty() {
        if let Some(c) = files.iter().find(|f| f.kind == FileKind::Corrupt) {
            return Err(CheckpointError::NoUsableCheckpoint {
                dir: ckpt.dir().to_path_buf(),
                details: format!(
                    "only checkpoints set aside as corrupt remain (e.g. {})",
                    c.path.display()
                ),
            }
            .into());
        }
        return Ok((Keyspace::new(cfg.databases, cfg.shards), None, Vec::new()));
    }
    let threads = ckpt.config().effective_load_threads();
    let mut failed: Vec<(PathBuf, CheckpointError)> = Vec::new();
    for f in snapshots {
        let attempt = checkpoint::read_summary(fs, &f.path).and_then(|s| {
            let dbs = cfg.databases.max(s.header.db_count as usize);
            let ks = Keyspace::new(dbs, s.header.shard_count as usize);
            let l = meter.measure_ok(|| checkpoint::load_into(fs, &f.path, &ks, threads))?;
            Ok((ks, l))
        });
        match attempt {
            Ok((ks, l)) => {
                tracing::info!(
                    "loaded checkpoint {} ({} keys, {} bytes) in {:.3}s; replaying the log after LSN {}",
                    l.path.display(),
                    l.keys,
                    l.file_bytes,
                    l.duration.as_secs_f64(),
                    l.replay_lsn
                );
                if !failed.is_empty() {
                    tracing::warn!(
                        "recovering from the older checkpoint {} because {} newer one(s) could not be loaded; more log is replayed, nothing acknowledged is lost",
                        l.path.display(),
                        failed.len()
                    );
                }
                // Set damaged files aside (only now that a good one loaded,
                // so a failed start-up changes nothing on disk).
                let mut moved = false;
                for (path, e) in &failed {
                    if !e.is_corruption() {
                        continue;
                    }
                    if let Some((seq, _)) = checkpoint::format::parse_file_name(path) {
                        let to = checkpoint::format::corrupt_path(ckpt.dir(), seq);
                        match fs.rename(path, &to) {
                            Ok(()) => {
                                moved = true;
                                tracing::warn!(
                                    "set the damaged checkpoint aside as {}",
                                    to.display()
                                );
                            }
                            Err(e) => tracing::warn!("could not set {} aside: {e}", path.display()),
                        }
                    }
                }
                if moved {
                    fs.sync_dir(ckpt.dir()).map_err(|e| CheckpointError::Io {
                        path: ckpt.dir().to_path_buf(),
                        source: e,
                    })?;
                }
                let fallbacks = failed
                    .into_iter()
                    .map(|(p, e)| (p, e.to_string()))
                    .collect();
                return Ok((ks, Some(l), fallbacks));
            }
            // Going back to an older checkpoint would start this build on
            // a data directory a newer one has moved on: refuse, and say how
            // to go back instead.
            Err(e @ CheckpointError::NewerVersion { .. }) => return Err(e.into()),
            Err(e) => {
                tracing::error!(
                    "checkpoint {} cannot be loaded, trying an older one: {e}",
                    f.path.display()
                );
                failed.push((f.path.clone(), e));
            }
        }
    }
    let details = failed
        .iter()
        .map(|(_, e)| e.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    Err(CheckpointError::NoUsableCheckpoint {
        dir: ckpt.dir().to_path_buf(),
        details,
    }
    .into())
}

/// Moves every key of `old` into a new keyspace of the configured shape.
/// Every recovered record is applied by now, so every new shard is at
/// `last_lsn`.
fn reshard(
    old: &Keyspace,
    databases: usize,
    shards: usize,
    last_lsn: u64,
    file: &Path,
) -> Result<Keyspace, CheckpointError> {
    let new = Keyspace::new(databases, shards);
    for i in 0..old.num_shards() {
        let dbs = std::mem::take(&mut old.shard(i).lock().dbs);
        for (db, d) in dbs.into_iter().enumerate() {
            if d.is_empty() {
                continue;
            }
            if db >= databases {
                return Err(CheckpointError::TooFewDatabases {
                    file: file.to_path_buf(),
                    db,
                    databases,
                });
            }
            for (k, e) in d.iter() {
                let j = new.shard_index(k);
                let at = d.expire_of(k, e);
                new.shard(j).lock().dbs[db].insert_expiring(k.clone(), e.clone(), at);
            }
        }
    }
    for j in 0..new.num_shards() {
        new.shard(j).lock().applied_lsn = last_lsn;
    }
    let mut libs = std::mem::take(&mut *old.functions().lock());
    libs.applied_lsn = last_lsn;
    *new.functions().lock() = libs;
    Ok(new)
}

/// A record a checkpoint covers, read only for the state checkpoints do not
/// store (`codec::covered_state`): a replica's stream position.
fn replay_covered(keyspace: &Keyspace, lsn: u64, payload: &[u8]) -> Result<(), String> {
    let muts = codec::decode_mutations(&Bytes::copy_from_slice(payload))
        .map_err(|e| format!("record {lsn}: {e}"))?;
    for m in &muts {
        if let Mutation::ReplOrigin(o) = m {
            keyspace.set_repl_origin(o, lsn);
        }
    }
    Ok(())
}

/// Decodes one recovered record and applies it ([`txn::replay_record`]).
pub fn replay(keyspace: &Keyspace, lsn: u64, time_ms: u64, payload: &[u8]) -> Result<(), String> {
    let payload = Bytes::copy_from_slice(payload);
    let muts = codec::decode_mutations(&payload).map_err(|e| format!("record {lsn}: {e}"))?;
    for m in &muts {
        if let Some(db) = mutation_db(m) {
            if db >= keyspace.num_dbs() {
                return Err(format!(
                    "record {lsn}: database {db} does not exist (databases is {})",
                    keyspace.num_dbs()
                ));
            }
        }
    }
    txn::replay_record(keyspace, lsn, time_ms, &muts).map_err(|e| format!("record {lsn}: {e}"))
}

fn mutation_db(m: &Mutation) -> Option<usize> {
    match m {
        Mutation::Key { db, .. } | Mutation::FlushDb { db } => Some(*db as usize),
        Mutation::SwapDb { a, b } => Some((*a).max(*b) as usize),
        Mutation::FlushAll | Mutation::Function(_) | Mutation::ReplOrigin(_) => None,
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
        depends_on: u64,
        encode: &mut dyn FnMut(&mut Vec<u8>),
    ) -> Result<u64, WalError> {
        Wal::append_after(self, stream, time_ms, level, depends_on, encode)
    }

    fn is_met(&self, dep: u64) -> bool {
        self.dep_met(dep)
    }
}

/// Waits (bounded) for `lsn` to be durable; used by synchronous callers
/// such as the embedded benchmark.
pub fn wait_durable(wal: &Wal, lsn: u64, timeout: Duration) -> Result<bool, WalError> {
    wal.wait_durable_timeout(lsn, timeout)
}
