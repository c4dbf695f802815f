//! Hash commands.

use super::scan::{scan_cursor, scan_options, scan_reply, scan_walk, scans_whole};
use super::{
    apply, pairs_reply, random_count, random_position, random_positions, resp3, syntax, wrongtype,
};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, FIRST_KEY};
use crate::errors;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::KeyOp;
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, HashValue, Value};
use durakv_protocol::Frame;
use std::collections::HashSet;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("hset", -4, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(hset), "hash", "Writes one or more field-value pairs into a hash."),
        spec("hsetnx", 4, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(hsetnx), "hash", "Writes a hash field only if it is not already there."),
        spec("hmset", -4, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(hmset), "hash", "Writes several hash fields (as HSET does)."),
        spec("hget", 3, READONLY | FAST, FIRST_KEY, Handler::Data(hget), "hash", "Reads one field of a hash."),
        spec("hmget", -3, READONLY | FAST, FIRST_KEY, Handler::Data(hmget), "hash", "Reads the given fields of a hash."),
        spec("hgetall", 2, READONLY, FIRST_KEY, Handler::Data(hgetall), "hash", "Reads a whole hash as field-value pairs."),
        spec("hdel", -3, WRITE | FAST, FIRST_KEY, Handler::Data(hdel), "hash", "Removes fields from a hash, dropping the key when it empties."),
        spec("hexists", 3, READONLY | FAST, FIRST_KEY, Handler::Data(hexists), "hash", "Tells whether a hash has a given field."),
        spec("hlen", 2, READONLY | FAST, FIRST_KEY, Handler::Data(hlen), "hash", "Gives a hash's field count."),
        spec("hkeys", 2, READONLY, FIRST_KEY, Handler::Data(hkeys), "hash", "Lists a hash's field names."),
        spec("hvals", 2, READONLY, FIRST_KEY, Handler::Data(hvals), "hash", "Lists a hash's values."),
        spec("hincrby", 4, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(hincrby), "hash", "Adds an integer to a hash field, treating a missing field as 0."),
        spec("hincrbyfloat", 4, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(hincrbyfloat), "hash", "Adds a decimal number to a hash field, treating a missing field as 0."),
        spec("hstrlen", 3, READONLY | FAST, FIRST_KEY, Handler::Data(hstrlen), "hash", "Gives a hash field value's byte length."),
        spec("hscan", -3, READONLY, FIRST_KEY, Handler::Data(hscan), "hash", "Walks a hash's fields and values with a cursor."),
        spec("hrandfield", -2, READONLY, FIRST_KEY, Handler::Data(hrandfield), "hash", "Samples fields of a hash at random, with or without values."),
    ]
}

fn read_hash<'t>(
    txn: &'t mut Txn<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'t HashValue>, Frame> {
    super::read_as(txn, db, key, Value::as_hash)
}

fn hash_len(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<usize, Frame> {
    Ok(read_hash(txn, db, key)?.map_or(0, |h| h.len()))
}

/// HSET/HMSET: sets the pairs and, if `count` (HSET's reply), returns how
/// many fields are new. HMSET answers OK whatever it added, so it only
/// checks the type, without counting entries before and after.
fn set_fields(
    ctx: &Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    count: bool,
) -> Result<usize, Frame> {
    if !args.len().is_multiple_of(2) {
        return Err(errors::wrong_args(
            std::str::from_utf8(&args[0]).unwrap_or("hset"),
        ));
    }
    let db = ctx.db();
    let key = &args[1];
    let before = if count {
        Some(hash_len(txn, db, key)?)
    } else {
        read_hash(txn, db, key)?;
        None
    };
    let pairs = args[2..]
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    apply(txn, db, key, KeyOp::HSet(pairs))?;
    match before {
        Some(n) => Ok(hash_len(txn, db, key)?.saturating_sub(n)),
        None => Ok(0),
    }
}

fn hset(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(Frame::Integer(set_fields(ctx, txn, args, true)? as i64))
}

fn hmset(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    set_fields(ctx, txn, args, false)?;
    Ok(Frame::ok())
}

fn hsetnx(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    if read_hash(txn, db, &args[1])?.is_some_and(|h| h.contains_key(&args[2][..])) {
        return Ok(Frame::Integer(0));
    }
    apply(
        txn,
        db,
        &args[1],
        KeyOp::HSet(vec![(args[2].clone(), args[3].clone())]),
    )?;
    Ok(Frame::Integer(1))
}

fn hget(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(h.and_then(|h| h.get(&args[2][..]))
        .map_or(Frame::Null, Frame::Bulk))
}

fn hmget(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        args[2..]
            .iter()
            .map(|f| {
                h.and_then(|h| h.get(&f[..]))
                    .map_or(Frame::Null, Frame::Bulk)
            })
            .collect(),
    ))
}

fn hgetall(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Map(
        h.into_iter()
            .flat_map(|h| h.iter())
            .map(|(f, v)| (Frame::Bulk(f), Frame::Bulk(v)))
            .collect(),
    ))
}

fn hkeys(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        h.into_iter()
            .flat_map(|h| h.keys())
            .map(Frame::Bulk)
            .collect(),
    ))
}

fn hvals(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        h.into_iter()
            .flat_map(|h| h.values())
            .map(Frame::Bulk)
            .collect(),
    ))
}

fn hdel(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let Some(h) = read_hash(txn, db, &args[1])? else {
        return Ok(Frame::Integer(0));
    };
    let mut seen = HashSet::new();
    let gone: Vec<Bytes> = args[2..]
        .iter()
        .filter(|f| h.contains_key(&f[..]) && seen.insert(&f[..]))
        .cloned()
        .collect();
    let n = gone.len();
    if n > 0 {
        apply(txn, db, &args[1], KeyOp::HDel(gone))?;
    }
    Ok(Frame::Integer(n as i64))
}

fn hexists(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Integer(
        h.is_some_and(|h| h.contains_key(&args[2][..])) as i64,
    ))
}

fn hlen(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(Frame::Integer(hash_len(txn, ctx.db(), &args[1])? as i64))
}

fn hstrlen(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Integer(
        h.and_then(|h| h.get_slice(&args[2][..]))
            .map_or(0, |v| v.len()) as i64,
    ))
}

fn hincrby(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let incr = arg_i64(&args[3])?;
    let cur = match read_hash(txn, db, &args[1])?.and_then(|h| h.get_slice(&args[2][..])) {
        None => 0,
        Some(v) => parse_i64(v).ok_or_else(|| Frame::error("ERR hash value is not an integer"))?,
    };
    let new = cur
        .checked_add(incr)
        .ok_or_else(|| errors::err(errors::OVERFLOW))?;
    let mut b = itoa::Buffer::new();
    let text = Bytes::copy_from_slice(b.format(new).as_bytes());
    apply(
        txn,
        db,
        &args[1],
        KeyOp::HSet(vec![(args[2].clone(), text)]),
    )?;
    Ok(Frame::Integer(new))
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    if !crate::decimal::is_long_double(&args[3]) {
        return Err(errors::err(errors::NOT_FLOAT));
    }
    if crate::decimal::is_infinity(&args[3]) {
        return Err(Frame::error("ERR value is NaN or Infinity"));
    }
    let current = read_hash(txn, db, &args[1])?
        .and_then(|h| h.get_slice(&args[2][..]).map(Bytes::copy_from_slice))
        .unwrap_or_else(|| Bytes::from_static(b"0"));
    if !crate::decimal::is_long_double(&current) {
        return Err(Frame::error("ERR hash value is not a float"));
    }
    // Printed as INCRBYFLOAT prints, as Redis does: `1e20` is
    // 100000000000000000000.
    let text = Bytes::from(
        crate::decimal::sum(&current, &args[3])
            .ok_or_else(|| Frame::error("ERR increment would produce NaN or Infinity"))?,
    );
    apply(
        txn,
        db,
        &args[1],
        KeyOp::HSet(vec![(args[2].clone(), text.clone())]),
    )?;
    Ok(Frame::Bulk(text))
}

fn hscan(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let cursor = scan_cursor(&args[2])?;
    let Some(e) = txn.get(ctx.db(), &args[1]) else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let Value::Hash(h) = &e.value else {
        return Err(wrongtype());
    };
    let opts = scan_options(&args[3..], true)?;
    let mut items = Vec::new();
    let next = scan_walk(
        h.len(),
        cursor,
        opts.count,
        scans_whole(&e.value, &super::encoding_limits(ctx)),
        |i| {
            if let Some((f, v)) = h.get_index(i) {
                if opts.matches(&f) {
                    items.push(Frame::Bulk(f));
                    if !opts.novalues {
                        items.push(Frame::Bulk(v));
                    }
                }
            }
        },
    );
    Ok(scan_reply(next, items))
}

fn hrandfield(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    if args.len() == 2 {
        let h = read_hash(txn, db, &args[1])?;
        let field = h.and_then(|h| random_position(h.len()).and_then(|i| h.get_index(i)));
        return Ok(field.map_or(Frame::Null, |(f, _)| Frame::Bulk(f)));
    }
    let count = random_count(&args[2])?;
    let withvalues = args.len() == 4;
    if args.len() > 4 || (withvalues && !is(&args[3], "withvalues")) {
        return Err(syntax());
    }
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Frame::error("ERR value is out of range"));
    }
    let resp3 = resp3(ctx);
    let Some(h) = read_hash(txn, db, &args[1])? else {
        return Ok(Frame::Array(Vec::new()));
    };
    let picks = random_positions(ctx, h.len(), count)?;
    let chosen = picks.into_iter().filter_map(|i| h.get_index(i));
    Ok(if withvalues {
        pairs_reply(
            chosen
                .map(|(f, v)| (Frame::Bulk(f), Frame::Bulk(v)))
                .collect(),
            resp3,
        )
    } else {
        Frame::Array(chosen.map(|(f, _)| Frame::Bulk(f)).collect())
    })
}
