//! Databases and transactions, durakv against a real Redis: two clients
//! per server send the same random sequence over databases 0, 1, 2 and
//! 15 (16 and others for the errors) and a handful of shared keys, and
//! every reply must be the same frame (odd seeds speak RESP3). The mix is
//! what `differential.rs` leaves out: SELECT, MOVE, SWAPDB, COPY ... DB,
//! FLUSHDB, FLUSHALL, RANDOMKEY, WATCH and UNWATCH with MULTI/EXEC on
//! either client (so one client's writes, in any database, by SWAPDB,
//! FLUSHDB, MOVE, RENAME or a write that changes nothing, do or do not
//! abort the other's transaction), EXPIRE's NX/XX/GT/LT and absolute
//! times, SET and GETEX with every expiry option, OBJECT FREQ, IDLETIME
//! and REFCOUNT, SORT_RO, and the blocking commands on their paths that
//! do not wait, all among data commands of every type. Every
//! `DURAKV_DIFF_DBS_CHECK_EVERY` calls (40) every key of every database
//! is compared, with its expiry time.
//!
//! Now and then a watched key expires: set with a 40 ms expiry, watched,
//! and the transaction run 50 ms later (with or without the key read or
//! written by the other client in between), or set with a 5 ms expiry
//! and watched once expired (Redis then counts its reclaiming as no
//! change). In every fourth seed both servers evict by LFU, which makes
//! OBJECT FREQ answer and IDLETIME refuse. In two seeds of three each
//! key's data commands keep mostly to two types, so that fewer of them
//! end in WRONGTYPE.
//!
//! What is compared loosely, and why:
//! - TTL, PTTL, EXPIRETIME and PEXPIRETIME within 2 s: an expiry relative
//!   to now lands on each server's clock;
//! - OBJECT IDLETIME and OBJECT FREQ as "an integer": idle times run on
//!   each server's clock, Redis's LFU counter grows at random, and a
//!   shared integer's (below 10,000) is whatever its one object holds;
//! - OBJECT REFCOUNT: Redis counts a COPY'd small integer 1 and a value
//!   a queued SET stored 2 inside its EXEC, where durakv, which shares no
//!   objects, judges by the value (but a shared one in Redis must be
//!   shared in durakv);
//! - INFO keyspace without avg_ttl, an estimate of Redis's expiry cycle;
//! - RANDOMKEY as "some key", and what `normalize` sorts (replies Redis
//!   leaves unordered);
//! - relative expiries under GT and LT come from a wide range, since two
//!   equal ones compare by the milliseconds between the two commands;
//! - after a key is given a 1 ms expiry, or SET an absolute one already
//!   past (Redis 7.0 stores the key, durakv drops it at once), the
//!   harness waits 3 ms and reads every key of every database on both
//!   servers, since DBSIZE counts an expired key until something (a
//!   read, or active expiry on Redis's own clock) reclaims it.
//!
//! A blocking command that would wait is sent one time in ten, with a
//! 10 ms timeout (Redis notices it at its next tick, up to 100 ms late);
//! otherwise it is dropped. Whether it would wait is asked of Redis.
//!
//! Skipped when `redis-server` is not installed. `DURAKV_DIFF_DBS_SEEDS`
//! runs more sequences (6), `DURAKV_DIFF_DBS_CALLS` longer ones (2,000
//! calls), `DURAKV_DIFF_DBS_SEED` one given sequence, and
//! `DURAKV_DIFF_DBS_TAIL` shows more of the commands before a difference.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "differential_dbs/blocking.rs"]
mod blocking;
#[path = "differential_dbs/commands.rs"]
mod commands;
mod common;
#[path = "differential_dbs/compare.rs"]
mod compare;
#[path = "common/normalize.rs"]
mod normalize;

use blocking::{blocking_parts, is_blocking, may_block};
use commands::{Gen, DBS, KEYS};
use common::*;
use compare::{same_reply, send, state, state_difference, w};
use durakv_protocol::Frame;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::net::TcpStream;
use std::time::Duration;

/// One client, connected to both servers.
struct Client {
    ours: RespConn,
    redis: RespConn,
    /// The commands queued since MULTI; None outside a transaction.
    queued: Option<Vec<Vec<String>>>,
    db: String,
}

struct Run {
    clients: [Client; 2],
    probe_ours: RespConn,
    probe_redis: RespConn,
    history: Vec<String>,
    seed: u64,
    /// Unix seconds at the start.
    now: u64,
}

fn connect(ours: &Server, redis: &RealRedis) -> (RespConn, RespConn) {
    let b = TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (RespConn::new(ours.raw()), RespConn::new(b))
}

impl Run {
    /// Sends `cmd` as client `who` to both servers and compares the
    /// replies; the difference, described, if they differ.
    fn step(&mut self, who: usize, cmd: Vec<String>) -> Result<(), String> {
        let c = &mut self.clients[who];
        self.history
            .push(format!("c{who} db{}: {}", c.db, cmd.join(" ")));
        let x = send(&mut c.ours, &cmd);
        let y = send(&mut c.redis, &cmd);
        let name = cmd[0].to_ascii_uppercase();
        let queued = Frame::Simple("QUEUED".into());
        let ok = Frame::Simple("OK".into());
        let mut expiring = expires_now(&cmd, self.now);
        let mut ran: Vec<(Vec<String>, Frame)> = vec![];
        let agree = match (name.as_str(), c.queued.take()) {
            ("EXEC", Some(q)) => {
                let agree = same_reply(&cmd, Some(&q), &x, &y);
                if let Frame::Array(ys) = &y {
                    ran = q.iter().cloned().zip(ys.iter().cloned()).collect();
                }
                expiring = q.iter().any(|c| expires_now(c, self.now));
                agree
            }
            ("DISCARD", Some(_)) => same_reply(&cmd, None, &x, &y),
            (_, Some(mut q)) => {
                if y == queued {
                    q.push(cmd.clone());
                }
                c.queued = Some(q);
                expiring = false;
                x == y
            }
            (_, None) => {
                if name == "MULTI" && y == ok {
                    c.queued = Some(vec![]);
                }
                ran = vec![(cmd.clone(), y.clone())];
                same_reply(&cmd, None, &x, &y)
            }
        };
        for (c2, r) in ran {
            if c2[0].eq_ignore_ascii_case("SELECT") && r == ok {
                c.db = c2[1].clone();
            }
        }
        if !agree {
            return Err(self.difference(&cmd, &x, &y));
        }
        if expiring {
            self.settle_expired();
        }
        Ok(())
    }

    fn difference(&mut self, cmd: &[String], x: &Frame, y: &Frame) -> String {
        let tail = self.history[self.history.len().saturating_sub(history_tail())..].join("\n  ");
        let ours = state(&mut self.probe_ours);
        let states = state_difference(&ours, &state(&mut self.probe_redis))
            .unwrap_or_else(|| format!("the same keys:\n{}", compare::show(&ours)));
        format!(
            "seed {}, call {}: {cmd:?}\n  durakv: {x:?}\n  redis:  {y:?}\nlast commands:\n  {tail}\n{states}",
            self.seed,
            self.history.len() - 1
        )
    }

    /// Past a 1 ms expiry on both servers, every key is read so that no
    /// expired key is left for DBSIZE or RANDOMKEY to see.
    fn settle_expired(&mut self) {
        std::thread::sleep(Duration::from_millis(3));
        for p in [&mut self.probe_ours, &mut self.probe_redis] {
            for db in DBS {
                assert_eq!(send(p, &w(&["SELECT", db])), Frame::Simple("OK".into()));
                let exists: Vec<String> = std::iter::once("EXISTS")
                    .chain(KEYS.iter().copied())
                    .map(String::from)
                    .collect();
                assert!(matches!(send(p, &exists), Frame::Integer(_)));
            }
        }
    }

    fn check_state(&mut self) -> Result<(), String> {
        let (x, y) = (state(&mut self.probe_ours), state(&mut self.probe_redis));
        match state_difference(&x, &y) {
            None => Ok(()),
            Some(d) => {
                let tail =
                    self.history[self.history.len().saturating_sub(history_tail())..].join("\n  ");
                Err(format!(
                    "seed {}, after call {}: the keyspaces differ\nlast commands:\n  {tail}\n{d}",
                    self.seed,
                    self.history.len()
                ))
            }
        }
    }

    /// Client `a` watches a key, client `b` (in the same database two
    /// times in three) runs a command or two, and `a`'s transaction shows
    /// whether they touched the key.
    fn watch_then_write(&mut self, gen: &mut Gen, a: usize) -> Result<(), String> {
        let b = 1 - a;
        if !gen.chance(3) {
            let db = self.clients[a].db.clone();
            self.step(b, w(&["SELECT", &db]))?;
        }
        let k = KEYS[gen.rng.gen_range(0..KEYS.len())];
        self.step(a, w(&["WATCH", k]))?;
        for _ in 0..gen.rng.gen_range(1..3) {
            let cmd = gen.command();
            if !is_blocking(&cmd[0]) && cmd[0] != "WATCH" && cmd[0] != "UNWATCH" {
                self.step(b, cmd)?;
            }
        }
        self.step(a, w(&["MULTI"]))?;
        self.step(a, w(&["TYPE", k]))?;
        self.step(a, w(&["EXEC"]))
    }

    /// A watched key expires: client `a` watches it, client `b` set it.
    fn watched_key_expires(&mut self, gen: &mut Gen, a: usize) -> Result<(), String> {
        let b = 1 - a;
        let k = KEYS[gen.rng.gen_range(0..KEYS.len())].to_string();
        let before_watch = gen.chance(2);
        let db = self.clients[a].db.clone();
        let other = if db == "1" { "2" } else { "1" };
        let between = [
            vec![],
            w(&["GET", &k]),
            w(&["EXISTS", &k]),
            w(&["SET", &k, "x"]),
            w(&["SREM", &k, "a"]),
            w(&["DEL", &k]),
            w(&["EXPIRE", &k, "100"]),
            w(&["PERSIST", &k]),
            w(&["FLUSHDB"]),
            w(&["FLUSHALL"]),
            w(&["SWAPDB", &db, other]),
            w(&["MOVE", &k, other]),
            w(&["RENAME", &k, "k:other"]),
            w(&["COPY", "k:c", &k, "REPLACE"]),
        ][gen.rng.gen_range(0..14)]
        .clone();
        // The other client sets the key in the watcher's database.
        self.step(b, w(&["SELECT", &db]))?;
        let sleep = |ms| std::thread::sleep(Duration::from_millis(ms));
        if before_watch {
            self.step(b, w(&["SET", &k, "v", "PX", "5"]))?;
            sleep(10);
            self.step(a, w(&["WATCH", &k]))?;
        } else {
            self.step(b, w(&["SET", &k, "v", "PX", "40"]))?;
            self.step(a, w(&["WATCH", &k]))?;
        }
        self.step(a, w(&["MULTI"]))?;
        self.step(a, w(&["INCR", "k:other"]))?;
        if !before_watch {
            sleep(50);
        }
        if !between.is_empty() {
            self.step(b, between)?;
        }
        self.step(a, w(&["EXEC"]))?;
        // k:other is no key the state comparisons read: it goes.
        self.step(a, w(&["DEL", "k:other"]))?;
        self.settle_expired();
        Ok(())
    }
}

/// Whether `cmd` gives a key a 1 ms expiry, or an absolute one already
/// past, which SET leaves in place (for DBSIZE to count) in Redis 7.0.
fn expires_now(cmd: &[String], now: u64) -> bool {
    cmd.windows(2).any(|p| {
        let t: u64 = p[1].parse().unwrap_or(u64::MAX);
        match p[0].as_str() {
            "PEXPIRE" | "PX" => t == 1,
            "EXAT" => t < now,
            "PXAT" => t < now * 1000,
            _ => false,
        }
    }) || (cmd[0] == "PEXPIRE" && cmd.get(2).is_some_and(|t| t == "1"))
}

/// The first difference in sequence `seed`, described; None if none.
fn run_seed(
    seed: u64,
    calls: usize,
    check_every: usize,
    ours: &Server,
    redis: &RealRedis,
) -> Option<String> {
    let mut clients = [0, 1].map(|_| {
        let (o, r) = connect(ours, redis);
        Client {
            ours: o,
            redis: r,
            queued: None,
            db: "0".into(),
        }
    });
    let policy = if seed % 4 == 3 {
        "allkeys-lfu"
    } else {
        "noeviction"
    };
    for c in &mut clients {
        for conn in [&mut c.ours, &mut c.redis] {
            if seed % 2 == 1 {
                assert!(matches!(send(conn, &w(&["HELLO", "3"])), Frame::Map(_)));
            }
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (probe_ours, probe_redis) = connect(ours, redis);
    let mut run = Run {
        clients,
        probe_ours,
        probe_redis,
        history: vec![],
        seed,
        now,
    };
    for p in [&mut run.probe_ours, &mut run.probe_redis] {
        assert_eq!(send(p, &w(&["FLUSHALL"])), Frame::Simple("OK".into()));
        let set = w(&["CONFIG", "SET", "maxmemory-policy", policy]);
        assert_eq!(send(p, &set), Frame::Simple("OK".into()));
    }
    let mut gen = Gen {
        rng: StdRng::seed_from_u64(seed),
        now,
        typed: !seed.is_multiple_of(3),
    };
    let result = (|| {
        for i in 0..calls {
            let who = gen.rng.gen_range(0..2);
            let in_multi = run.clients[who].queued.is_some();
            let cmd = match &run.clients[who].queued {
                _ if gen.chance(150) => w(&[["MULTI", "EXEC", "DISCARD"][gen.rng.gen_range(0..3)]]),
                None if gen.chance(12) => w(&["MULTI"]),
                Some(q) if q.len() >= 4 || gen.chance(4) => {
                    w(&[if gen.chance(6) { "DISCARD" } else { "EXEC" }])
                }
                None if gen.chance(200) && run.clients[1 - who].queued.is_none() => {
                    run.watched_key_expires(&mut gen, who)?;
                    continue;
                }
                None if gen.chance(20) && run.clients[1 - who].queued.is_none() => {
                    run.watch_then_write(&mut gen, who)?;
                    continue;
                }
                _ => gen.command(),
            };
            let mut cmd = cmd;
            if is_blocking(&cmd[0]) && !in_multi {
                let db = run.clients[who].db.clone();
                if may_block(&mut run.probe_redis, &db, &cmd) {
                    if !gen.chance(10) {
                        continue;
                    }
                    let (t, _) = blocking_parts(&cmd);
                    cmd[t] = if cmd[0].starts_with('X') {
                        "10"
                    } else {
                        "0.01"
                    }
                    .into();
                }
            }
            // Now and then a word too few: inside MULTI, EXEC then aborts.
            if cmd.len() > 1 && !is_blocking(&cmd[0]) && gen.chance(60) {
                cmd.pop();
            }
            run.step(who, cmd)?;
            if (i + 1).is_multiple_of(check_every) {
                run.check_state()?;
            }
        }
        run.check_state()
    })();
    result.err()
}

#[test]
fn databases_and_watch_over_two_clients_answer_as_redis_does() {
    let calls = env_number("DURAKV_DIFF_DBS_CALLS").unwrap_or(2000);
    let check_every = env_number("DURAKV_DIFF_DBS_CHECK_EVERY").unwrap_or(40);
    let seeds = env_seeds("DURAKV_DIFF_DBS", 6);
    compare_with_redis(seeds, |seed, ours, redis| {
        run_seed(seed, calls, check_every, ours, redis)
    });
}

/// How many of the last commands a difference shows
/// (`DURAKV_DIFF_DBS_TAIL`, 16).
fn history_tail() -> usize {
    env_number("DURAKV_DIFF_DBS_TAIL").unwrap_or(16)
}
