//! Background work run `hz` times a second: active expiry (sampling keys
//! with a TTL, as Redis does, so keys nobody reads still go away), memory
//! sampling, the readings behind INFO's instantaneous rates, the pub/sub
//! soft output limit of subscribers nothing is published to, and whether
//! the machine has idle CPU (for the log's batching, `crate::cpu_idle`).

use crate::state::Shared;
use crate::util::now_ms;
use durakv_engine::unwind::AbortOnUnwind;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Keys sampled per database per shard per cycle (Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP).
const SAMPLE_KEYS: usize = 20;
/// Repeat a shard's sampling while more than this share of samples expired.
const REPEAT_IF_EXPIRED_PERCENT: usize = 25;
/// Bound on repeats so one cycle cannot monopolise a shard lock.
const MAX_ROUNDS_PER_SHARD: usize = 16;

pub async fn run(shared: Arc<Shared>) {
    let mut released_at = std::time::Instant::now();
    let mut cpu = crate::cpu_idle::IdleMeter::default();
    loop {
        let hz = shared.config.read().hz.max(1);
        tokio::time::sleep(Duration::from_millis(1000 / hz)).await;
        crate::memory::sample();
        if let Some(scarce) = cpu.sample() {
            shared.store.wal.set_cpu_scarce(scarce);
        }
        if released_at.elapsed() >= Duration::from_secs(1) {
            crate::memory::release_freed();
            released_at = std::time::Instant::now();
        }
        shared.rates.record(&shared.stats);
        // A failed log never advances the durable LSN; wake connections
        // holding replies so they can turn them into errors.
        if shared.log_failure().is_some() {
            shared.durable_waiters.wake_all();
            shared.durable_tx.send_modify(|_| {});
        }
        shared.pubsub.enforce_soft_limit();
        crate::client_evict::enforce(&shared);
        // While CLIENT PAUSE holds writes the dataset stands still: no
        // evictions or expiries are written, as in Redis.
        if shared.pause.is_paused() {
            continue;
        }
        // Carries on an eviction a command left unfinished (tenacity).
        if shared.evict.maxmemory() != 0 {
            crate::evict::perform(&shared);
        }
        // A replica's keys expire when its primary's DEL arrives, as in
        // Redis (see `Txn::hold_expiry`).
        if !shared.debug.active_expire.load(Ordering::Relaxed) || shared.repl.is_replica() {
            continue;
        }
        let started = std::time::Instant::now();
        active_expire_cycle(&shared);
        shared.latency.add("expire-cycle", started.elapsed());
    }
}

/// One active-expiry pass over every shard. Returns keys removed.
pub fn active_expire_cycle(shared: &Shared) -> usize {
    let ks = &shared.store.keyspace;
    let mut rng = rand::thread_rng();
    let mut total = 0;
    let notify = shared.pubsub.keyspace_events();
    let tracking = shared.tracking.is_active();
    // Expired keys are taken for tracking's invalidations too.
    let take = if tracking {
        notify | crate::notify::class::EXPIRED
    } else {
        notify
    };
    for i in 0..ks.num_shards() {
        // A running script holds every shard: skip rather than stall an
        // I/O thread that SCRIPT KILL may need.
        let Some(mut shard) = ks.shard(i).try_lock_for(crate::scripting::BUSY_POLL) else {
            continue;
        };
        // The shard's clock, so a later command here never uses an earlier
        // time than this removal did (replay relies on it).
        let now = shard.tick(now_ms());
        // Removing a key touches several structures of its database; a
        // panic between them must not leave them disagreeing for readers
        // and the next checkpoint, as a write's would not (`Txn`).
        let removing = AbortOnUnwind("active expiry");
        for db in shard.dbs.iter_mut() {
            for _ in 0..MAX_ROUNDS_PER_SHARD {
                if db.volatile_len() == 0 {
                    break;
                }
                let (sampled, expired) = db.expire_sample(SAMPLE_KEYS, now, &mut rng);
                total += expired;
                if sampled == 0 || expired * 100 <= sampled * REPEAT_IF_EXPIRED_PERCENT {
                    break;
                }
            }
        }
        let gone = crate::notify::take_expired(take, &mut shard);
        // Replicas learn of the removals before the lock lets a write in.
        ks.feed_expired(&mut shard, now);
        drop(removing);
        drop(shard);
        if crate::notify::wants_expired(notify) {
            for (db, key) in &gone {
                crate::notify::announce(&shared.pubsub, notify, *db, key, "expired", 0);
            }
        }
        if tracking && !gone.is_empty() {
            let keys: Vec<_> = gone.into_iter().map(|(_, k)| (k, false)).collect();
            shared.tracking.invalidate(shared, None, &keys, false, &[]);
        }
    }
    total
}
