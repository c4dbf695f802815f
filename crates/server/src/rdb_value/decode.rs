//! RDB to values: every type and encoding Redis 7.0 loads. Duplicates,
//! NaN scores and odd pair counts are damage, as in Redis's sanitizer.

use super::primitives::Reader;
use super::{legacy, listpack, stream, ty};
use bytes::Bytes;
use durakv_engine::value::{HashValue, ListValue, SetValue, Value};
use durakv_engine::zset::ZSet;
use std::sync::Arc;

/// Quicklist node container kinds (Redis's `QUICKLIST_NODE_CONTAINER_*`).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// The value in `body` (type byte, then its serialization). Bytes after
/// the value are ignored, as Redis does.
pub fn value(body: &[u8]) -> Option<Value> {
    let mut r = Reader::new(body);
    let t = r.byte()?;
    typed(t, &mut r)
}

/// The value of RDB type `t` at `r`'s position, leaving `r` after it (an
/// RDB file has the key between the type byte and the value).
/// Whether [`typed`] reads values of RDB type `t`.
pub fn known(t: u8) -> bool {
    matches!(
        t,
        ty::STRING
            | ty::LIST
            | ty::LIST_ZIPLIST
            | ty::LIST_QUICKLIST
            | ty::LIST_QUICKLIST_2
            | ty::SET
            | ty::SET_INTSET
            | ty::HASH
            | ty::HASH_ZIPMAP
            | ty::HASH_ZIPLIST
            | ty::HASH_LISTPACK
            | ty::ZSET
            | ty::ZSET_2
            | ty::ZSET_ZIPLIST
            | ty::ZSET_LISTPACK
            | ty::STREAM_LISTPACKS
            | ty::STREAM_LISTPACKS_2
    )
}

pub fn typed(t: u8, r: &mut Reader<'_>) -> Option<Value> {
    Some(match t {
        ty::STRING => Value::Str(r.string()?.into()),
        ty::LIST => Value::List(Arc::new(counted(r, |r| r.string())?.into_iter().collect())),
        ty::LIST_ZIPLIST => Value::List(Arc::new(
            legacy::ziplist(&r.string()?)?.into_iter().collect(),
        )),
        ty::LIST_QUICKLIST | ty::LIST_QUICKLIST_2 => {
            Value::List(Arc::new(quicklist(r, t == ty::LIST_QUICKLIST_2)?))
        }
        ty::SET => set(counted(r, |r| r.string())?)?,
        ty::SET_INTSET => {
            let ints = legacy::intset(&r.string()?)?;
            set(ints
                .into_iter()
                .map(|i| Bytes::from(i.to_string()))
                .collect())?
        }
        ty::HASH => hash(counted(r, |r| Some((r.string()?, r.string()?)))?)?,
        ty::HASH_ZIPMAP => hash(legacy::zipmap(&r.string()?)?)?,
        ty::HASH_ZIPLIST => hash(pairs(legacy::ziplist(&r.string()?)?)?)?,
        ty::HASH_LISTPACK => hash(pairs(listpack::decode(&r.string()?)?)?)?,
        ty::ZSET => zset(counted(r, |r| Some((r.string()?, r.text_double()?)))?)?,
        ty::ZSET_2 => zset(counted(r, |r| Some((r.string()?, r.binary_double()?)))?)?,
        ty::ZSET_ZIPLIST => zset(scored(legacy::ziplist(&r.string()?)?)?)?,
        ty::ZSET_LISTPACK => zset(scored(listpack::decode(&r.string()?)?)?)?,
        ty::STREAM_LISTPACKS | ty::STREAM_LISTPACKS_2 => {
            Value::Stream(Arc::new(stream::decode(r, t == ty::STREAM_LISTPACKS_2)?))
        }
        // Module values are not a supported type here.
        _ => return None,
    })
}

/// A length-prefixed sequence of `item`s. The count is never used to
/// preallocate: a damaged one fails when the bytes run out.
fn counted<T>(
    r: &mut Reader<'_>,
    mut item: impl FnMut(&mut Reader<'_>) -> Option<T>,
) -> Option<Vec<T>> {
    let n = r.length()?;
    if n > r.remaining() as u64 {
        return None;
    }
    (0..n).map(|_| item(r)).collect()
}

fn quicklist(r: &mut Reader<'_>, v2: bool) -> Option<ListValue> {
    let nodes = r.length()?;
    if nodes > r.remaining() as u64 {
        return None;
    }
    let mut out = ListValue::new();
    for _ in 0..nodes {
        let container = if v2 { r.length()? } else { CONTAINER_PACKED };
        let blob = r.string()?;
        match container {
            CONTAINER_PLAIN => out.push_back(&blob),
            CONTAINER_PACKED if v2 => out.extend(listpack::decode(&blob)?),
            CONTAINER_PACKED => out.extend(legacy::ziplist(&blob)?),
            _ => return None,
        }
    }
    Some(out)
}

fn pairs(items: Vec<Bytes>) -> Option<Vec<(Bytes, Bytes)>> {
    if !items.len().is_multiple_of(2) {
        return None;
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Some(out)
}

fn scored(items: Vec<Bytes>) -> Option<Vec<(Bytes, f64)>> {
    pairs(items)?
        .into_iter()
        .map(|(m, s)| Some((m, parse_score(&s)?)))
        .collect()
}

/// A score as text in a compact encoding (`%.17g`, or an integer).
fn parse_score(s: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(s).ok()?;
    match s {
        "inf" | "+inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        _ if s
            .bytes()
            .all(|c| c.is_ascii_digit() || b"+-.eE".contains(&c)) =>
        {
            s.parse().ok()
        }
        _ => None,
    }
}

fn set(members: Vec<Bytes>) -> Option<Value> {
    let mut s = SetValue::default();
    for m in members {
        if !s.insert(m) {
            return None;
        }
    }
    Some(Value::Set(Arc::new(s)))
}

fn hash(pairs: Vec<(Bytes, Bytes)>) -> Option<Value> {
    let n = pairs.len();
    let h: HashValue = pairs.into_iter().collect();
    // A repeated field makes the payload invalid, as in Redis.
    (h.len() == n).then_some(Value::Hash(h))
}

fn zset(members: Vec<(Bytes, f64)>) -> Option<Value> {
    let mut z = ZSet::default();
    for (m, s) in members {
        if s.is_nan() || !z.insert(m, s) {
            return None;
        }
    }
    Some(Value::ZSet(Arc::new(z)))
}
