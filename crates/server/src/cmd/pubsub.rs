//! Pub/sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH
//! and PUBSUB, over the registry in `crate::pubsub`; and the RESP2
//! subscribed-mode rules the dispatcher and PING apply.
//!
//! None of them is a data command: they take no shard lock and write
//! nothing to the log. A subscription answers once per channel (a push),
//! and those pushes go out even under CLIENT REPLY OFF, as in Redis.

use super::subcommands::*;
use crate::command::{
    flags::*, spec, CommandSpec, Ctx, Handler, Reply, ALL_ARGS_KEYS, FIRST_KEY, NO_KEYS,
};
use crate::pubsub::Kind;
use bytes::Bytes;
use durakv_engine::Durability;
use durakv_protocol::{Frame, Protocol};

/// Shard channels are declared where keys go, as in Redis (cluster clients
/// route by them); a Conn handler locks nothing either way.
const SHARD_CHANNELS: crate::command::Keys = ALL_ARGS_KEYS;
const SHARD_CHANNEL: crate::command::Keys = FIRST_KEY;

pub fn commands() -> Vec<CommandSpec> {
    const SUB: u32 = NOSCRIPT | LOADING | STALE;
    vec![
        spec(
            "subscribe",
            -2,
            SUB,
            NO_KEYS,
            Handler::Conn(subscribe),
            "pubsub",
            "Starts delivering the named channels' messages.",
        ),
        spec(
            "psubscribe",
            -2,
            SUB,
            NO_KEYS,
            Handler::Conn(psubscribe),
            "pubsub",
            "Starts delivering the messages of channels matching patterns.",
        ),
        spec(
            "ssubscribe",
            -2,
            SUB,
            SHARD_CHANNELS,
            Handler::Conn(ssubscribe),
            "pubsub",
            "Starts delivering the named shard channels' messages.",
        ),
        spec(
            "unsubscribe",
            -1,
            SUB,
            NO_KEYS,
            Handler::Conn(unsubscribe),
            "pubsub",
            "Cancels some or all channel subscriptions.",
        ),
        spec(
            "punsubscribe",
            -1,
            SUB,
            NO_KEYS,
            Handler::Conn(punsubscribe),
            "pubsub",
            "Cancels some or all pattern subscriptions.",
        ),
        spec(
            "sunsubscribe",
            -1,
            SUB,
            SHARD_CHANNELS,
            Handler::Conn(sunsubscribe),
            "pubsub",
            "Cancels some or all shard channel subscriptions.",
        ),
        spec(
            "publish",
            3,
            LOADING | STALE | FAST,
            NO_KEYS,
            Handler::Conn(publish),
            "pubsub",
            "Sends a message to a channel's subscribers, counting recipients.",
        ),
        spec(
            "spublish",
            3,
            LOADING | STALE | FAST,
            SHARD_CHANNEL,
            Handler::Conn(spublish),
            "pubsub",
            "Sends a message to a shard channel's subscribers.",
        ),
        spec(
            "pubsub",
            -2,
            0,
            NO_KEYS,
            Handler::Conn(pubsub),
            "pubsub",
            "Parent of the subcommands that report Pub/Sub state.",
        ),
    ]
}

pub(super) const PUBSUB_SUBS: &[SubSpec] = &[
    sub(
        "channels",
        -2,
        LOADING | STALE,
        "Names channels with subscribers.",
    ),
    sub(
        "numsub",
        -2,
        LOADING | STALE,
        "Counts each named channel's subscribers.",
    ),
    sub(
        "numpat",
        2,
        LOADING | STALE,
        "Counts the distinct patterns subscribed to.",
    ),
    sub(
        "shardchannels",
        -2,
        LOADING | STALE,
        "Names shard channels with subscribers.",
    ),
    sub(
        "shardnumsub",
        -2,
        LOADING | STALE,
        "Counts each named shard channel's subscribers.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each PUBSUB subcommand.",
    ),
];

/// Commands a RESP2 connection may send while subscribed.
const ALLOWED_WHILE_SUBSCRIBED: &[&str] = &[
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "ping",
    "quit",
    "reset",
];

/// A RESP2 connection with subscriptions reads only pushes, so it may only
/// manage them (RESP3 keeps pushes apart from replies and has no such mode).
pub fn refuse_in_subscribed_mode(
    ctx: &Ctx<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Option<Frame> {
    if ctx.client.protocol != Protocol::Resp2
        || ctx.client.subscriptions.is_empty()
        || ALLOWED_WHILE_SUBSCRIBED.contains(&spec.name)
    {
        return None;
    }
    let sub = args.get(1).and_then(|a| {
        subcommands_of(spec.name)
            .iter()
            .find(|s| crate::util::is(a, s.name))
    });
    let name = match sub {
        Some(s) => format!("{}|{}", spec.name, s.name),
        None => spec.name.to_string(),
    };
    Some(Frame::error(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    )))
}

/// PING's reply in RESP2 subscribed mode, a push-shaped `pong` array; None
/// outside it.
pub fn subscribed_pong(ctx: &Ctx<'_>, args: &[Bytes]) -> Option<Frame> {
    if ctx.client.protocol != Protocol::Resp2 || ctx.client.subscriptions.is_empty() {
        return None;
    }
    let arg = args.get(1).cloned().unwrap_or_default();
    Some(Frame::Array(vec![
        Frame::bulk_from_str("pong"),
        Frame::Bulk(arg),
    ]))
}

/// RESET: drops every subscription, without confirmations.
pub fn unsubscribe_everything(ctx: &mut Ctx<'_>) {
    let c = &mut *ctx.client;
    ctx.shared
        .pubsub
        .unsubscribe_everything(&mut c.subscriptions, &c.handle);
}

/// `[<what>, <name or nil>, <count>]` as a push.
fn confirmation(what: &'static str, name: Option<&Bytes>, count: usize) -> Frame {
    Frame::Push(vec![
        Frame::Bulk(Bytes::from_static(what.as_bytes())),
        name.map_or(Frame::Null, |n| Frame::Bulk(n.clone())),
        Frame::Integer(count as i64),
    ])
}

/// The count a confirmation carries: channels and patterns together, shard
/// channels on their own.
fn count(ctx: &Ctx<'_>, kind: Kind) -> usize {
    let s = &ctx.client.subscriptions;
    match kind {
        Kind::Shard => s.count(Kind::Shard),
        _ => s.count(Kind::Channel) + s.count(Kind::Pattern),
    }
}

fn one_or_many(mut replies: Vec<Frame>) -> Frame {
    if replies.len() == 1 {
        replies.remove(0)
    } else {
        Frame::Sequence(replies)
    }
}

fn subscribe_to(ctx: &mut Ctx<'_>, args: &[Bytes], kind: Kind, what: &'static str) -> Frame {
    let mut replies = Vec::with_capacity(args.len() - 1);
    for name in &args[1..] {
        let c = &mut *ctx.client;
        ctx.shared
            .pubsub
            .subscribe(&mut c.subscriptions, &c.handle, kind, name);
        replies.push(confirmation(what, Some(name), count(ctx, kind)));
    }
    one_or_many(replies)
}

/// Without names: from everything of `kind`, one confirmation each (or one
/// with a nil name when there was nothing).
fn unsubscribe_from(ctx: &mut Ctx<'_>, args: &[Bytes], kind: Kind, what: &'static str) -> Frame {
    let names: Vec<Bytes> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        ctx.client.subscriptions.names(kind)
    };
    if names.is_empty() {
        return confirmation(what, None, count(ctx, kind));
    }
    let mut replies = Vec::with_capacity(names.len());
    for name in &names {
        let c = &mut *ctx.client;
        ctx.shared
            .pubsub
            .unsubscribe(&mut c.subscriptions, &c.handle, kind, name);
        replies.push(confirmation(what, Some(name), count(ctx, kind)));
    }
    one_or_many(replies)
}

fn subscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(subscribe_to(ctx, args, Kind::Channel, "subscribe"))
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(subscribe_to(ctx, args, Kind::Pattern, "psubscribe"))
}

fn ssubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(subscribe_to(ctx, args, Kind::Shard, "ssubscribe"))
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(unsubscribe_from(ctx, args, Kind::Channel, "unsubscribe"))
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(unsubscribe_from(ctx, args, Kind::Pattern, "punsubscribe"))
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(unsubscribe_from(ctx, args, Kind::Shard, "sunsubscribe"))
}

fn publish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(Frame::Integer(
        publish_to(ctx, &args[1], &args[2], false) as i64
    ))
}

fn spublish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(Frame::Integer(
        publish_to(ctx, &args[1], &args[2], true) as i64
    ))
}

/// Delivers now, unless keyspace events of the same MULTI or script are
/// still waiting for its commit: then the message waits behind them, so
/// subscribers see both in the order they happened.
fn publish_to(ctx: &mut Ctx<'_>, channel: &Bytes, payload: &Bytes, shard: bool) -> usize {
    let pubsub = &ctx.shared.pubsub;
    if !ctx.client.notifications.is_empty() {
        let n = pubsub.receivers(channel, shard);
        ctx.client
            .notifications
            .message(channel.clone(), payload.clone(), shard);
        return n;
    }
    // Not inside EXEC or a script, which may hold locks the subscribers
    // need to finish their turns.
    if !ctx.client.in_exec && !ctx.client.in_script {
        let most = crate::settle::MAX_RECEIVERS;
        let subscribers = pubsub.subscribers_to(channel, shard, most);
        crate::settle::receivers(ctx.shared, ctx.client.id(), subscribers);
    }
    pubsub.publish(channel, payload, shard, publisher_dependency(ctx))
}

/// A message published right after a write (say, a pipelined SET then
/// PUBLISH) must not reach anyone before that write is durable, when the
/// publisher's writes are `full`: Redis, too, writes nothing to any client
/// before its fsync.
fn publisher_dependency(ctx: &Ctx<'_>) -> u64 {
    let lsn = ctx.client.last_write_lsn;
    if lsn == 0 || lsn <= ctx.shared.durable_lsn() {
        return 0;
    }
    let level = ctx
        .shared
        .effective_durability(ctx.client.durability, ctx.client.db);
    match level {
        Durability::Full => lsn,
        Durability::Replicated => crate::repl::replicated_dep(lsn),
        Durability::Delayed | Durability::None => 0,
    }
}

fn pubsub(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("pubsub", args)?;
    note_subcommand(ctx, "pubsub", s);
    let pubsub = &ctx.shared.pubsub;
    match s.name {
        "channels" | "shardchannels" => {
            if args.len() > 3 {
                return Err(crate::errors::wrong_args(&format!("pubsub|{}", s.name)));
            }
            let shard = s.name == "shardchannels";
            let names = pubsub.channels(shard, args.get(2).map(|p| &p[..]));
            Ok(Frame::Array(names.into_iter().map(Frame::Bulk).collect()))
        }
        "numsub" | "shardnumsub" => {
            let shard = s.name == "shardnumsub";
            let mut out = Vec::with_capacity(2 * (args.len() - 2));
            for ch in &args[2..] {
                out.push(Frame::Bulk(ch.clone()));
                out.push(Frame::Integer(pubsub.numsub(shard, ch) as i64));
            }
            Ok(Frame::Array(out))
        }
        "numpat" => Ok(Frame::Integer(pubsub.counts().1 as i64)),
        _ => help(
            "pubsub",
            &[
                "CHANNELS [<pattern>]",
                "    Name the channels somebody is subscribed to; with <pattern>, only the",
                "    names it matches.",
                "NUMPAT",
                "    Give how many different patterns clients are subscribed to.",
                "NUMSUB [<channel> ...]",
                "    Pair each named channel with its count of direct subscribers; pattern",
                "    subscriptions are left out.",
                "SHARDCHANNELS [<pattern>]",
                "    Like CHANNELS, for shard channels (SSUBSCRIBE).",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Like NUMSUB, for shard channels.",
            ],
        ),
    }
}
