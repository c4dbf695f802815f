//! Keyspace notifications (`notify-keyspace-events`): the events a command
//! causes, published on `__keyspace@<db>__:<key>` and
//! `__keyevent@<db>__:<event>` once the command's writes are committed.
//!
//! Events are not emitted by each handler: they are read off the mutations
//! a handler applied (which already say exactly what changed, and only
//! when something did), named after the command that applied them, the way
//! Redis names its events. [`run_data`] wraps every data handler call; with
//! notifications off, the default, it costs one atomic load. With them on,
//! the events wait in the connection's [`Pending`] list until
//! `dispatch::finish` has committed and released the locks, so a
//! subscriber that reacts to an event sees the change, and under `full`
//! durability the event, like a reply, goes out only once the write is
//! durable.
//!
//! Keys removed by expiry (lazily, by a command's lookup, or by the
//! periodic sampler) are announced as `expired`, keys evicted by
//! `maxmemory` as `evicted` (see `crate::evict`); modules do not exist, so
//! `d` sends nothing.

use crate::command::{flags, CommandSpec, Ctx, DataFn, Reply};
use crate::pubsub::PubSub;
use crate::util::is;
use bytes::{BufMut, Bytes, BytesMut};
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::shard::Shard;
use durakv_engine::txn::Txn;
use std::collections::HashSet;

/// Notification classes, one bit per letter of `notify-keyspace-events`.
pub mod class {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const KEYEVENT: u32 = 1 << 1;
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
    pub const MODULE: u32 = 1 << 11;
    pub const KEY_MISS: u32 = 1 << 12;
    pub const NEW: u32 = 1 << 13;
    /// `A`: every class but key misses and new keys.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// Letters of the type classes, in the order CONFIG GET lists them.
const TYPE_LETTERS: [(char, u32); 11] = [
    ('g', class::GENERIC),
    ('$', class::STRING),
    ('l', class::LIST),
    ('s', class::SET),
    ('h', class::HASH),
    ('z', class::ZSET),
    ('x', class::EXPIRED),
    ('e', class::EVICTED),
    ('t', class::STREAM),
    ('d', class::MODULE),
    ('n', class::NEW),
];

/// Parses `notify-keyspace-events` (e.g. `KEA`, `Ex`); the error is Redis's.
pub fn parse_classes(v: &str) -> Result<u32, String> {
    let mut flags = 0;
    for c in v.chars() {
        flags |= match c {
            'A' => class::ALL,
            'K' => class::KEYSPACE,
            'E' => class::KEYEVENT,
            'm' => class::KEY_MISS,
            c => TYPE_LETTERS
                .iter()
                .find(|(l, _)| *l == c)
                .map(|(_, f)| *f)
                .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?,
        };
    }
    Ok(flags)
}

/// The canonical text CONFIG GET shows, as Redis builds it: `A` stands for
/// the whole `A` set (and then, as in Redis, `n` is not shown), then `K`,
/// `E` and `m`.
pub fn format_classes(flags: u32) -> String {
    let mut s = String::new();
    if flags & class::ALL == class::ALL {
        s.push('A');
    } else {
        s.extend(
            TYPE_LETTERS
                .iter()
                .filter(|(_, f)| flags & f != 0)
                .map(|(l, _)| *l),
        );
    }
    for (l, f) in [
        ('K', class::KEYSPACE),
        ('E', class::KEYEVENT),
        ('m', class::KEY_MISS),
    ] {
        if flags & f != 0 {
            s.push(l);
        }
    }
    s
}

/// The classes that actually produce events: none unless `K` or `E` says
/// where to publish them.
pub fn effective(flags: u32) -> u32 {
    if flags & (class::KEYSPACE | class::KEYEVENT) == 0 {
        0
    } else {
        flags
    }
}

/// Whether expired keys must be recorded for `expired` events.
pub fn wants_expired(effective_flags: u32) -> bool {
    effective_flags & class::EXPIRED != 0
}

/// What the connection's current command (or MULTI, or script) will
/// publish once its writes are committed, in the order it happened.
#[derive(Default)]
pub struct Pending {
    items: Vec<Item>,
    /// Handler calls observed so far; a script sees its own commands'
    /// calls go by and leaves the announcing to them.
    observed: u64,
}

enum Item {
    Event {
        db: usize,
        key: Bytes,
        event: &'static str,
    },
    /// A PUBLISH / SPUBLISH made after events of the same atomic unit, held
    /// so its subscribers see them in order.
    Message {
        channel: Bytes,
        payload: Bytes,
        shard: bool,
    },
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn event(&mut self, flags: u32, class: u32, db: usize, key: Bytes, event: &'static str) {
        if flags & class != 0 {
            self.items.push(Item::Event { db, key, event });
        }
    }

    /// Holds a message behind the events already pending.
    pub fn message(&mut self, channel: Bytes, payload: Bytes, shard: bool) {
        self.items.push(Item::Message {
            channel,
            payload,
            shard,
        });
    }
}

/// Runs a data command's handler, noting the events it causes and the
/// lookups it made. With notifications off this is the call plus one
/// atomic load.
#[inline]
pub fn run_data(
    f: DataFn,
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    spec: &CommandSpec,
    args: &[bytes::Bytes],
) -> Reply {
    let flags = ctx.shared.pubsub.keyspace_events();
    let reply = if ctx.shared.tracking.is_active() {
        crate::tracking::run_data(flags, f, ctx, txn, spec, args)
    } else {
        run_notified(flags, f, ctx, txn, spec, args)
    };
    // INFO's keyspace_hits / keyspace_misses: the lookups of read commands,
    // as Redis counts its read lookups (a write's lookups do not count).
    let lookups = txn.take_lookups();
    if !spec.is_write() {
        if lookups.hits > 0 {
            ctx.shared.stats.keyspace_hits.add(u64::from(lookups.hits));
        }
        if lookups.misses > 0 {
            ctx.shared
                .stats
                .keyspace_misses
                .add(u64::from(lookups.misses));
        }
    }
    reply
}

/// [`run_data`] without client tracking's part.
#[inline]
pub fn run_notified(
    flags: u32,
    f: DataFn,
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Reply {
    if flags == 0 {
        return f(ctx, txn, args);
    }
    run_observed(flags, f, ctx, txn, spec, args)
}

/// One event the command caused, before `new`/`del` are worked out.
struct Caused {
    db: usize,
    key: Bytes,
    class: u32,
    event: &'static str,
    /// The operation may have created the key (`new`).
    creates: bool,
    /// The operation may have emptied a collection, which then goes (`del`).
    removes: bool,
}

fn run_observed(
    flags: u32,
    f: DataFn,
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Reply {
    let db = ctx.client.db;
    // Which declared keys existed, for `new` and `keymiss` (looking them up
    // first is what Redis's own lookup does: it may expire them).
    let mut existed: HashSet<(usize, Bytes)> = HashSet::new();
    let mut missing: Vec<Bytes> = Vec::new();
    if flags & (class::NEW | class::KEY_MISS) != 0 {
        for i in spec.key_indexes(args) {
            let key = &args[i];
            if txn.get_untouched(db, key).is_some() {
                existed.insert((db, key.clone()));
            } else {
                missing.push(key.clone());
            }
        }
    }
    let before = txn.mutations().len();
    let observed = ctx.client.notifications.observed;
    let frame = f(ctx, txn, args);

    let pending = &mut ctx.client.notifications;
    if pending.observed != observed {
        // A script: each command it ran announced what it did.
        return frame;
    }
    pending.observed = pending.observed.wrapping_add(1);
    if flags & class::EXPIRED != 0 {
        // Expiry invalidates tracked copies too.
        let tracking = &mut ctx.client.tracking;
        txn.take_expired(|db, key| {
            tracking.note_expired(key.clone());
            pending.event(flags, class::EXPIRED, db, key, "expired")
        });
    }
    if flags & class::KEY_MISS != 0 && spec.flags & flags::READONLY != 0 {
        for key in missing {
            pending.event(flags, class::KEY_MISS, db, key, "keymiss");
        }
    }
    note_applied(flags, spec.name, args, txn, before, &existed, pending);
    frame
}

/// Whether `cmd` applies its two keys in the other order than Redis
/// announces them (keyspace events, and tracking's invalidations): RENAME
/// and MOVE write the destination first, Redis names the source first; the
/// LMOVE family pops before it pushes, Redis names the push first.
fn announced_in_reverse(cmd: &str) -> bool {
    matches!(
        cmd,
        "rename" | "renamenx" | "move" | "lmove" | "blmove" | "rpoplpush" | "brpoplpush"
    )
}

/// The mutations `cmd` applied, in the order Redis announces them.
pub fn in_announced_order<'m>(
    cmd: &str,
    applied: &'m [Mutation],
) -> impl Iterator<Item = &'m Mutation> {
    let reversed = announced_in_reverse(cmd);
    let n = applied.len();
    (0..n).map(move |i| &applied[if reversed { n - 1 - i } else { i }])
}

/// Notes the events of the mutations `cmd` applied in `txn` from index
/// `before` on; `existed` holds the keys it named that existed beforehand.
fn note_applied(
    flags: u32,
    cmd: &str,
    args: &[Bytes],
    txn: &mut Txn<'_>,
    before: usize,
    existed: &HashSet<(usize, Bytes)>,
    pending: &mut Pending,
) {
    let applied = &txn.mutations()[before..];
    if applied.is_empty() {
        return;
    }
    let mut caused = Vec::new();
    for m in in_announced_order(cmd, applied) {
        if let Mutation::Key { db, key, op } = m {
            events_of(cmd, args, key, op, |class, event| {
                caused.push(Caused {
                    db: *db as usize,
                    key: key.clone(),
                    class,
                    event,
                    creates: creates(op),
                    removes: removes(op),
                })
            });
        }
    }

    let mut announced_new: HashSet<(usize, Bytes)> = HashSet::new();
    for (i, c) in caused.iter().enumerate() {
        let id = (c.db, c.key.clone());
        if c.creates
            && flags & class::NEW != 0
            && !existed.contains(&id)
            && announced_new.insert(id)
        {
            pending.event(flags, class::NEW, c.db, c.key.clone(), "new");
        }
        pending.event(flags, c.class, c.db, c.key.clone(), c.event);
        let last_for_key = !caused[i + 1..]
            .iter()
            .any(|o| o.db == c.db && o.key == c.key);
        if c.removes && last_for_key && txn.get_untouched(c.db, &c.key).is_none() {
            pending.event(flags, class::GENERIC, c.db, c.key.clone(), "del");
        }
    }
}

/// The events of a blocked client's command that another client's write
/// served (`cmd` as Redis names the call, BLPOP or BLMOVE); `keys` are the
/// keys it touched, read before serving. Returns None with notifications
/// off. Published by [`Pending::publish`] once `txn` commits.
pub struct Serving {
    flags: u32,
    existed: HashSet<(usize, Bytes)>,
    before: usize,
}

impl Serving {
    pub fn start<'k>(
        pubsub: &PubSub,
        txn: &mut Txn<'_>,
        db: usize,
        keys: impl Iterator<Item = &'k Bytes>,
    ) -> Option<Serving> {
        let flags = pubsub.keyspace_events();
        if flags == 0 {
            return None;
        }
        let mut existed = HashSet::new();
        for k in keys {
            if txn.get_untouched(db, k).is_some() {
                existed.insert((db, k.clone()));
            }
        }
        Some(Serving {
            flags,
            existed,
            before: txn.mutations().len(),
        })
    }

    pub fn finish(self, cmd: &str, txn: &mut Txn<'_>) -> Pending {
        let mut pending = Pending::default();
        note_applied(
            self.flags,
            cmd,
            &[],
            txn,
            self.before,
            &self.existed,
            &mut pending,
        );
        pending
    }
}

fn creates(op: &KeyOp) -> bool {
    matches!(
        op,
        KeyOp::SetString { .. }
            | KeyOp::Restore { .. }
            | KeyOp::Append(_)
            | KeyOp::SetRange { .. }
            | KeyOp::HSet(_)
            | KeyOp::Push { .. }
            | KeyOp::SAdd(_)
            | KeyOp::ZAdd(_)
    )
}

fn removes(op: &KeyOp) -> bool {
    matches!(
        op,
        KeyOp::HDel(_)
            | KeyOp::Pop { .. }
            | KeyOp::LRem { .. }
            | KeyOp::LTrim { .. }
            | KeyOp::SRem(_)
            | KeyOp::ZRem(_)
    )
}

/// Redis's event name(s) for `op` applied to `key` by command `cmd`.
fn events_of(
    cmd: &str,
    args: &[Bytes],
    key: &Bytes,
    op: &KeyOp,
    mut emit: impl FnMut(u32, &'static str),
) {
    use class::*;
    match op {
        KeyOp::SetString { expire, .. } => {
            let event = match cmd {
                "incr" | "decr" | "incrby" | "decrby" => "incrby",
                "incrbyfloat" => "incrbyfloat",
                // PFMERGE announces itself as pfadd, as in Redis.
                "pfadd" | "pfmerge" => "pfadd",
                "pfdebug" => return,
                _ => "set",
            };
            emit(STRING, event);
            if matches!(expire, ExpireMode::At(_)) {
                emit(GENERIC, "expire");
            }
        }
        KeyOp::Restore { .. } => match cmd {
            "copy" => emit(GENERIC, "copy_to"),
            "rename" | "renamenx" => emit(GENERIC, "rename_to"),
            "move" => emit(GENERIC, "move_to"),
            "sort" | "sort_ro" => emit(GENERIC, "sortstore"),
            "sinterstore" => emit(SET, "sinterstore"),
            "sunionstore" => emit(SET, "sunionstore"),
            "sdiffstore" => emit(SET, "sdiffstore"),
            "zinterstore" => emit(ZSET, "zinterstore"),
            "zunionstore" => emit(ZSET, "zunionstore"),
            "zdiffstore" => emit(ZSET, "zdiffstore"),
            "zrangestore" => emit(ZSET, "zrangestore"),
            "geosearchstore" => emit(ZSET, "geosearchstore"),
            "georadius" | "georadiusbymember" => emit(ZSET, "georadiusstore"),
            _ => emit(GENERIC, "restore"),
        },
        KeyOp::Del => match cmd {
            // RENAME's overwritten destination is not announced (Redis
            // sends only rename_from and rename_to).
            "rename" | "renamenx" if args.get(1) == Some(key) => emit(GENERIC, "rename_from"),
            "rename" | "renamenx" => {}
            "move" => emit(GENERIC, "move_from"),
            _ => emit(GENERIC, "del"),
        },
        KeyOp::Expire { at_ms: 0 } => emit(GENERIC, "persist"),
        KeyOp::Expire { .. } => emit(GENERIC, "expire"),
        KeyOp::Append(_) => emit(STRING, "append"),
        KeyOp::SetRange { offset, .. } => match cmd {
            "setbit" | "bitfield" => emit(STRING, "setbit"),
            // A HyperLogLog write logs its changed ranges; the first
            // covers the header and stands for the one event Redis sends.
            "pfadd" | "pfmerge" if *offset <= crate::hll::CARD_FLAG_BYTE as u64 => {
                emit(STRING, "pfadd")
            }
            // Caching a count, or a range past the header.
            "pfadd" | "pfmerge" | "pfcount" | "pfdebug" => {}
            _ => emit(STRING, "setrange"),
        },
        KeyOp::HSet(_) => emit(
            HASH,
            match cmd {
                "hincrby" => "hincrby",
                "hincrbyfloat" => "hincrbyfloat",
                _ => "hset",
            },
        ),
        KeyOp::HDel(_) => emit(HASH, "hdel"),
        KeyOp::Push { left, .. } => emit(LIST, if *left { "lpush" } else { "rpush" }),
        KeyOp::Pop { left, .. } => emit(LIST, if *left { "lpop" } else { "rpop" }),
        KeyOp::LSet { .. } => emit(LIST, "lset"),
        KeyOp::LRem { .. } => emit(LIST, "lrem"),
        KeyOp::LTrim { .. } => emit(LIST, "ltrim"),
        KeyOp::LInsert { .. } => emit(LIST, "linsert"),
        KeyOp::SAdd(_) => emit(SET, "sadd"),
        KeyOp::SRem(_) => emit(SET, if cmd == "spop" { "spop" } else { "srem" }),
        KeyOp::ZAdd(_) => {
            let incr = cmd == "zincrby" || (cmd == "zadd" && args.iter().any(|a| is(a, "incr")));
            emit(ZSET, if incr { "zincr" } else { "zadd" })
        }
        KeyOp::ZRem(_) => emit(
            ZSET,
            match cmd {
                "zremrangebyscore" => "zremrangebyscore",
                "zremrangebyrank" => "zremrangebyrank",
                "zremrangebylex" => "zremrangebylex",
                "zpopmin" | "bzpopmin" => "zpopmin",
                "zpopmax" | "bzpopmax" => "zpopmax",
                "zmpop" | "bzmpop" if args.iter().any(|a| is(a, "max")) => "zpopmax",
                "zmpop" | "bzmpop" => "zpopmin",
                _ => "zrem",
            },
        ),
        KeyOp::Stream(op) => {
            if let Some(event) = stream_event(op) {
                emit(STREAM, event);
            }
        }
    }
}

/// A stream write's event; reads that move group state announce none.
fn stream_event(op: &durakv_engine::mutation::StreamOp) -> Option<&'static str> {
    use durakv_engine::mutation::StreamOp::*;
    Some(match op {
        Add { .. } => "xadd",
        Trim { .. } => "xtrim",
        Delete(_) => "xdel",
        SetId { .. } => "xsetid",
        GroupCreate { .. } => "xgroup-create",
        GroupSetId { .. } => "xgroup-setid",
        GroupDestroy { .. } => "xgroup-destroy",
        ConsumerCreate { .. } => "xgroup-createconsumer",
        ConsumerDelete { .. } => "xgroup-delconsumer",
        Create | Deliver { .. } | Ack { .. } | Claim { .. } => return None,
    })
}

/// Publishes what the command left pending, now that its writes are
/// committed; `dependency_lsn` is the LSN its reply waits for (0 unless
/// under `full`), which its events wait for too.
pub fn flush(ctx: &mut Ctx<'_>, dependency_lsn: u64) {
    if ctx.client.notifications.is_empty() {
        return;
    }
    let items = std::mem::take(&mut ctx.client.notifications.items);
    publish_items(&ctx.shared.pubsub, items, dependency_lsn);
}

impl Pending {
    /// Publishes what a served blocked command caused, once committed.
    pub fn publish(self, pubsub: &PubSub, dependency_lsn: u64) {
        publish_items(pubsub, self.items, dependency_lsn);
    }
}

fn publish_items(pubsub: &PubSub, items: Vec<Item>, dependency_lsn: u64) {
    let flags = pubsub.keyspace_events();
    for item in items {
        match item {
            Item::Event { db, key, event } => {
                announce(pubsub, flags, db, &key, event, dependency_lsn)
            }
            Item::Message {
                channel,
                payload,
                shard,
            } => {
                pubsub.publish(&channel, &payload, shard, dependency_lsn);
            }
        }
    }
}

/// Drops what a command that failed to commit left pending.
pub fn discard(ctx: &mut Ctx<'_>) {
    ctx.client.notifications.items.clear();
}

/// Publishes one event on the keyspace and/or keyevent channel.
pub fn announce(
    pubsub: &PubSub,
    flags: u32,
    db: usize,
    key: &Bytes,
    event: &'static str,
    dep: u64,
) {
    let event_bytes = Bytes::from_static(event.as_bytes());
    if flags & class::KEYSPACE != 0 {
        let channel = channel_name("__keyspace@", db, key);
        pubsub.publish(&channel, &event_bytes, false, dep);
    }
    if flags & class::KEYEVENT != 0 {
        let channel = channel_name("__keyevent@", db, event.as_bytes());
        pubsub.publish(&channel, key, false, dep);
    }
}

fn channel_name(prefix: &str, db: usize, suffix: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(prefix.len() + 24 + suffix.len());
    b.put_slice(prefix.as_bytes());
    b.put_slice(itoa::Buffer::new().format(db).as_bytes());
    b.put_slice(b"__:");
    b.put_slice(suffix);
    b.freeze()
}

/// The keys `shard` expired since last asked, as (database, key), when
/// `expired` events are on. The caller announces them after unlocking.
pub fn take_expired(flags: u32, shard: &mut Shard) -> Vec<(usize, Bytes)> {
    let mut out = Vec::new();
    if flags & class::EXPIRED != 0 {
        for (db, d) in shard.dbs.iter_mut().enumerate() {
            out.extend(d.take_expired().into_iter().map(|k| (db, k)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_trip_in_redis_order() {
        let f = |s: &str| format_classes(parse_classes(s).unwrap());
        assert_eq!(f("gKE"), "gKE");
        assert_eq!(f("$lshzxeKE"), "$lshzxeKE");
        assert_eq!(f("EKzhslx$e"), "$lshzxeKE");
        assert_eq!(f("KA"), "AK");
        assert_eq!(f("EA"), "AE");
        assert_eq!(f("AKEm"), "AKEm");
        assert_eq!(f("En"), "nE");
        assert_eq!(f(""), "");
        assert!(parse_classes("KEZ").is_err());
    }

    #[test]
    fn nothing_is_published_without_k_or_e() {
        assert_eq!(effective(parse_classes("A").unwrap()), 0);
        assert_ne!(effective(parse_classes("Ex").unwrap()), 0);
        assert!(wants_expired(effective(parse_classes("Kx").unwrap())));
        assert!(!wants_expired(effective(parse_classes("x").unwrap())));
    }

    fn names(cmd: &str, args: &[&str], op: KeyOp) -> Vec<&'static str> {
        let args: Vec<Bytes> = args
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect();
        let mut out = Vec::new();
        events_of(cmd, &args, &args[1], &op, |_, e| out.push(e));
        out
    }

    #[test]
    fn events_are_named_after_the_command() {
        let set = |expire| KeyOp::SetString {
            value: Bytes::new(),
            expire,
        };
        assert_eq!(
            names("setex", &["setex", "k", "1", "v"], set(ExpireMode::At(1))),
            ["set", "expire"]
        );
        assert_eq!(
            names("incrby", &["incrby", "k", "1"], set(ExpireMode::Keep)),
            ["incrby"]
        );
        assert_eq!(
            names("rename", &["rename", "k", "d"], KeyOp::Del),
            ["rename_from"]
        );
        assert_eq!(names("spop", &["spop", "k"], KeyOp::SRem(vec![])), ["spop"]);
        assert_eq!(
            names(
                "zadd",
                &["zadd", "k", "INCR", "1", "m"],
                KeyOp::ZAdd(vec![])
            ),
            ["zincr"]
        );
        assert_eq!(
            names("persist", &["persist", "k"], KeyOp::Expire { at_ms: 0 }),
            ["persist"]
        );
        assert_eq!(
            names(
                "rpoplpush",
                &["rpoplpush", "k", "d"],
                KeyOp::Pop {
                    left: false,
                    count: 1
                }
            ),
            ["rpop"]
        );
    }
}
