//! The keyspace: every logical database, partitioned into shards that each
//! sit behind their own lock, so connections on different cores rarely wait
//! for each other.
//!
//! A command locks the shards of the keys it names (in ascending shard order,
//! so two commands can never deadlock) and works through a [`Txn`]. Commands
//! that span the whole keyspace (FLUSHALL, SWAPDB, KEYS inside MULTI) lock
//! every shard.

use crate::db::Db;
use crate::functions::FunctionLibraries;
use crate::keymap::{self, Place};
use crate::replication::ReplicationFeed;
use crate::shard::Shard;
use crate::txn::{ShardList, Txn};
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

/// Default number of shards; a power of two so the mapping is a mask.
pub const DEFAULT_SHARD_COUNT: usize = 64;
/// Redis's default `databases`.
pub const DEFAULT_DATABASES: usize = 16;

pub struct Keyspace {
    shards: Box<[Mutex<Shard>]>,
    num_dbs: usize,
    /// Per database: whether its writes go to the log (its level is not
    /// `none`). Changed only while every shard is locked
    /// ([`Txn::set_db_logged`]), read under any shard lock.
    logged: Box<[AtomicBool]>,
    /// Per database: the highest LSN of a logged write to it. Whole-database
    /// replies (DBSIZE, KEYS, SCAN, INFO keyspace) depend on it, in O(1).
    write_lsn: Box<[AtomicU64]>,
    /// Largest record payload the log accepts; a transaction that would
    /// exceed it is refused before it changes anything.
    max_record_bytes: AtomicU64,
    /// The function libraries. Locked after any shard lock, never before.
    functions: Mutex<FunctionLibraries>,
    /// Where committed writes go once a replica attached (see
    /// `crate::replication`); `feeding` says whether to call it.
    feed: OnceLock<Box<dyn ReplicationFeed>>,
    feeding: AtomicBool,
    /// On a replica: the primary's stream position the applied writes
    /// reached, as logged with them (`Mutation::ReplOrigin`).
    /// With the LSN of its record (recovery may meet them out of order).
    repl_origin: Mutex<(u64, Option<crate::mutation::ReplOrigin>)>,
    /// WAL streams: shard `i` logs to stream `i % num_streams`.
    num_streams: AtomicUsize,
    /// Per shard, per database: where its key map's index lies
    /// (`keymap::Place`), published under the shard's lock when it moves
    /// and read without it, for [`Keyspace::prefetch_batch`].
    places: Box<[PlaceHint]>,
}

/// A [`Place`] that can be read without the shard's lock. Its two words
/// may be read torn, from two places: a prefetch through that is wasted,
/// never wrong.
#[derive(Default)]
struct PlaceHint {
    ctrl: AtomicUsize,
    mask: AtomicUsize,
}

impl PlaceHint {
    fn load(&self) -> Place {
        Place::new(
            self.ctrl.load(Ordering::Relaxed),
            self.mask.load(Ordering::Relaxed),
        )
    }

    fn store(&self, place: Place) {
        let (ctrl, mask) = place.parts();
        self.ctrl.store(ctrl, Ordering::Relaxed);
        self.mask.store(mask, Ordering::Relaxed);
    }
}

/// The wall clock in Unix milliseconds.
pub fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The shard of `key` for a keyspace of `shard_count` shards. Uses CRC32C,
/// a fixed function, so the mapping survives restarts (checkpoints record a
/// replay position per shard).
pub fn shard_for_key(key: &[u8], shard_count: usize) -> usize {
    debug_assert!(shard_count.is_power_of_two());
    (key_crc32c(key) as usize) & (shard_count - 1)
}

/// Keys longer than this go to the `crc32c` crate.
const SHORT_KEY_BYTES: usize = 64;

/// CRC32C of a key, the same value as `crc32c::crc32c`. Every command
/// computes it for each key it touches (to find the shard, when locking and
/// again when reading), and keys are short: the crate's general routine
/// (alignment split, three-way interleaving set up for long buffers) spent
/// about 160 instructions on a 16-byte key, where the hardware instruction
/// over its words takes a tenth of that.
#[inline]
pub fn key_crc32c(key: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if key.len() <= SHORT_KEY_BYTES && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above).
            return unsafe { short_crc32c_sse42(key) };
        }
    }
    crc32c::crc32c(key)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn short_crc32c_sse42(key: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut crc = u64::from(!0u32);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(b));
    }
    let mut crc = crc as u32;
    for &b in words.remainder() {
        crc = _mm_crc32_u8(crc, b);
    }
    !crc
}

impl Keyspace {
    pub fn new(num_dbs: usize, shard_count: usize) -> Keyspace {
        assert!(
            shard_count.is_power_of_two(),
            "shard count must be a power of two"
        );
        assert!(num_dbs > 0, "at least one database");
        Keyspace {
            shards: (0..shard_count)
                .map(|_| Mutex::new(Shard::new(num_dbs)))
                .collect(),
            num_dbs,
            logged: (0..num_dbs).map(|_| AtomicBool::new(true)).collect(),
            write_lsn: (0..num_dbs).map(|_| AtomicU64::new(0)).collect(),
            max_record_bytes: AtomicU64::new(crate::wal::MAX_RECORD_BYTES),
            functions: Mutex::new(FunctionLibraries::default()),
            feed: OnceLock::new(),
            feeding: AtomicBool::new(false),
            repl_origin: Mutex::new((0, None)),
            num_streams: AtomicUsize::new(1),
            places: (0..shard_count * num_dbs)
                .map(|_| PlaceHint::default())
                .collect(),
        }
    }

    /// Most keys [`Keyspace::prefetch_batch`] takes at once.
    pub const PREFETCH_BATCH: usize = 8;

    /// Asks the CPU to fetch what lookups of `keys` in database `db` will
    /// read: the connection calls it for the next commands of a pipelined
    /// batch (up to [`Keyspace::PREFETCH_BATCH`]) before it runs the first.
    /// On a keyspace larger than the cache a lookup waits for its index
    /// lines, then for the entry it compares, then for the value it reads,
    /// one after the other. Taking each step for the whole batch before the
    /// next, each waits about once for all the keys, and the commands then
    /// find all three at hand. The first step needs no lock (see
    /// `keymap::Place`); the later ones read the maps, so they take each
    /// shard's lock, and skip a key whose shard is busy: it is only a hint.
    pub fn prefetch_batch(&self, db: usize, keys: &[&[u8]]) {
        if db >= self.num_dbs {
            return;
        }
        let mut at = [(0usize, 0u64); Self::PREFETCH_BATCH];
        let n = keys.len().min(Self::PREFETCH_BATCH);
        for (slot, key) in at.iter_mut().zip(&keys[..n]) {
            let shard = self.shard_index(key);
            let hash = keymap::key_hash(key);
            if let Some(hint) = self.place_hint(shard, db) {
                hint.load().prefetch(hash);
            }
            *slot = (shard, hash);
        }
        for &(shard, hash) in &at[..n] {
            if let Some(s) = self.shards[shard].try_lock() {
                s.dbs[db].prefetch_candidates(hash);
            }
        }
        for (&(shard, hash), key) in at[..n].iter().zip(keys) {
            if let Some(s) = self.shards[shard].try_lock() {
                s.dbs[db].prefetch_value(hash, key);
            }
        }
    }

    fn place_hint(&self, shard: usize, db: usize) -> Option<&PlaceHint> {
        if db >= self.num_dbs {
            return None;
        }
        self.places.get(shard * self.num_dbs + db)
    }

    /// [`Keyspace::publish_place`] for a read: only where nothing was
    /// published yet (a restart fills the maps without a transaction), so
    /// that a read costs one load of a line no one writes.
    #[inline]
    pub(crate) fn publish_first_place(&self, shard: usize, db: usize, place: Place) {
        if let Some(hint) = self.place_hint(shard, db) {
            if hint.load() == Place::default() {
                hint.store(place);
            }
        }
    }

    /// Publishes where shard `shard`'s map of database `db` now lies, if it
    /// moved; called under that shard's lock.
    #[inline]
    pub(crate) fn publish_place(&self, shard: usize, db: usize, place: Place) {
        // Read first: the line stays shared between the threads that
        // prefetch through it unless the table really moved.
        if let Some(hint) = self.place_hint(shard, db) {
            if hint.load() != place {
                hint.store(place);
            }
        }
    }

    /// The WAL's stream count (set once the log is open; 1 before).
    pub fn num_streams(&self) -> usize {
        self.num_streams.load(Ordering::Relaxed)
    }

    pub fn set_num_streams(&self, n: usize) {
        self.num_streams.store(n.max(1), Ordering::Relaxed);
    }

    /// The replication stream position the last logged record that had
    /// one reached (None: none yet, or a full sync began after it).
    pub fn repl_origin(&self) -> Option<crate::mutation::ReplOrigin> {
        self.repl_origin.lock().1.clone()
    }

    /// The position and the LSN of its record, read together (a
    /// checkpoint stores both).
    pub fn repl_position(&self) -> (u64, Option<crate::mutation::ReplOrigin>) {
        self.repl_origin.lock().clone()
    }

    /// The LSN of the record the position came from (0: none seen).
    pub fn repl_origin_lsn(&self) -> u64 {
        self.repl_origin.lock().0
    }

    /// Takes `o`, logged at `lsn`, unless a later record's is known
    /// (recovery meets records out of LSN order; live commits stamp the
    /// LSN their record got).
    pub fn set_repl_origin(&self, o: &crate::mutation::ReplOrigin, lsn: u64) {
        let mut cur = self.repl_origin.lock();
        if lsn >= cur.0 {
            *cur = (lsn, (!o.replid.is_empty()).then(|| o.clone()));
        }
    }

    /// Forgets the position (recovery could not prove it is the latest).
    pub fn clear_repl_origin(&self) {
        *self.repl_origin.lock() = (0, None);
    }

    /// Installs the replication feed (once; later calls are ignored). It
    /// stays off until [`Keyspace::start_feeding`].
    pub fn set_replication_feed(&self, feed: Box<dyn ReplicationFeed>) {
        let _ = self.feed.set(feed);
    }

    /// Turns the feed on. A caller that then locks every shard knows that
    /// each commit either is in what it reads or reaches the feed after.
    /// Databases record their expired keys from before the feed is on, so
    /// that none expired after it is missed.
    pub fn start_feeding(&self) {
        if self.feeding.load(Ordering::Acquire) {
            return;
        }
        for s in self.shards.iter() {
            for d in s.lock().dbs.iter_mut() {
                d.log_expired_for_feed();
            }
        }
        self.feeding.store(true, Ordering::Release);
    }

    /// Hands the feed the keys `shard` expired outside a transaction
    /// (active expiry), under its lock, so they precede any later write
    /// there. Whoever removes keys outside a transaction calls this before
    /// unlocking.
    pub fn feed_expired(&self, shard: &mut Shard, now_ms: u64) {
        let mut expired = Vec::new();
        crate::txn::take_expired_for_feed(shard, 0, &mut expired);
        if let (false, Some(feed)) = (expired.is_empty(), self.feed()) {
            feed.committed(0, now_ms, &[], &expired);
        }
    }

    /// The feed, when it is on: the one check on the commit path.
    pub(crate) fn feed(&self) -> Option<&dyn ReplicationFeed> {
        if !self.feeding.load(Ordering::Relaxed) {
            return None;
        }
        self.feed.get().map(|f| &**f)
    }

    /// The function libraries' lock (transactions, checkpoints, loading).
    pub fn functions(&self) -> &Mutex<FunctionLibraries> {
        &self.functions
    }

    /// Every function library, (name, code) in name order.
    pub fn function_libraries(&self) -> Vec<(Bytes, Bytes)> {
        self.functions
            .lock()
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect()
    }

    /// The LSN of the last logged change to the function libraries: a
    /// reply that used them depends on it.
    pub fn functions_write_lsn(&self) -> u64 {
        self.functions.lock().write_lsn
    }

    /// Whether writes to database `db` are logged.
    pub fn is_logged(&self, db: usize) -> bool {
        self.logged
            .get(db)
            .is_some_and(|l| l.load(Ordering::Acquire))
    }

    /// Sets whether `db` is logged, at start-up, before any command runs.
    /// At run time use [`Txn::set_db_logged`], which logs what a database
    /// that becomes logged already holds.
    pub fn set_logged_at_start(&self, db: usize, logged: bool) {
        self.store_logged(db, logged);
    }

    pub(crate) fn store_logged(&self, db: usize, logged: bool) {
        if let Some(l) = self.logged.get(db) {
            l.store(logged, Ordering::Release);
        }
    }

    /// The highest LSN of a logged write to database `db`.
    pub fn db_write_lsn(&self, db: usize) -> u64 {
        self.write_lsn
            .get(db)
            .map_or(0, |l| l.load(Ordering::Acquire))
    }

    /// The highest LSN of a logged write to any database.
    pub fn max_write_lsn(&self) -> u64 {
        self.write_lsn
            .iter()
            .map(|l| l.load(Ordering::Acquire))
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn note_write(&self, db: usize, lsn: u64) {
        if let Some(l) = self.write_lsn.get(db) {
            l.fetch_max(lsn, Ordering::AcqRel);
        }
    }

    pub fn max_record_bytes(&self) -> u64 {
        self.max_record_bytes.load(Ordering::Relaxed)
    }

    /// Sets the record size limit (the log's `max_record_bytes`).
    pub fn set_max_record_bytes(&self, bytes: u64) {
        self.max_record_bytes.store(bytes, Ordering::Relaxed);
    }

    pub fn num_dbs(&self) -> usize {
        self.num_dbs
    }

    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    pub fn shard_index(&self, key: &[u8]) -> usize {
        shard_for_key(key, self.shards.len())
    }

    /// Direct access to one shard's lock (checkpoints, active expiry, stats).
    pub fn shard(&self, index: usize) -> &Mutex<Shard> {
        &self.shards[index]
    }

    /// Locks the shards holding `keys` and returns a transaction over them.
    /// Its time is read from the wall clock once the locks are held (see
    /// [`Shard::tick`]).
    pub fn lock_keys<'k, I>(&self, keys: I) -> Txn<'_>
    where
        I: IntoIterator<Item = &'k [u8]>,
    {
        Txn::new(self, self.shards_of(keys), None)
    }

    /// Like [`Keyspace::lock_keys`] with an explicit clock reading, for
    /// simulations and the embedded benchmark. The shards' clocks still
    /// keep the transaction's time from going backwards.
    pub fn lock_keys_at<'k, I>(&self, keys: I, now_ms: u64) -> Txn<'_>
    where
        I: IntoIterator<Item = &'k [u8]>,
    {
        Txn::new(self, self.shards_of(keys), Some(now_ms))
    }

    /// Pushed one by one rather than collected: `collect` into the small
    /// vector went through its generic `extend` (size hints, a reserve),
    /// about 70 instructions for the one key most commands have.
    #[inline]
    fn shards_of<'k, I>(&self, keys: I) -> ShardList
    where
        I: IntoIterator<Item = &'k [u8]>,
    {
        let mut idx = ShardList::new();
        for k in keys {
            idx.push(self.shard_index(k));
        }
        if idx.len() > 1 {
            idx.sort_unstable();
            idx.dedup();
        }
        idx
    }

    /// Like [`Keyspace::lock_keys`], but gives up (returning None, holding
    /// nothing) when a shard stays locked for `patience`. A caller that must
    /// stay responsive while someone holds shards for long (a running
    /// script) retries in a loop and checks why it waits in between.
    /// `now_ms`, the wall clock as the caller read it just before, is the
    /// transaction's time when every shard is taken at the first try;
    /// without it, or after a wait, the clock is read again.
    pub fn try_lock_keys_for<'k, I>(
        &self,
        keys: I,
        patience: Duration,
        now_ms: Option<u64>,
    ) -> Option<Txn<'_>>
    where
        I: IntoIterator<Item = &'k [u8]>,
    {
        Txn::try_new(self, self.shards_of(keys), patience, now_ms)
    }

    /// Like [`Keyspace::lock_all`], giving up after `patience`; `now_ms` as
    /// in [`Keyspace::try_lock_keys_for`].
    pub fn try_lock_all_for(&self, patience: Duration, now_ms: Option<u64>) -> Option<Txn<'_>> {
        Txn::try_new(self, (0..self.shards.len()).collect(), patience, now_ms)
    }

    /// Locks every shard.
    pub fn lock_all(&self) -> Txn<'_> {
        Txn::new(self, (0..self.shards.len()).collect(), None)
    }

    /// Locks every shard, with an explicit clock reading.
    pub fn lock_all_at(&self, now_ms: u64) -> Txn<'_> {
        Txn::new(self, (0..self.shards.len()).collect(), Some(now_ms))
    }

    /// Makes every database record the keys it expires (see
    /// [`crate::db::Db::take_expired`]), or stop. Locks one shard at a time.
    pub fn log_expired(&self, on: bool) {
        for s in self.shards.iter() {
            for d in s.lock().dbs.iter_mut() {
                d.log_expired(on);
            }
        }
    }

    /// Live key count of database `db`, summed shard by shard (not atomic
    /// across shards, like Redis's DBSIZE under concurrent writes).
    /// Keys removed because they expired, in every database, since this
    /// keyspace was made (INFO's `expired_keys` counts from a base).
    pub fn expired_keys(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.lock().dbs.iter().map(Db::expired_count).sum::<u64>())
            .sum()
    }

    pub fn db_len(&self, db: usize) -> usize {
        self.shards.iter().map(|s| s.lock().dbs[db].len()).sum()
    }

    /// Approximate bytes held by values, for INFO memory.
    pub fn approx_memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.dbs
                    .iter()
                    .flat_map(|d| d.iter())
                    .map(|(k, e)| crate::db::key_memory_bytes(k, &e.value))
                    .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shards are fixed by the CRC (checkpoints record positions per
    /// shard), so the short-key path must agree with the crate everywhere,
    /// at every length and alignment.
    #[test]
    fn key_crc_is_the_crates_crc32c() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u8
        };
        let buf: Vec<u8> = (0..300).map(|_| next()).collect();
        for offset in 0..8 {
            for len in 0..=(SHORT_KEY_BYTES * 2 + 3) {
                let key = &buf[offset..offset + len];
                assert_eq!(
                    key_crc32c(key),
                    crc32c::crc32c(key),
                    "len {len} offset {offset}"
                );
            }
        }
        assert_eq!(key_crc32c(b"123456789"), 0xe306_9283);
    }
}
