//! Record keys named exactly the way YCSB names them.
//!
//! Datasets loaded by `durakv bench` and by YCSB must be interchangeable, so
//! a record number has to map to the same key string (`user` + the decimal
//! 64-bit FNV hash of the number, left-padded with zeros to `zeropadding`
//! digits) and the Redis scan index must use the same score (Java's
//! `String.hashCode`). Java's signed 64-bit arithmetic is reproduced with
//! wrapping operations.

use std::fmt::Write as _;

const FNV_OFFSET_BASIS_64: i64 = 0xCBF2_9CE4_8422_2325_u64 as i64;
const FNV_PRIME_64: i64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the eight little-endian bytes of
/// `val`, then the absolute value. `Math.abs(Long.MIN_VALUE)` stays negative in
/// Java, which `wrapping_abs` reproduces.
pub fn fnvhash64(val: i64) -> i64 {
    let mut val = val;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = val & 0xff;
        // Arithmetic shift, as Java's `>>` on a long.
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    hash.wrapping_abs()
}

/// Appends the YCSB key for `keynum` to `out` (which is cleared first, so a
/// connection can reuse one buffer for every operation).
pub fn build_key_name_into(out: &mut String, keynum: i64, zero_padding: usize, ordered: bool) {
    out.clear();
    let n = if ordered { keynum } else { fnvhash64(keynum) };
    let mut digits = itoa::Buffer::new();
    let value = digits.format(n);
    out.push_str("user");
    for _ in value.len()..zero_padding {
        out.push('0');
    }
    out.push_str(value);
}

pub fn build_key_name(keynum: i64, zero_padding: usize, ordered: bool) -> String {
    let mut s = String::with_capacity(24);
    build_key_name_into(&mut s, keynum, zero_padding, ordered);
    s
}

/// Java's `String.hashCode` for the (ASCII) key; YCSB's Redis binding uses it
/// as the key's score in the `_indices` sorted set that scans walk.
pub fn java_string_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    h
}

/// The score written to `_indices`, formatted as Redis expects a double.
pub fn index_score(key: &str) -> String {
    let mut s = String::with_capacity(12);
    let _ = write!(s, "{}", java_string_hash(key));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_min_stays_negative_like_java() {
        assert_eq!(i64::MIN.wrapping_abs(), i64::MIN);
    }

    #[test]
    fn java_hash_matches_known_values() {
        // "hello".hashCode() in Java is 99162322.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash(""), 0);
    }
}
