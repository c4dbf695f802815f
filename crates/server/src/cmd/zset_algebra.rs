//! Sorted-set algebra: ZUNION, ZINTER and ZDIFF, their STORE forms, and
//! ZINTERCARD. Inputs may be sorted sets or plain sets (whose members
//! score 1), as in Redis.

use super::{pairs_reply, resp3, syntax, wrongtype};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply};
use crate::util::{arg_i64, is, parse_f64};
use bytes::Bytes;
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, Value};
use durakv_protocol::Frame;
use std::collections::{HashMap, HashSet};

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec(
            "zunionstore",
            -4,
            WRITE | DENYOOM,
            Keys::Custom(store_keys),
            Handler::Data(zunionstore),
            "sorted-set",
            "Merges sorted sets, combining scores, into a destination key.",
        ),
        spec(
            "zinterstore",
            -4,
            WRITE | DENYOOM,
            Keys::Custom(store_keys),
            Handler::Data(zinterstore),
            "sorted-set",
            "Keeps the members sorted sets share, scores combined, in a key.",
        ),
        spec(
            "zdiffstore",
            -4,
            WRITE | DENYOOM,
            Keys::Custom(store_keys),
            Handler::Data(zdiffstore),
            "sorted-set",
            "Saves the first sorted set's members the others lack.",
        ),
        spec(
            "zunion",
            -3,
            READONLY,
            Keys::Custom(input_keys),
            Handler::Data(zunion),
            "sorted-set",
            "Merges sorted sets, combining the scores of shared members.",
        ),
        spec(
            "zinter",
            -3,
            READONLY,
            Keys::Custom(input_keys),
            Handler::Data(zinter),
            "sorted-set",
            "Gives the members sorted sets share, scores combined.",
        ),
        spec(
            "zdiff",
            -3,
            READONLY,
            Keys::Custom(input_keys),
            Handler::Data(zdiff),
            "sorted-set",
            "Gives the first sorted set's members the others lack.",
        ),
        spec(
            "zintercard",
            -3,
            READONLY,
            Keys::Custom(input_keys),
            Handler::Data(zintercard),
            "sorted-set",
            "Counts the members common to sorted sets, up to an optional limit.",
        ),
    ]
}

/// `numkeys` at `at`, followed by that many keys: their indexes, as far as
/// the arguments go (locking must not fail on a malformed command).
fn keys_after(args: &[Bytes], at: usize) -> impl Iterator<Item = usize> {
    let n = args
        .get(at)
        .and_then(|a| parse_i64(a))
        .filter(|&n| n > 0)
        .unwrap_or(0) as usize;
    (at + 1..args.len()).take(n)
}

fn store_keys(args: &[Bytes]) -> Vec<usize> {
    std::iter::once(1).chain(keys_after(args, 2)).collect()
}

fn input_keys(args: &[Bytes]) -> Vec<usize> {
    keys_after(args, 1).collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            // inf + -inf is NaN; Redis scores it 0.
            Aggregate::Sum => zero_if_nan(a + b),
            // As Redis compares: a NaN `b`, or a tie (-0 and 0), keeps `a`.
            Aggregate::Min => {
                if b < a {
                    b
                } else {
                    a
                }
            }
            Aggregate::Max => {
                if b > a {
                    b
                } else {
                    a
                }
            }
        }
    }
}

fn zero_if_nan(v: f64) -> f64 {
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

struct Request<'a> {
    keys: &'a [Bytes],
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
}

/// Parses `numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES]` from `args[at..]`; `store` forms take no WITHSCORES and
/// ZDIFF takes neither WEIGHTS nor AGGREGATE. As in Redis, the inputs'
/// types are checked before the options are read.
fn parse<'a>(
    txn: &mut Txn<'_>,
    db: usize,
    args: &'a [Bytes],
    at: usize,
    op: Op,
    store: bool,
    name: &str,
) -> Result<Request<'a>, Frame> {
    let n = arg_i64(&args[at])?;
    if n < 1 {
        return Err(Frame::error(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let first = at + 1;
    let n = n as usize;
    if n > args.len() - first {
        return Err(syntax());
    }
    let mut req = Request {
        keys: &args[first..first + n],
        weights: vec![1.0; n],
        aggregate: Aggregate::Sum,
        withscores: false,
    };
    check_types(txn, db, req.keys)?;
    let mut j = first + n;
    while j < args.len() {
        let a = &args[j];
        let rest = args.len() - j - 1;
        if op != Op::Diff && is(a, "weights") && rest >= n {
            for (w, arg) in req.weights.iter_mut().zip(&args[j + 1..j + 1 + n]) {
                *w = parse_f64(arg)
                    .ok_or_else(|| Frame::error("ERR weight value is not a float"))?;
            }
            j += n;
        } else if op != Op::Diff && is(a, "aggregate") && rest >= 1 {
            let v = &args[j + 1];
            req.aggregate = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                return Err(syntax());
            };
            j += 1;
        } else if !store && is(a, "withscores") {
            req.withscores = true;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    Ok(req)
}

/// WRONGTYPE unless every existing key is a sorted set or a set: Redis
/// checks the inputs before it reads the options after them.
fn check_types(txn: &mut Txn<'_>, db: usize, keys: &[Bytes]) -> Result<(), Frame> {
    for k in keys {
        if let Some(e) = txn.get_untouched(db, k) {
            if !matches!(e.value, Value::ZSet(_) | Value::Set(_)) {
                return Err(wrongtype());
            }
        }
    }
    Ok(())
}

/// An input as (member, score) pairs; a missing key is empty.
fn input(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Vec<(Bytes, f64)>, Frame> {
    Ok(match txn.get(db, key).map(|e| &e.value) {
        None => Vec::new(),
        Some(Value::ZSet(z)) => z.iter().map(|(m, s)| (m.to_bytes(), s)).collect(),
        Some(Value::Set(s)) => s.iter().map(|m| (m.to_bytes(), 1.0)).collect(),
        Some(_) => return Err(wrongtype()),
    })
}

/// The result, sorted by score then member.
fn compute(
    txn: &mut Txn<'_>,
    db: usize,
    op: Op,
    req: &Request<'_>,
) -> Result<Vec<(Bytes, f64)>, Frame> {
    // Every input is read (and type-checked) even when an early one already
    // decides the result, so WRONGTYPE does not depend on the data.
    let mut inputs = Vec::with_capacity(req.keys.len());
    for k in req.keys {
        inputs.push(input(txn, db, k)?);
    }
    // Redis aggregates the inputs smallest first (equal sizes in the order
    // given), and the order shows: float sums round differently, and
    // which NaN becomes 0 depends on it.
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| inputs[i].len());
    let weighted = |i: usize, s: f64| zero_if_nan(s * req.weights[i]);
    let mut out: Vec<(Bytes, f64)> = match op {
        Op::Union => {
            let mut acc: HashMap<Bytes, f64> = HashMap::new();
            for &i in &order {
                for (m, s) in std::mem::take(&mut inputs[i]) {
                    let s = weighted(i, s);
                    acc.entry(m)
                        .and_modify(|cur| *cur = req.aggregate.combine(*cur, s))
                        .or_insert(s);
                }
            }
            acc.into_iter().collect()
        }
        Op::Inter => {
            let maps: Vec<HashMap<Bytes, f64>> = inputs
                .into_iter()
                .map(|v| v.into_iter().collect())
                .collect();
            let (&first, rest) = order.split_first().unwrap_or((&0, &[]));
            let mut out = Vec::new();
            'members: for (m, &s) in &maps[first] {
                // Only the first input's product is made 0 when NaN; the
                // others go into the aggregate as they are (a NaN sum
                // becomes 0 there, a NaN never wins MIN or MAX).
                let mut score = weighted(first, s);
                for &i in rest {
                    let Some(&s) = maps[i].get(m) else {
                        continue 'members;
                    };
                    score = req.aggregate.combine(score, s * req.weights[i]);
                }
                out.push((m.clone(), score));
            }
            out
        }
        Op::Diff => {
            let mut it = inputs.into_iter();
            let first = it.next().unwrap_or_default();
            let others: HashSet<Bytes> = it.flatten().map(|(m, _)| m).collect();
            first
                .into_iter()
                .filter(|(m, _)| !others.contains(m))
                .collect()
        }
    };
    // Scores compare as numbers (-0 ties with 0, as in Redis); NaN was
    // made 0 above.
    out.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    Ok(out)
}

fn reply(ctx: &Ctx<'_>, items: Vec<(Bytes, f64)>, withscores: bool) -> Frame {
    if withscores {
        pairs_reply(
            items
                .into_iter()
                .map(|(m, s)| (Frame::Bulk(m), Frame::Double(s)))
                .collect(),
            resp3(ctx),
        )
    } else {
        Frame::Array(items.into_iter().map(|(m, _)| Frame::Bulk(m)).collect())
    }
}

fn read(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], op: Op, name: &str) -> Reply {
    let req = parse(txn, ctx.db(), args, 1, op, false, name)?;
    let items = compute(txn, ctx.db(), op, &req)?;
    Ok(reply(ctx, items, req.withscores))
}

/// Replaces `args[1]` with the result (deleting it when empty), as one
/// logged write; replies with the result's size.
fn store(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], op: Op, name: &str) -> Reply {
    let db = ctx.db();
    let req = parse(txn, db, args, 2, op, true, name)?;
    let items = compute(txn, db, op, &req)?;
    super::zsets::store_scored(txn, db, &args[1], items)
}

fn zunion(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    read(ctx, txn, args, Op::Union, "zunion")
}

fn zinter(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    read(ctx, txn, args, Op::Inter, "zinter")
}

fn zdiff(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    read(ctx, txn, args, Op::Diff, "zdiff")
}

fn zunionstore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    store(ctx, txn, args, Op::Union, "zunionstore")
}

fn zinterstore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    store(ctx, txn, args, Op::Inter, "zinterstore")
}

fn zdiffstore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    store(ctx, txn, args, Op::Diff, "zdiffstore")
}

/// ZINTERCARD numkeys key... [LIMIT limit]: the size of the intersection,
/// counting at most `limit` (0: no limit).
fn zintercard(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let n = arg_i64(&args[1])?;
    if n < 1 {
        // Redis's shared ZUNION/ZINTER/ZDIFF check words it this way.
        return Err(Frame::error(
            "ERR at least 1 input key is needed for 'zintercard' command",
        ));
    }
    let n = n as usize;
    // Redis's shared check again: not SINTERCARD's "Number of keys can't
    // be greater than number of args".
    if n > args.len() - 2 {
        return Err(syntax());
    }
    check_types(txn, ctx.db(), &args[2..2 + n])?;
    let mut limit = 0usize;
    let mut j = 2 + n;
    while j < args.len() {
        if is(&args[j], "limit") && j + 1 < args.len() {
            let l = parse_i64(&args[j + 1])
                .ok_or_else(|| Frame::error("ERR LIMIT can't be negative"))?;
            if l < 0 {
                return Err(Frame::error("ERR LIMIT can't be negative"));
            }
            limit = l as usize;
            j += 2;
        } else {
            return Err(syntax());
        }
    }
    let req = Request {
        keys: &args[2..2 + n],
        weights: vec![1.0; n],
        aggregate: Aggregate::Sum,
        withscores: false,
    };
    let count = compute(txn, ctx.db(), Op::Inter, &req)?.len();
    let count = if limit > 0 { count.min(limit) } else { count };
    Ok(Frame::Integer(count as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_positions_survive_malformed_numkeys() {
        let a = |v: &[&str]| {
            v.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            store_keys(&a(&["zunionstore", "d", "2", "a", "b", "WEIGHTS"])),
            [1, 3, 4]
        );
        assert_eq!(store_keys(&a(&["zunionstore", "d", "9", "a"])), [1, 3]);
        assert_eq!(input_keys(&a(&["zinter", "x", "a"])), Vec::<usize>::new());
        assert_eq!(input_keys(&a(&["zinter", "1", "a", "b"])), [2]);
    }
}
