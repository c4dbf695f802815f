//! What clients may hold, against the real server.
//!
//! `client-output-buffer-limit` for every class of client: a normal client
//! whose unwritten replies pass the hard limit is disconnected without them
//! (its commands still ran), one that stays over the soft limit while it
//! reads nothing is disconnected once its seconds are up, and clients under
//! the limits, or with none set (Redis's default for `normal`), are served
//! in full.
//!
//! `maxmemory-clients`: once all clients together hold more, those holding
//! the most are disconnected, except a client with CLIENT NO-EVICT on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::io::Write;
use std::time::{Duration, Instant};

fn client_names(c: &mut redis::Connection) -> String {
    q::<String>(c, &["CLIENT", "LIST"])
}

fn named(srv: &Server, name: &str) -> std::net::TcpStream {
    let mut s = srv.raw();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&req(&[b"CLIENT", b"SETNAME", name.as_bytes()]))
        .unwrap();
    assert_eq!(read_exactly(&mut s, 5), b"+OK\r\n");
    s
}

#[test]
fn a_reply_past_the_hard_limit_closes_the_client_without_it() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let item = "x".repeat(1000);
    for _ in 0..150 {
        let _: i64 = q(&mut c, &["LPUSH", "mylist", &item]);
    }

    // No limit for normal clients by default: the whole reply comes.
    let all: Vec<String> = q(&mut srv.conn(), &["LRANGE", "mylist", "0", "-1"]);
    assert_eq!(all.len(), 150);

    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 100000 0 0",
        ],
    );
    let mut big = named(&srv, "mybiglist");
    big.write_all(&req(&[b"LRANGE", b"mylist", b"0", b"-1"]))
        .unwrap();
    assert_eq!(read_to_close(&mut big), b"", "nothing of the reply is sent");
    assert!(!client_names(&mut c).contains("name=mybiglist"));

    // A reply under the limit is served to the same kind of client.
    let mut small = named(&srv, "small");
    small
        .write_all(&req(&[b"LRANGE", b"mylist", b"0", b"49"]))
        .unwrap();
    let mut r = RespConn::new(small);
    match r.frame() {
        durakv_protocol::Frame::Array(items) => assert_eq!(items.len(), 50),
        other => panic!("{other:?}"),
    }

    // A transaction whose replies pass the limit runs in full; only its
    // reply is lost.
    let mut t = named(&srv, "transaction");
    let mut batch = Vec::new();
    for args in [
        &[&b"MULTI"[..]][..],
        &[b"SET", b"k2", b"v2"],
        &[b"LRANGE", b"mylist", b"0", b"-1"],
        &[b"SET", b"k3", b"v3"],
        &[b"EXEC"],
    ] {
        batch.extend(req(args));
    }
    t.write_all(&batch).unwrap();
    let got = read_to_close(&mut t);
    assert!(
        got.len() < 100_000,
        "{} bytes sent to a client past its limit",
        got.len()
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k2"]), "v2");
    assert_eq!(q::<String>(&mut c, &["GET", "k3"]), "v3");

    // The server goes on, and the limit can be lifted again.
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 0 0",
        ],
    );
    let all: Vec<String> = q(&mut srv.conn(), &["LRANGE", "mylist", "0", "-1"]);
    assert_eq!(all.len(), 150);
}

#[test]
fn a_client_over_the_soft_limit_that_reads_nothing_is_closed_after_its_seconds() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    // Larger than what the loopback socket's buffers take, so most of it
    // stays in the server while the client reads nothing.
    let value = "v".repeat(32 << 20);
    let _: () = q(&mut c, &["SET", "big", &value]);
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 1mb 1",
        ],
    );
    let mut slow = named(&srv, "slow");
    let started = Instant::now();
    slow.write_all(&req(&[b"GET", b"big"])).unwrap();
    eventually("the slow reader is disconnected", || {
        !client_names(&mut c).contains("name=slow")
    });
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1), "closed after {took:?}");
    let got = read_to_close(&mut slow);
    assert!(got.len() < value.len(), "the whole reply went out");

    // One that reads its replies as they come is served in full, however
    // long ago it was last over the soft limit.
    let mut reader = srv.conn();
    for _ in 0..2 {
        let got: String = q(&mut reader, &["GET", "big"]);
        assert_eq!(got.len(), value.len());
        std::thread::sleep(Duration::from_millis(1500));
    }
}

fn info_number(c: &mut redis::Connection, section: &str, name: &str) -> u64 {
    info_field(c, section, name).parse().unwrap()
}

#[test]
fn clients_holding_the_most_go_once_all_pass_maxmemory_clients() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-clients", "2mb"]);
    assert_eq!(info_number(&mut c, "stats", "evicted_clients"), 0);

    // A client exempt from eviction, holding the most of all.
    let mut keeper = named(&srv, "keeper");
    keeper
        .write_all(&req(&[b"CLIENT", b"NO-EVICT", b"on"]))
        .unwrap();
    assert_eq!(read_exactly(&mut keeper, 5), b"+OK\r\n");
    assert!(client_names(&mut c).contains("flags=e"));
    // A SET whose value is announced but only partly sent: the server
    // holds a buffer for the whole of it meanwhile.
    let partial = |s: &mut std::net::TcpStream, announced: usize, sent: usize| {
        s.write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${announced}\r\n").as_bytes())
            .unwrap();
        s.write_all(&vec![b'x'; sent]).unwrap();
    };
    partial(&mut keeper, 1_500_000, 1_000_000);

    // Ten clients each holding 600 KB for a request still arriving: 6 MB
    // together, so with the exempt client's 1.5 MB all of them must go,
    // and the small control connection stays.
    let mut others: Vec<_> = (0..10)
        .map(|i| {
            let mut s = named(&srv, &format!("partial-{i}"));
            partial(&mut s, 600_000, 500_000);
            s
        })
        .collect();
    eventually("clients are evicted", || {
        info_number(&mut c, "stats", "evicted_clients") == 10
    });
    assert!(info_number(&mut c, "memory", "mem_clients_normal") <= 2 << 20);
    let list = client_names(&mut c);
    assert!(list.contains("name=keeper"), "{list}");
    for s in &mut others {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    // Closed by the server: end of stream, or a reset, since the server
    // closes with the client's unread request in its socket.
    let gone = others
        .iter_mut()
        .map(|s| {
            let mut b = [0u8; 1];
            match std::io::Read::read(s, &mut b) {
                Ok(0) => true,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
                Ok(_) => false,
            }
        })
        .filter(|&closed| closed)
        .count();
    assert_eq!(gone, 10, "partial clients disconnected");

    // The exempt client's request completes and runs.
    keeper.write_all(&vec![b'x'; 500_000]).unwrap();
    keeper.write_all(b"\r\n").unwrap();
    assert_eq!(read_exactly(&mut keeper, 5), b"+OK\r\n");
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "k"]), 1_500_000);

    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(info_number(&mut c, "stats", "evicted_clients"), 0);
}
