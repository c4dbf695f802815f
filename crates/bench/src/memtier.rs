//! `durakv bench memtier`: a memtier_benchmark-compatible SET/GET load
//! generator for RESP servers.
//!
//! The option names, defaults and semantics are memtier's (threads x
//! clients connections, `--ratio` as a deterministic SET:GET cycle,
//! `--key-pattern` iterators, `--requests` per client or `--test-time`,
//! `--pipeline` requests in flight per connection), so the command lines of
//! published memtier results can be replayed against durakv and against the
//! peers on the same machine. Each thread runs its clients on its own
//! single-threaded event loop, as memtier does.

use crate::cli::parse_count_list;
use crate::exec::{self, ClientFuture, MakeClient};
use crate::generator::BenchRng;
use crate::report::{MemtierReport, MemtierTypeStats};
use crate::resp::{probe_durability, RespConn, RespEndpoint, RespError};
use crate::workload::random_printable;
use durakv_protocol::Frame;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub const MEMTIER_USAGE: &str = "\
usage: durakv bench memtier [options]   (memtier_benchmark's options)
  -s, --server HOST           server address (localhost)
  -p, --port PORT             server port (6379)
  -a, --authenticate CREDS    password, or USER:PASSWORD
  -t, --threads N             threads (4); a list like 1,2,4 runs a sweep
  -c, --clients N             connections per thread (50); a list runs a sweep
  -n, --requests N|allkeys    requests per client (10000)
      --test-time SECS        run for a number of seconds instead of --requests
      --ratio SET:GET         SET to GET ratio (1:10)
      --pipeline N            requests in flight per connection (1)
  -d, --data-size BYTES       value size (32)
      --random-data           random values instead of a constant pattern
      --key-prefix PREFIX     (memtier-)
      --key-minimum N         (0)
      --key-maximum N         (10000000)
      --key-pattern S:G       R random, G gaussian, S sequential, P parallel (R:R)
      --key-stddev X, --key-median X   gaussian pattern shape
      --distinct-client-seed  a different random seed per client
      --randomize             random seed instead of the fixed default
      --print-percentiles L   (50,99,99.9)
      --hide-histogram        omit the latency distribution
      --json-out-file FILE    memtier-style JSON (also --json FILE)
      --sweep-out PREFIX      files of a sweep: PREFIX.csv, PREFIX.svg (sweep)";

/// Pause between reconnect attempts after a connection failure.
const RECONNECT_BACKOFF_MS: u64 = 100;
/// Consecutive failed reconnects after which a client stops (about 5 s).
const MAX_RECONNECT_ATTEMPTS: u32 = 50;

/// How a key index is chosen for SETs or GETs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPattern {
    Random,
    Gaussian,
    Sequential,
    Parallel,
}

impl KeyPattern {
    fn parse(c: char) -> Result<KeyPattern, String> {
        match c {
            'R' => Ok(KeyPattern::Random),
            'G' => Ok(KeyPattern::Gaussian),
            'S' => Ok(KeyPattern::Sequential),
            'P' => Ok(KeyPattern::Parallel),
            other => Err(format!(
                "key pattern {other:?} is not supported (use R, G, S or P)"
            )),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requests {
    PerClient(u64),
    /// Enough requests for the clients together to cover the key range once.
    AllKeys,
}

#[derive(Clone, Debug)]
pub struct MemtierOptions {
    pub host: String,
    pub port: u16,
    pub auth: Option<String>,
    pub threads: usize,
    pub clients: usize,
    pub requests: Requests,
    pub test_time_secs: Option<u64>,
    pub ratio_set: u32,
    pub ratio_get: u32,
    pub pipeline: usize,
    pub data_size: usize,
    pub random_data: bool,
    pub key_prefix: String,
    pub key_min: u64,
    pub key_max: u64,
    pub set_pattern: KeyPattern,
    pub get_pattern: KeyPattern,
    pub key_stddev: Option<f64>,
    pub key_median: Option<f64>,
    pub distinct_client_seed: bool,
    pub randomize: bool,
    pub print_percentiles: Vec<f64>,
    pub hide_histogram: bool,
    pub json_out: Option<PathBuf>,
    pub connect_timeout_ms: u64,
    /// Progress display on stderr.
    pub quiet: bool,
}

impl Default for MemtierOptions {
    fn default() -> Self {
        MemtierOptions {
            host: "localhost".into(),
            port: 6379,
            auth: None,
            threads: 4,
            clients: 50,
            requests: Requests::PerClient(10_000),
            test_time_secs: None,
            ratio_set: 1,
            ratio_get: 10,
            pipeline: 1,
            data_size: 32,
            random_data: false,
            key_prefix: "memtier-".into(),
            key_min: 0,
            key_max: 10_000_000,
            set_pattern: KeyPattern::Random,
            get_pattern: KeyPattern::Random,
            key_stddev: None,
            key_median: None,
            distinct_client_seed: false,
            randomize: false,
            print_percentiles: vec![50.0, 99.0, 99.9],
            hide_histogram: false,
            json_out: None,
            connect_timeout_ms: 5000,
            quiet: false,
        }
    }
}

/// A parsed `memtier` command line; list values make a sweep.
#[derive(Clone, Debug)]
pub struct MemtierCli {
    pub opts: MemtierOptions,
    pub threads_list: Vec<usize>,
    pub clients_list: Vec<usize>,
    pub sweep_out: Option<String>,
}

fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{name}: invalid value {v:?}"))
}

pub fn parse_memtier(args: &[String]) -> Result<MemtierCli, String> {
    let mut o = MemtierOptions::default();
    let mut threads_list = vec![o.threads];
    let mut clients_list = vec![o.clients];
    let mut sweep_out = None;
    let mut requests_given = false;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg, None),
        };
        let takes_value = !matches!(
            name,
            "--random-data"
                | "--distinct-client-seed"
                | "--randomize"
                | "--hide-histogram"
                | "-h"
                | "--help"
        );
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| format!("{name} needs a value"))?
                }
            }
        } else {
            String::new()
        };
        match name {
            "-s" | "--server" => o.host = value,
            "-p" | "--port" => o.port = num(name, &value)?,
            "-a" | "--authenticate" => o.auth = Some(value),
            "-t" | "--threads" => threads_list = parse_count_list(&value, name)?,
            "-c" | "--clients" => clients_list = parse_count_list(&value, name)?,
            "-n" | "--requests" => {
                requests_given = true;
                o.requests = if value == "allkeys" {
                    Requests::AllKeys
                } else {
                    Requests::PerClient(num(name, &value)?)
                };
            }
            "--test-time" => o.test_time_secs = Some(num(name, &value)?),
            "--ratio" => {
                let (s, g) = value
                    .split_once(':')
                    .ok_or_else(|| format!("--ratio expects SET:GET, got {value:?}"))?;
                o.ratio_set = num(name, s)?;
                o.ratio_get = num(name, g)?;
                if o.ratio_set == 0 && o.ratio_get == 0 {
                    return Err("--ratio 0:0 sends nothing".into());
                }
            }
            "--pipeline" => o.pipeline = num::<usize>(name, &value)?.max(1),
            "-d" | "--data-size" => o.data_size = num(name, &value)?,
            "--random-data" => o.random_data = true,
            "--key-prefix" => o.key_prefix = value,
            "--key-minimum" => o.key_min = num(name, &value)?,
            "--key-maximum" => o.key_max = num(name, &value)?,
            "--key-pattern" => {
                let mut cs = value.split(':');
                let (Some(s), Some(g), None) = (cs.next(), cs.next(), cs.next()) else {
                    return Err(format!("--key-pattern expects S:G, got {value:?}"));
                };
                let one = |p: &str| -> Result<KeyPattern, String> {
                    let mut chars = p.chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None) => KeyPattern::parse(c),
                        _ => Err(format!("--key-pattern: bad pattern {p:?}")),
                    }
                };
                o.set_pattern = one(s)?;
                o.get_pattern = one(g)?;
            }
            "--key-stddev" => o.key_stddev = Some(num(name, &value)?),
            "--key-median" => o.key_median = Some(num(name, &value)?),
            "--distinct-client-seed" => o.distinct_client_seed = true,
            "--randomize" => o.randomize = true,
            "--print-percentiles" => {
                let v: Result<Vec<f64>, String> = value.split(',').map(|p| num(name, p)).collect();
                o.print_percentiles = v?;
            }
            "--hide-histogram" => o.hide_histogram = true,
            "--json-out-file" | "--json" => o.json_out = Some(PathBuf::from(value)),
            "--sweep-out" => sweep_out = Some(value),
            "-P" | "--protocol" => {
                if value != "redis" && value != "resp2" {
                    return Err(format!(
                        "only the redis protocol is supported, not {value:?}"
                    ));
                }
            }
            "-h" | "--help" => return Err(MEMTIER_USAGE.to_string()),
            other => return Err(format!("unknown option {other}\n{MEMTIER_USAGE}")),
        }
        i += 1;
    }
    if o.key_max < o.key_min {
        return Err("--key-maximum must not be below --key-minimum".into());
    }
    if requests_given && o.test_time_secs.is_some() {
        return Err("--requests and --test-time are mutually exclusive".into());
    }
    o.threads = threads_list[0];
    o.clients = clients_list[0];
    Ok(MemtierCli {
        opts: o,
        threads_list,
        clients_list,
        sweep_out,
    })
}

/// Key-index generator of one client for one request type.
struct KeyIter {
    pattern: KeyPattern,
    min: u64,
    max: u64,
    next: u64,
    median: f64,
    stddev: f64,
}

impl KeyIter {
    fn new(
        o: &MemtierOptions,
        pattern: KeyPattern,
        client: usize,
        total_clients: usize,
    ) -> KeyIter {
        let (mut min, mut max) = (o.key_min, o.key_max);
        if pattern == KeyPattern::Parallel {
            // Each client walks its own slice of the key range.
            let span = (o.key_max - o.key_min + 1) / total_clients.max(1) as u64;
            let span = span.max(1);
            min = (o.key_min + span * client as u64).min(o.key_max);
            max = if client + 1 == total_clients {
                o.key_max
            } else {
                (min + span - 1).min(o.key_max)
            };
        }
        let range = (o.key_max - o.key_min) as f64;
        KeyIter {
            pattern,
            min,
            max,
            next: min,
            median: o.key_median.unwrap_or(o.key_min as f64 + range / 2.0),
            stddev: o.key_stddev.unwrap_or(range / 6.0),
        }
    }

    fn next(&mut self, rng: &mut BenchRng) -> u64 {
        match self.pattern {
            KeyPattern::Random => rng.gen_range(self.min..=self.max),
            KeyPattern::Gaussian => {
                for _ in 0..64 {
                    // Box-Muller; resample values outside the key range.
                    let u1: f64 = 1.0 - rng.gen::<f64>();
                    let u2: f64 = rng.gen();
                    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                    let v = (self.median + z * self.stddev).round();
                    if v >= self.min as f64 && v <= self.max as f64 {
                        return v as u64;
                    }
                }
                self.median.clamp(self.min as f64, self.max as f64) as u64
            }
            KeyPattern::Sequential | KeyPattern::Parallel => {
                let k = self.next;
                self.next = if k >= self.max { self.min } else { k + 1 };
                k
            }
        }
    }
}

#[derive(Default)]
struct ThreadStats {
    sets: MemtierTypeStats,
    gets: MemtierTypeStats,
    /// Cumulative counters for the progress line.
    ops: u64,
    bytes: u64,
    latency_sum_us: u64,
}

struct Shared {
    opts: MemtierOptions,
    endpoint: RespEndpoint,
    shards: Vec<Mutex<ThreadStats>>,
    total_clients: usize,
    requests_per_client: Option<u64>,
    connected: AtomicUsize,
    connect_failed: AtomicUsize,
    connection_errors: AtomicU64,
    start: tokio::sync::watch::Receiver<Option<Instant>>,
    abort: AtomicBool,
    last_end_ns: AtomicU64,
    base_seed: u64,
    errors: Mutex<BTreeSet<String>>,
}

impl Shared {
    fn note_error(&self, e: String) {
        let mut g = self.errors.lock();
        if g.len() < 5 {
            g.insert(e);
        }
    }
}

/// Progress snapshot handed to sweeps.
pub type ProgressFn<'a> = &'a (dyn Fn(crate::runner::Progress) + Sync);

fn human_bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}GB", b / 1024.0 / 1024.0 / 1024.0)
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.2}MB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.2}KB", b / 1024.0)
    } else {
        format!("{b:.2}B")
    }
}

/// Runs the benchmark and returns memtier's figures.
pub fn run_memtier(
    o: &MemtierOptions,
    progress: Option<ProgressFn<'_>>,
) -> Result<MemtierReport, String> {
    let total_clients = o.threads.max(1) * o.clients.max(1);
    let (username, password) = match &o.auth {
        None => (None, None),
        Some(a) => match a.split_once(':') {
            Some((u, p)) => (Some(u.to_string()), Some(p.to_string())),
            None => (None, Some(a.clone())),
        },
    };
    let endpoint = RespEndpoint {
        host: o.host.clone(),
        port: o.port,
        username,
        password,
        connect_timeout_ms: o.connect_timeout_ms,
    };
    let requests_per_client = if o.test_time_secs.is_some() {
        None
    } else {
        Some(match o.requests {
            Requests::PerClient(n) => n,
            Requests::AllKeys => ((o.key_max - o.key_min + 1) / total_clients as u64).max(1),
        })
    };
    let durability = crate::runner::block_on_small(async {
        match RespConn::connect(&endpoint).await {
            Ok(mut c) => Ok(probe_durability(&mut c).await),
            Err(e) => Err(format!("cannot connect to {}: {e}", endpoint.addr())),
        }
    })??;
    let base_seed = if o.randomize {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    } else {
        0
    };
    if !o.quiet {
        eprintln!("Writing results to stdout");
        eprintln!("[RUN #1] Preparing benchmark client...");
    }
    let (start_tx, start_rx) = tokio::sync::watch::channel(None);
    let shared = Arc::new(Shared {
        opts: o.clone(),
        endpoint,
        shards: (0..o.threads.max(1))
            .map(|_| Mutex::new(ThreadStats::default()))
            .collect(),
        total_clients,
        requests_per_client,
        connected: AtomicUsize::new(0),
        connect_failed: AtomicUsize::new(0),
        connection_errors: AtomicU64::new(0),
        start: start_rx,
        abort: AtomicBool::new(false),
        last_end_ns: AtomicU64::new(0),
        base_seed,
        errors: Mutex::new(BTreeSet::new()),
    });
    let make: MakeClient = {
        let shared = shared.clone();
        Arc::new(move |client, thread| -> ClientFuture {
            Box::pin(client_loop(shared.clone(), client, thread))
        })
    };
    // Client c runs on thread c % threads, so clients_per_thread each.
    let mut pool = exec::spawn(o.threads.max(1), total_clients, "memtier", make)?;
    loop {
        let c = shared.connected.load(Ordering::Acquire);
        let f = shared.connect_failed.load(Ordering::Acquire);
        if f > 0 || c >= total_clients || pool.wait_until(Instant::now() + Duration::from_millis(5))
        {
            break;
        }
    }
    if shared.connected.load(Ordering::Acquire) < total_clients {
        shared.abort.store(true, Ordering::Release);
        let _ = start_tx.send(Some(Instant::now()));
        pool.wait_until(Instant::now() + Duration::from_secs(30));
        let _ = pool.join();
        let errs: Vec<String> = shared.errors.lock().iter().cloned().collect();
        return Err(format!("connection failed: {}", errs.join("; ")));
    }
    if !o.quiet {
        eprintln!("[RUN #1] Launching threads now...");
    }
    let start = Instant::now();
    let start_wall = SystemTime::now();
    let _ = start_tx.send(Some(start));

    let tty = std::io::stderr().is_terminal();
    let progress_every = Duration::from_secs(if tty || progress.is_some() { 1 } else { 10 });
    let mut next = start + progress_every;
    let (mut last_ops, mut last_bytes, mut last_lat, mut last_at) = (0u64, 0u64, 0u64, start);
    let expected_ops = requests_per_client.map(|r| r * total_clients as u64);
    loop {
        let done = pool.wait_until(next);
        let now = Instant::now();
        let (ops, bytes, lat) = shared.shards.iter().fold((0, 0, 0), |acc, s| {
            let g = s.lock();
            (acc.0 + g.ops, acc.1 + g.bytes, acc.2 + g.latency_sum_us)
        });
        let secs = now.duration_since(last_at).as_secs_f64().max(1e-9);
        let total_secs = now.duration_since(start).as_secs_f64().max(1e-9);
        let cur_ops = (ops - last_ops) as f64 / secs;
        if let Some(p) = progress {
            p(crate::runner::Progress {
                done_ops: ops,
                total_ops: expected_ops.unwrap_or(0),
                elapsed: now.duration_since(start),
                current_ops_per_sec: cur_ops,
            });
        }
        if !o.quiet {
            let pct = match (expected_ops, o.test_time_secs) {
                (Some(e), _) if e > 0 => ops as f64 * 100.0 / e as f64,
                (_, Some(t)) if t > 0 => (total_secs * 100.0 / t as f64).min(100.0),
                _ => 0.0,
            };
            let avg_lat = if ops > 0 {
                lat as f64 / ops as f64 / 1000.0
            } else {
                0.0
            };
            let cur_lat = if ops > last_ops {
                (lat - last_lat) as f64 / (ops - last_ops) as f64 / 1000.0
            } else {
                0.0
            };
            let line = format!(
                "[RUN #1 {:.0}%, {:3} secs] {:2} threads: {:11} ops, {:7} (avg: {:7}) ops/sec, {}/sec (avg: {}/sec), {:5.2} (avg: {:5.2}) msec latency",
                if done { 100.0 } else { pct },
                now.duration_since(start).as_secs(),
                if done { 0 } else { o.threads },
                ops,
                cur_ops as u64,
                (ops as f64 / total_secs) as u64,
                human_bytes((bytes - last_bytes) as f64 / secs),
                human_bytes(bytes as f64 / total_secs),
                cur_lat,
                avg_lat
            );
            if tty {
                eprint!("{line}\r");
            } else {
                eprintln!("{line}");
            }
        }
        (last_ops, last_bytes, last_lat, last_at) = (ops, bytes, lat, now);
        if done {
            break;
        }
        next += progress_every;
    }
    if !o.quiet && tty {
        eprintln!();
    }
    pool.join()?;
    let end_ns = shared.last_end_ns.load(Ordering::Acquire);
    let mut sets = MemtierTypeStats::default();
    let mut gets = MemtierTypeStats::default();
    for s in &shared.shards {
        let mut g = s.lock();
        sets.merge(std::mem::take(&mut g.sets));
        gets.merge(std::mem::take(&mut g.gets));
    }
    let mut config = BTreeMap::new();
    config.insert("server".into(), o.host.clone());
    config.insert("port".into(), o.port.to_string());
    config.insert("threads".into(), o.threads.to_string());
    config.insert("clients".into(), o.clients.to_string());
    config.insert("ratio".into(), format!("{}:{}", o.ratio_set, o.ratio_get));
    config.insert("pipeline".into(), o.pipeline.to_string());
    config.insert("data_size".into(), o.data_size.to_string());
    config.insert("random_data".into(), o.random_data.to_string());
    config.insert("key_prefix".into(), o.key_prefix.clone());
    config.insert("key_minimum".into(), o.key_min.to_string());
    config.insert("key_maximum".into(), o.key_max.to_string());
    config.insert(
        "key_pattern".into(),
        format!("{:?}:{:?}", o.set_pattern, o.get_pattern),
    );
    config.insert(
        "distinct_client_seed".into(),
        o.distinct_client_seed.to_string(),
    );
    config.insert(
        "requests".into(),
        requests_per_client.map_or("-".into(), |r| r.to_string()),
    );
    config.insert(
        "test_time".into(),
        o.test_time_secs.map_or("-".into(), |t| t.to_string()),
    );
    let errors: Vec<String> = shared.errors.lock().iter().cloned().collect();
    Ok(MemtierReport {
        sets,
        gets,
        duration: Duration::from_nanos(end_ns),
        start_wall,
        percentiles: o.print_percentiles.clone(),
        connection_errors: shared.connection_errors.load(Ordering::Acquire),
        durability,
        error_samples: errors,
        config,
        threads: o.threads,
        clients_per_thread: o.clients,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ReqKind {
    Set,
    Get,
}

struct InFlight {
    kind: ReqKind,
    sent: Instant,
    bytes: usize,
}

async fn client_loop(shared: Arc<Shared>, client: usize, thread: usize) {
    let o = &shared.opts;
    let mut conn = match RespConn::connect(&shared.endpoint).await {
        Ok(c) => c,
        Err(e) => {
            shared.note_error(format!("cannot connect to {}: {e}", shared.endpoint.addr()));
            shared.connect_failed.fetch_add(1, Ordering::AcqRel);
            return;
        }
    };
    shared.connected.fetch_add(1, Ordering::AcqRel);
    let mut rx = shared.start.clone();
    let start = match rx.wait_for(|s| s.is_some()).await {
        Ok(s) => match *s {
            Some(at) => at,
            None => return,
        },
        Err(_) => return,
    };
    if shared.abort.load(Ordering::Acquire) {
        return;
    }
    let seed = shared.base_seed
        + if o.distinct_client_seed {
            client as u64
        } else {
            0
        };
    let mut rng = BenchRng::seed_from_u64(seed);
    let mut set_keys = KeyIter::new(o, o.set_pattern, client, shared.total_clients);
    let mut get_keys = KeyIter::new(o, o.get_pattern, client, shared.total_clients);
    let deadline = o.test_time_secs.map(|t| start + Duration::from_secs(t));
    let mut remaining = shared.requests_per_client;
    let fixed_value = vec![b'x'; o.data_size];
    let mut value = String::with_capacity(o.data_size);
    let mut key = Vec::with_capacity(o.key_prefix.len() + 20);
    let (mut set_count, mut get_count) = (0u32, 0u32);
    let mut in_flight: VecDeque<InFlight> = VecDeque::with_capacity(o.pipeline);
    let shard = &shared.shards[thread % shared.shards.len()];
    let mut retry_at: Option<Instant> = None;
    let mut failed_reconnects = 0u32;
    let mut alive = true;
    loop {
        let can_send = |remaining: Option<u64>| {
            remaining.is_none_or(|r| r > 0) && deadline.is_none_or(|d| Instant::now() < d)
        };
        if !alive {
            // Reconnect after an I/O failure; requests lost with the old
            // connection were already counted as errors.
            if !can_send(remaining) {
                break;
            }
            if let Some(at) = retry_at {
                tokio::time::sleep_until(at.into()).await;
            }
            match RespConn::connect(&shared.endpoint).await {
                Ok(c) => {
                    conn = c;
                    alive = true;
                    retry_at = None;
                    failed_reconnects = 0;
                }
                Err(e) => {
                    shared.note_error(format!("reconnect failed: {e}"));
                    shared.connection_errors.fetch_add(1, Ordering::AcqRel);
                    failed_reconnects += 1;
                    if failed_reconnects >= MAX_RECONNECT_ATTEMPTS {
                        shared.note_error(format!(
                            "a client gave up after {failed_reconnects} failed reconnects; {} requests were not sent",
                            remaining.map_or("its remaining".to_string(), |r| r.to_string())
                        ));
                        break;
                    }
                    retry_at = Some(Instant::now() + Duration::from_millis(RECONNECT_BACKOFF_MS));
                    continue;
                }
            }
        }
        let mut pushed = 0;
        while in_flight.len() < o.pipeline && can_send(remaining) {
            // memtier's ratio: `set` SETs, then `get` GETs, repeated.
            let kind = if set_count < o.ratio_set {
                set_count += 1;
                ReqKind::Set
            } else if get_count < o.ratio_get {
                get_count += 1;
                ReqKind::Get
            } else {
                set_count = 0;
                get_count = 0;
                continue;
            };
            key.clear();
            key.extend_from_slice(o.key_prefix.as_bytes());
            let idx = match kind {
                ReqKind::Set => set_keys.next(&mut rng),
                ReqKind::Get => get_keys.next(&mut rng),
            };
            key.extend_from_slice(itoa::Buffer::new().format(idx).as_bytes());
            let before = conn.pending_write_bytes();
            match kind {
                ReqKind::Set => {
                    let v: &[u8] = if o.random_data {
                        random_printable(&mut rng, o.data_size, &mut value);
                        value.as_bytes()
                    } else {
                        &fixed_value
                    };
                    conn.push(&[b"SET", &key, v]);
                }
                ReqKind::Get => conn.push(&[b"GET", &key]),
            }
            let bytes = conn.pending_write_bytes() - before;
            in_flight.push_back(InFlight {
                kind,
                sent: Instant::now(),
                bytes,
            });
            if let Some(r) = remaining.as_mut() {
                *r -= 1;
            }
            pushed += 1;
        }
        if in_flight.is_empty() {
            break;
        }
        if pushed > 0 {
            let now = Instant::now();
            for f in in_flight.iter_mut().rev().take(pushed) {
                f.sent = now;
            }
            if let Err(e) = conn.flush().await {
                fail_in_flight(&shared, shard, &mut in_flight, e);
                alive = false;
                continue;
            }
        }
        // One reply, then whatever else has already arrived.
        let first = conn.read_reply_sized().await;
        let mut reply = match first {
            Ok(r) => Some(r),
            Err(e) => {
                fail_in_flight(&shared, shard, &mut in_flight, e);
                alive = false;
                continue;
            }
        };
        let now = Instant::now();
        let mut server_error: Option<String> = None;
        let mut broken: Option<RespError> = None;
        {
            let mut g = shard.lock();
            while let Some((frame, reply_bytes)) = reply.take() {
                let Some(req) = in_flight.pop_front() else {
                    break;
                };
                let latency = crate::measure::micros(now.saturating_duration_since(req.sent));
                let bytes = (req.bytes + reply_bytes) as u64;
                g.ops += 1;
                g.bytes += bytes;
                g.latency_sum_us += latency;
                let stats = match req.kind {
                    ReqKind::Set => &mut g.sets,
                    ReqKind::Get => &mut g.gets,
                };
                // memtier counts an error reply as a completed request;
                // it is also counted (and shown) as an error here.
                stats.ops += 1;
                stats.bytes += bytes;
                stats.record(latency);
                match &frame {
                    Frame::Error(e) => {
                        stats.errors += 1;
                        server_error = Some(String::from_utf8_lossy(e).into_owned());
                    }
                    Frame::Null | Frame::NullArray if req.kind == ReqKind::Get => stats.misses += 1,
                    _ if req.kind == ReqKind::Get => stats.hits += 1,
                    _ => {}
                }
                if in_flight.is_empty() {
                    break;
                }
                match conn.try_buffered_reply() {
                    Ok(r) => reply = r,
                    Err(e) => broken = Some(e),
                }
            }
        }
        if let Some(e) = server_error {
            shared.note_error(e);
        }
        if let Some(e) = broken {
            fail_in_flight(&shared, shard, &mut in_flight, e);
            alive = false;
        }
        let ns = now.saturating_duration_since(start).as_nanos() as u64;
        shared.last_end_ns.fetch_max(ns, Ordering::AcqRel);
    }
}

/// Counts every request lost with a failed connection as an error.
fn fail_in_flight(
    shared: &Shared,
    shard: &Mutex<ThreadStats>,
    in_flight: &mut VecDeque<InFlight>,
    e: RespError,
) {
    shared.note_error(e.to_string());
    shared.connection_errors.fetch_add(1, Ordering::AcqRel);
    let mut g = shard.lock();
    for req in in_flight.drain(..) {
        match req.kind {
            ReqKind::Set => g.sets.errors += 1,
            ReqKind::Get => g.gets.errors += 1,
        }
    }
}

/// `durakv bench memtier ...` (a single run; lists go through the sweep).
pub fn main(args: &[String]) -> i32 {
    let cli = match parse_memtier(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    if cli.threads_list.len() > 1 || cli.clients_list.len() > 1 {
        return crate::sweep::memtier_sweep(&cli);
    }
    match run_memtier(&cli.opts, None) {
        Ok(report) => {
            print!("{}", report.to_text(cli.opts.hide_histogram));
            if let Some(path) = &cli.opts.json_out {
                if let Err(e) = crate::write_json(path, &report.to_json()) {
                    eprintln!("{e}");
                    return 1;
                }
            }
            i32::from(report.totals().errors > 0 || report.connection_errors > 0)
        }
        Err(e) => {
            eprintln!("memtier: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_the_reference_command_line() {
        let c = parse_memtier(&args(
            "-t 80 -c 5,10,20,40 --distinct-client-seed --ratio=1:10 --key-prefix=kv_ --key-minimum=1 \
             --key-maximum=5000000 --random-data --data-size=128 --hide-histogram --test-time=300",
        ))
        .expect("parse");
        assert_eq!(c.threads_list, vec![80]);
        assert_eq!(c.clients_list, vec![5, 10, 20, 40]);
        assert_eq!((c.opts.ratio_set, c.opts.ratio_get), (1, 10));
        assert_eq!(c.opts.key_prefix, "kv_");
        assert_eq!((c.opts.key_min, c.opts.key_max), (1, 5_000_000));
        assert!(c.opts.random_data && c.opts.hide_histogram && c.opts.distinct_client_seed);
        assert_eq!(c.opts.data_size, 128);
        assert_eq!(c.opts.test_time_secs, Some(300));
    }

    #[test]
    fn key_patterns() {
        let mut o = MemtierOptions {
            key_min: 1,
            key_max: 100,
            ..MemtierOptions::default()
        };
        let mut rng = BenchRng::seed_from_u64(3);
        let mut s = KeyIter::new(&o, KeyPattern::Sequential, 0, 4);
        let seq: Vec<u64> = (0..3).map(|_| s.next(&mut rng)).collect();
        assert_eq!(seq, vec![1, 2, 3]);
        let mut p = KeyIter::new(&o, KeyPattern::Parallel, 1, 4);
        assert_eq!(p.next(&mut rng), 26);
        let mut last = KeyIter::new(&o, KeyPattern::Parallel, 3, 4);
        assert_eq!((last.min, last.max), (76, 100));
        assert_eq!(last.next(&mut rng), 76);
        o.key_stddev = Some(5.0);
        o.key_median = Some(50.0);
        let mut g = KeyIter::new(&o, KeyPattern::Gaussian, 0, 1);
        let mean = (0..2000).map(|_| g.next(&mut rng) as f64).sum::<f64>() / 2000.0;
        assert!((mean - 50.0).abs() < 2.0, "gaussian mean {mean}");
        let mut r = KeyIter::new(&o, KeyPattern::Random, 0, 1);
        assert!((0..1000)
            .map(|_| r.next(&mut rng))
            .all(|k| (1..=100).contains(&k)));
    }
}
