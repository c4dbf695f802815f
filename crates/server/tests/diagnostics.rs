//! What an operator or a client library's tests learn about commands
//! that ran, against the real binary: SLOWLOG, the latency monitor,
//! LATENCY HISTOGRAM and INFO latencystats, CLIENT LIST's `cmd`, and
//! DEBUG ERROR.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use redis::Value;

/// SLOWLOG GET's entries as (id, micros, args, addr, name).
fn slowlog(c: &mut redis::Connection) -> Vec<(i64, i64, Vec<String>, String, String)> {
    let v: Value = q(c, &["SLOWLOG", "GET", "-1"]);
    let Value::Array(entries) = v else {
        panic!("SLOWLOG GET is an array: {v:?}");
    };
    entries
        .into_iter()
        .map(|e| {
            let (id, _time, micros, args, addr, name): (
                i64,
                i64,
                i64,
                Vec<String>,
                String,
                String,
            ) = redis::from_redis_value(e).unwrap();
            (id, micros, args, addr, name)
        })
        .collect()
}

fn log_everything(c: &mut redis::Connection) {
    let _: () = q(c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let _: () = q(c, &["SLOWLOG", "RESET"]);
}

#[test]
fn slowlog_keeps_commands_with_their_client_and_hides_passwords() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CLIENT", "SETNAME", "app"]);
    // The default threshold (10 ms) keeps quick commands out.
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]), 0);

    log_everything(&mut c);
    let _: () = q(&mut c, &["SET", "k", "v2"]);
    let _ = try_q::<()>(&mut c, &["AUTH", "nobody", "secret"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "masterauth", "hunter2"]);
    let _: () = q(&mut c, &["ACL", "SETUSER", "bob", "on", ">pw", "+get"]);
    let long = "x".repeat(200);
    let _: () = q(&mut c, &["SET", "long", &long]);
    let log = slowlog(&mut c);
    let args: Vec<Vec<String>> = log.iter().map(|e| e.2.clone()).collect();
    // Newest first; the RESET itself is the oldest entry.
    assert_eq!(args.last().unwrap(), &["SLOWLOG", "RESET"]);
    assert_eq!(
        args[0],
        [
            "SET",
            "long",
            &format!("{}... (72 more bytes)", "x".repeat(128))
        ]
    );
    assert_eq!(
        args[1],
        [
            "ACL",
            "SETUSER",
            "(redacted)",
            "(redacted)",
            "(redacted)",
            "(redacted)"
        ]
    );
    assert_eq!(args[2], ["CONFIG", "SET", "masterauth", "(redacted)"]);
    assert_eq!(args[3], ["AUTH", "(redacted)", "(redacted)"]);
    assert_eq!(args[4], ["SET", "k", "v2"]);
    let ids: Vec<i64> = log.iter().map(|e| e.0).collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1] + 1), "{ids:?}");
    let info: String = q(&mut c, &["CLIENT", "INFO"]);
    assert!(info.contains(&format!("addr={} ", log[0].3)), "{info}");
    assert!(log.iter().all(|e| e.4 == "app"));

    // Bounded by slowlog-max-len, and GET's count.
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-max-len", "3"]);
    for _ in 0..10 {
        let _: () = q(&mut c, &["PING"]);
    }
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]), 3);
    let two: Vec<Value> = q(&mut c, &["SLOWLOG", "GET", "2"]);
    assert_eq!(two.len(), 2);
    assert_eq!(
        err(&mut c, &["SLOWLOG", "GET", "-2"]),
        "ERR count should be greater than or equal to -1"
    );
    // -1 turns it off.
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]);
    let _: () = q(&mut c, &["PING"]);
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]), 0);
}

/// An entry keeps only what it shows: a logged SADD of 100,000 members
/// held its whole 1 MB request until 2026-11-29, as long as the entry
/// lived.
#[test]
fn a_slowlog_entry_keeps_only_what_it_shows() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let used = |c: &mut redis::Connection| -> u64 {
        info_field(c, "memory", "used_memory").parse().unwrap()
    };
    log_everything(&mut c);
    let members: Vec<String> = (0..100_000).map(|i| format!("member-{i}")).collect();
    let before = used(&mut c);
    for round in 0..5 {
        let key = format!("set:{round}");
        let n: i64 = redis::cmd("SADD")
            .arg(&key)
            .arg(&members)
            .query(&mut c)
            .unwrap();
        assert_eq!(n, 100_000);
        let _: i64 = q(&mut c, &["DEL", &key]);
    }
    let after = used(&mut c);
    assert!(
        after < before + 500_000,
        "five logged SADDs left {} bytes",
        after.saturating_sub(before)
    );
    let entries = slowlog(&mut c);
    let sadd = entries
        .iter()
        .find(|e| e.2[0] == "SADD")
        .expect("SADD is logged");
    assert_eq!(sadd.2.len(), 32);
    assert_eq!(sadd.2[31], "... (99971 more arguments)");
}

#[test]
fn slowlog_logs_what_exec_scripts_and_blocked_commands_ran() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    log_everything(&mut c);
    let _: () = q(&mut c, &["MULTI"]);
    let _: () = q(&mut c, &["INCR", "n"]);
    let _: Value = q(&mut c, &["EXEC"]);
    let _: Value = q(
        &mut c,
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "n"],
    );
    let log = slowlog(&mut c);
    let args: Vec<Vec<String>> = log.iter().map(|e| e.2.clone()).collect();
    // EXEC itself is not logged; the script's command is, as the script
    // client's, before the script.
    assert_eq!(args[0][0], "EVAL");
    assert_eq!(args[1], ["incr", "n"]);
    assert_eq!((log[1].3.as_str(), log[1].4.as_str()), ("?:0", ""));
    assert_eq!(args[2], ["INCR", "n"]);
    assert_eq!(args[3], ["MULTI"]);

    // A blocked command is logged once its wait ends, not when it blocks.
    let mut blocked = srv.conn();
    let waiter = std::thread::spawn(move || q::<Value>(&mut blocked, &["BLPOP", "list", "0"]));
    eventually("the client blocks", || {
        let info: String = q(&mut c, &["INFO", "clients"]);
        info.contains("blocked_clients:1")
    });
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]);
    let _: i64 = q(&mut c, &["RPUSH", "list", "a"]);
    waiter.join().unwrap();
    eventually("the BLPOP is logged", || {
        slowlog(&mut c)
            .iter()
            .any(|e| e.2 == ["BLPOP", "list", "0"])
    });
}

#[test]
fn latency_monitor_records_slow_commands_per_second() {
    let srv = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = srv.conn();
    // Off by default.
    let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.05"]);
    assert_eq!(q::<Vec<Value>>(&mut c, &["LATENCY", "LATEST"]).len(), 0);
    assert!(q::<String>(&mut c, &["LATENCY", "DOCTOR"]).contains("latency-monitor-threshold"));

    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "latency-monitor-threshold", "40"],
    );
    let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.05"]);
    let _: () = q(&mut c, &["PING"]);
    let latest: Vec<(String, i64, i64, i64)> = q(&mut c, &["LATENCY", "LATEST"]);
    assert_eq!(latest.len(), 1, "{latest:?}");
    let (event, time, last, max) = &latest[0];
    assert_eq!(event, "command");
    assert!((50..500).contains(last) && last == max, "{latest:?}");
    let history: Vec<(i64, i64)> = q(&mut c, &["LATENCY", "HISTORY", "command"]);
    assert_eq!(history, vec![(*time, *last)]);
    let graph: String = q(&mut c, &["LATENCY", "GRAPH", "command"]);
    assert!(graph.starts_with("command - high"), "{graph}");
    assert_eq!(
        err(&mut c, &["LATENCY", "GRAPH", "nope"]),
        "ERR No samples available for event 'nope'"
    );
    assert!(q::<String>(&mut c, &["LATENCY", "DOCTOR"]).contains("command"));
    assert_eq!(q::<i64>(&mut c, &["LATENCY", "RESET", "nope"]), 0);
    assert_eq!(q::<i64>(&mut c, &["LATENCY", "RESET"]), 1);
    assert_eq!(q::<Vec<Value>>(&mut c, &["LATENCY", "LATEST"]).len(), 0);
}

#[test]
fn latency_histograms_and_latencystats_count_each_command() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]);
    for _ in 0..5 {
        let _: () = q(&mut c, &["SET", "k", "v"]);
    }
    let _: i64 = q(&mut c, &["CLIENT", "ID"]);
    let hist: Vec<Value> = q(&mut c, &["LATENCY", "HISTOGRAM", "set", "client", "nosuch"]);
    let names: Vec<String> = hist
        .iter()
        .step_by(2)
        .map(|v| redis::from_redis_value(v.clone()).unwrap())
        .collect();
    assert_eq!(names, ["client|id", "set"]);
    let (_, calls, _, buckets): (String, i64, String, Vec<i64>) =
        redis::from_redis_value(hist[3].clone()).unwrap();
    assert_eq!(calls, 5);
    // Bucket bounds rise, cumulative counts rise to the calls.
    let bounds: Vec<i64> = buckets.iter().step_by(2).copied().collect();
    let counts: Vec<i64> = buckets.iter().skip(1).step_by(2).copied().collect();
    assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{buckets:?}");
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{buckets:?}");
    assert_eq!(*counts.last().unwrap(), 5);

    let stats: String = q(&mut c, &["INFO", "latencystats"]);
    let line = stats
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .unwrap_or_else(|| panic!("{stats}"));
    assert!(
        line.contains("p50=") && line.contains(",p99=") && line.contains(",p99.9="),
        "{line}"
    );
    assert!(!q::<String>(&mut c, &["INFO"]).contains("latency_percentiles"));

    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50.5 100",
        ],
    );
    assert_eq!(
        strs(
            &mut c,
            &["CONFIG", "GET", "latency-tracking-info-percentiles"]
        )[1],
        "50.5 100"
    );
    let stats: String = q(&mut c, &["INFO", "latencystats"]);
    assert!(
        stats.contains("latency_percentiles_usec_set:p50.5="),
        "{stats}"
    );
    assert!(err(
        &mut c,
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "101"]
    )
    .contains("should sit between [0.0,100.0]"));

    // Off: no histograms; CONFIG RESETSTAT forgets the old ones.
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-tracking", "no"]);
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<Vec<Value>>(&mut c, &["LATENCY", "HISTOGRAM"]).len(), 0);
}

#[test]
fn client_list_shows_the_last_command_of_a_quiet_connection() {
    let srv = Server::start(&[]);
    // Commands sent at once after connecting, then silence: the listing
    // must not keep showing an earlier command.
    let mut sub = RespConn::new(srv.raw());
    sub.send(&["CLIENT", "SETNAME", "listener"]);
    sub.send(&["SUBSCRIBE", "news"]);
    sub.expect("+OK\r\n");
    let _ = sub.frame();
    let mut c = srv.conn();
    eventually("CLIENT LIST shows the SUBSCRIBE", || {
        let list: String = q(&mut c, &["CLIENT", "LIST"]);
        list.lines()
            .any(|l| l.contains("name=listener ") && l.contains(" cmd=subscribe "))
    });
    // Without waiting for a refresh period: it is there at once.
    let mut other = RespConn::new(srv.raw());
    other.send(&["SET", "a", "1"]);
    other.expect("+OK\r\n");
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    let cmds: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split(' ').find(|f| f.starts_with("cmd=")))
        .collect();
    assert!(cmds.contains(&"cmd=set"), "{list}");
}

/// A `full` write's reply is held until its fsync and then written; a
/// listing taken after the client has it shows nothing held (`oll=0`,
/// `omem=0`),
/// not the count of the turn that held it.
#[test]
fn client_list_shows_no_held_reply_once_it_went_out() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for round in 0..20 {
        let mut w = RespConn::new(srv.raw());
        w.send(&["CLIENT", "SETNAME", "writer"]);
        w.expect("+OK\r\n");
        w.send(&["SET", "k", "v"]);
        w.expect("+OK\r\n");
        let list: String = q(&mut c, &["CLIENT", "LIST"]);
        let line = list
            .lines()
            .find(|l| l.contains("name=writer "))
            .unwrap_or_else(|| panic!("no writer in {list}"));
        assert!(line.contains(" oll=0 omem=0 "), "round {round}: {line}");
    }
}

#[test]
fn debug_error_replies_with_the_given_error() {
    let srv = Server::start(&["--enable-debug-command", "yes"]);
    let mut raw = RespConn::new(srv.raw());
    raw.send(&["DEBUG", "ERROR", "LOADING fake message"]);
    raw.expect("-LOADING fake message\r\n");
    raw.send(&["DEBUG", "ERROR", "READONLY no\r\nway"]);
    raw.expect("-READONLY no  way\r\n");
    raw.send(&["PING"]);
    raw.expect("+PONG\r\n");
}

/// DEBUG PROTOCOL's samples, byte for byte as Redis 7.0.15 sends them,
/// in RESP2 and RESP3: client libraries test their parsers with them.
#[test]
fn debug_protocol_sends_each_reply_type() {
    let srv = Server::start(&["--enable-debug-command", "yes"]);
    let resp2 = [
        ("string", "$11\r\nHello World\r\n"),
        ("integer", ":12345\r\n"),
        ("double", "$5\r\n3.141\r\n"),
        ("bignum", "$37\r\n1234567999999999999999999999999999999\r\n"),
        ("null", "$-1\r\n"),
        ("set", "*3\r\n:0\r\n:1\r\n:2\r\n"),
        ("map", "*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n"),
        (
            "attrib",
            "$39\r\nSome real reply following the attribute\r\n",
        ),
        ("push", "-ERR RESP2 is not supported by this command\r\n"),
        ("verbatim", "$25\r\nThis is a verbatim\nstring\r\n"),
        ("true", ":1\r\n"),
    ];
    let resp3 = [
        ("double", ",3.141\r\n"),
        ("bignum", "(1234567999999999999999999999999999999\r\n"),
        ("null", "_\r\n"),
        ("set", "~3\r\n:0\r\n:1\r\n:2\r\n"),
        ("map", "%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n"),
        (
            "attrib",
            "|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n\
             $39\r\nSome real reply following the attribute\r\n",
        ),
        (
            "push",
            ">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n\
             $40\r\nSome real reply following the push reply\r\n",
        ),
        ("verbatim", "=29\r\ntxt:This is a verbatim\nstring\r\n"),
        ("false", "#f\r\n"),
    ];
    let mut raw = RespConn::new(srv.raw());
    for (kind, bytes) in resp2 {
        raw.send(&["DEBUG", "PROTOCOL", kind]);
        raw.expect(bytes);
    }
    raw.send(&["DEBUG", "PROTOCOL", "nope"]);
    raw.expect("-ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false\r\n");
    raw.send(&["HELLO", "3"]);
    let _ = raw.frame();
    for (kind, bytes) in resp3 {
        raw.send(&["DEBUG", "PROTOCOL", kind]);
        raw.expect(bytes);
    }
}

/// `logfile` sends the log to that file, appended to, as in Redis; a file
/// that cannot be opened stops the server at start with Redis's message.
#[test]
fn logfile_receives_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("durakv.log");
    std::fs::write(&path, "an earlier line\n").unwrap();
    let srv = Server::start(&["--logfile", path.to_str().unwrap()]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("an earlier line\n"), "{text}");
    assert!(text.contains("Ready to accept connections"), "{text}");
    assert!(!text.contains('\x1b'), "colour codes in a file: {text:?}");

    let err = try_spawn(
        dir.path(),
        &["--logfile".into(), "/nonexistent/durakv.log".into()],
    )
    .expect_err("a server with an unopenable logfile");
    assert!(
        err.contains("Can't open the log file: /nonexistent/durakv.log"),
        "{err}"
    );
}
