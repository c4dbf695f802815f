//! When checkpoints happen, and what the server reports about them.
//!
//! The engine knows how to take a checkpoint (`durakv_engine::checkpoint`);
//! this module decides when. A background thread wakes every
//! [`POLL_INTERVAL_MS`] and starts one when replaying the log written since
//! the last checkpoint would take more than half of `recovery-target-secs`
//! (at the replay speed start-up recovery measured, or a conservative
//! default), or when that log reaches `checkpoint-wal-size-mb`. The same
//! thread runs BGSAVE. SAVE runs on the calling connection's thread, and
//! SHUTDOWN (unless NOSAVE) and SIGTERM take a final checkpoint after the
//! connections have drained, so data in `durability none` databases
//! survives a clean stop. Nothing is checkpointed once the log has failed.
//!
//! It also owns the Redis-compatible persistence counters (LASTSAVE,
//! `rdb_*` INFO fields) and durakv's own checkpoint fields.

use crate::state::Shared;
use durakv_engine::checkpoint::{
    CheckpointError, CheckpointOptions, CheckpointStats, Checkpointer,
};
use durakv_engine::store::CheckpointRecovery;
use durakv_engine::wal::RecoveryStats;
use parking_lot::{Condvar, Mutex};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often the scheduler looks at the log.
pub const POLL_INTERVAL_MS: u64 = 250;
/// After a failed automatic checkpoint, wait this long before the next try.
pub const RETRY_BACKOFF_MS: u64 = 10_000;
/// Log replay speed assumed until start-up recovery has measured one:
/// 32 MiB/s. Below what replay of ~150-byte records achieved on the 2-vCPU
/// test machine (40-55 MiB/s of payload, and the estimate counts framing
/// too), so the estimate errs towards checkpointing early.
pub const DEFAULT_REPLAY_BYTES_PER_SEC: u64 = 32 << 20;
/// Checkpoint load speed assumed until one has been measured: 200 MiB/s of
/// file.
pub const DEFAULT_LOAD_BYTES_PER_SEC: u64 = 200 << 20;
/// Background checkpoints (automatic, BGSAVE) are paced to finish in about
/// `recovery-target-secs / BACKGROUND_SPREAD_DIVISOR`, judged by the size of
/// the last one, leaving CPU and disk to foreground writes; SAVE and the
/// shutdown checkpoint run flat out.
pub const BACKGROUND_SPREAD_DIVISOR: u64 = 2;
/// Background checkpoints never go slower than this: 32 MiB/s.
pub const MIN_BACKGROUND_BYTES_PER_SEC: u64 = 32 << 20;
/// A recovery smaller than this is too short to measure a speed from.
pub const MIN_MEASURED_BYTES: u64 = 16 << 20;
const MIB: u64 = 1 << 20;

/// Redis's reply when a save is already running.
pub const ERR_IN_PROGRESS: &str = "ERR Background save already in progress";

/// Scheduler state and persistence counters. Lives in [`Shared`].
pub struct Checkpoints {
    engine: Option<Arc<Checkpointer>>,
    /// A BGSAVE is requested or running.
    bg_requested: Mutex<bool>,
    wake: Condvar,
    stop: AtomicBool,
    /// BGSAVE SCHEDULE arrived while one was running: run another after it.
    scheduled: AtomicBool,
    /// Whether shutdown takes a final checkpoint (SHUTDOWN NOSAVE clears it).
    final_save: AtomicBool,
    /// Unix seconds of the last successful checkpoint (start-up time until then).
    last_save_unix_secs: AtomicU64,
    last_ok: AtomicBool,
    /// Log bytes written (this run) when the last successful checkpoint started.
    wal_bytes_at_last: AtomicU64,
    /// Log bytes replayed at start-up that no checkpoint covers yet.
    recovered_unreplayed_bytes: AtomicU64,
    replay_bytes_per_sec: u64,
    load_bytes_per_sec: u64,
    /// Size of the newest checkpoint file (loading it is part of recovery).
    snapshot_bytes: AtomicU64,
    /// Serialized bytes of the newest checkpoint (sets the background pace).
    snapshot_raw_bytes: AtomicU64,
    /// Running background checkpoint's start, unix ms (0: none).
    bg_started_unix_ms: AtomicU64,
}

/// The scheduler's view of how long recovery would take now.
#[derive(Debug, Clone, Copy, Default)]
pub struct Estimate {
    /// Log bytes written since the last checkpoint started.
    pub unreplayed_wal_bytes: u64,
    pub replay_secs: f64,
    pub load_secs: f64,
}

impl Estimate {
    pub fn total_secs(&self) -> f64 {
        self.replay_secs + self.load_secs
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// bytes / seconds, when there are enough bytes to mean something.
fn measured_rate(bytes: u64, secs: f64) -> Option<u64> {
    (bytes >= MIN_MEASURED_BYTES && secs > 0.0).then(|| (bytes as f64 / secs) as u64)
}

impl Checkpoints {
    pub fn new(
        engine: Option<Arc<Checkpointer>>,
        recovery: Option<&RecoveryStats>,
        loaded: Option<&CheckpointRecovery>,
    ) -> Checkpoints {
        let replay = recovery
            .and_then(|r| measured_rate(r.bytes, r.duration.as_secs_f64()))
            .unwrap_or(DEFAULT_REPLAY_BYTES_PER_SEC);
        let l = loaded.and_then(|c| c.loaded.as_ref());
        let load = l
            .and_then(|l| measured_rate(l.file_bytes, l.duration.as_secs_f64()))
            .unwrap_or(DEFAULT_LOAD_BYTES_PER_SEC);
        Checkpoints {
            engine,
            bg_requested: Mutex::new(false),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            final_save: AtomicBool::new(true),
            last_save_unix_secs: AtomicU64::new(unix_secs()),
            last_ok: AtomicBool::new(true),
            wal_bytes_at_last: AtomicU64::new(0),
            recovered_unreplayed_bytes: AtomicU64::new(recovery.map_or(0, |r| r.bytes)),
            replay_bytes_per_sec: replay.max(1),
            load_bytes_per_sec: load.max(1),
            snapshot_bytes: AtomicU64::new(l.map_or(0, |l| l.file_bytes)),
            snapshot_raw_bytes: AtomicU64::new(l.map_or(0, |l| l.raw_bytes)),
            bg_started_unix_ms: AtomicU64::new(0),
        }
    }

    pub fn enabled(&self) -> bool {
        self.engine.is_some()
    }

    /// A checkpoint (any kind) or a requested BGSAVE is under way.
    pub fn in_progress(&self) -> bool {
        *self.bg_requested.lock() || self.engine.as_ref().is_some_and(|e| e.in_progress())
    }

    pub fn last_save_unix_secs(&self) -> u64 {
        self.last_save_unix_secs.load(Ordering::Relaxed)
    }

    /// SHUTDOWN [NOSAVE|SAVE]: whether the final checkpoint is taken.
    pub fn set_final_save(&self, save: bool) {
        self.final_save.store(save, Ordering::Relaxed);
    }

    pub fn final_save(&self) -> bool {
        self.final_save.load(Ordering::Relaxed)
    }

    /// Queues a background checkpoint; `Err` if one is requested or running.
    pub fn request_bgsave(&self) -> Result<(), &'static str> {
        if self.engine.is_none() {
            return Err("ERR checkpoints are not available (no data directory)");
        }
        let mut req = self.bg_requested.lock();
        if *req || self.engine.as_ref().is_some_and(|e| e.in_progress()) {
            return Err(ERR_IN_PROGRESS);
        }
        *req = true;
        self.wake.notify_all();
        Ok(())
    }

    /// Stops the scheduler thread (after the checkpoint it may be running).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _g = self.bg_requested.lock();
        self.wake.notify_all();
    }
}

/// BGSAVE SCHEDULE while a checkpoint runs: start another once it ends.
pub fn schedule_bgsave(shared: &Shared) {
    shared.checkpoints.scheduled.store(true, Ordering::SeqCst);
}

/// How long recovery would take if the server crashed now.
pub fn estimate(shared: &Shared) -> Estimate {
    let cp = &shared.checkpoints;
    let written = shared.store.wal.stats().bytes_written;
    let unreplayed = cp.recovered_unreplayed_bytes.load(Ordering::Relaxed)
        + written.saturating_sub(cp.wal_bytes_at_last.load(Ordering::Relaxed));
    Estimate {
        unreplayed_wal_bytes: unreplayed,
        replay_secs: unreplayed as f64 / cp.replay_bytes_per_sec as f64,
        load_secs: cp.snapshot_bytes.load(Ordering::Relaxed) as f64 / cp.load_bytes_per_sec as f64,
    }
}

/// Whether the scheduler should start a checkpoint now.
fn due(shared: &Shared) -> Option<&'static str> {
    if shared.log_failure().is_some() {
        return None;
    }
    let (target_secs, size_mb) = {
        let c = shared.config.read();
        (c.recovery_target_secs, c.checkpoint_wal_size_mb)
    };
    let e = estimate(shared);
    if e.unreplayed_wal_bytes >= size_mb.saturating_mul(MIB) {
        return Some("checkpoint-wal-size-mb");
    }
    // Start at half the target: the checkpoint itself takes time, and the
    // log keeps growing meanwhile.
    if e.replay_secs > target_secs as f64 / 2.0 {
        return Some("recovery-target-secs");
    }
    None
}

/// How fast a checkpoint may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// SAVE, shutdown: as fast as possible.
    Foreground,
    /// Automatic, BGSAVE: spread out (see [`BACKGROUND_SPREAD_DIVISOR`]).
    Background,
}

fn options(shared: &Shared, pace: Pace) -> CheckpointOptions {
    let format_version = shared.config.read().checkpoint_format_version;
    if pace == Pace::Foreground {
        return CheckpointOptions {
            format_version,
            ..CheckpointOptions::default()
        };
    }
    let spread_secs =
        (shared.config.read().recovery_target_secs / BACKGROUND_SPREAD_DIVISOR).max(1);
    let size = match shared
        .checkpoints
        .snapshot_raw_bytes
        .load(Ordering::Relaxed)
    {
        // No checkpoint yet: estimate from memory (a scan, but only once).
        0 => shared.store.keyspace.approx_memory_bytes() as u64,
        n => n,
    };
    CheckpointOptions {
        max_bytes_per_sec: (size / spread_secs).max(MIN_BACKGROUND_BYTES_PER_SEC),
        format_version,
    }
}

/// Takes a checkpoint on the calling thread and updates the counters.
pub fn checkpoint_now(
    shared: &Shared,
    reason: &str,
    pace: Pace,
) -> Result<CheckpointStats, CheckpointError> {
    let cp = &shared.checkpoints;
    let Some(engine) = &cp.engine else {
        return Err(CheckpointError::WalFailed(
            "no write-ahead log configured".into(),
        ));
    };
    if let Some(f) = shared.log_failure() {
        return Err(CheckpointError::WalFailed(f));
    }
    engine.set_keep(shared.config.read().checkpoint_keep as usize);
    let dirty_before = shared.stats.dirty.get();
    let wal_bytes_before = shared.store.wal.stats().bytes_written;
    let opts = options(shared, pace);
    tracing::info!(
        reason,
        max_bytes_per_sec = opts.max_bytes_per_sec,
        "checkpoint started"
    );
    let result = engine.checkpoint_with(&shared.store.keyspace, Some(&shared.store.wal), opts);
    match &result {
        Ok(st) => {
            // Writes made while it ran still count, as in Redis.
            shared.stats.dirty.sub(dirty_before);
            cp.last_save_unix_secs
                .store(st.finished_unix_ms / 1000, Ordering::Relaxed);
            cp.wal_bytes_at_last
                .store(wal_bytes_before, Ordering::Relaxed);
            cp.recovered_unreplayed_bytes.store(0, Ordering::Relaxed);
            cp.snapshot_bytes.store(st.file_bytes, Ordering::Relaxed);
            cp.snapshot_raw_bytes.store(st.raw_bytes, Ordering::Relaxed);
            cp.last_ok.store(true, Ordering::Relaxed);
        }
        Err(CheckpointError::InProgress) => {}
        Err(e) => {
            tracing::error!(reason, "checkpoint failed: {e}");
            cp.last_ok.store(false, Ordering::Relaxed);
        }
    }
    result
}

/// Runs `f` on the current thread; inside a multi-threaded tokio runtime,
/// tells it first so other connections move to other workers meanwhile.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Starts the scheduler thread.
pub fn spawn(shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("durakv-checkpointer".into())
        .spawn(move || crate::restart::restarting_thread("the checkpointer", || scheduler(&shared)))
}

fn scheduler(shared: &Shared) {
    let cp = &shared.checkpoints;
    if cp.engine.is_none() {
        return;
    }
    let mut retry_after: Option<std::time::Instant> = None;
    loop {
        let bg = {
            let mut req = cp.bg_requested.lock();
            if !*req && !cp.stop.load(Ordering::SeqCst) {
                cp.wake
                    .wait_for(&mut req, Duration::from_millis(POLL_INTERVAL_MS));
            }
            *req
        };
        if cp.stop.load(Ordering::SeqCst) {
            *cp.bg_requested.lock() = false;
            return;
        }
        let scheduled = !bg
            && cp.scheduled.load(Ordering::SeqCst)
            && !cp.engine.as_ref().is_some_and(|e| e.in_progress());
        if scheduled {
            cp.scheduled.store(false, Ordering::SeqCst);
        }
        let reason = if bg || scheduled {
            Some("bgsave")
        } else if retry_after.is_some_and(|t| std::time::Instant::now() < t) {
            None
        } else {
            due(shared)
        };
        let Some(reason) = reason else { continue };
        cp.bg_started_unix_ms
            .store(crate::util::now_ms(), Ordering::Relaxed);
        let r = checkpoint_now(shared, reason, Pace::Background);
        cp.bg_started_unix_ms.store(0, Ordering::Relaxed);
        if bg {
            *cp.bg_requested.lock() = false;
        }
        retry_after = match r {
            Err(CheckpointError::InProgress) | Ok(_) => None,
            Err(_) => Some(std::time::Instant::now() + Duration::from_millis(RETRY_BACKOFF_MS)),
        };
    }
}

fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

/// The Redis `rdb_*` fields of INFO persistence.
pub fn rdb_fields(shared: &Shared, s: &mut String) {
    let cp = &shared.checkpoints;
    let status = cp.engine.as_ref().map(|e| e.status()).unwrap_or_default();
    field(s, "rdb_changes_since_last_save", shared.stats.dirty.get());
    field(s, "rdb_bgsave_in_progress", u8::from(cp.in_progress()));
    field(s, "rdb_last_save_time", cp.last_save_unix_secs());
    field(
        s,
        "rdb_last_bgsave_status",
        if cp.last_ok.load(Ordering::Relaxed) {
            "ok"
        } else {
            "err"
        },
    );
    let last_secs = status
        .last
        .as_ref()
        .map_or(-1, |l| l.duration.as_secs() as i64);
    field(s, "rdb_last_bgsave_time_sec", last_secs);
    let current = match status.current_started_unix_ms {
        0 => -1,
        t => (crate::util::now_ms().saturating_sub(t) / 1000) as i64,
    };
    field(s, "rdb_current_bgsave_time_sec", current);
    field(s, "rdb_saves", status.succeeded);
}

/// durakv's own checkpoint fields of INFO persistence.
pub fn info_fields(shared: &Shared, s: &mut String) {
    let cp = &shared.checkpoints;
    let status = cp.engine.as_ref().map(|e| e.status()).unwrap_or_default();
    let last = status.last.as_ref();
    field(
        s,
        "checkpoint_in_progress",
        u8::from(status.in_progress || cp.in_progress()),
    );
    field(s, "checkpoint_count", status.succeeded);
    field(s, "checkpoint_failures", status.failed);
    field(
        s,
        "checkpoint_last_duration_ms",
        last.map_or(-1, |l| l.duration.as_millis() as i64),
    );
    field(
        s,
        "checkpoint_last_size_bytes",
        last.map_or(0, |l| l.file_bytes),
    );
    field(s, "checkpoint_last_keys", last.map_or(0, |l| l.keys));
    // What an operator checks before going back to an older build.
    field(
        s,
        "checkpoint_last_format_version",
        last.map_or(0, |l| l.format_version),
    );
    field(
        s,
        "checkpoint_last_max_shard_lock_us",
        last.map_or(0, |l| l.max_shard_lock.as_micros() as u64),
    );
    field(
        s,
        "checkpoint_last_extra_memory_bytes",
        last.map_or(0, |l| l.max_shard_image_bytes),
    );
    let replay_lsn = last
        .map(|l| l.replay_lsn)
        .or_else(|| {
            shared
                .store
                .checkpoint_recovery
                .loaded
                .as_ref()
                .map(|l| l.replay_lsn)
        })
        .unwrap_or(0);
    field(s, "checkpoint_replay_lsn", replay_lsn);
    let err = status
        .last_error
        .unwrap_or_default()
        .replace(['\r', '\n'], " ");
    field(s, "checkpoint_last_error", err);
    let e = estimate(shared);
    field(s, "wal_bytes_since_checkpoint", e.unreplayed_wal_bytes);
    field(s, "replay_bytes_per_sec", cp.replay_bytes_per_sec);
    field(
        s,
        "estimated_recovery_secs",
        format!("{:.3}", e.total_secs()),
    );
    field(
        s,
        "wal_disk_usage_bytes",
        shared.store.wal.disk_usage_bytes(),
    );
}
