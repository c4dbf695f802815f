use super::*;
use bytes::Bytes;
use durakv_engine::stream::{
    Group, NodeLimits, PendingEntry, Stream, StreamId, ENTRIES_READ_INVALID,
};
use durakv_engine::value::{HashValue, ListValue, SetValue, Str};
use durakv_engine::zset::ZSet;
use std::sync::Arc;

fn b(s: impl ToString) -> Bytes {
    Bytes::from(s.to_string())
}

fn samples() -> Vec<Value> {
    let lim = EncodingLimits::default();
    let mut v = vec![
        Value::Str(b("hello").into()),
        Value::Str(b("12345").into()),
        Value::Str(b("-9223372036854775808").into()),
        Value::Str(b("x".repeat(1000)).into()),
        Value::Str(Bytes::from_static(b"").into()),
        Value::List(Arc::new((0..5).map(|i| Str::from(b(i))).collect())),
        Value::List(Arc::new(
            (0..5000)
                .map(|i| Str::from(b(format!("item-{i}"))))
                .collect(),
        )),
        Value::Set(Arc::new((0..10).map(b).collect())),
        Value::Set(Arc::new((0..10).map(|i| b(format!("m{i}"))).collect())),
        Value::Set(Arc::new((0..1000).map(b).collect())),
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
        v.push(Value::ZSet(Arc::new(z)));
    }
    assert!(v.iter().any(|x| x.encoding_name(&lim) == "skiplist"));
    v.extend(streams().into_iter().map(|s| Value::Stream(Arc::new(s))));
    v
}

fn fields(pairs: &[(&str, String)]) -> Vec<(Bytes, Bytes)> {
    pairs.iter().map(|(f, v)| (b(f), b(v))).collect()
}

/// An empty stream with history, and streams with tombstones, changing
/// field names, several nodes, and groups with PELs and consumers.
fn streams() -> Vec<Stream> {
    let lim = NodeLimits::default();
    let mut empty = Stream::default();
    empty.add(StreamId::new(5, 1), &fields(&[("a", "1".into())]), lim);
    empty.delete(StreamId::new(5, 1));
    let mut big = Stream::default();
    for i in 0..1000u64 {
        let f = if i % 7 == 0 {
            fields(&[("other", format!("v{i}")), ("n", i.to_string())])
        } else {
            fields(&[
                ("sensor", (i % 13).to_string()),
                ("value", "x".repeat((i % 50) as usize)),
            ])
        };
        big.add(StreamId::new(1_700_000_000_000 + i / 3, i % 3), &f, lim);
    }
    for i in (0..1000u64).step_by(9) {
        big.delete(StreamId::new(1_700_000_000_000 + i / 3, i % 3));
    }
    let mut g = Group::new(StreamId::new(1_700_000_000_100, 0), 301);
    for (i, c) in [(1u64, "alice"), (2, "bob"), (4, "alice")] {
        let p = PendingEntry {
            consumer: b(c),
            delivery_time: 1_700_000_000_000 + i,
            delivery_count: i,
        };
        g.pend(StreamId::new(1_700_000_000_000 + i, 1), p);
    }
    g.consumers.entry(b("idle")).or_default().seen_time = 42;
    // Redis 7.0's layout has no active time: it loads as the seen time.
    for c in g.consumers.values_mut() {
        c.active_time = Some(c.seen_time);
    }
    big.groups.insert(b("g1"), g);
    big.groups
        .insert(b("g2"), Group::new(StreamId::MIN, ENTRIES_READ_INVALID));
    vec![empty, big]
}

/// What Redis 7.0.15 DUMPs for: XADD s 1-1 a 1 b x; XADD s 1-2 a 2 b y;
/// XADD s 2-0 c 3; XDEL s 1-2; XGROUP CREATE s g 0; XREADGROUP GROUP g
/// alice COUNT 2 STREAMS s >; XGROUP CREATECONSUMER s g bob.
const REDIS_STREAM: &str = "130110000000000000000100000000000000013f3f00000019000201010102018161028162020001020100010001010181780205010301000101010201817902050100010101dfff02010181630203010601ff020200010101020301016702000302000000000000000100000000000000015c55d008a201000001000000000000000200000000000000005c55d008a2010000010205616c6963655c55d008a201000002000000000000000100000000000000010000000000000002000000000000000003626f626d55d008a2010000000a00a0fcc574b034dc95";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn redis_stream_payload_restores() {
    let Value::Stream(s) = restore(&unhex(REDIS_STREAM)).unwrap() else {
        panic!("not a stream");
    };
    let ids: Vec<String> = s
        .range(StreamId::MIN, StreamId::MAX, None, false)
        .iter()
        .map(|e| e.id.to_string())
        .collect();
    assert_eq!(ids, ["1-1", "2-0"]);
    assert_eq!(
        s.get(StreamId::new(2, 0)).unwrap().fields,
        fields(&[("c", "3".into())])
    );
    assert_eq!(s.len(), 2);
    assert_eq!(s.last_id, StreamId::new(2, 0));
    assert_eq!(s.max_deleted_id, StreamId::new(1, 2));
    assert_eq!(s.entries_added, 3);
    let g = &s.groups[&b("g")];
    assert_eq!((g.last_id, g.entries_read), (StreamId::new(2, 0), 3));
    assert_eq!(g.pel.len(), 2);
    assert_eq!(g.pel[&StreamId::new(1, 1)].consumer, b("alice"));
    assert_eq!(g.pel[&StreamId::new(1, 1)].delivery_time, 1795444200796);
    assert_eq!(g.consumers[&b("alice")].pending.len(), 2);
    assert_eq!(g.consumers[&b("bob")].seen_time, 1795444200813);
    // The same value written back: only the deleted entry's tombstone,
    // which durakv drops, changes the bytes.
    let again = dump(&Value::Stream(s.clone()), &EncodingLimits::default());
    assert_eq!(restore(&again).unwrap(), Value::Stream(s));
}

/// Redis 7.0's older stream type (no first/max-deleted IDs, no added
/// counter, no group read counters) restores with them estimated.
#[test]
fn stream_listpacks_v1_restores() {
    let v2 = unhex(REDIS_STREAM);
    let body = &v2[..v2.len() - primitives::FOOTER_BYTES];
    // Nodes and length + last ID run up to the first ID (01 01), then
    // max deleted (01 02) and entries added (03) follow.
    let tail_at = body
        .windows(6)
        .position(|w| w == [0x02, 0x02, 0x00, 0x01, 0x01, 0x01])
        .unwrap()
        + 3;
    let mut v1 = vec![ty::STREAM_LISTPACKS];
    v1.extend_from_slice(&body[1..tail_at]);
    // Groups: count, name, last ID, then the PEL without entries-read.
    let after_counters = tail_at + 5;
    let group_at = after_counters + 1 + 2 + 2;
    v1.extend_from_slice(&body[after_counters..group_at]);
    v1.extend_from_slice(&body[group_at + 1..]);
    let Value::Stream(s) = restore(&primitives::seal(v1, RDB_VERSION)).unwrap() else {
        panic!("not a stream");
    };
    assert_eq!(s.entries_added, 2);
    assert!(s.max_deleted_id.is_zero());
    assert_eq!(s.groups[&b("g")].pel.len(), 2);
}

#[test]
fn stream_dump_fills_nodes_as_redis_does() {
    // 250 same-field entries: nodes of 100, 100 and 50, keyed by their
    // first IDs.
    let mut s = Stream::default();
    for i in 1..=250u64 {
        s.add(
            StreamId::new(i, 0),
            &fields(&[("f", i.to_string())]),
            NodeLimits::default(),
        );
    }
    let p = dump(&Value::Stream(Arc::new(s)), &EncodingLimits::default());
    assert_eq!(&p[..2], &[ty::STREAM_LISTPACKS_2, 3]);
    assert_eq!(&p[2..3], &[16]);
    assert_eq!(&p[3..19], &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn damaged_stream_bodies_are_bad_data() {
    let redis = unhex(REDIS_STREAM);
    let body = redis[..redis.len() - primitives::FOOTER_BYTES].to_vec();
    // Cut anywhere: refused, never a panic.
    for i in 1..body.len() {
        let r = restore(&primitives::seal(body[..i].to_vec(), RDB_VERSION));
        assert_eq!(r, Err(RestoreError::BadData), "cut at {i}");
    }
}

#[test]
fn every_type_and_encoding_round_trips() {
    let lim = EncodingLimits::default();
    for v in samples() {
        let p = dump(&v, &lim);
        assert_eq!(restore(&p).unwrap(), v, "{}", v.encoding_name(&lim));
    }
}

#[test]
fn small_list_node_limits_split_nodes() {
    let lim = EncodingLimits {
        list_size: 4,
        ..EncodingLimits::default()
    };
    let l: ListValue = (0..10).map(|i| Str::from(b(i))).collect();
    assert_eq!(list_nodes(&l, &lim), 3);
    let v = Value::List(Arc::new(l));
    assert_eq!(restore(&dump(&v, &lim)).unwrap(), v);
}

#[test]
fn trailer_damage_and_empty_collections() {
    let lim = EncodingLimits::default();
    let p = dump(&Value::Str(b("v").into()), &lim);
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
        let p = dump(&v, &lim);
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
