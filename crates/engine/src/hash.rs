//! The hash value: small hashes are one contiguous buffer, larger ones an
//! indexed table.
//!
//! A typical record (a YCSB row is ten 100-byte fields) kept as a table
//! would cost an entry, an index slot and a heap block per value. Packed,
//! it costs its payload plus two length bytes per field, and one heap
//! block. Lookups in a packed hash are linear,
//! which is why it is bounded by `PACKED_MAX_ENTRIES` and
//! `PACKED_MAX_BYTES`; past either it becomes a table for good, as Redis's
//! listpack does. The bounds are internal: `OBJECT ENCODING` follows
//! Redis's `hash-max-listpack-*` directives, not this representation.

use crate::key::{Key, Str};
use crate::keymap::KeyMap;
use bytes::Bytes;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::Arc;

/// Entries a packed hash may hold.
pub const PACKED_MAX_ENTRIES: usize = 128;
/// Bytes a packed hash's buffer may take; a field or value longer than
/// `PACKED_MAX_ITEM_BYTES` also makes it a table (rewriting a large buffer
/// on every update would cost more than it saves).
pub const PACKED_MAX_BYTES: usize = 4096;
pub const PACKED_MAX_ITEM_BYTES: usize = 1024;
/// Packed buffers up to this size are never split: below it the
/// allocator's size classes are close enough together.
const SPLIT_MIN_BYTES: usize = 512;

/// A hash past the packed shape: each field a compact key (inline up to 23
/// bytes) and each value a compact string (inline up to 15), 40 bytes an
/// entry plus a 4-byte index slot, as a set's members and the keyspace's
/// keys are kept. As an `IndexMap` of `Bytes` a field took a 72-byte
/// bucket, an 8-byte index slot and two heap blocks: 188 bytes of resident
/// memory per field of a 500,000-field hash against Redis's 83.
type Table = KeyMap<Str>;

#[derive(Clone, Debug)]
pub struct HashValue {
    repr: Box<Repr>,
}

/// Behind a pointer, so that a value of any type fits in 16 bytes (see
/// `crate::value::Value`): the entry count of a packed hash is not kept
/// but counted (a packed hash has at most `PACKED_MAX_ENTRIES`), and the
/// rarer shapes share one pointer, so this is a 16-byte block.
#[derive(Clone, Debug)]
enum Repr {
    /// Entries in insertion order, each `varint(len) field varint(len)
    /// value`.
    Packed(Box<[u8]>),
    Other(Box<Other>),
}

#[derive(Clone, Debug)]
enum Other {
    /// A packed buffer split in two at an entry boundary (see
    /// [`packed_repr`]): the same entries in the same order. 32 bytes, as
    /// large as the pair of pointers it is.
    Split([Box<[u8]>; 2]),
    // Shared, as the larger collections are (`crate::value::Value`): a
    // snapshot takes it in O(1), and a write copies it while one holds it.
    Table(Arc<Table>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue {
            repr: Box::new(Repr::Packed(Box::default())),
        }
    }
}

impl PartialEq for HashValue {
    /// Equal as maps, whatever the representation and order.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .slices()
                .all(|(f, v)| other.get_slice(f).is_some_and(|o| o == v))
    }
}

impl FromIterator<(Bytes, Bytes)> for HashValue {
    fn from_iter<I: IntoIterator<Item = (Bytes, Bytes)>>(iter: I) -> Self {
        let pairs: Vec<(Bytes, Bytes)> = iter.into_iter().collect();
        let mut h = HashValue::default();
        h.extend_counting(&pairs);
        h
    }
}

fn put_varint(out: &mut Vec<u8>, n: usize) {
    crate::varint::put(out, n as u64);
}

fn get_varint(buf: &[u8], pos: &mut usize) -> usize {
    crate::varint::get(buf, pos) as usize
}

fn varint_len(n: usize) -> usize {
    let bits = usize::BITS - (n | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

/// The entries of a packed buffer, with each entry's start offset.
struct PackedIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for PackedIter<'a> {
    /// (entry start, field, value)
    type Item = (usize, &'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let start = self.pos;
        let flen = get_varint(self.buf, &mut self.pos);
        let f = self.buf.get(self.pos..self.pos + flen)?;
        self.pos += flen;
        let vlen = get_varint(self.buf, &mut self.pos);
        let v = self.buf.get(self.pos..self.pos + vlen)?;
        self.pos += vlen;
        Some((start, f, v))
    }
}

fn packed(buf: &[u8]) -> PackedIter<'_> {
    PackedIter { buf, pos: 0 }
}

/// The entries of a packed hash across its parts.
struct PartsIter<'a> {
    rest: std::slice::Iter<'a, Box<[u8]>>,
    cur: PackedIter<'a>,
}

impl<'a> Iterator for PartsIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((_, f, v)) = self.cur.next() {
                return Some((f, v));
            }
            self.cur = packed(self.rest.next()?);
        }
    }
}

fn parts_iter(parts: &[Box<[u8]>]) -> PartsIter<'_> {
    PartsIter {
        rest: parts.iter(),
        cur: packed(&[]),
    }
}

/// Bytes the allocator hands out for a request of `n` bytes, as mimalloc
/// (the server's allocator) rounds: to 8 bytes up to 64, then to one of
/// four sizes per power of two.
fn rounded(n: usize) -> usize {
    if n <= 64 {
        return n.div_ceil(8) * 8;
    }
    let words = n.div_ceil(8);
    let w = words - 1;
    let b = usize::BITS - 1 - w.leading_zeros();
    let step = 1usize << (b - 2);
    (w / step + 1) * step * 8
}

/// A byte string's length and its first and last (up to) eight bytes.
type Fingerprint = (usize, u64, u64);

/// The [`Fingerprint`] of `b`, its edge bytes read as words (a byte copy
/// into a word buffer stalls the load that follows).
fn fingerprint(b: &[u8]) -> Fingerprint {
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u64_at = |i: usize| {
        u64::from_le_bytes([
            b[i],
            b[i + 1],
            b[i + 2],
            b[i + 3],
            b[i + 4],
            b[i + 5],
            b[i + 6],
            b[i + 7],
        ])
    };
    let n = b.len();
    match n {
        8.. => (n, u64_at(0), u64_at(n - 8)),
        4.. => (n, u64::from(u32_at(0)), u64::from(u32_at(n - 4))),
        _ => (n, b.iter().fold(0, |w, &c| w << 8 | u64::from(c)), 0),
    }
}

/// Whether no two of `fields` are equal. They are compared pairwise, by a
/// cheap fingerprint first (length and edge bytes): most fields of a
/// record share a length, and a restart checks every record, so the
/// fingerprints sit on the stack in an array sized to the hash, not one of
/// `PACKED_MAX_ENTRIES`.
fn distinct<'a>(fields: impl Iterator<Item = &'a [u8]>) -> bool {
    let prints: SmallVec<[(Fingerprint, &[u8]); 16]> =
        fields.map(|f| (fingerprint(f), f)).collect();
    prints
        .iter()
        .enumerate()
        .all(|(i, (p, f))| prints[..i].iter().all(|(q, g)| q != p || g != f))
}

/// Reads a canonical LEB128 length (no needless trailing zero group, at
/// most five bytes) at `*pos` of a buffer read from disk, and the bytes it
/// counts; advances `*pos` past them.
fn checked_item<'a>(buf: &'a [u8], pos: &mut usize) -> Result<&'a [u8], &'static str> {
    let mut len = 0usize;
    let mut at = *pos;
    for shift in (0..35).step_by(7) {
        let b = *buf.get(at).ok_or("packed hash cut short")?;
        at += 1;
        len |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            if b == 0 && shift > 0 {
                return Err("packed hash length not in its shortest form");
            }
            let item = buf
                .get(at..at.checked_add(len).ok_or("packed hash cut short")?)
                .ok_or("packed hash cut short")?;
            *pos = at + len;
            return Ok(item);
        }
    }
    Err("packed hash length longer than five bytes")
}

/// Bytes one field and value take in a packed buffer.
fn entry_len(f: &[u8], v: &[u8]) -> usize {
    varint_len(f.len()) + f.len() + varint_len(v.len()) + v.len()
}

/// Where to split a packed buffer of `total` bytes whose entries end at
/// `ends`: in two when that wastes less to the allocator's rounding than
/// one block would. A YCSB record (ten 100-byte fields, 1,080 bytes) would
/// take a 1,280-byte block; split 8 + 2 it takes 896 + 224 bytes and a
/// 32-byte pair of pointers. Returns (entries before the split, its byte
/// offset).
fn split_point(ends: impl Iterator<Item = usize>, total: usize) -> Option<(usize, usize)> {
    const PAIR_BYTES: usize = 2 * std::mem::size_of::<Box<[u8]>>();
    if total <= SPLIT_MIN_BYTES {
        return None;
    }
    let mut best: Option<(usize, usize, usize)> = None;
    for (n, at) in ends.take_while(|&at| at < total).enumerate() {
        let cost = rounded(at) + rounded(total - at) + PAIR_BYTES;
        if cost < best.map_or(rounded(total), |b| b.2) {
            best = Some((n + 1, at, cost));
        }
    }
    best.map(|(n, at, _)| (n, at))
}

fn packed_repr(buf: Vec<u8>) -> Repr {
    let mut it = packed(&buf);
    let ends = std::iter::from_fn(|| it.next().map(|_| it.pos));
    match split_point(ends, buf.len()) {
        Some((_, at)) => Repr::Other(Box::new(Other::Split([buf[..at].into(), buf[at..].into()]))),
        None => Repr::Packed(buf.into_boxed_slice()),
    }
}

/// [`packed_repr`] of `pairs` (`size` bytes packed), written straight into
/// its blocks: a restart builds every small hash this way, so it saves a
/// copy and an allocation per record.
fn packed_repr_of(pairs: &[(&[u8], &[u8])], size: usize) -> Repr {
    let ends = pairs.iter().scan(0, |end, (f, v)| {
        *end += entry_len(f, v);
        Some(*end)
    });
    let fill = |pairs: &[(&[u8], &[u8])], cap: usize| {
        let mut b = Vec::with_capacity(cap);
        for (f, v) in pairs {
            put_entry(&mut b, f, v);
        }
        debug_assert_eq!(b.len(), cap);
        b.into_boxed_slice()
    };
    match split_point(ends, size) {
        Some((n, at)) => Repr::Other(Box::new(Other::Split([
            fill(&pairs[..n], at),
            fill(&pairs[n..], size - at),
        ]))),
        None => Repr::Packed(fill(pairs, size)),
    }
}

/// Fields and values of a hash as slices.
pub struct Slices<'a> {
    inner: IterInner<'a>,
}

impl<'a> Iterator for Slices<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            IterInner::Packed(it) => it.next(),
            IterInner::Table(it) => it.next().map(|(f, v)| (f.as_slice(), v.as_slice())),
        }
    }
}

/// Fields and values of a hash as `Bytes`: shared handles from a table;
/// from a packed hash, slices of one copy of its buffer (one allocation
/// for the whole hash rather than two per entry: HGETALL of a YCSB
/// record took twenty).
pub struct Iter<'a> {
    inner: OwnedInner<'a>,
}

enum OwnedInner<'a> {
    Packed { buf: Bytes, pos: usize },
    Table(crate::chunked::Iter<'a, (Key, Str)>),
}

enum IterInner<'a> {
    Packed(PartsIter<'a>),
    Table(crate::chunked::Iter<'a, (Key, Str)>),
}

impl Iterator for Iter<'_> {
    type Item = (Bytes, Bytes);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            OwnedInner::Packed { buf, pos } => {
                let mut it = PackedIter { buf, pos: *pos };
                let (_, f, v) = it.next()?;
                *pos = it.pos;
                Some((buf.slice_ref(f), buf.slice_ref(v)))
            }
            OwnedInner::Table(it) => it.next().map(|(f, v)| (f.to_bytes(), v.to_bytes())),
        }
    }
}

impl HashValue {
    /// Where its representation lies, for a prefetch.
    pub(crate) fn repr_addr(&self) -> usize {
        &*self.repr as *const Repr as usize
    }

    /// An empty hash that will hold about `n` entries of `bytes` in all.
    pub fn with_capacity(n: usize, bytes: usize) -> HashValue {
        if n > PACKED_MAX_ENTRIES || bytes > PACKED_MAX_BYTES {
            return HashValue::of_table(Table::with_capacity(n));
        }
        HashValue::default()
    }

    fn of_table(t: Table) -> HashValue {
        HashValue {
            repr: Box::new(Repr::Other(Box::new(Other::Table(Arc::new(t))))),
        }
    }

    /// A hash of `pairs` (distinct fields, as a checkpoint or log holds
    /// them), built in one pass without a copy per string when it packs.
    pub fn from_slices(pairs: &[(&[u8], &[u8])]) -> HashValue {
        let fits = pairs.len() <= PACKED_MAX_ENTRIES
            && pairs
                .iter()
                .all(|(f, v)| f.len() <= PACKED_MAX_ITEM_BYTES && v.len() <= PACKED_MAX_ITEM_BYTES);
        let size: usize = pairs.iter().map(|(f, v)| entry_len(f, v)).sum();
        if fits && size <= PACKED_MAX_BYTES && distinct(pairs.iter().map(|(f, _)| *f)) {
            return HashValue {
                repr: Box::new(packed_repr_of(pairs, size)),
            };
        }
        if fits && size <= PACKED_MAX_BYTES {
            // A repeated field in a small hash: the last value wins.
            return pairs
                .iter()
                .map(|(f, v)| (Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)))
                .collect();
        }
        let mut t = Table::with_capacity(pairs.len());
        for (f, v) in pairs {
            t.set(f, Str::new(v));
        }
        HashValue::of_table(t)
    }

    /// The hash a checkpoint stored as its packed buffer
    /// ([`HashValue::packed_parts`] back to back), checked entry by entry.
    /// A buffer in packed shape (within the packed bounds, fields
    /// distinct) is copied as it is, split as [`packed_repr`] would, with
    /// no entry rewritten; any other well-formed one is built as
    /// [`HashValue::from_slices`] builds it. `Err` only for bytes that are
    /// not a sequence of entries.
    pub fn from_packed(buf: &[u8]) -> Result<HashValue, &'static str> {
        let mut pairs: SmallVec<[(&[u8], &[u8]); 16]> = SmallVec::new();
        let mut ends: SmallVec<[usize; 16]> = SmallVec::new();
        let mut fits = buf.len() <= PACKED_MAX_BYTES;
        let mut pos = 0;
        while pos < buf.len() {
            let f = checked_item(buf, &mut pos)?;
            let v = checked_item(buf, &mut pos)?;
            fits &= f.len() <= PACKED_MAX_ITEM_BYTES && v.len() <= PACKED_MAX_ITEM_BYTES;
            pairs.push((f, v));
            ends.push(pos);
        }
        fits &= pairs.len() <= PACKED_MAX_ENTRIES;
        if !fits || !distinct(pairs.iter().map(|(f, _)| *f)) {
            return Ok(HashValue::from_slices(&pairs));
        }
        let repr = match split_point(ends.iter().copied(), buf.len()) {
            Some((_, at)) => {
                Repr::Other(Box::new(Other::Split([buf[..at].into(), buf[at..].into()])))
            }
            None => Repr::Packed(buf.into()),
        };
        Ok(HashValue {
            repr: Box::new(repr),
        })
    }

    /// The buffer of a packed hash, in one or two parts to be read back to
    /// back (see [`HashValue::from_packed`]); `None` for a table.
    pub fn packed_parts(&self) -> Option<impl Iterator<Item = &[u8]> + '_> {
        self.parts().map(|p| p.iter().map(|b| &b[..]))
    }

    pub fn len(&self) -> usize {
        match (self.table(), self.parts()) {
            (Some(t), _) => t.len(),
            (None, parts) => parts_iter(parts.unwrap_or(&[])).count(),
        }
    }

    /// The table of a hash past the packed shape.
    pub(crate) fn table(&self) -> Option<&Table> {
        match &*self.repr {
            Repr::Other(o) => match &**o {
                Other::Table(t) => Some(t),
                Other::Split(_) => None,
            },
            Repr::Packed(_) => None,
        }
    }

    fn table_mut(&mut self) -> Option<&mut Table> {
        match &mut *self.repr {
            Repr::Other(o) => match &mut **o {
                Other::Table(t) => Some(crate::cow::make_mut(t)),
                Other::Split(_) => None,
            },
            Repr::Packed(_) => None,
        }
    }

    /// O(1), where `len` counts a packed hash's entries: a split hash is
    /// never empty (it splits only past `SPLIT_MIN_BYTES`).
    pub fn is_empty(&self) -> bool {
        match (&*self.repr, self.table()) {
            (Repr::Packed(buf), _) => buf.is_empty(),
            (_, Some(t)) => t.is_empty(),
            (Repr::Other(_), None) => false,
        }
    }

    /// Whether it is kept as one buffer (for tests and memory reports).
    pub fn is_packed(&self) -> bool {
        self.table().is_none()
    }

    /// The parts of a packed hash; None for a table.
    fn parts(&self) -> Option<&[Box<[u8]>]> {
        match &*self.repr {
            Repr::Packed(buf) => Some(std::slice::from_ref(buf)),
            Repr::Other(o) => match &**o {
                Other::Split(parts) => Some(&parts[..]),
                Other::Table(_) => None,
            },
        }
    }

    /// [`HashValue::parts`], to write into.
    fn parts_mut(&mut self) -> Option<&mut [Box<[u8]>]> {
        match &mut *self.repr {
            Repr::Packed(buf) => Some(std::slice::from_mut(buf)),
            Repr::Other(o) => match &mut **o {
                Other::Split(parts) => Some(&mut parts[..]),
                Other::Table(_) => None,
            },
        }
    }

    /// A packed hash's buffer in one piece (a copy when it is split).
    fn flat(&self) -> Option<Cow<'_, [u8]>> {
        match self.parts()? {
            [buf] => Some(Cow::Borrowed(buf)),
            parts => Some(Cow::Owned(parts.concat())),
        }
    }

    fn packed_entries(&self) -> Option<PartsIter<'_>> {
        self.parts().map(parts_iter)
    }

    pub fn get_slice(&self, field: &[u8]) -> Option<&[u8]> {
        match self.table() {
            Some(t) => t.get(field).map(|v| v.as_slice()),
            None => self.packed_entries()?.find(|e| e.0 == field).map(|e| e.1),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<Bytes> {
        match self.table() {
            Some(t) => t.get(field).map(Str::to_bytes),
            None => self.get_slice(field).map(Bytes::copy_from_slice),
        }
    }

    pub fn contains_key(&self, field: &[u8]) -> bool {
        self.get_slice(field).is_some()
    }

    /// The `i`th entry in iteration order (linear in a packed hash, which
    /// is small).
    pub fn get_index(&self, i: usize) -> Option<(Bytes, Bytes)> {
        match self.table() {
            Some(t) => t.get_index(i).map(|(f, v)| (f.to_bytes(), v.to_bytes())),
            None => self
                .packed_entries()?
                .nth(i)
                .map(|(f, v)| (Bytes::copy_from_slice(f), Bytes::copy_from_slice(v))),
        }
    }

    pub fn slices(&self) -> Slices<'_> {
        Slices {
            inner: self.iter_inner(),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        let inner = match (self.table(), self.parts()) {
            (Some(t), _) => OwnedInner::Table(t.entries()),
            (None, parts) => OwnedInner::Packed {
                buf: Bytes::from(parts.unwrap_or(&[]).concat()),
                pos: 0,
            },
        };
        Iter { inner }
    }

    fn iter_inner(&self) -> IterInner<'_> {
        match (self.table(), self.parts()) {
            (Some(t), _) => IterInner::Table(t.entries()),
            (None, parts) => IterInner::Packed(parts_iter(parts.unwrap_or(&[]))),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = Bytes> + '_ {
        self.slices().map(|(f, _)| Bytes::copy_from_slice(f))
    }

    pub fn values(&self) -> impl Iterator<Item = Bytes> + '_ {
        self.slices().map(|(_, v)| Bytes::copy_from_slice(v))
    }

    /// Sets `field` to `value`; true if the field is new.
    pub fn insert(&mut self, field: Bytes, value: Bytes) -> bool {
        self.extend_counting(&[(field, value)]) == 1
    }

    /// Sets every pair, rewriting a packed buffer once; returns how many
    /// fields were new.
    pub fn extend_counting(&mut self, pairs: &[(Bytes, Bytes)]) -> usize {
        if self.overwrite_same_lengths(pairs) {
            return 0;
        }
        if let Some(buf) = self.flat() {
            if let Some((new_buf, added)) = packed_with(&buf, pairs) {
                *self.repr = packed_repr(new_buf);
                return added;
            }
            self.make_table(pairs.len());
        }
        let Some(t) = self.table_mut() else {
            return 0;
        };
        let mut added = 0;
        for (f, v) in pairs {
            match t.find(f) {
                Ok(i) => {
                    // A value of the same size is written over in place.
                    if !t[i].overwrite_same_len(v) {
                        t[i] = Str::from_bytes(v);
                    }
                }
                Err(slot) => {
                    t.insert_new(slot, Key::new(f), Str::from_bytes(v));
                    added += 1;
                }
            }
        }
        added
    }

    /// Removes `field`; true if it was there. A packed hash keeps the order
    /// of the rest; a table moves its last entry into the gap.
    pub fn swap_remove(&mut self, field: &[u8]) -> bool {
        if let Some(t) = self.table_mut() {
            return t.swap_remove(field).is_some();
        }
        let Some(buf) = self.flat() else {
            return false;
        };
        let Some((start, end)) = packed_span(&buf, field) else {
            return false;
        };
        let mut v = Vec::with_capacity(buf.len() - (end - start));
        v.extend_from_slice(&buf[..start]);
        v.extend_from_slice(&buf[end..]);
        *self.repr = packed_repr(v);
        true
    }

    /// Heap bytes held, approximately (for `used_memory` and MEMORY USAGE).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Repr>() + self.shape_heap_bytes()
    }

    /// [`HashValue::heap_bytes`] past the block that holds the shape.
    fn shape_heap_bytes(&self) -> usize {
        match (&*self.repr, self.table()) {
            (Repr::Packed(buf), _) => buf.len(),
            // The entries' vector and index, and what fields and values
            // keep on the heap.
            (_, Some(t)) => {
                std::mem::size_of::<Other>()
                    + t.allocated_bytes()
                    + t.iter()
                        .map(|(f, v)| f.heap_bytes() + v.heap_bytes())
                        .sum::<usize>()
            }
            (Repr::Other(_), None) => {
                let parts = self.parts().unwrap_or(&[]);
                parts.iter().map(|p| p.len()).sum::<usize>() + std::mem::size_of::<Other>()
            }
        }
    }

    /// Writes new values over old ones in a packed hash when every field
    /// of `pairs` is there with a value of the same length (YCSB's updates
    /// are): no allocation and no copy of the rest, where rebuilding the
    /// buffer took four allocations. False, and nothing written, otherwise.
    fn overwrite_same_lengths(&mut self, pairs: &[(Bytes, Bytes)]) -> bool {
        const MAX: usize = 8;
        if pairs.len() > MAX {
            return false;
        }
        let Some(parts) = self.parts() else {
            return false;
        };
        // (part, offset of the value) per pair, all found before any write.
        let mut spots = [(0usize, 0usize); MAX];
        for ((f, v), spot) in pairs.iter().zip(spots.iter_mut()) {
            let found = parts.iter().enumerate().find_map(|(i, part)| {
                let mut it = packed(part);
                let (_, _, pv) = it.find(|(_, pf, _)| *pf == &f[..])?;
                // The value ends where the iterator now stands.
                Some((i, it.pos - pv.len(), pv.len()))
            });
            match found {
                Some((i, at, len)) if len == v.len() => *spot = (i, at),
                _ => return false,
            }
        }
        let Some(parts) = self.parts_mut() else {
            return false;
        };
        // In order, so that a field given twice ends with its last value.
        for ((_, v), &(i, at)) in pairs.iter().zip(spots.iter()) {
            parts[i][at..at + v.len()].copy_from_slice(v);
        }
        true
    }

    fn make_table(&mut self, extra: usize) {
        let mut t = Table::with_capacity(self.len() + extra);
        for (f, v) in self.slices() {
            t.set(f, Str::new(v));
        }
        *self = HashValue::of_table(t);
    }
}

fn put_entry(out: &mut Vec<u8>, f: &[u8], v: &[u8]) {
    put_varint(out, f.len());
    out.extend_from_slice(f);
    put_varint(out, v.len());
    out.extend_from_slice(v);
}

/// The byte span of `field`'s entry in a packed buffer.
fn packed_span(buf: &[u8], field: &[u8]) -> Option<(usize, usize)> {
    let mut it = packed(buf);
    while let Some((start, f, _)) = it.next() {
        if f == field {
            return Some((start, it.pos));
        }
    }
    None
}

/// A packed buffer with `pairs` applied (existing fields keep their place,
/// new ones go at the end), with how many fields are new; None if the
/// result would pass the packed bounds.
fn packed_with(buf: &[u8], pairs: &[(Bytes, Bytes)]) -> Option<(Vec<u8>, usize)> {
    // Later pairs win over earlier ones for the same field, as repeated
    // inserts would.
    let last_for = |i: usize| !pairs[i + 1..].iter().any(|p| p.0 == pairs[i].0);
    let mut new_fields = 0;
    let mut size = buf.len();
    for (i, (f, v)) in pairs.iter().enumerate() {
        if f.len() > PACKED_MAX_ITEM_BYTES || v.len() > PACKED_MAX_ITEM_BYTES {
            return None;
        }
        if !last_for(i) {
            continue;
        }
        let entry = entry_len(f, v);
        match packed_span(buf, f) {
            Some((start, end)) => size = size + entry - (end - start),
            None => {
                new_fields += 1;
                size += entry;
            }
        }
    }
    if size > PACKED_MAX_BYTES {
        return None;
    }
    let value_of = |f: &[u8]| pairs.iter().rev().find(|p| p.0 == f).map(|p| &p.1);
    let mut out = Vec::with_capacity(size);
    // The buffer does not keep its entry count: it is counted here, in the
    // walk the rewrite makes anyway.
    let mut len = 0;
    for (_, f, v) in packed(buf) {
        put_entry(&mut out, f, value_of(f).map_or(v, |n| &n[..]));
        len += 1;
    }
    if len + new_fields > PACKED_MAX_ENTRIES {
        return None;
    }
    // A new field takes its place at its first mention and the value of
    // its last, as a listpack updated pair by pair keeps it (and as the
    // table's ordered map does).
    for (i, (f, v)) in pairs.iter().enumerate() {
        let first = !pairs[..i].iter().any(|p| p.0 == *f);
        if first && packed_span(buf, f).is_none() {
            put_entry(&mut out, f, value_of(f).unwrap_or(v));
        }
    }
    Some((out, new_fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_seeds::seeds;
    use rand::{Rng, SeedableRng};

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// A seeded generator of numbers below `m`, for repeatable random
    /// cases.
    fn xorshift(mut state: u64) -> impl FnMut(u64) -> u64 {
        move |m| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        }
    }

    #[test]
    fn packed_hash_behaves_like_a_map() {
        let mut h = HashValue::default();
        assert!(h.insert(b("a"), b("1")));
        assert!(h.insert(b("b"), b("2")));
        assert!(!h.insert(b("a"), b("3")));
        assert_eq!(h.len(), 2);
        assert!(h.is_packed());
        assert_eq!(h.get(b"a"), Some(b("3")));
        assert_eq!(h.get(b"c"), None);
        let order: Vec<_> = h.keys().collect();
        assert_eq!(order, vec![b("a"), b("b")]);
        assert!(h.swap_remove(b"a"));
        assert!(!h.swap_remove(b"a"));
        assert_eq!(h.len(), 1);
        assert_eq!(h.get_index(0), Some((b("b"), b("2"))));
        assert!(!h.is_empty());
        assert!(h.swap_remove(b"b"));
        assert!(h.is_empty());
    }

    #[test]
    fn repeated_fields_in_one_call_count_once_and_last_wins() {
        let mut h = HashValue::default();
        let n = h.extend_counting(&[(b("f"), b("1")), (b("g"), b("x")), (b("f"), b("2"))]);
        assert_eq!(n, 2);
        assert_eq!(h.get(b"f"), Some(b("2")));
        assert_eq!(h.len(), 2);
        // At its first mention, as Redis's listpack keeps it.
        let order: Vec<_> = h.keys().collect();
        assert_eq!(order, vec![b("f"), b("g")]);
        h.extend_counting(&[(b("h"), b("1")), (b("g"), b("y")), (b("h"), b("2"))]);
        let order: Vec<_> = h.slices().map(|(f, v)| [f, v].concat()).collect();
        assert_eq!(order, vec![b"f2".to_vec(), b"gy".to_vec(), b"h2".to_vec()]);
    }

    #[test]
    fn bounds_turn_it_into_a_table_with_the_same_contents() {
        let mut h = HashValue::default();
        for i in 0..PACKED_MAX_ENTRIES {
            h.insert(b(&format!("f{i}")), b(&i.to_string()));
        }
        assert!(h.is_packed());
        let before = h.clone();
        h.insert(b("one-more"), b("x"));
        assert!(!h.is_packed());
        assert_eq!(h.len(), PACKED_MAX_ENTRIES + 1);
        assert_eq!(h.get(b"f7"), Some(b("7")));
        h.swap_remove(b"one-more");
        assert_eq!(h, before);

        let mut big = HashValue::default();
        big.insert(b("f"), Bytes::from(vec![b'v'; PACKED_MAX_ITEM_BYTES + 1]));
        assert!(!big.is_packed());
    }

    /// A table against a model map with positions as HSCAN and
    /// HRANDFIELD see them: values inline, in a block and shared (4 KiB and
    /// up), fields inline and not, overwrites of the same and another
    /// length, removals moving the last entry into the hole.
    #[test]
    fn a_table_behaves_as_a_map_with_positions() {
        let mut h = HashValue::with_capacity(1000, 100_000);
        assert!(!h.is_packed());
        let mut model: Vec<(Bytes, Bytes)> = Vec::new();
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for step in 0..20_000 {
            let n = next(600);
            let field = if n.is_multiple_of(5) {
                b(&format!("a-field-name-longer-than-inline-{n}"))
            } else {
                b(&format!("f{n}"))
            };
            let pos = model.iter().position(|(f, _)| *f == field);
            if next(4) == 0 {
                assert_eq!(h.swap_remove(&field), pos.is_some(), "step {step}");
                if let Some(i) = pos {
                    model.swap_remove(i);
                }
            } else {
                let len = [0, 8, 15, 16, 100, 4096, 5000][next(7) as usize];
                let value = Bytes::from(vec![b'a' + next(26) as u8; len]);
                assert_eq!(h.insert(field.clone(), value.clone()), pos.is_none());
                match pos {
                    Some(i) => model[i].1 = value,
                    None => model.push((field, value)),
                }
            }
        }
        assert_eq!(h.len(), model.len());
        let all: Vec<(Bytes, Bytes)> = h.iter().collect();
        assert_eq!(all, model);
        for (i, (f, v)) in model.iter().enumerate() {
            assert_eq!(h.get_index(i), Some((f.clone(), v.clone())));
            assert_eq!(h.get_slice(f), Some(&v[..]));
        }
        let pairs: Vec<(&[u8], &[u8])> = model.iter().map(|(f, v)| (&f[..], &v[..])).collect();
        assert_eq!(HashValue::from_slices(&pairs), h);
        let payload: usize = model.iter().map(|(f, v)| f.len() + v.len()).sum();
        assert!(h.heap_bytes() > payload);
    }

    #[test]
    fn long_lengths_round_trip() {
        let mut h = HashValue::default();
        let v = Bytes::from(vec![7u8; 300]);
        h.insert(b("k"), v.clone());
        h.insert(Bytes::from(vec![1u8; 200]), b(""));
        assert_eq!(h.get(b"k"), Some(v));
        assert_eq!(h.get(&[1u8; 200]), Some(b("")));
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
    }

    #[test]
    fn a_record_past_a_size_class_is_split_and_behaves_the_same() {
        assert_eq!(rounded(1080), 1280);
        assert_eq!(rounded(1024), 1024);
        assert_eq!(rounded(100), 112);
        assert_eq!(rounded(20), 24);
        let field = |i: usize| b(&format!("field{i}"));
        let value = |i: usize| Bytes::from(vec![b'a' + i as u8; 100]);
        let mut h = HashValue::default();
        let pairs: Vec<_> = (0..10).map(|i| (field(i), value(i))).collect();
        assert_eq!(h.extend_counting(&pairs), 10);
        assert!(matches!(h.parts(), Some([_, _])));
        assert!(h.is_packed());
        assert!(!h.is_empty());
        assert!(h.heap_bytes() < 1280);
        let order: Vec<_> = h.keys().collect();
        assert_eq!(order, (0..10).map(field).collect::<Vec<_>>());
        for i in 0..10 {
            assert_eq!(h.get(&field(i)), Some(value(i)));
        }
        assert_eq!(h.get_index(9), Some((field(9), value(9))));
        assert!(!h.insert(field(9), b("short")));
        assert_eq!(h.get(b"field9"), Some(b("short")));
        assert!(h.swap_remove(b"field0"));
        assert!(h.swap_remove(b"field9"));
        assert_eq!(h.len(), 8);
        assert_eq!(h.get(b"field5"), Some(value(5)));
        let slices: Vec<_> = h.slices().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(slices.len(), 8);
        let rebuilt = HashValue::from_slices(&h.slices().collect::<Vec<_>>());
        assert_eq!(rebuilt, h);
    }

    /// A restart builds hashes with `from_slices`; they must take the same
    /// blocks as the same hash built by inserts (and a repeated field must
    /// not slip through into a packed buffer).
    #[test]
    fn built_from_slices_is_laid_out_as_built_by_inserts() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let n = 1 + next(20) as usize;
            let pairs: Vec<(Bytes, Bytes)> = (0..n)
                .map(|_| {
                    let range = if next(4) == 0 { 8 } else { 1000 };
                    let f = b(&format!("f{}", next(range)));
                    (f, Bytes::from(vec![b'v'; next(300) as usize]))
                })
                .collect();
            let mut by_inserts = HashValue::default();
            for (f, v) in &pairs {
                by_inserts.insert(f.clone(), v.clone());
            }
            let slices: Vec<(&[u8], &[u8])> = pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
            let built = HashValue::from_slices(&slices);
            assert_eq!(built.len(), by_inserts.len());
            for (f, v) in by_inserts.slices() {
                assert_eq!(built.get(f).as_deref(), Some(v));
            }
            let distinct = by_inserts.len() == n;
            if distinct && built.is_packed() {
                let lens = |h: &HashValue| -> Vec<usize> {
                    h.parts().unwrap().iter().map(|p| p.len()).collect()
                };
                assert_eq!(
                    lens(&built),
                    lens(&{
                        let mut h = HashValue::default();
                        h.extend_counting(&pairs);
                        h
                    })
                );
            }
        }
    }

    #[test]
    fn same_length_updates_write_in_place_in_either_packed_shape() {
        let record = |tag: char| -> Vec<(Bytes, Bytes)> {
            (0..10)
                .map(|i| (b(&format!("field{i}")), b(&tag.to_string().repeat(100))))
                .collect()
        };
        let mut h: HashValue = record('a').into_iter().collect();
        assert!(
            h.parts().is_some_and(|p| p.len() == 2),
            "a YCSB record is split"
        );
        let before = h.heap_bytes();
        let update = [
            (b("field9"), b(&"x".repeat(100))),
            (b("field0"), b(&"y".repeat(100))),
            (b("field0"), b(&"z".repeat(100))),
        ];
        assert!(h.overwrite_same_lengths(&update));
        assert_eq!(h.extend_counting(&update[..1]), 0);
        assert_eq!(h.heap_bytes(), before);
        assert_eq!(h.get(b"field0"), Some(b(&"z".repeat(100))));
        assert_eq!(h.get(b"field9"), Some(b(&"x".repeat(100))));
        assert_eq!(h.get(b"field5"), Some(b(&"a".repeat(100))));
        // Another length, or a new field, rebuilds the buffer instead.
        assert!(!h.overwrite_same_lengths(&[(b("field1"), b("short"))]));
        assert!(!h.overwrite_same_lengths(&[(b("new"), b(&"n".repeat(100)))]));
        assert_eq!(h.extend_counting(&[(b("field1"), b("short"))]), 0);
        assert_eq!(h.get(b"field1"), Some(b("short")));
        let mut small = HashValue::default();
        small.extend_counting(&[(b("f"), b("12")), (b("g"), b("34"))]);
        assert!(small.overwrite_same_lengths(&[(b("g"), b("56"))]));
        let all: Vec<(Bytes, Bytes)> = small.iter().collect();
        assert_eq!(all, vec![(b("f"), b("12")), (b("g"), b("56"))]);
    }

    #[test]
    fn iterating_a_split_record_gives_every_entry_in_order() {
        let pairs: Vec<(Bytes, Bytes)> = (0..10)
            .map(|i| (b(&format!("f{i}")), b(&format!("{i}").repeat(100))))
            .collect();
        let h: HashValue = pairs.iter().cloned().collect();
        assert!(h.parts().is_some_and(|p| p.len() == 2));
        let got: Vec<(Bytes, Bytes)> = h.iter().collect();
        assert_eq!(got, pairs);
        assert_eq!(HashValue::default().iter().count(), 0);
    }

    fn packed_bytes(h: &HashValue) -> Vec<u8> {
        h.packed_parts()
            .expect("packed")
            .flatten()
            .copied()
            .collect()
    }

    /// A checkpoint stores a packed hash as its buffer; loading it back
    /// must give the same hash in the same blocks as the hash that wrote
    /// it, for random shapes on both sides of the split and the bounds.
    #[test]
    fn a_packed_buffer_loads_back_as_the_hash_that_wrote_it() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut shapes = [0usize; 3];
        for _ in 0..2000 {
            let n = 1 + next(40) as usize;
            let pairs: Vec<(Bytes, Bytes)> = (0..n)
                .map(|_| {
                    let f = b(&format!("field{}", next(60)));
                    let len = if next(8) == 0 {
                        200 + next(1000)
                    } else {
                        next(120)
                    };
                    (f, Bytes::from(vec![b'v'; len as usize]))
                })
                .collect();
            let h: HashValue = pairs.into_iter().collect();
            let Some(parts) = h.parts() else {
                assert!(h.packed_parts().is_none());
                shapes[0] += 1;
                continue;
            };
            let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
            shapes[lens.len()] += 1;
            let loaded = HashValue::from_packed(&packed_bytes(&h)).unwrap();
            assert_eq!(loaded, h);
            let loaded_lens: Vec<usize> = loaded.parts().unwrap().iter().map(|p| p.len()).collect();
            assert_eq!(loaded_lens, lens);
            assert_eq!(
                loaded.keys().collect::<Vec<_>>(),
                h.keys().collect::<Vec<_>>()
            );
        }
        assert!(
            shapes.iter().all(|&n| n > 100),
            "tables, packed, split: {shapes:?}"
        );
    }

    /// Well-formed entries outside the packed shape (a repeated field, an
    /// item or a buffer past the bounds) load as `from_slices` builds the
    /// same entries; bytes that are not entries are refused.
    #[test]
    fn a_stored_buffer_outside_the_packed_shape_is_rebuilt_and_a_malformed_one_refused() {
        let mut buf = Vec::new();
        for (f, v) in [("a", "1"), ("b", "2"), ("a", "3")] {
            put_entry(&mut buf, f.as_bytes(), v.as_bytes());
        }
        let h = HashValue::from_packed(&buf).unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h.get(b"a"), Some(b("3")));

        let long = vec![b'x'; PACKED_MAX_ITEM_BYTES + 1];
        let mut buf = Vec::new();
        put_entry(&mut buf, b"f", &long);
        let h = HashValue::from_packed(&buf).unwrap();
        assert!(!h.is_packed());
        assert_eq!(h.get(b"f").as_deref(), Some(&long[..]));

        let mut buf = Vec::new();
        for i in 0..PACKED_MAX_ENTRIES + 1 {
            put_entry(&mut buf, format!("f{i}").as_bytes(), b"v");
        }
        let h = HashValue::from_packed(&buf).unwrap();
        assert!(!h.is_packed());
        assert_eq!(h.len(), PACKED_MAX_ENTRIES + 1);

        assert_eq!(HashValue::from_packed(&[]).unwrap().len(), 0);
        let refused = |buf: &[u8]| HashValue::from_packed(buf).err();
        // A field whose value is missing, a length past the end, a length
        // with a needless zero group, a length of six bytes.
        assert_eq!(refused(b"\x01a"), Some("packed hash cut short"));
        assert_eq!(refused(b"\x01a\x05xy"), Some("packed hash cut short"));
        assert_eq!(
            refused(b"\x81\x00a\x01v"),
            Some("packed hash length not in its shortest form")
        );
        assert_eq!(
            refused(b"\x80\x80\x80\x80\x80\x01"),
            Some("packed hash length longer than five bytes")
        );
        assert_eq!(
            refused(b"\xff\xff\xff\xff\x0f"),
            Some("packed hash cut short")
        );
        // No byte string panics it.
        let mut next = xorshift(0x1234_5678_9abc_def1);
        for _ in 0..20_000 {
            let junk: Vec<u8> = (0..next(40)).map(|_| next(256) as u8).collect();
            if let Ok(h) = HashValue::from_packed(&junk) {
                assert!(h.len() <= junk.len());
            }
        }
    }

    /// A hash as a list of pairs in iteration order, and whether it has
    /// become a table, decided from the documented bounds alone.
    #[derive(Clone, Default)]
    struct Model {
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
        table: bool,
    }

    fn leb128_len(mut n: usize) -> usize {
        let mut len = 1;
        while n >= 0x80 {
            n >>= 7;
            len += 1;
        }
        len
    }

    /// Bytes `pairs` take packed: each length as LEB128, then the bytes.
    fn model_size<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> usize {
        pairs
            .into_iter()
            .map(|(f, v)| leb128_len(f.len()) + f.len() + leb128_len(v.len()) + v.len())
            .sum()
    }

    /// Whether a hash of these pairs (repeats counted) is past the packed
    /// bounds.
    fn past_bounds<'a>(pairs: impl Clone + Iterator<Item = (&'a [u8], &'a [u8])>) -> bool {
        pairs.clone().count() > PACKED_MAX_ENTRIES
            || model_size(pairs.clone()) > PACKED_MAX_BYTES
            || pairs
                .clone()
                .any(|(f, v)| f.len() > PACKED_MAX_ITEM_BYTES || v.len() > PACKED_MAX_ITEM_BYTES)
    }

    impl Model {
        fn position(&self, f: &[u8]) -> Option<usize> {
            self.pairs.iter().position(|(g, _)| g == f)
        }

        /// What `extend_counting` does: pair by pair, a new field appended
        /// and an old one updated where it is; past a bound, a table.
        fn extend(&mut self, pairs: &[(Vec<u8>, Vec<u8>)]) -> usize {
            let mut added = 0;
            for (f, v) in pairs {
                match self.position(f) {
                    Some(i) => self.pairs[i].1 = v.clone(),
                    None => {
                        self.pairs.push((f.clone(), v.clone()));
                        added += 1;
                    }
                }
            }
            let too_long = pairs
                .iter()
                .any(|(f, v)| f.len() > PACKED_MAX_ITEM_BYTES || v.len() > PACKED_MAX_ITEM_BYTES);
            self.table |= too_long || past_bounds(self.pairs.iter().map(|(f, v)| (&f[..], &v[..])));
            added
        }

        /// A packed hash keeps its order; a table moves its last entry.
        fn remove(&mut self, f: &[u8]) -> bool {
            let Some(i) = self.position(f) else {
                return false;
            };
            if self.table {
                self.pairs.swap_remove(i);
            } else {
                self.pairs.remove(i);
            }
            true
        }

        fn get(&self, f: &[u8]) -> Option<&[u8]> {
            self.position(f).map(|i| &self.pairs[i].1[..])
        }
    }

    fn check_hash(h: &HashValue, m: &Model) {
        assert_eq!(h.len(), m.pairs.len());
        assert_eq!(h.is_empty(), m.pairs.is_empty());
        assert_eq!(
            h.is_packed(),
            !m.table,
            "packed with {} entries",
            m.pairs.len()
        );
        let want = m.pairs.iter().map(|(f, v)| (&f[..], &v[..]));
        assert!(h.slices().eq(want.clone()));
        assert!(h
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .eq(m.pairs.iter().cloned()));
        assert!(h.keys().eq(m.pairs.iter().map(|(f, _)| f.clone())));
        assert!(h.values().eq(m.pairs.iter().map(|(_, v)| v.clone())));
        for (i, (f, v)) in m.pairs.iter().enumerate() {
            assert_eq!(
                h.get_index(i),
                Some((Bytes::from(f.clone()), Bytes::from(v.clone())))
            );
            assert_eq!(h.get_slice(f), Some(&v[..]));
        }
        assert_eq!(h.get_index(m.pairs.len()), None);
        assert_eq!(h.packed_parts().is_some(), !m.table);
        assert!(
            h.heap_bytes()
                >= m.pairs
                    .iter()
                    .map(|(f, v)| f.len() + v.len())
                    .sum::<usize>()
        );
    }

    /// Field `n`, `len` bytes long (or as long as its digits need).
    fn sized_field(n: usize, len: usize) -> Vec<u8> {
        let mut f = n.to_string().into_bytes();
        f.push(b':');
        f.resize(len.max(f.len()), b'f');
        f
    }

    /// Which bound a stretch of operations hovers around.
    #[derive(Clone, Copy, Debug)]
    enum Regime {
        /// Many small entries, around `PACKED_MAX_ENTRIES`.
        Entries,
        /// Medium values, the total around `PACKED_MAX_BYTES`.
        Bytes,
        /// Fields and values around `PACKED_MAX_ITEM_BYTES`.
        Items,
        /// Anything, including values past a `Str`'s inline and block sizes.
        Mixed,
    }

    fn field_for(rng: &mut rand::rngs::StdRng, regime: Regime, m: &Model) -> Vec<u8> {
        if !m.pairs.is_empty() && rng.gen_bool(0.4) {
            return m.pairs[rng.gen_range(0..m.pairs.len())].0.clone();
        }
        let (span, len) = match regime {
            Regime::Entries => (180, rng.gen_range(0..8)),
            Regime::Bytes => (60, rng.gen_range(0..24)),
            Regime::Items if rng.gen_bool(0.2) => (8, rng.gen_range(1015..1035)),
            Regime::Items => (20, rng.gen_range(0..30)),
            Regime::Mixed => (
                100,
                [0, 1, 23, 24, 127, 128, 500, 1024, 1025][rng.gen_range(0..9)],
            ),
        };
        sized_field(rng.gen_range(0..span), len)
    }

    fn value_for(rng: &mut rand::rngs::StdRng, regime: Regime) -> Vec<u8> {
        let len = match regime {
            Regime::Entries => rng.gen_range(0..10),
            Regime::Bytes => rng.gen_range(60..400),
            Regime::Items => rng.gen_range(1010..1040),
            Regime::Mixed => {
                [0, 15, 16, 127, 128, 1024, 1025, 4096, 4097, 5000][rng.gen_range(0..10)]
            }
        };
        vec![rng.gen_range(b'a'..=b'z'); len]
    }

    /// Walks hashes across every packed bound and back towards it (the
    /// entry count, the buffer's bytes, an item's length), with every
    /// mutating path: single inserts, batches with repeats, batches that
    /// overwrite in place, removals, rebuilds by `from_slices` and
    /// `from_packed`, clones kept while the original changes. Contents,
    /// order and shape must match the model after every step.
    #[test]
    fn crosses_every_packed_bound_as_a_map() {
        let mut tables = 0;
        for seed in seeds(25) {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut h = HashValue::default();
            let mut m = Model::default();
            let mut kept: Option<(HashValue, Model)> = None;
            for _phase in 0..16 {
                let regime = [Regime::Entries, Regime::Bytes, Regime::Items, Regime::Mixed]
                    [rng.gen_range(0..4)];
                if m.table || rng.gen_bool(0.3) {
                    tables += usize::from(m.table);
                    let n = rng.gen_range(0..200);
                    let bytes = rng.gen_range(0..6000);
                    h = HashValue::with_capacity(n, bytes);
                    m = Model {
                        pairs: Vec::new(),
                        table: n > PACKED_MAX_ENTRIES || bytes > PACKED_MAX_BYTES,
                    };
                    check_hash(&h, &m);
                }
                let target = match regime {
                    Regime::Entries => rng.gen_range(120..=136),
                    Regime::Bytes => rng.gen_range(3800..=4400),
                    Regime::Items | Regime::Mixed => rng.gen_range(0..12),
                };
                for step in 0..300 {
                    let measure = match regime {
                        Regime::Bytes => model_size(m.pairs.iter().map(|(f, v)| (&f[..], &v[..]))),
                        _ => m.pairs.len(),
                    };
                    let grow = (measure < target) == rng.gen_bool(0.8);
                    let f = field_for(&mut rng, regime, &m);
                    match rng.gen_range(0..100) {
                        0..=4 => {
                            // A batch of overwrites, the same lengths or not.
                            let n = rng.gen_range(0..=10).min(m.pairs.len());
                            let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
                                .map(|_| {
                                    let (f, v) = &m.pairs[rng.gen_range(0..m.pairs.len())];
                                    let len = if rng.gen_bool(0.8) {
                                        v.len()
                                    } else {
                                        v.len() + 1
                                    };
                                    (f.clone(), vec![rng.gen_range(b'a'..=b'z'); len])
                                })
                                .collect();
                            let as_bytes: Vec<(Bytes, Bytes)> = batch
                                .iter()
                                .map(|(f, v)| (Bytes::from(f.clone()), Bytes::from(v.clone())))
                                .collect();
                            assert_eq!(h.extend_counting(&as_bytes), m.extend(&batch));
                        }
                        5..=9 => {
                            // New and old fields, some repeated in the batch.
                            let n = rng.gen_range(1..=12);
                            let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                            for _ in 0..n {
                                let f = match batch.last() {
                                    Some((g, _)) if rng.gen_bool(0.2) => g.clone(),
                                    _ => field_for(&mut rng, regime, &m),
                                };
                                batch.push((f, value_for(&mut rng, regime)));
                            }
                            let as_bytes: Vec<(Bytes, Bytes)> = batch
                                .iter()
                                .map(|(f, v)| (Bytes::from(f.clone()), Bytes::from(v.clone())))
                                .collect();
                            assert_eq!(h.extend_counting(&as_bytes), m.extend(&batch));
                        }
                        10 => {
                            // Rebuilt as a restart would, repeats and all.
                            let mut pairs: Vec<(&[u8], &[u8])> =
                                m.pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
                            if !pairs.is_empty() && rng.gen_bool(0.3) {
                                let (f, _) = pairs[rng.gen_range(0..pairs.len())];
                                pairs.push((f, b"again"));
                            }
                            let past = past_bounds(pairs.iter().copied());
                            h = HashValue::from_slices(&pairs);
                            let owned: Vec<(Vec<u8>, Vec<u8>)> = pairs
                                .iter()
                                .map(|(f, v)| (f.to_vec(), v.to_vec()))
                                .collect();
                            m = Model::default();
                            m.extend(&owned);
                            m.table = past;
                        }
                        11 => {
                            let buf: Option<Vec<u8>> =
                                h.packed_parts().map(|p| p.flatten().copied().collect());
                            if let Some(buf) = buf {
                                let lens: Vec<usize> =
                                    h.parts().unwrap().iter().map(|p| p.len()).collect();
                                h = HashValue::from_packed(&buf).unwrap();
                                let back: Vec<usize> =
                                    h.parts().unwrap().iter().map(|p| p.len()).collect();
                                assert_eq!(back, lens);
                            }
                        }
                        12 => {
                            if let Some((old, old_m)) = kept.take() {
                                check_hash(&old, &old_m);
                            }
                            kept = Some((h.clone(), m.clone()));
                        }
                        _ if grow => {
                            let v = value_for(&mut rng, regime);
                            let new = m.extend(&[(f.clone(), v.clone())]) == 1;
                            assert_eq!(h.insert(Bytes::from(f.clone()), Bytes::from(v)), new);
                        }
                        _ => {
                            let f = if m.pairs.is_empty() || rng.gen_bool(0.1) {
                                f.clone()
                            } else {
                                m.pairs[rng.gen_range(0..m.pairs.len())].0.clone()
                            };
                            assert_eq!(h.swap_remove(&f), m.remove(&f));
                        }
                    }
                    assert_eq!(h.len(), m.pairs.len());
                    assert_eq!(
                        h.is_packed(),
                        !m.table,
                        "seed {seed} {regime:?} step {step}"
                    );
                    assert_eq!(h.get_slice(&f), m.get(&f));
                    assert_eq!(h.get(&f).as_deref(), m.get(&f));
                    assert_eq!(h.contains_key(&f), m.get(&f).is_some());
                    if step % 4 == 0 {
                        check_hash(&h, &m);
                    }
                }
                check_hash(&h, &m);
            }
            if let Some((old, old_m)) = kept {
                check_hash(&old, &old_m);
            }
        }
        assert!(tables > 0);
    }
}
