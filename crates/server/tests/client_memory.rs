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
//! the most are disconnected, except a client with CLIENT NO-EVICT on. A
//! client is evicted before the request that took it over runs; what it
//! holds counts its queued MULTI commands, watched keys, subscriptions and
//! tracking prefixes too; a lower limit set by CONFIG SET applies before
//! its reply.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::io::Write;
use std::time::{Duration, Instant};

fn client_names(c: &mut redis::Connection) -> String {
    q::<String>(c, &["CLIENT", "LIST"])
}

/// Sets `client-output-buffer-limit` for normal clients ("hard soft secs").
fn set_normal_limit(c: &mut redis::Connection, limit: &str) {
    let limit = format!("normal {limit}");
    let _: () = q(c, &["CONFIG", "SET", "client-output-buffer-limit", &limit]);
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

    set_normal_limit(&mut c, "100000 0 0");
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
    set_normal_limit(&mut c, "0 0 0");
    let all: Vec<String> = q(&mut srv.conn(), &["LRANGE", "mylist", "0", "-1"]);
    assert_eq!(all.len(), 150);
}

/// A negative count asks for that many random picks, repeats allowed:
/// past what the output buffer's hard limit holds, the client is closed
/// (Redis stops such a reply mid-run), and without a hard limit a count
/// past a million picks is refused rather than built until memory runs out.
#[test]
fn a_random_pick_reply_past_the_hard_limit_closes_the_client() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["HSET", "myhash", "a", "b"]);
    let _: () = q(&mut c, &["SADD", "myset", "a"]);
    let _: () = q(&mut c, &["ZADD", "myzset", "1", "a"]);
    set_normal_limit(&mut c, "1000000 0 0");
    for (i, cmd) in [
        &[&b"HRANDFIELD"[..], b"myhash", b"-999999999"][..],
        &[b"HRANDFIELD", b"myhash", b"-999999999", b"WITHVALUES"],
        &[b"SRANDMEMBER", b"myset", b"-999999999"],
        &[b"ZRANDMEMBER", b"myzset", b"-999999999", b"WITHSCORES"],
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("picker{i}");
        let mut s = named(&srv, &name);
        s.write_all(&req(cmd)).unwrap();
        assert_eq!(read_to_close(&mut s), b"", "{cmd:?}: nothing of the reply");
        assert!(!client_names(&mut c).contains(&format!("name={name} ")));
    }
    // Under the limit, every pick is there.
    let picks: Vec<String> = q(&mut c, &["HRANDFIELD", "myhash", "-1000"]);
    assert_eq!(picks.len(), 1000);
    assert!(picks.iter().all(|f| f == "a"));

    set_normal_limit(&mut c, "0 0 0");
    let err = redis::cmd("HRANDFIELD")
        .arg("myhash")
        .arg("-999999999")
        .query::<Vec<String>>(&mut c)
        .unwrap_err();
    assert!(err.to_string().contains("value is out of range"), "{err}");
}

#[test]
fn a_client_over_the_soft_limit_that_reads_nothing_is_closed_after_its_seconds() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    // Larger than what the loopback socket's buffers take, so most of it
    // stays in the server while the client reads nothing.
    let value = "v".repeat(32 << 20);
    let _: () = q(&mut c, &["SET", "big", &value]);
    set_normal_limit(&mut c, "0 1mb 1");
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

/// A number field of a CLIENT LIST line.
fn list_field(line: &str, name: &str) -> usize {
    line.split(' ')
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse()
        .unwrap()
}

/// Whether the server closed `s`: end of stream, or a reset (it closes
/// with the client's unread bytes in its socket).
fn closed_by_server(s: &mut std::net::TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = [0u8; 1];
    match std::io::Read::read(s, &mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

#[test]
fn a_request_that_takes_its_client_past_maxmemory_clients_does_not_run() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-clients", "1mb"]);
    // Under the limit, a large value is stored.
    let mut s = named(&srv, "big");
    let value = vec![b'v'; 500_000];
    s.write_all(&req(&[b"SET", b"small", &value])).unwrap();
    assert_eq!(read_exactly(&mut s, 5), b"+OK\r\n");
    // One whose buffer alone passes the limit: evicted, and not run.
    let value = vec![b'v'; 2_000_000];
    let _ = s.write_all(&req(&[b"SET", b"big", &value]));
    assert!(closed_by_server(&mut s));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "big"]), 0);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "small"]), 500_000);
    assert_eq!(info_number(&mut c, "stats", "evicted_clients"), 1);
}

/// Sends `request(i)` for i = 0, 1, ... on a new connection (after
/// `setup`), each followed by reading its reply, until the server closes
/// the connection; returns how many it answered.
fn requests_until_evicted(
    srv: &Server,
    setup: &[&[&[u8]]],
    request: impl Fn(usize) -> Vec<u8>,
) -> usize {
    let mut r = RespConn::new(srv.raw());
    r.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for args in setup {
        r.s.write_all(&req(args)).unwrap();
        let _ = r.frame();
    }
    let mut chunk = [0u8; 4096];
    for i in 0..100_000 {
        if r.s.write_all(&request(i)).is_err() {
            return i;
        }
        // One reply per request; the server closing ends the count.
        match std::io::Read::read(&mut r.s, &mut chunk) {
            Ok(0) => return i,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return i,
            Err(e) => panic!("request {i}: {e}"),
            Ok(_) => {}
        }
    }
    panic!("never evicted");
}

#[test]
fn watches_subscriptions_queued_commands_and_prefixes_count_as_client_memory() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-clients", "200kb"]);
    // Each entry takes at least its name: 100-byte names pass 200 KB
    // within 2,000 entries; small replies keep the buffers small.
    let name = |i: usize| format!("{i:0>100}").into_bytes();
    let watched = requests_until_evicted(&srv, &[], |i| req(&[b"WATCH", &name(i)]));
    let channels = requests_until_evicted(&srv, &[], |i| req(&[b"SUBSCRIBE", &name(i)]));
    let patterns = requests_until_evicted(&srv, &[], |i| req(&[b"PSUBSCRIBE", &name(i)]));
    let prefixes = requests_until_evicted(&srv, &[], |i| {
        req(&[b"CLIENT", b"TRACKING", b"on", b"BCAST", b"PREFIX", &name(i)])
    });
    let queued =
        requests_until_evicted(&srv, &[&[b"MULTI"]], |i| req(&[b"SET", &name(i), &name(i)]));
    for (what, n) in [
        ("watched keys", watched),
        ("channels", channels),
        ("patterns", patterns),
        ("prefixes", prefixes),
        ("queued commands", queued),
    ] {
        assert!((100..2000).contains(&n), "{what}: evicted after {n}");
    }
    assert_eq!(info_number(&mut c, "stats", "evicted_clients"), 5);
    // Nothing of theirs is left counted.
    eventually("the evicted clients' memory is gone", || {
        info_number(&mut c, "memory", "mem_clients_normal") < 50_000
    });
}

#[test]
fn a_lower_limit_evicts_before_config_set_answers() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CLIENT", "NO-EVICT", "on"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-clients", "10mb"]);
    // Five clients each holding 300 KB of a request still arriving; CLIENT
    // LIST's qbuf counts a big argument from its first byte, as Redis's.
    let mut held: Vec<_> = (0..5)
        .map(|i| {
            let mut s = named(&srv, &format!("holder-{i}"));
            s.write_all(b"*2\r\n$4\r\nPING\r\n$400000\r\n").unwrap();
            s.write_all(&vec![b'x'; 300_000]).unwrap();
            s
        })
        .collect();
    eventually("the requests arrive", || {
        client_names(&mut c).matches("qbuf=300000 ").count() == 5
    });
    let list = client_names(&mut c);
    let line = list.lines().find(|l| l.contains("name=holder-0")).unwrap();
    let tot = list_field(line, "tot-mem");
    assert!((300_000..1_000_000).contains(&tot), "{line}");
    // Room for about two of them: the rest are gone when the reply comes.
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-clients", "1mb"]);
    let list = client_names(&mut c);
    let left = list.matches("name=holder-").count();
    assert!((1..=2).contains(&left), "{left} left");
    for (i, s) in held.iter_mut().enumerate() {
        if !list.contains(&format!("name=holder-{i} ")) {
            assert!(closed_by_server(s), "holder-{i} is not listed but open");
        }
    }
}

#[test]
fn client_list_shows_what_a_transaction_holds() {
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CLIENT", "SETNAME", "tx"]);
    let _: () = q(&mut c, &["MULTI"]);
    let value = "v".repeat(10_000);
    let _: String = q(&mut c, &["SET", "k", &value]);
    let list = client_names(&mut srv.conn());
    let line = list.lines().find(|l| l.contains("name=tx ")).unwrap();
    let multi_mem = list_field(line, "multi-mem");
    assert!((10_000..11_000).contains(&multi_mem), "{line}");
}

/// CLIENT LIST sent right after other connections sent requests shows
/// what those requests did, as Redis's single loop does, though they run
/// on another event loop: a partly sent request is in its sender's `qbuf`,
/// and a client closed for passing its output limit is gone.
#[test]
fn client_list_shows_what_others_sent_just_before_it() {
    let srv = Server::start(&["--durability", "none", "--io-threads", "2"]);
    let mut c = srv.conn();
    let _: () = q(&mut c, &["SET", "big", &"v".repeat(300_000)]);
    set_normal_limit(&mut c, "100000 0 0");
    for round in 0..20 {
        let name = format!("partial{round}");
        let mut partial = named(&srv, &name);
        let mut head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400000\r\n".to_vec();
        head.extend(std::iter::repeat_n(b'v', 200_000));
        partial.write_all(&head).unwrap();

        let closed_name = format!("over{round}");
        let mut over = named(&srv, &closed_name);
        over.write_all(&req(&[b"GET", b"big"])).unwrap();

        let list = client_names(&mut c);
        let line = list
            .lines()
            .find(|l| l.contains(&format!("name={name} ")))
            .unwrap_or_else(|| panic!("{name} not listed: {list}"));
        assert!(list_field(line, "qbuf") >= 200_000, "round {round}: {line}");
        assert!(
            !list.contains(&format!("name={closed_name} ")),
            "round {round}: a client past its output limit is listed: {list}"
        );
        assert!(closed_by_server(&mut over));
    }
}
