//! The write-ahead log: every logged commit becomes one checksummed record,
//! durable before its reply when the client asked for `full` durability.
//!
//! durakv exists to make this fast, so the log is split into *streams*
//! (one per `wal-dir`, ideally on separate disks), each with its own writer
//! thread doing group commit (write + fdatasync of everything that gathered
//! while the previous fsync ran). LSNs come from one global counter, so the
//! streams together describe a single commit order. A record names what it
//! depends on outside its stream, and a stream acknowledges it once it and
//! that are durable, without waiting for the other streams. Recovery merges
//! the streams by LSN up to the first gap, then keeps the records past it
//! that depend on nothing missing, under new LSNs.
//!
//! Module map:
//! - [`format`]: the bytes on disk (documented in `docs/format.md`).
//! - [`group_commit`]: appenders, writer threads, the durable watermark.
//! - `segment`: segment files, preallocation, rotation, removal.
//! - `reader`: verifying and classifying one stream's bytes.
//! - `recovery`: merging streams, epochs, deciding where writing resumes.
//!
//! Durability arguments are in `docs/durability.md`.

mod barging;
mod error;
pub mod format;
pub mod group_commit;
pub use group_commit::{buffered_bytes, Owed, FSYNC_BUCKETS_US};
mod reader;
mod recovery;
mod segment;

pub use error::WalError;
pub use segment::{Preallocate, TruncateStats};

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{
    AtomicBool,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::durability::Durability;
use crate::io::FileSystem;
use crate::unwind::AbortOnUnwind;
use group_commit::{BatchSink, CommitConfig, Core};
use segment::{
    install_spare, install_spare_with, prepare_spare, ActiveSegment, SegmentList, SegmentParams,
    SegmentWriter, Spares,
};

/// Default `syncs_in_flight`. On a fast disk a young fsync is followed, not
/// overlapped, so its writers mostly sleep; on a slow one batches start
/// every sixth of an fsync. Under slowsync at 1 ms, memtier write-only at
/// 200 connections did 101K writes/s with 6 and with 8 (the latter with
/// 28% more fsyncs), against 92K with 3 writers and a fixed 500 µs age
/// (7 rounds each, medians; `docs/performance.md`).
pub const DEFAULT_SYNCS_IN_FLIGHT: usize = 6;
/// Default `sync_overlap_us`: above a local SSD's fdatasync, below network
/// block storage's.
pub const DEFAULT_SYNC_OVERLAP_US: u64 = 500;
/// Default `page_end_min_bytes`: a batch of a page or more.
pub const DEFAULT_PAGE_END_MIN_BYTES: u64 = 4096;
/// Largest accepted `sync_overlap_us`.
pub const MAX_SYNC_OVERLAP_US: u64 = 1_000_000;
/// Largest accepted `syncs_in_flight`.
pub const MAX_SYNCS_IN_FLIGHT: usize = 16;
/// Default `segment_size_bytes`: 64 MiB.
pub const DEFAULT_SEGMENT_SIZE_BYTES: u64 = 64 * 1024 * 1024;
/// Smallest accepted `segment_size_bytes`: 4 KiB.
pub const MIN_SEGMENT_SIZE_BYTES: u64 = 4 * 1024;
/// Largest accepted `segment_size_bytes`: 4 GiB.
pub const MAX_SEGMENT_SIZE_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Default `delayed_flush_ms`.
pub const DEFAULT_DELAYED_FLUSH_MS: u64 = 10;
/// Largest accepted `delayed_flush_ms`: 10 s.
pub const MAX_DELAYED_FLUSH_MS: u64 = 10_000;
/// Default `delayed_flush_bytes`: 1 MiB.
pub const DEFAULT_DELAYED_FLUSH_BYTES: u64 = 1024 * 1024;
/// Default `max_pending_bytes`: 64 MiB per stream.
pub const DEFAULT_MAX_PENDING_BYTES: u64 = 64 * 1024 * 1024;
/// Default and largest `max_record_bytes`: 1 GiB.
pub const MAX_RECORD_BYTES: u64 = 1024 * 1024 * 1024;
/// Largest number of streams (`wal-dir`s).
pub const MAX_STREAMS: usize = 64;

/// The callback recovery feeds: `apply(lsn, time_ms, payload)`.
pub type RecoveryApply<'a> = dyn FnMut(u64, u64, &[u8]) -> Result<(), String> + 'a;

/// What recovery does with corruption in the middle of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Refuse to start, naming the file, offset and LSN. A torn last write
    /// is still truncated: that is what a crash looks like.
    #[default]
    Strict,
    /// Keep the valid prefix, log exactly what was dropped, and start.
    TolerateCorruption,
}

/// WAL settings. Every limit carries its unit in its name.
#[derive(Debug, Clone)]
pub struct WalConfig {
    /// One stream per directory (`wal-dir`, repeatable; default
    /// `<dir>/wal`). The order matters and must not change between runs.
    /// 1..=`MAX_STREAMS` entries, all distinct.
    pub dirs: Vec<PathBuf>,
    /// Size segment files are preallocated to (`wal-segment-size-mb`).
    /// Default 64 MiB, bounds 4 KiB..=4 GiB. A batch larger than this gets a
    /// segment of its own that grows past it.
    pub segment_size_bytes: u64,
    /// Longest a `Delayed` record waits before being written. Default 10,
    /// bounds 0..=10000.
    pub delayed_flush_ms: u64,
    /// Pending bytes that trigger a write without waiting for the timer.
    /// Default 1 MiB, must be >= 1 and <= `max_pending_bytes`.
    pub delayed_flush_bytes: u64,
    /// Per-stream pending bytes at which appenders block until the writer
    /// catches up (backpressure). Default 64 MiB, bounds 64 KiB..=1 GiB.
    pub max_pending_bytes: u64,
    /// Largest payload of one record. Default and maximum 1 GiB.
    pub max_record_bytes: u64,
    /// See [`RecoveryMode`]. Default `Strict`.
    pub recovery_mode: RecoveryMode,
    /// How segments are preallocated (`wal-preallocate`). Default `Auto`.
    pub preallocate: Preallocate,
    /// Batches per stream that may be written and awaiting their fdatasync
    /// at once (`wal-syncs-in-flight`). Default 6, bounds
    /// 1..=`MAX_SYNCS_IN_FLIGHT`.
    pub syncs_in_flight: usize,
    /// A stream starts another fsync while one is running only once the
    /// running one is this old (`wal-sync-overlap-us`): on a fast disk
    /// overlapping costs more than it saves, on network block storage it
    /// nearly halves the wait. Where fsyncs average longer than this,
    /// batches start evenly through one instead, `syncs_in_flight` per
    /// fsync. Default `DEFAULT_SYNC_OVERLAP_US`, bounds
    /// 0..=1,000,000.
    pub sync_overlap_us: u64,
    /// On a fast disk, a batch waits up to 500 µs after the stream's last
    /// fsync for more records once about this many writers write to the
    /// stream, while as many of them are still to come as the batch holds
    /// (`wal-sync-gather-writers`): an fsync's CPU shared by more records
    /// when the cores, not the disk, set the pace. 0 never. Default 0 here;
    /// the server's is 8 per core.
    pub sync_gather_writers: u64,
    /// Every record is recovered only with every record before it (a
    /// prefix of the whole commit order), and each stream acknowledges a
    /// record only once every stream has everything before it
    /// (`wal-ordering total`, the server's default). Off (`causal`; the
    /// default here, which the engine's tests of the mechanism rely on): a
    /// record needs only its own stream's earlier records and what it
    /// depends on. The same with one stream.
    pub total_order: bool,
    /// Recovery also hands a record at or below `start_after_lsn` to its
    /// `apply` when this says its payload holds state the checkpoint does
    /// not (the engine's `codec::covered_state`). None: never, and then a
    /// segment whose successor starts at or below `start_after_lsn + 1` is
    /// not read at all.
    pub read_covered: Option<fn(&[u8]) -> bool>,
    /// A batch at least this long (header and trailer included) is
    /// followed by zeros to the end of its 4 KiB page, where the next batch
    /// starts (format version 4). On a bandwidth-capped disk this saves
    /// writing that page again with the next batch; below the threshold
    /// the page is rewritten, which costs a short batch little and saves
    /// file space. Default `DEFAULT_PAGE_END_MIN_BYTES`; 0 pads every
    /// batch, `u64::MAX` none. A stream whose disk `Preallocate::Auto`
    /// found bandwidth-bound pads every batch whatever this says.
    pub page_end_min_bytes: u64,
    /// Treat every stream's disk as bandwidth-bound from the start and
    /// whatever `Preallocate::Auto` finds (see `docs/durability.md`, group
    /// commit): what a slow volume gets, on any disk. Tests use it to drive
    /// that path on a simulated disk. Default off.
    pub assume_bandwidth_bound: bool,
    /// A caller that runs its requests inside [`Wal::defer_syncs`] (the
    /// server's event loops) writes and fsyncs its own `Full` appends when
    /// the disk is fast ([`Wal::lead`]), instead of waking a writer thread
    /// per batch (`wal-sync-inline`). Default on.
    pub inline_sync: bool,
}

impl WalConfig {
    /// Defaults for the given stream directories.
    pub fn new(dirs: Vec<PathBuf>) -> WalConfig {
        WalConfig {
            dirs,
            segment_size_bytes: DEFAULT_SEGMENT_SIZE_BYTES,
            delayed_flush_ms: DEFAULT_DELAYED_FLUSH_MS,
            delayed_flush_bytes: DEFAULT_DELAYED_FLUSH_BYTES,
            max_pending_bytes: DEFAULT_MAX_PENDING_BYTES,
            max_record_bytes: MAX_RECORD_BYTES,
            recovery_mode: RecoveryMode::Strict,
            preallocate: Preallocate::Auto,
            syncs_in_flight: DEFAULT_SYNCS_IN_FLIGHT,
            sync_overlap_us: DEFAULT_SYNC_OVERLAP_US,
            sync_gather_writers: 0,
            total_order: false,
            read_covered: None,
            page_end_min_bytes: DEFAULT_PAGE_END_MIN_BYTES,
            assume_bandwidth_bound: false,
            inline_sync: true,
        }
    }

    /// Checks every bound; the message names the setting.
    pub fn validate(&self) -> Result<(), WalError> {
        let bad = |m: String| Err(WalError::Config(m));
        if self.dirs.is_empty() || self.dirs.len() > MAX_STREAMS {
            return bad(format!(
                "wal dirs: need 1..={MAX_STREAMS} directories, got {}",
                self.dirs.len()
            ));
        }
        for (i, d) in self.dirs.iter().enumerate() {
            if self.dirs[..i].contains(d) {
                return bad(format!("wal dirs: {} is given twice", d.display()));
            }
        }
        if !(1..=MAX_SYNCS_IN_FLIGHT).contains(&self.syncs_in_flight) {
            return bad(format!(
                "syncs_in_flight {} is outside 1..={MAX_SYNCS_IN_FLIGHT}",
                self.syncs_in_flight
            ));
        }
        if self.sync_overlap_us > MAX_SYNC_OVERLAP_US {
            return bad(format!(
                "sync_overlap_us {} is above {MAX_SYNC_OVERLAP_US}",
                self.sync_overlap_us
            ));
        }
        if !(MIN_SEGMENT_SIZE_BYTES..=MAX_SEGMENT_SIZE_BYTES).contains(&self.segment_size_bytes) {
            return bad(format!(
                "segment_size_bytes {} is outside {MIN_SEGMENT_SIZE_BYTES}..={MAX_SEGMENT_SIZE_BYTES}",
                self.segment_size_bytes
            ));
        }
        if self.delayed_flush_ms > MAX_DELAYED_FLUSH_MS {
            return bad(format!(
                "delayed_flush_ms {} exceeds {MAX_DELAYED_FLUSH_MS}",
                self.delayed_flush_ms
            ));
        }
        if !(64 * 1024..=1024 * 1024 * 1024).contains(&self.max_pending_bytes) {
            return bad(format!(
                "max_pending_bytes {} is outside 65536..=1073741824",
                self.max_pending_bytes
            ));
        }
        if self.delayed_flush_bytes == 0 || self.delayed_flush_bytes > self.max_pending_bytes {
            return bad(format!(
                "delayed_flush_bytes {} must be in 1..=max_pending_bytes ({})",
                self.delayed_flush_bytes, self.max_pending_bytes
            ));
        }
        if self.max_record_bytes == 0 || self.max_record_bytes > MAX_RECORD_BYTES {
            return bad(format!(
                "max_record_bytes {} is outside 1..={MAX_RECORD_BYTES}",
                self.max_record_bytes
            ));
        }
        Ok(())
    }
}

/// What recovery found and did.
#[derive(Debug, Clone, Default)]
pub struct RecoveryStats {
    /// Records passed to `apply`.
    pub records: u64,
    /// Payload bytes passed to `apply`.
    pub bytes: u64,
    pub duration: Duration,
    /// Highest LSN recovered (`start_after_lsn` if none); new LSNs follow it.
    pub last_lsn: u64,
    /// Records with LSN <= `start_after_lsn`, read but not applied.
    pub skipped_before_start: u64,
    /// Segments left unread: the checkpoint covers every record they can
    /// hold (see `WalConfig::read_covered`).
    pub unread_segments: usize,
    /// Torn writes at the end of a stream: (file, offset) where the log now
    /// ends.
    pub truncated_tail: Vec<(PathBuf, u64)>,
    /// `TolerateCorruption` only: exactly what was dropped, and why.
    pub dropped: Option<String>,
    /// Valid records found after the first missing LSN: never acknowledged
    /// as durable (the watermark never passed the gap), so discarded.
    pub discarded_unacknowledged: u64,
    /// Valid records found after the first missing LSN that depend on
    /// nothing missing: recovered under the LSNs from the missing one on
    /// and written again into the new epoch.
    pub kept_past_gap: u64,
    /// Records of closed epochs that an earlier recovery had discarded
    /// (those in unread segments are not counted).
    pub superseded_records: u64,
    /// Spare and half-created segment files deleted.
    pub removed_files: Vec<PathBuf>,
    /// Damaged regions skipped because only records at or below
    /// `start_after_lsn` (covered by a checkpoint) could have lived there:
    /// (file, offset). Logged as warnings; worth a disk check.
    pub skipped_checkpointed_damage: Vec<(PathBuf, u64)>,
    pub segments: usize,
    pub streams: usize,
    /// Epoch writing resumes in.
    pub epoch: u64,
    /// Whether this recovery opened a new epoch.
    pub new_epoch: bool,
    /// Bytes of recovered batches that no durable hint proved were on disk
    /// (after a process kill or a failed fsync they may be in the page cache
    /// only), rewritten and fsynced before anything was built on them.
    pub resynced_bytes: u64,
}

/// Per-stream counters.
#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    pub dir: PathBuf,
    /// `W_s`: every LSN <= this in this stream is durable.
    pub watermark_lsn: u64,
    /// `A_s` ([`Wal::acked_lsn`]): replies to this stream's writes up to it
    /// may go out.
    pub acked_lsn: u64,
    pub bytes_written: u64,
    pub fsyncs: u64,
    pub records: u64,
    /// Times a writer thread of this stream woke from waiting.
    pub writer_wakeups: u64,
    pub pending_bytes: u64,
    pub last_fsync_us: u64,
    pub max_fsync_us: u64,
    pub total_fsync_us: u64,
    /// Batches by write + fdatasync time: one count per bucket of
    /// [`FSYNC_BUCKETS_US`], then the slower ones (not cumulative).
    pub fsync_buckets: Vec<u64>,
    pub segments: usize,
    pub active_segment: Option<PathBuf>,
    /// `Preallocate::Auto` last found this stream's disk bandwidth-bound:
    /// its fsyncs do not overlap and every batch ends its page.
    pub bandwidth_bound: bool,
}

/// Counters for INFO and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct WalStats {
    pub bytes_written: u64,
    /// Batches written (each is one write + one fdatasync).
    pub fsyncs: u64,
    pub records: u64,
    /// Times a log writer thread woke from waiting (`StreamStats`).
    pub writer_wakeups: u64,
    /// Average group size: records per fsync.
    pub avg_records_per_fsync: f64,
    /// Latency of the last write+fdatasync of any stream.
    pub last_fsync_us: u64,
    pub max_fsync_us: u64,
    pub avg_fsync_us: f64,
    /// Appended but not yet handed to a writer.
    pub pending_bytes: u64,
    pub durable_lsn: u64,
    pub last_lsn: u64,
    pub disk_usage_bytes: u64,
    pub segments: usize,
    /// Preallocated spare segments ready for the next rotation.
    pub spare_segments_ready: usize,
    pub epoch: u64,
    pub streams: Vec<StreamStats>,
    pub failed: Option<String>,
}

/// The write-ahead log. `Send + Sync`; share it through an `Arc`.
pub struct Wal {
    core: Arc<Core>,
    fs: Arc<dyn FileSystem>,
    cfg: WalConfig,
    lists: Vec<SegmentList>,
    spares: Arc<Spares>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Each stream's sink, shared by its writer threads and `lead`.
    sinks: Vec<Arc<Mutex<Box<dyn BatchSink>>>>,
    closed: AtomicBool,
    epoch: u64,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("dirs", &self.cfg.dirs)
            .field("last_lsn", &self.last_lsn())
            .field("durable_lsn", &self.durable_lsn())
            .finish()
    }
}

impl Wal {
    /// Opens (creating directories) and recovers: calls
    /// `apply(lsn, time_ms, payload)` for every record in global LSN order,
    /// merging the streams by LSN and stopping at the first missing LSN (so
    /// the result is a prefix of commit order). Records with
    /// `lsn <= start_after_lsn` are skipped. A torn last write of a stream is
    /// truncated and logged; corruption in the middle of the log fails with
    /// [`WalError::Corruption`] under [`RecoveryMode::Strict`]. Logs progress
    /// and total time. Then starts one writer thread per stream.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        cfg: WalConfig,
        start_after_lsn: u64,
        apply: &mut RecoveryApply<'_>,
    ) -> Result<(Wal, RecoveryStats), WalError> {
        cfg.validate()?;
        if start_after_lsn >= u64::MAX / 2 {
            return Err(WalError::Config(format!(
                "start_after_lsn {start_after_lsn} is out of range"
            )));
        }
        let rec = recovery::recover(&fs, &cfg, start_after_lsn, apply)?;
        let n = cfg.dirs.len();
        let core = Arc::new(Core::new(
            n,
            CommitConfig {
                delayed_flush_ms: cfg.delayed_flush_ms,
                delayed_flush_bytes: cfg.delayed_flush_bytes,
                max_pending_bytes: cfg.max_pending_bytes,
                max_record_bytes: cfg.max_record_bytes,
                syncs_in_flight: cfg.syncs_in_flight,
                sync_overlap: Duration::from_micros(cfg.sync_overlap_us),
                gather_writers: cfg.sync_gather_writers,
                gather_wait: group_commit::GATHER_WAIT,
                total_order: cfg.total_order && n > 1,
                inline_sync: cfg.inline_sync,
            },
            rec.last_lsn,
        ));
        let spares = Arc::new(Spares::new(n));
        let params: Vec<SegmentParams> = cfg
            .dirs
            .iter()
            .enumerate()
            .map(|(s, dir)| SegmentParams {
                fs: fs.clone(),
                dir: dir.clone(),
                stream_id: s as u32,
                stream_count: n as u32,
                epoch: rec.epoch,
                epoch_start_lsn: rec.epoch_start_lsn,
                segment_size_bytes: cfg.segment_size_bytes,
                preallocate: cfg.preallocate,
                page_end_min_bytes: cfg.page_end_min_bytes,
            })
            .collect();

        // Streams that start a new segment get it zero-filled in parallel:
        // one after another, N throttled volumes would take N times as long
        // to come up.
        let mut first_spares: Vec<Option<std::io::Result<segment::Spare>>> =
            std::thread::scope(|scope| {
                let jobs: Vec<_> = rec
                    .plans
                    .iter()
                    .zip(&params)
                    .map(|(plan, p)| {
                        plan.append.is_none().then(|| {
                            scope.spawn(move || {
                                prepare_spare(
                                    p,
                                    "inline",
                                    p.preallocate,
                                    &segment::zeroing_fast_enough,
                                )
                            })
                        })
                    })
                    .collect();
                jobs.into_iter()
                    .map(|job| {
                        job.map(|h| {
                            h.join().unwrap_or_else(|_| {
                                Err(std::io::Error::other("segment preparation panicked"))
                            })
                        })
                    })
                    .collect()
            });

        // Make every stream's active segment ready before accepting writes
        // (for a new epoch this is what closes the old one).
        // Recovery's re-logged records go into stream 0's new segment, which
        // is installed first: it appears whole, so once any segment of the
        // new epoch supersedes their old copies, they are on disk.
        let relog: Vec<format::FramedRecord<'_>> = rec
            .relog
            .iter()
            .map(|r| (r.lsn, r.time_ms, r.payload.as_slice()))
            .collect();
        let mut writers = Vec::with_capacity(n);
        let mut lists = Vec::with_capacity(n);
        for (s, ((plan, p), first_spare)) in rec
            .plans
            .into_iter()
            .zip(&params)
            .zip(&mut first_spares)
            .enumerate()
        {
            let mut segments = plan.segments;
            let active = match plan.append {
                Some(ap) => ActiveSegment::new(
                    ap.path.clone(),
                    fs.open_file(&ap.path)
                        .map_err(|e| WalError::io(&ap.path, e))?,
                    ap.salt,
                    ap.offset,
                    ap.has_batches,
                ),
                None => {
                    let initial: &[format::FramedRecord<'_>] = if s == 0 { &relog } else { &[] };
                    let first_lsn = initial.first().map_or(rec.last_lsn + 1, |r| r.0);
                    let spare = first_spare
                        .take()
                        .unwrap_or_else(|| {
                            prepare_spare(p, "inline", p.preallocate, &segment::zeroing_fast_enough)
                        })
                        .map_err(|e| WalError::io(&p.dir, e))?;
                    let seg = if initial.is_empty() {
                        install_spare(p, spare, first_lsn)
                    } else {
                        install_spare_with(p, spare, first_lsn, initial, first_lsn - 1)
                    }
                    .map_err(|e| WalError::io(&p.dir, e))?;
                    segments.push(segment::SegmentInfo {
                        path: seg.path.clone(),
                        epoch: p.epoch,
                        max_lsn: initial.last().map(|r| r.0),
                        bytes: p.segment_size_bytes,
                        active: true,
                        cache_released: false,
                    });
                    seg
                }
            };
            let list: SegmentList = Arc::new(Mutex::new(segments));
            lists.push(list.clone());
            let (active_max_lsn, active_bytes) = {
                let l = list.lock();
                l.last().map_or((None, 0), |x| (x.max_lsn, x.bytes))
            };
            writers.push(SegmentWriter {
                params: p.clone(),
                active,
                segments: list,
                spares: spares.clone(),
                active_max_lsn,
                active_bytes,
                broken: false,
            });
        }

        let mut threads = Vec::with_capacity(n * cfg.syncs_in_flight + 1);
        let mut sinks = Vec::with_capacity(n);
        for (s, w) in writers.into_iter().enumerate() {
            let sink: Arc<Mutex<Box<dyn BatchSink>>> = Arc::new(Mutex::new(Box::new(w)));
            sinks.push(sink.clone());
            for slot in 0..cfg.syncs_in_flight {
                let core = core.clone();
                let sink = sink.clone();
                let batch = group_commit::new_buffer();
                let h = std::thread::Builder::new()
                    .name(format!("durakv-wal-{s}.{slot}"))
                    .spawn(move || {
                        let _abort = AbortOnUnwind("a log writer");
                        core.run_writer(s, slot, &sink, batch)
                    })
                    .map_err(|e| WalError::io(&cfg.dirs[s], e))?;
                threads.push(h);
            }
        }
        if cfg.assume_bandwidth_bound {
            for s in 0..n {
                core.set_bandwidth_capped(s, true);
            }
        } else {
            let core = core.clone();
            let overlap_us = cfg.sync_overlap_us;
            // Batching as on a bandwidth-bound disk (no overlapping fsyncs,
            // batches ending their page) suits a capped disk, and also a
            // fast one whose zeros turned dear under a heavy log (measured
            // on the local disk: YCSB-A 69K against 62K ops/s without it).
            // It does not suit a disk bound by fsync latency (network block
            // storage, emulated by slowsync at 1 ms): there overlapping is
            // the point (YCSB-A 31K ops/s with it off, 45K on).
            spares.on_judged(Box::new(move |s, capped, zeros_dear| {
                let c = &core.streams[s].counters;
                let fsyncs = c.fsyncs.load(SeqCst);
                let fast = fsyncs == 0 || c.total_fsync_us.load(SeqCst) / fsyncs < overlap_us;
                core.set_bandwidth_capped(s, capped || (zeros_dear && fast))
            }));
        }
        {
            let spares = spares.clone();
            let params = params.clone();
            let h = std::thread::Builder::new()
                .name("durakv-wal-prealloc".into())
                .spawn(move || {
                    let _abort = AbortOnUnwind("the log's segment preallocator");
                    spares.run(params)
                })
                .map_err(|e| WalError::io(&cfg.dirs[0], e))?;
            threads.push(h);
        }
        for s in 0..n {
            spares.request(s);
        }
        let wal = Wal {
            core,
            fs,
            cfg,
            lists,
            spares,
            threads: Mutex::new(threads),
            sinks,
            closed: AtomicBool::new(false),
            epoch: rec.epoch,
        };
        Ok((wal, rec.stats))
    }

    pub fn num_streams(&self) -> usize {
        self.cfg.dirs.len()
    }

    pub fn config(&self) -> &WalConfig {
        &self.cfg
    }

    /// Appends one record to `stream` and returns its LSN. `encode` appends
    /// the payload to the buffer it is given (it must not touch bytes that
    /// were there before). The LSN is taken from the one global counter
    /// while holding the stream's mutex, so LSNs increase within a stream.
    /// `Full` wakes the stream's writer now; `Delayed` lets the record wait
    /// up to `delayed_flush_ms` / `delayed_flush_bytes` (`None` is treated
    /// as `Delayed`). Wait for durability with [`Wal::wait_durable`] or the
    /// durable listener. Fails once the WAL has failed or is closed.
    pub fn append(
        &self,
        stream: usize,
        time_ms: u64,
        level: Durability,
        encode: &mut dyn FnMut(&mut Vec<u8>),
    ) -> Result<u64, WalError> {
        self.append_after(stream, time_ms, level, 0, encode)
    }

    /// [`Wal::append`] of a record that must not be recovered without every
    /// LSN <= `depends_on` (0: nothing outside its own stream; a record
    /// always comes with every earlier record of its stream). Its stream's
    /// acknowledged LSN ([`Wal::acked_lsn`]) passes it only once the
    /// durable LSN covers `depends_on`.
    pub fn append_after(
        &self,
        stream: usize,
        time_ms: u64,
        level: Durability,
        depends_on: u64,
        encode: &mut dyn FnMut(&mut Vec<u8>),
    ) -> Result<u64, WalError> {
        assert!(
            stream < self.num_streams(),
            "WAL stream {stream} out of range"
        );
        self.core.append(stream, time_ms, level, depends_on, encode)
    }

    /// Highest LSN D such that every LSN <= D is on disk in every stream.
    pub fn durable_lsn(&self) -> u64 {
        self.core.durable_lsn()
    }

    /// Highest LSN `A` such that every record of `stream` with an LSN <= `A`
    /// is on disk, with everything it depends on: after a crash recovery
    /// returns all of them. At least [`Wal::durable_lsn`].
    pub fn acked_lsn(&self, stream: usize) -> u64 {
        self.core.acked_lsn(stream)
    }

    /// Whether a dependency (`crate::dep`) is met: its stream, or every
    /// stream, has it.
    pub fn dep_met(&self, dep: u64) -> bool {
        crate::dep::is_met(dep, self.durable_lsn(), |s| {
            if s < self.num_streams() {
                self.acked_lsn(s)
            } else {
                0
            }
        })
    }

    /// Asks for a dependency (`crate::dep`) to be met soon: only its
    /// stream's records when it names one (free when a `Full` append or an
    /// earlier request asked for as much), else every stream's.
    pub fn request_sync_for(&self, dep: u64) {
        let lsn = crate::dep::lsn(dep);
        match crate::dep::stream(dep) {
            Some(s) if s < self.num_streams() => self.core.request_stream_sync(s, lsn),
            _ => self.core.request_sync_upto(lsn),
        }
    }

    /// Highest LSN handed out.
    pub fn last_lsn(&self) -> u64 {
        self.core.last_lsn()
    }

    /// Tells the log whether the machine's CPU is all in use (the server
    /// measures it): see `group_commit::Core::set_cpu_scarce`.
    pub fn set_cpu_scarce(&self, scarce: bool) {
        self.core.set_cpu_scarce(scarce);
    }

    /// What `set_cpu_scarce` was last told.
    pub fn cpu_scarce(&self) -> bool {
        self.core.cpu_scarce()
    }

    /// `f(durable_lsn, acked)` is called (from writer threads, never with
    /// smaller values than before) whenever the durable LSN or a stream's
    /// acknowledged LSN (`acked[s]`, [`Wal::acked_lsn`]) advances, and once
    /// now. Replaces any previous listener.
    pub fn set_durable_listener(&self, f: group_commit::Listener) {
        self.core.set_listener(f);
    }

    /// Runs `f` (an event loop's turn of requests) with the writer threads
    /// left asleep for its `Full` appends when that pays; every stream in
    /// the returned [`Owed`] must then go to [`Wal::lead`] or
    /// [`Wal::hand_off`]. Plain `f()` without `WalConfig::inline_sync`.
    pub fn defer_syncs<R>(&self, f: impl FnOnce() -> R) -> (R, Owed) {
        self.core.defer_syncs(f)
    }

    /// Writes and fsyncs what `owed` streams have urgent on the calling
    /// thread, where nothing else is in flight there (otherwise the writer
    /// busy with it takes them next). Blocks for the fsync.
    pub fn lead(&self, owed: Owed) {
        for s in owed.streams() {
            self.core.lead(s, &self.sinks[s]);
        }
    }

    /// Hands what `owed` streams have urgent to their writer threads.
    pub fn hand_off(&self, owed: Owed) {
        for s in owed.streams() {
            self.core.hand_off(s);
        }
    }

    /// Wakes the writers of every stream whose urgent records were left to
    /// a caller of [`Wal::defer_syncs`]: the calling thread is about to
    /// block, and it may be the one that was to write them.
    pub fn release_deferred(&self) {
        self.core.release_deferred();
    }

    /// What each stream's writers and appenders wait for, one line per
    /// stream, to diagnose a stall.
    pub fn describe(&self) -> String {
        self.core.describe()
    }

    /// Asks for everything appended so far to become durable soon.
    pub fn request_sync(&self) {
        self.core.request_sync();
    }

    /// Asks for `lsn` to become durable soon: free when a `Full` append or
    /// an earlier request already asked for it or more (the common case of a
    /// reply waiting for its own `full` write), otherwise `request_sync`.
    pub fn request_sync_upto(&self, lsn: u64) {
        self.core.request_sync_upto(lsn);
    }

    /// Blocks until `lsn` is durable. Fails if the WAL fails first.
    pub fn wait_durable(&self, lsn: u64) -> Result<(), WalError> {
        self.core.wait_durable(lsn, None).map(|_| ())
    }

    /// Like [`Wal::wait_durable`] with a timeout; `Ok(false)` on timeout.
    pub fn wait_durable_timeout(&self, lsn: u64, timeout: Duration) -> Result<bool, WalError> {
        self.core.wait_durable(lsn, Some(timeout))
    }

    /// `Some(reason)` once a write or fsync has failed.
    pub fn failure(&self) -> Option<String> {
        self.core.failure()
    }

    /// Whether the log has failed (see [`Wal::failure`]), without copying
    /// the reason.
    pub fn is_failed(&self) -> bool {
        self.core.is_failed()
    }

    /// The epoch new segments are written in.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn stats(&self) -> WalStats {
        let mut st = WalStats {
            durable_lsn: self.durable_lsn(),
            last_lsn: self.last_lsn(),
            epoch: self.epoch,
            failed: self.failure(),
            ..WalStats::default()
        };
        let mut total_us = 0u64;
        for (s, sc) in self.core.streams.iter().enumerate() {
            let c = &sc.counters;
            let list = self.lists[s].lock();
            let ss = StreamStats {
                dir: self.cfg.dirs[s].clone(),
                watermark_lsn: sc.watermark.load(SeqCst),
                acked_lsn: sc.acked.load(SeqCst),
                bytes_written: c.bytes_written.load(SeqCst),
                fsyncs: c.fsyncs.load(SeqCst),
                records: c.records.load(SeqCst),
                writer_wakeups: c.writer_wakeups.load(Relaxed),
                pending_bytes: c.pending_bytes.load(SeqCst),
                last_fsync_us: c.last_fsync_us.load(SeqCst),
                max_fsync_us: c.max_fsync_us.load(SeqCst),
                total_fsync_us: c.total_fsync_us.load(SeqCst),
                fsync_buckets: c.fsync_buckets.iter().map(|b| b.load(SeqCst)).collect(),
                segments: list.len(),
                active_segment: list.iter().find(|x| x.active).map(|x| x.path.clone()),
                bandwidth_bound: self.core.bandwidth_capped(s),
            };
            total_us += ss.total_fsync_us;
            st.bytes_written += ss.bytes_written;
            st.fsyncs += ss.fsyncs;
            st.records += ss.records;
            st.writer_wakeups += ss.writer_wakeups;
            st.pending_bytes += ss.pending_bytes;
            st.max_fsync_us = st.max_fsync_us.max(ss.max_fsync_us);
            st.last_fsync_us = st.last_fsync_us.max(ss.last_fsync_us);
            st.segments += ss.segments;
            st.disk_usage_bytes += list.iter().map(|x| x.bytes).sum::<u64>();
            st.streams.push(ss);
        }
        st.spare_segments_ready = self.spares.ready_count();
        st.disk_usage_bytes += st.spare_segments_ready as u64 * self.cfg.segment_size_bytes;
        if st.fsyncs > 0 {
            st.avg_records_per_fsync = st.records as f64 / st.fsyncs as f64;
            st.avg_fsync_us = total_us as f64 / st.fsyncs as f64;
        }
        st
    }

    /// Removes segments whose records all have an LSN < `lsn` (called after
    /// a checkpoint covering them). Never removes a stream's active segment.
    pub fn truncate_before(&self, lsn: u64) -> Result<TruncateStats, WalError> {
        let stats = segment::truncate_before(self.fs.as_ref(), &self.cfg.dirs, &self.lists, lsn)?;
        if stats.segments_removed > 0 {
            tracing::info!(
                lsn,
                segments = stats.segments_removed,
                bytes = stats.bytes_freed,
                "WAL truncated"
            );
        }
        Ok(stats)
    }

    /// Drops the cached pages of sealed segments wholly before `lsn`, as a
    /// hint to the OS (`FsFile::release_cache`); each segment once. A
    /// checkpoint calls it with its replay LSN: a restart from it reads no
    /// record before that, and the pages left crowd out the memory the
    /// restart's keyspace then needs. Returns how many segments it dropped.
    pub fn release_cache_before(&self, lsn: u64) -> usize {
        segment::release_cache_before(self.fs.as_ref(), &self.lists, lsn)
    }

    /// Bytes of segment files (including preallocated space and spares).
    pub fn disk_usage_bytes(&self) -> u64 {
        let segs: u64 = self
            .lists
            .iter()
            .map(|l| l.lock().iter().map(|x| x.bytes).sum::<u64>())
            .sum();
        segs + self.spares.ready_count() as u64 * self.cfg.segment_size_bytes
    }

    /// Flushes and fsyncs everything appended, then stops the writer
    /// threads. Idempotent; later appends fail with `Closed`.
    pub fn close(&self) -> Result<(), WalError> {
        if !self.closed.swap(true, SeqCst) {
            self.core.shutdown();
            self.spares.stop();
            let threads = std::mem::take(&mut *self.threads.lock());
            for t in threads {
                let _ = t.join();
            }
        }
        match self.core.failure() {
            Some(f) => Err(WalError::Failed(f)),
            None => Ok(()),
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
