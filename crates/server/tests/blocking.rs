//! Blocking commands with real clients: a client sends BLPOP & co. and
//! reads the reply later (like the Redis suite's deferring clients) while
//! others write, unblock or disconnect it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{bulk, cmd, err, q, read_exactly, req, send_raw, strs, Server};
use redis::Value;
use std::time::{Duration, Instant};

/// A connection that sends a command now and reads its reply later.
struct Deferred(redis::Connection);

impl Deferred {
    fn new(srv: &Server) -> Deferred {
        Deferred(srv.conn())
    }

    fn send(&mut self, args: &[&str]) {
        self.0
            .send_packed_command(&cmd(args).get_packed_command())
            .unwrap();
    }

    /// The next reply, with error replies as `Err(text)`.
    fn recv(&mut self) -> Result<Value, String> {
        match self.0.recv_response() {
            Ok(Value::ServerError(e)) => {
                Err(format!("{} {}", e.code(), e.details().unwrap_or_default())
                    .trim_end()
                    .to_string())
            }
            Ok(v) => Ok(v),
            Err(e) => Err(common::error_text(&e)),
        }
    }

    fn recv_ok(&mut self) -> Value {
        self.recv().unwrap()
    }

    fn id(&mut self) -> i64 {
        q(&mut self.0, &["CLIENT", "ID"])
    }
}

fn info_field(c: &mut redis::Connection, name: &str) -> usize {
    let info: String = q(c, &["INFO", "clients"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO clients"))
}

/// Waits until INFO reports `n` blocked clients.
fn wait_blocked(c: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if info_field(c, "blocked_clients") == n {
            return;
        }
        assert!(Instant::now() < deadline, "never {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn pair(key: &str, value: &str) -> Value {
    Value::Array(vec![bulk(key), bulk(value)])
}

#[test]
fn served_by_a_later_push_with_the_key_name() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut rd = Deferred::new(&srv);
    rd.send(&["BLPOP", "empty", "list", "0"]);
    wait_blocked(&mut c, 1);
    let flags: String = q(&mut c, &["CLIENT", "LIST"]);
    assert!(flags.contains("flags=b "), "{flags}");
    assert_eq!(info_field(&mut c, "total_blocking_keys"), 2);
    // Variadic push: the waiter gets the head, the rest stays.
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "list", "a", "b"]), 2);
    assert_eq!(rd.recv_ok(), pair("list", "a"));
    assert_eq!(strs(&mut c, &["LRANGE", "list", "0", "-1"]), ["b"]);
    assert_eq!(info_field(&mut c, "blocked_clients"), 0);
    assert_eq!(info_field(&mut c, "total_blocking_keys"), 0);

    // Data already there: no wait, same reply shape; BRPOP takes the tail.
    q::<i64>(&mut c, &["RPUSH", "list", "c"]);
    rd.send(&["BRPOP", "empty", "list", "0"]);
    assert_eq!(rd.recv_ok(), pair("list", "c"));

    // BLMPOP with COUNT: up to COUNT elements of the key that became ready.
    rd.send(&["BLMPOP", "0", "2", "x", "y", "RIGHT", "COUNT", "3"]);
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["RPUSH", "y", "1", "2", "3", "4"]);
    assert_eq!(
        rd.recv_ok(),
        Value::Array(vec![
            bulk("y"),
            Value::Array(vec![bulk("4"), bulk("3"), bulk("2")])
        ])
    );

    // BZPOPMIN: key, member, score; BZMPOP nests the pairs.
    rd.send(&["BZPOPMIN", "z", "0"]);
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["ZADD", "z", "2", "two", "1", "one", "3", "three"]);
    assert_eq!(
        rd.recv_ok(),
        Value::Array(vec![bulk("z"), bulk("one"), bulk("1")])
    );
    rd.send(&["BZMPOP", "0", "1", "z", "MAX", "COUNT", "5"]);
    assert_eq!(
        rd.recv_ok(),
        Value::Array(vec![
            bulk("z"),
            Value::Array(vec![
                Value::Array(vec![bulk("three"), bulk("3")]),
                Value::Array(vec![bulk("two"), bulk("2")]),
            ])
        ])
    );
}

#[test]
fn timeouts_fire_without_activity_and_parse_as_redis() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut rd = Deferred::new(&srv);
    for (args, nil) in [
        (&["BLPOP", "k", "0.2"][..], Value::Nil),
        (
            &["BLMOVE", "k", "d", "LEFT", "RIGHT", "0.2"][..],
            Value::Nil,
        ),
        (&["BZMPOP", "0.2", "1", "k", "MIN"][..], Value::Nil),
    ] {
        let start = Instant::now();
        rd.send(args);
        // Nothing else happens on the server meanwhile: the timer alone
        // ends the wait.
        assert_eq!(rd.recv_ok(), nil, "{args:?}");
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(190) && waited < Duration::from_secs(5),
            "{args:?} waited {waited:?}"
        );
    }
    assert_eq!(info_field(&mut c, "blocked_clients"), 0);
    // A timeout's nil leaves the client usable, with its queued commands.
    rd.send(&["BRPOP", "k", "0.05"]);
    rd.send(&["PING"]);
    assert_eq!(rd.recv_ok(), Value::Nil);
    assert_eq!(rd.recv_ok(), Value::SimpleString("PONG".into()));
    // Below a millisecond rounds up to one, as in Redis: not "for ever".
    rd.send(&["BLPOP", "k", "0.0004"]);
    assert_eq!(rd.recv_ok(), Value::Nil);

    assert_eq!(
        err(&mut c, &["BLPOP", "k", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        err(&mut c, &["BLPOP", "k", "abc"]),
        "ERR timeout is not a float or out of range"
    );
    // Redis casts the milliseconds to a long long, which makes inf
    // negative on x86-64.
    assert_eq!(
        err(&mut c, &["BZPOPMAX", "k", "inf"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        err(&mut c, &["BLMPOP", "x", "1", "k", "LEFT"]),
        "ERR timeout is not a float or out of range"
    );
    assert_eq!(
        err(&mut c, &["BLMPOP", "0", "0", "k", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["BZMPOP", "0", "1", "k", "MIN", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["BLMOVE", "k", "d", "UP", "LEFT", "0"]),
        "ERR syntax error"
    );
}

#[test]
fn first_blocked_is_first_served() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut clients: Vec<Deferred> = (0..3).map(|_| Deferred::new(&srv)).collect();
    for (i, rd) in clients.iter_mut().enumerate() {
        rd.send(&["BLPOP", "q", "0"]);
        wait_blocked(&mut c, i + 1);
    }
    // One push of three: each waiter gets one, in the order they blocked.
    q::<i64>(&mut c, &["RPUSH", "q", "a", "b", "c"]);
    for (rd, v) in clients.iter_mut().zip(["a", "b", "c"]) {
        assert_eq!(rd.recv_ok(), pair("q", v));
    }
    // One element at a time, with the order of blocking reversed.
    for (i, rd) in clients.iter_mut().rev().enumerate() {
        rd.send(&["BLPOP", "q", "0"]);
        wait_blocked(&mut c, i + 1);
    }
    for v in ["x", "y", "z"] {
        q::<i64>(&mut c, &["RPUSH", "q", v]);
    }
    for (rd, v) in clients.iter_mut().rev().zip(["x", "y", "z"]) {
        assert_eq!(rd.recv_ok(), pair("q", v));
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "q"]), 0);
}

/// Redis's "BRPOPLPUSH with multiple blocked clients": two clients send
/// their commands microseconds apart, and the server's two event loops may
/// run the second first. The queue still follows the order they were sent
/// (the first must get WRONGTYPE from its destination, the second the
/// element), so the Redis test never waits for ever on the first. Before
/// the queue followed arrival, two runs in three of this test saw the
/// second queued first (twice in 200 rounds each); busy threads beside the
/// server make it likelier.
/// Two threads spinning (for at most a minute) while alive, so that the
/// server's event loops are descheduled now and then, as on a busy host.
struct Spinners {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Spinners {
    fn start() -> Spinners {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let deadline = Instant::now() + Duration::from_secs(60);
                    while !stop.load(std::sync::atomic::Ordering::Relaxed)
                        && Instant::now() < deadline
                    {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Spinners { stop, threads }
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.threads.drain(..).for_each(|t| t.join().unwrap());
    }
}

#[test]
fn commands_sent_microseconds_apart_queue_in_the_order_sent() {
    const ROUNDS: usize = 200;
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let busy = Spinners::start();
    let brpoplpush = |dst: &str| cmd(&["BRPOPLPUSH", "blist", dst, "0"]).get_packed_command();
    let (first_cmd, second_cmd) = (brpoplpush("target1"), brpoplpush("target2"));
    let wrongtype = format!("-{}\r\n", common::WRONGTYPE);
    let mut inverted = 0;
    for round in 0..ROUNDS {
        let mut first = srv.raw();
        let mut second = srv.raw();
        for s in [&mut first, &mut second] {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            send_raw(s, b"PING\r\n");
            assert_eq!(read_exactly(s, 7), b"+PONG\r\n");
        }
        q::<i64>(&mut c, &["DEL", "blist", "target1", "target2"]);
        q::<()>(&mut c, &["SET", "target1", "nolist"]);
        send_raw(&mut first, &first_cmd);
        send_raw(&mut second, &second_cmd);
        wait_blocked(&mut c, 2);
        q::<i64>(&mut c, &["LPUSH", "blist", "foo"]);
        // Either way the second gets the element: after the first's
        // WRONGTYPE, or before it, the first then waiting on.
        assert_eq!(
            read_exactly(&mut second, 9),
            b"$3\r\nfoo\r\n",
            "round {round}"
        );
        first
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut got = vec![0u8; wrongtype.len()];
        match std::io::Read::read_exact(&mut first, &mut got) {
            Ok(()) => assert_eq!(got, wrongtype.as_bytes(), "round {round}"),
            Err(_) => {
                inverted += 1;
                if inverted == 3 {
                    break;
                }
            }
        }
    }
    drop(busy);
    assert_eq!(
        inverted, 0,
        "the second command was queued first {inverted} times"
    );
}

#[test]
fn transactions_and_scripts_are_seen_whole_and_never_block() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut rd = Deferred::new(&srv);
    rd.send(&["BLPOP", "k", "0"]);
    wait_blocked(&mut c, 1);
    // Pushed and popped inside one EXEC: nothing was ever there to serve.
    let _: Value = redis::pipe()
        .atomic()
        .cmd("LPUSH")
        .arg("k")
        .arg("a")
        .cmd("LPOP")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!(info_field(&mut c, "blocked_clients"), 1);
    // A key of another type at the end of a transaction does not serve
    // (nor fail) the waiter.
    let _: Value = redis::pipe()
        .atomic()
        .cmd("LPUSH")
        .arg("k")
        .arg("a")
        .cmd("DEL")
        .arg("k")
        .cmd("SET")
        .arg("k")
        .arg("str")
        .query(&mut c)
        .unwrap();
    assert_eq!(info_field(&mut c, "blocked_clients"), 1);
    q::<i64>(&mut c, &["DEL", "k"]);
    // Served after the whole EXEC: the last element pushed to the head.
    let _: Value = redis::pipe()
        .atomic()
        .cmd("LPUSH")
        .arg("k")
        .arg("x")
        .cmd("LPUSH")
        .arg("k")
        .arg("y")
        .query(&mut c)
        .unwrap();
    assert_eq!(rd.recv_ok(), pair("k", "y"));
    assert_eq!(strs(&mut c, &["LRANGE", "k", "0", "-1"]), ["x"]);

    // A script's pushes likewise, once it has finished.
    rd.send(&["BZPOPMAX", "z", "0"]);
    wait_blocked(&mut c, 1);
    let _: Value = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('zadd', KEYS[1], 1, 'a') redis.call('zadd', KEYS[1], 5, 'e') return 1",
            "1",
            "z",
        ],
    );
    assert_eq!(
        rd.recv_ok(),
        Value::Array(vec![bulk("z"), bulk("e"), bulk("5")])
    );

    // Blocking commands in MULTI, or BLMPOP in a script, answer at once, as a timeout.
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("BLPOP")
        .arg("k")
        .arg("0")
        .cmd("BLPOP")
        .arg("k")
        .arg("0")
        .cmd("BRPOPLPUSH")
        .arg("k")
        .arg("d")
        .arg("0")
        .query(&mut c)
        .unwrap();
    assert_eq!(replies, [pair("k", "x"), Value::Nil, Value::Nil]);
    let v: Value = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('blmpop', 0, 1, 'k', 'LEFT')",
            "0",
        ],
    );
    assert_eq!(v, Value::Nil);
    // Redis 7.0's BLPOP family is `noscript`: refused, not run.
    let e: String = q(
        &mut c,
        &["EVAL", "return redis.pcall('blpop', 'k', 0)['err']", "0"],
    );
    assert_eq!(e, "ERR This Redis command is not allowed from script");
    assert_eq!(info_field(&mut c, "blocked_clients"), 0);
}

#[test]
fn blmove_chains_through_blocked_destinations() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut first = Deferred::new(&srv);
    let mut second = Deferred::new(&srv);
    let mut last = Deferred::new(&srv);
    first.send(&["BLMOVE", "a", "b", "RIGHT", "LEFT", "0"]);
    wait_blocked(&mut c, 1);
    second.send(&["BRPOPLPUSH", "b", "c", "0"]);
    wait_blocked(&mut c, 2);
    last.send(&["BLPOP", "c", "0"]);
    wait_blocked(&mut c, 3);
    q::<i64>(&mut c, &["RPUSH", "a", "foo"]);
    // Everything moved before the push's reply: the writer's next command
    // sees the final state.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b", "c"]), 0);
    assert_eq!(first.recv_ok(), bulk("foo"));
    assert_eq!(second.recv_ok(), bulk("foo"));
    assert_eq!(last.recv_ok(), pair("c", "foo"));

    // A circle ends where it started, once each waiter has had its turn.
    first.send(&["BRPOPLPUSH", "l1", "l2", "0"]);
    wait_blocked(&mut c, 1);
    second.send(&["BRPOPLPUSH", "l2", "l1", "0"]);
    wait_blocked(&mut c, 2);
    q::<i64>(&mut c, &["RPUSH", "l1", "x"]);
    assert_eq!(first.recv_ok(), bulk("x"));
    assert_eq!(second.recv_ok(), bulk("x"));
    assert_eq!(strs(&mut c, &["LRANGE", "l1", "0", "-1"]), ["x"]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l2"]), 0);
}

#[test]
fn wrong_types() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let wrongtype = common::WRONGTYPE;
    q::<()>(&mut c, &["SET", "s", "v"]);
    // At call time: WRONGTYPE at once, from the first key that is not empty.
    assert_eq!(err(&mut c, &["BLPOP", "missing", "s", "0"]), wrongtype);
    assert_eq!(err(&mut c, &["BZPOPMIN", "s", "0"]), wrongtype);
    assert_eq!(err(&mut c, &["BLMPOP", "0", "1", "s", "LEFT"]), wrongtype);
    assert_eq!(
        err(&mut c, &["BLMOVE", "s", "d", "LEFT", "LEFT", "0"]),
        wrongtype
    );
    // A non-empty list before it serves without looking further.
    q::<i64>(&mut c, &["RPUSH", "l", "v"]);
    assert_eq!(
        q::<Value>(&mut c, &["BLPOP", "l", "s", "0"]),
        pair("l", "v")
    );
    // BRPOPLPUSH checks the destination once there is something to move.
    q::<i64>(&mut c, &["RPUSH", "l", "v"]);
    assert_eq!(err(&mut c, &["BRPOPLPUSH", "l", "s", "0"]), wrongtype);

    // While waiting: a destination of another type ends the wait with
    // WRONGTYPE and leaves the element; the next waiter still gets it.
    q::<i64>(&mut c, &["DEL", "l"]);
    let mut rd1 = Deferred::new(&srv);
    let mut rd2 = Deferred::new(&srv);
    rd1.send(&["BLMOVE", "l", "s", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut c, 1);
    rd2.send(&["BLMOVE", "l", "good", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut c, 2);
    q::<i64>(&mut c, &["RPUSH", "l", "e"]);
    assert_eq!(rd1.recv(), Err(wrongtype.to_string()));
    assert_eq!(rd2.recv_ok(), bulk("e"));
    assert_eq!(strs(&mut c, &["LRANGE", "good", "0", "-1"]), ["e"]);
}

#[test]
fn client_unblock() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut rd = Deferred::new(&srv);
    let id = rd.id().to_string();
    for (reason, expect) in [
        (None, Ok(Value::Nil)),
        (Some("TIMEOUT"), Ok(Value::Nil)),
        (
            Some("error"),
            Err("UNBLOCKED client unblocked via CLIENT UNBLOCK".to_string()),
        ),
    ] {
        rd.send(&["BLMPOP", "0", "1", "l", "LEFT"]);
        wait_blocked(&mut c, 1);
        let mut args = vec!["CLIENT", "UNBLOCK", &id];
        args.extend(reason);
        assert_eq!(q::<i64>(&mut c, &args), 1);
        assert_eq!(rd.recv(), expect, "{reason:?}");
    }
    // BLMOVE's timeout reply is a nil bulk, not a nil array.
    rd.send(&["BLMOVE", "l", "d", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id]), 1);
    assert_eq!(rd.recv_ok(), Value::Nil);

    // Not blocked: 0.
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id]), 0);
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", "999999"]), 0);
    assert_eq!(
        err(&mut c, &["CLIENT", "UNBLOCK", "abc"]),
        common::NOT_INTEGER
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "UNBLOCK", &id, "maybe"]),
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    );
    // Still usable, and served normally afterwards.
    rd.send(&["BLPOP", "l", "0"]);
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["LPUSH", "l", "foo"]);
    assert_eq!(rd.recv_ok(), pair("l", "foo"));
}

#[test]
fn a_disconnected_waiter_leaves_the_queue() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut gone = Deferred::new(&srv);
    let mut stays = Deferred::new(&srv);
    gone.send(&["BLPOP", "k", "0"]);
    wait_blocked(&mut c, 1);
    stays.send(&["BLPOP", "k", "0"]);
    wait_blocked(&mut c, 2);
    drop(gone);
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["RPUSH", "k", "a", "b"]);
    assert_eq!(stays.recv_ok(), pair("k", "a"));
    assert_eq!(strs(&mut c, &["LRANGE", "k", "0", "-1"]), ["b"]);

    // CLIENT KILL of a blocked client too.
    stays.send(&["BLPOP", "other", "0"]);
    wait_blocked(&mut c, 1);
    let id = {
        let list: String = q(&mut c, &["CLIENT", "LIST"]);
        list.lines()
            .find(|l| l.contains("flags=b"))
            .and_then(|l| l.strip_prefix("id="))
            .and_then(|l| l.split(' ').next())
            .unwrap()
            .to_string()
    };
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "KILL", "ID", &id]), 1);
    wait_blocked(&mut c, 0);
    assert_eq!(info_field(&mut c, "total_blocking_keys"), 0);
    q::<i64>(&mut c, &["RPUSH", "other", "kept"]);
    assert_eq!(strs(&mut c, &["LRANGE", "other", "0", "-1"]), ["kept"]);
}

#[test]
fn commands_pipelined_behind_a_blocked_one_wait_for_it() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut rd = Deferred::new(&srv);
    rd.send(&["BLPOP", "k", "0"]);
    rd.send(&["RPUSH", "k", "mine"]);
    rd.send(&["LRANGE", "k", "0", "-1"]);
    wait_blocked(&mut c, 1);
    // The queued RPUSH has not run: the blocked client itself is stuck.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    q::<i64>(&mut c, &["RPUSH", "k", "other"]);
    assert_eq!(rd.recv_ok(), pair("k", "other"));
    assert_eq!(rd.recv_ok(), Value::Int(1));
    assert_eq!(rd.recv_ok(), Value::Array(vec![bulk("mine")]));
}

#[test]
fn served_moves_dirty_watched_keys() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut rd = Deferred::new(&srv);
    let mut watcher = srv.conn();
    rd.send(&["BRPOPLPUSH", "src", "dst", "0"]);
    wait_blocked(&mut c, 1);
    q::<()>(&mut watcher, &["WATCH", "dst"]);
    q::<()>(&mut watcher, &["MULTI"]);
    q::<String>(&mut watcher, &["GET", "x"]);
    q::<i64>(&mut c, &["LPUSH", "src", "e"]);
    assert_eq!(rd.recv_ok(), bulk("e"));
    // The push into dst was the blocked client's write: EXEC aborts.
    let r: Value = q(&mut watcher, &["EXEC"]);
    assert_eq!(r, Value::Nil);
}

/// A served pop is one logged write, and at `full` its reply waits for it:
/// once the blocked client has its reply, kill -9 cannot undo the pop (or
/// BLMOVE's push), even though the push that served it was only `delayed`
/// and would otherwise be lost with the process. An fsync is quick, so a
/// reply that did not wait would only sometimes be caught: several rounds.
#[test]
fn served_pops_at_full_survive_kill9() {
    let mut srv = Server::start(&["--delayed-flush-ms", "10000"]);
    for round in 0..8 {
        let (q_key, src, dst) = (
            format!("q{round}"),
            format!("src{round}"),
            format!("dst{round}"),
        );
        let mut c = srv.conn();
        let mut pusher = srv.conn();
        q::<()>(&mut pusher, &["CLIENT", "DURABILITY", "delayed"]);
        let mut popper = Deferred::new(&srv);
        let mut mover = Deferred::new(&srv);
        popper.send(&["BLPOP", &q_key, "0"]);
        wait_blocked(&mut c, 1);
        mover.send(&["BLMOVE", &src, &dst, "RIGHT", "LEFT", "0"]);
        wait_blocked(&mut c, 2);
        q::<i64>(&mut pusher, &["RPUSH", &q_key, "a", "b"]);
        q::<i64>(&mut pusher, &["RPUSH", &src, "x", "y"]);
        assert_eq!(popper.recv_ok(), pair(&q_key, "a"));
        assert_eq!(mover.recv_ok(), bulk("y"));
        srv.kill9();
        srv.restart();
        let mut c = srv.conn();
        assert_eq!(
            strs(&mut c, &["LRANGE", &q_key, "0", "-1"]),
            ["b"],
            "round {round}"
        );
        assert_eq!(
            strs(&mut c, &["LRANGE", &src, "0", "-1"]),
            ["x"],
            "round {round}"
        );
        assert_eq!(
            strs(&mut c, &["LRANGE", &dst, "0", "-1"]),
            ["y"],
            "round {round}"
        );
    }
}

#[test]
fn lmpop_and_zmpop() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        q::<Value>(&mut c, &["LMPOP", "2", "a", "b", "LEFT"]),
        Value::Nil
    );
    q::<i64>(&mut c, &["RPUSH", "b", "1", "2", "3"]);
    assert_eq!(
        q::<Value>(&mut c, &["LMPOP", "2", "a", "b", "RIGHT", "COUNT", "2"]),
        Value::Array(vec![bulk("b"), Value::Array(vec![bulk("3"), bulk("2")])])
    );
    assert_eq!(
        err(
            &mut c,
            &["LMPOP", "2", "a", "b", "LEFT", "COUNT", "1", "COUNT", "2"]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["LMPOP", "5", "a", "LEFT"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["LMPOP", "a", "k", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    q::<i64>(&mut c, &["ZADD", "z", "1", "m1", "2", "m2"]);
    assert_eq!(
        q::<Value>(&mut c, &["ZMPOP", "1", "z", "MIN"]),
        Value::Array(vec![
            bulk("z"),
            Value::Array(vec![Value::Array(vec![bulk("m1"), bulk("1")])])
        ])
    );
    assert_eq!(
        err(&mut c, &["ZMPOP", "1", "z", "LEFT"]),
        "ERR syntax error"
    );
    // Keys of the command for COMMAND GETKEYS: only those numkeys names.
    assert_eq!(
        strs(
            &mut c,
            &["COMMAND", "GETKEYS", "BLMPOP", "0", "2", "k1", "k2", "LEFT", "COUNT", "3"]
        ),
        ["k1", "k2"]
    );
}

/// RESP2 null kinds as Redis sends them: a list wait that times out is a
/// null array, BLMOVE that may not wait (inside MULTI) a null string.
#[test]
fn list_waits_answer_redis_null_kinds() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    for args in [
        &[&b"BLMOVE"[..], b"nope", b"d", b"LEFT", b"LEFT", b"0.01"][..],
        &[&b"BRPOPLPUSH"[..], b"nope", b"d", b"0.01"][..],
        &[&b"BLPOP"[..], b"nope", b"0.01"][..],
    ] {
        send_raw(&mut s, &req(args));
        assert_eq!(read_exactly(&mut s, 5), b"*-1\r\n", "{args:?}");
    }
    send_raw(&mut s, &req(&[b"MULTI"]));
    send_raw(
        &mut s,
        &req(&[b"BLMOVE", b"nope", b"d", b"LEFT", b"LEFT", b"0"]),
    );
    send_raw(&mut s, &req(&[b"EXEC"]));
    let want = b"+OK\r\n+QUEUED\r\n*1\r\n$-1\r\n";
    assert_eq!(read_exactly(&mut s, want.len()), want);
}

/// The reply to a write that served a blocked client waits for that
/// client's own write (the pop) to be durable, so that it can be sent
/// after the served client's reply, as Redis sends them: once the pusher
/// has its reply, a crash brings back the list without the popped element.
#[test]
fn a_write_that_serves_a_blocked_client_is_acknowledged_with_the_pop_durable() {
    let mut srv = Server::start(&[]);
    for round in 0..20 {
        let key = format!("l{round}");
        let mut waiter = Deferred::new(&srv);
        waiter.send(&["BLPOP", &key, "0"]);
        let mut c = srv.conn();
        wait_blocked(&mut c, 1);
        let n: i64 = q(&mut c, &["RPUSH", &key, "x", "y"]);
        assert_eq!(n, 2);
        srv.kill9();
        srv.restart();
        let mut c = srv.conn();
        assert_eq!(
            strs(&mut c, &["LRANGE", &key, "0", "-1"]),
            ["y"],
            "round {round}"
        );
    }
}

/// A blocking XREADGROUP sent by a new connection (after a PING on it if
/// `ping`), then at once `remove` on another: run in the order sent, the
/// read blocks first and is then told its key is gone; run after the
/// removal, it would find no group.
fn a_blocking_read_blocks_before(ping: bool, remove: &[&str]) {
    const ROUNDS: usize = 300;
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let busy = Spinners::start();
    let read: Vec<&str> = "XREADGROUP GROUP g alice BLOCK 0 STREAMS s >"
        .split(' ')
        .collect();
    let read = cmd(&read).get_packed_command();
    let gone = b"-UNBLOCKED the stream key no longer exists\r\n";
    for round in 0..ROUNDS {
        q::<String>(&mut c, &["XADD", "s", "1-1", "f", "v"]);
        q::<()>(&mut c, &["XGROUP", "CREATE", "s", "g", "$"]);
        let mut reader = srv.raw();
        reader
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        if ping {
            send_raw(&mut reader, b"PING\r\n");
            assert_eq!(read_exactly(&mut reader, 7), b"+PONG\r\n");
        }
        send_raw(&mut reader, &read);
        q::<redis::Value>(&mut c, remove);
        let got = read_exactly(&mut reader, gone.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(gone),
            "round {round}"
        );
    }
    drop(busy);
}

/// Redis's "Blocking XREADGROUP: flushed DB": the deferring client is
/// connected and sends at once, before the server has taken the
/// connection in.
#[test]
fn a_blocking_read_sent_just_before_a_flush_blocks_first() {
    a_blocking_read_blocks_before(false, &["FLUSHALL"]);
}

/// Redis's "BRPOPLPUSH with multiple blocked clients": two clients connect
/// and send a blocking move at once, then a push arrives on a third. The
/// first sent is served first: its move fails (its target holds a string)
/// and the second's takes the element. Served while the first had not run
/// yet, the second would take it and the first block for good.
#[test]
fn a_push_serves_the_blocked_move_sent_first_by_a_new_connection() {
    const ROUNDS: usize = 300;
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let busy = Spinners::start();
    let mv = |target: &str| cmd(&["BRPOPLPUSH", "blist", target, "0"]).get_packed_command();
    let (first, second) = (mv("target1"), mv("target2"));
    let wrongtype = b"-WRONGTYPE";
    let foo = b"$3\r\nfoo\r\n";
    for round in 0..ROUNDS {
        q::<()>(&mut c, &["DEL", "blist", "target1", "target2"]);
        q::<()>(&mut c, &["SET", "target1", "nolist"]);
        let mut rd1 = srv.raw();
        send_raw(&mut rd1, &first);
        let mut rd2 = srv.raw();
        send_raw(&mut rd2, &second);
        q::<i64>(&mut c, &["LPUSH", "blist", "foo"]);
        rd1.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let got = read_exactly(&mut rd1, wrongtype.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(wrongtype),
            "round {round}"
        );
        assert_eq!(read_exactly(&mut rd2, foo.len()), foo, "round {round}");
    }
    drop(busy);
}

/// A client blocked for another kind of data does not hold a key's data
/// back: a BLPOP on a list that a BZPOPMIN waits on (for a sorted set)
/// pops at once, and the BZPOPMIN waits on.
#[test]
fn a_wait_for_a_sorted_set_does_not_hold_back_a_lists_items() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut z = srv.raw();
    send_raw(&mut z, &cmd(&["BZPOPMIN", "k", "0"]).get_packed_command());
    wait_blocked(&mut c, 1);
    q::<i64>(&mut c, &["LPUSH", "k", "a"]);
    let mut other = srv.conn();
    let got: Vec<String> = q(&mut other, &["BLPOP", "k", "1"]);
    assert_eq!(got, ["k", "a"]);
    assert_eq!(info_field(&mut c, "blocked_clients"), 1);
}

/// Redis's "Blocking XREADGROUP: key deleted": the deferring client has
/// run a PING, and the DEL may run before the other loop has read the
/// XREADGROUP.
#[test]
fn a_blocking_read_sent_just_before_a_delete_by_a_new_client_blocks_first() {
    a_blocking_read_blocks_before(true, &["DEL", "s"]);
}
