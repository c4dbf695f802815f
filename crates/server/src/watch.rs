//! WATCH bookkeeping: which clients watch which keys, so that a write can
//! mark their transactions dirty before it releases its shard locks (EXEC
//! then checks the flag under the same locks, so no write slips between).

use bytes::Bytes;
use durakv_engine::mutation::Mutation;
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

    /// Marks the watchers of everything `muts` touched in database `db`.
    pub fn touch(&self, muts: &[Mutation]) {
        if !self.is_active() || muts.is_empty() {
            return;
        }
        let keys = self.keys.lock();
        for m in muts {
            match m {
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
                Mutation::FlushDb { .. }
                | Mutation::FlushAll
                | Mutation::Function(_)
                | Mutation::ReplOrigin(_) => {}
                Mutation::SwapDb { a, b } => {
                    mark_db(&keys, *a as usize);
                    mark_db(&keys, *b as usize);
                }
            }
        }
    }
}

impl WatchRegistry {
    /// Before FLUSHDB (`db`) or FLUSHALL (`None`) runs: marks the watchers
    /// of the watched keys that exist (`exists`), as Redis does.
    pub fn touch_flushed(&self, db: Option<usize>, mut exists: impl FnMut(usize, &Bytes) -> bool) {
        if !self.is_active() {
            return;
        }
        let keys = self.keys.lock();
        for ((d, key), list) in keys.iter() {
            if db.is_none_or(|db| db == *d) && exists(*d, key) {
                for (_, f) in list {
                    f.store(true, Ordering::Release);
                }
            }
        }
    }
}

fn mark_db(keys: &Watchers, db: usize) {
    for ((d, _), list) in keys.iter() {
        if *d == db {
            for (_, f) in list {
                f.store(true, Ordering::Release);
            }
        }
    }
}
