//! Shared helpers for the `wal_*` integration tests: a reference record of
//! what was appended, recovery into a vector, and the checks every recovery
//! must pass (gap-free prefix, nothing invented, nothing acknowledged lost).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use durakv_engine::io::{FaultFs, FileSystem, FsFile};
use durakv_engine::wal::{RecoveryStats, Wal, WalConfig, WalError};
use durakv_engine::Durability;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Prints the seed if the test panics while this is alive, whatever
/// panicked (a helper, a thread join, an unwrap).
pub struct SeedGuard(pub String);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("FAILED at {}", self.0);
        }
    }
}

/// A recovered record: (lsn, time_ms, payload).
pub type Rec = (u64, u64, Vec<u8>);

/// Every segment file (`*.log`) on the simulated disk, in path order.
pub fn segment_files(fs: &FaultFs) -> Vec<PathBuf> {
    fs.all_files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect()
}

/// Stream directories for a simulated disk.
pub fn sim_dirs(streams: usize) -> Vec<PathBuf> {
    (0..streams)
        .map(|i| PathBuf::from(format!("/data/wal{i}")))
        .collect()
}

/// A config suited to fast simulated tests.
pub fn sim_config(streams: usize, segment_size_bytes: u64) -> WalConfig {
    let mut c = WalConfig::new(sim_dirs(streams));
    c.segment_size_bytes = segment_size_bytes;
    c.delayed_flush_ms = 2;
    c.delayed_flush_bytes = 4096;
    c.max_pending_bytes = 64 * 1024;
    c
}

/// Opens the WAL and collects everything recovery applies.
pub fn open(
    fs: Arc<dyn FileSystem>,
    cfg: &WalConfig,
    start_after: u64,
) -> Result<(Wal, RecoveryStats, Vec<Rec>), WalError> {
    let mut got = Vec::new();
    let (wal, stats) = Wal::open(fs, cfg.clone(), start_after, &mut |lsn, t, p| {
        got.push((lsn, t, p.to_vec()));
        Ok(())
    })?;
    Ok((wal, stats, got))
}

/// lsn -> (time_ms, payload).
pub type AppendLog = BTreeMap<u64, (u64, Vec<u8>)>;

/// What the test appended.
#[derive(Default, Clone)]
pub struct Appended(pub Arc<Mutex<AppendLog>>);

impl Appended {
    pub fn insert(&self, lsn: u64, time_ms: u64, payload: Vec<u8>) {
        let prev = self.0.lock().insert(lsn, (time_ms, payload));
        assert!(prev.is_none(), "LSN {lsn} handed out twice");
    }

    /// Forgets LSNs above `lsn` (lost in a crash; they will be reused).
    pub fn forget_above(&self, lsn: u64) {
        self.0.lock().retain(|&k, _| k <= lsn);
    }

    pub fn forget_at_or_below(&self, lsn: u64) {
        self.0.lock().retain(|&k, _| k > lsn);
    }

    pub fn max_lsn(&self) -> u64 {
        self.0.lock().keys().next_back().copied().unwrap_or(0)
    }
}

/// Random payload: random length (0..max), random bytes (so no payload has
/// long runs of zeros, see docs/format.md on torn-write detection).
pub fn payload(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.gen_range(0..max);
    (0..n).map(|_| rng.gen()).collect()
}

/// The checks every successful recovery must pass:
/// - LSNs are exactly `start_after+1 ..= last` (gap-free, in order);
/// - up to the first LSN that is missing, every record is byte-for-byte
///   what was appended under that LSN; after it come records appended
///   later (in their order), recovered under new LSNs because they depend
///   on nothing missing (`docs/durability.md`);
/// - every LSN <= `acked` (observed durable before the crash) is present
///   under its own LSN.
///
/// Then `appended` is made to hold what was recovered under the LSNs it
/// was recovered as, and nothing else above `start_after`.
pub fn check_recovered(
    ctx: &str,
    got: &[Rec],
    stats: &RecoveryStats,
    appended: &Appended,
    start_after: u64,
    acked: u64,
) {
    let mut app = appended.0.lock();
    let mut prev_orig = start_after;
    let mut same_place = start_after;
    for (i, (lsn, t, p)) in got.iter().enumerate() {
        assert_eq!(
            *lsn,
            start_after + 1 + i as u64,
            "{ctx}: recovered LSNs are not gap-free (position {i})"
        );
        let orig = if same_place + 1 == *lsn && app.get(lsn) == Some(&(*t, p.clone())) {
            same_place = *lsn;
            *lsn
        } else {
            match app
                .range(prev_orig.max(*lsn) + 1..)
                .find(|(_, (at, ap))| at == t && ap == p)
            {
                Some((&o, _)) => o,
                None => match app.get(lsn) {
                    Some((at, _)) if at != t => panic!("{ctx}: LSN {lsn} has the wrong time"),
                    Some(_) => panic!("{ctx}: LSN {lsn} payload differs from what was appended"),
                    None => {
                        panic!("{ctx}: recovery returned LSN {lsn}, which matches nothing appended")
                    }
                },
            }
        };
        assert!(orig > prev_orig, "{ctx}: LSN {lsn} is out of commit order");
        prev_orig = orig;
    }
    let last = got.last().map_or(start_after, |r| r.0);
    assert_eq!(
        stats.last_lsn,
        last.max(start_after),
        "{ctx}: stats.last_lsn"
    );
    assert!(
        same_place >= acked,
        "{ctx}: acknowledged LSNs lost: durable LSN before the crash was {acked}, recovered in \
         place up to {same_place} (truncated tails {:?}, dropped {:?})",
        stats.truncated_tail,
        stats.dropped
    );
    app.retain(|&k, _| k <= start_after);
    for (lsn, t, p) in got {
        app.insert(*lsn, (*t, p.clone()));
    }
}

/// Appends `n` records from `threads` threads, each picking stream and
/// durability at random (`full_ratio` of them `Full`, which also waits for
/// durability). Stops early once the WAL refuses writes. Returns how many
/// appends succeeded.
pub fn workload(
    wal: &Arc<Wal>,
    appended: &Appended,
    seed: u64,
    threads: usize,
    n: usize,
    full_ratio: f64,
    payload_max: usize,
) -> usize {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = wal.clone();
            let appended = appended.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(t as u64));
                // Whether an append runs as a server's event loop runs it
                // (`Wal::defer_syncs`, then leading or handing off what it
                // owes), from a generator of its own so that the other
                // choices stay what they were for each seed.
                let mut lead_rng = StdRng::seed_from_u64(seed ^ 0x6c65_6164 ^ t as u64);
                let mut ok = 0;
                for _ in 0..n {
                    let p = payload(&mut rng, payload_max);
                    let time: u64 = rng.gen_range(0..1 << 40);
                    let stream = rng.gen_range(0..wal.num_streams());
                    let level = if rng.gen_bool(full_ratio) {
                        Durability::Full
                    } else {
                        Durability::Delayed
                    };
                    let append = || {
                        wal.append(stream, time, level, &mut |b: &mut Vec<u8>| {
                            b.extend_from_slice(&p)
                        })
                    };
                    let r = if lead_rng.gen_bool(0.5) {
                        let (r, owed) = wal.defer_syncs(append);
                        if lead_rng.gen_bool(0.8) {
                            wal.lead(owed);
                        } else {
                            wal.hand_off(owed);
                        }
                        r
                    } else {
                        append()
                    };
                    let Ok(lsn) = r else { break };
                    appended.insert(lsn, time, p);
                    ok += 1;
                    if level == Durability::Full && wal.wait_durable(lsn).is_err() {
                        break;
                    }
                }
                ok
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

/// A [`FileSystem`] over a [`FaultFs`] that can hold every file fsync at a
/// gate. The WAL writes a batch and fsyncs it right away, so without this
/// there is no reliable moment at which a batch is in the page cache but not
/// on disk, which is exactly where a `kill -9` has to land to matter.
#[derive(Clone)]
pub struct GatedFs {
    pub inner: FaultFs,
    gate: Arc<Gate>,
}

struct Gate {
    state: Mutex<GateState>,
    cv: parking_lot::Condvar,
}

#[derive(Default)]
struct GateState {
    closed: bool,
    /// Fsyncs currently held at the gate.
    waiting: usize,
}

impl GatedFs {
    pub fn new(inner: FaultFs) -> GatedFs {
        GatedFs {
            inner,
            gate: Arc::new(Gate {
                state: Mutex::new(GateState::default()),
                cv: parking_lot::Condvar::new(),
            }),
        }
    }

    /// From now on file fsyncs block until [`GatedFs::open_gate`].
    pub fn close_gate(&self) {
        self.gate.state.lock().closed = true;
    }

    pub fn open_gate(&self) {
        self.gate.state.lock().closed = false;
        self.gate.cv.notify_all();
    }

    /// Waits until `n` fsyncs are held at the gate (a liveness check: gives
    /// up after a minute rather than hanging the test run).
    pub fn wait_held(&self, n: usize) {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut st = self.gate.state.lock();
        while st.waiting < n {
            assert!(
                std::time::Instant::now() < give_up,
                "only {} of {n} fsyncs reached the gate",
                st.waiting
            );
            self.gate
                .cv
                .wait_for(&mut st, std::time::Duration::from_millis(10));
        }
    }

    fn pass(&self) {
        let mut st = self.gate.state.lock();
        if st.closed {
            st.waiting += 1;
            self.gate.cv.notify_all();
            while st.closed {
                self.gate.cv.wait(&mut st);
            }
            st.waiting -= 1;
        }
    }
}

struct GatedFile {
    inner: Box<dyn FsFile>,
    fs: GatedFs,
}

impl FsFile for GatedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn allocate(&self, len: u64) -> std::io::Result<()> {
        self.inner.allocate(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.fs.pass();
        self.inner.sync_data()
    }
    fn sync_all(&self) -> std::io::Result<()> {
        self.fs.pass();
        self.inner.sync_all()
    }
}

impl FileSystem for GatedFs {
    fn create_file(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
        Ok(Box::new(GatedFile {
            inner: self.inner.create_file(path)?,
            fs: self.clone(),
        }))
    }
    fn open_file(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
        Ok(Box::new(GatedFile {
            inner: self.inner.open_file(path)?,
            fs: self.clone(),
        }))
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        self.inner.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }
    fn random_u64(&self) -> u64 {
        self.inner.random_u64()
    }
}
