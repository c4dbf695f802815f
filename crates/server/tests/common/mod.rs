//! Test harness: starts the real `durakv` binary on an ephemeral loopback
//! port with a fresh data directory, and kills it when dropped.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Path of the `durakv` binary built by cargo for this workspace.
pub fn binary() -> PathBuf {
    if let Ok(p) = std::env::var("DURAKV_BIN") {
        return PathBuf::from(p);
    }
    // tests run from target/<profile>/deps/<test>; the binary is in target/<profile>.
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir");
    let bin = profile_dir.join("durakv");
    assert!(
        bin.exists(),
        "{} not found: run `cargo build -p durakv` (the test command in the README does)",
        bin.display()
    );
    bin
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("probe port")
        .port()
}

pub struct Server {
    pub child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub args: Vec<String>,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, args)
    }

    /// Starts a server on an existing data directory (restart tests).
    pub fn start_in(dir: tempfile::TempDir, args: &[&str]) -> Server {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (child, port) = spawn(dir.path(), &args);
        Server {
            child: Some(child),
            port,
            dir,
            args,
        }
    }

    /// Starts a server with `args(port)`, for a port it is to listen on
    /// besides its own (metrics, TLS), probed free with [`free_port`]. Any
    /// process may bind that port between the probe and the server's bind,
    /// so a start that fails with "Address already in use" is tried again
    /// with another port. Returns the server and that port.
    pub fn start_with_free_port(args: impl Fn(u16) -> Vec<String>) -> (Server, u16) {
        let mut last = String::new();
        for _ in 0..5 {
            let extra = free_port();
            let args = args(extra);
            let dir = tempfile::tempdir().expect("tempdir");
            match try_spawn(dir.path(), &args) {
                Ok((child, port)) => {
                    let server = Server {
                        child: Some(child),
                        port,
                        dir,
                        args,
                    };
                    return (server, extra);
                }
                Err(e) if e.contains("Address already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("five ports were taken before the server could bind them; the last start:\n{last}")
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    /// A connection whose reads give up after a minute, so a server that
    /// stops answering fails the test instead of hanging the run.
    pub fn conn(&self) -> redis::Connection {
        let c = self.client().get_connection().expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("read timeout");
        c
    }

    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("raw connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s
    }

    /// SIGKILL, as in a crash.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `sig` ("STOP", "CONT", ...) with kill(1): SIGSTOP leaves a
    /// peer's connections open and silent, as a host cut off by the
    /// network does.
    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig} {pid}");
    }

    /// SIGTERM and wait for exit; returns the exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        unsafe_sigterm(c.id());
        let status = c.wait().ok()?;
        status.code()
    }

    /// Restarts on the same data directory with the same arguments.
    pub fn restart(&mut self) {
        self.try_restart().unwrap_or_else(|e| panic!("{e}"));
    }
}

impl Server {
    /// Like [`Server::restart`], but when the server does not come up it
    /// returns what it printed (log lines on stdout, then stderr) instead of
    /// panicking, so a test can report why recovery refused to start.
    pub fn try_restart(&mut self) -> Result<(), String> {
        self.kill9();
        let (child, port) = try_spawn(self.dir.path(), &self.args)?;
        self.child = Some(child);
        self.port = port;
        Ok(())
    }
}

/// Starts `durakv serve` on `dir`; on an exit before listening, returns its
/// exit status and output instead of panicking.
pub fn try_spawn(dir: &Path, args: &[String]) -> Result<(Child, u16), String> {
    // Port 0 has the server pick a free port and print it, except beside
    // a Unix socket or a TLS port, where it turns plain TCP off (as in
    // Redis): such a server gets a free port chosen here.
    let elsewhere = args
        .iter()
        .any(|a| a == "--unixsocket" || a == "--tls-port");
    let port = if elsewhere {
        free_port().to_string()
    } else {
        "0".to_string()
    };
    let mut cmd = Command::new(binary());
    cmd.arg("serve")
        .arg("--port")
        .arg(port)
        .arg("--dir")
        .arg(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn durakv: {e}"))?;
    let stderr = child.stderr.take();
    let stderr_text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = stderr_text.clone();
    let stderr_thread = std::thread::spawn(move || {
        if let Some(mut e) = stderr {
            let mut buf = Vec::new();
            let _ = e.read_to_end(&mut buf);
            if let Ok(mut s) = sink.lock() {
                s.push_str(&String::from_utf8_lossy(&buf));
            }
        }
    });
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("no stdout from durakv".into());
    };
    let mut reader = BufReader::new(stdout);
    let mut printed = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).unwrap_or(0);
        if n == 0 {
            let status = child.wait();
            let _ = stderr_thread.join();
            let stderr = stderr_text.lock().map(|s| s.clone()).unwrap_or_default();
            return Err(format!(
                "durakv exited before listening ({status:?})\n--- stdout ---\n{printed}--- stderr ---\n{stderr}"
            ));
        }
        if let Some(p) = line.trim().strip_prefix("durakv listening on port ") {
            let port: u16 = p
                .parse()
                .map_err(|e| format!("bad port line {line:?}: {e}"))?;
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink);
            });
            return Ok((child, port));
        }
        printed.push_str(&line);
    }
}

fn unsafe_sigterm(pid: u32) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn spawn(dir: &Path, args: &[String]) -> (Child, u16) {
    try_spawn(dir, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Encodes one multibulk request.
/// The number in environment variable `name` (a test's seed or round
/// count, to rerun it otherwise), if it is set and parses.
pub fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The seeds a randomized test runs: `{prefix}_SEED` alone if set, else
/// 1 to `{prefix}_SEEDS` (`default`).
pub fn env_seeds(prefix: &str, default: u64) -> Vec<u64> {
    match env_number::<u64>(&format!("{prefix}_SEED")) {
        Some(s) => vec![s],
        None => (1..=env_number(&format!("{prefix}_SEEDS")).unwrap_or(default)).collect(),
    }
}

pub fn req(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Polls `f` until it holds, for changes the server makes asynchronously
/// (a closed connection's cleanup, a periodic task); fails after 10 s.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A raw RESP connection: exact bytes for framing checks, whole parsed
/// reply frames otherwise.
pub struct RespConn {
    pub s: TcpStream,
    buf: bytes::BytesMut,
}

impl RespConn {
    pub fn new(s: TcpStream) -> RespConn {
        RespConn {
            s,
            buf: bytes::BytesMut::new(),
        }
    }

    pub fn send(&mut self, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.s.write_all(&req(&a)).expect("write");
    }

    /// Reads exactly `bytes` next.
    pub fn expect(&mut self, bytes: &str) {
        assert!(self.buf.is_empty(), "unparsed bytes pending");
        let got = read_exactly(&mut self.s, bytes.len());
        assert_eq!(String::from_utf8_lossy(&got), bytes);
    }

    pub fn frame(&mut self) -> durakv_protocol::Frame {
        let mut chunk = vec![0u8; 256 * 1024];
        loop {
            if let Some(f) =
                durakv_protocol::reply::parse_reply(&mut self.buf).expect("well-formed reply")
            {
                return f;
            }
            let n = self.s.read(&mut chunk).expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
            // An incomplete reply is parsed again from its start, so take
            // what else has arrived, up to twice what is held, before the
            // next try: a reply of many megabytes (a random SETRANGE offset
            // read back) otherwise took minutes to parse.
            let target = self.buf.len() * 2;
            self.s.set_nonblocking(true).expect("nonblocking");
            while self.buf.len() < target {
                match self.s.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
            self.s.set_nonblocking(false).expect("blocking");
        }
    }
}

/// Sends raw bytes and reads until `expected_len` bytes or EOF/timeout.
pub fn send_raw(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).expect("write");
}

pub fn read_exactly(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).expect("read reply");
    buf
}

pub fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

// Query helpers shared by the command test files: build a command from
// string arguments, run it, and read replies or Redis's error text.

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

pub fn cmd(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

pub fn try_q<T: redis::FromRedisValue>(
    c: &mut redis::Connection,
    args: &[&str],
) -> redis::RedisResult<T> {
    cmd(args).query(c)
}

/// Runs `args`; panics with the command on an error reply.
pub fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    try_q(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// An error as Redis spelled it: `CODE detail`.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}").trim_end().to_string(),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Runs `args`, which must fail, and returns the error's text.
pub fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    match try_q::<redis::Value>(c, args) {
        Ok(v) => panic!("{args:?}: expected an error, got {v:?}"),
        Err(e) => error_text(&e),
    }
}

pub fn strs(c: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    q(c, args)
}

pub fn bulk(s: &str) -> redis::Value {
    redis::Value::BulkString(s.as_bytes().to_vec())
}

/// A connection that negotiated RESP3.
pub fn resp3(srv: &Server) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", srv.port))
        .and_then(|c| c.get_connection())
        .expect("RESP3 connection")
}

/// A real Redis (Debian's `redis-server`) on an ephemeral loopback port with
/// a fresh directory and no persistence, for interoperability tests; killed
/// when dropped.
pub struct RealRedis {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl RealRedis {
    /// None (with a message) when `redis-server` is not installed or does
    /// not start, so callers skip their test.
    pub fn start(extra: &[&str]) -> Option<RealRedis> {
        let dir = tempfile::tempdir().ok()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let Ok(child) = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        else {
            eprintln!("skipping: redis-server is not installed");
            return None;
        };
        let srv = RealRedis {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..100 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(srv);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for RealRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One field of an INFO section ("" when the server does not report it).
pub fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = q(c, &["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Waits until replica `r` has applied everything its primary `p` has
/// streamed so far.
pub fn caught_up(p: &mut redis::Connection, r: &mut redis::Connection) {
    let offset: u64 = info_field(p, "replication", "master_repl_offset")
        .parse()
        .expect("an offset");
    eventually("the replica is caught up", || {
        info_field(r, "replication", "slave_repl_offset")
            .parse::<u64>()
            .is_ok_and(|o| o >= offset)
    });
}

/// Reads one `\r\n`-ended line, skipping the newlines a primary may send
/// while it prepares.
pub fn line(r: &mut impl std::io::BufRead) -> String {
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end().to_string();
        if !l.is_empty() {
            return l;
        }
    }
}

/// Opens a raw replication link with `handshake` (commands answered +OK,
/// then PSYNC or SYNC) and returns the RDB the primary sends, whichever
/// form it takes, and the link after it.
pub fn raw_full_sync_and_link(
    port: u16,
    handshake: &[&str],
) -> (Vec<u8>, std::io::BufReader<std::net::TcpStream>) {
    use std::io::{BufReader, Read, Write};
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    for cmd in handshake {
        w.write_all(format!("{cmd}\r\n").as_bytes()).unwrap();
        if !cmd.starts_with("PSYNC") && *cmd != "SYNC" {
            assert_eq!(line(&mut r), "+OK", "{cmd}");
        }
    }
    let mut header = line(&mut r);
    let legacy = handshake.last() == Some(&"SYNC");
    assert_eq!(header.starts_with("+FULLRESYNC"), !legacy, "{header}");
    if !legacy {
        header = line(&mut r);
    }
    if let Some(mark) = header.strip_prefix("$EOF:") {
        let mut data = Vec::new();
        let mut buf = [0u8; 65536];
        while !data.ends_with(mark.as_bytes()) {
            let n = r.read(&mut buf).unwrap();
            assert!(n > 0, "link closed before the mark");
            data.extend_from_slice(&buf[..n]);
        }
        data.truncate(data.len() - mark.len());
        // As a replica does once the file is loaded: the stream follows
        // only then. A backup tool (rdb-only) gets no stream.
        if !handshake.iter().any(|c| c.contains("rdb-only")) {
            w.write_all(b"REPLCONF ACK 0\r\n").unwrap();
        }
        (data, r)
    } else {
        let len: usize = header.strip_prefix('$').unwrap().parse().unwrap();
        let mut data = vec![0u8; len];
        r.read_exact(&mut data).unwrap();
        (data, r)
    }
}

/// Runs `run` for each seed against durakv and a real Redis started for
/// it, and fails listing every sequence that found a difference (`run`
/// describes the first it met). Skipped without `redis-server`.
///
/// Three replicas follow along: a Redis and a durakv replica of durakv,
/// and a durakv replica of the Redis. After each sequence every replica
/// must hold what its primary holds (DEBUG DIGEST, Redis's fingerprint of
/// a dataset): every command's effect reaches durakv's stream in a form
/// both apply alike, and durakv applies what Redis propagates (the
/// migration path).
pub fn compare_with_redis(
    seeds: impl IntoIterator<Item = u64>,
    run: impl Fn(u64, &Server, &RealRedis) -> Option<String>,
) {
    const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];
    let Some(redis) = RealRedis::start(&DEBUG) else {
        return;
    };
    let ours = Server::start(&DEBUG);
    let of = |port: u16| format!("127.0.0.1 {port}");
    let (of_ours, of_redis) = (of(ours.port), of(redis.port));
    let ours_port = ours.port.to_string();
    let ours_redis =
        RealRedis::start(&[&DEBUG[..], &["--replicaof", "127.0.0.1", &ours_port]].concat())
            .expect("a Redis replica");
    let ours_durakv = Server::start(&[&DEBUG[..], &["--replicaof", &of_ours]].concat());
    let redis_durakv = Server::start(&[&DEBUG[..], &["--replicaof", &of_redis]].concat());
    let (mut p, mut rp) = (ours.conn(), redis.conn());
    let mut followers = [
        ("Redis replica of durakv", ours_redis.conn()),
        ("durakv replica of durakv", ours_durakv.conn()),
        ("durakv replica of Redis", redis_durakv.conn()),
    ];
    for (_, c) in followers.iter_mut() {
        eventually("the replica's link is up", || {
            info_field(c, "replication", "master_link_status") == "up"
        });
    }
    assert_none_differ(
        seeds
            .into_iter()
            .filter_map(|seed| {
                run(seed, &ours, &redis).or_else(|| {
                    let [(a, ra), (b, rb), (c, rc)] = &mut followers;
                    replica_differs(seed, a, &mut p, ra)
                        .or_else(|| replica_differs(seed, b, &mut p, rb))
                        .or_else(|| replica_differs(seed, c, &mut rp, rc))
                })
            })
            .collect(),
    );
}

/// Whether replica `r` holds something else than its primary `p`.
fn replica_differs(
    seed: u64,
    which: &str,
    p: &mut redis::Connection,
    r: &mut redis::Connection,
) -> Option<String> {
    // A key past its time is still in a replica until its primary's DEL,
    // which goes out once something meets the key: a SCAN of every
    // database meets them all.
    let dbs: i64 = q::<Vec<String>>(p, &["CONFIG", "GET", "databases"])[1]
        .parse()
        .expect("databases");
    for db in 0..dbs {
        let _: () = q(p, &["SELECT", &db.to_string()]);
        let mut cursor = "0".to_string();
        loop {
            let (next, _): (String, Vec<String>) = q(p, &["SCAN", &cursor, "COUNT", "1000"]);
            cursor = next;
            if cursor == "0" {
                break;
            }
        }
    }
    let _: () = q(p, &["SELECT", "0"]);
    caught_up(p, r);
    let want: String = q(p, &["DEBUG", "DIGEST"]);
    let got: String = q(r, &["DEBUG", "DIGEST"]);
    (want != got && !only_signs_of_zero_differ(p, r, dbs)).then(|| {
        format!(
            "seed {seed}: the {which}'s digest {got} is not its primary's {want}\nkeys in the primary:\n{}keys in the replica:\n{}",
            key_digests(p, dbs),
            key_digests(r, dbs)
        )
    })
}

/// Whether every key that differs is a sorted set whose scores differ
/// only as -0 against 0: Redis keeps -0 in a skip list (and digests it as
/// "-0") but stores it as 0 in a listpack, and durakv always stores 0, so
/// a durakv replica of Redis holds 0 where Redis holds -0.
fn only_signs_of_zero_differ(
    p: &mut redis::Connection,
    r: &mut redis::Connection,
    dbs: i64,
) -> bool {
    for db in 0..dbs {
        let mut keys = std::collections::BTreeSet::new();
        for c in [&mut *p, &mut *r] {
            let _: () = q(c, &["SELECT", &db.to_string()]);
            keys.extend(q::<Vec<String>>(c, &["KEYS", "*"]));
        }
        for k in keys {
            let mut seen = Vec::new();
            for c in [&mut *p, &mut *r] {
                let d: Vec<String> = q(c, &["DEBUG", "DIGEST-VALUE", &k]);
                let t: String = q(c, &["TYPE", &k]);
                let scores = if t == "zset" {
                    let z: Vec<String> = q(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"]);
                    z.into_iter()
                        .map(|s| if s == "-0" { "0".into() } else { s })
                        .collect()
                } else {
                    Vec::new()
                };
                seen.push((d, t, scores));
            }
            let (a, b) = (&seen[0], &seen[1]);
            if a.0 != b.0 && !(a.1 == "zset" && b.1 == "zset" && a.2 == b.2) {
                return false;
            }
        }
    }
    for c in [p, r] {
        let _: () = q(c, &["SELECT", "0"]);
    }
    true
}

/// Every key of every database with its type and DEBUG DIGEST-VALUE (and
/// a stream's XINFO FULL), to show where two datasets part.
fn key_digests(c: &mut redis::Connection, dbs: i64) -> String {
    let mut out = String::new();
    for db in 0..dbs {
        let _: () = q(c, &["SELECT", &db.to_string()]);
        let mut keys: Vec<String> = q(c, &["KEYS", "*"]);
        keys.sort();
        for k in keys {
            let d: Vec<String> = q(c, &["DEBUG", "DIGEST-VALUE", &k]);
            let t: String = q(c, &["TYPE", &k]);
            out.push_str(&format!("  db{db} {k} {t} {}\n", d.concat()));
            if t == "stream" {
                let full: redis::Value = q(c, &["XINFO", "STREAM", &k, "FULL"]);
                out.push_str(&format!("    {full:?}\n"));
            }
        }
    }
    let _: () = q(c, &["SELECT", "0"]);
    out
}

/// Fails listing every sequence that found a difference.
pub fn assert_none_differ(differences: Vec<String>) {
    assert!(
        differences.is_empty(),
        "{} sequences differ:\n{}",
        differences.len(),
        differences.join("\n\n")
    );
}
