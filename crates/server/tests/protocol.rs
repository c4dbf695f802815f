//! Wire-protocol tests over raw sockets: pipelining, split frames, inline
//! commands, malformed input, size limits, garbage, and RESP3.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::BytesMut;
use common::*;
use durakv_protocol::reply::parse_reply;
use durakv_protocol::Frame;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

/// Reads replies until `n` have been parsed.
fn read_replies(s: &mut TcpStream, n: usize) -> Vec<Frame> {
    let mut buf = BytesMut::new();
    let mut out = Vec::with_capacity(n);
    let mut chunk = [0u8; 64 * 1024];
    while out.len() < n {
        while let Some(f) = parse_reply(&mut buf).expect("well-formed reply") {
            out.push(f);
            if out.len() == n {
                return out;
            }
        }
        let k = s.read(&mut chunk).expect("read");
        assert!(
            k > 0,
            "connection closed after {} of {n} replies",
            out.len()
        );
        buf.extend_from_slice(&chunk[..k]);
    }
    out
}

fn expect_bytes(s: &mut TcpStream, expect: &[u8]) {
    let got = read_exactly(s, expect.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expect)
    );
}

fn assert_alive(srv: &Server) {
    let mut s = srv.raw();
    send_raw(&mut s, b"PING\r\n");
    expect_bytes(&mut s, b"+PONG\r\n");
}

#[test]
fn pipelining_a_thousand_commands_in_one_write() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    let mut batch = Vec::new();
    for i in 0..1000 {
        let v = i.to_string();
        match i % 4 {
            0 => batch.extend(req(&[b"SET", format!("k{i}").as_bytes(), v.as_bytes()])),
            1 => batch.extend(req(&[b"GET", format!("k{}", i - 1).as_bytes()])),
            2 => batch.extend(req(&[b"ECHO", v.as_bytes()])),
            _ => batch.extend(format!("PING {v}\r\n").into_bytes()),
        }
    }
    s.write_all(&batch).unwrap();
    let replies = read_replies(&mut s, 1000);
    for (i, r) in replies.iter().enumerate() {
        let expect = match i % 4 {
            0 => Frame::ok(),
            1 => Frame::bulk_from_str(&(i - 1).to_string()),
            _ => Frame::bulk_from_str(&i.to_string()),
        };
        assert_eq!(r, &expect, "reply {i}");
    }
}

/// Replies far larger than one turn's output (64 KiB) come out whole and
/// in order, interleaved with durable writes whose replies wait for an
/// fsync, while the client is still writing its pipeline.
#[test]
fn pipelined_replies_larger_than_a_turn_stay_in_order() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    let big = vec![b'v'; 40_000];
    s.write_all(&req(&[b"SET", b"big", &big])).unwrap();
    assert_eq!(read_replies(&mut s, 1), vec![Frame::ok()]);
    let mut batch = Vec::new();
    for i in 0..600 {
        if i % 3 == 0 {
            batch.extend(req(&[
                b"SET",
                format!("k{i}").as_bytes(),
                i.to_string().as_bytes(),
            ]));
        } else if i % 3 == 1 {
            batch.extend(req(&[b"GET", b"big"]));
        } else {
            batch.extend(req(&[b"GET", format!("k{}", i - 2).as_bytes()]));
        }
    }
    // Written from another thread: the replies (16 MB) outgrow the
    // socket buffers long before the requests are all sent.
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&batch).unwrap());
    let replies = read_replies(&mut s, 600);
    writer.join().unwrap();
    for (i, r) in replies.iter().enumerate() {
        let expect = match i % 3 {
            0 => Frame::ok(),
            1 => Frame::bulk(bytes::Bytes::from(big.clone())),
            _ => Frame::bulk_from_str(&(i - 2).to_string()),
        };
        assert!(r == &expect, "reply {i} differs");
    }
    s.write_all(&req(&[b"PING"])).unwrap();
    assert_eq!(
        read_replies(&mut s, 1),
        vec![Frame::Simple(bytes::Bytes::from_static(b"PONG"))]
    );
}

#[test]
fn frames_split_at_every_byte() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    let mut input = Vec::new();
    input.extend(req(&[b"SET", b"bin", b"a\r\nb\x00c"]));
    input.extend_from_slice(b"GET bin\r\n");
    input.extend(req(&[b"ECHO", b""]));
    input.extend_from_slice(b"ECHO \"two words\"\n");
    input.extend(req(&[b"PING"]));
    for b in &input {
        s.write_all(&[*b]).unwrap();
        s.flush().unwrap();
    }
    let expect: &[u8] = b"+OK\r\n$6\r\na\r\nb\x00c\r\n$0\r\n\r\n$9\r\ntwo words\r\n+PONG\r\n";
    expect_bytes(&mut s, expect);
}

#[test]
fn inline_commands_with_quotes() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    send_raw(&mut s, b"SET \"my key\" \"tab\\there\\x41\"\r\n");
    expect_bytes(&mut s, b"+OK\r\n");
    send_raw(&mut s, b"GET 'my key'\r\n");
    expect_bytes(&mut s, b"$9\r\ntab\thereA\r\n");
    send_raw(&mut s, b"SET k 'it\\'s'\r\n   \r\nGET k\n");
    expect_bytes(&mut s, b"+OK\r\n$4\r\nit's\r\n");
    send_raw(&mut s, b"  ECHO    spaced   \r\n");
    expect_bytes(&mut s, b"$6\r\nspaced\r\n");
}

#[test]
fn malformed_frames_get_exact_errors_and_close() {
    let srv = Server::start(&[]);
    let cases: &[(&[u8], &str)] = &[
        (b"*x\r\n", "invalid multibulk length"),
        (b"*1\r\n$abc\r\n", "invalid bulk length"),
        (b"*2\r\n$3\r\nGET\r\n+foo\r\n", "expected '$', got '+'"),
        (b"*1\r\n:1\r\n", "expected '$', got ':'"),
        (b"SET \"k v\r\n", "unbalanced quotes in request"),
        (b"SET 'k\r\n", "unbalanced quotes in request"),
        (b"*1\r\n$600000000\r\n", "invalid bulk length"),
        (b"*1\r\n$-2\r\n", "invalid bulk length"),
        (b"*-5x\r\n", "invalid multibulk length"),
    ];
    for (input, msg) in cases {
        let mut s = srv.raw();
        send_raw(&mut s, input);
        let got = read_to_close(&mut s);
        assert_eq!(
            String::from_utf8_lossy(&got),
            format!("-ERR Protocol error: {msg}\r\n"),
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }
    // Replies to commands before the bad frame are still delivered.
    let mut s = srv.raw();
    send_raw(&mut s, b"PING\r\n*1\r\n$x\r\n");
    assert_eq!(
        read_to_close(&mut s),
        b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"
    );
    assert_alive(&srv);
}

#[test]
fn proto_max_bulk_len_is_enforced() {
    let srv = Server::start(&["--proto-max-bulk-len", "1mb"]);
    let mut s = srv.raw();
    send_raw(&mut s, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2097152\r\n");
    assert_eq!(
        read_to_close(&mut s),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    // Up to the limit is fine.
    let mut s = srv.raw();
    let big = vec![b'x'; 1024 * 1024];
    s.write_all(&req(&[b"SET", b"k", &big])).unwrap();
    expect_bytes(&mut s, b"+OK\r\n");
    s.write_all(&req(&[b"STRLEN", b"k"])).unwrap();
    expect_bytes(&mut s, b":1048576\r\n");
    assert_alive(&srv);
}

/// A server that stops answering is as dead as one that exits; fail fast
/// (the harness then SIGKILLs it) rather than let a runaway server eat the
/// machine's memory.
const HANG_TIMEOUT: Duration = Duration::from_secs(3);

#[test]
fn random_garbage_never_kills_the_server() {
    let srv = Server::start(&[]);
    const ALPHABET: &[u8] = b"*$:+-_\r\n\r\n0123456789 \"'\\xabc";
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..3000 {
        let len = 1 + (next() % 48) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                let r = next();
                if r % 4 == 0 {
                    // NUL has its own test (inline_nul_byte_does_not_hang).
                    ((r >> 8) as u8).max(1)
                } else {
                    ALPHABET[(r >> 8) as usize % ALPHABET.len()]
                }
            })
            .collect();
        let mut s = TcpStream::connect(("127.0.0.1", srv.port))
            .unwrap_or_else(|e| panic!("server gone after round {round}: {e}"));
        s.set_read_timeout(Some(HANG_TIMEOUT)).unwrap();
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(Shutdown::Write);
        let mut sink = Vec::new();
        if let Err(e) = s.read_to_end(&mut sink) {
            let hung = matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            );
            assert!(!hung, "server hung on round {round}, input {bytes:?}");
        }
        if round % 500 == 0 {
            assert_alive(&srv);
        }
    }
    assert_alive(&srv);
}

#[test]
fn inline_nul_byte_does_not_hang() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    s.set_read_timeout(Some(HANG_TIMEOUT)).unwrap();
    send_raw(&mut s, b"ECHO a\x00b\r\nPING\r\n");
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 1024];
    let mut replies = Vec::new();
    while replies.len() < 2 {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e) => panic!("no reply to an inline command containing NUL (server hung?): {e}"),
        }
        while let Some(f) = parse_reply(&mut buf).expect("well-formed reply") {
            replies.push(f);
        }
    }
    assert_eq!(replies.last(), Some(&Frame::simple("PONG")), "{replies:?}");
    assert_alive(&srv);
}

#[test]
fn error_replies_never_contain_newlines() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    // A command name and argument carrying CR/LF are echoed in the error.
    s.write_all(&req(&[b"NO\r\nPE", b"a\r\nb"])).unwrap();
    s.write_all(&req(&[b"PING"])).unwrap();
    let replies = read_replies(&mut s, 2);
    let Frame::Error(e) = &replies[0] else {
        panic!("{replies:?}")
    };
    assert!(e.starts_with(b"ERR unknown command 'NO"), "{e:?}");
    assert!(!e.contains(&b'\r') && !e.contains(&b'\n'), "{e:?}");
    assert_eq!(replies[1], Frame::simple("PONG"));
}

#[test]
fn resp3_maps_nulls_and_verbatim() {
    let srv = Server::start(&[]);
    let mut s = srv.raw();
    s.write_all(&req(&[b"HELLO", b"3"])).unwrap();
    let hello = read_replies(&mut s, 1);
    let Frame::Map(pairs) = &hello[0] else {
        panic!("{hello:?}")
    };
    assert!(pairs.contains(&(Frame::bulk_from_str("proto"), Frame::Integer(3))));

    s.write_all(&req(&[b"HSET", b"h", b"f", b"v"])).unwrap();
    expect_bytes(&mut s, b":1\r\n");
    s.write_all(&req(&[b"HGETALL", b"h"])).unwrap();
    expect_bytes(&mut s, b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    s.write_all(&req(&[b"GET", b"missing"])).unwrap();
    expect_bytes(&mut s, b"_\r\n");
    s.write_all(&req(&[b"CONFIG", b"GET", b"maxclients"]))
        .unwrap();
    expect_bytes(&mut s, b"%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n");
    s.write_all(&req(&[b"INFO", b"replication"])).unwrap();
    let info = read_replies(&mut s, 1);
    let Frame::Verbatim(text) = &info[0] else {
        panic!("{info:?}")
    };
    assert!(text.starts_with(b"# Replication\r\nrole:master\r\n"));

    // RESP2 clients get flat arrays and bulk strings for the same replies.
    let mut s2 = srv.raw();
    s2.write_all(&req(&[b"CONFIG", b"GET", b"maxclients"]))
        .unwrap();
    expect_bytes(&mut s2, b"*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n");
    s2.write_all(&req(&[b"GET", b"missing"])).unwrap();
    expect_bytes(&mut s2, b"$-1\r\n");
    s2.write_all(&req(&[b"INFO", b"replication"])).unwrap();
    let info = read_replies(&mut s2, 1);
    assert!(
        matches!(&info[0], Frame::Bulk(b) if b.starts_with(b"# Replication\r\n")),
        "{info:?}"
    );
}

/// A web page can make a browser send an HTTP request to this port; its
/// `POST` or `Host:` line closes the connection unanswered, as in Redis,
/// after what came before it was answered.
#[test]
fn http_post_and_host_lines_close_the_connection_unanswered() {
    let srv = Server::start(&[]);
    for request in [
        &b"PING\r\nPOST / HTTP/1.1\r\nHost: x\r\n\r\nSET k v\r\n"[..],
        &b"PING\r\nHost: x\r\nSET k v\r\n"[..],
    ] {
        let mut s = srv.raw();
        send_raw(&mut s, request);
        assert_eq!(String::from_utf8_lossy(&read_to_close(&mut s)), "+PONG\r\n");
    }
    let mut s = srv.raw();
    send_raw(&mut s, b"EXISTS k\r\n");
    expect_bytes(&mut s, b":0\r\n");
    assert_alive(&srv);
}
