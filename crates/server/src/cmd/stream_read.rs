//! XREAD and XREADGROUP, with BLOCK.
//!
//! A reader that finds nothing blocks on its keys through
//! `crate::blocking`; a write to one of them offers it the key, and it
//! takes it only if there are entries past the ID it waits after
//! (`Served::Skip` otherwise). An XREADGROUP served that way is one logged
//! write (the delivery to the group's PEL), committed at the reader's
//! durability, so under `full` its reply waits until that is durable.

use super::streams::{entries_frame, entry_frame, id_frame, parse_id, read_stream, stream_op};
use crate::blocking::{Serve, Served};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply};
use crate::errors;
use crate::util::{is, now_ms};
use bytes::Bytes;
use durakv_engine::mutation::StreamOp;
use durakv_engine::stream::{Stream, StreamEntry, StreamId, ENTRIES_READ_INVALID};
use durakv_engine::txn::Txn;
use durakv_engine::value::parse_i64;
use durakv_protocol::Frame;
use std::time::Duration;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("xread", -4, READONLY | BLOCKING, Keys::Custom(stream_keys), Handler::Data(xread), "stream", "Reads entries after given IDs from one or more streams, optionally waiting for new ones."),
        spec("xreadgroup", -7, WRITE | BLOCKING, Keys::Custom(stream_keys), Handler::Data(xreadgroup), "stream", "Reads entries for a group's consumer, new or still pending, optionally waiting."),
    ]
}

/// The keys after STREAMS: the first half of what follows it.
fn stream_keys(args: &[Bytes]) -> Vec<usize> {
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        if is(a, "streams") {
            let rest = args.len() - i - 1;
            return (i + 1..i + 1 + rest / 2).collect();
        }
        i += if is(a, "group") {
            3
        } else if is(a, "count") || is(a, "block") {
            2
        } else {
            1
        };
    }
    Vec::new()
}

struct GroupRead {
    group: Bytes,
    consumer: Bytes,
    noack: bool,
}

/// Where each stream is read after: an ID, or (XREADGROUP) `>` for the
/// group's new entries.
#[derive(Clone, Copy)]
enum After {
    Id(StreamId),
    New,
}

/// Does this XREAD / XREADGROUP ask to block? (A script may not: Redis
/// refuses it there rather than answer as if it timed out.)
pub(crate) fn asks_to_block(args: &[Bytes]) -> bool {
    args[1..]
        .iter()
        .take_while(|a| !is(a, "streams"))
        .any(|a| is(a, "block"))
}

struct Request {
    count: Option<usize>,
    block: Option<Option<Duration>>,
    group: Option<GroupRead>,
    streams: Vec<(Bytes, Bytes)>,
}

fn parse(args: &[Bytes], grouped: bool) -> Result<Request, Frame> {
    let mut req = Request {
        count: None,
        block: None,
        group: None,
        streams: Vec::new(),
    };
    let mut noack = false;
    let mut i = 1;
    let mut streams_at = None;
    while i < args.len() {
        let a = &args[i];
        let more = args.len() - i - 1;
        if is(a, "block") && more >= 1 {
            let ms = parse_i64(&args[i + 1])
                .ok_or_else(|| errors::err("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(errors::err("ERR timeout is negative"));
            }
            req.block = Some((ms > 0).then(|| Duration::from_millis(ms as u64)));
            i += 2;
        } else if is(a, "count") && more >= 1 {
            let n = crate::util::arg_i64(&args[i + 1])?;
            req.count = (n > 0).then_some(n as usize);
            i += 2;
        } else if is(a, "streams") && more >= 1 {
            streams_at = Some(i + 1);
            break;
        } else if grouped && is(a, "group") && more >= 2 {
            req.group = Some(GroupRead {
                group: args[i + 1].clone(),
                consumer: args[i + 2].clone(),
                noack: false,
            });
            i += 3;
        } else if grouped && is(a, "noack") {
            noack = true;
            i += 1;
        } else {
            return Err(super::syntax());
        }
    }
    let Some(at) = streams_at else {
        return Err(super::syntax());
    };
    let rest = &args[at..];
    if !rest.len().is_multiple_of(2) {
        // Redis 7.0's wording, XREADGROUP's too.
        return Err(errors::err(
            "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
        ));
    }
    if grouped && req.group.is_none() {
        return Err(errors::err("ERR Missing GROUP option for XREADGROUP"));
    }
    if let Some(g) = req.group.as_mut() {
        g.noack = noack;
    }
    let half = rest.len() / 2;
    req.streams = (0..half)
        .map(|j| (rest[j].clone(), rest[half + j].clone()))
        .collect();
    Ok(req)
}

fn reply(ctx: &Ctx<'_>, served: Vec<(Bytes, Frame)>) -> Frame {
    if super::resp3(ctx) {
        Frame::Map(
            served
                .into_iter()
                .map(|(k, v)| (Frame::Bulk(k), v))
                .collect(),
        )
    } else {
        Frame::Array(
            served
                .into_iter()
                .map(|(k, v)| Frame::Array(vec![Frame::Bulk(k), v]))
                .collect(),
        )
    }
}

fn one_reply(resp3: bool, key: &Bytes, entries: Frame) -> Frame {
    if resp3 {
        Frame::Map(vec![(Frame::Bulk(key.clone()), entries)])
    } else {
        Frame::Array(vec![Frame::Array(vec![Frame::Bulk(key.clone()), entries])])
    }
}

fn timeout_reply(resp3: bool) -> Frame {
    if resp3 {
        Frame::Null
    } else {
        Frame::NullArray
    }
}

fn xread(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let req = parse(args, false)?;
    let db = ctx.db();
    let mut after = Vec::with_capacity(req.streams.len());
    for (key, id) in &req.streams {
        let last = read_stream(txn, db, key)?.map(|s| s.last_id);
        let id = if id[..] == *b"$" {
            last.unwrap_or(StreamId::MIN)
        } else if id[..] == *b">" {
            return Err(errors::err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
        } else {
            parse_id(id, 0, false)?
        };
        after.push((key.clone(), id));
    }
    let mut served = Vec::new();
    for (key, id) in &after {
        if let Some(s) = read_stream(txn, db, key)? {
            let entries = entries_after(s, *id, req.count);
            if !entries.is_empty() {
                served.push((key.clone(), entries_frame(&entries)));
            }
        }
    }
    let keys: Vec<Bytes> = after.iter().map(|(k, _)| k.clone()).collect();
    let op = BlockedRead {
        after,
        count: req.count,
        group: None,
        resp3: super::resp3(ctx),
    };
    reply_or_block(ctx, served, req.block, &keys, op)
}

/// What was read, or, with nothing, a wait under BLOCK or the nil reply.
fn reply_or_block(
    ctx: &mut Ctx<'_>,
    served: Vec<(Bytes, Frame)>,
    block: Option<Option<Duration>>,
    keys: &[Bytes],
    op: BlockedRead,
) -> Reply {
    if !served.is_empty() {
        return Ok(reply(ctx, served));
    }
    let Some(timeout) = block else {
        return Ok(timeout_reply(super::resp3(ctx)));
    };
    super::blocking::block(ctx, keys, timeout, op)
}

fn entries_after(s: &Stream, id: StreamId, count: Option<usize>) -> Vec<StreamEntry> {
    match id.next() {
        Some(start) => s.range(start, StreamId::MAX, count, false),
        None => Vec::new(),
    }
}

fn nogroup(key: &[u8], group: &[u8]) -> Frame {
    Frame::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// Delivers to `g`'s consumer what `after` asks for from the stream at
/// `key`: the entries replied, or None when `>` finds nothing new.
fn deliver(
    txn: &mut Txn<'_>,
    db: usize,
    key: &Bytes,
    g: &GroupRead,
    after: After,
    count: Option<usize>,
    now: u64,
) -> Result<Option<Frame>, Frame> {
    let Some(s) = read_stream(txn, db, key)? else {
        return Err(nogroup(key, &g.group));
    };
    let Some(group) = s.groups.get(&g.group) else {
        return Err(nogroup(key, &g.group));
    };
    let known = group.consumers.contains_key(&g.consumer);
    let (frame, op) = match after {
        After::New => {
            let entries = entries_after(s, group.last_id, count);
            if entries.is_empty() {
                // Not served: Redis neither creates nor refreshes the
                // consumer until it gets something.
                return Ok(None);
            }
            let ids: Vec<StreamId> = entries.iter().map(|e| e.id).collect();
            let last = ids.last().map(|&last| {
                let mut read = group.entries_read;
                for id in &ids {
                    read = if read != ENTRIES_READ_INVALID
                        && !s.range_has_tombstones(*id, StreamId::MAX)
                    {
                        read + 1
                    } else if s.entries_added > 0 {
                        s.estimate_distance(*id)
                    } else {
                        read
                    };
                }
                (last, read)
            });
            let frame = Some(entries_frame(&entries));
            let op = StreamOp::Deliver {
                group: g.group.clone(),
                consumer: g.consumer.clone(),
                time: now,
                new: ids,
                noack: g.noack,
                last,
                history: Vec::new(),
            };
            (frame, op)
        }
        After::Id(id) => {
            let pending = group
                .consumers
                .get(&g.consumer)
                .map(|c| {
                    let start = id.next().unwrap_or(StreamId::MAX);
                    c.pending
                        .range(start..)
                        .take(count.unwrap_or(usize::MAX))
                        .copied()
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let mut frames = Vec::with_capacity(pending.len());
            let mut history = Vec::new();
            for pid in pending {
                match s.get(pid) {
                    Some(e) => {
                        frames.push(entry_frame(&e));
                        history.push(pid);
                    }
                    None => frames.push(Frame::Array(vec![id_frame(pid), Frame::NullArray])),
                }
            }
            let op = StreamOp::Deliver {
                group: g.group.clone(),
                consumer: g.consumer.clone(),
                time: now,
                new: Vec::new(),
                noack: false,
                last: None,
                history,
            };
            (Some(Frame::Array(frames)), op)
        }
    };
    if !known {
        let create = StreamOp::ConsumerCreate {
            group: g.group.clone(),
            consumer: g.consumer.clone(),
            time: now,
        };
        stream_op(txn, db, key, create)?;
    }
    stream_op(txn, db, key, op)?;
    Ok(frame)
}

fn xreadgroup(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let req = parse(args, true)?;
    let Some(g) = req.group else {
        return Err(super::syntax());
    };
    let db = ctx.db();
    let mut after = Vec::with_capacity(req.streams.len());
    for (key, id) in &req.streams {
        let a = if id[..] == *b">" {
            After::New
        } else if id[..] == *b"$" {
            return Err(errors::err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
        } else {
            After::Id(parse_id(id, 0, false)?)
        };
        let ok = read_stream(txn, db, key)?.is_some_and(|s| s.groups.contains_key(&g.group));
        if !ok {
            return Err(nogroup(key, &g.group));
        }
        after.push((key.clone(), a));
    }
    let now = now_ms();
    let mut served = Vec::new();
    for (key, a) in &after {
        if let Some(f) = deliver(txn, db, key, &g, *a, req.count, now)? {
            served.push((key.clone(), f));
        }
    }
    let keys: Vec<Bytes> = after.iter().map(|(k, _)| k.clone()).collect();
    let op = BlockedRead {
        after: Vec::new(),
        count: req.count,
        group: Some(g),
        resp3: super::resp3(ctx),
    };
    reply_or_block(ctx, served, req.block, &keys, op)
}

/// A reader waiting for entries: XREAD after fixed IDs, or XREADGROUP's `>`.
struct BlockedRead {
    after: Vec<(Bytes, StreamId)>,
    count: Option<usize>,
    group: Option<GroupRead>,
    resp3: bool,
}

impl Serve for BlockedRead {
    fn command(&self) -> &'static str {
        if self.group.is_some() {
            "xreadgroup"
        } else {
            "xread"
        }
    }

    fn serve(&self, txn: &mut Txn<'_>, db: usize, key: &Bytes, _resp3: bool) -> Served {
        let Some(g) = &self.group else {
            let Some(&(_, id)) = self.after.iter().find(|(k, _)| k == key) else {
                return Served::Skip;
            };
            return match read_stream(txn, db, key) {
                Ok(Some(s)) => {
                    let entries = entries_after(s, id, self.count);
                    if entries.is_empty() {
                        Served::Skip
                    } else {
                        Served::Reply(one_reply(self.resp3, key, entries_frame(&entries)))
                    }
                }
                _ => Served::Skip,
            };
        };
        match read_stream(txn, db, key) {
            Ok(Some(s)) => {
                match s.groups.get(&g.group) {
                    None => return Served::Reply(errors::err(
                        "NOGROUP the consumer group this client was blocked on no longer exists",
                    )),
                    Some(group) if entries_after(s, group.last_id, Some(1)).is_empty() => {
                        return Served::Skip
                    }
                    Some(_) => {}
                }
            }
            _ => return Served::Reply(errors::err("UNBLOCKED the stream key no longer exists")),
        }
        match deliver(txn, db, key, g, After::New, self.count, now_ms()) {
            Ok(Some(f)) => Served::Reply(one_reply(self.resp3, key, f)),
            // Checked above: there are new entries.
            Ok(None) => Served::Reply(timeout_reply(self.resp3)),
            Err(e) => Served::Reply(e),
        }
    }

    fn timeout_reply(&self) -> Frame {
        timeout_reply(self.resp3)
    }
}
