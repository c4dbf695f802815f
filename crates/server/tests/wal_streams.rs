//! Several WAL directories, acknowledged per directory (`wal-ordering
//! causal`, the default): clients writing at once, pipelined, at `full` and
//! `delayed`, and kill -9 at a random moment. After each restart, which
//! the server makes by itself:
//! - every write acknowledged at `full` is there;
//! - each client's writes are there as a prefix of the order it sent them
//!   in (its later writes never without its earlier ones), although they
//!   go to keys spread over every directory;
//! - nothing else is.
//!
//! With `wal-ordering total` the same holds, and the model test in
//! `model_crash.rs` checks that the whole state is a prefix of the commit
//! order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{env_number, q, Server};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CLIENTS: usize = 6;
const KEYS_PER_CLIENT: usize = 8;
const DIRS: usize = 3;

fn start(ordering: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut args = Vec::new();
    for i in 0..DIRS {
        args.push("--wal-dir".to_string());
        args.push(dir.path().join(format!("wal{i}")).display().to_string());
    }
    args.extend(["--wal-ordering".to_string(), ordering.to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start_in(dir, &args)
}

/// What one client got acknowledged: the highest sequence number it sent
/// at `full` whose reply arrived, and how many it sent in all.
struct Sent {
    acked_full: Option<u64>,
    sent: u64,
}

/// A connection whose reads give up once the server is gone.
fn connect(port: u16) -> redis::Connection {
    let con = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    con.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    con
}

/// Client `c` sends `RPUSH c<c>:<n % KEYS> n` for n = from, from+1, ...,
/// in pipelines of 1..8, each pipeline at `full` or `delayed`, until the
/// server goes away.
fn client(port: u16, c: usize, from: u64, seed: u64, stop: Arc<AtomicBool>) -> Sent {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut con = connect(port);
    let mut out = Sent {
        acked_full: None,
        sent: from,
    };
    let mut n = from;
    while !stop.load(Ordering::Relaxed) {
        let full = rng.gen_bool(0.6);
        let level = if full { "full" } else { "delayed" };
        if redis::cmd("CLIENT")
            .arg("DURABILITY")
            .arg(level)
            .query::<()>(&mut con)
            .is_err()
        {
            break;
        }
        let mut pipe = redis::pipe();
        let count = rng.gen_range(1..=8u64);
        for i in n..n + count {
            pipe.cmd("RPUSH")
                .arg(format!("c{c}:{}", i as usize % KEYS_PER_CLIENT))
                .arg(i)
                .ignore();
        }
        out.sent = n + count;
        match pipe.query::<()>(&mut con) {
            Ok(()) => {
                if full {
                    out.acked_full = Some(n + count - 1);
                }
                n += count;
            }
            Err(_) => break,
        }
    }
    out
}

/// Every number client `c` has on the server.
fn recovered(srv: &Server, c: usize) -> BTreeSet<u64> {
    let mut con = srv.conn();
    let mut all = BTreeSet::new();
    for k in 0..KEYS_PER_CLIENT {
        let items: Vec<u64> = q(&mut con, &["LRANGE", &format!("c{c}:{k}"), "0", "-1"]);
        // Within a key, in the order sent.
        assert!(
            items.windows(2).all(|w| w[0] < w[1]),
            "client {c} key {k} out of order: {items:?}"
        );
        for i in items {
            assert!(all.insert(i), "client {c}: {i} twice");
        }
    }
    all
}

fn run(ordering: &str, seed: u64, rounds: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut srv = start(ordering);
    let mut next = [0u64; CLIENTS];
    for round in 0..rounds {
        let ctx = format!("{ordering} seed {seed} round {round}");
        let stop = Arc::new(AtomicBool::new(false));
        let port = srv.port;
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let stop = stop.clone();
                let from = next[c];
                let s = seed * 1000 + round as u64 * 10 + c as u64;
                std::thread::spawn(move || client(port, c, from, s, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..600)));
        srv.kill9();
        stop.store(true, Ordering::Relaxed);
        let sent: Vec<Sent> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        if let Err(out) = srv.try_restart() {
            panic!("{ctx}: the server did not start after kill -9:\n{out}");
        }
        for (c, s) in sent.iter().enumerate() {
            let got = recovered(&srv, c);
            let m = got.len() as u64;
            if let Some(gap) = (0..m).find(|i| !got.contains(i)) {
                panic!(
                    "{ctx}: client {c}'s writes are not a prefix of what it sent: {gap} is \
                     missing, {} later ones came back",
                    got.range(gap..).count()
                );
            }
            if let Some(a) = s.acked_full {
                assert!(
                    m > a,
                    "{ctx}: client {c}: {a} was acknowledged at full but only 0..{m} came back"
                );
            }
            assert!(
                m <= s.sent,
                "{ctx}: client {c}: more came back than was sent"
            );
            next[c] = m;
        }
        assert!(
            next.iter().sum::<u64>() > 0,
            "{ctx}: nothing was written before the kill"
        );
    }
}

#[test]
fn clients_writes_survive_kill9_as_prefixes_with_per_directory_acks() {
    let seeds: u64 = env_number("DURAKV_STREAM_SEEDS").unwrap_or(2);
    for seed in 0..seeds {
        run("causal", seed, 4);
    }
}

#[test]
fn clients_writes_survive_kill9_as_prefixes_in_total_order() {
    run("total", 100, 2);
}

/// INFO persistence has one `wal_streamN` line per directory: what each
/// has made durable and acknowledged, and its fsyncs.
#[test]
fn info_reports_each_directory() {
    let srv = start("causal");
    let mut con = srv.conn();
    for i in 0..200 {
        let _: () = q(&mut con, &["SET", &format!("k{i}"), "v"]);
    }
    let info: String = q(&mut con, &["INFO", "persistence"]);
    let field = |name: &str| -> String {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {info}"))
            .trim()
            .to_string()
    };
    let durable: u64 = field("wal_durable_lsn").parse().unwrap();
    let last: u64 = field("wal_last_lsn").parse().unwrap();
    let mut records = 0u64;
    for i in 0..DIRS {
        let line = field(&format!("wal_stream{i}"));
        let kv = |k: &str| -> u64 {
            line.split(',')
                .find_map(|p| p.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("no {k} in {line}"))
                .parse::<f64>()
                .unwrap() as u64
        };
        let acked = kv("acked_lsn");
        // Read after `wal_durable_lsn`, which an acknowledged LSN follows.
        assert!(acked <= last && (durable > 0) == (acked > 0), "{line}");
        assert!(kv("watermark_lsn") >= acked, "{line}");
        // Every directory got some of the 200 keys.
        assert!(kv("records") > 0 && kv("fsyncs") > 0, "{line}");
        // How `wal-preallocate auto` judged the directory's disk: 0 or 1.
        assert!(kv("bandwidth_bound") <= 1, "{line}");
        records += kv("records");
    }
    assert_eq!(records, field("wal_records").parse::<u64>().unwrap());
}

/// A blocked pop is a write made for the client that blocked, by whichever
/// connection's push served it; that client's next writes follow it like
/// its own. Consumers pop from one queue with BLPOP at `delayed` (blocked
/// until the producer's next push, at `full`, serves them) and record each
/// element at `full` under keys of their own, spread over every directory;
/// kill -9 at a random moment. After each restart no element may be both
/// still queued and recorded: a record never survives without its pop.
#[test]
fn a_served_blocked_pop_comes_back_before_its_clients_later_writes() {
    const CONSUMERS: usize = 3;
    let mut rng = StdRng::seed_from_u64(7);
    let mut srv = start("causal");
    let mut blocked_served = 0u64;
    for round in 0..4u64 {
        let stop = Arc::new(AtomicBool::new(false));
        let port = srv.port;
        // Pushes at `full`, one element per consumer, then a pause: the
        // consumers wait blocked for the next batch, which serves them, and
        // their pops (at `delayed`) stay unflushed for a while after it.
        let producer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut con = connect(port);
                let mut i = round * 1_000_000;
                while !stop.load(Ordering::Relaxed) {
                    let batch: Vec<u64> = (i..i + CONSUMERS as u64).collect();
                    if redis::cmd("RPUSH")
                        .arg("queue")
                        .arg(&batch)
                        .query::<()>(&mut con)
                        .is_err()
                    {
                        break;
                    }
                    i += CONSUMERS as u64;
                    std::thread::sleep(Duration::from_millis(15));
                }
            })
        };
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|c| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut con = connect(port);
                    let _ = redis::cmd("CLIENT")
                        .arg("DURABILITY")
                        .arg("delayed")
                        .query::<()>(&mut con);
                    let mut waited = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let t = std::time::Instant::now();
                        let got: Option<(String, u64)> =
                            match redis::cmd("BLPOP").arg("queue").arg(1).query(&mut con) {
                                Ok(v) => v,
                                Err(_) => break,
                            };
                        let Some((_, v)) = got else { continue };
                        if t.elapsed() > Duration::from_micros(200) {
                            waited += 1;
                        }
                        // The record at `full`: its own directory flushes
                        // at once, while the pop's waits for its timer.
                        let mut pipe = redis::pipe();
                        pipe.cmd("CLIENT").arg("DURABILITY").arg("full").ignore();
                        pipe.cmd("RPUSH")
                            .arg(format!("got:{c}:{}", v % 8))
                            .arg(v)
                            .ignore();
                        pipe.cmd("CLIENT").arg("DURABILITY").arg("delayed").ignore();
                        if pipe.query::<()>(&mut con).is_err() {
                            break;
                        }
                    }
                    waited
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(200..700)));
        srv.kill9();
        stop.store(true, Ordering::Relaxed);
        producer.join().unwrap();
        blocked_served += consumers
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum::<u64>();
        if let Err(out) = srv.try_restart() {
            panic!("round {round}: the server did not start after kill -9:\n{out}");
        }
        let mut con = srv.conn();
        let queued: BTreeSet<u64> = q::<Vec<u64>>(&mut con, &["LRANGE", "queue", "0", "-1"])
            .into_iter()
            .collect();
        let mut recorded = BTreeSet::new();
        for c in 0..CONSUMERS {
            for k in 0..8 {
                let items: Vec<u64> = q(&mut con, &["LRANGE", &format!("got:{c}:{k}"), "0", "-1"]);
                for v in items {
                    assert!(recorded.insert(v), "round {round}: {v} recorded twice");
                    assert!(
                        !queued.contains(&v),
                        "round {round}: consumer {c} recorded {v}, but its pop did not come back"
                    );
                }
            }
        }
    }
    assert!(blocked_served > 0, "no BLPOP was served while blocked");
}
