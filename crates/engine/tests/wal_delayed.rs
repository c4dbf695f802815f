//! The `Delayed` durability bound: a crash loses at most the records still
//! inside the flush window, and only the newest ones. Tested through
//! `FaultFs` and the WAL's own counters, never with wall-clock assertions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wal_support;

use durakv_engine::io::{CrashMode, CrashSpec, FaultFs};
use durakv_engine::wal::format::RECORD_HEADER_BYTES;
use durakv_engine::Durability;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Duration;
use wal_support::*;

const PAYLOAD_BYTES: usize = 100;
const RECORD_BYTES: u64 = (RECORD_HEADER_BYTES + PAYLOAD_BYTES) as u64;

fn drop_unsynced(fs: &FaultFs) -> FaultFs {
    let mut spec = CrashSpec::new(CrashMode::DropUnsynced);
    spec.keep_unsynced_entries = Some(false);
    fs.crash_with(&spec).0
}

/// With the timer effectively off, the writer must flush whenever
/// `delayed_flush_bytes` are pending, so once it is idle fewer than that many
/// bytes can be lost, and what is lost is a suffix.
#[test]
fn delayed_loss_is_bounded_by_flush_bytes() {
    for seed in 0..20u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFs::new(seed);
        let mut cfg = sim_config(1, 64 * 1024);
        cfg.delayed_flush_ms = 10_000;
        cfg.delayed_flush_bytes =
            rng.gen_range(1..20) * RECORD_BYTES + rng.gen_range(0..RECORD_BYTES);
        let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
        let appended = Appended::default();
        let n = rng.gen_range(1..200);
        for i in 0..n {
            let p: Vec<u8> = (0..PAYLOAD_BYTES).map(|k| (i + k) as u8 | 1).collect();
            let lsn = wal
                .append(0, 0, Durability::Delayed, &mut |b: &mut Vec<u8>| {
                    b.extend_from_slice(&p)
                })
                .unwrap();
            appended.insert(lsn, 0, p);
        }
        // The writer must reach a state where everything not durable is
        // still pending and below the threshold. (If it never flushed, this
        // loop would give up: a liveness failure, not a timing assertion.)
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let st = wal.stats();
            if st.pending_bytes < cfg.delayed_flush_bytes
                && st.durable_lsn + st.pending_bytes / RECORD_BYTES == st.last_lsn
            {
                break;
            }
            assert!(
                std::time::Instant::now() < give_up,
                "seed {seed}: writer never flushed ({} bytes pending, flush at {}, durable {} of {})",
                st.pending_bytes,
                cfg.delayed_flush_bytes,
                st.durable_lsn,
                st.last_lsn
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let durable = wal.durable_lsn();
        let after = drop_unsynced(&fs);
        drop(wal);
        let (_w, stats, got) = open(Arc::new(after), &cfg, 0).unwrap();
        let ctx = format!("delayed seed {seed}");
        check_recovered(&ctx, &got, &stats, &appended, 0, durable);
        let lost = n as u64 - got.len() as u64;
        assert!(
            lost * RECORD_BYTES < cfg.delayed_flush_bytes,
            "{ctx}: lost {lost} records ({} bytes), window is {} bytes",
            lost * RECORD_BYTES,
            cfg.delayed_flush_bytes
        );
    }
}

/// The timer flushes without any `Full` append or sync request (liveness;
/// the test only fails by timing out, it asserts no duration).
#[test]
fn delayed_records_become_durable_on_the_timer() {
    let fs = FaultFs::new(1);
    let mut cfg = sim_config(2, 64 * 1024);
    cfg.delayed_flush_ms = 1;
    cfg.delayed_flush_bytes = cfg.max_pending_bytes;
    let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    let a = wal
        .append(0, 0, Durability::Delayed, &mut |b: &mut Vec<u8>| b.push(1))
        .unwrap();
    let b = wal
        .append(1, 0, Durability::Delayed, &mut |b: &mut Vec<u8>| b.push(2))
        .unwrap();
    wal.wait_durable(a.max(b)).unwrap();
    let after = drop_unsynced(&fs);
    drop(wal);
    let (_w, _, got) = open(Arc::new(after), &cfg, 0).unwrap();
    assert_eq!(got.len(), 2);
}

/// A `Full` record is acknowledged only once every earlier `Delayed` record,
/// in any stream, is durable too: a crash right after the acknowledgement
/// keeps all of them.
#[test]
fn full_ack_covers_earlier_delayed_records_in_other_streams() {
    for seed in 0..20u64 {
        let fs = FaultFs::new(seed);
        let mut cfg = sim_config(3, 64 * 1024);
        cfg.delayed_flush_ms = 10_000;
        cfg.delayed_flush_bytes = cfg.max_pending_bytes;
        let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
        let appended = Appended::default();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut last = 0;
        for _ in 0..rng.gen_range(1..30) {
            let p = payload(&mut rng, 200);
            let s = rng.gen_range(0..3);
            last = wal
                .append(s, 5, Durability::Delayed, &mut |b: &mut Vec<u8>| {
                    b.extend_from_slice(&p)
                })
                .unwrap();
            appended.insert(last, 5, p);
        }
        let p = payload(&mut rng, 200);
        let full = wal
            .append(
                rng.gen_range(0..3),
                5,
                Durability::Full,
                &mut |b: &mut Vec<u8>| b.extend_from_slice(&p),
            )
            .unwrap();
        appended.insert(full, 5, p);
        assert!(full > last);
        wal.wait_durable(full).unwrap();
        let after = drop_unsynced(&fs);
        drop(wal);
        let (_w, stats, got) = open(Arc::new(after), &cfg, 0).unwrap();
        check_recovered(
            &format!("full-after-delayed seed {seed}"),
            &got,
            &stats,
            &appended,
            0,
            full,
        );
    }
}
