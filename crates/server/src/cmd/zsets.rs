//! Sorted set commands.

use super::mpop;
use super::scan::{scan_cursor, scan_options, scan_reply, scan_walk, scans_whole};
use super::{
    apply, pairs_reply, positive_count, random_count, random_position, random_positions, resp3,
    syntax, wrongtype,
};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, FIRST_KEY, TWO_KEYS};
use crate::errors;
use crate::util::{arg_f64, arg_i64, is, parse_f64_bare};
use bytes::Bytes;
use durakv_engine::key::Key;
use durakv_engine::mutation::{list_range, KeyOp};
use durakv_engine::txn::Txn;
use durakv_engine::value::Value;
use durakv_engine::zset::ZSet;
use durakv_protocol::frame::format_double;
use durakv_protocol::Frame;
use std::collections::{HashMap, HashSet};
use std::ops::Bound;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("zadd", -4, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(zadd), "sorted-set", "Puts members with scores into a sorted set, or changes their scores."),
        spec("zincrby", 4, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(zincrby), "sorted-set", "Adds to a member's score, inserting it if absent."),
        spec("zrem", -3, WRITE | FAST, FIRST_KEY, Handler::Data(zrem), "sorted-set", "Takes members out of a sorted set, dropping the key when it empties."),
        spec("zscore", 3, READONLY | FAST, FIRST_KEY, Handler::Data(zscore), "sorted-set", "Reads one member's score in a sorted set."),
        spec("zmscore", -3, READONLY | FAST, FIRST_KEY, Handler::Data(zmscore), "sorted-set", "Looks up several sorted set members' scores."),
        spec("zcard", 2, READONLY | FAST, FIRST_KEY, Handler::Data(zcard), "sorted-set", "Gives a sorted set's size."),
        spec("zcount", 4, READONLY | FAST, FIRST_KEY, Handler::Data(zcount), "sorted-set", "Counts sorted set members whose scores fall between two bounds."),
        spec("zlexcount", 4, READONLY | FAST, FIRST_KEY, Handler::Data(zlexcount), "sorted-set", "Counts sorted set members between two bounds in lexical order."),
        spec("zrank", -3, READONLY | FAST, FIRST_KEY, Handler::Data(zrank), "sorted-set", "Gives a member's position in a sorted set, lowest score first."),
        spec("zrevrank", -3, READONLY | FAST, FIRST_KEY, Handler::Data(zrevrank), "sorted-set", "Gives a member's position in a sorted set, highest score first."),
        spec("zrange", -4, READONLY, FIRST_KEY, Handler::Data(zrange), "sorted-set", "Reads sorted set members by position, score or lex range."),
        spec("zrangestore", -5, WRITE | DENYOOM, TWO_KEYS, Handler::Data(zrangestore), "sorted-set", "Saves a slice of a sorted set under a key."),
        spec("zrevrange", -4, READONLY, FIRST_KEY, Handler::Data(zrevrange), "sorted-set", "Reads sorted set members between two positions, highest score first."),
        spec("zrangebyscore", -4, READONLY, FIRST_KEY, Handler::Data(zrangebyscore), "sorted-set", "Reads sorted set members between two scores."),
        spec("zrevrangebyscore", -4, READONLY, FIRST_KEY, Handler::Data(zrevrangebyscore), "sorted-set", "Reads sorted set members between two scores, highest first."),
        spec("zrangebylex", -4, READONLY, FIRST_KEY, Handler::Data(zrangebylex), "sorted-set", "Reads sorted set members between two bounds in lexical order."),
        spec("zrevrangebylex", -4, READONLY, FIRST_KEY, Handler::Data(zrevrangebylex), "sorted-set", "Reads sorted set members between two lexical bounds, in descending order."),
        spec("zremrangebyscore", 4, WRITE, FIRST_KEY, Handler::Data(zremrangebyscore), "sorted-set", "Deletes sorted set members with scores between two bounds, dropping the key if none remain."),
        spec("zremrangebyrank", 4, WRITE, FIRST_KEY, Handler::Data(zremrangebyrank), "sorted-set", "Deletes sorted set members between two positions, dropping the key if none remain."),
        spec("zremrangebylex", 4, WRITE, FIRST_KEY, Handler::Data(zremrangebylex), "sorted-set", "Deletes sorted set members between two lexical bounds, dropping the key if none remain."),
        spec("zpopmin", -2, WRITE | FAST, FIRST_KEY, Handler::Data(zpopmin), "sorted-set", "Removes and returns the lowest-scored members, dropping the key when it empties."),
        spec("zpopmax", -2, WRITE | FAST, FIRST_KEY, Handler::Data(zpopmax), "sorted-set", "Removes and returns the highest-scored members, dropping the key when it empties."),
        spec("zmpop", -4, WRITE, Keys::Custom(mpop::keys_after_numkeys_at_1), Handler::Data(zmpop), "sorted-set", "Removes and returns the lowest- or highest-scored members of the first non-empty sorted set."),
        spec("zscan", -3, READONLY, FIRST_KEY, Handler::Data(zscan), "sorted-set", "Walks a sorted set's members and scores with a cursor."),
        spec("zrandmember", -2, READONLY, FIRST_KEY, Handler::Data(zrandmember), "sorted-set", "Picks random sorted set members."),
    ]
}

fn read_zset<'t>(txn: &'t mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<&'t ZSet>, Frame> {
    super::read_as(txn, db, key, Value::as_zset)
}

fn not_a_number() -> Frame {
    Frame::error("ERR resulting score is not a number (NaN)")
}

// ---------------------------------------------------------------------------
// Range arguments.

/// `1.5`, `(1.5` (exclusive), `-inf`, `+inf`. Redis reads them with a bare
/// `strtod`, so a bound past a double's range saturates rather than fails,
/// leading white space is skipped, and an empty bound is 0.
fn score_bound(arg: &[u8]) -> Option<Bound<f64>> {
    match arg.strip_prefix(b"(") {
        Some(rest) => parse_f64_bare(rest).map(Bound::Excluded),
        None => parse_f64_bare(arg).map(Bound::Included),
    }
}

fn score_range(min: &[u8], max: &[u8]) -> Result<(Bound<f64>, Bound<f64>), Frame> {
    match (score_bound(min), score_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Frame::error("ERR min or max is not a float")),
    }
}

/// A lex range endpoint: `-`, `+`, `[member` or `(member`.
enum Lex {
    Min,
    Max,
    At(Bound<Bytes>),
}

fn lex_bound(arg: &Bytes) -> Option<Lex> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(Lex::Min),
        b'+' if arg.len() == 1 => Some(Lex::Max),
        b'[' => Some(Lex::At(Bound::Included(arg.slice(1..)))),
        b'(' => Some(Lex::At(Bound::Excluded(arg.slice(1..)))),
        _ => None,
    }
}

fn lex_range(min: &Bytes, max: &Bytes) -> Result<(Lex, Lex), Frame> {
    match (lex_bound(min), lex_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Frame::error("ERR min or max not valid string range item")),
    }
}

type LexBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// The bounds as `ZSet::range_by_lex` takes them, or None when nothing can
/// be in range (`+` as the minimum, `-` as the maximum).
fn lex_bounds<'a>(min: &'a Lex, max: &'a Lex) -> Option<LexBounds<'a>> {
    let lo = match min {
        Lex::Min => Bound::Unbounded,
        Lex::Max => return None,
        Lex::At(b) => b.as_ref().map(|m| &m[..]),
    };
    let hi = match max {
        Lex::Max => Bound::Unbounded,
        Lex::Min => return None,
        Lex::At(b) => b.as_ref().map(|m| &m[..]),
    };
    Some((lo, hi))
}

enum Range {
    Rank(i64, i64),
    Score(Bound<f64>, Bound<f64>),
    Lex(Lex, Lex),
}

/// Members of `z` in `range`, in ascending order or descending if `rev`,
/// after skipping `offset` and taking at most `limit` (negative: all).
fn select(z: &ZSet, range: &Range, rev: bool, offset: i64, limit: i64) -> Vec<(Bytes, f64)> {
    if offset < 0 || limit == 0 {
        return Vec::new();
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let it: Box<dyn Iterator<Item = (&Key, f64)>> = match range {
        Range::Rank(start, stop) => {
            let Some((s, e)) = list_range(z.len(), *start, *stop) else {
                return Vec::new();
            };
            // In reverse, ranks count from the highest score.
            if rev {
                Box::new(z.iter().rev().skip(s).take(e - s + 1))
            } else {
                Box::new(z.iter().skip(s).take(e - s + 1))
            }
        }
        Range::Score(min, max) => {
            let r = z.range_by_score(*min, *max);
            if rev {
                Box::new(r.rev())
            } else {
                Box::new(r)
            }
        }
        Range::Lex(min, max) => match lex_bounds(min, max) {
            Some((lo, hi)) => z.range_by_lex(lo, hi, rev),
            None => return Vec::new(),
        },
    };
    it.skip(offset)
        .take(limit)
        .map(|(m, s)| (m.to_bytes(), s))
        .collect()
}

fn scored_reply(items: Vec<(Bytes, f64)>, withscores: bool, resp3: bool) -> Frame {
    if withscores {
        pairs_reply(
            items
                .into_iter()
                .map(|(m, s)| (Frame::Bulk(m), Frame::Double(s)))
                .collect(),
            resp3,
        )
    } else {
        Frame::Array(items.into_iter().map(|(m, _)| Frame::Bulk(m)).collect())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// ZRANGE and its older forms, which are ZRANGE with `by` and `rev` fixed:
/// a fixed option is a syntax error when given again, as in Redis.
fn range_generic(
    ctx: &Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    by: Option<By>,
    rev: Option<bool>,
) -> Reply {
    let resp3 = resp3(ctx);
    let (items, withscores) = range_items(ctx, txn, args, by, rev, true)?;
    Ok(scored_reply(items, withscores, resp3))
}

/// What a ZRANGE-shaped command (`key min max [options]` from `args[1]`)
/// selects, and whether WITHSCORES was given (only if `scores_allowed`).
fn range_items(
    ctx: &Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    by: Option<By>,
    rev: Option<bool>,
    scores_allowed: bool,
) -> Result<(Vec<(Bytes, f64)>, bool), Frame> {
    let (mut by, mut rev) = (by, rev);
    let mut withscores = false;
    let mut limit = None;
    let mut j = 4;
    while j < args.len() {
        let a = &args[j];
        if scores_allowed && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && j + 2 < args.len() {
            limit = Some((arg_i64(&args[j + 1])?, arg_i64(&args[j + 2])?));
            j += 2;
        } else if rev.is_none() && is(a, "rev") {
            rev = Some(true);
        } else if by.is_none() && is(a, "bylex") {
            by = Some(By::Lex);
        } else if by.is_none() && is(a, "byscore") {
            by = Some(By::Score);
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    let by = by.unwrap_or(By::Rank);
    let rev = rev.unwrap_or(false);
    // Redis lets a rank range through a LIMIT that takes everything
    // (count -1), whatever its offset, and then ignores it.
    if limit.is_some_and(|(_, count)| count != -1) && by == By::Rank {
        return Err(Frame::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(Frame::error(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // Reverse score and lex ranges are written max first.
    let (lo, hi) = if rev && by != By::Rank {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let range = match by {
        By::Rank => Range::Rank(arg_i64(lo)?, arg_i64(hi)?),
        By::Score => {
            let (a, b) = score_range(lo, hi)?;
            Range::Score(a, b)
        }
        By::Lex => {
            let (a, b) = lex_range(lo, hi)?;
            Range::Lex(a, b)
        }
    };
    let Some(z) = read_zset(txn, ctx.db(), &args[1])? else {
        return Ok((Vec::new(), withscores));
    };
    let (offset, count) = match by {
        By::Rank => (0, -1),
        _ => limit.unwrap_or((0, -1)),
    };
    Ok((select(z, &range, rev, offset, count), withscores))
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]:
/// stores what ZRANGE would return (deleting `dst` when that is nothing).
fn zrangestore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (items, _) = range_items(ctx, txn, &args[1..], None, None, false)?;
    store_scored(txn, ctx.db(), &args[1], items)
}

/// Replaces `dest` with a sorted set of `items` (deleting it when there are
/// none), as one logged write; replies with how many were stored.
pub(super) fn store_scored(
    txn: &mut Txn<'_>,
    db: usize,
    dest: &Bytes,
    items: Vec<(Bytes, f64)>,
) -> Reply {
    let n = items.len();
    if n == 0 {
        if txn.get(db, dest).is_some() {
            apply(txn, db, dest, KeyOp::Del)?;
        }
    } else {
        let mut z = ZSet::default();
        for (m, s) in items {
            z.insert(m, s);
        }
        let value = Value::ZSet(std::sync::Arc::new(z));
        let op = KeyOp::Restore {
            value,
            expire_at_ms: 0,
        };
        apply(txn, db, dest, op)?;
    }
    Ok(Frame::Integer(n as i64))
}

fn zrange(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    range_generic(ctx, txn, args, None, None)
}

fn zrevrange(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    range_generic(ctx, txn, args, Some(By::Rank), Some(true))
}

fn zrangebyscore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    range_generic(ctx, txn, args, Some(By::Score), Some(false))
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    range_generic(ctx, txn, args, Some(By::Score), Some(true))
}

fn zrangebylex(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    range_generic(ctx, txn, args, Some(By::Lex), Some(false))
}

fn zrevrangebylex(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    range_generic(ctx, txn, args, Some(By::Lex), Some(true))
}

/// ZREMRANGEBY*: removes what `range` selects and returns how many.
fn remove_range(ctx: &Ctx<'_>, txn: &mut Txn<'_>, key: &Bytes, range: Range) -> Reply {
    let db = ctx.db();
    let Some(z) = read_zset(txn, db, key)? else {
        return Ok(Frame::Integer(0));
    };
    let gone: Vec<Bytes> = select(z, &range, false, 0, -1)
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    let n = gone.len();
    if n > 0 {
        apply(txn, db, key, KeyOp::ZRem(gone))?;
    }
    Ok(Frame::Integer(n as i64))
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (min, max) = score_range(&args[2], &args[3])?;
    remove_range(ctx, txn, &args[1], Range::Score(min, max))
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (start, stop) = (arg_i64(&args[2])?, arg_i64(&args[3])?);
    remove_range(ctx, txn, &args[1], Range::Rank(start, stop))
}

fn zremrangebylex(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (min, max) = lex_range(&args[2], &args[3])?;
    remove_range(ctx, txn, &args[1], Range::Lex(min, max))
}

fn zcount(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (min, max) = score_range(&args[2], &args[3])?;
    let z = read_zset(txn, ctx.db(), &args[1])?;
    Ok(Frame::Integer(
        z.map_or(0, |z| z.range_by_score(min, max).count()) as i64,
    ))
}

fn zlexcount(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (min, max) = lex_range(&args[2], &args[3])?;
    let z = read_zset(txn, ctx.db(), &args[1])?;
    let n = match (z, lex_bounds(&min, &max)) {
        (Some(z), Some((lo, hi))) => z.range_by_lex(lo, hi, false).count(),
        _ => 0,
    };
    Ok(Frame::Integer(n as i64))
}

// ---------------------------------------------------------------------------
// Writes.

fn zadd(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        let flag = if is(a, "nx") {
            &mut nx
        } else if is(a, "xx") {
            &mut xx
        } else if is(a, "gt") {
            &mut gt
        } else if is(a, "lt") {
            &mut lt
        } else if is(a, "ch") {
            &mut ch
        } else if is(a, "incr") {
            &mut incr
        } else {
            break;
        };
        *flag = true;
        i += 1;
    }
    let elements = &args[i..];
    if elements.is_empty() || !elements.len().is_multiple_of(2) {
        return Err(syntax());
    }
    if nx && xx {
        return Err(Frame::error(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(Frame::error(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && elements.len() > 2 {
        return Err(Frame::error(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let scores = elements
        .chunks_exact(2)
        .map(|p| arg_f64(&p[0]))
        .collect::<Result<Vec<f64>, Frame>>()?;
    let db = ctx.db();
    let key = &args[1];
    let z = read_zset(txn, db, key)?;
    if z.is_none() && xx {
        return Ok(if incr { Frame::Null } else { Frame::Integer(0) });
    }
    // Final scores, in first-seen order; a member named twice takes the
    // outcome of its last pair, as applying them one by one would.
    let mut changes: Vec<(f64, Bytes)> = Vec::new();
    let mut slot: HashMap<&[u8], usize> = HashMap::new();
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut last = 0.0;
    for (pair, &score) in elements.chunks_exact(2).zip(&scores) {
        let member = &pair[1];
        let cur = match slot.get(&member[..]) {
            Some(&k) => Some(changes[k].0),
            None => z.and_then(|z| z.score(member)),
        };
        let new = match cur {
            Some(cur) => {
                if nx {
                    continue;
                }
                let new = if incr { cur + score } else { score };
                if new.is_nan() {
                    return Err(not_a_number());
                }
                if (lt && new >= cur) || (gt && new <= cur) {
                    continue;
                }
                processed += 1;
                last = new;
                if new == cur {
                    continue;
                }
                updated += 1;
                new
            }
            None => {
                if xx {
                    continue;
                }
                processed += 1;
                added += 1;
                last = score;
                score
            }
        };
        match slot.get(&member[..]) {
            Some(&k) => changes[k].0 = new,
            None => {
                slot.insert(&member[..], changes.len());
                changes.push((new, member.clone()));
            }
        }
    }
    if !changes.is_empty() {
        apply(txn, db, key, KeyOp::ZAdd(changes))?;
    }
    Ok(if incr {
        if processed > 0 {
            Frame::Double(last)
        } else {
            Frame::Null
        }
    } else if ch {
        Frame::Integer(added + updated)
    } else {
        Frame::Integer(added)
    })
}

fn zincrby(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let incr = arg_f64(&args[2])?;
    let cur = read_zset(txn, db, &args[1])?.and_then(|z| z.score(&args[3]));
    let new = cur.map_or(incr, |c| c + incr);
    if new.is_nan() {
        return Err(not_a_number());
    }
    if cur != Some(new) {
        apply(txn, db, &args[1], KeyOp::ZAdd(vec![(new, args[3].clone())]))?;
    }
    Ok(Frame::Double(new))
}

fn zrem(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let Some(z) = read_zset(txn, db, &args[1])? else {
        return Ok(Frame::Integer(0));
    };
    let mut seen = HashSet::new();
    let gone: Vec<Bytes> = args[2..]
        .iter()
        .filter(|m| z.score(m).is_some() && seen.insert(&m[..]))
        .cloned()
        .collect();
    let n = gone.len();
    if n > 0 {
        apply(txn, db, &args[1], KeyOp::ZRem(gone))?;
    }
    Ok(Frame::Integer(n as i64))
}

fn pop(ctx: &Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], max: bool) -> Reply {
    if args.len() > 3 {
        return Err(syntax());
    }
    let count = match args.get(2) {
        Some(c) => Some(positive_count(c)?),
        None => None,
    };
    // RESP3 nests the pairs only when a count was given, even a count of 1.
    let nested = resp3(ctx) && count.is_some();
    let items = pop_zset(txn, ctx.db(), &args[1], max, count.unwrap_or(1))?;
    Ok(scored_reply(items.unwrap_or_default(), true, nested))
}

/// Removes up to `count` of the lowest (or, `max`, highest) scoring members
/// of the sorted set at `key`, in pop order: `None` when the key is missing,
/// WRONGTYPE when it holds another type. Shared by ZPOPMIN/ZPOPMAX, ZMPOP
/// and the blocking pops.
pub(crate) fn pop_zset(
    txn: &mut Txn<'_>,
    db: usize,
    key: &Bytes,
    max: bool,
    count: u64,
) -> Result<Option<Vec<(Bytes, f64)>>, Frame> {
    let Some(z) = read_zset(txn, db, key)? else {
        return Ok(None);
    };
    let n = usize::try_from(count).unwrap_or(usize::MAX);
    let items: Vec<(Bytes, f64)> = if max {
        z.iter()
            .rev()
            .take(n)
            .map(|(m, s)| (m.to_bytes(), s))
            .collect()
    } else {
        z.iter().take(n).map(|(m, s)| (m.to_bytes(), s)).collect()
    };
    if !items.is_empty() {
        apply(
            txn,
            db,
            key,
            KeyOp::ZRem(items.iter().map(|(m, _)| m.clone()).collect()),
        )?;
    }
    Ok(Some(items))
}

/// ZMPOP: the first non-empty sorted set among the keys gives up to COUNT
/// members.
fn zmpop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let m = mpop::parse(args, 1, mpop::ZSET_ENDS)?;
    for key in m.keys {
        if let Some(items) = pop_zset(txn, ctx.db(), key, !m.first_end, m.count)? {
            return Ok(mpop_reply(key, items));
        }
    }
    Ok(Frame::NullArray)
}

/// `[key, [[member, score], ...]]`, the reply of ZMPOP and BZMPOP: the
/// pairs are nested in RESP2 as well.
pub(crate) fn mpop_reply(key: &Bytes, items: Vec<(Bytes, f64)>) -> Frame {
    Frame::Array(vec![
        Frame::Bulk(key.clone()),
        Frame::Array(
            items
                .into_iter()
                .map(|(m, s)| Frame::Array(vec![Frame::Bulk(m), Frame::Double(s)]))
                .collect(),
        ),
    ])
}

fn zpopmin(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop(ctx, txn, args, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop(ctx, txn, args, true)
}

// ---------------------------------------------------------------------------
// Reads.

fn zscore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let z = read_zset(txn, ctx.db(), &args[1])?;
    Ok(z.and_then(|z| z.score(&args[2]))
        .map_or(Frame::Null, Frame::Double))
}

fn zmscore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let z = read_zset(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        args[2..]
            .iter()
            .map(|m| {
                z.and_then(|z| z.score(m))
                    .map_or(Frame::Null, Frame::Double)
            })
            .collect(),
    ))
}

fn zcard(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let z = read_zset(txn, ctx.db(), &args[1])?;
    Ok(Frame::Integer(z.map_or(0, |z| z.len()) as i64))
}

fn rank(ctx: &Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], rev: bool) -> Reply {
    if args.len() > 4 {
        return Err(errors::wrong_args(if rev { "zrevrank" } else { "zrank" }));
    }
    let withscore = args.len() == 4;
    if withscore && !is(&args[3], "withscore") {
        return Err(syntax());
    }
    let missing = if withscore {
        Frame::NullArray
    } else {
        Frame::Null
    };
    let Some(z) = read_zset(txn, ctx.db(), &args[1])? else {
        return Ok(missing);
    };
    let (Some(score), Some(r)) = (z.score(&args[2]), z.rank(&args[2])) else {
        return Ok(missing);
    };
    let r = if rev { z.len() - 1 - r } else { r } as i64;
    Ok(if withscore {
        Frame::Array(vec![Frame::Integer(r), Frame::Double(score)])
    } else {
        Frame::Integer(r)
    })
}

fn zrank(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    rank(ctx, txn, args, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    rank(ctx, txn, args, true)
}

fn zscan(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let cursor = scan_cursor(&args[2])?;
    let Some(e) = txn.get(ctx.db(), &args[1]) else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let Value::ZSet(z) = &e.value else {
        return Err(wrongtype());
    };
    let opts = scan_options(&args[3..], false)?;
    let compact = scans_whole(&e.value, &super::encoding_limits(ctx));
    let mut items = Vec::new();
    let mut visit = |m: &Key, s: f64| {
        if opts.matches(m) {
            items.push(Frame::Bulk(m.to_bytes()));
            items.push(Frame::Bulk(Bytes::from(scan_score(s, compact))));
        }
    };
    if compact {
        // Redis scans a listpack in one call, in the order it keeps it:
        // by score, then member. Clients rely on that (walrus iterates a
        // small sorted set with ZSCAN and expects ZRANGE's order).
        z.iter().for_each(|(m, s)| visit(m, s));
        return Ok(scan_reply(0, items));
    }
    let next = scan_walk(z.len(), cursor, opts.count, false, |i| {
        if let Some((m, s)) = z.get_index(i) {
            visit(m, s);
        }
    });
    Ok(scan_reply(next, items))
}

/// ZSCAN returns a compact set's scores as Redis stored them in its
/// listpack: whole numbers within ±2^62 as integers, so `1e17` scans as
/// `100000000000000000` while ZSCORE says `1e+17`.
fn scan_score(s: f64, compact: bool) -> String {
    const LIMIT: f64 = (1u64 << 62) as f64;
    if compact && s == s.trunc() && (-LIMIT..=LIMIT).contains(&s) {
        return itoa::Buffer::new().format(s as i64).to_string();
    }
    format_double(s)
}

fn zrandmember(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    if args.len() == 2 {
        let z = read_zset(txn, db, &args[1])?;
        let m = z.and_then(|z| random_position(z.len()).and_then(|i| z.get_index(i)));
        return Ok(m.map_or(Frame::Null, |(m, _)| Frame::Bulk(m.to_bytes())));
    }
    let count = random_count(&args[2])?;
    let withscores = args.len() == 4;
    if args.len() > 4 || (withscores && !is(&args[3], "withscores")) {
        return Err(syntax());
    }
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Frame::error("ERR value is out of range"));
    }
    let resp3 = resp3(ctx);
    let Some(z) = read_zset(txn, db, &args[1])? else {
        return Ok(Frame::Array(Vec::new()));
    };
    let items = random_positions(ctx, z.len(), count)?
        .into_iter()
        .filter_map(|i| z.get_index(i).map(|(m, s)| (m.to_bytes(), s)))
        .collect();
    Ok(scored_reply(items, withscores, resp3))
}
