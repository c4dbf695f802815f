//! MONITOR against the real binary: what is shown, in which order, with
//! which database and origin, what is hidden or redacted, and how a
//! monitor leaves (RESET, closing).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use common::{err as error, try_q as query};
use durakv_protocol::Frame;
use std::io::{Read, Write};
use std::time::Duration;

/// A connection in MONITOR mode.
fn monitor(srv: &Server) -> RespConn {
    let s = srv.raw();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut m = RespConn::new(s);
    m.send(&["MONITOR"]);
    assert_eq!(m.frame(), Frame::Simple("OK".into()));
    m
}

/// The next monitor line, with its timestamp checked and cut off:
/// `[db origin] "arg" ...`.
fn line(m: &mut RespConn) -> String {
    let Frame::Simple(text) = m.frame() else {
        panic!("a monitor line is a status reply");
    };
    let text = String::from_utf8(text.to_vec()).unwrap();
    let (stamp, rest) = text.split_once(' ').unwrap();
    let (secs, micros) = stamp.split_once('.').unwrap();
    assert!(secs.parse::<u64>().unwrap() > 1_600_000_000, "{text}");
    assert_eq!(micros.len(), 6, "{text}");
    rest.to_string()
}

/// `[db addr]` as the server names the client `c`.
fn origin(c: &mut redis::Connection, db: usize) -> String {
    let info: String = q(c, &["CLIENT", "INFO"]);
    let addr = info
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    format!("[{db} {addr}]")
}

#[test]
fn monitor_shows_each_command_once_it_ran_with_its_client_and_database() {
    let srv = Server::start(&[]);
    // Connected first: the client library's own CLIENT SETINFO calls are
    // not part of what is checked.
    let mut c = srv.conn();
    let me = origin(&mut c, 0);
    let mut m = monitor(&srv);

    let _: () = q(&mut c, &["SET", "foo", "bar baz"]);
    let _: Option<String> = q(&mut c, &["GET", "foo"]);
    assert_eq!(line(&mut m), format!("{me} \"SET\" \"foo\" \"bar baz\""));
    assert_eq!(line(&mut m), format!("{me} \"GET\" \"foo\""));

    // Arguments are quoted and escaped as Redis does.
    let _: () = q(&mut c, &["SET", "q\"\\", "a\r\n\t\u{1}"]);
    assert_eq!(
        line(&mut m),
        format!("{me} \"SET\" \"q\\\"\\\\\" \"a\\r\\n\\t\\x01\"")
    );

    // The database is the one the client is in once the command ran.
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(
        line(&mut m),
        format!("[3 {}] \"SELECT\" \"3\"", &me[3..me.len() - 1])
    );
    assert_eq!(
        line(&mut m),
        format!("[3 {}] \"DBSIZE\"", &me[3..me.len() - 1])
    );
    let _: () = q(&mut c, &["SELECT", "0"]);
    assert_eq!(line(&mut m), format!("{me} \"SELECT\" \"0\""));

    // Refused before running (unknown, wrong arity), administrative
    // (CONFIG, CLIENT LIST, MONITOR) or hidden: not shown. The PING after
    // them is the next line.
    let _ = error(&mut c, &["NOSUCHCOMMAND", "x"]);
    let _ = error(&mut c, &["GET"]);
    let _: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    let _: String = q(&mut c, &["CLIENT", "LIST"]);
    let _: String = q(&mut c, &["PING"]);
    assert_eq!(line(&mut m), format!("{me} \"PING\""));

    // A wrong-type error still ran: shown.
    let _ = error(&mut c, &["LPUSH", "foo", "x"]);
    assert_eq!(line(&mut m), format!("{me} \"LPUSH\" \"foo\" \"x\""));
}

#[test]
fn monitor_orders_transactions_and_scripts_as_redis_does() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let me = origin(&mut c, 0);
    let mut m = monitor(&srv);

    // Queued commands show when EXEC runs them, before the EXEC.
    let _: () = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["SET", "foo", "bar"]);
    let _: redis::Value = q(&mut c, &["EXEC"]);
    assert_eq!(line(&mut m), format!("{me} \"MULTI\""));
    assert_eq!(line(&mut m), format!("{me} \"SET\" \"foo\" \"bar\""));
    assert_eq!(line(&mut m), format!("{me} \"EXEC\""));

    // A transaction that failed to queue: MULTI, then EXEC.
    let _: () = q(&mut c, &["MULTI"]);
    let _ = error(&mut c, &["NOSUCHCOMMAND"]);
    let _ = error(&mut c, &["EXEC"]);
    assert_eq!(line(&mut m), format!("{me} \"MULTI\""));
    assert_eq!(line(&mut m), format!("{me} \"EXEC\""));

    // A script shows before the commands it calls, which come from `lua`
    // in the script's database.
    let _: redis::Value = q(
        &mut c,
        &[
            "EVAL",
            "redis.call('select', 2) return redis.call('set', KEYS[1], ARGV[1])",
            "1",
            "k",
            "v",
        ],
    );
    assert_eq!(
        line(&mut m),
        format!("{me} \"EVAL\" \"redis.call('select', 2) return redis.call('set', KEYS[1], ARGV[1])\" \"1\" \"k\" \"v\"")
    );
    // Shown once it ran, in the database it left the script in.
    assert_eq!(line(&mut m), "[2 lua] \"select\" \"2\"");
    assert_eq!(line(&mut m), "[2 lua] \"set\" \"k\" \"v\"");

    let _: String = q(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=t\nredis.register_function('f', function() return redis.call('get', 'foo') end)",
        ],
    );
    assert!(line(&mut m).contains("\"FUNCTION\" \"LOAD\""));
    let _: String = q(&mut c, &["FCALL", "f", "0"]);
    assert_eq!(line(&mut m), format!("{me} \"FCALL\" \"f\" \"0\""));
    assert_eq!(line(&mut m), "[0 lua] \"get\" \"foo\"");
}

#[test]
fn monitor_redacts_passwords() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let me = origin(&mut c, 0);
    let mut m = monitor(&srv);
    let _ = error(&mut c, &["AUTH", "not-real"]);
    let _ = error(&mut c, &["AUTH", "not-real", "not-a-password"]);
    let _ = query::<redis::Value>(
        &mut c,
        &["HELLO", "2", "AUTH", "not-real", "not-a-password"],
    );
    assert_eq!(line(&mut m), format!("{me} \"AUTH\" \"(redacted)\""));
    assert_eq!(
        line(&mut m),
        format!("{me} \"AUTH\" \"(redacted)\" \"(redacted)\"")
    );
    assert_eq!(
        line(&mut m),
        format!("{me} \"HELLO\" \"2\" \"AUTH\" \"(redacted)\" \"(redacted)\"")
    );
}

#[test]
fn monitors_are_flagged_and_leave_on_reset_or_close() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut m = monitor(&srv);
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert_eq!(list.matches("flags=O").count(), 1, "{list}");

    // A second MONITOR gets no reply at all, as in Redis: the next frame
    // is the PING's.
    m.send(&["MONITOR"]);
    m.send(&["PING"]);
    let mut next = m.frame();
    while next != Frame::Simple("PONG".into()) {
        // Its own PING's line may come first.
        assert!(
            matches!(&next, Frame::Simple(t) if t.ends_with(b"\"PING\"")),
            "{next:?}"
        );
        next = m.frame();
    }

    // RESET leaves MONITOR mode. The PING's own line follows its reply,
    // as in Redis (a line goes out once its command's reply is written).
    m.send(&["RESET"]);
    let mut next = m.frame();
    if matches!(&next, Frame::Simple(t) if t.ends_with(b"\"PING\"")) {
        next = m.frame();
    }
    assert_eq!(next, Frame::Simple("RESET".into()));
    let _: () = q(&mut c, &["SET", "after", "reset"]);
    m.send(&["PING"]);
    assert_eq!(m.frame(), Frame::Simple("PONG".into()));
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    assert!(!list.contains("flags=O"), "{list}");

    // MONITOR inside MULTI fails at EXEC, as in Redis.
    let _: () = q(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["MONITOR"]);
    let v = query::<redis::Value>(&mut c, &["EXEC"]);
    assert!(
        format!("{v:?}").contains("MONITOR isn't allowed for DENY BLOCKING client"),
        "{v:?}"
    );

    // A closed monitor is forgotten: the server keeps serving.
    let m2 = monitor(&srv);
    drop(m2);
    eventually("the closed monitor to be gone", || {
        let list: String = q(&mut c, &["CLIENT", "LIST"]);
        !list.contains("flags=O")
    });
    let _: () = q(&mut c, &["SET", "k", "v"]);
}

#[test]
fn a_monitor_that_stops_reading_is_disconnected_at_the_output_limit() {
    let srv = Server::start(&["--client-output-buffer-limit", "pubsub 64kb 32kb 1"]);
    let mut c = srv.conn();
    let m = monitor(&srv);
    let big = "x".repeat(64 * 1024);
    let monitoring = |c: &mut redis::Connection| {
        let list: String = q(c, &["CLIENT", "LIST"]);
        list.contains("flags=O")
    };
    // The monitor never reads; its lines pile up past the hard limit once
    // the kernel's socket buffers (which loopback autotuning may grow to
    // several MB) are full: write until then, up to 64 MB.
    for i in 0..1024 {
        let _: () = q(&mut c, &["SET", &format!("k{}", i % 16), &big]);
        if i % 32 == 31 && !monitoring(&mut c) {
            break;
        }
    }
    eventually("the slow monitor to be disconnected", || {
        !monitoring(&mut c)
    });
    let _: String = q(&mut c, &["PING"]);
    drop(m);
}

/// A monitor sees a `full` write only after the writer has its reply:
/// the line waits for the write to be durable, and goes out once the
/// reply is written (ioredis's tests disconnect on seeing the line, and a
/// monitor must never show a write a crash could take back).
#[test]
fn a_durable_write_shows_after_its_reply() {
    let srv = Server::start(&["--durability", "full"]);
    let mut m = monitor(&srv);
    let mut writer = srv.raw();
    writer
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    for i in 0..100 {
        let key = format!("k{i}");
        writer
            .write_all(&req(&[b"SET", key.as_bytes(), b"v"]))
            .unwrap();
        let shown = line(&mut m);
        assert!(shown.contains(&format!("\"SET\" \"{key}\"")), "{shown}");
        // The reply is already in the writer's socket.
        writer.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 5];
        let got = writer.read(&mut buf);
        writer.set_nonblocking(false).unwrap();
        assert!(
            matches!(got, Ok(5)) && &buf == b"+OK\r\n",
            "write {i}: the monitor line came before the reply ({got:?})"
        );
    }
}
