//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST. Values are
//! plain strings in Redis's own format ([`crate::hll`]), so they survive
//! GET/SET, DUMP/RESTORE and replication to and from Redis unchanged.
//!
//! A command decodes the registers, changes them, re-encodes, and logs
//! only the bytes that differ: a dense value is 12 KB, and an element that
//! raises one register changes one or two of them.

use super::{apply, read_as};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, ALL_ARGS_KEYS};
use crate::hll::{self, Hll, Invalid};
use crate::util::is;
use bytes::Bytes;
use durakv_engine::mutation::{ExpireMode, KeyOp};
use durakv_engine::txn::Txn;
use durakv_engine::value::Value;
use durakv_protocol::Frame;

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// Changed bytes closer than this are logged as one range: a range costs
/// more framing than a few unchanged bytes.
const COALESCE_GAP: usize = 8;

const PFDEBUG_KEY: Keys = Keys::Range {
    first: 2,
    last: 2,
    step: 1,
};

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("pfadd", -2, WRITE | DENYOOM | FAST, crate::command::FIRST_KEY, Handler::Data(pfadd), "hyperloglog", "Feeds elements into a HyperLogLog, creating it if needed."),
        spec("pfcount", -2, READONLY, ALL_ARGS_KEYS, Handler::Data(pfcount), "hyperloglog", "Estimates how many distinct elements one or more HyperLogLogs have seen."),
        spec("pfmerge", -2, WRITE | DENYOOM, ALL_ARGS_KEYS, Handler::Data(pfmerge), "hyperloglog", "Combines HyperLogLogs into the destination key."),
        spec("pfselftest", 1, ADMIN, crate::command::NO_KEYS, Handler::Conn(pfselftest), "hyperloglog", "Runs the HyperLogLog code's own checks."),
        spec("pfdebug", 3, WRITE | DENYOOM | ADMIN, PFDEBUG_KEY, Handler::Data(pfdebug), "hyperloglog", "Inspects or converts a HyperLogLog's encoding."),
    ]
}

fn invalid(e: Invalid) -> Frame {
    match e {
        Invalid::NotHll => Frame::error(NOT_HLL),
        Invalid::Corrupt => Frame::error(CORRUPT),
    }
}

/// The string at `key`, if any (WRONGTYPE for other types).
fn read_string(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<Bytes>, Frame> {
    Ok(read_as(txn, db, key, Value::as_str)?.map(|s| s.to_bytes()))
}

fn read_hll(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<(Hll, Bytes)>, Frame> {
    match read_string(txn, db, key)? {
        None => Ok(None),
        Some(s) => Ok(Some((hll::decode(&s).map_err(invalid)?, s))),
    }
}

fn sparse_max(ctx: &Ctx<'_>) -> usize {
    usize::try_from(ctx.shared.config.read().hll_sparse_max_bytes).unwrap_or(usize::MAX)
}

/// `h` encoded as it would be after Redis's update: sparse stays sparse
/// while every register fits a sparse opcode and the whole value fits
/// `hll-sparse-max-bytes`; past that it is promoted to dense for good.
fn encode(h: &Hll, sparse_max: usize) -> Vec<u8> {
    if h.encoding == hll::SPARSE {
        if let Some(body) = hll::sparse_encode(&h.regs) {
            if hll::HEADER + body.len() <= sparse_max {
                let mut out = h.header.to_vec();
                out.extend_from_slice(&body);
                return out;
            }
        }
    }
    hll::encode(&h.regs, &h.header, hll::DENSE)
}

/// Writes `new` over `old`: the whole string when its shape changed,
/// otherwise only the ranges that differ.
fn write(txn: &mut Txn<'_>, db: usize, key: &Bytes, old: Option<&[u8]>, new: Vec<u8>) -> Reply {
    let Some(old) = old.filter(|o| o.len() == new.len() && o[4] == new[4]) else {
        let op = KeyOp::SetString {
            value: Bytes::from(new),
            expire: ExpireMode::Keep,
        };
        return apply(txn, db, key, op).map(|()| Frame::Null);
    };
    let changed: Vec<usize> = (0..new.len()).filter(|&i| old[i] != new[i]).collect();
    write_ranges(txn, db, key, new, &changed)
}

/// Logs the bytes of `new` at the ascending positions `changed`, close
/// ones as one range. The first range always covers the stale-cardinality
/// byte, so every such write names the header: the one mutation the
/// `pfadd` event is read off.
fn write_ranges(
    txn: &mut Txn<'_>,
    db: usize,
    key: &Bytes,
    new: Vec<u8>,
    changed: &[usize],
) -> Reply {
    let flag = hll::CARD_FLAG_BYTE;
    let mut ranges: Vec<(usize, usize)> = vec![(flag, flag + 1)];
    for &i in changed {
        match ranges.last_mut() {
            Some(r) if i <= r.1 + COALESCE_GAP => r.1 = r.1.max(i + 1),
            _ => ranges.push((i, i + 1)),
        }
        if i < flag {
            ranges[0].0 = ranges[0].0.min(i);
        }
    }
    let new = Bytes::from(new);
    for (start, end) in ranges {
        let op = KeyOp::SetRange {
            offset: start as u64,
            data: new.slice(start..end),
        };
        apply(txn, db, key, op)?;
    }
    Ok(Frame::Null)
}

/// PFADD on a dense value: registers are raised in place in a copy, and
/// only the bytes of raised registers are logged.
fn pfadd_dense(txn: &mut Txn<'_>, db: usize, key: &Bytes, old: &[u8], elements: &[Bytes]) -> Reply {
    let mut new = old.to_vec();
    let body = &mut new[hll::HEADER..];
    let mut touched = Vec::new();
    for ele in elements {
        let (i, v) = hll::position(ele);
        if hll::dense_get(body, i) < v {
            hll::dense_set(body, i, v);
            let b = hll::HEADER + i * 6 / 8;
            touched.push(b);
            if b + 1 < hll::DENSE_SIZE {
                touched.push(b + 1);
            }
        }
    }
    if touched.is_empty() {
        return Ok(Frame::Integer(0));
    }
    new[hll::CARD_FLAG_BYTE] |= 0x80;
    touched.sort_unstable();
    touched.dedup();
    write_ranges(txn, db, key, new, &touched)?;
    Ok(Frame::Integer(1))
}

fn pfadd(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let key = &args[1];
    if let Some(s) = read_string(txn, db, key)? {
        if hll::check(&s).map_err(invalid)? == hll::DENSE {
            return pfadd_dense(txn, db, key, &s, &args[2..]);
        }
    }
    let (mut h, old) = match read_hll(txn, db, key)? {
        Some((h, s)) => (h, Some(s)),
        None => (
            Hll {
                regs: Box::new([0; hll::REGISTERS]),
                encoding: hll::SPARSE,
                header: hll::new_header(),
            },
            None,
        ),
    };
    let mut updated = old.is_none();
    for ele in &args[2..] {
        updated |= hll::add(&mut h.regs, ele);
    }
    if !updated {
        return Ok(Frame::Integer(0));
    }
    hll::invalidate(&mut h.header);
    let new = encode(&h, sparse_max(ctx));
    write(txn, db, key, old.as_deref(), new)?;
    Ok(Frame::Integer(1))
}

fn pfcount(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    if args.len() > 2 {
        let mut union = Box::new([0u8; hll::REGISTERS]);
        for key in &args[1..] {
            if let Some(s) = read_string(txn, db, key)? {
                let encoding = hll::check(&s).map_err(invalid)?;
                hll::merge_body(&s, encoding, &mut union).map_err(invalid)?;
            }
        }
        return Ok(Frame::Integer(hll::count(&union) as i64));
    }
    let key = &args[1];
    let Some(s) = read_string(txn, db, key)? else {
        return Ok(Frame::Integer(0));
    };
    hll::check(&s).map_err(invalid)?;
    if let Some(card) = hll::cached(&s) {
        return Ok(Frame::Integer(card as i64));
    }
    let h = hll::decode(&s).map_err(invalid)?;
    let card = hll::count(&h.regs);
    // Caching the count is a write, logged like any other, as Redis
    // propagates it; it announces nothing.
    let op = KeyOp::SetRange {
        offset: 8,
        data: Bytes::copy_from_slice(&hll::card_bytes(card)),
    };
    apply(txn, db, key, op)?;
    Ok(Frame::Integer(card as i64))
}

fn merge_into(into: &mut hll::Registers, from: &hll::Registers) {
    for (a, &b) in into.iter_mut().zip(from.iter()) {
        *a = (*a).max(b);
    }
}

/// PFMERGE dest src...: the destination is one of the inputs, as in Redis.
fn pfmerge(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let mut union = Box::new([0u8; hll::REGISTERS]);
    let mut any_dense = false;
    let mut dest = None;
    for (i, key) in args[1..].iter().enumerate() {
        let Some((h, s)) = read_hll(txn, db, key)? else {
            continue;
        };
        any_dense |= h.encoding == hll::DENSE;
        merge_into(&mut union, &h.regs);
        if i == 0 {
            dest = Some((h, s));
        }
    }
    let (mut header, encoding, old) = match dest {
        Some((h, s)) => (h.header, h.encoding, Some(s)),
        None => (hll::new_header(), hll::SPARSE, None),
    };
    hll::invalidate(&mut header);
    let h = Hll {
        regs: union,
        encoding: if any_dense { hll::DENSE } else { encoding },
        header,
    };
    let new = encode(&h, sparse_max(ctx));
    write(txn, db, &args[1], old.as_deref(), new)?;
    Ok(Frame::ok())
}

fn pfdebug(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let (sub, key) = (&args[1], &args[2]);
    let Some(s) = read_string(txn, db, key)? else {
        return Err(Frame::error("ERR The specified key does not exist"));
    };
    let encoding = hll::check(&s).map_err(invalid)?;
    let to_dense = |txn: &mut Txn<'_>| -> Result<Hll, Frame> {
        let mut h = hll::decode(&s).map_err(invalid)?;
        if h.encoding == hll::SPARSE {
            h.encoding = hll::DENSE;
            let new = hll::encode(&h.regs, &h.header, hll::DENSE);
            write(txn, db, key, Some(&s), new)?;
        }
        Ok(h)
    };
    if is(sub, "getreg") {
        let h = to_dense(txn)?;
        Ok(Frame::Array(
            h.regs.iter().map(|&r| Frame::Integer(r.into())).collect(),
        ))
    } else if is(sub, "todense") {
        to_dense(txn)?;
        Ok(Frame::Integer(i64::from(encoding == hll::SPARSE)))
    } else if is(sub, "encoding") {
        Ok(Frame::simple(if encoding == hll::SPARSE {
            "sparse"
        } else {
            "dense"
        }))
    } else if is(sub, "decode") {
        if encoding != hll::SPARSE {
            return Err(Frame::error("ERR HLL encoding is not sparse"));
        }
        Ok(Frame::Simple(Bytes::from(hll::describe_sparse(
            &s[hll::HEADER..],
        ))))
    } else {
        Err(Frame::error(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(sub)
        )))
    }
}

/// PFSELFTEST: checks the HyperLogLog implementation ([`hll::self_test`]).
/// Ten million elements take a while: the worker's other connections go
/// to another thread meanwhile.
fn pfselftest(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    let sparse_max = sparse_max(ctx);
    let seed = rand::random::<u64>();
    crate::checkpointer::blocking(|| hll::self_test(sparse_max, seed))
        .map(|()| Frame::ok())
        .map_err(Frame::error)
}
