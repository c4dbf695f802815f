//! Smoke tests of the server skeleton over real sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

#[test]
fn ping_set_get_and_errors() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v");
    let e = redis::cmd("GET").query::<String>(&mut c).unwrap_err();
    assert!(
        e.to_string()
            .contains("wrong number of arguments for 'get' command"),
        "{e}"
    );
    let e = redis::cmd("NOPE")
        .arg("a")
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("unknown command 'NOPE', with args beginning with: 'a'"),
        "{e}"
    );
    // Arguments are listed up to 128 bytes, the last one cut to fit and
    // still closed, as Redis lists them.
    let long = "a".repeat(200);
    let e = redis::cmd("NOPE")
        .arg("x")
        .arg(&long)
        .arg("y")
        .query::<String>(&mut c)
        .unwrap_err();
    let want = format!(
        "unknown command 'NOPE', with args beginning with: 'x' '{}'",
        &long[..124]
    );
    assert!(e.to_string().contains(&want), "{e}");
    assert!(!e.to_string().contains("'y'"), "{e}");
}

#[test]
fn inline_and_split_frames() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    send_raw(&mut s, b"PING\r\n");
    assert_eq!(read_exactly(&mut s, 7), b"+PONG\r\n");
    let req = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    for b in req.iter() {
        send_raw(&mut s, &[*b]);
    }
    assert_eq!(read_exactly(&mut s, 5 + 8), b"+OK\r\n$2\r\nvv\r\n");
}

#[test]
fn malformed_frame_gets_protocol_error_and_close() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    send_raw(&mut s, b"*1\r\n$-9\r\n");
    let got = read_to_close(&mut s);
    assert_eq!(got, b"-ERR Protocol error: invalid bulk length\r\n");
    // The server keeps running.
    let mut c = srv.conn();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

/// Where Redis looks a key up before it reads the arguments after it, a
/// missing key answers as empty and a key of another type WRONGTYPE, ahead
/// of any complaint about those arguments. Replies from Redis 7.0.15.
#[test]
fn a_missing_or_mistyped_key_answers_before_bad_arguments() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SET", "s", "abc"]);
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    let _: i64 = q(&mut c, &["ZADD", "z", "1", "a"]);
    let _: String = q(&mut c, &["XADD", "x", "1-1", "f", "v"]);
    let _: () = q(&mut c, &["XGROUP", "CREATE", "x", "g", "0"]);
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "nokey", "EX", "0"]),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["XDEL", "nokey", "bad"]), 0);
    assert_eq!(q::<i64>(&mut c, &["XACK", "nokey", "g", "bad"]), 0);
    assert_eq!(q::<i64>(&mut c, &["XACK", "x", "nogroup", "bad"]), 0);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "nokey", "0", "1", "2"]), 0);
    for args in [
        &["GETEX", "h", "EX", "0"][..],
        &["XDEL", "s", "bad"],
        &["XACK", "s", "g", "bad"],
        &["BITCOUNT", "h", "0"],
        &["ZUNION", "1", "s", "AGGREGATE", "avg"],
        &["ZINTERSTORE", "d", "2", "z", "s", "WEIGHTS", "1", "x"],
        &["ZDIFF", "2", "z", "s", "FOO"],
        &["ZINTERCARD", "2", "z", "s", "LIMIT", "x"],
        &["XINFO", "STREAM", "s", "FULL", "COUNT", "abc"],
        &["XCLAIM", "s", "g", "c", "abc", "1-1"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(
        err(&mut c, &["XCLAIM", "nokey", "g", "c", "abc", "1-1"]),
        "NOGROUP No such key 'nokey' or consumer group 'g'"
    );
    assert_eq!(
        err(
            &mut c,
            &["XINFO", "STREAM", "nokey", "FULL", "COUNT", "abc"]
        ),
        "ERR no such key"
    );
    assert_eq!(
        err(&mut c, &["XINFO", "stream", "x", "FULL", "COUNT"]),
        "ERR unknown subcommand or wrong number of arguments for 'stream'. Try XINFO HELP."
    );
    // The other way round: XAUTOCLAIM and XPENDING read their arguments
    // (XPENDING its count first) before the key.
    assert_eq!(
        err(&mut c, &["XAUTOCLAIM", "s", "g", "c", "0", "abc"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        err(&mut c, &["XPENDING", "x", "g", "abc", "-", "+", "10"]),
        "ERR value is not an integer or out of range"
    );
    // With the key present and right, the arguments are judged.
    assert_eq!(
        err(&mut c, &["GETEX", "s", "EX", "0"]),
        "ERR invalid expire time in 'getex' command"
    );
    assert_eq!(err(&mut c, &["BITCOUNT", "s", "0"]), "ERR syntax error");
    assert_eq!(
        err(&mut c, &["XDEL", "x", "bad"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
}

/// Replies found different from Redis 7.0.15's by a differential fuzz, each
/// now as Redis gives it (bytes and texts from Redis 7.0.15).
#[test]
fn replies_as_redis_7_0_gives_them() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    // -0 ties with 0: members of equal score in member order.
    let _: i64 = q(&mut c, &["ZADD", "zb", "0", "a", "0", "c"]);
    let _: i64 = q(&mut c, &["ZADD", "z1", "0", "b"]);
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "ZUNION",
                "2",
                "z1",
                "zb",
                "WEIGHTS",
                "-1",
                "1",
                "WITHSCORES"
            ]
        ),
        ["a", "0", "b", "-0", "c", "0"]
    );
    // BLMPOP/BZMPOP read numkeys, the end and COUNT before the timeout,
    // and a timeout no long long holds is "negative", as Redis's cast
    // makes it.
    assert_eq!(
        err(&mut c, &["BLMPOP", "abc", "1", "l", "MIDDLE"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["BLMPOP", "-1", "0", "l", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["BZMPOP", "abc", "1", "z", "MIN", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    for t in ["inf", "1e400", "9223372036854775807"] {
        assert_eq!(
            err(&mut c, &["BLPOP", "l", t]),
            "ERR timeout is negative",
            "{t}"
        );
    }
    // BITFIELD_RO reads every subcommand before refusing a write; BITCOUNT
    // answers a reversed negative range before reading BIT/BYTE.
    let _: () = q(&mut c, &["SET", "k", "abc"]);
    assert!(err(&mut c, &["BITFIELD_RO", "k", "SET", "x8", "0", "5"])
        .starts_with("ERR Invalid bitfield type."));
    assert_eq!(
        err(&mut c, &["BITFIELD_RO", "k", "SET", "i8", "0", "5"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "k", "-6", "-7", "FOO"]), 0);
    // DUMP compresses only what saves more than 4 bytes.
    let _: () = q(&mut c, &["SET", "d", "aanomgpabacaanomgpabac"]);
    let dump: Vec<u8> = q(&mut c, &["DUMP", "d"]);
    assert_eq!(
        dump,
        b"\x00\x16aanomgpabacaanomgpabac\n\x00\xfc+\x91'I3\x9b\xa3"
    );
    // A script's NaN double keeps its sign; LOLWUT is verbatim text.
    assert_eq!(
        q::<String>(&mut c, &["EVAL", "return {double=0/0}", "0"]),
        "-nan"
    );
    let mut r = RespConn::new(srv.raw());
    r.send(&["HELLO", "3"]);
    r.frame();
    r.send(&["EVAL", "return {double=0/0}", "0"]);
    r.expect(",-nan\r\n");
    r.send(&["LOLWUT"]);
    assert!(matches!(r.frame(), durakv_protocol::Frame::Verbatim(_)));
}
