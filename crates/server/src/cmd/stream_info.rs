//! XINFO STREAM [FULL [COUNT n]] / GROUPS / CONSUMERS / HELP.

use super::stream_groups::{key_at_2, no_group};
use super::streams::{entries_frame, entry_frame, id_frame, read_stream};
use super::subcommands::{find_sub, help, note_subcommand, sub, SubSpec};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply};
use crate::errors;
use crate::util::{arg_i64, is, now_ms};
use bytes::Bytes;
use durakv_engine::stream::{Group, Stream, StreamId, ENTRIES_READ_INVALID};
use durakv_engine::txn::Txn;
use durakv_protocol::Frame;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("xinfo", -2, READONLY, Keys::Custom(key_at_2), Handler::Data(xinfo), "stream", "Parent of the subcommands that report on streams and groups."),
    ]
}

#[rustfmt::skip]
pub const XINFO_SUBS: &[SubSpec] = &[
    sub("stream", -3, READONLY, "Describes a stream's length, IDs and entries."),
    sub("groups", 3, READONLY, "Shows a stream's groups and their progress."),
    sub("consumers", 4, READONLY, "Describes each consumer in one group of a stream."),
    sub("help", 2, LOADING | STALE, "Describes each XINFO subcommand."),
];

fn field(name: &str, v: Frame) -> (Frame, Frame) {
    (Frame::bulk_from_str(name), v)
}

fn int(n: impl TryInto<i64>) -> Frame {
    Frame::Integer(n.try_into().unwrap_or(i64::MAX))
}

fn entries_read(g: &Group) -> Frame {
    if g.entries_read == ENTRIES_READ_INVALID {
        Frame::Null
    } else {
        Frame::Integer(g.entries_read)
    }
}

fn lag(s: &Stream, g: &Group) -> Frame {
    s.lag(g).map_or(Frame::Null, Frame::Integer)
}

fn xinfo(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let sub = find_sub("xinfo", args)?;
    note_subcommand(ctx, "xinfo", sub);
    if sub.name == "help" {
        return help(
            "xinfo",
            &[
                "CONSUMERS <key> <groupname>",
                "    Describe each consumer in <groupname>: pending count, idle times.",
                "GROUPS <key>",
                "    Describe each group on the stream: consumers, pending entries, last",
                "    delivered ID, entries read and lag.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Summarize the stream: length, IDs, first and last entries. FULL adds",
                "    its entries and each group's pending entries and consumers; COUNT caps",
                "    how many entries each list shows (10 by default, 0 for no limit).",
            ],
        );
    }
    let key = &args[2];
    // The key first, as in Redis: a missing or mistyped key answers before
    // FULL and COUNT are read.
    let Some(s) = read_stream(txn, ctx.db(), key)? else {
        return Err(errors::err(errors::NO_SUCH_KEY));
    };
    let mut full = None;
    if sub.name == "stream" && args.len() > 3 {
        // Redis answers any other shape with its subcommand usage error.
        let usage = || errors::sub_usage(&args[1], "xinfo");
        if !is(&args[3], "full") {
            return Err(usage());
        }
        let mut count = 10;
        match args.len() {
            4 => {}
            6 if is(&args[4], "count") => {
                count = arg_i64(&args[5])?.max(0) as usize;
            }
            _ => return Err(usage()),
        }
        full = Some(count);
    }
    let now = now_ms();
    match sub.name {
        "stream" => Ok(stream_info(s, full, now)),
        "groups" => Ok(Frame::Array(
            s.groups
                .iter()
                .map(|(name, g)| {
                    Frame::Map(vec![
                        field("name", Frame::Bulk(name.clone())),
                        field("consumers", int(g.consumers.len())),
                        field("pending", int(g.pel.len())),
                        field("last-delivered-id", id_frame(g.last_id)),
                        field("entries-read", entries_read(g)),
                        field("lag", lag(s, g)),
                    ])
                })
                .collect(),
        )),
        _ => {
            let Some(g) = s.groups.get(&args[3]) else {
                return Err(no_group(key, &args[3]));
            };
            Ok(Frame::Array(
                g.consumers
                    .iter()
                    .map(|(name, c)| {
                        Frame::Map(vec![
                            field("name", Frame::Bulk(name.clone())),
                            field("pending", int(c.pending.len())),
                            field("idle", int(now.saturating_sub(c.seen_time))),
                            // Redis 7.2: since it last got an entry; -1 if never.
                            field(
                                "inactive",
                                c.active_time
                                    .map_or(Frame::Integer(-1), |t| int(now.saturating_sub(t))),
                            ),
                        ])
                    })
                    .collect(),
            ))
        }
    }
}

fn stream_info(s: &Stream, full: Option<usize>, now: u64) -> Frame {
    let mut out = vec![
        field("length", int(s.len())),
        field("radix-tree-keys", int(s.node_count())),
        field("radix-tree-nodes", int(s.radix_tree_nodes())),
        field("last-generated-id", id_frame(s.last_id)),
        field("max-deleted-entry-id", id_frame(s.max_deleted_id)),
        field("entries-added", int(s.entries_added)),
        field("recorded-first-entry-id", id_frame(s.first_id())),
    ];
    let Some(count) = full else {
        out.push(field("groups", int(s.groups.len())));
        let edge = |e: Option<_>| e.as_ref().map_or(Frame::Null, entry_frame);
        out.push(field("first-entry", edge(s.first_entry())));
        out.push(field("last-entry", edge(s.last_entry())));
        return Frame::Map(out);
    };
    let limit = (count > 0).then_some(count);
    out.push(field(
        "entries",
        entries_frame(&s.range(StreamId::MIN, StreamId::MAX, limit, false)),
    ));
    let take = |n: usize| if count == 0 { n } else { n.min(count) };
    let groups = s
        .groups
        .iter()
        .map(|(name, g)| {
            let pending = g
                .pel
                .iter()
                .take(take(g.pel.len()))
                .map(|(id, p)| {
                    Frame::Array(vec![
                        id_frame(*id),
                        Frame::Bulk(p.consumer.clone()),
                        int(p.delivery_time),
                        int(p.delivery_count),
                    ])
                })
                .collect();
            let consumers = g
                .consumers
                .iter()
                .map(|(cname, c)| {
                    let pending = c
                        .pending
                        .iter()
                        .take(take(c.pending.len()))
                        .filter_map(|id| g.pel.get(id).map(|p| (id, p)))
                        .map(|(id, p)| {
                            Frame::Array(vec![
                                id_frame(*id),
                                int(p.delivery_time),
                                int(p.delivery_count),
                            ])
                        })
                        .collect();
                    Frame::Map(vec![
                        field("name", Frame::Bulk(cname.clone())),
                        field("seen-time", int(c.seen_time)),
                        field("active-time", c.active_time.map_or(Frame::Integer(-1), int)),
                        field("pel-count", int(c.pending.len())),
                        field("pending", Frame::Array(pending)),
                    ])
                })
                .collect();
            let _ = now;
            Frame::Map(vec![
                field("name", Frame::Bulk(name.clone())),
                field("last-delivered-id", id_frame(g.last_id)),
                field("entries-read", entries_read(g)),
                field("lag", lag(s, g)),
                field("pel-count", int(g.pel.len())),
                field("pending", Frame::Array(pending)),
                field("consumers", Frame::Array(consumers)),
            ])
        })
        .collect();
    out.push(field("groups", Frame::Array(groups)));
    Frame::Map(out)
}
