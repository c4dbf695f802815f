//! Binary encoding of mutations: the payload of one log record (and, later,
//! of snapshot entries). Every field is little-endian and length-prefixed;
//! the byte layout is documented in `docs/format.md` ("Record payload").
//! Decoding is bounds-checked and never panics on arbitrary bytes.

use crate::mutation::{ExpireMode, FunctionOp, KeyOp, Mutation, ReplOrigin};
use crate::value::{ListValue, Value};
use crate::zset::ZSet;
use bytes::Bytes;
use std::sync::Arc;

/// Payload format version, written as the first byte of every payload
/// that holds no function-library change, so builds that predate
/// functions still read every log written without them.
pub const PAYLOAD_VERSION: u8 = 1;
/// Version 2: version 1 plus mutation tag 5 (function library). Written
/// only for payloads that hold such a mutation.
pub const PAYLOAD_VERSION_FUNCTIONS: u8 = 2;
/// Version 3: version 2 plus operation tag 19 (stream write) and value tag
/// 5 (stream). Written only for payloads that hold one.
pub const PAYLOAD_VERSION_STREAMS: u8 = 3;
/// Version 4: version 3 plus mutation tag 6 (a replica's stream position).
/// Written only for payloads that hold one.
pub const PAYLOAD_VERSION_REPL_ORIGIN: u8 = 4;
/// Version 4 plus value type 6 (a stream whose consumers carry their
/// active time), in RESTOREs of stream values.
pub const PAYLOAD_VERSION_STREAM_ACTIVE: u8 = 5;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed payload at byte {offset}: {reason}")]
pub struct DecodeError {
    pub offset: usize,
    pub reason: &'static str,
}

mod tag {
    pub const KEY: u8 = 1;
    pub const FLUSHDB: u8 = 2;
    pub const FLUSHALL: u8 = 3;
    pub const SWAPDB: u8 = 4;
    pub const FUNCTION: u8 = 5;
    pub const REPL_ORIGIN: u8 = 6;

    pub const FN_LOAD: u8 = 1;
    pub const FN_DELETE: u8 = 2;
    pub const FN_FLUSH: u8 = 3;

    pub const SET_STRING: u8 = 1;
    pub const RESTORE: u8 = 2;
    pub const DEL: u8 = 3;
    pub const EXPIRE: u8 = 4;
    pub const APPEND: u8 = 5;
    pub const SETRANGE: u8 = 6;
    pub const HSET: u8 = 7;
    pub const HDEL: u8 = 8;
    pub const PUSH: u8 = 9;
    pub const POP: u8 = 10;
    pub const LSET: u8 = 11;
    pub const LREM: u8 = 12;
    pub const LTRIM: u8 = 13;
    pub const LINSERT: u8 = 14;
    pub const SADD: u8 = 15;
    pub const SREM: u8 = 16;
    pub const ZADD: u8 = 17;
    pub const ZREM: u8 = 18;
    pub const STREAM: u8 = 19;

    pub const EXPIRE_CLEAR: u8 = 0;
    pub const EXPIRE_KEEP: u8 = 1;
    pub const EXPIRE_AT: u8 = 2;

    pub const V_STR: u8 = 0;
    pub const V_HASH: u8 = 1;
    pub const V_LIST: u8 = 2;
    pub const V_SET: u8 = 3;
    pub const V_ZSET: u8 = 4;
    /// Written by format versions up to 4; read with each consumer's
    /// active time equal to its seen time (as Redis 7.2 reads a 7.0 RDB).
    pub const V_STREAM: u8 = 5;
    /// A stream whose consumers carry their active time (payload version
    /// 5, checkpoint version 5).
    pub const V_STREAM_ACTIVE: u8 = 6;
    /// A packed hash as its in-memory buffer (checkpoint version 6 only;
    /// never in a log record).
    pub const V_HASH_PACKED: u8 = 7;
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

fn put_list(out: &mut Vec<u8>, items: &[Bytes]) {
    put_u32(out, items.len() as u32);
    for it in items {
        put_bytes(out, it);
    }
}

/// Bytes a payload takes besides its mutations (version and count).
pub const RECORD_HEADER_BYTES: u64 = 5;

/// Appends the payload for `muts` (one commit) to `out`.
pub fn encode_mutations(muts: &[Mutation], out: &mut Vec<u8>) {
    encode_record(muts.iter(), muts.len(), out)
}

/// Appends the payload for the `count` mutations `muts` yields.
pub fn encode_record<'m>(
    muts: impl Iterator<Item = &'m Mutation>,
    count: usize,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.push(PAYLOAD_VERSION);
    put_u32(out, count as u32);
    let mut functions = false;
    let mut streams = false;
    let mut origin = false;
    let mut stream_values = false;
    for m in muts {
        functions |= m.is_function();
        streams |= has_stream(m);
        origin |= matches!(m, Mutation::ReplOrigin(_));
        stream_values |= has_stream_value(m);
        encode_mutation(m, out);
    }
    if stream_values {
        out[start] = PAYLOAD_VERSION_STREAM_ACTIVE;
    } else if origin {
        out[start] = PAYLOAD_VERSION_REPL_ORIGIN;
    } else if streams {
        out[start] = PAYLOAD_VERSION_STREAMS;
    } else if functions {
        out[start] = PAYLOAD_VERSION_FUNCTIONS;
    }
}

/// Whether a payload holds state that checkpoints do not store, so that
/// recovery must read it even when a checkpoint covers its record: a
/// replica's stream position (only version 4 payloads can hold one).
pub fn covered_state(payload: &[u8]) -> bool {
    matches!(
        payload.first(),
        Some(&(PAYLOAD_VERSION_REPL_ORIGIN | PAYLOAD_VERSION_STREAM_ACTIVE))
    )
}

/// Whether `m` holds a whole stream value (a RESTORE): a version 5
/// payload, which writes its consumers' active times.
fn has_stream_value(m: &Mutation) -> bool {
    matches!(
        m,
        Mutation::Key {
            op: KeyOp::Restore {
                value: Value::Stream(_),
                ..
            },
            ..
        }
    )
}

/// Whether `m` needs a version 3 payload.
fn has_stream(m: &Mutation) -> bool {
    matches!(
        m,
        Mutation::Key {
            op: KeyOp::Stream(_)
                | KeyOp::Restore {
                    value: Value::Stream(_),
                    ..
                },
            ..
        }
    )
}

/// Exactly `encode_mutation(m, ..)`'s output length, without encoding, so a
/// transaction can be refused before it applies a mutation the log could
/// not take.
pub fn encoded_len(m: &Mutation) -> u64 {
    const U32: u64 = 4;
    const U64: u64 = 8;
    let bytes = |b: &[u8]| U32 + b.len() as u64;
    let list = |items: &[Bytes]| U32 + items.iter().map(|b| bytes(b)).sum::<u64>();
    match m {
        Mutation::Key { key, op, .. } => {
            let op_len = 1 + match op {
                KeyOp::SetString { value, expire } => {
                    1 + matches!(expire, ExpireMode::At(_)) as u64 * U64 + bytes(value)
                }
                KeyOp::Restore { value, .. } => U64 + value_len(value),
                KeyOp::Del => 0,
                KeyOp::Expire { .. } => U64,
                KeyOp::Append(d) => bytes(d),
                KeyOp::SetRange { data, .. } => U64 + bytes(data),
                KeyOp::HSet(pairs) => {
                    U32 + pairs.iter().map(|(f, v)| bytes(f) + bytes(v)).sum::<u64>()
                }
                KeyOp::HDel(fields) => list(fields),
                KeyOp::Push { items, .. } => 1 + list(items),
                KeyOp::Pop { .. } => 1 + U64,
                KeyOp::LSet { item, .. } => U64 + bytes(item),
                KeyOp::LRem { item, .. } => U64 + bytes(item),
                KeyOp::LTrim { .. } => 2 * U64,
                KeyOp::LInsert { pivot, item, .. } => 1 + bytes(pivot) + bytes(item),
                KeyOp::SAdd(m) | KeyOp::SRem(m) | KeyOp::ZRem(m) => list(m),
                KeyOp::ZAdd(pairs) => U32 + pairs.iter().map(|(_, m)| U64 + bytes(m)).sum::<u64>(),
                KeyOp::Stream(op) => {
                    let mut v = Vec::new();
                    crate::stream_codec::encode_op(op, &mut v);
                    v.len() as u64
                }
            };
            1 + U32 + bytes(key) + op_len
        }
        Mutation::FlushDb { .. } => 1 + U32,
        Mutation::FlushAll => 1,
        Mutation::SwapDb { .. } => 1 + 2 * U32,
        Mutation::Function(op) => {
            2 + match op {
                FunctionOp::Load { name, code } => bytes(name) + bytes(code),
                FunctionOp::Delete { name } => bytes(name),
                FunctionOp::Flush => 0,
            }
        }
        Mutation::ReplOrigin(o) => 1 + bytes(&o.replid) + U64 + U32,
    }
}

fn value_len(v: &Value) -> u64 {
    const U32: u64 = 4;
    let bytes = |b: &[u8]| U32 + b.len() as u64;
    1 + U32
        + match v {
            Value::Str(s) => return 1 + bytes(s),
            Value::Hash(h) => h.slices().map(|(f, v)| bytes(f) + bytes(v)).sum::<u64>(),
            Value::List(l) => l.iter().map(bytes).sum(),
            Value::Set(s) => s.iter().map(|b| bytes(b)).sum(),
            Value::ZSet(z) => z.iter().map(|(m, _)| 8 + bytes(m)).sum(),
            Value::Stream(st) => {
                let mut v = Vec::new();
                crate::stream_codec::encode_stream(st, &mut v);
                return 1 + v.len() as u64;
            }
        }
}

pub fn encode_mutation(m: &Mutation, out: &mut Vec<u8>) {
    match m {
        Mutation::Key { db, key, op } => {
            out.push(tag::KEY);
            put_u32(out, *db);
            put_bytes(out, key);
            encode_op(op, out);
        }
        Mutation::FlushDb { db } => {
            out.push(tag::FLUSHDB);
            put_u32(out, *db);
        }
        Mutation::FlushAll => out.push(tag::FLUSHALL),
        Mutation::SwapDb { a, b } => {
            out.push(tag::SWAPDB);
            put_u32(out, *a);
            put_u32(out, *b);
        }
        Mutation::Function(op) => {
            out.push(tag::FUNCTION);
            match op {
                FunctionOp::Load { name, code } => {
                    out.push(tag::FN_LOAD);
                    put_bytes(out, name);
                    put_bytes(out, code);
                }
                FunctionOp::Delete { name } => {
                    out.push(tag::FN_DELETE);
                    put_bytes(out, name);
                }
                FunctionOp::Flush => out.push(tag::FN_FLUSH),
            }
        }
        Mutation::ReplOrigin(o) => {
            out.push(tag::REPL_ORIGIN);
            put_bytes(out, &o.replid);
            out.extend_from_slice(&o.offset.to_le_bytes());
            put_u32(out, o.db);
        }
    }
}

fn encode_op(op: &KeyOp, out: &mut Vec<u8>) {
    match op {
        KeyOp::SetString { value, expire } => {
            out.push(tag::SET_STRING);
            match expire {
                ExpireMode::Clear => out.push(tag::EXPIRE_CLEAR),
                ExpireMode::Keep => out.push(tag::EXPIRE_KEEP),
                ExpireMode::At(t) => {
                    out.push(tag::EXPIRE_AT);
                    put_u64(out, *t);
                }
            }
            put_bytes(out, value);
        }
        KeyOp::Restore {
            value,
            expire_at_ms,
        } => {
            out.push(tag::RESTORE);
            put_u64(out, *expire_at_ms);
            encode_value(value, out);
        }
        KeyOp::Del => out.push(tag::DEL),
        KeyOp::Expire { at_ms } => {
            out.push(tag::EXPIRE);
            put_u64(out, *at_ms);
        }
        KeyOp::Append(d) => {
            out.push(tag::APPEND);
            put_bytes(out, d);
        }
        KeyOp::SetRange { offset, data } => {
            out.push(tag::SETRANGE);
            put_u64(out, *offset);
            put_bytes(out, data);
        }
        KeyOp::HSet(pairs) => {
            out.push(tag::HSET);
            put_u32(out, pairs.len() as u32);
            for (f, v) in pairs {
                put_bytes(out, f);
                put_bytes(out, v);
            }
        }
        KeyOp::HDel(fields) => {
            out.push(tag::HDEL);
            put_list(out, fields);
        }
        KeyOp::Push { left, items } => {
            out.push(tag::PUSH);
            out.push(u8::from(*left));
            put_list(out, items);
        }
        KeyOp::Pop { left, count } => {
            out.push(tag::POP);
            out.push(u8::from(*left));
            put_u64(out, *count);
        }
        KeyOp::LSet { index, item } => {
            out.push(tag::LSET);
            put_u64(out, *index as u64);
            put_bytes(out, item);
        }
        KeyOp::LRem { count, item } => {
            out.push(tag::LREM);
            put_u64(out, *count as u64);
            put_bytes(out, item);
        }
        KeyOp::LTrim { start, stop } => {
            out.push(tag::LTRIM);
            put_u64(out, *start as u64);
            put_u64(out, *stop as u64);
        }
        KeyOp::LInsert {
            before,
            pivot,
            item,
        } => {
            out.push(tag::LINSERT);
            out.push(u8::from(*before));
            put_bytes(out, pivot);
            put_bytes(out, item);
        }
        KeyOp::SAdd(m) => {
            out.push(tag::SADD);
            put_list(out, m);
        }
        KeyOp::SRem(m) => {
            out.push(tag::SREM);
            put_list(out, m);
        }
        KeyOp::ZAdd(pairs) => {
            out.push(tag::ZADD);
            put_u32(out, pairs.len() as u32);
            for (s, m) in pairs {
                put_u64(out, s.to_bits());
                put_bytes(out, m);
            }
        }
        KeyOp::ZRem(m) => {
            out.push(tag::ZREM);
            put_list(out, m);
        }
        KeyOp::Stream(op) => {
            out.push(tag::STREAM);
            crate::stream_codec::encode_op(op, out);
        }
    }
}

/// Encodes a value as a checkpoint (version 6 on) stores it: a packed
/// hash as its buffer, copied whole (type 7), which a restart copies back
/// without rewriting each entry; anything else as [`encode_value`].
pub fn encode_stored_value(v: &Value, out: &mut Vec<u8>) {
    if let Value::Hash(h) = v {
        if let Some(parts) = h.packed_parts() {
            out.push(tag::V_HASH_PACKED);
            let at = out.len();
            put_u32(out, 0);
            for p in parts {
                out.extend_from_slice(p);
            }
            let len = (out.len() - at - 4) as u32;
            out[at..at + 4].copy_from_slice(&len.to_le_bytes());
            return;
        }
    }
    encode_value(v, out)
}

/// Encodes a whole value (used by `Restore` and by snapshots).
pub fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Str(s) => {
            out.push(tag::V_STR);
            put_bytes(out, s);
        }
        Value::Hash(h) => {
            out.push(tag::V_HASH);
            // The count goes in after the walk: a packed hash knows its
            // count only by walking its entries, and a checkpoint encodes
            // every hash.
            let at = out.len();
            put_u32(out, 0);
            let mut n = 0u32;
            for (f, val) in h.slices() {
                put_bytes(out, f);
                put_bytes(out, val);
                n += 1;
            }
            out[at..at + 4].copy_from_slice(&n.to_le_bytes());
        }
        Value::List(l) => {
            out.push(tag::V_LIST);
            put_u32(out, l.len() as u32);
            for it in l.iter() {
                put_bytes(out, it);
            }
        }
        Value::Set(s) => {
            out.push(tag::V_SET);
            put_u32(out, s.len() as u32);
            for m in s.iter() {
                put_bytes(out, m);
            }
        }
        Value::ZSet(z) => {
            out.push(tag::V_ZSET);
            put_u32(out, z.len() as u32);
            for (m, s) in z.iter() {
                put_u64(out, s.to_bits());
                put_bytes(out, m);
            }
        }
        Value::Stream(st) => {
            out.push(tag::V_STREAM_ACTIVE);
            crate::stream_codec::encode_stream(st, out);
        }
    }
}

/// A bounds-checked cursor over a payload.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Slices are taken from this shared buffer instead of copied.
    shared: Option<&'a Bytes>,
    /// A value of type 6 was read: the caller checks that its container's
    /// version allows one.
    pub saw_active_streams: bool,
    /// A value of type 7 was read: only a checkpoint of version 6 on may
    /// hold one.
    pub saw_packed_hashes: bool,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            shared: None,
            saw_active_streams: false,
            saw_packed_hashes: false,
        }
    }

    /// A reader whose byte strings share `buf`'s allocation.
    pub fn shared(buf: &'a Bytes) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            shared: Some(buf),
            saw_active_streams: false,
            saw_packed_hashes: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn fail<T>(&self, reason: &'static str) -> Result<T, DecodeError> {
        Err(DecodeError {
            offset: self.pos,
            reason,
        })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.pos < n {
            return self.fail("truncated");
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    pub fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.u32()? as usize;
        let start = self.pos;
        let s = self.take(n)?;
        Ok(match self.shared {
            Some(b) => b.slice(start..start + n),
            None => Bytes::copy_from_slice(s),
        })
    }

    /// A length-prefixed byte string, borrowed from the payload.
    pub fn slice(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// A count that must be plausible for the bytes left (each element
    /// needs at least `min_elem_bytes`), so a corrupt count cannot make us
    /// allocate gigabytes.
    pub(crate) fn count(&mut self, min_elem_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_elem_bytes) > self.buf.len() - self.pos {
            return self.fail("count exceeds payload");
        }
        Ok(n)
    }

    fn list(&mut self) -> Result<Vec<Bytes>, DecodeError> {
        let n = self.count(4)?;
        (0..n).map(|_| self.bytes()).collect()
    }

    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => self.fail("bad boolean"),
        }
    }

    fn score(&mut self) -> Result<f64, DecodeError> {
        let s = f64::from_bits(self.u64()?);
        if s.is_nan() {
            return self.fail("NaN score");
        }
        Ok(s)
    }
}

/// Decodes a whole record payload.
pub fn decode_mutations(payload: &Bytes) -> Result<Vec<Mutation>, DecodeError> {
    let mut r = Reader::shared(payload);
    let version = r.u8()?;
    if !(PAYLOAD_VERSION..=PAYLOAD_VERSION_STREAM_ACTIVE).contains(&version) {
        return r.fail("unknown payload version");
    }
    let functions = version >= PAYLOAD_VERSION_FUNCTIONS;
    let n = r.count(1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let m = decode_mutation(&mut r)?;
        if m.is_function() && !functions {
            return r.fail("function mutation in a version 1 payload");
        }
        if has_stream(&m) && version < PAYLOAD_VERSION_STREAMS {
            return r.fail("stream mutation in a payload older than version 3");
        }
        if matches!(m, Mutation::ReplOrigin(_)) && version < PAYLOAD_VERSION_REPL_ORIGIN {
            return r.fail("stream position in a payload older than version 4");
        }
        if r.saw_active_streams && version < PAYLOAD_VERSION_STREAM_ACTIVE {
            return r.fail("stream value with active times in a payload older than version 5");
        }
        if r.saw_packed_hashes {
            return r.fail("packed hash value in a log record");
        }
        out.push(m);
    }
    if !r.is_empty() {
        return r.fail("trailing bytes");
    }
    Ok(out)
}

pub fn decode_mutation(r: &mut Reader<'_>) -> Result<Mutation, DecodeError> {
    Ok(match r.u8()? {
        tag::KEY => {
            let db = r.u32()?;
            let key = r.bytes()?;
            let op = decode_op(r)?;
            Mutation::Key { db, key, op }
        }
        tag::FLUSHDB => Mutation::FlushDb { db: r.u32()? },
        tag::FLUSHALL => Mutation::FlushAll,
        tag::SWAPDB => Mutation::SwapDb {
            a: r.u32()?,
            b: r.u32()?,
        },
        tag::FUNCTION => Mutation::Function(match r.u8()? {
            tag::FN_LOAD => FunctionOp::Load {
                name: r.bytes()?,
                code: r.bytes()?,
            },
            tag::FN_DELETE => FunctionOp::Delete { name: r.bytes()? },
            tag::FN_FLUSH => FunctionOp::Flush,
            _ => return r.fail("unknown function operation"),
        }),
        tag::REPL_ORIGIN => Mutation::ReplOrigin(ReplOrigin {
            replid: r.bytes()?,
            offset: r.u64()?,
            db: r.u32()?,
        }),
        _ => return r.fail("unknown mutation tag"),
    })
}

fn decode_op(r: &mut Reader<'_>) -> Result<KeyOp, DecodeError> {
    Ok(match r.u8()? {
        tag::SET_STRING => {
            let expire = match r.u8()? {
                tag::EXPIRE_CLEAR => ExpireMode::Clear,
                tag::EXPIRE_KEEP => ExpireMode::Keep,
                tag::EXPIRE_AT => ExpireMode::At(r.u64()?),
                _ => return r.fail("unknown expire mode"),
            };
            KeyOp::SetString {
                value: r.bytes()?,
                expire,
            }
        }
        tag::RESTORE => {
            let expire_at_ms = r.u64()?;
            KeyOp::Restore {
                expire_at_ms,
                value: decode_value(r)?,
            }
        }
        tag::DEL => KeyOp::Del,
        tag::EXPIRE => KeyOp::Expire { at_ms: r.u64()? },
        tag::APPEND => KeyOp::Append(r.bytes()?),
        tag::SETRANGE => KeyOp::SetRange {
            offset: r.u64()?,
            data: r.bytes()?,
        },
        tag::HSET => {
            let n = r.count(8)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                pairs.push((r.bytes()?, r.bytes()?));
            }
            KeyOp::HSet(pairs)
        }
        tag::HDEL => KeyOp::HDel(r.list()?),
        tag::PUSH => KeyOp::Push {
            left: r.bool()?,
            items: r.list()?,
        },
        tag::POP => KeyOp::Pop {
            left: r.bool()?,
            count: r.u64()?,
        },
        tag::LSET => KeyOp::LSet {
            index: r.u64()? as i64,
            item: r.bytes()?,
        },
        tag::LREM => KeyOp::LRem {
            count: r.u64()? as i64,
            item: r.bytes()?,
        },
        tag::LTRIM => KeyOp::LTrim {
            start: r.u64()? as i64,
            stop: r.u64()? as i64,
        },
        tag::LINSERT => KeyOp::LInsert {
            before: r.bool()?,
            pivot: r.bytes()?,
            item: r.bytes()?,
        },
        tag::SADD => KeyOp::SAdd(r.list()?),
        tag::SREM => KeyOp::SRem(r.list()?),
        tag::ZADD => {
            let n = r.count(12)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                pairs.push((r.score()?, r.bytes()?));
            }
            KeyOp::ZAdd(pairs)
        }
        tag::ZREM => KeyOp::ZRem(r.list()?),
        tag::STREAM => KeyOp::Stream(Box::new(crate::stream_codec::decode_op(r)?)),
        _ => return r.fail("unknown operation tag"),
    })
}

pub fn decode_value(r: &mut Reader<'_>) -> Result<Value, DecodeError> {
    Ok(match r.u8()? {
        tag::V_STR => Value::Str(r.bytes()?.into()),
        tag::V_HASH => {
            let n = r.count(8)?;
            // On the stack for a small hash: a restart decodes every record.
            let mut pairs: smallvec::SmallVec<[(&[u8], &[u8]); 16]> =
                smallvec::SmallVec::with_capacity(n);
            for _ in 0..n {
                pairs.push((r.slice()?, r.slice()?));
            }
            Value::Hash(crate::value::HashValue::from_slices(&pairs))
        }
        tag::V_HASH_PACKED => {
            r.saw_packed_hashes = true;
            let buf = r.slice()?;
            match crate::value::HashValue::from_packed(buf) {
                Ok(h) => Value::Hash(h),
                Err(reason) => return r.fail(reason),
            }
        }
        tag::V_LIST => {
            let n = r.count(4)?;
            let mut l = ListValue::new();
            for _ in 0..n {
                l.push_back(r.slice()?);
            }
            Value::List(Arc::new(l))
        }
        tag::V_SET => {
            let n = r.count(4)?;
            let mut s = crate::value::SetValue::with_capacity(n);
            for _ in 0..n {
                s.insert(r.bytes()?);
            }
            Value::Set(Arc::new(s))
        }
        tag::V_ZSET => {
            let n = r.count(12)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                let s = r.score()?;
                pairs.push((s, r.slice()?));
            }
            Value::ZSet(Arc::new(ZSet::from_pairs(&pairs)))
        }
        tag::V_STREAM => Value::Stream(Arc::new(crate::stream_codec::decode_stream(r, false)?)),
        tag::V_STREAM_ACTIVE => {
            r.saw_active_streams = true;
            Value::Stream(Arc::new(crate::stream_codec::decode_stream(r, true)?))
        }
        _ => return r.fail("unknown value type"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn round_trip_every_mutation() {
        let mut z = ZSet::default();
        z.insert(b("m"), 1.5);
        let muts = vec![
            Mutation::key(
                0,
                b("k"),
                KeyOp::SetString {
                    value: b("v"),
                    expire: ExpireMode::At(99),
                },
            ),
            Mutation::key(
                1,
                b("k"),
                KeyOp::SetString {
                    value: b("v"),
                    expire: ExpireMode::Keep,
                },
            ),
            Mutation::key(
                1,
                b("z"),
                KeyOp::Restore {
                    value: Value::ZSet(Arc::new(z)),
                    expire_at_ms: 5,
                },
            ),
            Mutation::key(2, b("k"), KeyOp::Del),
            Mutation::key(2, b("k"), KeyOp::Expire { at_ms: 7 }),
            Mutation::key(2, b("k"), KeyOp::Append(b("x"))),
            Mutation::key(
                2,
                b("k"),
                KeyOp::SetRange {
                    offset: 3,
                    data: b("y"),
                },
            ),
            Mutation::key(3, b("h"), KeyOp::HSet(vec![(b("f"), b("v"))])),
            Mutation::key(3, b("h"), KeyOp::HDel(vec![b("f")])),
            Mutation::key(
                4,
                b("l"),
                KeyOp::Push {
                    left: true,
                    items: vec![b("a")],
                },
            ),
            Mutation::key(
                4,
                b("l"),
                KeyOp::Pop {
                    left: false,
                    count: 2,
                },
            ),
            Mutation::key(
                4,
                b("l"),
                KeyOp::LSet {
                    index: -1,
                    item: b("a"),
                },
            ),
            Mutation::key(
                4,
                b("l"),
                KeyOp::LRem {
                    count: -2,
                    item: b("a"),
                },
            ),
            Mutation::key(4, b("l"), KeyOp::LTrim { start: 1, stop: -1 }),
            Mutation::key(
                4,
                b("l"),
                KeyOp::LInsert {
                    before: true,
                    pivot: b("a"),
                    item: b("b"),
                },
            ),
            Mutation::key(5, b("s"), KeyOp::SAdd(vec![b("a")])),
            Mutation::key(5, b("s"), KeyOp::SRem(vec![b("a")])),
            Mutation::key(6, b("z"), KeyOp::ZAdd(vec![(f64::INFINITY, b("a"))])),
            Mutation::key(6, b("z"), KeyOp::ZRem(vec![b("a")])),
            Mutation::FlushDb { db: 3 },
            Mutation::FlushAll,
            Mutation::SwapDb { a: 1, b: 2 },
        ];
        let mut out = Vec::new();
        encode_mutations(&muts, &mut out);
        let decoded = decode_mutations(&Bytes::from(out.clone())).unwrap();
        assert_eq!(decoded, muts);
        for cut in 0..out.len() {
            assert!(decode_mutations(&Bytes::copy_from_slice(&out[..cut])).is_err());
        }
        let mut total = RECORD_HEADER_BYTES;
        for m in &muts {
            let mut one = Vec::new();
            encode_mutation(m, &mut one);
            assert_eq!(encoded_len(m), one.len() as u64, "{m:?}");
            total += encoded_len(m);
        }
        assert_eq!(total, out.len() as u64);
    }

    /// Value type 7 (a packed hash's buffer) is for checkpoints: a log
    /// record that holds one is damaged, whatever its payload version.
    #[test]
    fn packed_hash_values_are_refused_in_log_records() {
        let h: crate::value::HashValue = [(b("f"), b("v"))].into_iter().collect();
        let restore = Mutation::key(
            0,
            b("h"),
            KeyOp::Restore {
                value: Value::Hash(h.clone()),
                expire_at_ms: 0,
            },
        );
        let mut out = Vec::new();
        encode_mutations(std::slice::from_ref(&restore), &mut out);
        assert_eq!(
            decode_mutations(&Bytes::from(out.clone())).unwrap(),
            vec![restore]
        );
        // The same record with the value as a checkpoint stores it.
        let mut plain = Vec::new();
        encode_value(&Value::Hash(h.clone()), &mut plain);
        let mut stored = Vec::new();
        encode_stored_value(&Value::Hash(h), &mut stored);
        assert_eq!(stored[0], tag::V_HASH_PACKED);
        let at = out.len() - plain.len();
        assert_eq!(out[at..], plain[..]);
        out.truncate(at);
        out.extend_from_slice(&stored);
        let err = decode_mutations(&Bytes::from(out)).unwrap_err();
        assert_eq!(err.reason, "packed hash value in a log record");
    }

    #[test]
    fn stream_positions_round_trip_in_version_4_payloads_only() {
        let origin = Mutation::ReplOrigin(ReplOrigin {
            replid: b("ab"),
            offset: 258,
            db: 3,
        });
        let muts = vec![Mutation::key(3, b("k"), KeyOp::Del), origin.clone()];
        let mut out = Vec::new();
        encode_mutations(&muts, &mut out);
        assert_eq!(out[0], PAYLOAD_VERSION_REPL_ORIGIN);
        assert_eq!(decode_mutations(&Bytes::from(out.clone())).unwrap(), muts);
        let total: u64 = muts.iter().map(encoded_len).sum::<u64>() + RECORD_HEADER_BYTES;
        assert_eq!(total, out.len() as u64);
        for cut in 0..out.len() {
            assert!(decode_mutations(&Bytes::copy_from_slice(&out[..cut])).is_err());
        }
        // An older version cannot carry one.
        out[0] = PAYLOAD_VERSION_STREAMS;
        assert!(decode_mutations(&Bytes::from(out)).is_err());
        // The documented bytes (docs/format.md, "Record payload").
        let mut alone = Vec::new();
        encode_mutations(&[origin], &mut alone);
        assert_eq!(
            alone,
            [4, 1, 0, 0, 0, 6, 2, 0, 0, 0, b'a', b'b', 2, 1, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0]
        );
    }

    #[test]
    fn function_changes_round_trip_in_version_2_payloads_only() {
        let muts = vec![
            Mutation::key(0, b("k"), KeyOp::Del),
            Mutation::Function(FunctionOp::Load {
                name: b("lib"),
                code: b("#!lua name=lib\nredis.register_function('f', function() end)"),
            }),
            Mutation::Function(FunctionOp::Delete { name: b("lib") }),
            Mutation::Function(FunctionOp::Flush),
        ];
        let mut out = Vec::new();
        encode_mutations(&muts, &mut out);
        assert_eq!(out[0], PAYLOAD_VERSION_FUNCTIONS);
        assert_eq!(decode_mutations(&Bytes::from(out.clone())).unwrap(), muts);
        let total: u64 = muts.iter().map(encoded_len).sum::<u64>() + RECORD_HEADER_BYTES;
        assert_eq!(total, out.len() as u64);
        for cut in 0..out.len() {
            assert!(decode_mutations(&Bytes::copy_from_slice(&out[..cut])).is_err());
        }
        // A version 1 payload cannot carry them (an older build wrote it).
        out[0] = PAYLOAD_VERSION;
        assert!(decode_mutations(&Bytes::from(out)).is_err());
        // The documented bytes (docs/format.md, "Record payload").
        let mut flush = Vec::new();
        encode_mutations(&[Mutation::Function(FunctionOp::Flush)], &mut flush);
        assert_eq!(flush, [2, 1, 0, 0, 0, 5, 3]);
        let mut del = Vec::new();
        encode_mutations(
            &[Mutation::Function(FunctionOp::Delete { name: b("x") })],
            &mut del,
        );
        assert_eq!(del, [2, 1, 0, 0, 0, 5, 2, 1, 0, 0, 0, b'x']);
        // Without them the payload stays version 1, byte for byte.
        let mut plain = Vec::new();
        encode_mutations(&muts[..1], &mut plain);
        assert_eq!(plain[0], PAYLOAD_VERSION);
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 12345u64;
        for _ in 0..20_000 {
            let len = (seed % 64) as usize;
            let mut v = vec![1 + (seed % 2) as u8];
            for _ in 0..len {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                v.push((seed >> 56) as u8 % 20);
            }
            let _ = decode_mutations(&Bytes::from(v));
        }
    }
}
