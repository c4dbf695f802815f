//! The replication feed carries every expiry: a replica that never expires
//! a key of its own accord (as a Redis replica does not), applying the
//! feed's mutations and a DEL for each expired key in the order the feed
//! got them, ends holding exactly what the primary holds, key for key,
//! expired-but-present keys included. Writers on several threads make
//! keys with TTLs, overwrite them after they expire, read them (which
//! removes them), swap and flush databases, inside multi-mutation
//! transactions too, while an active-expiry pass samples the shards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod keyspace_support;

use bytes::Bytes;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::replication::{ExpiredKey, ReplicationFeed};
use durakv_engine::Durability;
use keyspace_support::{everything, Counter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const DBS: usize = 3;
const KEYS: usize = 200;

/// The feed as a replica sees it: one ordered list of changes, and how
/// many of them are expiries.
#[derive(Default)]
struct Recorder {
    changes: Mutex<Vec<Mutation>>,
    expiries: AtomicU64,
}

struct Feed(Arc<Recorder>);

impl ReplicationFeed for Feed {
    fn committed(&self, _lsn: u64, _time_ms: u64, muts: &[Mutation], expired: &[ExpiredKey]) {
        self.0
            .expiries
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        let del = |e: &ExpiredKey| Mutation::Key {
            db: e.db,
            key: e.key.clone(),
            op: KeyOp::Del,
        };
        let mut out = self.0.changes.lock().unwrap();
        let mut next = expired.iter().peekable();
        for (i, m) in muts.iter().enumerate() {
            while let Some(e) = next.next_if(|e| e.before <= i) {
                out.push(del(e));
            }
            out.push(m.clone());
        }
        out.extend(next.map(del));
    }
}

fn key(rng: &mut StdRng) -> Bytes {
    Bytes::from(format!("k{}", rng.gen_range(0..KEYS)))
}

/// A write that builds on what is there (so a missed DEL shows), or makes
/// a key expire soon.
fn key_op(rng: &mut StdRng, now: u64) -> KeyOp {
    match rng.gen_range(0..5) {
        0 => KeyOp::SetString {
            value: Bytes::from(rng.gen::<u32>().to_string()),
            expire: ExpireMode::At(now + rng.gen_range(1..20)),
        },
        1 => KeyOp::Append(Bytes::from_static(b"+")),
        2 => KeyOp::Expire {
            at_ms: now + rng.gen_range(1..20),
        },
        3 => KeyOp::Del,
        _ => KeyOp::SetString {
            value: Bytes::from_static(b"v"),
            expire: ExpireMode::Keep,
        },
    }
}

fn step(ks: &Keyspace, log: &Counter, clock: &AtomicU64, rng: &mut StdRng) {
    let now = clock.fetch_add(1, Ordering::Relaxed);
    let db = rng.gen_range(0..DBS);
    match rng.gen_range(0..100) {
        // Reads remove what they find expired.
        0..=29 => {
            let k = key(rng);
            let mut txn = ks.lock_keys_at([&k[..]], now);
            let _ = txn.get(db, &k);
        }
        // A transaction over every shard: a read, a SWAPDB and a write,
        // in a random order, so expiries fall on both sides of the swap.
        30..=37 => {
            let mut txn = ks.lock_all_at(now);
            let (a, b) = (rng.gen_range(0..DBS), rng.gen_range(0..DBS));
            for _ in 0..3 {
                match rng.gen_range(0..3) {
                    0 => {
                        let (k, db) = (key(rng), if rng.gen() { a } else { b });
                        let _ = txn.get(db, &k);
                    }
                    1 => {
                        let m = Mutation::SwapDb {
                            a: a as u32,
                            b: b as u32,
                        };
                        txn.apply(m).unwrap();
                    }
                    _ => {
                        let (k, op) = (key(rng), key_op(rng, now));
                        let _ = txn.apply(Mutation::key(db as u32, k, op));
                    }
                }
            }
            txn.commit(log, Durability::Delayed).unwrap();
        }
        38 => {
            let mut txn = ks.lock_all_at(now);
            txn.apply(Mutation::FlushDb { db: db as u32 }).unwrap();
            txn.commit(log, Durability::Delayed).unwrap();
        }
        // Active expiry: one shard sampled, its removals handed over.
        39..=48 => {
            let i = rng.gen_range(0..ks.num_shards());
            let mut shard = ks.shard(i).lock();
            let now = shard.tick(now);
            for d in shard.dbs.iter_mut() {
                d.expire_sample(10, now, rng);
            }
            ks.feed_expired(&mut shard, now);
        }
        _ => {
            let k = key(rng);
            let mut txn = ks.lock_keys_at([&k[..]], now);
            let op = key_op(rng, now);
            // A key op on a missing key (EXPIRE) is refused, as live.
            if txn.apply(Mutation::key(db as u32, k, op)).is_ok() {
                txn.commit(log, Durability::Delayed).unwrap();
            }
        }
    }
}

#[test]
fn a_replica_applying_the_feed_holds_what_the_primary_holds() {
    let seeds: u64 = std::env::var("DURAKV_FEED_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let mut held = 0;
    for seed in 0..seeds {
        let primary = Keyspace::new(DBS, 8);
        let recorder = Arc::new(Recorder::default());
        primary.set_replication_feed(Box::new(Feed(recorder.clone())));
        primary.start_feeding();
        let log = Counter(AtomicU64::new(0));
        let clock = AtomicU64::new(1_000);
        std::thread::scope(|s| {
            for t in 0..3 {
                let (primary, log, clock) = (&primary, &log, &clock);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed * 100 + t);
                    for _ in 0..20_000 {
                        step(primary, log, clock, &mut rng);
                    }
                });
            }
        });
        let fed = std::mem::take(&mut *recorder.changes.lock().unwrap());
        let expired = recorder.expiries.load(Ordering::Relaxed);
        // Time 0 on the replica: no key ever expires there.
        let replica = Keyspace::new(DBS, 8);
        for m in fed {
            let mut txn = replica.lock_all_at(0);
            txn.apply(m).unwrap();
            txn.commit(&log, Durability::Delayed).unwrap();
        }
        let want = everything(&primary);
        let got = everything(&replica);
        held += want.len();
        assert!(expired > 100, "seed {seed}: expiries happened");
        if got != want {
            let keys: std::collections::BTreeSet<_> = want.keys().chain(got.keys()).collect();
            let diff: Vec<String> = keys
                .into_iter()
                .filter(|k| want.get(*k) != got.get(*k))
                .take(5)
                .map(|k| format!("{k:?}: primary {:?}, replica {:?}", want.get(k), got.get(k)))
                .collect();
            panic!("seed {seed}: the replica differs: {diff:#?}");
        }
    }
    assert!(held > 0, "keys were left to compare");
}

/// The feed of one transaction that reads an expired key, swaps databases
/// and then reads another: each removal sits on its side of the SWAPDB,
/// numbered as its database was then.
#[test]
fn removals_keep_their_place_around_a_swapdb() {
    let primary = Keyspace::new(2, 4);
    let recorder = Arc::new(Recorder::default());
    primary.set_replication_feed(Box::new(Feed(recorder.clone())));
    primary.start_feeding();
    let log = Counter(AtomicU64::new(0));
    let set = |db: u32, key: &'static str, expire| {
        let mut txn = primary.lock_all_at(5);
        let op = KeyOp::SetString {
            value: Bytes::from_static(b"v"),
            expire,
        };
        txn.apply(Mutation::key(db, Bytes::from_static(key.as_bytes()), op))
            .unwrap();
        txn.commit(&log, Durability::Delayed).unwrap();
    };
    set(0, "k", ExpireMode::At(10));
    set(0, "j", ExpireMode::At(10));
    set(1, "k", ExpireMode::Clear);
    recorder.changes.lock().unwrap().clear();

    let mut txn = primary.lock_all_at(20);
    assert!(txn.get(0, b"k").is_none());
    txn.apply(Mutation::SwapDb { a: 0, b: 1 }).unwrap();
    assert!(txn.get(1, b"j").is_none());
    txn.commit(&log, Durability::Delayed).unwrap();

    let del =
        |db, key: &'static str| Mutation::key(db, Bytes::from_static(key.as_bytes()), KeyOp::Del);
    assert_eq!(
        *recorder.changes.lock().unwrap(),
        vec![del(0, "k"), Mutation::SwapDb { a: 0, b: 1 }, del(1, "j")]
    );
}
