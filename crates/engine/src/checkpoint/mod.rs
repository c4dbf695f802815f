//! Checkpoints: snapshots of the whole keyspace that bound recovery time and
//! let the write-ahead log be truncated.
//!
//! Without checkpoints a restart replays the log from the beginning and the
//! log grows forever. A checkpoint writes every database, key, value and
//! absolute expiry to one file while the server keeps serving, one shard at
//! a time (the `writer` module says why that is consistent and what it
//! costs), and records per shard the LSN its contents correspond to. Recovery loads the
//! newest checkpoint that verifies and replays the log after the smallest
//! of those LSNs, skipping for each shard the records it already contains
//! (`store::replay`). If the newest file is damaged, recovery falls back to
//! an older one and replays more log, and says so.
//!
//! Publishing protocol (`Checkpointer::checkpoint`): write
//! `checkpoint-<seq>.dkcp.tmp`, wait until the log is durable up to every
//! LSN the snapshot contains, fdatasync, rename to `checkpoint-<seq>.dkcp`,
//! fsync the directory. Only then are checkpoints beyond the newest
//! `1 + keep` deleted and log segments wholly before the oldest kept
//! checkpoint's replay LSN removed. The highest sequence number that
//! verifies is the newest complete checkpoint; no manifest is needed.
//!
//! Module map: `format` (bytes on disk, `docs/format.md`), `writer`
//! (serializing shards, writing blocks), `reader` (verifying, parallel
//! loading), `error` ([`CheckpointError`]).

mod error;
pub mod format;
mod reader;
mod writer;

pub use error::CheckpointError;
pub use reader::{load_into, read_summary, LoadedCheckpoint, Summary};

use crate::io::FileSystem;
use crate::keyspace::Keyspace;
use crate::wal::{TruncateStats, Wal};
use format::{FileHeader, FileKind, Footer};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default number of checkpoints kept besides the newest (`checkpoint-keep`).
pub const DEFAULT_KEEP: usize = 2;
/// Largest accepted `keep`.
pub const MAX_KEEP: usize = 100;
/// Default size at which a shard's serialized entries are cut into a new
/// block: 1 MiB. Larger blocks compress slightly better; smaller ones let
/// loading spread over more threads.
pub const DEFAULT_BLOCK_TARGET_BYTES: usize = 1 << 20;
/// Bounds of `block_target_bytes`: 1 KiB ..= 256 MiB.
pub const MIN_BLOCK_TARGET_BYTES: usize = 1 << 10;
pub const MAX_BLOCK_TARGET_BYTES: usize = 256 << 20;
/// Default bytes written between intermediate fdatasyncs: 8 MiB.
pub const DEFAULT_SYNC_EVERY_BYTES: u64 = 8 << 20;
/// Most threads a load uses.
pub const MAX_LOAD_THREADS: usize = 64;

/// Checkpoint settings. Every limit carries its unit in its name.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// Where checkpoint files live (default `<data-dir>/checkpoints`).
    pub dir: PathBuf,
    /// Checkpoints kept besides the newest; the log is kept from the oldest
    /// kept one's replay LSN on, so recovery can fall back to any of them.
    /// Default 2, bounds 0..=100. Adjustable with [`Checkpointer::set_keep`].
    pub keep: usize,
    /// See [`DEFAULT_BLOCK_TARGET_BYTES`].
    pub block_target_bytes: usize,
    /// fdatasync the file every this many bytes (0: only at the end).
    /// Default 8 MiB.
    pub sync_every_bytes: u64,
    /// Threads used to load a checkpoint; 0 means one per CPU. At most
    /// [`MAX_LOAD_THREADS`].
    pub load_threads: usize,
}

/// Per-checkpoint choices.
#[derive(Debug, Clone, Copy)]
pub struct CheckpointOptions {
    /// Pace the checkpoint to at most this many serialized bytes per second
    /// (0: as fast as possible). Background checkpoints use it to leave CPU
    /// and disk bandwidth to foreground writes.
    pub max_bytes_per_sec: u64,
    /// The format version to write, from [`format::OLDEST_WRITTEN_VERSION`]
    /// to [`format::FORMAT_VERSION`] (the default). An older one is for a
    /// rollback: the build before reads no newer version than it wrote.
    pub format_version: u32,
}

impl Default for CheckpointOptions {
    fn default() -> CheckpointOptions {
        CheckpointOptions {
            max_bytes_per_sec: 0,
            format_version: format::FORMAT_VERSION,
        }
    }
}

impl CheckpointConfig {
    pub fn new(dir: impl Into<PathBuf>) -> CheckpointConfig {
        CheckpointConfig {
            dir: dir.into(),
            keep: DEFAULT_KEEP,
            block_target_bytes: DEFAULT_BLOCK_TARGET_BYTES,
            sync_every_bytes: DEFAULT_SYNC_EVERY_BYTES,
            load_threads: 0,
        }
    }

    /// The number of load threads to actually use.
    pub fn effective_load_threads(&self) -> usize {
        let n = match self.load_threads {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        n.clamp(1, MAX_LOAD_THREADS)
    }
}

/// What one successful checkpoint did.
#[derive(Debug, Clone, Default)]
pub struct CheckpointStats {
    pub seq: u64,
    pub path: PathBuf,
    /// The format version the file was written in.
    pub format_version: u32,
    /// Recovery replays the log after this LSN.
    pub replay_lsn: u64,
    pub max_shard_lsn: u64,
    pub keys: u64,
    /// Uncompressed entry bytes.
    pub raw_bytes: u64,
    /// Size of the file.
    pub file_bytes: u64,
    pub blocks: u64,
    pub started_unix_ms: u64,
    pub finished_unix_ms: u64,
    pub duration: Duration,
    /// Longest time one shard stayed locked while it was serialized.
    pub max_shard_lock: Duration,
    /// Largest serialized shard: the memory a checkpoint adds.
    pub max_shard_image_bytes: u64,
    /// Time spent waiting for the log to become durable up to the snapshot.
    pub wal_wait: Duration,
    /// Older checkpoint files deleted by retention.
    pub removed_checkpoints: Vec<PathBuf>,
    /// LSN passed to `Wal::truncate_before`, if truncation ran.
    pub truncated_before_lsn: Option<u64>,
    pub truncate: TruncateStats,
    /// Retention or truncation trouble; the checkpoint itself is complete
    /// and durable regardless.
    pub cleanup_error: Option<String>,
}

/// The checkpointer's state, for INFO and schedulers.
#[derive(Debug, Clone, Default)]
pub struct CheckpointStatus {
    pub in_progress: bool,
    /// Start of the running checkpoint (ms since the Unix epoch), or 0.
    pub current_started_unix_ms: u64,
    /// The last successful checkpoint.
    pub last: Option<CheckpointStats>,
    /// Whether the last attempt failed, and why.
    pub last_error: Option<String>,
    pub succeeded: u64,
    pub failed: u64,
}

/// One file in the checkpoint directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFile {
    pub seq: u64,
    pub path: PathBuf,
    pub kind: FileKind,
}

/// Takes checkpoints of one keyspace into one directory, one at a time.
pub struct Checkpointer {
    fs: Arc<dyn FileSystem>,
    cfg: CheckpointConfig,
    keep: AtomicUsize,
    next_seq: AtomicU64,
    /// Held for the whole of a checkpoint: only one runs at a time.
    running: Mutex<()>,
    status: Mutex<CheckpointStatus>,
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer")
            .field("dir", &self.cfg.dir)
            .field("keep", &self.keep())
            .finish()
    }
}

impl Checkpointer {
    /// Opens (creating) the directory and deletes temporary files left by a
    /// checkpoint that a crash interrupted.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        cfg: CheckpointConfig,
    ) -> Result<Checkpointer, CheckpointError> {
        let dir = cfg.dir.clone();
        fs.create_dir_all(&dir)
            .map_err(|e| CheckpointError::io(&dir, e))?;
        // The directory's own entry must be durable before any checkpoint
        // in it is relied on (and the log truncated because of it).
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)
                .map_err(|e| CheckpointError::io(parent, e))?;
        }
        let files = list_files(fs.as_ref(), &dir)?;
        let mut removed = false;
        for f in files.iter().filter(|f| f.kind == FileKind::Temp) {
            tracing::info!(path = %f.path.display(), "removing incomplete checkpoint left by an interrupted run");
            fs.remove_file(&f.path)
                .map_err(|e| CheckpointError::io(&f.path, e))?;
            removed = true;
        }
        if removed {
            fs.sync_dir(&dir)
                .map_err(|e| CheckpointError::io(&dir, e))?;
        }
        let next_seq = files
            .iter()
            .map(|f| f.seq)
            .max()
            .map_or(1, |m| m.saturating_add(1));
        let keep = cfg.keep.min(MAX_KEEP);
        Ok(Checkpointer {
            fs,
            cfg,
            keep: AtomicUsize::new(keep),
            next_seq: AtomicU64::new(next_seq),
            running: Mutex::new(()),
            status: Mutex::new(CheckpointStatus::default()),
        })
    }

    /// The file system checkpoints are written to (and read back from).
    pub fn fs(&self) -> &dyn FileSystem {
        self.fs.as_ref()
    }

    pub fn dir(&self) -> &Path {
        &self.cfg.dir
    }

    pub fn config(&self) -> &CheckpointConfig {
        &self.cfg
    }

    pub fn keep(&self) -> usize {
        self.keep.load(Ordering::Relaxed)
    }

    /// Changes `keep` (clamped to [`MAX_KEEP`]); applies from the next checkpoint.
    pub fn set_keep(&self, keep: usize) {
        self.keep.store(keep.min(MAX_KEEP), Ordering::Relaxed);
    }

    pub fn status(&self) -> CheckpointStatus {
        self.status.lock().clone()
    }

    pub fn in_progress(&self) -> bool {
        self.status.lock().in_progress
    }

    /// Checkpoint files in the directory, newest first.
    pub fn files(&self) -> Result<Vec<CheckpointFile>, CheckpointError> {
        let mut v = list_files(self.fs.as_ref(), &self.cfg.dir)?;
        v.reverse();
        Ok(v)
    }

    /// Takes a checkpoint of `ks` now, on the calling thread. `wal` is the
    /// log the keyspace's writes go to (None: an unlogged keyspace). Fails
    /// with [`CheckpointError::InProgress`] if one is already running and
    /// [`CheckpointError::WalFailed`] if the log has failed.
    pub fn checkpoint(
        &self,
        ks: &Keyspace,
        wal: Option<&Wal>,
    ) -> Result<CheckpointStats, CheckpointError> {
        self.checkpoint_with(ks, wal, CheckpointOptions::default())
    }

    /// [`Checkpointer::checkpoint`] with options (pacing).
    pub fn checkpoint_with(
        &self,
        ks: &Keyspace,
        wal: Option<&Wal>,
        opts: CheckpointOptions,
    ) -> Result<CheckpointStats, CheckpointError> {
        if !(format::OLDEST_WRITTEN_VERSION..=format::FORMAT_VERSION).contains(&opts.format_version)
        {
            return Err(CheckpointError::UnwritableVersion(opts.format_version));
        }
        let Some(_running) = self.running.try_lock() else {
            return Err(CheckpointError::InProgress);
        };
        let started_unix_ms = self.fs.now_ms();
        {
            let mut st = self.status.lock();
            st.in_progress = true;
            st.current_started_unix_ms = started_unix_ms;
        }
        // A panic (a bug) must not leave the status saying a checkpoint
        // runs: BGSAVE would be refused from then on.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run(ks, wal, opts, started_unix_ms)
        }));
        let mut st = self.status.lock();
        st.in_progress = false;
        st.current_started_unix_ms = 0;
        let result = match result {
            Ok(result) => result,
            Err(panic) => {
                st.last_error = Some("the checkpoint panicked".to_owned());
                st.failed += 1;
                drop(st);
                std::panic::resume_unwind(panic)
            }
        };
        match &result {
            Ok(stats) => {
                st.last = Some(stats.clone());
                st.last_error = None;
                st.succeeded += 1;
            }
            Err(e) => {
                st.last_error = Some(e.to_string());
                st.failed += 1;
            }
        }
        result
    }

    fn run(
        &self,
        ks: &Keyspace,
        wal: Option<&Wal>,
        opts: CheckpointOptions,
        started_unix_ms: u64,
    ) -> Result<CheckpointStats, CheckpointError> {
        let started = Instant::now();
        if let Some(f) = wal.and_then(Wal::failure) {
            return Err(CheckpointError::WalFailed(f));
        }
        let seq = self.next_seq.fetch_add(1, Ordering::SeqCst);
        let dir = &self.cfg.dir;
        let tmp = format::temp_path(dir, seq);
        let path = format::snapshot_path(dir, seq);
        let file = self
            .fs
            .create_file(&tmp)
            .map_err(|e| CheckpointError::io(&tmp, e))?;
        let mut stats = CheckpointStats {
            seq,
            path: path.clone(),
            format_version: opts.format_version,
            started_unix_ms,
            ..CheckpointStats::default()
        };
        let written = self.write_file(ks, wal, opts, &tmp, file, &mut stats);
        if let Err(e) = written {
            // Best effort: a leftover temp file is also removed at start-up.
            if let Err(re) = self.fs.remove_file(&tmp) {
                tracing::debug!(path = %tmp.display(), "could not remove temp checkpoint: {re}");
            }
            return Err(e);
        }
        self.fs
            .rename(&tmp, &path)
            .map_err(|e| CheckpointError::io(&tmp, e))?;
        self.fs
            .sync_dir(dir)
            .map_err(|e| CheckpointError::io(dir, e))?;
        stats.finished_unix_ms = self.fs.now_ms();
        stats.duration = started.elapsed();
        if let Err(e) = self.cleanup(wal, &mut stats) {
            tracing::warn!("checkpoint {seq} is complete, but cleaning up after it failed: {e}");
            stats.cleanup_error = Some(e.to_string());
        }
        tracing::info!(
            seq,
            keys = stats.keys,
            bytes = stats.file_bytes,
            replay_lsn = stats.replay_lsn,
            ms = stats.duration.as_millis() as u64,
            max_shard_lock_us = stats.max_shard_lock.as_micros() as u64,
            "checkpoint written"
        );
        Ok(stats)
    }

    /// Writes the whole temp file (checkpoint `stats.seq`) and fdatasyncs it.
    fn write_file(
        &self,
        ks: &Keyspace,
        wal: Option<&Wal>,
        opts: CheckpointOptions,
        tmp: &Path,
        file: Box<dyn crate::io::FsFile>,
        stats: &mut CheckpointStats,
    ) -> Result<(), CheckpointError> {
        let seq = stats.seq;
        let mut w = writer::FileWriter::new(file, tmp, self.cfg.sync_every_bytes);
        w.write_header(&FileHeader {
            version: opts.format_version,
            seq,
            created_ms: stats.started_unix_ms,
            shard_count: ks.num_shards() as u32,
            db_count: ks.num_dbs() as u32,
            wal_last_lsn: wal.map_or(0, Wal::last_lsn),
        })?;
        let block_target = self
            .cfg
            .block_target_bytes
            .clamp(MIN_BLOCK_TARGET_BYTES, MAX_BLOCK_TARGET_BYTES);
        // A replica's stream position, before anything else: replay starts
        // at or before its record, so every later record (which may carry
        // a newer position, or the empty one a full sync starts with)
        // stays in the log and recovery reads it. Reading it earlier than
        // the shards can only make it older, never ahead of the data.
        let repl = {
            let (lsn, origin) = ks.repl_position();
            match origin {
                Some(o) => format::ReplSection {
                    lsn,
                    replid: o.replid,
                    offset: o.offset,
                    db: o.db,
                },
                None => format::ReplSection {
                    lsn,
                    replid: bytes::Bytes::new(),
                    offset: 0,
                    db: 0,
                },
            }
        };
        // The libraries next, so replay (which starts after the smallest
        // LSN in the file) reaches every change to them made after this.
        let (libs, functions_lsn) = {
            let f = ks.functions().lock();
            // Exact for the same reason as a shard's LSN (see `writer`).
            let lsn = f.applied_lsn.max(wal.map_or(0, Wal::last_lsn));
            (f.clone(), lsn)
        };
        w.write_functions(functions_lsn, &libs)?;
        drop(libs);
        w.write_repl(&repl)?;
        let mut replay_lsn = functions_lsn;
        let mut max_lsn = functions_lsn;
        if let Some(lsn) = repl.replay_bound() {
            replay_lsn = replay_lsn.min(lsn);
            max_lsn = max_lsn.max(lsn);
        }
        let pace_start = Instant::now();
        let mut serialized_bytes = 0u64;
        let mut pool: Vec<Vec<u8>> = Vec::new();
        for i in 0..ks.num_shards() {
            // Read under the lock at the point: see `writer` for why this
            // is exact.
            let (mut image, held) = writer::serialize_shard(
                ks,
                i,
                |shard| shard.applied_lsn.max(wal.map_or(0, Wal::last_lsn)),
                block_target,
                opts.format_version,
                &mut pool,
            );
            stats.max_shard_lock = stats.max_shard_lock.max(held);
            stats.max_shard_image_bytes = stats.max_shard_image_bytes.max(image.raw_bytes);
            replay_lsn = replay_lsn.min(image.lsn);
            max_lsn = max_lsn.max(image.lsn);
            stats.keys += image.keys;
            stats.raw_bytes += image.raw_bytes;
            serialized_bytes += image.raw_bytes;
            let n = image.chunks.len();
            for (c, chunk) in image.chunks.iter_mut().enumerate() {
                w.write_block(i as u32, c as u32, c + 1 == n, image.lsn, chunk)?;
            }
            writer::recycle(image, &mut pool);
            pace(opts.max_bytes_per_sec, pace_start, serialized_bytes);
        }
        // Every LSN the snapshot contains must be durable in the log before
        // the snapshot is published; otherwise a crash could leave a state
        // that is no prefix of commit order (and half a transaction).
        if let Some(wal) = wal {
            let wait = Instant::now();
            wal.request_sync();
            wal.wait_durable(max_lsn)
                .map_err(|e| CheckpointError::WalFailed(e.to_string()))?;
            // A write that failed to log was still applied in memory, and
            // we may have copied it: such a snapshot must not be published.
            if let Some(f) = wal.failure() {
                return Err(CheckpointError::WalFailed(f));
            }
            stats.wal_wait = wait.elapsed();
        }
        let footer = Footer {
            replay_lsn,
            max_shard_lsn: max_lsn,
            block_count: w.blocks,
            key_count: stats.keys,
            seq,
            footer_offset: w.offset(),
        };
        w.write_footer(&footer)?;
        w.sync()?;
        stats.replay_lsn = replay_lsn;
        stats.max_shard_lsn = max_lsn;
        stats.blocks = w.blocks;
        stats.file_bytes = w.offset();
        Ok(())
    }

    /// Retention, then log truncation. Runs only after the new checkpoint is
    /// durable under its final name.
    fn cleanup(
        &self,
        wal: Option<&Wal>,
        stats: &mut CheckpointStats,
    ) -> Result<(), CheckpointError> {
        let dir = &self.cfg.dir;
        let keep_total = self.keep() + 1;
        let mut kept: Vec<Summary> = Vec::new();
        let mut removed_any = false;
        for f in self
            .files()?
            .into_iter()
            .filter(|f| f.kind == FileKind::Snapshot)
        {
            let summary = match read_summary(self.fs.as_ref(), &f.path) {
                Ok(s) => s,
                Err(e) => {
                    // Unusable anyway; leave it for an operator to look at.
                    tracing::warn!(path = %f.path.display(), "ignoring unreadable checkpoint during retention: {e}");
                    continue;
                }
            };
            if kept.len() < keep_total {
                if !kept.is_empty() {
                    // An older one is read only if every newer one is
                    // damaged: its pages should not crowd the cache (the
                    // newest, which a restart reads, stays).
                    if let Ok(file) = self.fs.open_file(&f.path) {
                        file.release_cache();
                    }
                }
                kept.push(summary);
                continue;
            }
            match self.fs.remove_file(&f.path) {
                Ok(()) => {
                    removed_any = true;
                    stats.removed_checkpoints.push(f.path.clone());
                }
                Err(e) => {
                    tracing::warn!(path = %f.path.display(), "could not delete old checkpoint: {e}");
                    // Still on disk, so recovery might use it: keep its log.
                    kept.push(summary);
                }
            }
        }
        if removed_any {
            self.fs
                .sync_dir(dir)
                .map_err(|e| CheckpointError::io(dir, e))?;
        }
        let Some(wal) = wal else {
            return Ok(());
        };
        // Recovery from any remaining checkpoint needs records after its
        // replay LSN; everything up to the smallest of them can go.
        let Some(oldest) = kept.iter().map(|s| s.footer.replay_lsn).min() else {
            return Ok(());
        };
        let before = oldest.saturating_add(1);
        stats.truncate = wal.truncate_before(before).map_err(CheckpointError::Wal)?;
        stats.truncated_before_lsn = Some(before);
        // Like the older checkpoints' pages, the kept log's before the
        // newest one's replay LSN are read only if it is damaged. After the
        // truncation, so that no segment about to go is opened for it.
        if let Some(newest) = kept.first() {
            wal.release_cache_before(newest.footer.replay_lsn.saturating_add(1));
        }
        Ok(())
    }
}

/// Sleeps as needed to keep to `rate` bytes per second (0: never).
fn pace(rate: u64, start: Instant, bytes: u64) {
    if rate == 0 {
        return;
    }
    let due = Duration::from_secs_f64(bytes as f64 / rate as f64);
    let elapsed = start.elapsed();
    if due > elapsed {
        std::thread::sleep(due - elapsed);
    }
}

/// The checkpoint-directory files whose names this code produces, oldest first.
fn list_files(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<CheckpointFile>, CheckpointError> {
    let mut v: Vec<CheckpointFile> = fs
        .list_dir(dir)
        .map_err(|e| CheckpointError::io(dir, e))?
        .into_iter()
        .filter_map(|path| {
            format::parse_file_name(&path).map(|(seq, kind)| CheckpointFile { seq, path, kind })
        })
        .collect();
    v.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.path.cmp(&b.path)));
    Ok(v)
}
