//! Segment files: creating, writing, rotating, and removing them.
//!
//! A stream's log is a sequence of segment files, each preallocated to
//! `segment_size_bytes` so that appending never has to allocate blocks and
//! fdatasync only has data to flush. How is [`Preallocate`]'s choice. Zeros
//! make every later fdatasync cheaper: on ext4, an fdatasync after writing
//! into fallocate'd-but-unwritten extents also commits the extent
//! conversion, which measured ~1.5x slower on a local disk. But zeros cost
//! the whole segment's size in disk bandwidth once more, in bursts, and on a
//! bandwidth-capped volume every fsync of the log queues behind them. So
//! `Auto` zero-fills only while zeroing runs fast in absolute terms and many
//! times faster than the log writes, and fallocates the rest otherwise.
//! Preparation happens ahead of time on a background thread: each stream
//! keeps one *spare* file ready (`wal-<stream>.bg<n>.spare`), zeroed (and
//! synced) a chunk at a time. A rotation that finds no spare ready
//! fallocates one inline rather than stall the stream while a whole segment
//! of zeros is written. Rotation writes the header into the spare,
//! fdatasyncs it, renames it to its final name and fsyncs the directory, all
//! before the first batch goes in. A crash at any point leaves either a
//! spare (deleted at start-up), a segment with a torn header and zeros
//! behind it (deleted at start-up), or a valid empty segment.
//!
//! Several batches of a segment may be between write and fsync at once
//! (pipelined group commit). Each batch header records its *sync base*, the
//! offset of the oldest batch of the segment not yet known durable when it
//! was written, so recovery can tell a tail torn while several fsyncs were
//! in flight from damage to a batch that was already durable. Before the
//! first batch goes into a new segment, the previous one is fsynced whole:
//! a segment only holds batches if every earlier segment of the stream is
//! complete on disk.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::WalError;
use super::format::{
    frame_batch, segment_file_name, spare_file_name, BatchHeader, FramedRecord, SegmentHeader,
    BATCH_FLAG_PAGE_END, BATCH_FLAG_SYNC_BASE, BATCH_HEADER_BYTES, FORMAT_VERSION, PAGE_BYTES,
    SEGMENT_HEADER_BYTES,
};
use super::group_commit::{BatchMeta, BatchSink, BatchSync};
use crate::io::{FileSystem, FsFile};

/// Zero-fill granularity: each chunk is written and synced before the next,
/// and the log's own fsyncs queue behind the chunk in flight. On a volume
/// capped at 8 MB/s a 1 MiB chunk held them for 125 ms (p99 300 ms, and
/// half the throughput of 128 KiB chunks, measured with bench/durable.sh
/// volumes).
const ZERO_CHUNK_BYTES: usize = 128 * 1024;

/// After `Auto` found zeroing too slow for a stream, its next spares are
/// fallocated without trying, except every this many: a probe costs
/// `ZERO_JUDGE_AFTER_BYTES` of zeros, which on a capped volume hold the
/// log's fsyncs as long as they take.
const ZERO_REPROBE_EVERY: u32 = 8;
/// `Auto` judges zeroing only once this much is zeroed: single chunks are
/// timed unreliably when the CPUs are busy (as they are under load on a
/// small machine), and a capped volume passes its first chunks at once
/// from its burst allowance.
const ZERO_JUDGE_AFTER_BYTES: u64 = 8 * ZERO_CHUNK_BYTES as u64;
/// `Auto` stops zeroing below this rate (bytes/s). A local disk zeroes at
/// 200+ MB/s and network block storage with a 1 ms fsync at about 100 MB/s;
/// a volume capped at 8 MB/s zeroes at its cap, and there the zeros' bursts
/// held the log's fsyncs for 100 ms at a time: four such volumes gave
/// 6,037 writes/s zeroing and 17,450 fallocating (bench/durable.sh volumes).
const ZERO_MIN_BYTES_PER_SEC: f64 = 32.0 * 1024.0 * 1024.0;
/// `Auto` also stops zeroing unless it runs this many times faster than the
/// stream's log writes into its active segment: slower, the zeros would take
/// a large share of the disk's time. (A higher factor gave up zeros on a
/// local disk under 1 KB writes at 30 MB/s of log, where they are worth
/// 1.4-1.6x in throughput.)
const ZERO_MIN_LOG_RATE_FACTOR: f64 = 4.0;

/// `Auto`'s test for a file being prepared while no log runs yet (at
/// open): whether zeroing is fast enough in absolute terms.
pub(crate) fn zeroing_fast_enough(zeroed: u64, took: Duration) -> bool {
    zeroed < ZERO_JUDGE_AFTER_BYTES
        || zeroed as f64 / took.as_secs_f64().max(1e-6) >= ZERO_MIN_BYTES_PER_SEC
}

/// How a segment file is preallocated (`wal-preallocate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preallocate {
    /// Zeros while the disk has bandwidth to spare, fallocate otherwise.
    Auto,
    /// Always zeros (the whole segment).
    Zeros,
    /// Always fallocate.
    Fallocate,
}

/// What the WAL knows about one segment file.
#[derive(Debug, Clone)]
pub(crate) struct SegmentInfo {
    pub path: PathBuf,
    pub epoch: u64,
    /// Highest LSN in it that is not superseded; `None` if it holds none.
    pub max_lsn: Option<u64>,
    /// File length.
    pub bytes: u64,
    /// The segment the writer appends to; never removed.
    pub active: bool,
    /// Its cached pages were dropped ([`release_cache_before`]).
    pub cache_released: bool,
}

pub(crate) type SegmentList = Arc<Mutex<Vec<SegmentInfo>>>;

/// Fixed facts about the segments a stream creates.
#[derive(Clone)]
pub(crate) struct SegmentParams {
    pub fs: Arc<dyn FileSystem>,
    pub dir: PathBuf,
    pub stream_id: u32,
    pub stream_count: u32,
    pub epoch: u64,
    pub epoch_start_lsn: u64,
    pub segment_size_bytes: u64,
    pub preallocate: Preallocate,
    /// A batch at least this long ends its page (`WalConfig::
    /// page_end_min_bytes`).
    pub page_end_min_bytes: u64,
}

/// A preallocated file waiting to become a segment.
pub(crate) struct Spare {
    path: PathBuf,
    file: Box<dyn FsFile>,
}

/// Creates `wal-<stream>.<tag>.spare`, preallocated to the segment size as
/// `mode` says, and synced. Under `Auto`, `keep_filling` is asked after
/// every zeroed chunk (with the bytes zeroed and the time it took); once it
/// says no, fallocate covers the rest.
pub(crate) fn prepare_spare(
    p: &SegmentParams,
    tag: &str,
    mode: Preallocate,
    keep_filling: &dyn Fn(u64, Duration) -> bool,
) -> io::Result<Spare> {
    let zero_fill = mode != Preallocate::Fallocate;
    let path = p.dir.join(spare_file_name(p.stream_id, tag));
    let file = p.fs.create_file(&path)?;
    let fill = || -> io::Result<()> {
        if zero_fill {
            // Static rather than allocated per segment: a buffer that comes
            // and goes in the background made `used_memory` (and the
            // start-up figure taken from it) jump by its size.
            static ZEROS: [u8; ZERO_CHUNK_BYTES] = [0; ZERO_CHUNK_BYTES];
            let zeros = &ZEROS;
            let t0 = Instant::now();
            let mut off = 0u64;
            while off < p.segment_size_bytes {
                let n = (p.segment_size_bytes - off).min(ZERO_CHUNK_BYTES as u64) as usize;
                file.write_all_at(&zeros[..n], off)?;
                // Chunk by chunk, so the log's own fsyncs never queue behind
                // a whole segment of zeros.
                file.sync_data()?;
                off += n as u64;
                if off < p.segment_size_bytes
                    && mode == Preallocate::Auto
                    && !keep_filling(off, t0.elapsed())
                {
                    break;
                }
            }
        }
        file.allocate(p.segment_size_bytes)?;
        file.sync_data()
    };
    if let Err(e) = fill() {
        drop(file);
        let _ = p.fs.remove_file(&path);
        return Err(e);
    }
    Ok(Spare { path, file })
}

/// The segment currently appended to.
pub(crate) struct ActiveSegment {
    pub path: PathBuf,
    pub file: Box<dyn FsFile>,
    pub salt: u32,
    /// Where the next batch goes.
    pub offset: u64,
    pub has_batches: bool,
    /// One file description per writer slot, opened on first use, so each
    /// writer's fdatasync reports write-back errors that concern it.
    pub slots: Vec<Option<Arc<SlotFile>>>,
    /// Batches written here that were not known durable when last
    /// checked: (batch number, offset), oldest first.
    pub unsynced: VecDeque<(u64, u64)>,
}

impl ActiveSegment {
    pub fn new(
        path: PathBuf,
        file: Box<dyn FsFile>,
        salt: u32,
        offset: u64,
        has_batches: bool,
    ) -> Self {
        ActiveSegment {
            path,
            file,
            salt,
            offset,
            has_batches,
            slots: Vec::new(),
            unsynced: VecDeque::new(),
        }
    }

    fn slot(&mut self, fs: &dyn FileSystem, slot: usize) -> io::Result<Arc<SlotFile>> {
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, None);
        }
        if let Some(f) = &self.slots[slot] {
            return Ok(f.clone());
        }
        let f = Arc::new(SlotFile(fs.open_file(&self.path)?));
        self.slots[slot] = Some(f.clone());
        Ok(f)
    }
}

/// A segment opened for one writer slot's fdatasyncs.
pub(crate) struct SlotFile(Box<dyn FsFile>);

impl BatchSync for SlotFile {
    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

/// Turns a spare into segment `(epoch, first_lsn)`: header, fdatasync,
/// rename, directory fsync. Only then may batches be written into it.
pub(crate) fn install_spare(
    p: &SegmentParams,
    spare: Spare,
    first_lsn: u64,
) -> io::Result<ActiveSegment> {
    install_spare_with(p, spare, first_lsn, &[], 0)
}

/// [`install_spare`] with `records` already in it as one batch (recovery's
/// re-logged records, LSNs from `first_lsn` on), written and fdatasynced
/// with the header before the rename: the segment appears whole or not at
/// all. `durable_hint`: every LSN below `first_lsn` is on disk.
pub(crate) fn install_spare_with(
    p: &SegmentParams,
    spare: Spare,
    first_lsn: u64,
    records: &[FramedRecord<'_>],
    durable_hint: u64,
) -> io::Result<ActiveSegment> {
    let salt = p.fs.random_u64() as u32;
    let header = SegmentHeader {
        version: FORMAT_VERSION,
        stream_id: p.stream_id,
        stream_count: p.stream_count,
        salt,
        epoch: p.epoch,
        epoch_start_lsn: p.epoch_start_lsn,
        first_lsn,
        created_ms: p.fs.now_ms(),
    };
    spare.file.write_all_at(&header.encode(), 0)?;
    let mut offset = SEGMENT_HEADER_BYTES as u64;
    if !records.is_empty() {
        // They need everything before them, as the records they copy did.
        let batch = frame_batch(salt, offset, records, durable_hint, first_lsn - 1);
        spare.file.write_all_at(&batch, offset)?;
        offset += batch.len() as u64;
    }
    spare.file.sync_data()?;
    let path = p
        .dir
        .join(segment_file_name(p.stream_id, p.epoch, first_lsn));
    if p.fs.exists(&path) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("segment {} already exists", path.display()),
        ));
    }
    p.fs.rename(&spare.path, &path)?;
    p.fs.sync_dir(&p.dir)?;
    Ok(ActiveSegment::new(
        path,
        spare.file,
        salt,
        offset,
        !records.is_empty(),
    ))
}

/// Told (stream, capped, zeros too dear) after each `Auto` preparation.
pub(crate) type JudgedFn = Box<dyn Fn(usize, bool, bool) + Send + Sync>;

/// Spares being prepared in the background, one slot per stream.
///
/// Every preparation uses a fresh file name (`bg<generation>`): the writer
/// renames a spare some time after taking it from its slot, and creating a
/// new spare under the old name in between would truncate the file being
/// installed.
pub(crate) struct Spares {
    slots: Vec<Mutex<Option<Spare>>>,
    /// Per stream: bytes written into the active segment since when.
    progress: Vec<Mutex<Progress>>,
    /// Per stream: spares prepared since `Auto` last found zeroing too slow
    /// (0: it did not).
    since_too_slow: Vec<AtomicU32>,
    /// Per stream: whether the last probe found zeroing slow in absolute
    /// terms (below `ZERO_MIN_BYTES_PER_SEC`): a disk whose bandwidth is the
    /// limit. Zeros that are merely dear next to a fast log (the relative
    /// rule) make the stream fallocate, but say nothing about bandwidth: a
    /// disk with a millisecond fsync, as network block storage has, zeroes
    /// at 100 MB/s and is bound by latency, where overlapping fsyncs pays.
    capped: Vec<AtomicBool>,
    /// Told after each `Auto` preparation whether the stream's disk is
    /// capped (`capped`) and whether zeros were found too dear (either
    /// rule), for group commit to decide how it batches.
    on_judged: std::sync::OnceLock<JudgedFn>,
    queue: Mutex<Vec<usize>>,
    cv: Condvar,
    stop: AtomicBool,
    generation: AtomicU64,
}

/// How fast a stream fills its active segment: zero-filling the next one
/// must not take a large share of the disk's time.
struct Progress {
    since: Instant,
    bytes: u64,
}

impl Spares {
    pub fn new(streams: usize) -> Spares {
        Spares {
            slots: (0..streams).map(|_| Mutex::new(None)).collect(),
            progress: (0..streams)
                .map(|_| {
                    Mutex::new(Progress {
                        since: Instant::now(),
                        bytes: 0,
                    })
                })
                .collect(),
            since_too_slow: (0..streams).map(|_| AtomicU32::new(0)).collect(),
            capped: (0..streams).map(|_| AtomicBool::new(false)).collect(),
            on_judged: std::sync::OnceLock::new(),
            queue: Mutex::new(Vec::new()),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
        }
    }

    /// Sets what is told each `Auto` judgement of a stream's disk (once).
    pub fn on_judged(&self, f: JudgedFn) {
        let _ = self.on_judged.set(f);
    }

    pub fn take(&self, stream: usize) -> Option<Spare> {
        self.slots[stream].lock().take()
    }

    /// Notes that `stream` started a new segment.
    pub fn rotated(&self, stream: usize) {
        *self.progress[stream].lock() = Progress {
            since: Instant::now(),
            bytes: 0,
        };
    }

    /// Notes that `stream` wrote `bytes` more into its active segment.
    pub fn wrote(&self, stream: usize, bytes: u64) {
        self.progress[stream].lock().bytes += bytes;
    }

    /// `Auto`'s test while the stream's log runs: zeroing must be fast in
    /// absolute terms and many times faster than the log writes (see the
    /// constants).
    fn zeroing_affordable(&self, stream: usize, zeroed: u64, took: Duration) -> bool {
        if !zeroing_fast_enough(zeroed, took) {
            return false;
        }
        let (bytes, since) = {
            let p = self.progress[stream].lock();
            (p.bytes, p.since.elapsed())
        };
        if since < Duration::from_millis(100) || bytes == 0 || zeroed < ZERO_JUDGE_AFTER_BYTES {
            return true;
        }
        let log_rate = bytes as f64 / since.as_secs_f64();
        let zero_rate = zeroed as f64 / took.as_secs_f64().max(1e-6);
        zero_rate >= ZERO_MIN_LOG_RATE_FACTOR * log_rate
    }

    pub fn request(&self, stream: usize) {
        let mut q = self.queue.lock();
        if !q.contains(&stream) {
            q.push(stream);
        }
        self.cv.notify_one();
    }

    pub fn ready_count(&self) -> usize {
        self.slots.iter().filter(|s| s.lock().is_some()).count()
    }

    pub fn stop(&self) {
        self.stop.store(true, SeqCst);
        let _q = self.queue.lock();
        self.cv.notify_all();
    }

    /// The background preparer: fills empty slots on request until stopped.
    pub fn run(&self, params: Vec<SegmentParams>) {
        loop {
            let stream = {
                let mut q = self.queue.lock();
                loop {
                    if self.stop.load(SeqCst) {
                        return;
                    }
                    if !q.is_empty() {
                        break q.remove(0);
                    }
                    self.cv.wait(&mut q);
                }
            };
            if self.slots[stream].lock().is_some() {
                continue;
            }
            let tag = format!("bg{}", self.generation.fetch_add(1, SeqCst));
            let p = &params[stream];
            let slow = &self.since_too_slow[stream];
            let mut mode = p.preallocate;
            if mode == Preallocate::Auto {
                let since = slow.load(SeqCst);
                if since > 0 && !since.is_multiple_of(ZERO_REPROBE_EVERY) {
                    mode = Preallocate::Fallocate;
                    slow.fetch_add(1, SeqCst);
                } else {
                    slow.store(0, SeqCst);
                    self.capped[stream].store(false, SeqCst);
                }
            }
            let keep = |zeroed, took| {
                if self.stop.load(SeqCst) {
                    return false;
                }
                let affordable = self.zeroing_affordable(stream, zeroed, took);
                if !affordable {
                    slow.store(1, SeqCst);
                    if !zeroing_fast_enough(zeroed, took) {
                        self.capped[stream].store(true, SeqCst);
                    }
                }
                affordable
            };
            let prepared = prepare_spare(p, &tag, mode, &keep);
            if p.preallocate == Preallocate::Auto {
                if let Some(f) = self.on_judged.get() {
                    f(
                        stream,
                        self.capped[stream].load(SeqCst),
                        slow.load(SeqCst) > 0,
                    );
                }
            }
            match prepared {
                Ok(spare) => {
                    let mut slot = self.slots[stream].lock();
                    if slot.is_none() {
                        *slot = Some(spare);
                    } else {
                        drop(slot);
                        let _ = params[stream].fs.remove_file(&spare.path);
                    }
                }
                Err(e) => tracing::warn!(
                    stream,
                    error = %e,
                    "could not preallocate the next WAL segment; rotation will try again"
                ),
            }
        }
    }
}

/// Writes a stream's batches into its segments: the [`BatchSink`] of the
/// real WAL. The shared segment list is only touched on rotation (or if a
/// segment grows past its preallocated size), not per batch.
pub(crate) struct SegmentWriter {
    pub params: SegmentParams,
    pub active: ActiveSegment,
    pub segments: SegmentList,
    pub spares: Arc<Spares>,
    /// Highest LSN written into the active segment.
    pub active_max_lsn: Option<u64>,
    /// File length last published to the segment list.
    pub active_bytes: u64,
    /// A write or rotation failed part-way: nothing more is written.
    pub broken: bool,
}

impl SegmentWriter {
    fn rotate(&mut self, first_lsn: u64) -> io::Result<()> {
        let s = self.params.stream_id as usize;
        let spare = match self.spares.take(s) {
            Some(sp) => sp,
            None => {
                // Zero-filling here would stall every write of the stream
                // for as long as writing a whole segment takes.
                tracing::debug!(stream = s, "no spare segment ready; preallocating inline");
                prepare_spare(&self.params, "inline", Preallocate::Fallocate, &|_, _| {
                    false
                })?
            }
        };
        // Batches of the old segment may still be in flight: make it whole
        // on disk before anything goes into the next one.
        self.active.file.sync_data()?;
        let next = install_spare(&self.params, spare, first_lsn)?;
        let old = std::mem::replace(&mut self.active, next);
        drop(old);
        {
            let mut list = self.segments.lock();
            if let Some(prev) = list.last_mut() {
                if self.active_max_lsn.is_some() {
                    prev.max_lsn = self.active_max_lsn;
                }
            }
            for seg in list.iter_mut() {
                seg.active = false;
            }
            self.active_max_lsn = None;
            self.active_bytes = self.params.segment_size_bytes;
            list.push(SegmentInfo {
                path: self.active.path.clone(),
                epoch: self.params.epoch,
                max_lsn: None,
                bytes: self.params.segment_size_bytes,
                active: true,
                cache_released: false,
            });
        }
        self.spares.rotated(s);
        self.spares.request(s);
        tracing::debug!(path = %self.active.path.display(), "WAL segment rotated");
        Ok(())
    }
}

impl BatchSink for SegmentWriter {
    fn write_batch(
        &mut self,
        slot: usize,
        batch: &mut [u8],
        meta: &BatchMeta,
    ) -> io::Result<Arc<dyn BatchSync>> {
        if self.broken {
            return Err(io::Error::other(
                "an earlier write to this stream failed; refusing to write after it",
            ));
        }
        // Until this write is complete, a failure leaves unknown bytes at
        // the write position.
        self.broken = true;
        let len = batch.len() as u64;
        if self.active.has_batches && self.active.offset + len > self.params.segment_size_bytes {
            self.rotate(meta.first_lsn)?;
        }
        let sync = self.active.slot(self.params.fs.as_ref(), slot)?;
        let unsynced = &mut self.active.unsynced;
        while unsynced
            .front()
            .is_some_and(|&(seq, _)| seq < meta.durable_seq)
        {
            unsynced.pop_front();
        }
        let at = self.active.offset;
        let sync_base = unsynced.front().map_or(at, |&(_, off)| off);
        // A long batch leaves the rest of its last page empty: the next
        // fdatasync then writes only pages of its own, where it would write
        // this page a second time. Padding costs file space, never I/O (the
        // segment is preallocated), so a short batch, whose page would be
        // written again at little cost, does not pay it, except on a disk
        // whose bandwidth is the bottleneck.
        let min_len = if meta.bandwidth_bound {
            0
        } else {
            self.params.page_end_min_bytes
        };
        let page_end = len >= min_len && !(at + len).is_multiple_of(PAGE_BYTES);
        let flags = if page_end {
            BATCH_FLAG_SYNC_BASE | BATCH_FLAG_PAGE_END
        } else {
            BATCH_FLAG_SYNC_BASE
        };
        unsynced.push_back((meta.seq, at));
        let header = BatchHeader {
            body_len: meta.body_len,
            record_count: meta.records,
            first_lsn: meta.first_lsn,
            last_lsn: meta.last_lsn,
            durable_hint: meta.durable_hint,
            depends_on: meta.depends_on,
            flags,
            // Segments are at most 4 GiB (`WalConfig::validate`).
            sync_base: u32::try_from(sync_base).map_err(io::Error::other)?,
        };
        header.encode_into(self.active.salt, &mut batch[..BATCH_HEADER_BYTES]);
        self.active.file.write_all_at(batch, at)?;
        self.broken = false;
        // Where the reader will look for the next batch.
        self.active.offset = header.next_batch_at(at);
        self.active.has_batches = true;
        self.active_max_lsn = Some(meta.last_lsn);
        self.spares.wrote(self.params.stream_id as usize, len);
        if self.active.offset > self.active_bytes {
            self.active_bytes = self.active.offset;
            if let Some(seg) = self.segments.lock().last_mut() {
                seg.bytes = seg.bytes.max(self.active_bytes);
            }
        }
        Ok(sync)
    }
}

/// Result of [`truncate_before`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TruncateStats {
    pub segments_removed: usize,
    pub bytes_freed: u64,
}

/// Removes, per stream, the leading segments whose records all have
/// LSN < `lsn` (see `Wal::truncate_before`). A segment of epoch `e` is only
/// removed once no segment of an older epoch remains anywhere, so the start
/// LSN of every epoch newer than a surviving segment stays on disk.
pub(crate) fn truncate_before(
    fs: &dyn FileSystem,
    dirs: &[PathBuf],
    lists: &[SegmentList],
    lsn: u64,
) -> Result<TruncateStats, WalError> {
    // Decide and unlink from the lists under the locks; remove the files
    // and fsync the directories after releasing them, so writers (which
    // take their list lock on rotation) never wait for that I/O.
    let mut guards: Vec<_> = lists.iter().map(|l| l.lock()).collect();
    let candidates: Vec<usize> = guards
        .iter()
        .map(|list| {
            list.iter()
                .take_while(|s| !s.active && !matches!(s.max_lsn, Some(m) if m >= lsn))
                .count()
        })
        .collect();
    let min_remaining_epoch = guards
        .iter()
        .zip(&candidates)
        .flat_map(|(list, &n)| list[n..].iter().map(|s| s.epoch))
        .min()
        .unwrap_or(u64::MAX);
    let mut doomed: Vec<(&PathBuf, Vec<SegmentInfo>)> = Vec::new();
    for ((list, &n), dir) in guards.iter_mut().zip(&candidates).zip(dirs) {
        let n = list[..n]
            .iter()
            .take_while(|s| s.epoch <= min_remaining_epoch)
            .count();
        if n > 0 {
            doomed.push((dir, list.drain(..n).collect()));
        }
    }
    drop(guards);
    let mut stats = TruncateStats::default();
    for (dir, segs) in doomed {
        for seg in &segs {
            fs.remove_file(&seg.path)
                .map_err(|e| WalError::io(&seg.path, e))?;
            stats.segments_removed += 1;
            stats.bytes_freed += seg.bytes;
            tracing::debug!(path = %seg.path.display(), "removed WAL segment");
        }
        fs.sync_dir(dir).map_err(|e| WalError::io(dir, e))?;
    }
    Ok(stats)
}

/// Drops the cached pages of the sealed segments that hold nothing at or
/// after `lsn`, each once. Returns how many it dropped.
pub(crate) fn release_cache_before(fs: &dyn FileSystem, lists: &[SegmentList], lsn: u64) -> usize {
    let mut released = 0;
    for list in lists {
        // Paths under the lock, files opened after it: rotation takes it.
        let paths: Vec<PathBuf> = list
            .lock()
            .iter_mut()
            .take_while(|s| !s.active && !matches!(s.max_lsn, Some(m) if m >= lsn))
            .filter(|s| !s.cache_released)
            .map(|s| {
                s.cache_released = true;
                s.path.clone()
            })
            .collect();
        for path in paths {
            if let Ok(file) = fs.open_file(&path) {
                file.release_cache();
                released += 1;
            }
        }
    }
    released
}

/// Deletes `path` and makes the deletion durable.
pub(crate) fn remove_durably(fs: &dyn FileSystem, path: &Path) -> Result<(), WalError> {
    fs.remove_file(path).map_err(|e| WalError::io(path, e))?;
    if let Some(dir) = path.parent() {
        fs.sync_dir(dir).map_err(|e| WalError::io(dir, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{HookedFs, Hooks};

    /// The real file system, with every fdatasync taking `sync_delay` (and
    /// nothing else: durability is not under test) and the bytes written
    /// counted: a disk whose bandwidth is capped, or an infinitely fast one.
    struct Capped {
        sync_delay: Duration,
        written: Arc<AtomicU64>,
    }

    impl Hooks for Capped {
        fn on_write(&self, _: &Path, len: usize) {
            self.written.fetch_add(len as u64, SeqCst);
        }
        fn sync(&self, _: &Path, _real: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
            std::thread::sleep(self.sync_delay);
            Ok(())
        }
    }

    const SEGMENT: u64 = 4 << 20;

    /// Prepares one spare at open (no log running yet) and returns the
    /// zeros written and the spare's length.
    fn prepare(mode: Preallocate, sync_delay: Duration) -> (u64, u64) {
        let dir = tempfile::tempdir().unwrap();
        let written = Arc::new(AtomicU64::new(0));
        let p = SegmentParams {
            fs: Arc::new(HookedFs::new(Arc::new(Capped {
                sync_delay,
                written: written.clone(),
            }))),
            dir: dir.path().to_path_buf(),
            stream_id: 0,
            stream_count: 1,
            epoch: 1,
            epoch_start_lsn: 1,
            segment_size_bytes: SEGMENT,
            preallocate: mode,
            page_end_min_bytes: 4096,
        };
        let spare = prepare_spare(&p, "t", mode, &zeroing_fast_enough).unwrap();
        let len = spare.file.len().unwrap();
        (written.load(SeqCst), len)
    }

    /// 128 KiB per 20 ms is 6.4 MB/s: a capped volume.
    const CAPPED: Duration = Duration::from_millis(20);

    #[test]
    fn auto_zeroes_a_fast_disk_and_probes_a_capped_one() {
        assert_eq!(
            prepare(Preallocate::Auto, Duration::ZERO),
            (SEGMENT, SEGMENT)
        );
        // On the capped disk it stops after the judging probe and
        // fallocates the rest: the spare is still whole.
        assert_eq!(
            prepare(Preallocate::Auto, CAPPED),
            (ZERO_JUDGE_AFTER_BYTES, SEGMENT)
        );
    }

    #[test]
    fn zeros_and_fallocate_do_what_they_say_whatever_the_disk() {
        assert_eq!(prepare(Preallocate::Zeros, CAPPED), (SEGMENT, SEGMENT));
        assert_eq!(
            prepare(Preallocate::Fallocate, Duration::ZERO),
            (0, SEGMENT)
        );
    }
}
