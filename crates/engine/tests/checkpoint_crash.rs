//! Power loss at every I/O step of a checkpoint (writing the temp file,
//! fsyncs, rename, directory fsync, retention, log truncation) must still
//! recover every acknowledged write, whichever checkpoint survives. A
//! wrapper file system counts the checkpoint's operations and cuts the
//! power (a `FaultFs::crash_with` image) just before the chosen one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod checkpoint_support;

use checkpoint_support::*;
use durakv_engine::io::{CrashMode, CrashSpec, FaultFs, FileSystem, FsFile};
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::store::Store;
use durakv_engine::txn::CommitLog;
use durakv_engine::Durability;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct Inner {
    fs: FaultFs,
    /// Checkpoint files live here; operations on them are counted.
    ckpt_dir: PathBuf,
    armed: AtomicBool,
    /// Counted operations left before the power fails.
    countdown: AtomicI64,
    counted: AtomicU64,
    spec: CrashSpec,
    /// The disk after the power failure, and the operation it preceded.
    image: Mutex<Option<(FaultFs, String)>>,
}

/// A [`FileSystem`] that cuts the power just before the N-th counted
/// operation: any operation on the checkpoint directory and any file
/// removal (log truncation).
#[derive(Clone)]
struct CrashAt(Arc<Inner>);

impl CrashAt {
    fn new(fs: FaultFs, ckpt_dir: PathBuf, spec: CrashSpec) -> CrashAt {
        CrashAt(Arc::new(Inner {
            fs,
            ckpt_dir,
            armed: AtomicBool::new(false),
            countdown: AtomicI64::new(0),
            counted: AtomicU64::new(0),
            spec,
            image: Mutex::new(None),
        }))
    }

    fn arm(&self, after_ops: i64) {
        self.0.counted.store(0, Ordering::SeqCst);
        self.0.countdown.store(after_ops, Ordering::SeqCst);
        self.0.armed.store(true, Ordering::SeqCst);
    }

    fn tick(&self, what: &str, path: &Path) {
        let counted = path.starts_with(&self.0.ckpt_dir) || what == "remove_file";
        if !counted || !self.0.armed.load(Ordering::SeqCst) {
            return;
        }
        self.0.counted.fetch_add(1, Ordering::SeqCst);
        if self.0.countdown.fetch_sub(1, Ordering::SeqCst) == 0 {
            let mut slot = self.0.image.lock();
            if slot.is_none() {
                let (img, _) = self.0.fs.crash_with(&self.0.spec);
                *slot = Some((img, format!("{what} {}", path.display())));
            }
        }
    }

    fn take_image(&self) -> Option<(FaultFs, String)> {
        self.0.image.lock().take()
    }
}

struct CountedFile {
    inner: Box<dyn FsFile>,
    fs: CrashAt,
    path: PathBuf,
}

impl FsFile for CountedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.fs.tick("write", &self.path);
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.fs.tick("set_len", &self.path);
        self.inner.set_len(len)
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.fs.tick("sync_data", &self.path);
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.fs.tick("sync_all", &self.path);
        self.inner.sync_all()
    }
}

impl FileSystem for CrashAt {
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.tick("create_file", path);
        let inner = self.0.fs.create_file(path)?;
        Ok(Box::new(CountedFile {
            inner,
            fs: self.clone(),
            path: path.to_path_buf(),
        }))
    }
    fn open_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let inner = self.0.fs.open_file(path)?;
        Ok(Box::new(CountedFile {
            inner,
            fs: self.clone(),
            path: path.to_path_buf(),
        }))
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        self.0.fs.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.0.fs.create_dir_all(dir)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.tick("remove_file", path);
        self.0.fs.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.tick("rename", from);
        self.0.fs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.tick("sync_dir", dir);
        self.0.fs.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.fs.exists(path)
    }
    fn now_ms(&self) -> u64 {
        self.0.fs.now_ms()
    }
    fn random_u64(&self) -> u64 {
        self.0.fs.random_u64()
    }
}

/// Builds a store with history: unlogged data, two checkpoints, and
/// enough logged writes between them to span several segments. Returns the store, the
/// wrapper and the clock.
fn prepare(seed: u64, lock_dir: &Path, spec: CrashSpec) -> (Store, CrashAt, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = FaultFs::new(seed);
    let wrapper = CrashAt::new(fs, checkpoint_dir(), spec);
    let cfg = config(lock_dir, 8);
    let store = Store::open_with(&cfg, Arc::new(wrapper.clone()) as Arc<dyn FileSystem>).unwrap();
    let mut now = START_MS;
    for _ in 0..30 {
        now += 7;
        random_unlogged_txn(&store, &mut rng, now);
    }
    for _ in 0..600 {
        now += 7;
        random_logged_txn(&store, &mut rng, now, true);
    }
    store.checkpoint().expect("first checkpoint");
    // keep = 1: the next checkpoint removes the log the first one needed.
    for _ in 0..400 {
        now += 7;
        random_logged_txn(&store, &mut rng, now, true);
    }
    store.checkpoint().expect("second checkpoint");
    for _ in 0..250 {
        now += 7;
        random_logged_txn(&store, &mut rng, now, true);
    }
    (store, wrapper, now)
}

fn crash_spec(rng: &mut StdRng) -> CrashSpec {
    let mode = [
        CrashMode::DropUnsynced,
        CrashMode::TornPrefix,
        CrashMode::TornSectors,
        CrashMode::KeepAll,
        CrashMode::Random,
    ][rng.gen_range(0..5)];
    CrashSpec::new(mode)
}

fn run_every_step(seed: u64) {
    let lock_dir = tempfile::tempdir().unwrap();
    // Dry run: how many counted operations a whole checkpoint performs.
    let (store, wrapper, _) = prepare(
        seed,
        lock_dir.path(),
        CrashSpec::new(CrashMode::DropUnsynced),
    );
    wrapper.arm(i64::MAX);
    let st = store.checkpoint().expect("third checkpoint");
    assert!(
        st.truncate.segments_removed > 0,
        "seed {seed}: the test should exercise truncation"
    );
    let total = wrapper.0.counted.load(Ordering::SeqCst) as i64;
    eprintln!("seed {seed}: a checkpoint performs {total} counted operations ({} blocks, {} segments truncated)", st.blocks, st.truncate.segments_removed);
    drop(store);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    for k in 0..=total {
        let spec = crash_spec(&mut rng);
        let mode = spec.mode;
        let (store, wrapper, _) = prepare(seed, lock_dir.path(), spec);
        let want = dump(&store.keyspace);
        wrapper.arm(k);
        let result = store.checkpoint();
        let (image, at) = match wrapper.take_image() {
            Some(x) => x,
            None => {
                // The checkpoint finished in fewer operations this time.
                let (img, _) = wrapper.0.fs.crash_with(&CrashSpec::new(mode));
                (img, "after the checkpoint".to_string())
            }
        };
        drop(store);
        let recovered = Store::open_with(&config(lock_dir.path(), 8), Arc::new(image.clone()) as Arc<dyn FileSystem>)
            .unwrap_or_else(|e| panic!("seed {seed}: crash before op {k} ({at}, {mode:?}, checkpoint {result:?}): recovery failed: {e}"));
        if let Some(d) = diff(&want, &dump(&recovered.keyspace)) {
            panic!("seed {seed}: crash before op {k} of {total} ({at}, {mode:?}): {d}");
        }
        // And the recovered store can checkpoint and recover again.
        recovered
            .checkpoint()
            .unwrap_or_else(|e| panic!("seed {seed} op {k}: checkpoint after recovery: {e}"));
        recovered.close().unwrap();
        drop(recovered);
        let again = Store::open_with(
            &config(lock_dir.path(), 8),
            Arc::new(image) as Arc<dyn FileSystem>,
        )
        .unwrap();
        if let Some(d) = diff(&want, &dump(&again.keyspace)) {
            panic!("seed {seed}: op {k}: after a second recovery: {d}");
        }
    }
}

#[test]
fn crash_at_every_io_step_of_a_checkpoint_recovers_everything() {
    for_each_seed(
        3,
        "crash_at_every_io_step_of_a_checkpoint_recovers_everything",
        run_every_step,
    );
}

/// A writer keeps committing (and waiting for) `full` writes while a
/// checkpoint runs and the power fails at a random step: every write
/// acknowledged before the failure is recovered, and the recovered writes
/// are a prefix of the sequence.
fn run_concurrent(seed: u64) {
    let lock_dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let spec = crash_spec(&mut rng);
    let (store, wrapper, now) = prepare(seed, lock_dir.path(), spec.clone());
    let base = dump(&store.keyspace);
    let store = Arc::new(store);
    let acked = Arc::new(AtomicI64::new(-1));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let store = store.clone();
        let acked = acked.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut i: i64 = 0;
            while !stop.load(Ordering::SeqCst) {
                let key = bytes::Bytes::from(format!("c{i}"));
                let mut txn = store.keyspace.lock_keys_at([&key[..]], now);
                txn.apply(Mutation::key(
                    0,
                    key.clone(),
                    KeyOp::SetString {
                        value: bytes::Bytes::from(i.to_string()),
                        expire: ExpireMode::Clear,
                    },
                ))
                .unwrap();
                let log: &dyn CommitLog = &*store.wal;
                let Ok(out) = txn.commit(log, Durability::Full) else {
                    return;
                };
                match store
                    .wal
                    .wait_durable_timeout(out.lsn, Duration::from_secs(5))
                {
                    Ok(true) => acked.store(i, Ordering::SeqCst),
                    _ => return,
                }
                i += 1;
            }
        })
    };
    // Let some writes happen first, then crash somewhere in the checkpoint.
    while acked.load(Ordering::SeqCst) < 20 {
        std::thread::yield_now();
    }
    wrapper.arm(rng.gen_range(0..40));
    let _ = store.checkpoint();
    let image = match wrapper.take_image() {
        Some((img, _)) => img,
        None => wrapper.0.fs.crash_with(&spec).0,
    };
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let acked = acked.load(Ordering::SeqCst);
    drop(store);
    let recovered = Store::open_with(
        &config(lock_dir.path(), 8),
        Arc::new(image) as Arc<dyn FileSystem>,
    )
    .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
    let got = dump(&recovered.keyspace);
    let mut present = 0i64;
    while got.contains_key(&(0, format!("c{present}").into_bytes())) {
        present += 1;
    }
    assert!(
        present > acked,
        "seed {seed}: acknowledged c{acked} lost (recovered c0..c{})",
        present - 1
    );
    let extra = got
        .keys()
        .filter(|(db, k)| *db == 0 && k.starts_with(b"c") && k[1..].iter().all(u8::is_ascii_digit))
        .count() as i64;
    assert_eq!(
        extra, present,
        "seed {seed}: recovered writes are not a prefix"
    );
    // Everything written before the writer started is intact too.
    for (k, v) in &base {
        assert_eq!(got.get(k), Some(v), "seed {seed}: {k:?} changed");
    }
}

#[test]
fn concurrent_acknowledged_writes_survive_a_crash_during_a_checkpoint() {
    for_each_seed(
        8,
        "concurrent_acknowledged_writes_survive_a_crash_during_a_checkpoint",
        run_concurrent,
    );
}

/// Transactions that span shards (and whole-keyspace SWAPDB) commit while
/// checkpoints run; after a power loss at a random moment, every
/// transaction is recovered entirely or not at all, and none acknowledged
/// is missing. Each transaction writes the same value to keys `x0..x7` in
/// databases 0 and 1 (different shards), so all sixteen must agree.
fn run_atomic(seed: u64) {
    let lock_dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = FaultFs::new(seed);
    let cfg = config(lock_dir.path(), 8);
    let store = Store::open_with(&cfg, Arc::new(fs.clone()) as Arc<dyn FileSystem>).unwrap();
    // Other data, so each checkpoint takes a while.
    for n in 0..300 {
        random_logged_txn(&store, &mut rng, START_MS + n, false);
    }
    let store = Arc::new(store);
    let acked = Arc::new(AtomicI64::new(-1));
    let stop = Arc::new(AtomicBool::new(false));
    let keys: Vec<bytes::Bytes> = (0..8)
        .map(|j| bytes::Bytes::from(format!("x{j}")))
        .collect();
    let writer = {
        let (store, acked, stop, keys) = (store.clone(), acked.clone(), stop.clone(), keys.clone());
        std::thread::spawn(move || {
            let mut i: i64 = 0;
            while !stop.load(Ordering::SeqCst) {
                let now = START_MS + i as u64;
                let mut txn = if i % 7 == 3 {
                    store.keyspace.lock_all_at(now)
                } else {
                    store
                        .keyspace
                        .lock_keys_at(keys.iter().map(|k| &k[..]), now)
                };
                for db in 0..2 {
                    for k in &keys {
                        let op = KeyOp::SetString {
                            value: bytes::Bytes::from(i.to_string()),
                            expire: ExpireMode::Clear,
                        };
                        txn.apply(Mutation::key(db, k.clone(), op)).unwrap();
                    }
                }
                if i % 7 == 3 {
                    txn.apply(Mutation::SwapDb { a: 0, b: 1 }).unwrap();
                }
                let log: &dyn CommitLog = &*store.wal;
                let Ok(out) = txn.commit(log, Durability::Full) else {
                    return;
                };
                match store
                    .wal
                    .wait_durable_timeout(out.lsn, Duration::from_secs(5))
                {
                    Ok(true) => acked.store(i, Ordering::SeqCst),
                    _ => return,
                }
                i += 1;
            }
        })
    };
    let checkpoints = rng.gen_range(1..4);
    for _ in 0..checkpoints {
        // Let the writer make progress between (and during) checkpoints.
        let target = acked.load(Ordering::SeqCst) + 5;
        while acked.load(Ordering::SeqCst) < target {
            std::thread::yield_now();
        }
        store
            .checkpoint()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    let target = acked.load(Ordering::SeqCst) + rng.gen_range(0..5);
    while acked.load(Ordering::SeqCst) < target {
        std::thread::yield_now();
    }
    let (image, _) = fs.crash_with(&crash_spec(&mut rng));
    let acked_at_crash = acked.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    drop(store);
    let recovered = Store::open_with(&cfg, Arc::new(image) as Arc<dyn FileSystem>)
        .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
    let got = dump(&recovered.keyspace);
    let values: Vec<i64> = (0..2)
        .flat_map(|db| (0..8).map(move |j| (db, format!("x{j}").into_bytes())))
        .map(|k| match got.get(&k) {
            Some((durakv_engine::value::Value::Str(s), _)) => {
                std::str::from_utf8(s).unwrap().parse().unwrap()
            }
            other => panic!("seed {seed}: {k:?} is {other:?}"),
        })
        .collect();
    assert!(
        values.iter().all(|v| *v == values[0]),
        "seed {seed}: a transaction was split: {values:?}"
    );
    assert!(
        values[0] >= acked_at_crash,
        "seed {seed}: acknowledged write {acked_at_crash} lost (recovered {})",
        values[0]
    );
}

#[test]
fn cross_shard_transactions_stay_atomic_across_checkpoints_and_crashes() {
    for_each_seed(
        10,
        "cross_shard_transactions_stay_atomic_across_checkpoints_and_crashes",
        run_atomic,
    );
}
