//! Simulated power loss, many seeds: the WAL runs on `FaultFs`, concurrent
//! appenders mix `Full` and `Delayed` writes across 1-3 streams, faults are
//! injected (failed fsync, failed write, full disk, checkpoints that truncate
//! the log), the power is cut with a random crash mode and sometimes random
//! bit flips, or the process is killed (the page cache survives, unsynced),
//! and recovery must:
//! - never panic;
//! - return a gap-free prefix of LSNs;
//! - return only payloads that were appended, byte for byte;
//! - return every LSN <= the durable LSN observed before the crash;
//! - report corruption (Strict refuses to start) rather than skip it, and
//!   under TolerateCorruption say what it dropped;
//! - while running, sync every `Delayed` record left pending by itself
//!   within its flush deadline (checked in some cycles).
//!
//! Each seed also picks how many batches a stream may have between write
//! and fsync (1-4) and how long an fsync takes, so crashes hit pipelined
//! group commit with several fsyncs in flight.
//!
//! `WAL_SEEDS=n` runs n seeds (default 200); `WAL_SEED=s` replays one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wal_support;

use durakv_engine::io::{CrashMode, CrashReport, CrashSpec, FaultFs};
use durakv_engine::wal::{Preallocate, RecoveryMode, Wal};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use wal_support::*;

/// The cycle running now, for the watchdog: its context, its log, and
/// since when.
type Running = Option<(String, Weak<Wal>, Instant)>;
static RUNNING: Mutex<Running> = Mutex::new(None);

/// A cycle takes well under a second; one that has not ended after
/// `STALL` is stuck. Says where, with the log's state, and ends the run,
/// rather than leave CI waiting for its time limit with nothing printed.
const STALL: Duration = Duration::from_secs(180);

fn watchdog() {
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_secs(5));
        let running = RUNNING.lock().unwrap();
        if let Some((ctx, wal, since)) = &*running {
            if since.elapsed() > STALL {
                let state = wal
                    .upgrade()
                    .map_or_else(|| "not open".to_string(), |w| w.describe());
                // Straight to the descriptor: the test harness captures
                // `eprintln!`, and this process is about to end.
                let _ = writeln!(
                    std::io::stderr(),
                    "{ctx}: stalled for {:?}; the log:\n{state}",
                    since.elapsed()
                );
                std::process::exit(101);
            }
        }
    });
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("WAL_SEED") {
        return vec![s.parse().expect("WAL_SEED must be a number")];
    }
    let n = std::env::var("WAL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    (0..n).collect()
}

fn run_seed(seed: u64) {
    let _guard = SeedGuard(format!("seed {seed} (replay with WAL_SEED={seed})"));
    let mut rng = StdRng::seed_from_u64(seed);
    // Separate, so the power losses of each seed stay what they were.
    let mut kill_rng = StdRng::seed_from_u64(seed ^ 0x6b69_6c6c);
    let streams = rng.gen_range(1..=3);
    let segment_size = [4096u64, 8192, 32768][rng.gen_range(0..3)];
    let mut cfg = sim_config(streams, segment_size);
    cfg.preallocate = [
        Preallocate::Auto,
        Preallocate::Zeros,
        Preallocate::Fallocate,
    ][rng.gen_range(0..3)];
    let payload_max = [64usize, 700, 3000][rng.gen_range(0..3)];
    // Pipelined group commit, from its own generator so that the choices
    // above stay what they were for each seed: up to four batches between
    // write and fsync, overlapping at once, on a disk whose fsyncs take long
    // enough to overlap.
    let mut pipe_rng = StdRng::seed_from_u64(seed ^ 0x7069_7065);
    cfg.syncs_in_flight = pipe_rng.gen_range(1..=4);
    cfg.sync_overlap_us = 0;
    let sync_latency = Duration::from_micros([0, 50, 300][pipe_rng.gen_range(0..3)]);
    // Batches that end their page (format version 4): none, every one, or
    // the long ones; from its own generator too.
    let mut page_rng = StdRng::seed_from_u64(seed ^ 0x7061_6765);
    cfg.page_end_min_bytes = [u64::MAX, 0, 512, 4096][page_rng.gen_range(0..4)];
    // A third of the seeds run as on a bandwidth-bound disk: batches cut
    // where a page fills, short ones waiting to fill theirs, under either
    // ordering (own generator).
    let mut bound_rng = StdRng::seed_from_u64(seed ^ 0x6275_6e64);
    cfg.assume_bandwidth_bound = bound_rng.gen_range(0..3) == 0;
    cfg.total_order = bound_rng.gen_bool(0.5);
    // A quarter of the seeds keep fsyncs from overlapping until they are a
    // second old, as on a fast disk, where half of the workload's appends
    // are written and synced by the appending thread itself (`Wal::lead`);
    // with an overlap age of 0 every fsync counts as slow and nobody leads.
    let mut lead_rng = StdRng::seed_from_u64(seed ^ 0x6c65_6164);
    if lead_rng.gen_range(0..4) == 0 {
        cfg.sync_overlap_us = 1_000_000;
        // Half of those gather: a batch waits for the other appender while
        // it is between two appends (own generator).
        let mut gather_rng = StdRng::seed_from_u64(seed ^ 0x6761_7468);
        if gather_rng.gen_bool(0.5) {
            cfg.sync_gather_writers = 1;
        }
    } else if StdRng::seed_from_u64(seed ^ 0x6576_656e).gen_range(0..3) == 0 {
        // A third of the others overlap from 200 µs: with fsyncs of 300 µs
        // their batches start evenly through each fsync, with quicker ones
        // a young fsync is followed (own generator).
        cfg.sync_overlap_us = 200;
    }

    // Whether a cycle checks that the delayed records left at its end
    // reach the disk by themselves (own generator).
    let mut flush_rng = StdRng::seed_from_u64(seed ^ 0x666c_7573);
    let mut fs = FaultFs::new(seed);
    fs.set_sync_latency(sync_latency);
    let appended = Appended::default();
    let mut checkpoint = 0u64;
    let mut acked = 0u64;
    let mut flipped = false;
    let cycles = 4;
    for cycle in 0..=cycles {
        let ctx = format!(
            "seed {seed} cycle {cycle} ({streams} streams, {segment_size} B segments; replay with WAL_SEED={seed})"
        );
        *RUNNING.lock().unwrap() = Some((format!("{ctx} recovering"), Weak::new(), Instant::now()));
        let (wal, stats, got) = match open(Arc::new(fs.clone()), &cfg, checkpoint) {
            Ok((wal, stats, got)) => {
                check_recovered(&ctx, &got, &stats, &appended, checkpoint, acked);
                (wal, stats, got)
            }
            Err(e) => {
                assert!(
                    flipped,
                    "{ctx}: recovery failed without injected corruption: {e}"
                );
                assert!(
                    e.is_corruption(),
                    "{ctx}: expected a corruption error, got {e}"
                );
                let msg = e.to_string();
                assert!(
                    msg.contains("offset") && msg.contains("LSN"),
                    "{ctx}: {msg}"
                );
                let mut tolerant = cfg.clone();
                tolerant.recovery_mode = RecoveryMode::TolerateCorruption;
                let (wal, stats, got) = open(Arc::new(fs.clone()), &tolerant, checkpoint)
                    .unwrap_or_else(|e| panic!("{ctx}: tolerant recovery failed: {e}"));
                assert!(
                    stats.dropped.is_some(),
                    "{ctx}: tolerant recovery of {msg} reported nothing dropped"
                );
                // Acknowledged records may be gone now, but what is returned
                // is still a correct prefix.
                check_recovered(&ctx, &got, &stats, &appended, checkpoint, 0);
                (wal, stats, got)
            }
        };
        let debug = std::env::var("WAL_DEBUG").is_ok();
        if debug {
            eprintln!("{ctx}: recovered {} records, stats {stats:?}", got.len());
        }
        appended.forget_above(stats.last_lsn);
        let wal = Arc::new(wal);
        *RUNNING.lock().unwrap() = Some((ctx.clone(), Arc::downgrade(&wal), Instant::now()));
        if cycle == cycles {
            // Clean shutdown makes everything durable.
            wal.close()
                .unwrap_or_else(|e| panic!("{ctx}: close failed: {e}"));
            assert_eq!(
                wal.durable_lsn(),
                wal.last_lsn(),
                "{ctx}: close left records behind"
            );
            let last = wal.last_lsn();
            drop(wal);
            let (_w, stats, got) = open(Arc::new(fs.clone()), &cfg, checkpoint)
                .unwrap_or_else(|e| panic!("{ctx}: reopen after clean close failed: {e}"));
            check_recovered(&ctx, &got, &stats, &appended, checkpoint, last);
            assert!(
                stats.truncated_tail.is_empty(),
                "{ctx}: clean close left a torn tail"
            );
            return;
        }

        // Faults during this cycle.
        let fault = rng.gen_range(0..10);
        if debug {
            eprintln!("{ctx}: fault {fault}");
        }
        match fault {
            0 => fs.fail_sync_after(rng.gen_range(0..30)),
            1 => fs.fail_write_after(rng.gen_range(0..30)),
            2 => {
                fs.set_space_limit_bytes(Some(fs.used_bytes() + rng.gen_range(0..4 * segment_size)))
            }
            _ => {}
        }
        let n = rng.gen_range(10..120);
        let full_ratio = rng.gen::<f64>();
        workload(
            &wal,
            &appended,
            seed * 1000 + cycle,
            2,
            n,
            full_ratio,
            payload_max,
        );
        if rng.gen_bool(0.4) && wal.failure().is_none() {
            // A checkpoint covering everything durable, then log truncation.
            let c = wal.durable_lsn();
            if c > checkpoint {
                checkpoint = c;
                let _ = wal.truncate_before(c + 1);
            }
            workload(
                &wal,
                &appended,
                seed * 1000 + cycle + 500,
                2,
                n / 2,
                full_ratio,
                payload_max,
            );
        }
        if flush_rng.gen_bool(0.3) {
            // `Delayed` bounds what a crash may lose: with nothing more
            // appended, every record becomes durable within
            // `delayed_flush_ms` (2 ms here; the limit only allows for a
            // loaded machine), or the log fails.
            let t0 = Instant::now();
            while wal.durable_lsn() < wal.last_lsn() && wal.failure().is_none() {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{ctx}: records {}..={} stayed unsynced with nothing appended after them",
                    wal.durable_lsn() + 1,
                    wal.last_lsn()
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if let Some(f) = wal.failure() {
            // Failed: writes refused, nothing past the failure reported durable.
            assert!(
                wal.append(
                    0,
                    0,
                    durakv_engine::Durability::Full,
                    &mut |b: &mut Vec<u8>| b.push(1)
                )
                .is_err(),
                "{ctx}: append accepted after failure ({f})"
            );
        }
        acked = wal.durable_lsn();
        assert!(acked <= wal.last_lsn());

        let mut spec = CrashSpec::new(CrashMode::Random);
        if rng.gen_bool(0.15) {
            spec.bit_flips = rng.gen_range(1..=2);
            spec.flip_suffix = Some(".log".into());
        }
        // Sometimes the process is killed instead: the page cache survives,
        // with whatever was never fsynced, and a later power loss must not
        // lose what the next process recovered from it and built on.
        let (after, report) = if kill_rng.gen_bool(0.3) {
            (fs.kill(), CrashReport::default())
        } else {
            fs.crash_with(&spec)
        };
        if debug {
            eprintln!(
                "{ctx}: acked {acked} last {} failure {:?} crash {report:?}",
                wal.last_lsn(),
                wal.failure()
            );
        }
        flipped = !report.flips.is_empty();
        drop(wal);
        after.set_space_limit_bytes(None);
        fs = after;
    }
}

#[test]
fn crash_recovery_many_seeds() {
    watchdog();
    for seed in seeds() {
        run_seed(seed);
    }
}
