//! Streams in Redis 7.0's RDB layout (`RDB_TYPE_STREAM_LISTPACKS_2`, and
//! the older `RDB_TYPE_STREAM_LISTPACKS` on load).
//!
//! The entries travel as Redis's radix tree of listpacks: per node, the
//! master ID (16 bytes, big-endian ms and seq) and a listpack holding a
//! master entry (live count, deleted count, the field names, 0) and then
//! every entry as flags, ID deltas from the master, its fields (only the
//! values when they match the master's names) and its element count.
//! Then the stream's counters, and the consumer groups with their PELs and
//! consumers.
//!
//! durakv's own nodes use another byte layout, so DUMP rebuilds nodes the
//! way Redis fills them from XADDs (live entries only; tombstones are not
//! carried, the counters that depend on them are). RESTORE reads any node
//! layout, drops tombstones and repacks the entries.

use super::listpack;
use super::primitives::{put_length, put_string, Reader};
use bytes::Bytes;
use durakv_engine::stream::{
    Consumer, Group, NodeLimits, PendingEntry, Stream, StreamEntry, StreamId, ENTRIES_READ_INVALID,
};
use durakv_engine::value::parse_i64;
use std::collections::BTreeMap;

const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;
/// Redis's cap on a node's listpack whatever `stream-node-max-bytes` says.
const LISTPACK_MAX_BYTES: usize = 1 << 30;
/// Smallest PEL entry on the wire: ID, delivery time, one-byte count.
const PEL_ENTRY_MIN_BYTES: u64 = 16 + 8 + 1;

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    out.extend_from_slice(&id.ms.to_be_bytes());
    out.extend_from_slice(&id.seq.to_be_bytes());
}

fn put_id_lengths(out: &mut Vec<u8>, id: StreamId) {
    put_length(out, id.ms);
    put_length(out, id.seq);
}

fn put_ms_time(out: &mut Vec<u8>, t: u64) {
    out.extend_from_slice(&t.to_le_bytes());
}

/// One listpack being filled, as Redis's `streamAppendItem` fills it.
struct NodeBuilder {
    master_id: StreamId,
    master: Vec<Bytes>,
    count: u64,
    /// Entries after the master entry, as listpack elements.
    items: Vec<Bytes>,
    /// Listpack bytes of `items`.
    items_bytes: usize,
}

fn int(v: i64) -> Bytes {
    Bytes::from(v.to_string())
}

impl NodeBuilder {
    fn new(e: &StreamEntry) -> NodeBuilder {
        NodeBuilder {
            master_id: e.id,
            master: e.fields.iter().map(|(f, _)| f.clone()).collect(),
            count: 0,
            items: Vec::new(),
            items_bytes: 0,
        }
    }

    fn header(&self) -> Vec<Bytes> {
        let mut h = vec![
            int(self.count as i64),
            int(0),
            int(self.master.len() as i64),
        ];
        h.extend(self.master.iter().cloned());
        h.push(int(0));
        h
    }

    /// The listpack's current size, what Redis compares with the limit.
    fn bytes(&self) -> usize {
        let header: usize = self.header().iter().map(|i| listpack::entry_size(i)).sum();
        listpack::EMPTY_SIZE + header + self.items_bytes
    }

    /// Whether Redis would open a new node for `e`.
    fn full_for(&self, e: &StreamEntry, limits: NodeLimits) -> bool {
        let max_bytes = match limits.bytes as usize {
            0 => LISTPACK_MAX_BYTES,
            n => n.min(LISTPACK_MAX_BYTES),
        };
        let fields_bytes: usize = e.fields.iter().map(|(f, v)| f.len() + v.len()).sum();
        self.bytes() + fields_bytes >= max_bytes
            || (limits.entries > 0 && self.count >= u64::from(limits.entries))
    }

    fn push(&mut self, e: &StreamEntry) {
        let same = self.master.len() == e.fields.len()
            && self.master.iter().zip(&e.fields).all(|(m, (f, _))| m == f);
        let n = e.fields.len() as i64;
        let mut items = vec![
            int(if same { FLAG_SAME_FIELDS } else { 0 }),
            int(e.id.ms.wrapping_sub(self.master_id.ms) as i64),
            int(e.id.seq.wrapping_sub(self.master_id.seq) as i64),
        ];
        if same {
            items.extend(e.fields.iter().map(|(_, v)| v.clone()));
            items.push(int(n + 3));
        } else {
            items.push(int(n));
            items.extend(e.fields.iter().flat_map(|(f, v)| [f.clone(), v.clone()]));
            items.push(int(2 * n + 4));
        }
        self.items_bytes += items.iter().map(|i| listpack::entry_size(i)).sum::<usize>();
        self.items.extend(items);
        self.count += 1;
    }

    fn finish(self) -> (StreamId, Vec<u8>) {
        let header = self.header();
        let lp = listpack::encode(header.iter().chain(&self.items).map(|b| &b[..]));
        (self.master_id, lp)
    }
}

/// The stream's serialization after its type byte.
pub fn encode(out: &mut Vec<u8>, s: &Stream, limits: NodeLimits) {
    let mut nodes = Vec::new();
    let mut node: Option<NodeBuilder> = None;
    for e in s.range(StreamId::MIN, StreamId::MAX, None, false) {
        let b = match node.take() {
            Some(b) if !b.full_for(&e, limits) => b,
            Some(b) => {
                nodes.push(b.finish());
                NodeBuilder::new(&e)
            }
            None => NodeBuilder::new(&e),
        };
        node.insert(b).push(&e);
    }
    nodes.extend(node.map(NodeBuilder::finish));
    put_length(out, nodes.len() as u64);
    for (id, lp) in &nodes {
        let mut key = Vec::with_capacity(16);
        put_id(&mut key, *id);
        put_string(out, &key);
        put_string(out, lp);
    }
    put_length(out, s.len());
    put_id_lengths(out, s.last_id);
    put_id_lengths(out, s.first_id());
    put_id_lengths(out, s.max_deleted_id);
    put_length(out, s.entries_added);
    put_length(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_string(out, name);
        put_id_lengths(out, g.last_id);
        put_length(out, g.entries_read as u64);
        put_length(out, g.pel.len() as u64);
        for (id, p) in &g.pel {
            put_id(out, *id);
            put_ms_time(out, p.delivery_time);
            put_length(out, p.delivery_count);
        }
        put_length(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_string(out, cname);
            put_ms_time(out, c.seen_time);
            put_length(out, c.pending.len() as u64);
            for id in &c.pending {
                put_id(out, *id);
            }
        }
    }
}

fn raw_id(b: &[u8]) -> Option<StreamId> {
    let b: [u8; 16] = b.try_into().ok()?;
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&b[..8]);
    seq.copy_from_slice(&b[8..]);
    Some(StreamId::new(
        u64::from_be_bytes(ms),
        u64::from_be_bytes(seq),
    ))
}

fn id_lengths(r: &mut Reader<'_>) -> Option<StreamId> {
    Some(StreamId::new(r.length()?, r.length()?))
}

/// A millisecond time; Redis's are signed, and a negative one is "never".
fn ms_time(r: &mut Reader<'_>) -> Option<u64> {
    Some(i64::from_le_bytes(r.array()?).max(0) as u64)
}

/// A count that cannot be met by the bytes left, at `min_bytes` per item,
/// is damage: refusing it early keeps a forged count from looping long.
fn count(r: &mut Reader<'_>, min_bytes: u64) -> Option<u64> {
    let n = r.length()?;
    (n.saturating_mul(min_bytes) <= r.remaining() as u64).then_some(n)
}

/// Listpack elements read in order, integers parsed.
struct Items(std::vec::IntoIter<Bytes>);

impl Items {
    fn next(&mut self) -> Option<Bytes> {
        self.0.next()
    }

    fn int(&mut self) -> Option<i64> {
        parse_i64(&self.0.next()?)
    }

    fn len(&mut self) -> Option<usize> {
        usize::try_from(self.int()?).ok()
    }
}

/// The live entries of one node's listpack, checked as Redis's sanitizer
/// checks them: counts, element counts and the master terminator.
fn node_entries(master: StreamId, lp: &[u8], out: &mut Vec<StreamEntry>) -> Option<()> {
    let items = listpack::decode(lp)?;
    let total = items.len();
    let mut it = Items(items.into_iter());
    let live = it.int()?;
    let deleted = it.int()?;
    let nf = it.len()?;
    if nf > total {
        return None;
    }
    let fields: Vec<Bytes> = (0..nf).map(|_| it.next()).collect::<Option<_>>()?;
    if it.int()? != 0 {
        return None;
    }
    let (mut seen_live, mut seen_deleted) = (0i64, 0i64);
    while it.0.len() > 0 {
        let flags = it.int()?;
        let ms = master.ms.wrapping_add(it.int()? as u64);
        let seq = master.seq.wrapping_add(it.int()? as u64);
        let (pairs, elements) = if flags & FLAG_SAME_FIELDS != 0 {
            let pairs = fields
                .iter()
                .map(|f| Some((f.clone(), it.next()?)))
                .collect::<Option<Vec<_>>>()?;
            (pairs, nf + 3)
        } else {
            let n = it.len()?;
            if n > total {
                return None;
            }
            let pairs = (0..n)
                .map(|_| Some((it.next()?, it.next()?)))
                .collect::<Option<Vec<_>>>()?;
            (pairs, 2 * n + 4)
        };
        if it.len()? != elements {
            return None;
        }
        if flags & FLAG_DELETED != 0 {
            seen_deleted += 1;
        } else {
            seen_live += 1;
            out.push(StreamEntry {
                id: StreamId::new(ms, seq),
                fields: pairs,
            });
        }
    }
    (seen_live == live && seen_deleted == deleted).then_some(())
}

/// A stream after its type byte; `v2` for `RDB_TYPE_STREAM_LISTPACKS_2`.
pub fn decode(r: &mut Reader<'_>, v2: bool) -> Option<Stream> {
    let nodes = count(r, 2)?;
    let mut entries = Vec::new();
    let mut masters = std::collections::BTreeSet::new();
    for _ in 0..nodes {
        let master = raw_id(&r.string()?)?;
        let lp = r.string()?;
        if !masters.insert(master) {
            return None;
        }
        node_entries(master, &lp, &mut entries)?;
    }
    let mut s = Stream::default();
    let mut prev: Option<StreamId> = None;
    for e in &entries {
        if prev.is_some_and(|p| p >= e.id) {
            return None;
        }
        prev = Some(e.id);
        s.add(e.id, &e.fields, NodeLimits::default());
    }
    let length = r.length()?;
    s.last_id = id_lengths(r)?;
    if length != s.len() || prev.is_some_and(|p| p > s.last_id) {
        return None;
    }
    if v2 {
        // The first ID is recomputed from the entries, as it always
        // equals the first live one.
        id_lengths(r)?;
        s.max_deleted_id = id_lengths(r)?;
        s.entries_added = r.length()?;
    } else {
        s.entries_added = length;
    }
    if s.entries_added < length || s.entries_added > i64::MAX as u64 {
        return None;
    }
    let groups = count(r, 4)?;
    for _ in 0..groups {
        let name = r.string()?;
        let (name, g) = (name, group(r, v2, &s)?);
        if s.groups.insert(name, g).is_some() {
            return None;
        }
    }
    Some(s)
}

fn group(r: &mut Reader<'_>, v2: bool, s: &Stream) -> Option<Group> {
    let last_id = id_lengths(r)?;
    let entries_read = if v2 {
        r.length()? as i64
    } else {
        s.estimate_distance(last_id)
    };
    if entries_read < ENTRIES_READ_INVALID {
        return None;
    }
    let mut g = Group::new(last_id, entries_read);
    let pel_size = count(r, PEL_ENTRY_MIN_BYTES)?;
    let mut unowned = BTreeMap::new();
    for _ in 0..pel_size {
        let id = raw_id(r.take(16)?)?;
        let time = ms_time(r)?;
        let deliveries = r.length()?;
        if unowned.insert(id, (time, deliveries)).is_some() {
            return None;
        }
    }
    let consumers = count(r, 10)?;
    for _ in 0..consumers {
        let name = r.string()?;
        let seen_time = ms_time(r)?;
        // Redis 7.0's layout has no active time; its seen time is the
        // best estimate, as Redis 7.2 takes it.
        let consumer = Consumer {
            seen_time,
            active_time: Some(seen_time),
            pending: Default::default(),
        };
        if g.consumers.insert(name.clone(), consumer).is_some() {
            return None;
        }
        let pending = count(r, 16)?;
        for _ in 0..pending {
            let id = raw_id(r.take(16)?)?;
            // Each PEL entry belongs to exactly one consumer.
            let (delivery_time, delivery_count) = unowned.remove(&id)?;
            g.pend(
                id,
                PendingEntry {
                    consumer: name.clone(),
                    delivery_time,
                    delivery_count,
                },
            );
        }
    }
    unowned.is_empty().then_some(g)
}
