//! An in-memory file system that models what a power loss leaves behind.
//!
//! Crash-consistency bugs hide in the gap between "the write returned" and
//! "the bytes are on the platter". [`FaultFs`] keeps that gap explicit, the
//! way redb's crash-consistency backend and TigerBeetle's simulated storage
//! do: every file has *live* bytes (what reads return, i.e. the page cache)
//! and *durable* bytes (what survives power loss), and every directory has
//! live and durable entries. `sync_data`/`sync_all` copy live to durable;
//! `sync_dir` makes entry changes durable. [`FaultFs::crash`] then builds the
//! post-power-loss image: unsynced bytes are dropped, kept, torn at a random
//! byte, or kept sector-by-sector at random; entries that were created,
//! renamed or removed without a directory fsync may or may not persist; and
//! random bit flips model media corruption. Faults can also be scheduled:
//! fail the next fsync (with Linux's semantics: the dirty pages are marked
//! clean whether or not they reached the disk, so a retry "succeeds" without
//! persisting them), fail a write, or run out of space after N bytes.
//!
//! Everything random comes from one seeded generator, so a failing seed can
//! be replayed (thread scheduling of the code under test aside).

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{FileSystem, FsFile};

/// Granularity at which a torn write keeps or loses data: the smallest
/// sector size a disk writes atomically.
const SECTOR_BYTES: usize = 512;

/// What happens to bytes written but not yet fsynced when the power fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Every unsynced byte is lost.
    DropUnsynced,
    /// Unsynced bytes survive up to a random byte, the rest is lost.
    TornPrefix,
    /// Each 512-byte sector of unsynced data independently survives or not.
    TornSectors,
    /// The cache happened to be flushed just before the power failed.
    KeepAll,
    /// One of the above, chosen per file.
    Random,
}

/// How to crash.
#[derive(Debug, Clone)]
pub struct CrashSpec {
    pub mode: CrashMode,
    /// Random single-bit flips applied to the image afterwards (media
    /// corruption), within the written part of matching files.
    pub bit_flips: u32,
    /// Only flip bits in files whose name ends with this (e.g. ".log").
    pub flip_suffix: Option<String>,
    /// Directory entries changed since the last `sync_dir`: `Some(true)` keep
    /// the new state, `Some(false)` keep the old, `None` pick at random per
    /// entry.
    pub keep_unsynced_entries: Option<bool>,
}

impl CrashSpec {
    pub fn new(mode: CrashMode) -> CrashSpec {
        CrashSpec {
            mode,
            bit_flips: 0,
            flip_suffix: None,
            keep_unsynced_entries: None,
        }
    }
}

impl Default for CrashSpec {
    fn default() -> Self {
        CrashSpec::new(CrashMode::Random)
    }
}

/// One injected bit flip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flip {
    pub path: PathBuf,
    pub offset: u64,
    pub bit: u8,
}

/// What a crash did, for test diagnostics.
#[derive(Debug, Clone, Default)]
pub struct CrashReport {
    pub flips: Vec<Flip>,
    /// Files whose unsynced data was (partly) lost.
    pub torn_files: Vec<PathBuf>,
    /// Entries whose unsynced creation/rename was lost.
    pub vanished: Vec<PathBuf>,
    /// Entries whose unsynced removal/rename was lost.
    pub resurrected: Vec<PathBuf>,
}

/// Counters, for tests that want to know what happened.
#[derive(Debug, Clone, Default)]
pub struct FaultStats {
    pub writes: u64,
    pub bytes_written: u64,
    pub file_syncs: u64,
    pub dir_syncs: u64,
    pub failed_syncs: u64,
    pub failed_writes: u64,
    /// Calls of [`FsFile::release_cache`]: a hint, with no effect here.
    pub cache_releases: u64,
}

#[derive(Default, Clone)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Byte range that may differ between live and durable (besides length).
    dirty: Option<(usize, usize)>,
    /// End of the last non-zero byte ever written (excludes preallocation).
    written_hwm: usize,
    /// Failed write-backs so far (Linux's `errseq_t`): every handle opened
    /// before a failure learns of it at its next sync, once.
    wb_errors: u64,
}

impl Inode {
    fn mark_dirty(&mut self, lo: usize, hi: usize) {
        if lo >= hi {
            return;
        }
        self.dirty = Some(match self.dirty {
            Some((a, b)) => (a.min(lo), b.max(hi)),
            None => (lo, hi),
        });
    }

    fn commit(&mut self) {
        self.durable.resize(self.live.len(), 0);
        if let Some((lo, hi)) = self.dirty.take() {
            let hi = hi.min(self.live.len());
            if lo < hi {
                self.durable[lo..hi].copy_from_slice(&self.live[lo..hi]);
            }
        }
    }

    /// Applies live bytes `[lo, hi)` onto `img`.
    fn apply(&self, img: &mut Vec<u8>, lo: usize, hi: usize) {
        let hi = hi.min(self.live.len());
        if lo >= hi {
            return;
        }
        if img.len() < hi {
            img.resize(hi, 0);
        }
        img[lo..hi].copy_from_slice(&self.live[lo..hi]);
    }

    /// The post-crash content under `mode`; `true` if something was lost.
    fn crash_image(&self, mode: CrashMode, rng: &mut StdRng) -> (Vec<u8>, bool) {
        let mut img = self.durable.clone();
        let (lo, hi) = self.dirty.unwrap_or((0, 0));
        let hi = hi.min(self.live.len().max(self.durable.len()));
        let len_differs = self.live.len() != self.durable.len();
        if lo >= hi && !len_differs {
            return (img, false);
        }
        let mode = match mode {
            CrashMode::Random => match rng.gen_range(0..4) {
                0 => CrashMode::DropUnsynced,
                1 => CrashMode::TornPrefix,
                2 => CrashMode::TornSectors,
                _ => CrashMode::KeepAll,
            },
            m => m,
        };
        let mut max_applied = 0;
        match mode {
            CrashMode::DropUnsynced | CrashMode::Random => {}
            CrashMode::KeepAll => {
                self.apply(&mut img, lo, hi);
                img.resize(self.live.len(), 0);
                return (img, false);
            }
            CrashMode::TornPrefix => {
                let cut = if lo < hi { rng.gen_range(lo..=hi) } else { lo };
                self.apply(&mut img, lo, cut);
                max_applied = cut;
            }
            CrashMode::TornSectors => {
                let mut s = lo / SECTOR_BYTES * SECTOR_BYTES;
                while s < hi {
                    let e = (s + SECTOR_BYTES).min(hi);
                    if rng.gen_bool(0.5) {
                        self.apply(&mut img, s.max(lo), e);
                        max_applied = max_applied.max(e);
                    }
                    s += SECTOR_BYTES;
                }
            }
        }
        // File length is metadata: old or new, but never cutting off bytes
        // that made it.
        let mut len = if len_differs && rng.gen_bool(0.5) {
            self.live.len()
        } else {
            self.durable.len()
        };
        if len < max_applied.min(self.live.len()) {
            len = self.live.len();
        }
        img.resize(len, 0);
        (img, true)
    }
}

struct State {
    rng: StdRng,
    /// Set on the old instance by `crash()`: the machine is gone.
    dead: bool,
    inodes: Vec<Inode>,
    live_ns: BTreeMap<PathBuf, usize>,
    durable_ns: BTreeMap<PathBuf, usize>,
    dirs: BTreeSet<PathBuf>,
    /// `Some(n)`: the sync after `n` more successful ones fails.
    sync_fail_in: Option<u64>,
    /// `Some(n)`: the write after `n` more successful ones fails.
    write_fail_in: Option<u64>,
    /// Total bytes (sum of live file lengths) the disk can hold.
    space_limit_bytes: Option<u64>,
    clock_ms: u64,
    /// How long a file fsync takes, slept outside the lock so that syncs of
    /// several threads overlap as on a real device.
    sync_latency: Duration,
    stats: FaultStats,
}

impl State {
    /// The disk the next process (or machine) sees: the given contents,
    /// this disk's capacity and clock, fresh statistics, and no scheduled
    /// faults (they belong to the dead process's test step).
    fn successor(
        &self,
        rng: StdRng,
        inodes: Vec<Inode>,
        live_ns: BTreeMap<PathBuf, usize>,
        durable_ns: BTreeMap<PathBuf, usize>,
    ) -> FaultFs {
        FaultFs {
            state: Arc::new(Mutex::new(State {
                rng,
                dead: false,
                inodes,
                live_ns,
                durable_ns,
                dirs: self.dirs.clone(),
                sync_fail_in: None,
                write_fail_in: None,
                space_limit_bytes: self.space_limit_bytes,
                clock_ms: self.clock_ms,
                sync_latency: self.sync_latency,
                stats: FaultStats::default(),
            })),
        }
    }
}

fn dead_err() -> io::Error {
    io::Error::other("simulated power loss: the device is gone")
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", p.display()),
    )
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl State {
    fn check(&self) -> io::Result<()> {
        if self.dead {
            Err(dead_err())
        } else {
            Ok(())
        }
    }

    fn used_bytes(&self) -> u64 {
        let live: BTreeSet<usize> = self.live_ns.values().copied().collect();
        live.iter().map(|&i| self.inodes[i].live.len() as u64).sum()
    }

    /// How many bytes of growth the space limit still allows.
    fn room(&self) -> u64 {
        match self.space_limit_bytes {
            Some(limit) => limit.saturating_sub(self.used_bytes()),
            None => u64::MAX,
        }
    }

    fn take_countdown(c: &mut Option<u64>) -> bool {
        match c {
            Some(0) => {
                *c = None;
                true
            }
            Some(n) => {
                *n -= 1;
                false
            }
            None => false,
        }
    }

    /// Syncs through a handle that last learned of write-back errors at
    /// `seen` (updated): like Linux, a failure is reported to every open
    /// file description once, so concurrent syncs through different handles
    /// all see it.
    fn sync_file(&mut self, ino: usize, seen: &AtomicU64) -> io::Result<()> {
        self.check()?;
        self.stats.file_syncs += 1;
        if Self::take_countdown(&mut self.sync_fail_in) {
            self.stats.failed_syncs += 1;
            // Some dirty sectors reached the disk, some did not, and the
            // kernel now considers all of them clean.
            let mut rng = StdRng::seed_from_u64(self.rng.gen());
            let inode = &mut self.inodes[ino];
            let (img, _) = inode.crash_image(CrashMode::TornSectors, &mut rng);
            inode.durable = img;
            inode.dirty = None;
            inode.wb_errors += 1;
            seen.store(inode.wb_errors, Ordering::SeqCst);
            return Err(eio());
        }
        let inode = &mut self.inodes[ino];
        inode.commit();
        if seen.swap(inode.wb_errors, Ordering::SeqCst) != inode.wb_errors {
            return Err(eio());
        }
        Ok(())
    }
}

/// In-memory, fault-injecting [`FileSystem`]. Cloning shares the same disk.
#[derive(Clone)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("FaultFs")
            .field("files", &st.live_ns.keys().collect::<Vec<_>>())
            .field("dead", &st.dead)
            .finish()
    }
}

struct FaultFile {
    state: Arc<Mutex<State>>,
    ino: usize,
    /// The inode's `wb_errors` this handle has reported.
    seen_errors: AtomicU64,
}

impl FaultFile {
    fn sync(&self) -> io::Result<()> {
        let latency = self.state.lock().sync_latency;
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        self.state.lock().sync_file(self.ino, &self.seen_errors)
    }
}

impl FsFile for FaultFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let st = self.state.lock();
        st.check()?;
        let data = &st.inodes[self.ino].live;
        let off = usize::try_from(offset).unwrap_or(usize::MAX);
        if off >= data.len() {
            return Ok(0);
        }
        let n = buf.len().min(data.len() - off);
        buf[..n].copy_from_slice(&data[off..off + n]);
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check()?;
        let off = offset as usize;
        let mut end = off + buf.len();
        let mut result = Ok(());
        if State::take_countdown(&mut st.write_fail_in) {
            st.stats.failed_writes += 1;
            let keep = st.rng.gen_range(0..=buf.len());
            end = off + keep;
            result = Err(eio());
        }
        let cur_len = st.inodes[self.ino].live.len();
        if end > cur_len {
            let room = st.room();
            let growth = (end - cur_len) as u64;
            if growth > room {
                end = cur_len + room as usize;
                result = Err(enospc());
            }
        }
        if end > off {
            let n = end - off;
            st.stats.writes += 1;
            st.stats.bytes_written += n as u64;
            let inode = &mut st.inodes[self.ino];
            if inode.live.len() < end {
                inode.live.resize(end, 0);
            }
            inode.live[off..end].copy_from_slice(&buf[..n]);
            inode.mark_dirty(off, end);
            if let Some(last) = buf[..n].iter().rposition(|&b| b != 0) {
                inode.written_hwm = inode.written_hwm.max(off + last + 1);
            }
        }
        result
    }

    fn len(&self) -> io::Result<u64> {
        let st = self.state.lock();
        st.check()?;
        Ok(st.inodes[self.ino].live.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check()?;
        let len = len as usize;
        let cur = st.inodes[self.ino].live.len();
        if len > cur && (len - cur) as u64 > st.room() {
            return Err(enospc());
        }
        let inode = &mut st.inodes[self.ino];
        inode.live.resize(len, 0);
        inode.mark_dirty(len.min(cur), len.max(cur));
        inode.written_hwm = inode.written_hwm.min(len);
        Ok(())
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        let cur = self.len()?;
        if len > cur {
            self.set_len(len)
        } else {
            Ok(())
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }

    fn release_cache(&self) {
        self.state.lock().stats.cache_releases += 1;
    }
}

impl FaultFs {
    /// A fresh, empty disk whose every random decision derives from `seed`.
    pub fn new(seed: u64) -> FaultFs {
        FaultFs {
            state: Arc::new(Mutex::new(State {
                rng: StdRng::seed_from_u64(seed),
                dead: false,
                inodes: Vec::new(),
                live_ns: BTreeMap::new(),
                durable_ns: BTreeMap::new(),
                dirs: BTreeSet::from([PathBuf::from("/")]),
                sync_fail_in: None,
                write_fail_in: None,
                space_limit_bytes: None,
                clock_ms: 1_700_000_000_000,
                sync_latency: Duration::ZERO,
                stats: FaultStats::default(),
            })),
        }
    }

    /// Cuts the power with a random [`CrashMode`] and no bit flips.
    pub fn crash(&self) -> FaultFs {
        self.crash_with(&CrashSpec::default()).0
    }

    /// Cuts the power: this instance becomes unusable (every operation fails,
    /// as if the machine were gone) and the returned instance holds what the
    /// disk contains afterwards, fully synced.
    pub fn crash_with(&self, spec: &CrashSpec) -> (FaultFs, CrashReport) {
        let mut st = self.state.lock();
        st.dead = true;
        let mut report = CrashReport::default();
        let mut rng = StdRng::seed_from_u64(st.rng.gen());

        // Directory entries.
        let paths: BTreeSet<PathBuf> = st
            .live_ns
            .keys()
            .chain(st.durable_ns.keys())
            .cloned()
            .collect();
        let mut chosen: BTreeMap<PathBuf, usize> = BTreeMap::new();
        for p in paths {
            let l = st.live_ns.get(&p).copied();
            let d = st.durable_ns.get(&p).copied();
            let pick = if l == d {
                l
            } else {
                let keep_new = spec
                    .keep_unsynced_entries
                    .unwrap_or_else(|| rng.gen_bool(0.5));
                if keep_new {
                    l
                } else {
                    if l.is_some() && d.is_none() {
                        report.vanished.push(p.clone());
                    }
                    if l.is_none() {
                        report.resurrected.push(p.clone());
                    }
                    d
                }
            };
            if let Some(ino) = pick {
                chosen.insert(p, ino);
            }
        }

        // File contents, once per inode.
        let mut images: HashMap<usize, usize> = HashMap::new();
        let mut inodes = Vec::new();
        let mut ns = BTreeMap::new();
        for (p, ino) in chosen {
            let new_ino = match images.get(&ino) {
                Some(&n) => n,
                None => {
                    let old = &st.inodes[ino];
                    let (img, lost) = old.crash_image(spec.mode, &mut rng);
                    if lost {
                        report.torn_files.push(p.clone());
                    }
                    let hwm = old.written_hwm.min(img.len());
                    inodes.push(Inode {
                        durable: img.clone(),
                        live: img,
                        dirty: None,
                        written_hwm: hwm,
                        wb_errors: 0,
                    });
                    images.insert(ino, inodes.len() - 1);
                    inodes.len() - 1
                }
            };
            ns.insert(p, new_ino);
        }

        // Media corruption.
        let candidates: Vec<(PathBuf, usize)> = ns
            .iter()
            .filter(|(p, _)| match &spec.flip_suffix {
                Some(s) => p.to_string_lossy().ends_with(s.as_str()),
                None => true,
            })
            .filter(|(_, &i)| inodes[i].written_hwm > 0)
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        if !candidates.is_empty() {
            for _ in 0..spec.bit_flips {
                let (p, i) = &candidates[rng.gen_range(0..candidates.len())];
                let inode: &mut Inode = &mut inodes[*i];
                let off = rng.gen_range(0..inode.written_hwm);
                let bit = rng.gen_range(0..8u8);
                inode.live[off] ^= 1 << bit;
                inode.durable[off] ^= 1 << bit;
                report.flips.push(Flip {
                    path: p.clone(),
                    offset: off as u64,
                    bit,
                });
            }
        }

        let next = st.successor(StdRng::seed_from_u64(rng.gen()), inodes, ns.clone(), ns);
        (next, report)
    }

    /// Kills the process (`kill -9`), not the machine: this instance becomes
    /// unusable exactly as after [`FaultFs::crash_with`], so threads of the
    /// dead process that are still running cannot touch the disk any more,
    /// and the returned instance is what the next process sees. The kernel
    /// survived, so that is the page cache: every written byte and every
    /// directory change, synced or not. What was never synced stays
    /// unsynced there (and a page a failed fsync marked clean stays clean
    /// without being on disk), so a later [`FaultFs::crash`] of the returned
    /// instance can still lose it.
    pub fn kill(&self) -> FaultFs {
        let mut st = self.state.lock();
        st.dead = true;
        let rng = StdRng::seed_from_u64(st.rng.gen());
        st.successor(
            rng,
            st.inodes.clone(),
            st.live_ns.clone(),
            st.durable_ns.clone(),
        )
    }

    /// Every file fsync from now on takes `latency` (outside the disk's lock,
    /// so concurrent syncs overlap): group commit then has batches in
    /// flight at once, as on network block storage.
    pub fn set_sync_latency(&self, latency: Duration) {
        self.state.lock().sync_latency = latency;
    }

    /// The next fsync (file or directory) fails with EIO.
    pub fn fail_next_sync(&self) {
        self.fail_sync_after(0);
    }

    /// After `n` more successful fsyncs, the next one fails with EIO.
    pub fn fail_sync_after(&self, n: u64) {
        self.state.lock().sync_fail_in = Some(n);
    }

    /// After `n` more successful writes, the next one writes a random prefix
    /// and fails with EIO.
    pub fn fail_write_after(&self, n: u64) {
        self.state.lock().write_fail_in = Some(n);
    }

    /// The disk holds at most `bytes` (sum of file lengths); growing past it
    /// fails with ENOSPC. `None` removes the limit.
    pub fn set_space_limit_bytes(&self, bytes: Option<u64>) {
        self.state.lock().space_limit_bytes = bytes;
    }

    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used_bytes()
    }

    pub fn advance_ms(&self, ms: u64) {
        self.state.lock().clock_ms += ms;
    }

    pub fn set_now_ms(&self, ms: u64) {
        self.state.lock().clock_ms = ms;
    }

    pub fn stats(&self) -> FaultStats {
        self.state.lock().stats.clone()
    }

    /// Live content of a file (what a read returns).
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.lock();
        st.live_ns.get(path).map(|&i| st.inodes[i].live.clone())
    }

    /// Overwrites bytes of a file in place, both live and durable (media
    /// corruption or a test fixture).
    pub fn write_file_raw(&self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        let ino = *st.live_ns.get(path).ok_or_else(|| not_found(path))?;
        let inode = &mut st.inodes[ino];
        let off = offset as usize;
        let end = off + bytes.len();
        if inode.live.len() < end {
            inode.live.resize(end, 0);
        }
        if inode.durable.len() < end {
            inode.durable.resize(end, 0);
        }
        inode.live[off..end].copy_from_slice(bytes);
        inode.durable[off..end].copy_from_slice(bytes);
        if let Some(last) = bytes.iter().rposition(|&b| b != 0) {
            inode.written_hwm = inode.written_hwm.max(off + last + 1);
        }
        Ok(())
    }

    /// XORs one byte of a file, live and durable.
    pub fn corrupt_byte(&self, path: &Path, offset: u64, xor: u8) -> io::Result<()> {
        let byte = {
            let st = self.state.lock();
            let ino = *st.live_ns.get(path).ok_or_else(|| not_found(path))?;
            *st.inodes[ino]
                .live
                .get(offset as usize)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset past end"))?
        };
        self.write_file_raw(path, offset, &[byte ^ xor])
    }

    /// Every file path (live namespace).
    pub fn all_files(&self) -> Vec<PathBuf> {
        self.state.lock().live_ns.keys().cloned().collect()
    }

    /// Offset one past the last non-zero byte ever written to `path`.
    pub fn written_len(&self, path: &Path) -> Option<u64> {
        let st = self.state.lock();
        st.live_ns
            .get(path)
            .map(|&i| st.inodes[i].written_hwm as u64)
    }
}

impl FileSystem for FaultFs {
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let mut st = self.state.lock();
        st.check()?;
        let parent = path.parent().ok_or_else(|| not_found(path))?;
        if !st.dirs.contains(parent) {
            return Err(not_found(parent));
        }
        let ino = match st.live_ns.get(path) {
            Some(&ino) => {
                let inode = &mut st.inodes[ino];
                let old = inode.live.len();
                inode.live.clear();
                inode.written_hwm = 0;
                inode.mark_dirty(0, old);
                ino
            }
            None => {
                st.inodes.push(Inode::default());
                let ino = st.inodes.len() - 1;
                st.live_ns.insert(path.to_path_buf(), ino);
                ino
            }
        };
        let seen_errors = AtomicU64::new(st.inodes[ino].wb_errors);
        Ok(Box::new(FaultFile {
            state: self.state.clone(),
            ino,
            seen_errors,
        }))
    }

    fn open_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let st = self.state.lock();
        st.check()?;
        let ino = *st.live_ns.get(path).ok_or_else(|| not_found(path))?;
        let seen_errors = AtomicU64::new(st.inodes[ino].wb_errors);
        Ok(Box::new(FaultFile {
            state: self.state.clone(),
            ino,
            seen_errors,
        }))
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let st = self.state.lock();
        st.check()?;
        if !st.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(st
            .live_ns
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check()?;
        for a in dir.ancestors() {
            if !a.as_os_str().is_empty() {
                st.dirs.insert(a.to_path_buf());
            }
        }
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check()?;
        st.live_ns.remove(path).ok_or_else(|| not_found(path))?;
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check()?;
        let ino = st.live_ns.remove(from).ok_or_else(|| not_found(from))?;
        st.live_ns.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check()?;
        st.stats.dir_syncs += 1;
        let failed = State::take_countdown(&mut st.sync_fail_in);
        let paths: Vec<PathBuf> = st
            .live_ns
            .keys()
            .chain(st.durable_ns.keys())
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect();
        for p in paths {
            if failed && st.rng.gen_bool(0.5) {
                continue;
            }
            match st.live_ns.get(&p).copied() {
                Some(ino) => st.durable_ns.insert(p, ino),
                None => st.durable_ns.remove(&p),
            };
        }
        if failed {
            st.stats.failed_syncs += 1;
            return Err(eio());
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.live_ns.contains_key(path) || st.dirs.contains(path)
    }

    fn now_ms(&self) -> u64 {
        self.state.lock().clock_ms
    }

    fn random_u64(&self) -> u64 {
        self.state.lock().rng.gen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(seed: u64) -> (FaultFs, PathBuf) {
        let fs = FaultFs::new(seed);
        let dir = PathBuf::from("/d");
        fs.create_dir_all(&dir).unwrap();
        (fs, dir)
    }

    #[test]
    fn unsynced_bytes_and_entries_are_dropped() {
        let (fs, dir) = setup(1);
        let p = dir.join("f");
        let f = fs.create_file(&p).unwrap();
        f.write_all_at(b"durable", 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&dir).unwrap();
        f.write_all_at(b" and not", 7).unwrap();
        let q = dir.join("g");
        fs.create_file(&q).unwrap();
        let mut spec = CrashSpec::new(CrashMode::DropUnsynced);
        spec.keep_unsynced_entries = Some(false);
        let (after, report) = fs.crash_with(&spec);
        assert_eq!(after.read_file(&p).unwrap(), b"durable");
        assert!(after.read_file(&q).is_none());
        assert_eq!(report.vanished, vec![q]);
        // The old instance is dead.
        assert!(f.write_all_at(b"x", 0).is_err());
    }

    #[test]
    fn torn_prefix_keeps_a_prefix() {
        for seed in 0..50 {
            let (fs, dir) = setup(seed);
            let p = dir.join("f");
            let f = fs.create_file(&p).unwrap();
            f.allocate(4096).unwrap();
            f.sync_data().unwrap();
            fs.sync_dir(&dir).unwrap();
            let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8 + 1).collect();
            f.write_all_at(&data, 0).unwrap();
            let (after, _) = fs.crash_with(&CrashSpec::new(CrashMode::TornPrefix));
            let img = after.read_file(&p).unwrap();
            let kept = img.iter().position(|&b| b == 0).unwrap_or(img.len());
            assert_eq!(&img[..kept], &data[..kept]);
            assert!(img[kept..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn failed_sync_marks_pages_clean() {
        let (fs, dir) = setup(7);
        let p = dir.join("f");
        let f = fs.create_file(&p).unwrap();
        fs.sync_dir(&dir).unwrap();
        f.write_all_at(&[9u8; 4096], 0).unwrap();
        fs.fail_next_sync();
        assert!(f.sync_data().is_err());
        // A retry "succeeds" but persists nothing more.
        f.sync_data().unwrap();
        let (after, _) = fs.crash_with(&CrashSpec::new(CrashMode::DropUnsynced));
        let img = after.read_file(&p).unwrap_or_default();
        assert!(img.len() <= 4096);
        // Whatever survived is a subset of sectors (possibly none).
        for chunk in img.chunks(SECTOR_BYTES) {
            assert!(chunk.iter().all(|&b| b == 9) || chunk.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn kill_keeps_the_page_cache_and_what_a_power_loss_would_lose() {
        let (fs, dir) = setup(5);
        let synced = dir.join("synced");
        let f = fs.create_file(&synced).unwrap();
        f.write_all_at(b"on disk", 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&dir).unwrap();
        // A page a failed fsync marked clean without writing it.
        let cleaned = dir.join("cleaned");
        let c = fs.create_file(&cleaned).unwrap();
        fs.sync_dir(&dir).unwrap();
        c.write_all_at(&[7u8; 4096], 0).unwrap();
        f.write_all_at(b" + cached", 7).unwrap();
        let fresh = dir.join("fresh");
        fs.create_file(&fresh)
            .unwrap()
            .write_all_at(b"never synced", 0)
            .unwrap();
        fs.fail_next_sync();
        assert!(c.sync_data().is_err());
        let cleaned_durable = {
            let st = fs.state.lock();
            st.inodes[st.live_ns[&cleaned]].durable.clone()
        };

        let next = fs.kill();
        // The killed process can no longer reach the disk.
        assert!(f.write_all_at(b"x", 0).is_err());
        assert!(f.sync_data().is_err());
        assert!(fs.create_file(&dir.join("late")).is_err());

        // The next process reads the page cache, unsynced parts included.
        assert_eq!(next.read_file(&synced).unwrap(), b"on disk + cached");
        assert_eq!(next.read_file(&fresh).unwrap(), b"never synced");
        assert_eq!(next.read_file(&cleaned).unwrap(), vec![7u8; 4096]);
        let g = next.open_file(&synced).unwrap();
        g.write_all_at(b"!", 16).unwrap();

        // Nothing was synced since: a power loss takes it all away again.
        let mut spec = CrashSpec::new(CrashMode::DropUnsynced);
        spec.keep_unsynced_entries = Some(false);
        let (after, report) = next.crash_with(&spec);
        // (The file length is metadata: the new one may survive, as zeros.)
        let img = after.read_file(&synced).unwrap();
        assert_eq!(&img[..7], b"on disk");
        assert!(img[7..].iter().all(|&b| b == 0), "{img:?}");
        assert!(after.read_file(&fresh).is_none());
        assert_eq!(report.vanished, vec![fresh.clone()]);
        // Marked clean before the kill: only what the failed fsync happened
        // to write survives (the length may or may not have made it).
        let img = after.read_file(&cleaned).unwrap();
        for (i, b) in img.iter().enumerate() {
            assert_eq!(*b, cleaned_durable.get(i).copied().unwrap_or(0), "byte {i}");
        }

        // Whereas syncing after the kill makes things durable as usual.
        let next2 = after.kill();
        let h = next2.open_file(&synced).unwrap();
        h.write_all_at(b" again", 7).unwrap();
        h.sync_data().unwrap();
        let (after2, _) = next2.crash_with(&spec);
        let img = after2.read_file(&synced).unwrap();
        assert_eq!(&img[..13], b"on disk again");
        assert!(img[13..].iter().all(|&b| b == 0), "{img:?}");
    }

    #[test]
    fn space_limit_gives_enospc() {
        let (fs, dir) = setup(3);
        fs.set_space_limit_bytes(Some(1000));
        let f = fs.create_file(&dir.join("f")).unwrap();
        f.write_all_at(&[1u8; 600], 0).unwrap();
        let e = f.write_all_at(&[1u8; 600], 600).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(f.len().unwrap(), 1000);
        assert!(f.allocate(2000).is_err());
    }

    #[test]
    fn bit_flips_are_reported() {
        let (fs, dir) = setup(11);
        let p = dir.join("x.log");
        let f = fs.create_file(&p).unwrap();
        f.write_all_at(&[0xAA; 100], 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&dir).unwrap();
        let mut spec = CrashSpec::new(CrashMode::DropUnsynced);
        spec.bit_flips = 3;
        spec.flip_suffix = Some(".log".into());
        let (after, report) = fs.crash_with(&spec);
        assert_eq!(report.flips.len(), 3);
        let img = after.read_file(&p).unwrap();
        let differing = img.iter().filter(|&&b| b != 0xAA).count();
        assert!((1..=3).contains(&differing));
    }
}
