//! Listpacks, the compact encoding Redis 7 stores small hashes, sorted sets
//! and list nodes in, and which DUMP payloads carry as one blob.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE, 65535 when it does
//! not fit), the entries, and 0xFF. An entry is its encoding and data, then
//! its own length again ("backlen", 1-5 bytes, 7 bits each) so the list can
//! be walked backwards. Strings that are canonical integers are stored as
//! integers, as Redis does.

use bytes::Bytes;
use durakv_engine::value::parse_i64;

const HEADER: usize = 6;
const END: u8 = 0xff;
const COUNT_UNKNOWN: u16 = u16::MAX;

/// The listpack holding `items` in order.
pub fn encode<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![0u8; HEADER];
    let mut count = 0usize;
    for item in items {
        push_entry(&mut out, item);
        count += 1;
    }
    out.push(END);
    let total = out.len() as u32;
    out[..4].copy_from_slice(&total.to_le_bytes());
    let count = u16::try_from(count)
        .ok()
        .filter(|&c| c != COUNT_UNKNOWN)
        .unwrap_or(COUNT_UNKNOWN);
    out[4..6].copy_from_slice(&count.to_le_bytes());
    out
}

/// Bytes `item` takes as an entry (for sizing list nodes as Redis does).
pub fn entry_size(item: &[u8]) -> usize {
    let mut v = Vec::new();
    push_entry(&mut v, item);
    v.len()
}

/// The size of an empty listpack.
pub const EMPTY_SIZE: usize = HEADER + 1;

fn push_entry(out: &mut Vec<u8>, item: &[u8]) {
    let start = out.len();
    match parse_i64(item) {
        Some(v) => put_int(out, v),
        None => {
            let n = item.len();
            if n < 64 {
                out.push(0x80 | n as u8);
            } else if n < 4096 {
                out.push(0xe0 | (n >> 8) as u8);
                out.push(n as u8);
            } else {
                out.push(0xf0);
                out.extend_from_slice(&(n as u32).to_le_bytes());
            }
            out.extend_from_slice(item);
        }
    }
    let len = out.len() - start;
    put_backlen(out, len);
}

fn put_int(out: &mut Vec<u8>, v: i64) {
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = (v as u16) & 0x1fff;
        out.push(0xc0 | (u >> 8) as u8);
        out.push(u as u8);
    } else if let Ok(v) = i16::try_from(v) {
        out.push(0xf1);
        out.extend_from_slice(&v.to_le_bytes());
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        out.push(0xf2);
        out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if let Ok(v) = i32::try_from(v) {
        out.push(0xf3);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(0xf4);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// The backlen bytes for an entry of `len` bytes, in reading order: the
/// last byte holds the low 7 bits, and every byte but the first has the
/// high bit set.
fn put_backlen(out: &mut Vec<u8>, len: usize) {
    let groups = match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    };
    for i in (0..groups).rev() {
        let bits = ((len >> (7 * i)) & 0x7f) as u8;
        out.push(if i == groups - 1 { bits } else { bits | 0x80 });
    }
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// The entries of a listpack, or `None` if it is damaged in any way.
pub fn decode(lp: &[u8]) -> Option<Vec<Bytes>> {
    if lp.len() < EMPTY_SIZE {
        return None;
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    let count = u16::from_le_bytes([lp[4], lp[5]]);
    if total != lp.len() || lp[lp.len() - 1] != END {
        return None;
    }
    let body = &lp[HEADER..lp.len() - 1];
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < body.len() {
        let (item, len) = entry(&body[pos..])?;
        let backlen = backlen_size(len);
        let stored = body.get(pos + len..pos + len + backlen)?;
        let mut expect = Vec::with_capacity(backlen);
        put_backlen(&mut expect, len);
        if stored != expect.as_slice() {
            return None;
        }
        out.push(item);
        pos += len + backlen;
    }
    if count != COUNT_UNKNOWN && usize::from(count) != out.len() {
        return None;
    }
    Some(out)
}

fn backlen_size(len: usize) -> usize {
    let mut v = Vec::new();
    put_backlen(&mut v, len);
    v.len()
}

/// One entry's value and its length without the backlen.
fn entry(b: &[u8]) -> Option<(Bytes, usize)> {
    let e = *b.first()?;
    let int = |n: usize| -> Option<u64> {
        let s = b.get(1..1 + n)?;
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(s);
        Some(u64::from_le_bytes(a))
    };
    let str_at = |off: usize, n: usize| -> Option<(Bytes, usize)> {
        let s = b.get(off..off.checked_add(n)?)?;
        Some((Bytes::copy_from_slice(s), off + n))
    };
    let num = |v: i64, len: usize| Some((Bytes::from(v.to_string()), len));
    match e {
        0x00..=0x7f => num(i64::from(e), 1),
        0x80..=0xbf => str_at(1, usize::from(e & 0x3f)),
        0xc0..=0xdf => {
            let v = (u64::from(e & 0x1f) << 8) | u64::from(*b.get(1)?);
            num(sign_extend(v, 13), 2)
        }
        0xe0..=0xef => str_at(2, (usize::from(e & 0x0f) << 8) | usize::from(*b.get(1)?)),
        0xf0 => str_at(5, int(4)? as usize),
        0xf1 => num(sign_extend(int(2)?, 16), 3),
        0xf2 => num(sign_extend(int(3)?, 24), 4),
        0xf3 => num(sign_extend(int(4)?, 32), 5),
        0xf4 => num(int(8)? as i64, 9),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_entry_encoding() {
        let big = "x".repeat(5000);
        let mid = "y".repeat(300);
        let items: Vec<String> = [
            "0",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-32768",
            "32767",
            "8388607",
            "-8388608",
            "2147483647",
            "-2147483648",
            "9223372036854775807",
            "-9223372036854775808",
            "",
            "a",
            "007",
            "-0",
            &mid,
            &big,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let lp = encode(items.iter().map(|s| s.as_bytes()));
        let back = decode(&lp).unwrap();
        assert_eq!(back.len(), items.len());
        for (a, b) in items.iter().zip(&back) {
            assert_eq!(a.as_bytes(), &b[..]);
        }
    }

    #[test]
    fn damage_is_refused_not_panicked_on() {
        let lp = encode([&b"hello"[..], b"12", b"world"]);
        for i in 0..lp.len() {
            for bit in 0..8 {
                let mut d = lp.clone();
                d[i] ^= 1 << bit;
                let _ = decode(&d);
            }
            let _ = decode(&lp[..i]);
        }
    }
}
