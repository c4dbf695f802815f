//! The stream type: entries packed into byte nodes, and consumer groups.
//!
//! Entries live in nodes of up to `stream-node-max-entries` entries and
//! `stream-node-max-bytes` bytes, keyed in a `BTreeMap` by the ID of their
//! first entry, so a million small entries cost about ten thousand
//! allocations. A node keeps the field names of its first entry once
//! (the "master" fields); later entries with the same names store only their
//! values. Deleting marks an entry in place (a tombstone) as Redis does; a
//! node goes when its last live entry does.
//!
//! Node layout can differ between a live server and its replay (the node
//! limits are configuration), so nothing logged depends on it: trims are
//! logged as "everything before this ID", and equality compares content.

use crate::varint::{get as get_varint, put as put_varint};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID, or None past the largest.
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| StreamId { ms, seq: 0 }),
        }
    }

    pub fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => self
                .ms
                .checked_sub(1)
                .map(|ms| StreamId { ms, seq: u64::MAX }),
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// One entry, decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamEntry {
    pub id: StreamId,
    pub fields: Vec<(Bytes, Bytes)>,
}

/// When a node is full (Redis's `stream-node-max-entries` and
/// `stream-node-max-bytes`; 0 means no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    pub entries: u32,
    pub bytes: u32,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            entries: 100,
            bytes: 4096,
        }
    }
}

/// Redis's marker for a group whose read counter is unknown.
pub const ENTRIES_READ_INVALID: i64 = -1;

#[derive(Clone, Debug, PartialEq)]
pub struct PendingEntry {
    pub consumer: Bytes,
    pub delivery_time: u64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Consumer {
    /// The last time it read or claimed, whether or not it got anything
    /// (XINFO's `idle`).
    pub seen_time: u64,
    /// The last time it read or claimed at least one entry; None if it
    /// never has (Redis 7.2's `active-time`, XINFO's `inactive`).
    pub active_time: Option<u64>,
    pub pending: BTreeSet<StreamId>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, PendingEntry>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// Drops `id` from the PEL and from its consumer's list.
    pub fn unpend(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(p) => {
                if let Some(c) = self.consumers.get_mut(&p.consumer) {
                    c.pending.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Makes `id` pending for `consumer` (created if missing) with these
    /// delivery details, moving it from whichever consumer had it.
    pub fn pend(&mut self, id: StreamId, p: PendingEntry) {
        if let Some(old) = self.pel.get(&id) {
            if old.consumer != p.consumer {
                if let Some(c) = self.consumers.get_mut(&old.consumer) {
                    c.pending.remove(&id);
                }
            }
        }
        self.consumers
            .entry(p.consumer.clone())
            .or_default()
            .pending
            .insert(id);
        self.pel.insert(id, p);
    }
}

const FLAG_DELETED: u8 = 1;
const FLAG_SAME_FIELDS: u8 = 2;

#[derive(Clone, Debug)]
struct Node {
    /// The field names of the node's first entry.
    master: Vec<Bytes>,
    buf: Vec<u8>,
    count: u32,
    live: u32,
    last: StreamId,
    /// The size Redis's listpack for the same entries would have, which is
    /// what `stream-node-max-bytes` measures there. Nodes end where Redis's
    /// end, so `~` trimming (which drops whole nodes) removes what Redis
    /// removes; this node's own encoding is more compact and would hold
    /// more entries.
    lp_bytes: u64,
}

/// Sizes in a Redis listpack (`listpack.c`): an element is its encoding,
/// its data, and a back-length of 1 to 5 bytes.
mod listpack {
    /// The listpack's header and end byte.
    pub const EMPTY: u64 = 7;

    fn backlen(l: u64) -> u64 {
        match l {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        }
    }

    pub fn int(v: i64) -> u64 {
        let enc = match v {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32768..=32767 => 3,
            -8388608..=8388607 => 4,
            -2147483648..=2147483647 => 5,
            _ => 9,
        };
        enc + backlen(enc)
    }

    /// A string element; one that reads as an integer is stored as one
    /// (`lpStringToInt64` reads integers as `string2ll` does).
    pub fn string(s: &[u8]) -> u64 {
        if let Some(v) = crate::value::parse_i64(s) {
            return int(v);
        }
        let len = s.len() as u64;
        let enc = match len {
            0..=63 => 1,
            64..=4095 => 2,
            _ => 5,
        } + len;
        enc + backlen(enc)
    }
}

fn get_slice<'a>(buf: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let n = get_varint(buf, pos) as usize;
    let start = (*pos).min(buf.len());
    let end = start.saturating_add(n).min(buf.len());
    *pos = end;
    &buf[start..end]
}

/// A position in a node: where its flag byte is, and its ID.
struct Slot {
    at: usize,
    id: StreamId,
    deleted: bool,
    next: usize,
}

impl Node {
    fn new(first: &[(Bytes, Bytes)]) -> Node {
        // The master entry: count, deleted count, the field names and a
        // terminating 0.
        let lp_bytes = listpack::EMPTY
            + 2 * listpack::int(0)
            + listpack::int(first.len() as i64)
            + first.iter().map(|(f, _)| listpack::string(f)).sum::<u64>()
            + listpack::int(0);
        Node {
            lp_bytes,
            // Copied: a slice of the request would keep all of it alive.
            master: first
                .iter()
                .map(|(f, _)| Bytes::copy_from_slice(f))
                .collect(),
            buf: Vec::new(),
            count: 0,
            live: 0,
            last: StreamId::MIN,
        }
    }

    fn same_fields(&self, fields: &[(Bytes, Bytes)]) -> bool {
        self.master.len() == fields.len()
            && self.master.iter().zip(fields).all(|(m, (f, _))| m == f)
    }

    fn push(&mut self, base: StreamId, id: StreamId, fields: &[(Bytes, Bytes)]) {
        let same = self.same_fields(fields);
        // flags, ms and seq differences, [field count], [fields,] values,
        // and the entry's element count.
        let n = fields.len() as i64;
        self.lp_bytes += listpack::int(if same { 2 } else { 0 })
            + listpack::int(id.ms.wrapping_sub(base.ms) as i64)
            + listpack::int((id.seq as i64).wrapping_sub(base.seq as i64))
            + fields.iter().map(|(_, v)| listpack::string(v)).sum::<u64>()
            + if same {
                listpack::int(n + 3)
            } else {
                listpack::int(n)
                    + fields.iter().map(|(f, _)| listpack::string(f)).sum::<u64>()
                    + listpack::int(2 * n + 4)
            };
        self.buf.push(if same { FLAG_SAME_FIELDS } else { 0 });
        put_varint(&mut self.buf, id.ms.wrapping_sub(base.ms));
        put_varint(&mut self.buf, id.seq);
        if same {
            for (_, v) in fields {
                put_varint(&mut self.buf, v.len() as u64);
                self.buf.extend_from_slice(v);
            }
        } else {
            put_varint(&mut self.buf, fields.len() as u64);
            for (f, v) in fields {
                put_varint(&mut self.buf, f.len() as u64);
                self.buf.extend_from_slice(f);
                put_varint(&mut self.buf, v.len() as u64);
                self.buf.extend_from_slice(v);
            }
        }
        self.count += 1;
        self.live += 1;
        self.last = id;
    }

    /// The entry at `at`, skipping its fields; None past the end.
    fn slot(&self, base: StreamId, at: usize) -> Option<Slot> {
        let flags = *self.buf.get(at)?;
        let mut pos = at + 1;
        let ms = base.ms.wrapping_add(get_varint(&self.buf, &mut pos));
        let seq = get_varint(&self.buf, &mut pos);
        if flags & FLAG_SAME_FIELDS != 0 {
            for _ in 0..self.master.len() {
                get_slice(&self.buf, &mut pos);
            }
        } else {
            let n = get_varint(&self.buf, &mut pos);
            for _ in 0..n.saturating_mul(2) {
                if pos >= self.buf.len() {
                    break;
                }
                get_slice(&self.buf, &mut pos);
            }
        }
        Some(Slot {
            at,
            id: StreamId { ms, seq },
            deleted: flags & FLAG_DELETED != 0,
            next: pos,
        })
    }

    fn fields_at(&self, at: usize) -> Vec<(Bytes, Bytes)> {
        let flags = self.buf.get(at).copied().unwrap_or(0);
        let mut pos = at + 1;
        get_varint(&self.buf, &mut pos);
        get_varint(&self.buf, &mut pos);
        let copy = |s: &[u8]| Bytes::copy_from_slice(s);
        if flags & FLAG_SAME_FIELDS != 0 {
            self.master
                .iter()
                .map(|f| (f.clone(), copy(get_slice(&self.buf, &mut pos))))
                .collect()
        } else {
            let n = get_varint(&self.buf, &mut pos) as usize;
            let mut out = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                if pos >= self.buf.len() {
                    break;
                }
                let f = copy(get_slice(&self.buf, &mut pos));
                let v = copy(get_slice(&self.buf, &mut pos));
                out.push((f, v));
            }
            out
        }
    }

    fn slots(&self, base: StreamId) -> impl Iterator<Item = Slot> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let s = self.slot(base, at)?;
            at = s.next;
            Some(s)
        })
    }

    fn mark_deleted(&mut self, at: usize) {
        if let Some(f) = self.buf.get_mut(at) {
            if *f & FLAG_DELETED == 0 {
                *f |= FLAG_DELETED;
                self.live -= 1;
            }
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    len: u64,
    pub last_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Bytes, Group>,
}

impl PartialEq for Stream {
    /// Content, not node layout (which follows configuration).
    fn eq(&self, other: &Stream) -> bool {
        self.len == other.len
            && self.last_id == other.last_id
            && self.max_deleted_id == other.max_deleted_id
            && self.entries_added == other.entries_added
            && self.groups == other.groups
            && self.range(StreamId::MIN, StreamId::MAX, None, false)
                == other.range(StreamId::MIN, StreamId::MAX, None, false)
    }
}

/// Nodes of a radix tree holding `keys` (sorted, distinct, all sharing
/// their first `depth` bytes) below `depth`: a run of bytes every key shares
/// is one compressed node, a byte where they differ one branching node, and
/// each key ends in a node of its own.
fn radix_nodes(keys: &[[u8; 16]], depth: usize) -> usize {
    let (first, last) = (&keys[0], &keys[keys.len() - 1]);
    if keys.len() == 1 {
        return if depth < first.len() { 2 } else { 1 };
    }
    // Sorted, so what the first and last share, all share.
    let mut at = depth;
    while first[at] == last[at] {
        at += 1;
    }
    let mut n = usize::from(at > depth) + 1;
    let mut rest = keys;
    while let Some(k) = rest.first() {
        let run = rest.iter().take_while(|r| r[at] == k[at]).count();
        n += radix_nodes(&rest[..run], at + 1);
        rest = &rest[run..];
    }
    n
}

/// How XADD/XTRIM trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    MaxLen(u64),
    MinId(StreamId),
}

impl Stream {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nodes holding entries (XINFO's radix-tree-keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// XINFO's radix-tree-nodes: the nodes of the radix tree Redis would
    /// file these nodes' first IDs in (16 big-endian bytes each, inserted
    /// in ascending order), which clients' tests compare exactly.
    pub fn radix_tree_nodes(&self) -> usize {
        let keys: Vec<[u8; 16]> = self
            .nodes
            .keys()
            .map(|id| {
                let mut k = [0u8; 16];
                k[..8].copy_from_slice(&id.ms.to_be_bytes());
                k[8..].copy_from_slice(&id.seq.to_be_bytes());
                k
            })
            .collect();
        if keys.is_empty() {
            return 1;
        }
        radix_nodes(&keys, 0)
    }

    /// Appends an entry; `id` must be greater than every ID so far (the
    /// caller checked). Updates the last ID and the added counter.
    pub fn add(&mut self, id: StreamId, fields: &[(Bytes, Bytes)], limits: NodeLimits) {
        let full = match self.nodes.last_key_value() {
            None => true,
            Some((_, n)) => {
                // Redis's test: the listpack's size plus the new entry's
                // field and value lengths.
                let size: u64 = fields.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
                // After XSETID lowered the last ID below a tombstone, a new
                // node keeps every node's IDs ascending.
                id <= n.last
                    || (limits.entries > 0 && n.count >= limits.entries)
                    || (limits.bytes > 0 && n.lp_bytes + size >= u64::from(limits.bytes))
            }
        };
        if full {
            self.nodes.insert(id, Node::new(fields));
        }
        if let Some((base, n)) = self.nodes.iter_mut().next_back() {
            n.push(*base, id, fields);
        }
        self.len += 1;
        self.entries_added += 1;
        if id > self.last_id {
            self.last_id = id;
        }
    }

    /// Live entries with `start <= id <= end`, at most `count`, in order
    /// (descending when `rev`).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: Option<usize>,
        rev: bool,
    ) -> Vec<StreamEntry> {
        let mut out = Vec::new();
        let limit = count.unwrap_or(usize::MAX);
        if start > end || limit == 0 {
            return out;
        }
        let first_key = self
            .nodes
            .range(..=start)
            .next_back()
            .map(|(k, _)| *k)
            .unwrap_or(start);
        let nodes = self.nodes.range(first_key..=end);
        let visit = |base: &StreamId, n: &Node, out: &mut Vec<StreamEntry>| -> bool {
            let slots: Vec<Slot> = n
                .slots(*base)
                .filter(|s| !s.deleted && s.id >= start && s.id <= end)
                .collect();
            let iter: Box<dyn Iterator<Item = &Slot>> = if rev {
                Box::new(slots.iter().rev())
            } else {
                Box::new(slots.iter())
            };
            for s in iter {
                out.push(StreamEntry {
                    id: s.id,
                    fields: n.fields_at(s.at),
                });
                if out.len() >= limit {
                    return false;
                }
            }
            true
        };
        if rev {
            for (k, n) in nodes.rev() {
                if !visit(k, n, &mut out) {
                    break;
                }
            }
        } else {
            for (k, n) in nodes {
                if !visit(k, n, &mut out) {
                    break;
                }
            }
        }
        out
    }

    pub fn get(&self, id: StreamId) -> Option<StreamEntry> {
        self.range(id, id, Some(1), false).pop()
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.locate(id).is_some()
    }

    fn locate(&self, id: StreamId) -> Option<(StreamId, usize)> {
        let (base, n) = self.nodes.range(..=id).next_back()?;
        if n.last < id {
            return None;
        }
        n.slots(*base)
            .find(|s| s.id == id && !s.deleted)
            .map(|s| (*base, s.at))
    }

    /// The first and last live entries.
    pub fn first_entry(&self) -> Option<StreamEntry> {
        self.range(StreamId::MIN, StreamId::MAX, Some(1), false)
            .pop()
    }

    pub fn last_entry(&self) -> Option<StreamEntry> {
        self.range(StreamId::MIN, StreamId::MAX, Some(1), true)
            .pop()
    }

    /// Redis's recorded first entry ID: the first live one, 0-0 when empty.
    pub fn first_id(&self) -> StreamId {
        for (base, n) in &self.nodes {
            if let Some(s) = n.slots(*base).find(|s| !s.deleted) {
                return s.id;
            }
        }
        StreamId::MIN
    }

    /// Deletes one entry; true if it was there. Tracks the largest deleted ID.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((base, at)) = self.locate(id) else {
            return false;
        };
        if let Some(n) = self.nodes.get_mut(&base) {
            n.mark_deleted(at);
            if n.live == 0 {
                self.nodes.remove(&base);
            }
        }
        self.len -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        true
    }

    /// Removes every entry with an ID below `cutoff`; returns how many
    /// live ones went.
    pub fn remove_before(&mut self, cutoff: StreamId) -> u64 {
        let mut removed = 0u64;
        let keys: Vec<StreamId> = self.nodes.range(..cutoff).map(|(k, _)| *k).collect();
        for k in keys {
            let Some(n) = self.nodes.get_mut(&k) else {
                continue;
            };
            if n.last < cutoff {
                removed += u64::from(n.live);
                self.nodes.remove(&k);
                continue;
            }
            let doomed: Vec<usize> = n
                .slots(k)
                .filter(|s| !s.deleted && s.id < cutoff)
                .map(|s| s.at)
                .collect();
            for at in doomed {
                n.mark_deleted(at);
                removed += 1;
            }
            if n.live == 0 {
                self.nodes.remove(&k);
            }
        }
        self.len -= removed;
        removed
    }

    /// What a trim would remove, as Redis decides it: whole nodes from the
    /// head while the strategy allows, then (exact only) single entries.
    /// `limit` caps the entries removed (0: none). Returns the cutoff to
    /// log (everything below it goes) and the count, or None if nothing goes.
    pub fn plan_trim(
        &self,
        strategy: TrimStrategy,
        approx: bool,
        limit: u64,
    ) -> Option<(StreamId, u64)> {
        let mut length = self.len;
        let mut deleted = 0u64;
        let mut cutoff = None;
        for (base, n) in &self.nodes {
            if let TrimStrategy::MaxLen(max) = strategy {
                if length <= max {
                    break;
                }
            }
            let entries = u64::from(n.live);
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let whole = match strategy {
                TrimStrategy::MaxLen(max) => length - entries >= max,
                TrimStrategy::MinId(min) => n.last < min,
            };
            if whole {
                length -= entries;
                deleted += entries;
                // After XSETID lowered the last ID below this node's
                // tombstones, the next node starts below them: a cutoff
                // past this node's last ID would take its entries too.
                let past = n.last.next().unwrap_or(StreamId::MAX);
                let next = self.nodes.range((Excluded(*base), Unbounded)).next();
                cutoff = Some(next.map_or(past, |(k, _)| past.min(*k)));
                continue;
            }
            if approx {
                break;
            }
            let mut reached_end = true;
            for s in n.slots(*base).filter(|s| !s.deleted) {
                let go = match strategy {
                    TrimStrategy::MaxLen(max) => length > max,
                    TrimStrategy::MinId(min) => s.id < min,
                };
                if !go {
                    reached_end = false;
                    break;
                }
                length -= 1;
                deleted += 1;
                cutoff = Some(s.id.next().unwrap_or(StreamId::MAX));
            }
            // Every live entry went, yet the node was not whole: its last
            // ID is a tombstone past the next node's start (XSETID), and
            // that node may hold IDs below the minimum too.
            if !reached_end {
                break;
            }
        }
        let cutoff = cutoff?;
        (deleted > 0).then_some((cutoff, deleted))
    }

    /// Redis's estimate of how many entries were ever added up to `id`,
    /// or [`ENTRIES_READ_INVALID`] when fragmentation makes it unknowable.
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.len == 0 && id <= self.last_id {
            return self.entries_added as i64;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        }
        if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        let first = self.first_id();
        if self.max_deleted_id.is_zero() || self.max_deleted_id < first {
            if id < first {
                return (self.entries_added - self.len) as i64;
            }
            if id == first {
                return (self.entries_added - self.len + 1) as i64;
            }
        }
        ENTRIES_READ_INVALID
    }

    /// Whether a tombstone may lie in `start..=end` (Redis's rule of thumb,
    /// from the largest deleted ID).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.len == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id() > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// A group's lag (None: unknown).
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_distance(g.last_id);
        (read != ENTRIES_READ_INVALID).then(|| self.entries_added as i64 - read)
    }

    /// Bytes held, for memory accounting.
    pub fn approx_size_bytes(&self) -> usize {
        let nodes: usize = self
            .nodes
            .values()
            .map(|n| n.buf.capacity() + n.master.iter().map(|m| m.len() + 32).sum::<usize>() + 64)
            .sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| name.len() + 64 + g.pel.len() * 96 + g.consumers.len() * 64)
            .sum();
        nodes + groups + 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_seeds::seeds;
    use rand::{Rng, SeedableRng};

    /// Redis 7.0.15's XINFO figures for the same node boundaries.
    #[test]
    fn radix_tree_nodes_as_redis_counts_them() {
        let build = |ids: &[u64], per_node: u32| {
            let mut s = Stream::default();
            let limits = NodeLimits {
                entries: per_node,
                bytes: 0,
            };
            for &ms in ids {
                let f = [(Bytes::from_static(b"a"), Bytes::from_static(b"b"))];
                s.add(StreamId::new(ms, 0), &f, limits);
            }
            s
        };
        assert_eq!(Stream::default().radix_tree_nodes(), 1);
        for (n, nodes) in [(1, 2), (2, 6), (3, 8), (256, 515), (257, 518), (1000, 2006)] {
            let ids: Vec<u64> = (1..=n).collect();
            assert_eq!(
                build(&ids, 1).radix_tree_nodes(),
                nodes,
                "{n} one-entry nodes"
            );
        }
        let ids: Vec<u64> = (1..=1000).collect();
        let s = build(&ids, 100);
        assert_eq!((s.node_count(), s.radix_tree_nodes()), (10, 26));
    }

    fn f(v: &str) -> Vec<(Bytes, Bytes)> {
        vec![(
            Bytes::from_static(b"f"),
            Bytes::copy_from_slice(v.as_bytes()),
        )]
    }

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    #[test]
    fn entries_pack_into_nodes_and_read_back() {
        let mut s = Stream::default();
        let lim = NodeLimits {
            entries: 10,
            bytes: 0,
        };
        for i in 1..=95 {
            s.add(id(i), &f(&i.to_string()), lim);
        }
        s.add(
            id(96),
            &[(Bytes::from_static(b"x"), Bytes::from_static(b"y"))],
            lim,
        );
        assert_eq!(s.node_count(), 10);
        assert_eq!(s.len(), 96);
        let all = s.range(StreamId::MIN, StreamId::MAX, None, false);
        assert_eq!(all.len(), 96);
        assert_eq!(all[41].fields, f("42"));
        assert_eq!(all[95].fields[0].0, Bytes::from_static(b"x"));
        let rev = s.range(id(10), id(20), Some(3), true);
        assert_eq!(
            rev.iter().map(|e| e.id.ms).collect::<Vec<_>>(),
            vec![20, 19, 18]
        );
    }

    #[test]
    fn small_entries_share_allocations() {
        let mut s = Stream::default();
        let fields = [
            (Bytes::from_static(b"sensor"), Bytes::from_static(b"7")),
            (Bytes::from_static(b"value"), Bytes::from_static(b"21.5")),
        ];
        for i in 0..100_000 {
            s.add(
                StreamId::new(1_700_000_000_000 + i / 3, i % 3),
                &fields,
                NodeLimits::default(),
            );
        }
        // One node (one buffer, one copy of the field names) per 100 entries.
        assert_eq!(s.node_count(), 1000);
        // Same fields as the node's first entry: flag, two varint ID parts
        // and the two values with their lengths, about 10 bytes each.
        let bytes: usize = s.nodes.values().map(|n| n.buf.len()).sum();
        assert!(bytes < 100_000 * 12, "{bytes}");
        assert_eq!(
            s.get(StreamId::new(1_700_000_000_000 + 33_333, 0))
                .unwrap()
                .fields,
            fields
        );
    }

    #[test]
    fn deletes_and_trims() {
        let mut s = Stream::default();
        let lim = NodeLimits {
            entries: 10,
            bytes: 0,
        };
        for i in 1..=100 {
            s.add(id(i), &f("v"), lim);
        }
        assert!(s.delete(id(1)));
        assert!(!s.delete(id(1)));
        assert_eq!(s.first_id(), id(2));
        assert_eq!(s.max_deleted_id, id(1));
        // Approximate: whole nodes only.
        let (cut, n) = s.plan_trim(TrimStrategy::MaxLen(55), true, 0).unwrap();
        assert_eq!((cut, n), (StreamId::new(40, 1), 39));
        let (cut, n) = s.plan_trim(TrimStrategy::MaxLen(55), false, 0).unwrap();
        assert_eq!((cut, n), (StreamId::new(45, 1), 44));
        assert_eq!(s.remove_before(cut), 44);
        assert_eq!(s.len(), 55);
        assert_eq!(s.first_id(), id(46));
        assert_eq!(s.plan_trim(TrimStrategy::MinId(id(46)), false, 0), None);
    }

    /// Nodes fill as Redis 7.0.15's listpacks do with the default limits
    /// (4096 bytes, 100 entries), so `~` trimming removes what Redis does
    /// (figures from Redis: XTRIM's reply after XADDs of the same entries).
    #[test]
    fn nodes_end_where_redis_listpacks_end() {
        let trimmed = |n: u64, value_len: usize, fields: &[&str], max: u64| {
            let mut s = Stream::default();
            let v = Bytes::from(vec![b'x'; value_len]);
            let fv: Vec<(Bytes, Bytes)> = fields
                .iter()
                .map(|f| (Bytes::copy_from_slice(f.as_bytes()), v.clone()))
                .collect();
            for i in 1..=n {
                s.add(StreamId::new(1, i), &fv, NodeLimits::default());
            }
            s.plan_trim(TrimStrategy::MaxLen(max), true, 0)
                .map_or(0, |(_, k)| k)
        };
        assert_eq!(trimmed(119, 32, &["f"], 20), 97);
        assert_eq!(trimmed(119, 36, &["f"], 20), 88);
        assert_eq!(trimmed(60, 100, &["f"], 20), 36);
        // The entry count still ends a node of small entries.
        assert_eq!(trimmed(150, 1, &["f"], 20), 100);
        // Fields that change from entry to entry, integer values: Redis
        // keeps all 60 in one node.
        let mut s = Stream::default();
        for i in 1..=60u64 {
            let fv = [
                (
                    Bytes::from(format!("f{}", i % 3)),
                    Bytes::from_static(b"12345"),
                ),
                (Bytes::from_static(b"g"), Bytes::from_static(b"hello")),
            ];
            s.add(StreamId::new(1, i), &fv, NodeLimits::default());
        }
        assert_eq!(s.plan_trim(TrimStrategy::MaxLen(5), true, 0), None);
    }

    /// XSETID may lower the last ID below a deleted entry; the next entry
    /// then starts a node whose IDs lie below the previous node's last
    /// (tombstoned) one. Found by `behaves_as_a_map_of_entries`.
    fn after_xsetid_below_a_tombstone() -> Stream {
        let mut s = Stream::default();
        let lim = NodeLimits {
            entries: 10,
            bytes: 0,
        };
        s.add(StreamId::new(1, 0), &f("a"), lim);
        s.add(StreamId::new(2, 0), &f("b"), lim);
        assert!(s.delete(StreamId::new(2, 0)));
        for seq in 1..=3 {
            s.add(StreamId::new(1, seq), &f("c"), lim);
        }
        assert_eq!(s.node_count(), 2);
        s
    }

    #[test]
    fn a_trim_of_a_whole_node_keeps_the_next_nodes_lower_ids() {
        let mut s = after_xsetid_below_a_tombstone();
        let (cut, n) = s.plan_trim(TrimStrategy::MaxLen(3), true, 0).unwrap();
        assert_eq!(n, 1);
        assert_eq!(s.remove_before(cut), 1);
        let ids: Vec<StreamId> = s
            .range(StreamId::MIN, StreamId::MAX, None, false)
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(
            ids,
            (1..=3).map(|q| StreamId::new(1, q)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn an_exact_minid_trim_reaches_into_the_next_node() {
        let mut s = after_xsetid_below_a_tombstone();
        let min = StreamId::new(1, 2);
        let (cut, n) = s.plan_trim(TrimStrategy::MinId(min), false, 0).unwrap();
        assert_eq!(s.remove_before(cut), n);
        assert_eq!(s.first_id(), min);
        assert_eq!((n, s.len()), (2, 2));
    }

    fn entry_fields(rng: &mut rand::rngs::StdRng) -> Vec<(Bytes, Bytes)> {
        let n = rng.gen_range(1..4);
        (0..n)
            .map(|i| {
                // Mostly the same names, so most entries share the master's.
                let f = if rng.gen_bool(0.8) {
                    format!("f{i}")
                } else {
                    format!("g{}", rng.gen_range(0..3))
                };
                let len = [0, 1, 5, 127, 128, 300][rng.gen_range(0..6)];
                let v = if rng.gen_bool(0.2) {
                    rng.gen_range(0..100_000).to_string()
                } else {
                    "v".repeat(len)
                };
                (Bytes::from(f), Bytes::from(v))
            })
            .collect()
    }

    fn check_stream(s: &Stream, model: &BTreeMap<StreamId, Vec<(Bytes, Bytes)>>) {
        assert_eq!(s.len(), model.len() as u64);
        let all = s.range(StreamId::MIN, StreamId::MAX, None, false);
        assert!(all.iter().map(|e| (&e.id, &e.fields)).eq(model.iter()));
        assert_eq!(
            s.first_id(),
            model.keys().next().copied().unwrap_or(StreamId::MIN)
        );
        assert_eq!(s.first_entry().map(|e| e.id), model.keys().next().copied());
        assert_eq!(
            s.last_entry().map(|e| e.id),
            model.keys().next_back().copied()
        );
        assert!(s.nodes.values().all(|n| n.live > 0 && n.live <= n.count));
        assert_eq!(
            s.nodes.values().map(|n| u64::from(n.live)).sum::<u64>(),
            s.len()
        );
    }

    /// Appends (some after the last ID was lowered below tombstones, as
    /// XSETID allows), deletions, trims planned and applied, under node
    /// limits from one entry up: contents, ranges in both directions with
    /// counts, lookups, and the trim's count must match a map of entries.
    #[test]
    fn behaves_as_a_map_of_entries() {
        for seed in seeds(100) {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let limits = NodeLimits {
                entries: [0, 1, 2, 3, 10, 100][rng.gen_range(0..6)],
                bytes: [0, 40, 200, 4096][rng.gen_range(0..4)],
            };
            let mut s = Stream::default();
            let mut model: BTreeMap<StreamId, Vec<(Bytes, Bytes)>> = BTreeMap::new();
            // Every ID ever added, for lookups of deleted ones.
            let mut ids: Vec<StreamId> = Vec::new();
            let mut top = StreamId::MIN;
            for step in 0..1500 {
                match rng.gen_range(0..100) {
                    0..=49 => {
                        // After the last ID, or (XSETID) just after the last
                        // live entry when tombstones follow it.
                        let live_top = model.keys().next_back().copied().unwrap_or(StreamId::MIN);
                        let after = if rng.gen_bool(0.3) { live_top } else { top };
                        let id = match rng.gen_range(0..4) {
                            0 => StreamId::new(
                                after.ms + rng.gen_range(1..1000),
                                rng.gen_range(0..3),
                            ),
                            _ => match after.next() {
                                Some(id) => id,
                                None => continue,
                            },
                        };
                        let fields = entry_fields(&mut rng);
                        s.add(id, &fields, limits);
                        model.insert(id, fields);
                        ids.push(id);
                        top = top.max(id);
                    }
                    50..=79 if !ids.is_empty() => {
                        // The newest often, so that XSETID has tombstones
                        // to go below.
                        let newest = model.keys().next_back().copied();
                        let id = match newest {
                            Some(id) if rng.gen_bool(0.3) => id,
                            _ => ids[rng.gen_range(0..ids.len())],
                        };
                        assert_eq!(s.delete(id), model.remove(&id).is_some());
                    }
                    80..=84 if !ids.is_empty() => {
                        let cut = ids[rng.gen_range(0..ids.len())];
                        let cut = if rng.gen_bool(0.5) {
                            cut
                        } else {
                            cut.next().unwrap_or(cut)
                        };
                        let before = model.len();
                        model.retain(|id, _| *id >= cut);
                        assert_eq!(s.remove_before(cut), (before - model.len()) as u64);
                    }
                    85..=89 => {
                        let strategy = if rng.gen_bool(0.5) {
                            TrimStrategy::MaxLen(rng.gen_range(0..=model.len() as u64 + 2))
                        } else {
                            // Recent IDs often: where XSETID's nodes overlap.
                            let back = if rng.gen_bool(0.5) {
                                ids.len().min(20)
                            } else {
                                ids.len()
                            };
                            let at = ids.len().checked_sub(1 + rng.gen_range(0..back.max(1)));
                            TrimStrategy::MinId(at.map_or(StreamId::MIN, |i| ids[i]))
                        };
                        let approx = rng.gen_bool(0.5);
                        let limit = [0, 0, 1, 5, 100][rng.gen_range(0..5)];
                        if let Some((cut, n)) = s.plan_trim(strategy, approx, limit) {
                            assert!(n > 0 && (limit == 0 || n <= limit));
                            let before = model.len();
                            model.retain(|id, _| *id >= cut);
                            assert_eq!((before - model.len()) as u64, n);
                            assert_eq!(s.remove_before(cut), n);
                        }
                        if !approx && limit == 0 {
                            match strategy {
                                TrimStrategy::MaxLen(max) => {
                                    assert!(model.len() as u64 <= max)
                                }
                                TrimStrategy::MinId(min) => {
                                    assert!(model.keys().all(|id| *id >= min))
                                }
                            }
                            if let Some((cut, n)) = s.plan_trim(strategy, approx, limit) {
                                panic!("a second exact trim would remove {n} below {cut}");
                            }
                        }
                    }
                    _ => {}
                }
                if let Some(&id) = ids.get(rng.gen_range(0..ids.len().max(1))) {
                    assert_eq!(s.contains(id), model.contains_key(&id));
                    assert_eq!(s.get(id).map(|e| e.fields), model.get(&id).cloned());
                }
                if !ids.is_empty() {
                    let a = ids[rng.gen_range(0..ids.len())];
                    let b = ids[rng.gen_range(0..ids.len())];
                    let (lo, hi) = (a.min(b), a.max(b));
                    let count = [None, Some(1), Some(3)][rng.gen_range(0..3)];
                    let rev = rng.gen_bool(0.5);
                    let want: Vec<StreamId> = if rev {
                        model
                            .range(lo..=hi)
                            .rev()
                            .map(|(id, _)| *id)
                            .take(count.unwrap_or(usize::MAX))
                            .collect()
                    } else {
                        model
                            .range(lo..=hi)
                            .map(|(id, _)| *id)
                            .take(count.unwrap_or(usize::MAX))
                            .collect()
                    };
                    let got: Vec<StreamId> =
                        s.range(lo, hi, count, rev).iter().map(|e| e.id).collect();
                    assert_eq!(got, want, "step {step}");
                }
                if step % 8 == 0 {
                    check_stream(&s, &model);
                }
            }
            check_stream(&s, &model);
        }
    }
}
