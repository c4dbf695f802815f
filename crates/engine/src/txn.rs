//! A transaction over locked shards: the unit in which commands read the
//! keyspace, apply mutations, and commit them as one log record.
//!
//! Holding the shard locks from the first read until the LSN is assigned is
//! what makes commit order (LSN order) agree with apply order for every key:
//! two writes to one key are serialized by that key's shard lock, and the
//! later one gets the larger LSN. Replaying by LSN therefore rebuilds the
//! same state.
//!
//! What goes into the record is decided per mutation, when it is applied
//! (`docs/durability.md`, "Which writes are logged"):
//! - a write to a logged database is always logged, whatever level the
//!   connection asked for; a write to a `none` database never is;
//! - a SWAPDB between a logged and an unlogged database is logged as the
//!   logged side's new content, whole (replay has no copy of the other side);
//! - a record that would exceed the log's size limit is refused before the
//!   mutation that would overflow it changes anything.
//!
//! Live commits and recovery stamp LSNs through the same function
//! ([`Txn::stamp`]), so the LSNs replies wait for cannot drift between them.

use crate::codec;
use crate::db::{Db, Entry};
use crate::dep;
use crate::durability::Durability;
use crate::functions::{FunctionLibraries, FunctionOp};
use crate::keyspace::{wall_clock_ms, Keyspace};
use crate::mutation::{ApplyError, KeyOp, Mutation};
use crate::replication::ExpiredKey;
use crate::shard::Shard;
use crate::wal::WalError;
use bytes::Bytes;
use parking_lot::MutexGuard;
use smallvec::SmallVec;
use std::time::{Duration, Instant};

/// The write-ahead log as seen by a committing transaction.
pub trait CommitLog: Send + Sync {
    fn num_streams(&self) -> usize;
    /// Appends one record and returns its LSN. `encode` writes the payload.
    /// The record must not be recovered without every LSN <= `depends_on`
    /// (0: nothing outside its stream; see `Wal::append_after`).
    fn append(
        &self,
        stream: usize,
        time_ms: u64,
        level: Durability,
        depends_on: u64,
        encode: &mut dyn FnMut(&mut Vec<u8>),
    ) -> Result<u64, WalError>;
    /// Whether a dependency (`crate::dep`) is met already.
    fn is_met(&self, dep: u64) -> bool;
}

pub use crate::db::UNLOGGED_FAILED_LSN;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitOutcome {
    /// LSN of the record written, 0 if nothing was logged.
    pub lsn: u64,
    /// What this command's reply waits for (its own write, or a write it
    /// read), encoded as in `crate::dep`.
    pub dependency_lsn: u64,
    /// Number of mutations applied.
    pub mutations: usize,
    /// The WAL stream the record went to (0 if none).
    pub stream: usize,
}

/// Why a mutation or a commit was refused.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The record would exceed the log's limit; nothing of the refused
    /// mutation (or group, see [`Txn::apply_all`]) was applied.
    #[error("write of {bytes} bytes exceeds the write-ahead log's record limit of {max} bytes")]
    TooLarge { bytes: u64, max: u64 },
    /// A mutation that does not fit the state: a bug in a command.
    #[error(transparent)]
    Invalid(#[from] ApplyError),
    /// The log failed or is closed; the write is in memory only and the
    /// log refuses writes until restart.
    #[error(transparent)]
    Log(#[from] WalError),
}

/// What a reply that read `dep` (the key's entry `e`, or a missing key)
/// waits for: only the shard's own stream when the entry was last written
/// through it; every stream for a missing key, a database-wide change
/// (`floor`), or an entry a record of another stream wrote.
fn read_dep(stream: Option<usize>, floor: u64, e: Option<&Entry>, dep: u64) -> u64 {
    match (stream, e) {
        (Some(s), Some(e)) if dep > floor && !e.written_through_other_stream() => {
            dep::on_stream(s, dep)
        }
        _ => dep,
    }
}

/// Lookups that found their key, and that did not (INFO's
/// `keyspace_hits` / `keyspace_misses`).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookups {
    pub hits: u32,
    pub misses: u32,
}

impl Lookups {
    fn note(&mut self, found: bool) {
        let c = if found {
            &mut self.hits
        } else {
            &mut self.misses
        };
        *c = c.saturating_add(1);
    }
}

/// One entry of the record being built.
enum RecordItem {
    /// The applied mutation at this index, as it is.
    Applied(usize),
    /// A mutation that is logged but was not applied in this form.
    Own(Mutation),
}

/// The locked shards, by index, ascending. Nearly every command locks one
/// or two, so they live inline in the transaction: no allocation.
pub(crate) type Guards<'a> = SmallVec<[(usize, MutexGuard<'a, Shard>); 2]>;

/// Shard indexes to lock, ascending and distinct.
pub(crate) type ShardList = SmallVec<[usize; 4]>;

pub struct Txn<'a> {
    ks: &'a Keyspace,
    guards: Guards<'a>,
    /// The function libraries, locked by the first change to them and held
    /// until the LSN is assigned (see `crate::functions`).
    functions: Option<MutexGuard<'a, FunctionLibraries>>,
    pub now_ms: u64,
    /// Inline for the common single-mutation write: no allocation and free
    /// per command.
    applied: SmallVec<[Mutation; 1]>,
    record: SmallVec<[RecordItem; 1]>,
    record_bytes: u64,
    /// What the reply waits for (`crate::dep`).
    dependency_lsn: u64,
    /// Dependencies beyond the locked shards' keys (functions, whole
    /// databases): the record needs every LSN up to this.
    extra_dep: u64,
    /// The client's previous write (`crate::dep`), which this one follows.
    after: u64,
    /// Stream of the record being stamped, and the stream count (None:
    /// replay).
    record_stream: Option<(usize, usize)>,
    /// Lookups leave LRU/LFU alone (`CLIENT NO-TOUCH`); undone on drop.
    no_touch: bool,
    /// No key expires in this transaction (`Txn::hold_expiry`); undone on
    /// drop.
    expiry_held: bool,
    /// Lookups since last taken.
    lookups: Lookups,
    /// Set before the first change to the keyspace: a panic that drops the
    /// transaction from then on aborts the process (see `Drop`).
    changing: bool,
    /// Keys the locked shards expired, for the replication feed, each at
    /// its place among `applied` (only while the feed is on).
    /// Boxed: the transaction is moved by value on every command's path,
    /// and this list is nearly always empty: boxed, it costs 8 bytes of the
    /// move instead of 24.
    #[allow(clippy::box_collection)]
    expired_feed: Option<Box<Vec<ExpiredKey>>>,
    /// `db::feed_removals_on_this_thread` when the removals were last taken.
    feed_mark: u32,
}

/// Moves the keys `shard` expired for the feed into `out`, as removed
/// before the mutation at index `before`.
pub(crate) fn take_expired_for_feed(shard: &mut Shard, before: usize, out: &mut Vec<ExpiredKey>) {
    for (db, d) in shard.dbs.iter_mut().enumerate() {
        out.extend(d.take_expired_for_feed().into_iter().map(|key| ExpiredKey {
            before,
            db: db as u32,
            key,
        }));
    }
}

/// Database `db` of the shard held at `slot`, for a read (which publishes
/// its map's place for `Keyspace::prefetch_batch` if no write has yet).
fn db_in<'g>(
    ks: &Keyspace,
    guards: &'g mut Guards<'_>,
    slot: usize,
    db: usize,
) -> Option<&'g mut Db> {
    let (shard, g) = &mut guards[slot];
    let d = g.dbs.get_mut(db)?;
    ks.publish_first_place(*shard, db, d.place());
    Some(d)
}

impl<'a> Txn<'a> {
    /// Locks `sorted_shards`. The transaction's time is `max(clock, every
    /// locked shard's clock)`, read after locking, and becomes those shards'
    /// clock (see [`Shard::tick`]).
    pub(crate) fn new(ks: &'a Keyspace, sorted_shards: ShardList, now: Option<u64>) -> Txn<'a> {
        let guards: Guards<'a> = sorted_shards
            .into_iter()
            .map(|i| (i, ks.shard(i).lock()))
            .collect();
        Self::from_guards(ks, guards, now)
    }

    /// Like [`Txn::new`], but returns None (releasing what it took) if some
    /// shard cannot be locked within `patience`. The clock is read only when
    /// a shard is contended, so the common path costs what `new` does.
    /// `read_ms`, the wall clock as the caller read it just before, stands
    /// for a reading when no shard was waited for.
    pub(crate) fn try_new(
        ks: &'a Keyspace,
        sorted_shards: ShardList,
        patience: Duration,
        read_ms: Option<u64>,
    ) -> Option<Txn<'a>> {
        let mut deadline = None;
        let mut guards = Guards::new();
        for i in sorted_shards {
            let m = ks.shard(i);
            let g = match m.try_lock() {
                Some(g) => g,
                None => {
                    let d = *deadline.get_or_insert_with(|| Instant::now() + patience);
                    m.try_lock_until(d)?
                }
            };
            guards.push((i, g));
        }
        let now = if deadline.is_none() { read_ms } else { None };
        Some(Self::from_guards(ks, guards, now))
    }

    fn from_guards(ks: &'a Keyspace, mut guards: Guards<'a>, now: Option<u64>) -> Txn<'a> {
        let wall = now.unwrap_or_else(wall_clock_ms);
        let now_ms = guards.iter().map(|(_, g)| g.clock_ms).fold(wall, u64::max);
        for (_, g) in guards.iter_mut() {
            g.tick(now_ms);
        }
        Txn {
            ks,
            guards,
            functions: None,
            now_ms,
            applied: SmallVec::new(),
            record: SmallVec::new(),
            record_bytes: 0,
            dependency_lsn: 0,
            extra_dep: 0,
            after: 0,
            record_stream: None,
            no_touch: false,
            expiry_held: false,
            lookups: Lookups::default(),
            changing: false,
            expired_feed: None,
            feed_mark: crate::db::feed_removals_on_this_thread(),
        }
    }

    /// Takes the keys the locked shards expired so far for the feed, as
    /// removed before the mutation about to be pushed to `applied` (their
    /// database numbers are the ones they have now, before a SWAPDB about
    /// to be applied).
    /// Every removal this transaction makes is taken by it, so none is
    /// left in a database for a later write to overtake. Free until one
    /// happens.
    fn take_expired_for_feed(&mut self) {
        let mark = crate::db::feed_removals_on_this_thread();
        // Nothing locked (a committed transaction): nothing to take.
        if mark == self.feed_mark || self.guards.is_empty() {
            return;
        }
        self.feed_mark = mark;
        let before = self.applied.len();
        let list = self.expired_feed.get_or_insert_with(Default::default);
        for (_, g) in self.guards.iter_mut() {
            take_expired_for_feed(g, before, list);
        }
        // Recorded just before the feed came on: nobody to tell.
        if self.ks.feed().is_none() {
            self.expired_feed = None;
        }
    }

    /// Whether this transaction's lookups leave LRU/LFU alone (`CLIENT
    /// NO-TOUCH`, except for TOUCH itself). The flag lives in the locked
    /// databases while the locks are held, and is cleared when the
    /// transaction ends.
    pub fn no_touch(&self) -> bool {
        self.no_touch
    }

    pub fn set_no_touch(&mut self, on: bool) {
        if on == self.no_touch {
            return;
        }
        self.no_touch = on;
        for (_, g) in self.guards.iter_mut() {
            for d in g.dbs.iter_mut() {
                d.set_no_touch(on);
            }
        }
    }

    /// No key expires in this transaction, whatever the time: it applies
    /// a primary's stream, and the primary deletes what expires (a DEL in
    /// the stream), as Redis's replicas rely on. A replica that judged
    /// expiry by its own clock lost data: a write its primary made just
    /// before a key's expiry, applied just after it, landed on an empty
    /// key. Its records carry the primary's position
    /// ([`Mutation::ReplOrigin`]), and replay holds expiry for them too.
    pub fn hold_expiry(&mut self) {
        self.set_expiry_held(true);
    }

    /// The flag lives in the locked databases while the locks are held, as
    /// NO-TOUCH's does (see [`Txn::set_no_touch`]).
    fn set_expiry_held(&mut self, on: bool) {
        if on == self.expiry_held {
            return;
        }
        self.expiry_held = on;
        for (_, g) in self.guards.iter_mut() {
            for d in g.dbs.iter_mut() {
                d.set_expiry_held(on);
            }
        }
    }

    /// True when every shard is locked (whole-keyspace commands need it).
    pub fn holds_all(&self) -> bool {
        self.guards.len() == self.ks.num_shards()
    }

    fn slot(&self, key: &[u8]) -> Option<usize> {
        let shard = self.ks.shard_index(key);
        self.guards.binary_search_by_key(&shard, |(i, _)| *i).ok()
    }

    /// Reads `key`, expiring it if due, and records the LSN the reply now
    /// depends on.
    pub fn get(&mut self, db: usize, key: &[u8]) -> Option<&Entry> {
        let now = self.now_ms;
        let slot = self.slot(key)?;
        let stream = self.home_stream(slot);
        let d = db_in(self.ks, &mut self.guards, slot, db)?;
        let floor = d.floor_lsn;
        let (e, dep) = d.get_with_dependency(key, now, true);
        self.dependency_lsn = dep::combine(self.dependency_lsn, read_dep(stream, floor, e, dep));
        self.lookups.note(e.is_some());
        e
    }

    /// Like [`Txn::get`], without counting as an access of the key.
    pub fn get_untouched(&mut self, db: usize, key: &[u8]) -> Option<&Entry> {
        let now = self.now_ms;
        let slot = self.slot(key)?;
        let stream = self.home_stream(slot);
        let d = db_in(self.ks, &mut self.guards, slot, db)?;
        let floor = d.floor_lsn;
        let (e, dep) = d.get_with_dependency(key, now, false);
        self.dependency_lsn = dep::combine(self.dependency_lsn, read_dep(stream, floor, e, dep));
        self.lookups.note(e.is_some());
        e
    }

    /// [`Txn::get`] (or, without `touch`, [`Txn::get_untouched`]), with
    /// the key's expiry time (Unix milliseconds, 0: none).
    pub fn get_with_expiry(&mut self, db: usize, key: &[u8], touch: bool) -> Option<(&Entry, u64)> {
        let now = self.now_ms;
        let slot = self.slot(key)?;
        let stream = self.home_stream(slot);
        let d = db_in(self.ks, &mut self.guards, slot, db)?;
        let floor = d.floor_lsn;
        let (e, dep) = d.get_with_expiry(key, now, touch);
        let dep = read_dep(stream, floor, e.map(|(e, _)| e), dep);
        self.dependency_lsn = dep::combine(self.dependency_lsn, dep);
        self.lookups.note(e.is_some());
        e
    }

    /// The lookups made since the last call.
    pub fn take_lookups(&mut self) -> Lookups {
        std::mem::take(&mut self.lookups)
    }

    /// When `key` expires, as [`Txn::get_with_expiry`] finds it: None when
    /// it is missing, Some(0) when it has no TTL.
    pub fn expire_at(&mut self, db: usize, key: &[u8], touch: bool) -> Option<u64> {
        self.get_with_expiry(db, key, touch).map(|(_, at)| at)
    }

    /// Overrides a key's access bookkeeping (RESTORE ... IDLETIME / FREQ):
    /// `idle_s` seconds ago, and the LFU counter. Not a logged change.
    pub fn set_access(&mut self, db: usize, key: &[u8], idle_s: Option<u64>, freq: Option<u8>) {
        let now = self.now_ms;
        let now_s = now / 1000;
        let Some(slot) = self.slot(key) else { return };
        let Some(d) = self.guards[slot].1.dbs.get_mut(db) else {
            return;
        };
        d.update_access(key, now, |a| {
            if let Some(idle) = idle_s {
                a.secs = now_s.saturating_sub(idle) as u32;
            }
            if let Some(f) = freq {
                a.freq = f;
            }
        });
    }

    /// Records an extra dependency (e.g. a whole-database read), an LSN or
    /// a `crate::dep` value: the reply waits for it, and a record written
    /// by this transaction is never recovered without it.
    pub fn depend_on(&mut self, dep: u64) {
        self.dependency_lsn = dep::combine(self.dependency_lsn, dep::lsn(dep));
        self.extra_dep = self.extra_dep.max(dep::lsn(dep));
    }

    /// This write follows `dep` (`crate::dep`), the same client's previous
    /// one: it is never recovered without it, so a client's writes come
    /// back after a crash as a prefix of the order it sent them in.
    pub fn after_write(&mut self, dep: u64) {
        self.after = dep;
    }

    /// The WAL stream of the shard in `slot` when there are several (None
    /// with one: every dependency is then simply an LSN).
    fn home_stream(&self, slot: usize) -> Option<usize> {
        let n = self.ks.num_streams();
        (n > 1).then(|| self.guards[slot].0 % n)
    }

    /// A reply about all of database `db` (DBSIZE, KEYS, SCAN, RANDOMKEY)
    /// depends on every logged write to it.
    pub fn depend_on_db(&mut self, db: usize) {
        let lsn = self.ks.db_write_lsn(db);
        self.depend_on(lsn);
    }

    /// Hands over the keys the locked shards expired since they were last
    /// asked (only recorded while [`Keyspace::log_expired`] is on), as
    /// (database, key).
    pub fn take_expired(&mut self, mut f: impl FnMut(usize, Bytes)) {
        for (_, g) in self.guards.iter_mut() {
            for (db, d) in g.dbs.iter_mut().enumerate() {
                for key in d.take_expired() {
                    f(db, key);
                }
            }
        }
    }

    /// Every locked shard, for whole-keyspace reads (KEYS, SCAN, DBSIZE).
    pub fn shards_mut(&mut self) -> impl Iterator<Item = &mut Shard> + use<'_, 'a> {
        self.guards.iter_mut().map(|(_, g)| &mut **g)
    }

    /// Applies a mutation now (so later reads in this transaction see it)
    /// and adds it to the record if its database is logged. Refused, with
    /// nothing changed, if the record would grow past the log's limit.
    pub fn apply(&mut self, m: Mutation) -> Result<(), CommitError> {
        let form = self.log_form(&m)?;
        self.check_fits(form.bytes())?;
        self.apply_with(m, form)
    }

    /// Applies a command's mutations as a group: the size check covers all
    /// of them before any is applied, so a command that moves a value (two
    /// mutations) is never half done. Only for key mutations.
    pub fn apply_all(&mut self, muts: Vec<Mutation>) -> Result<(), CommitError> {
        let mut forms = Vec::with_capacity(muts.len());
        let mut bytes = 0u64;
        for m in &muts {
            let form = self.log_form(m)?;
            bytes = bytes.saturating_add(form.bytes());
            forms.push(form);
        }
        self.check_fits(bytes)?;
        for (m, form) in muts.into_iter().zip(forms) {
            self.apply_with(m, form)?;
        }
        Ok(())
    }

    /// Every mutation applied, logged or not (for WATCH and statistics).
    pub fn mutations(&self) -> &[Mutation] {
        &self.applied
    }

    /// Marks database `db` as logged or not. Needs every shard locked. A
    /// database that becomes logged gets its whole content into this record
    /// (as FLUSHDB plus one RESTORE per key), because later records build on
    /// a state the log has never seen.
    pub fn set_db_logged(&mut self, db: usize, logged: bool) -> Result<(), CommitError> {
        if !self.holds_all() {
            return Err(
                ApplyError::internal("changing a database's logging needs every shard").into(),
            );
        }
        self.changing = true;
        if logged && !self.ks.is_logged(db) {
            let content = self.content_as_record(db, db);
            let bytes = content.iter().map(codec::encoded_len).sum();
            self.check_fits(bytes)?;
            self.record_bytes += bytes;
            self.record.extend(content.into_iter().map(RecordItem::Own));
        }
        self.ks.store_logged(db, logged);
        Ok(())
    }

    /// Writes the record (if anything was logged) with `level`, stamps its
    /// LSN on what it touched, and releases the locks. It takes the
    /// transaction by reference, not by value: a transaction is a few
    /// hundred bytes, and every write's path moved it into each function
    /// down to here (a `memcpy` each). What is left afterwards holds no
    /// lock, and any further change through it is refused, as for a key
    /// whose shard it never locked.
    pub fn commit(
        &mut self,
        log: &dyn CommitLog,
        level: Durability,
    ) -> Result<CommitOutcome, CommitError> {
        let out = self.write_record(log, level);
        self.release();
        out
    }

    fn write_record(
        &mut self,
        log: &dyn CommitLog,
        level: Durability,
    ) -> Result<CommitOutcome, CommitError> {
        let mutations = self.applied.len();
        self.take_expired_for_feed();
        let taken = self.expired_feed.take();
        let expired: &[ExpiredKey] = taken.as_deref().map_or(&[], Vec::as_slice);
        if self.record.is_empty() {
            if mutations > 0 || !expired.is_empty() {
                if let Some(feed) = self.ks.feed() {
                    feed.committed(0, self.now_ms, &self.applied, expired);
                }
            }
            return Ok(CommitOutcome {
                lsn: 0,
                dependency_lsn: self.dependency_lsn,
                mutations,
                stream: 0,
            });
        }
        let record = std::mem::take(&mut self.record);
        let n = log.num_streams().max(1);
        // One record in one stream keeps a multi-key commit all-or-nothing;
        // the stream of the first key spreads single-key load across streams.
        let stream = record
            .iter()
            .find_map(|it| self.item(it).target_key())
            .map_or(0, |k| self.ks.shard_index(k) % n);
        let depends_on = self.record_dependency(log, stream, n);
        let result = {
            let this = &self;
            log.append(stream, self.now_ms, level, depends_on, &mut |buf| {
                codec::encode_record(record.iter().map(|it| this.item(it)), record.len(), buf)
            })
        };
        match result {
            Ok(lsn) => {
                self.record_stream = Some((stream, n));
                self.stamp_items(&record, lsn);
                if n > 1 {
                    for (i, g) in self.guards.iter_mut() {
                        if *i % n != stream {
                            g.other_stream_lsn = g.other_stream_lsn.max(lsn);
                        }
                    }
                }
                // Still under the shard locks: the feed sees each key's
                // writes in LSN order.
                if let Some(feed) = self.ks.feed() {
                    feed.committed(lsn, self.now_ms, &self.applied, expired);
                }
                // Once its stream has it, the record's dependencies are
                // durable too, and they cover everything this transaction
                // read (`record_dependency`).
                let dependency_lsn = if n > 1 {
                    dep::on_stream(stream, lsn)
                } else {
                    self.dependency_lsn.max(lsn)
                };
                Ok(CommitOutcome {
                    lsn,
                    dependency_lsn,
                    mutations,
                    stream,
                })
            }
            Err(e) => {
                // In memory but in no record: nothing that depends on it may
                // ever be reported durable. The log is failed or closed, so
                // no later record can be built on it either.
                self.stamp_items(&record, UNLOGGED_FAILED_LSN);
                // The removals happened all the same (`release` feeds them).
                self.expired_feed = taken;
                Err(CommitError::Log(e))
            }
        }
    }

    /// Every LSN the record to `stream` must not be recovered without,
    /// besides the earlier records of its own stream (which always come
    /// with it): everything written to a locked shard of another stream
    /// (this transaction may have read it or overwrites it), writes to a
    /// locked shard of its own through another stream, the extra
    /// dependencies, and the client's previous write if that one is in
    /// another stream and not yet acknowledged.
    fn record_dependency(&self, log: &dyn CommitLog, stream: usize, n: usize) -> u64 {
        let mut d = self.extra_dep;
        if n == 1 {
            return d;
        }
        for (i, g) in &self.guards {
            d = d.max(if i % n == stream {
                g.other_stream_lsn
            } else {
                g.applied_lsn
            });
        }
        if self.after != 0 && dep::stream(self.after) != Some(stream) && !log.is_met(self.after) {
            d = d.max(dep::lsn(self.after));
        }
        d
    }

    fn item<'m>(&'m self, it: &'m RecordItem) -> &'m Mutation {
        match it {
            RecordItem::Applied(i) => &self.applied[*i],
            RecordItem::Own(m) => m,
        }
    }

    fn stamp_items(&mut self, record: &[RecordItem], lsn: u64) {
        let applied = std::mem::take(&mut self.applied);
        for it in record {
            match it {
                RecordItem::Applied(i) => self.stamp(&applied[*i], lsn),
                RecordItem::Own(m) => self.stamp(m, lsn),
            }
        }
        self.applied = applied;
    }

    fn check_fits(&self, bytes: u64) -> Result<(), CommitError> {
        let max = self.ks.max_record_bytes();
        let total = self
            .record_bytes
            .saturating_add(bytes)
            .saturating_add(codec::RECORD_HEADER_BYTES);
        if bytes > 0 && total > max {
            return Err(CommitError::TooLarge { bytes: total, max });
        }
        Ok(())
    }

    /// How `m` will appear in the record, and its encoded size.
    fn log_form(&self, m: &Mutation) -> Result<LogForm, CommitError> {
        let logged = |db: u32| self.ks.is_logged(db as usize);
        let same = || LogForm::Same(codec::encoded_len(m));
        Ok(match m {
            // Libraries are logged whatever the databases' levels: they are
            // the server's, not a database's.
            Mutation::Function(_) | Mutation::ReplOrigin(_) => same(),
            Mutation::Key { db, .. } | Mutation::FlushDb { db } => {
                if logged(*db) {
                    same()
                } else {
                    LogForm::Skip
                }
            }
            Mutation::FlushAll => {
                if (0..self.ks.num_dbs()).any(|d| self.ks.is_logged(d)) {
                    same()
                } else {
                    LogForm::Skip
                }
            }
            Mutation::SwapDb { a, b } => match (logged(*a), logged(*b)) {
                (true, true) => same(),
                (false, false) => LogForm::Skip,
                (a_logged, _) => {
                    if !self.holds_all() {
                        return Err(ApplyError::internal("SWAPDB needs every shard").into());
                    }
                    // The logged side receives the unlogged side's keys.
                    let (to, from) = if a_logged { (*a, *b) } else { (*b, *a) };
                    let content = self.content_as_record(from as usize, to as usize);
                    let bytes = content.iter().map(codec::encoded_len).sum();
                    LogForm::Expanded(content, bytes)
                }
            },
        })
    }

    /// FLUSHDB `to` plus a RESTORE into `to` of every live key of `from`.
    fn content_as_record(&self, from: usize, to: usize) -> Vec<Mutation> {
        let mut out = vec![Mutation::FlushDb { db: to as u32 }];
        for (_, g) in &self.guards {
            let Some(d) = g.dbs.get(from) else { continue };
            for (k, e) in d.iter() {
                if d.is_expired(k, e, self.now_ms) {
                    continue;
                }
                out.push(Mutation::key(
                    to as u32,
                    k.to_bytes(),
                    KeyOp::Restore {
                        value: e.value.clone(),
                        expire_at_ms: d.expire_of(k, e),
                    },
                ));
            }
        }
        out
    }

    fn apply_with(&mut self, m: Mutation, form: LogForm) -> Result<(), CommitError> {
        self.changing = true;
        // What reads removed since the last mutation, and what this one
        // removes (a write meeting its key expired), both come before it.
        self.take_expired_for_feed();
        let applied = self.apply_to_shards(&m, false);
        self.take_expired_for_feed();
        applied?;
        self.record_bytes += form.bytes();
        match form {
            LogForm::Skip => {}
            LogForm::Same(_) => self.record.push(RecordItem::Applied(self.applied.len())),
            LogForm::Expanded(e, _) => self.record.extend(e.into_iter().map(RecordItem::Own)),
        }
        self.applied.push(m);
        Ok(())
    }

    /// Applies `m` to the shards it belongs to. During replay a key whose
    /// shard is not held (its checkpoint already contains the record) is
    /// skipped; live, that would be a command touching a key it did not
    /// declare, and is refused.
    fn apply_to_shards(&mut self, m: &Mutation, replay: bool) -> Result<(), CommitError> {
        let now = self.now_ms;
        if let Mutation::Function(op) = m {
            // Replay applies them apart, by the libraries' own LSN.
            if !replay {
                self.apply_function(op);
            }
            return Ok(());
        }
        if let Mutation::ReplOrigin(_) = m {
            // Taken with its record's LSN once logged (`stamp`): a
            // checkpoint stores the two together.
            return Ok(());
        }
        match m.target_key() {
            Some(key) => match self.slot(key) {
                Some(slot) => {
                    let (shard, g) = &mut self.guards[slot];
                    m.apply(g, now)?;
                    if let Mutation::Key { db, .. } = m {
                        let db = *db as usize;
                        if let Some(d) = g.dbs.get(db) {
                            self.ks.publish_place(*shard, db, d.place());
                        }
                    }
                }
                None if replay => {}
                None => {
                    return Err(
                        ApplyError::internal("a command wrote a key it did not lock").into(),
                    )
                }
            },
            None => {
                if !replay && !self.holds_all() {
                    return Err(
                        ApplyError::internal("database-wide write without every shard").into(),
                    );
                }
                for (_, g) in self.guards.iter_mut() {
                    m.apply(g, now)?;
                }
            }
        }
        Ok(())
    }

    /// Takes the function libraries' lock now, before any other lock the
    /// caller is about to take (the server's Lua engine): a transaction
    /// that changes libraries holds this one until its commit.
    pub fn lock_functions(&mut self) {
        let ks = self.ks;
        self.functions.get_or_insert_with(|| ks.functions().lock());
    }

    /// The reply depends on the function libraries as they are.
    pub fn depend_on_functions(&mut self) {
        let lsn = match &self.functions {
            Some(f) => f.write_lsn,
            None => self.ks.functions_write_lsn(),
        };
        self.depend_on(lsn);
    }

    fn apply_function(&mut self, op: &FunctionOp) {
        let ks = self.ks;
        self.functions
            .get_or_insert_with(|| ks.functions().lock())
            .apply(op);
    }

    /// Records `lsn` on what `m` touched in the held shards, so later
    /// readers know what their replies depend on. The one stamping path,
    /// for live commits and for replay.
    fn stamp(&mut self, m: &Mutation, lsn: u64) {
        // A write that failed to log is in memory but in no record: it must
        // not advance the shard's replay position (checkpoints rely on it).
        let applied = if lsn == UNLOGGED_FAILED_LSN { 0 } else { lsn };
        let now = self.now_ms;
        match m {
            Mutation::ReplOrigin(o) => {
                if lsn != UNLOGGED_FAILED_LSN {
                    self.ks.set_repl_origin(o, lsn);
                }
            }
            Mutation::Function(_) => {
                if let Some(f) = self.functions.as_mut() {
                    f.applied_lsn = f.applied_lsn.max(applied);
                    f.write_lsn = f.write_lsn.max(lsn);
                }
            }
            Mutation::Key { db, key, .. } => {
                self.ks.note_write(*db as usize, lsn);
                let Some(slot) = self.slot(key) else { return };
                let other = self
                    .record_stream
                    .is_some_and(|(s, n)| self.guards[slot].0 % n != s);
                let shard = &mut self.guards[slot].1;
                shard.applied_lsn = shard.applied_lsn.max(applied);
                let Some(d) = shard.dbs.get_mut(*db as usize) else {
                    return;
                };
                if !d.stamp_from(key, lsn, now, other) {
                    d.miss_lsn = d.miss_lsn.max(lsn);
                }
            }
            Mutation::FlushDb { db } => {
                self.ks.note_write(*db as usize, lsn);
                for (_, g) in self.guards.iter_mut() {
                    g.applied_lsn = g.applied_lsn.max(applied);
                    if let Some(d) = g.dbs.get_mut(*db as usize) {
                        d.miss_lsn = lsn;
                    }
                }
            }
            Mutation::FlushAll => {
                for db in 0..self.ks.num_dbs() {
                    self.ks.note_write(db, lsn);
                }
                for (_, g) in self.guards.iter_mut() {
                    g.applied_lsn = g.applied_lsn.max(applied);
                    for d in &mut g.dbs {
                        d.miss_lsn = lsn;
                    }
                }
            }
            Mutation::SwapDb { a, b } => {
                self.ks.note_write(*a as usize, lsn);
                self.ks.note_write(*b as usize, lsn);
                for (_, g) in self.guards.iter_mut() {
                    g.applied_lsn = g.applied_lsn.max(applied);
                    for x in [*a, *b] {
                        if let Some(d) = g.dbs.get_mut(x as usize) {
                            d.floor_lsn = lsn;
                        }
                    }
                }
            }
        }
    }
}

/// How one applied mutation appears in the record, with its encoded size.
enum LogForm {
    /// Not at all: it writes an unlogged database.
    Skip,
    Same(u64),
    /// As other mutations (SWAPDB across a logged and an unlogged database).
    Expanded(Vec<Mutation>, u64),
}

impl LogForm {
    fn bytes(&self) -> u64 {
        match self {
            LogForm::Skip => 0,
            LogForm::Same(b) | LogForm::Expanded(_, b) => *b,
        }
    }
}

/// Applies one recovered record to the keyspace, with the record's commit
/// time as "now" so expiry decisions replay exactly as they were made.
///
/// Each shard gets the record only if its `applied_lsn` is below `lsn`: a
/// shard loaded from a checkpoint already contains every record up to the
/// LSN recorded for it. Key mutations go to their key's shard; database-wide
/// ones (FLUSHDB, FLUSHALL, SWAPDB) to every shard that needs the record.
pub fn replay_record(
    ks: &Keyspace,
    lsn: u64,
    time_ms: u64,
    muts: &[Mutation],
) -> Result<(), CommitError> {
    if muts.iter().any(Mutation::is_function) {
        let mut f = ks.functions().lock();
        if f.applied_lsn < lsn {
            for m in muts {
                if let Mutation::Function(op) = m {
                    f.apply(op);
                }
            }
            f.applied_lsn = lsn;
            f.write_lsn = lsn;
        }
    }
    // The highest LSN's position wins (records a checkpoint covers are
    // met before the rest, stream by stream).
    for m in muts {
        if let Mutation::ReplOrigin(o) = m {
            ks.set_repl_origin(o, lsn);
        }
    }
    let shard_muts = muts.iter().filter(|m| !m.is_shardless());
    if shard_muts.clone().next().is_none() {
        return Ok(());
    }
    let whole = shard_muts.clone().any(|m| m.target_key().is_none());
    let mut idx: Vec<usize> = if whole {
        (0..ks.num_shards()).collect()
    } else {
        muts.iter()
            .filter_map(|m| m.target_key().map(|k| ks.shard_index(k)))
            .collect()
    };
    idx.sort_unstable();
    idx.dedup();
    // Ascending order, like every other multi-shard lock.
    let guards: Guards<'_> = idx
        .into_iter()
        .map(|i| (i, ks.shard(i).lock()))
        .filter(|(_, g)| g.applied_lsn < lsn)
        .collect();
    if guards.is_empty() {
        return Ok(());
    }
    let mut txn = Txn {
        ks,
        guards,
        functions: None,
        // Exactly the time the command ran with: logs written before shard
        // clocks existed may go backwards, and replay must do what live did.
        now_ms: time_ms,
        applied: SmallVec::new(),
        record: SmallVec::new(),
        record_bytes: 0,
        dependency_lsn: 0,
        extra_dep: 0,
        after: 0,
        record_stream: None,
        no_touch: false,
        expiry_held: false,
        lookups: Lookups::default(),
        changing: false,
        expired_feed: None,
        feed_mark: crate::db::feed_removals_on_this_thread(),
    };
    for (_, g) in txn.guards.iter_mut() {
        g.tick(time_ms);
    }
    // Applied from a primary's stream: nothing expired then (`hold_expiry`).
    if muts.iter().any(|m| matches!(m, Mutation::ReplOrigin(_))) {
        txn.hold_expiry();
    }
    for m in muts {
        txn.apply_to_shards(m, true)?;
    }
    for m in muts {
        txn.stamp(m, lsn);
    }
    for (_, g) in txn.guards.iter_mut() {
        g.applied_lsn = lsn;
    }
    Ok(())
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if self.changing && std::thread::panicking() {
            // A bug interrupted a write: the keyspace may hold half a change,
            // or one its record will never carry, and the locks are about to
            // be released to readers and to the next checkpoint, which would
            // make it durable. The log holds every acknowledged write, so
            // stopping here and recovering from it loses nothing that was
            // promised and keeps the data a prefix of the commit order;
            // carrying on would not.
            tracing::error!(
                "a panic interrupted a write; aborting so that recovery restores the state the log holds"
            );
            std::process::abort();
        }
        self.release();
    }
}

impl Txn<'_> {
    /// Ends the transaction, committed or not: its last duties under the
    /// locks, then the locks. Doing it twice does nothing more.
    fn release(&mut self) {
        // The shards outlive the transaction; the next one to lock them
        // must not inherit this client's NO-TOUCH.
        self.set_no_touch(false);
        self.set_expiry_held(false);
        // Not committed (commit takes them), e.g. a read: the removals
        // still reach the feed while the locks are held, ahead of any
        // later write.
        self.take_expired_for_feed();
        if let Some(list) = self.expired_feed.take().filter(|l| !l.is_empty()) {
            if let Some(feed) = self.ks.feed() {
                feed.committed(0, self.now_ms, &[], &list);
            }
        }
        // Nothing is half done from here on: a panic while what is left is
        // still held (the caller's work after a commit) is not a write's.
        self.changing = false;
        self.guards.clear();
        self.functions = None;
    }
}
