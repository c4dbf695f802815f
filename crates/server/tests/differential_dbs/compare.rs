//! What of a reply must match in `differential_dbs.rs`, and the state of
//! every key in every database, read through a probe connection.

use crate::commands::{DBS, KEYS};
use crate::common::RespConn;
use crate::normalize::normalize;
use durakv_protocol::Frame;

pub fn send(c: &mut RespConn, words: &[String]) -> Frame {
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    c.send(&refs);
    c.frame()
}

pub fn w(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// Whether the replies of the two servers to `cmd` agree.
pub fn same(cmd: &[String], x: &Frame, y: &Frame) -> bool {
    let name = cmd[0].to_ascii_uppercase();
    let sub = cmd
        .get(1)
        .map(|s| s.to_ascii_uppercase())
        .unwrap_or_default();
    match (name.as_str(), x, y) {
        // A time to live counts down between the two servers' replies,
        // and an expiry given relative to now lands on each one's clock.
        ("TTL" | "EXPIRETIME", Frame::Integer(a), Frame::Integer(b)) if *a >= 0 && *b >= 0 => {
            (a - b).abs() <= 2
        }
        ("PTTL" | "PEXPIRETIME", Frame::Integer(a), Frame::Integer(b)) if *a >= 0 && *b >= 0 => {
            (a - b).abs() <= 2000
        }
        // Idle times run on each server's clock; LFU counters grow at
        // random (Redis's logarithmic counter draws a number).
        ("OBJECT", Frame::Integer(_), Frame::Integer(_)) if sub == "IDLETIME" || sub == "FREQ" => {
            true
        }
        // Redis shares the integers below 10,000 as one object (counted
        // i32::MAX), but COPY duplicates the value, and inside EXEC the
        // queued SET's argument is still counted as a second reference:
        // durakv, which keeps no objects to share, judges by the value
        // alone. A shared integer in Redis must be one in durakv.
        ("OBJECT", Frame::Integer(a), Frame::Integer(b)) if sub == "REFCOUNT" => {
            let shared = i64::from(i32::MAX);
            a == b || (*b <= 2 && (*a == shared || *a == 1))
        }
        // A random key: that there is one (every key is read back by the
        // state comparisons).
        ("RANDOMKEY", Frame::Bulk(_), Frame::Bulk(_)) => true,
        _ => normalize(cmd, x.clone()) == normalize(cmd, y.clone()),
    }
}

/// Whether the replies to EXEC (or any command) agree, element by element
/// for the commands `queued` when both servers ran them.
pub fn same_reply(cmd: &[String], queued: Option<&[Vec<String>]>, x: &Frame, y: &Frame) -> bool {
    match (queued, x, y) {
        (Some(q), Frame::Array(xs), Frame::Array(ys)) if xs.len() == q.len() => {
            ys.len() == q.len()
                && q.iter()
                    .zip(xs.iter().zip(ys))
                    .all(|(c, (x, y))| same(c, x, y))
        }
        _ => same(cmd, x, y),
    }
}

/// Every key's type, contents and expiry time in every database, with
/// each database's size, as (read command, reply) pairs.
pub fn state(p: &mut RespConn) -> Vec<(Vec<String>, Frame)> {
    let mut out = vec![(w(&["INFO", "keyspace"]), keyspace(p))];
    for db in DBS {
        assert_eq!(send(p, &w(&["SELECT", db])), Frame::Simple("OK".into()));
        out.push((w(&["DBSIZE", db]), send(p, &w(&["DBSIZE"]))));
        out.push((w(&["KEYS", "*"]), send(p, &w(&["KEYS", "*"]))));
        for k in KEYS {
            let t = send(p, &w(&["TYPE", k]));
            let mut reads = match &t {
                Frame::Simple(t) if &t[..] == b"string" => vec![w(&["GET", k])],
                Frame::Simple(t) if &t[..] == b"list" => vec![w(&["LRANGE", k, "0", "-1"])],
                Frame::Simple(t) if &t[..] == b"hash" => vec![w(&["HGETALL", k])],
                Frame::Simple(t) if &t[..] == b"set" => vec![w(&["SMEMBERS", k])],
                Frame::Simple(t) if &t[..] == b"zset" => {
                    vec![w(&["ZRANGE", k, "0", "-1", "WITHSCORES"])]
                }
                Frame::Simple(t) if &t[..] == b"stream" => {
                    vec![w(&["XRANGE", k, "-", "+"]), w(&["XINFO", "GROUPS", k])]
                }
                _ => vec![],
            };
            out.push((w(&["TYPE", k, "in", db]), t));
            reads.push(w(&["PEXPIRETIME", k]));
            for r in reads {
                let f = send(p, &r);
                out.push((r, f));
            }
        }
    }
    out
}

/// INFO keyspace's keys and expires of each database; avg_ttl is an
/// estimate Redis's active expiry cycle refreshes when it samples.
fn keyspace(p: &mut RespConn) -> Frame {
    let Frame::Bulk(info) = send(p, &w(&["INFO", "keyspace"])) else {
        panic!("INFO keyspace");
    };
    let lines: Vec<String> = String::from_utf8_lossy(&info)
        .lines()
        .filter(|l| l.starts_with("db"))
        .map(|l| l.split(",avg_ttl").next().unwrap_or(l).to_string())
        .collect();
    Frame::Bulk(lines.join(" ").into())
}

/// The first place two states differ, described; None if they agree.
pub fn state_difference(
    ours: &[(Vec<String>, Frame)],
    redis: &[(Vec<String>, Frame)],
) -> Option<String> {
    let differs = ours.len() != redis.len()
        || ours
            .iter()
            .zip(redis)
            .any(|((c, x), (d, y))| c != d || !same(c, x, y));
    if !differs {
        return None;
    }
    Some(format!(
        "keys in durakv:\n{}keys in redis:\n{}",
        show(ours),
        show(redis)
    ))
}

/// The keys of a state that exist, in databases that hold any.
pub fn show(s: &[(Vec<String>, Frame)]) -> String {
    let mut db = "";
    let mut out = String::new();
    for (c, f) in s {
        if c[0] == "DBSIZE" {
            db = if let Frame::Integer(0) = f { "" } else { &c[1] };
        }
        let missing = matches!(f, Frame::Simple(t) if &t[..] == b"none")
            || (c[0] == "PEXPIRETIME" && *f == Frame::Integer(-2));
        if (!db.is_empty() && !missing) || c[0] == "INFO" {
            out.push_str(&format!("  {}: {f:?}\n", c.join(" ")));
        }
    }
    out
}
