//! SORT and SORT_RO over lists, sets and sorted sets, with Redis 7's BY,
//! LIMIT, GET, ASC/DESC, ALPHA and (SORT only) STORE.
//!
//! BY and GET patterns name keys that are known only once the elements are
//! read, so a call with such patterns locks every shard (see
//! [`reads_pattern_keys`]); without them it locks its key and the STORE
//! destination only. Every read goes through the transaction, so the reply
//! waits for whatever it saw to be durable, and STORE is one logged write.
//!
//! ALPHA compares bytes where Redis uses `strcoll` (the same order under
//! Redis's usual C locale).

use super::{apply, syntax, wrongtype};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, FIRST_KEY};
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::KeyOp;
use durakv_engine::txn::Txn;
use durakv_engine::value::{ListValue, Str, Value};
use durakv_protocol::Frame;
use std::cmp::Ordering;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec(
            "sort",
            -2,
            WRITE | DENYOOM,
            Keys::Custom(sort_keys),
            Handler::Data(sort),
            "generic",
            "Arranges a collection's elements by value or weights; STORE saves them.",
        )
        .locking_all_when(reads_pattern_keys),
        spec(
            "sort_ro",
            -2,
            READONLY,
            FIRST_KEY,
            Handler::Data(sort_ro),
            "generic",
            "Arranges a collection's elements by value or weights.",
        )
        .locking_all_when(reads_pattern_keys)
        .reporting_keys(Keys::Custom(sort_ro_keys)),
    ]
}

const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

/// The parsed options of one call.
struct Options<'a> {
    /// The last BY pattern; without a `*` it only turns sorting off.
    by: Option<&'a [u8]>,
    /// A BY pattern without `*` was given (it stays off, as in Redis, even
    /// if a later BY has one).
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
    desc: bool,
    alpha: bool,
    offset: i64,
    /// Negative: to the end.
    count: i64,
    /// Argument index of the (last) STORE destination.
    store: Option<usize>,
}

impl Options<'_> {
    /// Whether the call reads keys other than its own and STORE's.
    fn reads_other_keys(&self) -> bool {
        (!self.dont_sort && self.by.is_some()) || self.gets.iter().any(|g| names_key(g))
    }
}

/// A GET pattern reads a key unless it is `#` or has no `*` (always nil).
fn names_key(pattern: &[u8]) -> bool {
    pattern != b"#" && pattern.contains(&b'*')
}

fn parse(args: &[Bytes], readonly: bool) -> Result<Options<'_>, Frame> {
    let mut o = Options {
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        desc: false,
        alpha: false,
        offset: 0,
        count: -1,
        store: None,
    };
    let mut i = 2;
    while i < args.len() {
        let a = &args[i][..];
        let left = args.len() - i - 1;
        if is(a, "asc") {
            o.desc = false;
        } else if is(a, "desc") {
            o.desc = true;
        } else if is(a, "alpha") {
            o.alpha = true;
        } else if is(a, "limit") && left >= 2 {
            o.offset = arg_i64(&args[i + 1])?;
            o.count = arg_i64(&args[i + 2])?;
            i += 2;
        } else if !readonly && is(a, "store") && left >= 1 {
            o.store = Some(i + 1);
            i += 1;
        } else if is(a, "by") && left >= 1 {
            let p = &args[i + 1][..];
            o.dont_sort |= !p.contains(&b'*');
            o.by = Some(p);
            i += 1;
        } else if is(a, "get") && left >= 1 {
            o.gets.push(&args[i + 1][..]);
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    Ok(o)
}

/// Lock-all predicate of both commands: BY/GET patterns that read keys.
fn reads_pattern_keys(args: &[Bytes]) -> bool {
    let readonly = is(&args[0], "sort_ro");
    parse(args, readonly).is_ok_and(|o| o.reads_other_keys())
}

/// SORT_RO's key is the sorted one; Redis finds it with a key-finding
/// function (as SORT's), so COMMAND INFO reports it as movable.
fn sort_ro_keys(args: &[Bytes]) -> Vec<usize> {
    (1..args.len().min(2)).collect()
}

/// SORT's keys: the sorted key and the STORE destination. A call that
/// parses names exactly the destination it will write; for one that does
/// not (COMMAND GETKEYS), Redis's own scan: the last STORE, skipping the
/// arguments of LIMIT, GET and BY.
fn sort_keys(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    if let Ok(o) = parse(args, false) {
        keys.extend(o.store);
        return keys;
    }
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i][..];
        if is(a, "limit") {
            i += 2;
        } else if is(a, "get") || is(a, "by") {
            i += 1;
        } else if is(a, "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

fn sort(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    run(ctx, txn, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    run(ctx, txn, args, true)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// What an element is ordered by.
enum SortKey {
    Score(f64),
    /// ALPHA with BY: the looked-up value; a missing one sorts first.
    Looked(Option<Bytes>),
    /// ALPHA without BY: the element itself.
    Itself,
}

fn run(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], readonly: bool) -> Reply {
    let o = parse(args, readonly)?;
    // BY and GET read keys no ACL check saw: only a user who may read
    // every key may use them.
    if !crate::acl::check::may_read_every_key(&ctx.client.user) {
        if o.by.is_some() && !o.dont_sort {
            return Err(Frame::error(
                "ERR BY option of SORT denied due to insufficient ACL permissions.",
            ));
        }
        if !o.gets.is_empty() {
            return Err(Frame::error(
                "ERR GET option of SORT denied due to insufficient ACL permissions.",
            ));
        }
    }
    let db = ctx.db();
    let (kind, len) = match txn.get(db, &args[1]).map(|e| &e.value) {
        None => (Kind::List, 0),
        Some(Value::List(l)) => (Kind::List, l.len()),
        Some(Value::Set(s)) => (Kind::Set, s.len()),
        Some(Value::ZSet(z)) => (Kind::ZSet, z.len()),
        Some(_) => return Err(wrongtype()),
    };
    let (mut dont_sort, mut alpha, mut by) = (o.dont_sort, o.alpha, o.by);
    if dont_sort && kind == Kind::Set && (o.store.is_some() || ctx.client.in_script) {
        // A set has no order of its own: what is stored, or handed to a
        // script, is sorted, as Redis does so that the result is the same
        // everywhere.
        (dont_sort, alpha, by) = (false, true, None);
    }
    let (start, end) = window(o.offset, o.count, len);
    // Lists and sorted sets keep their own order unsorted: the LIMIT window
    // (from the tail for DESC) is read directly.
    let direct = dont_sort && kind != Kind::Set;
    let limits = super::encoding_limits(ctx);
    let elements = load(
        txn,
        db,
        &args[1],
        kind,
        direct.then_some((start, end, o.desc)),
        &limits,
    );
    let (start, end) = if direct {
        (0, elements.len() as i64 - 1)
    } else {
        (start, end)
    };
    let mut sorted = elements;
    if !dont_sort {
        let mut bad_double = false;
        let mut keyed: Vec<(SortKey, Bytes)> = Vec::with_capacity(sorted.len());
        for e in sorted {
            let by_value = match by {
                Some(p) => lookup(txn, db, p, &e),
                None => Some(e.clone()),
            };
            let key = if alpha {
                if by.is_some() {
                    SortKey::Looked(by_value)
                } else {
                    SortKey::Itself
                }
            } else {
                SortKey::Score(match by_value {
                    None => 0.0,
                    Some(v) => strtod(&v).unwrap_or_else(|| {
                        bad_double = true;
                        0.0
                    }),
                })
            };
            keyed.push((key, e));
        }
        if bad_double {
            return Err(Frame::error(NOT_DOUBLE));
        }
        keyed.sort_by(|a, b| {
            let c = compare(a, b);
            if o.desc {
                c.reverse()
            } else {
                c
            }
        });
        sorted = keyed.into_iter().map(|(_, e)| e).collect();
    }
    let picked: &[Bytes] = if start <= end && end >= 0 {
        &sorted[start as usize..=end as usize]
    } else {
        &[]
    };
    match o.store {
        None => reply(txn, db, &o.gets, picked),
        Some(dest) => store(txn, db, &args[dest], &o.gets, picked),
    }
}

/// Redis's LIMIT clamping: the inclusive window `[start, end]` of `len`
/// elements (empty when `end < start`).
fn window(offset: i64, count: i64, len: usize) -> (i64, i64) {
    let len = len as i64;
    let start = offset.max(0).min(len);
    let count = count.max(-1).min(len);
    let end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        return (len - 1, len - 2);
    }
    (start, end.min(len - 1))
}

/// The elements to sort: all in the key's own order (a set's as SMEMBERS
/// lists it), or for `range`
/// (start, end, desc) only that window, counted from the tail when desc.
fn load(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    kind: Kind,
    range: Option<(i64, i64, bool)>,
    limits: &durakv_engine::value::EncodingLimits,
) -> Vec<Bytes> {
    let Some(v) = txn.get(db, key).map(|e| &e.value) else {
        return Vec::new();
    };
    let (skip, take, desc) = match range {
        Some((start, end, desc)) if end >= start => {
            (start as usize, (end - start + 1) as usize, desc)
        }
        Some(_) => return Vec::new(),
        None => (0, usize::MAX, false),
    };
    match (kind, v) {
        (Kind::List, Value::List(l)) if desc => l
            .iter()
            .rev()
            .skip(skip)
            .take(take)
            .map(Bytes::copy_from_slice)
            .collect(),
        (Kind::List, Value::List(l)) => l
            .iter()
            .skip(skip)
            .take(take)
            .map(Bytes::copy_from_slice)
            .collect(),
        (Kind::Set, Value::Set(s)) => super::sets::listed_members(s, limits),
        (Kind::ZSet, Value::ZSet(z)) if desc => z
            .iter()
            .rev()
            .skip(skip)
            .take(take)
            .map(|(m, _)| m.to_bytes())
            .collect(),
        (Kind::ZSet, Value::ZSet(z)) => z
            .iter()
            .skip(skip)
            .take(take)
            .map(|(m, _)| m.to_bytes())
            .collect(),
        _ => Vec::new(),
    }
}

/// Redis's order: by score with ties broken by the element's bytes; ALPHA
/// by bytes; ALPHA BY with missing values first.
fn compare(a: &(SortKey, Bytes), b: &(SortKey, Bytes)) -> Ordering {
    match (&a.0, &b.0) {
        (SortKey::Score(x), SortKey::Score(y)) => x
            .partial_cmp(y)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1)),
        (SortKey::Looked(x), SortKey::Looked(y)) => x.cmp(y),
        _ => a.1.cmp(&b.1),
    }
}

/// The value a BY/GET pattern names for `element`: `#` is the element, the
/// first `*` is replaced by it, and `->field` after the `*` reads a hash
/// field. Missing keys, missing fields, other types and patterns without
/// `*` give nothing.
fn lookup(txn: &mut Txn<'_>, db: usize, pattern: &[u8], element: &Bytes) -> Option<Bytes> {
    if pattern == b"#" {
        return Some(element.clone());
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let rest = &pattern[star + 1..];
    let (suffix, field) = match rest.windows(2).position(|w| w == b"->") {
        Some(i) if i + 2 < rest.len() => (&rest[..i], Some(&rest[i + 2..])),
        _ => (rest, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + suffix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(suffix);
    let value = &txn.get(db, &key)?.value;
    match field {
        Some(f) => value.as_hash()?.get(f),
        None => value.as_str().map(|s| s.to_bytes()),
    }
}

/// C `strtod` as Redis's SORT applies it: leading blanks allowed, the whole
/// rest must be a number, NaN and out-of-range values refused. An empty
/// value converts nothing and is 0. Redis hands the value to `strtod` as a
/// C string, so a NUL byte ends it: `1\0x` weighs 1.
fn strtod(b: &[u8]) -> Option<f64> {
    let b = b.split(|&c| c == 0).next().unwrap_or_default();
    if b.is_empty() {
        return Some(0.0);
    }
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let v: f64 = t.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    let literal_inf = t
        .trim_start_matches(['+', '-'])
        .get(..3)
        .is_some_and(|p| p.eq_ignore_ascii_case("inf"));
    (v.is_finite() || literal_inf).then_some(v)
}

/// The elements of `window`, or for each one its GET values in order.
fn outputs(txn: &mut Txn<'_>, db: usize, gets: &[&[u8]], window: &[Bytes]) -> Vec<Option<Bytes>> {
    if gets.is_empty() {
        return window.iter().cloned().map(Some).collect();
    }
    let mut out = Vec::with_capacity(window.len() * gets.len());
    for e in window {
        for g in gets {
            out.push(lookup(txn, db, g, e));
        }
    }
    out
}

fn reply(txn: &mut Txn<'_>, db: usize, gets: &[&[u8]], window: &[Bytes]) -> Reply {
    let items = outputs(txn, db, gets, window)
        .into_iter()
        .map(|v| v.map_or(Frame::Null, Frame::Bulk))
        .collect();
    Ok(Frame::Array(items))
}

/// Replaces `dest` with the result as a list (missing GET values become
/// empty strings); an empty result deletes it.
fn store(txn: &mut Txn<'_>, db: usize, dest: &Bytes, gets: &[&[u8]], window: &[Bytes]) -> Reply {
    let list: ListValue = outputs(txn, db, gets, window)
        .into_iter()
        .map(|v| Str::from_bytes(&v.unwrap_or_default()))
        .collect();
    let n = list.len();
    if n == 0 {
        if txn.get(db, dest).is_some() {
            apply(txn, db, dest, KeyOp::Del)?;
        }
    } else {
        let value = Value::List(std::sync::Arc::new(list));
        apply(
            txn,
            db,
            dest,
            KeyOp::Restore {
                value,
                expire_at_ms: 0,
            },
        )?;
    }
    Ok(Frame::Integer(n as i64))
}
