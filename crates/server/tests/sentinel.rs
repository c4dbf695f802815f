//! Failover by Debian's unmodified Redis Sentinel: three Sentinels watch a
//! durakv primary and two durakv replicas, all on loopback ports. After a
//! kill -9 of the primary, Sentinel promotes a replica, repoints the other
//! one, and turns the restarted old primary into a replica; every write
//! acknowledged at `full` and replicated (WAIT 2) before the kill is on the
//! new primary, and the three servers converge; once more with Sentinel and
//! the replicas logged in as restricted ACL users. Skips with a message when
//! `redis-sentinel` is not installed. Also: the replica role a server keeps
//! across a restart through CONFIG REWRITE, and the INFO fields and
//! CLIENT KILL types Sentinel relies on, without Sentinel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{env_number, eventually, q, Server};
use redis::Connection;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MASTER: &str = "mymaster";
/// Writes made before the kill (each a SET at `full`).
const KEYS_BEFORE: usize = 300;
const KEYS_AFTER: usize = 100;

fn free_ports(n: usize) -> Vec<u16> {
    // Held together so the kernel hands out distinct ports.
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

fn connect(port: u16) -> redis::RedisResult<Connection> {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?
        .get_connection_with_timeout(Duration::from_secs(2))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(c)
}

fn try_cmd<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> redis::RedisResult<T> {
    let mut c = connect(port)?;
    common::cmd(args).query(&mut c)
}

/// Polls `f` every 100 ms until it returns Some, for at most `limit`.
fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A durakv server run from its own TOML file, so CONFIG REWRITE edits
/// that file and a restart reads it back, on a fixed port.
struct Node {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn config_path(&self) -> PathBuf {
        self.dir.join("durakv.toml")
    }

    /// `settings`: the durability directives, as TOML lines.
    fn write_config(&self, replicaof: Option<u16>, settings: &str) {
        let mut text = format!(
            "port = {}\ndir = \"{}\"\nloglevel = \"verbose\"\n\
             enable-debug-command = \"yes\"\n{settings}",
            self.port,
            self.dir.join("data").display(),
        );
        if let Some(p) = replicaof {
            text.push_str(&format!("replicaof = \"127.0.0.1 {p}\"\n"));
        }
        std::fs::write(self.config_path(), text).unwrap();
    }

    fn start(&mut self) {
        // Appended to across restarts; printed when the test fails.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("durakv.log"))
            .unwrap();
        let child = Command::new(common::binary())
            .arg("serve")
            .arg("--config")
            .arg(self.config_path())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn durakv");
        self.child = Some(child);
        let port = self.port;
        wait_for(
            &format!("durakv on port {port} answers PING"),
            Duration::from_secs(20),
            || try_cmd::<String>(port, &["PING"]).ok(),
        );
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Every process of the scenario; all are killed when it is dropped, and
/// on a failure the logs' ends are printed.
struct Cluster {
    root: tempfile::TempDir,
    nodes: Vec<Node>,
    sentinels: Vec<(u16, Child)>,
}

impl Cluster {
    fn sentinel_port(&self) -> u16 {
        self.sentinels[0].0
    }

    /// `extra`: more `sentinel.conf` lines (`sentinel auth-user ...`).
    fn start_sentinels(&mut self, ports: &[u16], primary: u16, extra: &str) {
        for (i, &port) in ports.iter().enumerate() {
            let dir = self.root.path().join(format!("sentinel{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            let conf = dir.join("sentinel.conf");
            // The lowest timings Sentinel allows a test to use: a primary
            // silent for a second is down, and a stuck failover is
            // retried after a few seconds.
            let text = format!(
                "port {port}\nbind 127.0.0.1\ndaemonize no\nloglevel verbose\n\
                 logfile \"{}\"\ndir \"{}\"\n\
                 sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 5000\n\
                 sentinel parallel-syncs {MASTER} 2\n{extra}",
                dir.join("sentinel.log").display(),
                dir.display()
            );
            std::fs::write(&conf, text).unwrap();
            let child = Command::new("redis-sentinel")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-sentinel");
            self.sentinels.push((port, child));
        }
        for &port in ports {
            wait_for(
                &format!("sentinel on port {port} answers PING"),
                Duration::from_secs(10),
                || try_cmd::<String>(port, &["PING"]).ok(),
            );
        }
    }

    /// Every server's and Sentinel's log.
    fn logs(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p
                    .file_name()
                    .is_some_and(|n| n == "durakv.log" || n == "sentinel.log")
                {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(self.root.path(), &mut out);
        out.sort();
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, c) in &mut self.sentinels {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in &mut self.nodes {
            n.kill9();
        }
        if std::thread::panicking() {
            for log in self.logs() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(80)..].join("\n");
                eprintln!("----- {} (last 80 lines)\n{tail}", log.display());
            }
        }
    }
}

fn sentinel_installed() -> bool {
    Command::new("redis-sentinel")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// SENTINEL's view: field maps of `SENTINEL REPLICAS|SENTINELS`.
fn sentinel_list(port: u16, what: &str) -> Vec<std::collections::HashMap<String, String>> {
    let Ok(items) = try_cmd::<Vec<Vec<String>>>(port, &["SENTINEL", what, MASTER]) else {
        return Vec::new();
    };
    items
        .into_iter()
        .map(|kv| {
            kv.chunks(2)
                .filter(|p| p.len() == 2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect()
        })
        .collect()
}

fn primary_port(sentinel: u16) -> Option<u16> {
    let addr: Vec<String> =
        try_cmd(sentinel, &["SENTINEL", "get-master-addr-by-name", MASTER]).ok()?;
    addr.get(1)?.parse().ok()
}

/// ROLE as (role, primary port for a replica, link state for a replica).
fn role(port: u16) -> Option<(String, u16, String)> {
    let v: redis::Value = try_cmd(port, &["ROLE"]).ok()?;
    let redis::Value::Array(items) = v else {
        return None;
    };
    let text = |i: usize| match items.get(i) {
        Some(redis::Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    let r = text(0)?;
    if r == "slave" {
        let p = match items.get(2) {
            Some(redis::Value::Int(n)) => *n as u16,
            _ => 0,
        };
        return Some((r, p, text(3)?));
    }
    Some((r, 0, String::new()))
}

fn digest(port: u16) -> Option<(i64, String)> {
    let n: i64 = try_cmd(port, &["DBSIZE"]).ok()?;
    let d: String = try_cmd(port, &["DEBUG", "DIGEST"]).ok()?;
    Some((n, d))
}

/// The durability directives of a server at `full`.
const FULL: &str = "durability = \"full\"\n";

/// A primary and two replicas, each with `settings`, and three Sentinels
/// monitoring them, started and settled: the primary sees both replicas
/// online, and every Sentinel knows both replicas and the other two
/// Sentinels. Returns the cluster and the servers' ports, primary first.
fn start_cluster(settings: &str) -> (Cluster, Vec<u16>) {
    start_cluster_with(settings, "")
}

/// As [`start_cluster`], with more lines for each Sentinel's file.
fn start_cluster_with(settings: &str, sentinel_extra: &str) -> (Cluster, Vec<u16>) {
    let ports = free_ports(6);
    let (node_ports, sentinel_ports) = ports.split_at(3);
    let root = tempfile::tempdir().unwrap();
    let mut cl = Cluster {
        nodes: Vec::new(),
        sentinels: Vec::new(),
        root,
    };
    for (i, &port) in node_ports.iter().enumerate() {
        let dir = cl.root.path().join(format!("node{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let node = Node {
            port,
            dir,
            child: None,
        };
        node.write_config((i > 0).then_some(node_ports[0]), settings);
        cl.nodes.push(node);
    }
    for n in &mut cl.nodes {
        n.start();
    }
    let primary = node_ports[0];
    wait_for("both replicas online", Duration::from_secs(20), || {
        let info: String = try_cmd(primary, &["INFO", "replication"]).ok()?;
        (info.matches("state=online").count() == 2).then_some(())
    });
    cl.start_sentinels(sentinel_ports, primary, sentinel_extra);
    // Sentinel learns replicas from the primary's INFO (every 10 s, and
    // at once on connecting) and other Sentinels from hello messages
    // (every 2 s): a kill waits until each one knows the whole set.
    for &s in sentinel_ports {
        wait_for(
            &format!("sentinel {s} knows 2 replicas and 2 sentinels"),
            Duration::from_secs(30),
            || {
                let up = sentinel_list(s, "REPLICAS")
                    .iter()
                    .filter(|r| r.get("flags").is_some_and(|f| f == "slave"))
                    .count();
                (up == 2 && sentinel_list(s, "SENTINELS").len() == 2).then_some(())
            },
        );
    }
    (cl, node_ports.to_vec())
}

#[test]
fn sentinel_fails_over_and_old_primary_rejoins() {
    if !sentinel_installed() {
        eprintln!("skipping: redis-sentinel is not installed (apt-get install redis-sentinel)");
        return;
    }
    let (mut cl, node_ports) = start_cluster(FULL);
    fail_over_and_rejoin(&mut cl, &node_ports);
}

/// The same failover with ACL in force: Sentinel logs in to every server
/// as a user that may run only what Sentinel needs, and each replica to
/// its primary as a user that may run only the replication handshake, as
/// Redis's documentation sets them up. CONFIG REWRITE then writes the
/// users (hashed) into each server's file, which the restarted old primary
/// reads back.
#[test]
fn sentinel_fails_over_as_restricted_acl_users() {
    if !sentinel_installed() {
        eprintln!("skipping: redis-sentinel is not installed (apt-get install redis-sentinel)");
        return;
    }
    let settings = format!(
        "{FULL}user = [\"sentinel on >spw allchannels +client +subscribe +publish +ping +info +multi +slaveof +replicaof +config +exec +role\", \"replica on >rpw +psync +replconf +ping\"]\n\
         masteruser = \"replica\"\nmasterauth = \"rpw\"\n"
    );
    let sentinel_auth =
        format!("sentinel auth-user {MASTER} sentinel\nsentinel auth-pass {MASTER} spw\n");
    let (mut cl, node_ports) = start_cluster_with(&settings, &sentinel_auth);
    // Sentinel's links and the replicas' links run as those users (a
    // failed AUTH would leave them running as `default`).
    let list: String = try_cmd(node_ports[0], &["CLIENT", "LIST"]).unwrap();
    assert!(list.contains(" user=sentinel "), "{list}");
    let replicas = list.lines().filter(|l| l.contains(" flags=S "));
    assert!(replicas.clone().count() == 2, "{list}");
    assert!(
        replicas.into_iter().all(|l| l.contains(" user=replica ")),
        "{list}"
    );
    fail_over_and_rejoin(&mut cl, &node_ports);
    // Nothing Sentinel or a replica sent was refused, on any server.
    for p in node_ports {
        let log: Vec<redis::Value> = try_cmd(p, &["ACL", "LOG"]).unwrap();
        assert!(log.is_empty(), "ACL LOG on {p}: {log:?}");
    }
}

/// Kills the primary, checks Sentinel's failover kept every acknowledged
/// write, restarts the old primary and checks it rejoins as a replica.
fn fail_over_and_rejoin(cl: &mut Cluster, node_ports: &[u16]) {
    let old = node_ports[0];

    let mut c = connect(old).unwrap();
    for i in 0..KEYS_BEFORE {
        let _: () = common::cmd(&["SET", &format!("k:{i}"), &format!("v{i}")])
            .query(&mut c)
            .unwrap();
    }
    let acked: i64 = q(&mut c, &["WAIT", "2", "10000"]);
    assert_eq!(acked, 2, "WAIT 2 before the kill");
    drop(c);

    let killed_at = Instant::now();
    cl.nodes[0].kill9();
    let sentinel = cl.sentinel_port();
    let first = wait_for(
        "Sentinel names a new primary",
        Duration::from_secs(60),
        || primary_port(sentinel).filter(|&p| p != old),
    );
    assert!(node_ports[1..].contains(&first), "new primary {first}");
    wait_for(
        "the new primary takes writes",
        Duration::from_secs(30),
        || try_cmd::<()>(first, &["SET", "after-failover", "1"]).ok(),
    );
    let failover = killed_at.elapsed();
    eprintln!(
        "failover: {:.2} s from kill -9 to the new primary ({first}) accepting writes",
        failover.as_secs_f64()
    );

    // With a 1 s down-after period a Sentinel may still judge the fresh
    // primary down once, before its first PING is answered, and fail over
    // again: the checks below use whichever primary the Sentinels settle on.
    let new = settle(cl, &node_ports[1..]);
    let mut c = connect(new).unwrap();
    for i in 0..KEYS_BEFORE {
        let v: Option<String> = q(&mut c, &["GET", &format!("k:{i}")]);
        assert_eq!(v.as_deref(), Some(format!("v{i}").as_str()), "k:{i} lost");
    }
    for i in 0..KEYS_AFTER {
        let _: () = q(&mut c, &["SET", &format!("n:{i}"), &format!("w{i}")]);
    }
    let acked: i64 = q(&mut c, &["WAIT", "1", "10000"]);
    assert_eq!(acked, 1, "WAIT 1 after the failover");
    drop(c);

    // The old primary comes back from its own directory and file, as a
    // primary; Sentinel sees it and converts it to a replica.
    cl.nodes[0].start();
    let last = settle(cl, node_ports);
    let mut c = connect(last).unwrap();
    let _: () = q(&mut c, &["SET", "after-rejoin", "1"]);
    let acked: i64 = q(&mut c, &["WAIT", "2", "10000"]);
    assert_eq!(acked, 2, "WAIT 2 after the old primary rejoined");
    for (prefix, value, n) in [("k", "v", KEYS_BEFORE), ("n", "w", KEYS_AFTER)] {
        for i in 0..n {
            let v: Option<String> = q(&mut c, &["GET", &format!("{prefix}:{i}")]);
            assert_eq!(v, Some(format!("{value}{i}")), "{prefix}:{i} lost");
        }
    }
    let want = digest(last).unwrap();
    assert!(want.0 as usize > KEYS_BEFORE + KEYS_AFTER, "{want:?}");
    for &p in node_ports.iter().filter(|&&p| p != last) {
        wait_for(
            &format!("{p} converges with the primary {last}"),
            Duration::from_secs(20),
            || (digest(p)? == want).then_some(()),
        );
    }

    // CONFIG REWRITE (inside Sentinel's MULTI) left each file naming the
    // role it was given.
    for n in &cl.nodes {
        let text = std::fs::read_to_string(n.config_path()).unwrap();
        let line = text.lines().find(|l| l.starts_with("replicaof"));
        if n.port == last {
            assert_eq!(line, None, "{text}");
        } else {
            let want = format!("replicaof = \"127.0.0.1 {last}\"");
            assert_eq!(line, Some(want.as_str()), "{text}");
        }
    }
}

/// Waits until every Sentinel names the same primary among `ports`, it
/// says it is one, the other servers of `ports` replicate it with their
/// links up, and that holds for two checks a second apart.
fn settle(cl: &Cluster, ports: &[u16]) -> u16 {
    let agreed = || -> Option<u16> {
        let mut named = cl.sentinels.iter().map(|(s, _)| primary_port(*s));
        let p = named.next()??;
        if !named.all(|q| q == Some(p)) || !ports.contains(&p) {
            return None;
        }
        if role(p)?.0 != "master" {
            return None;
        }
        for &r in ports.iter().filter(|&&r| r != p) {
            if role(r)? != ("slave".into(), p, "connected".into()) {
                return None;
            }
        }
        Some(p)
    };
    let mut last_seen = None;
    wait_for(
        "the Sentinels settle on one primary with the others replicating it",
        Duration::from_secs(60),
        || {
            let now = agreed();
            let stable = now.is_some() && now == last_seen;
            last_seen = now;
            if !stable {
                std::thread::sleep(Duration::from_millis(900));
            }
            stable.then_some(now).flatten()
        },
    )
}

/// A server made a replica at run time keeps the role through CONFIG
/// REWRITE and a restart; REPLICAOF NO ONE removes it again.
#[test]
fn replicaof_survives_config_rewrite_and_restart() {
    let primary = Server::start(&[]);
    let ports = free_ports(1);
    let root = tempfile::tempdir().unwrap();
    let mut node = Node {
        port: ports[0],
        dir: root.path().to_path_buf(),
        child: None,
    };
    node.write_config(None, FULL);
    node.start();
    let mut p = primary.conn();
    let _: () = q(&mut p, &["SET", "k", "v"]);
    let mut c = connect(node.port).unwrap();
    let pp = primary.port.to_string();
    let _: () = q(&mut c, &["REPLICAOF", "127.0.0.1", &pp]);
    let _: () = q(&mut c, &["CONFIG", "REWRITE"]);
    let text = std::fs::read_to_string(node.config_path()).unwrap();
    assert!(
        text.contains(&format!("replicaof = \"127.0.0.1 {pp}\"")),
        "{text}"
    );
    node.kill9();
    node.start();
    let port = node.port;
    wait_for(
        "the restarted server is a replica again",
        Duration::from_secs(20),
        || (role(port)? == ("slave".into(), primary.port, "connected".into())).then_some(()),
    );
    let v: Option<String> = try_cmd(port, &["GET", "k"]).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let mut c = connect(port).unwrap();
    let _: () = q(&mut c, &["REPLICAOF", "NO", "ONE"]);
    let _: () = q(&mut c, &["CONFIG", "REWRITE"]);
    let text = std::fs::read_to_string(node.config_path()).unwrap();
    assert!(!text.contains("replicaof"), "{text}");
    node.kill9();
}

fn info_fields(c: &mut Connection, section: &str) -> std::collections::HashMap<String, String> {
    let info: String = q(c, &["INFO", section]);
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What Sentinel reads and sends besides REPLICAOF: INFO's fields, the
/// announce directives, CLIENT KILL TYPE master (the replica reconnects
/// with a partial resync) and a replica switching to a promoted sibling
/// with +CONTINUE.
#[test]
fn sentinel_facing_fields_and_kills() {
    let primary = Server::start(&[]);
    let pp = primary.port.to_string();
    let a = Server::start(&["--replicaof", &format!("127.0.0.1 {pp}")]);
    let b = Server::start(&[
        "--replicaof",
        &format!("127.0.0.1 {pp}"),
        "--replica-priority",
        "7",
        "--replica-announce-ip",
        "10.1.2.3",
        "--replica-announce-port",
        "4242",
        "--replica-announced",
        "no",
    ]);
    let mut p = primary.conn();
    let _: () = q(&mut p, &["SET", "k", "1"]);
    eventually("both replicas online", || {
        let acked: i64 = q(&mut p, &["WAIT", "2", "100"]);
        acked == 2
    });
    let info: String = q(&mut p, &["INFO", "replication"]);
    assert!(
        info.contains("ip=10.1.2.3,port=4242,state=online"),
        "{info}"
    );
    let mut bc = b.conn();
    let f = info_fields(&mut bc, "replication");
    assert_eq!(f["slave_priority"], "7");
    assert_eq!(f["replica_announced"], "0");
    assert_eq!(f["master_link_status"], "up");
    assert!(!f.contains_key("master_link_down_since_seconds"));
    let f = info_fields(&mut bc, "server");
    assert_eq!(f["tcp_port"], b.port.to_string());
    assert_eq!(f["run_id"].len(), 40);
    assert!(f.contains_key("redis_version"));

    // TYPE master drops only the link; it comes back by partial resync.
    let mut ac = a.conn();
    let partial_before: i64 = info_fields(&mut p, "stats")["sync_partial_ok"]
        .parse()
        .unwrap();
    let list: String = q(&mut ac, &["CLIENT", "LIST", "TYPE", "master"]);
    assert!(list.contains("flags=M "), "{list}");
    let list: String = q(&mut p, &["CLIENT", "LIST", "TYPE", "replica"]);
    assert_eq!(list.matches("flags=S ").count(), 2, "{list}");
    let killed: i64 = q(&mut ac, &["CLIENT", "KILL", "TYPE", "master"]);
    assert_eq!(killed, 1);
    let killed: i64 = q(&mut ac, &["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, 0);
    let _: () = q(&mut p, &["SET", "k", "2"]);
    eventually("the killed link resumes", || {
        let f = info_fields(&mut p, "stats");
        f["sync_partial_ok"].parse::<i64>().unwrap() > partial_before
            && q::<Option<String>>(&mut ac, &["GET", "k"]).as_deref() == Some("2")
    });

    // A promoted, then B repointed to it: B continues through replid2.
    let _: () = q(&mut ac, &["REPLICAOF", "NO", "ONE"]);
    let ap = a.port.to_string();
    let full_before: i64 = info_fields(&mut ac, "stats")["sync_full"].parse().unwrap();
    let _: () = q(&mut bc, &["REPLICAOF", "127.0.0.1", &ap]);
    let _: () = q(&mut ac, &["SET", "k", "3"]);
    eventually("B follows A", || {
        q::<Option<String>>(&mut bc, &["GET", "k"]).as_deref() == Some("3")
    });
    let stats = info_fields(&mut ac, "stats");
    assert_eq!(stats["sync_full"].parse::<i64>().unwrap(), full_before);
    assert!(stats["sync_partial_ok"].parse::<i64>().unwrap() >= 1);
    let f = info_fields(&mut bc, "replication");
    assert_eq!(f["master_port"], ap);

    // A link that was up and is lost reports how long ago.
    drop(a);
    eventually("B reports the link down", || {
        let f = info_fields(&mut bc, "replication");
        f["master_link_status"] == "down"
            && f.get("master_link_down_since_seconds")
                .is_some_and(|s| s.parse::<i64>().unwrap() >= 0)
    });
}

/// Writers on `replicated` whose acknowledged writes must all survive
/// Sentinel failovers: how many rounds (kill -9 of whichever server is
/// primary) the test runs; `DURAKV_FAILOVER_ROUNDS` asks for more.
fn failover_rounds() -> usize {
    env_number("DURAKV_FAILOVER_ROUNDS").unwrap_or(2)
}

/// One writer's progress: keys `w{id}:{i}` written one after another, each
/// retried (SET is idempotent) until it is acknowledged.
struct Writer {
    acked: std::sync::atomic::AtomicUsize,
    errors: std::sync::atomic::AtomicUsize,
}

/// Sends `w{id}:0, 1, ...` to whichever server Sentinel names primary,
/// until `stop`; a write counts only once its reply is +OK.
fn write_until(id: usize, sentinel: u16, w: &Writer, stop: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering::SeqCst;
    let mut conn: Option<Connection> = None;
    let mut i = 0usize;
    while !stop.load(SeqCst) {
        if conn.is_none() {
            conn = primary_port(sentinel).and_then(|p| connect(p).ok());
            if conn.is_none() {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let key = format!("w{id}:{i}");
        match common::cmd(&["SET", &key, &i.to_string()]).query::<String>(c) {
            Ok(ok) if ok == "OK" => {
                i += 1;
                w.acked.store(i, SeqCst);
            }
            _ => {
                // Refused, timed out waiting for a replica, or the server
                // is gone: not acknowledged; ask Sentinel again.
                w.errors.fetch_add(1, SeqCst);
                conn = None;
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[test]
fn replicated_writes_survive_sentinel_failovers() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    if !sentinel_installed() {
        eprintln!("skipping: redis-sentinel is not installed (apt-get install redis-sentinel)");
        return;
    }
    // Acknowledged once durable here and on both replicas: whichever one
    // Sentinel promotes has every acknowledged write, whatever replica
    // offsets it last read. A write that finds too few replicas for 2 s
    // (one is dead until it rejoins) fails and is retried.
    let (mut cl, node_ports) = start_cluster(
        "durability = \"replicated\"\nmin-replicas-to-ack = 2\nreplicated-timeout-ms = 2000\n",
    );
    let first = node_ports[0];

    const WRITERS: usize = 4;
    let sentinel = cl.sentinel_port();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<Arc<Writer>> = (0..WRITERS)
        .map(|_| {
            Arc::new(Writer {
                acked: AtomicUsize::new(0),
                errors: AtomicUsize::new(0),
            })
        })
        .collect();
    let threads: Vec<_> = writers
        .iter()
        .enumerate()
        .map(|(id, w)| {
            let (w, stop) = (w.clone(), stop.clone());
            std::thread::spawn(move || write_until(id, sentinel, &w, &stop))
        })
        .collect();
    let total = |ws: &[Arc<Writer>]| ws.iter().map(|w| w.acked.load(SeqCst)).sum::<usize>();

    let mut alive: Vec<u16> = node_ports.to_vec();
    let mut primary = first;
    for round in 0..failover_rounds() {
        // Under load: the kill lands while writes are in flight.
        let before = total(&writers);
        wait_for("writers make progress", Duration::from_secs(20), || {
            (total(&writers) >= before + 200).then_some(())
        });
        let idx = cl.nodes.iter().position(|n| n.port == primary).unwrap();
        cl.nodes[idx].kill9();
        alive.retain(|&p| p != primary);
        let killed_at = Instant::now();
        let next = settle(&cl, &alive);
        assert_ne!(next, primary);
        let failover_s = killed_at.elapsed().as_secs_f64();
        let at_failover = total(&writers);
        // The killed server comes back and rejoins as a replica: with both
        // replicas required, writes are acknowledged again only then.
        cl.nodes[idx].start();
        alive.push(cl.nodes[idx].port);
        primary = settle(&cl, &alive);
        wait_for(
            "writers continue on the new primary",
            Duration::from_secs(30),
            || (total(&writers) >= at_failover + 100).then_some(()),
        );
        eprintln!(
            "round {round}: {next} primary {failover_s:.2} s after the kill, \
             replicated writes acknowledged again {:.2} s after it, {} acknowledged so far",
            killed_at.elapsed().as_secs_f64(),
            total(&writers)
        );
    }
    stop.store(true, SeqCst);
    for t in threads {
        t.join().unwrap();
    }

    // Every acknowledged write is on the primary, and each writer's keys
    // are a prefix of what it sent: all it was told about, plus at most
    // the one write in flight when its server died.
    let mut c = connect(primary).unwrap();
    for (id, w) in writers.iter().enumerate() {
        let acked = w.acked.load(SeqCst);
        assert!(acked > 0, "writer {id} never got an acknowledgement");
        for i in 0..acked {
            let v: Option<String> = q(&mut c, &["GET", &format!("w{id}:{i}")]);
            assert_eq!(v, Some(i.to_string()), "w{id}:{i} acknowledged but lost");
        }
        let keys: Vec<String> = q(&mut c, &["KEYS", &format!("w{id}:*")]);
        assert!(
            keys.len() == acked || keys.len() == acked + 1,
            "writer {id}: {} keys for {acked} acknowledged writes",
            keys.len()
        );
        if keys.len() == acked + 1 {
            let v: Option<String> = q(&mut c, &["GET", &format!("w{id}:{acked}")]);
            assert_eq!(v, Some(acked.to_string()), "writer {id}: a gap");
        }
        eprintln!(
            "writer {id}: {acked} acknowledged, {} refused or lost connections",
            w.errors.load(SeqCst)
        );
    }
    // The replicas converge on the primary's data.
    let _: i64 = q(&mut c, &["WAIT", "2", "10000"]);
    let want = digest(primary).unwrap();
    for &p in alive.iter().filter(|&&p| p != primary) {
        wait_for(
            &format!("{p} converges with the primary {primary}"),
            Duration::from_secs(20),
            || (digest(p)? == want).then_some(()),
        );
    }
}
