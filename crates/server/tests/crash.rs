//! kill -9 crash tests: a real server under concurrent pipelined write load
//! from many connections is killed at random moments; after each restart,
//! every write acknowledged under `full` must be present with its value, each
//! connection's surviving writes must form a prefix with no gaps, and every
//! MULTI/EXEC must be entirely present or entirely absent.
//!
//! `DURAKV_CRASH_CYCLES` raises the number of cycles for a long run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{env_number, Server};
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CI_CYCLES: usize = 50;
const WRITERS: usize = 8;
const PIPELINE_DEPTH: usize = 8;

fn cycles() -> usize {
    env_number("DURAKV_CRASH_CYCLES").unwrap_or(CI_CYCLES)
}

fn value_for(writer: usize, seq: u64) -> String {
    format!("v{writer}-{seq}-{}", seq.wrapping_mul(2654435761) % 100_000)
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{}\r\n", a.len(), a).as_bytes());
    }
    out
}

/// Reads one RESP reply line-wise; returns false on a closed connection.
/// Enough for the replies this load gets (+OK, *N of +OK/+QUEUED, errors).
fn read_reply(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    if let Some(n) = line.strip_prefix('*') {
        let n: i64 = n.trim().parse().ok()?;
        let mut parts = vec![line.trim().to_string()];
        for _ in 0..n.max(0) {
            parts.push(read_reply(r)?);
        }
        return Some(parts.join(","));
    }
    Some(line.trim().to_string())
}

/// What one writer got acknowledged: the highest sequence number for plain
/// SETs, and the transactions (by sequence) whose EXEC returned.
#[derive(Default, Clone)]
struct Acked {
    last_seq: Option<u64>,
    tx_acked: Vec<u64>,
}

/// One writer: pipelines SETs of `w{writer}:{seq}` and, every few batches,
/// a MULTI/EXEC setting two keys, until the server dies.
fn writer(
    port: u16,
    writer: usize,
    start_seq: u64,
    acked: Arc<Mutex<Acked>>,
    stop: Arc<AtomicBool>,
) {
    let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return;
    };
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut w = stream.try_clone().expect("clone");
    let mut r = BufReader::new(stream);
    let mut seq = start_seq;
    let mut batch = 0u64;
    while !stop.load(Ordering::Relaxed) {
        batch += 1;
        let mut buf = Vec::new();
        let first = seq;
        for _ in 0..PIPELINE_DEPTH {
            let key = format!("w{writer}:{seq}");
            buf.extend(encode(&["SET", &key, &value_for(writer, seq)]));
            seq += 1;
        }
        let tx = batch.is_multiple_of(4);
        if tx {
            let a = format!("tx{writer}:{batch}:a");
            let b = format!("tx{writer}:{batch}:b");
            buf.extend(encode(&["MULTI"]));
            buf.extend(encode(&["SET", &a, "1"]));
            buf.extend(encode(&["SET", &b, "1"]));
            buf.extend(encode(&["EXEC"]));
        }
        if w.write_all(&buf).is_err() {
            return;
        }
        for i in 0..PIPELINE_DEPTH {
            match read_reply(&mut r) {
                Some(rep) if rep == "+OK" => {
                    acked.lock().unwrap().last_seq = Some(first + i as u64);
                }
                _ => return,
            }
        }
        if tx {
            for _ in 0..3 {
                if read_reply(&mut r).is_none() {
                    return;
                }
            }
            match read_reply(&mut r) {
                Some(rep) if rep.starts_with("*2") => acked.lock().unwrap().tx_acked.push(batch),
                _ => return,
            }
        }
    }
}

#[test]
fn kill9_under_pipelined_load_loses_no_acknowledged_write() {
    let seed: u64 = env_number("DURAKV_CRASH_SEED").unwrap_or_else(rand::random);
    println!("crash test seed {seed} (rerun with DURAKV_CRASH_SEED={seed})");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // Half of the seeds gather: with 64 writes in flight, a log batch waits
    // for the writers between two writes, whatever the machine's cores;
    // the other half write each batch as soon as they can.
    let gather = if rng.gen_bool(0.5) { "8" } else { "0" };
    println!("wal-sync-gather-writers {gather}");
    let mut srv = Server::start(&[
        "--wal-segment-size-mb",
        "1",
        "--durability",
        "full",
        "--wal-sync-gather-writers",
        gather,
    ]);
    // Sequence numbers continue across cycles so every key is written once.
    let mut next_seq = [0u64; WRITERS];
    let mut all_acked: Vec<Acked> = vec![Acked::default(); WRITERS];
    let mut total_acked_writes = 0u64;
    let mut total_acked_tx = 0usize;
    for cycle in 0..cycles() {
        let stop = Arc::new(AtomicBool::new(false));
        let acks: Vec<_> = (0..WRITERS)
            .map(|_| Arc::new(Mutex::new(Acked::default())))
            .collect();
        let threads: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (port, start, a, s) = (srv.port, next_seq[w], acks[w].clone(), stop.clone());
                std::thread::spawn(move || writer(port, w, start, a, s))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(rng.gen_range(5..120)));
        srv.kill9();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        srv.restart();
        let mut c = srv.conn();
        for w in 0..WRITERS {
            let a = acks[w].lock().unwrap().clone();
            if let Some(last) = a.last_seq {
                total_acked_writes += last + 1 - next_seq[w];
            }
            total_acked_tx += a.tx_acked.len();
            // Everything acknowledged is present with its value.
            if let Some(last) = a.last_seq {
                for s in next_seq[w]..=last {
                    let v: Option<String> = redis::cmd("GET")
                        .arg(format!("w{w}:{s}"))
                        .query(&mut c)
                        .unwrap();
                    assert_eq!(
                        v.as_deref(),
                        Some(value_for(w, s).as_str()),
                        "seed {seed} cycle {cycle}: acknowledged w{w}:{s} lost"
                    );
                }
            }
            // Survivors form a prefix: find the first missing key after the
            // acknowledged ones; nothing may exist beyond it.
            let mut s = a.last_seq.map(|l| l + 1).unwrap_or(next_seq[w]);
            loop {
                let v: Option<String> = redis::cmd("GET")
                    .arg(format!("w{w}:{s}"))
                    .query(&mut c)
                    .unwrap();
                match v {
                    None => break,
                    // An unacknowledged survivor must still be exactly what was written.
                    Some(v) => assert_eq!(
                        v,
                        value_for(w, s),
                        "seed {seed} cycle {cycle}: garbage in w{w}:{s}"
                    ),
                }
                s += 1;
            }
            for gap in 1..=(2 * PIPELINE_DEPTH as u64) {
                let e: i64 = redis::cmd("EXISTS")
                    .arg(format!("w{w}:{}", s + gap))
                    .query(&mut c)
                    .unwrap();
                assert_eq!(
                    e,
                    0,
                    "seed {seed} cycle {cycle}: gap before w{w}:{}",
                    s + gap
                );
            }
            next_seq[w] = s + 2 * PIPELINE_DEPTH as u64 + 1;
            all_acked[w].tx_acked.extend(a.tx_acked.iter().copied());
        }
        // Transactions: both keys or neither, and every acknowledged one present.
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("tx*:a")
            .query(&mut c)
            .unwrap_or_default();
        for k in keys {
            let b = k.trim_end_matches('a').to_string() + "b";
            let e: i64 = redis::cmd("EXISTS").arg(&b).query(&mut c).unwrap();
            assert_eq!(
                e, 1,
                "seed {seed} cycle {cycle}: half a transaction survived ({k} without {b})"
            );
        }
        for (w, acked) in all_acked.iter().enumerate() {
            for batch in &acked.tx_acked {
                let k = format!("tx{w}:{batch}:a");
                let e: i64 = redis::cmd("EXISTS").arg(&k).query(&mut c).unwrap();
                assert_eq!(
                    e, 1,
                    "seed {seed} cycle {cycle}: acknowledged transaction {k} lost"
                );
            }
        }
        // Transactions restart numbering per cycle; clear them so keys stay unique.
        let tx_keys: Vec<String> = redis::cmd("KEYS")
            .arg("tx*")
            .query(&mut c)
            .unwrap_or_default();
        if !tx_keys.is_empty() {
            let _: i64 = redis::cmd("DEL").arg(&tx_keys).query(&mut c).unwrap();
        }
        for acked in all_acked.iter_mut() {
            acked.tx_acked.clear();
        }
    }
    println!(
        "acknowledged before kills: {total_acked_writes} writes, {total_acked_tx} transactions"
    );
    // The test proves nothing if the load never got a write acknowledged.
    assert!(
        total_acked_writes > 0 && total_acked_tx > 0,
        "seed {seed}: no load reached the server"
    );
}
