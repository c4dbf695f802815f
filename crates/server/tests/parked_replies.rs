//! Replies held for an fsync and written by the log's thread
//! (`crate::parked`): they reach each client whole and in order, whether
//! the socket takes them at once or the connection has to finish the
//! write itself, and only once the writes they acknowledge are durable.
//! Each test runs with fsyncs led by the event loops (the default) and by
//! the log's writer threads (`--wal-sync-inline no`), which is where the
//! replies of every connection are written from another thread.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use durakv_protocol::Frame;
use std::io::Write;
use std::time::Duration;

const INLINE: [&str; 2] = ["yes", "no"];

fn bulk_of(f: &Frame) -> Vec<u8> {
    match f {
        Frame::Bulk(b) => b.to_vec(),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

fn int_of(f: &Frame) -> i64 {
    match f {
        Frame::Integer(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// A client with a small receive window, so that the socket takes only
/// part of what is held for it.
fn narrow_client(port: u16) -> std::net::TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    s.connect(&addr.into()).unwrap();
    s.into()
}

/// A `full` reader's GETs of a `delayed` write are held until the write is
/// durable; its client reads nothing for a while, through a narrow receive
/// window, so the socket takes only part of 8 MiB of replies when they are
/// released. Whether the log's thread writes them or the connection does
/// depends on whether the fsync or the connection's turn ends first (the
/// unit test `send_held_writes_met_replies_in_order_and_keeps_what_the_socket_refused`
/// takes the first path for certain); either way they arrive whole and in
/// order.
#[test]
fn held_replies_larger_than_the_socket_arrive_whole_and_in_order() {
    for inline in INLINE {
        let srv = Server::start(&["--delayed-flush-ms", "10000", "--wal-sync-inline", inline]);
        let mut writer = srv.conn();
        let _: () = q(&mut writer, &["CLIENT", "DURABILITY", "delayed"]);
        for round in 0..4u32 {
            let key = format!("big:{round}");
            let value: Vec<u8> = (0..1024 * 1024u32)
                .map(|i| ((i + round) % 251) as u8)
                .collect();
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg(&value)
                .query(&mut writer)
                .unwrap();
            let mut pipeline = Vec::new();
            for _ in 0..8 {
                pipeline.extend(req(&[b"GET", key.as_bytes()]));
            }
            pipeline.extend(req(&[b"SET", b"small", b"v"]));
            pipeline.extend(req(&[b"GET", b"small"]));
            pipeline.extend(req(&[b"INCR", b"n"]));
            let mut c = RespConn::new(narrow_client(srv.port));
            c.s.write_all(&pipeline).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            for i in 0..8 {
                assert!(
                    bulk_of(&c.frame()) == value,
                    "GET {i}, round {round}, inline {inline}"
                );
            }
            assert_eq!(c.frame(), Frame::Simple("OK".into()));
            assert_eq!(bulk_of(&c.frame()), b"v");
            assert_eq!(int_of(&c.frame()), i64::from(round) + 1);
            c.send(&["PING"]);
            c.expect("+PONG\r\n");
        }
    }
}

/// Clients sending pipelines of 1 to 8 INCRs each read every reply in
/// order, while others close with writes in flight; after a kill -9, every
/// acknowledged increment is there.
#[test]
fn concurrent_clients_get_their_replies_in_order_and_acknowledged_writes_survive() {
    const CLIENTS: usize = 12;
    const ROUNDS: usize = 120;
    for inline in INLINE {
        let mut srv = Server::start(&["--durability", "full", "--wal-sync-inline", inline]);
        let port = srv.port;
        let workers: Vec<_> = (0..CLIENTS)
            .map(|t| {
                std::thread::spawn(move || {
                    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                    let mut c = RespConn::new(s);
                    let key = format!("counter:{t}");
                    let mut acked = 0i64;
                    for round in 0..ROUNDS {
                        let depth = 1 + (round * 7 + t) % 8;
                        let mut batch = Vec::new();
                        for _ in 0..depth {
                            batch.extend(req(&[b"INCR", key.as_bytes()]));
                        }
                        c.s.write_all(&batch).unwrap();
                        // Every third client closes halfway with a batch in
                        // flight: its replies have nowhere to go.
                        if t % 3 == 2 && round == ROUNDS / 2 {
                            return (key, acked, false);
                        }
                        for _ in 0..depth {
                            let n = int_of(&c.frame());
                            assert_eq!(n, acked + 1, "{key}, inline {inline}");
                            acked = n;
                        }
                    }
                    (key, acked, true)
                })
            })
            .collect();
        let results: Vec<(String, i64, bool)> =
            workers.into_iter().map(|w| w.join().unwrap()).collect();
        let mut c = srv.conn();
        for (key, acked, finished) in &results {
            let now: i64 = q(&mut c, &["GET", key]);
            if *finished {
                assert_eq!(now, *acked, "{key}");
            } else {
                // The closing client's last batch ran, unanswered.
                assert!(now >= *acked, "{key}: {now} < {acked}");
            }
        }
        srv.kill9();
        srv.restart();
        let mut c = srv.conn();
        for (key, acked, _) in &results {
            let now: i64 = q(&mut c, &["GET", key]);
            assert!(
                now >= *acked,
                "{key} lost acknowledged increments: {now} < {acked}"
            );
        }
    }
}
