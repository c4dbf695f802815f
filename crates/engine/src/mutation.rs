//! Every state change, as a deterministic value that can be logged and
//! replayed.
//!
//! Commands never modify the keyspace directly: they read, decide, and then
//! express the change as [`Mutation`]s, which [`Mutation::apply`] performs
//! both live and during recovery. Mutations carry results, not intentions:
//! `INCR` becomes a `SetString` with the new value, `SPOP` an `SRem` of the
//! members it chose, `EXPIRE 10` an absolute `Expire`. Apply takes the
//! record's commit time as "now", so replay sees the same expiries the
//! original execution saw. Every mutation but the three database-wide ones
//! and [`Mutation::Function`] names exactly one key, which lets checkpoints
//! filter replay per shard; function-library changes touch no shard at all
//! (see `crate::functions`).

use crate::db::{Db, Entry};
pub use crate::functions::FunctionOp;
use crate::shard::Shard;
pub use crate::stream_op::StreamOp;
use crate::value::{Str, Value};
use bytes::Bytes;
use std::sync::Arc;

/// What happens to an existing TTL when a string is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireMode {
    /// Plain SET: drop any TTL.
    Clear,
    /// INCR, APPEND, SET KEEPTTL: keep the TTL the key had.
    Keep,
    /// Set this absolute expiry (unix ms).
    At(u64),
}

#[derive(Clone, Debug, PartialEq)]
pub enum KeyOp {
    SetString {
        value: Bytes,
        expire: ExpireMode,
    },
    /// Replaces the key with a whole value (COPY, RENAME, restore).
    Restore {
        value: Value,
        expire_at_ms: u64,
    },
    Del,
    /// Sets (or with 0, clears) the absolute expiry of an existing key.
    Expire {
        at_ms: u64,
    },
    Append(Bytes),
    SetRange {
        offset: u64,
        data: Bytes,
    },
    HSet(Vec<(Bytes, Bytes)>),
    HDel(Vec<Bytes>),
    Push {
        left: bool,
        items: Vec<Bytes>,
    },
    Pop {
        left: bool,
        count: u64,
    },
    LSet {
        index: i64,
        item: Bytes,
    },
    LRem {
        count: i64,
        item: Bytes,
    },
    LTrim {
        start: i64,
        stop: i64,
    },
    LInsert {
        before: bool,
        pivot: Bytes,
        item: Bytes,
    },
    SAdd(Vec<Bytes>),
    SRem(Vec<Bytes>),
    /// Members with their final scores (ZINCRBY is logged as its result).
    ZAdd(Vec<(f64, Bytes)>),
    ZRem(Vec<Bytes>),
    /// A stream write (see `crate::stream_op`). Boxed: it is the largest
    /// operation by far, and every mutation (a SET's too) is as large as
    /// the largest, and is moved several times on its way to the log.
    Stream(Box<StreamOp>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    Key {
        db: u32,
        key: Bytes,
        op: KeyOp,
    },
    FlushDb {
        db: u32,
    },
    FlushAll,
    SwapDb {
        a: u32,
        b: u32,
    },
    /// A change to the function libraries: no shard holds them.
    Function(FunctionOp),
    /// On a replica, where the replication stream this record's writes came
    /// from stands after them; no shard holds it either.
    ReplOrigin(ReplOrigin),
}

/// A replica's position in its primary's stream, logged in the same record
/// as the writes that brought it there, so a crash never separates them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplOrigin {
    /// The primary's replication ID; empty: no position (a full sync began).
    pub replid: Bytes,
    /// The last stream byte applied.
    pub offset: u64,
    /// The database the stream had selected.
    pub db: u32,
}

/// A mutation that does not fit the state it is applied to. Live, this is a
/// bug in a command; during replay it means the log does not belong to the
/// state it is replayed onto.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot apply {op} to key {key:?} in db {db}: {reason}")]
pub struct ApplyError {
    pub db: u32,
    pub key: String,
    pub op: &'static str,
    pub reason: &'static str,
}

impl ApplyError {
    /// A command broke an engine rule (e.g. wrote a key it did not lock):
    /// a bug, reported as an error instead of a panic.
    pub fn internal(reason: &'static str) -> ApplyError {
        ApplyError {
            db: 0,
            key: String::new(),
            op: "commit",
            reason,
        }
    }
}

impl KeyOp {
    pub fn name(&self) -> &'static str {
        match self {
            KeyOp::SetString { .. } => "set",
            KeyOp::Restore { .. } => "restore",
            KeyOp::Del => "del",
            KeyOp::Expire { .. } => "expire",
            KeyOp::Append(_) => "append",
            KeyOp::SetRange { .. } => "setrange",
            KeyOp::HSet(_) => "hset",
            KeyOp::HDel(_) => "hdel",
            KeyOp::Push { .. } => "push",
            KeyOp::Pop { .. } => "pop",
            KeyOp::LSet { .. } => "lset",
            KeyOp::LRem { .. } => "lrem",
            KeyOp::LTrim { .. } => "ltrim",
            KeyOp::LInsert { .. } => "linsert",
            KeyOp::SAdd(_) => "sadd",
            KeyOp::SRem(_) => "srem",
            KeyOp::ZAdd(_) => "zadd",
            KeyOp::ZRem(_) => "zrem",
            KeyOp::Stream(_) => "stream",
        }
    }
}

impl Mutation {
    pub fn key(db: u32, key: Bytes, op: KeyOp) -> Mutation {
        Mutation::Key { db, key, op }
    }

    /// True for a change to the function libraries (no shard involved).
    pub fn is_function(&self) -> bool {
        matches!(self, Mutation::Function(_))
    }

    /// True for what no shard holds: function libraries, a replica's
    /// stream position.
    pub fn is_shardless(&self) -> bool {
        matches!(self, Mutation::Function(_) | Mutation::ReplOrigin(_))
    }

    /// The key this mutation touches, if it touches exactly one.
    pub fn target_key(&self) -> Option<&Bytes> {
        match self {
            Mutation::Key { key, .. } => Some(key),
            _ => None,
        }
    }

    /// Applies the part of this mutation that belongs to `shard`. Key
    /// mutations must be routed to their key's shard by the caller;
    /// database-wide ones are applied to every shard in turn.
    pub fn apply(&self, shard: &mut Shard, now_ms: u64) -> Result<(), ApplyError> {
        match self {
            Mutation::Key { db, key, op } => {
                let dbi = *db as usize;
                let Some(d) = shard.dbs.get_mut(dbi) else {
                    return Err(err(*db, key, op, "no such database"));
                };
                apply_key_op(d, key, op, now_ms).map_err(|reason| err(*db, key, op, reason))
            }
            Mutation::FlushDb { db } => {
                if let Some(d) = shard.dbs.get_mut(*db as usize) {
                    d.clear();
                }
                Ok(())
            }
            Mutation::FlushAll => {
                for d in &mut shard.dbs {
                    d.clear();
                }
                Ok(())
            }
            Mutation::SwapDb { a, b } => {
                let (a, b) = (*a as usize, *b as usize);
                if a < shard.dbs.len() && b < shard.dbs.len() && a != b {
                    shard.dbs.swap(a, b);
                }
                Ok(())
            }
            // Applied to the libraries (or the keyspace's stream position)
            // by the transaction, never to a shard.
            Mutation::Function(_) | Mutation::ReplOrigin(_) => Ok(()),
        }
    }
}

fn err(db: u32, key: &[u8], op: &KeyOp, reason: &'static str) -> ApplyError {
    ApplyError {
        db,
        key: String::from_utf8_lossy(key).into_owned(),
        op: op.name(),
        reason,
    }
}

const WRONG_TYPE: &str = "existing value has another type";

/// The existing collection for `key`, created empty when missing.
fn collection<'a>(d: &'a mut Db, key: &Bytes, now_ms: u64, make: fn() -> Value) -> &'a mut Entry {
    d.get_or_insert_with(key, now_ms, make)
}

fn remove_if_empty(d: &mut Db, key: &[u8]) {
    if matches!(d.peek(key), Some(e) if e.value.is_empty_collection()) {
        d.remove(key);
    }
}

fn apply_key_op(d: &mut Db, key: &Bytes, op: &KeyOp, now_ms: u64) -> Result<(), &'static str> {
    match op {
        KeyOp::SetString { value, expire } => {
            // Only KEEPTTL needs the old entry.
            let expire_at_ms = match expire {
                ExpireMode::Keep => d
                    .get_with_expiry(key, now_ms, true)
                    .0
                    .map_or(0, |(_, at)| at),
                ExpireMode::Clear => {
                    d.before_overwrite(key, now_ms);
                    0
                }
                ExpireMode::At(t) => {
                    d.before_overwrite(key, now_ms);
                    *t
                }
            };
            d.set_string(key, value, expire_at_ms);
        }
        KeyOp::Restore {
            value,
            expire_at_ms,
        } => {
            d.get(key, now_ms);
            d.insert_expiring(key.clone(), Entry::new(value.clone()), *expire_at_ms);
            remove_if_empty(d, key);
        }
        KeyOp::Del => {
            d.get(key, now_ms);
            d.remove(key);
        }
        KeyOp::Expire { at_ms } => {
            if d.get(key, now_ms).is_some() {
                d.set_expire(key, *at_ms);
            }
        }
        KeyOp::Append(data) => {
            let e = collection(d, key, now_ms, || Value::Str(Str::default()));
            let Value::Str(s) = &mut e.value else {
                return Err(WRONG_TYPE);
            };
            let mut buf = s.take_vec();
            buf.extend_from_slice(data);
            *s = Str::from_vec(buf);
        }
        KeyOp::SetRange { offset, data } => {
            let e = collection(d, key, now_ms, || Value::Str(Str::default()));
            let Value::Str(s) = &mut e.value else {
                return Err(WRONG_TYPE);
            };
            let offset = usize::try_from(*offset).map_err(|_| "offset out of range")?;
            // In place when nothing else holds the value: a SETBIT on a big
            // bitmap must not copy it.
            let mut buf = s.take_vec();
            let end = offset + data.len();
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[offset..end].copy_from_slice(data);
            *s = Str::from_vec(buf);
        }
        KeyOp::HSet(pairs) => {
            let e = collection(d, key, now_ms, Value::new_hash);
            let Value::Hash(h) = &mut e.value else {
                return Err(WRONG_TYPE);
            };
            h.extend_counting(pairs);
        }
        KeyOp::HDel(fields) => {
            if let Some(e) = d.get_mut(key, now_ms) {
                let Value::Hash(h) = &mut e.value else {
                    return Err(WRONG_TYPE);
                };
                for f in fields {
                    h.swap_remove(f);
                }
                remove_if_empty(d, key);
            }
        }
        KeyOp::Push { left, items } => {
            let e = collection(d, key, now_ms, || Value::List(Arc::default()));
            let l = e.value.list_mut().ok_or(WRONG_TYPE)?;
            for it in items {
                if *left {
                    l.push_front(it);
                } else {
                    l.push_back(it);
                }
            }
        }
        KeyOp::Pop { left, count } => {
            if let Some(e) = d.get_mut(key, now_ms) {
                let l = e.value.list_mut().ok_or(WRONG_TYPE)?;
                for _ in 0..*count {
                    let popped = if *left { l.pop_front() } else { l.pop_back() };
                    if !popped {
                        break;
                    }
                }
                remove_if_empty(d, key);
            }
        }
        KeyOp::LSet { index, item } => {
            let e = d.get_mut(key, now_ms).ok_or("no such key")?;
            let l = e.value.list_mut().ok_or(WRONG_TYPE)?;
            let i = list_index(l.len(), *index).ok_or("index out of range")?;
            l.set(i, item);
        }
        KeyOp::LRem { count, item } => {
            if let Some(e) = d.get_mut(key, now_ms) {
                let l = e.value.list_mut().ok_or(WRONG_TYPE)?;
                l.remove_matching(*count, item);
                remove_if_empty(d, key);
            }
        }
        KeyOp::LTrim { start, stop } => {
            if let Some(e) = d.get_mut(key, now_ms) {
                let l = e.value.list_mut().ok_or(WRONG_TYPE)?;
                match list_range(l.len(), *start, *stop) {
                    Some((s, e)) => {
                        l.truncate(e + 1);
                        l.remove_front(s);
                    }
                    None => l.clear(),
                }
                remove_if_empty(d, key);
            }
        }
        KeyOp::LInsert {
            before,
            pivot,
            item,
        } => {
            if let Some(e) = d.get_mut(key, now_ms) {
                let l = e.value.list_mut().ok_or(WRONG_TYPE)?;
                if let Some(pos) = l.iter().position(|x| x == &pivot[..]) {
                    let at = if *before { pos } else { pos + 1 };
                    l.insert(at, item);
                }
            }
        }
        KeyOp::SAdd(members) => {
            let e = collection(d, key, now_ms, Value::new_set);
            let s = e.value.set_mut().ok_or(WRONG_TYPE)?;
            for m in members {
                s.insert(m);
            }
        }
        KeyOp::SRem(members) => {
            if let Some(e) = d.get_mut(key, now_ms) {
                let s = e.value.set_mut().ok_or(WRONG_TYPE)?;
                for m in members {
                    s.swap_remove(m);
                }
                remove_if_empty(d, key);
            }
        }
        KeyOp::ZAdd(pairs) => {
            let e = collection(d, key, now_ms, || Value::ZSet(Arc::default()));
            let z = e.value.zset_mut().ok_or(WRONG_TYPE)?;
            for (score, m) in pairs {
                if score.is_nan() {
                    return Err("NaN score");
                }
                z.insert(m, *score);
            }
        }
        KeyOp::ZRem(members) => {
            if let Some(e) = d.get_mut(key, now_ms) {
                let z = e.value.zset_mut().ok_or(WRONG_TYPE)?;
                for m in members {
                    z.remove(m);
                }
                remove_if_empty(d, key);
            }
        }
        KeyOp::Stream(op) => {
            let e = if op.creates() {
                collection(d, key, now_ms, || Value::Stream(Arc::default()))
            } else {
                match d.get_mut(key, now_ms) {
                    Some(e) => e,
                    // Removing from a missing stream removes nothing, as
                    // HDEL or LPOP on a missing key.
                    None if op.only_removes() => return Ok(()),
                    None => return Err("no such key"),
                }
            };
            let s = e.value.stream_mut().ok_or(WRONG_TYPE)?;
            crate::stream_op::apply(s, op)?;
        }
    }
    Ok(())
}

/// Resolves a Redis list index (negative counts from the end).
pub fn list_index(len: usize, index: i64) -> Option<usize> {
    let len = len as i64;
    let i = if index < 0 { len + index } else { index };
    (0..len).contains(&i).then_some(i as usize)
}

/// Resolves Redis's inclusive `start stop` range (LRANGE, LTRIM, GETRANGE
/// semantics) to inclusive bounds, or None when empty.
pub fn list_range(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if stop < 0 { len + stop } else { stop };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as usize, e as usize))
}
