//! A process kill followed, later, by a power loss. After `kill -9` the
//! page cache survives, so recovery reads records that may never have
//! reached the disk; the next process then acknowledges writes that come
//! after them. Unless recovery makes those records durable before it counts
//! them durable, a power loss afterwards loses them while keeping later,
//! acknowledged records: acknowledged data lost, or a log that is no prefix.
//!
//! Two ways to get there: a kill between a batch's write and its fsync
//! (scenario A), and an fsync that failed and left the batch's pages marked
//! clean although they may not be on disk (scenario B; a later fsync of the
//! same file does not write them again).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wal_support;

use durakv_engine::io::{CrashMode, CrashSpec, FaultFs, FileSystem};
use durakv_engine::wal::{Wal, WalConfig, WalError};
use durakv_engine::Durability;
use std::sync::Arc;
use std::time::Duration;
use wal_support::*;

const SEEDS: u64 = 12;

fn put(wal: &Wal, appended: &Appended, stream: usize, level: Durability, p: Vec<u8>) -> u64 {
    let lsn = wal
        .append(stream, 5, level, &mut |b: &mut Vec<u8>| {
            b.extend_from_slice(&p)
        })
        .unwrap();
    appended.insert(lsn, 5, p);
    lsn
}

fn put_full(wal: &Wal, appended: &Appended, stream: usize, p: Vec<u8>) -> u64 {
    let lsn = put(wal, appended, stream, Durability::Full, p);
    wal.wait_durable(lsn).unwrap();
    lsn
}

/// Non-zero bytes, different for every `i` (no zero runs that could make a
/// damaged batch look torn).
fn distinct(i: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|k| (i * 31 + k * 7) as u8 | 1)
        .collect()
}

fn wait_for_spares(wal: &Wal) {
    while wal.stats().spare_segments_ready < wal.num_streams() {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The worst power loss: every unsynced byte and directory change is gone.
fn power_loss(fs: &FaultFs) -> FaultFs {
    let mut spec = CrashSpec::new(CrashMode::DropUnsynced);
    spec.keep_unsynced_entries = Some(false);
    fs.crash_with(&spec).0
}

/// Reopens after the power loss: it must succeed and return a gap-free
/// prefix holding every LSN <= `acked`.
fn check_after_power_loss(
    ctx: &str,
    fs: FaultFs,
    cfg: &WalConfig,
    appended: &Appended,
    acked: u64,
) {
    match open(Arc::new(fs), cfg, 0) {
        Ok((_wal, stats, got)) => check_recovered(ctx, &got, &stats, appended, 0, acked),
        Err(e) => panic!("{ctx}: recovery after the power loss failed: {e}"),
    }
}

/// Recovery rewrote the unproven batches, and only them: not the
/// preallocated zeros after them.
fn assert_resynced(ctx: &str, bytes: u64, segment_size_bytes: u64) {
    assert!(
        bytes > 0 && bytes < segment_size_bytes / 4,
        "{ctx}: {bytes} bytes rewritten"
    );
}

#[test]
fn scenario_a_records_recovered_after_a_kill_survive_a_later_power_loss() {
    for seed in 0..SEEDS {
        let ctx = format!("scenario A, seed {seed}");
        let fs = FaultFs::new(seed);
        let gated = GatedFs::new(fs.clone());
        let mut cfg = sim_config(2, 64 * 1024);
        // Delayed records wait for an explicit sync, not for a timer.
        cfg.delayed_flush_ms = 10_000;
        cfg.delayed_flush_bytes = 60 * 1024;
        let appended = Appended::default();

        let (wal, _, _) = open(Arc::new(gated.clone()), &cfg, 0).unwrap();
        wait_for_spares(&wal);
        for i in 0..4 {
            put_full(&wal, &appended, (i % 2) as usize, distinct(i, 100));
        }
        // Stream 0 writes a batch of delayed records and is killed inside
        // the fsync: the batch is in the page cache only.
        gated.close_gate();
        for i in 4..9 {
            put(&wal, &appended, 0, Durability::Delayed, distinct(i, 300));
        }
        wal.request_sync();
        gated.wait_held(1);
        let fs = fs.kill();
        gated.open_gate();
        drop(wal);

        // The next process recovers everything, the unsynced batch too, and
        // acknowledges writes made after it, all on the other stream (whose
        // fsyncs never touch stream 0's file).
        let last = appended.max_lsn();
        recover_ack_then_lose_power(&ctx, &fs, &cfg, &appended, last, 1, 9..15);
    }
}

/// The next process recovers everything up to `last`, acknowledges `more`
/// full writes on `stream`, then the power fails: nothing acknowledged, and
/// nothing those writes were built on, may be lost.
fn recover_ack_then_lose_power(
    ctx: &str,
    fs: &FaultFs,
    cfg: &WalConfig,
    appended: &Appended,
    last: u64,
    stream: usize,
    more: std::ops::Range<u64>,
) {
    let (wal, stats, got) = open(Arc::new(fs.clone()), cfg, 0).unwrap();
    check_recovered(ctx, &got, &stats, appended, 0, last);
    assert_resynced(ctx, stats.resynced_bytes, cfg.segment_size_bytes);
    for i in more {
        put_full(&wal, appended, stream, distinct(i, 100));
    }
    let acked = wal.durable_lsn();
    assert_eq!(acked, wal.last_lsn(), "{ctx}");
    let after = power_loss(fs);
    drop(wal);
    check_after_power_loss(ctx, after, cfg, appended, acked);
}

#[test]
fn scenario_b_a_batch_whose_fsync_failed_is_made_durable_by_the_next_recovery() {
    for seed in 0..SEEDS {
        let ctx = format!("scenario B, seed {seed}");
        let fs = FaultFs::new(seed);
        let cfg = sim_config(1, 64 * 1024);
        let appended = Appended::default();

        let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
        wait_for_spares(&wal);
        let ok = (0..3)
            .map(|i| put_full(&wal, &appended, 0, distinct(i, 100)))
            .max()
            .unwrap();
        // The batch's fsync fails: the kernel marks its pages clean whether
        // or not they reached the disk. Several sectors, so a power loss
        // almost surely shows which did not.
        fs.fail_next_sync();
        let bad = put(&wal, &appended, 0, Durability::Full, distinct(3, 4000));
        assert!(
            matches!(wal.wait_durable(bad), Err(WalError::Failed(_))),
            "{ctx}"
        );
        assert_eq!(wal.durable_lsn(), ok, "{ctx}");
        let fs = fs.kill();
        drop(wal);

        // Read back from the page cache, the failed batch looks fine.
        recover_ack_then_lose_power(&ctx, &fs, &cfg, &appended, bad, 0, 4..8);
    }
}

/// After a clean close nothing needs proving but the last batch of each
/// stream (its own hint cannot cover it), and recovery after a power loss
/// rewrites only what lies above the largest hint.
#[test]
fn resync_after_a_clean_close_is_one_batch_per_stream() {
    let fs = FaultFs::new(99);
    let cfg = sim_config(2, 64 * 1024);
    let appended = Appended::default();
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    for i in 0..40 {
        put_full(&wal, &appended, (i % 2) as usize, distinct(i, 200));
    }
    wal.close().unwrap();
    drop(wal);
    let (wal, stats, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    check_recovered("clean close", &got, &stats, &appended, 0, 40);
    // Each batch here is one 224-byte record: 48 + 224 + 8, padded to 320.
    assert!(
        stats.resynced_bytes > 0 && stats.resynced_bytes <= 2 * 320,
        "{} bytes rewritten",
        stats.resynced_bytes
    );
    drop(wal);
}

/// The last batch's zero padding may be missing (the file ends right after
/// its trailer); the batch is still valid and the resync must not read past
/// the end of the file.
#[test]
fn resync_stops_at_the_end_of_the_file() {
    let fs = FaultFs::new(98);
    let cfg = sim_config(1, 64 * 1024);
    let appended = Appended::default();
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    // 48 + 24 + 40 + 8 = 120 bytes, padded to 128.
    put_full(&wal, &appended, 0, distinct(1, 40));
    wal.close().unwrap();
    drop(wal);
    let seg = wal_support::segment_files(&fs).remove(0);
    let f = fs.open_file(&seg).unwrap();
    f.set_len(64 + 120).unwrap();
    f.sync_all().unwrap();
    let (_wal, stats, got) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    check_recovered("cut padding", &got, &stats, &appended, 0, 1);
    assert_eq!(stats.resynced_bytes, 120);
}
