use super::*;
use bytes::Bytes;
use durakv_engine::value::{HashValue, ListValue, SetValue};
use durakv_engine::zset::ZSet;

fn b(s: impl ToString) -> Bytes {
    Bytes::from(s.to_string())
}

fn samples() -> Vec<Value> {
    let lim = EncodingLimits::default();
    let mut v = vec![
        Value::Str(b("hello")),
        Value::Str(b("12345")),
        Value::Str(b("-9223372036854775808")),
        Value::Str(b("x".repeat(1000))),
        Value::Str(Bytes::from_static(b"")),
        Value::List((0..5).map(b).collect()),
        Value::List((0..5000).map(|i| b(format!("item-{i}"))).collect()),
        Value::Set(Box::new((0..10).map(b).collect())),
        Value::Set(Box::new((0..10).map(|i| b(format!("m{i}"))).collect())),
        Value::Set(Box::new((0..1000).map(b).collect())),
        Value::Hash(
            (0..5)
                .map(|i| (b(i), b(format!("v{i}"))))
                .collect::<HashValue>(),
        ),
        Value::Hash(
            (0..500)
                .map(|i| (b(i), b(format!("v{i}"))))
                .collect::<HashValue>(),
        ),
    ];
    for n in [5, 500] {
        let mut z = ZSet::default();
        for i in 0..n {
            z.insert(b(format!("m{i}")), f64::from(i) * 1.5 - 7.0);
        }
        z.insert(b("inf"), f64::INFINITY);
        z.insert(b("-inf"), f64::NEG_INFINITY);
        z.insert(b("tiny"), 1e-300);
        v.push(Value::ZSet(Box::new(z)));
    }
    assert!(v.iter().any(|x| x.encoding_name(&lim) == "skiplist"));
    v
}

#[test]
fn every_type_and_encoding_round_trips() {
    let lim = EncodingLimits::default();
    for v in samples() {
        let p = dump(&v, &lim).unwrap();
        assert_eq!(restore(&p).unwrap(), v, "{}", v.encoding_name(&lim));
    }
}

#[test]
fn small_list_node_limits_split_nodes() {
    let lim = EncodingLimits {
        list_size: 4,
        ..EncodingLimits::default()
    };
    let l: ListValue = (0..10).map(b).collect();
    assert_eq!(list_nodes(&l, &lim), 3);
    let v = Value::List(l);
    assert_eq!(restore(&dump(&v, &lim).unwrap()).unwrap(), v);
}

#[test]
fn trailer_damage_and_empty_collections() {
    let lim = EncodingLimits::default();
    let p = dump(&Value::Str(b("v")), &lim).unwrap();
    let mut newer = p.clone();
    let n = newer.len();
    newer[n - 10] = 11;
    assert_eq!(restore(&newer), Err(RestoreError::VersionOrChecksum));
    assert_eq!(restore(b"short"), Err(RestoreError::VersionOrChecksum));
    let mut crc = p.clone();
    crc[0] ^= 1;
    assert_eq!(restore(&crc), Err(RestoreError::VersionOrChecksum));
    let empty = primitives::seal(vec![ty::SET, 0], RDB_VERSION);
    assert_eq!(restore(&empty), Err(RestoreError::BadData));
    let dup = primitives::seal(vec![ty::SET, 2, 0xc0, 1, 0xc0, 1], RDB_VERSION);
    assert_eq!(restore(&dup), Err(RestoreError::BadData));
    let _ = SetValue::default();
}

/// Damage that keeps a valid trailer (the checksum recomputed): the
/// decoder must refuse or produce a value, never panic.
#[test]
fn mutated_bodies_never_panic() {
    let lim = EncodingLimits::default();
    let mut seed = 0x2545f4914f6cdd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for v in samples() {
        let p = dump(&v, &lim).unwrap();
        let body = &p[..p.len() - primitives::FOOTER_BYTES];
        for _ in 0..300 {
            let mut d = body.to_vec();
            for _ in 0..=(next() % 4) {
                let i = (next() as usize) % d.len();
                match next() % 3 {
                    0 => d[i] = next() as u8,
                    1 => d.truncate(i.max(1)),
                    _ => d.insert(i, next() as u8),
                }
            }
            let _ = restore(&primitives::seal(d, RDB_VERSION));
        }
    }
}
