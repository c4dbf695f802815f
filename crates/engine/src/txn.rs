//! A transaction over locked shards: the unit in which commands read the
//! keyspace, apply mutations, and commit them as one log record.
//!
//! Holding the shard locks from the first read until the LSN is assigned is
//! what makes commit order (LSN order) agree with apply order for every key:
//! two writes to one key are serialized by that key's shard lock, and the
//! later one gets the larger LSN. Replaying by LSN therefore rebuilds the
//! same state.

use crate::codec;
use crate::db::{Db, Entry};
use crate::durability::Durability;
use crate::keyspace::Keyspace;
use crate::mutation::{ApplyError, Mutation};
use crate::shard::Shard;
use parking_lot::MutexGuard;

/// The write-ahead log as seen by a committing transaction.
pub trait CommitLog: Send + Sync {
    fn num_streams(&self) -> usize;
    /// Appends one record and returns its LSN. `encode` writes the payload.
    fn append(
        &self,
        stream: usize,
        time_ms: u64,
        level: Durability,
        encode: &mut dyn FnMut(&mut Vec<u8>),
    ) -> Result<u64, String>;
}

/// LSN stamped on entries whose write could not be logged: no reply that
/// depends on them may ever be released as durable.
pub const UNLOGGED_FAILED_LSN: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitOutcome {
    /// LSN of the record written, 0 if nothing was logged.
    pub lsn: u64,
    /// The highest LSN this command's reply depends on (its own write, or a
    /// not-yet-durable write it read).
    pub dependency_lsn: u64,
    /// Number of mutations applied.
    pub mutations: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    #[error("write-ahead log failure: {0}")]
    Log(String),
}

pub struct Txn<'a> {
    guards: Vec<(usize, MutexGuard<'a, Shard>)>,
    shard_count: usize,
    pub now_ms: u64,
    muts: Vec<Mutation>,
    dependency_lsn: u64,
}

impl<'a> Txn<'a> {
    pub(crate) fn new(ks: &'a Keyspace, sorted_shards: Vec<usize>, now_ms: u64) -> Txn<'a> {
        let guards = sorted_shards
            .into_iter()
            .map(|i| (i, ks.shard(i).lock()))
            .collect();
        Txn {
            guards,
            shard_count: ks.num_shards(),
            now_ms,
            muts: Vec::new(),
            dependency_lsn: 0,
        }
    }

    /// True when every shard is locked (whole-keyspace commands need it).
    pub fn holds_all(&self) -> bool {
        self.guards.len() == self.shard_count
    }

    fn slot(&self, key: &[u8]) -> usize {
        let shard = crate::keyspace::shard_for_key(key, self.shard_count);
        match self.guards.binary_search_by_key(&shard, |(i, _)| *i) {
            Ok(pos) => pos,
            // A command touched a key it did not declare: a bug, not input.
            Err(_) => panic!("key's shard {shard} was not locked by this transaction"),
        }
    }

    /// The database `db` in the shard of `key`, for reads. Records nothing;
    /// prefer [`Txn::get`], which records the read's durability dependency.
    pub fn db_of(&mut self, db: usize, key: &[u8]) -> &mut Db {
        let slot = self.slot(key);
        &mut self.guards[slot].1.dbs[db]
    }

    /// Reads `key`, expiring it if due, and records the LSN the reply now
    /// depends on.
    pub fn get(&mut self, db: usize, key: &[u8]) -> Option<&Entry> {
        let now = self.now_ms;
        let slot = self.slot(key);
        let d = &mut self.guards[slot].1.dbs[db];
        d.get(key, now);
        self.dependency_lsn = self.dependency_lsn.max(d.dependency_lsn(key));
        d.peek(key)
    }

    /// Records an extra dependency (e.g. a whole-database read).
    pub fn depend_on(&mut self, lsn: u64) {
        self.dependency_lsn = self.dependency_lsn.max(lsn);
    }

    /// Every locked shard, for whole-keyspace reads (KEYS, SCAN, DBSIZE).
    pub fn shards_mut(&mut self) -> impl Iterator<Item = &mut Shard> + use<'_, 'a> {
        self.guards.iter_mut().map(|(_, g)| &mut **g)
    }

    /// Applies a mutation now (so later reads in this transaction see it)
    /// and queues it for the log.
    pub fn apply(&mut self, m: Mutation) -> Result<(), ApplyError> {
        let now = self.now_ms;
        match m.target_key() {
            Some(key) => {
                let slot = self.slot(key);
                m.apply(&mut self.guards[slot].1, now)?;
            }
            None => {
                assert!(
                    self.holds_all(),
                    "database-wide mutation without all shards locked"
                );
                for (_, g) in self.guards.iter_mut() {
                    m.apply(g, now)?;
                }
            }
        }
        self.muts.push(m);
        Ok(())
    }

    pub fn mutations(&self) -> &[Mutation] {
        &self.muts
    }

    /// Writes the queued mutations as one log record (when `level` is logged
    /// and a log exists), stamps the LSN on what they touched, and releases
    /// the locks.
    pub fn commit(
        mut self,
        log: Option<&dyn CommitLog>,
        level: Durability,
    ) -> Result<CommitOutcome, CommitError> {
        let mutations = self.muts.len();
        let log = log.filter(|_| level.is_logged() && !self.muts.is_empty());
        let Some(log) = log else {
            return Ok(CommitOutcome {
                lsn: 0,
                dependency_lsn: self.dependency_lsn,
                mutations,
            });
        };
        // One record in one stream keeps a multi-key commit all-or-nothing;
        // the stream of the first key spreads single-key load across streams.
        let stream = match self.muts.iter().find_map(|m| m.target_key()) {
            Some(k) => {
                crate::keyspace::shard_for_key(k, self.shard_count) % log.num_streams().max(1)
            }
            None => 0,
        };
        let muts = &self.muts;
        let result = log.append(stream, self.now_ms, level, &mut |buf| {
            codec::encode_mutations(muts, buf)
        });
        let (lsn, err) = match result {
            Ok(lsn) => (lsn, None),
            Err(e) => (UNLOGGED_FAILED_LSN, Some(e)),
        };
        self.stamp(lsn);
        if let Some(e) = err {
            return Err(CommitError::Log(e));
        }
        Ok(CommitOutcome {
            lsn,
            dependency_lsn: self.dependency_lsn.max(lsn),
            mutations,
        })
    }

    /// Records `lsn` on every entry and database the mutations touched, so
    /// later readers know what their replies depend on.
    fn stamp(&mut self, lsn: u64) {
        let muts = std::mem::take(&mut self.muts);
        // A write that failed to log is in memory but in no record: it must
        // not advance the shard's replay position (checkpoints rely on it).
        let applied = if lsn == UNLOGGED_FAILED_LSN { 0 } else { lsn };
        for m in &muts {
            match m {
                Mutation::Key { db, key, .. } => {
                    let slot = self.slot(key);
                    let shard = &mut self.guards[slot].1;
                    shard.applied_lsn = shard.applied_lsn.max(applied);
                    let d = &mut shard.dbs[*db as usize];
                    match d.get_mut(key, self.now_ms) {
                        Some(e) => e.lsn = lsn,
                        None => d.miss_lsn = d.miss_lsn.max(lsn),
                    }
                }
                Mutation::FlushDb { db } => {
                    for (_, g) in self.guards.iter_mut() {
                        g.applied_lsn = g.applied_lsn.max(applied);
                        g.dbs[*db as usize].miss_lsn = lsn;
                    }
                }
                Mutation::FlushAll => {
                    for (_, g) in self.guards.iter_mut() {
                        g.applied_lsn = g.applied_lsn.max(applied);
                        for d in &mut g.dbs {
                            d.miss_lsn = lsn;
                        }
                    }
                }
                Mutation::SwapDb { a, b } => {
                    for (_, g) in self.guards.iter_mut() {
                        g.applied_lsn = g.applied_lsn.max(applied);
                        g.dbs[*a as usize].floor_lsn = lsn;
                        g.dbs[*b as usize].floor_lsn = lsn;
                    }
                }
            }
        }
        self.muts = muts;
    }
}
