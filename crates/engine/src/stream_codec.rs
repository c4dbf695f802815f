//! Log and checkpoint encoding of streams and stream writes (layout in
//! `docs/format.md`, "Streams"). Same conventions as `crate::codec`:
//! little-endian, length-prefixed, bounds-checked decoding.

use crate::codec::{put_bytes, put_u32, put_u64, DecodeError, Reader};
use crate::stream::{Consumer, Group, NodeLimits, PendingEntry, Stream, StreamId};
use crate::stream_op::{Claimed, StreamOp};
use bytes::Bytes;

mod tag {
    pub const CREATE: u8 = 1;
    pub const ADD: u8 = 2;
    pub const TRIM: u8 = 3;
    pub const DELETE: u8 = 4;
    pub const SET_ID: u8 = 5;
    pub const GROUP_CREATE: u8 = 6;
    pub const GROUP_SET_ID: u8 = 7;
    pub const GROUP_DESTROY: u8 = 8;
    pub const CONSUMER_CREATE: u8 = 9;
    pub const CONSUMER_DELETE: u8 = 10;
    pub const DELIVER: u8 = 11;
    pub const ACK: u8 = 12;
    pub const CLAIM: u8 = 13;
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_u64(out, id.ms);
    put_u64(out, id.seq);
}

fn put_ids(out: &mut Vec<u8>, ids: &[StreamId]) {
    put_u32(out, ids.len() as u32);
    for id in ids {
        put_id(out, *id);
    }
}

fn put_opt_u64(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put_u64(out, v);
        }
    }
}

fn put_opt_id(out: &mut Vec<u8>, v: Option<StreamId>) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put_id(out, v);
        }
    }
}

fn put_pairs(out: &mut Vec<u8>, pairs: &[(Bytes, Bytes)]) {
    put_u32(out, pairs.len() as u32);
    for (f, v) in pairs {
        put_bytes(out, f);
        put_bytes(out, v);
    }
}

pub fn encode_op(op: &StreamOp, out: &mut Vec<u8>) {
    match op {
        StreamOp::Create => out.push(tag::CREATE),
        StreamOp::Add { id, fields, limits } => {
            out.push(tag::ADD);
            put_id(out, *id);
            put_u32(out, limits.entries);
            put_u32(out, limits.bytes);
            put_pairs(out, fields);
        }
        StreamOp::Trim { cutoff } => {
            out.push(tag::TRIM);
            put_id(out, *cutoff);
        }
        StreamOp::Delete(ids) => {
            out.push(tag::DELETE);
            put_ids(out, ids);
        }
        StreamOp::SetId {
            last_id,
            entries_added,
            max_deleted_id,
        } => {
            out.push(tag::SET_ID);
            put_id(out, *last_id);
            put_opt_u64(out, *entries_added);
            put_opt_id(out, *max_deleted_id);
        }
        StreamOp::GroupCreate {
            group,
            last_id,
            entries_read,
        } => {
            out.push(tag::GROUP_CREATE);
            put_bytes(out, group);
            put_id(out, *last_id);
            put_u64(out, *entries_read as u64);
        }
        StreamOp::GroupSetId {
            group,
            last_id,
            entries_read,
        } => {
            out.push(tag::GROUP_SET_ID);
            put_bytes(out, group);
            put_id(out, *last_id);
            put_u64(out, *entries_read as u64);
        }
        StreamOp::GroupDestroy { group } => {
            out.push(tag::GROUP_DESTROY);
            put_bytes(out, group);
        }
        StreamOp::ConsumerCreate {
            group,
            consumer,
            time,
        } => {
            out.push(tag::CONSUMER_CREATE);
            put_bytes(out, group);
            put_bytes(out, consumer);
            put_u64(out, *time);
        }
        StreamOp::ConsumerDelete { group, consumer } => {
            out.push(tag::CONSUMER_DELETE);
            put_bytes(out, group);
            put_bytes(out, consumer);
        }
        StreamOp::Deliver {
            group,
            consumer,
            time,
            new,
            noack,
            last,
            history,
        } => {
            out.push(tag::DELIVER);
            put_bytes(out, group);
            put_bytes(out, consumer);
            put_u64(out, *time);
            put_ids(out, new);
            out.push(u8::from(*noack));
            match last {
                None => out.push(0),
                Some((id, read)) => {
                    out.push(1);
                    put_id(out, *id);
                    put_u64(out, *read as u64);
                }
            }
            put_ids(out, history);
        }
        StreamOp::Ack { group, ids } => {
            out.push(tag::ACK);
            put_bytes(out, group);
            put_ids(out, ids);
        }
        StreamOp::Claim {
            group,
            consumer,
            time,
            claimed,
            dropped,
            last_id,
        } => {
            out.push(tag::CLAIM);
            put_bytes(out, group);
            put_bytes(out, consumer);
            put_u64(out, *time);
            put_u32(out, claimed.len() as u32);
            for c in claimed {
                put_id(out, c.id);
                put_u64(out, c.delivery_time);
                put_u64(out, c.delivery_count);
            }
            put_ids(out, dropped);
            put_opt_id(out, *last_id);
        }
    }
}

fn id(r: &mut Reader<'_>) -> Result<StreamId, DecodeError> {
    Ok(StreamId {
        ms: r.u64()?,
        seq: r.u64()?,
    })
}

fn ids(r: &mut Reader<'_>) -> Result<Vec<StreamId>, DecodeError> {
    let n = r.count(16)?;
    (0..n).map(|_| id(r)).collect()
}

fn opt_u64(r: &mut Reader<'_>) -> Result<Option<u64>, DecodeError> {
    Ok(if r.bool()? { Some(r.u64()?) } else { None })
}

fn opt_id(r: &mut Reader<'_>) -> Result<Option<StreamId>, DecodeError> {
    Ok(if r.bool()? { Some(id(r)?) } else { None })
}

fn pairs(r: &mut Reader<'_>) -> Result<Vec<(Bytes, Bytes)>, DecodeError> {
    let n = r.count(8)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push((r.bytes()?, r.bytes()?));
    }
    Ok(v)
}

pub fn decode_op(r: &mut Reader<'_>) -> Result<StreamOp, DecodeError> {
    Ok(match r.u8()? {
        tag::CREATE => StreamOp::Create,
        tag::ADD => StreamOp::Add {
            id: id(r)?,
            limits: NodeLimits {
                entries: r.u32()?,
                bytes: r.u32()?,
            },
            fields: pairs(r)?,
        },
        tag::TRIM => StreamOp::Trim { cutoff: id(r)? },
        tag::DELETE => StreamOp::Delete(ids(r)?),
        tag::SET_ID => StreamOp::SetId {
            last_id: id(r)?,
            entries_added: opt_u64(r)?,
            max_deleted_id: opt_id(r)?,
        },
        tag::GROUP_CREATE => StreamOp::GroupCreate {
            group: r.bytes()?,
            last_id: id(r)?,
            entries_read: r.u64()? as i64,
        },
        tag::GROUP_SET_ID => StreamOp::GroupSetId {
            group: r.bytes()?,
            last_id: id(r)?,
            entries_read: r.u64()? as i64,
        },
        tag::GROUP_DESTROY => StreamOp::GroupDestroy { group: r.bytes()? },
        tag::CONSUMER_CREATE => StreamOp::ConsumerCreate {
            group: r.bytes()?,
            consumer: r.bytes()?,
            time: r.u64()?,
        },
        tag::CONSUMER_DELETE => StreamOp::ConsumerDelete {
            group: r.bytes()?,
            consumer: r.bytes()?,
        },
        tag::DELIVER => StreamOp::Deliver {
            group: r.bytes()?,
            consumer: r.bytes()?,
            time: r.u64()?,
            new: ids(r)?,
            noack: r.bool()?,
            last: if r.bool()? {
                Some((id(r)?, r.u64()? as i64))
            } else {
                None
            },
            history: ids(r)?,
        },
        tag::ACK => StreamOp::Ack {
            group: r.bytes()?,
            ids: ids(r)?,
        },
        tag::CLAIM => {
            let group = r.bytes()?;
            let consumer = r.bytes()?;
            let time = r.u64()?;
            let n = r.count(32)?;
            let mut claimed = Vec::with_capacity(n);
            for _ in 0..n {
                claimed.push(Claimed {
                    id: id(r)?,
                    delivery_time: r.u64()?,
                    delivery_count: r.u64()?,
                });
            }
            StreamOp::Claim {
                group,
                consumer,
                time,
                claimed,
                dropped: ids(r)?,
                last_id: opt_id(r)?,
            }
        }
        _ => return r.fail("unknown stream operation"),
    })
}

/// A whole stream (after the value tag 6): its counters, its live
/// entries and its groups. Tombstones and node layout are not kept.
pub fn encode_stream(s: &Stream, out: &mut Vec<u8>) {
    put_id(out, s.last_id);
    put_id(out, s.max_deleted_id);
    put_u64(out, s.entries_added);
    let entries = s.range(StreamId::MIN, StreamId::MAX, None, false);
    put_u32(out, entries.len() as u32);
    for e in &entries {
        put_id(out, e.id);
        put_pairs(out, &e.fields);
    }
    put_u32(out, s.groups.len() as u32);
    for (name, g) in &s.groups {
        put_bytes(out, name);
        put_id(out, g.last_id);
        put_u64(out, g.entries_read as u64);
        put_u32(out, g.consumers.len() as u32);
        for (cname, c) in &g.consumers {
            put_bytes(out, cname);
            put_u64(out, c.seen_time);
            out.push(u8::from(c.active_time.is_some()));
            put_u64(out, c.active_time.unwrap_or(0));
        }
        put_u32(out, g.pel.len() as u32);
        for (pid, p) in &g.pel {
            put_id(out, *pid);
            put_bytes(out, &p.consumer);
            put_u64(out, p.delivery_time);
            put_u64(out, p.delivery_count);
        }
    }
}

/// Decodes a stream value of type 6 (`active`) or 5, whose consumers'
/// active times are taken to be their seen times.
pub fn decode_stream(r: &mut Reader<'_>, active: bool) -> Result<Stream, DecodeError> {
    let last_id = id(r)?;
    let max_deleted_id = id(r)?;
    let entries_added = r.u64()?;
    let mut s = Stream::default();
    let n = r.count(20)?;
    let mut prev = None;
    for _ in 0..n {
        let eid = id(r)?;
        if prev.is_some_and(|p| eid <= p) || eid > last_id {
            return r.fail("stream entry IDs out of order");
        }
        prev = Some(eid);
        let fields = pairs(r)?;
        s.add(eid, &fields, NodeLimits::default());
    }
    s.last_id = last_id;
    s.max_deleted_id = max_deleted_id;
    s.entries_added = entries_added;
    let ng = r.count(24)?;
    for _ in 0..ng {
        let name = r.bytes()?;
        let mut g = Group::new(id(r)?, r.u64()? as i64);
        let nc = r.count(if active { 21 } else { 12 })?;
        for _ in 0..nc {
            let cname = r.bytes()?;
            let seen_time = r.u64()?;
            let active_time = if active {
                let known = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return r.fail("consumer active-time flag is neither 0 nor 1"),
                };
                let t = r.u64()?;
                known.then_some(t)
            } else {
                Some(seen_time)
            };
            g.consumers.insert(
                cname,
                Consumer {
                    seen_time,
                    active_time,
                    ..Consumer::default()
                },
            );
        }
        let np = r.count(36)?;
        for _ in 0..np {
            let pid = id(r)?;
            let p = PendingEntry {
                consumer: r.bytes()?,
                delivery_time: r.u64()?,
                delivery_count: r.u64()?,
            };
            g.pend(pid, p);
        }
        s.groups.insert(name, g);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_mutations, encode_mutations, encoded_len, RECORD_HEADER_BYTES};
    use crate::mutation::{KeyOp, Mutation};
    use crate::value::Value;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn every_stream_op_and_value_round_trips() {
        let mut s = Stream::default();
        s.add(
            StreamId::new(1, 0),
            &[(b("f"), b("v"))],
            NodeLimits::default(),
        );
        s.add(
            StreamId::new(2, 5),
            &[(b("g"), b("w"))],
            NodeLimits::default(),
        );
        s.delete(StreamId::new(1, 0));
        let mut g = Group::new(StreamId::new(2, 5), 2);
        g.pend(
            StreamId::new(2, 5),
            PendingEntry {
                consumer: b("alice"),
                delivery_time: 77,
                delivery_count: 3,
            },
        );
        g.consumers.entry(b("bob")).or_default().seen_time = 9;
        g.consumers.entry(b("bob")).or_default().active_time = Some(7);
        g.consumers.entry(b("carl")).or_default().seen_time = 11;
        s.groups.insert(b("g1"), g);
        let ops = vec![
            StreamOp::Create,
            StreamOp::Add {
                id: StreamId::new(5, 1),
                fields: vec![(b("a"), b("1"))],
                limits: NodeLimits::default(),
            },
            StreamOp::Trim {
                cutoff: StreamId::new(3, 0),
            },
            StreamOp::Delete(vec![StreamId::new(1, 1)]),
            StreamOp::SetId {
                last_id: StreamId::new(9, 9),
                entries_added: Some(4),
                max_deleted_id: None,
            },
            StreamOp::GroupCreate {
                group: b("g"),
                last_id: StreamId::MIN,
                entries_read: -1,
            },
            StreamOp::GroupSetId {
                group: b("g"),
                last_id: StreamId::MAX,
                entries_read: 7,
            },
            StreamOp::GroupDestroy { group: b("g") },
            StreamOp::ConsumerCreate {
                group: b("g"),
                consumer: b("c"),
                time: 1,
            },
            StreamOp::ConsumerDelete {
                group: b("g"),
                consumer: b("c"),
            },
            StreamOp::Deliver {
                group: b("g"),
                consumer: b("c"),
                time: 3,
                new: vec![StreamId::new(1, 2)],
                noack: false,
                last: Some((StreamId::new(1, 2), 5)),
                history: vec![StreamId::new(0, 1)],
            },
            StreamOp::Ack {
                group: b("g"),
                ids: vec![StreamId::new(1, 2)],
            },
            StreamOp::Claim {
                group: b("g"),
                consumer: b("d"),
                time: 8,
                claimed: vec![Claimed {
                    id: StreamId::new(1, 2),
                    delivery_time: 4,
                    delivery_count: 2,
                }],
                dropped: vec![StreamId::new(0, 9)],
                last_id: Some(StreamId::new(1, 3)),
            },
        ];
        let mut muts: Vec<Mutation> = ops
            .into_iter()
            .map(|op| Mutation::key(0, b("s"), KeyOp::Stream(Box::new(op))))
            .collect();
        muts.push(Mutation::key(
            1,
            b("s2"),
            KeyOp::Restore {
                value: Value::Stream(std::sync::Arc::new(s)),
                expire_at_ms: 0,
            },
        ));
        let mut out = Vec::new();
        encode_mutations(&muts, &mut out);
        // A whole stream value carries its consumers' active times.
        assert_eq!(out[0], crate::codec::PAYLOAD_VERSION_STREAM_ACTIVE);
        assert_eq!(decode_mutations(&Bytes::from(out.clone())).unwrap(), muts);
        let mut ops_only = Vec::new();
        encode_mutations(&muts[..muts.len() - 1], &mut ops_only);
        assert_eq!(ops_only[0], crate::codec::PAYLOAD_VERSION_STREAMS);
        let total: u64 = muts.iter().map(encoded_len).sum::<u64>() + RECORD_HEADER_BYTES;
        assert_eq!(total, out.len() as u64);
        for cut in 0..out.len() {
            assert!(decode_mutations(&Bytes::copy_from_slice(&out[..cut])).is_err());
        }
        // Older versions cannot carry them.
        out[0] = crate::codec::PAYLOAD_VERSION_REPL_ORIGIN;
        assert!(decode_mutations(&Bytes::from(out.clone())).is_err());
        out[0] = crate::codec::PAYLOAD_VERSION_FUNCTIONS;
        assert!(decode_mutations(&Bytes::from(out)).is_err());
    }

    /// A stream value in the layout of versions 3 and 4 (value type 5,
    /// no active times) still decodes, each consumer active when last seen.
    #[test]
    fn a_stream_value_without_active_times_takes_the_seen_times() {
        let mut s = Stream::default();
        let mut g = Group::new(StreamId::MIN, 0);
        let c = g.consumers.entry(b("ann")).or_default();
        c.seen_time = 42;
        c.active_time = None;
        s.groups.insert(b("g"), g);
        let mut new = Vec::new();
        encode_stream(&s, &mut new);
        // Counters (40 bytes), no entries (4), one group (4), its name
        // (4 + 1), last ID (16), entries read (8), one consumer (4), its
        // name (4 + 3) and seen time (8): then the flag and active time
        // that type 5 lacks.
        let at = 40 + 4 + 4 + 5 + 16 + 8 + 4 + 7 + 8;
        assert_eq!(new[at..at + 9], [0u8; 9]);
        let mut old = new[..at].to_vec();
        old.extend_from_slice(&new[at + 9..]);
        let back = decode_stream(&mut Reader::new(&old), false).unwrap();
        assert_eq!(
            back.groups[&b("g")].consumers[&b("ann")].active_time,
            Some(42)
        );
        let back = decode_stream(&mut Reader::new(&new), true).unwrap();
        assert_eq!(back.groups[&b("g")].consumers[&b("ann")].active_time, None);
        // A flag other than 0 or 1 is damage.
        let mut bad = new.clone();
        bad[at] = 2;
        assert!(decode_stream(&mut Reader::new(&bad), true).is_err());
    }
}
