//! Checkpoint write and load speed on YCSB-shaped data (one hash of ten
//! 100-byte fields per record), on the real file system. Ignored by default;
//! run in release mode:
//!
//! ```text
//! DURAKV_BENCH_RECORDS=1000000 cargo test --release -p durakv-engine \
//!     --test checkpoint_bench -- --ignored --nocapture checkpoint_write_speed
//! DURAKV_BENCH_THREADS=2 cargo test --release -p durakv-engine \
//!     --test checkpoint_bench -- --ignored --nocapture checkpoint_load_speed
//! ```
//!
//! Prints figures; asserts only that the load found every key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use durakv_engine::checkpoint::{self, CheckpointConfig, Checkpointer};
use durakv_engine::db::Entry;
use durakv_engine::io::OsFs;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::value::{HashValue, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;

const FIELDS: usize = 10;
const FIELD_BYTES: usize = 100;

fn records() -> usize {
    std::env::var("DURAKV_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

fn build(n: usize, shards: usize) -> Keyspace {
    let ks = Keyspace::new(16, shards);
    let mut rng = StdRng::seed_from_u64(1);
    for i in 0..n {
        let key = Bytes::from(format!(
            "user{:019}",
            (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ));
        let mut h = HashValue::default();
        for f in 0..FIELDS {
            // Printable random characters, like YCSB's values.
            let v: Vec<u8> = (0..FIELD_BYTES)
                .map(|_| rng.gen_range(b' '..=b'~'))
                .collect();
            h.insert(Bytes::from(format!("field{f}")), Bytes::from(v));
        }
        let s = ks.shard_index(&key);
        ks.shard(s).lock().dbs[0].insert(key, Entry::new(Value::Hash(h)));
    }
    ks
}

/// Load threads: `DURAKV_BENCH_THREADS` (default 2).
fn load_threads() -> usize {
    std::env::var("DURAKV_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// Writes a checkpoint of `DURAKV_BENCH_RECORDS` records into
/// `DURAKV_BENCH_DIR` (default /tmp) and keeps it, printing its path.
#[test]
#[ignore = "benchmark; run with --release -- --ignored --nocapture"]
fn checkpoint_write_speed() {
    let n = records();
    let t = Instant::now();
    let ks = build(n, 64);
    eprintln!("built {n} records in {:.2}s", t.elapsed().as_secs_f64());
    let dir = std::path::PathBuf::from(
        std::env::var("DURAKV_BENCH_DIR").unwrap_or_else(|_| "/tmp".into()),
    )
    .join("durakv-checkpoint-bench");
    let _ = std::fs::remove_dir_all(&dir);
    let ck = Checkpointer::open(Arc::new(OsFs), CheckpointConfig::new(&dir)).unwrap();
    let st = ck.checkpoint(&ks, None).unwrap();
    eprintln!(
        "checkpoint {}: {} keys, {:.1} MB raw, {:.1} MB file, {} blocks in {:.2}s ({:.0} MB/s raw); max shard lock {:.1} ms, max shard image {:.1} MB",
        st.path.display(),
        st.keys,
        st.raw_bytes as f64 / 1e6,
        st.file_bytes as f64 / 1e6,
        st.blocks,
        st.duration.as_secs_f64(),
        st.raw_bytes as f64 / 1e6 / st.duration.as_secs_f64(),
        st.max_shard_lock.as_secs_f64() * 1e3,
        st.max_shard_image_bytes as f64 / 1e6
    );
}

/// Loads the file `checkpoint_write_speed` wrote, in a fresh process (so
/// the allocator starts cold, as at a restart).
#[test]
#[ignore = "benchmark; run with --release -- --ignored --nocapture after checkpoint_write_speed"]
fn checkpoint_load_speed() {
    let dir = std::path::PathBuf::from(
        std::env::var("DURAKV_BENCH_DIR").unwrap_or_else(|_| "/tmp".into()),
    )
    .join("durakv-checkpoint-bench");
    let ck = Checkpointer::open(Arc::new(OsFs), CheckpointConfig::new(&dir)).unwrap();
    let file = ck
        .files()
        .unwrap()
        .into_iter()
        .next()
        .expect("run checkpoint_write_speed first");
    let summary = checkpoint::read_summary(&OsFs, &file.path).unwrap();
    let ks = Keyspace::new(16, summary.header.shard_count as usize);
    let threads = load_threads();
    let l = checkpoint::load_into(&OsFs, &file.path, &ks, threads).unwrap();
    eprintln!(
        "load with {threads} thread(s): {} keys in {:.3}s = {:.0} records/s ({:.0} MB/s of file)",
        l.keys,
        l.duration.as_secs_f64(),
        l.keys as f64 / l.duration.as_secs_f64(),
        l.file_bytes as f64 / 1e6 / l.duration.as_secs_f64()
    );
    assert_eq!(ks.db_len(0) as u64, l.keys);
}
