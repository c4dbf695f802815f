//! Bitmaps and bitfields: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD
//! and BITFIELD_RO. A bitmap is a string value read as bits, the most
//! significant bit of byte 0 first. Writes are SETRANGE mutations of just
//! the bytes they touch, so a bit set in a large bitmap logs a few bytes,
//! and growing the string is the engine's zero fill, done once.

use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, FIRST_KEY};
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::{ExpireMode, KeyOp};
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, Value};
use durakv_protocol::Frame;

use super::{apply, read_as, syntax};

const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BIT_VALUE: &str = "ERR bit is not an integer or out of range";
const BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
const BITFIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const BITFIELD_RO_WRITE: &str = "ERR BITFIELD_RO only supports the GET subcommand";
const OVERFLOW_TYPE: &str = "ERR Invalid OVERFLOW type specified";
const BITOP_NOT_ARGS: &str = "ERR BITOP NOT must be called with a single source key.";
const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// BITOP: the operation, the destination, then the sources are all keys.
const BITOP_KEYS: Keys = Keys::Range {
    first: 2,
    last: -1,
    step: 1,
};

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("setbit", 4, WRITE | DENYOOM, FIRST_KEY, Handler::Data(setbit), "bitmap", "Writes a 0 or 1 at a bit offset in a string, growing or creating it as needed."),
        spec("getbit", 3, READONLY | FAST, FIRST_KEY, Handler::Data(getbit), "bitmap", "Reads the bit at an offset of a string."),
        spec("bitcount", -2, READONLY, FIRST_KEY, Handler::Data(bitcount), "bitmap", "Counts the 1 bits in a string, or in a byte or bit range of it."),
        spec("bitpos", -3, READONLY, FIRST_KEY, Handler::Data(bitpos), "bitmap", "Finds the first 1 or 0 bit in a string or a range of it."),
        spec("bitop", -4, WRITE | DENYOOM, BITOP_KEYS, Handler::Data(bitop), "bitmap", "Combines strings bit by bit (AND, OR, XOR, NOT) into a key."),
        spec("bitfield", -2, WRITE | DENYOOM, FIRST_KEY, Handler::Data(bitfield), "bitmap", "Reads, writes and increments integer fields packed in a string."),
        spec("bitfield_ro", -2, READONLY | FAST, FIRST_KEY, Handler::Data(bitfield_ro), "bitmap", "Reads integer fields packed in a string, without modifying it."),
    ]
}

/// A bit offset argument; with `field_bits`, the `#N` form means the Nth
/// field of that width. The byte it falls in must lie below the string
/// length limit.
fn bit_offset(arg: &[u8], field_bits: Option<u32>, max_len: u64) -> Result<u64, Frame> {
    let bad = || Frame::error(BIT_OFFSET);
    let n = match field_bits {
        Some(bits) if arg.len() > 1 && arg[0] == b'#' => parse_i64(&arg[1..])
            .and_then(|n| n.checked_mul(i64::from(bits)))
            .ok_or_else(bad)?,
        _ => parse_i64(arg).ok_or_else(bad)?,
    };
    match u64::try_from(n) {
        Ok(n) if (n >> 3) < max_len => Ok(n),
        _ => Err(bad()),
    }
}

/// The string at `key` as a slice, for a read that must not keep the value
/// shared (a later SETRANGE then updates it in place).
fn with_string<R>(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R, Frame> {
    let s = read_as(txn, db, key, Value::as_str)?;
    Ok(f(s.map(|b| &b[..])))
}

fn set_range(txn: &mut Txn<'_>, db: usize, key: &Bytes, offset: u64, data: Vec<u8>) -> Reply {
    let op = KeyOp::SetRange {
        offset,
        data: Bytes::from(data),
    };
    apply(txn, db, key, op).map(|()| Frame::Null)
}

fn bit_at(s: &[u8], offset: u64) -> bool {
    usize::try_from(offset >> 3)
        .ok()
        .and_then(|i| s.get(i))
        .is_some_and(|b| b & (0x80 >> (offset & 7)) != 0)
}

fn setbit(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let offset = bit_offset(&args[2], None, super::string_limit(ctx))?;
    let on = match parse_i64(&args[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(Frame::error(BIT_VALUE)),
    };
    let db = ctx.db();
    let byte = offset >> 3;
    let mask = 0x80u8 >> (offset & 7);
    let (old, grows) = with_string(txn, db, &args[1], |s| {
        let s = s.unwrap_or_default();
        match usize::try_from(byte).ok().and_then(|i| s.get(i)) {
            Some(&b) => (b, false),
            None => (0, true),
        }
    })?;
    let new = if on { old | mask } else { old & !mask };
    // Like Redis, an unchanged bit in a string already long enough is no
    // write at all (nothing logged, nothing counted as a change).
    if grows || new != old {
        set_range(txn, db, &args[1], byte, vec![new])?;
    }
    Ok(Frame::Integer(i64::from(old & mask != 0)))
}

fn getbit(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let offset = bit_offset(&args[2], None, super::string_limit(ctx))?;
    let bit = with_string(txn, ctx.db(), &args[1], |s| {
        bit_at(s.unwrap_or_default(), offset)
    })?;
    Ok(Frame::Integer(i64::from(bit)))
}

/// `BYTE` or `BIT`: whether a range counts bits.
fn range_unit(arg: Option<&Bytes>) -> Result<bool, Frame> {
    match arg {
        None => Ok(false),
        Some(a) if is(a, "byte") => Ok(false),
        Some(a) if is(a, "bit") => Ok(true),
        Some(_) => Err(syntax()),
    }
}

/// Resolves a BITCOUNT/BITPOS range over a string of `len` bytes to an
/// inclusive range of bit positions: negative ends count from the end,
/// both are clamped into the string, and an empty range is `None`.
fn bit_range(start: i64, end: i64, bits: bool, len: usize) -> Option<(u64, u64)> {
    let total = if bits { len as i64 * 8 } else { len as i64 };
    let start = if start < 0 { total + start } else { start }.max(0);
    let end = if end < 0 { total + end } else { end }
        .max(0)
        .min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// Masks selecting the bits of the first and last byte of an inclusive
/// bit range.
fn edge_masks(lo: u64, hi: u64) -> (u8, u8) {
    (0xFF >> (lo & 7), 0xFF << (7 - (hi & 7)))
}

fn word(c: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(c);
    u64::from_be_bytes(w)
}

/// The number of set bits at positions `lo..=hi` (inside `s`).
fn count_ones(s: &[u8], lo: u64, hi: u64) -> u64 {
    let (first, last) = ((lo >> 3) as usize, (hi >> 3) as usize);
    let (first_mask, last_mask) = edge_masks(lo, hi);
    if first == last {
        return u64::from((s[first] & first_mask & last_mask).count_ones());
    }
    let middle = &s[first + 1..last];
    let chunks = middle.chunks_exact(8);
    let tail: u64 = chunks
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    let words: u64 = chunks.map(|c| u64::from(word(c).count_ones())).sum();
    u64::from((s[first] & first_mask).count_ones())
        + words
        + tail
        + u64::from((s[last] & last_mask).count_ones())
}

/// The first position in `lo..=hi` (inside `s`) whose bit is `want`,
/// scanning whole words in the middle.
fn first_bit(s: &[u8], lo: u64, hi: u64, want: bool) -> Option<u64> {
    let (first, last) = ((lo >> 3) as usize, (hi >> 3) as usize);
    let (first_mask, last_mask) = edge_masks(lo, hi);
    // Looking for a clear bit is looking for a set bit in the complement.
    let flip = |b: u8| if want { b } else { !b };
    let at = |i: usize, b: u8| Some(i as u64 * 8 + u64::from(b.leading_zeros()));
    let mut b = flip(s[first]) & first_mask;
    if first == last {
        b &= last_mask;
    }
    if b != 0 {
        return at(first, b);
    }
    let mut i = first + 1;
    while i + 8 <= last {
        let w = word(&s[i..i + 8]);
        let w = if want { w } else { !w };
        if w != 0 {
            return Some(i as u64 * 8 + u64::from(w.leading_zeros()));
        }
        i += 8;
    }
    while i <= last {
        let mut b = flip(s[i]);
        if i == last {
            b &= last_mask;
        }
        if b != 0 {
            return at(i, b);
        }
        i += 1;
    }
    None
}

fn bitcount(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    // As in Redis, a missing key counts 0 before the range is read.
    let n = with_string(txn, ctx.db(), &args[1], |s| {
        let Some(s) = s else {
            return Ok(0);
        };
        let range = match args.len() {
            2 => None,
            4 | 5 => {
                let (start, end) = (arg_i64(&args[2])?, arg_i64(&args[3])?);
                // Both ends from the end, reversed: Redis answers 0 before
                // it reads BIT or BYTE.
                if start < 0 && end < 0 && start > end {
                    return Ok(0);
                }
                Some((start, end, range_unit(args.get(4))?))
            }
            _ => return Err(syntax()),
        };
        let bits = match range {
            None => bit_range(0, -1, false, s.len()),
            Some((start, end, bits)) => bit_range(start, end, bits, s.len()),
        };
        Ok(bits.map_or(0, |(lo, hi)| count_ones(s, lo, hi)))
    })??;
    Ok(Frame::Integer(n as i64))
}

fn bitpos(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let want = match arg_i64(&args[2])? {
        0 => false,
        1 => true,
        _ => return Err(Frame::error(BITPOS_BIT)),
    };
    // As in Redis, a missing key answers before the range is read, and
    // the range is read start, unit, then end.
    let pos = with_string(txn, ctx.db(), &args[1], |s| {
        // A missing key is an endless run of zeros.
        let Some(s) = s else {
            return Ok(if want { -1 } else { 0 });
        };
        if args.len() > 6 {
            return Err(syntax());
        }
        let start = args.get(3).map(|a| arg_i64(a)).transpose()?.unwrap_or(0);
        let bits = range_unit(args.get(5))?;
        let end = args.get(4).map(|a| arg_i64(a)).transpose()?;
        let Some((lo, hi)) = bit_range(start, end.unwrap_or(-1), bits, s.len()) else {
            return Ok(-1);
        };
        Ok(match first_bit(s, lo, hi, want) {
            Some(p) => p as i64,
            // Without an explicit end, the string counts as padded with
            // zeros on the right, so the first clear bit is just past it.
            None if !want && end.is_none() => hi as i64 + 1,
            None => -1,
        })
    })??;
    Ok(Frame::Integer(pos))
}

#[derive(Clone, Copy, PartialEq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let op = match &args[1] {
        a if is(a, "and") => BitOp::And,
        a if is(a, "or") => BitOp::Or,
        a if is(a, "xor") => BitOp::Xor,
        a if is(a, "not") => BitOp::Not,
        _ => return Err(syntax()),
    };
    let sources = &args[3..];
    if op == BitOp::Not && sources.len() != 1 {
        return Err(Frame::error(BITOP_NOT_ARGS));
    }
    let db = ctx.db();
    let mut values = Vec::with_capacity(sources.len());
    for key in sources {
        values.push(
            read_as(txn, db, key, Value::as_str)?
                .map(|s| s.to_bytes())
                .unwrap_or_default(),
        );
    }
    let len = values.iter().map(Bytes::len).max().unwrap_or(0);
    let dest = &args[2];
    if len == 0 {
        if txn.get(db, dest).is_some() {
            apply(txn, db, dest, KeyOp::Del)?;
        }
        return Ok(Frame::Integer(0));
    }
    let mut out = vec![0u8; len];
    match op {
        BitOp::Not => {
            for (o, b) in out.iter_mut().zip(values[0].iter()) {
                *o = !b;
            }
        }
        BitOp::And => {
            // Shorter sources are zero padded, so what lies past any of
            // them stays zero.
            out[..values[0].len()].copy_from_slice(&values[0]);
            for v in &values[1..] {
                for (o, b) in out.iter_mut().zip(v.iter()) {
                    *o &= b;
                }
                out[v.len()..].fill(0);
            }
        }
        BitOp::Or | BitOp::Xor => {
            for v in &values {
                for (o, b) in out.iter_mut().zip(v.iter()) {
                    if op == BitOp::Or {
                        *o |= b;
                    } else {
                        *o ^= b;
                    }
                }
            }
        }
    }
    let op = KeyOp::SetString {
        value: Bytes::from(out),
        expire: ExpireMode::Clear,
    };
    apply(txn, db, dest, op)?;
    Ok(Frame::Integer(len as i64))
}

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD operation on the field of `bits` bits at bit `offset`.
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

impl Field {
    fn min(&self) -> i128 {
        if self.signed {
            -(1i128 << (self.bits - 1))
        } else {
            0
        }
    }

    fn max(&self) -> i128 {
        if self.signed {
            (1i128 << (self.bits - 1)) - 1
        } else {
            (1i128 << self.bits) - 1
        }
    }

    /// The field's raw bits as the integer its type reads them as.
    fn decode(&self, raw: u64) -> i128 {
        let v = i128::from(raw);
        if self.signed && raw >> (self.bits - 1) & 1 == 1 {
            v - (1i128 << self.bits)
        } else {
            v
        }
    }

    /// `v` brought into the field's range by its overflow policy; `None`
    /// when the policy is FAIL and `v` does not fit.
    fn fit(&self, v: i128) -> Option<i128> {
        if (self.min()..=self.max()).contains(&v) {
            return Some(v);
        }
        match self.overflow {
            Overflow::Fail => None,
            Overflow::Sat => Some(v.clamp(self.min(), self.max())),
            // Two's complement truncation to the field's width.
            Overflow::Wrap => Some(self.decode((v & ((1i128 << self.bits) - 1)) as u64)),
        }
    }

    /// The last byte this field touches.
    fn last_byte(&self) -> u64 {
        (self.offset + u64::from(self.bits) - 1) >> 3
    }
}

/// `i1`..`i64` or `u1`..`u63`, in lower case as Redis insists.
fn field_type(arg: &[u8]) -> Result<(bool, u32), Frame> {
    let bad = || Frame::error(BITFIELD_TYPE);
    let (signed, limit) = match arg.first() {
        Some(b'i') => (true, 64),
        Some(b'u') => (false, 63),
        _ => return Err(bad()),
    };
    match parse_i64(&arg[1..]) {
        Some(n) if (1..=limit).contains(&n) => Ok((signed, n as u32)),
        _ => Err(bad()),
    }
}

fn parse_fields(args: &[Bytes], read_only: bool, max_len: u64) -> Result<Vec<Field>, Frame> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let sub = &args[j];
        let left = args.len() - j - 1;
        let op = if is(sub, "get") && left >= 2 {
            FieldOp::Get
        } else if is(sub, "set") && left >= 3 {
            FieldOp::Set(0)
        } else if is(sub, "incrby") && left >= 3 {
            FieldOp::IncrBy(0)
        } else if is(sub, "overflow") && left >= 1 {
            let kind = &args[j + 1];
            overflow = if is(kind, "wrap") {
                Overflow::Wrap
            } else if is(kind, "sat") {
                Overflow::Sat
            } else if is(kind, "fail") {
                Overflow::Fail
            } else {
                return Err(Frame::error(OVERFLOW_TYPE));
            };
            j += 2;
            continue;
        } else {
            return Err(syntax());
        };
        let (signed, bits) = field_type(&args[j + 1])?;
        let offset = bit_offset(&args[j + 2], Some(bits), max_len)?;
        let op = match op {
            FieldOp::Get => FieldOp::Get,
            FieldOp::Set(_) => FieldOp::Set(arg_i64(&args[j + 3])?),
            FieldOp::IncrBy(_) => FieldOp::IncrBy(arg_i64(&args[j + 3])?),
        };
        j += if op == FieldOp::Get { 3 } else { 4 };
        fields.push(Field {
            op,
            signed,
            bits,
            offset,
            overflow,
        });
    }
    // Redis reads every subcommand before it refuses BITFIELD_RO's writes.
    if read_only && fields.iter().any(|f| f.op != FieldOp::Get) {
        return Err(Frame::error(BITFIELD_RO_WRITE));
    }
    Ok(fields)
}

/// The `bits` bits from bit `offset`, as an unsigned number; bits past the
/// end of `s` read as zero.
fn read_field(s: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |v, i| v << 1 | u64::from(bit_at(s, offset + i)))
}

/// The bytes `first..` of `s` covering the field, with its bits replaced by
/// the low `bits` bits of `raw`.
fn patch_field(s: &[u8], first: u64, offset: u64, bits: u32, raw: u64) -> Vec<u8> {
    let last = (offset + u64::from(bits) - 1) >> 3;
    let mut out: Vec<u8> = (first..=last)
        .map(|i| {
            usize::try_from(i)
                .ok()
                .and_then(|i| s.get(i))
                .copied()
                .unwrap_or(0)
        })
        .collect();
    for i in 0..u64::from(bits) {
        let pos = offset + i - first * 8;
        let mask = 0x80u8 >> (pos & 7);
        let byte = &mut out[(pos >> 3) as usize];
        if raw >> (u64::from(bits) - 1 - i) & 1 == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
    out
}

fn bitfield(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    bitfield_generic(ctx, txn, args, false)
}

fn bitfield_ro(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    bitfield_generic(ctx, txn, args, true)
}

fn bitfield_generic(
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    read_only: bool,
) -> Reply {
    let max_len = super::string_limit(ctx);
    let fields = parse_fields(args, read_only, max_len)?;
    let db = ctx.db();
    let key = &args[1];
    // WRONGTYPE even when every field is read past the end.
    with_string(txn, db, key, |_| ())?;
    // As in Redis, a command with writes leaves the string long enough for
    // every field it writes, even those an OVERFLOW FAIL skips. The growth
    // is applied last, and only if no write already made it, so that a
    // field written onto a new key is one change, not two.
    let needed = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.last_byte() + 1)
        .max();
    if needed.is_some_and(|n| n > max_len) {
        return Err(Frame::error(STRING_TOO_LONG));
    }
    let mut out = Vec::with_capacity(fields.len());
    for f in &fields {
        let old_raw = with_string(txn, db, key, |s| {
            read_field(s.unwrap_or_default(), f.offset, f.bits)
        })?;
        let old = f.decode(old_raw);
        let (new, reply) = match f.op {
            FieldOp::Get => {
                out.push(Frame::Integer(old as i64));
                continue;
            }
            FieldOp::Set(v) => {
                // An unsigned field takes the argument's two's complement
                // bits, so a negative value overflows it.
                let v = if f.signed {
                    i128::from(v)
                } else {
                    i128::from(v as u64)
                };
                (f.fit(v), old)
            }
            FieldOp::IncrBy(by) => {
                let new = f.fit(old + i128::from(by));
                (new, new.unwrap_or(old))
            }
        };
        let Some(new) = new else {
            out.push(Frame::Null);
            continue;
        };
        out.push(Frame::Integer(reply as i64));
        if new != old {
            let first = f.offset >> 3;
            let bytes = with_string(txn, db, key, |s| {
                patch_field(s.unwrap_or_default(), first, f.offset, f.bits, new as u64)
            })?;
            set_range(txn, db, key, first, bytes)?;
        }
    }
    if let Some(needed) = needed {
        let len = with_string(txn, db, key, |s| s.map(<[u8]>::len))?;
        if len.is_none_or(|l| (l as u64) < needed) {
            set_range(txn, db, key, needed - 1, vec![0])?;
        }
    }
    Ok(Frame::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_count(s: &[u8], lo: u64, hi: u64) -> u64 {
        (lo..=hi).filter(|&p| bit_at(s, p)).count() as u64
    }

    fn naive_first(s: &[u8], lo: u64, hi: u64, want: bool) -> Option<u64> {
        (lo..=hi).find(|&p| bit_at(s, p) == want)
    }

    #[test]
    fn word_scans_match_bit_by_bit() {
        let s: Vec<u8> = (0..40u32)
            .map(|i| (i.wrapping_mul(37) % 251) as u8)
            .collect();
        let mut sparse = vec![0u8; 40];
        sparse[29] = 0x10;
        let mut dense = vec![0xFFu8; 40];
        dense[33] = 0xFB;
        for buf in [&s, &sparse, &dense] {
            let n = buf.len() as u64 * 8;
            for lo in (0..n).step_by(3) {
                for hi in (lo..n).step_by(5) {
                    assert_eq!(count_ones(buf, lo, hi), naive_count(buf, lo, hi));
                    for want in [false, true] {
                        assert_eq!(first_bit(buf, lo, hi, want), naive_first(buf, lo, hi, want));
                    }
                }
            }
        }
    }

    #[test]
    fn fields_round_trip_and_wrap() {
        let f = Field {
            op: FieldOp::Get,
            signed: true,
            bits: 5,
            offset: 3,
            overflow: Overflow::Wrap,
        };
        assert_eq!(f.fit(16), Some(-16));
        assert_eq!(f.fit(-17), Some(15));
        let bytes = patch_field(&[0xFF, 0xFF], 0, 3, 5, 0b10101);
        assert_eq!(bytes, vec![0b1111_0101]);
        assert_eq!(f.decode(read_field(&bytes, 3, 5)), -11);
        let wide = Field {
            signed: true,
            bits: 64,
            ..f
        };
        assert_eq!(
            wide.fit(i128::from(i64::MAX) + 1),
            Some(i128::from(i64::MIN))
        );
    }
}
