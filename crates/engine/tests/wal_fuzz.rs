//! Arbitrary bytes never make recovery panic or invent data. Valid logs are
//! written on `FaultFs`, then mangled (random byte overwrites, zeroed
//! ranges, truncation, appended garbage, whole garbage segments with valid
//! names); recovery in both modes must either fail cleanly or return a
//! gap-free prefix of exactly what was appended.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wal_support;

use durakv_engine::io::{FaultFs, FileSystem};
use durakv_engine::wal::format::{segment_file_name, SegmentHeader};
use durakv_engine::wal::RecoveryMode;
use durakv_engine::Durability;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use wal_support::*;

fn seeds() -> u64 {
    std::env::var("WAL_FUZZ_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}

fn mangle(fs: &FaultFs, rng: &mut StdRng) {
    let files = wal_support::segment_files(fs);
    for _ in 0..rng.gen_range(1..6) {
        let Some(path) = files.get(rng.gen_range(0..files.len().max(1))) else {
            return;
        };
        let data = fs.read_file(path).unwrap_or_default();
        if data.is_empty() {
            continue;
        }
        let written = (fs.written_len(path).unwrap_or(0) as usize).clamp(1, data.len());
        match rng.gen_range(0..6) {
            0 => {
                let off = rng.gen_range(0..written) as u64;
                fs.corrupt_byte(path, off, rng.gen_range(1..=255)).unwrap();
            }
            1 => {
                let off = rng.gen_range(0..written);
                let len = rng.gen_range(1..600).min(data.len().saturating_sub(off));
                fs.write_file_raw(path, off as u64, &vec![0u8; len])
                    .unwrap();
            }
            2 => {
                let off = rng.gen_range(0..written);
                let junk: Vec<u8> = (0..rng.gen_range(1..200)).map(|_| rng.gen()).collect();
                fs.write_file_raw(path, off as u64, &junk).unwrap();
            }
            3 => {
                let f = fs.open_file(path).unwrap();
                f.set_len(rng.gen_range(0..written as u64 + 100)).unwrap();
                f.sync_all().unwrap();
            }
            4 => {
                // A garbage segment with a plausible name (maybe a valid header).
                let dir = path.parent().unwrap().to_path_buf();
                let stream: u32 = dir
                    .to_string_lossy()
                    .chars()
                    .last()
                    .unwrap()
                    .to_digit(10)
                    .unwrap();
                let name = segment_file_name(stream, rng.gen_range(1..4), rng.gen_range(1..500));
                let p = dir.join(name);
                let f = fs.create_file(&p).unwrap();
                let mut bytes: Vec<u8> = (0..rng.gen_range(0..3000)).map(|_| rng.gen()).collect();
                if rng.gen_bool(0.5) && bytes.len() >= 64 {
                    let h = SegmentHeader {
                        version: durakv_engine::wal::format::FORMAT_VERSION,
                        stream_id: stream,
                        stream_count: 2,
                        salt: rng.gen(),
                        epoch: 1,
                        epoch_start_lsn: 1,
                        first_lsn: 1,
                        created_ms: 0,
                    };
                    bytes[..64].copy_from_slice(&h.encode());
                }
                f.write_all_at(&bytes, 0).unwrap();
                f.sync_all().unwrap();
                fs.sync_dir(&dir).unwrap();
            }
            _ => {
                let off = data.len() as u64;
                let junk: Vec<u8> = (0..rng.gen_range(1..500)).map(|_| rng.gen()).collect();
                fs.write_file_raw(path, off, &junk).unwrap();
            }
        }
    }
}

#[test]
fn mangled_logs_never_panic_or_invent_records() {
    for seed in 0..seeds() {
        let _guard = SeedGuard(format!("fuzz seed {seed}"));
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFs::new(seed);
        let streams = rng.gen_range(1..=2);
        let mut cfg = sim_config(streams, [4096, 16384][rng.gen_range(0..2)]);
        // Odd seeds pad every batch to its page's end (format version 4).
        if seed % 2 == 1 {
            cfg.page_end_min_bytes = 0;
        }
        let appended = Appended::default();
        {
            let (wal, _, _) = open(Arc::new(fs.clone()), &cfg, 0).unwrap();
            for _ in 0..rng.gen_range(1..80) {
                let p = payload(&mut rng, 300);
                let level = if rng.gen_bool(0.5) {
                    Durability::Full
                } else {
                    Durability::Delayed
                };
                let lsn = wal
                    .append(
                        rng.gen_range(0..streams),
                        3,
                        level,
                        &mut |b: &mut Vec<u8>| b.extend_from_slice(&p),
                    )
                    .unwrap();
                appended.insert(lsn, 3, p);
            }
            wal.close().unwrap();
        }
        mangle(&fs, &mut rng);
        for mode in [RecoveryMode::Strict, RecoveryMode::TolerateCorruption] {
            let mut c = cfg.clone();
            c.recovery_mode = mode;
            let image = fs.crash();
            let ctx = format!("fuzz seed {seed} {mode:?} (WAL_FUZZ_SEEDS to widen)");
            match open(Arc::new(image), &c, 0) {
                Ok((_w, stats, got)) => check_recovered(&ctx, &got, &stats, &appended, 0, 0),
                Err(e) => {
                    // Clean refusal only: corruption or configuration errors.
                    let msg = e.to_string();
                    assert!(!msg.is_empty(), "{ctx}");
                    if mode == RecoveryMode::TolerateCorruption {
                        assert!(
                            !e.is_corruption(),
                            "{ctx}: tolerant mode returned a corruption error: {msg}"
                        );
                    }
                }
            }
        }
    }
}
