//! A snapshot taken while writers run on every shard (key writes, expiry,
//! SWAPDB and FLUSHDB among them, and writes to collections large enough
//! to be shared by the copy rather than copied) holds exactly the keyspace
//! at its point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod keyspace_support;

use bytes::Bytes;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::snapshot;
use durakv_engine::txn::CommitLog;
use durakv_engine::Durability;
use keyspace_support::{everything, Counter, State};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const DBS: usize = 3;

fn random_write(rng: &mut StdRng, now: u64) -> Mutation {
    let db = rng.gen_range(0..DBS) as u32;
    let r = rng.gen_range(0..10_000);
    if r < 20 {
        return Mutation::SwapDb {
            a: rng.gen_range(0..DBS) as u32,
            b: rng.gen_range(0..DBS) as u32,
        };
    }
    if r < 21 {
        return Mutation::FlushDb { db };
    }
    if r < 400 {
        return big_write(rng, db);
    }
    let key = Bytes::from(format!("key:{}", rng.gen_range(0..40_000)));
    let op = match r % 6 {
        0..=2 => KeyOp::SetString {
            value: Bytes::from(rng.gen::<u64>().to_string()),
            expire: if rng.gen_bool(0.1) {
                ExpireMode::At(now + rng.gen_range(1..30))
            } else {
                ExpireMode::Clear
            },
        },
        3 => KeyOp::Del,
        4 => KeyOp::HSet(vec![(
            Bytes::from(format!("f{}", rng.gen_range(0..4))),
            Bytes::from(rng.gen::<u32>().to_string()),
        )]),
        _ => KeyOp::Append(Bytes::from_static(b"+")),
    };
    Mutation::Key { db, key, op }
}

/// Keys holding collections large enough that a snapshot shares them
/// rather than copying them, and serializes them outside the shard lock.
const BIG_KEYS: usize = 8;
const BIG_ELEMENTS: usize = 1_500;

/// A write to one of the large collections (its type fixed by its name),
/// or now and then its removal.
fn big_write(rng: &mut StdRng, db: u32) -> Mutation {
    let n = rng.gen_range(0..BIG_KEYS);
    let key = Bytes::from(format!("big:{n}"));
    let item = Bytes::from(rng.gen_range(0..2 * BIG_ELEMENTS).to_string());
    let op = if rng.gen_range(0..200) == 0 {
        KeyOp::Del
    } else {
        big_op(n, item, rng.gen())
    };
    Mutation::Key { db, key, op }
}

fn big_op(n: usize, item: Bytes, score: u32) -> KeyOp {
    match n % 4 {
        0 => KeyOp::Push {
            left: score.is_multiple_of(2),
            items: vec![item],
        },
        1 => KeyOp::SAdd(vec![item]),
        2 => KeyOp::ZAdd(vec![(f64::from(score), item)]),
        _ => KeyOp::HSet(vec![(item, Bytes::from(score.to_string()))]),
    }
}

/// Fills every large collection in every database.
fn fill_big(ks: &Keyspace, log: &dyn CommitLog) {
    for db in 0..DBS as u32 {
        for n in 0..BIG_KEYS {
            let key = Bytes::from(format!("big:{n}"));
            let mut txn = ks.lock_keys([&key[..]]);
            for i in 0..BIG_ELEMENTS {
                let op = big_op(n, Bytes::from(i.to_string()), i as u32);
                txn.apply(Mutation::Key {
                    db,
                    key: key.clone(),
                    op,
                })
                .expect("apply");
            }
            txn.commit(log, Durability::Delayed).expect("commit");
        }
    }
}

fn write(ks: &Keyspace, log: &dyn CommitLog, rng: &mut StdRng) {
    let m = random_write(rng, durakv_engine::keyspace::wall_clock_ms());
    let mut txn = match &m {
        Mutation::Key { key, .. } => ks.lock_keys([&key[..]]),
        _ => ks.lock_all(),
    };
    // A wrong type (HSET on a string) is refused, as it is live.
    if txn.apply(m).is_ok() {
        txn.commit(log, Durability::Delayed).expect("commit");
    }
}

#[test]
fn a_snapshot_is_the_keyspace_at_its_point_while_writers_run() {
    let ks = Arc::new(Keyspace::new(DBS, 16));
    let log = Arc::new(Counter(AtomicU64::new(0)));
    let mut rng = StdRng::seed_from_u64(7);
    fill_big(&ks, &*log);
    for _ in 0..60_000 {
        write(&ks, &*log, &mut rng);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let (ks, log, stop, writes) = (ks.clone(), log.clone(), stop.clone(), writes.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t);
                while !stop.load(Ordering::Relaxed) {
                    write(&ks, &*log, &mut rng);
                    writes.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for round in 0..6 {
        let before = writes.load(Ordering::Relaxed);
        let (expected, dbs) = snapshot::take(&ks, |txn| {
            let now = txn.now_ms;
            let mut s = State::new();
            for shard in txn.shards_mut() {
                for (db, d) in shard.dbs.iter().enumerate() {
                    for (k, e) in d.iter().filter(|(k, e)| !d.is_expired(k, e, now)) {
                        s.insert((db, k.to_vec()), (e.value.clone(), d.expire_of(k, e)));
                    }
                }
            }
            s
        });
        let during = writes.load(Ordering::Relaxed) - before;
        let mut got = State::new();
        for (db, keys) in dbs.into_iter().enumerate() {
            for k in keys {
                let dup = got.insert((db, k.key.to_vec()), (k.value, k.expire_at_ms));
                assert!(dup.is_none(), "round {round}: {:?} copied twice", k.key);
            }
        }
        assert!(!expected.is_empty());
        assert_eq!(got.len(), expected.len(), "round {round}");
        assert!(
            got == expected,
            "round {round}: the copy differs from its point"
        );
        eprintln!(
            "round {round}: {} keys, {during} writes during the copy",
            got.len()
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
}

/// Mostly appends: replay applies a write again on a copy that already
/// held it, and an append shows it (a SET would not).
fn append_write(ks: &Keyspace, log: &dyn CommitLog, rng: &mut StdRng) {
    let db = rng.gen_range(0..DBS) as u32;
    let key = Bytes::from(format!("a:{}", rng.gen_range(0..40_000)));
    let m = match rng.gen_range(0..10_000) {
        0..=9 => Mutation::SwapDb {
            a: rng.gen_range(0..DBS) as u32,
            b: rng.gen_range(0..DBS) as u32,
        },
        10 => Mutation::FlushDb { db },
        11..=500 => Mutation::Key {
            db,
            key,
            op: KeyOp::Del,
        },
        // Pushes show a replay applied twice as an appended string does.
        501..=900 => Mutation::Key {
            db,
            key: Bytes::from(format!("big:{}", rng.gen_range(0..BIG_KEYS / 4) * 4)),
            op: KeyOp::Push {
                left: false,
                items: vec![Bytes::from(rng.gen::<u16>().to_string())],
            },
        },
        _ => Mutation::Key {
            db,
            key,
            op: KeyOp::Append(Bytes::from(rng.gen::<u8>().to_string())),
        },
    };
    let mut txn = match &m {
        Mutation::Key { key, .. } => ks.lock_keys([&key[..]]),
        _ => ks.lock_all(),
    };
    txn.apply(m).expect("apply");
    txn.commit(log, Durability::Delayed).expect("commit");
}

/// Checkpoints taken while writers run (appends, pushes to lists large
/// enough to be serialized outside the shard lock, SWAPDB and FLUSHDB)
/// recover exactly the state the writers left, from the newest checkpoint
/// and the log after it.
#[test]
fn checkpoints_under_writes_recover_the_final_state() {
    use durakv_engine::store::{Store, StoreConfig};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.databases = DBS;
    // Two large shards: most writes land in the one being copied.
    cfg.shards = 2;
    let store = Store::open(&cfg).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    fill_big(&store.keyspace, &*store.wal);
    for _ in 0..100_000 {
        append_write(&store.keyspace, &*store.wal, &mut rng);
    }
    let stop = AtomicBool::new(false);
    let writes = AtomicU64::new(0);
    let during: Vec<u64> = std::thread::scope(|s| {
        for t in 0..3u64 {
            let (store, stop, writes) = (&store, &stop, &writes);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(200 + t);
                while !stop.load(Ordering::Relaxed) {
                    append_write(&store.keyspace, &*store.wal, &mut rng);
                    writes.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let during = (0..6)
            .map(|_| {
                let before = writes.load(Ordering::Relaxed);
                store.checkpoint().unwrap();
                writes.load(Ordering::Relaxed) - before
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        during
    });
    eprintln!("writes during each checkpoint: {during:?}");
    // On a loaded machine a quick checkpoint may run while no writer is
    // scheduled; most must overlap writes for the test to mean anything.
    assert!(
        during.iter().filter(|&&n| n > 0).count() >= during.len() / 2,
        "too few checkpoints overlapped writes: {during:?}"
    );
    let last = store.wal.last_lsn();
    store.wal.request_sync();
    store.wal.wait_durable(last).unwrap();
    let before = everything(&store.keyspace);
    drop(store);
    let store = Store::open(&cfg).unwrap();
    assert!(store.checkpoint_recovery.loaded.is_some());
    let after = everything(&store.keyspace);
    assert_eq!(before.len(), after.len());
    assert!(before == after, "the recovered state differs");
}
