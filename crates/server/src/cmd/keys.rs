//! Generic keyspace commands: DEL, EXISTS, TYPE, the EXPIRE and TTL
//! families, RENAME, COPY, MOVE, KEYS, SCAN, RANDOMKEY, TOUCH, OBJECT,
//! DBSIZE, FLUSHDB, FLUSHALL and SWAPDB.

use super::subcommands::SubSpec;
use crate::command::{
    flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, ALL_ARGS_KEYS, FIRST_KEY, TWO_KEYS,
};
use crate::errors;
use crate::glob::glob_match;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::{KeyOp, Mutation};
use durakv_engine::shard::Shard;
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, Value, ValueType};
use durakv_protocol::Frame;

const SOURCE_AND_DESTINATION_SAME: &str = "ERR source and destination objects are the same";
const INT_OUT_OF_RANGE: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";
const INVALID_CURSOR: &str = "ERR invalid cursor";
const INVALID_FIRST_DB: &str = "ERR invalid first DB index";
const INVALID_SECOND_DB: &str = "ERR invalid second DB index";
const LFU_NOT_SELECTED: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
/// OBJECT IDLETIME under an LFU policy (Redis 7.0 and 7.2 alike).
const LFU_SELECTED: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// Redis's default SCAN COUNT.
const DEFAULT_SCAN_COUNT: i64 = 10;
/// Redis shares the integer objects 0..10000 and reports them with this
/// refcount (OBJ_SHARED_REFCOUNT).
const SHARED_INTEGERS: i64 = 10_000;
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Shard picks RANDOMKEY makes before concluding that every key is expired.
const RANDOM_KEY_ROUNDS: usize = 8;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("del", -2, WRITE, ALL_ARGS_KEYS, Handler::Data(del), "generic", "Drops the given keys and counts those that existed."),
        spec("unlink", -2, WRITE | FAST, ALL_ARGS_KEYS, Handler::Data(del), "generic", "Removes the given keys, exactly as DEL does."),
        spec("exists", -2, READONLY | FAST, ALL_ARGS_KEYS, Handler::Data(exists), "generic", "Counts how many of the given keys are present."),
        spec("type", 2, READONLY | FAST, FIRST_KEY, Handler::Data(type_cmd), "generic", "Names the data type held at a key."),
        spec("expire", -3, WRITE | FAST, FIRST_KEY, Handler::Data(expire), "generic", "Makes a key expire after a number of seconds."),
        spec("pexpire", -3, WRITE | FAST, FIRST_KEY, Handler::Data(pexpire), "generic", "Makes a key expire after a number of milliseconds."),
        spec("expireat", -3, WRITE | FAST, FIRST_KEY, Handler::Data(expireat), "generic", "Makes a key expire at a Unix time in seconds."),
        spec("pexpireat", -3, WRITE | FAST, FIRST_KEY, Handler::Data(pexpireat), "generic", "Makes a key expire at a Unix time in milliseconds."),
        spec("ttl", 2, READONLY | FAST, FIRST_KEY, Handler::Data(ttl), "generic", "Gives how many seconds remain before a key expires."),
        spec("pttl", 2, READONLY | FAST, FIRST_KEY, Handler::Data(pttl), "generic", "Gives how many milliseconds remain before a key expires."),
        spec("expiretime", 2, READONLY | FAST, FIRST_KEY, Handler::Data(expiretime), "generic", "Gives the Unix time in seconds at which a key expires."),
        spec("pexpiretime", 2, READONLY | FAST, FIRST_KEY, Handler::Data(pexpiretime), "generic", "Gives the Unix time in milliseconds at which a key expires."),
        spec("persist", 2, WRITE | FAST, FIRST_KEY, Handler::Data(persist), "generic", "Makes a key never expire."),
        spec("rename", 3, WRITE, TWO_KEYS, Handler::Data(rename), "generic", "Gives a key a new name, replacing any key there."),
        spec("renamenx", 3, WRITE | FAST, TWO_KEYS, Handler::Data(renamenx), "generic", "Gives a key a new name only if that name is free."),
        spec("copy", -3, WRITE | DENYOOM, TWO_KEYS, Handler::Data(copy), "generic", "Duplicates a key's value under another name."),
        spec("move", 3, WRITE | FAST, FIRST_KEY, Handler::Data(move_cmd), "generic", "Puts a key into another database unless it is already there."),
        spec("keys", 2, READONLY, Keys::All, Handler::Data(keys), "generic", "Lists the key names matching a glob pattern."),
        spec("scan", -2, READONLY, Keys::All, Handler::Data(scan), "generic", "Walks the key names with a cursor."),
        spec("randomkey", 1, READONLY, Keys::All, Handler::Data(randomkey), "generic", "Picks a key name at random."),
        spec("touch", -2, READONLY | FAST, ALL_ARGS_KEYS, Handler::Data(touch), "generic", "Marks keys as just accessed and counts those present."),
        spec("object", -2, READONLY, Keys::Custom(object_keys), Handler::Data(object), "generic", "Parent of the subcommands that show how a value is held."),
        spec("dbsize", 1, READONLY | FAST, Keys::All, Handler::Data(dbsize), "server", "Gives the selected database's key count."),
        spec("flushdb", -1, WRITE, Keys::All, Handler::Data(flushdb), "server", "Empties the selected database."),
        spec("flushall", -1, WRITE, Keys::All, Handler::Data(flushall), "server", "Empties every database."),
        spec("swapdb", 3, WRITE | FAST, Keys::All, Handler::Data(swapdb), "server", "Exchanges two databases' contents."),
    ]
}

/// Applies `m`, turning the engine's refusal (a record over the log's
/// limit, or a bug in the command) into an error reply.
pub fn apply(txn: &mut Txn<'_>, m: Mutation) -> Result<(), Frame> {
    txn.apply(m).map_err(|e| errors::commit_error(&e))
}

/// Applies the mutations of one command together: all or none.
pub fn apply_all(txn: &mut Txn<'_>, muts: Vec<Mutation>) -> Result<(), Frame> {
    txn.apply_all(muts).map_err(|e| errors::commit_error(&e))
}

fn reply_of(r: Result<(), Frame>, ok: Frame) -> Frame {
    match r {
        Ok(()) => ok,
        Err(e) => e,
    }
}

/// A database index argument: an integer in C `int` range (with Redis's
/// errors for each), then one of the configured databases.
pub(super) fn db_index_arg(ctx: &Ctx<'_>, arg: &[u8]) -> Result<usize, Frame> {
    let n = arg_i64(arg)?;
    if i32::try_from(n).is_err() {
        return Err(Frame::error(INT_OUT_OF_RANGE));
    }
    let dbs = ctx.shared.store.keyspace.num_dbs();
    usize::try_from(n)
        .ok()
        .filter(|&i| i < dbs)
        .ok_or_else(|| errors::err(errors::DB_INDEX_OUT_OF_RANGE))
}

fn del(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let mut removed = 0;
    for key in &args[1..] {
        if txn.get(db, key).is_none() {
            continue;
        }
        apply(txn, Mutation::key(db as u32, key.clone(), KeyOp::Del))?;
        removed += 1;
    }
    Ok(Frame::Integer(removed))
}

/// EXISTS leaves access times alone; TOUCH is the read that updates them.
fn count_existing(ctx: &Ctx<'_>, txn: &mut Txn<'_>, keys: &[Bytes], touch: bool) -> Frame {
    let db = ctx.db();
    let n = keys
        .iter()
        .filter(|k| {
            if touch {
                txn.get(db, k).is_some()
            } else {
                txn.get_untouched(db, k).is_some()
            }
        })
        .count();
    Frame::Integer(n as i64)
}

fn exists(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(count_existing(ctx, txn, &args[1..], false))
}

fn touch(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    // TOUCH counts as an access even for a CLIENT NO-TOUCH client: it is
    // how such a client asks for one.
    let no_touch = txn.no_touch();
    txn.set_no_touch(false);
    let n = count_existing(ctx, txn, &args[1..], true);
    txn.set_no_touch(no_touch);
    Ok(n)
}

fn type_cmd(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    match txn.get_untouched(ctx.db(), &args[1]) {
        Some(e) => Ok(Frame::simple(e.value.value_type().name())),
        None => Ok(Frame::simple("none")),
    }
}

#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_expire_flags(opts: &[Bytes]) -> Result<ExpireFlags, Frame> {
    let mut f = ExpireFlags::default();
    for opt in opts {
        if is(opt, "nx") {
            f.nx = true;
        } else if is(opt, "xx") {
            f.xx = true;
        } else if is(opt, "gt") {
            f.gt = true;
        } else if is(opt, "lt") {
            f.lt = true;
        } else {
            return Err(Frame::error(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(Frame::error(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if f.gt && f.lt {
        return Err(Frame::error(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(f)
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT. Like Redis, negative times are
/// allowed and only overflow is an error; a time not in the future deletes
/// the key.
fn expire_generic(
    ctx: &Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    unit_ms: i64,
    relative: bool,
    cmd: &str,
) -> Frame {
    let flags = match parse_expire_flags(&args[3..]) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let n = match arg_i64(&args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let base = if relative { txn.now_ms as i64 } else { 0 };
    let Some(when) = n.checked_mul(unit_ms).and_then(|w| w.checked_add(base)) else {
        return errors::invalid_expire(cmd);
    };
    let db = ctx.db();
    let key = &args[1];
    let Some(current) = txn.expire_at(db, key, true) else {
        return Frame::Integer(0);
    };
    // A key without a TTL counts as expiring never: GT can't beat it, LT always does.
    let has_ttl = current != 0;
    let refused = (flags.nx && has_ttl)
        || (flags.xx && !has_ttl)
        || (flags.gt && (!has_ttl || when <= current as i64))
        || (flags.lt && has_ttl && when >= current as i64);
    if refused {
        return Frame::Integer(0);
    }
    // `when` > 0 here for the primary's stream: Redis sends absolute times.
    let op = if when <= 0 || super::ttl_already_over(ctx, txn, when as u64) {
        KeyOp::Del
    } else {
        KeyOp::Expire { at_ms: when as u64 }
    };
    reply_of(
        apply(txn, Mutation::key(db as u32, key.clone(), op)),
        Frame::Integer(1),
    )
}

fn expire(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(expire_generic(ctx, txn, args, 1000, true, "expire"))
}

fn pexpire(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(expire_generic(ctx, txn, args, 1, true, "pexpire"))
}

fn expireat(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(expire_generic(ctx, txn, args, 1000, false, "expireat"))
}

fn pexpireat(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(expire_generic(ctx, txn, args, 1, false, "pexpireat"))
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for a missing key, -1 without a
/// TTL. Seconds are rounded to nearest, as Redis does.
fn ttl_generic(ctx: &Ctx<'_>, txn: &mut Txn<'_>, key: &[u8], in_ms: bool, absolute: bool) -> Frame {
    let now = txn.now_ms;
    let Some(at) = txn.expire_at(ctx.db(), key, false) else {
        return Frame::Integer(-2);
    };
    if at == 0 {
        return Frame::Integer(-1);
    }
    let ms = if absolute { at } else { at.saturating_sub(now) };
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    Frame::Integer(if in_ms {
        ms
    } else {
        ms.saturating_add(500) / 1000
    })
}

fn ttl(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(ttl_generic(ctx, txn, &args[1], false, false))
}

fn pttl(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(ttl_generic(ctx, txn, &args[1], true, false))
}

fn expiretime(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(ttl_generic(ctx, txn, &args[1], false, true))
}

fn pexpiretime(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(ttl_generic(ctx, txn, &args[1], true, true))
}

fn persist(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let key = &args[1];
    match txn.get(db, key) {
        Some(e) if e.has_ttl() => {}
        _ => return Ok(Frame::Integer(0)),
    }
    let m = Mutation::key(db as u32, key.clone(), KeyOp::Expire { at_ms: 0 });
    Ok(reply_of(apply(txn, m), Frame::Integer(1)))
}

/// Moves `src` of database `src_db` to `dst` of `dst_db` (overwriting it),
/// keeping its TTL; with `keep_source` it copies instead.
fn relocate(
    txn: &mut Txn<'_>,
    src_db: usize,
    src: &Bytes,
    dst_db: usize,
    dst: &Bytes,
    keep_source: bool,
) -> Result<(), Frame> {
    let Some((e, expire_at_ms)) = txn.get_with_expiry(src_db, src, true) else {
        return Ok(());
    };
    // The whole value, never a reference to the source: the source may be
    // in a database the log does not cover.
    let op = KeyOp::Restore {
        value: e.value.clone(),
        expire_at_ms,
    };
    let mut muts = vec![Mutation::key(dst_db as u32, dst.clone(), op)];
    if !keep_source {
        muts.push(Mutation::key(src_db as u32, src.clone(), KeyOp::Del));
    }
    apply_all(txn, muts)
}

fn rename_generic(ctx: &Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], nx: bool) -> Frame {
    let db = ctx.db();
    let (src, dst) = (&args[1], &args[2]);
    if txn.get(db, src).is_none() {
        return errors::err(errors::NO_SUCH_KEY);
    }
    let (done, refused) = if nx {
        (Frame::Integer(1), Frame::Integer(0))
    } else {
        (Frame::ok(), Frame::ok())
    };
    if src == dst {
        return refused;
    }
    if nx && txn.get(db, dst).is_some() {
        return refused;
    }
    reply_of(relocate(txn, db, src, db, dst, false), done)
}

fn rename(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(rename_generic(ctx, txn, args, false))
}

fn renamenx(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(rename_generic(ctx, txn, args, true))
}

fn copy(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let src_db = ctx.db();
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "db") && i + 1 < args.len() {
            dst_db = db_index_arg(ctx, &args[i + 1])?;
            i += 1;
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
        i += 1;
    }
    let (src, dst) = (&args[1], &args[2]);
    if src_db == dst_db && src == dst {
        return Err(Frame::error(SOURCE_AND_DESTINATION_SAME));
    }
    if txn.get(src_db, src).is_none() {
        return Ok(Frame::Integer(0));
    }
    if !replace && txn.get(dst_db, dst).is_some() {
        return Ok(Frame::Integer(0));
    }
    Ok(reply_of(
        relocate(txn, src_db, src, dst_db, dst, true),
        Frame::Integer(1),
    ))
}

fn move_cmd(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let src_db = ctx.db();
    let dst_db = db_index_arg(ctx, &args[2])?;
    if src_db == dst_db {
        return Err(Frame::error(SOURCE_AND_DESTINATION_SAME));
    }
    let key = &args[1];
    if txn.get(src_db, key).is_none() || txn.get(dst_db, key).is_some() {
        return Ok(Frame::Integer(0));
    }
    Ok(reply_of(
        relocate(txn, src_db, key, dst_db, key, false),
        Frame::Integer(1),
    ))
}

fn keys(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let db = ctx.db();
    let now = txn.now_ms;
    let pattern = &args[1][..];
    let everything = pattern == b"*";
    let mut out = Vec::new();
    txn.depend_on_db(db);
    for shard in txn.shards_mut() {
        let d = &shard.dbs[db];
        for (k, e) in d.iter() {
            if !d.is_expired(k, e, now) && (everything || glob_match(pattern, k, false)) {
                out.push(Frame::Bulk(k.to_bytes()));
            }
        }
    }
    Ok(Frame::Array(out))
}

/// Parses a SCAN cursor as Redis's `strtoul` does: decimal, optional sign
/// (a negative cursor wraps), empty meaning 0; anything else is invalid.
pub(crate) fn parse_cursor(b: &[u8]) -> Option<u64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    // A sign alone converts nothing, so strtoul stops at it.
    if !digits.iter().all(u8::is_ascii_digit) || (digits.is_empty() && !b.is_empty()) {
        return None;
    }
    let n = if digits.is_empty() {
        0
    } else {
        std::str::from_utf8(digits).ok()?.parse::<u64>().ok()?
    };
    Some(if neg { n.wrapping_neg() } else { n })
}

/// SCAN. The cursor packs (position, shard) as `position * shards + shard`,
/// where the position is [`Db::scan`](durakv_engine::db::Db::scan)'s
/// downward cursor within the shard and 0 means "start this shard from the
/// top". Shards are walked in index order, so cursor 0 starts the whole
/// scan and is returned only once the last shard is done.
fn scan(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let Some(cursor) = parse_cursor(&args[1]) else {
        return Err(Frame::error(INVALID_CURSOR));
    };
    let mut count = DEFAULT_SCAN_COUNT;
    let mut pattern: Option<&[u8]> = None;
    // Some(None): a TYPE no value can have, which (as in Redis 7) matches nothing.
    let mut wanted_type: Option<Option<ValueType>> = None;
    let mut i = 2;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return Err(errors::err(errors::SYNTAX));
        };
        if is(&args[i], "count") {
            count = arg_i64(value)?;
            if count < 1 {
                return Err(errors::err(errors::SYNTAX));
            }
        } else if is(&args[i], "match") {
            pattern = (&value[..] != b"*").then_some(&value[..]);
        } else if is(&args[i], "type") {
            wanted_type = Some(ValueType::from_name(value));
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
        i += 2;
    }
    let db = ctx.db();
    let now = txn.now_ms;
    let durable = ctx.shared.durable_lsn();
    let mut shards: Vec<&mut Shard> = txn.shards_mut().collect();
    let n = shards.len() as u64;
    if n == 0 {
        return Ok(Frame::Array(vec![
            Frame::bulk_from_str("0"),
            Frame::Array(Vec::new()),
        ]));
    }
    let mut s = (cursor % n) as usize;
    let mut pos = usize::try_from(cursor / n).unwrap_or(usize::MAX);
    let mut budget = usize::try_from(count).unwrap_or(usize::MAX);
    let mut found = Vec::new();
    let mut dependency = 0;
    let next = loop {
        let shard = &mut *shards[s];
        let track = shard.applied_lsn > durable;
        let d = &mut shard.dbs[db];
        let start = if pos == 0 { d.len() } else { pos.min(d.len()) };
        let after = d.scan(start, budget, now, |k, e, lsn| {
            let type_ok = match wanted_type {
                None => true,
                Some(t) => t == Some(e.value.value_type()),
            };
            let name_ok = match pattern {
                None => true,
                Some(p) => glob_match(p, k, false),
            };
            if type_ok && name_ok {
                found.push(Frame::Bulk(k.to_bytes()));
                if track {
                    dependency = dependency.max(lsn);
                }
            }
        });
        if track {
            dependency = dependency.max(d.miss_lsn).max(d.floor_lsn);
        }
        budget = budget.saturating_sub(start - after);
        if after > 0 {
            break after as u64 * n + s as u64;
        }
        s += 1;
        pos = 0;
        if s as u64 == n {
            break 0;
        }
        if budget == 0 {
            break s as u64;
        }
    };
    txn.depend_on(dependency);
    let mut buf = itoa::Buffer::new();
    Ok(Frame::Array(vec![
        Frame::bulk_from_str(buf.format(next)),
        Frame::Array(found),
    ]))
}

fn randomkey(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, _args: &[Bytes]) -> Reply {
    use rand::Rng;
    let db = ctx.db();
    let now = txn.now_ms;
    let mut rng = rand::thread_rng();
    for _ in 0..RANDOM_KEY_ROUNDS {
        // Weighting the shard pick by size keeps every key equally likely.
        let lens: Vec<usize> = txn.shards_mut().map(|s| s.dbs[db].len()).collect();
        let total: usize = lens.iter().sum();
        if total == 0 {
            break;
        }
        let mut r = rng.gen_range(0..total);
        let Some(idx) = lens.iter().position(|&l| {
            if r < l {
                true
            } else {
                r -= l;
                false
            }
        }) else {
            break;
        };
        let Some(shard) = txn.shards_mut().nth(idx) else {
            break;
        };
        let Some(key) = shard.dbs[db].random_key(now, &mut rng) else {
            continue;
        };
        if txn.get(db, &key).is_some() {
            return Ok(Frame::Bulk(key));
        }
    }
    txn.depend_on_db(db);
    Ok(Frame::Null)
}

fn object_keys(args: &[Bytes]) -> Vec<usize> {
    if args.len() >= 3 {
        vec![2]
    } else {
        Vec::new()
    }
}

/// OBJECT's subcommands, in the shape `COMMAND INFO` reports them.
pub const OBJECT_SUBS: &[SubSpec] = &[
    SubSpec {
        name: "encoding",
        arity: 3,
        flags: READONLY,
        summary: "Names the internal representation used for a key's value.",
    },
    SubSpec {
        name: "freq",
        arity: 3,
        flags: READONLY,
        summary: "Gives a key's LFU access counter, which grows logarithmically with use.",
    },
    SubSpec {
        name: "idletime",
        arity: 3,
        flags: READONLY,
        summary: "Gives the seconds since a key was last read or written.",
    },
    SubSpec {
        name: "refcount",
        arity: 3,
        flags: READONLY,
        summary: "Gives the reference count of a key's value.",
    },
    SubSpec {
        name: "help",
        arity: 2,
        flags: LOADING | STALE,
        summary: "Describes each OBJECT subcommand.",
    },
];

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Name the layout the value under <key> is kept in (int, embstr, listpack,",
    "    hashtable and so on).",
    "FREQ <key>",
    "    Give the key's LFU counter, decayed to now: a small number that grows",
    "    with the log of how often the key is used. Needs an LFU maxmemory-policy.",
    "IDLETIME <key>",
    "    Give the whole seconds since <key> was last read or written. Refused",
    "    while an LFU maxmemory-policy is set.",
    "REFCOUNT <key>",
    "    Give how many holders the value of <key> has: 2147483647 for a small",
    "    integer shared between keys, 1 for anything else.",
    "HELP",
    "    Show this list of subcommands.",
];

/// OBJECT. IDLETIME is the time since the key was last read or written;
/// FREQ is the LFU counter, decayed to now. Which of the two answers
/// depends on `maxmemory-policy`, as in Redis.
fn object(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let Some(sub) = OBJECT_SUBS.iter().find(|s| is(&args[1], s.name)) else {
        return Err(errors::unknown_subcommand(&args[1], "object"));
    };
    let argc = args.len() as i32;
    if (sub.arity >= 0 && argc != sub.arity) || (sub.arity < 0 && argc < -sub.arity) {
        return Err(errors::wrong_args(&format!("object|{}", sub.name)));
    }
    // Redis names the subcommand in CLIENT LIST's `cmd=`.
    ctx.client.last_cmd.clear();
    ctx.client.last_cmd.push_str("object|");
    ctx.client.last_cmd.push_str(sub.name);
    if sub.name == "help" {
        return Ok(Frame::Array(
            OBJECT_HELP.iter().map(|l| Frame::simple(l)).collect(),
        ));
    }
    let (policy, maxmemory) = {
        let c = ctx.shared.config.read();
        (c.maxmemory_policy, c.maxmemory_bytes)
    };
    let lfu = sub.name != "encoding" && sub.name != "refcount" && policy.is_lfu();
    let now_s = txn.now_ms / 1000;
    let Some(e) = txn.get_untouched(ctx.db(), &args[2]) else {
        return Ok(Frame::Null);
    };
    match (sub.name, lfu) {
        ("encoding", _) => Ok(Frame::bulk_from_str(
            e.value.encoding_name(&super::encoding_limits(ctx)),
        )),
        ("refcount", _) => {
            // Judged by the settings of now; Redis decides when the value
            // is stored, so a value stored under another policy may differ.
            let shared_int = match &e.value {
                Value::Str(s) => parse_i64(s).is_some_and(|v| (0..SHARED_INTEGERS).contains(&v)),
                _ => false,
            } && (maxmemory == 0 || !policy.scores_each_value());
            Ok(Frame::Integer(if shared_int { SHARED_REFCOUNT } else { 1 }))
        }
        ("freq", false) => Err(Frame::error(LFU_NOT_SELECTED)),
        ("idletime", true) => Err(Frame::error(LFU_SELECTED)),
        ("freq", true) => Ok(Frame::Integer(i64::from(durakv_engine::lfu::decayed(
            e.access(),
            now_s as u32,
        )))),
        _ => Ok(Frame::Integer(i64::from(
            e.access().idle_secs(now_s as u32),
        ))),
    }
}

fn dbsize(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, _args: &[Bytes]) -> Reply {
    let db = ctx.db();
    txn.depend_on_db(db);
    let total: usize = txn.shards_mut().map(|s| s.dbs[db].len()).sum();
    Ok(Frame::Integer(total as i64))
}

/// FLUSHDB/FLUSHALL accept one of ASYNC or SYNC; both flush at once.
fn flush_mode_ok(args: &[Bytes]) -> bool {
    match args.len() {
        1 => true,
        2 => is(&args[1], "async") || is(&args[1], "sync"),
        _ => false,
    }
}

fn flushdb(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    if !flush_mode_ok(args) {
        return Err(errors::err(errors::SYNTAX));
    }
    let db = ctx.db();
    ctx.shared
        .watches
        .touch_flushed(Some(db), |d, k| txn.get(d, k).is_some());
    let m = Mutation::FlushDb { db: db as u32 };
    Ok(reply_of(apply(txn, m), Frame::ok()))
}

fn flushall(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    if !flush_mode_ok(args) {
        return Err(errors::err(errors::SYNTAX));
    }
    ctx.shared
        .watches
        .touch_flushed(None, |d, k| txn.get(d, k).is_some());
    Ok(reply_of(apply(txn, Mutation::FlushAll), Frame::ok()))
}

fn swapdb(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let index = |b: &[u8]| durakv_engine::value::parse_i64(b).filter(|n| i32::try_from(*n).is_ok());
    let Some(a) = index(&args[1]) else {
        return Err(Frame::error(INVALID_FIRST_DB));
    };
    let Some(b) = index(&args[2]) else {
        return Err(Frame::error(INVALID_SECOND_DB));
    };
    let dbs = ctx.shared.store.keyspace.num_dbs() as i64;
    if !(0..dbs).contains(&a) || !(0..dbs).contains(&b) {
        return Err(errors::err(errors::DB_INDEX_OUT_OF_RANGE));
    }
    if a == b {
        return Ok(Frame::ok());
    }
    ctx.shared
        .watches
        .touch_swapped(a as usize, b as usize, |d, k| txn.get(d, k).is_some());
    let m = Mutation::SwapDb {
        a: a as u32,
        b: b as u32,
    };
    Ok(reply_of(apply(txn, m), Frame::ok()))
}
