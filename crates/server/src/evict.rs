//! `maxmemory`: before a command that may grow the data set runs while more
//! memory is in use than allowed, keys are evicted by `maxmemory-policy`
//! until usage is under the limit; if nothing can be evicted the command
//! gets -OOM. Like Redis, victims are chosen approximately: each round
//! samples `maxmemory-samples` keys from every database of a few shards
//! into a small pool of the best candidates seen so far, and evicts the
//! best of the pool.
//!
//! An eviction is a DEL committed like any other (logged in a logged
//! database, so a restart does not bring the key back), announced as the
//! `evicted` keyspace event, invalidated for tracking clients and counted
//! in INFO's `evicted_keys`.

use crate::state::Shared;
use bytes::Bytes;
use durakv_engine::db::Entry;
use durakv_engine::mutation::{KeyOp, Mutation};
use parking_lot::Mutex;
use rand::Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

const POLICIES: [(Policy, &str); 8] = [
    (Policy::VolatileLru, "volatile-lru"),
    (Policy::VolatileLfu, "volatile-lfu"),
    (Policy::VolatileRandom, "volatile-random"),
    (Policy::VolatileTtl, "volatile-ttl"),
    (Policy::AllKeysLru, "allkeys-lru"),
    (Policy::AllKeysLfu, "allkeys-lfu"),
    (Policy::AllKeysRandom, "allkeys-random"),
    (Policy::NoEviction, "noeviction"),
];

impl Policy {
    pub fn parse(v: &str) -> Result<Policy, String> {
        let l = v.to_ascii_lowercase();
        POLICIES
            .iter()
            .find(|(_, n)| *n == l)
            .map(|(p, _)| *p)
            .ok_or_else(|| {
                let names: Vec<&str> = POLICIES.iter().map(|(_, n)| *n).collect();
                format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                )
            })
    }

    pub fn name(self) -> &'static str {
        POLICIES
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("noeviction", |(_, n)| n)
    }

    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    /// Whether values are scored by their own access time or frequency:
    /// Redis then gives each its own integer object instead of a shared
    /// one (OBJECT REFCOUNT 1 rather than the shared count).
    pub fn scores_each_value(self) -> bool {
        self.is_lfu() || matches!(self, Policy::AllKeysLru | Policy::VolatileLru)
    }

    fn volatile_only(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn is_random(self) -> bool {
        matches!(self, Policy::AllKeysRandom | Policy::VolatileRandom)
    }

    fn from_index(i: u64) -> Policy {
        POLICIES
            .get(i as usize)
            .map_or(Policy::NoEviction, |(p, _)| *p)
    }

    fn index(self) -> u64 {
        POLICIES.iter().position(|(p, _)| *p == self).unwrap_or(7) as u64
    }
}

/// Candidates kept between rounds (Redis's EVPOOL_SIZE).
const POOL_SIZE: usize = 16;
/// Shards sampled into the pool per evicted key.
const SHARDS_PER_ROUND: usize = 4;
/// Evictions between looks at the clock.
const CLOCK_EVERY: usize = 16;

struct Candidate {
    /// Higher is evicted first: idle seconds, 255 - LFU counter, or how
    /// much nearer than the farthest possible its expiry is.
    score: u64,
    db: usize,
    key: Bytes,
}

/// The settings in force (mirrored from the configuration so a command
/// pays one relaxed load when `maxmemory` is 0) and the eviction pool.
#[derive(Default)]
pub struct Eviction {
    maxmemory: AtomicU64,
    policy: AtomicU64,
    samples: AtomicU64,
    tenacity: AtomicU64,
    /// `maxmemory-clients` in bytes, 0 for none (`crate::client_evict`).
    clients_limit: AtomicU64,
    /// `replica-ignore-maxmemory`: while this server is a replica, its
    /// primary's DELs (evictions included) decide what goes, as in Redis;
    /// evicting on its own would make it hold other data than its primary.
    replica_ignores: AtomicBool,
    /// Next shard to sample.
    cursor: AtomicUsize,
    /// The best candidates seen; its lock also makes evictions one at a
    /// time, so concurrent writers do not overshoot together.
    pool: Mutex<Vec<Candidate>>,
}

/// How an attempt to get under the limit ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Under the limit (or no limit).
    Ok,
    /// Still over, but the time allowed ran out with keys left to evict:
    /// the command goes ahead and the background task carries on.
    Running,
    /// Over the limit with nothing (more) to evict.
    Fail,
}

impl Eviction {
    /// The limit in bytes, 0 for none: the one check every command makes.
    #[inline]
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    fn policy(&self) -> Policy {
        Policy::from_index(self.policy.load(Ordering::Relaxed))
    }

    /// `maxmemory-clients` in bytes, 0 for none.
    pub fn clients_limit(&self) -> u64 {
        self.clients_limit.load(Ordering::Relaxed)
    }
}

/// Installs the configured settings (at start and after CONFIG SET).
pub fn apply_config(shared: &Shared) {
    let c = shared.config.read();
    let e = &shared.evict;
    e.maxmemory.store(c.maxmemory_bytes, Ordering::Relaxed);
    let clients = c.get("maxmemory-clients").unwrap_or_default();
    e.clients_limit.store(
        crate::client_evict::limit_bytes(&clients, c.maxmemory_bytes),
        Ordering::Relaxed,
    );
    e.samples.store(c.maxmemory_samples, Ordering::Relaxed);
    let ignores = c.get("replica-ignore-maxmemory").is_none_or(|v| v == "yes");
    e.replica_ignores.store(ignores, Ordering::Relaxed);
    e.tenacity
        .store(c.maxmemory_eviction_tenacity, Ordering::Relaxed);
    if e.policy.swap(c.maxmemory_policy.index(), Ordering::Relaxed) != c.maxmemory_policy.index() {
        // Scores of another policy mean nothing to this one.
        e.pool.lock().clear();
    }
    durakv_engine::lfu::configure(
        c.maxmemory_policy.is_lfu(),
        c.lfu_log_factor as u32,
        c.lfu_decay_time as u32,
    );
    drop(c);
    // A lower limit takes effect before CONFIG SET answers, as in Redis.
    crate::client_evict::enforce(shared);
}

/// Whether `maxmemory` is set aside: a replica with
/// `replica-ignore-maxmemory yes` (the default).
fn ignored_on_replica(shared: &Shared) -> bool {
    shared.evict.replica_ignores.load(Ordering::Relaxed) && shared.repl.is_replica()
}

/// True when more memory is in use than `maxmemory` allows.
pub fn over_limit(shared: &Shared) -> bool {
    let max = shared.evict.maxmemory();
    max != 0 && counted_memory_bytes() > max
}

/// `used_memory` as `maxmemory` counts it: without the invalidations
/// queued for tracking clients (`crate::pubsub::tracking_queued_bytes`),
/// the replication stream held for lagging replicas
/// (`crate::repl::backlog::held_past_backlog_bytes`) and what a burst of
/// writes grew the log's batch buffers by
/// (`durakv_engine::wal::buffered_bytes`, as Redis leaves out its AOF
/// buffer).
pub fn counted_memory_bytes() -> u64 {
    crate::memory::used_memory_bytes().saturating_sub(not_counted_bytes())
}

/// INFO's `mem_not_counted_for_evict`.
pub fn not_counted_bytes() -> u64 {
    (crate::pubsub::tracking_queued_bytes()
        + crate::repl::backlog::held_past_backlog_bytes()
        + durakv_engine::wal::buffered_bytes()) as u64
}

/// Redis's eviction time limit for a tenacity: 50 µs growing 15% per
/// step, unbounded at 100.
fn time_limit(tenacity: u64) -> Option<Duration> {
    if tenacity >= 100 {
        return None;
    }
    let us = 50.0 * 1.15f64.powi(tenacity.min(99) as i32);
    Some(Duration::from_micros(us as u64))
}

/// Evicts until under the limit. Must be called without shard locks held.
pub fn perform(shared: &Shared) -> Outcome {
    let max = shared.evict.maxmemory();
    if max == 0 || ignored_on_replica(shared) {
        return Outcome::Ok;
    }
    let counted = counted_memory_bytes();
    if counted <= max {
        return Outcome::Ok;
    }
    // Clients over `maxmemory-clients` go before any key does; what they
    // held is freed as their connections close, so it counts as freed now.
    let released = crate::client_evict::enforce(shared);
    if released > 0 && counted_memory_bytes().saturating_sub(released) <= max {
        return Outcome::Ok;
    }
    let policy = shared.evict.policy();
    if policy == Policy::NoEviction {
        return Outcome::Fail;
    }
    let mut pool = shared.evict.pool.lock();
    let limit = time_limit(shared.evict.tenacity.load(Ordering::Relaxed));
    let started = Instant::now();
    let mut evicted = 0usize;
    // What the pass is to free, and what the keys it evicted held. An
    // eviction also queues what tracking clients and subscribers are told
    // (an invalidation per reader of the key, an `evicted` event), which
    // takes memory until their connections write it: measured by
    // `used_memory` alone, evicting keys read by many clients would seem
    // to free nothing, and the pass would go on until no key was left.
    // Redis likewise counts only what the deletions themselves free.
    let to_free = counted_memory_bytes().saturating_sub(max);
    let mut freed = 0u64;
    let out = loop {
        if counted_memory_bytes() <= max || freed >= to_free {
            break Outcome::Ok;
        }
        let Some(bytes) = evict_one(shared, policy, &mut pool) else {
            break Outcome::Fail;
        };
        freed += bytes as u64;
        evicted += 1;
        if evicted.is_multiple_of(CLOCK_EVERY) && limit.is_some_and(|l| started.elapsed() > l) {
            break Outcome::Running;
        }
    };
    drop(pool);
    if evicted > 0 {
        shared.stats.evicted_keys.add(evicted as u64);
    }
    out
}

/// Picks and evicts one key; returns what that surely freed. None when
/// no key can be evicted.
fn evict_one(shared: &Shared, policy: Policy, pool: &mut Vec<Candidate>) -> Option<usize> {
    let samples = shared.evict.samples.load(Ordering::Relaxed).max(1) as usize;
    let mut rng = rand::thread_rng();
    // A few tries: candidates in the pool may have gone since they were seen.
    for _ in 0..POOL_SIZE + 1 {
        if policy.is_random() {
            pool.clear();
        }
        if pool.is_empty() {
            let per_shard = if policy.is_random() { 1 } else { samples };
            if !refill(shared, policy, per_shard, pool, &mut rng) {
                return None;
            }
        } else if !policy.is_random() {
            refill(shared, policy, samples, pool, &mut rng);
        }
        let c = pool.pop()?;
        if let Some(bytes) = delete(shared, policy, c.db, &c.key) {
            return Some(bytes);
        }
    }
    None
}

/// Samples the next shards with keys into the pool. False when a whole
/// lap of the shards found nothing to sample.
fn refill(
    shared: &Shared,
    policy: Policy,
    samples: usize,
    pool: &mut Vec<Candidate>,
    rng: &mut impl Rng,
) -> bool {
    let ks = &shared.store.keyspace;
    let n = ks.num_shards();
    let rounds = if policy.is_random() {
        1
    } else {
        SHARDS_PER_ROUND
    };
    let start = if policy.is_random() {
        rng.gen_range(0..n.max(1))
    } else {
        shared.evict.cursor.fetch_add(rounds, Ordering::Relaxed)
    };
    let mut found = 0;
    let now_ms = crate::util::now_ms();
    let now_s = (now_ms / 1000) as u32;
    for step in 0..n {
        if found >= rounds {
            break;
        }
        let i = (start + step) % n;
        // A running script holds every shard: skip it rather than wait.
        let Some(shard) = ks.shard(i).try_lock_for(crate::scripting::BUSY_POLL) else {
            continue;
        };
        let mut any = false;
        for (db, d) in shard.dbs.iter().enumerate() {
            d.sample(
                policy.volatile_only(),
                samples,
                rng,
                |k, e, expire_at_ms| {
                    any = true;
                    offer(pool, score(policy, e, expire_at_ms, now_s), db, k);
                },
            );
        }
        if any {
            found += 1;
        }
    }
    found > 0
}

fn score(policy: Policy, e: &Entry, expire_at_ms: u64, now_s: u32) -> u64 {
    match policy {
        Policy::AllKeysLfu | Policy::VolatileLfu => {
            255 - u64::from(durakv_engine::lfu::decayed(e.access(), now_s))
        }
        Policy::VolatileTtl => u64::MAX - expire_at_ms,
        Policy::AllKeysLru | Policy::VolatileLru => u64::from(e.access().idle_secs(now_s)),
        _ => 0,
    }
}

/// Keeps the pool sorted by score, best last, with each key once.
fn offer(pool: &mut Vec<Candidate>, score: u64, db: usize, key: &[u8]) {
    if pool.len() >= POOL_SIZE && pool.first().is_some_and(|c| c.score >= score) {
        return;
    }
    if pool.iter().any(|c| c.db == db && c.key[..] == *key) {
        return;
    }
    let c = Candidate {
        score,
        db,
        key: Bytes::copy_from_slice(key),
    };
    let at = pool.partition_point(|x| x.score <= score);
    pool.insert(at, c);
    if pool.len() > POOL_SIZE {
        pool.remove(0);
    }
}

/// What deleting a key surely frees: its value's heap and its name's when
/// too long to be inline. Not its slot in the map, which stays allocated
/// until the map shrinks, so a pass never counts more than it freed.
fn heap_bytes(key: &[u8], value: &durakv_engine::value::Value) -> usize {
    let empty = durakv_engine::value::Value::Str(Default::default());
    durakv_engine::db::key_memory_bytes(key, value)
        .saturating_sub(durakv_engine::db::key_memory_bytes(b"", &empty))
}

/// Deletes `key` of `db` as DEL would, if it is still there (and, for a
/// volatile policy, still has a TTL); returns what that surely freed
/// ([`heap_bytes`]), None if it was not deleted.
fn delete(shared: &Shared, policy: Policy, db: usize, key: &Bytes) -> Option<usize> {
    let ks = &shared.store.keyspace;
    let mut txn =
        ks.try_lock_keys_for(std::iter::once(&key[..]), crate::scripting::BUSY_POLL, None)?;
    let bytes = match txn.get_untouched(db, key) {
        Some(e) if !policy.volatile_only() || e.has_ttl() => heap_bytes(key, &e.value),
        _ => return None,
    };
    txn.apply(Mutation::key(db as u32, key.clone(), KeyOp::Del))
        .ok()?;
    let lsn = match crate::dispatch::commit(shared, None, db, &mut txn) {
        Ok(out) => out.lsn,
        // In memory the key is gone; the failed log refuses writes anyway.
        Err(_) => 0,
    };
    let notify = shared.pubsub.keyspace_events();
    if notify & crate::notify::class::EVICTED != 0 {
        crate::notify::announce(&shared.pubsub, notify, db, key, "evicted", lsn);
    }
    if shared.tracking.is_active() {
        shared
            .tracking
            .invalidate(shared, None, &[(key.clone(), false)], false, &[]);
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_by_name_and_index() {
        for (p, n) in POLICIES {
            assert_eq!(Policy::parse(&n.to_ascii_uppercase()), Ok(p));
            assert_eq!(p.name(), n);
            assert_eq!(Policy::from_index(p.index()), p);
        }
        assert!(Policy::parse("lru").is_err());
    }

    #[test]
    fn the_pool_keeps_the_best_scores_once_each() {
        let mut pool = Vec::new();
        for s in 0..40u64 {
            offer(&mut pool, s % 20, 0, &Bytes::from(format!("k{s}")));
        }
        offer(&mut pool, 19, 0, &Bytes::from_static(b"k19"));
        assert_eq!(pool.len(), POOL_SIZE);
        assert!(pool.windows(2).all(|w| w[0].score <= w[1].score));
        assert_eq!(pool.last().map(|c| c.score), Some(19));
        assert_eq!(pool.iter().filter(|c| c.key == "k19").count(), 1);
    }

    #[test]
    fn tenacity_bounds_the_time_spent() {
        assert_eq!(time_limit(0), Some(Duration::from_micros(50)));
        assert!(time_limit(10).is_some_and(|d| d.as_micros() > 190 && d.as_micros() < 210));
        assert_eq!(time_limit(100), None);
    }
}
