//! Targeted failure scenarios, each set up deterministically on `FaultFs`:
//! a torn last write, corruption in the middle of the log (Strict and
//! Tolerate), a failed fsync that must not be retried, a full disk, a gap
//! between streams, and acknowledged records that went missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wal_support;

use durakv_engine::io::{CrashMode, CrashSpec, FaultFs, FileSystem};
use durakv_engine::wal::format::{BATCH_HEADER_BYTES, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use durakv_engine::wal::{RecoveryMode, Wal, WalConfig, WalError};
use durakv_engine::Durability;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wal_support::*;

fn put(wal: &Wal, stream: usize, level: Durability, p: &[u8]) -> u64 {
    wal.append(stream, 7, level, &mut |b: &mut Vec<u8>| {
        b.extend_from_slice(p)
    })
    .unwrap()
}

fn put_full(wal: &Wal, stream: usize, p: &[u8]) -> u64 {
    let lsn = put(wal, stream, Durability::Full, p);
    wal.wait_durable(lsn).unwrap();
    lsn
}

fn segments(fs: &FaultFs, dir: &str) -> Vec<PathBuf> {
    wal_support::segment_files(fs)
        .into_iter()
        .filter(|p| p.starts_with(dir))
        .collect()
}

fn wait_for_spares(wal: &Wal) {
    while wal.stats().spare_segments_ready < wal.num_streams() {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn quiet_crash(fs: &FaultFs) -> FaultFs {
    let mut spec = CrashSpec::new(CrashMode::DropUnsynced);
    spec.keep_unsynced_entries = Some(false);
    fs.crash_with(&spec).0
}

fn distinct(i: u32) -> Vec<u8> {
    // Non-zero, distinct payloads.
    (0..40u32).map(|k| (i * 7 + k * 13) as u8 | 1).collect()
}

#[test]
fn torn_last_write_is_truncated_and_reported() {
    let fs = FaultFs::new(1);
    let cfg = sim_config(1, 64 * 1024);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    for i in 0..5 {
        put_full(&wal, 0, &distinct(i));
    }
    drop(wal);
    let seg = segments(&fs, "/data/wal0").pop().unwrap();
    let end = fs.written_len(&seg).unwrap();
    // The last write lost its final bytes: a prefix-torn batch.
    fs.write_file_raw(&seg, end - 10, &[0u8; 10]).unwrap();
    let (_wal, stats, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got.len(), 4, "the torn record is gone, the rest stays");
    assert_eq!(stats.truncated_tail.len(), 1);
    let (file, offset) = &stats.truncated_tail[0];
    assert_eq!(file, &seg);
    assert!(*offset >= SEGMENT_HEADER_BYTES as u64 && *offset < end);
    assert!(stats.new_epoch);
}

#[test]
fn mid_log_corruption_strict_names_file_offset_and_lsn() {
    let fs = FaultFs::new(2);
    let cfg = sim_config(1, 64 * 1024);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    for i in 0..3 {
        put_full(&wal, 0, &distinct(i));
    }
    wal.close().unwrap();
    drop(wal);
    let seg = segments(&fs, "/data/wal0").pop().unwrap();
    // Flip a payload bit of the first record (first batch).
    let first_batch = SEGMENT_HEADER_BYTES as u64;
    fs.corrupt_byte(
        &seg,
        first_batch + (BATCH_HEADER_BYTES + RECORD_HEADER_BYTES) as u64 + 3,
        0x04,
    )
    .unwrap();

    let err = open(Arc::new(fs.clone()), &cfg, 0).unwrap_err();
    match &err {
        WalError::Corruption {
            file,
            offset,
            lsn,
            reason,
        } => {
            assert_eq!(file, &seg);
            assert_eq!(*offset, first_batch);
            assert_eq!(*lsn, 1);
            assert!(reason.contains("checksum"), "{reason}");
            assert!(reason.contains("followed by a valid batch"), "{reason}");
        }
        other => panic!("expected corruption, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&seg.display().to_string()) && msg.contains("offset 64"),
        "{msg}"
    );

    // Tolerant: keeps the (empty) valid prefix and says what it dropped.
    let mut tolerant = cfg.clone();
    tolerant.recovery_mode = RecoveryMode::TolerateCorruption;
    let (wal, stats, got) = open(Arc::new(fs.clone()), &tolerant, 0).unwrap();
    assert!(got.is_empty());
    let dropped = stats.dropped.clone().unwrap();
    assert!(dropped.contains(&seg.display().to_string()), "{dropped}");
    assert!(dropped.contains("offset 64"), "{dropped}");
    assert!(stats.new_epoch);

    // Writing resumes in a new epoch; the damaged records stay superseded,
    // and a later Strict start-up is clean.
    let a = put_full(&wal, 0, b"new one");
    let b = put_full(&wal, 0, b"new two");
    assert_eq!((a, b), (1, 2));
    wal.close().unwrap();
    drop(wal);
    let (_w, stats, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(
        got.iter().map(|r| r.2.as_slice()).collect::<Vec<_>>(),
        vec![&b"new one"[..], b"new two"]
    );
    assert!(stats.superseded_records > 0 || stats.dropped.is_none());
}

#[test]
fn failed_fsync_is_never_retried_or_reported_durable() {
    let fs = FaultFs::new(3);
    let cfg = sim_config(1, 64 * 1024);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    wait_for_spares(&wal);
    let ok = put_full(&wal, 0, &distinct(1));
    fs.fail_next_sync();
    let bad = put(&wal, 0, Durability::Full, &distinct(2));
    assert!(matches!(wal.wait_durable(bad), Err(WalError::Failed(_))));
    let reason = wal.failure().unwrap();
    assert!(reason.contains(&format!("LSNs {bad}..={bad}")), "{reason}");
    assert_eq!(wal.durable_lsn(), ok);
    assert!(matches!(
        wal.append(0, 0, Durability::Delayed, &mut |b: &mut Vec<u8>| b.push(1)),
        Err(WalError::Failed(_))
    ));
    wal.request_sync();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        wal.durable_lsn(),
        ok,
        "a sync request must not resurrect the failed batch"
    );
    assert!(wal.stats().failed.is_some());
    assert!(matches!(wal.close(), Err(WalError::Failed(_))));
    drop(wal);

    let after = fs.crash();
    let (_w, stats, got) = open(Arc::new(after), &cfg, 0).unwrap();
    assert!(!got.is_empty() && got[0].0 == ok);
    assert!(stats.last_lsn == ok || stats.last_lsn == bad);
}

#[test]
fn full_disk_fails_the_wal_and_keeps_acknowledged_records() {
    let fs = FaultFs::new(4);
    let cfg = sim_config(1, 4096);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    wait_for_spares(&wal);
    fs.set_space_limit_bytes(Some(fs.used_bytes() + 100));
    let mut acked = 0;
    let mut err = None;
    for i in 0..1000 {
        match wal.append(0, 0, Durability::Full, &mut |b: &mut Vec<u8>| {
            b.extend_from_slice(&distinct(i))
        }) {
            Ok(lsn) => match wal.wait_durable(lsn) {
                Ok(()) => acked = lsn,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            },
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let err = err.expect("the disk never filled up");
    assert!(matches!(err, WalError::Failed(_)));
    let reason = wal.failure().unwrap();
    assert!(reason.contains("No space left"), "{reason}");
    assert!(
        acked > 40,
        "the preallocated segments were usable ({acked} records)"
    );
    drop(wal);
    let after = fs.crash();
    let (_w, _stats, got) = open(Arc::new(after), &cfg, 0).unwrap();
    assert!(got.len() as u64 >= acked);
}

/// Stream 0 holds LSN 1 (small, `Delayed`, waiting for its timer) and
/// stream 1 LSN 2 (big, written at once), which depends on LSN 1 or not;
/// then the power fails. Returns the disk after it.
fn crash_with_a_gap(cfg: &WalConfig, depends: bool) -> FaultFs {
    let fs = FaultFs::new(5);
    let (wal, _, _) = open(Arc::new(fs.clone()), cfg, 0).unwrap();
    let l1 = put(&wal, 0, Durability::Delayed, b"small");
    let dep = if depends { l1 } else { 0 };
    let l2 = wal
        .append_after(1, 7, Durability::Delayed, dep, &mut |b: &mut Vec<u8>| {
            b.extend_from_slice(&[9u8; 2000])
        })
        .unwrap();
    assert_eq!((l1, l2), (1, 2));
    while wal.stats().streams[1].fsyncs == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        wal.durable_lsn(),
        0,
        "LSN 2 is on disk but not durable: LSN 1 is not"
    );
    // Its stream acknowledges it only if it depends on nothing missing.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !depends && wal.acked_lsn(1) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(wal.acked_lsn(1) >= 2, !depends);
    // Power loss first: the old WAL's final flush on drop hits a dead disk.
    let after = quiet_crash(&fs);
    drop(wal);
    after
}

fn gap_config() -> WalConfig {
    let mut cfg = sim_config(2, 64 * 1024);
    cfg.delayed_flush_ms = 10_000;
    cfg.delayed_flush_bytes = 1000;
    cfg
}

#[test]
fn gap_between_streams_discards_dependent_records_then_reuses_lsns() {
    let cfg = gap_config();
    let fs = crash_with_a_gap(&cfg, true);
    let (wal, stats, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert!(got.is_empty());
    assert_eq!(stats.discarded_unacknowledged, 1);
    assert!(stats.new_epoch);
    // LSNs 1 and 2 are handed out again; the old LSN 2 must never come back.
    let n1 = put_full(&wal, 1, b"again one");
    let n2 = put_full(&wal, 0, b"again two");
    assert_eq!((n1, n2), (1, 2));
    wal.close().unwrap();
    drop(wal);
    let (_w, stats, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    let payloads: Vec<&[u8]> = got.iter().map(|r| r.2.as_slice()).collect();
    assert_eq!(payloads, vec![&b"again one"[..], b"again two"]);
    assert_eq!(stats.superseded_records, 1);
    assert!(!stats.new_epoch);
}

#[test]
fn a_record_past_a_gap_that_needs_nothing_missing_is_kept_under_a_new_lsn() {
    let cfg = gap_config();
    let fs = crash_with_a_gap(&cfg, false);
    let (wal, stats, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got, vec![(1, 7, vec![9u8; 2000])]);
    assert_eq!(stats.discarded_unacknowledged, 0);
    assert!(stats.new_epoch);
    let n2 = put_full(&wal, 1, b"after");
    assert_eq!(n2, 2);
    wal.close().unwrap();
    drop(wal);
    // Its copy in the new epoch is what counts from now on: the old one is
    // superseded, whatever crashes follow.
    for round in 0..2 {
        let (w, stats, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
        let payloads: Vec<&[u8]> = got.iter().map(|r| r.2.as_slice()).collect();
        assert_eq!(payloads, vec![&[9u8; 2000][..], b"after"], "round {round}");
        assert_eq!(stats.superseded_records, 1);
        assert!(!stats.new_epoch);
        drop(w);
    }
}

#[test]
fn lost_acknowledged_records_are_reported_via_durable_hints() {
    let fs = FaultFs::new(7);
    let cfg = sim_config(2, 64 * 1024);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    for i in 0..20 {
        put_full(&wal, (i % 2) as usize, &distinct(i));
    }
    wal.close().unwrap();
    drop(wal);
    // Stream 0's records vanish (as if its writes never reached the disk
    // although fsync said so): zero its data region.
    let seg = segments(&fs, "/data/wal0").pop().unwrap();
    let end = fs.written_len(&seg).unwrap();
    let zeros = vec![0u8; (end - SEGMENT_HEADER_BYTES as u64) as usize];
    fs.write_file_raw(&seg, SEGMENT_HEADER_BYTES as u64, &zeros)
        .unwrap();
    let err = open(Arc::new(fs.clone()), &cfg, 0).unwrap_err();
    let msg = err.to_string();
    assert!(err.is_corruption(), "{msg}");
    assert!(msg.contains("acknowledged records were lost"), "{msg}");
}

#[test]
fn lsn_below_current_epoch_start_must_exist() {
    let fs = FaultFs::new(8);
    let cfg = sim_config(1, 4096);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    for i in 0..100 {
        put_full(&wal, 0, &distinct(i));
    }
    drop(wal);
    // Crash with a torn tail so the next start-up opens a new epoch.
    let seg = segments(&fs, "/data/wal0").pop().unwrap();
    let end = fs.written_len(&seg).unwrap();
    fs.write_file_raw(&seg, end - 4, &[0u8; 4]).unwrap();
    let (wal, stats, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert!(stats.new_epoch);
    let kept = stats.last_lsn;
    drop(wal);
    // An old segment (records far below the new epoch's start) disappears.
    let segs = segments(&fs, "/data/wal0");
    assert!(segs.len() >= 3);
    fs.remove_file(&segs[1]).unwrap();
    let err = open(Arc::new(fs.clone()), &cfg, 0).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("earlier start-up recovered every LSN below"),
        "{msg} (kept {kept})"
    );
}

#[test]
fn stream_count_and_order_are_checked() {
    let fs = FaultFs::new(9);
    let cfg = sim_config(2, 64 * 1024);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    put_full(&wal, 1, b"x");
    wal.close().unwrap();
    drop(wal);
    let one = sim_config(1, 64 * 1024);
    let e = open(Arc::new(fs.clone()), &one, 0).unwrap_err().to_string();
    assert!(e.contains("2 streams"), "{e}");
    let mut swapped = cfg.clone();
    swapped.dirs.reverse();
    let e = open(Arc::new(fs.clone()), &swapped, 0)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("original order") || e.contains("order they were first used"),
        "{e}"
    );
    let mut dup = cfg.clone();
    dup.dirs[1] = dup.dirs[0].clone();
    assert!(matches!(
        open(Arc::new(fs.clone()), &dup, 0),
        Err(WalError::Config(_))
    ));
}

/// LSNs 1..=300 written `full`, alternating between two streams of 4 KiB
/// segments (several segments each), on a fresh simulated disk.
fn three_hundred_over_two_streams(seed: u64) -> (FaultFs, WalConfig, Wal) {
    let fs = FaultFs::new(seed);
    let cfg = sim_config(2, 4096);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    for i in 0..300 {
        put_full(&wal, (i % 2) as usize, &distinct(i));
    }
    (fs, cfg, wal)
}

#[test]
fn start_after_lsn_skips_checkpointed_records_and_truncation_frees_segments() {
    let (fs, cfg, wal) = three_hundred_over_two_streams(10);
    let before = wal.stats();
    let t = wal.truncate_before(201).unwrap();
    assert!(t.segments_removed > 0 && t.bytes_freed > 0);
    let after = wal.stats();
    assert_eq!(after.segments, before.segments - t.segments_removed);
    assert!(wal.disk_usage_bytes() < before.disk_usage_bytes);
    wal.close().unwrap();
    drop(wal);
    let (_w, stats, got) = open(Arc::new(fs.clone()), &cfg, 200).unwrap();
    assert_eq!(got.first().map(|r| r.0), Some(201));
    assert_eq!(got.last().map(|r| r.0), Some(300));
    assert!(stats.skipped_before_start < 200);
    // Starting from an older checkpoint than the truncation: reported.
    let e = open(Arc::new(fs.clone()), &cfg, 0);
    assert!(
        e.is_err()
            || e.as_ref()
                .is_ok_and(|r| r.2.first().map(|x| x.0) == Some(1))
    );
}

/// A checkpoint's replay LSN lets the log drop the cached pages of the
/// sealed segments wholly before it (a restart from that checkpoint reads
/// none of them): at LSN 151 of 300 some, the others only at a later LSN;
/// each segment once; never the two active ones; and every record stays.
#[test]
fn cached_pages_are_released_only_for_segments_wholly_before_the_lsn() {
    let (fs, cfg, wal) = three_hundred_over_two_streams(14);
    let releases = || fs.stats().cache_releases;
    assert_eq!(wal.release_cache_before(1), 0);
    let first = wal.release_cache_before(151);
    assert!(first > 0, "no segment released before LSN 151");
    assert_eq!(releases(), first as u64);
    // Each segment once.
    assert_eq!(wal.release_cache_before(151), 0);
    let all_sealed = wal.release_cache_before(u64::MAX);
    assert!(all_sealed > 0);
    let stats = wal.stats();
    assert_eq!(
        first + all_sealed,
        stats.segments - 2,
        "every segment but the two active ones"
    );
    assert_eq!(releases(), (first + all_sealed) as u64);
    // Released, not removed: recovery from the start still reads them all.
    wal.close().unwrap();
    drop(wal);
    let (_w, _, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got.len(), 300);
}

/// Segments a checkpoint covers whole (the next segment of their stream
/// starts at or below the first LSN it lacks) are not read: garbage in
/// them changes nothing. A configuration that reads covered records reads
/// them, and steps over the garbage; a segment holding any record past the
/// checkpoint is read, and the garbage is corruption.
#[test]
fn segments_a_checkpoint_covers_whole_are_not_read() {
    let (fs, cfg, wal) = three_hundred_over_two_streams(12);
    wal.close().unwrap();
    drop(wal);
    let mut next_starts = Vec::new();
    for dir in ["/data/wal0", "/data/wal1"] {
        let segs = segments(&fs, dir);
        assert!(segs.len() >= 3, "{segs:?}");
        let len = fs.written_len(&segs[0]).unwrap();
        let junk = vec![0xa5u8; (len - SEGMENT_HEADER_BYTES as u64) as usize];
        fs.write_file_raw(&segs[0], SEGMENT_HEADER_BYTES as u64, &junk)
            .unwrap();
        // The file name ends in the segment's first LSN.
        let name = segs[1].file_stem().unwrap().to_str().unwrap();
        next_starts.push(name.rsplit('-').next().unwrap().parse::<u64>().unwrap());
    }
    let covered = *next_starts.iter().max().unwrap() - 1;
    assert!(covered < 200, "{next_starts:?}");

    let lsns = |got: &[Rec]| got.iter().map(|r| r.0).collect::<Vec<_>>();
    let (w, stats, got) = open(Arc::new(fs.clone()), &cfg, covered).unwrap();
    assert_eq!(lsns(&got), (covered + 1..=300).collect::<Vec<_>>());
    assert!(got.iter().all(|r| r.2 == distinct(r.0 as u32 - 1)));
    assert_eq!(stats.unread_segments, 2);
    assert!(stats.skipped_checkpointed_damage.is_empty());
    drop(w);

    let mut reading = cfg.clone();
    reading.read_covered = Some(|_| false);
    let (w, stats, got) = open(Arc::new(fs.clone()), &reading, covered).unwrap();
    assert_eq!(lsns(&got), (covered + 1..=300).collect::<Vec<_>>());
    assert_eq!(stats.unread_segments, 0);
    assert_eq!(stats.skipped_checkpointed_damage.len(), 2);
    drop(w);

    let short = *next_starts.iter().min().unwrap() - 2;
    let err = open(Arc::new(fs.clone()), &cfg, short).unwrap_err();
    assert!(matches!(err, WalError::Corruption { .. }), "{err}");
}

#[test]
fn listener_and_config_validation() {
    let fs = FaultFs::new(11);
    let cfg = sim_config(1, 64 * 1024);
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    wal.set_durable_listener(Box::new(move |d, _| s2.lock().push(d)));
    let lsn = put_full(&wal, 0, b"a");
    wal.close().unwrap();
    assert_eq!(*seen.lock().last().unwrap(), lsn);
    assert!(matches!(
        wal.append(0, 0, Durability::Full, &mut |b: &mut Vec<u8>| b.push(1)),
        Err(WalError::Closed)
    ));
    assert!(wal.close().is_ok(), "close is idempotent");

    let mut bad = WalConfig::new(vec![]);
    assert!(bad.validate().is_err());
    bad.dirs = sim_dirs(1);
    assert!(bad.validate().is_ok());
    bad.segment_size_bytes = 10;
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("segment_size_bytes"), "{e}");
}
