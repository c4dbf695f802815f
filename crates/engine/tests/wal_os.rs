//! The WAL on the real file system (`OsFs`, in a temporary directory):
//! round trips across restarts, segment rotation, several streams, damage
//! made with plain `std::fs`, and the data- and WAL-directory locks. Plus an
//! ignored throughput test that reports records/s, group size and fsync
//! latency.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wal_support;

use durakv_engine::io::OsFs;
use durakv_engine::lock::DirLock;
use durakv_engine::wal::{RecoveryMode, Wal, WalConfig};
use durakv_engine::Durability;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use wal_support::*;

fn config(root: &Path, streams: usize, segment_size_bytes: u64) -> WalConfig {
    let dirs = (0..streams).map(|i| root.join(format!("wal{i}"))).collect();
    let mut c = WalConfig::new(dirs);
    c.segment_size_bytes = segment_size_bytes;
    c
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

#[test]
fn round_trip_rotation_and_restart_on_os_fs() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), 2, 64 * 1024);
    let appended = Appended::default();
    {
        let (wal, stats, got) = open(Arc::new(OsFs), &cfg, 0).unwrap();
        assert!(got.is_empty() && stats.new_epoch);
        let wal = Arc::new(wal);
        workload(&wal, &appended, 1, 4, 500, 0.7, 400);
        wal.close().unwrap();
        assert_eq!(wal.durable_lsn(), 2000);
        let st = wal.stats();
        assert_eq!(st.records, 2000);
        assert!(st.segments > 2, "64 KiB segments must have rotated");
        assert!(st.avg_records_per_fsync >= 1.0);
    }
    for (i, dir) in cfg.dirs.iter().enumerate() {
        for p in segment_files(dir) {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            assert!(name.starts_with(&format!("wal-{i:03}-000001-")), "{name}");
        }
    }
    let (wal, stats, got) = open(Arc::new(OsFs), &cfg, 0).unwrap();
    check_recovered("os round trip", &got, &stats, &appended, 0, 2000);
    assert!(!stats.new_epoch);
    assert_eq!(
        wal.append(0, 1, Durability::Full, &mut |b: &mut Vec<u8>| b.push(1))
            .unwrap(),
        2001
    );
    let t = wal.truncate_before(1500).unwrap();
    assert!(t.segments_removed > 0);
    wal.close().unwrap();
    drop(wal);
    let (_w, stats, got) = open(Arc::new(OsFs), &cfg, 1499).unwrap();
    assert_eq!(got.first().unwrap().0, 1500);
    assert_eq!(got.last().unwrap().0, 2001);
    assert!(stats.truncated_tail.is_empty());
}

#[test]
fn damage_made_with_std_fs_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), 1, 64 * 1024);
    {
        let (wal, _, _) = open(Arc::new(OsFs), &cfg, 0).unwrap();
        for i in 0..50u8 {
            let lsn = wal
                .append(0, 0, Durability::Full, &mut |b: &mut Vec<u8>| {
                    b.extend_from_slice(&[i | 1; 100])
                })
                .unwrap();
            wal.wait_durable(lsn).unwrap();
        }
        wal.close().unwrap();
    }
    let seg = segment_files(&cfg.dirs[0]).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[64 + 48 + 24 + 10] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();
    let err = open(Arc::new(OsFs), &cfg, 0).unwrap_err().to_string();
    assert!(err.contains(&seg.display().to_string()), "{err}");
    assert!(err.contains("offset 64") && err.contains("LSN 1"), "{err}");
    let mut tolerant = cfg.clone();
    tolerant.recovery_mode = RecoveryMode::TolerateCorruption;
    let (_w, stats, got) = open(Arc::new(OsFs), &tolerant, 0).unwrap();
    assert!(got.is_empty());
    assert!(stats.dropped.unwrap().contains("offset 64"));
}

#[test]
fn data_dir_lock_is_exclusive() {
    let tmp = tempfile::tempdir().unwrap();
    let a = DirLock::acquire(tmp.path()).unwrap();
    let e = DirLock::acquire(tmp.path()).unwrap_err().to_string();
    assert!(
        e.contains(&tmp.path().join("LOCK").display().to_string()),
        "{e}"
    );
    assert!(e.contains("another durakv server"), "{e}");
    drop(a);
    DirLock::acquire(tmp.path()).unwrap();
}

#[test]
fn wal_dirs_can_be_locked_and_the_wal_ignores_their_lock_files() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let cfg = WalConfig::new(vec![data.join("wal"), tmp.path().join("elsewhere")]);
    let mut dirs = vec![data.clone()];
    dirs.extend(cfg.dirs.iter().cloned());
    let locks = DirLock::acquire_all(&dirs).unwrap();
    assert_eq!(locks.len(), 3);

    let appended = Appended::default();
    {
        let (wal, _, _) = open(Arc::new(OsFs), &cfg, 0).unwrap();
        let wal = Arc::new(wal);
        workload(&wal, &appended, 3, 2, 50, 1.0, 100);
        wal.close().unwrap();
    }
    let (_wal, stats, got) = open(Arc::new(OsFs), &cfg, 0).unwrap();
    check_recovered("locked wal dirs", &got, &stats, &appended, 0, 100);
    // Only spares are cleaned up; the lock files stay where they are.
    assert!(
        stats
            .removed_files
            .iter()
            .all(|p| p.to_string_lossy().ends_with(".spare")),
        "{:?}",
        stats.removed_files
    );
    for dir in &cfg.dirs {
        let pid = std::fs::read_to_string(dir.join("LOCK")).unwrap();
        assert_eq!(pid, std::process::id().to_string());
    }

    // A second server with its own data directory but the same WAL
    // directory is turned away, naming the shared directory.
    let e = DirLock::acquire_all(&[tmp.path().join("data2"), tmp.path().join("elsewhere")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            &tmp.path()
                .join("elsewhere")
                .join("LOCK")
                .display()
                .to_string()
        ),
        "{e}"
    );
    drop(locks);
}

fn throughput(root: &Path, label: &str, streams: usize, threads: usize, secs: f64, payload: usize) {
    let cfg = config(root, streams, 64 * 1024 * 1024);
    let (wal, _) = Wal::open(Arc::new(OsFs), cfg, 0, &mut |_, _, _| Ok(())).unwrap();
    let wal = Arc::new(wal);
    while wal.stats().spare_segments_ready < streams {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let p = vec![0x5au8; payload];
                let mut n = 0u64;
                let mut lat_us = Vec::new();
                while t0.elapsed().as_secs_f64() < secs {
                    let s = (t + n as usize) % wal.num_streams();
                    let a = Instant::now();
                    let lsn = wal
                        .append(s, 0, Durability::Full, &mut |b: &mut Vec<u8>| {
                            b.extend_from_slice(&p)
                        })
                        .unwrap();
                    wal.wait_durable(lsn).unwrap();
                    lat_us.push(a.elapsed().as_micros() as u64);
                    n += 1;
                }
                lat_us
            })
        })
        .collect();
    let mut lat: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let el = t0.elapsed().as_secs_f64();
    lat.sort_unstable();
    let st = wal.stats();
    println!(
        "{label}: streams={streams} threads={threads} payload={payload}B: {:.0} records/s, \
         avg group {:.1} records/fsync, fsync (write+fdatasync) avg {:.0} us max {} us, \
         commit latency p50 {} us p99 {} us",
        lat.len() as f64 / el,
        st.avg_records_per_fsync,
        st.avg_fsync_us,
        st.max_fsync_us,
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100],
    );
    wal.close().unwrap();
}

/// `cargo test --release -p durakv-engine --test wal_os -- --ignored --nocapture`
/// `WAL_BENCH_DIR` picks the disk (default: the system temp dir); the test
/// also runs on /dev/shm when it exists.
#[test]
#[ignore]
fn full_durability_throughput() {
    let mut roots: Vec<(String, PathBuf)> = Vec::new();
    let disk = std::env::var("WAL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    roots.push((format!("disk ({})", disk.display()), disk));
    if Path::new("/dev/shm").is_dir() {
        roots.push(("tmpfs (/dev/shm)".into(), PathBuf::from("/dev/shm")));
    }
    let secs: f64 = std::env::var("WAL_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    for (label, root) in roots {
        for (streams, threads) in [(1, 1), (1, 16), (1, 64), (2, 64)] {
            let tmp = tempfile::tempdir_in(&root).unwrap();
            throughput(tmp.path(), &label, streams, threads, secs, 128);
        }
    }
}

/// Recovery speed: writes `WAL_RECOVERY_MB` (default 256) MiB of 1 KiB
/// records, closes, and reopens, printing records/s and MB/s.
/// `cargo test --release -p durakv-engine --test wal_os recovery_speed -- --ignored --nocapture`
#[test]
#[ignore]
fn recovery_speed() {
    let root = std::env::var("WAL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let mb: u64 = std::env::var("WAL_RECOVERY_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let tmp = tempfile::tempdir_in(&root).unwrap();
    let cfg = config(tmp.path(), 2, 64 * 1024 * 1024);
    let n = mb * 1024;
    {
        let (wal, _) = Wal::open(Arc::new(OsFs), cfg.clone(), 0, &mut |_, _, _| Ok(())).unwrap();
        let p = vec![0x3cu8; 1000];
        for i in 0..n {
            wal.append(
                (i % 2) as usize,
                i,
                Durability::Delayed,
                &mut |b: &mut Vec<u8>| b.extend_from_slice(&p),
            )
            .unwrap();
        }
        wal.close().unwrap();
    }
    let mut count = 0u64;
    let mut bytes = 0u64;
    let t0 = Instant::now();
    let (_wal, stats) = Wal::open(Arc::new(OsFs), cfg, 0, &mut |_, _, p| {
        count += 1;
        bytes += p.len() as u64;
        Ok(())
    })
    .unwrap();
    let el = t0.elapsed().as_secs_f64();
    assert_eq!(count, n);
    println!(
        "recovery of {count} records ({:.0} MiB payload, 2 streams, {} segments): {:.2} s, \
         {:.0} records/s, {:.0} MiB/s (page cache warm)",
        bytes as f64 / 1048576.0,
        stats.segments,
        el,
        count as f64 / el,
        bytes as f64 / 1048576.0 / el
    );
}

fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().ino()
}

#[test]
fn a_finished_spare_segment_is_used_by_the_next_run() {
    let tmp = tempfile::tempdir().unwrap();
    let seg = 256 * 1024;
    let cfg = config(tmp.path(), 1, seg);
    let dir = cfg.dirs[0].clone();
    let appended = Appended::default();
    {
        let (wal, _, _) = open(Arc::new(OsFs), &cfg, 0).unwrap();
        let wal = Arc::new(wal);
        while wal.stats().spare_segments_ready < 1 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        workload(&wal, &appended, 5, 1, 20, 1.0, 50);
        wal.close().unwrap();
    }
    // A finished spare is named ready; nothing is left half-prepared.
    let ready = files_ending(&dir, ".ready");
    assert_eq!(ready.len(), 1, "{ready:?}");
    assert!(files_ending(&dir, ".spare").is_empty());
    let kept = inode(&ready[0]);

    // A restart that appends to its old segment keeps it for its first
    // rotation instead of preparing another one.
    {
        let (wal, stats, got) = open(Arc::new(OsFs), &cfg, 0).unwrap();
        check_recovered("restart with a ready spare", &got, &stats, &appended, 0, 20);
        assert_eq!(wal.stats().spare_segments_ready, 1);
        wal.close().unwrap();
    }
    let ready = files_ending(&dir, ".ready");
    assert_eq!(ready.len(), 1, "{ready:?}");
    assert_eq!(inode(&ready[0]), kept, "the same file is kept");

    // A log that starts a new segment at open uses it as that segment.
    for s in segment_files(&dir) {
        std::fs::remove_file(s).unwrap();
    }
    // Ready files of another size (the segment size changed) are dropped.
    std::fs::write(dir.join("wal-000.old.ready"), vec![0u8; 4096]).unwrap();
    {
        let (wal, _, got) = open(Arc::new(OsFs), &cfg, 0).unwrap();
        assert!(got.is_empty());
        let segs = segment_files(&dir);
        assert_eq!(segs.len(), 1, "{segs:?}");
        assert_eq!(inode(&segs[0]), kept, "the ready file became the segment");
        assert!(!dir.join("wal-000.old.ready").exists());
        let lsn = wal
            .append(0, 0, Durability::Full, &mut |b: &mut Vec<u8>| {
                b.extend_from_slice(b"after")
            })
            .unwrap();
        wal.wait_durable(lsn).unwrap();
        wal.close().unwrap();
    }
    let (_wal, _, got) = open(Arc::new(OsFs), &cfg, 0).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].2, b"after");
}
