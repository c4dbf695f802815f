//! Expiry reaches replicas as DEL, as from Redis: a real Redis replica
//! never expires a key of its own accord, so without the DEL a key made
//! anew where an expired one was would reach it as a write to the old,
//! hidden value. Covers removals by a write, by a read and by active
//! expiry, and a removal's place in a transaction around a SWAPDB. Skips
//! with a message when `redis-server` is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{caught_up, eventually, info_field, q, RealRedis, Server};
use redis::Connection;
use std::time::Duration;

const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];

fn ok(c: &mut Connection, args: &[&str]) {
    let _: redis::Value = q(c, args);
}

/// A durakv primary with active expiry off (so each test chooses what
/// removes a key) and a Redis replica whose link is up.
fn primary_and_redis_replica() -> Option<(Server, Connection, RealRedis, Connection)> {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    ok(&mut p, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let port = primary.port.to_string();
    let redis = RealRedis::start(&["--replicaof", "127.0.0.1", &port])?;
    let mut r = redis.conn();
    eventually("the link is up", || {
        info_field(&mut r, "replication", "master_link_status") == "up"
    });
    Some((primary, p, redis, r))
}

/// What a Redis replica holds, expired keys included: DBSIZE counts keys
/// it keeps hidden because their time has passed.
fn held(r: &mut Connection, db: u32) -> i64 {
    ok(r, &["SELECT", &db.to_string()]);
    q(r, &["DBSIZE"])
}

fn hash(c: &mut Connection, key: &str) -> Vec<String> {
    let mut m: Vec<String> = q(c, &["HGETALL", key]);
    let mut pairs: Vec<String> = m.chunks(2).map(|p| p.join("=")).collect();
    pairs.sort();
    m.clear();
    pairs
}

#[test]
fn a_key_made_where_one_expired_is_the_new_key_on_a_redis_replica() {
    let Some((_primary, mut p, _redis, mut r)) = primary_and_redis_replica() else {
        return;
    };
    ok(&mut p, &["HSET", "h", "a", "1"]);
    ok(&mut p, &["PEXPIRE", "h", "100"]);
    ok(&mut p, &["SET", "n", "5", "PX", "100"]);
    ok(&mut p, &["RPUSH", "l", "x"]);
    ok(&mut p, &["PEXPIRE", "l", "100"]);
    std::thread::sleep(Duration::from_millis(250));
    // Each write meets its key expired and makes a new one.
    ok(&mut p, &["HSET", "h", "b", "2"]);
    let n: i64 = q(&mut p, &["INCR", "n"]);
    assert_eq!(n, 1);
    ok(&mut p, &["RPUSH", "l", "y"]);
    caught_up(&mut p, &mut r);
    ok(&mut r, &["SELECT", "0"]);
    assert_eq!(hash(&mut r, "h"), vec!["b=2"]);
    assert_eq!(q::<String>(&mut r, &["GET", "n"]), "1");
    assert_eq!(
        q::<Vec<String>>(&mut r, &["LRANGE", "l", "0", "-1"]),
        vec!["y"]
    );
    for key in ["h", "n", "l"] {
        assert_eq!(q::<i64>(&mut r, &["PTTL", key]), -1, "{key} has no TTL");
    }
    // And it stays so once the replica is a primary itself.
    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(hash(&mut r, "h"), vec!["b=2"]);
    assert_eq!(q::<String>(&mut r, &["GET", "n"]), "1");
}

#[test]
fn keys_removed_by_reads_and_by_active_expiry_leave_a_redis_replica() {
    let Some((_primary, mut p, _redis, mut r)) = primary_and_redis_replica() else {
        return;
    };
    for i in 0..50 {
        ok(&mut p, &["SET", &format!("read:{i}"), "v", "PX", "100"]);
        ok(&mut p, &["SET", &format!("idle:{i}"), "v", "PX", "100"]);
    }
    ok(&mut p, &["SET", "stays", "v"]);
    caught_up(&mut p, &mut r);
    assert_eq!(held(&mut r, 0), 101);
    std::thread::sleep(Duration::from_millis(250));
    // Reads remove what they meet expired; with no write after them, the
    // removals still reach the replica (with active expiry off).
    for i in 0..50 {
        let v: Option<String> = q(&mut p, &["GET", &format!("read:{i}")]);
        assert_eq!(v, None);
    }
    eventually("the replica drops the keys reads removed", || {
        held(&mut r, 0) == 51
    });
    ok(&mut p, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    eventually("the replica drops the keys active expiry removed", || {
        held(&mut r, 0) == 1
    });
    assert_eq!(q::<String>(&mut r, &["GET", "stays"]), "v");
}

/// A key that expires inside a transaction before its SWAPDB is deleted
/// in the database it was in then; a live key of the same name in the
/// other database survives the swap.
#[test]
fn an_expiry_keeps_its_place_around_a_swapdb_in_a_transaction() {
    let Some((_primary, mut p, _redis, mut r)) = primary_and_redis_replica() else {
        return;
    };
    ok(&mut p, &["SELECT", "1"]);
    ok(&mut p, &["SET", "k", "live"]);
    ok(&mut p, &["SELECT", "0"]);
    ok(&mut p, &["SET", "k", "gone", "PX", "100"]);
    ok(&mut p, &["SET", "j", "gone", "PX", "100"]);
    std::thread::sleep(Duration::from_millis(250));
    let _: redis::Value = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg("k")
        .cmd("SWAPDB")
        .arg(0)
        .arg(1)
        // After the swap, database 1 is the old 0, where j expired.
        .cmd("SELECT")
        .arg(1)
        .cmd("GET")
        .arg("j")
        .cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut p)
        .unwrap();
    caught_up(&mut p, &mut r);
    ok(&mut r, &["SELECT", "0"]);
    assert_eq!(q::<String>(&mut r, &["GET", "k"]), "live");
    assert_eq!(held(&mut r, 0), 1, "only the live k in database 0");
    assert_eq!(held(&mut r, 1), 1, "only `after` in database 1");
    ok(&mut r, &["SELECT", "1"]);
    assert_eq!(q::<String>(&mut r, &["GET", "after"]), "1");
}

fn link_up(c: &mut Connection) -> bool {
    info_field(c, "replication", "master_link_status") == "up"
}

/// A durakv replica that lags behind the stream applies its primary's
/// writes to the keys the primary wrote to, even when its own clock says
/// they have expired by then, and its log replays the same after kill -9.
/// Reads on the replica hide a key whose time has passed but leave it for
/// the primary's DEL, as Redis's replicas do.
#[test]
fn a_lagging_durakv_replica_keeps_what_its_primary_wrote() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    ok(&mut p, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let of = format!("127.0.0.1 {}", primary.port);
    let mut replica = Server::start(&["--replicaof", &of]);
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    ok(&mut p, &["HSET", "h", "a", "1"]);
    ok(&mut p, &["PEXPIRE", "h", "300"]);
    ok(&mut p, &["SET", "n", "5", "PX", "300"]);
    ok(&mut p, &["SET", "gone", "v", "PX", "300"]);
    caught_up(&mut p, &mut r);
    // The replica stops reading; the primary writes while the keys live.
    replica.signal("STOP");
    ok(&mut p, &["HSET", "h", "b", "2"]);
    assert_eq!(q::<i64>(&mut p, &["INCR", "n"]), 6);
    ok(&mut p, &["PERSIST", "h"]);
    ok(&mut p, &["PERSIST", "n"]);
    // A TTL the primary sets (PEXPIREAT), or carries with a value it moves
    // (RESTORE ... ABSTTL), and then takes away: the replica gets it after
    // that time.
    ok(&mut p, &["SET", "e", "kept"]);
    ok(&mut p, &["PEXPIRE", "e", "300"]);
    ok(&mut p, &["PERSIST", "e"]);
    ok(&mut p, &["SET", "t", "moved", "PX", "300"]);
    ok(&mut p, &["RENAME", "t", "t2"]);
    ok(&mut p, &["PERSIST", "t2"]);
    // It applies them once their TTLs have passed by its clock.
    std::thread::sleep(Duration::from_millis(500));
    replica.signal("CONT");
    caught_up(&mut p, &mut r);
    let check = |r: &mut Connection| {
        assert_eq!(hash(r, "h"), vec!["a=1", "b=2"]);
        assert_eq!(q::<String>(r, &["GET", "n"]), "6");
        assert_eq!(q::<Option<String>>(r, &["GET", "gone"]), None);
        assert_eq!(q::<String>(r, &["GET", "e"]), "kept");
        assert_eq!(q::<String>(r, &["GET", "t2"]), "moved");
        assert_eq!(held(r, 0), 5, "`gone` is hidden, not removed");
    };
    check(&mut r);
    replica.kill9();
    replica.restart();
    let mut r = replica.conn();
    eventually("the link is up again", || link_up(&mut r));
    caught_up(&mut p, &mut r);
    check(&mut r);
    // A replica of the replica gets the hidden key too, from its full
    // sync, and the DEL after it.
    let sub = Server::start(&["--replicaof", &format!("127.0.0.1 {}", replica.port)]);
    let mut s = sub.conn();
    eventually("the sub-replica's link is up", || link_up(&mut s));
    caught_up(&mut r, &mut s);
    check(&mut s);
    // The primary's removal reaches them as a DEL.
    assert_eq!(q::<Option<String>>(&mut p, &["GET", "gone"]), None);
    caught_up(&mut p, &mut r);
    caught_up(&mut r, &mut s);
    assert_eq!(held(&mut r, 0), 4);
    assert_eq!(held(&mut s, 0), 4);
}
