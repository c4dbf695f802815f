//! Blocking pops: BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN,
//! BZPOPMAX, BZMPOP, and CLIENT UNBLOCK.
//!
//! Each first does what its non-blocking form does (the pops of
//! `cmd::lists` and `cmd::zsets`). When nothing can be popped it blocks on
//! its keys (`crate::blocking`), unless it runs inside MULTI/EXEC or a
//! script, where it answers the timeout's nil at once, as Redis does. A key
//! holding another type is WRONGTYPE at once; one that gets another type
//! while the client waits does not end the wait.

use super::{lists, mpop, zsets};
use crate::blocking::{Serve, Served};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, TWO_KEYS};
use crate::errors;
use crate::util::{arg_i64, is, now_ms, parse_f64_saturating};
use bytes::Bytes;
use durakv_engine::txn::Txn;
use durakv_engine::value::Value;
use durakv_protocol::Frame;
use std::time::Duration;

/// BLPOP key [key ...] timeout: the keys are all but the last argument.
const KEYS_THEN_TIMEOUT: Keys = Keys::Range {
    first: 1,
    last: -2,
    step: 1,
};

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("blpop", -3, WRITE | NOSCRIPT | BLOCKING, KEYS_THEN_TIMEOUT, Handler::Data(blpop), "list", "Pops the head of the first non-empty list given, waiting for one if all are empty."),
        spec("brpop", -3, WRITE | NOSCRIPT | BLOCKING, KEYS_THEN_TIMEOUT, Handler::Data(brpop), "list", "Pops the tail of the first non-empty list given, waiting for one if all are empty."),
        spec("blmpop", -5, WRITE | BLOCKING, Keys::Custom(mpop::keys_after_numkeys_at_2), Handler::Data(blmpop), "list", "Pops elements from either end of the first non-empty list, waiting if all are empty."),
        spec("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, TWO_KEYS, Handler::Data(blmove), "list", "Moves an element from one list to another and returns it, waiting if the source is empty."),
        spec("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, TWO_KEYS, Handler::Data(brpoplpush), "list", "Moves a list's tail to another list's head and returns it, waiting if the source is empty."),
        spec("bzpopmin", -3, WRITE | FAST | NOSCRIPT | BLOCKING, KEYS_THEN_TIMEOUT, Handler::Data(bzpopmin), "sorted-set", "Pops the lowest-scored member of the first non-empty sorted set, waiting if all are empty."),
        spec("bzpopmax", -3, WRITE | FAST | NOSCRIPT | BLOCKING, KEYS_THEN_TIMEOUT, Handler::Data(bzpopmax), "sorted-set", "Pops the highest-scored member of the first non-empty sorted set, waiting if all are empty."),
        spec("bzmpop", -5, WRITE | BLOCKING, Keys::Custom(mpop::keys_after_numkeys_at_2), Handler::Data(bzmpop), "sorted-set", "Pops the lowest- or highest-scored members of the first non-empty sorted set, waiting if all are empty."),
    ]
}

/// A blocking command's timeout: seconds as a double, 0 for none. Redis
/// rounds up to whole milliseconds, so a positive timeout below one waits
/// one millisecond rather than for ever, and a tiny negative one means none.
fn timeout(arg: &[u8]) -> Result<Option<Duration>, Frame> {
    let secs = parse_f64_saturating(arg)
        .ok_or_else(|| errors::err("ERR timeout is not a float or out of range"))?;
    // Redis casts to a long long, which on x86-64 turns anything out of
    // its range (inf included) into LLONG_MIN: "negative".
    let ms_f = (secs * 1000.0).ceil();
    let ms = if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&ms_f) {
        ms_f as i64
    } else {
        i64::MIN
    };
    if ms < 0 {
        return Err(errors::err("ERR timeout is negative"));
    }
    if ms > i64::MAX - now_ms() as i64 {
        return Err(errors::err("ERR timeout is out of range"));
    }
    Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
}

/// Nothing to pop: blocks the client on `keys`, or, where it may not block,
/// answers what a timeout would.
pub(crate) fn block(
    ctx: &mut Ctx<'_>,
    keys: &[Bytes],
    timeout: Option<Duration>,
    op: impl Serve + 'static,
) -> Reply {
    if !ctx.client.may_block {
        return Ok(op.no_wait_reply());
    }
    ctx.shared
        .blocking
        .block(ctx.client, keys, timeout, Box::new(op));
    // Never sent: the connection answers when the wait ends.
    Ok(Frame::Null)
}

/// The blocking commands served from a list, and from a sorted set.
const LIST_WAITS: &[&str] = &["blpop", "brpop", "blmove"];
const ZSET_WAITS: &[&str] = &["bzpopmin", "bzpopmax"];

/// Whether the data in `key` belongs to clients already blocked on it
/// (by one of `commands`, those served from data of its kind): a write put
/// it there after they blocked and has not served them yet (it serves once
/// it has committed). A blocking command that may wait queues behind
/// them, as it would have in Redis, where the write serves them before any
/// other command runs; taking the data would leave an earlier client
/// blocked in its place.
fn owed_to_waiters(ctx: &Ctx<'_>, key: &Bytes, commands: &[&str]) -> bool {
    ctx.client.may_block && ctx.shared.blocking.is_waited(ctx.db(), key, commands)
}

// ---------------------------------------------------------------------------
// Pops from one end of lists or sorted sets

/// What BLPOP, BRPOP, BLMPOP, BZPOPMIN, BZPOPMAX and BZMPOP take.
#[derive(Clone, Copy)]
enum End {
    List { left: bool },
    ZSet { max: bool },
}

/// One of those pops: one element (`count` None, replied flat after the
/// key) or BLMPOP/BZMPOP's up to COUNT (replied as a nested array).
#[derive(Clone)]
struct Pop {
    end: End,
    count: Option<u64>,
}

impl Pop {
    /// Whether `key` holds what this pops (not another type, which is
    /// answered WRONGTYPE whoever waits).
    fn holds_items(&self, txn: &mut Txn<'_>, db: usize, key: &Bytes) -> bool {
        match self.end {
            End::List { .. } => matches!(super::read_as(txn, db, key, Value::as_list), Ok(Some(_))),
            End::ZSet { .. } => matches!(super::read_as(txn, db, key, Value::as_zset), Ok(Some(_))),
        }
    }

    /// Pops from `key` if it is non-empty; WRONGTYPE for another type.
    fn pop(&self, txn: &mut Txn<'_>, db: usize, key: &Bytes) -> Result<Option<Frame>, Frame> {
        let n = self.count.unwrap_or(1);
        let mut flat = vec![Frame::Bulk(key.clone())];
        match self.end {
            End::List { left } => {
                let items = lists::pop_list(txn, db, key, left, n)?;
                let Some(items) = items.filter(|i| !i.is_empty()) else {
                    return Ok(None);
                };
                if self.count.is_some() {
                    return Ok(Some(lists::mpop_reply(key, items)));
                }
                flat.extend(items.into_iter().map(Frame::Bulk));
            }
            End::ZSet { max } => {
                let items = zsets::pop_zset(txn, db, key, max, n)?;
                let Some(items) = items.filter(|i| !i.is_empty()) else {
                    return Ok(None);
                };
                if self.count.is_some() {
                    return Ok(Some(zsets::mpop_reply(key, items)));
                }
                for (m, score) in items {
                    flat.extend([Frame::Bulk(m), Frame::Double(score)]);
                }
            }
        }
        Ok(Some(Frame::Array(flat)))
    }

    /// Pops from the first non-empty key, or blocks on them all.
    fn first_of(
        &self,
        ctx: &mut Ctx<'_>,
        txn: &mut Txn<'_>,
        keys: &[Bytes],
        timeout: Option<Duration>,
    ) -> Reply {
        for key in keys {
            let waits = match self.end {
                End::List { .. } => LIST_WAITS,
                End::ZSet { .. } => ZSET_WAITS,
            };
            if owed_to_waiters(ctx, key, waits) && self.holds_items(txn, ctx.db(), key) {
                continue;
            }
            if let Some(reply) = self.pop(txn, ctx.db(), key)? {
                return Ok(reply);
            }
        }
        block(ctx, keys, timeout, self.clone())
    }
}

impl Serve for Pop {
    fn command(&self) -> &'static str {
        match self.end {
            End::List { left: true } => "blpop",
            End::List { left: false } => "brpop",
            End::ZSet { max: true } => "bzpopmax",
            End::ZSet { max: false } => "bzpopmin",
        }
    }

    fn serve(&self, txn: &mut Txn<'_>, db: usize, key: &Bytes, _resp3: bool) -> Served {
        match self.pop(txn, db, key) {
            Ok(Some(reply)) => Served::Reply(reply),
            // Gone, or now of another type: the wait goes on.
            Ok(None) | Err(_) => Served::Exhausted,
        }
    }

    fn timeout_reply(&self) -> Frame {
        Frame::NullArray
    }
}

fn blpop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop_one(ctx, txn, args, End::List { left: true })
}

fn brpop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop_one(ctx, txn, args, End::List { left: false })
}

fn bzpopmin(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop_one(ctx, txn, args, End::ZSet { max: false })
}

fn bzpopmax(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop_one(ctx, txn, args, End::ZSet { max: true })
}

fn blmpop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop_many(ctx, txn, args, true)
}

fn bzmpop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop_many(ctx, txn, args, false)
}

/// `key [key ...] timeout`.
fn pop_one(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], end: End) -> Reply {
    let (keys, last) = args[1..].split_at(args.len() - 2);
    let timeout = timeout(&last[0])?;
    Pop { end, count: None }.first_of(ctx, txn, keys, timeout)
}

/// `timeout numkeys key [key ...] <end> [COUNT count]`, of a list or a
/// sorted set.
fn pop_many(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], list: bool) -> Reply {
    let ends = match list {
        true => mpop::LIST_ENDS,
        false => mpop::ZSET_ENDS,
    };
    // Redis reads numkeys, the end and COUNT before the timeout.
    let m = mpop::parse(args, 2, ends)?;
    let timeout = timeout(&args[1])?;
    let end = if list {
        End::List { left: m.first_end }
    } else {
        End::ZSet { max: !m.first_end }
    };
    Pop {
        end,
        count: Some(m.count),
    }
    .first_of(ctx, txn, m.keys, timeout)
}

/// BLMOVE and BRPOPLPUSH. They wait on the source only; the destination's
/// type is checked when an element moves.
struct ListMove {
    /// The destination, as the one extra key serving locks.
    dst: [Bytes; 1],
    from_left: bool,
    to_left: bool,
}

impl Serve for ListMove {
    fn command(&self) -> &'static str {
        "blmove"
    }

    fn extra_keys(&self) -> &[Bytes] {
        &self.dst
    }

    fn serve(&self, txn: &mut Txn<'_>, db: usize, key: &Bytes, _resp3: bool) -> Served {
        match super::read_as(txn, db, key, Value::as_list) {
            Ok(Some(l)) if !l.is_empty() => {}
            _ => return Served::Exhausted,
        }
        // A destination of another type ends the wait with WRONGTYPE and
        // leaves the element where it was.
        match lists::move_element(txn, db, key, &self.dst[0], self.from_left, self.to_left) {
            Ok(f) | Err(f) => Served::Reply(f),
        }
    }

    /// As Redis answers every list wait that times out.
    fn timeout_reply(&self) -> Frame {
        Frame::NullArray
    }

    fn no_wait_reply(&self) -> Frame {
        Frame::Null
    }
}

fn blmove(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (from_left, to_left) = (lists::side(&args[3])?, lists::side(&args[4])?);
    let timeout = timeout(&args[5])?;
    bmove(ctx, txn, args, from_left, to_left, timeout)
}

fn brpoplpush(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let timeout = timeout(&args[3])?;
    bmove(ctx, txn, args, false, true, timeout)
}

fn bmove(
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    from_left: bool,
    to_left: bool,
    timeout: Option<Duration>,
) -> Reply {
    let (src, dst) = (&args[1], &args[2]);
    let db = ctx.db();
    if super::read_as(txn, db, src, Value::as_list)?.is_some()
        && !owed_to_waiters(ctx, src, LIST_WAITS)
    {
        return lists::move_element(txn, db, src, dst, from_left, to_left);
    }
    let op = ListMove {
        dst: [dst.clone()],
        from_left,
        to_left,
    };
    block(ctx, std::slice::from_ref(src), timeout, op)
}

// ---------------------------------------------------------------------------
// CLIENT UNBLOCK

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if the client was blocked and now
/// is not, else 0.
pub(crate) fn client_unblock(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 4 {
        return Err(errors::wrong_args("client|unblock"));
    }
    let error = match args.get(3) {
        None => false,
        Some(r) if is(r, "timeout") => false,
        Some(r) if is(r, "error") => true,
        Some(_) => {
            return Err(errors::err(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let id = arg_i64(&args[2])?;
    let error = error.then(|| Frame::error("UNBLOCKED client unblocked via CLIENT UNBLOCK"));
    let done = u64::try_from(id).is_ok_and(|id| ctx.shared.blocking.unblock(ctx.shared, id, error));
    Ok(Frame::Integer(done as i64))
}
