//! Log truncation under steady load, and a model-based run with
//! checkpoints, power losses, clean restarts and damaged checkpoints as
//! random operations. Every write is `full` and waited for, so after any
//! crash the recovered keyspace must equal the keyspace just before it; the
//! log's disk use must stay bounded however much is written; and truncation
//! must never remove a segment recovery still needs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;

use checkpoint_support::*;
use durakv_engine::checkpoint::format::FileKind;
use durakv_engine::io::{CrashMode, CrashSpec, FaultFs};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn log_disk_use_stays_bounded_under_steady_writes() {
    let lock_dir = tempfile::tempdir().unwrap();
    let mut fs = FaultFs::new(21);
    let cfg = config(lock_dir.path(), 8);
    let keep = cfg.checkpoint_keep as u64;
    let streams = cfg.wal_dirs.len() as u64;
    let mut store = open(&cfg, &fs);
    let mut rng = StdRng::seed_from_u64(21);
    let mut now = START_MS;
    const INTERVALS: usize = 20;
    const WRITES_PER_INTERVAL: usize = 300;
    let mut interval_bytes = Vec::new();
    let mut max_usage = 0u64;
    for i in 0..INTERVALS {
        let written_before = store.wal.stats().bytes_written;
        for _ in 0..WRITES_PER_INTERVAL {
            now += 5;
            random_logged_txn(&store, &mut rng, now, true);
        }
        interval_bytes.push(store.wal.stats().bytes_written - written_before);
        store.checkpoint().unwrap();
        let usage = store.wal.disk_usage_bytes();
        max_usage = max_usage.max(usage);
        // Log since the oldest kept checkpoint (keep + 1 intervals), plus
        // per stream a partly filled segment at each end, the active one
        // and a preallocated spare.
        let recent: u64 = interval_bytes.iter().rev().take(keep as usize + 1).sum();
        let bound = recent + streams * 4 * SEGMENT_SIZE_BYTES;
        assert!(
            usage <= bound,
            "interval {i}: log uses {usage} bytes, bound {bound}"
        );
    }
    let total: u64 = interval_bytes.iter().sum();
    assert!(
        max_usage * 4 < total,
        "log use {max_usage} did not stay well below the {total} bytes written"
    );
    // After truncation and a power loss, recovery is complete.
    for _ in 0..100 {
        now += 5;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let want = dump(&store.keyspace);
    let (image, _) = fs.crash_with(&CrashSpec::new(CrashMode::Random));
    drop(store);
    fs = image;
    store = open(&cfg, &fs);
    if let Some(d) = diff(&want, &dump(&store.keyspace)) {
        panic!("after truncation and a crash: {d}");
    }
}

fn run_model(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let lock_dir = tempfile::tempdir().unwrap();
    let mut cfg = config(lock_dir.path(), 8);
    cfg.checkpoint_keep = rng.gen_range(0..3);
    let mut fs = FaultFs::new(seed);
    let mut store = open(&cfg, &fs);
    let mut now = START_MS;
    let mut checkpoints = 0;
    for step in 0..400 {
        now += rng.gen_range(1..300);
        let roll = rng.gen_range(0..1000);
        if roll < 880 {
            random_logged_txn(&store, &mut rng, now, true);
        } else if roll < 950 {
            store
                .checkpoint()
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: checkpoint: {e}"));
            checkpoints += 1;
        } else if roll < 985 {
            let want = dump(&store.keyspace);
            let spec = CrashSpec::new(CrashMode::Random);
            let (image, _) = fs.crash_with(&spec);
            drop(store);
            fs = image;
            // Sometimes the newest checkpoint is damaged too (keep >= 1 can absorb it).
            let mut damaged = false;
            if cfg.checkpoint_keep >= 1 && rng.gen_bool(0.3) {
                let ck = durakv_engine::checkpoint::Checkpointer::open(
                    std::sync::Arc::new(fs.clone()),
                    durakv_engine::checkpoint::CheckpointConfig::new(checkpoint_dir()),
                )
                .unwrap();
                let snaps: Vec<_> = ck
                    .files()
                    .unwrap()
                    .into_iter()
                    .filter(|f| f.kind == FileKind::Snapshot)
                    .collect();
                if snaps.len() >= 2 {
                    let len = fs.read_file(&snaps[0].path).unwrap().len() as u64;
                    fs.corrupt_byte(&snaps[0].path, rng.gen_range(0..len), 0x08)
                        .unwrap();
                    damaged = true;
                }
            }
            store = open(&cfg, &fs);
            if damaged {
                assert_eq!(
                    store.checkpoint_recovery.fallbacks.len(),
                    1,
                    "seed {seed} step {step}"
                );
            }
            if let Some(d) = diff(&want, &dump(&store.keyspace)) {
                panic!(
                    "seed {seed} step {step} (keep {}, damaged newest: {damaged}): {d}",
                    cfg.checkpoint_keep
                );
            }
        } else {
            let want = dump(&store.keyspace);
            store.close().unwrap();
            drop(store);
            store = open(&cfg, &fs);
            if let Some(d) = diff(&want, &dump(&store.keyspace)) {
                panic!("seed {seed} step {step}: clean restart: {d}");
            }
        }
    }
    assert!(checkpoints > 0);
}

#[test]
fn random_checkpoints_crashes_and_damage_match_the_model() {
    for_each_seed(
        10,
        "random_checkpoints_crashes_and_damage_match_the_model",
        run_model,
    );
}
