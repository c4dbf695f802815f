//! Checkpoint, more writes, power loss, restart: the recovered keyspace must
//! equal the one before the crash, for every data type and TTL, including a
//! `durability none` database's data written before the checkpoint. Also
//! on the real file system, across shard-count changes, and with
//! `keep` checkpoints retained.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;

use checkpoint_support::*;
use durakv_engine::checkpoint::format::FileKind;
use durakv_engine::io::{CrashMode, CrashSpec, FaultFs};
use durakv_engine::store::{Store, StoreConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn run_round_trip(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let lock_dir = tempfile::tempdir().unwrap();
    let cfg = config(lock_dir.path(), 8);
    let mut fs = FaultFs::new(seed);
    let mut store = open(&cfg, &fs);
    let mut now = START_MS;
    for round in 0..3 {
        // Unlogged data only before a checkpoint: it survives only in one.
        for _ in 0..rng.gen_range(10..40) {
            now += rng.gen_range(1..500);
            random_unlogged_txn(&store, &mut rng, now);
        }
        for _ in 0..rng.gen_range(50..150) {
            now += rng.gen_range(1..500);
            random_logged_txn(&store, &mut rng, now, true);
        }
        let st = store.checkpoint().expect("checkpoint");
        assert!(st.keys > 0, "seed {seed}: empty checkpoint");
        for _ in 0..rng.gen_range(20..120) {
            now += rng.gen_range(1..500);
            random_logged_txn(&store, &mut rng, now, true);
        }
        let before = dump(&store.keyspace);
        let mode = [
            CrashMode::DropUnsynced,
            CrashMode::TornSectors,
            CrashMode::Random,
        ][round % 3];
        let (image, _) = fs.crash_with(&CrashSpec::new(mode));
        drop(store);
        fs = image;
        store = open(&cfg, &fs);
        let loaded = store
            .checkpoint_recovery
            .loaded
            .as_ref()
            .expect("a checkpoint was loaded");
        assert!(
            store.checkpoint_recovery.fallbacks.is_empty(),
            "seed {seed}: unexpected fallback"
        );
        assert_eq!(loaded.seq, st.seq, "seed {seed}: not the newest checkpoint");
        let after = dump(&store.keyspace);
        if let Some(d) = diff(&before, &after) {
            panic!("seed {seed} round {round}: recovered state differs: {d}");
        }
    }
}

#[test]
fn checkpoint_then_writes_then_crash_recovers_everything() {
    for_each_seed(
        12,
        "checkpoint_then_writes_then_crash_recovers_everything",
        run_round_trip,
    );
}

#[test]
fn real_file_system_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.databases = DATABASES;
    cfg.shards = 16;
    cfg.wal_segment_size_bytes = 64 * 1024;
    cfg.checkpoint_keep = 1;
    let mut rng = StdRng::seed_from_u64(7);
    let mut now = START_MS;
    let store = Store::open(&cfg).unwrap();
    for _ in 0..200 {
        now += 10;
        random_unlogged_txn(&store, &mut rng, now);
    }
    for _ in 0..2_000 {
        now += 10;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let first = store.checkpoint().unwrap();
    for _ in 0..2_000 {
        now += 10;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let second = store.checkpoint().unwrap();
    assert!(second.replay_lsn > first.replay_lsn);
    for _ in 0..500 {
        now += 10;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let before = dump(&store.keyspace);
    drop(store);
    let store = Store::open(&cfg).unwrap();
    let loaded = store.checkpoint_recovery.loaded.as_ref().unwrap();
    assert_eq!(loaded.seq, second.seq);
    assert!(
        store.recovery.records > 0,
        "the log after the checkpoint was replayed"
    );
    if let Some(d) = diff(&before, &dump(&store.keyspace)) {
        panic!("recovered state differs: {d}");
    }
    // keep = 1: the newest and one older.
    let snaps: Vec<_> = store
        .checkpointer
        .files()
        .unwrap()
        .into_iter()
        .filter(|f| f.kind == FileKind::Snapshot)
        .collect();
    assert_eq!(snaps.len(), 2, "{snaps:?}");
}

#[test]
fn changed_shard_count_redistributes_keys() {
    let lock_dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(3);
    let mut rng = StdRng::seed_from_u64(3);
    let mut now = START_MS;
    let cfg8 = config(lock_dir.path(), 8);
    let store = open(&cfg8, &fs);
    for _ in 0..50 {
        now += 10;
        random_unlogged_txn(&store, &mut rng, now);
    }
    for _ in 0..300 {
        now += 10;
        random_logged_txn(&store, &mut rng, now, true);
    }
    store.checkpoint().unwrap();
    for _ in 0..200 {
        now += 10;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let mut before = dump(&store.keyspace);
    store.close().unwrap();
    drop(store);
    for shards in [32, 2, 8] {
        let cfg = config(lock_dir.path(), shards);
        let store = open(&cfg, &fs);
        assert_eq!(store.keyspace.num_shards(), shards);
        if let Some(d) = diff(&before, &dump(&store.keyspace)) {
            panic!("{shards} shards: {d}");
        }
        // Checkpoint in the new shape, so the next open reshards again.
        store.checkpoint().unwrap();
        for _ in 0..30 {
            now += 10;
            let m = random_key_mutation(&mut rng, 0, now);
            commit(&store, vec![m], durakv_engine::Durability::Full, now);
        }
        let after_writes = dump(&store.keyspace);
        store.close().unwrap();
        drop(store);
        let store = open(&cfg, &fs);
        if let Some(d) = diff(&after_writes, &dump(&store.keyspace)) {
            panic!("{shards} shards after reopen: {d}");
        }
        store.close().unwrap();
        before = after_writes;
    }
}

#[test]
fn fewer_databases_than_the_checkpoint_holds_is_refused() {
    let lock_dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(4);
    let mut rng = StdRng::seed_from_u64(4);
    let cfg = config(lock_dir.path(), 8);
    let store = open(&cfg, &fs);
    random_unlogged_txn(&store, &mut rng, START_MS);
    store.checkpoint().unwrap();
    store.close().unwrap();
    drop(store);
    let mut small = cfg.clone();
    small.databases = NONE_DB;
    match durakv_engine::store::Store::open_with(&small, std::sync::Arc::new(fs.clone())) {
        Ok(_) => panic!(
            "opened a checkpoint with keys in database {NONE_DB} with only {NONE_DB} databases"
        ),
        Err(e) => assert!(e.to_string().contains("database 3"), "{e}"),
    }
    // The files are untouched: the full configuration still opens.
    let store = open(&cfg, &fs);
    assert_eq!(store.keyspace.db_len(NONE_DB), 1);
}

#[test]
fn unlogged_keyspace_checkpoints_without_a_log() {
    // The engine API accepts a keyspace without a log (embedded use).
    let fs = FaultFs::new(5);
    let ck = durakv_engine::checkpoint::Checkpointer::open(
        std::sync::Arc::new(fs.clone()),
        durakv_engine::checkpoint::CheckpointConfig::new("/ck"),
    )
    .unwrap();
    let ks = durakv_engine::keyspace::Keyspace::new(2, 4);
    {
        let mut txn = ks.lock_keys_at([&b"k"[..]], START_MS);
        txn.apply(durakv_engine::mutation::Mutation::key(
            1,
            bytes::Bytes::from_static(b"k"),
            durakv_engine::mutation::KeyOp::SetString {
                value: bytes::Bytes::from_static(b"v"),
                expire: durakv_engine::mutation::ExpireMode::At(START_MS + 5),
            },
        ))
        .unwrap();
    }
    let st = ck.checkpoint(&ks, None).unwrap();
    assert_eq!(st.keys, 1);
    let fresh = durakv_engine::keyspace::Keyspace::new(2, 4);
    let l = durakv_engine::checkpoint::load_into(&fs, &st.path, &fresh, 1).unwrap();
    assert_eq!(l.keys, 1);
    assert_eq!(dump(&ks), dump(&fresh));
}

/// Checkpoints taken while three threads write (FLUSHDB and SWAPDB among
/// the writes): each shard is copied as it was at its own point while
/// writers go on, and the newest checkpoint plus the log after it recover
/// exactly the state the writers left.
#[test]
fn checkpoints_taken_while_writers_run_recover_the_final_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.databases = DATABASES;
    cfg.shards = 16;
    cfg.wal_segment_size_bytes = 256 * 1024;
    let store = Store::open(&cfg).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut now = START_MS;
    for _ in 0..3_000 {
        now += 10;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    let written = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..3u64 {
            let (store, stop, written) = (&store, &stop, &written);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t);
                let mut now = now;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    now += 10;
                    random_logged_txn(store, &mut rng, now, true);
                    written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        for _ in 0..3 {
            store.checkpoint().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert!(written.load(std::sync::atomic::Ordering::Relaxed) > 0);
    let before = dump(&store.keyspace);
    drop(store);
    let store = Store::open(&cfg).unwrap();
    assert!(store.checkpoint_recovery.loaded.is_some());
    if let Some(d) = diff(&before, &dump(&store.keyspace)) {
        panic!("recovered state differs: {d}");
    }
}
