//! MULTI / EXEC / DISCARD / WATCH against the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use common::{err as error, q as ok};
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn queued(c: &mut redis::Connection, args: &[&str]) {
    assert_eq!(ok::<String>(c, args), "QUEUED", "{args:?}");
}

#[test]
fn multi_exec_returns_queued_replies() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(ok::<String>(&mut c, &["MULTI"]), "OK");
    queued(&mut c, &["SET", "a", "1"]);
    queued(&mut c, &["INCR", "a"]);
    queued(&mut c, &["GET", "a"]);
    queued(&mut c, &["GET", "missing"]);
    let got: Value = ok(&mut c, &["EXEC"]);
    assert_eq!(
        got,
        Value::Array(vec![Value::Okay, Value::Int(2), bulk("2"), Value::Nil])
    );
    // Nothing ran before EXEC: a second connection saw nothing queued.
    let mut other = srv.conn();
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "b", "x"]);
    assert_eq!(ok::<Option<String>>(&mut other, &["GET", "b"]), None);
    let got: Value = ok(&mut c, &["EXEC"]);
    assert_eq!(got, Value::Array(vec![Value::Okay]));
    assert_eq!(ok::<String>(&mut other, &["GET", "b"]), "x");
    // An empty transaction is an empty array.
    let _: () = ok(&mut c, &["MULTI"]);
    assert_eq!(ok::<Value>(&mut c, &["EXEC"]), Value::Array(vec![]));
}

#[test]
fn queueing_errors_abort_with_execabort() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "k", "before"]);

    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "k", "unknown-cmd"]);
    assert_eq!(
        error(&mut c, &["NOSUCHCOMMAND", "x"]),
        "ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'x'"
    );
    assert_eq!(
        error(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(ok::<String>(&mut c, &["GET", "k"]), "before");

    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "k", "wrong-arity"]);
    assert_eq!(
        error(&mut c, &["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        error(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(ok::<String>(&mut c, &["GET", "k"]), "before");
    // The connection is out of MULTI afterwards.
    assert_eq!(error(&mut c, &["EXEC"]), "ERR EXEC without MULTI");

    // A subcommand is checked as a command of its own: known, and with
    // its own arity.
    for (bad, why) in [
        (
            &["OBJECT", "ENCODING", "k", "extra"][..],
            "ERR wrong number of arguments for 'object|encoding' command",
        ),
        (
            &["CONFIG", "NOSUCH"][..],
            "ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.",
        ),
    ] {
        let _: () = ok(&mut c, &["MULTI"]);
        queued(&mut c, &["SET", "k", "bad-subcommand"]);
        assert_eq!(error(&mut c, bad), why);
        assert_eq!(
            error(&mut c, &["EXEC"]),
            "EXECABORT Transaction discarded because of previous errors."
        );
        assert_eq!(ok::<String>(&mut c, &["GET", "k"]), "before");
    }
}

#[test]
fn runtime_errors_inside_exec_do_not_abort_the_rest() {
    let srv = Server::start(&[]);
    // Raw socket: the redis crate turns an error inside EXEC's array into Err.
    let mut s = srv.raw();
    send_raw(
        &mut s,
        b"SET s text\r\nMULTI\r\nSET a 1\r\nINCR s\r\nSELECT 9999\r\nSET b 2\r\nEXEC\r\nMGET a b\r\n",
    );
    let expect: &[u8] = b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n\
        *4\r\n+OK\r\n-ERR value is not an integer or out of range\r\n-ERR DB index is out of range\r\n+OK\r\n\
        *2\r\n$1\r\n1\r\n$1\r\n2\r\n";
    let got = read_exactly(&mut s, expect.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expect)
    );
}

#[test]
fn discard_nested_multi_and_exec_without_multi() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(error(&mut c, &["EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(error(&mut c, &["DISCARD"]), "ERR DISCARD without MULTI");

    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "d", "1"]);
    assert_eq!(ok::<String>(&mut c, &["DISCARD"]), "OK");
    assert_eq!(ok::<Option<String>>(&mut c, &["GET", "d"]), None);
    assert_eq!(error(&mut c, &["EXEC"]), "ERR EXEC without MULTI");

    // A nested MULTI is refused without discarding the transaction.
    let _: () = ok(&mut c, &["MULTI"]);
    assert_eq!(
        error(&mut c, &["MULTI"]),
        "ERR MULTI calls can not be nested"
    );
    queued(&mut c, &["SET", "n", "1"]);
    assert_eq!(
        ok::<Value>(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );
}

#[test]
fn watch_conflict_from_another_connection_aborts() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut other = srv.conn();
    let _: () = ok(&mut c, &["SET", "w", "1"]);
    let _: () = ok(&mut c, &["WATCH", "w"]);
    let _: () = ok(&mut other, &["SET", "w", "2"]);
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "w", "3"]);
    assert_eq!(ok::<Value>(&mut c, &["EXEC"]), Value::Nil);
    assert_eq!(ok::<String>(&mut c, &["GET", "w"]), "2");

    // Without a conflict the same sequence commits, and EXEC forgets the
    // WATCH so a later change does not abort the next transaction.
    let _: () = ok(&mut c, &["WATCH", "w"]);
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "w", "4"]);
    assert_eq!(
        ok::<Value>(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );
    let _: () = ok(&mut other, &["SET", "w", "5"]);
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["GET", "w"]);
    assert_eq!(
        ok::<Value>(&mut c, &["EXEC"]),
        Value::Array(vec![bulk("5")])
    );

    // Watching a key that does not exist yet, which the other side creates.
    let _: () = ok(&mut c, &["WATCH", "fresh"]);
    let _: () = ok(&mut other, &["SET", "fresh", "x"]);
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "fresh", "y"]);
    assert_eq!(ok::<Value>(&mut c, &["EXEC"]), Value::Nil);

    // The redis crate's optimistic-transaction helper retries until it wins.
    let mut attempts = 0;
    let (v,): (i64,) = redis::transaction(&mut c, &["counter"], |con, pipe| {
        attempts += 1;
        let cur: Option<i64> = redis::cmd("GET").arg("counter").query(con)?;
        if attempts == 1 {
            let _: () = redis::cmd("SET")
                .arg("counter")
                .arg(100)
                .query(&mut other)?;
        }
        pipe.set("counter", cur.unwrap_or(0) + 1)
            .ignore()
            .get("counter")
            .query(con)
    })
    .unwrap();
    assert_eq!((v, attempts), (101, 2));
}

/// Clients incrementing one counter with optimistic transactions (WATCH,
/// GET, MULTI, SET, EXEC, again on abort), as go-redis's `Watch` helper
/// does, all at once. Each EXEC writes a key the others watch, so each
/// first lets them run what reached them; two such EXECs must not wait for
/// each other. They did, each for the full 100 ms, until one gave up: the
/// 400 increments below took about 40 s, against well under a second
/// now. The bound is generous, for a loaded machine; the count is exact.
#[test]
fn concurrent_optimistic_transactions_on_one_key_do_not_stall() {
    let srv = Server::start(&[]);
    const CLIENTS: usize = 4;
    const EACH: i64 = 100;
    let started = std::time::Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut c = srv.conn();
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    let _: i64 = redis::transaction(&mut c, &["hits"], |con, pipe| {
                        let cur: Option<i64> = redis::cmd("GET").arg("hits").query(con)?;
                        pipe.set("hits", cur.unwrap_or(0) + 1)
                            .ignore()
                            .get("hits")
                            .query(con)
                            .map(|got: Option<(i64,)>| got.map(|(v,)| v))
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let took = started.elapsed();
    let mut c = srv.conn();
    assert_eq!(ok::<i64>(&mut c, &["GET", "hits"]), CLIENTS as i64 * EACH);
    assert!(
        took < Duration::from_secs(15),
        "{} optimistic increments took {took:?}",
        CLIENTS as i64 * EACH
    );
}

/// Whether a transaction watching `key` on `c` still commits after
/// `other` ran `cmd`.
fn survives(
    c: &mut redis::Connection,
    other: &mut redis::Connection,
    key: &str,
    cmd: &[&str],
) -> bool {
    let _: () = ok(c, &["WATCH", key]);
    let _: Value = ok(other, cmd);
    let _: () = ok(c, &["MULTI"]);
    queued(c, &["PING"]);
    ok::<Value>(c, &["EXEC"]) != Value::Nil
}

/// As in Redis: a stream's groups, pending entries and last ID are not its
/// value, so only new or removed entries touch a watched stream; SWAPDB
/// touches a watched key only where it exists in either database.
#[test]
fn watch_sees_what_redis_calls_a_modified_key() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut other = srv.conn();
    let _: String = ok(&mut c, &["XADD", "s", "1-0", "f", "v"]);
    let _: () = ok(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    for cmd in [
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"][..],
        &["XACK", "s", "g", "1-0"],
        &["XCLAIM", "s", "g", "c2", "0", "1-0"],
        &["XGROUP", "CREATE", "s", "g2", "0", "MKSTREAM"],
        &["XGROUP", "SETID", "s", "g", "0"],
        &["XGROUP", "CREATECONSUMER", "s", "g", "c3"],
        &["XGROUP", "DELCONSUMER", "s", "g", "c3"],
        &["XGROUP", "DESTROY", "s", "g2"],
        &["XSETID", "s", "5-0"],
        &["XTRIM", "s", "MAXLEN", "5"],
    ] {
        assert!(survives(&mut c, &mut other, "s", cmd), "{cmd:?}");
    }
    for cmd in [
        &["XADD", "s", "6-0", "f", "v"][..],
        &["XDEL", "s", "6-0"],
        &["XTRIM", "s", "MAXLEN", "0"],
        &["XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"],
    ] {
        let key = if cmd.contains(&"new") { "new" } else { "s" };
        assert!(!survives(&mut c, &mut other, key, cmd), "{cmd:?}");
    }

    assert!(survives(
        &mut c,
        &mut other,
        "nowhere",
        &["SWAPDB", "0", "1"]
    ));
    let _: () = ok(&mut c, &["SET", "here", "1"]);
    assert!(!survives(&mut c, &mut other, "here", &["SWAPDB", "0", "1"]));
}

#[test]
fn watch_on_a_key_that_expires_aborts() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "ttl", "v", "PX", "100"]);
    let _: () = ok(&mut c, &["WATCH", "ttl"]);
    std::thread::sleep(Duration::from_millis(250));
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "other", "1"]);
    assert_eq!(ok::<Value>(&mut c, &["EXEC"]), Value::Nil);
    assert_eq!(ok::<Option<String>>(&mut c, &["GET", "other"]), None);
}

#[test]
fn watch_inside_multi_and_unwatch() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut other = srv.conn();
    let _: () = ok(&mut c, &["MULTI"]);
    assert_eq!(
        error(&mut c, &["WATCH", "x"]),
        "ERR WATCH inside MULTI is not allowed"
    );
    queued(&mut c, &["SET", "x", "1"]);
    // The refused WATCH does not poison the transaction.
    assert_eq!(
        ok::<Value>(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );

    let _: () = ok(&mut c, &["WATCH", "x"]);
    let _: () = ok(&mut other, &["SET", "x", "2"]);
    assert_eq!(ok::<String>(&mut c, &["UNWATCH"]), "OK");
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", "x", "3"]);
    assert_eq!(
        ok::<Value>(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );
    assert_eq!(ok::<String>(&mut c, &["GET", "x"]), "3");

    // DISCARD forgets WATCHes too.
    let _: () = ok(&mut c, &["WATCH", "x"]);
    let _: () = ok(&mut c, &["MULTI"]);
    let _: () = ok(&mut c, &["DISCARD"]);
    let _: () = ok(&mut other, &["SET", "x", "4"]);
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["GET", "x"]);
    assert_eq!(
        ok::<Value>(&mut c, &["EXEC"]),
        Value::Array(vec![bulk("4")])
    );
}

#[test]
fn exec_is_atomic_for_concurrent_readers() {
    let srv = Server::start(&[]);
    let mut setup = srv.conn();
    let _: () = ok(&mut setup, &["MSET", "a", "0", "b", "0"]);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let mut c = srv.conn();
        let done = done.clone();
        std::thread::spawn(move || {
            for _ in 0..2000 {
                let _: () = ok(&mut c, &["MULTI"]);
                queued(&mut c, &["INCR", "a"]);
                queued(&mut c, &["INCR", "b"]);
                let got: Vec<i64> = ok(&mut c, &["EXEC"]);
                assert_eq!(got[0], got[1]);
            }
            done.store(true, Ordering::Release);
        })
    };
    let mut r = srv.conn();
    let mut reads = 0;
    while !done.load(Ordering::Acquire) {
        let v: Vec<i64> = ok(&mut r, &["MGET", "a", "b"]);
        assert_eq!(v[0], v[1], "MGET saw a half-applied transaction");
        let _: () = ok(&mut r, &["MULTI"]);
        queued(&mut r, &["GET", "a"]);
        queued(&mut r, &["GET", "b"]);
        let v: Vec<i64> = ok(&mut r, &["EXEC"]);
        assert_eq!(v[0], v[1], "a reading transaction saw a half-applied one");
        reads += 1;
    }
    writer.join().unwrap();
    assert!(reads > 0);
    let v: Vec<i64> = ok(&mut r, &["MGET", "a", "b"]);
    assert_eq!(v, [2000, 2000]);
}

#[test]
fn pipelined_transactions_from_the_client_library() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let (a, b): (i64, i64) = redis::pipe()
        .atomic()
        .incr("p", 1)
        .incr("p", 5)
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b), (1, 6));
    let (x,): (String,) = redis::pipe()
        .set("q", "v")
        .ignore()
        .get("q")
        .query(&mut c)
        .unwrap();
    assert_eq!(x, "v");
}

/// Emptying a database touches only the watched keys that existed in it.
#[test]
fn flush_touches_only_watched_keys_that_existed() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for flush in ["FLUSHALL", "FLUSHDB"] {
        let _: () = ok(&mut c, &["WATCH", "absent"]);
        let _: () = ok(&mut c, &[flush]);
        let _: () = ok(&mut c, &["MULTI"]);
        queued(&mut c, &["PING"]);
        let r: Vec<String> = ok(&mut c, &["EXEC"]);
        assert_eq!(r, ["PONG"], "{flush} must not touch an absent key");

        let _: () = ok(&mut c, &["SET", "present", "1"]);
        let _: () = ok(&mut c, &["WATCH", "present"]);
        let _: () = ok(&mut c, &[flush]);
        let _: () = ok(&mut c, &["MULTI"]);
        queued(&mut c, &["PING"]);
        let r: Value = ok(&mut c, &["EXEC"]);
        assert_eq!(r, Value::Nil, "{flush} touches a key that existed");
    }
}

/// An EXEC refused because a script is busy discards the transaction: the
/// client leaves MULTI and none of it runs.
#[test]
fn exec_refused_by_a_busy_script_discards_the_transaction() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "10"]);
    let _: () = ok(&mut c, &["SET", "xx", "1"]);
    let mut t = srv.conn();
    let _: () = ok(&mut t, &["MULTI"]);
    queued(&mut t, &["INCR", "xx"]);
    let runner = {
        let mut r = srv.conn();
        std::thread::spawn(move || error(&mut r, &["EVAL", "while true do end", "0"]))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while try_q::<String>(&mut c, &["GET", "xx"]).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the script never became busy"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = error(&mut t, &["EXEC"]);
    assert!(
        e.starts_with("EXECABORT Transaction discarded because of: BUSY"),
        "{e}"
    );
    let _: String = ok(&mut c, &["SCRIPT", "KILL"]);
    assert!(runner.join().unwrap().contains("killed"));
    assert_eq!(ok::<String>(&mut c, &["GET", "xx"]), "1");
    assert_eq!(
        ok::<String>(&mut t, &["PING", "asdf"]),
        "asdf",
        "left MULTI"
    );
}

/// INFO, MEMORY STATS, CONFIG and DEBUG read or lock shards themselves:
/// queued beside a key's command, EXEC once waited for the shard it held
/// itself, and every client of that shard behind it. They answer in their
/// places, with what the whole transaction did.
#[test]
fn introspection_queued_beside_keys_answers_and_stalls_nobody() {
    let srv = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = srv.conn();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut other = srv.conn();
    other
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _: () = ok(&mut c, &["MULTI"]);
    queued(&mut c, &["GET", "k"]);
    queued(&mut c, &["INFO", "keyspace"]);
    queued(&mut c, &["SET", "k", "v"]);
    queued(&mut c, &["MEMORY", "STATS"]);
    queued(&mut c, &["CONFIG", "RESETSTAT"]);
    queued(&mut c, &["CONFIG", "SET", "hz", "11"]);
    queued(&mut c, &["DEBUG", "OBJECT", "k"]);
    queued(&mut c, &["DEBUG", "DIGEST-VALUE", "k"]);
    queued(&mut c, &["MEMORY", "USAGE", "k"]);
    queued(&mut c, &["GET", "k"]);
    let got: Vec<Value> = ok(&mut c, &["EXEC"]);
    assert_eq!(got.len(), 10);
    assert_eq!(got[0], Value::Nil);
    let info = match &got[1] {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        v => panic!("INFO gave {v:?}"),
    };
    assert!(
        info.contains("db0:keys=1,"),
        "after the whole transaction: {info}"
    );
    assert_eq!(got[2], Value::Okay);
    assert!(
        matches!(got[3], Value::Array(_) | Value::Map(_)),
        "{:?}",
        got[3]
    );
    assert_eq!((&got[4], &got[5]), (&Value::Okay, &Value::Okay));
    assert!(
        matches!(&got[6], Value::SimpleString(s) if s.contains("refcount")),
        "{:?}",
        got[6]
    );
    assert!(matches!(got[7], Value::Array(_)), "{:?}", got[7]);
    assert!(matches!(got[8], Value::Int(n) if n > 0), "{:?}", got[8]);
    assert_eq!(got[9], bulk("v"));
    assert_eq!(
        ok::<Vec<String>>(&mut c, &["CONFIG", "GET", "hz"]),
        ["hz", "11"]
    );
    // The shard of `k` is free: another client reads and writes it.
    let _: () = ok(&mut other, &["SET", "k", "w"]);
    assert_eq!(ok::<String>(&mut c, &["GET", "k"]), "w");
}

/// Redis turns every rejected EXEC into EXECABORT, even one sent before
/// AUTH with no transaction open.
#[test]
fn a_rejected_exec_is_an_execabort() {
    let srv = Server::start(&["--requirepass", "pw"]);
    let mut c = srv.conn();
    assert_eq!(
        error(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of: NOAUTH Authentication required."
    );
    let _: () = ok(&mut c, &["AUTH", "pw"]);
    assert_eq!(error(&mut c, &["EXEC"]), "ERR EXEC without MULTI");
    // An arity refusal is one Redis formats itself: no ERR code inside.
    let _: () = ok(&mut c, &["MULTI"]);
    assert_eq!(
        error(&mut c, &["EXEC", "extra"]),
        "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"
    );
}

/// An EXEC that reached the server before another client's write to a key
/// it watches runs first, as on Redis's single loop, and is not aborted
/// by that write, even when the two connections are served by different
/// event loops. Also when the write is one a blocked BRPOPLPUSH makes
/// (Redis's "BRPOPLPUSH does not affect WATCH while still blocked"), or
/// one made by another client's MULTI/EXEC or by a script.
#[test]
fn an_exec_sent_before_a_write_to_its_watched_key_runs_first() {
    use durakv_protocol::Frame;
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let bulk = |s: &str| Frame::Array(vec![Frame::bulk_from_str(s)]);
    for round in 0..200 {
        // A plain write.
        let mut w = exec_unread(&srv, "k", "other");
        let _: () = ok(&mut c, &["SET", "k", "v"]);
        assert_eq!(
            w.frame(),
            Frame::Array(vec![Frame::Null]),
            "round {round}, SET"
        );

        // A write inside another client's transaction, and one a script
        // makes to a key it declares.
        let mut w = exec_unread(&srv, "k", "other");
        let _: () = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("k")
            .arg("v")
            .ignore()
            .query(&mut c)
            .unwrap();
        assert_eq!(
            w.frame(),
            Frame::Array(vec![Frame::Null]),
            "round {round}, EXEC"
        );
        let mut w = exec_unread(&srv, "k", "other");
        let _: () = ok(
            &mut c,
            &["EVAL", "redis.call('SET', KEYS[1], 'v')", "1", "k"],
        );
        assert_eq!(
            w.frame(),
            Frame::Array(vec![Frame::Null]),
            "round {round}, EVAL"
        );

        // A write made by serving a blocked client.
        let _: () = ok(&mut c, &["SET", "somekey", "somevalue"]);
        let mut blocked = RespConn::new(srv.raw());
        blocked.send(&["BRPOPLPUSH", "src", "dst", "0"]);
        wait_until_blocked(&mut c, 1);
        let mut w = exec_unread(&srv, "dst", "somekey");
        let _: i64 = ok(&mut c, &["LPUSH", "src", "element"]);
        assert_eq!(w.frame(), bulk("somevalue"), "round {round}, BRPOPLPUSH");
        assert_eq!(blocked.frame(), Frame::bulk_from_str("element"));
        let _: i64 = ok(&mut c, &["DEL", "src", "dst"]);
    }
}

/// A connection that watches `watched`, queues `GET read` and has sent
/// EXEC without reading its reply.
fn exec_unread(srv: &Server, watched: &str, read: &str) -> RespConn {
    let mut w = RespConn::new(srv.raw());
    for cmd in [&["WATCH", watched][..], &["MULTI"], &["GET", read]] {
        w.send(cmd);
        w.frame();
    }
    w.send(&["EXEC"]);
    w
}

fn wait_until_blocked(c: &mut redis::Connection, n: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = ok(c, &["INFO", "clients"]);
        if info.contains(&format!("blocked_clients:{n}\r")) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(1));
    }
}
