//! Replication over real sockets: durakv to durakv (full sync of every
//! type with TTLs, live writes, READONLY, WAIT, INFO/ROLE, promotion,
//! a replica killed with kill -9 and restarted), a real Redis 7 primary
//! to a durakv replica (the migration path, compact and big encodings),
//! and a durakv primary to a real Redis replica. The Redis tests skip
//! with a message when `redis-server` is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{error_text, eventually, line, q, raw_full_sync_and_link, try_q, RealRedis, Server};
use redis::Connection;
use std::time::Duration;

const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];

fn ok(c: &mut Connection, args: &[&str]) {
    let _: redis::Value = q(c, args);
}

fn info_field(c: &mut Connection, field: &str) -> String {
    let info: String = q(c, &["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .to_string()
}

/// A key's type and content in a canonical form (sorted where the type is
/// unordered), so two servers compare whatever their encodings.
fn content(c: &mut Connection, key: &str) -> String {
    let t: String = q(c, &["TYPE", key]);
    let body = match t.as_str() {
        "string" => q::<String>(c, &["GET", key]),
        "list" => q::<Vec<String>>(c, &["LRANGE", key, "0", "-1"]).join(","),
        "set" => {
            let mut m: Vec<String> = q(c, &["SMEMBERS", key]);
            m.sort();
            m.join(",")
        }
        "hash" => {
            let mut m: Vec<String> = q(c, &["HGETALL", key]);
            let mut pairs: Vec<String> = m.chunks(2).map(|p| p.join("=")).collect();
            pairs.sort();
            m.clear();
            pairs.join(",")
        }
        "zset" => q::<Vec<String>>(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"]).join(","),
        other => other.to_string(),
    };
    let ttl: i64 = q(c, &["PTTL", key]);
    let has_ttl = ttl > 0;
    format!("{t}:{body}:ttl={has_ttl}")
}

/// Every key of databases `dbs`, with its content, sorted.
fn dataset(c: &mut Connection, dbs: &[u32]) -> Vec<String> {
    let mut out = Vec::new();
    for db in dbs {
        ok(c, &["SELECT", &db.to_string()]);
        let keys: Vec<String> = q(c, &["KEYS", "*"]);
        for k in keys {
            let v = content(c, &k);
            out.push(format!("{db}/{k}={v}"));
        }
    }
    ok(c, &["SELECT", "0"]);
    out.sort();
    out
}

fn converged(p: &mut Connection, r: &mut Connection, dbs: &[u32]) -> bool {
    dataset(p, dbs) == dataset(r, dbs)
}

fn wait_converged(p: &mut Connection, r: &mut Connection, dbs: &[u32]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !converged(p, r, dbs) {
        assert!(
            std::time::Instant::now() < deadline,
            "replica did not converge"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn link_up(r: &mut Connection) -> bool {
    info_field(r, "master_link_status") == "up"
}

fn populate(c: &mut Connection) {
    ok(c, &["SET", "s", "hello"]);
    ok(c, &["SET", "ttl", "v", "PX", "600000"]);
    ok(c, &["SET", "n", "10"]);
    ok(c, &["RPUSH", "l", "a", "b", "c"]);
    ok(c, &["SADD", "ints", "1", "2", "3"]);
    ok(c, &["SADD", "set", "x", "y"]);
    ok(c, &["HSET", "h", "f1", "v1", "f2", "v2"]);
    ok(c, &["ZADD", "z", "1.5", "a", "-2", "b", "inf", "c"]);
    let big: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "bigset"];
    args.extend(big.iter().map(|s| s.as_str()));
    ok(c, &args);
    let mut args = vec!["RPUSH", "biglist"];
    args.extend(big.iter().map(|s| s.as_str()));
    ok(c, &args);
    let mut hargs = vec!["HSET".to_string(), "bighash".to_string()];
    let mut zargs = vec!["ZADD".to_string(), "bigz".to_string()];
    for i in 0..300 {
        hargs.push(format!("f{i}"));
        hargs.push(format!("v{i}"));
        zargs.push(format!("{i}"));
        zargs.push(format!("m{i}"));
    }
    ok(c, &hargs.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    ok(c, &zargs.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    ok(c, &["SELECT", "3"]);
    ok(c, &["SET", "db3", "x"]);
    ok(c, &["SELECT", "0"]);
}

fn live_writes(c: &mut Connection) {
    ok(c, &["INCR", "n"]);
    ok(c, &["APPEND", "s", " world"]);
    ok(c, &["LPUSH", "l", "z"]);
    ok(c, &["RPOP", "l"]);
    ok(c, &["LSET", "l", "0", "zz"]);
    ok(c, &["HDEL", "h", "f1"]);
    ok(c, &["SREM", "set", "x"]);
    ok(c, &["ZINCRBY", "z", "2", "a"]);
    ok(c, &["EXPIRE", "s", "1000"]);
    ok(c, &["PERSIST", "ttl"]);
    ok(c, &["SPOP", "bigset"]);
    ok(c, &["MULTI"]);
    ok(c, &["SET", "m1", "1"]);
    ok(c, &["SET", "m2", "2"]);
    ok(c, &["EXEC"]);
    ok(c, &["RENAME", "h", "h2"]);
    ok(c, &["COPY", "l", "lcopy"]);
    ok(c, &["SELECT", "5"]);
    ok(c, &["SET", "db5", "y"]);
    ok(c, &["SELECT", "0"]);
    ok(c, &["DEL", "ints"]);
}

const DBS: [u32; 3] = [0, 3, 5];

/// A populated durakv primary and a durakv replica that caught up with it.
fn synced_pair() -> (Server, Connection, Server, Connection) {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    populate(&mut p);
    let replica = Server::start(&DEBUG);
    let mut r = replica.conn();
    ok(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
    );
    eventually("the link is up", || link_up(&mut r));
    wait_converged(&mut p, &mut r, &DBS);
    (primary, p, replica, r)
}

/// A server started with `replicaof` pointing at `primary`, plus `extra`.
fn replica_of(primary: &Server, extra: &[&str]) -> Server {
    let replicaof = format!("127.0.0.1 {}", primary.port);
    let mut args = vec!["--replicaof", replicaof.as_str()];
    args.extend_from_slice(extra);
    Server::start(&args)
}

fn stat(c: &mut Connection, field: &str) -> String {
    let info: String = q(c, &["INFO", "stats"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .to_string()
}

/// WAIT with too few replicas waits out its timeout, as in Redis, so a
/// replica that connects meanwhile is counted; inside MULTI it answers at
/// once.
#[test]
fn wait_counts_a_replica_that_connects_while_it_waits() {
    let primary = Server::start(&[]);
    let mut p = primary.conn();
    ok(&mut p, &["SET", "k", "v"]);
    let t = std::time::Instant::now();
    let n: i64 = q(&mut p, &["WAIT", "1", "300"]);
    assert_eq!(n, 0);
    assert!(t.elapsed() >= Duration::from_millis(250), "did not wait");
    let _: () = redis::cmd("MULTI").query(&mut p).unwrap();
    let _: () = redis::cmd("WAIT").arg(1).arg(0).query(&mut p).unwrap();
    let r: Vec<i64> = redis::cmd("EXEC").query(&mut p).unwrap();
    assert_eq!(r, [0]);
    let started = std::thread::scope(|s| {
        let late = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            replica_of(&primary, &[])
        });
        let n: i64 = q(&mut p, &["WAIT", "1", "20000"]);
        assert_eq!(n, 1, "the replica that connected during WAIT");
        late.join().unwrap()
    });
    drop(started);
}

/// The server's OS threads (Linux).
fn threads(server: &Server) -> usize {
    let pid = server.child.as_ref().unwrap().id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Clients in WAIT and WAITAOF are parked as blocked clients, holding no
/// thread: hundreds of them with no timeout leave the server serving
/// others, CLIENT UNBLOCK ends one with what holds so far, and a replica
/// that connects and acknowledges releases the rest.
#[test]
fn waiting_clients_are_parked_and_released_by_acknowledgements() {
    use durakv_protocol::Frame;
    const WAITERS: usize = 300;
    let blocked = |c: &mut Connection| common::info_field(c, "clients", "blocked_clients");
    let primary = Server::start(&["--maxclients", "1000"]);
    let mut p = primary.conn();
    let before = threads(&primary);
    // Every third client sends WAITAOF, the others WAIT.
    let mut waiters: Vec<(i64, common::RespConn)> = (0..WAITERS)
        .map(|i| {
            let mut c = common::RespConn::new(primary.raw());
            c.send(&["CLIENT", "ID"]);
            let Frame::Integer(id) = c.frame() else {
                panic!("CLIENT ID")
            };
            c.send(&["SET", &format!("w{i}"), "v"]);
            c.expect("+OK\r\n");
            if i % 3 == 0 {
                c.send(&["WAITAOF", "1", "1", "0"]);
            } else {
                c.send(&["WAIT", "1", "0"]);
            }
            (id, c)
        })
        .collect();
    common::eventually("all waiters blocked", || {
        blocked(&mut p) == WAITERS.to_string()
    });
    let t = std::time::Instant::now();
    let pong: String = q(&mut p, &["PING"]);
    assert_eq!(pong, "PONG");
    assert!(t.elapsed() < Duration::from_secs(1));
    let grown = threads(&primary).saturating_sub(before);
    assert!(
        grown < 16,
        "{grown} more threads for {WAITERS} waiting clients"
    );

    // CLIENT UNBLOCK answers WAIT with the replicas so far, and WAITAOF
    // with [local, replicas], its local write durable.
    let answer = |c: &mut common::RespConn| c.frame();
    for (i, want) in [
        (0, Frame::Array(vec![Frame::Integer(1), Frame::Integer(0)])),
        (1, Frame::Integer(0)),
    ] {
        let id = waiters[i].0.to_string();
        let n: i64 = q(&mut p, &["CLIENT", "UNBLOCK", &id]);
        assert_eq!(n, 1);
        assert_eq!(answer(&mut waiters[i].1), want);
    }
    assert_eq!(blocked(&mut p), (WAITERS - 2).to_string());

    let replica = replica_of(&primary, &[]);
    for (i, (_, c)) in waiters.iter_mut().enumerate().skip(2) {
        let want = if i % 3 == 0 {
            Frame::Array(vec![Frame::Integer(1), Frame::Integer(1)])
        } else {
            Frame::Integer(1)
        };
        assert_eq!(answer(c), want, "waiter {i}");
    }
    assert_eq!(blocked(&mut p), "0");
    drop(replica);
}

/// A server made a replica disconnects its blocked clients with Redis's
/// UNBLOCKED error, so that they go and find the new primary, as Redis's
/// clients expect after a failover.
#[test]
fn becoming_a_replica_disconnects_blocked_clients() {
    use std::io::Read;
    let primary = Server::start(&[]);
    let demoted = Server::start(&[]);
    let mut d = demoted.conn();
    ok(&mut d, &["SET", "k", "v"]);
    let mut blpop = common::RespConn::new(demoted.raw());
    blpop.send(&["BLPOP", "list", "0"]);
    let mut wait = common::RespConn::new(demoted.raw());
    wait.send(&["WAIT", "1", "0"]);
    common::eventually("both blocked", || {
        common::info_field(&mut d, "clients", "blocked_clients") == "2"
    });
    let port = primary.port.to_string();
    ok(&mut d, &["REPLICAOF", "127.0.0.1", &port]);
    for c in [&mut blpop, &mut wait] {
        c.expect("-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n");
    }
    for mut c in [blpop, wait] {
        let mut rest = Vec::new();
        c.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = c.s.read_to_end(&mut rest).unwrap();
        assert_eq!(n, 0, "connection left open: {rest:?}");
    }
    assert_eq!(
        common::info_field(&mut d, "clients", "blocked_clients"),
        "0"
    );
}

#[test]
fn durakv_replica_syncs_streams_refuses_writes_and_promotes() {
    let (_primary, mut p, _replica, mut r) = synced_pair();

    live_writes(&mut p);
    wait_converged(&mut p, &mut r, &DBS);
    let digest_p: String = q(&mut p, &["DEBUG", "DIGEST"]);
    let digest_r: String = q(&mut r, &["DEBUG", "DIGEST"]);
    assert_eq!(digest_p, digest_r);

    let e = common::err(&mut r, &["SET", "x", "1"]);
    assert_eq!(e, "READONLY You can't write against a read only replica.");
    let n: i64 = q(&mut p, &["WAIT", "1", "5000"]);
    assert_eq!(n, 1);
    // The full sync and the stream since count as replication traffic.
    let sent: u64 = stat(&mut p, "total_net_repl_output_bytes").parse().unwrap();
    let got: u64 = stat(&mut r, "total_net_repl_input_bytes").parse().unwrap();
    assert!(sent > 1000 && got > 1000, "sent {sent}, received {got}");

    assert_eq!(info_field(&mut p, "role"), "master");
    assert_eq!(info_field(&mut p, "connected_slaves"), "1");
    assert!(info_field(&mut p, "slave0").contains("state=online"));
    assert_eq!(info_field(&mut r, "role"), "slave");
    assert_eq!(
        info_field(&mut r, "master_replid"),
        info_field(&mut p, "master_replid")
    );
    let role: Vec<redis::Value> = q(&mut r, &["ROLE"]);
    assert_eq!(role[0], common::bulk("slave"));

    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(info_field(&mut r, "role"), "master");
    ok(&mut r, &["SET", "x", "1"]);
}

#[test]
fn replica_killed_and_restarted_resumes() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    populate(&mut p);
    let mut replica = replica_of(&primary, &[]);
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    wait_converged(&mut p, &mut r, &DBS);
    replica.kill9();
    live_writes(&mut p);
    replica.restart();
    let mut r = replica.conn();
    eventually("the link is up again", || link_up(&mut r));
    wait_converged(&mut p, &mut r, &DBS);
    ok(&mut p, &["SET", "after", "restart"]);
    wait_converged(&mut p, &mut r, &DBS);
}

fn wal_segments(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("wal"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .count()
        })
        .unwrap_or(0)
}

/// Leaves what looks like a batch cut short by a power loss after the
/// last batch of the newest log segment, so recovery ends the log there
/// and opens a new epoch: the segments holding the replica's position stop
/// being active, and the next checkpoint may remove them.
fn tear_log_tail(dir: &std::path::Path) {
    let wal = dir.join("wal");
    let mut segs: Vec<_> = std::fs::read_dir(&wal)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segs.sort();
    let last = segs.last().expect("a log segment");
    let mut bytes = std::fs::read(last).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).expect("a batch") + 1;
    let at = end.div_ceil(64) * 64;
    // A batch header whose magic (bytes 44..48) is still zero.
    bytes[at..at + 44].fill(0x5a);
    std::fs::write(last, bytes).unwrap();
}

/// The replica's stream position survives a checkpoint that removes every
/// log record carrying it. A torn tail makes the restarted replica write a
/// new epoch; the primary is idle, so no record of that epoch carries a
/// position, and SAVE removes the old epoch's segments. The position is
/// then only in the checkpoint; without it the replica would resync fully.
#[test]
fn replica_position_survives_checkpoint_and_log_truncation() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    populate(&mut p);
    let mut replica = replica_of(
        &primary,
        &[
            "--wal-segment-size-mb",
            "1",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    live_writes(&mut p);
    wait_converged(&mut p, &mut r, &DBS);

    replica.kill9();
    tear_log_tail(replica.dir.path());
    replica.restart();
    let mut r = replica.conn();
    eventually("the link is up again", || link_up(&mut r));
    assert_eq!(stat(&mut p, "sync_partial_ok"), "1", "no partial resync");
    let before = wal_segments(replica.dir.path());
    ok(&mut r, &["SAVE"]);
    let after = wal_segments(replica.dir.path());
    assert!(
        after < before,
        "SAVE removed no segment ({before} -> {after})"
    );

    replica.kill9();
    ok(&mut p, &["INCR", "n"]);
    ok(&mut p, &["RPUSH", "l", "after-save"]);
    ok(&mut p, &["HSET", "h2", "f9", "v9"]);
    replica.restart();
    let mut r = replica.conn();
    eventually("the link is up again", || link_up(&mut r));
    assert_eq!(stat(&mut p, "sync_partial_ok"), "2", "no partial resync");
    assert_eq!(stat(&mut p, "sync_full"), "1", "a needless full sync");
    wait_converged(&mut p, &mut r, &DBS);
    let digest_p: String = q(&mut p, &["DEBUG", "DIGEST"]);
    let digest_r: String = q(&mut r, &["DEBUG", "DIGEST"]);
    assert_eq!(digest_p, digest_r);
}

/// `n` string keys `{prefix}{i}`, pipelined.
fn fill(c: &mut Connection, prefix: &str, n: usize) {
    let value = "v".repeat(200);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("SET")
                .arg(format!("{prefix}{i}"))
                .arg(&value)
                .ignore();
        }
        let _: () = pipe.query(c).unwrap();
    }
}

/// A replica killed with kill -9 while it loads a full sync comes back by
/// itself (it was started with `replicaof`), resyncs fully rather than
/// continuing from the half-loaded dataset or from the position it had
/// before the sync, and converges; the primary serves writes throughout
/// and lists exactly one replica, online, at the end.
#[test]
fn replica_killed_mid_full_sync_recovers() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    populate(&mut p);
    // Checkpoints every MiB of log, so some run during the load: what they
    // store must not pass for a complete dataset either.
    let mut replica = replica_of(
        &primary,
        &[
            "--checkpoint-wal-size-mb",
            "1",
            "--enable-debug-command",
            "yes",
            // A load slow enough to be caught in the middle however fast
            // the build: 50 us a key, about two seconds.
            "--key-load-delay",
            "50",
        ],
    );
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    wait_converged(&mut p, &mut r, &DBS);
    // The replica now has a position; make the next sync a full one that
    // takes a while to load, by cutting the link while the primary writes
    // more than its backlog holds.
    replica.kill9();
    fill(&mut p, "big:", 40_000);
    replica.restart();
    let mut r = replica.conn();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let loading = info_field(&mut r, "master_sync_in_progress") == "1";
        // DBSIZE is refused (-LOADING) while the dataset loads; INFO is not.
        if loading && keys_in_info(&mut r) > 100 {
            break;
        }
        assert!(
            !link_up(&mut r),
            "the full sync finished before it could be interrupted"
        );
        assert!(std::time::Instant::now() < deadline, "no full sync seen");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let a checkpoint or two run during the load.
    let checkpoints = |dir: &std::path::Path| {
        std::fs::read_dir(dir.join("checkpoints"))
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".dkcp"))
                    .count()
            })
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while checkpoints(replica.dir.path()) == 0 && !link_up(&mut r) {
        assert!(std::time::Instant::now() < deadline, "no checkpoint ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!link_up(&mut r), "the full sync finished before the kill");
    replica.kill9();
    assert!(checkpoints(replica.dir.path()) > 0);
    assert_eq!(stat(&mut p, "sync_full"), "2");
    // The primary keeps serving while the replica is down and reloading.
    ok(&mut p, &["SET", "during", "1"]);
    replica.restart();
    let mut r = replica.conn();
    ok(&mut p, &["INCR", "n"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while !link_up(&mut r) {
        assert!(
            std::time::Instant::now() < deadline,
            "the link never came up"
        );
        ok(&mut p, &["INCR", "counter"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Not a partial resync from a half-applied snapshot.
    assert_eq!(stat(&mut p, "sync_partial_ok"), "0");
    assert_eq!(stat(&mut p, "sync_full"), "3");
    wait_converged(&mut p, &mut r, &DBS);
    let digest_p: String = q(&mut p, &["DEBUG", "DIGEST"]);
    let digest_r: String = q(&mut r, &["DEBUG", "DIGEST"]);
    assert_eq!(digest_p, digest_r);
    let np: i64 = q(&mut p, &["DBSIZE"]);
    let nr: i64 = q(&mut r, &["DBSIZE"]);
    assert_eq!(np, nr);
    eventually("one online replica on the primary", || {
        info_field(&mut p, "connected_slaves") == "1"
            && info_field(&mut p, "slave0").contains("state=online")
            && info_field(&mut p, "slave1").is_empty()
    });
}

/// A full sync completes while the primary keeps writing faster than its
/// backlog (`repl-backlog-size`, 16 KiB here) holds for the time the sync
/// takes: the stream after the snapshot is kept for the new replica from
/// the moment the snapshot is taken. Before, the replica was cut off as
/// "behind" once its snapshot was sent, and resynced fully again, for as
/// long as the writes went on.
#[test]
fn full_sync_completes_under_continuous_writes() {
    let primary = Server::start(&[
        "--repl-backlog-size",
        "16384",
        "--enable-debug-command",
        "yes",
    ]);
    let mut p = primary.conn();
    populate(&mut p);
    fill(&mut p, "big:", 20_000);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut c = primary.conn();
        std::thread::spawn(move || {
            let value = "w".repeat(1000);
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Writes a replica would get wrong if the snapshot (copied
                // while they run) and the stream after it both had them, or
                // neither: counters, list pushes, and keys that come and go
                // among the big ones already there.
                let mut pipe = redis::pipe();
                for _ in 0..20 {
                    pipe.cmd("SET")
                        .arg(format!("w:{}", n % 5000))
                        .arg(&value)
                        .ignore();
                    pipe.cmd("INCR").arg(format!("c:{}", n % 500)).ignore();
                    pipe.cmd("RPUSH")
                        .arg(format!("l:{}", n % 200))
                        .arg(n)
                        .ignore();
                    pipe.cmd("DEL").arg(format!("big:{}", n % 20_000)).ignore();
                    pipe.cmd("APPEND")
                        .arg(format!("big:{}", (n * 7 + 3) % 20_000))
                        .arg("+")
                        .ignore();
                    pipe.cmd("HINCRBY")
                        .arg(format!("h:{}", n % 300))
                        .arg("f")
                        .arg(1)
                        .ignore();
                    n += 1;
                }
                let _: () = pipe.query(&mut c).unwrap();
            }
            n
        })
    };
    let replica = Server::start(&["--enable-debug-command", "yes"]);
    let mut r = replica.conn();
    ok(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !link_up(&mut r) {
        assert!(
            std::time::Instant::now() < deadline,
            "no full sync completed under writes ({} started)",
            stat(&mut p, "sync_full")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Stays up while the writes go on.
    std::thread::sleep(Duration::from_secs(2));
    assert!(link_up(&mut r));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 0);
    assert_eq!(stat(&mut p, "sync_full"), "1");
    wait_converged(&mut p, &mut r, &DBS);
    let digest_p: String = q(&mut p, &["DEBUG", "DIGEST"]);
    let digest_r: String = q(&mut r, &["DEBUG", "DIGEST"]);
    assert_eq!(digest_p, digest_r);
}

#[test]
fn link_loss_resumes_with_partial_resync() {
    let (_primary, mut p, _replica, mut r) = synced_pair();
    // Kill the replica's link from the primary's side.
    let killed: i64 = q(&mut p, &["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, 1);
    live_writes(&mut p);
    eventually("the link is up again", || {
        link_up(&mut r) && stat(&mut p, "sync_partial_ok") == "1"
    });
    wait_converged(&mut p, &mut r, &DBS);
    assert_eq!(stat(&mut p, "sync_full"), "1");
}

/// A replica with a smaller `proto-max-bulk-len` than its primary still
/// applies every write the primary accepted: a bulk longer than its own
/// limit, and APPEND, SETRANGE and SETBIT that grow a string past it. Its
/// own clients stay bound by its limit.
#[test]
fn a_replica_applies_strings_longer_than_its_own_limit() {
    let primary = Server::start(&[DEBUG[0], DEBUG[1], "--proto-max-bulk-len", "8mb"]);
    let mut p = primary.conn();
    let replica = replica_of(
        &primary,
        &[DEBUG[0], DEBUG[1], "--proto-max-bulk-len", "1mb"],
    );
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    let mib = 1024 * 1024;
    ok(&mut p, &["SET", "big", &"a".repeat(2 * mib)]);
    ok(&mut p, &["APPEND", "big", &"b".repeat(mib / 2)]);
    ok(&mut p, &["SETRANGE", "ranged", &(3 * mib).to_string(), "x"]);
    ok(&mut p, &["SETBIT", "bits", &(4 * mib * 8).to_string(), "1"]);
    ok(&mut p, &["SET", "after", "1"]);
    eventually("the replica applied every write", || {
        try_q::<Option<String>>(&mut r, &["GET", "after"])
            .ok()
            .flatten()
            == Some("1".into())
    });
    for key in ["big", "ranged", "bits"] {
        let on_primary: i64 = q(&mut p, &["STRLEN", key]);
        let on_replica: i64 = q(&mut r, &["STRLEN", key]);
        assert_eq!(on_replica, on_primary, "{key}");
        let digest_p: Vec<String> = q(&mut p, &["DEBUG", "DIGEST-VALUE", key]);
        let digest_r: Vec<String> = q(&mut r, &["DEBUG", "DIGEST-VALUE", key]);
        assert_eq!(digest_r, digest_p, "{key}");
    }
    assert_eq!(stat(&mut p, "sync_full"), "1", "the link never broke");
    // Its own clients still get its limit.
    let err = try_q::<i64>(&mut r, &["GETBIT", "bits", &(2 * mib * 8).to_string()]);
    assert_eq!(
        error_text(&err.unwrap_err()),
        "ERR bit offset is not an integer or out of range"
    );
}

// ---------------------------------------------------------------------------
// Chained replication: a replica serving replicas of its own
// ---------------------------------------------------------------------------

/// A -> B -> C: C full-syncs from the replica B (while A's stream has a
/// database other than 0 selected, so C must learn it from the RDB), then
/// follows A's writes through B, transactions included; a link of B's
/// lost resumes C too; B promoted keeps C as a partial resync.
#[test]
fn a_replica_serves_replicas_of_its_own() {
    let (primary, mut a, mid, mut b) = synced_pair();
    // A's stream now has database 5 selected.
    ok(&mut a, &["SELECT", "5"]);
    ok(&mut a, &["SET", "in5", "1"]);
    ok(&mut a, &["SELECT", "0"]);
    let n: i64 = q(&mut a, &["WAIT", "1", "5000"]);
    assert_eq!(n, 1);

    let leaf = replica_of(&mid, &DEBUG);
    let mut c = leaf.conn();
    eventually("C's link to B is up", || link_up(&mut c));
    wait_converged(&mut a, &mut c, &DBS);
    assert_eq!(info_field(&mut b, "connected_slaves"), "1");
    assert_eq!(info_field(&mut a, "connected_slaves"), "1");
    assert_eq!(
        info_field(&mut c, "master_replid"),
        info_field(&mut a, "master_replid"),
        "the chain shares the primary's history"
    );

    // Writes in database 5 without a new SELECT in the stream, then the
    // usual mix (MULTI, other databases).
    let mut a5 = primary.conn();
    ok(&mut a5, &["SELECT", "5"]);
    ok(&mut a5, &["INCR", "in5"]);
    live_writes(&mut a);
    wait_converged(&mut a, &mut c, &DBS);
    let digest_a: String = q(&mut a, &["DEBUG", "DIGEST"]);
    eventually("C's digest equals A's", || {
        q::<String>(&mut c, &["DEBUG", "DIGEST"]) == digest_a
    });
    eventually("offsets are the primary's, byte for byte", || {
        info_field(&mut c, "master_repl_offset") == info_field(&mut a, "master_repl_offset")
    });

    // B loses its link to A and resumes; C never notices.
    let killed: i64 = q(&mut a, &["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, 1);
    ok(&mut a, &["SET", "after-b-link-loss", "1"]);
    eventually("B resumed", || link_up(&mut b));
    wait_converged(&mut a, &mut c, &DBS);
    assert_eq!(stat(&mut b, "sync_full"), "1", "C synced fully once");

    // B promoted: C reconnects under B's new ID and continues.
    ok(&mut b, &["REPLICAOF", "NO", "ONE"]);
    ok(&mut b, &["SET", "b-is-primary", "1"]);
    eventually("C follows B's own writes", || {
        q::<Option<String>>(&mut c, &["GET", "b-is-primary"]).is_some()
    });
    eventually("C reconnected and continued", || {
        stat(&mut b, "sync_partial_ok") == "1"
    });
    assert_eq!(stat(&mut b, "sync_full"), "1", "no second full sync");
    assert_eq!(
        info_field(&mut c, "master_replid"),
        info_field(&mut b, "master_replid")
    );
    wait_converged(&mut b, &mut c, &DBS);
}

/// C full-syncs from the replica B while A keeps writing through B:
/// counters, pushes and transactions (which B relays only whole), from two
/// connections in two databases. The snapshot B takes for C is fixed
/// between two of the stream's commands, so C ends equal to A.
#[test]
fn a_sub_replica_syncs_from_a_replica_under_writes() {
    let (primary, mut a, mid, _b) = synced_pair();
    fill(&mut a, "big:", 5_000);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = [0u32, 3]
        .into_iter()
        .map(|db| {
            let stop = stop.clone();
            let mut c = primary.conn();
            ok(&mut c, &["SELECT", &db.to_string()]);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut tx = redis::pipe();
                    tx.atomic();
                    for _ in 0..5 {
                        tx.cmd("INCR").arg(format!("c:{}", n % 100)).ignore();
                        tx.cmd("RPUSH").arg(format!("l:{}", n % 50)).arg(n).ignore();
                        n += 1;
                    }
                    let _: () = tx.query(&mut c).unwrap();
                    let _: () = redis::cmd("HINCRBY")
                        .arg(format!("h:{}", n % 30))
                        .arg("f")
                        .arg(1)
                        .query(&mut c)
                        .unwrap();
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let leaf = replica_of(&mid, &DEBUG);
    let mut c = leaf.conn();
    eventually("C's link to B is up", || link_up(&mut c));
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        assert!(w.join().unwrap() > 0);
    }
    let digest_a: String = q(&mut a, &["DEBUG", "DIGEST"]);
    eventually("C's digest equals A's", || {
        q::<String>(&mut c, &["DEBUG", "DIGEST"]) == digest_a
    });
    wait_converged(&mut a, &mut c, &[0, 3]);
}

/// A replica that has not synced has nothing to serve: PSYNC gets Redis's
/// NOMASTERLINK.
#[test]
fn a_replica_without_its_primary_refuses_to_serve() {
    let lonely = Server::start(&[]);
    let mut r = lonely.conn();
    // Nothing listens on port 1: the link never comes up.
    ok(&mut r, &["REPLICAOF", "127.0.0.1", "1"]);
    let e = common::err(&mut r, &["PSYNC", "?", "-1"]);
    assert_eq!(
        e,
        "NOMASTERLINK Can't SYNC while not connected with my master"
    );
}

/// A durakv replica serving a real Redis replica (Redis reads
/// `repl-stream-db` from the RDB and then the relayed stream).
#[test]
fn a_durakv_replica_feeds_a_redis_replica() {
    let (_primary, mut a, mid, _b) = synced_pair();
    ok(&mut a, &["SELECT", "3"]);
    ok(&mut a, &["SET", "pre", "1"]);
    let n: i64 = q(&mut a, &["WAIT", "1", "5000"]);
    assert_eq!(n, 1);
    let Some(redis) = start_redis(&["--replicaof", "127.0.0.1", &mid.port.to_string()]) else {
        return;
    };
    let mut r = redis.conn();
    eventually("the link is up", || link_up(&mut r));
    ok(&mut a, &["INCR", "pre"]);
    ok(&mut a, &["SELECT", "0"]);
    live_writes(&mut a);
    wait_converged(&mut a, &mut r, &DBS);
}

// ---------------------------------------------------------------------------
// Against a real Redis 7
// ---------------------------------------------------------------------------

fn start_redis(extra: &[&str]) -> Option<RealRedis> {
    let mut args = vec!["--repl-diskless-sync-delay", "0"];
    args.extend_from_slice(extra);
    RealRedis::start(&args)
}

#[test]
fn redis_primary_migrates_into_durakv_replica() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let mut p = redis.conn();
    populate(&mut p);
    let replica = Server::start(&DEBUG);
    let mut r = replica.conn();
    ok(&mut r, &["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
    eventually("the link is up", || link_up(&mut r));
    wait_converged(&mut p, &mut r, &DBS);
    live_writes(&mut p);
    wait_converged(&mut p, &mut r, &DBS);
    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    ok(&mut r, &["SET", "migrated", "yes"]);
}

#[test]
fn durakv_primary_feeds_redis_replica() {
    let primary = Server::start(&DEBUG);
    let mut p = primary.conn();
    populate(&mut p);
    let Some(redis) = start_redis(&["--replicaof", "127.0.0.1", &primary.port.to_string()]) else {
        return;
    };
    let mut r = redis.conn();
    eventually("the link is up", || link_up(&mut r));
    wait_converged(&mut p, &mut r, &DBS);
    live_writes(&mut p);
    wait_converged(&mut p, &mut r, &DBS);
    let n: i64 = q(&mut p, &["WAIT", "1", "5000"]);
    assert_eq!(n, 1);
}

/// Opens a raw replication link with `handshake`, and returns the RDB the
/// primary sends, whichever form it takes.
fn raw_full_sync(port: u16, handshake: &[&str]) -> Vec<u8> {
    raw_full_sync_and_link(port, handshake).0
}

/// What `redis-cli --rdb` and `--functions-rdb` ask for: the file alone
/// (`rdb-only`), then the link closes; with `rdb-filter-only functions`
/// the file holds the function libraries and no key.
#[test]
fn rdb_only_and_functions_only_requests() {
    use std::io::Read;
    let primary = Server::start(&[]);
    let mut p = primary.conn();
    fill(&mut p, "k:", 100);
    let code = "#!lua name=backuplib\nredis.register_function('bf', function() return 1 end)";
    let _: String = q(&mut p, &["FUNCTION", "LOAD", code]);
    for (filter, keys) in [("functions", 0), ("\"\"", 100)] {
        let (rdb, mut link) = raw_full_sync_and_link(
            primary.port,
            &[
                "REPLCONF rdb-only 1",
                &format!("REPLCONF rdb-filter-only {filter}"),
                "REPLCONF capa eof",
                "PSYNC ? -1",
            ],
        );
        let text = String::from_utf8_lossy(&rdb);
        assert_eq!(text.matches("k:").count(), keys, "{filter}");
        assert!(
            text.contains("backuplib"),
            "{filter}: the library is in the file"
        );
        let mut rest = Vec::new();
        link.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{filter}: nothing follows the file");
    }
    assert_eq!(
        common::err(&mut p, &["REPLCONF", "rdb-filter-only", "keys"]),
        "ERR Unsupported rdb-filter-only option: keys"
    );
    // The backup tools were never replicas.
    assert_eq!(info_field(&mut p, "connected_slaves"), "0");
}

/// Reads one command a replica sends (a RESP array of bulk strings).
fn read_command(r: &mut impl std::io::BufRead) -> Vec<String> {
    let head = line(r);
    let n: usize = head.strip_prefix('*').unwrap().parse().unwrap();
    (0..n)
        .map(|_| {
            let len: usize = line(r).strip_prefix('$').unwrap().parse().unwrap();
            let mut b = vec![0u8; len + 2];
            r.read_exact(&mut b).unwrap();
            b.truncate(len);
            String::from_utf8(b).unwrap()
        })
        .collect()
}

/// Plays a primary's side of the handshake on the next connection until
/// the replica's PSYNC, which it returns with the connection.
fn accept_replica(
    listener: &std::net::TcpListener,
) -> (
    Vec<String>,
    std::net::TcpStream,
    std::io::BufReader<std::net::TcpStream>,
) {
    use std::io::Write;
    let (mut w, _) = listener.accept().unwrap();
    w.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut r = std::io::BufReader::new(w.try_clone().unwrap());
    loop {
        let cmd = read_command(&mut r);
        match cmd[0].to_ascii_uppercase().as_str() {
            "PSYNC" => return (cmd, w, r),
            "PING" => w.write_all(b"+PONG\r\n").unwrap(),
            _ => w.write_all(b"+OK\r\n").unwrap(),
        }
    }
}

/// A transaction cut off by a lost link is not half applied or half
/// counted: the replica counts its bytes only with its EXEC (as Redis's
/// does), so it asks to continue from the MULTI, which the primary sends
/// again whole.
#[test]
fn a_transaction_cut_off_by_a_lost_link_is_resent_whole() {
    use std::io::Write;
    let empty = Server::start(&[]);
    let rdb = raw_full_sync(empty.port, &["SYNC"]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let replica = Server::start(&[]);
    let mut r = replica.conn();
    ok(&mut r, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
    let id = "5".repeat(40);
    let tx = [
        common::req(&[b"MULTI"]),
        common::req(&[b"SET", b"t", b"1"]),
        common::req(&[b"EXEC"]),
    ];

    let (_, mut w, _r1) = accept_replica(&listener);
    w.write_all(format!("+FULLRESYNC {id} 0\r\n${}\r\n", rdb.len()).as_bytes())
        .unwrap();
    w.write_all(&rdb).unwrap();
    w.write_all(&tx[0]).unwrap();
    w.write_all(&tx[1]).unwrap();
    w.flush().unwrap();
    eventually("the link is up", || link_up(&mut r));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info_field(&mut r, "master_repl_offset"), "0");
    w.shutdown(std::net::Shutdown::Both).unwrap();

    let (psync, mut w, _r2) = accept_replica(&listener);
    assert_eq!(
        psync[1..],
        [id.clone(), "1".to_string()],
        "resumes at the MULTI"
    );
    w.write_all(format!("+CONTINUE {id}\r\n").as_bytes())
        .unwrap();
    for part in &tx {
        w.write_all(part).unwrap();
    }
    w.flush().unwrap();
    eventually("the transaction ran once", || {
        q::<Option<String>>(&mut r, &["GET", "t"]).as_deref() == Some("1")
    });
    let total: usize = tx.iter().map(Vec::len).sum();
    eventually("its bytes counted once", || {
        info_field(&mut r, "master_repl_offset") == total.to_string()
    });
}

/// A replica that announces `capa eof` gets the RDB while it is produced
/// (`$EOF:<mark>`); one that does not gets it whole with its length, and
/// after SYNC (the form before PSYNC) without a `+FULLRESYNC` line, as
/// Redis sends it. Both are the same dataset, checksummed.
#[test]
fn full_sync_is_streamed_or_sent_whole_as_the_replica_announces() {
    let primary = Server::start(&[]);
    let mut p = primary.conn();
    fill(&mut p, "k:", 5_000);
    ok(&mut p, &["SELECT", "3"]);
    fill(&mut p, "d3:", 100);
    let streamed = raw_full_sync(
        primary.port,
        &["REPLCONF capa eof capa psync2", "PSYNC ? -1"],
    );
    let whole = raw_full_sync(primary.port, &["SYNC"]);
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
    for (form, rdb) in [("streamed", &streamed), ("whole", &whole)] {
        assert!(rdb.starts_with(b"REDIS0010"), "{form}");
        let (body, sum) = rdb.split_at(rdb.len() - 8);
        assert_eq!(body.last(), Some(&0xFF), "{form}: ends with EOF");
        assert_eq!(
            crc.checksum(body),
            u64::from_le_bytes(sum.try_into().unwrap()),
            "{form}: checksum"
        );
        let text = String::from_utf8_lossy(rdb);
        assert_eq!(text.matches("k:").count(), 5_000, "{form}");
        assert_eq!(text.matches("d3:").count(), 100, "{form}");
    }
}

/// While a full sync replaces its dataset (read as it arrives), a replica
/// answers `-LOADING` to what Redis refuses then, and INFO says
/// `loading:1`; commands Redis allows (INFO, PING's neighbours ECHO and
/// ROLE) still work. Afterwards everything is there.
#[test]
fn a_replica_answers_loading_while_its_full_sync_loads() {
    let primary = Server::start(&[]);
    let mut p = primary.conn();
    fill(&mut p, "k:", 150_000);
    let replica = Server::start(&[]);
    let mut r = replica.conn();
    ok(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
    );
    let mut refused = 0;
    let mut flagged = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !link_up(&mut r) {
        assert!(std::time::Instant::now() < deadline, "no full sync");
        match redis::cmd("GET").arg("k:1").query::<Option<String>>(&mut r) {
            Err(e) if e.code() == Some("LOADING") => {
                refused += 1;
                assert_eq!(e.detail(), Some("Redis is loading the dataset in memory"));
                let echoed: String = q(&mut r, &["ECHO", "x"]);
                assert_eq!(echoed, "x");
                flagged |= persistence_loading(&mut r);
            }
            Err(e) => panic!("unexpected {e}"),
            Ok(_) => {}
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(refused > 0, "never saw -LOADING during the load");
    assert!(flagged, "INFO never said loading:1");
    let info: String = q(&mut r, &["INFO", "persistence"]);
    assert!(info.contains("loading:0\r\n"));
    let n: i64 = q(&mut r, &["DBSIZE"]);
    assert_eq!(n, 150_000);
}

fn persistence_loading(r: &mut Connection) -> bool {
    let info: String = q(r, &["INFO", "persistence"]);
    info.contains("loading:1\r\n")
}

fn keys_in_info(r: &mut Connection) -> i64 {
    let keyspace: String = q(r, &["INFO", "keyspace"]);
    keyspace
        .lines()
        .filter_map(|l| {
            l.split_once(":keys=")?
                .1
                .split(',')
                .next()?
                .parse::<i64>()
                .ok()
        })
        .sum()
}

/// A full sync cut off part-way (the primary stopped while the file is in
/// flight, then killed) leaves the replica empty, not holding part of a
/// dataset as if it were whole, and no longer loading.
#[test]
fn a_full_sync_cut_off_leaves_the_replica_empty() {
    let mut primary = Server::start(&[]);
    let mut p = primary.conn();
    fill(&mut p, "k:", 150_000);
    let replica = Server::start(&[]);
    let mut r = replica.conn();
    ok(&mut r, &["SET", "own", "1"]);
    ok(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
    );
    eventually("the load under way", || {
        persistence_loading(&mut r) && keys_in_info(&mut r) > 1000
    });
    primary.signal("STOP");
    // What was in flight is applied; the rest of the file never comes.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        persistence_loading(&mut r),
        "the file was complete before the primary stopped"
    );
    assert!(keys_in_info(&mut r) < 150_000);
    primary.kill9();
    eventually("the failed load ends", || !persistence_loading(&mut r));
    let n: i64 = q(&mut r, &["DBSIZE"]);
    assert_eq!(n, 0, "a part of the dataset was left");
}

/// `masteruser` / `masterauth`: a replica logs in to its primary as an ACL
/// user that may run only the replication handshake, as Redis's docs
/// recommend; with a wrong password, or a user without PSYNC, the link
/// stays down and the primary's ACL LOG says why.
#[test]
fn a_replica_logs_in_to_its_primary_as_a_restricted_acl_user() {
    let primary = Server::start(&[
        "--user",
        "repl on >rpw +psync +replconf +ping",
        "--user",
        "nosync on >npw +replconf +ping",
    ]);
    let mut p = primary.conn();
    populate(&mut p);

    let replica = replica_of(&primary, &["--masteruser", "repl", "--masterauth", "rpw"]);
    let mut r = replica.conn();
    eventually("the link is up", || link_up(&mut r));
    wait_converged(&mut p, &mut r, &DBS);
    live_writes(&mut p);
    wait_converged(&mut p, &mut r, &DBS);

    let wrong = replica_of(&primary, &["--masteruser", "repl", "--masterauth", "nope"]);
    let denied = replica_of(&primary, &["--masteruser", "nosync", "--masterauth", "npw"]);
    let mut log_has = |reason: &str, object: &str| {
        let log: Vec<Vec<redis::Value>> = q(&mut p, &["ACL", "LOG"]);
        log.iter().any(|entry| {
            let text: Vec<String> = entry
                .iter()
                .map(|v| redis::from_redis_value::<String>(v.clone()).unwrap_or_default())
                .collect();
            text.windows(2).any(|w| w[0] == "reason" && w[1] == reason)
                && text.windows(2).any(|w| w[0] == "object" && w[1] == object)
        })
    };
    eventually("the wrong password is logged", || log_has("auth", "AUTH"));
    eventually("the missing PSYNC permission is logged", || {
        log_has("command", "psync")
    });
    for s in [&wrong, &denied] {
        let mut c = s.conn();
        assert!(!link_up(&mut c));
        assert_eq!(info_field(&mut c, "role"), "slave");
    }
    let n: i64 = q(&mut p, &["WAIT", "1", "2000"]);
    assert_eq!(n, 1, "only the replica that logged in is counted");
}

/// `repl-ping-replica-period` (and its old name) sets how often an idle
/// primary pings its replicas: the stream grows by one PING per period.
#[test]
fn idle_primary_pings_replicas_every_configured_period() {
    let primary = Server::start(&[]);
    let mut p = primary.conn();
    ok(&mut p, &["CONFIG", "SET", "repl-ping-slave-period", "1"]);
    let got: Vec<String> = q(&mut p, &["CONFIG", "GET", "repl-ping-replica-period"]);
    assert_eq!(got, ["repl-ping-replica-period", "1"]);
    let e = try_q::<()>(&mut p, &["CONFIG", "SET", "repl-ping-replica-period", "0"]).unwrap_err();
    assert!(error_text(&e).contains("repl-ping-replica-period"), "{e}");
    let replica = replica_of(&primary, &[]);
    let mut r = replica.conn();
    eventually("the replica links", || link_up(&mut r));
    let offset =
        |c: &mut Connection| -> u64 { info_field(c, "master_repl_offset").parse().unwrap() };
    let before = offset(&mut p);
    std::thread::sleep(Duration::from_millis(3500));
    let pings = (offset(&mut p) - before) / b"*1\r\n$4\r\nPING\r\n".len() as u64;
    assert!((2..=5).contains(&pings), "{pings} pings in 3.5 s");
}

fn limit_replicas_to_1mb(p: &mut Connection) {
    let limit = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "replica 1mb 0 0",
    ];
    ok(p, &limit);
}

fn no_replicas(p: &mut Connection) -> bool {
    info_field(p, "connected_slaves") == "0"
}

/// `client-output-buffer-limit replica`: a replica that falls further
/// behind the stream than the hard limit is cut off (it would resync in
/// full) instead of being sent a stream with a gap, while one within the
/// default 256 MB gets every byte.
#[test]
fn a_replica_behind_its_output_limit_is_cut_off() {
    use std::io::Read;
    let primary = Server::start(&["--durability", "none"]);
    let mut p = primary.conn();
    let value = "v".repeat(64 * 1024);
    // 16 MiB of stream, more than the loopback socket's buffers hold.
    let write_burst = |p: &mut Connection, tag: &str| {
        for i in 0..256 {
            ok(p, &["SET", &format!("{tag}:{i}"), &value]);
        }
    };
    let handshake = ["REPLCONF capa eof capa psync2", "PSYNC ? -1"];

    // Within the default limit: the replica reading late gets it all.
    let (_, mut link) = raw_full_sync_and_link(primary.port, &handshake);
    write_burst(&mut p, "within");
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    while String::from_utf8_lossy(&seen).matches("within:").count() < 256 {
        let n = link.read(&mut buf).unwrap();
        assert!(n > 0, "the link closed");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(link);
    eventually("the first replica is gone", || no_replicas(&mut p));

    limit_replicas_to_1mb(&mut p);
    let (_, mut link) = raw_full_sync_and_link(primary.port, &handshake);
    write_burst(&mut p, "behind");
    let mut rest = Vec::new();
    let _ = link.read_to_end(&mut rest);
    let sent = String::from_utf8_lossy(&rest).matches("behind:").count();
    assert!(sent < 256, "all {sent} writes were sent past the limit");
    eventually("the replica is disconnected", || no_replicas(&mut p));
}

/// The limit holds during a full sync too: what is written meanwhile waits
/// for the replica, as in its output buffer in Redis. A sync slower than
/// the writes is cut off once they pass the hard limit, before its file
/// is done, instead of keeping every write until it ends; one within the
/// limit gets the whole file and then every write.
#[test]
fn a_full_sync_outgrown_by_the_writes_meanwhile_is_cut_off() {
    use std::io::{BufRead, Read, Write};
    let primary = Server::start(&["--durability", "none"]);
    let mut p = primary.conn();
    for i in 0..40 {
        ok(&mut p, &["SET", &format!("base:{i}"), "x"]);
    }
    // 50 ms per key: a sync of these 40 keys takes two seconds.
    ok(&mut p, &["CONFIG", "SET", "rdb-key-save-delay", "50000"]);
    let value = "v".repeat(64 * 1024);
    let start_sync = || start_eof_sync(primary.port);
    // 3 MiB of writes while the file is still being made.
    let write_burst = |p: &mut Connection, tag: &str| {
        for i in 0..48 {
            ok(p, &["SET", &format!("{tag}:{i}"), &value]);
        }
    };

    // Within the default limit (256 MB): the file, then every write.
    let (mut r, mark) = start_sync();
    write_burst(&mut p, "within");
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut acked = false;
    while String::from_utf8_lossy(&seen).matches("within:").count() < 48 {
        let n = r.read(&mut buf).unwrap();
        assert!(n > 0, "the link closed after {} bytes", seen.len());
        seen.extend_from_slice(&buf[..n]);
        if !acked && seen.ends_with(mark.as_bytes()) {
            // The stream waits for the replica's first acknowledgement.
            r.get_mut().write_all(b"REPLCONF ACK 0\r\n").unwrap();
            acked = true;
        }
    }
    let text = String::from_utf8_lossy(&seen);
    let file_end = text.find(&mark).expect("the file's end mark");
    assert!(
        text[..file_end].contains("base:39") && !text[..file_end].contains("within:"),
        "the file holds the keys of the point, not the writes after it"
    );
    assert_eq!(text[file_end..].matches("within:").count(), 48);
    drop(r);
    eventually("the first replica is gone", || no_replicas(&mut p));

    // Past a 1 MB limit: cut off in the middle of the file.
    limit_replicas_to_1mb(&mut p);
    let started = std::time::Instant::now();
    let (mut r, mark) = start_sync();
    write_burst(&mut p, "behind");
    let mut rest = Vec::new();
    let _ = r.fill_buf().map(|b| rest.extend_from_slice(b));
    let _ = r.read_to_end(&mut rest);
    let text = String::from_utf8_lossy(&rest);
    assert!(!text.contains(&mark), "the whole file was sent");
    assert_eq!(text.matches("behind:").count(), 0);
    assert!(
        started.elapsed() < Duration::from_millis(1800),
        "cut off only after {:?}, about when the file would have ended",
        started.elapsed()
    );
    eventually("the replica is disconnected", || no_replicas(&mut p));
}

/// After a file sent with an end mark, the stream waits for the replica's
/// first REPLCONF ACK, as Redis's does: a Redis replica recognizes the
/// mark only as the last bytes of a read, so a write sent right behind it
/// was read as part of the file, and the replica hung until repl-timeout.
#[test]
fn the_stream_after_a_diskless_sync_waits_for_the_first_ack() {
    use std::io::{BufRead, Read, Write};
    let primary = Server::start(&["--durability", "none"]);
    let mut p = primary.conn();
    ok(&mut p, &["SET", "before", "1"]);
    let (mut r, mark) = start_eof_sync(primary.port);
    let mark = mark.into_bytes();
    let mut file = Vec::new();
    while !file.ends_with(&mark) {
        let got = r.fill_buf().unwrap().to_vec();
        assert!(!got.is_empty(), "the link closed before the mark");
        r.consume(got.len());
        file.extend_from_slice(&got);
    }
    assert!(file.ends_with(&mark), "bytes followed the mark in one read");
    ok(&mut p, &["SET", "after", "2"]);
    r.get_ref()
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 4096];
    match r.read(&mut buf) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!("the stream did not wait for the ACK: {other:?}"),
    }
    r.get_mut().write_all(b"REPLCONF ACK 0\r\n").unwrap();
    r.get_ref()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("after") {
        let n = r.read(&mut buf).unwrap();
        assert!(n > 0, "the link closed");
        seen.extend_from_slice(&buf[..n]);
    }
}

/// Starts a diskless full sync as a Redis 7 replica does; returns the
/// link, positioned at the file's first byte, and the file's end mark.
fn start_eof_sync(port: u16) -> (std::io::BufReader<std::net::TcpStream>, String) {
    use std::io::Write;
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = std::io::BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    w.write_all(b"REPLCONF capa eof capa psync2\r\n").unwrap();
    assert_eq!(line(&mut r), "+OK");
    w.write_all(b"PSYNC ? -1\r\n").unwrap();
    assert!(line(&mut r).starts_with("+FULLRESYNC"));
    let mark = line(&mut r);
    let mark = mark.strip_prefix("$EOF:").unwrap().to_string();
    (r, mark)
}
