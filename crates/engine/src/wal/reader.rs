//! Reading one stream back: segments in order, batches verified whole,
//! records handed out in LSN order, and every irregularity classified.
//!
//! The reader is where "never panic on any bytes, never return data that was
//! not written" is enforced. A batch is accepted only if its salted header
//! checksum, every record checksum, the LSN sequence, and the trailer all
//! verify; lengths are trusted only after the header checksum vouched for
//! them and they fit in the file. When a batch does not verify, the reader
//! decides what the bad spot *is*, using the writer's invariants: a segment
//! only receives batches once every earlier segment of its stream is
//! durable, and a batch recording a sync base (format version 2) was
//! written while every batch from that offset on might still be unsynced
//! (in version 1 that is only the batch itself, so only the last batch of a
//! stream can be half-written):
//!
//! - **clean end**: zeros up to the end of the segment;
//! - **torn tail**: in the stream's last segment, it looks cut short (zero
//!   sectors, zero trailer bytes, a header that ends in zeros) rather than
//!   damaged, and nothing valid follows it;
//! - **torn while pipelined**: in the stream's last segment, and every
//!   valid batch after it was written before it was known durable (its sync
//!   base is at or before the spot). None of those batches can have been
//!   acknowledged, since their own fsync would have made the spot durable
//!   too, so the stream ends at the spot, torn or damaged alike;
//! - **superseded**: in an epoch that a later recovery closed, where only
//!   records that recovery already discarded can live;
//! - **corruption**: anything else (damage followed by valid data, garbage
//!   in a sealed segment, a checksum failure that does not look torn).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use super::error::WalError;
use super::format::{
    header_looks_torn, record_crc, trailer_looks_torn, BatchHeader, RecordHeader, SegmentHeader,
    BATCH_ALIGN_BYTES, BATCH_HEADER_BYTES, BATCH_MAGIC, BATCH_TRAILER, BATCH_TRAILER_BYTES,
    DEPENDS_FORMAT_VERSION, RECORD_HEADER_BYTES, SECTOR_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::io::{FileSystem, FsFile};

/// Read-ahead when walking batches.
const READ_CHUNK_BYTES: usize = 1024 * 1024;
/// Unit of the scan that looks for valid batches after a bad spot.
const SCAN_CHUNK_BYTES: usize = 1024 * 1024;
/// Unproven batches remembered one by one; past this, later batches of a
/// segment are folded into one span. Normally a durable hint proves all but
/// the last few batches of a stream, so this only bounds memory when hints
/// lag far behind (a stream that held the durable LSN back for long).
const MAX_UNPROVEN_SPANS: usize = 1 << 16;

/// A segment file found on disk.
#[derive(Debug, Clone)]
pub(crate) struct SegFile {
    pub path: PathBuf,
    /// From the file name.
    pub epoch: u64,
    /// From the file name.
    pub first_lsn: u64,
    pub header: Result<SegmentHeader, String>,
    pub len: u64,
}

/// A record whose payload is in the reader's window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rec {
    pub lsn: u64,
    pub time_ms: u64,
    /// Recovering this record needs every LSN <= this recovered too (0:
    /// nothing outside its stream).
    pub dep: u64,
    start: usize,
    len: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct CorruptSpot {
    pub file: PathBuf,
    pub offset: u64,
    pub lsn: u64,
    pub reason: String,
}

impl CorruptSpot {
    pub fn into_error(self) -> WalError {
        WalError::Corruption {
            file: self.file,
            offset: self.offset,
            lsn: self.lsn,
            reason: self.reason,
        }
    }
}

/// How reading a stream ended.
#[derive(Debug, Clone)]
pub(crate) enum StreamEnd {
    /// The stream has no segments.
    Empty,
    /// Zeros after the last batch of segment `seg`, at `offset`.
    Clean {
        seg: usize,
        offset: u64,
    },
    /// The last segment ends in a torn write at `offset`.
    Torn {
        seg: usize,
        offset: u64,
    },
    /// The last segment belongs to a closed epoch; it is not appended to.
    Closed,
    Corrupt(CorruptSpot),
}

/// Valid batches holding live records, in stream order, that no durable
/// hint read so far vouches for: recovery makes them durable itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchSpan {
    pub seg: usize,
    /// Offset of the batch header.
    pub pos: u64,
    /// End of the batch, padding included.
    pub end: u64,
    pub first_lsn: u64,
    /// Highest live (not superseded) LSN in the span.
    pub last_lsn: u64,
}

/// Per-segment facts gathered while reading (for truncation later).
#[derive(Debug, Clone, Default)]
pub(crate) struct SegStats {
    pub max_lsn: Option<u64>,
    pub has_batches: bool,
}

/// Buffered positional reads.
struct Window {
    buf: Vec<u8>,
    start: u64,
}

impl Window {
    /// Makes `[off, off+len)` (clipped to the file) available; returns the
    /// buffer index of `off` and how many bytes are available.
    fn fetch(
        &mut self,
        file: &dyn FsFile,
        file_len: u64,
        off: u64,
        len: usize,
    ) -> std::io::Result<(usize, usize)> {
        let avail = file_len.saturating_sub(off).min(len as u64) as usize;
        let end = off + avail as u64;
        if off >= self.start && end <= self.start + self.buf.len() as u64 {
            return Ok(((off - self.start) as usize, avail));
        }
        let want = file_len
            .saturating_sub(off)
            .min(avail.max(READ_CHUNK_BYTES) as u64) as usize;
        self.buf.resize(want, 0);
        let n = file.read_up_to(&mut self.buf, off)?;
        self.buf.truncate(n);
        self.start = off;
        Ok((0, avail.min(n)))
    }
}

/// Why the bytes at a batch position are not a valid batch.
enum Spot {
    /// All zero (or end of file): the end of data, if nothing follows.
    Zero,
    /// Something that is not a valid batch.
    Bad {
        torn: bool,
        lsn: Option<u64>,
        reason: String,
        /// Header verified: the LSNs it claims, and where the next batch
        /// would start.
        claimed: Option<(u64, u64)>,
    },
}

pub(crate) struct StreamReader {
    fs: Arc<dyn FileSystem>,
    pub segs: Vec<SegFile>,
    pub seg_stats: Vec<SegStats>,
    /// Per segment: records with a larger LSN are superseded.
    epoch_ends: Vec<u64>,
    /// Records at or below this are covered by a checkpoint.
    start_after: u64,
    /// Whether a segment holding only covered records may go unread.
    skip_covered: bool,
    /// Segments not read because a checkpoint covers all they can hold.
    pub unread_segments: usize,
    /// Damaged byte ranges skipped because only checkpointed records can
    /// have lived there.
    pub skipped_damage: Vec<(PathBuf, u64)>,
    idx: usize,
    file: Option<Box<dyn FsFile>>,
    file_len: u64,
    salt: u32,
    /// The current segment's format version.
    version: u32,
    pos: u64,
    win: Window,
    batch_next: usize,
    batch_left: u32,
    /// `depends_on` of the batch being read.
    batch_dep: u64,
    /// Highest non-superseded LSN read so far.
    pub last_lsn: u64,
    pub end: Option<StreamEnd>,
    pub superseded_records: u64,
    pub superseded_spots: Vec<(PathBuf, u64)>,
    /// Largest `durable_hint` of a batch holding live records, and where.
    pub max_hint: u64,
    pub hint_at: Option<(PathBuf, u64)>,
    /// Batches with a live LSN above `max_hint`; see [`BatchSpan`].
    pub unproven: VecDeque<BatchSpan>,
    pub batches: u64,
    pub bytes: u64,
}

fn sanity(h: &BatchHeader, seg_first_lsn: u64, version: u32) -> Result<(), String> {
    h.check_unused_fields(version)?;
    if h.record_count == 0 {
        return Err("batch header claims zero records".into());
    }
    if h.first_lsn > h.last_lsn || h.last_lsn - h.first_lsn < (h.record_count as u64 - 1) {
        return Err(format!(
            "batch header LSN range {}..={} cannot hold {} records",
            h.first_lsn, h.last_lsn, h.record_count
        ));
    }
    if (h.body_len as u64) < h.record_count as u64 * RECORD_HEADER_BYTES as u64 {
        return Err("batch body too short for its record count".into());
    }
    if h.first_lsn < seg_first_lsn {
        return Err(format!(
            "batch starts at LSN {} but the segment starts at LSN {seg_first_lsn}",
            h.first_lsn
        ));
    }
    Ok(())
}

/// Verifies the records and trailer of a batch whose header verified.
/// `b` is the whole batch (header..trailer). On failure returns the reason
/// and the offset (relative to `b`) of the first bad byte range.
fn validate_body(h: &BatchHeader, b: &[u8]) -> Result<(), (String, usize)> {
    let body_end = BATCH_HEADER_BYTES + h.body_len as usize;
    let mut off = BATCH_HEADER_BYTES;
    let mut prev: Option<u64> = None;
    for i in 0..h.record_count {
        if off + RECORD_HEADER_BYTES > body_end {
            return Err((format!("record {i} header runs past the batch body"), off));
        }
        let rh = RecordHeader::parse(&b[off..]);
        let end = off + RECORD_HEADER_BYTES + rh.payload_len as usize;
        if end > body_end {
            return Err((
                format!(
                    "record {i} length {} runs past the batch body",
                    rh.payload_len
                ),
                off,
            ));
        }
        if record_crc(&b[off..end]) != rh.crc {
            return Err((format!("record {i} checksum mismatch"), off));
        }
        let ok_order = match prev {
            None => rh.lsn == h.first_lsn,
            Some(p) => rh.lsn > p,
        };
        if !ok_order {
            return Err((format!("record {i} has out-of-order LSN {}", rh.lsn), off));
        }
        prev = Some(rh.lsn);
        off = end;
    }
    if off != body_end {
        return Err(("records do not fill the batch body".into(), off));
    }
    if prev != Some(h.last_lsn) {
        return Err((
            "last record LSN does not match the batch header".into(),
            off,
        ));
    }
    if b[body_end..body_end + BATCH_TRAILER_BYTES] != BATCH_TRAILER {
        return Err(("batch trailer mismatch".into(), body_end));
    }
    Ok(())
}

/// Whether some 512-byte sector lying entirely inside `b` (which starts at
/// file offset `file_off`) is all zeros: the signature of a sector that was
/// never written because the power failed.
fn has_zero_sector(b: &[u8], file_off: u64) -> bool {
    let first = file_off.div_ceil(SECTOR_BYTES) * SECTOR_BYTES;
    let mut s = first;
    while s + SECTOR_BYTES <= file_off + b.len() as u64 {
        let i = (s - file_off) as usize;
        if b[i..i + SECTOR_BYTES as usize].iter().all(|&x| x == 0) {
            return true;
        }
        s += SECTOR_BYTES;
    }
    false
}

struct ScanResult {
    any_nonzero: bool,
    /// The first valid batch: (offset, first LSN).
    valid: Option<(u64, u64)>,
    /// Whether every valid batch found records a sync base at or before
    /// the spot scanned from (only computed when asked for).
    all_pipelined: bool,
}

impl StreamReader {
    pub fn new(
        fs: Arc<dyn FileSystem>,
        segs: Vec<SegFile>,
        epoch_ends: Vec<u64>,
        start_after: u64,
        skip_covered: bool,
    ) -> StreamReader {
        let n = segs.len();
        StreamReader {
            fs,
            segs,
            seg_stats: vec![SegStats::default(); n],
            epoch_ends,
            start_after,
            skip_covered,
            unread_segments: 0,
            skipped_damage: Vec::new(),
            idx: 0,
            file: None,
            file_len: 0,
            salt: 0,
            version: 0,
            pos: 0,
            win: Window {
                buf: Vec::new(),
                start: 0,
            },
            batch_next: 0,
            batch_left: 0,
            batch_dep: 0,
            last_lsn: 0,
            end: None,
            superseded_records: 0,
            superseded_spots: Vec::new(),
            max_hint: 0,
            hint_at: None,
            unproven: VecDeque::new(),
            batches: 0,
            bytes: 0,
        }
    }

    pub fn payload(&self, r: &Rec) -> &[u8] {
        &self.win.buf[r.start..r.start + r.len]
    }

    pub fn corruption(&self) -> Option<&CorruptSpot> {
        match &self.end {
            Some(StreamEnd::Corrupt(c)) => Some(c),
            _ => None,
        }
    }

    /// The next live (non-superseded) record, or `None` at the end of the
    /// stream (see `end` for why it ended).
    pub fn next(&mut self) -> Result<Option<Rec>, WalError> {
        loop {
            if self.batch_left > 0 {
                let b = &self.win.buf[self.batch_next..];
                let rh = RecordHeader::parse(b);
                let rec = Rec {
                    lsn: rh.lsn,
                    time_ms: rh.time_ms,
                    dep: if self.version >= DEPENDS_FORMAT_VERSION {
                        self.batch_dep
                    } else {
                        rh.lsn - 1
                    },
                    start: self.batch_next + RECORD_HEADER_BYTES,
                    len: rh.payload_len as usize,
                };
                self.batch_next += RECORD_HEADER_BYTES + rec.len;
                self.batch_left -= 1;
                if rec.lsn > self.epoch_ends[self.idx] {
                    self.superseded_records += 1;
                    continue;
                }
                if rec.lsn <= self.last_lsn {
                    let spot = CorruptSpot {
                        file: self.segs[self.idx].path.clone(),
                        offset: self.pos,
                        lsn: rec.lsn,
                        reason: format!(
                            "LSN {} follows LSN {} in the same stream",
                            rec.lsn, self.last_lsn
                        ),
                    };
                    self.batch_left = 0;
                    self.end = Some(StreamEnd::Corrupt(spot));
                    return Ok(None);
                }
                self.last_lsn = rec.lsn;
                self.seg_stats[self.idx].max_lsn = Some(rec.lsn);
                self.bytes += (RECORD_HEADER_BYTES + rec.len) as u64;
                return Ok(Some(rec));
            }
            if self.end.is_some() {
                return Ok(None);
            }
            self.advance()?;
        }
    }

    fn io_err(&self, e: std::io::Error) -> WalError {
        let path = self
            .segs
            .get(self.idx)
            .map(|s| s.path.clone())
            .unwrap_or_default();
        WalError::io(path, e)
    }

    /// Loads the next batch, or moves to the next segment, or ends the
    /// stream.
    fn advance(&mut self) -> Result<(), WalError> {
        if self.file.is_none() {
            while let Some(last) = self.covered_whole(self.idx) {
                self.seg_stats[self.idx] = SegStats {
                    max_lsn: Some(last),
                    has_batches: true,
                };
                self.unread_segments += 1;
                self.idx += 1;
            }
            if self.idx >= self.segs.len() {
                self.end = Some(match self.segs.len() {
                    0 => StreamEnd::Empty,
                    _ => StreamEnd::Closed,
                });
                return Ok(());
            }
            let seg = &self.segs[self.idx];
            match &seg.header {
                Err(reason) => {
                    let reason = format!("unreadable segment header: {reason}");
                    return self.on_spot(
                        0,
                        Spot::Bad {
                            torn: false,
                            lsn: None,
                            reason,
                            claimed: None,
                        },
                    );
                }
                Ok(h) => {
                    let file = self
                        .fs
                        .open_file(&seg.path)
                        .map_err(|e| WalError::io(&seg.path, e))?;
                    self.file_len = file.len().map_err(|e| WalError::io(&seg.path, e))?;
                    self.salt = h.salt;
                    self.version = h.version;
                    self.file = Some(file);
                    self.pos = SEGMENT_HEADER_BYTES as u64;
                    self.win.buf.clear();
                    self.win.start = 0;
                }
            }
        }
        let seg_first = match &self.segs[self.idx].header {
            Ok(h) => h.first_lsn,
            Err(_) => 0,
        };
        let pos = self.pos;
        let Some(file) = self.file.as_deref() else {
            return Ok(());
        };
        let (i, n) = self
            .win
            .fetch(file, self.file_len, pos, BATCH_HEADER_BYTES)
            .map_err(|e| self.io_err(e))?;
        let hb = &self.win.buf[i..i + n];
        if hb.iter().all(|&b| b == 0) {
            return self.on_spot(pos, Spot::Zero);
        }
        let Some(h) = BatchHeader::decode(self.salt, self.version, hb) else {
            let torn = header_looks_torn(hb);
            return self.on_spot(
                pos,
                Spot::Bad {
                    torn,
                    lsn: None,
                    reason: "batch header checksum mismatch".into(),
                    claimed: None,
                },
            );
        };
        if let Err(reason) = sanity(&h, seg_first, self.version) {
            return self.on_spot(
                pos,
                Spot::Bad {
                    torn: false,
                    lsn: Some(h.first_lsn),
                    reason,
                    claimed: None,
                },
            );
        }
        let total = h.total_len();
        if pos + total > self.file_len {
            return self.on_spot(
                pos,
                Spot::Bad {
                    torn: true,
                    lsn: Some(h.first_lsn),
                    reason: "batch runs past the end of the file".into(),
                    claimed: None,
                },
            );
        }
        let (i, n) = self
            .win
            .fetch(file, self.file_len, pos, total as usize)
            .map_err(|e| self.io_err(e))?;
        let b = &self.win.buf[i..i + n];
        if n < total as usize {
            return Err(self.io_err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "segment shrank while being read",
            )));
        }
        if let Err((reason, at)) = validate_body(&h, b) {
            let trailer = &b[b.len() - BATCH_TRAILER_BYTES..];
            let torn = trailer_looks_torn(trailer) || has_zero_sector(b, pos);
            return self.on_spot(
                pos,
                Spot::Bad {
                    torn,
                    lsn: Some(h.first_lsn),
                    reason: format!("{reason} (at offset {})", pos + at as u64),
                    claimed: Some((h.last_lsn, h.next_batch_at(pos))),
                },
            );
        }
        // A valid batch.
        self.batches += 1;
        self.seg_stats[self.idx].has_batches = true;
        let end = h.next_batch_at(pos);
        let epoch_end = self.epoch_ends[self.idx];
        if h.first_lsn <= epoch_end {
            if h.durable_hint > self.max_hint {
                self.max_hint = h.durable_hint;
                self.hint_at = Some((self.segs[self.idx].path.clone(), pos));
            }
            self.note_unproven(BatchSpan {
                seg: self.idx,
                pos,
                end,
                first_lsn: h.first_lsn,
                last_lsn: h.last_lsn.min(epoch_end),
            });
        }
        self.batch_next = i + BATCH_HEADER_BYTES;
        self.batch_left = h.record_count;
        self.batch_dep = h.depends_on;
        self.pos = end;
        Ok(())
    }

    /// Remembers a valid live batch and forgets those the largest hint seen
    /// so far proves durable. Recovery's proven point is the largest hint of
    /// *any* stream, which is at least this stream's, so nothing it still
    /// needs is forgotten here. Within a stream live LSNs increase, so the
    /// proven batches are always at the front.
    fn note_unproven(&mut self, span: BatchSpan) {
        while self
            .unproven
            .front()
            .is_some_and(|b| b.last_lsn <= self.max_hint)
        {
            self.unproven.pop_front();
        }
        if span.last_lsn <= self.max_hint {
            return;
        }
        if self.unproven.len() >= MAX_UNPROVEN_SPANS {
            if let Some(back) = self.unproven.back_mut() {
                if back.seg == span.seg {
                    // Coarser, never smaller: the span now also covers
                    // whatever lies between the two batches.
                    back.end = span.end;
                    back.last_lsn = span.last_lsn;
                    return;
                }
            }
        }
        self.unproven.push_back(span);
    }

    /// Decides what the bytes at `pos` of the current segment are.
    fn on_spot(&mut self, pos: u64, spot: Spot) -> Result<(), WalError> {
        let idx = self.idx;
        let seg_path = self.segs[idx].path.clone();
        let epoch = self.segs[idx].epoch;
        let end_e = self.epoch_ends[idx];
        let current = end_e == u64::MAX;
        let last_seg = idx + 1 == self.segs.len();

        // Damage to a batch whose records a checkpoint already covers
        // loses nothing: step over it.
        if let Spot::Bad {
            claimed: Some((last, next_pos)),
            ref reason,
            ..
        } = spot
        {
            if last <= self.start_after && self.file.is_some() {
                tracing::warn!(
                    file = %seg_path.display(),
                    offset = pos,
                    "WAL: skipping a damaged batch whose records are all covered by the checkpoint ({reason})"
                );
                self.skipped_damage.push((seg_path, pos));
                self.pos = next_pos;
                return Ok(());
            }
        }

        let scan_from = match spot {
            Spot::Zero => pos,
            Spot::Bad { .. } => pos + BATCH_ALIGN_BYTES as u64,
        };
        let limit = if current { u64::MAX } else { end_e };
        let scan = self.scan(scan_from, limit, (current && last_seg).then_some(pos))?;

        // Damage followed by data that starts at or below the checkpoint
        // can only have held checkpointed records: step over it too.
        let next_seg_first = self.segs.get(idx + 1).map(|s| s.first_lsn);
        let resume = match (scan.valid, next_seg_first) {
            (Some((at, vlsn)), _) if vlsn <= self.start_after + 1 => Some(Some(at)),
            (None, Some(f)) if f <= self.start_after + 1 && scan.any_nonzero => Some(None),
            (None, Some(f)) if f <= self.start_after + 1 && matches!(spot, Spot::Bad { .. }) => {
                Some(None)
            }
            _ => None,
        };
        if let Some(at) = resume {
            tracing::warn!(
                file = %seg_path.display(),
                offset = pos,
                "WAL: skipping damaged bytes that can only hold checkpointed records"
            );
            self.skipped_damage.push((seg_path, pos));
            match at {
                Some(at) if self.file.is_some() => self.pos = at,
                _ => self.next_segment(),
            }
            return Ok(());
        }

        if let (Spot::Zero, false) = (&spot, scan.any_nonzero) {
            // Clean end of this segment.
            if last_seg {
                self.end = Some(if current {
                    StreamEnd::Clean {
                        seg: idx,
                        offset: pos,
                    }
                } else {
                    StreamEnd::Closed
                });
            } else {
                self.next_segment();
            }
            return Ok(());
        }

        let (torn, lsn, reason) = match spot {
            Spot::Zero => (
                true,
                None,
                "zeroed bytes where a batch should start".to_string(),
            ),
            Spot::Bad {
                torn, lsn, reason, ..
            } => (torn, lsn, reason),
        };
        let lsn = lsn.unwrap_or(self.last_lsn + 1);

        if !current {
            let later_live = self.segs[idx + 1..]
                .iter()
                .any(|s| s.epoch == epoch && s.first_lsn <= end_e);
            if scan.valid.is_none() && !later_live {
                tracing::debug!(
                    file = %seg_path.display(),
                    offset = pos,
                    "WAL: skipping the superseded tail of a closed epoch"
                );
                self.superseded_spots.push((seg_path, pos));
                if last_seg {
                    self.end = Some(StreamEnd::Closed);
                } else {
                    self.next_segment();
                }
                return Ok(());
            }
        }

        let corrupt = |why: String| {
            StreamEnd::Corrupt(CorruptSpot {
                file: seg_path.clone(),
                offset: pos,
                lsn,
                reason: why,
            })
        };
        // Cut short (not flipped) and only followed by batches written
        // before it was known durable: a crash with fsyncs in flight.
        let pipelined_tear = current && last_seg && torn && scan.all_pipelined;
        self.end = Some(
            if let (Some((at, vlsn)), false) = (scan.valid, pipelined_tear) {
                corrupt(format!(
                    "{reason}, followed by a valid batch at offset {at} (LSN {vlsn})"
                ))
            } else if let Some((at, vlsn)) = scan.valid {
                tracing::info!(
                    file = %seg_path.display(),
                    offset = pos,
                    "WAL: the log ends at a batch that was still being synced when later ones were written; \
                     truncating it and the unacknowledged batches after it from offset {at} (LSN {vlsn} on) ({reason})"
                );
                StreamEnd::Torn {
                    seg: idx,
                    offset: pos,
                }
            } else if !last_seg {
                corrupt(format!(
                    "{reason}, in a sealed segment (later segments exist)"
                ))
            } else if !current {
                corrupt(reason)
            } else if torn {
                tracing::info!(
                    file = %seg_path.display(),
                    offset = pos,
                    "WAL: torn write at the end of the log; truncating it ({reason})"
                );
                StreamEnd::Torn {
                    seg: idx,
                    offset: pos,
                }
            } else {
                corrupt(reason)
            },
        );
        Ok(())
    }

    /// Whether segment `idx` can be left unread, and if so an upper bound
    /// on its LSNs: the next segment of the stream starts at or below the
    /// first record the checkpoint lacks. Every live record of `idx` lies
    /// below that start (a stream's LSNs rise from segment to segment; a
    /// later epoch starts past every record of an earlier one that is not
    /// superseded), so replay needs none of them. Nothing else is lost: the
    /// segment was fsynced whole before its successor was created, and any
    /// durable hint in it is below that start too, so it proves nothing
    /// about what recovery may find missing. Reading a large log the
    /// checkpoint covers took a tenth of a 5M-record restart.
    fn covered_whole(&self, idx: usize) -> Option<u64> {
        if !self.skip_covered || self.start_after == 0 || self.segs.get(idx)?.header.is_err() {
            return None;
        }
        let next = self.segs.get(idx + 1)?.header.as_ref().ok()?;
        next.first_lsn
            .checked_sub(1)
            .filter(|&last| last <= self.start_after)
    }

    fn next_segment(&mut self) {
        self.idx += 1;
        self.file = None;
        self.batch_left = 0;
    }

    /// Looks at `[from, end of file)` of the current segment: are there
    /// non-zero bytes, and is there a valid batch (at a 64-byte aligned
    /// offset, with an LSN above everything read so far and <= `max_lsn`)?
    /// With `spot`, it also checks every later valid batch, for
    /// `all_pipelined`.
    fn scan(&mut self, from: u64, max_lsn: u64, spot: Option<u64>) -> Result<ScanResult, WalError> {
        let mut res = ScanResult {
            any_nonzero: false,
            valid: None,
            all_pipelined: true,
        };
        let Some(file) = self.file.as_deref() else {
            // Header unreadable: any non-zero byte after it counts.
            let seg = &self.segs[self.idx];
            if let Ok(f) = self.fs.open_file(&seg.path) {
                let len = f.len().unwrap_or(0);
                res.any_nonzero = any_nonzero(f.as_ref(), SEGMENT_HEADER_BYTES as u64, len)
                    .map_err(|e| WalError::io(&seg.path, e))?;
            }
            return Ok(res);
        };
        let mut buf = vec![0u8; SCAN_CHUNK_BYTES];
        let mut off = from;
        'chunks: while off < self.file_len {
            let n = file.read_up_to(&mut buf, off).map_err(|e| self.io_err(e))?;
            if n == 0 {
                break;
            }
            let chunk = &buf[..n];
            if chunk.iter().any(|&b| b != 0) {
                res.any_nonzero = true;
                let mut o = 0;
                while o + BATCH_HEADER_BYTES <= n {
                    if chunk[o + 44..o + 48] == BATCH_MAGIC {
                        if let Some(h) = BatchHeader::decode(self.salt, self.version, &chunk[o..]) {
                            let at = off + o as u64;
                            if h.first_lsn > self.last_lsn
                                && h.first_lsn <= max_lsn
                                && sanity(&h, 0, self.version).is_ok()
                                && at + h.total_len() <= self.file_len
                            {
                                let mut b = vec![0u8; h.total_len() as usize];
                                let got =
                                    file.read_up_to(&mut b, at).map_err(|e| self.io_err(e))?;
                                if got == b.len() && validate_body(&h, &b).is_ok() {
                                    if res.valid.is_none() {
                                        res.valid = Some((at, h.first_lsn));
                                    }
                                    let Some(spot) = spot else {
                                        return Ok(res);
                                    };
                                    if h.sync_base().is_none_or(|base| base > spot) {
                                        res.all_pipelined = false;
                                        return Ok(res);
                                    }
                                    // Batches follow one another: go on
                                    // after this one.
                                    off = h.next_batch_at(at);
                                    continue 'chunks;
                                }
                            }
                        }
                    }
                    o += BATCH_ALIGN_BYTES;
                }
            }
            off += n as u64;
        }
        Ok(res)
    }
}

fn any_nonzero(f: &dyn FsFile, from: u64, to: u64) -> std::io::Result<bool> {
    let mut buf = vec![0u8; SCAN_CHUNK_BYTES];
    let mut off = from;
    while off < to {
        let n = f.read_up_to(&mut buf, off)?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(true);
        }
        off += n as u64;
    }
    Ok(false)
}

/// Whether a segment whose header did not verify is an interrupted creation
/// (nothing but zeros after the header area) rather than a damaged segment.
pub(crate) fn is_abandoned_creation(fs: &dyn FileSystem, seg: &SegFile) -> Result<bool, WalError> {
    let f = fs
        .open_file(&seg.path)
        .map_err(|e| WalError::io(&seg.path, e))?;
    let len = f.len().map_err(|e| WalError::io(&seg.path, e))?;
    Ok(!any_nonzero(f.as_ref(), SEGMENT_HEADER_BYTES as u64, len)
        .map_err(|e| WalError::io(&seg.path, e))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_sector_detection_is_aligned() {
        let mut b = vec![1u8; 2048];
        // 512 zeros not aligned to a sector: not a lost sector.
        b[100..612].fill(0);
        assert!(!has_zero_sector(&b, 0));
        // Aligned relative to the file, even though b starts at 64.
        let mut c = vec![1u8; 2048];
        c[448..960].fill(0);
        assert!(has_zero_sector(&c, 64));
        assert!(!has_zero_sector(&c, 0));
    }
}
