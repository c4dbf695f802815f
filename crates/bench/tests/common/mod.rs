//! Test helpers: a small in-memory RESP server so the `redis` target and the
//! memtier mode are exercised end to end on every test run, without an
//! external server; and scratch directories.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use durakv_protocol::{Frame, Protocol, RequestParser};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Default)]
struct Data {
    strings: HashMap<Bytes, Bytes>,
    hashes: HashMap<Bytes, BTreeMap<Bytes, Bytes>>,
    zsets: HashMap<Bytes, Vec<(f64, Bytes)>>,
}

/// A RESP server on 127.0.0.1 with the commands the benchmark sends.
pub struct MockServer {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    data: Arc<Mutex<Data>>,
}

impl MockServer {
    pub fn start() -> MockServer {
        let data = Arc::new(Mutex::new(Data::default()));
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let d = data.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                port_tx
                    .send(listener.local_addr().expect("addr").port())
                    .expect("port");
                let accept = async {
                    loop {
                        let Ok((sock, _)) = listener.accept().await else {
                            continue;
                        };
                        let d = d.clone();
                        tokio::spawn(async move {
                            let _ = serve(sock, d).await;
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stop_rx => {}
                }
            });
        });
        let port = port_rx.recv().expect("server port");
        MockServer {
            port,
            stop: Some(stop_tx),
            thread: Some(thread),
            data,
        }
    }

    pub fn hash_count(&self) -> usize {
        self.data.lock().expect("lock").hashes.len()
    }

    pub fn hash_len(&self, key: &str) -> usize {
        self.data
            .lock()
            .expect("lock")
            .hashes
            .get(key.as_bytes())
            .map_or(0, |h| h.len())
    }

    pub fn zcard(&self, key: &str) -> usize {
        self.data
            .lock()
            .expect("lock")
            .zsets
            .get(key.as_bytes())
            .map_or(0, |z| z.len())
    }

    pub fn string_count(&self) -> usize {
        self.data.lock().expect("lock").strings.len()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(mut sock: tokio::net::TcpStream, data: Arc<Mutex<Data>>) -> std::io::Result<()> {
    let parser = RequestParser::default();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut out = BytesMut::new();
    loop {
        if sock.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
        while let Ok(Some(args)) = parser.parse(&mut buf) {
            let reply = {
                let mut d = data.lock().expect("lock");
                execute(&mut d, &args)
            };
            reply.encode(Protocol::Resp2, &mut out);
        }
        sock.write_all(&out).await?;
        out.clear();
    }
}

fn f64_arg(b: &Bytes) -> f64 {
    let s = String::from_utf8_lossy(b);
    match s.as_ref() {
        "+inf" | "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        other => other.parse().unwrap_or(f64::NAN),
    }
}

fn execute(d: &mut Data, args: &[Bytes]) -> Frame {
    let cmd = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    match cmd.as_str() {
        "PING" => Frame::simple("PONG"),
        "AUTH" => Frame::ok(),
        "INFO" => Frame::bulk_from_str("# Persistence\r\nloading:0\r\ndurability:full\r\n"),
        "CONFIG" => Frame::Array(vec![]),
        "SET" if args.len() >= 3 => {
            d.strings.insert(args[1].clone(), args[2].clone());
            Frame::ok()
        }
        "GET" if args.len() == 2 => d
            .strings
            .get(&args[1])
            .cloned()
            .map_or(Frame::Null, Frame::Bulk),
        "HMSET" | "HSET" if args.len() >= 4 && args.len().is_multiple_of(2) => {
            let h = d.hashes.entry(args[1].clone()).or_default();
            for pair in args[2..].chunks(2) {
                h.insert(pair[0].clone(), pair[1].clone());
            }
            Frame::ok()
        }
        "HGETALL" if args.len() == 2 => Frame::Array(
            d.hashes
                .get(&args[1])
                .map(|h| {
                    h.iter()
                        .flat_map(|(k, v)| [Frame::Bulk(k.clone()), Frame::Bulk(v.clone())])
                        .collect()
                })
                .unwrap_or_default(),
        ),
        "HMGET" if args.len() >= 3 => {
            let h = d.hashes.get(&args[1]);
            Frame::Array(
                args[2..]
                    .iter()
                    .map(|f| {
                        h.and_then(|h| h.get(f))
                            .cloned()
                            .map_or(Frame::Null, Frame::Bulk)
                    })
                    .collect(),
            )
        }
        "ZADD" if args.len() == 4 => {
            let z = d.zsets.entry(args[1].clone()).or_default();
            let score = f64_arg(&args[2]);
            let added = match z.iter_mut().find(|(_, m)| *m == args[3]) {
                Some(e) => {
                    e.0 = score;
                    0
                }
                None => {
                    z.push((score, args[3].clone()));
                    1
                }
            };
            z.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            Frame::Integer(added)
        }
        "ZRANGEBYSCORE" if args.len() >= 4 => {
            let min = f64_arg(&args[2]);
            let max = f64_arg(&args[3]);
            let (offset, count) = if args.len() == 7 {
                (
                    String::from_utf8_lossy(&args[5]).parse().unwrap_or(0usize),
                    String::from_utf8_lossy(&args[6])
                        .parse()
                        .unwrap_or(usize::MAX),
                )
            } else {
                (0, usize::MAX)
            };
            let items = d
                .zsets
                .get(&args[1])
                .map(|z| {
                    z.iter()
                        .filter(|(s, _)| *s >= min && *s <= max)
                        .skip(offset)
                        .take(count)
                        .map(|(_, m)| Frame::Bulk(m.clone()))
                        .collect()
                })
                .unwrap_or_default();
            Frame::Array(items)
        }
        "ZREM" if args.len() == 3 => {
            let removed = d.zsets.get_mut(&args[1]).map_or(0, |z| {
                let before = z.len();
                z.retain(|(_, m)| *m != args[2]);
                before - z.len()
            });
            Frame::Integer(removed as i64)
        }
        "DEL" => {
            let mut n = 0;
            for k in &args[1..] {
                n += i64::from(d.strings.remove(k).is_some())
                    + i64::from(d.hashes.remove(k).is_some())
                    + i64::from(d.zsets.remove(k).is_some());
            }
            Frame::Integer(n)
        }
        _ => Frame::error(format!("ERR unknown command '{cmd}'")),
    }
}

/// A fresh scratch directory under the system temp dir.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("durakv-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}
