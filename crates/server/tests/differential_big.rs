//! Big collections, durakv against a real Redis: `differential.rs` keeps
//! a handful of keys with a few elements each, so it never leaves Redis's
//! small encodings nor durakv's packed ones. Here hashes, sets (one of
//! integers only, an intset in Redis up to 512), sorted sets, lists and
//! streams grow past and shrink back below both servers' limits (128 and
//! 512 entries, 64- and 1,024-byte items, 4,096 bytes a node) under
//! mutation-heavy mixes: each type in turn grows (bulk adds, few
//! removals) and shrinks (bulk removals, pops, trims), and one type in
//! each seed gets most of the commands. Members come from one pool (700,
//! or 1,600 in every third seed), the same text each time so removals
//! hit: short, 60 to 70 bytes, past 1 KB, and integers of every intset
//! width; a few list elements are 4 to 9 KB, around Redis's 8 KB nodes.
//!
//! Commands go in pipelined batches (now and then inside MULTI) to both
//! servers; every reply must be the same frame, and every `DURAKV_DIFF_
//! BIG_CHECK_EVERY` commands (200) every key's whole contents too. Odd
//! seeds speak RESP3.
//!
//! What is compared loosely, and why:
//! - replies Redis leaves unordered (SMEMBERS, SINTER/SUNION/SDIFF, HKEYS,
//!   HVALS, HGETALL, RESP3 sets and maps) sorted;
//! - SRANDMEMBER, HRANDFIELD and ZRANDMEMBER pick at random: each server's
//!   reply is checked against what the key holds (size, membership, the
//!   values or scores, no repeats for a positive count); each such command
//!   ends its batch, so the key is read just after it;
//! - SPOP removes random members: the replies' sizes must agree, the
//!   sizes left too, and then durakv is given Redis's set (SADD what it
//!   popped, SREM what Redis popped), so a member durakv made up shows
//!   at the next comparison of the key, made right away;
//! - HSCAN, SSCAN and ZSCAN from cursor 0 are walked to the end on each
//!   server (their cursors, order and repeats are each server's own):
//!   together the calls must name every element that matches, and only
//!   those;
//! - a score of -0 (a negative weight times 0, ZADD -0 into a big set)
//!   reads as 0: Redis prints "-0" from a skip list but "0" from a
//!   listpack, which stores it as the integer 0; durakv says "0" always.
//!
//! Lex ranges go only to `zl`, whose scores are all 0: over differing
//! scores Redis leaves their result unspecified. Scores are multiples of
//! 1/4 and integers, which print the same in every version; floats whose
//! digits Redis 7.0 and 7.2 print differently are `differential.rs`'s
//! business.
//!
//! Every check of all keys also DUMPs one key on each server and RESTOREs
//! it on the other, where it must read the same (but for XINFO STREAM's
//! radix tree sizes: a restored stream's nodes are the payload's in
//! Redis, refilled from the live entries in durakv).
//!
//! Skipped when `redis-server` is not installed. `DURAKV_DIFF_BIG_SEEDS`
//! runs more sequences (4 by default), `DURAKV_DIFF_BIG_CALLS` longer
//! ones (5,000 commands),
//! `DURAKV_DIFF_BIG_SEED` one given sequence, and `DURAKV_DIFF_BIG_CHECK_
//! EVERY=1` compares every key after every batch, to find where two
//! keyspaces part.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "differential_big/commands.rs"]
mod commands;
mod common;

use commands::*;
use common::*;
use durakv_protocol::Frame;
use rand::Rng;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;

/// The bytes a frame sorts by.
fn sort_key(f: &Frame) -> Vec<u8> {
    match f {
        Frame::Bulk(b) => b.to_vec(),
        f => format!("{f:?}").into_bytes(),
    }
}

/// The pairs of a map-like reply: a map, nested pairs (RESP3's
/// WITHSCORES and WITHVALUES) or a flat array.
fn pairs(f: &Frame) -> Option<Vec<(Frame, Frame)>> {
    match f {
        Frame::Map(v) => Some(v.clone()),
        Frame::Array(v)
            if v.iter()
                .all(|p| matches!(p, Frame::Array(x) if x.len() == 2)) =>
        {
            Some(
                v.iter()
                    .map(|p| match p {
                        Frame::Array(x) => (x[0].clone(), x[1].clone()),
                        _ => unreachable!(),
                    })
                    .collect(),
            )
        }
        Frame::Array(v) if v.len() % 2 == 0 => {
            Some(v.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect())
        }
        _ => None,
    }
}

/// The elements of an array or set reply.
fn items(f: &Frame) -> Option<&[Frame]> {
    match f {
        Frame::Array(v) | Frame::Set(v) => Some(v),
        _ => None,
    }
}

/// What must match of a reply to `cmd` (its frame types kept, so a RESP3
/// set or map must still be one).
fn normalize(cmd: &[String], f: Frame) -> Frame {
    let f = if cmd[0].starts_with('Z') {
        unsign_zero(f)
    } else {
        f
    };
    match (cmd[0].as_str(), f) {
        ("SMEMBERS" | "SINTER" | "SUNION" | "SDIFF" | "HKEYS" | "HVALS", Frame::Array(mut v)) => {
            v.sort_by_key(sort_key);
            Frame::Array(v)
        }
        (_, Frame::Set(mut v)) => {
            v.sort_by_key(sort_key);
            Frame::Set(v)
        }
        (_, Frame::Map(mut v)) => {
            v.sort_by_key(|(k, _)| sort_key(k));
            Frame::Map(v)
        }
        ("HGETALL", Frame::Array(v)) => {
            let mut p: Vec<&[Frame]> = v.chunks(2).collect();
            p.sort_by_key(|p| sort_key(&p[0]));
            Frame::Array(p.concat())
        }
        (_, f) => f,
    }
}

/// A score of -0 as 0: Redis keeps the sign in a skip list and prints
/// it, but a listpack stores -0 as the integer 0, so whether Redis says
/// "-0" depends on the key's encoding. durakv always says 0.
fn unsign_zero(f: Frame) -> Frame {
    match f {
        Frame::Bulk(b) if &b[..] == b"-0" => Frame::Bulk("0".into()),
        // (-0.0 matches the pattern 0.0.)
        Frame::Double(0.0) => Frame::Double(0.0),
        Frame::Array(v) => Frame::Array(v.into_iter().map(unsign_zero).collect()),
        Frame::Set(v) => Frame::Set(v.into_iter().map(unsign_zero).collect()),
        f => f,
    }
}

/// A command shortened for a message: long words as their start and size.
fn brief(cmd: &[String]) -> String {
    let words: Vec<String> = cmd
        .iter()
        .map(|w| {
            if w.len() > 24 {
                format!("{}…({}B)", &w[..12], w.len())
            } else {
                w.clone()
            }
        })
        .collect();
    let mut out = words.join(" ");
    if out.len() > 300 {
        let cut = (0..=300).rev().find(|&i| out.is_char_boundary(i)).unwrap();
        out.truncate(cut);
        out.push_str(&format!(" …({} words)", cmd.len()));
    }
    out
}

/// Where two frames first differ, shortly.
fn first_difference(x: &Frame, y: &Frame) -> String {
    let short = |f: &Frame| {
        let mut s = format!("{f:?}");
        if s.len() > 400 {
            let cut = (0..=400).rev().find(|&i| s.is_char_boundary(i)).unwrap();
            s.truncate(cut);
            s.push('…');
        }
        s
    };
    let (xs, ys) = match (x, y) {
        (Frame::Array(a), Frame::Array(b)) => (a.clone(), b.clone()),
        (Frame::Map(a), Frame::Map(b)) => {
            let flat =
                |m: &[(Frame, Frame)]| m.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect();
            (flat(a), flat(b))
        }
        _ => return format!("durakv: {}\n  redis:  {}", short(x), short(y)),
    };
    match (0..xs.len().max(ys.len())).find(|&i| xs.get(i) != ys.get(i)) {
        Some(i) => format!(
            "{} and {} items; at {i}:\n  durakv: {}\n  redis:  {}",
            xs.len(),
            ys.len(),
            xs.get(i).map_or("(none)".to_string(), short),
            ys.get(i).map_or("(none)".to_string(), short)
        ),
        None => format!("durakv: {}\n  redis:  {}", short(x), short(y)),
    }
}

/// Sends `cmds` in one write (from a second thread, so a reply bigger
/// than the socket buffers cannot stall both ends) and reads their replies.
fn exchange(c: &mut RespConn, cmds: &[Vec<String>]) -> Vec<Frame> {
    let cmds: Vec<Vec<&[u8]>> = cmds
        .iter()
        .map(|w| w.iter().map(|a| a.as_bytes()).collect())
        .collect();
    exchange_bytes(c, &cmds)
}

fn exchange_bytes(c: &mut RespConn, cmds: &[Vec<&[u8]>]) -> Vec<Frame> {
    let mut bytes = Vec::new();
    for args in cmds {
        bytes.extend(req(args));
    }
    let mut out = c.s.try_clone().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || out.write_all(&bytes).unwrap());
        (0..cmds.len()).map(|_| c.frame()).collect()
    })
}

fn words(ws: &[&str]) -> Vec<String> {
    ws.iter().map(|w| w.to_string()).collect()
}

/// Each key's type and whole contents (a stream's XINFO too).
fn dump(c: &mut RespConn, keys: &[&str]) -> Vec<(String, Frame)> {
    let types = exchange(
        c,
        &keys.iter().map(|k| words(&["TYPE", k])).collect::<Vec<_>>(),
    );
    let mut reads = Vec::new();
    for (k, t) in keys.iter().zip(&types) {
        match t {
            Frame::Simple(t) if &t[..] == b"hash" => reads.push(words(&["HGETALL", k])),
            Frame::Simple(t) if &t[..] == b"set" => reads.push(words(&["SMEMBERS", k])),
            Frame::Simple(t) if &t[..] == b"zset" => {
                reads.push(words(&["ZRANGE", k, "0", "-1", "WITHSCORES"]))
            }
            Frame::Simple(t) if &t[..] == b"list" => reads.push(words(&["LRANGE", k, "0", "-1"])),
            Frame::Simple(t) if &t[..] == b"stream" => {
                reads.push(words(&["XRANGE", k, "-", "+"]));
                reads.push(words(&["XINFO", "STREAM", k]));
            }
            _ => {}
        }
    }
    reads.push(words(&["DBSIZE"]));
    let replies = exchange(c, &reads);
    let mut out: Vec<(String, Frame)> = keys
        .iter()
        .zip(types)
        .map(|(k, t)| (format!("TYPE {k}"), t))
        .collect();
    for (r, f) in reads.iter().zip(replies) {
        out.push((r.join(" "), normalize(r, f)));
    }
    out
}

/// The first key whose contents differ, described; None if none.
fn compare_dumps(x: &[(String, Frame)], y: &[(String, Frame)]) -> Option<String> {
    if x.len() != y.len() {
        let names = |d: &[(String, Frame)]| d.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        return Some(format!(
            "keys differ:\n  durakv: {:?}\n  redis:  {:?}",
            names(x),
            names(y)
        ));
    }
    x.iter()
        .zip(y)
        .find(|(a, b)| a != b)
        .map(|((name, a), (_, b))| format!("{name}: {}", first_difference(a, b)))
}

/// What `key` holds, as (member or field, score or value) pairs (sets:
/// the member twice), read from the key's reply in a dump.
fn contents(c: &mut RespConn, key: &str) -> HashMap<Vec<u8>, Frame> {
    let keys = [key];
    let d = dump(c, &keys);
    let Some((read, f)) = d.get(1) else {
        return HashMap::new();
    };
    let bytes = |f: &Frame| sort_key(f);
    if read.starts_with("SMEMBERS") {
        items(f)
            .unwrap()
            .iter()
            .map(|m| (bytes(m), m.clone()))
            .collect()
    } else if read.starts_with("DBSIZE") {
        HashMap::new()
    } else {
        pairs(f)
            .unwrap()
            .into_iter()
            .map(|(m, v)| (bytes(&m), v))
            .collect()
    }
}

/// Checks a random pick (SRANDMEMBER, HRANDFIELD, ZRANDMEMBER) against
/// what the key holds.
fn check_pick(cmd: &[String], reply: &Frame, held: &HashMap<Vec<u8>, Frame>) -> Result<(), String> {
    let Some(count) = cmd.get(2) else {
        return match reply {
            Frame::Null if held.is_empty() => Ok(()),
            Frame::Bulk(m) if held.contains_key(&m[..]) => Ok(()),
            r => Err(format!("picked {r:?}, not a member")),
        };
    };
    let count: i64 = count.parse().unwrap();
    let with = cmd.len() > 3;
    let picked: Vec<(Frame, Option<Frame>)> = if with {
        pairs(reply)
            .ok_or(format!("not pairs: {reply:?}"))?
            .into_iter()
            .map(|(m, v)| (m, Some(v)))
            .collect()
    } else {
        items(reply)
            .ok_or(format!("not an array: {reply:?}"))?
            .iter()
            .map(|m| (m.clone(), None))
            .collect()
    };
    let want = if count >= 0 {
        (count as usize).min(held.len())
    } else if held.is_empty() {
        0
    } else {
        count.unsigned_abs() as usize
    };
    if picked.len() != want {
        return Err(format!("{} picked, {want} wanted", picked.len()));
    }
    let mut seen = HashSet::new();
    for (m, v) in &picked {
        let key = sort_key(m);
        let Some(h) = held.get(&key) else {
            return Err(format!("picked {m:?}, not a member"));
        };
        if let Some(v) = v {
            if v != h {
                return Err(format!("picked {m:?} with {v:?}, which holds {h:?}"));
            }
        }
        if !seen.insert(key) && count > 0 {
            return Err(format!("picked {m:?} twice with a positive count"));
        }
    }
    Ok(())
}

/// Checks a random pick or a scan (`check`) on both servers (`replies`
/// and `conns`: durakv's, then Redis's) against what the key holds, which
/// must be the same on both.
fn check_against_key(
    cmd: &[String],
    check: Check,
    replies: [Frame; 2],
    conns: [&mut RespConn; 2],
) -> Result<(), String> {
    let [a, b] = conns;
    let held = contents(b, &cmd[1]);
    if held != contents(a, &cmd[1]) {
        let d = compare_dumps(&dump(a, &[&cmd[1]]), &dump(b, &[&cmd[1]]));
        return Err(format!("the key differs: {}", d.unwrap_or_default()));
    }
    let replies = replies.map(|r| {
        if cmd[0].starts_with('Z') {
            unsign_zero(r)
        } else {
            r
        }
    });
    for ((reply, c), who) in replies.into_iter().zip([a, b]).zip(["durakv", "redis"]) {
        match check {
            Check::Scan => check_scan(cmd, reply, c, &held),
            _ => check_pick(cmd, &reply, &held),
        }
        .map_err(|e| format!("{who}: {e}"))?;
    }
    Ok(())
}

/// A match of `pattern`, whose only wildcard is `*`.
fn glob(pattern: &[u8], s: &[u8]) -> bool {
    match pattern.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob(rest, &s[i..])),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// A value or score as held: the same frame, or the same number (ZSCAN
/// gives scores as text, a RESP3 ZRANGE as doubles).
fn same_value(held: &Frame, v: &Frame) -> bool {
    let num = |f: &Frame| match f {
        Frame::Double(d) => Some(*d),
        Frame::Bulk(b) => std::str::from_utf8(b).ok()?.parse::<f64>().ok(),
        _ => None,
    };
    held == v || matches!((num(held), num(v)), (Some(x), Some(y)) if x == y)
}

/// Walks a scan whose first reply is `first` to its end over `c`: it must
/// name every element held that matches, and nothing else.
fn check_scan(
    cmd: &[String],
    first: Frame,
    c: &mut RespConn,
    held: &HashMap<Vec<u8>, Frame>,
) -> Result<(), String> {
    let pattern = cmd
        .iter()
        .position(|w| w == "MATCH")
        .map(|i| cmd[i + 1].as_bytes());
    let wanted = |k: &[u8]| pattern.is_none_or(|p| glob(p, k));
    let mut found = HashSet::new();
    let mut reply = first;
    for _ in 0..100_000 {
        let cursor = match &reply {
            Frame::Array(v) if v.len() == 2 => {
                let got = if cmd[0] == "SSCAN" {
                    items(&v[1]).map(|v| v.iter().map(|m| (m.clone(), m.clone())).collect())
                } else {
                    pairs(&v[1])
                };
                for (m, value) in got.ok_or(format!("scan gave {reply:?}"))? {
                    let k = sort_key(&m);
                    match held.get(&k) {
                        Some(h) if same_value(h, &value) && wanted(&k) => {}
                        h => return Err(format!("scan named {m:?} {value:?}; held: {h:?}")),
                    }
                    found.insert(k);
                }
                v[0].clone()
            }
            r => return Err(format!("scan gave {r:?}")),
        };
        let Frame::Bulk(cursor) = cursor else {
            return Err(format!("cursor {cursor:?}"));
        };
        if &cursor[..] == b"0" {
            let missed: Vec<String> = held
                .keys()
                .filter(|k| wanted(k) && !found.contains(*k))
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect();
            if missed.is_empty() {
                return Ok(());
            }
            return Err(format!("{} never named: {missed:?}", missed.len()));
        }
        let mut next = cmd.to_vec();
        next[2] = String::from_utf8(cursor.to_vec()).unwrap();
        reply = exchange(c, &[next]).pop().unwrap();
    }
    Err("the cursor never came back to 0".to_string())
}

/// DUMPs `key` on each server and RESTOREs it on the other as `r:key`:
/// each copy must read as the original. The payloads carry each server's
/// encodings (Redis's listpacks, intsets and quicklists, durakv's own),
/// so each reads the other's, of big keys and small.
fn cross_restore(a: &mut RespConn, b: &mut RespConn, key: &str) -> Option<String> {
    let copy = format!("r:{key}");
    let dump_cmd = words(&["DUMP", key]);
    let (pa, pb) = (
        exchange(a, std::slice::from_ref(&dump_cmd)).pop().unwrap(),
        exchange(b, &[dump_cmd]).pop().unwrap(),
    );
    let (Frame::Bulk(pa), Frame::Bulk(pb)) = (&pa, &pb) else {
        return (pa != pb).then(|| format!("DUMP {key}: {}", first_difference(&pa, &pb)));
    };
    for (c, payload, what) in [
        (&mut *a, &pb[..], "durakv restoring Redis's payload"),
        (&mut *b, &pa[..], "Redis restoring durakv's payload"),
    ] {
        let r = exchange_bytes(
            c,
            &[vec![b"RESTORE", copy.as_bytes(), b"0", payload, b"REPLACE"]],
        );
        if r[0] != Frame::Simple("OK".into()) {
            return Some(format!("{what} as {copy}: {:?}", r[0]));
        }
    }
    // The copy's reads, named as the original's.
    let state = |c: &mut RespConn, k: &str| -> Vec<(String, Frame)> {
        let mut d = dump(c, &[k]);
        d.pop(); // DBSIZE, one more where the copy is
        d.into_iter()
            .map(|(n, f)| (n.replace(&copy, key), without_layout(f)))
            .collect()
    };
    let found = compare_dumps(&state(a, &copy), &state(b, key))
        .map(|d| format!("durakv's copy of Redis's {key} differs: {d}"))
        .or_else(|| {
            compare_dumps(&state(b, &copy), &state(a, key))
                .map(|d| format!("Redis's copy of durakv's {key} differs: {d}"))
        });
    for c in [a, b] {
        exchange(c, &[words(&["DEL", &copy])]);
    }
    found
}

/// XINFO STREAM without the radix tree's size: a restored stream's nodes
/// are the payload's in Redis (tombstones and all) but refilled from the
/// live entries in durakv, a difference `dump.rs` leaves out too.
fn without_layout(f: Frame) -> Frame {
    let layout = |k: &Frame| matches!(k, Frame::Bulk(k) if k.starts_with(b"radix-tree-"));
    match f {
        Frame::Map(v) => Frame::Map(v.into_iter().filter(|(k, _)| !layout(k)).collect()),
        Frame::Array(v)
            if v.first()
                .is_some_and(|k| k == &Frame::Bulk("length".into())) =>
        {
            Frame::Array(
                v.chunks(2)
                    .filter(|p| !layout(&p[0]))
                    .flat_map(|p| p.to_vec())
                    .collect(),
            )
        }
        f => f,
    }
}

/// The members an SPOP reply names.
fn popped(reply: &Frame) -> Vec<String> {
    let one = |f: &Frame| match f {
        Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
        f => panic!("SPOP gave {f:?}"),
    };
    match reply {
        Frame::Null | Frame::NullArray => Vec::new(),
        Frame::Bulk(_) => vec![one(reply)],
        f => items(f).unwrap().iter().map(one).collect(),
    }
}

/// Checks an SPOP's two replies and, if they agree in shape and size,
/// gives durakv the set Redis kept. Then the key must read the same.
fn settle_pop(
    cmd: &[String],
    x: &Frame,
    y: &Frame,
    a: &mut RespConn,
    b: &mut RespConn,
) -> Result<(), String> {
    let key = &cmd[1];
    let (px, py) = (popped(x), popped(y));
    let shape = |f: &Frame| std::mem::discriminant(f);
    if shape(x) != shape(y) || px.len() != py.len() {
        return Err(first_difference(x, y));
    }
    if px.iter().collect::<HashSet<_>>().len() != px.len() {
        return Err(format!("durakv popped a member twice: {px:?}"));
    }
    let card = words(&["SCARD", key]);
    let (cx, cy) = (
        exchange(a, std::slice::from_ref(&card)),
        exchange(b, &[card]),
    );
    if cx != cy {
        return Err(format!("SCARD after it: durakv {cx:?}, redis {cy:?}"));
    }
    let mut fix = Vec::new();
    if !px.is_empty() {
        fix.push([vec!["SADD".to_string(), key.clone()], px].concat());
    }
    if !py.is_empty() {
        fix.push([vec!["SREM".to_string(), key.clone()], py].concat());
    }
    for r in exchange(a, &fix) {
        assert!(matches!(r, Frame::Integer(_)), "{r:?}");
    }
    let keys = [key.as_str()];
    compare_dumps(&dump(a, &keys), &dump(b, &keys)).map_or(Ok(()), |d| {
        Err(format!("after giving durakv Redis's set: {d}"))
    })
}

/// The first difference in sequence `seed`, described; None if none.
fn run_seed(
    seed: u64,
    calls: usize,
    check_every: usize,
    ours: &Server,
    redis: &RealRedis,
) -> Option<String> {
    let mut a = RespConn::new(ours.raw());
    let mut b = RespConn::new(std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap());
    for c in [&mut a, &mut b] {
        if seed % 2 == 1 {
            assert!(matches!(
                exchange(c, &[words(&["HELLO", "3"])])[0],
                Frame::Map(_)
            ));
        }
        assert_eq!(
            exchange(c, &[words(&["FLUSHALL"])])[0],
            Frame::Simple("OK".into())
        );
    }
    let keys = all_keys();
    let mut gen = Gen::new(seed);
    let mut history: VecDeque<String> = VecDeque::new();
    let mut done = 0;
    let mut next_check = check_every;
    let mut checks = 0;
    let mut largest: HashMap<String, (usize, usize)> = HashMap::new();
    while done < calls {
        // A batch ends early at a random command: what it did or picked
        // is looked at before anything else runs.
        let mut batch = Vec::new();
        let mut last = Check::Same;
        let size = gen.rng.gen_range(1..=50);
        while batch.len() < size && last == Check::Same {
            let (c, check) = gen.command();
            batch.push(c);
            last = check;
        }
        let multi = gen.chance(5);
        let sent: Vec<Vec<String>> = if multi {
            let mut v = vec![words(&["MULTI"])];
            v.extend(batch.iter().cloned());
            v.push(words(&["EXEC"]));
            v
        } else {
            batch.clone()
        };
        let (mut rx, mut ry) = (exchange(&mut a, &sent), exchange(&mut b, &sent));
        if multi {
            let unwrap = |r: &mut Vec<Frame>| match r.pop() {
                Some(Frame::Array(v)) if v.len() == batch.len() => v,
                f => panic!("EXEC gave {f:?}"),
            };
            if rx[..rx.len() - 1] != ry[..ry.len() - 1] {
                return Some(format!("seed {seed}: MULTI replies differ: {rx:?} {ry:?}"));
            }
            rx = unwrap(&mut rx);
            ry = unwrap(&mut ry);
        }
        for (i, (cmd, (x, y))) in batch.iter().zip(rx.into_iter().zip(ry)).enumerate() {
            history.push_back(brief(cmd));
            if history.len() > 25 {
                history.pop_front();
            }
            let at = done + i;
            let fail = |what: String, history: &VecDeque<String>| {
                let tail: Vec<&str> = history.iter().map(String::as_str).collect();
                Some(format!(
                    "seed {seed}, call {at}: {}\n  {what}\nlast commands{}:\n  {}",
                    brief(cmd),
                    if multi { " (in MULTI)" } else { "" },
                    tail.join("\n  ")
                ))
            };
            let checked = match (i + 1 == batch.len(), last) {
                (true, Check::Pop) => settle_pop(cmd, &x, &y, &mut a, &mut b),
                (true, Check::Pick | Check::Scan) => {
                    check_against_key(cmd, last, [x, y], [&mut a, &mut b])
                }
                _ => {
                    let (x, y) = (normalize(cmd, x), normalize(cmd, y));
                    if x == y {
                        Ok(())
                    } else {
                        Err(first_difference(&x, &y))
                    }
                }
            };
            if let Err(what) = checked {
                return fail(what, &history);
            }
        }
        done += batch.len();
        if done >= next_check || done >= calls {
            next_check = done + check_every;
            // One key a time crosses over, in turn.
            checks += 1;
            if let Some(d) = cross_restore(&mut a, &mut b, keys[checks % keys.len()]) {
                return Some(format!("seed {seed}, after call {done}: {d}"));
            }
            let (da, db) = (dump(&mut a, &keys), dump(&mut b, &keys));
            for (read, f) in &db {
                let n = match f {
                    Frame::Array(v) | Frame::Set(v) => v.len(),
                    Frame::Map(v) => v.len(),
                    _ => continue,
                };
                let e = largest.entry(read.clone()).or_insert((0, usize::MAX));
                *e = (e.0.max(n), e.1.min(n));
            }
            if let Some(d) = compare_dumps(&da, &db) {
                let tail: Vec<&str> = history.iter().map(String::as_str).collect();
                return Some(format!(
                    "seed {seed}, after call {done}: {d}\nlast commands:\n  {}",
                    tail.join("\n  ")
                ));
            }
        }
    }
    // Seen with --nocapture: how far the keys grew and shrank.
    let mut sizes: Vec<String> = largest
        .iter()
        .filter(|(r, _)| !r.starts_with("XINFO"))
        .map(|(r, (hi, lo))| format!("{} {lo}..{hi}", r.split(' ').nth(1).unwrap_or(r)))
        .collect();
    sizes.sort();
    eprintln!(
        "seed {seed}: {done} calls; items per key (XRANGE, HGETALL, ZRANGE: 2 a pair in RESP2): {}",
        sizes.join(", ")
    );
    None
}

#[test]
fn big_collections_answer_as_redis_does() {
    let calls = env_number("DURAKV_DIFF_BIG_CALLS").unwrap_or(5000);
    let check_every = env_number("DURAKV_DIFF_BIG_CHECK_EVERY").unwrap_or(200);
    let seeds = env_seeds("DURAKV_DIFF_BIG", 4);
    compare_with_redis(seeds, |seed, ours, redis| {
        run_seed(seed, calls, check_every, ours, redis)
    });
}
