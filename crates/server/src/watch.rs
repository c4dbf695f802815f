//! WATCH bookkeeping: which clients watch which keys, so that a write can
//! mark their transactions dirty before it releases its shard locks (EXEC
//! then checks the flag under the same locks, so no write slips between).

use bytes::Bytes;
use durakv_engine::mutation::{KeyOp, Mutation};
use durakv_engine::stream_op::StreamOp;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

type Flag = Arc<AtomicBool>;
/// (database, key) → the clients watching it, with their dirty flags.
type Watchers = HashMap<(usize, Bytes), Vec<(u64, Flag)>>;

#[derive(Default)]
pub struct WatchRegistry {
    /// Fast path: no lock taken by writers while nobody watches anything.
    watched_keys: AtomicUsize,
    keys: Mutex<Watchers>,
}

impl WatchRegistry {
    pub fn watch(&self, client: u64, flag: &Flag, db: usize, key: Bytes) {
        let mut keys = self.keys.lock();
        let list = keys.entry((db, key)).or_default();
        if !list.iter().any(|(c, _)| *c == client) {
            list.push((client, flag.clone()));
            self.watched_keys.fetch_add(1, Ordering::Release);
        }
    }

    pub fn unwatch(&self, client: u64, db: usize, key: &Bytes) {
        let mut keys = self.keys.lock();
        let k = (db, key.clone());
        if let Some(list) = keys.get_mut(&k) {
            let before = list.len();
            list.retain(|(c, _)| *c != client);
            self.watched_keys
                .fetch_sub(before - list.len(), Ordering::Release);
            if list.is_empty() {
                keys.remove(&k);
            }
        }
    }

    pub fn is_active(&self) -> bool {
        self.watched_keys.load(Ordering::Acquire) > 0
    }

    /// The clients other than `me` watching any of `keys` in `db`, up to
    /// `most` of them (more: none, see `settle::MAX_RECEIVERS`).
    pub fn watchers_of<'k>(
        &self,
        db: usize,
        keys: impl Iterator<Item = &'k Bytes>,
        me: u64,
        most: usize,
    ) -> Vec<u64> {
        if !self.is_active() {
            return Vec::new();
        }
        let map = self.keys.lock();
        let mut out = Vec::new();
        for key in keys {
            let Some(list) = map.get(&(db, key.clone())) else {
                continue;
            };
            for &(client, _) in list {
                if client != me && !out.contains(&client) {
                    if out.len() == most {
                        return Vec::new();
                    }
                    out.push(client);
                }
            }
        }
        out
    }

    /// Marks the watchers of everything `muts` touched in database `db`.
    pub fn touch(&self, muts: &[Mutation]) {
        if !self.is_active() || muts.is_empty() {
            return;
        }
        let keys = self.keys.lock();
        for m in muts {
            match m {
                Mutation::Key { op, .. } if !touches_value(op) => {}
                Mutation::Key { db, key, .. } => {
                    if let Some(list) = keys.get(&(*db as usize, key.clone())) {
                        for (_, f) in list {
                            f.store(true, Ordering::Release);
                        }
                    }
                }
                // FLUSHDB / FLUSHALL marked the watchers of keys that
                // existed before they ran (`touch_flushed`); a watched key
                // that was absent is not touched by emptying the database.
                // Libraries are no key a client can watch.
                // SWAPDB likewise (`touch_swapped`).
                Mutation::FlushDb { .. }
                | Mutation::FlushAll
                | Mutation::SwapDb { .. }
                | Mutation::Function(_)
                | Mutation::ReplOrigin(_) => {}
            }
        }
    }
}

impl WatchRegistry {
    /// Before FLUSHDB (`db`) or FLUSHALL (`None`) runs: marks the watchers
    /// of the watched keys that exist (`exists`), as Redis does.
    pub fn touch_flushed(&self, db: Option<usize>, mut exists: impl FnMut(usize, &Bytes) -> bool) {
        self.touch_where(|d, key| db.is_none_or(|db| db == d) && exists(d, key));
    }

    /// Before SWAPDB `a` `b` runs: marks the watchers of a key in either
    /// database that exists in either, as Redis does (a key absent from
    /// both reads the same after the swap).
    pub fn touch_swapped(&self, a: usize, b: usize, mut exists: impl FnMut(usize, &Bytes) -> bool) {
        self.touch_where(|d, key| (d == a || d == b) && (exists(a, key) || exists(b, key)));
    }

    fn touch_where(&self, mut hit: impl FnMut(usize, &Bytes) -> bool) {
        if !self.is_active() {
            return;
        }
        let keys = self.keys.lock();
        for ((d, key), list) in keys.iter() {
            if hit(*d, key) {
                for (_, f) in list {
                    f.store(true, Ordering::Release);
                }
            }
        }
    }
}

/// Whether `op` changes what a read of the key returns, as Redis's WATCH
/// and client tracking see it: a stream's consumer groups, pending
/// entries and XSETID's last ID are not its value, so XREADGROUP, XACK,
/// XCLAIM, XGROUP and XSETID leave watchers alone (new entries, removed
/// entries and a new key do not).
pub(crate) fn touches_value(op: &KeyOp) -> bool {
    match op {
        KeyOp::Stream(s) => matches!(
            **s,
            StreamOp::Create | StreamOp::Add { .. } | StreamOp::Trim { .. } | StreamOp::Delete(_)
        ),
        _ => true,
    }
}
