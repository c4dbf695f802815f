//! The compact encodings older Redis versions wrote and Redis 7 still
//! loads: ziplists (lists, hashes and sorted sets before 7.0), zipmaps
//! (hashes before 2.6), and intsets, which Redis 7.0 still writes for small
//! sets of integers. Each decoder refuses damage with `None`.

use bytes::Bytes;

const ZIPLIST_HEADER: usize = 10;
const ZIPLIST_END: u8 = 0xff;

/// The entries of a ziplist: zlbytes (u32 LE), zltail (u32 LE), zllen (u16
/// LE), entries each led by the previous entry's length and an encoding
/// byte, then 0xFF.
pub fn ziplist(zl: &[u8]) -> Option<Vec<Bytes>> {
    if zl.len() < ZIPLIST_HEADER + 1 {
        return None;
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let count = u16::from_le_bytes([zl[8], zl[9]]);
    if total != zl.len() || zl[zl.len() - 1] != ZIPLIST_END || tail >= zl.len() {
        return None;
    }
    let mut pos = ZIPLIST_HEADER;
    let mut prev_len = 0usize;
    let mut out = Vec::new();
    while zl[pos] != ZIPLIST_END {
        let start = pos;
        let prev = match zl[pos] {
            0..=253 => {
                pos += 1;
                usize::from(zl[start])
            }
            254 => {
                let b = zl.get(pos + 1..pos + 5)?;
                pos += 5;
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
            }
            _ => return None,
        };
        if prev != prev_len {
            return None;
        }
        let (item, used) = ziplist_value(zl.get(pos..zl.len() - 1)?)?;
        pos += used;
        prev_len = pos - start;
        out.push(item);
        if pos >= zl.len() {
            return None;
        }
    }
    if count != u16::MAX && usize::from(count) != out.len() {
        return None;
    }
    Some(out)
}

fn ziplist_value(b: &[u8]) -> Option<(Bytes, usize)> {
    let e = *b.first()?;
    let le = |n: usize| -> Option<i64> {
        let s = b.get(1..1 + n)?;
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(s);
        let shift = 64 - 8 * n as u32;
        Some((i64::from_le_bytes(a) << shift) >> shift)
    };
    let text = |off: usize, n: usize| -> Option<(Bytes, usize)> {
        let s = b.get(off..off.checked_add(n)?)?;
        Some((Bytes::copy_from_slice(s), off + n))
    };
    let num = |v: i64, n: usize| Some((Bytes::from(v.to_string()), 1 + n));
    match e >> 6 {
        0 => text(1, usize::from(e & 0x3f)),
        1 => text(2, (usize::from(e & 0x3f) << 8) | usize::from(*b.get(1)?)),
        2 if e == 0x80 => {
            let s = b.get(1..5)?;
            text(5, u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize)
        }
        _ => match e {
            0xc0 => num(le(2)?, 2),
            0xd0 => num(le(4)?, 4),
            0xe0 => num(le(8)?, 8),
            0xf0 => num(le(3)?, 3),
            0xfe => num(le(1)?, 1),
            0xf1..=0xfd => num(i64::from(e & 0x0f) - 1, 0),
            _ => None,
        },
    }
}

/// The field/value pairs of a zipmap: a count byte, then per entry a
/// length-prefixed key and a length-prefixed value followed by a "free"
/// byte and that many padding bytes, then 0xFF.
pub fn zipmap(zm: &[u8]) -> Option<Vec<(Bytes, Bytes)>> {
    let mut pos = 1;
    let mut out = Vec::new();
    let len = |pos: &mut usize| -> Option<usize> {
        let b = *zm.get(*pos)?;
        match b {
            0..=253 => {
                *pos += 1;
                Some(usize::from(b))
            }
            254 => {
                let s = zm.get(*pos + 1..*pos + 5)?;
                *pos += 5;
                Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
            }
            _ => None,
        }
    };
    loop {
        if *zm.get(pos)? == 0xff {
            return (pos + 1 == zm.len()).then_some(out);
        }
        let klen = len(&mut pos)?;
        let key = zm.get(pos..pos.checked_add(klen)?)?;
        pos += klen;
        let vlen = len(&mut pos)?;
        let free = usize::from(*zm.get(pos)?);
        pos += 1;
        let value = zm.get(pos..pos.checked_add(vlen)?)?;
        pos += vlen + free;
        out.push((Bytes::copy_from_slice(key), Bytes::copy_from_slice(value)));
    }
}

/// The members of an intset: width (u32 LE: 2, 4 or 8), count (u32 LE),
/// then the integers, little-endian and strictly ascending.
pub fn intset(is: &[u8]) -> Option<Vec<i64>> {
    if is.len() < 8 {
        return None;
    }
    let width = u32::from_le_bytes([is[0], is[1], is[2], is[3]]) as usize;
    let count = u32::from_le_bytes([is[4], is[5], is[6], is[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) || is.len() - 8 != width.checked_mul(count)? {
        return None;
    }
    let mut out: Vec<i64> = Vec::with_capacity(count);
    for chunk in is[8..].chunks_exact(width) {
        let mut a = [0u8; 8];
        a[..width].copy_from_slice(chunk);
        let shift = 64 - 8 * width as u32;
        let v = (i64::from_le_bytes(a) << shift) >> shift;
        if out.last().is_some_and(|&last| last >= v) {
            return None;
        }
        out.push(v);
    }
    Some(out)
}

/// The intset Redis would hold for these integers.
pub fn encode_intset(mut values: Vec<i64>) -> Vec<u8> {
    values.sort_unstable();
    values.dedup();
    let width: usize = if values.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if values.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intset_round_trip() {
        for vals in [vec![3, 1, 2], vec![1, 70000], vec![i64::MIN, 0, i64::MAX]] {
            let mut sorted = vals.clone();
            sorted.sort();
            assert_eq!(intset(&encode_intset(vals)).unwrap(), sorted);
        }
        assert!(intset(&[2, 0, 0, 0, 2, 0, 0, 0, 5, 0, 5, 0]).is_none());
    }

    #[test]
    fn ziplist_as_redis_6_wrote_it() {
        // ["a", 1, 300, "hello"]: zlbytes 27, zltail 19, zllen 4.
        let zl: &[u8] = &[
            27, 0, 0, 0, 19, 0, 0, 0, 4, 0, 0, 0x01, b'a', 3, 0xf2, 2, 0xc0, 0x2c, 0x01, 4, 0x05,
            b'h', b'e', b'l', b'l', b'o', 0xff,
        ];
        let mut zl = zl.to_vec();
        zl[0] = zl.len() as u8;
        let items = ziplist(&zl).unwrap();
        let items: Vec<&[u8]> = items.iter().map(|b| &b[..]).collect();
        assert_eq!(items, vec![&b"a"[..], b"1", b"300", b"hello"]);
        for i in 0..zl.len() {
            let mut d = zl.clone();
            d[i] ^= 0x41;
            let _ = ziplist(&d);
        }
    }
}
