//! Keyspace notifications over real sockets: `notify-keyspace-events`
//! parsing and its canonical CONFIG GET text, Redis's event names for every
//! implemented write command (and the extra `del` when a collection
//! empties, `new` for created keys, `keymiss`), expiry events from lazy and
//! active expiry, and events of MULTI and scripts in order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use durakv_protocol::Frame;
use std::time::Duration;

/// A raw RESP2 connection pattern-subscribed to every channel.
struct Listener(RespConn);

impl Listener {
    fn new(srv: &Server) -> Listener {
        let mut r = RespConn::new(srv.raw());
        r.send(&["PSUBSCRIBE", "*"]);
        r.frame();
        Listener(r)
    }

    /// (channel, payload) of the next pmessage.
    fn message(&mut self) -> (String, String) {
        let Frame::Array(items) = self.0.frame() else {
            panic!("not a message")
        };
        let text = |f: &Frame| match f {
            Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        };
        assert_eq!(text(&items[0]), "pmessage");
        (text(&items[2]), text(&items[3]))
    }

    /// Every message up to the marker `c` publishes now: what the commands
    /// before it caused, in order.
    fn until_marker(&mut self, c: &mut redis::Connection) -> Vec<(String, String)> {
        let _: i64 = q(c, &["PUBLISH", "marker", "end"]);
        let mut out = Vec::new();
        loop {
            let m = self.message();
            if m.0 == "marker" {
                return out;
            }
            out.push(m);
        }
    }
}

/// The keyevent messages of `run`, as (event, key).
fn keyevents(
    srv: &Server,
    c: &mut redis::Connection,
    run: impl FnOnce(&mut redis::Connection),
) -> Vec<(String, String)> {
    let mut l = Listener::new(srv);
    run(c);
    l.until_marker(c)
        .into_iter()
        .map(|(ch, key)| {
            let event = ch
                .strip_prefix("__keyevent@0__:")
                .unwrap_or_else(|| panic!("unexpected channel {ch}"));
            (event.to_string(), key)
        })
        .collect()
}

fn run_all(c: &mut redis::Connection, cmds: &[&[&str]]) {
    for args in cmds {
        let _: redis::Value = q(c, args);
    }
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn flags_parse_and_read_back_as_redis_writes_them() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let get = |c: &mut redis::Connection| -> String {
        let v: Vec<String> = q(c, &["CONFIG", "GET", "notify-keyspace-events"]);
        v[1].clone()
    };
    assert_eq!(get(&mut c), "");
    for (set, read) in [
        ("gKE", "gKE"),
        ("$lshzxeKE", "$lshzxeKE"),
        ("KA", "AK"),
        ("EA", "AE"),
        ("KEA m", ""),
        ("KEAm", "AKEm"),
        ("Etn", "tnE"),
        ("", ""),
    ] {
        let r = try_q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", set]);
        if read.is_empty() && !set.is_empty() {
            assert_eq!(
                error_text(&r.unwrap_err()),
                "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
            );
            continue;
        }
        r.unwrap();
        assert_eq!(get(&mut c), read, "after setting {set:?}");
    }
}

#[test]
fn nothing_is_published_while_off_or_without_k_and_e() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut l = Listener::new(&srv);
    run_all(&mut c, &[&["SET", "a", "1"], &["DEL", "a"]]);
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "A"]);
    run_all(&mut c, &[&["SET", "a", "1"], &["LPUSH", "l", "x"]]);
    assert!(l.until_marker(&mut c).is_empty());
}

#[test]
fn keyspace_and_keyevent_channels_name_the_database() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KE$"]);
    let mut l = Listener::new(&srv);
    run_all(
        &mut c,
        &[&["SELECT", "3"], &["SET", "user:1", "x"], &["SELECT", "0"]],
    );
    assert_eq!(
        l.until_marker(&mut c),
        pairs(&[
            ("__keyspace@3__:user:1", "set"),
            ("__keyevent@3__:set", "user:1")
        ])
    );
}

#[test]
fn string_and_generic_commands_name_their_events() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    let got = keyevents(&srv, &mut c, |c| {
        run_all(
            c,
            &[
                &["SET", "s", "1"],
                &["SET", "s", "2", "EX", "100"],
                &["SETEX", "t", "100", "v"],
                &["SETNX", "s", "no-op"],
                &["INCR", "s"],
                &["DECRBY", "s", "2"],
                &["INCRBYFLOAT", "s", "1.5"],
                &["APPEND", "s", "x"],
                &["SETRANGE", "s", "0", "y"],
                &["MSET", "m1", "a", "m2", "b"],
                &["GETSET", "m1", "c"],
                &["PERSIST", "t"],
                &["PERSIST", "t"],
                &["EXPIRE", "t", "100"],
                &["GETEX", "t", "PERSIST"],
                &["RENAME", "t", "u"],
                &["COPY", "u", "v"],
                &["DEL", "m1", "m2", "missing"],
                &["GETDEL", "u"],
                &["EXPIRE", "s", "-1"],
            ],
        )
    });
    let expect = pairs(&[
        ("set", "s"),
        ("set", "s"),
        ("expire", "s"),
        ("set", "t"),
        ("expire", "t"),
        ("incrby", "s"),
        ("incrby", "s"),
        ("incrbyfloat", "s"),
        ("append", "s"),
        ("setrange", "s"),
        ("set", "m1"),
        ("set", "m2"),
        ("set", "m1"),
        ("persist", "t"),
        ("expire", "t"),
        ("persist", "t"),
        ("rename_from", "t"),
        ("rename_to", "u"),
        ("copy_to", "v"),
        ("del", "m1"),
        ("del", "m2"),
        ("del", "u"),
        ("del", "s"),
    ]);
    assert_eq!(got, expect);
}

#[test]
fn move_announces_the_destination_in_its_database() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Eg"]);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let mut l = Listener::new(&srv);
    let _: i64 = q(&mut c, &["MOVE", "k", "2"]);
    assert_eq!(
        l.until_marker(&mut c),
        pairs(&[
            ("__keyevent@0__:move_from", "k"),
            ("__keyevent@2__:move_to", "k")
        ])
    );
}

#[test]
fn collection_commands_name_their_events_and_del_when_emptied() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    let got = keyevents(&srv, &mut c, |c| {
        run_all(
            c,
            &[
                // lists
                &["RPUSH", "l", "a", "b", "c", "d"],
                &["LPUSH", "l", "z"],
                &["LPUSHX", "nolist", "z"],
                &["LINSERT", "l", "BEFORE", "b", "ab"],
                &["LSET", "l", "0", "y"],
                &["LREM", "l", "0", "nothing"],
                &["LREM", "l", "1", "ab"],
                &["LTRIM", "l", "0", "2"],
                &["RPOPLPUSH", "l", "l2"],
                &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
                &["LPOP", "l"],
                // sets
                &["SADD", "s", "a", "b", "c"],
                &["SADD", "s", "a"],
                &["SREM", "s", "nope"],
                &["SREM", "s", "a"],
                &["SMOVE", "s", "s2", "b"],
                &["SPOP", "s"],
                &["SINTERSTORE", "dst", "s2", "s2"],
                &["SINTERSTORE", "dst", "s2", "empty"],
                // hashes
                &["HSET", "h", "f", "1", "g", "2"],
                &["HSETNX", "h", "f", "x"],
                &["HINCRBY", "h", "f", "1"],
                &["HINCRBYFLOAT", "h", "f", "0.5"],
                &["HDEL", "h", "f"],
                &["HDEL", "h", "g"],
                // sorted sets
                &[
                    "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
                ],
                &["ZADD", "z", "1", "a"],
                &["ZINCRBY", "z", "1", "a"],
                &["ZADD", "z", "INCR", "1", "b"],
                &["ZREM", "z", "a"],
                &["ZREMRANGEBYSCORE", "z", "3", "3"],
                &["ZREMRANGEBYRANK", "z", "0", "0"],
                &["ZPOPMIN", "z"],
                &["ZADD", "src", "1", "a"],
                &["ZUNIONSTORE", "zdst", "1", "src"],
                &["ZRANGESTORE", "zr", "src", "0", "-1"],
            ],
        )
    });
    let expect = pairs(&[
        ("rpush", "l"),
        ("lpush", "l"),
        ("linsert", "l"),
        ("lset", "l"),
        ("lrem", "l"),
        ("ltrim", "l"),
        // The LMOVE family announces its push before its pop, as Redis.
        ("lpush", "l2"),
        ("rpop", "l"),
        ("rpush", "l2"),
        ("lpop", "l"),
        ("lpop", "l"),
        ("del", "l"),
        ("sadd", "s"),
        ("srem", "s"),
        ("srem", "s"),
        ("sadd", "s2"),
        ("spop", "s"),
        ("del", "s"),
        ("sinterstore", "dst"),
        ("del", "dst"),
        ("hset", "h"),
        ("hincrby", "h"),
        ("hincrbyfloat", "h"),
        ("hdel", "h"),
        ("hdel", "h"),
        ("del", "h"),
        ("zadd", "z"),
        ("zincr", "z"),
        ("zincr", "z"),
        ("zrem", "z"),
        ("zremrangebyscore", "z"),
        ("zremrangebyrank", "z"),
        ("zpopmin", "z"),
        ("del", "z"),
        ("zadd", "src"),
        ("zunionstore", "zdst"),
        ("zrangestore", "zr"),
    ]);
    assert_eq!(got, expect);
}

#[test]
fn new_keys_are_announced_once_when_created() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "En"]);
    let got = keyevents(&srv, &mut c, |c| {
        run_all(
            c,
            &[
                &["SET", "foo", "bar"],
                &["SET", "foo", "baz"],
                &["SET", "bar", "bar"],
                &["RPUSH", "list", "a", "b"],
                &["RPUSH", "list", "c"],
                &["MSET", "m1", "1", "foo", "2"],
                &["DEL", "foo"],
                &["HSET", "foo", "f", "v"],
            ],
        )
    });
    assert_eq!(
        got,
        pairs(&[
            ("new", "foo"),
            ("new", "bar"),
            ("new", "list"),
            ("new", "m1"),
            ("new", "foo"),
        ])
    );
}

#[test]
fn key_misses_are_announced_for_reads() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Em"]);
    let _: () = q(&mut c, &["SET", "here", "1"]);
    let got = keyevents(&srv, &mut c, |c| {
        run_all(
            c,
            &[&["GET", "here"], &["GET", "gone"], &["SET", "new", "1"]],
        )
    });
    assert_eq!(got, pairs(&[("keymiss", "gone")]));
}

#[test]
fn expired_keys_are_announced_by_lazy_and_active_expiry() {
    let srv = Server::start(&["--hz", "50"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    let mut l = Listener::new(&srv);
    // Lazy: the key is found expired by the command that reads it.
    let _: () = q(&mut c, &["PSETEX", "lazy", "1", "v"]);
    std::thread::sleep(Duration::from_millis(20));
    let _: () = q(&mut c, &["CONFIG", "SET", "hz", "1"]);
    let got: Option<String> = q(&mut c, &["GET", "lazy"]);
    assert_eq!(got, None);
    // Active: nobody touches the key; the sampler removes it.
    let _: () = q(&mut c, &["CONFIG", "SET", "hz", "50"]);
    let _: () = q(&mut c, &["PSETEX", "active", "50", "v"]);
    l.0.s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut seen = vec![l.message(), l.message()];
    seen.sort();
    assert_eq!(
        seen,
        pairs(&[
            ("__keyevent@0__:expired", "active"),
            ("__keyevent@0__:expired", "lazy")
        ])
    );
}

#[test]
fn multi_and_script_events_arrive_in_order_with_their_messages() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "E$g"]);
    let mut l = Listener::new(&srv);
    let _: redis::Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("a")
        .arg("1")
        .cmd("PUBLISH")
        .arg("app")
        .arg("after-a")
        .cmd("DEL")
        .arg("a")
        .query(&mut c)
        .unwrap();
    let _: redis::Value = redis::cmd("EVAL")
        .arg("redis.call('set', KEYS[1], '1'); redis.call('publish', 'app', 'after-b'); return redis.call('incr', KEYS[1])")
        .arg(1)
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        l.until_marker(&mut c),
        pairs(&[
            ("__keyevent@0__:set", "a"),
            ("app", "after-a"),
            ("__keyevent@0__:del", "a"),
            ("__keyevent@0__:set", "b"),
            ("app", "after-b"),
            ("__keyevent@0__:incrby", "b"),
        ])
    );
}

#[test]
fn served_blocked_pops_and_bit_writes_name_their_events() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    // A client blocked in BLMOVE, served by the next push.
    let mut blocked = RespConn::new(srv.raw());
    blocked.send(&["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    eventually("the client blocks", || {
        let info: String = q(&mut c, &["INFO", "clients"]);
        info.contains("blocked_clients:1")
    });
    let got = keyevents(&srv, &mut c, |c| {
        run_all(c, &[&["RPUSH", "src", "x"], &["SETBIT", "bits", "7", "1"]])
    });
    assert_eq!(blocked.frame(), Frame::Bulk("x".into()));
    // As Redis 7.0.15 announces a served BLMOVE: its push, then its pop.
    let expect = pairs(&[
        ("rpush", "src"),
        ("rpush", "dst"),
        ("lpop", "src"),
        ("del", "src"),
        ("setbit", "bits"),
    ]);
    assert_eq!(got, expect);
}

#[test]
fn hyperloglog_and_geo_commands_name_their_events() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    let mut big = vec!["PFADD", "dense"];
    let elements: Vec<String> = (0..4000).map(|i| format!("e{i}")).collect();
    big.extend(elements.iter().map(String::as_str));
    let got = keyevents(&srv, &mut c, |c| {
        run_all(
            c,
            &[
                &["PFADD", "h", "a", "b"],
                // No register changes, and a count (which caches): silent.
                &["PFADD", "h", "a"],
                &["PFCOUNT", "h"],
                &["PFMERGE", "m", "h"],
                &big,
                // A dense value logs its changes as several ranges; still
                // one event.
                &["PFADD", "dense", "x1", "x2", "x3", "x4", "x5", "x6"],
                &["GEOADD", "g", "13.361389", "38.115556", "Palermo"],
                &[
                    "GEOSEARCHSTORE",
                    "s1",
                    "g",
                    "FROMLONLAT",
                    "13",
                    "38",
                    "BYRADIUS",
                    "100",
                    "km",
                ],
                &["GEORADIUS", "g", "13", "38", "100", "km", "STORE", "s2"],
                &[
                    "GEORADIUSBYMEMBER",
                    "g",
                    "Palermo",
                    "1",
                    "km",
                    "STOREDIST",
                    "s3",
                ],
                &["GEORADIUS", "g", "0", "0", "1", "km", "STORE", "s2"],
            ],
        )
    });
    let expect = pairs(&[
        ("pfadd", "h"),
        ("pfadd", "m"),
        ("pfadd", "dense"),
        ("pfadd", "dense"),
        ("zadd", "g"),
        ("geosearchstore", "s1"),
        ("georadiusstore", "s2"),
        ("georadiusstore", "s3"),
        ("del", "s2"),
    ]);
    assert_eq!(got, expect);
}

#[test]
fn restore_and_migrate_name_their_events() {
    let srv = Server::start(&[]);
    let target = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    run_all(&mut c, &[&["SET", "src", "v"], &["SET", "old", "x"]]);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut c).unwrap();
    let port = target.port.to_string();
    let got = keyevents(&srv, &mut c, |c| {
        let restore = |c: &mut redis::Connection, key: &str, ttl: u64, extra: &[&str]| {
            let _: redis::Value = redis::cmd("RESTORE")
                .arg(key)
                .arg(ttl)
                .arg(&payload[..])
                .arg(extra)
                .query(c)
                .unwrap();
        };
        restore(c, "new", 0, &[]);
        restore(c, "new", 100_000, &["REPLACE"]);
        // Already expired: the replaced key is deleted, nothing restored.
        restore(c, "old", 1, &["ABSTTL", "REPLACE"]);
        run_all(c, &[&["MIGRATE", "127.0.0.1", &port, "src", "0", "5000"]]);
        run_all(
            c,
            &[&["MIGRATE", "127.0.0.1", &port, "new", "0", "5000", "COPY"]],
        );
    });
    assert_eq!(
        got,
        pairs(&[
            ("restore", "new"),
            ("restore", "new"),
            ("del", "old"),
            ("del", "src")
        ])
    );
}

#[test]
fn stream_commands_name_their_events() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    let got = keyevents(&srv, &mut c, |c| {
        run_all(
            c,
            &[
                &["XADD", "x", "1-0", "f", "v"],
                &["XADD", "x", "MAXLEN", "1", "2-0", "f", "v"],
                &["XADD", "x", "NOMKSTREAM", "3-0", "f", "v"],
                &["XADD", "nox", "NOMKSTREAM", "3-0", "f", "v"],
                &["XDEL", "x", "3-0"],
                &["XDEL", "x", "9-0"],
                &["XTRIM", "x", "MAXLEN", "0"],
                &["XTRIM", "x", "MAXLEN", "0"],
                &["XSETID", "x", "10-0"],
                &["XGROUP", "CREATE", "x", "g", "$"],
                &["XGROUP", "CREATE", "y", "g", "$", "MKSTREAM"],
                &["XGROUP", "SETID", "x", "g", "0"],
                &["XGROUP", "CREATECONSUMER", "x", "g", "alice"],
                &["XGROUP", "DELCONSUMER", "x", "g", "alice"],
                &["XGROUP", "DESTROY", "x", "g"],
                &["XGROUP", "DESTROY", "x", "g"],
            ],
        )
    });
    let expect = pairs(&[
        ("xadd", "x"),
        ("xadd", "x"),
        ("xtrim", "x"),
        ("xadd", "x"),
        ("xdel", "x"),
        ("xtrim", "x"),
        ("xsetid", "x"),
        ("xgroup-create", "x"),
        ("xgroup-create", "y"),
        ("xgroup-setid", "x"),
        ("xgroup-createconsumer", "x"),
        ("xgroup-delconsumer", "x"),
        ("xgroup-destroy", "x"),
    ]);
    assert_eq!(got, expect);
}
