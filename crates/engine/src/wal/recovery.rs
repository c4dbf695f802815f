//! Start-up recovery: find every stream's segments, merge the streams by LSN
//! into one commit-ordered sequence up to the first missing LSN, keep what
//! lies past it and depends on nothing missing, and decide where writing
//! resumes.
//!
//! The merge hands records to the caller's `apply` in global LSN order up to
//! the first LSN no stream has: a prefix of commit order (`docs/durability.md`
//! proves it). Past that point each stream's records are kept for as long as
//! each depends on nothing at or past the missing LSN; they are applied
//! under the LSNs from the missing one on and written again by `Wal::open`.
//! The rest were never acknowledged and are discarded. Old records are not
//! rewritten in place (a crash in the middle of such a rewrite could damage
//! records that *were* acknowledged). Instead recovery opens a new *epoch*:
//! every stream starts a fresh segment whose header says "epoch E+1 starts
//! at LSN L+1", and readers treat older-epoch records with an LSN >= L+1 as
//! superseded. Two checks catch lost acknowledged data: a
//! missing LSN below the current epoch's start (an earlier start-up already
//! recovered it), and a missing LSN at or below a batch's recorded durable
//! watermark.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::WalError;
use super::format::{
    is_spare_file_name, parse_segment_file_name, HeaderError, SegmentHeader, FORMAT_VERSION,
    SEGMENT_HEADER_BYTES,
};
use super::reader::{is_abandoned_creation, CorruptSpot, Rec, SegFile, StreamEnd, StreamReader};
use super::segment::{remove_durably, SegmentInfo};
use super::{RecoveryApply, RecoveryMode, RecoveryStats, WalConfig};
use crate::io::FileSystem;

/// Epochs (from file names or headers) at or above this are refused.
const MAX_EPOCH: u64 = 1 << 40;
/// Unit in which recovered batches are read back and rewritten.
const REWRITE_CHUNK_BYTES: usize = 1024 * 1024;

/// Where a stream resumes appending in an existing segment.
pub(crate) struct AppendPoint {
    pub path: PathBuf,
    pub salt: u32,
    pub offset: u64,
    pub has_batches: bool,
}

pub(crate) struct StreamPlan {
    pub segments: Vec<SegmentInfo>,
    /// `None`: start a new segment.
    pub append: Option<AppendPoint>,
}

/// A record found past the first missing LSN that depends on nothing
/// missing: recovered under a new LSN and written again, ahead of any new
/// record, into the first segment of the new epoch.
pub(crate) struct Relogged {
    pub lsn: u64,
    pub time_ms: u64,
    pub payload: Vec<u8>,
}

pub(crate) struct Recovered {
    pub stats: RecoveryStats,
    pub last_lsn: u64,
    /// In LSN order, from `epoch_start_lsn` on; empty unless a new epoch.
    pub relog: Vec<Relogged>,
    pub epoch: u64,
    pub epoch_start_lsn: u64,
    pub plans: Vec<StreamPlan>,
}

/// Creates `dir` if needed and makes its entry durable in the parent.
fn ensure_dir(fs: &dyn FileSystem, dir: &Path) -> Result<(), WalError> {
    if fs.exists(dir) {
        return Ok(());
    }
    fs.create_dir_all(dir).map_err(|e| WalError::io(dir, e))?;
    sync_parent(fs, dir)
}

/// Makes `dir`'s own entry durable.
fn sync_parent(fs: &dyn FileSystem, dir: &Path) -> Result<(), WalError> {
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            fs.sync_dir(parent).map_err(|e| WalError::io(parent, e))
        }
        _ => Ok(()),
    }
}

fn read_header(
    fs: &dyn FileSystem,
    path: &Path,
) -> Result<(Result<SegmentHeader, String>, u64), WalError> {
    let f = fs.open_file(path).map_err(|e| WalError::io(path, e))?;
    let len = f.len().map_err(|e| WalError::io(path, e))?;
    let mut b = [0u8; SEGMENT_HEADER_BYTES];
    let n = f.read_up_to(&mut b, 0).map_err(|e| WalError::io(path, e))?;
    match SegmentHeader::decode(&b[..n]) {
        Ok(h) => Ok((Ok(h), len)),
        Err(HeaderError::UnsupportedVersion(v)) => Err(WalError::Config(format!(
            "{} has WAL format version {v}{}; this build reads versions {}..={}",
            path.display(),
            if v > super::format::FORMAT_VERSION {
                ", which a newer durakv wrote (start the build that wrote it)"
            } else {
                ""
            },
            super::format::OLDEST_FORMAT_VERSION,
            super::format::FORMAT_VERSION
        ))),
        Err(e) => Ok((Err(e.to_string()), len)),
    }
}

/// Lists, validates and orders one stream's segments; deletes spares and
/// abandoned creations.
fn discover_stream(
    fs: &dyn FileSystem,
    stream: usize,
    dir: &Path,
    removed: &mut Vec<PathBuf>,
) -> Result<Vec<SegFile>, WalError> {
    ensure_dir(fs, dir)?;
    let mut segs = Vec::new();
    for path in fs.list_dir(dir).map_err(|e| WalError::io(dir, e))? {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if is_spare_file_name(name) {
            remove_durably(fs, &path)?;
            removed.push(path);
            continue;
        }
        let Some((s, epoch, first_lsn)) = parse_segment_file_name(name) else {
            continue;
        };
        if s as usize != stream {
            return Err(WalError::Config(format!(
                "{} belongs to WAL stream {s} but is in the directory of stream {stream} \
                 (give the WAL directories in the order they were first used)",
                path.display()
            )));
        }
        let (mut header, len) = read_header(fs, &path)?;
        if let Ok(h) = &header {
            if h.stream_id as usize != stream || h.epoch != epoch || h.first_lsn != first_lsn {
                header = Err(format!(
                    "header says stream {} epoch {} first LSN {}, the file name says stream {s} \
                     epoch {epoch} first LSN {first_lsn}",
                    h.stream_id, h.epoch, h.first_lsn
                ));
            }
        }
        segs.push(SegFile {
            path,
            epoch,
            first_lsn,
            header,
            len,
        });
    }
    segs.sort_by_key(|s| (s.epoch, s.first_lsn));
    while let Some(last) = segs.last() {
        if last.header.is_ok() || !is_abandoned_creation(fs, last)? {
            break;
        }
        tracing::info!(path = %last.path.display(), "WAL: removing a segment whose creation was interrupted");
        remove_durably(fs, &last.path)?;
        removed.push(last.path.clone());
        segs.pop();
    }
    Ok(segs)
}

/// The next record past `start_after`. A covered record that
/// `WalConfig::read_covered` selects (state no checkpoint stores) is still
/// handed to `apply`.
fn pull(
    r: &mut StreamReader,
    start_after: u64,
    skipped: &mut u64,
    read_covered: Option<fn(&[u8]) -> bool>,
    apply: &mut RecoveryApply<'_>,
) -> Result<Option<Rec>, WalError> {
    loop {
        match r.next()? {
            Some(rec) if rec.lsn <= start_after => {
                *skipped += 1;
                let payload = r.payload(&rec);
                if read_covered.is_some_and(|f| f(payload)) {
                    apply(rec.lsn, rec.time_ms, payload).map_err(|reason| WalError::Apply {
                        lsn: rec.lsn,
                        reason,
                    })?;
                }
            }
            other => return Ok(other),
        }
    }
}

/// Makes every recovered record durable that no durable hint proves was:
/// after a `kill -9` its batch may be in the page cache only, and after a
/// failed fsync its pages may be marked clean without being on disk, so
/// neither a read nor an fsync shows anything wrong. Writing the same bytes
/// back dirties the pages again, so the fsync after it really writes them.
/// Then every WAL directory (and its parent) is fsynced, for entries a
/// previous run created or renamed without a successful directory fsync.
///
/// `proven`: the largest durable hint of any stream; records at or below it
/// were fsynced by the process that acknowledged them. `last`: the last
/// recovered LSN; batches holding only later records are discarded anyway.
/// Returns the bytes rewritten.
fn make_recovered_durable(
    fs: &dyn FileSystem,
    dirs: &[PathBuf],
    readers: &[StreamReader],
    proven: u64,
    last: u64,
) -> Result<u64, WalError> {
    let mut rewritten = 0u64;
    for r in readers {
        // One range per segment, from its first unproven batch to the end
        // of its last: one read-write pass and one fsync per file.
        let mut ranges: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
        for b in &r.unproven {
            if b.last_lsn <= proven || b.first_lsn > last {
                continue;
            }
            let e = ranges.entry(b.seg).or_insert((b.pos, b.end));
            e.0 = e.0.min(b.pos);
            e.1 = e.1.max(b.end);
        }
        for (seg, (from, to)) in ranges {
            let Some(s) = r.segs.get(seg) else { continue };
            rewritten += rewrite_and_sync(fs, &s.path, from, to)?;
        }
    }
    for dir in dirs {
        fs.sync_dir(dir).map_err(|e| WalError::io(dir, e))?;
        sync_parent(fs, dir)?;
    }
    Ok(rewritten)
}

/// Reads `[from, to)` of `path`, writes the same bytes back in place and
/// fdatasyncs the file; returns the bytes rewritten. A crash in the middle
/// leaves every sector either as it was or as the page cache holds it, which
/// the crash could have left anyway, so the rewrite never makes the log
/// worse.
fn rewrite_and_sync(fs: &dyn FileSystem, path: &Path, from: u64, to: u64) -> Result<u64, WalError> {
    let io = |e| WalError::io(path, e);
    let f = fs.open_file(path).map_err(io)?;
    // A batch's zero padding may be cut off by the end of the file without
    // making the batch unreadable.
    let to = to.min(f.len().map_err(io)?);
    let chunk =
        usize::try_from(to - from).map_or(REWRITE_CHUNK_BYTES, |n| n.min(REWRITE_CHUNK_BYTES));
    let mut buf = vec![0u8; chunk];
    let mut off = from;
    while off < to {
        let n = usize::try_from(to - off).map_or(chunk, |n| n.min(chunk));
        let b = &mut buf[..n];
        f.read_exact_at(b, off).map_err(io)?;
        f.write_all_at(b, off).map_err(io)?;
        off += n as u64;
    }
    f.sync_data().map_err(io)?;
    Ok(to.saturating_sub(from))
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Runs recovery; see `Wal::open`.
pub(crate) fn recover(
    fs: &Arc<dyn FileSystem>,
    cfg: &WalConfig,
    start_after: u64,
    apply: &mut RecoveryApply<'_>,
) -> Result<Recovered, WalError> {
    let t0 = Instant::now();
    let n = cfg.dirs.len();
    let mut removed = Vec::new();
    let mut per_stream = Vec::with_capacity(n);
    for (i, dir) in cfg.dirs.iter().enumerate() {
        per_stream.push(discover_stream(fs.as_ref(), i, dir, &mut removed)?);
    }
    let segment_count: usize = per_stream.iter().map(|s| s.len()).sum();

    // Stream count and epochs, from every header that verified.
    let mut epochs: BTreeMap<u64, u64> = BTreeMap::new();
    let mut disk_streams = 0u32;
    for seg in per_stream.iter().flatten() {
        if let Ok(h) = &seg.header {
            disk_streams = disk_streams.max(h.stream_count);
            let e = epochs.entry(h.epoch).or_insert(h.epoch_start_lsn);
            *e = (*e).min(h.epoch_start_lsn);
        }
    }
    if disk_streams as usize > n {
        return Err(WalError::Config(format!(
            "the WAL on disk was written with {disk_streams} streams but {n} WAL directories \
             are configured; configure all of them, in their original order"
        )));
    }
    let current_epoch = per_stream
        .iter()
        .flatten()
        .map(|s| s.epoch)
        .max()
        .unwrap_or(0);
    let current_start = epochs.get(&current_epoch).copied().unwrap_or(0);
    let epoch_end = |e: u64| -> u64 {
        epochs
            .range(e.saturating_add(1)..)
            .map(|(_, &start)| start)
            .min()
            .map_or(u64::MAX, |s| s.saturating_sub(1))
    };

    let mut readers: Vec<StreamReader> = per_stream
        .into_iter()
        .map(|segs| {
            let ends = segs.iter().map(|s| epoch_end(s.epoch)).collect();
            StreamReader::new(
                fs.clone(),
                segs,
                ends,
                start_after,
                cfg.read_covered.is_none(),
            )
        })
        .collect();

    // Merge by LSN.
    let mut skipped = 0u64;
    let mut heads = Vec::with_capacity(n);
    for r in readers.iter_mut() {
        heads.push(pull(r, start_after, &mut skipped, cfg.read_covered, apply)?);
    }
    let mut expected = start_after + 1;
    let mut applied = 0u64;
    let mut applied_bytes = 0u64;
    let mut last_progress = Instant::now();
    while let Some(i) = heads
        .iter()
        .position(|h| matches!(h, Some(r) if r.lsn == expected))
    {
        let Some(rec) = heads[i].take() else { break };
        let payload = readers[i].payload(&rec);
        applied_bytes += payload.len() as u64;
        apply(rec.lsn, rec.time_ms, payload).map_err(|reason| WalError::Apply {
            lsn: rec.lsn,
            reason,
        })?;
        applied += 1;
        expected += 1;
        heads[i] = pull(
            &mut readers[i],
            start_after,
            &mut skipped,
            cfg.read_covered,
            apply,
        )?;
        if applied & 4095 == 0 && last_progress.elapsed() >= Duration::from_secs(1) {
            last_progress = Instant::now();
            let secs = t0.elapsed().as_secs_f64().max(1e-9);
            tracing::info!(
                records = applied,
                lsn = rec.lsn,
                mb = format!("{:.1}", mb(applied_bytes)),
                mb_per_s = format!("{:.1}", mb(applied_bytes) / secs),
                "WAL recovery in progress"
            );
        }
    }
    // Every LSN up to here is recovered; the next one is missing.
    let contiguous = expected - 1;

    // What lies past the first missing LSN: a stream keeps records for as
    // long as each needs nothing at or past the missing LSN (a record of
    // its own stream, or one it depends on); the rest were never
    // acknowledged and are discarded. All of it must be read to find
    // corruption and durable-watermark hints.
    let mut corruptions: Vec<CorruptSpot> = Vec::new();
    let mut discarded = 0u64;
    let mut discarded_range: Option<(u64, u64)> = None;
    let mut kept: Vec<(u64, u64, Vec<u8>, usize)> = Vec::new();
    for (i, r) in readers.iter_mut().enumerate() {
        let mut head = heads[i].take();
        let mut stopped = false;
        while let Some(rec) = head {
            if rec.lsn <= contiguous {
                corruptions.push(CorruptSpot {
                    file: cfg.dirs[i].clone(),
                    offset: 0,
                    lsn: rec.lsn,
                    reason: format!("LSN {} appears in more than one place", rec.lsn),
                });
                break;
            }
            stopped |= rec.dep > contiguous;
            if stopped {
                discarded += 1;
                discarded_range = Some(match discarded_range {
                    None => (rec.lsn, rec.lsn),
                    Some((a, b)) => (a.min(rec.lsn), b.max(rec.lsn)),
                });
            } else {
                kept.push((rec.lsn, rec.time_ms, r.payload(&rec).to_vec(), i));
            }
            head = pull(r, start_after, &mut skipped, cfg.read_covered, apply)?;
        }
        if let Some(c) = r.corruption() {
            corruptions.push(c.clone());
        }
    }
    kept.sort_by_key(|k| k.0);
    for w in kept.windows(2) {
        if w[0].0 == w[1].0 {
            corruptions.push(CorruptSpot {
                file: cfg.dirs[w[1].3].clone(),
                offset: 0,
                lsn: w[1].0,
                reason: format!("LSN {} appears in more than one place", w[1].0),
            });
        }
    }
    corruptions.sort_by_key(|c| c.lsn);

    // Acknowledged records missing?
    let missing = contiguous + 1;
    let (max_hint, hint_at) = readers
        .iter()
        .filter_map(|r| r.hint_at.clone().map(|at| (r.max_hint, at)))
        .max_by_key(|(h, _)| *h)
        .map_or((0, None), |(h, at)| (h, Some(at)));
    if missing < current_start && missing > start_after {
        let file = readers
            .iter()
            .flat_map(|r| r.segs.iter())
            .find(|s| s.epoch == current_epoch)
            .map(|s| s.path.clone())
            .unwrap_or_default();
        corruptions.push(CorruptSpot {
            file,
            offset: 0,
            lsn: missing,
            reason: format!(
                "LSN {missing} is missing, but an earlier start-up recovered every LSN below \
                 {current_start} (where epoch {current_epoch} begins)"
            ),
        });
    } else if max_hint >= missing {
        let (file, offset) = hint_at.unwrap_or_default();
        corruptions.push(CorruptSpot {
            file,
            offset,
            lsn: missing,
            reason: format!(
                "LSN {missing} is missing, but the batch here records that every LSN <= \
                 {max_hint} was durable (acknowledged records were lost)"
            ),
        });
    }

    let mut dropped = None;
    if !corruptions.is_empty() {
        match cfg.recovery_mode {
            RecoveryMode::Strict => {
                return Err(corruptions.swap_remove(0).into_error());
            }
            RecoveryMode::TolerateCorruption => {
                let mut msg = format!(
                    "kept LSNs up to {contiguous}; dropped everything after it because of: "
                );
                for (k, c) in corruptions.iter().enumerate() {
                    if k > 0 {
                        msg.push_str("; ");
                    }
                    msg.push_str(&format!(
                        "{} at offset {} (LSN {}): {}",
                        c.file.display(),
                        c.offset,
                        c.lsn,
                        c.reason
                    ));
                }
                if let Some((a, b)) = discarded_range {
                    msg.push_str(&format!(
                        "; {discarded} readable records with LSNs in {a}..={b} were discarded"
                    ));
                }
                if !kept.is_empty() {
                    msg.push_str(&format!(
                        "; {} records past LSN {contiguous} that depended on nothing missing were \
                         dropped with them",
                        kept.len()
                    ));
                    discarded += kept.len() as u64;
                    kept.clear();
                }
                tracing::warn!(dropped = %msg, "WAL recovery tolerated corruption");
                dropped = Some(msg);
            }
        }
    }
    if discarded > 0 && dropped.is_none() {
        if let Some((a, b)) = discarded_range {
            tracing::info!(
                missing_lsn = missing,
                discarded,
                "WAL: discarding {discarded} unacknowledged records (LSNs {a}..={b}) written \
                 after LSN {missing}, which never reached the disk, that depend on it"
            );
        }
    }

    // The kept records get the LSNs from the missing one on, in their
    // order; the new epoch supersedes their old copies, and `Wal::open`
    // writes them again before anything else.
    let mut last = contiguous;
    let mut relog = Vec::with_capacity(kept.len());
    if !kept.is_empty() {
        tracing::info!(
            missing_lsn = missing,
            records = kept.len(),
            "WAL: keeping {} records written after LSN {missing}, which never reached the \
             disk, that do not depend on it; they are recovered as LSNs {missing}..={}",
            kept.len(),
            contiguous + kept.len() as u64
        );
    }
    for (_, time_ms, payload, _) in kept {
        last += 1;
        applied_bytes += payload.len() as u64;
        apply(last, time_ms, &payload).map_err(|reason| WalError::Apply { lsn: last, reason })?;
        applied += 1;
        relog.push(Relogged {
            lsn: last,
            time_ms,
            payload,
        });
    }

    // Before anything builds on the recovered records (a new epoch's
    // segments, new LSNs, the durable LSN starting at `last`), they must be
    // on disk for real.
    let resynced_bytes =
        make_recovered_durable(fs.as_ref(), &cfg.dirs, &readers, max_hint, contiguous)?;
    if resynced_bytes > 0 {
        // Routine (a clean shutdown leaves each stream's last batch above
        // every hint), so not worth an operator's attention.
        tracing::debug!(
            bytes = resynced_bytes,
            proven_lsn = max_hint,
            last_lsn = last,
            "WAL: rewrote and fsynced recovered batches not proven durable"
        );
    }

    // Where writing resumes.
    let mut truncated_tail = Vec::new();
    let mut need_new_epoch =
        current_epoch == 0 || discarded > 0 || dropped.is_some() || !relog.is_empty();
    for r in &readers {
        if let Some(StreamEnd::Torn { seg, offset }) = &r.end {
            truncated_tail.push((r.segs[*seg].path.clone(), *offset));
            need_new_epoch = true;
        }
        if matches!(r.end, Some(StreamEnd::Corrupt(_))) {
            need_new_epoch = true;
        }
    }
    let (epoch, epoch_start_lsn) = if need_new_epoch {
        let next = current_epoch
            .checked_add(1)
            .filter(|&e| e < MAX_EPOCH)
            .ok_or_else(|| {
                WalError::Config(format!("WAL epoch {current_epoch} is out of range"))
            })?;
        (next, contiguous + 1)
    } else {
        (current_epoch, current_start)
    };
    let mut plans = Vec::with_capacity(n);
    let mut superseded = 0u64;
    for r in &readers {
        superseded += r.superseded_records;
        let mut append = None;
        let mut drop_last = false;
        if !need_new_epoch {
            if let Some(StreamEnd::Clean { seg, offset }) = &r.end {
                let s = &r.segs[*seg];
                let has_batches = r.seg_stats[*seg].has_batches;
                if let (Ok(h), true) = (&s.header, s.epoch == current_epoch) {
                    if h.version != FORMAT_VERSION && has_batches {
                        // Written by an older format: sealed as it is;
                        // writing resumes in a new segment.
                    } else if h.version == FORMAT_VERSION
                        && (has_batches || h.first_lsn == last + 1)
                    {
                        append = Some(AppendPoint {
                            path: s.path.clone(),
                            salt: h.salt,
                            offset: *offset,
                            has_batches,
                        });
                    } else {
                        // Created for records that never reached the disk:
                        // its first LSN is past where writing resumes.
                        tracing::info!(path = %s.path.display(), "WAL: replacing an empty segment");
                        remove_durably(fs.as_ref(), &s.path)?;
                        removed.push(s.path.clone());
                        drop_last = true;
                    }
                }
            }
        }
        let keep = r.segs.len() - usize::from(drop_last);
        let segments = r.segs[..keep]
            .iter()
            .zip(&r.seg_stats)
            .map(|(s, st)| SegmentInfo {
                path: s.path.clone(),
                epoch: s.epoch,
                max_lsn: st.max_lsn,
                bytes: s.len,
                active: append.as_ref().is_some_and(|a| a.path == s.path),
                cache_released: false,
            })
            .collect();
        plans.push(StreamPlan { segments, append });
    }

    let duration = t0.elapsed();
    let read_bytes: u64 = readers.iter().map(|r| r.bytes).sum();
    let unread_segments: usize = readers.iter().map(|r| r.unread_segments).sum();
    let secs = duration.as_secs_f64().max(1e-9);
    tracing::info!(
        records = applied,
        last_lsn = last,
        segments = segment_count,
        unread_segments,
        mb = format!("{:.1}", mb(read_bytes)),
        mb_per_s = format!("{:.1}", mb(read_bytes) / secs),
        ms = duration.as_millis() as u64,
        epoch,
        "WAL recovery finished"
    );
    Ok(Recovered {
        stats: RecoveryStats {
            records: applied,
            bytes: applied_bytes,
            duration,
            last_lsn: last,
            skipped_before_start: skipped,
            unread_segments,
            truncated_tail,
            dropped,
            discarded_unacknowledged: discarded,
            kept_past_gap: relog.len() as u64,
            superseded_records: superseded,
            removed_files: removed,
            skipped_checkpointed_damage: readers
                .iter()
                .flat_map(|r| r.skipped_damage.iter().cloned())
                .collect(),
            segments: segment_count,
            streams: n,
            epoch,
            new_epoch: need_new_epoch,
            resynced_bytes,
        },
        last_lsn: last,
        relog,
        epoch,
        epoch_start_lsn,
        plans,
    })
}
