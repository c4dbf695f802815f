//! Shared helpers for the `checkpoint_*` integration tests: a store on the
//! fault-injecting file system, random transactions over every data type
//! (with absolute TTLs, committed through the real WAL as `full` and waited
//! for), and a dump of the whole keyspace to compare before a crash and
//! after recovery.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use durakv_engine::io::{FaultFs, FileSystem};
use durakv_engine::keyspace::Keyspace;
use durakv_engine::mutation::{ExpireMode, FunctionOp, KeyOp, Mutation, StreamOp};
use durakv_engine::store::{Store, StoreConfig};
use durakv_engine::stream::{Group, NodeLimits, PendingEntry, Stream, StreamId};
use durakv_engine::txn::CommitLog;
use durakv_engine::value::{ListValue, Str, Value};
use durakv_engine::zset::ZSet;
use durakv_engine::Durability;
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const DATABASES: usize = 4;
/// Database written only with `durability none` (and only before a checkpoint).
pub const NONE_DB: usize = 3;
pub const SEGMENT_SIZE_BYTES: u64 = 16 * 1024;
/// Keys per type per database: small, so keys are rewritten often.
pub const KEYS_PER_TYPE: u32 = 24;
pub const START_MS: u64 = 1_700_000_000_000;

pub fn checkpoint_dir() -> PathBuf {
    PathBuf::from("/faultfs/checkpoints")
}

/// A store config whose log and checkpoints live on the simulated disk
/// (the lock file needs a real directory).
pub fn config(lock_dir: &Path, shards: usize) -> StoreConfig {
    let mut c = StoreConfig::new(lock_dir);
    c.databases = DATABASES;
    c.shards = shards;
    c.wal_dirs = vec!["/faultfs/wal-a".into(), "/faultfs/wal-b".into()];
    c.wal_segment_size_bytes = SEGMENT_SIZE_BYTES;
    c.delayed_flush_ms = 5;
    c.checkpoint_dir = Some(checkpoint_dir());
    c.checkpoint_keep = 1;
    // Small blocks, so shards span several blocks even with little data.
    c.checkpoint_block_target_bytes = 1024;
    c.checkpoint_load_threads = 2;
    c
}

pub fn open(cfg: &StoreConfig, fs: &FaultFs) -> Store {
    let store = Store::open_with(cfg, Arc::new(fs.clone()) as Arc<dyn FileSystem>)
        .unwrap_or_else(|e| panic!("open failed: {e}"));
    // The database decides what is logged, as in the server.
    store.keyspace.set_logged_at_start(NONE_DB, false);
    store
}

/// Every entry (expired-but-present ones too): (db, key) -> (value, expiry);
/// function libraries as (`LIBRARIES`, name) -> (code, 0).
pub type Dump = BTreeMap<(usize, Vec<u8>), (Value, u64)>;
pub const LIBRARIES: usize = usize::MAX;

pub fn dump(ks: &Keyspace) -> Dump {
    let mut out = Dump::new();
    for (name, code) in ks.function_libraries() {
        out.insert((LIBRARIES, name.to_vec()), (Value::Str(code.into()), 0));
    }
    for i in 0..ks.num_shards() {
        let s = ks.shard(i).lock();
        for (db, d) in s.dbs.iter().enumerate() {
            for (k, e) in d.iter() {
                out.insert((db, k.to_vec()), (e.value.clone(), d.expire_of(k, e)));
            }
        }
    }
    out
}

/// The first difference between two dumps, for readable failures.
pub fn diff(want: &Dump, got: &Dump) -> Option<String> {
    for (k, v) in want {
        match got.get(k) {
            None => {
                return Some(format!(
                    "missing {:?}",
                    (k.0, String::from_utf8_lossy(&k.1))
                ))
            }
            Some(g) if g != v => {
                return Some(format!(
                    "{:?}: want {v:?}, got {g:?}",
                    (k.0, String::from_utf8_lossy(&k.1))
                ))
            }
            _ => {}
        }
    }
    got.keys()
        .find(|k| !want.contains_key(*k))
        .map(|k| format!("unexpected {:?}", (k.0, String::from_utf8_lossy(&k.1))))
}

fn b(s: String) -> Bytes {
    Bytes::from(s.into_bytes())
}

fn small(rng: &mut StdRng) -> Bytes {
    let n = rng.gen_range(0..24);
    Bytes::from(
        (0..n)
            .map(|_| rng.gen_range(b'a'..=b'z'))
            .collect::<Vec<u8>>(),
    )
}

fn expire(rng: &mut StdRng, now_ms: u64) -> ExpireMode {
    match rng.gen_range(0..10) {
        0..=5 => ExpireMode::Clear,
        6 => ExpireMode::Keep,
        // Some already due by the time later commands run.
        _ => ExpireMode::At(now_ms + rng.gen_range(1..20_000)),
    }
}

/// Stream IDs for random entries: increasing across every stream, so an
/// add never meets a larger last ID whatever happened to the key before.
fn next_stream_id() -> StreamId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    StreamId::new(NEXT.fetch_add(1, Ordering::Relaxed), 0)
}

/// Tiny nodes, so streams span several.
const STREAM_LIMITS: NodeLimits = NodeLimits {
    entries: 3,
    bytes: 0,
};

fn stream_fields(rng: &mut StdRng) -> Vec<(Bytes, Bytes)> {
    (0..rng.gen_range(1..3))
        .map(|i| (b(format!("f{i}")), small(rng)))
        .collect()
}

fn random_stream(rng: &mut StdRng, n: usize) -> Stream {
    let mut s = Stream::default();
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = next_stream_id();
        s.add(id, &stream_fields(rng), STREAM_LIMITS);
        ids.push(id);
    }
    if rng.gen_bool(0.5) {
        s.delete(ids[0]);
    }
    let mut g = Group::new(*ids.last().unwrap_or(&StreamId::MIN), rng.gen_range(-1..5));
    for id in ids.iter().skip(1).take(2) {
        g.pend(
            *id,
            PendingEntry {
                consumer: b(format!("c{}", rng.gen_range(0..2))),
                delivery_time: START_MS + rng.gen_range(0..1000),
                delivery_count: rng.gen_range(1..4),
            },
        );
    }
    s.groups.insert(b("g".to_string()), g);
    s
}

fn random_value(rng: &mut StdRng, ty: u8) -> Value {
    let n = rng.gen_range(1..6);
    match ty {
        5 => Value::Stream(Arc::new(random_stream(rng, n))),
        0 => Value::Str(small(rng).into()),
        1 => {
            let mut h = durakv_engine::value::HashValue::default();
            for _ in 0..n {
                h.insert(small(rng), small(rng));
            }
            Value::Hash(h)
        }
        2 => Value::List(Arc::new(
            (0..n).map(|_| Str::from(small(rng))).collect::<ListValue>(),
        )),
        3 => {
            let mut s = durakv_engine::value::SetValue::default();
            for _ in 0..n {
                s.insert(small(rng));
            }
            Value::Set(Arc::new(s))
        }
        _ => {
            let mut z = ZSet::default();
            for _ in 0..n {
                z.insert(small(rng), rng.gen_range(-100.0..100.0));
            }
            Value::ZSet(Arc::new(z))
        }
    }
}

/// A random mutation on one key. Key names carry their type (`s`, `h`, `l`,
/// `S`, `z`), so no mutation meets a value of another type.
pub fn random_key_mutation(rng: &mut StdRng, db: usize, now_ms: u64) -> Mutation {
    let ty: u8 = rng.gen_range(0..6);
    let prefix = ["s", "h", "l", "S", "z", "x"][ty as usize];
    let key = b(format!("{prefix}{}", rng.gen_range(0..KEYS_PER_TYPE)));
    let db = db as u32;
    let roll = rng.gen_range(0..100);
    let op = if roll < 6 {
        KeyOp::Del
    } else if roll < 12 {
        KeyOp::Expire {
            at_ms: if rng.gen_bool(0.3) {
                0
            } else {
                now_ms + rng.gen_range(1..20_000)
            },
        }
    } else if roll < 18 {
        KeyOp::Restore {
            value: random_value(rng, ty),
            expire_at_ms: if rng.gen_bool(0.5) {
                0
            } else {
                now_ms + rng.gen_range(1..20_000)
            },
        }
    } else {
        match ty {
            0 => match rng.gen_range(0..3) {
                0 => KeyOp::Append(small(rng)),
                1 => KeyOp::SetRange {
                    offset: rng.gen_range(0..8),
                    data: small(rng),
                },
                _ => KeyOp::SetString {
                    value: small(rng),
                    expire: expire(rng, now_ms),
                },
            },
            1 => {
                if rng.gen_bool(0.7) {
                    KeyOp::HSet(
                        (0..rng.gen_range(1..4))
                            .map(|_| (b(format!("f{}", rng.gen_range(0..8))), small(rng)))
                            .collect(),
                    )
                } else {
                    KeyOp::HDel(vec![b(format!("f{}", rng.gen_range(0..8)))])
                }
            }
            2 => match rng.gen_range(0..4) {
                0 | 1 => KeyOp::Push {
                    left: rng.gen_bool(0.5),
                    items: (0..rng.gen_range(1..4)).map(|_| small(rng)).collect(),
                },
                2 => KeyOp::Pop {
                    left: rng.gen_bool(0.5),
                    count: rng.gen_range(1..3),
                },
                _ => KeyOp::LTrim {
                    start: rng.gen_range(0..2),
                    stop: rng.gen_range(-3..6),
                },
            },
            3 => {
                if rng.gen_bool(0.7) {
                    KeyOp::SAdd(
                        (0..rng.gen_range(1..4))
                            .map(|_| b(format!("m{}", rng.gen_range(0..12))))
                            .collect(),
                    )
                } else {
                    KeyOp::SRem(vec![b(format!("m{}", rng.gen_range(0..12)))])
                }
            }
            5 => KeyOp::Stream(Box::new(match rng.gen_range(0..10) {
                0..=5 => StreamOp::Add {
                    id: next_stream_id(),
                    fields: stream_fields(rng),
                    limits: STREAM_LIMITS,
                },
                6 => StreamOp::Create,
                7 => StreamOp::Trim {
                    cutoff: next_stream_id(),
                },
                _ => StreamOp::Delete(vec![StreamId::new(
                    next_stream_id().ms.saturating_sub(rng.gen_range(1..20)),
                    0,
                )]),
            })),
            _ => {
                if rng.gen_bool(0.7) {
                    KeyOp::ZAdd(
                        (0..rng.gen_range(1..4))
                            .map(|_| {
                                (
                                    rng.gen_range(-50.0..50.0),
                                    b(format!("m{}", rng.gen_range(0..12))),
                                )
                            })
                            .collect(),
                    )
                } else {
                    KeyOp::ZRem(vec![b(format!("m{}", rng.gen_range(0..12)))])
                }
            }
        }
    };
    Mutation::key(db, key, op)
}

/// SET `key` `value` in database 0, without a TTL.
pub fn set(key: &str, value: &str) -> Mutation {
    Mutation::Key {
        db: 0,
        key: Bytes::from(key.to_owned()),
        op: KeyOp::SetString {
            value: Bytes::from(value.to_owned()),
            expire: ExpireMode::Clear,
        },
    }
}

/// Applies `muts` as one transaction and commits it at `level`. Returns the
/// record's LSN (0 when unlogged).
pub fn commit(store: &Store, muts: Vec<Mutation>, level: Durability, now_ms: u64) -> u64 {
    let whole = muts
        .iter()
        .any(|m| m.target_key().is_none() && !m.is_function());
    let mut txn = if whole {
        store.keyspace.lock_all_at(now_ms)
    } else {
        store.keyspace.lock_keys_at(
            muts.iter().filter_map(|m| m.target_key().map(|k| &k[..])),
            now_ms,
        )
    };
    for mut m in muts {
        // Writer threads generate mutations before they lock: an added
        // entry takes its ID here, under the key's lock, so it is above
        // every ID the key holds whichever thread generated first.
        if let Mutation::Key {
            op: KeyOp::Stream(op),
            ..
        } = &mut m
        {
            if let StreamOp::Add { id, .. } = &mut **op {
                *id = next_stream_id();
            }
        }
        txn.apply(m).expect("mutation fits the state");
    }
    let log: &dyn CommitLog = &*store.wal;
    txn.commit(log, level).expect("commit").lsn
}

/// One random logged transaction (1-3 key mutations in logged databases,
/// occasionally FLUSHDB / SWAPDB among them), committed `full` and waited
/// for. `allow_whole` enables the database-wide mutations.
pub fn random_logged_txn(store: &Store, rng: &mut StdRng, now_ms: u64, allow_whole: bool) -> u64 {
    let muts: Vec<Mutation> = if allow_whole && rng.gen_range(0..60) == 0 {
        if rng.gen_bool(0.5) {
            vec![Mutation::FlushDb {
                db: rng.gen_range(0..NONE_DB as u32),
            }]
        } else {
            vec![Mutation::SwapDb {
                a: rng.gen_range(0..NONE_DB as u32),
                b: rng.gen_range(0..NONE_DB as u32),
            }]
        }
    } else {
        (0..rng.gen_range(1..4))
            .map(|_| {
                let db = rng.gen_range(0..NONE_DB);
                random_key_mutation(rng, db, now_ms)
            })
            .collect()
    };
    let mut muts = muts;
    if rng.gen_range(0..20) == 0 {
        muts.push(random_function_op(rng));
    }
    let lsn = commit(store, muts, Durability::Full, now_ms);
    assert!(
        store
            .wal
            .wait_durable_timeout(lsn, Duration::from_secs(20))
            .expect("log healthy"),
        "write did not become durable"
    );
    lsn
}

/// A change to the function libraries (a few names, so loads replace and
/// deletes find something).
pub fn random_function_op(rng: &mut StdRng) -> Mutation {
    let name = b(format!("lib{}", rng.gen_range(0..4)));
    Mutation::Function(match rng.gen_range(0..10) {
        0 => FunctionOp::Flush,
        1..=3 => FunctionOp::Delete { name },
        _ => FunctionOp::Load {
            name,
            code: small(rng),
        },
    })
}

/// One unlogged write to the `none` database.
pub fn random_unlogged_txn(store: &Store, rng: &mut StdRng, now_ms: u64) {
    let m = random_key_mutation(rng, NONE_DB, now_ms);
    commit(store, vec![m], Durability::None, now_ms);
}

/// Seeds to run: `DURAKV_CKPT_SEEDS` (count) from `DURAKV_CKPT_SEED_BASE`.
pub fn seeds(default: u64) -> std::ops::Range<u64> {
    let n = std::env::var("DURAKV_CKPT_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    let base = std::env::var("DURAKV_CKPT_SEED_BASE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    base..base + n
}

/// Runs `f(seed)` for every seed, naming the failing one.
pub fn for_each_seed(default: u64, test: &str, f: impl Fn(u64) + std::panic::RefUnwindSafe) {
    for seed in seeds(default) {
        if std::panic::catch_unwind(|| f(seed)).is_err() {
            panic!("{test} failed for seed {seed} (rerun: DURAKV_CKPT_SEED_BASE={seed} DURAKV_CKPT_SEEDS=1 cargo test -p durakv-engine --test <this file> {test})");
        }
    }
}

/// How long [`rerun_as_child`]'s callers give a child: far beyond what it
/// needs, so a child still running then is stuck.
pub const CHILD_DEADLINE: Duration = Duration::from_secs(30);

/// Runs this test binary again as a child that runs only `test`, with the
/// environment variable `var` set to `dir`: for tests of what aborts the
/// process. Kills it if it still runs after `deadline` (None then). The
/// child's exit status and what it printed.
pub fn rerun_as_child(
    test: &str,
    var: &str,
    dir: &Path,
    deadline: Duration,
) -> Option<(std::process::ExitStatus, String)> {
    use std::process::{Command, Stdio};
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(var, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    // Read on a thread, so that neither a full pipe nor a hung child stops
    // the deadline.
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(deadline) {
        Ok(out) => {
            let out = out.unwrap();
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            Some((out.status, said))
        }
        Err(_) => {
            // SAFETY: kill has no memory effects; the child is not reaped
            // yet (its waiter still waits), so the pid is still its.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            None
        }
    }
}
