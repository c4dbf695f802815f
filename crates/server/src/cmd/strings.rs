//! String commands: GET/SET and their variants, counters, ranges, MGET/MSET
//! and LCS.

use crate::command::{
    flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, ALL_ARGS_KEYS, FIRST_KEY, TWO_KEYS,
};
use crate::errors;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, Value};
use durakv_protocol::Frame;

use super::keys::apply;

const OFFSET_OUT_OF_RANGE: &str = "ERR offset is out of range";
const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
const DECREMENT_OVERFLOW: &str = "ERR decrement would overflow";
const NAN_OR_INFINITY: &str = "ERR increment would produce NaN or Infinity";
const LCS_NOT_STRINGS: &str = "ERR The specified keys must contain string values";
const LCS_LEN_AND_IDX: &str = "ERR If you want both the length and indexes, please just use IDX.";
const LCS_TOO_BIG: &str =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";

/// MSET and MSETNX: every other argument from 1 on is a key.
const PAIR_KEYS: Keys = Keys::Range {
    first: 1,
    last: -1,
    step: 2,
};
#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("get", 2, READONLY | FAST, FIRST_KEY, Handler::Data(get), "string", "Reads a string key's value."),
        spec("set", -3, WRITE | DENYOOM, FIRST_KEY, Handler::Data(set), "string", "Stores a string under a key, replacing any value of any type; options set a TTL or make it conditional."),
        spec("setnx", 3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(setnx), "string", "Stores a string under a key only if the key is absent."),
        spec("setex", 4, WRITE | DENYOOM, FIRST_KEY, Handler::Data(setex), "string", "Stores a string under a key with a time to live in seconds."),
        spec("psetex", 4, WRITE | DENYOOM, FIRST_KEY, Handler::Data(psetex), "string", "Stores a string under a key with a time to live in milliseconds."),
        spec("getset", 3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(getset), "string", "Stores a new string under a key and replies with the one it replaced."),
        spec("getdel", 2, WRITE | FAST, FIRST_KEY, Handler::Data(getdel), "string", "Reads a string key's value and deletes the key."),
        spec("getex", -2, WRITE | FAST, FIRST_KEY, Handler::Data(getex), "string", "Reads a string key's value and changes or clears its time to live."),
        spec("mget", -2, READONLY | FAST, ALL_ARGS_KEYS, Handler::Data(mget), "string", "Reads several string keys in one step."),
        spec("mset", -3, WRITE | DENYOOM, PAIR_KEYS, Handler::Data(mset), "string", "Stores several strings under their keys in one atomic step."),
        spec("msetnx", -3, WRITE | DENYOOM, PAIR_KEYS, Handler::Data(msetnx), "string", "Stores several strings atomically, only if none of the keys is present."),
        spec("incr", 2, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(incr), "string", "Adds 1 to a key's integer value, starting from 0 if it is absent."),
        spec("decr", 2, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(decr), "string", "Subtracts 1 from a key's integer value, starting from 0 if it is absent."),
        spec("incrby", 3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(incrby), "string", "Adds an integer to a key's value, starting from 0 if it is absent."),
        spec("decrby", 3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(decrby), "string", "Subtracts an integer from a key's value, starting from 0 if it is absent."),
        spec("incrbyfloat", 3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(incrbyfloat), "string", "Adds a decimal number to a key's value, starting from 0 if it is absent."),
        spec("append", 3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(append), "string", "Adds bytes to the end of a string key, creating it if needed."),
        spec("strlen", 2, READONLY | FAST, FIRST_KEY, Handler::Data(strlen), "string", "Counts the bytes of a string key's value."),
        spec("getrange", 4, READONLY, FIRST_KEY, Handler::Data(getrange), "string", "Reads the bytes of a string between two offsets."),
        spec("substr", 4, READONLY, FIRST_KEY, Handler::Data(getrange), "string", "Old name for GETRANGE."),
        spec("setrange", 4, WRITE | DENYOOM, FIRST_KEY, Handler::Data(setrange), "string", "Overwrites a string's bytes from an offset on, padding or creating it as needed."),
        spec("lcs", -3, READONLY, TWO_KEYS, Handler::Data(lcs), "string", "Computes two string keys' longest common subsequence."),
    ]
}

/// The string at `key`: Ok(None) if missing, Err(WRONGTYPE) if not a string.
pub fn read_string(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<Bytes>, Frame> {
    Ok(super::read_as(txn, db, key, Value::as_str)?.map(|s| s.to_bytes()))
}

fn get(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    match read_string(txn, ctx.db(), &args[1]) {
        Ok(Some(v)) => Ok(Frame::Bulk(v)),
        Ok(None) => Ok(Frame::Null),
        Err(e) => Err(e),
    }
}

/// Converts a relative or absolute expiry argument to absolute unix ms.
/// `unit_ms` is 1000 for seconds, 1 for milliseconds; `absolute` for EXAT/PXAT.
pub fn expire_arg(
    arg: &[u8],
    unit_ms: i64,
    absolute: bool,
    now_ms: u64,
    cmd: &str,
) -> Result<u64, Frame> {
    let n = arg_i64(arg)?;
    if n <= 0 {
        return Err(errors::invalid_expire(cmd));
    }
    let ms = n
        .checked_mul(unit_ms)
        .ok_or_else(|| errors::invalid_expire(cmd))?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now_ms as i64)
            .ok_or_else(|| errors::invalid_expire(cmd))?
    };
    Ok(at as u64)
}

/// SET's and GETEX's expiry options: (milliseconds per unit, absolute).
fn expire_option(a: &[u8]) -> Option<(i64, bool)> {
    if is(a, "ex") {
        Some((1000, false))
    } else if is(a, "px") {
        Some((1, false))
    } else if is(a, "exat") {
        Some((1000, true))
    } else if is(a, "pxat") {
        Some((1, true))
    } else {
        None
    }
}

/// An expiry option after another of a different unit: a syntax error in
/// Redis, where the same option again just takes its last value.
fn other_unit(given: Option<(&Bytes, (i64, bool))>, unit: (i64, bool)) -> bool {
    given.is_some_and(|(_, u)| u != unit)
}

fn set(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let key = &args[1];
    let (mut nx, mut xx, mut get_old, mut keepttl) = (false, false, false, false);
    // Redis checks the options' syntax before their values.
    let mut expire_given = None;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        if let Some(unit) = expire_option(a) {
            let Some(v) = args.get(i + 1) else {
                return Err(errors::err(errors::SYNTAX));
            };
            if keepttl || other_unit(expire_given, unit) {
                return Err(errors::err(errors::SYNTAX));
            }
            expire_given = Some((v, unit));
            i += 2;
            continue;
        }
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "get") {
            get_old = true;
        } else if is(a, "keepttl") && expire_given.is_none() {
            keepttl = true;
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
        i += 1;
    }
    let expire = match expire_given {
        Some((v, (unit_ms, absolute))) => {
            ExpireMode::At(expire_arg(v, unit_ms, absolute, txn.now_ms, "set")?)
        }
        None if keepttl => ExpireMode::Keep,
        None => ExpireMode::Clear,
    };
    let old = if get_old {
        read_string(txn, db, key)?
    } else {
        None
    };
    // A plain SET's reply does not depend on the old value: no lookup.
    let exists = (nx || xx) && txn.get(db, key).is_some();
    if (nx && exists) || (xx && !exists) {
        return if get_old {
            Ok(old.map(Frame::Bulk).unwrap_or(Frame::Null))
        } else {
            Ok(Frame::Null)
        };
    }
    let m = Mutation::key(
        db as u32,
        key.clone(),
        KeyOp::SetString {
            value: args[2].clone(),
            expire,
        },
    );
    apply(txn, m)?;
    if get_old {
        Ok(old.map(Frame::Bulk).unwrap_or(Frame::Null))
    } else {
        Ok(Frame::ok())
    }
}

fn set_string(
    txn: &mut Txn<'_>,
    db: usize,
    key: &Bytes,
    value: Bytes,
    expire: ExpireMode,
) -> Result<(), Frame> {
    apply(
        txn,
        Mutation::key(db as u32, key.clone(), KeyOp::SetString { value, expire }),
    )
}

fn bulk_or_null(v: Option<Bytes>) -> Frame {
    v.map(Frame::Bulk).unwrap_or(Frame::Null)
}

fn setnx(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    if txn.get(db, &args[1]).is_some() {
        return Ok(Frame::Integer(0));
    }
    match set_string(txn, db, &args[1], args[2].clone(), ExpireMode::Clear) {
        Ok(()) => Ok(Frame::Integer(1)),
        Err(e) => Err(e),
    }
}

fn setex_generic(
    ctx: &Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    unit_ms: i64,
    cmd: &str,
) -> Frame {
    let at = match expire_arg(&args[2], unit_ms, false, txn.now_ms, cmd) {
        Ok(at) => at,
        Err(e) => return e,
    };
    match set_string(txn, ctx.db(), &args[1], args[3].clone(), ExpireMode::At(at)) {
        Ok(()) => Frame::ok(),
        Err(e) => e,
    }
}

fn setex(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(setex_generic(ctx, txn, args, 1000, "setex"))
}

fn psetex(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(setex_generic(ctx, txn, args, 1, "psetex"))
}

fn getset(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let old = read_string(txn, db, &args[1])?;
    match set_string(txn, db, &args[1], args[2].clone(), ExpireMode::Clear) {
        Ok(()) => Ok(bulk_or_null(old)),
        Err(e) => Err(e),
    }
}

fn getdel(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let old = match read_string(txn, db, &args[1]) {
        Ok(Some(v)) => v,
        Ok(None) => return Ok(Frame::Null),
        Err(e) => return Err(e),
    };
    match apply(txn, Mutation::key(db as u32, args[1].clone(), KeyOp::Del)) {
        Ok(()) => Ok(Frame::Bulk(old)),
        Err(e) => Err(e),
    }
}

/// What GETEX does to the TTL.
enum GetexAction {
    Nothing,
    Persist,
    /// Absolute unix ms; `absolute` is true for EXAT/PXAT, which may lie in the past.
    At {
        ms: u64,
        absolute: bool,
    },
}

fn getex(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let mut action = GetexAction::Nothing;
    // Redis checks the options' syntax before their values.
    let mut expire_given = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "persist") {
            if expire_given.is_some() {
                return Err(errors::err(errors::SYNTAX));
            }
            action = GetexAction::Persist;
            i += 1;
            continue;
        }
        let (Some(unit), Some(v)) = (expire_option(a), args.get(i + 1)) else {
            return Err(errors::err(errors::SYNTAX));
        };
        if matches!(action, GetexAction::Persist) || other_unit(expire_given, unit) {
            return Err(errors::err(errors::SYNTAX));
        }
        expire_given = Some((v, unit));
        i += 2;
    }
    // Then the key: a missing key is nil and another type WRONGTYPE, even
    // with an expire value that would be refused.
    let db = ctx.db();
    let key = &args[1];
    let value = match read_string(txn, db, key) {
        Ok(Some(v)) => v,
        Ok(None) => return Ok(Frame::Null),
        Err(e) => return Err(e),
    };
    if let Some((v, (unit_ms, absolute))) = expire_given {
        let ms = expire_arg(v, unit_ms, absolute, txn.now_ms, "getex")?;
        action = GetexAction::At { ms, absolute };
    }
    let op = match action {
        GetexAction::Nothing => None,
        GetexAction::Persist => {
            let has_ttl = txn.get(db, key).is_some_and(|e| e.has_ttl());
            has_ttl.then_some(KeyOp::Expire { at_ms: 0 })
        }
        GetexAction::At { ms, absolute } if absolute && super::ttl_already_over(ctx, txn, ms) => {
            Some(KeyOp::Del)
        }
        GetexAction::At { ms, .. } => Some(KeyOp::Expire { at_ms: ms }),
    };
    if let Some(op) = op {
        apply(txn, Mutation::key(db as u32, key.clone(), op))?;
    }
    Ok(Frame::Bulk(value))
}

fn mget(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let out = args[1..]
        .iter()
        .map(|k| match txn.get(db, k).map(|e| &e.value) {
            Some(Value::Str(s)) => Frame::Bulk(s.to_bytes()),
            _ => Frame::Null,
        })
        .collect();
    Ok(Frame::Array(out))
}

fn mset_all(ctx: &Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Result<(), Frame> {
    let db = ctx.db() as u32;
    let muts = args[1..]
        .chunks_exact(2)
        .map(|pair| {
            let op = KeyOp::SetString {
                value: pair[1].clone(),
                expire: ExpireMode::Clear,
            };
            Mutation::key(db, pair[0].clone(), op)
        })
        .collect();
    super::keys::apply_all(txn, muts)
}

fn mset(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return Err(errors::wrong_args("mset"));
    }
    match mset_all(ctx, txn, args) {
        Ok(()) => Ok(Frame::ok()),
        Err(e) => Err(e),
    }
}

fn msetnx(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return Err(errors::wrong_args("msetnx"));
    }
    let db = ctx.db();
    if args[1..]
        .iter()
        .step_by(2)
        .any(|k| txn.get(db, k).is_some())
    {
        return Ok(Frame::Integer(0));
    }
    match mset_all(ctx, txn, args) {
        Ok(()) => Ok(Frame::Integer(1)),
        Err(e) => Err(e),
    }
}

/// INCR, DECR, INCRBY, DECRBY. The result is logged as the new value, and
/// the key keeps its TTL.
fn incr_by(ctx: &Ctx<'_>, txn: &mut Txn<'_>, key: &Bytes, by: i64) -> Frame {
    let db = ctx.db();
    let current = match read_string(txn, db, key) {
        Ok(None) => 0,
        Ok(Some(s)) => match parse_i64(&s) {
            Some(n) => n,
            None => return errors::err(errors::NOT_INTEGER),
        },
        Err(e) => return e,
    };
    let Some(next) = current.checked_add(by) else {
        return errors::err(errors::OVERFLOW);
    };
    let mut buf = itoa::Buffer::new();
    let value = Bytes::copy_from_slice(buf.format(next).as_bytes());
    match set_string(txn, db, key, value, ExpireMode::Keep) {
        Ok(()) => Frame::Integer(next),
        Err(e) => e,
    }
}

fn incr(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(incr_by(ctx, txn, &args[1], 1))
}

fn decr(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(incr_by(ctx, txn, &args[1], -1))
}

fn incrby(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    match arg_i64(&args[2]) {
        Ok(by) => Ok(incr_by(ctx, txn, &args[1], by)),
        Err(e) => Err(e),
    }
}

fn decrby(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    match arg_i64(&args[2]) {
        Ok(i64::MIN) => Err(Frame::error(DECREMENT_OVERFLOW)),
        Ok(by) => Ok(incr_by(ctx, txn, &args[1], -by)),
        Err(e) => Err(e),
    }
}

fn incrbyfloat(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let key = &args[1];
    let current = match read_string(txn, db, key) {
        Ok(v) => v.unwrap_or_else(|| Bytes::from_static(b"0")),
        Err(e) => return Err(e),
    };
    if !crate::decimal::is_long_double(&current) || !crate::decimal::is_long_double(&args[2]) {
        return Err(errors::err(errors::NOT_FLOAT));
    }
    let text =
        crate::decimal::sum(&current, &args[2]).ok_or_else(|| Frame::error(NAN_OR_INFINITY))?;
    let value = Bytes::from(text);
    set_string(txn, db, key, value.clone(), ExpireMode::Keep)?;
    Ok(Frame::Bulk(value))
}

/// Refuses a string that would exceed `proto-max-bulk-len`.
fn check_length(ctx: &Ctx<'_>, len: u64) -> Result<(), Frame> {
    if len > super::string_limit(ctx) {
        return Err(Frame::error(STRING_TOO_LONG));
    }
    Ok(())
}

fn append(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let old_len = match read_string(txn, db, &args[1]) {
        Ok(v) => v.map_or(0, |s| s.len()),
        Err(e) => return Err(e),
    };
    let total = old_len + args[2].len();
    check_length(ctx, total as u64)?;
    match apply(
        txn,
        Mutation::key(db as u32, args[1].clone(), KeyOp::Append(args[2].clone())),
    ) {
        Ok(()) => Ok(Frame::Integer(total as i64)),
        Err(e) => Err(e),
    }
}

fn strlen(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    match read_string(txn, ctx.db(), &args[1]) {
        Ok(v) => Ok(Frame::Integer(v.map_or(0, |s| s.len() as i64))),
        Err(e) => Err(e),
    }
}

/// GETRANGE (and SUBSTR) with Redis 7's clamping: both ends negative and
/// reversed is empty; otherwise negative ends count from the end and are
/// clamped to 0.
fn getrange(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (start, end) = match (arg_i64(&args[2]), arg_i64(&args[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    let s = match read_string(txn, ctx.db(), &args[1]) {
        Ok(v) => v.unwrap_or_default(),
        Err(e) => return Err(e),
    };
    let empty = Frame::Bulk(Bytes::new());
    if start < 0 && end < 0 && start > end {
        return Ok(empty);
    }
    let len = s.len() as i64;
    let start = if start < 0 {
        len.saturating_add(start)
    } else {
        start
    }
    .max(0);
    let end = if end < 0 {
        len.saturating_add(end)
    } else {
        end
    }
    .max(0);
    let end = end.min(len - 1);
    if len == 0 || start > end {
        return Ok(empty);
    }
    Ok(Frame::Bulk(s.slice(start as usize..=end as usize)))
}

fn setrange(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let offset = match arg_i64(&args[2]) {
        Ok(n) if n < 0 => return Err(Frame::error(OFFSET_OUT_OF_RANGE)),
        Ok(n) => n as u64,
        Err(e) => return Err(e),
    };
    let db = ctx.db();
    let data = &args[3];
    let old_len = match read_string(txn, db, &args[1]) {
        Ok(v) => v.map_or(0, |s| s.len() as u64),
        Err(e) => return Err(e),
    };
    if data.is_empty() {
        return Ok(Frame::Integer(old_len as i64));
    }
    let end = offset.saturating_add(data.len() as u64);
    check_length(ctx, end)?;
    let op = KeyOp::SetRange {
        offset,
        data: data.clone(),
    };
    match apply(txn, Mutation::key(db as u32, args[1].clone(), op)) {
        Ok(()) => Ok(Frame::Integer(old_len.max(end) as i64)),
        Err(e) => Err(e),
    }
}

#[derive(Default)]
struct LcsOptions {
    len: bool,
    idx: bool,
    min_match_len: u64,
    with_match_len: bool,
}

fn parse_lcs_options(opts: &[Bytes]) -> Result<LcsOptions, Frame> {
    let mut o = LcsOptions::default();
    let mut i = 0;
    while i < opts.len() {
        let a = &opts[i];
        if is(a, "idx") {
            o.idx = true;
        } else if is(a, "len") {
            o.len = true;
        } else if is(a, "withmatchlen") {
            o.with_match_len = true;
        } else if is(a, "minmatchlen") && i + 1 < opts.len() {
            o.min_match_len = arg_i64(&opts[i + 1])?.max(0) as u64;
            i += 1;
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
        i += 1;
    }
    if o.idx && o.len {
        return Err(Frame::error(LCS_LEN_AND_IDX));
    }
    Ok(o)
}

/// LCS: longest common subsequence by the classic dynamic programme, whose
/// table (like Redis's) must fit in `proto-max-bulk-len` bytes of u32s.
fn lcs(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let mut texts = [Bytes::new(), Bytes::new()];
    for (t, key) in texts.iter_mut().zip(&args[1..3]) {
        match txn.get(db, key).map(|e| &e.value) {
            None => {}
            Some(Value::Str(s)) => *t = s.to_bytes(),
            Some(_) => return Err(Frame::error(LCS_NOT_STRINGS)),
        }
    }
    let opts = parse_lcs_options(&args[3..])?;
    let [a, b] = texts;
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u128 + 1) * (blen as u128 + 1);
    if cells * 4 > u128::from(ctx.shared.config.read().proto_max_bulk_len) {
        return Err(Frame::error(LCS_TOO_BIG));
    }
    let width = blen + 1;
    let mut dp = vec![0u32; cells as usize];
    for i in 1..=alen {
        for j in 1..=blen {
            dp[i * width + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * width + j - 1] + 1
            } else {
                dp[(i - 1) * width + j].max(dp[i * width + j - 1])
            };
        }
    }
    let total = dp[alen * width + blen];
    if opts.len {
        return Ok(Frame::Integer(i64::from(total)));
    }
    // Walk back from the end, collecting the subsequence and, for IDX, the
    // runs that are contiguous in both strings (reported last run first).
    let mut out = vec![0u8; total as usize];
    let mut k = total as usize;
    let mut matches = Vec::new();
    let mut run: Option<(usize, usize, usize, usize)> = None;
    let emit = |run: (usize, usize, usize, usize), matches: &mut Vec<Frame>| {
        let (a_start, a_end, b_start, b_end) = run;
        let len = (a_end - a_start + 1) as u64;
        if len >= opts.min_match_len {
            let pair = |s: usize, e: usize| {
                Frame::Array(vec![Frame::Integer(s as i64), Frame::Integer(e as i64)])
            };
            let mut m = vec![pair(a_start, a_end), pair(b_start, b_end)];
            if opts.with_match_len {
                m.push(Frame::Integer(len as i64));
            }
            matches.push(Frame::Array(m));
        }
    };
    let (mut i, mut j) = (alen, blen);
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            k -= 1;
            out[k] = a[i - 1];
            run = match run {
                Some((as_, ae, bs, be)) if as_ == i && bs == j => Some((i - 1, ae, j - 1, be)),
                Some(r) => {
                    emit(r, &mut matches);
                    Some((i - 1, i - 1, j - 1, j - 1))
                }
                None => Some((i - 1, i - 1, j - 1, j - 1)),
            };
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * width + j] > dp[i * width + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if let Some(r) = run.take() {
                emit(r, &mut matches);
            }
        }
    }
    if let Some(r) = run {
        emit(r, &mut matches);
    }
    if !opts.idx {
        return Ok(Frame::Bulk(Bytes::from(out)));
    }
    Ok(Frame::Map(vec![
        (Frame::bulk_from_str("matches"), Frame::Array(matches)),
        (
            Frame::bulk_from_str("len"),
            Frame::Integer(i64::from(total)),
        ),
    ]))
}
