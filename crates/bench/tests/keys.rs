//! Record keys must match YCSB's so datasets are interchangeable.
//!
//! Expected values were computed independently of this crate with this
//! Python transcription of YCSB's `Utils.fnvhash64` and
//! `CoreWorkload.buildKeyName` (signed 64-bit wrapping arithmetic,
//! arithmetic right shift, `Math.abs`):
//!
//! ```python
//! M = 1 << 64
//! def s64(x):
//!     x %= M
//!     return x - M if x >= 1 << 63 else x
//! def fnv(val):
//!     h = s64(0xCBF29CE484222325)
//!     for _ in range(8):
//!         octet = val & 0xff
//!         val >>= 8
//!         h ^= octet
//!         h = s64(h * 1099511628211)
//!     return h if h >= 0 else s64(-h)
//! def key(n, pad=1, ordered=False):
//!     v = str(n if ordered else fnv(n))
//!     return "user" + "0" * max(0, pad - len(v)) + v
//! def jhash(s):  # java.lang.String.hashCode
//!     h = 0
//!     for c in s: h = (31 * h + ord(c)) & 0xffffffff
//!     return h - (1 << 32) if h >= 1 << 31 else h
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use durakv_bench::keys::{build_key_name, fnvhash64, java_string_hash};

#[test]
fn hashed_keys_match_ycsb() {
    let expected = [
        (0, "user6284781860667377211"),
        (1, "user8517097267634966620"),
        (2, "user1820151046732198393"),
        (3, "user4052466453699787802"),
        (100, "user879817313296471393"),
        (999, "user2071219101098386137"),
        (12345, "user1792800413050876852"),
        (1_000_000, "user1011632231655643464"),
        (9_999_999, "user5174843297794066704"),
    ];
    for (n, key) in expected {
        assert_eq!(build_key_name(n, 1, false), key, "keynum {n}");
    }
}

#[test]
fn zero_padding_and_ordered_inserts() {
    assert_eq!(build_key_name(0, 20, false), "user06284781860667377211");
    assert_eq!(build_key_name(100, 20, false), "user00879817313296471393");
    assert_eq!(build_key_name(5, 8, true), "user00000005");
    assert_eq!(build_key_name(12345, 8, true), "user00012345");
    assert_eq!(build_key_name(12345, 1, true), "user12345");
    // Padding shorter than the number adds nothing.
    assert_eq!(build_key_name(123456789, 3, true), "user123456789");
}

#[test]
fn fnv_is_non_negative_and_deterministic() {
    for n in 0..10_000 {
        let h = fnvhash64(n);
        assert!(h >= 0, "fnvhash64({n}) = {h}");
        assert_eq!(h, fnvhash64(n));
    }
}

#[test]
fn index_scores_are_java_string_hashes() {
    assert_eq!(java_string_hash("user6284781860667377211"), -594_971_599);
    assert_eq!(java_string_hash("user1"), 111_578_566);
}
