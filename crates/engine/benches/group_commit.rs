//! Group-commit benchmark: N threads append `Full` records and wait for
//! durability, on tmpfs (the CPU cost of the commit path) and on a real disk
//! (`WAL_BENCH_DIR`, default the system temp dir: fsync-bound, where group
//! size matters). Also the append path alone (`Delayed`, no waiting).
//!
//! `cargo bench -p durakv-engine --bench group_commit`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use durakv_engine::io::OsFs;
use durakv_engine::wal::{Wal, WalConfig};
use durakv_engine::Durability;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PAYLOAD_BYTES: usize = 128;

fn open_wal(root: &Path, streams: usize) -> Arc<Wal> {
    let dirs = (0..streams).map(|i| root.join(format!("wal{i}"))).collect();
    let cfg = WalConfig::new(dirs);
    let (wal, _) = Wal::open(Arc::new(OsFs), cfg, 0, &mut |_, _, _| Ok(())).expect("open wal");
    let wal = Arc::new(wal);
    while wal.stats().spare_segments_ready < streams {
        std::thread::sleep(Duration::from_millis(5));
    }
    wal
}

/// `iters` Full appends spread over `threads` threads; returns wall time.
fn run_full(wal: &Arc<Wal>, threads: usize, iters: u64) -> Duration {
    let per = iters.div_ceil(threads as u64);
    let t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let p = [0x5au8; PAYLOAD_BYTES];
                for i in 0..per {
                    let s = (t + i as usize) % wal.num_streams();
                    let lsn = wal
                        .append(s, 0, Durability::Full, &mut |b: &mut Vec<u8>| {
                            b.extend_from_slice(&p)
                        })
                        .expect("append");
                    wal.wait_durable(lsn).expect("durable");
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("thread");
    }
    t0.elapsed()
}

fn roots() -> Vec<(&'static str, PathBuf)> {
    let mut v = Vec::new();
    if Path::new("/dev/shm").is_dir() {
        v.push(("tmpfs", PathBuf::from("/dev/shm")));
    }
    let disk = std::env::var("WAL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    v.push(("disk", disk));
    v
}

fn bench_full(c: &mut Criterion) {
    for (label, root) in roots() {
        let mut g = c.benchmark_group(format!("group_commit_full_{label}"));
        g.throughput(Throughput::Elements(1));
        g.sample_size(10);
        g.measurement_time(Duration::from_secs(3));
        for (streams, threads) in [(1, 1), (1, 8), (1, 32), (2, 32)] {
            let tmp = tempfile::tempdir_in(&root).expect("tempdir");
            let wal = open_wal(tmp.path(), streams);
            g.bench_with_input(
                BenchmarkId::from_parameter(format!("streams={streams}/threads={threads}")),
                &threads,
                |b, &threads| b.iter_custom(|iters| run_full(&wal, threads, iters)),
            );
            let st = wal.stats();
            eprintln!(
                "  {label} streams={streams} threads={threads}: avg group {:.1} records/fsync, \
                 write+fdatasync avg {:.0} us, max {} us",
                st.avg_records_per_fsync, st.avg_fsync_us, st.max_fsync_us
            );
            wal.close().expect("close");
        }
        g.finish();
    }
}

fn bench_append_only(c: &mut Criterion) {
    let tmp =
        tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().expect("tempdir"));
    let wal = open_wal(tmp.path(), 1);
    let mut g = c.benchmark_group("append_delayed");
    g.throughput(Throughput::Elements(1));
    let p = [0x5au8; PAYLOAD_BYTES];
    g.measurement_time(Duration::from_secs(2));
    g.bench_function("payload=128B", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                wal.append(0, 0, Durability::Delayed, &mut |buf: &mut Vec<u8>| {
                    buf.extend_from_slice(&p)
                })
                .expect("append");
            }
            let el = t0.elapsed();
            // Keep tmpfs usage bounded: make it durable, drop old segments.
            let last = wal.last_lsn();
            wal.request_sync();
            wal.wait_durable(last).expect("durable");
            wal.truncate_before(last + 1).expect("truncate");
            el
        })
    });
    g.finish();
    wal.close().expect("close");
}

criterion_group!(benches, bench_full, bench_append_only);
criterion_main!(benches);
