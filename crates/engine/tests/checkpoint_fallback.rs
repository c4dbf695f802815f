//! A damaged newest checkpoint: recovery must notice (never load bad data),
//! fall back to an older checkpoint, replay more log, report the fallback,
//! and set the damaged file aside; with nothing usable left it must refuse
//! to start rather than silently start from a truncated log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;

use checkpoint_support::*;
use durakv_engine::checkpoint::format::{self, FileKind};
use durakv_engine::io::{FaultFs, FileSystem};
use durakv_engine::store::Store;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;

/// Writes, two checkpoints (keep = 1 keeps both), more writes. Returns the
/// state, and the two checkpoint paths (older, newer).
fn two_checkpoints(
    seed: u64,
    lock_dir: &std::path::Path,
    fs: &FaultFs,
) -> (Dump, PathBuf, PathBuf) {
    let mut rng = StdRng::seed_from_u64(seed);
    let store = open(&config(lock_dir, 8), fs);
    let mut now = START_MS;
    for _ in 0..40 {
        now += 3;
        random_unlogged_txn(&store, &mut rng, now);
    }
    for _ in 0..300 {
        now += 3;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let first = store.checkpoint().unwrap();
    for _ in 0..300 {
        now += 3;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let second = store.checkpoint().unwrap();
    for _ in 0..100 {
        now += 3;
        random_logged_txn(&store, &mut rng, now, true);
    }
    let want = dump(&store.keyspace);
    store.close().unwrap();
    (want, first.path, second.path)
}

fn run_flip(seed: u64) {
    let lock_dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(seed);
    let (want, older, newer) = two_checkpoints(seed, lock_dir.path(), &fs);
    let mut rng = StdRng::seed_from_u64(seed ^ 0xf11b);
    let len = fs.read_file(&newer).unwrap().len() as u64;
    // Anywhere: header, a block header, a body, the footer.
    let at = match seed % 4 {
        0 => rng.gen_range(0..format::FILE_HEADER_BYTES as u64),
        1 => len - 1 - rng.gen_range(0..format::FOOTER_BYTES as u64),
        _ => rng.gen_range(0..len),
    };
    fs.corrupt_byte(&newer, at, 1 << rng.gen_range(0..8))
        .unwrap();
    let store = open(&config(lock_dir.path(), 8), &fs);
    let rec = &store.checkpoint_recovery;
    let loaded = rec.loaded.as_ref().expect("fell back to a checkpoint");
    assert_eq!(
        loaded.path, older,
        "seed {seed}: flipped byte {at} of {len}: did not fall back"
    );
    assert_eq!(rec.fallbacks.len(), 1, "seed {seed}");
    assert_eq!(rec.fallbacks[0].0, newer);
    assert!(
        rec.fallbacks[0].1.contains("corrupt checkpoint"),
        "seed {seed}: fallback reason should name the corruption: {}",
        rec.fallbacks[0].1
    );
    if let Some(d) = diff(&want, &dump(&store.keyspace)) {
        panic!("seed {seed}: flipped byte {at}: state after fallback differs: {d}");
    }
    // The damaged file is set aside, not counted as a kept checkpoint.
    let files = store.checkpointer.files().unwrap();
    assert!(
        files.iter().any(|f| f.kind == FileKind::Corrupt),
        "seed {seed}: {files:?}"
    );
    assert!(!fs.exists(&newer));
    // Taking checkpoints afterwards works and recovery uses them.
    let st = store.checkpoint().unwrap();
    store.close().unwrap();
    drop(store);
    let store = open(&config(lock_dir.path(), 8), &fs);
    assert_eq!(
        store.checkpoint_recovery.loaded.as_ref().unwrap().seq,
        st.seq
    );
    assert!(store.checkpoint_recovery.fallbacks.is_empty());
    if let Some(d) = diff(&want, &dump(&store.keyspace)) {
        panic!("seed {seed}: after the next checkpoint: {d}");
    }
}

#[test]
fn a_flipped_bit_in_the_newest_checkpoint_falls_back_to_the_older_one() {
    for_each_seed(
        24,
        "a_flipped_bit_in_the_newest_checkpoint_falls_back_to_the_older_one",
        run_flip,
    );
}

#[test]
fn a_truncated_newest_checkpoint_falls_back() {
    let lock_dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(11);
    let (want, older, newer) = two_checkpoints(11, lock_dir.path(), &fs);
    // Cut the file in half (as a lost tail would): the footer no longer verifies.
    let f = fs.open_file(&newer).unwrap();
    let len = f.len().unwrap();
    f.set_len(len / 2).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let store = open(&config(lock_dir.path(), 8), &fs);
    assert_eq!(
        store.checkpoint_recovery.loaded.as_ref().unwrap().path,
        older
    );
    assert!(diff(&want, &dump(&store.keyspace)).is_none());
}

#[test]
fn no_usable_checkpoint_refuses_to_start_and_changes_nothing() {
    let lock_dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(12);
    let (_, older, newer) = two_checkpoints(12, lock_dir.path(), &fs);
    for p in [&older, &newer] {
        fs.corrupt_byte(p, 100, 0x40).unwrap();
    }
    let cfg = config(lock_dir.path(), 8);
    match Store::open_with(&cfg, Arc::new(fs.clone()) as Arc<dyn FileSystem>) {
        Ok(_) => panic!("started although every checkpoint is damaged"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("no usable checkpoint"), "{msg}");
            assert!(msg.contains("byte 100") || msg.contains("corrupt"), "{msg}");
        }
    }
    // Nothing was renamed: an operator can still inspect both.
    assert!(fs.exists(&older) && fs.exists(&newer));
}

/// A newest checkpoint in a format version a newer build wrote is not
/// damage: the store refuses to start, says how to go back, and neither
/// falls back to the older checkpoint nor sets the file aside.
#[test]
fn a_checkpoint_from_a_newer_build_refuses_to_start_and_changes_nothing() {
    let lock_dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(13);
    let (_, older, newer) = two_checkpoints(13, lock_dir.path(), &fs);
    let mut header = fs.read_file(&newer).unwrap()[..format::FILE_HEADER_BYTES].to_vec();
    let version = format::FORMAT_VERSION + 1;
    header[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&header[..60]);
    header[60..64].copy_from_slice(&crc.to_le_bytes());
    fs.write_file_raw(&newer, 0, &header).unwrap();
    let cfg = config(lock_dir.path(), 8);
    match Store::open_with(&cfg, Arc::new(fs.clone()) as Arc<dyn FileSystem>) {
        Ok(_) => panic!("started from an older checkpoint than a newer build's"),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&format!(
                    "format version {version}, which a newer durakv wrote"
                )),
                "{msg}"
            );
            assert!(msg.contains("checkpoint-format-version"), "{msg}");
        }
    }
    assert!(fs.exists(&older) && fs.exists(&newer));
    assert!(!fs
        .all_files()
        .iter()
        .any(|p| format::parse_file_name(p).is_some_and(|(_, k)| k == FileKind::Corrupt)));
}
