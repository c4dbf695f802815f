//! Consumer groups: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM.
//!
//! Claims are logged with the delivery time and count each entry ends up
//! with, and the entries dropped from the PEL because the stream lost them.

use super::streams::{
    entry_frame, id_frame, parse_id, range_bound, read_stream, stream_op, strict_id,
};
use super::subcommands::{find_sub, help, note_subcommand, sub, SubSpec};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, FIRST_KEY};
use crate::errors;
use crate::util::{arg_i64, is, now_ms};
use bytes::Bytes;
use durakv_engine::mutation::StreamOp;
use durakv_engine::stream::{Group, Stream, StreamId, ENTRIES_READ_INVALID};
use durakv_engine::stream_op::Claimed;
use durakv_engine::txn::Txn;
use durakv_engine::value::parse_i64;
use durakv_protocol::Frame;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("xgroup", -2, WRITE, Keys::Custom(key_at_2), Handler::Data(xgroup), "stream", "Parent of the subcommands that manage consumer groups."),
        spec("xack", -4, WRITE | FAST, FIRST_KEY, Handler::Data(xack), "stream", "Marks stream entries as processed by a group and counts those it cleared."),
        spec("xpending", -3, READONLY, FIRST_KEY, Handler::Data(xpending), "stream", "Inspects the entries a group delivered but has not had acknowledged."),
        spec("xclaim", -6, WRITE | FAST, FIRST_KEY, Handler::Data(xclaim), "stream", "Gives a consumer ownership of pending entries idle long enough."),
        spec("xautoclaim", -6, WRITE | FAST, FIRST_KEY, Handler::Data(xautoclaim), "stream", "Scans a group's pending entries and hands idle ones to a consumer."),
    ]
}

#[rustfmt::skip]
pub const XGROUP_SUBS: &[SubSpec] = &[
    sub("create", -5, WRITE | DENYOOM, "Adds a consumer group to a stream."),
    sub("setid", -5, WRITE, "Moves a group's last-delivered ID."),
    sub("destroy", 4, WRITE, "Drops a group, with its consumers and pending entries."),
    sub("createconsumer", 5, WRITE | DENYOOM, "Adds a named consumer to a group."),
    sub("delconsumer", 5, WRITE, "Removes a consumer and its pending entries."),
    sub("help", 2, LOADING | STALE, "Describes each XGROUP subcommand."),
];

/// XGROUP and XINFO name their key third (HELP has none).
pub(crate) fn key_at_2(args: &[Bytes]) -> Vec<usize> {
    if args.len() > 2 && !is(&args[1], "help") {
        vec![2]
    } else {
        Vec::new()
    }
}

fn name(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn no_group(key: &[u8], group: &[u8]) -> Frame {
    Frame::error(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        name(group),
        name(key)
    ))
}

fn no_key_or_group(key: &[u8], group: &[u8]) -> Frame {
    Frame::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        name(key),
        name(group)
    ))
}

const NEEDS_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";

fn xgroup(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("xgroup", args)?;
    note_subcommand(ctx, "xgroup", s);
    if s.name == "help" {
        return help(
            "xgroup",
            &[
                "CREATE <key> <groupname> <id|$> [option]",
                "    Add a consumer group that starts reading after <id> ($: after the",
                "    newest entry). Options:",
                "    * MKSTREAM",
                "      Make an empty stream first when <key> does not exist.",
                "    * ENTRIESREAD entries_read",
                "      Seed the group's entries-read counter, from which XINFO works out lag.",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Add <consumer> to the group; replies 1, or 0 if it was already there.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Drop <consumer> and its pending entries; replies how many it had.",
                "DESTROY <key> <groupname>",
                "    Drop the whole group with its consumers and pending entries.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Move the group's last delivered ID, and optionally its read counter.",
            ],
        );
    }
    let (key, group) = (&args[2], &args[3]);
    let db = ctx.db();
    // Options first, as Redis checks them before the key.
    let (mut mkstream, mut entries_read) = (false, ENTRIES_READ_INVALID);
    if matches!(s.name, "create" | "setid") {
        let mut i = 5;
        while i < args.len() {
            if s.name == "create" && is(&args[i], "mkstream") {
                mkstream = true;
                i += 1;
            } else if is(&args[i], "entriesread") && i + 1 < args.len() {
                let n = arg_i64(&args[i + 1])?;
                if n < 0 && n != ENTRIES_READ_INVALID {
                    return Err(errors::err(
                        "ERR value for ENTRIESREAD must be positive or -1",
                    ));
                }
                entries_read = n;
                i += 2;
            } else {
                return Err(errors::sub_usage(&args[1], "xgroup"));
            }
        }
    }
    let stream = read_stream(txn, db, key)?;
    let Some(st) = stream else {
        if s.name == "create" && mkstream {
            let id = if args[4][..] == *b"$" {
                StreamId::MIN
            } else {
                super::streams::strict_id(&args[4])?
            };
            stream_op(txn, db, key, StreamOp::Create)?;
            let op = StreamOp::GroupCreate {
                group: group.clone(),
                last_id: id,
                entries_read,
            };
            stream_op(txn, db, key, op)?;
            return Ok(Frame::ok());
        }
        return Err(errors::err(NEEDS_KEY));
    };
    let exists = st.groups.contains_key(group);
    let last_id = st.last_id;
    match s.name {
        "create" | "setid" => {
            // As in Redis, a missing group is reported before the ID is read.
            if s.name == "setid" && !exists {
                return Err(no_group(key, group));
            }
            // CREATE takes a strict ID, as in Redis; SETID also `-`/`+`.
            let id = if args[4][..] == *b"$" {
                last_id
            } else if s.name == "create" {
                super::streams::strict_id(&args[4])?
            } else {
                parse_id(&args[4], 0, true)?
            };
            let op = if s.name == "create" {
                if exists {
                    return Err(errors::err("BUSYGROUP Consumer Group name already exists"));
                }
                StreamOp::GroupCreate {
                    group: group.clone(),
                    last_id: id,
                    entries_read,
                }
            } else {
                StreamOp::GroupSetId {
                    group: group.clone(),
                    last_id: id,
                    entries_read,
                }
            };
            stream_op(txn, db, key, op)?;
            Ok(Frame::ok())
        }
        "destroy" => {
            if !exists {
                return Ok(Frame::Integer(0));
            }
            stream_op(
                txn,
                db,
                key,
                StreamOp::GroupDestroy {
                    group: group.clone(),
                },
            )?;
            Ok(Frame::Integer(1))
        }
        "createconsumer" => {
            let Some(g) = st.groups.get(group) else {
                return Err(no_group(key, group));
            };
            if g.consumers.contains_key(&args[4]) {
                return Ok(Frame::Integer(0));
            }
            let op = StreamOp::ConsumerCreate {
                group: group.clone(),
                consumer: args[4].clone(),
                time: now_ms(),
            };
            stream_op(txn, db, key, op)?;
            Ok(Frame::Integer(1))
        }
        _ => {
            let Some(g) = st.groups.get(group) else {
                return Err(no_group(key, group));
            };
            let Some(c) = g.consumers.get(&args[4]) else {
                return Ok(Frame::Integer(0));
            };
            let pending = c.pending.len() as i64;
            let op = StreamOp::ConsumerDelete {
                group: group.clone(),
                consumer: args[4].clone(),
            };
            stream_op(txn, db, key, op)?;
            Ok(Frame::Integer(pending))
        }
    }
}

fn xack(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    // No key or group acknowledges nothing, before the IDs are read (as in
    // Redis).
    let db = ctx.db();
    let Some(g) = read_stream(txn, db, &args[1])?.and_then(|s| s.groups.get(&args[2])) else {
        return Ok(Frame::Integer(0));
    };
    let ids = args[3..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let mut acked: Vec<StreamId> = Vec::new();
    for id in ids {
        if g.pel.contains_key(&id) && !acked.contains(&id) {
            acked.push(id);
        }
    }
    let n = acked.len() as i64;
    if n > 0 {
        let op = StreamOp::Ack {
            group: args[2].clone(),
            ids: acked,
        };
        stream_op(txn, db, &args[1], op)?;
    }
    Ok(Frame::Integer(n))
}

fn group_of<'t>(
    txn: &'t mut Txn<'_>,
    db: usize,
    key: &Bytes,
    group: &Bytes,
) -> Result<(&'t Stream, &'t Group), Frame> {
    let s = read_stream(txn, db, key)?.ok_or_else(|| no_key_or_group(key, group))?;
    let g = s
        .groups
        .get(group)
        .ok_or_else(|| no_key_or_group(key, group))?;
    Ok((s, g))
}

fn xpending(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (key, group) = (&args[1], &args[2]);
    // Redis's order: the argument count, IDLE's value, the count, start
    // and end, and only then the key and group.
    let n = args.len();
    if n != 3 && !(6..=9).contains(&n) {
        return Err(super::syntax());
    }
    let mut i = 3;
    let mut min_idle = None;
    if n >= 6 && is(&args[3], "idle") {
        min_idle = Some(arg_i64(&args[4])?.max(0) as u64);
        if n < 8 {
            return Err(super::syntax());
        }
        i = 5;
    }
    let range = if n > 3 {
        let count = arg_i64(&args[i + 2])?.max(0) as usize;
        let start = range_bound(&args[i], true)?;
        let end = range_bound(&args[i + 1], false)?;
        Some((start, end, count, args.get(i + 3)))
    } else {
        None
    };
    let db = ctx.db();
    let (_, g) = group_of(txn, db, key, group)?;
    let Some((start, end, count, consumer)) = range else {
        let Some((first, _)) = g.pel.first_key_value() else {
            return Ok(Frame::Array(vec![
                Frame::Integer(0),
                Frame::Null,
                Frame::Null,
                Frame::NullArray,
            ]));
        };
        let last = g.pel.last_key_value().map_or(*first, |(k, _)| *k);
        let owners = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pending.is_empty())
            .map(|(n, c)| {
                Frame::Array(vec![
                    Frame::Bulk(n.clone()),
                    Frame::Bulk(Bytes::from(c.pending.len().to_string())),
                ])
            })
            .collect();
        return Ok(Frame::Array(vec![
            Frame::Integer(g.pel.len() as i64),
            id_frame(*first),
            id_frame(last),
            Frame::Array(owners),
        ]));
    };
    if start > end || count == 0 {
        return Ok(Frame::Array(Vec::new()));
    }
    let now = now_ms();
    let ids: Box<dyn Iterator<Item = &StreamId>> = match consumer {
        Some(c) => match g.consumers.get(c) {
            Some(c) => Box::new(c.pending.range(start..=end)),
            None => return Ok(Frame::Array(Vec::new())),
        },
        None => Box::new(g.pel.range(start..=end).map(|(k, _)| k)),
    };
    let mut out = Vec::new();
    for id in ids {
        let Some(p) = g.pel.get(id) else { continue };
        let idle = now.saturating_sub(p.delivery_time);
        if min_idle.is_some_and(|m| idle < m) {
            continue;
        }
        out.push(Frame::Array(vec![
            id_frame(*id),
            Frame::Bulk(p.consumer.clone()),
            Frame::Integer(idle as i64),
            Frame::Integer(p.delivery_count as i64),
        ]));
        if out.len() >= count {
            break;
        }
    }
    Ok(Frame::Array(out))
}

/// XCLAIM's and XAUTOCLAIM's min-idle-time (negative counts as 0).
fn min_idle_arg(arg: &[u8], cmd: &str) -> Result<u64, Frame> {
    let n = parse_i64(arg)
        .ok_or_else(|| Frame::error(format!("ERR Invalid min-idle-time argument for {cmd}")))?;
    Ok(n.max(0) as u64)
}

fn xclaim(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let db = ctx.db();
    // WRONGTYPE and NOGROUP before argument errors, as Redis looks the
    // key and group up first.
    let (s, g) = group_of(txn, db, key, group)?;
    let min_idle = min_idle_arg(&args[4], "XCLAIM")?;
    let mut i = 5;
    let mut ids = Vec::new();
    while i < args.len() {
        match strict_id(&args[i]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        i += 1;
    }
    let now = now_ms();
    let (mut delivery_time, mut retry, mut force, mut justid, mut last_id) =
        (now, None, false, false, None);
    while i < args.len() {
        let more = i + 1 < args.len();
        let a = &args[i];
        if is(a, "force") {
            force = true;
        } else if is(a, "justid") {
            justid = true;
        } else if is(a, "idle") && more {
            i += 1;
            let idle = parse_i64(&args[i])
                .ok_or_else(|| errors::err("ERR Invalid IDLE option argument for XCLAIM"))?;
            delivery_time = now.saturating_sub(idle.max(0) as u64);
        } else if is(a, "time") && more {
            i += 1;
            let t = parse_i64(&args[i])
                .ok_or_else(|| errors::err("ERR Invalid TIME option argument for XCLAIM"))?;
            delivery_time = t.max(0) as u64;
        } else if is(a, "retrycount") && more {
            i += 1;
            let n = parse_i64(&args[i])
                .ok_or_else(|| errors::err("ERR Invalid RETRYCOUNT option argument for XCLAIM"))?;
            retry = Some(n.max(0) as u64);
        } else if is(a, "lastid") && more {
            i += 1;
            last_id = Some(strict_id(&args[i])?);
        } else {
            return Err(Frame::error(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                name(a)
            )));
        }
        i += 1;
    }
    let mut claimed = Vec::new();
    let mut dropped = Vec::new();
    let mut reply = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        if !seen.insert(id) {
            continue;
        }
        let exists = s.contains(id);
        let count = match g.pel.get(&id) {
            None if force && exists => 0,
            None => continue,
            Some(_) if !exists => {
                dropped.push(id);
                continue;
            }
            Some(p) => {
                if min_idle > 0 && now.saturating_sub(p.delivery_time) < min_idle {
                    continue;
                }
                p.delivery_count
            }
        };
        let delivery_count = match retry {
            Some(n) => n,
            None if justid => count.max(1),
            None => count + 1,
        };
        claimed.push(Claimed {
            id,
            delivery_time,
            delivery_count,
        });
        reply.extend(claimed_frame(s, id, justid));
    }
    let known = g.consumers.contains_key(consumer);
    let last_id = last_id.filter(|l| *l > g.last_id);
    let op = StreamOp::Claim {
        group: group.clone(),
        consumer: consumer.clone(),
        time: now,
        claimed,
        dropped,
        last_id,
    };
    record_claim(txn, db, key, known, op)?;
    Ok(Frame::Array(reply))
}

/// A claimed entry as XCLAIM/XAUTOCLAIM reply it (None: gone meanwhile).
fn claimed_frame(s: &Stream, id: StreamId, justid: bool) -> Option<Frame> {
    if justid {
        Some(id_frame(id))
    } else {
        s.get(id).map(|e| entry_frame(&e))
    }
}

/// Logs a claim that changes something, creating its consumer first (with
/// its own event) when it takes entries and is new.
fn record_claim(
    txn: &mut Txn<'_>,
    db: usize,
    key: &Bytes,
    known: bool,
    op: StreamOp,
) -> Result<(), Frame> {
    let StreamOp::Claim {
        group,
        consumer,
        time,
        claimed,
        dropped,
        last_id,
    } = &op
    else {
        return Ok(());
    };
    if claimed.is_empty() && dropped.is_empty() && last_id.is_none() {
        return Ok(());
    }
    if !known && !claimed.is_empty() {
        let create = StreamOp::ConsumerCreate {
            group: group.clone(),
            consumer: consumer.clone(),
            time: *time,
        };
        stream_op(txn, db, key, create)?;
    }
    stream_op(txn, db, key, op)
}

fn xautoclaim(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let db = ctx.db();
    // Unlike XCLAIM, Redis reads every argument before the key.
    let min_idle = min_idle_arg(&args[4], "XAUTOCLAIM")?;
    let start = range_bound(&args[5], true)?;
    const ATTEMPTS_FACTOR: i64 = 10;
    let (mut count, mut justid) = (100i64, false);
    let mut i = 6;
    while i < args.len() {
        if is(&args[i], "count") && i + 1 < args.len() {
            count = arg_i64(&args[i + 1])?;
            if !(1..=i64::MAX / ATTEMPTS_FACTOR).contains(&count) {
                return Err(errors::err("ERR COUNT must be > 0"));
            }
            i += 2;
        } else if is(&args[i], "justid") {
            justid = true;
            i += 1;
        } else {
            return Err(super::syntax());
        }
    }
    let (s, g) = group_of(txn, db, key, group)?;
    let now = now_ms();
    let mut attempts = count * ATTEMPTS_FACTOR;
    let (mut claimed, mut dropped, mut reply) = (Vec::new(), Vec::new(), Vec::new());
    let mut iter = g.pel.range(start..).peekable();
    while attempts > 0 && count > 0 {
        let Some((id, p)) = iter.next() else { break };
        attempts -= 1;
        if !s.contains(*id) {
            dropped.push(*id);
            count -= 1;
            continue;
        }
        if min_idle > 0 && now.saturating_sub(p.delivery_time) < min_idle {
            continue;
        }
        claimed.push(Claimed {
            id: *id,
            delivery_time: now,
            delivery_count: if justid {
                p.delivery_count
            } else {
                p.delivery_count + 1
            },
        });
        reply.extend(claimed_frame(s, *id, justid));
        count -= 1;
    }
    let next = iter.next().map_or(StreamId::MIN, |(id, _)| *id);
    let deleted = Frame::Array(dropped.iter().map(|id| id_frame(*id)).collect());
    let known = g.consumers.contains_key(consumer);
    let op = StreamOp::Claim {
        group: group.clone(),
        consumer: consumer.clone(),
        time: now,
        claimed,
        dropped,
        last_id: None,
    };
    record_claim(txn, db, key, known, op)?;
    Ok(Frame::Array(vec![
        id_frame(next),
        Frame::Array(reply),
        deleted,
    ]))
}
