//! `maxmemory` and its eviction policies on a real server: which keys each
//! policy evicts, the -OOM refusal of `noeviction` while reads go on,
//! MULTI under OOM, evictions as logged deletes across kill -9, INFO's
//! `evicted_keys` and the `evicted` keyspace event.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::time::Duration;

const VALUE_BYTES: usize = 1000;

fn info_field(c: &mut redis::Connection, section: &str, name: &str) -> String {
    let text: String = q(c, &["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
        .trim()
        .to_string()
}

fn used(c: &mut redis::Connection) -> u64 {
    info_field(c, "memory", "used_memory").parse().unwrap()
}

/// INFO's `mem_not_counted_for_evict`.
fn not_counted(c: &mut redis::Connection) -> u64 {
    info_field(c, "memory", "mem_not_counted_for_evict")
        .parse()
        .unwrap()
}

/// `used_memory` as `maxmemory` counts it.
fn counted(c: &mut redis::Connection) -> u64 {
    used(c) - not_counted(c)
}

/// SETs `prefix:0..n` to 1000-byte values, with EX `ttl(i)` when given.
fn load(c: &mut redis::Connection, prefix: &str, n: usize, ttl: Option<&dyn Fn(usize) -> u64>) {
    let value = "x".repeat(VALUE_BYTES);
    let mut p = redis::pipe();
    for i in 0..n {
        let key = format!("{prefix}:{i}");
        match ttl {
            Some(t) => p.cmd("SET").arg(&key).arg(&value).arg("EX").arg(t(i)),
            None => p.cmd("SET").arg(&key).arg(&value),
        };
    }
    p.query::<()>(c).unwrap();
}

fn exists(c: &mut redis::Connection, prefix: &str, i: usize) -> bool {
    q::<i64>(c, &["EXISTS", &format!("{prefix}:{i}")]) == 1
}

fn surviving(c: &mut redis::Connection, prefix: &str, range: std::ops::Range<usize>) -> Vec<usize> {
    range.filter(|&i| exists(c, prefix, i)).collect()
}

/// Lowers `maxmemory` to what is in use minus about `keys` values, then
/// makes one write, which evicts first (all the way: tenacity 100 lifts
/// the time bound). The limit is lifted again so that the commands
/// checking the outcome do not evict more.
fn squeeze(c: &mut redis::Connection, keys: u64) {
    let limit = counted(c) - keys * (VALUE_BYTES as u64 + 100);
    let _: () = q(c, &["CONFIG", "SET", "maxmemory-eviction-tenacity", "100"]);
    let _: () = q(c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    let _: () = q(c, &["SET", "trigger", "1"]);
    let _: () = q(c, &["CONFIG", "SET", "maxmemory", "0"]);
}

/// LFU factor 0 and no decay: every access adds one to OBJECT FREQ.
fn count_every_access(c: &mut redis::Connection) {
    let _: () = q(
        c,
        &[
            "CONFIG",
            "SET",
            "lfu-log-factor",
            "0",
            "lfu-decay-time",
            "0",
        ],
    );
}

fn evicted_keys(c: &mut redis::Connection) -> u64 {
    info_field(c, "stats", "evicted_keys").parse().unwrap()
}

#[test]
fn volatile_lru_evicts_only_keys_with_a_ttl() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "volatile-lru"],
    );
    load(&mut c, "p", 300, None);
    load(&mut c, "v", 300, Some(&|_| 1000));
    squeeze(&mut c, 150);
    assert_eq!(
        surviving(&mut c, "p", 0..300).len(),
        300,
        "keys without TTL stay"
    );
    let left = surviving(&mut c, "v", 0..300).len();
    assert!(left < 200, "{left} volatile keys left");
    assert_eq!(evicted_keys(&mut c), 300 - left as u64);
    assert_eq!(
        info_field(&mut c, "memory", "maxmemory_policy"),
        "volatile-lru"
    );
}

#[test]
fn volatile_random_and_ttl_spare_persistent_keys_and_ttl_goes_nearest_first() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"],
    );
    load(&mut c, "p", 200, None);
    load(&mut c, "t", 300, Some(&|i| 1000 + 10 * i as u64));
    squeeze(&mut c, 100);
    assert_eq!(surviving(&mut c, "p", 0..200).len(), 200);
    let left = surviving(&mut c, "t", 0..300);
    let gone: Vec<usize> = (0..300).filter(|i| !left.contains(i)).collect();
    assert!(gone.len() >= 60, "{} evicted", gone.len());
    let mean = gone.iter().sum::<usize>() as f64 / gone.len() as f64;
    assert!(
        mean < 100.0,
        "evicted keys should be the nearest to expire: mean index {mean}"
    );

    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "volatile-random"],
    );
    squeeze(&mut c, 50);
    assert_eq!(surviving(&mut c, "p", 0..200).len(), 200);
    assert!(surviving(&mut c, "t", 0..300).len() < left.len());
}

#[test]
fn allkeys_lru_keeps_recently_read_keys() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    load(&mut c, "k", 600, None);
    // The LRU clock counts seconds, as Redis's does.
    std::thread::sleep(Duration::from_millis(2100));
    for i in 0..60 {
        let _: Option<String> = q(&mut c, &["GET", &format!("k:{i}")]);
    }
    squeeze(&mut c, 300);
    let hot = surviving(&mut c, "k", 0..60).len();
    let cold = surviving(&mut c, "k", 60..600).len();
    assert!(cold < 400, "{cold} cold keys left");
    assert!(hot >= 50, "only {hot} of 60 recently read keys survived");
}

#[test]
fn allkeys_lfu_keeps_frequently_read_keys() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    );
    load(&mut c, "k", 600, None);
    let mut p = redis::pipe();
    for _ in 0..100 {
        for i in 0..60 {
            p.cmd("GET").arg(format!("k:{i}")).ignore();
        }
    }
    p.query::<()>(&mut c).unwrap();
    let freq: i64 = q(&mut c, &["OBJECT", "FREQ", "k:0"]);
    assert!(freq > 5, "read keys count up: {freq}");
    squeeze(&mut c, 300);
    let hot = surviving(&mut c, "k", 0..60).len();
    let cold = surviving(&mut c, "k", 60..600).len();
    assert!(cold < 400, "{cold} cold keys left");
    assert!(hot >= 50, "only {hot} of 60 frequently read keys survived");
}

#[test]
fn noeviction_refuses_writes_with_redis_error_and_keeps_serving_reads() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    load(&mut c, "k", 100, None);
    // Below what the server uses now by half the keys: a fixed figure
    // would depend on buffers the server happens to hold at the moment.
    let limit = counted(&mut c) - 50 * VALUE_BYTES as u64;
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), limit.to_string());
    assert_eq!(
        info_field(&mut c, "memory", "maxmemory_policy"),
        "noeviction"
    );
    assert_eq!(
        err(&mut c, &["SET", "new", "v"]),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k:1"]).len(), VALUE_BYTES);
    // Not denyoom: deleting is how a user makes room.
    assert_eq!(q::<i64>(&mut c, &["DEL", "k:1"]), 1);
    assert_eq!(evicted_keys(&mut c), 0);

    // MULTI: a command queued under OOM is refused and dooms EXEC.
    let mut r = RespConn::new(srv.raw());
    r.send(&["MULTI"]);
    r.expect("+OK\r\n");
    r.send(&["SET", "a", "1"]);
    r.expect("-OOM command not allowed when used memory > 'maxmemory'.\r\n");
    r.send(&["EXEC"]);
    r.expect("-EXECABORT Transaction discarded because of previous errors.\r\n");

    // A declared script that may write is refused up front; a legacy one
    // gets the error from its first write.
    assert!(err(
        &mut c,
        &["EVAL", "#!lua\nreturn redis.call('set','s','1')", "0"]
    )
    .starts_with("OOM"));
    assert!(err(&mut c, &["EVAL", "return redis.call('set','s','1')", "0"]).contains("OOM"));
    assert_eq!(
        q::<i64>(&mut c, &["EVAL", "return redis.call('exists','k:2')", "0"]),
        1
    );

    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    let _: () = q(&mut c, &["SET", "new", "v"]);
}

#[test]
fn evictions_are_logged_deletes_that_survive_kill_9() {
    let mut srv = Server::start(&["--durability", "full"]);
    let mut c = srv.conn();
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
    );
    load(&mut c, "k", 400, None);
    squeeze(&mut c, 150);
    let left = surviving(&mut c, "k", 0..400);
    assert!(left.len() < 300, "{} left", left.len());
    let n = evicted_keys(&mut c);
    // allkeys-random may also take squeeze's own `trigger` key (the CONFIG
    // SET that lifts the limit still runs over it).
    let trigger_evicted = q::<i64>(&mut c, &["EXISTS", "trigger"]) == 0;
    assert_eq!(n, 400 - left.len() as u64 + u64::from(trigger_evicted));
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(
        surviving(&mut c, "k", 0..400),
        left,
        "evicted keys stay gone"
    );
    let trigger: Option<String> = q(&mut c, &["GET", "trigger"]);
    assert_eq!(
        trigger.is_none(),
        trigger_evicted,
        "trigger as before the kill"
    );
}

#[test]
fn an_eviction_announces_the_evicted_event() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    load(&mut c, "k", 200, None);
    let mut sub = RespConn::new(srv.raw());
    sub.send(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    sub.frame();
    squeeze(&mut c, 20);
    let durakv_protocol::Frame::Array(items) = sub.frame() else {
        panic!("not a message")
    };
    let durakv_protocol::Frame::Bulk(key) = &items[2] else {
        panic!("{items:?}")
    };
    let key = String::from_utf8_lossy(key).into_owned();
    assert!(key.starts_with("k:"), "{key}");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &key]), 0);
}

#[test]
fn directives_are_real_and_validated() {
    let srv = Server::start(&[
        "--maxmemory-policy",
        "allkeys-lfu",
        "--maxmemory-samples",
        "10",
    ]);
    let mut c = srv.conn();
    let got: Vec<String> = strs(&mut c, &["CONFIG", "GET", "maxmemory-*"]);
    for want in [
        "maxmemory-policy",
        "allkeys-lfu",
        "maxmemory-samples",
        "10",
        "maxmemory-eviction-tenacity",
        "10",
    ] {
        assert!(got.contains(&want.to_string()), "{got:?}");
    }
    assert!(err(&mut c, &["CONFIG", "SET", "maxmemory-policy", "lru"]).contains("must be one of"));
    assert!(err(&mut c, &["CONFIG", "SET", "maxmemory-samples", "0"]).contains("between 1 and 64"));
    count_every_access(&mut c);
    let _: () = q(&mut c, &["SET", "f", "1"]);
    for _ in 0..20 {
        let _: String = q(&mut c, &["GET", "f"]);
    }
    // Factor 0: every access counts.
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "FREQ", "f"]), 25);
}

#[test]
fn client_no_touch_leaves_lfu_alone_except_for_touch() {
    let srv = Server::start(&["--maxmemory-policy", "allkeys-lfu"]);
    let mut c = srv.conn();
    count_every_access(&mut c);
    let _: () = q(&mut c, &["SET", "f", "1"]);
    let _: () = q(&mut c, &["CLIENT", "NO-TOUCH", "ON"]);
    let flags: String = q(&mut c, &["CLIENT", "INFO"]);
    assert!(flags.contains("flags=T"), "{flags}");
    for _ in 0..10 {
        let _: String = q(&mut c, &["GET", "f"]);
    }
    let _: String = q(
        &mut c,
        &["EVAL", "return redis.call('GET', KEYS[1])", "1", "f"],
    );
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["GET", "f"]);
    let _: Vec<String> = q(&mut c, &["EXEC"]);
    assert_eq!(
        q::<i64>(&mut c, &["OBJECT", "FREQ", "f"]),
        5,
        "reads counted"
    );
    // TOUCH is how a NO-TOUCH client asks for an access.
    assert_eq!(q::<i64>(&mut c, &["TOUCH", "f"]), 1);
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "FREQ", "f"]), 6);
    // Another client's reads still count, in the same shard right after.
    let mut other = srv.conn();
    let _: String = q(&mut other, &["GET", "f"]);
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "FREQ", "f"]), 7);
    let _: () = q(&mut c, &["CLIENT", "NO-TOUCH", "OFF"]);
    let _: String = q(&mut c, &["GET", "f"]);
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "FREQ", "f"]), 8);
    assert!(err(&mut c, &["CLIENT", "NO-TOUCH", "maybe"]).contains("syntax error"));
}

/// Keyspace events for new keys and misses (`n`, `m`) look the command's
/// keys up first; that look-up, and an aborted EXEC's read of its watched
/// keys, must not count as accesses. Before, with `n` on, TTL, TYPE and
/// EXISTS reset a key's idle time (Redis's introspection-2 test after its
/// pubsub unit) and every read counted twice in LFU.
#[test]
fn bookkeeping_lookups_are_not_accesses() {
    let srv = Server::start(&["--maxmemory-policy", "allkeys-lfu"]);
    let mut c = srv.conn();
    count_every_access(&mut c);
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "notify-keyspace-events", "KEAnm"],
    );
    let _: () = q(&mut c, &["SET", "f", "1"]);
    let start = q::<i64>(&mut c, &["OBJECT", "FREQ", "f"]);
    let _: i64 = q(&mut c, &["TTL", "f"]);
    let _: String = q(&mut c, &["TYPE", "f"]);
    let _: i64 = q(&mut c, &["EXISTS", "f"]);
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "FREQ", "f"]), start);
    for _ in 0..3 {
        let _: String = q(&mut c, &["GET", "f"]);
    }
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "FREQ", "f"]), start + 3);

    // An EXEC aborted by a write to a watched key leaves that key's
    // counter where the write put it.
    let _: () = q(&mut c, &["SET", "w", "1"]);
    let _: () = q(&mut c, &["WATCH", "w"]);
    let mut other = srv.conn();
    let _: () = q(&mut other, &["SET", "w", "2"]);
    let before = q::<i64>(&mut other, &["OBJECT", "FREQ", "w"]);
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["GET", "x"]);
    assert_eq!(q::<redis::Value>(&mut c, &["EXEC"]), redis::Value::Nil);
    assert_eq!(q::<i64>(&mut other, &["OBJECT", "FREQ", "w"]), before);

    // The same with the LRU clock: idle time survives the look-ups.
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    let _: () = q(&mut c, &["SET", "idle", "1"]);
    std::thread::sleep(Duration::from_millis(2100));
    let _: i64 = q(&mut c, &["TTL", "idle"]);
    let _: String = q(&mut c, &["TYPE", "idle"]);
    assert!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", "idle"]) >= 2);
}

/// Deleting keys and flushing give their memory back, tables included, as
/// in Redis: a server that hit `maxmemory` under `noeviction` takes writes
/// again once its keys are gone. Until 2026-11-29 the keyspace's tables
/// kept their size, so after FLUSHALL of 100,000 keys `used_memory` stayed
/// about 7 MB above a fresh server's and writes kept getting -OOM.
#[test]
fn deleted_and_flushed_keys_give_their_memory_back() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let fresh = used(&mut c);
    let small = |c: &mut redis::Connection, from: usize, to: usize| {
        let mut p = redis::pipe();
        for i in from..to {
            p.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
        }
        p.query::<()>(c).unwrap();
    };
    for chunk in 0..100 {
        small(&mut c, chunk * 1000, (chunk + 1) * 1000);
    }
    let full = used(&mut c);
    assert!(
        full > fresh + 3_000_000,
        "100,000 keys took {} bytes",
        full - fresh
    );

    // Deleting all but 100 keys frees nearly all of it.
    for chunk in 0..100 {
        let mut p = redis::pipe();
        for i in chunk * 1000..(chunk + 1) * 1000 {
            if i >= 100 {
                p.cmd("DEL").arg(format!("key:{i}")).ignore();
            }
        }
        p.query::<()>(&mut c).unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 100);
    for i in 0..100 {
        assert_eq!(q::<i64>(&mut c, &["GET", &format!("key:{i}")]), i);
    }
    let after_del = used(&mut c);
    assert!(
        after_del < fresh + (full - fresh) / 10,
        "fresh {fresh}, full {full}, after deleting 99.9% of keys {after_del}"
    );

    // Full to the limit under noeviction, then flushed: writes go again.
    small(&mut c, 0, 50_000);
    let limit = counted(&mut c) - 100_000;
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    assert!(err(&mut c, &["SET", "new", "v"]).starts_with("OOM"));
    let _: () = q(&mut c, &["FLUSHALL"]);
    // A busy machine (the other tests of this file run beside it) may
    // take a moment to hand the freed pages back.
    let mut flushed = used(&mut c);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while flushed >= fresh + 500_000 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        flushed = used(&mut c);
    }
    assert!(
        flushed < fresh + 500_000,
        "fresh {fresh}, after FLUSHALL {flushed}"
    );
    let _: () = q(&mut c, &["SET", "new", "v"]);
}

#[test]
fn evicting_keys_that_many_clients_track_evicts_only_what_is_over() {
    // Each eviction tells every tracking reader of the key: ten clients
    // times a 1000-byte key name, more than the key itself held, until
    // their connections write it. The pass must stop once the keys it
    // evicted held what was over, not run until no key is left.
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let mut readers: Vec<RespConn> = (0..10)
        .map(|_| {
            let mut r = RespConn::new(srv.raw());
            r.send(&["HELLO", "3"]);
            let _ = r.frame();
            r.send(&["CLIENT", "TRACKING", "on"]);
            let _ = r.frame();
            r
        })
        .collect();
    let key = |j: usize| format!("{j}{}", "x".repeat(1000));
    for j in 0..300 {
        let _: () = q(&mut c, &["SET", &key(j), "x"]);
        for r in &mut readers {
            r.send(&["GET", &key(j)]);
            let _ = r.frame();
        }
    }
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory-eviction-tenacity", "100"],
    );
    let limit = counted(&mut c) - 40_000;
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    let _: String = q(&mut c, &["PING"]);
    let evicted = evicted_keys(&mut c);
    let left: u64 = q(&mut c, &["DBSIZE"]);
    assert!(
        (200..=300).contains(&left),
        "{left} keys left, {evicted} evicted"
    );
    assert!((10..=60).contains(&evicted), "{evicted} evicted");
    // The readers were told.
    for r in &mut readers {
        match r.frame() {
            durakv_protocol::Frame::Push(items) => assert_eq!(items.len(), 2),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn small_integers_are_shared_unless_values_are_scored_by_access() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SET", "a", "1"]);
    let refcount = |c: &mut redis::Connection| q::<i64>(c, &["OBJECT", "REFCOUNT", "a"]);
    assert_eq!(refcount(&mut c), i64::from(i32::MAX));
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "1gb"]);
    for (policy, shared) in [
        ("allkeys-random", true),
        ("allkeys-lru", false),
        ("volatile-lfu", false),
        ("volatile-ttl", true),
    ] {
        let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-policy", policy]);
        assert_eq!(refcount(&mut c) > 1, shared, "{policy}");
    }
}

/// What the replication stream holds for a replica that fell behind is
/// not counted against `maxmemory` (Redis leaves replicas' output buffers
/// out): counted, the deletes that evictions stream would grow it further.
/// Once the replica has caught up, the memory is given back.
#[test]
fn a_lagging_replica_s_stream_is_not_counted_against_maxmemory() {
    let primary = Server::start(&["--maxmemory-policy", "allkeys-random"]);
    let c = &mut primary.conn();
    load(c, "k", 2000, None);
    let replicaof = format!("127.0.0.1 {}", primary.port);
    let replica = Server::start(&["--replicaof", &replicaof]);
    let r = &mut replica.conn();
    let synced = |c: &mut redis::Connection, r: &mut redis::Connection| {
        info_field(r, "replication", "master_link_status") == "up"
            && info_field(r, "replication", "master_repl_offset")
                == info_field(c, "replication", "master_repl_offset")
    };
    eventually("the replica in sync", || synced(c, r));
    replica.signal("STOP");
    let limit = counted(c) + (4 << 20);
    let _: () = q(c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    // 30 MB of stream for a dataset that stays 2 MB. The stopped
    // replica's socket buffers take up to about 10 MB of it on loopback
    // (20 MB once left 9.8 MB held, under the bound below).
    for _ in 0..15 {
        load(c, "k", 2000, None);
    }
    let held = not_counted(c);
    replica.signal("CONT");
    assert!(held > 10 << 20, "held {held}");
    assert_eq!(evicted_keys(c), 0);
    assert_eq!(q::<i64>(c, &["DBSIZE"]), 2000);
    eventually("the replica caught up", || synced(c, r));
    // The next write trims the stream and gives the slack back.
    load(c, "k", 10, None);
    let held = not_counted(c);
    assert!(held < 4 << 20, "still held {held}");
    let _: () = q(c, &["CONFIG", "SET", "maxmemory", "0"]);
}

/// Once a replica has attached (and gone), the stream is kept in
/// `repl-backlog-size` and nothing else grows with it: the memory
/// `maxmemory` counts stays flat under a long run of overwrites of one
/// key, so bookkeeping does not cross the limit with nothing left to
/// evict. The backlog grew by doubling (half a megabyte more at one
/// write), and its LSN index kept an entry per logged commit, up to a
/// megabyte, while no replica could use them.
#[test]
fn a_stream_nobody_reads_keeps_counted_memory_flat() {
    let primary = Server::start(&["--durability", "full"]);
    let c = &mut primary.conn();
    let (_, link) =
        common::raw_full_sync_and_link(primary.port, &["REPLCONF listening-port 1", "PSYNC ? -1"]);
    drop(link);
    eventually("the replica gone", || {
        info_field(c, "replication", "connected_slaves") == "0"
    });
    // Small values, 250 at a time: a batch holds at most one pipeline
    // (the next waits for its replies), about 40 KB, within the 64 KiB
    // the log's batch buffers start with. Pipelines of 1,000 made batches
    // of up to 150 KB when fsyncs were slow enough for one to gather a
    // whole pipeline, and each buffer doubled twice at the first such
    // batch it took, before or after `before` (what a burst grows them by
    // is the next test's).
    let value = "x".repeat(100);
    let overwrite = |c: &mut redis::Connection, n: usize| {
        let mut p = redis::pipe();
        for _ in 0..n {
            p.cmd("SET").arg("k").arg(&value).ignore();
        }
        let _: () = p.query(c).unwrap();
    };
    // 10,000 commits fill the 1 MiB backlog; 100,000 more would have
    // grown the LSN index from 16,384 entries to its 65,536.
    for _ in 0..40 {
        overwrite(c, 250);
    }
    let before = counted(c);
    for _ in 0..400 {
        overwrite(c, 250);
    }
    let grew = counted(c).saturating_sub(before);
    // Allows for the first runs of SET and INFO on another thread (their
    // latency histograms).
    assert!(grew < 128 << 10, "counted memory grew by {grew} bytes");
    let histlen: u64 = info_field(c, "replication", "repl_backlog_histlen")
        .parse()
        .unwrap();
    assert_eq!(histlen, 1 << 20);
}

/// A burst of large writes grows the log's batch buffers for a moment to
/// hold them; like Redis's AOF buffer, that is not what `maxmemory` is
/// for. Counted, 20 MB of pipelined overwrites of one key evicted a
/// dataset 2 MB under the limit, every key of it, then refused writes.
#[test]
fn a_burst_of_logged_writes_evicts_nothing_for_the_log_s_buffers() {
    let srv = Server::start(&["--durability", "full"]);
    let c = &mut srv.conn();
    load(c, "keep", 200, None);
    let limit = counted(c) + (2 << 20);
    let _: () = q(c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    let _: () = q(c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    let big = "y".repeat(100_000);
    for _ in 0..3 {
        let mut p = redis::pipe();
        for _ in 0..200 {
            p.cmd("SET").arg("big").arg(&big).ignore();
        }
        let _: () = p.query(c).unwrap();
    }
    assert_eq!(evicted_keys(c), 0);
    assert_eq!(q::<i64>(c, &["DBSIZE"]), 201);
    let _: () = q(c, &["CONFIG", "SET", "maxmemory", "0"]);
}

/// A replica leaves eviction to its primary while
/// `replica-ignore-maxmemory` is `yes` (the default), as Redis's does: it
/// holds every key its primary holds, however far past its own
/// `maxmemory`, and applies the stream without -OOM. With `no` it evicts
/// on its own.
#[test]
fn a_replica_ignores_its_maxmemory_unless_told_otherwise() {
    let primary = Server::start(&[]);
    let c = &mut primary.conn();
    let replicaof = format!("127.0.0.1 {}", primary.port);
    let replica = Server::start(&[
        "--replicaof",
        &replicaof,
        "--maxmemory-policy",
        "allkeys-random",
    ]);
    let r = &mut replica.conn();
    eventually("the link is up", || {
        info_field(r, "replication", "master_link_status") == "up"
    });
    let limit = counted(r) + (1 << 20);
    let _: () = q(r, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    load(c, "k", 3000, None);
    caught_up(c, r);
    assert_eq!(q::<i64>(r, &["DBSIZE"]), 3000);
    assert_eq!(evicted_keys(r), 0);
    assert!(counted(r) > limit, "the replica is past its limit");
    let _: () = q(r, &["CONFIG", "SET", "replica-ignore-maxmemory", "no"]);
    load(c, "more", 10, None);
    caught_up(c, r);
    eventually("the replica evicts", || evicted_keys(r) > 0);
    assert!(q::<i64>(r, &["DBSIZE"]) < 3010);
}
