//! Redis's dataset digest (DEBUG DIGEST, DEBUG DIGEST-VALUE): SHA-1 based
//! and order-independent where the data is unordered, so two servers
//! holding the same data report the same 40 hex digits. Test suites compare
//! servers with it.
//!
//! "Xor" folds in SHA1(data), which does not depend on order (sets,
//! hashes, keys); "mix" xors and then hashes the digest, which does.

use crate::scripting::convert::format_g;
use durakv_engine::db::Entry;
use durakv_engine::stream::StreamId;
use durakv_engine::value::Value;
use sha1_smol::Sha1;

pub type Digest = [u8; 20];

fn mix(d: &mut Digest, data: &[u8]) {
    xor(d, data);
    *d = Sha1::from(&d[..]).digest().bytes();
}

fn xor(d: &mut Digest, data: &[u8]) {
    let h = Sha1::from(data).digest().bytes();
    for (a, b) in d.iter_mut().zip(h) {
        *a ^= b;
    }
}

/// Redis's type numbers, mixed in first.
fn type_code(v: &Value) -> u32 {
    match v {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    }
}

/// The digest of one value (DEBUG DIGEST-VALUE).
pub fn value(e: &Entry) -> Digest {
    let mut d = [0u8; 20];
    fold(&mut d, e);
    d
}

/// Folds one key into a dataset digest; call [`begin_db`] before each
/// database's first key.
pub fn add_key(total: &mut Digest, key: &[u8], e: &Entry) {
    // The key starts the chain its value continues.
    let mut d = [0u8; 20];
    mix(&mut d, key);
    fold(&mut d, e);
    xor(total, &d);
}

/// Mixes the database number in, so the same data in another database
/// digests differently.
pub fn begin_db(total: &mut Digest, db: usize) {
    mix(total, &(db as u32).to_be_bytes());
}

fn fold(d: &mut Digest, e: &Entry) {
    mix(d, &type_code(&e.value).to_be_bytes());
    match &e.value {
        Value::Str(s) => mix(d, s),
        // Each entry's ID as `<ms>.<seq>`, then its fields and values, in
        // order, as Redis 7.0 does (groups are left out there too).
        Value::Stream(st) => {
            let all = st.range(
                StreamId::new(0, 0),
                StreamId::new(u64::MAX, u64::MAX),
                None,
                false,
            );
            for entry in all {
                mix(d, format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes());
                for (f, v) in &entry.fields {
                    mix(d, f);
                    mix(d, v);
                }
            }
        }
        Value::List(l) => l.iter().for_each(|item| mix(d, item)),
        Value::Set(s) => s.iter().for_each(|m| xor(d, m)),
        Value::ZSet(z) => {
            for (m, score) in z.iter() {
                let mut el = [0u8; 20];
                mix(&mut el, m);
                mix(&mut el, format_g(score, 17).as_bytes());
                xor(d, &el);
            }
        }
        Value::Hash(h) => {
            for (k, v) in h.slices() {
                let mut el = [0u8; 20];
                mix(&mut el, k);
                mix(&mut el, v);
                xor(d, &el);
            }
        }
    }
    if e.has_ttl() {
        xor(d, b"!!expire!!");
    }
}

pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
