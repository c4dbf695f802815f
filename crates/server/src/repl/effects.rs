//! Committed mutations as the Redis commands that reproduce them, for the
//! replication stream. Mutations carry results (INCR is already a SET of
//! the new value, EXPIRE an absolute time), so every command here is
//! deterministic and both a durakv and a Redis 7 replica apply it the same.

use crate::rdb_value;
use bytes::Bytes;
use durakv_engine::mutation::{ExpireMode, FunctionOp, KeyOp, Mutation};
use durakv_engine::replication::ExpiredKey;
use durakv_engine::value::EncodingLimits;

/// One command and the database it must run in (None: any).
pub type Effect = (Option<u32>, Vec<u8>);

/// Appends `args` as a RESP array of bulk strings.
pub fn resp(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

pub(super) fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    resp(&mut out, args);
    out
}

/// A command with a fixed head and a variable tail of arguments.
pub(super) fn cmd_tail<'a>(head: &[&'a [u8]], tail: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut args: Vec<&[u8]> = head.to_vec();
    args.extend(tail);
    cmd(&args)
}

pub(super) fn num(n: impl ToString) -> Bytes {
    Bytes::from(n.to_string())
}

/// The commands for one committed record, in order.
pub fn translate(muts: &[Mutation], limits: &EncodingLimits) -> Vec<Effect> {
    let mut out = Vec::with_capacity(muts.len());
    for m in muts {
        match m {
            Mutation::Key { db, key, op } => key_op(*db, key, op, limits, &mut out),
            Mutation::FlushDb { db } => out.push((Some(*db), cmd(&[b"FLUSHDB"]))),
            Mutation::FlushAll => out.push((None, cmd(&[b"FLUSHALL"]))),
            Mutation::SwapDb { a, b } => out.push((None, cmd(&[b"SWAPDB", &num(a), &num(b)]))),
            Mutation::Function(op) => out.push((None, function_op(op))),
            // This server's position in its own primary's stream: not a
            // change for its replicas.
            Mutation::ReplOrigin(_) => {}
        }
    }
    out
}

/// [`translate`], with a `DEL` for each expired key at its place among the
/// mutations, as Redis propagates an expiry (in the same MULTI/EXEC as the
/// command that met the key, when there is one).
pub fn translate_with_expired(
    muts: &[Mutation],
    expired: &[ExpiredKey],
    limits: &EncodingLimits,
) -> Vec<Effect> {
    let mut out = Vec::with_capacity(muts.len() + expired.len());
    let mut next = expired.iter().peekable();
    for (i, m) in muts.iter().enumerate() {
        while let Some(e) = next.next_if(|e| e.before <= i) {
            out.push((Some(e.db), cmd(&[b"DEL", &e.key])));
        }
        out.extend(translate(std::slice::from_ref(m), limits));
    }
    out.extend(next.map(|e| (Some(e.db), cmd(&[b"DEL", &e.key]))));
    out
}

fn function_op(op: &FunctionOp) -> Vec<u8> {
    match op {
        FunctionOp::Load { code, .. } => cmd(&[b"FUNCTION", b"LOAD", b"REPLACE", code]),
        FunctionOp::Delete { name } => cmd(&[b"FUNCTION", b"DELETE", name]),
        FunctionOp::Flush => cmd(&[b"FUNCTION", b"FLUSH"]),
    }
}

/// Appends the command (a stream change may take several) for `op`.
fn key_op(db: u32, key: &[u8], op: &KeyOp, limits: &EncodingLimits, out: &mut Vec<Effect>) {
    let c = match op {
        KeyOp::SetString { value, expire } => match expire {
            ExpireMode::Clear => cmd(&[b"SET", key, value]),
            ExpireMode::Keep => cmd(&[b"SET", key, value, b"KEEPTTL"]),
            ExpireMode::At(t) => cmd(&[b"SET", key, value, b"PXAT", &num(t)]),
        },
        KeyOp::Restore {
            value,
            expire_at_ms,
        } => {
            let payload = rdb_value::dump(value, limits);
            cmd(&[
                b"RESTORE",
                key,
                &num(expire_at_ms),
                &payload,
                b"REPLACE",
                b"ABSTTL",
            ])
        }
        KeyOp::Del => cmd(&[b"DEL", key]),
        KeyOp::Expire { at_ms: 0 } => cmd(&[b"PERSIST", key]),
        KeyOp::Expire { at_ms } => cmd(&[b"PEXPIREAT", key, &num(at_ms)]),
        KeyOp::Append(d) => cmd(&[b"APPEND", key, d]),
        KeyOp::SetRange { offset, data } => cmd(&[b"SETRANGE", key, &num(offset), data]),
        KeyOp::HSet(pairs) => cmd_tail(
            &[b"HSET", key],
            pairs.iter().flat_map(|(f, v)| [&f[..], &v[..]]),
        ),
        KeyOp::HDel(fields) => cmd_tail(&[b"HDEL", key], fields.iter().map(|f| &f[..])),
        KeyOp::Push { left, items } => {
            let name: &[u8] = if *left { b"LPUSH" } else { b"RPUSH" };
            cmd_tail(&[name, key], items.iter().map(|i| &i[..]))
        }
        KeyOp::Pop { left, count } => {
            let name: &[u8] = if *left { b"LPOP" } else { b"RPOP" };
            cmd(&[name, key, &num(count)])
        }
        KeyOp::LSet { index, item } => cmd(&[b"LSET", key, &num(index), item]),
        KeyOp::LRem { count, item } => cmd(&[b"LREM", key, &num(count), item]),
        KeyOp::LTrim { start, stop } => cmd(&[b"LTRIM", key, &num(start), &num(stop)]),
        KeyOp::LInsert {
            before,
            pivot,
            item,
        } => {
            let at: &[u8] = if *before { b"BEFORE" } else { b"AFTER" };
            cmd(&[b"LINSERT", key, at, pivot, item])
        }
        KeyOp::SAdd(m) => cmd_tail(&[b"SADD", key], m.iter().map(|x| &x[..])),
        KeyOp::SRem(m) => cmd_tail(&[b"SREM", key], m.iter().map(|x| &x[..])),
        KeyOp::ZAdd(pairs) => {
            let scores: Vec<Bytes> = pairs.iter().map(|(s, _)| score(*s)).collect();
            cmd_tail(
                &[b"ZADD", key],
                scores
                    .iter()
                    .zip(pairs)
                    .flat_map(|(s, (_, m))| [&s[..], &m[..]]),
            )
        }
        KeyOp::ZRem(m) => cmd_tail(&[b"ZREM", key], m.iter().map(|x| &x[..])),
        KeyOp::Stream(op) => {
            let db = Some(db);
            out.extend(super::stream_effects::commands(key, op).map(|c| (db, c)));
            return;
        }
    };
    out.push((Some(db), c));
}

/// A score that parses back to the same double (Rust prints the shortest
/// round-trip form; infinities as `inf`, which Redis accepts).
fn score(s: f64) -> Bytes {
    num(s)
}
