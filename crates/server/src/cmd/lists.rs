//! List commands.

use super::{apply, mpop, positive_count, syntax};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, FIRST_KEY, TWO_KEYS};
use crate::errors;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::{list_index, list_range, KeyOp, Mutation};
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, ListValue, Value};
use durakv_protocol::Frame;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("lpush", -3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(lpush), "list", "Adds elements at the head of a list, creating it if needed."),
        spec("rpush", -3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(rpush), "list", "Adds elements at the tail of a list, creating it if needed."),
        spec("lpushx", -3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(lpushx), "list", "Adds elements at the head of a list, if the list is there."),
        spec("rpushx", -3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(rpushx), "list", "Adds elements at the tail of a list, if the list is there."),
        spec("lpop", -2, WRITE | FAST, FIRST_KEY, Handler::Data(lpop), "list", "Takes one or more elements off a list's head, dropping the key when it empties."),
        spec("rpop", -2, WRITE | FAST, FIRST_KEY, Handler::Data(rpop), "list", "Takes one or more elements off a list's tail, dropping the key when it empties."),
        spec("lrange", 4, READONLY, FIRST_KEY, Handler::Data(lrange), "list", "Reads the elements between two list positions."),
        spec("llen", 2, READONLY | FAST, FIRST_KEY, Handler::Data(llen), "list", "Counts a list's elements."),
        spec("lindex", 3, READONLY, FIRST_KEY, Handler::Data(lindex), "list", "Reads the list element at a position."),
        spec("lset", 4, WRITE | DENYOOM, FIRST_KEY, Handler::Data(lset), "list", "Overwrites the list element at a position."),
        spec("lrem", 4, WRITE, FIRST_KEY, Handler::Data(lrem), "list", "Deletes occurrences of a value from a list, dropping the key when it empties."),
        spec("ltrim", 4, WRITE, FIRST_KEY, Handler::Data(ltrim), "list", "Cuts a list down to a range of positions, dropping the key if none remain."),
        spec("linsert", 5, WRITE | DENYOOM, FIRST_KEY, Handler::Data(linsert), "list", "Adds an element on either side of a pivot value in a list."),
        spec("lpos", -3, READONLY, FIRST_KEY, Handler::Data(lpos), "list", "Finds the positions of a value in a list."),
        spec("lmove", 5, WRITE | DENYOOM, TWO_KEYS, Handler::Data(lmove), "list", "Takes an element from either end of one list and adds it to an end of another."),
        spec("lmpop", -4, WRITE, Keys::Custom(mpop::keys_after_numkeys_at_1), Handler::Data(lmpop), "list", "Takes elements from either end of the first non-empty list given."),
        spec("rpoplpush", 3, WRITE | DENYOOM, TWO_KEYS, Handler::Data(rpoplpush), "list", "Takes a list's tail and adds it at another list's head, returning it."),
    ]
}

fn read_list<'t>(
    txn: &'t mut Txn<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'t ListValue>, Frame> {
    super::read_as(txn, db, key, Value::as_list)
}

fn list_len(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<usize, Frame> {
    Ok(read_list(txn, db, key)?.map_or(0, |l| l.len()))
}

/// LPUSH/RPUSH and their X variants; `existing_only` for LPUSHX/RPUSHX.
fn push(
    ctx: &Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    left: bool,
    existing_only: bool,
) -> Reply {
    let db = ctx.db();
    let key = &args[1];
    let len = match read_list(txn, db, key)? {
        Some(l) => l.len(),
        None if existing_only => return Ok(Frame::Integer(0)),
        None => 0,
    };
    let items = args[2..].to_vec();
    let n = items.len();
    apply(txn, db, key, KeyOp::Push { left, items })?;
    Ok(Frame::Integer((len + n) as i64))
}

fn lpush(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    push(ctx, txn, args, true, false)
}

fn rpush(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    push(ctx, txn, args, false, false)
}

fn lpushx(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    push(ctx, txn, args, true, true)
}

fn rpushx(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    push(ctx, txn, args, false, true)
}

fn pop(ctx: &Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], left: bool) -> Reply {
    if args.len() > 3 {
        return Err(errors::wrong_args(if left { "lpop" } else { "rpop" }));
    }
    let count = match args.get(2) {
        Some(c) => Some(positive_count(c)?),
        None => None,
    };
    let Some(popped) = pop_list(txn, ctx.db(), &args[1], left, count.unwrap_or(1))? else {
        return Ok(if count.is_some() {
            Frame::NullArray
        } else {
            Frame::Null
        });
    };
    let mut popped = popped.into_iter().map(Frame::Bulk);
    Ok(match count {
        Some(_) => Frame::Array(popped.collect()),
        None => popped.next().unwrap_or(Frame::Null),
    })
}

/// Removes up to `count` elements from one end of the list at `key` and
/// returns them in pop order: `None` when the key is missing, WRONGTYPE when
/// it holds another type. Shared by LPOP/RPOP, LMPOP and the blocking pops.
pub(crate) fn pop_list(
    txn: &mut Txn<'_>,
    db: usize,
    key: &Bytes,
    left: bool,
    count: u64,
) -> Result<Option<Vec<Bytes>>, Frame> {
    let Some(l) = read_list(txn, db, key)? else {
        return Ok(None);
    };
    let n = count.min(l.len() as u64) as usize;
    let popped: Vec<Bytes> = if left {
        l.iter().take(n).map(Bytes::copy_from_slice).collect()
    } else {
        l.iter().rev().take(n).map(Bytes::copy_from_slice).collect()
    };
    if n > 0 {
        apply(
            txn,
            db,
            key,
            KeyOp::Pop {
                left,
                count: n as u64,
            },
        )?;
    }
    Ok(Some(popped))
}

/// LMPOP: the first non-empty list among the keys gives up to COUNT elements.
fn lmpop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let m = mpop::parse(args, 1, mpop::LIST_ENDS)?;
    for key in m.keys {
        if let Some(items) = pop_list(txn, ctx.db(), key, m.first_end, m.count)? {
            return Ok(mpop_reply(key, items));
        }
    }
    Ok(Frame::NullArray)
}

/// `[key, [element, ...]]`, the reply of LMPOP and BLMPOP.
pub(crate) fn mpop_reply(key: &Bytes, items: Vec<Bytes>) -> Frame {
    Frame::Array(vec![
        Frame::Bulk(key.clone()),
        Frame::Array(items.into_iter().map(Frame::Bulk).collect()),
    ])
}

fn lpop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop(ctx, txn, args, true)
}

fn rpop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    pop(ctx, txn, args, false)
}

fn lrange(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (start, stop) = (arg_i64(&args[2])?, arg_i64(&args[3])?);
    let Some(l) = read_list(txn, ctx.db(), &args[1])? else {
        return Ok(Frame::Array(Vec::new()));
    };
    Ok(Frame::Array(match list_range(l.len(), start, stop) {
        Some((s, e)) => bulk_all(l.range(s, e)),
        None => Vec::new(),
    }))
}

/// Copies `items` into one buffer and replies with slices of it: a reply of
/// many elements then costs one allocation rather than one per element.
fn bulk_all<'a>(items: impl ExactSizeIterator<Item = &'a [u8]>) -> Vec<Frame> {
    let mut buf = Vec::new();
    let mut ends = Vec::with_capacity(items.len());
    for v in items {
        buf.extend_from_slice(v);
        ends.push(buf.len());
    }
    let all = Bytes::from(buf);
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let b = all.slice(start..end);
            start = end;
            Frame::Bulk(b)
        })
        .collect()
}

fn llen(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(Frame::Integer(list_len(txn, ctx.db(), &args[1])? as i64))
}

fn lindex(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let Some(l) = read_list(txn, ctx.db(), &args[1])? else {
        return Ok(Frame::Null);
    };
    let index = arg_i64(&args[2])?;
    let item = list_index(l.len(), index).and_then(|i| l.get(i));
    Ok(item.map_or(Frame::Null, |v| Frame::Bulk(Bytes::copy_from_slice(v))))
}

fn lset(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let Some(l) = read_list(txn, db, &args[1])? else {
        return Err(errors::err(errors::NO_SUCH_KEY));
    };
    let index = arg_i64(&args[2])?;
    if list_index(l.len(), index).is_none() {
        return Err(errors::err(errors::INDEX_OUT_OF_RANGE));
    }
    apply(
        txn,
        db,
        &args[1],
        KeyOp::LSet {
            index,
            item: args[3].clone(),
        },
    )?;
    Ok(Frame::ok())
}

fn lrem(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let count = arg_i64(&args[2])?;
    let Some(l) = read_list(txn, db, &args[1])? else {
        return Ok(Frame::Integer(0));
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
    };
    let found = l.iter().filter(|v| *v == &args[3][..]).take(limit).count();
    if found > 0 {
        apply(
            txn,
            db,
            &args[1],
            KeyOp::LRem {
                count,
                item: args[3].clone(),
            },
        )?;
    }
    Ok(Frame::Integer(found as i64))
}

fn ltrim(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let (start, stop) = (arg_i64(&args[2])?, arg_i64(&args[3])?);
    if read_list(txn, db, &args[1])?.is_some() {
        apply(txn, db, &args[1], KeyOp::LTrim { start, stop })?;
    }
    Ok(Frame::ok())
}

fn linsert(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let before = if is(&args[2], "before") {
        true
    } else if is(&args[2], "after") {
        false
    } else {
        return Err(syntax());
    };
    let Some(l) = read_list(txn, db, &args[1])? else {
        return Ok(Frame::Integer(0));
    };
    if !l.iter().any(|v| v == &args[3][..]) {
        return Ok(Frame::Integer(-1));
    }
    let len = l.len();
    apply(
        txn,
        db,
        &args[1],
        KeyOp::LInsert {
            before,
            pivot: args[3].clone(),
            item: args[4].clone(),
        },
    )?;
    Ok(Frame::Integer(len as i64 + 1))
}

fn lpos(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<u64>, 0u64);
    let mut j = 3;
    while j < args.len() {
        let has_value = j + 1 < args.len();
        if is(&args[j], "rank") && has_value {
            rank = arg_i64(&args[j + 1])?;
            if rank == i64::MIN {
                return Err(Frame::error(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ));
            }
            if rank == 0 {
                return Err(Frame::error(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(&args[j], "count") && has_value {
            count = Some(non_negative(&args[j + 1], "ERR COUNT can't be negative")?);
        } else if is(&args[j], "maxlen") && has_value {
            maxlen = non_negative(&args[j + 1], "ERR MAXLEN can't be negative")?;
        } else {
            return Err(syntax());
        }
        j += 2;
    }
    let Some(l) = read_list(txn, ctx.db(), &args[1])? else {
        return Ok(if count.is_some() {
            Frame::Array(Vec::new())
        } else {
            Frame::Null
        });
    };
    let len = l.len();
    let scan = if maxlen == 0 {
        len
    } else {
        (maxlen.min(len as u64)) as usize
    };
    let want = match count {
        Some(0) => usize::MAX,
        Some(c) => usize::try_from(c).unwrap_or(usize::MAX),
        None => 1,
    };
    let mut skip = rank.unsigned_abs() - 1;
    let mut found = Vec::new();
    let items: Box<dyn Iterator<Item = (usize, &[u8])>> = if rank > 0 {
        Box::new(l.iter().enumerate())
    } else {
        Box::new(l.iter().rev().enumerate().map(|(k, v)| (len - 1 - k, v)))
    };
    for (i, v) in items.take(scan) {
        if v != &args[2][..] {
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        found.push(Frame::Integer(i as i64));
        if found.len() >= want {
            break;
        }
    }
    Ok(match count {
        Some(_) => Frame::Array(found),
        None => found.pop().unwrap_or(Frame::Null),
    })
}

fn non_negative(arg: &[u8], msg: &'static str) -> Result<u64, Frame> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(errors::err(msg)),
    }
}

/// LEFT (true) or RIGHT (false), as LMOVE and BLMOVE take them.
pub(crate) fn side(arg: &[u8]) -> Result<bool, Frame> {
    if is(arg, "left") {
        Ok(true)
    } else if is(arg, "right") {
        Ok(false)
    } else {
        Err(syntax())
    }
}

/// LMOVE's work, shared with BLMOVE: Null when `src` is missing.
pub(crate) fn move_element(
    txn: &mut Txn<'_>,
    db: usize,
    src: &Bytes,
    dst: &Bytes,
    from_left: bool,
    to_left: bool,
) -> Reply {
    let Some(l) = read_list(txn, db, src)? else {
        return Ok(Frame::Null);
    };
    let Some(item) = (if from_left { l.front() } else { l.back() }).map(Bytes::copy_from_slice)
    else {
        return Ok(Frame::Null);
    };
    read_list(txn, db, dst)?;
    let pop = KeyOp::Pop {
        left: from_left,
        count: 1,
    };
    let push = KeyOp::Push {
        left: to_left,
        items: vec![item.clone()],
    };
    let (pop, push) = (
        Mutation::key(db as u32, src.clone(), pop),
        Mutation::key(db as u32, dst.clone(), push),
    );
    // Push before popping so a one-element list is never emptied, which
    // would delete the key and its TTL; Redis rotates it in place.
    let muts = if src == dst {
        vec![push, pop]
    } else {
        vec![pop, push]
    };
    super::keys::apply_all(txn, muts)?;
    Ok(Frame::Bulk(item))
}

fn lmove(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (from_left, to_left) = (side(&args[3])?, side(&args[4])?);
    move_element(txn, ctx.db(), &args[1], &args[2], from_left, to_left)
}

fn rpoplpush(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    move_element(txn, ctx.db(), &args[1], &args[2], false, true)
}
