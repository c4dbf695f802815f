//! Hash commands, and the helpers the collection families (hashes, lists,
//! sets, sorted sets) share: applying a key operation, the HSCAN/SSCAN/ZSCAN
//! cursor walk, and the counts of the random-sampling and pop commands.

use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, FIRST_KEY};
use crate::errors;
use crate::glob::glob_match;
use crate::util::{arg_f64, arg_i64, format_float, is, parse_f64};
use bytes::Bytes;
use durakv_engine::mutation::{KeyOp, Mutation};
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, HashValue, Value, INTSET_MAX_ENTRIES};
use durakv_protocol::{Frame, Protocol};
use rand::Rng;
use std::collections::HashSet;

/// A handler's result: `Err` carries the error reply, so handlers can use `?`.
pub(crate) type Reply = Result<Frame, Frame>;

/// Adapts a `Reply`-returning handler to the command table's `DataFn`.
macro_rules! data {
    ($f:path) => {
        Handler::Data(|ctx, txn, args| $f(ctx, txn, args).unwrap_or_else(|e| e))
    };
}
pub(crate) use data;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("hset", -4, WRITE | DENYOOM | FAST, FIRST_KEY, data!(hset), "hash", "Creates or modifies the value of a field in a hash."),
        spec("hsetnx", 4, WRITE | DENYOOM | FAST, FIRST_KEY, data!(hsetnx), "hash", "Sets the value of a field in a hash only when the field doesn't exist."),
        spec("hmset", -4, WRITE | DENYOOM | FAST, FIRST_KEY, data!(hmset), "hash", "Sets the values of multiple fields."),
        spec("hget", 3, READONLY | FAST, FIRST_KEY, data!(hget), "hash", "Returns the value of a field in a hash."),
        spec("hmget", -3, READONLY | FAST, FIRST_KEY, data!(hmget), "hash", "Returns the values of all fields in a hash."),
        spec("hgetall", 2, READONLY, FIRST_KEY, data!(hgetall), "hash", "Returns all fields and values in a hash."),
        spec("hdel", -3, WRITE | FAST, FIRST_KEY, data!(hdel), "hash", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain."),
        spec("hexists", 3, READONLY | FAST, FIRST_KEY, data!(hexists), "hash", "Determines whether a field exists in a hash."),
        spec("hlen", 2, READONLY | FAST, FIRST_KEY, data!(hlen), "hash", "Returns the number of fields in a hash."),
        spec("hkeys", 2, READONLY, FIRST_KEY, data!(hkeys), "hash", "Returns all fields in a hash."),
        spec("hvals", 2, READONLY, FIRST_KEY, data!(hvals), "hash", "Returns all values in a hash."),
        spec("hincrby", 4, WRITE | DENYOOM | FAST, FIRST_KEY, data!(hincrby), "hash", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist."),
        spec("hincrbyfloat", 4, WRITE | DENYOOM | FAST, FIRST_KEY, data!(hincrbyfloat), "hash", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist."),
        spec("hstrlen", 3, READONLY | FAST, FIRST_KEY, data!(hstrlen), "hash", "Returns the length of the value of a field."),
        spec("hscan", -3, READONLY, FIRST_KEY, data!(hscan), "hash", "Iterates over fields and values of a hash."),
        spec("hrandfield", -2, READONLY, FIRST_KEY, data!(hrandfield), "hash", "Returns one or more random fields from a hash."),
    ]
}

// ---------------------------------------------------------------------------
// Shared by the collection modules.

pub(crate) fn wrongtype() -> Frame {
    errors::err(errors::WRONGTYPE)
}

pub(crate) fn syntax() -> Frame {
    errors::err(errors::SYNTAX)
}

/// Applies `op` to `key` (see [`super::keys::apply`]).
pub(crate) fn apply(txn: &mut Txn<'_>, db: usize, key: &Bytes, op: KeyOp) -> Result<(), Frame> {
    super::keys::apply(txn, Mutation::key(db as u32, key.clone(), op))
}

pub(crate) fn resp3(ctx: &Ctx<'_>) -> bool {
    ctx.client.protocol == Protocol::Resp3
}

/// Field/value or member/score pairs: nested two-element arrays in RESP3,
/// one flat array in RESP2 (Redis's WITHSCORES / WITHVALUES shapes).
pub(crate) fn pairs_reply(pairs: Vec<(Frame, Frame)>, resp3: bool) -> Frame {
    if resp3 {
        Frame::Array(
            pairs
                .into_iter()
                .map(|(a, b)| Frame::Array(vec![a, b]))
                .collect(),
        )
    } else {
        let mut out = Vec::with_capacity(pairs.len() * 2);
        for (a, b) in pairs {
            out.push(a);
            out.push(b);
        }
        Frame::Array(out)
    }
}

/// The count of LPOP/RPOP/SPOP/ZPOPMIN/ZPOPMAX: Redis answers a negative and
/// a non-numeric count alike.
pub(crate) fn positive_count(arg: &[u8]) -> Result<u64, Frame> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(Frame::error("ERR value is out of range, must be positive")),
    }
}

/// The count of HRANDFIELD/SRANDMEMBER/ZRANDMEMBER (negative: repeats allowed).
pub(crate) fn random_count(arg: &[u8]) -> Result<i64, Frame> {
    let n = arg_i64(arg)?;
    if n == i64::MIN {
        return Err(Frame::error(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(n)
}

/// A negative sampling count is answered with that many elements; beyond
/// this the reply would be built in memory only to exhaust it, so it is
/// refused instead (Redis would try).
const MAX_REPEATED_SAMPLES: u64 = 1 << 20;

/// Positions to sample from a collection of `len` elements: distinct ones
/// for `count >= 0` (all of them when `count >= len`), `|count|` independent
/// draws otherwise.
pub(crate) fn random_positions(len: usize, count: i64) -> Result<Vec<usize>, Frame> {
    let mut rng = rand::thread_rng();
    if count >= 0 {
        let n = count as u64;
        if n >= len as u64 {
            return Ok((0..len).collect());
        }
        return Ok(rand::seq::index::sample(&mut rng, len, n as usize).into_vec());
    }
    let n = count.unsigned_abs();
    if n > MAX_REPEATED_SAMPLES {
        return Err(Frame::error("ERR value is out of range"));
    }
    if len == 0 {
        return Ok(Vec::new());
    }
    Ok((0..n).map(|_| rng.gen_range(0..len)).collect())
}

pub(crate) fn random_position(len: usize) -> Option<usize> {
    (len > 0).then(|| rand::thread_rng().gen_range(0..len))
}

/// Options of HSCAN/SSCAN/ZSCAN.
pub(crate) struct ScanOpts {
    pattern: Option<Bytes>,
    pub count: usize,
    pub novalues: bool,
}

impl ScanOpts {
    pub fn matches(&self, name: &[u8]) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|p| glob_match(p, name, false))
    }
}

pub(crate) fn scan_cursor(arg: &[u8]) -> Result<u64, Frame> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Frame::error("ERR invalid cursor"))
}

/// Parses the options after the cursor; `hash` allows NOVALUES.
pub(crate) fn scan_options(opts: &[Bytes], hash: bool) -> Result<ScanOpts, Frame> {
    const DEFAULT_COUNT: usize = 10;
    let mut o = ScanOpts {
        pattern: None,
        count: DEFAULT_COUNT,
        novalues: false,
    };
    let mut i = 0;
    while i < opts.len() {
        let has_value = i + 1 < opts.len();
        if is(&opts[i], "count") && has_value {
            let n = arg_i64(&opts[i + 1])?;
            if n < 1 {
                return Err(syntax());
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else if is(&opts[i], "match") && has_value {
            // `*` filters nothing; skip the matcher altogether.
            o.pattern = (opts[i + 1][..] != b"*"[..]).then(|| opts[i + 1].clone());
            i += 2;
        } else if is(&opts[i], "novalues") {
            if !hash {
                return Err(Frame::error(
                    "ERR NOVALUES option can only be used in HSCAN",
                ));
            }
            o.novalues = true;
            i += 1;
        } else {
            return Err(syntax());
        }
    }
    Ok(o)
}

/// True for a value Redis would hold in a compact encoding (listpack,
/// intset). Redis answers a scan of those in one call, and so do we.
pub(crate) fn scans_whole(v: &Value) -> bool {
    let len = match v {
        Value::Hash(h) => h.len(),
        Value::Set(s) => s.len(),
        Value::ZSet(z) => z.len(),
        _ => return false,
    };
    len <= INTSET_MAX_ENTRIES && matches!(v.encoding_name(), "listpack" | "intset")
}

/// Visits positions `0..len` of an index-ordered collection for one scan
/// call and returns the next cursor (0: done).
///
/// A cursor is "positions below it remain"; 0 starts at the end. Walking
/// downwards keeps SCAN's guarantee on an IndexMap/IndexSet, as in
/// `Db::scan`: removal moves the last element, already visited, into the
/// hole, so nothing present for the whole scan is missed.
pub(crate) fn scan_walk(
    len: usize,
    cursor: u64,
    count: usize,
    whole: bool,
    mut visit: impl FnMut(usize),
) -> u64 {
    if whole {
        (0..len).for_each(visit);
        return 0;
    }
    let mut pos = match cursor {
        0 => len,
        c => usize::try_from(c).unwrap_or(usize::MAX).min(len),
    };
    let mut seen = 0;
    while pos > 0 && seen < count {
        pos -= 1;
        visit(pos);
        seen += 1;
    }
    pos as u64
}

pub(crate) fn scan_reply(cursor: u64, items: Vec<Frame>) -> Frame {
    let mut b = itoa::Buffer::new();
    Frame::Array(vec![
        Frame::Bulk(Bytes::copy_from_slice(b.format(cursor).as_bytes())),
        Frame::Array(items),
    ])
}

// ---------------------------------------------------------------------------
// Hash commands.

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

/// HSET/HMSET: sets the pairs and returns how many fields are new.
fn set_fields(ctx: &Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Result<usize, Frame> {
    if !args.len().is_multiple_of(2) {
        return Err(errors::wrong_args(
            std::str::from_utf8(&args[0]).unwrap_or("hset"),
        ));
    }
    let db = ctx.db();
    let key = &args[1];
    let before = hash_len(txn, db, key)?;
    let pairs = args[2..]
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    apply(txn, db, key, KeyOp::HSet(pairs))?;
    Ok(hash_len(txn, db, key)?.saturating_sub(before))
}

fn hset(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(Frame::Integer(set_fields(ctx, txn, args)? as i64))
}

fn hmset(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    set_fields(ctx, txn, args)?;
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
        .map_or(Frame::Null, |v| Frame::Bulk(v.clone())))
}

fn hmget(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        args[2..]
            .iter()
            .map(|f| {
                h.and_then(|h| h.get(&f[..]))
                    .map_or(Frame::Null, |v| Frame::Bulk(v.clone()))
            })
            .collect(),
    ))
}

fn hgetall(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Map(
        h.into_iter()
            .flatten()
            .map(|(f, v)| (Frame::Bulk(f.clone()), Frame::Bulk(v.clone())))
            .collect(),
    ))
}

fn hkeys(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        h.into_iter()
            .flat_map(|h| h.keys())
            .map(|f| Frame::Bulk(f.clone()))
            .collect(),
    ))
}

fn hvals(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let h = read_hash(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        h.into_iter()
            .flat_map(|h| h.values())
            .map(|v| Frame::Bulk(v.clone()))
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
        h.and_then(|h| h.get(&args[2][..])).map_or(0, |v| v.len()) as i64,
    ))
}

fn hincrby(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let incr = arg_i64(&args[3])?;
    let cur = match read_hash(txn, db, &args[1])?.and_then(|h| h.get(&args[2][..])) {
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
    let incr = arg_f64(&args[3])?;
    if incr.is_infinite() {
        return Err(Frame::error("ERR value is NaN or Infinity"));
    }
    let cur = match read_hash(txn, db, &args[1])?.and_then(|h| h.get(&args[2][..])) {
        None => 0.0,
        Some(v) => parse_f64(v).ok_or_else(|| Frame::error("ERR hash value is not a float"))?,
    };
    let new = cur + incr;
    if !new.is_finite() {
        return Err(Frame::error("ERR increment would produce NaN or Infinity"));
    }
    let text = Bytes::from(format_float(new));
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
    let next = scan_walk(h.len(), cursor, opts.count, scans_whole(&e.value), |i| {
        if let Some((f, v)) = h.get_index(i) {
            if opts.matches(f) {
                items.push(Frame::Bulk(f.clone()));
                if !opts.novalues {
                    items.push(Frame::Bulk(v.clone()));
                }
            }
        }
    });
    Ok(scan_reply(next, items))
}

fn hrandfield(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    if args.len() == 2 {
        let h = read_hash(txn, db, &args[1])?;
        let field = h.and_then(|h| random_position(h.len()).and_then(|i| h.get_index(i)));
        return Ok(field.map_or(Frame::Null, |(f, _)| Frame::Bulk(f.clone())));
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
    let picks = random_positions(h.len(), count)?;
    let chosen = picks.into_iter().filter_map(|i| h.get_index(i));
    Ok(if withvalues {
        pairs_reply(
            chosen
                .map(|(f, v)| (Frame::Bulk(f.clone()), Frame::Bulk(v.clone())))
                .collect(),
            resp3,
        )
    } else {
        Frame::Array(chosen.map(|(f, _)| Frame::Bulk(f.clone())).collect())
    })
}
