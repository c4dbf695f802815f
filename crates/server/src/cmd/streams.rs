//! Streams: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID, and the
//! ID parsing and entry replies the other stream modules share
//! (`stream_read`, `stream_groups`, `stream_info`).
//!
//! Every write is one `KeyOp::Stream` record (or two, for XADD's entry
//! and its trim, in the same commit) carrying the generated ID and the
//! resolved trim cutoff, so replay needs neither the clock nor the node
//! layout.

use super::{apply, read_as};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, FIRST_KEY};
use crate::errors;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::{KeyOp, StreamOp};
use durakv_engine::stream::{NodeLimits, Stream, StreamEntry, StreamId, TrimStrategy};
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, Value};
use durakv_protocol::Frame;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("xadd", -5, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(xadd), "stream", "Adds an entry to a stream, creating it if needed."),
        spec("xrange", -4, READONLY, FIRST_KEY, Handler::Data(xrange), "stream", "Reads a stream's entries between two IDs."),
        spec("xrevrange", -4, READONLY, FIRST_KEY, Handler::Data(xrevrange), "stream", "Reads a stream's entries between two IDs, newest first."),
        spec("xlen", 2, READONLY | FAST, FIRST_KEY, Handler::Data(xlen), "stream", "Gives a stream's length in entries."),
        spec("xdel", -3, WRITE | FAST, FIRST_KEY, Handler::Data(xdel), "stream", "Deletes entries from a stream by ID and counts those removed."),
        spec("xtrim", -4, WRITE, FIRST_KEY, Handler::Data(xtrim), "stream", "Drops a stream's oldest entries."),
        spec("xsetid", -3, WRITE | DENYOOM | FAST, FIRST_KEY, Handler::Data(xsetid), "stream", "Internal: sets a stream's last ID."),
    ]
}

pub(crate) const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

fn invalid_id() -> Frame {
    errors::err(INVALID_ID)
}

/// `ms[-seq]`; a missing sequence is `missing_seq`. With `special`, `-`
/// and `+` are the smallest and largest IDs.
pub(crate) fn parse_id(arg: &[u8], missing_seq: u64, special: bool) -> Result<StreamId, Frame> {
    if special && arg == b"-" {
        return Ok(StreamId::MIN);
    }
    if special && arg == b"+" {
        return Ok(StreamId::MAX);
    }
    // Redis copies the ID into a 128-byte buffer first.
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    let id = match arg.iter().position(|&c| c == b'-') {
        None => id_part(arg).map(|ms| StreamId::new(ms, missing_seq)),
        Some(dash) => id_part(&arg[..dash])
            .zip(id_part(&arg[dash + 1..]))
            .map(|(ms, seq)| StreamId::new(ms, seq)),
    };
    id.ok_or_else(invalid_id)
}

/// One side of an ID as Redis's `string2ull` reads it: a plain decimal,
/// or else what C's `strtoull` takes whole (leading white space, a sign;
/// `-` wraps around), without overflow.
fn id_part(s: &[u8]) -> Option<u64> {
    if let Some(v) = durakv_engine::value::parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let t = crate::util::skip_c_space(s);
    let (neg, digits) = match t.first() {
        Some(b'+') => (false, &t[1..]),
        Some(b'-') => (true, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// A strict ID: no `-`/`+`, missing sequence 0.
pub(crate) fn strict_id(arg: &[u8]) -> Result<StreamId, Frame> {
    parse_id(arg, 0, false)
}

/// A range bound: `-`, `+`, an ID, or `(ID` for an exclusive one.
pub(crate) fn range_bound(arg: &[u8], start: bool) -> Result<StreamId, Frame> {
    let missing = if start { 0 } else { u64::MAX };
    match arg.strip_prefix(b"(") {
        Some(rest) => {
            let id = parse_id(rest, missing, false)?;
            let moved = if start { id.next() } else { id.prev() };
            moved.ok_or_else(|| {
                errors::err(if start {
                    "ERR invalid start ID for the interval"
                } else {
                    "ERR invalid end ID for the interval"
                })
            })
        }
        None => parse_id(arg, missing, true),
    }
}

pub(crate) fn id_frame(id: StreamId) -> Frame {
    Frame::Bulk(Bytes::from(id.to_string()))
}

pub(crate) fn entry_frame(e: &StreamEntry) -> Frame {
    let mut fields = Vec::with_capacity(e.fields.len() * 2);
    for (f, v) in &e.fields {
        fields.push(Frame::Bulk(f.clone()));
        fields.push(Frame::Bulk(v.clone()));
    }
    Frame::Array(vec![id_frame(e.id), Frame::Array(fields)])
}

pub(crate) fn entries_frame(entries: &[StreamEntry]) -> Frame {
    Frame::Array(entries.iter().map(entry_frame).collect())
}

pub(crate) fn read_stream<'t>(
    txn: &'t mut Txn<'_>,
    db: usize,
    key: &[u8],
) -> Result<Option<&'t Stream>, Frame> {
    read_as(txn, db, key, Value::as_stream)
}

pub(crate) fn stream_op(
    txn: &mut Txn<'_>,
    db: usize,
    key: &Bytes,
    op: StreamOp,
) -> Result<(), Frame> {
    apply(txn, db, key, KeyOp::Stream(Box::new(op)))
}

/// `stream-node-max-entries` and `stream-node-max-bytes`.
pub(crate) fn node_limits(ctx: &Ctx<'_>) -> NodeLimits {
    let cfg = ctx.shared.config.read();
    let get = |name: &str, default: u32| {
        cfg.compat
            .get(name)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(default)
    };
    NodeLimits {
        entries: get("stream-node-max-entries", 100),
        bytes: get("stream-node-max-bytes", 4096),
    }
}

fn xlen(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let n = read_stream(txn, ctx.db(), &args[1])?.map_or(0, |s| s.len());
    Ok(Frame::Integer(n as i64))
}

fn xrange(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    range(ctx, txn, args, false)
}

fn xrevrange(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    range(ctx, txn, args, true)
}

fn range(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], rev: bool) -> Reply {
    let (a, b) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = range_bound(a, true)?;
    let end = range_bound(b, false)?;
    let mut count = None;
    let mut i = 4;
    while i < args.len() {
        if is(&args[i], "count") && i + 1 < args.len() {
            count = Some(arg_i64(&args[i + 1])?.max(0) as usize);
            i += 2;
        } else {
            return Err(super::syntax());
        }
    }
    let Some(s) = read_stream(txn, ctx.db(), &args[1])? else {
        return Ok(Frame::Array(Vec::new()));
    };
    // Redis answers a zero (or negative) COUNT on an existing stream with
    // a null array.
    if count == Some(0) {
        return Ok(Frame::NullArray);
    }
    Ok(entries_frame(&s.range(start, end, count, rev)))
}

fn xdel(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    // The key first, as in Redis: a missing one deletes nothing whatever
    // the IDs say.
    let db = ctx.db();
    let Some(s) = read_stream(txn, db, &args[1])? else {
        return Ok(Frame::Integer(0));
    };
    let ids = args[2..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let mut found: Vec<StreamId> = Vec::new();
    for id in ids {
        if s.contains(id) && !found.contains(&id) {
            found.push(id);
        }
    }
    let n = found.len() as i64;
    if n > 0 {
        stream_op(txn, db, &args[1], StreamOp::Delete(found))?;
    }
    Ok(Frame::Integer(n))
}

/// A trim request: MAXLEN/MINID, `~`, LIMIT.
#[derive(Clone, Copy)]
struct Trim {
    strategy: TrimStrategy,
    approx: bool,
    limit: Option<u64>,
}

/// Parses one trim option at `args[*i]` if there is one there.
fn trim_option(
    args: &[Bytes],
    i: &mut usize,
    trim: &mut Option<Trim>,
    limit: &mut Option<u64>,
) -> Result<bool, Frame> {
    let a = &args[*i];
    let more = args.len() - 1 - *i;
    if (is(a, "maxlen") || is(a, "minid")) && more >= 1 {
        if trim.is_some() {
            return Err(errors::err(
                "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
            ));
        }
        let maxlen = is(a, "maxlen");
        let mut j = *i + 1;
        let mut approx = false;
        if more >= 2 && (args[j][..] == *b"~" || args[j][..] == *b"=") {
            approx = args[j][..] == *b"~";
            j += 1;
        }
        let strategy = if maxlen {
            let n = arg_i64(&args[j])?;
            if n < 0 {
                return Err(errors::err("ERR The MAXLEN argument must be >= 0."));
            }
            TrimStrategy::MaxLen(n as u64)
        } else {
            TrimStrategy::MinId(strict_id(&args[j])?)
        };
        *trim = Some(Trim {
            strategy,
            approx,
            limit: None,
        });
        *i = j + 1;
        return Ok(true);
    }
    if is(a, "limit") && more >= 1 {
        let n = arg_i64(&args[*i + 1])?;
        if n < 0 {
            return Err(errors::err("ERR The LIMIT argument must be >= 0."));
        }
        *limit = Some(n as u64);
        *i += 2;
        return Ok(true);
    }
    Ok(false)
}

/// Checks a trim request as Redis does, in its order: a nonzero LIMIT needs
/// a strategy, XTRIM needs one even without LIMIT, and any LIMIT (0 too)
/// needs `~`. Except from a primary (`obey`): Redis propagates an
/// approximate trim as the exact one it made (`MAXLEN = <length>`) and
/// leaves its LIMIT in, which then means nothing.
fn finish_trim(
    trim: Option<Trim>,
    limit: Option<u64>,
    xtrim: bool,
    obey: bool,
) -> Result<Option<Trim>, Frame> {
    if trim.is_none() && limit.is_some_and(|l| l > 0) {
        return Err(errors::err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if trim.is_none() && xtrim {
        return Err(errors::err(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    let approx = trim.is_some_and(|t| t.approx);
    if limit.is_some() && !approx && !obey {
        return Err(errors::err(
            "ERR syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    let limit = limit.filter(|_| approx);
    Ok(trim.map(|t| Trim { limit, ..t }))
}

/// Applies `trim` to the stream at `key`; returns how many entries went.
fn apply_trim(
    ctx: &Ctx<'_>,
    txn: &mut Txn<'_>,
    db: usize,
    key: &Bytes,
    trim: Trim,
) -> Result<u64, Frame> {
    let limits = node_limits(ctx);
    let limit = match (trim.approx, trim.limit) {
        (true, None) => 100 * u64::from(limits.entries),
        (_, Some(l)) => l,
        (false, None) => 0,
    };
    let Some(s) = read_stream(txn, db, key)? else {
        return Ok(0);
    };
    let Some((cutoff, n)) = s.plan_trim(trim.strategy, trim.approx, limit) else {
        return Ok(0);
    };
    // No cutoff lies past the largest ID, so a trim of every entry leaves
    // one there: it goes by ID instead, and the deletion XDEL's record
    // notes is undone, since a trim is not a deletion (Redis's XINFO keeps
    // `max-deleted-entry-id` across one).
    let last = (cutoff == StreamId::MAX && n == s.len() && s.contains(StreamId::MAX))
        .then_some((s.last_id, s.max_deleted_id));
    stream_op(txn, db, key, StreamOp::Trim { cutoff })?;
    if let Some((last_id, max_deleted)) = last {
        stream_op(txn, db, key, StreamOp::Delete(vec![StreamId::MAX]))?;
        let restore = StreamOp::SetId {
            last_id,
            entries_added: None,
            max_deleted_id: Some(max_deleted),
        };
        stream_op(txn, db, key, restore)?;
    }
    Ok(n)
}

fn xtrim(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (mut trim, mut limit) = (None, None);
    let mut i = 2;
    while i < args.len() {
        if !trim_option(args, &mut i, &mut trim, &mut limit)? {
            return Err(super::syntax());
        }
    }
    let Some(trim) = finish_trim(trim, limit, true, ctx.client.is_master)? else {
        return Err(super::syntax());
    };
    let db = ctx.db();
    Ok(Frame::Integer(
        apply_trim(ctx, txn, db, &args[1], trim)? as i64
    ))
}

/// XADD's ID argument.
enum NewId {
    Auto,
    /// `ms-*`.
    Seq(u64),
    Exact(StreamId),
}

fn new_id(arg: &[u8]) -> Result<NewId, Frame> {
    if arg == b"*" {
        return Ok(NewId::Auto);
    }
    if let Some(ms) = arg.strip_suffix(b"-*") {
        return Ok(NewId::Seq(parse_id(ms, 0, false)?.ms));
    }
    Ok(NewId::Exact(strict_id(arg)?))
}

const NOT_GREATER: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";

/// The ID XADD gives its entry after `last` at time `now`.
fn generate(last: StreamId, want: NewId, now: u64) -> Result<StreamId, Frame> {
    match want {
        NewId::Auto => {
            if now > last.ms {
                Ok(StreamId::new(now, 0))
            } else {
                last.next().ok_or_else(|| errors::err(NOT_GREATER))
            }
        }
        NewId::Seq(ms) if ms == last.ms => match last.seq.checked_add(1) {
            Some(seq) => Ok(StreamId::new(ms, seq)),
            None => Err(errors::err(NOT_GREATER)),
        },
        NewId::Seq(ms) if ms > last.ms => Ok(StreamId::new(ms, 0)),
        NewId::Seq(_) => Err(errors::err(NOT_GREATER)),
        NewId::Exact(id) if id > last => Ok(id),
        NewId::Exact(_) => Err(errors::err(NOT_GREATER)),
    }
}

fn xadd(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (mut trim, mut limit, mut nomkstream) = (None, None, false);
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "nomkstream") {
            nomkstream = true;
            i += 1;
        } else if !trim_option(args, &mut i, &mut trim, &mut limit)? {
            break;
        }
    }
    // Redis's order: the ID, then the trimming options, then the count of
    // field-value arguments.
    let want = args.get(i).map(|a| new_id(a)).transpose()?;
    let trim = finish_trim(trim, limit, false, ctx.client.is_master)?;
    let fields = args.len().saturating_sub(i + 1);
    let Some(want) = want.filter(|_| fields > 0 && fields.is_multiple_of(2)) else {
        return Err(errors::wrong_args("xadd"));
    };
    if matches!(want, NewId::Exact(id) if id.is_zero()) {
        return Err(errors::err(
            "ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    let db = ctx.db();
    let key = &args[1];
    let last = match read_stream(txn, db, key)? {
        None if nomkstream => return Ok(Frame::Null),
        None => StreamId::MIN,
        Some(s) => s.last_id,
    };
    if last == StreamId::MAX {
        return Err(errors::err(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = generate(last, want, txn.now_ms)?;
    let fields: Vec<(Bytes, Bytes)> = args[i + 1..]
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    let limits = node_limits(ctx);
    stream_op(txn, db, key, StreamOp::Add { id, fields, limits })?;
    if let Some(t) = trim {
        apply_trim(ctx, txn, db, key, t)?;
    }
    Ok(id_frame(id))
}

fn xsetid(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let id = strict_id(&args[2])?;
    let (mut entries_added, mut max_deleted) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "entriesadded") && more {
            match parse_i64(&args[i + 1]) {
                Some(n) if n >= 0 => entries_added = Some(n as u64),
                Some(_) => return Err(errors::err("ERR entries_added must be positive")),
                None => return Err(errors::err(errors::NOT_INTEGER)),
            }
        } else if is(&args[i], "maxdeletedid") && more {
            let m = strict_id(&args[i + 1])?;
            if id < m {
                return Err(errors::err(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            // As in Redis, 0-0 leaves the recorded one as it is.
            max_deleted = (m != StreamId::new(0, 0)).then_some(m);
        } else {
            return Err(super::syntax());
        }
        i += 2;
    }
    let db = ctx.db();
    let Some(s) = read_stream(txn, db, &args[1])? else {
        return Err(errors::err(errors::NO_SUCH_KEY));
    };
    if let Some(top) = s.last_entry() {
        if id < top.id {
            return Err(errors::err(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
    }
    if entries_added.is_some_and(|n| n < s.len()) {
        return Err(errors::err(
            "ERR The entries_added specified in XSETID is smaller than the target stream length",
        ));
    }
    let op = StreamOp::SetId {
        last_id: id,
        entries_added,
        max_deleted_id: max_deleted,
    };
    stream_op(txn, db, &args[1], op)?;
    Ok(Frame::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_like_redis() {
        assert_eq!(strict_id(b"5").unwrap(), StreamId::new(5, 0));
        assert_eq!(
            parse_id(b"5", u64::MAX, true).unwrap(),
            StreamId::new(5, u64::MAX)
        );
        assert_eq!(strict_id(b"1-2").unwrap(), StreamId::new(1, 2));
        assert!(strict_id(b"-").is_err());
        assert!(strict_id(b"1-").is_err());
        assert!(strict_id(b"a-1").is_err());
        assert!(strict_id(b"18446744073709551616").is_err());
        assert_eq!(range_bound(b"(1-1", true).unwrap(), StreamId::new(1, 2));
        assert_eq!(
            range_bound(b"(1-0", false).unwrap(),
            StreamId::new(0, u64::MAX)
        );
        assert!(range_bound(b"(0-0", false).is_err());
        assert!(range_bound(b"(-", true).is_err());
    }

    #[test]
    fn generated_ids_follow_the_last() {
        let last = StreamId::new(10, 5);
        assert_eq!(
            generate(last, NewId::Auto, 11).unwrap(),
            StreamId::new(11, 0)
        );
        assert_eq!(
            generate(last, NewId::Auto, 9).unwrap(),
            StreamId::new(10, 6)
        );
        assert_eq!(
            generate(last, NewId::Seq(10), 0).unwrap(),
            StreamId::new(10, 6)
        );
        assert_eq!(
            generate(last, NewId::Seq(12), 0).unwrap(),
            StreamId::new(12, 0)
        );
        assert!(generate(last, NewId::Seq(9), 0).is_err());
        assert!(generate(last, NewId::Exact(last), 0).is_err());
        assert!(generate(StreamId::new(1, u64::MAX), NewId::Seq(1), 0).is_err());
    }
}
