//! Set commands.

use super::scan::{scan_cursor, scan_options, scan_reply, scan_walk, scans_whole};
use super::{
    apply, positive_count, random_count, random_position, random_positions, syntax, wrongtype,
};
use crate::command::{
    flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, ALL_ARGS_KEYS, FIRST_KEY, TWO_KEYS,
};
use bytes::Bytes;
use durakv_engine::key::Key;
use durakv_engine::mutation::{KeyOp, Mutation};
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, EncodingLimits, SetValue, Value};
use durakv_protocol::Frame;
use std::collections::HashSet;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("sadd", -3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(sadd), "set", "Puts members into a set, creating it if needed."),
        spec("srem", -3, WRITE | FAST, FIRST_KEY, Handler::Data(srem), "set", "Takes members out of a set, dropping the key when it empties."),
        spec("smembers", 2, READONLY, FIRST_KEY, Handler::Data(smembers), "set", "Reads the full contents of a set."),
        spec("sismember", 3, READONLY | FAST, FIRST_KEY, Handler::Data(sismember), "set", "Tells whether a value is in a set."),
        spec("smismember", -3, READONLY | FAST, FIRST_KEY, Handler::Data(smismember), "set", "Tells, for each value given, whether it is in a set."),
        spec("scard", 2, READONLY | FAST, FIRST_KEY, Handler::Data(scard), "set", "Gives a set's size."),
        spec("spop", -2, WRITE | FAST, FIRST_KEY, Handler::Data(spop), "set", "Removes and returns random set members, dropping the key when it empties."),
        spec("srandmember", -2, READONLY, FIRST_KEY, Handler::Data(srandmember), "set", "Picks random set members, leaving them in."),
        spec("sscan", -3, READONLY, FIRST_KEY, Handler::Data(sscan), "set", "Walks a set's members with a cursor."),
        spec("sinter", -2, READONLY, ALL_ARGS_KEYS, Handler::Data(sinter), "set", "Gives the members all the sets share."),
        spec("sunion", -2, READONLY, ALL_ARGS_KEYS, Handler::Data(sunion), "set", "Gives every member of any of the sets."),
        spec("sdiff", -2, READONLY, ALL_ARGS_KEYS, Handler::Data(sdiff), "set", "Gives the first set's members the others lack."),
        spec("sinterstore", -3, WRITE | DENYOOM, ALL_ARGS_KEYS, Handler::Data(sinterstore), "set", "Saves the members all the sets share."),
        spec("sunionstore", -3, WRITE | DENYOOM, ALL_ARGS_KEYS, Handler::Data(sunionstore), "set", "Saves every member of any of the sets."),
        spec("sdiffstore", -3, WRITE | DENYOOM, ALL_ARGS_KEYS, Handler::Data(sdiffstore), "set", "Saves the first set's members the others lack."),
        spec("smove", 4, WRITE | FAST, TWO_KEYS, Handler::Data(smove), "set", "Takes a member out of one set and adds it to another."),
        spec("sintercard", -3, READONLY, Keys::Custom(sintercard_keys), Handler::Data(sintercard), "set", "Counts the members all the sets share, up to a limit."),
    ]
}

fn read_set<'t>(
    txn: &'t mut Txn<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'t SetValue>, Frame> {
    super::read_as(txn, db, key, Value::as_set)
}

fn members_frame(members: impl IntoIterator<Item = Bytes>) -> Frame {
    Frame::Set(members.into_iter().map(Frame::Bulk).collect())
}

fn sadd(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let s = read_set(txn, db, &args[1])?;
    let mut seen = HashSet::new();
    let new: Vec<Bytes> = args[2..]
        .iter()
        .filter(|m| !s.is_some_and(|s| s.contains(&m[..])) && seen.insert(&m[..]))
        .cloned()
        .collect();
    let n = new.len();
    if n > 0 {
        apply(txn, db, &args[1], KeyOp::SAdd(new))?;
    }
    Ok(Frame::Integer(n as i64))
}

fn srem(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let Some(s) = read_set(txn, db, &args[1])? else {
        return Ok(Frame::Integer(0));
    };
    let mut seen = HashSet::new();
    let gone: Vec<Bytes> = args[2..]
        .iter()
        .filter(|m| s.contains(&m[..]) && seen.insert(&m[..]))
        .cloned()
        .collect();
    let n = gone.len();
    if n > 0 {
        apply(txn, db, &args[1], KeyOp::SRem(gone))?;
    }
    Ok(Frame::Integer(n as i64))
}

/// Members in the order Redis lists them: ascending for a set it would
/// hold as an intset (small, all integers), insertion order otherwise.
pub(crate) fn listing_order<'s>(s: &'s SetValue, limits: &EncodingLimits) -> Vec<&'s Key> {
    if s.len() <= limits.set_intset_entries {
        let ints: Option<Vec<(i64, &Key)>> =
            s.iter().map(|m| parse_i64(m).map(|n| (n, m))).collect();
        if let Some(mut ints) = ints {
            ints.sort_unstable_by_key(|(n, _)| *n);
            return ints.into_iter().map(|(_, m)| m).collect();
        }
    }
    s.iter().collect()
}

/// The members, copied out in `listing_order`.
pub(crate) fn listed_members(s: &SetValue, limits: &EncodingLimits) -> Vec<Bytes> {
    listing_order(s, limits)
        .into_iter()
        .map(Key::to_bytes)
        .collect()
}

fn smembers(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let limits = super::encoding_limits(ctx);
    let s = read_set(txn, ctx.db(), &args[1])?;
    Ok(members_frame(
        s.map(|s| listed_members(s, &limits)).unwrap_or_default(),
    ))
}

fn sismember(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let s = read_set(txn, ctx.db(), &args[1])?;
    Ok(Frame::Integer(
        s.is_some_and(|s| s.contains(&args[2][..])) as i64
    ))
}

fn smismember(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let s = read_set(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        args[2..]
            .iter()
            .map(|m| Frame::Integer(s.is_some_and(|s| s.contains(&m[..])) as i64))
            .collect(),
    ))
}

fn scard(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let s = read_set(txn, ctx.db(), &args[1])?;
    Ok(Frame::Integer(s.map_or(0, |s| s.len()) as i64))
}

fn spop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let key = &args[1];
    if args.len() > 3 {
        return Err(syntax());
    }
    if args.len() == 2 {
        let s = read_set(txn, db, key)?;
        let Some(m) = s
            .and_then(|s| random_position(s.len()).and_then(|i| s.get_index(i)))
            .map(Key::to_bytes)
        else {
            return Ok(Frame::Null);
        };
        apply(txn, db, key, KeyOp::SRem(vec![m.clone()]))?;
        return Ok(Frame::Bulk(m));
    }
    let count = positive_count(&args[2])?;
    let Some(s) = read_set(txn, db, key)? else {
        return Ok(Frame::Set(Vec::new()));
    };
    let count = i64::try_from(count).unwrap_or(i64::MAX);
    let popped: Vec<Bytes> = if count as u64 >= s.len() as u64 {
        // The whole set, listed as SMEMBERS lists it.
        listed_members(s, &super::encoding_limits(ctx))
    } else {
        random_positions(ctx, s.len(), count)?
            .into_iter()
            .filter_map(|i| s.get_index(i).map(Key::to_bytes))
            .collect()
    };
    let reply = members_frame(popped.iter().cloned());
    if !popped.is_empty() {
        apply(txn, db, key, KeyOp::SRem(popped))?;
    }
    Ok(reply)
}

fn srandmember(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    if args.len() > 3 {
        return Err(syntax());
    }
    if args.len() == 2 {
        let s = read_set(txn, db, &args[1])?;
        let m = s.and_then(|s| random_position(s.len()).and_then(|i| s.get_index(i)));
        return Ok(m.map_or(Frame::Null, |m| Frame::Bulk(m.to_bytes())));
    }
    let count = random_count(&args[2])?;
    let Some(s) = read_set(txn, db, &args[1])? else {
        return Ok(Frame::Array(Vec::new()));
    };
    if count >= 0 && count as u64 >= s.len() as u64 {
        // The whole set, listed as SMEMBERS lists it.
        return Ok(Frame::Array(
            listed_members(s, &super::encoding_limits(ctx))
                .into_iter()
                .map(Frame::Bulk)
                .collect(),
        ));
    }
    Ok(Frame::Array(
        random_positions(ctx, s.len(), count)?
            .into_iter()
            .filter_map(|i| s.get_index(i).map(|m| Frame::Bulk(m.to_bytes())))
            .collect(),
    ))
}

fn sscan(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let cursor = scan_cursor(&args[2])?;
    let Some(e) = txn.get(ctx.db(), &args[1]) else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let Value::Set(s) = &e.value else {
        return Err(wrongtype());
    };
    let opts = scan_options(&args[3..], false)?;
    let limits = super::encoding_limits(ctx);
    if scans_whole(&e.value, &limits) {
        let items = listing_order(s, &limits)
            .into_iter()
            .filter(|m| opts.matches(m))
            .map(|m| Frame::Bulk(m.to_bytes()))
            .collect();
        return Ok(scan_reply(0, items));
    }
    let mut items = Vec::new();
    let next = scan_walk(s.len(), cursor, opts.count, false, |i| {
        if let Some(m) = s.get_index(i) {
            if opts.matches(m) {
                items.push(Frame::Bulk(m.to_bytes()));
            }
        }
    });
    Ok(scan_reply(next, items))
}

/// Type-checks every key (WRONGTYPE if any is not a set) and returns each
/// set's size, 0 for a missing key.
fn set_sizes(txn: &mut Txn<'_>, db: usize, keys: &[Bytes]) -> Result<Vec<usize>, Frame> {
    keys.iter()
        .map(|k| Ok(read_set(txn, db, k)?.map_or(0, |s| s.len())))
        .collect()
}

/// SINTER: walks the smallest set and keeps what every other set holds,
/// stopping once `limit` members are found (0: no limit).
fn intersect(
    txn: &mut Txn<'_>,
    db: usize,
    keys: &[Bytes],
    limit: usize,
    limits: &EncodingLimits,
) -> Result<Vec<Bytes>, Frame> {
    let sizes = set_sizes(txn, db, keys)?;
    let Some((smallest, _)) = sizes.iter().enumerate().min_by_key(|(_, n)| **n) else {
        return Ok(Vec::new());
    };
    if sizes[smallest] == 0 {
        return Ok(Vec::new());
    }
    let mut out: Vec<Bytes> =
        read_set(txn, db, &keys[smallest])?.map_or_else(Vec::new, |s| listed_members(s, limits));
    for (i, k) in keys.iter().enumerate() {
        if i == smallest || k == &keys[smallest] {
            continue;
        }
        let Some(s) = read_set(txn, db, k)? else {
            return Ok(Vec::new());
        };
        out.retain(|m| s.contains(m));
        if out.is_empty() {
            break;
        }
    }
    if limit > 0 {
        out.truncate(limit);
    }
    Ok(out)
}

fn union(txn: &mut Txn<'_>, db: usize, keys: &[Bytes]) -> Result<SetValue, Frame> {
    set_sizes(txn, db, keys)?;
    let mut out = SetValue::default();
    for k in keys {
        if let Some(s) = read_set(txn, db, k)? {
            out.extend(s.iter());
        }
    }
    Ok(out)
}

fn difference(txn: &mut Txn<'_>, db: usize, keys: &[Bytes]) -> Result<SetValue, Frame> {
    set_sizes(txn, db, keys)?;
    let mut out: SetValue = match read_set(txn, db, &keys[0])? {
        Some(s) => s.clone(),
        None => return Ok(SetValue::default()),
    };
    for k in &keys[1..] {
        if out.is_empty() {
            break;
        }
        if let Some(s) = read_set(txn, db, k)? {
            out.retain(|m| !s.contains(m));
        }
    }
    Ok(out)
}

fn sinter(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let limits = super::encoding_limits(ctx);
    Ok(members_frame(intersect(
        txn,
        ctx.db(),
        &args[1..],
        0,
        &limits,
    )?))
}

/// A computed set, listed as SMEMBERS would list it once stored (Redis
/// replies from the set it built).
fn listed(ctx: &Ctx<'_>, s: &SetValue) -> Frame {
    let limits = super::encoding_limits(ctx);
    members_frame(listed_members(s, &limits))
}

fn sunion(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let result = union(txn, ctx.db(), &args[1..])?;
    Ok(listed(ctx, &result))
}

fn sdiff(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let result = difference(txn, ctx.db(), &args[1..])?;
    Ok(listed(ctx, &result))
}

/// Replaces `dest` (whatever it held, and its TTL) with `result`; an empty
/// result deletes it.
fn store(txn: &mut Txn<'_>, db: usize, dest: &Bytes, result: SetValue) -> Reply {
    let n = result.len();
    if n == 0 {
        if txn.get(db, dest).is_some() {
            apply(txn, db, dest, KeyOp::Del)?;
        }
    } else {
        apply(
            txn,
            db,
            dest,
            KeyOp::Restore {
                value: Value::Set(std::sync::Arc::new(result)),
                expire_at_ms: 0,
            },
        )?;
    }
    Ok(Frame::Integer(n as i64))
}

fn sinterstore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let limits = super::encoding_limits(ctx);
    let result = intersect(txn, db, &args[2..], 0, &limits)?
        .into_iter()
        .collect();
    store(txn, db, &args[1], result)
}

fn sunionstore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let result = union(txn, db, &args[2..])?;
    store(txn, db, &args[1], result)
}

fn sdiffstore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let result = difference(txn, db, &args[2..])?;
    store(txn, db, &args[1], result)
}

fn smove(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    let Some(s) = read_set(txn, db, src)? else {
        return Ok(Frame::Integer(0));
    };
    let in_src = s.contains(&member[..]);
    let in_dst = read_set(txn, db, dst)?.is_some_and(|d| d.contains(&member[..]));
    if src == dst {
        return Ok(Frame::Integer(in_src as i64));
    }
    if !in_src {
        return Ok(Frame::Integer(0));
    }
    let mut muts = vec![Mutation::key(
        db as u32,
        src.clone(),
        KeyOp::SRem(vec![member.clone()]),
    )];
    if !in_dst {
        muts.push(Mutation::key(
            db as u32,
            dst.clone(),
            KeyOp::SAdd(vec![member.clone()]),
        ));
    }
    super::keys::apply_all(txn, muts)?;
    Ok(Frame::Integer(1))
}

/// SINTERCARD's `numkeys`, if valid for these arguments.
fn sintercard_numkeys(args: &[Bytes]) -> Option<usize> {
    let n = usize::try_from(parse_i64(args.get(1)?)?).ok()?;
    (n >= 1 && n <= args.len().saturating_sub(2)).then_some(n)
}

fn sintercard_keys(args: &[Bytes]) -> Vec<usize> {
    sintercard_numkeys(args).map_or_else(Vec::new, |n| (2..2 + n).collect())
}

fn sintercard(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    match parse_i64(&args[1]) {
        Some(n) if n >= 1 => {
            if n as u64 > (args.len() - 2) as u64 {
                return Err(Frame::error(
                    "ERR Number of keys can't be greater than number of args",
                ));
            }
        }
        _ => return Err(Frame::error("ERR numkeys should be greater than 0")),
    }
    let n = sintercard_numkeys(args).ok_or_else(syntax)?;
    let mut limit = 0;
    let mut j = 2 + n;
    while j < args.len() {
        if crate::util::is(&args[j], "limit") && j + 1 < args.len() {
            limit = match parse_i64(&args[j + 1]) {
                Some(l) if l >= 0 => usize::try_from(l).unwrap_or(usize::MAX),
                _ => return Err(Frame::error("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(syntax());
        }
    }
    let limits = super::encoding_limits(ctx);
    Ok(Frame::Integer(
        intersect(txn, ctx.db(), &args[2..2 + n], limit, &limits)?.len() as i64,
    ))
}
