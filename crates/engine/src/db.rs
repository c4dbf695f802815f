//! One logical database within one shard: a map from key to [`Entry`], with
//! lazy expiry and the bookkeeping that lets replies wait for durability.
//!
//! The map keeps entries by position (see `crate::keymap`) so that random
//! sampling (RANDOMKEY, active expiry) is O(1) and SCAN can walk it by
//! position with a stable guarantee (see [`Db::scan`]).

use crate::key::{Key, Str};
use crate::keymap::{KeyMap, Vacant};
use crate::snapshot::Cursor;
use crate::value::Value;
use bytes::Bytes;
use std::sync::atomic::{AtomicU8, Ordering};

/// LSN stamped on entries whose write could not be logged because the log
/// failed: no reply that depends on them can ever be released as durable,
/// and the server turns such replies into errors.
pub const UNLOGGED_FAILED_LSN: u64 = u64::MAX;

/// A key's value and its bookkeeping, in 24 bytes: every key pays for them
/// in its map slot, so the rest is packed into one word. A key's expiry
/// time lives in the database's map of keys with a TTL (as Redis keeps an
/// `expires` dictionary); the entry only says whether it has one.
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Value,
    meta: Meta,
}

/// Equal data, whenever it was last touched.
impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.value == other.value && self.meta.same_data(other.meta)
    }
}

/// Redis's initial LFU counter for a new key.
pub const LFU_INIT: u8 = 5;

/// Redis's LRU clock: 24 bits of seconds, wrapping every 194 days.
pub const LRU_MASK: u32 = (1 << 24) - 1;

/// The LRU clock at `now_ms` (Unix milliseconds), as INFO's `lru_clock`.
pub fn lru_clock(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32 & LRU_MASK
}

/// Access bookkeeping per key: the LRU clock (seconds, 24 bits) of the
/// last access, and Redis's LFU counter (counted by [`crate::lfu`] while an
/// LFU policy is chosen; RESTORE ... FREQ sets it). Not logged or
/// checkpointed: like Redis's LRU field, it is a hint.
#[derive(Clone, Copy, Debug, Default)]
pub struct Access {
    pub secs: u32,
    pub freq: u8,
}

impl Access {
    /// What a key loaded now is stamped with, as a new key would be; read
    /// once per batch of loaded keys rather than from the clock per key.
    pub fn loaded_now() -> Access {
        Access {
            secs: wall_secs() & LRU_MASK,
            freq: LFU_INIT,
        }
    }

    /// Seconds since the last access, as of `now_s` (Unix seconds); wraps
    /// as Redis's LRU clock does.
    pub fn idle_secs(self, now_s: u32) -> u32 {
        now_s.wrapping_sub(self.secs) & LRU_MASK
    }
}

fn wall_secs() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

/// An entry's bookkeeping in one word, low bits first:
/// - 29 bits: the low bits of the LSN of the last logged write;
/// - 2 bits: what the LSN is (never logged, logged, or failed to log);
/// - 1 bit: the key has a TTL;
/// - 24 bits: the LRU clock of the last access;
/// - 8 bits: the LFU counter.
///
/// The LSN's high bits are the database's: it keeps the highest LSN it
/// stamped, and a stored LSN reads as the highest one at or below that with
/// the same low bits ([`Db`]'s `lsn_of`). That is exact for the last 2^29
/// (half a billion) records, and for an older write an LSN at most as high
/// as one already handed out, so a reply waits at worst for a record that
/// is already durable or soon will be: never for one that will not come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Meta(u64);

const LSN_BITS: u32 = 29;
const LSN_LOW: u64 = (1 << LSN_BITS) - 1;
const KIND_SHIFT: u32 = LSN_BITS;
const KIND_MASK: u64 = 0b11 << KIND_SHIFT;
const KIND_LOGGED: u64 = 1 << KIND_SHIFT;
const KIND_FAILED: u64 = 2 << KIND_SHIFT;
/// Logged, by a record in another WAL stream than the key's own (a
/// multi-key write): a reply that reads it waits for every stream.
const KIND_OTHER_STREAM: u64 = 3 << KIND_SHIFT;
const TTL_BIT: u64 = 1 << 31;
const SECS_SHIFT: u32 = 32;
const FREQ_SHIFT: u32 = 56;
const DATA_MASK: u64 = LSN_LOW | KIND_MASK | TTL_BIT;

impl Meta {
    fn same_data(self, other: Meta) -> bool {
        self.0 & DATA_MASK == other.0 & DATA_MASK
    }

    fn access(self) -> Access {
        Access {
            secs: ((self.0 >> SECS_SHIFT) as u32) & LRU_MASK,
            freq: (self.0 >> FREQ_SHIFT) as u8,
        }
    }

    fn set_access(&mut self, a: Access) {
        self.0 = (self.0 & DATA_MASK)
            | (u64::from(a.secs & LRU_MASK) << SECS_SHIFT)
            | (u64::from(a.freq) << FREQ_SHIFT);
    }

    fn has_ttl(self) -> bool {
        self.0 & TTL_BIT != 0
    }

    fn set_ttl(&mut self, on: bool) {
        if on {
            self.0 |= TTL_BIT;
        } else {
            self.0 &= !TTL_BIT;
        }
    }

    fn set_lsn(&mut self, lsn: u64, other_stream: bool) {
        let bits = match lsn {
            0 => 0,
            UNLOGGED_FAILED_LSN => KIND_FAILED,
            l if other_stream => KIND_OTHER_STREAM | (l & LSN_LOW),
            l => KIND_LOGGED | (l & LSN_LOW),
        };
        self.0 = (self.0 & !(LSN_LOW | KIND_MASK)) | bits;
    }

    /// The LSN, given the highest LSN stamped where it was (`reference`).
    fn lsn(self, reference: u64) -> u64 {
        match self.0 & KIND_MASK {
            KIND_LOGGED | KIND_OTHER_STREAM => {
                let low = self.0 & LSN_LOW;
                let back = reference.wrapping_sub(low) & LSN_LOW;
                debug_assert!(back <= reference, "an LSN above its database's highest");
                reference.saturating_sub(back).max(1)
            }
            KIND_FAILED => UNLOGGED_FAILED_LSN,
            _ => 0,
        }
    }
}

thread_local! {
    /// Keys this thread has recorded for the replication feed, ever. A
    /// transaction stays on one thread, so it compares this with what it
    /// saw last to know, without looking at every database of its shards,
    /// whether it has removals to take.
    static FEED_REMOVALS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// See `FEED_REMOVALS`.
pub(crate) fn feed_removals_on_this_thread() -> u32 {
    FEED_REMOVALS.with(|n| n.get())
}

/// Why reads leave expired keys in place (see [`keep_expired`]): a bit
/// per reason, so that either ending leaves the other in force.
static EXPIRED_KEPT: AtomicU8 = AtomicU8::new(0);
const KEPT_FOR_PAUSE: u8 = 1;
const KEPT_ON_REPLICA: u8 = 2;

fn expired_kept() -> bool {
    EXPIRED_KEPT.load(Ordering::Relaxed) != 0
}

fn set_kept(bit: u8, on: bool) {
    if on {
        EXPIRED_KEPT.fetch_or(bit, Ordering::Relaxed);
    } else {
        EXPIRED_KEPT.fetch_and(!bit, Ordering::Relaxed);
    }
}

/// Whether this server is a replica that leaves expiry to its primary
/// (see [`keep_expired_on_replica`]).
pub(crate) fn expiry_left_to_primary() -> bool {
    EXPIRED_KEPT.load(Ordering::Relaxed) & KEPT_ON_REPLICA != 0
}

/// While on, a read treats an expired key as missing without removing it,
/// so that nothing changes the dataset, the log or the replication stream:
/// the server turns it on for a client pause, as Redis does, so a replica
/// can catch up to exactly the primary's state. Writes still expire what
/// they touch; a pause holds them.
pub fn keep_expired(on: bool) {
    set_kept(KEPT_FOR_PAUSE, on);
}

/// The same for as long as this server is a replica: its primary decides
/// when a key expires and streams the DEL, as Redis's does, so the
/// replica's own clock (or its lag behind the stream) never removes a key
/// the primary still writes to.
pub fn keep_expired_on_replica(on: bool) {
    set_kept(KEPT_ON_REPLICA, on);
}

/// Whether a key expiring at `at_ms` (0: never) has expired by `now_ms`.
pub(crate) fn is_due(at_ms: u64, now_ms: u64) -> bool {
    at_ms != 0 && at_ms <= now_ms
}

/// When the entry `e` of `key` expires (0: never), from the map of keys
/// with a TTL: no lookup unless the entry says it has one.
fn expiry_in(volatile: &KeyMap<u64>, key: &[u8], e: &Entry) -> u64 {
    if e.has_ttl() {
        volatile.get(key).copied().unwrap_or(0)
    } else {
        0
    }
}

/// What a key costs: its slot in the map (the key and the entry), a slot
/// of the map's index, the key's block when it is too long to be inline,
/// and the value's heap (for `MEMORY USAGE` and INFO).
pub fn key_memory_bytes(key: &[u8], value: &Value) -> usize {
    const BUCKET: usize = std::mem::size_of::<Key>() + std::mem::size_of::<Entry>();
    // A 4-byte position and its control byte, at the index's typical load.
    const INDEX_SLOT: usize = 7;
    let key_heap = if key.len() > crate::key::INLINE_MAX {
        key.len()
    } else {
        0
    };
    BUCKET + INDEX_SLOT + key_heap + value.approx_size_bytes()
}

impl Entry {
    /// Whether the record that last wrote this entry went to another WAL
    /// stream than its key's own shard uses (a multi-key write): what
    /// depends on it then needs every stream, not only that one.
    pub fn written_through_other_stream(&self) -> bool {
        self.meta.0 & KIND_MASK == KIND_OTHER_STREAM
    }

    /// A value with no TTL, never logged, not yet accessed.
    pub fn new(value: Value) -> Entry {
        Entry {
            value,
            meta: Meta::default(),
        }
    }

    /// Whether the key has a TTL ([`Db::expire_at`] says when).
    pub fn has_ttl(&self) -> bool {
        self.meta.has_ttl()
    }

    pub fn access(&self) -> Access {
        self.meta.access()
    }

    pub(crate) fn set_access(&mut self, a: Access) {
        self.meta.set_access(a);
    }

    /// Readies the entry to be stored as written now, expiring at
    /// `expire_at_ms` (0: never): unstamped, for `Db::stamp` sets its LSN
    /// once the write is logged, and accessed as `access` says. Every bit
    /// of its metadata is set.
    fn mark_written(&mut self, expire_at_ms: u64, access: Access) {
        self.meta.set_lsn(0, false);
        self.meta.set_ttl(expire_at_ms != 0);
        self.meta.set_access(access);
    }

    /// Counts an access at `now_s` (LRU clock, and the LFU counter when on).
    fn touch(&mut self, now_s: u32) {
        let mut a = self.meta.access();
        crate::lfu::touch(&mut a, now_s);
        self.meta.set_access(a);
    }
}

/// A key as the map keeps it: a copy, inline when short. The caller's
/// handle usually shares its allocation with the request or the logged
/// mutation, and keeping a share would cost a reference-count block per key
/// for as long as the key lives.
fn own(key: &[u8]) -> Key {
    Key::new(key)
}

#[derive(Clone, Debug, Default)]
pub struct Db {
    map: KeyMap<Entry>,
    /// Keys that carry a TTL, with their expiry time (Unix milliseconds),
    /// sampled by active expiry.
    volatile: KeyMap<u64>,
    /// The highest LSN stamped on an entry here: what a stored LSN's high
    /// bits are read against (see `Meta`).
    max_lsn: u64,
    /// LSN of the latest logged write that removed keys from this database
    /// (DEL, expiry of a logged key, FLUSHDB): a reply that reports a key as
    /// missing depends on it.
    pub miss_lsn: u64,
    /// LSN of the latest SWAPDB involving this database: every reply about
    /// this database depends on it.
    pub floor_lsn: u64,
    /// Keys removed because they expired, kept only while the server wants
    /// to announce them (keyspace notifications); see [`Db::take_expired`].
    expired: Option<Vec<Bytes>>,
    /// The same, kept for the replication feed while it is on (see
    /// [`Db::take_expired_for_feed`]): separate, since notifications and
    /// the feed take them at different times.
    expired_for_feed: Option<Vec<Bytes>>,
    /// Keys removed because they had expired (lazily, or by sampling),
    /// for INFO's `expired_keys`.
    expired_count: u64,
    /// The latest time a lookup ran at, in seconds: what new entries are
    /// stamped with (0 until the first lookup, e.g. while loading).
    now_s: u32,
    /// Lookups leave LRU/LFU alone: set by a transaction of a client in
    /// `CLIENT NO-TOUCH` mode for as long as it holds the shard.
    no_touch: bool,
    /// No key has expired, whatever the time: set by a transaction that
    /// applies a primary's stream (see `Txn::hold_expiry`) for as long as
    /// it holds the shard.
    expiry_held: bool,
    /// Snapshots being copied out of this database (see `crate::snapshot`);
    /// usually none, and then every write checks one length.
    snapshots: Snapshots,
}

/// A copy of a database is not part of the original's snapshots.
#[derive(Debug, Default)]
struct Snapshots(Vec<Cursor>);

impl Clone for Snapshots {
    fn clone(&self) -> Snapshots {
        Snapshots(Vec::new())
    }
}

impl Db {
    /// Bytes of the structures that find keys rather than hold them: the
    /// map of keys (its index and its fixed-size slots) and the map of
    /// TTLs, as Redis reports its `main` and `expires` dictionaries in
    /// MEMORY STATS.
    pub fn table_bytes(&self) -> (usize, usize) {
        (self.map.allocated_bytes(), self.volatile.allocated_bytes())
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn volatile_len(&self) -> usize {
        self.volatile.len()
    }

    /// The mean time to live, in ms, of up to `max` keys with a TTL that
    /// have not expired by `now_ms`, spread evenly over the keys that have
    /// one (INFO keyspace's `avg_ttl`, an estimate in Redis too), and how
    /// many it averaged.
    pub fn sampled_ttl_ms(&self, now_ms: u64, max: usize) -> (u64, usize) {
        let len = self.volatile.len();
        let step = len.div_ceil(max.max(1)).max(1);
        let (mut sum, mut n) = (0u128, 0usize);
        for i in (0..len).step_by(step) {
            if let Some((_, &at)) = self.volatile.get_index(i) {
                if at > now_ms {
                    sum += u128::from(at - now_ms);
                    n += 1;
                }
            }
        }
        let mean = if n == 0 { 0 } else { (sum / n as u128) as u64 };
        (mean, n)
    }

    /// The live entry for `key`, removing it first if it has expired; a
    /// found key counts as accessed.
    pub fn get(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        let i = self.read_index(key, now_ms)?;
        let now_s = self.now_s;
        let e = &mut self.map[i];
        if !self.no_touch {
            e.touch(now_s);
        }
        Some(e)
    }

    /// The live entry for `key`, to change.
    pub fn get_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let i = self.live_index(key, now_ms)?;
        self.before_change(i);
        let now_s = self.now_s;
        let e = &mut self.map[i];
        if !self.no_touch {
            e.touch(now_s);
        }
        Some(e)
    }

    /// See the `no_touch` field.
    pub(crate) fn set_no_touch(&mut self, on: bool) {
        self.no_touch = on;
    }

    /// See the `expiry_held` field.
    pub(crate) fn set_expiry_held(&mut self, on: bool) {
        self.expiry_held = on;
    }

    /// Like [`Db::get`] without counting as an access (TTL, TYPE, EXISTS,
    /// OBJECT).
    pub fn get_untouched(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        let i = self.read_index(key, now_ms)?;
        Some(&self.map[i])
    }

    /// [`Db::get`] (or [`Db::get_untouched`]) and [`Db::dependency_lsn`]
    /// with one lookup: reads run on every request, and each lookup in a
    /// large map is a few cache misses.
    pub fn get_with_dependency(
        &mut self,
        key: &[u8],
        now_ms: u64,
        touch: bool,
    ) -> (Option<&Entry>, u64) {
        let (i, dep) = self.lookup(key, now_ms, touch);
        (i.map(|i| &self.map[i]), dep)
    }

    /// [`Db::get_with_dependency`], with the key's expiry time (0: none).
    pub fn get_with_expiry(
        &mut self,
        key: &[u8],
        now_ms: u64,
        touch: bool,
    ) -> (Option<(&Entry, u64)>, u64) {
        let (i, dep) = self.lookup(key, now_ms, touch);
        let found = i.map(|i| {
            let e = &self.map[i];
            (e, self.expire_of(key, e))
        });
        (found, dep)
    }

    /// The second step of a pipelined batch's prefetch (see
    /// `Keyspace::prefetch_batch`): the entries a lookup of `hash` compares.
    pub fn prefetch_candidates(&self, hash: u64) {
        self.map.prefetch_candidates(hash);
    }

    /// The third step: the first bytes of `key`'s value where they lie
    /// outside its entry (a string's block, a collection's header). It
    /// reads the entry, which the second step asked for.
    pub fn prefetch_value(&self, hash: u64, key: &[u8]) {
        if let Some(e) = self.map.get_hashed(hash, key) {
            e.value.prefetch();
        }
    }

    fn lookup(&mut self, key: &[u8], now_ms: u64, touch: bool) -> (Option<usize>, u64) {
        let floor = self.floor_lsn;
        match self.read_index(key, now_ms) {
            Some(i) => {
                let now_s = self.now_s;
                let reference = self.max_lsn;
                let e = &mut self.map[i];
                if touch && !self.no_touch {
                    e.touch(now_s);
                }
                (Some(i), e.meta.lsn(reference).max(floor))
            }
            None => (None, self.miss_lsn.max(floor)),
        }
    }

    /// Position of the live entry for `key`, removing it first if it has
    /// expired; one lookup.
    fn live_index(&mut self, key: &[u8], now_ms: u64) -> Option<usize> {
        self.unexpired_index(key, now_ms, true)
    }

    /// [`Db::live_index`] for a read: while expired keys are kept
    /// ([`keep_expired`]), an expired key reads as missing but stays.
    fn read_index(&mut self, key: &[u8], now_ms: u64) -> Option<usize> {
        self.unexpired_index(key, now_ms, !expired_kept())
    }

    /// Position of `key` unless it is missing or has expired (then
    /// removed first if `remove`); one lookup.
    fn unexpired_index(&mut self, key: &[u8], now_ms: u64, remove: bool) -> Option<usize> {
        self.now_s = (now_ms / 1000) as u32;
        let i = self.map.get_index_of(key)?;
        if self.map[i].has_ttl() && self.due(key, now_ms) {
            if remove {
                self.remove_expired(key);
            }
            return None;
        }
        Some(i)
    }

    /// Whether `key`, which has a TTL, has expired by `now_ms`.
    fn due(&self, key: &[u8], now_ms: u64) -> bool {
        !self.expiry_held && is_due(self.expire_at(key), now_ms)
    }

    /// When `key` expires (Unix milliseconds), 0 if it has no TTL or is
    /// missing; does not check whether it has expired already.
    pub fn expire_at(&self, key: &[u8]) -> u64 {
        self.volatile.get(key).copied().unwrap_or(0)
    }

    /// [`Db::expire_at`] for an entry already found: no lookup unless it
    /// has a TTL.
    pub fn expire_of(&self, key: &[u8], e: &Entry) -> u64 {
        expiry_in(&self.volatile, key, e)
    }

    /// Whether the entry `e` of `key` had expired by `now_ms` (a stored
    /// entry, which sampling and walks may meet expired).
    pub fn is_expired(&self, key: &[u8], e: &Entry, now_ms: u64) -> bool {
        e.has_ttl() && self.due(key, now_ms)
    }

    /// The LSN of the last logged write of `e` (0: never logged).
    pub fn lsn_of(&self, e: &Entry) -> u64 {
        e.meta.lsn(self.max_lsn)
    }

    /// Records that `key`'s value was produced by the write logged at `lsn`
    /// ([`UNLOGGED_FAILED_LSN`]: one that failed to log); false if the key
    /// is not there.
    pub fn stamp(&mut self, key: &[u8], lsn: u64, now_ms: u64) -> bool {
        self.stamp_from(key, lsn, now_ms, false)
    }

    /// [`Db::stamp`], saying whether the record is in another WAL stream
    /// than the key's own (see [`Entry::written_through_other_stream`]).
    pub fn stamp_from(&mut self, key: &[u8], lsn: u64, now_ms: u64, other_stream: bool) -> bool {
        // Bookkeeping, not a read: a key written already past its time
        // (RESTORE of a replica's full sync) stays for whoever meets it
        // next, as the replay of this record, which stamps the same way,
        // leaves it too.
        let Some(i) = self.unexpired_index(key, now_ms, false) else {
            return false;
        };
        self.before_change(i);
        if lsn != UNLOGGED_FAILED_LSN {
            self.max_lsn = self.max_lsn.max(lsn);
        }
        self.map[i].meta.set_lsn(lsn, other_stream);
        true
    }

    /// Changes `key`'s access bookkeeping with `change` (RESTORE ...
    /// IDLETIME / FREQ), if the key is there.
    pub fn update_access(&mut self, key: &[u8], now_ms: u64, change: impl FnOnce(&mut Access)) {
        if let Some(i) = self.live_index(key, now_ms) {
            let e = &mut self.map[i];
            let mut a = e.access();
            change(&mut a);
            e.set_access(a);
        }
    }

    /// The live entry for `key`, created from `make()` (without a TTL) when
    /// missing or expired.
    pub fn get_or_insert_with(
        &mut self,
        key: &Bytes,
        now_ms: u64,
        make: fn() -> Value,
    ) -> &mut Entry {
        // The lookup first: it sets the clock the new access stamp reads.
        let found = self.live_index(key, now_ms);
        let access = self.fresh_access(None);
        let i = match found {
            Some(i) => {
                self.before_change(i);
                if !self.no_touch {
                    self.map[i].touch(access.secs);
                }
                i
            }
            None => {
                let mut e = Entry::new(make());
                e.set_access(access);
                let i = self.map.insert_full(own(key), e).0;
                self.arrived(i);
                i
            }
        };
        &mut self.map[i]
    }

    /// Like [`Db::get_mut`] without counting as an access (bookkeeping such
    /// as stamping a write's LSN).
    pub fn get_mut_untouched(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let i = self.live_index(key, now_ms)?;
        self.before_change(i);
        Some(&mut self.map[i])
    }

    /// Reads without expiring (for checkpoints and debugging).
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.map.get(key)
    }

    /// The LSN a reply about `key` depends on, whether it exists or not.
    pub fn dependency_lsn(&self, key: &[u8]) -> u64 {
        let own = match self.map.get(key) {
            Some(e) => self.lsn_of(e),
            None => self.miss_lsn,
        };
        own.max(self.floor_lsn)
    }

    /// What a read of `key` does before an overwrite, with as few lookups
    /// as it can: an expired key is removed (which announces its expiry),
    /// and under an LFU policy the access is counted, since the insert
    /// carries the count over. Otherwise the insert's own lookup is the
    /// only one.
    pub(crate) fn before_overwrite(&mut self, key: &[u8], now_ms: u64) {
        if crate::lfu::is_on() {
            self.get(key, now_ms);
        } else {
            self.expire_if_due(key, now_ms);
        }
    }

    /// Removes `key` if it has expired, without a lookup when no key of
    /// this database has a TTL (every key with one is in `volatile`).
    fn expire_if_due(&mut self, key: &[u8], now_ms: u64) -> bool {
        self.now_s = (now_ms / 1000) as u32;
        if self.volatile.is_empty() {
            return false;
        }
        let expired = self.due(key, now_ms);
        if expired {
            self.remove_expired(key);
        }
        expired
    }

    fn remove_expired(&mut self, key: &[u8]) {
        self.expired_count += 1;
        if self.expired.is_some() || self.expired_for_feed.is_some() {
            if let Some((k, _)) = self.map.get_key_value(key) {
                let k = k.to_bytes();
                if let Some(log) = self.expired_for_feed.as_mut() {
                    log.push(k.clone());
                    FEED_REMOVALS.with(|n| n.set(n.get().wrapping_add(1)));
                }
                if let Some(log) = self.expired.as_mut() {
                    log.push(k);
                }
            }
        }
        self.remove(key);
    }

    /// Keys this database has removed because they expired, ever.
    pub fn expired_count(&self) -> u64 {
        self.expired_count
    }

    /// Starts (or stops, dropping what was kept) recording the keys this
    /// database expires, lazily or by sampling. Off by default, so expiry
    /// costs nothing extra when nobody listens.
    pub fn log_expired(&mut self, on: bool) {
        if on != self.expired.is_some() {
            self.expired = on.then(Vec::new);
        }
    }

    /// The keys expired since the last call, oldest first.
    pub fn take_expired(&mut self) -> Vec<Bytes> {
        match self.expired.as_mut() {
            Some(log) if !log.is_empty() => std::mem::take(log),
            _ => Vec::new(),
        }
    }

    /// Starts recording the keys this database expires for the replication
    /// feed, which must stream their removal (a Redis replica never expires
    /// a key on its own). Stays on: once a replica has attached, the stream
    /// goes on whether or not one is attached now.
    pub fn log_expired_for_feed(&mut self) {
        self.expired_for_feed.get_or_insert_with(Default::default);
    }

    /// The keys expired since the last call for the feed, oldest first.
    pub fn take_expired_for_feed(&mut self) -> Vec<Bytes> {
        match self.expired_for_feed.as_mut() {
            Some(log) if !log.is_empty() => std::mem::take(log),
            _ => Vec::new(),
        }
    }

    /// A written key's access stamp: now, keeping the replaced key's LFU
    /// counter as Redis does on overwrite.
    fn fresh_access(&self, old: Option<&Entry>) -> Access {
        Access {
            secs: if self.now_s == 0 {
                wall_secs()
            } else {
                self.now_s
            },
            freq: old.map_or(LFU_INIT, |e| e.access().freq),
        }
    }

    /// Sets `key` to `entry` with no TTL; returns the entry replaced.
    pub fn insert(&mut self, key: impl AsRef<[u8]>, entry: Entry) -> Option<Entry> {
        self.insert_with(key.as_ref(), entry, 0)
    }

    /// Sets `key` to `entry`, expiring at `expire_at_ms` (0: never).
    pub fn insert_expiring(
        &mut self,
        key: impl AsRef<[u8]>,
        entry: Entry,
        expire_at_ms: u64,
    ) -> Option<Entry> {
        self.insert_with(key.as_ref(), entry, expire_at_ms)
    }

    /// Makes room for `additional` more keys at once (a restart knows
    /// about how many a shard holds), rather than growing step by step,
    /// each step moving every entry.
    pub fn reserve(&mut self, additional: usize) {
        self.map.reserve(additional);
    }

    /// Adds a key decoded from a checkpoint, with the access stamp it
    /// brings ([`Access::loaded_now`]); false, changing nothing, if the key
    /// is already there (a damaged file). A restart adds every key this
    /// way, so it hashes and probes once where `insert` looks first.
    pub fn insert_loaded(&mut self, key: Key, mut entry: Entry, expire_at_ms: u64) -> bool {
        match self.map.find(key.as_slice()) {
            Ok(_) => false,
            Err(slot) => {
                entry.meta.set_lsn(0, false);
                entry.meta.set_ttl(expire_at_ms != 0);
                if expire_at_ms != 0 {
                    self.volatile.set(&key, expire_at_ms);
                }
                let i = self.map.insert_new(slot, key, entry);
                self.arrived(i);
                true
            }
        }
    }

    // An entry comes in unstamped: `Db::stamp` sets its LSN once the write
    // is logged, so that it is read against this database's highest.
    /// Where this database's key map lies (`keymap::Place`).
    pub(crate) fn place(&self) -> crate::keymap::Place {
        self.map.place()
    }

    fn insert_with(&mut self, key: &[u8], entry: Entry, expire_at_ms: u64) -> Option<Entry> {
        let found = self.map.find(key);
        self.insert_found(found, key, entry, expire_at_ms)
    }

    /// [`Db::insert_with`] where `found` is what `map.find(key)` gave.
    fn insert_found(
        &mut self,
        found: Result<usize, Vacant>,
        key: &[u8],
        mut entry: Entry,
        expire_at_ms: u64,
    ) -> Option<Entry> {
        let (i, old) = match found {
            Ok(i) => {
                self.before_change(i);
                entry.mark_written(expire_at_ms, self.fresh_access(Some(&self.map[i])));
                (i, Some(std::mem::replace(&mut self.map[i], entry)))
            }
            Err(slot) => {
                entry.mark_written(expire_at_ms, self.fresh_access(None));
                let i = self.map.insert_new(slot, own(key), entry);
                self.arrived(i);
                (i, None)
            }
        };
        self.file_expiry(
            i,
            key,
            expire_at_ms,
            old.as_ref().is_some_and(Entry::has_ttl),
        );
        old
    }

    /// Files or unfiles the key at `i` as expiring once it was written with
    /// `expire_at_ms` (0: never), `had_ttl` saying whether it expired before.
    fn file_expiry(&mut self, i: usize, key: &[u8], expire_at_ms: u64, had_ttl: bool) {
        if expire_at_ms != 0 {
            self.set_volatile(i, expire_at_ms);
        } else if had_ttl {
            self.volatile.swap_remove(key);
        }
    }

    /// Sets `key` to the string `value`, as `insert_expiring` would. A
    /// string of the same length on the heap is overwritten where it is
    /// (`Str::overwrite_same_len`); a snapshot in progress has saved its
    /// old bytes first, as for any change.
    pub fn set_string(&mut self, key: &[u8], value: &Bytes, expire_at_ms: u64) {
        let found = self.map.find(key);
        if let Ok(i) = found {
            if matches!(&self.map[i].value, Value::Str(s) if s.heap_len_is(value.len())) {
                self.before_change(i);
                let access = self.fresh_access(Some(&self.map[i]));
                let e = &mut self.map[i];
                let had_ttl = e.has_ttl();
                if let Value::Str(s) = &mut e.value {
                    s.overwrite_same_len(value);
                }
                e.mark_written(expire_at_ms, access);
                self.file_expiry(i, key, expire_at_ms, had_ttl);
                return;
            }
        }
        let entry = Entry::new(Value::Str(Str::from_bytes(value)));
        self.insert_found(found, key, entry, expire_at_ms);
    }

    /// Files the key at position `i` as expiring at `at_ms`.
    fn set_volatile(&mut self, i: usize, at_ms: u64) {
        if let Some((k, _)) = self.map.get_index(i) {
            self.volatile.set(k, at_ms);
        }
    }

    /// Removes `key`, remembering the removed write's LSN as a miss dependency.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (i, k, old) = self.map.swap_remove_full(key)?;
        if !self.snapshots.0.is_empty() {
            self.removed_for_snapshots(i, &k, &old);
        }
        if old.has_ttl() {
            self.volatile.swap_remove(key);
        }
        self.miss_lsn = self.miss_lsn.max(self.lsn_of(&old));
        Some(old)
    }

    /// Sets or clears (`at_ms == 0`) the expiry of an existing key.
    pub fn set_expire(&mut self, key: &[u8], at_ms: u64) -> bool {
        let Some(i) = self.map.get_index_of(key) else {
            return false;
        };
        self.before_change(i);
        self.map[i].meta.set_ttl(at_ms != 0);
        if at_ms != 0 {
            self.set_volatile(i, at_ms);
        } else {
            self.volatile.swap_remove(key);
        }
        true
    }

    pub fn clear(&mut self) {
        for e in self.map.values() {
            self.miss_lsn = self.miss_lsn.max(e.meta.lsn(self.max_lsn));
        }
        if !self.snapshots.0.is_empty() {
            let volatile = std::mem::take(&mut self.volatile);
            let gone: Vec<(usize, Key, Entry, u64)> = std::mem::take(&mut self.map)
                .into_iter()
                .enumerate()
                .map(|(i, (k, e))| {
                    let at = expiry_in(&volatile, &k, &e);
                    (i, k, e, at)
                })
                .collect();
            for c in self.snapshots.0.iter_mut() {
                c.detach(gone.iter().cloned());
            }
        }
        // Frees the tables too, as Redis's FLUSHALL releases its
        // dictionaries: a flushed database's memory counts as free for
        // `maxmemory` and INFO at once.
        self.map.clear();
        self.volatile.clear();
    }

    /// The entry at `i` is about to change: snapshots that have not taken
    /// it yet keep its value first.
    #[inline(always)]
    fn before_change(&mut self, i: usize) {
        if !self.snapshots.0.is_empty() {
            self.save_for_snapshots(i);
        }
    }

    // Out of line: every write passes the check above, few ever get here.
    #[cold]
    #[inline(never)]
    fn save_for_snapshots(&mut self, i: usize) {
        if let Some((k, e)) = self.map.get_index(i) {
            let at = self.expire_of(k, e);
            for c in self.snapshots.0.iter_mut() {
                c.before_change(i, k, e, at);
            }
        }
    }

    /// The entry `(k, old)` at `i` was removed, and the last entry (at the
    /// new length) moved into the hole.
    #[cold]
    #[inline(never)]
    fn removed_for_snapshots(&mut self, i: usize, k: &Key, old: &Entry) {
        let at = self.expire_of(k, old);
        let last = self.map.len();
        let moved = self.map.get_index(i).map(|(m, _)| m);
        for c in self.snapshots.0.iter_mut() {
            c.before_change(i, k, old, at);
            if let Some(m) = moved {
                c.moved(last, i, m);
            }
        }
    }

    /// A new key landed at `i`: snapshots leave it out.
    #[inline(always)]
    fn arrived(&mut self, i: usize) {
        if !self.snapshots.0.is_empty() {
            self.skip_for_snapshots(i);
        }
    }

    #[cold]
    #[inline(never)]
    fn skip_for_snapshots(&mut self, i: usize) {
        if let Some((k, _)) = self.map.get_index(i) {
            for c in self.snapshots.0.iter_mut() {
                c.arrived(i, k);
            }
        }
    }

    pub(crate) fn start_snapshot(&mut self, c: Cursor) {
        self.snapshots.0.push(c);
    }

    #[cfg(test)]
    pub(crate) fn snapshots_in_progress(&self) -> usize {
        self.snapshots.0.len()
    }

    /// Snapshot `job` was given up: its cursor goes.
    pub(crate) fn end_snapshot(&mut self, job: u64) {
        self.snapshots.0.retain(|c| c.job() != job);
    }

    /// Walks up to `budget` positions for snapshot `job`, handing the keys
    /// of its point to `visit`. Returns the budget left and whether this
    /// database's part is complete.
    pub(crate) fn snapshot_step(
        &mut self,
        job: u64,
        budget: usize,
        visit: &mut dyn FnMut(usize, &Key, &Entry, u64),
    ) -> (usize, bool) {
        let Some(at) = self.snapshots.0.iter().position(|c| c.job() == job) else {
            return (budget, true);
        };
        let (map, volatile) = (&self.map, &self.volatile);
        let entry_at = |i| {
            let (k, e) = map.get_index(i)?;
            Some((k, e, expiry_in(volatile, k, e)))
        };
        let (used, done) = self.snapshots.0[at].step(budget, entry_at, visit);
        if done {
            self.snapshots.0.swap_remove(at);
        }
        (budget - used, done)
    }

    /// Entry at position `i` (for sampling); may be expired.
    pub fn get_index(&self, i: usize) -> Option<(&Key, &Entry)> {
        self.map.get_index(i)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Entry)> {
        self.map.iter()
    }

    /// Visits live entries from position `cursor - 1` downwards, at most `count`
    /// of them, with the LSN of each one's last logged write, and returns
    /// the next cursor (0 when done). Expired entries it meets are removed,
    /// as a read of them would (Redis's SCAN expires what it meets too), unless
    /// reads keep them ([`keep_expired`]).
    ///
    /// Walking downwards is what makes SCAN's guarantee hold on this map:
    /// removal moves the last element into the hole, and the last element has
    /// already been visited, so no element present for the whole scan is
    /// missed (some may be returned twice, which SCAN allows). The walk's own
    /// removals are holes at or above its position, so they keep it too.
    pub fn scan(
        &mut self,
        cursor: usize,
        count: usize,
        now_ms: u64,
        mut visit: impl FnMut(&Key, &Entry, u64),
    ) -> usize {
        let remove = !expired_kept();
        self.now_s = (now_ms / 1000) as u32;
        let mut pos = cursor.min(self.map.len());
        let mut seen = 0;
        while pos > 0 && seen < count {
            pos -= 1;
            seen += 1;
            let Some((k, e)) = self.map.get_index(pos) else {
                continue;
            };
            if !self.is_expired(k, e, now_ms) {
                visit(k, e, self.lsn_of(e));
            } else if remove {
                let k = k.clone();
                self.remove_expired(&k);
            }
        }
        pos
    }

    /// Active expiry: samples up to `samples` keys with a TTL and removes the
    /// expired ones. Returns (sampled, expired).
    pub fn expire_sample(
        &mut self,
        samples: usize,
        now_ms: u64,
        rng: &mut impl rand::Rng,
    ) -> (usize, usize) {
        let mut expired = 0;
        let n = samples.min(self.volatile.len());
        for _ in 0..n {
            if self.volatile.is_empty() {
                break;
            }
            let i = rng.gen_range(0..self.volatile.len());
            let Some(key) = self.volatile.get_index(i).map(|(k, _)| k.clone()) else {
                break;
            };
            if self.expire_if_due(&key, now_ms) {
                expired += 1;
            }
        }
        (n, expired)
    }

    /// Visits up to `n` entries drawn at random (with replacement), from
    /// every key or only from those with a TTL, for eviction. Expired
    /// entries are visited too: evicting them is as good as expiring them.
    pub fn sample(
        &self,
        volatile_only: bool,
        n: usize,
        rng: &mut impl rand::Rng,
        mut visit: impl FnMut(&Key, &Entry, u64),
    ) {
        let len = if volatile_only {
            self.volatile.len()
        } else {
            self.map.len()
        };
        if len == 0 {
            return;
        }
        for _ in 0..n {
            let i = rng.gen_range(0..len);
            let found = if volatile_only {
                self.volatile.get_index(i).and_then(|(k, &at)| {
                    let (k, e) = self.map.get_key_value(k.as_slice())?;
                    Some((k, e, at))
                })
            } else {
                self.map
                    .get_index(i)
                    .map(|(k, e)| (k, e, self.expire_of(k, e)))
            };
            if let Some((k, e, at)) = found {
                visit(k, e, at);
            }
        }
    }

    /// A random live key, trying a bounded number of samples.
    pub fn random_key(&mut self, now_ms: u64, rng: &mut impl rand::Rng) -> Option<Bytes> {
        const RANDOM_KEY_ATTEMPTS: usize = 100;
        for _ in 0..RANDOM_KEY_ATTEMPTS {
            if self.map.is_empty() {
                return None;
            }
            let i = rng.gen_range(0..self.map.len());
            let (k, e) = self.map.get_index(i)?;
            if !self.is_expired(k, e, now_ms) {
                return Some(k.to_bytes());
            }
            if expired_kept() {
                // Draws keep landing on kept expired keys: at worst this
                // answers nil while a live key remains, as Redis does when
                // its tries are spent.
                continue;
            }
            let k = k.clone();
            self.remove_expired(&k);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_clock_is_seconds_in_24_bits() {
        assert_eq!(lru_clock(1_999), 1);
        assert_eq!(lru_clock(((1 << 24) + 5) * 1000 + 999), 5);
    }
    use rand::Rng;

    fn volatile(db: &mut Db, key: &'static str, at_ms: u64) {
        let e = Entry::new(Value::Str(crate::value::Str::new(b"v")));
        db.insert_expiring(Bytes::from_static(key.as_bytes()), e, at_ms);
    }

    #[test]
    fn sampled_ttl_averages_the_keys_not_yet_expired() {
        let mut db = Db::default();
        assert_eq!(db.sampled_ttl_ms(1_000, 16), (0, 0));
        for (i, at) in [3_000u64, 5_000, 500].into_iter().enumerate() {
            volatile(&mut db, ["a", "b", "c"][i], at);
        }
        // c expired at 500: the mean of 2,000 and 4,000.
        assert_eq!(db.sampled_ttl_ms(1_000, 16), (3_000, 2));
        // One sample of three: the first.
        assert_eq!(db.sampled_ttl_ms(1_000, 1), (2_000, 1));
    }

    /// Every key pays for these in its map slot (with its 24-byte key):
    /// keep them from growing unnoticed.
    #[test]
    fn an_entry_is_24_bytes() {
        // A string's first byte has unused values that tag the others,
        // each a pointer in the second word.
        assert_eq!(std::mem::size_of::<crate::hash::HashValue>(), 8);
        assert_eq!(std::mem::size_of::<Value>(), 16);
        assert_eq!(std::mem::size_of::<Option<Value>>(), 16);
        assert_eq!(std::mem::size_of::<Entry>(), 24);
    }

    /// A stored LSN keeps its low bits and reads back against the highest
    /// LSN stamped: exactly within the window, and never below the real
    /// one (a reply may wait longer, never too little) nor above the
    /// highest (it never waits for a record that was not handed out).
    #[test]
    fn lsns_read_back_exact_in_the_window_and_safe_beyond() {
        let mut rng = rand::thread_rng();
        let window = 1u64 << LSN_BITS;
        for _ in 0..100_000 {
            let lsn = rng.gen_range(1..u64::MAX / 4);
            let reference = lsn + rng.gen_range(0..window * 4);
            let mut m = Meta::default();
            m.set_access(Access {
                secs: rng.gen(),
                freq: rng.gen(),
            });
            m.set_ttl(rng.gen());
            let before = (m.access().secs, m.access().freq, m.has_ttl());
            m.set_lsn(lsn, false);
            assert_eq!(before, (m.access().secs, m.access().freq, m.has_ttl()));
            let got = m.lsn(reference);
            assert!(
                got >= lsn && got <= reference,
                "{lsn} at {reference}: {got}"
            );
            if reference - lsn < window {
                assert_eq!(got, lsn);
            }
        }
        let mut m = Meta::default();
        assert_eq!(m.lsn(12345), 0, "never logged");
        m.set_lsn(UNLOGGED_FAILED_LSN, false);
        assert_eq!(m.lsn(12345), UNLOGGED_FAILED_LSN);
        m.set_lsn(0, false);
        assert_eq!(m.lsn(12345), 0);
    }

    #[test]
    fn a_database_reads_its_entries_lsns_and_ttls() {
        let mut db = Db::default();
        let now = 1_000;
        let v = || Entry::new(Value::Str(crate::value::Str::new(b"v")));
        db.insert(b"a", v());
        db.insert_expiring(b"b", v(), 5_000);
        assert_eq!(db.dependency_lsn(b"a"), 0);
        let far = 3 << LSN_BITS;
        assert!(db.stamp(b"a", 7, now));
        assert!(db.stamp(b"b", far + 9, now));
        assert!(!db.stamp(b"c", 10, now));
        assert_eq!(db.dependency_lsn(b"b"), far + 9);
        // Half a billion records on, `a`'s write is older than the window:
        // a reply waits for a later record, never for one not handed out.
        assert!(db.dependency_lsn(b"a") >= 7);
        assert!(db.dependency_lsn(b"a") <= far + 9);
        assert_eq!(db.expire_at(b"a"), 0);
        assert_eq!(db.expire_at(b"b"), 5_000);
        let (e, at) = db.get_with_expiry(b"b", now, true).0.unwrap();
        assert!(e.has_ttl());
        assert_eq!(at, 5_000);
        // Overwriting without a TTL drops it; removing forgets it.
        db.insert(b"b", v());
        assert_eq!(db.expire_at(b"b"), 0);
        assert_eq!(db.volatile_len(), 0);
        assert!(db.set_expire(b"a", 2_000));
        assert_eq!(db.volatile_len(), 1);
        assert!(db.get(b"a", 2_000).is_none(), "expired");
        assert_eq!(db.volatile_len(), 0);
        assert!(db.stamp(b"b", UNLOGGED_FAILED_LSN, now));
        assert_eq!(db.dependency_lsn(b"b"), UNLOGGED_FAILED_LSN);
    }

    #[test]
    fn the_lru_clock_wraps_as_redis_s_does() {
        let a = Access {
            secs: (u32::MAX - 5) & LRU_MASK,
            freq: 0,
        };
        assert_eq!(a.idle_secs(u32::MAX), 5);
        assert_eq!(a.idle_secs(u32::MAX.wrapping_add(10)), 15);
    }

    #[test]
    fn expired_keys_are_recorded_only_while_asked() {
        let mut db = Db::default();
        volatile(&mut db, "a", 10);
        assert!(db.get(b"a", 20).is_none());
        assert!(db.take_expired().is_empty(), "off by default");

        db.log_expired(true);
        volatile(&mut db, "b", 10);
        volatile(&mut db, "c", 10);
        volatile(&mut db, "d", 100);
        assert!(db.get(b"b", 20).is_none());
        let mut rng = rand::thread_rng();
        // Sampling draws with replacement: repeat until only the key not
        // yet due is left.
        for _ in 0..200 {
            if db.volatile_len() == 1 {
                break;
            }
            db.expire_sample(10, 20, &mut rng);
        }
        let mut got = db.take_expired();
        got.sort();
        assert_eq!(
            got,
            vec![Bytes::from_static(b"b"), Bytes::from_static(b"c")]
        );
        assert!(db.take_expired().is_empty(), "taken once");
        assert!(db.get(b"d", 20).is_some(), "not yet due");

        db.log_expired(false);
        assert!(db.get(b"d", 200).is_none());
        assert!(db.take_expired().is_empty());
    }
}
