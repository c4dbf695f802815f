//! A point-in-time copy of the keyspace that writers do not wait for (a
//! replica's full sync), or of one shard (a checkpoint).
//!
//! Copying every value under every shard lock stalled all writes for the
//! whole copy: 6 s for a million YCSB records. Instead, the point is fixed
//! with every shard locked only long enough to leave a [`Cursor`] in each
//! database, and the copy is then made a few hundred keys at a time, one
//! shard lock at a time. A write that reaches a key the copy has not taken
//! yet first saves the key's value as it was at the point (copy before
//! write), so writers pay for the keys they change, not for the keyspace.
//!
//! The cursor relies on how the database's map (`crate::keymap`) moves entries: new
//! keys are appended, and a removal moves the last entry into the hole. The
//! copy walks positions downwards from the length at the point, so every
//! position below the cursor is either a key of the point not yet taken, or
//! one the cursor has been told about (`saved`).

use crate::db::Entry;
use crate::key::Key;
use crate::keyspace::Keyspace;
use crate::shard::Shard;
use crate::txn::Txn;
use crate::value::{HashBuilder, Value};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Keys copied per shard lock: a few milliseconds of hold for large values.
const KEYS_PER_LOCK: usize = 256;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One key of a snapshot.
#[derive(Debug)]
pub struct SnapKey {
    pub key: Bytes,
    pub value: Value,
    pub expire_at_ms: u64,
}

/// A snapshot in progress over one database of one shard.
#[derive(Debug)]
pub(crate) struct Cursor {
    job: u64,
    /// The database's number at the point (SWAPDB moves databases, and
    /// their cursors with them).
    db: usize,
    /// Keys expired at the point are left out (0: none are; checkpoints
    /// keep them for replay).
    now_ms: u64,
    /// Positions below this have not been taken yet.
    pos: usize,
    /// Keys below `pos` the walk must not take from the map: Some(entry
    /// and expiry time at the point) for a key changed or removed since,
    /// None for a key that was not there at the point or was already taken.
    saved: HashMap<Key, Option<(Entry, u64)>, HashBuilder>,
}

impl Cursor {
    pub(crate) fn new(job: u64, db: usize, now_ms: u64, len: usize) -> Cursor {
        Cursor {
            job,
            db,
            now_ms,
            pos: len,
            saved: HashMap::default(),
        }
    }

    /// The entry at `i` is about to change or go.
    pub(crate) fn before_change(&mut self, i: usize, key: &Key, e: &Entry, expire_at_ms: u64) {
        if i < self.pos && !self.saved.contains_key(key) {
            self.saved
                .insert(key.clone(), Some((e.clone(), expire_at_ms)));
        }
    }

    /// A key that was not there at the point landed at `i` (appended, or
    /// moved into a hole from a position the walk has passed).
    pub(crate) fn arrived(&mut self, i: usize, key: &Key) {
        if i < self.pos {
            self.saved.entry(key.clone()).or_insert(None);
        }
    }

    /// Whether the entry that was last (at `from`) and moved into a hole
    /// at `to` must be remembered as taken: it was at or above `pos`.
    pub(crate) fn moved(&mut self, from: usize, to: usize, key: &Key) {
        if to < self.pos && from >= self.pos {
            self.saved.entry(key.clone()).or_insert(None);
        }
    }

    /// The database is emptied: what the walk has not taken moves here.
    pub(crate) fn detach(&mut self, taken: impl Iterator<Item = (usize, Key, Entry, u64)>) {
        for (i, k, e, at) in taken {
            if i < self.pos {
                self.saved.entry(k).or_insert(Some((e, at)));
            }
        }
        self.pos = 0;
    }

    pub(crate) fn job(&self) -> u64 {
        self.job
    }

    /// Hands `e` to `visit` unless it had expired at the point.
    fn emit(
        &self,
        key: &Key,
        e: &Entry,
        expire_at_ms: u64,
        visit: &mut dyn FnMut(usize, &Key, &Entry, u64),
    ) {
        if !crate::db::is_due(expire_at_ms, self.now_ms) {
            visit(self.db, key, e, expire_at_ms);
        }
    }

    /// Takes up to `budget` positions from `entry_at`, handing each key of
    /// the point to `visit` (database number at the point, key, entry).
    /// Returns how many it took, and true once the walk is over (the saved
    /// values of the point are then visited too).
    pub(crate) fn step<'a>(
        &mut self,
        budget: usize,
        entry_at: impl Fn(usize) -> Option<(&'a Key, &'a Entry, u64)>,
        visit: &mut dyn FnMut(usize, &Key, &Entry, u64),
    ) -> (usize, bool) {
        let mut n = 0;
        while self.pos > 0 && n < budget {
            self.pos -= 1;
            n += 1;
            if let Some((k, e, at)) = entry_at(self.pos) {
                // Most walks meet no write: skip hashing every key then.
                if self.saved.is_empty() || !self.saved.contains_key(k) {
                    self.emit(k, e, at, visit);
                }
            }
        }
        if self.pos > 0 {
            return (n, false);
        }
        for (k, e) in self.saved.iter() {
            if let Some((e, at)) = e {
                self.emit(k, e, *at, visit);
            }
        }
        (n, true)
    }
}

/// A snapshot being copied out, batch by batch. Dropped before the end
/// (the replica went away), it takes its cursors back, so writers stop
/// saving values for it.
pub struct Walk<'a> {
    ks: &'a Keyspace,
    job: u64,
    /// Shards before this one are done.
    shard: usize,
}

/// Locks every shard, runs `at_point` (which sees the keyspace at the
/// point and may read anything else that must match it), and returns its
/// result with the walk that copies every database's keys at that point.
/// Writers run while the walk goes on.
pub fn begin<T>(ks: &Keyspace, at_point: impl FnOnce(&mut Txn<'_>) -> T) -> (T, Walk<'_>) {
    let job = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut txn = ks.lock_all();
    let t = at_point(&mut txn);
    // A replica's keys past their time are still its primary's to delete
    // (a DEL will follow in the stream it relays), so its own replicas
    // get them, as a Redis replica's RDB carries them.
    let now = if crate::db::expiry_left_to_primary() {
        0
    } else {
        txn.now_ms
    };
    for shard in txn.shards_mut() {
        for (db, d) in shard.dbs.iter_mut().enumerate() {
            d.start_snapshot(Cursor::new(job, db, now, d.len()));
        }
    }
    (t, Walk { ks, job, shard: 0 })
}

impl Walk<'_> {
    /// The next keys, by database number, after walking at least `min`
    /// positions (or to the end); None once the walk is over. Each shard
    /// lock is held for a few hundred positions at most.
    pub fn next_batch(&mut self, min: usize) -> Option<Vec<Vec<SnapKey>>> {
        if self.shard >= self.ks.num_shards() {
            return None;
        }
        let mut out: Vec<Vec<SnapKey>> = (0..self.ks.num_dbs()).map(|_| Vec::new()).collect();
        let mut walked = 0;
        while walked < min && self.shard < self.ks.num_shards() {
            let mut shard = self.ks.shard(self.shard).lock();
            let mut budget = KEYS_PER_LOCK;
            let mut done = true;
            let mut copy = |db: usize, key: &Key, e: &Entry, expire_at_ms: u64| {
                out[db].push(SnapKey {
                    key: key.to_bytes(),
                    value: e.value.clone(),
                    expire_at_ms,
                });
            };
            for d in shard.dbs.iter_mut() {
                if budget == 0 {
                    done = false;
                    break;
                }
                let (left, finished) = d.snapshot_step(self.job, budget, &mut copy);
                budget = left;
                done &= finished;
            }
            // Writers waiting for the shard go first: a plain unlock lets
            // this thread take the lock straight back.
            parking_lot::MutexGuard::unlock_fair(shard);
            walked += KEYS_PER_LOCK - budget;
            if done {
                self.shard += 1;
            }
        }
        Some(out)
    }

    /// Everything the walk has not handed out yet, by database number.
    pub fn rest(mut self) -> Vec<Vec<SnapKey>> {
        let dbs = self.ks.num_dbs();
        self.next_batch(usize::MAX)
            .unwrap_or_else(|| (0..dbs).map(|_| Vec::new()).collect())
    }
}

impl Drop for Walk<'_> {
    fn drop(&mut self) {
        for i in self.shard..self.ks.num_shards() {
            for d in self.ks.shard(i).lock().dbs.iter_mut() {
                d.end_snapshot(self.job);
            }
        }
    }
}

/// One shard's keys at one point, for a checkpoint: the point is fixed
/// under that shard's lock alone, where `at_point` reads what must match
/// it (the shard's LSN); then every entry of the point, expired ones
/// included (replay needs them), goes to `visit` (database number, key,
/// entry, expiry time), a few hundred per hold of the lock, while writers
/// go on; `unlocked` runs after each hold.
/// Returns `at_point`'s result and the longest hold of the lock.
pub fn walk_shard<T>(
    ks: &Keyspace,
    shard: usize,
    at_point: impl FnOnce(&Shard) -> T,
    visit: &mut dyn FnMut(usize, &Key, &Entry, u64),
    unlocked: &mut dyn FnMut(),
) -> (T, Duration) {
    let job = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let m = ks.shard(shard);
    let (t, mut longest) = {
        let mut g = m.lock();
        let held = Instant::now();
        let t = at_point(&g);
        for (db, d) in g.dbs.iter_mut().enumerate() {
            // No clock: an expired entry is still written, as replay
            // expects it there.
            d.start_snapshot(Cursor::new(job, db, 0, d.len()));
        }
        (t, held.elapsed())
    };
    loop {
        let mut g = m.lock();
        let held = Instant::now();
        let mut budget = KEYS_PER_LOCK;
        let mut done = true;
        for d in g.dbs.iter_mut() {
            if budget == 0 {
                done = false;
                break;
            }
            let (left, finished) = d.snapshot_step(job, budget, visit);
            budget = left;
            done &= finished;
        }
        longest = longest.max(held.elapsed());
        parking_lot::MutexGuard::unlock_fair(g);
        unlocked();
        if done {
            return (t, longest);
        }
    }
}

/// [`begin`], walked to the end: every database's keys at the point.
pub fn take<T>(ks: &Keyspace, at_point: impl FnOnce(&mut Txn<'_>) -> T) -> (T, Vec<Vec<SnapKey>>) {
    let (t, walk) = begin(ks, at_point);
    (t, walk.rest())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;
    use crate::value::Str;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    type State = BTreeMap<Vec<u8>, (Vec<u8>, u64)>;

    fn string(v: &Value) -> Vec<u8> {
        match v {
            Value::Str(s) => s.as_slice().to_vec(),
            _ => panic!("only strings here"),
        }
    }

    fn live(db: &Db, now: u64) -> State {
        db.iter()
            .filter(|(k, e)| !db.is_expired(k, e, now))
            .map(|(k, e)| (k.to_vec(), (string(&e.value), db.expire_of(k, e))))
            .collect()
    }

    fn collected(out: &[Vec<SnapKey>]) -> State {
        let mut s = State::new();
        for k in &out[0] {
            let old = s.insert(k.key.to_vec(), (string(&k.value), k.expire_at_ms));
            assert!(old.is_none(), "key {:?} copied twice", k.key);
        }
        s
    }

    /// A walk step that copies what it visits, as a full sync does.
    fn walk(db: &mut Db, job: u64, budget: usize, out: &mut [Vec<SnapKey>]) -> (usize, bool) {
        db.snapshot_step(job, budget, &mut |d, k, e, expire_at_ms| {
            out[d].push(SnapKey {
                key: k.to_bytes(),
                value: e.value.clone(),
                expire_at_ms,
            })
        })
    }

    fn value(rng: &mut StdRng) -> Entry {
        let n: u32 = rng.gen();
        Entry::new(Value::Str(Str::new(n.to_string().as_bytes())))
    }

    /// One random write, through every path a database changes by.
    fn write(db: &mut Db, rng: &mut StdRng, now: u64) {
        let key = format!("k{}", rng.gen_range(0..300));
        match rng.gen_range(0..100) {
            0..=29 => {
                let e = value(rng);
                let at = if rng.gen_bool(0.2) {
                    now + rng.gen_range(1..50)
                } else {
                    0
                };
                if rng.gen_bool(0.5) {
                    db.insert_expiring(key.as_bytes(), e, at);
                } else {
                    // 20 bytes, on the heap: overwriting one such value
                    // with another writes in place.
                    let v = Bytes::from(format!("{:020}", rng.gen::<u64>()));
                    db.set_string(key.as_bytes(), &v, at);
                }
            }
            30..=54 => {
                db.remove(key.as_bytes());
            }
            55..=69 => {
                let v = value(rng).value;
                if let Some(e) = db.get_mut(key.as_bytes(), now) {
                    e.value = v;
                }
            }
            70..=79 => {
                let k = Bytes::from(key);
                db.get_or_insert_with(&k, now, || Value::Str(Str::new(b"new")));
                let lsn = rng.gen_range(1..1_000_000);
                db.stamp(&k, lsn, now);
            }
            80..=89 => {
                let at = if rng.gen_bool(0.5) { 0 } else { now + 20 };
                db.set_expire(key.as_bytes(), at);
            }
            90..=97 => {
                // Reads expire keys whose time has come.
                db.get(key.as_bytes(), now);
            }
            _ => {
                if rng.gen_bool(0.1) {
                    db.clear();
                }
            }
        }
    }

    /// Random writes interleaved with the walks of up to three snapshots
    /// started at different points: each copy is its point's state, with
    /// every key once.
    #[test]
    fn copies_are_the_state_at_their_point_under_random_writes() {
        let seeds: u64 = std::env::var("DURAKV_SNAPSHOT_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(300);
        for seed in 0..seeds {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut db = Db::default();
            let mut now = 1_000;
            for _ in 0..rng.gen_range(0..400) {
                write(&mut db, &mut rng, now);
            }
            // (job, expected, output, finished)
            let mut jobs: Vec<(u64, State, Vec<Vec<SnapKey>>, bool)> = Vec::new();
            for step in 0..3000 {
                now += rng.gen_range(0..3);
                if jobs.len() < 3 && rng.gen_bool(0.005) || step == 0 {
                    let job = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                    db.start_snapshot(Cursor::new(job, 0, now, db.len()));
                    jobs.push((job, live(&db, now), vec![Vec::new()], false));
                }
                if rng.gen_bool(0.7) {
                    write(&mut db, &mut rng, now);
                } else {
                    let j = rng.gen_range(0..jobs.len());
                    let (job, _, out, fin) = &mut jobs[j];
                    if !*fin {
                        let budget = rng.gen_range(1..8);
                        let (left, done) = walk(&mut db, *job, budget, out);
                        assert!(left <= budget);
                        *fin = done;
                    }
                }
            }
            for (job, expected, mut out, fin) in jobs {
                if !fin {
                    while !walk(&mut db, job, 5, &mut out).1 {}
                }
                assert_eq!(collected(&out), expected, "seed {seed}, job {job}");
            }
        }
    }

    #[test]
    fn a_walk_given_up_leaves_no_cursor_behind() {
        let ks = Keyspace::new(2, 4);
        for i in 0..2000 {
            let k = format!("k{i}");
            let shard = ks.shard_index(k.as_bytes());
            ks.shard(shard).lock().dbs[i % 2]
                .insert(k.as_bytes(), Entry::new(Value::Str(Str::new(b"v"))));
        }
        let ((), mut walk) = begin(&ks, |_| ());
        let first = walk.next_batch(10).unwrap();
        assert!(first.iter().map(Vec::len).sum::<usize>() >= 10);
        drop(walk);
        for i in 0..4 {
            for d in ks.shard(i).lock().dbs.iter() {
                assert_eq!(d.snapshots_in_progress(), 0);
            }
        }
        let ((), all) = take(&ks, |_| ());
        assert_eq!((all[0].len(), all[1].len()), (1000, 1000));
    }
}
