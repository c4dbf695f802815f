//! Compact byte strings: [`Key`] for keys and sorted-set members (24 bytes,
//! strings up to [`INLINE_MAX`] bytes stored inside it and longer ones in an
//! exact-size heap block, or one block shared by its clones for a sorted
//! set's members, which its map and its order both hold) and [`Str`] for
//! string values (16 bytes, inline up to [`STR_INLINE_MAX`]).
//!
//! A `Bytes` handle is 32 bytes and its data a heap block of its own (with
//! a reference-count block once it is shared). Most keys are short
//! (`memtier-123456`, YCSB's `user` and up to 19 digits), so storing them
//! inline saves the handle's extra 8 bytes, the block, and a pointer chase
//! on every lookup.

use bytes::Bytes;
use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// Longest string kept inline.
pub const INLINE_MAX: usize = 23;

/// An inline string's length. Its unused values (24..=255) are where the
/// enum below keeps its discriminant, so a key stays 24 bytes with no
/// unsafe code.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[rustfmt::skip]
enum Len {
    L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15,
    L16, L17, L18, L19, L20, L21, L22, L23,
}

#[rustfmt::skip]
const LENS: [Len; INLINE_MAX + 1] = [
    Len::L0, Len::L1, Len::L2, Len::L3, Len::L4, Len::L5, Len::L6, Len::L7,
    Len::L8, Len::L9, Len::L10, Len::L11, Len::L12, Len::L13, Len::L14, Len::L15,
    Len::L16, Len::L17, Len::L18, Len::L19, Len::L20, Len::L21, Len::L22, Len::L23,
];

#[derive(Clone)]
enum Repr {
    Inline {
        len: Len,
        buf: [u8; INLINE_MAX],
    },
    Heap(Box<[u8]>),
    /// Cloned by a reference count: a sorted set keeps each long member in
    /// two structures, and two exact copies cost Redis's 1.35x memory.
    Shared(Arc<[u8]>),
}

#[derive(Clone)]
pub struct Key(Repr);

impl Key {
    pub fn new(b: &[u8]) -> Key {
        match LENS.get(b.len()) {
            Some(&len) => {
                let mut buf = [0; INLINE_MAX];
                buf[..b.len()].copy_from_slice(b);
                Key(Repr::Inline { len, buf })
            }
            None => Key(Repr::Heap(b.into())),
        }
    }

    /// A key whose clones share one block when it is too long to be
    /// inline (a sorted set's member, held by its map and its order).
    pub fn shared(b: &[u8]) -> Key {
        if b.len() <= INLINE_MAX {
            Key::new(b)
        } else {
            Key(Repr::Shared(b.into()))
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, buf } => &buf[..*len as usize],
            Repr::Heap(b) => b,
            Repr::Shared(b) => b,
        }
    }

    /// A `Bytes` copy, for replies and logged mutations.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_slice())
    }

    /// Bytes on the heap besides the key itself (a shared block whole,
    /// with its two counts, however many clones hold it).
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Heap(b) => b.len(),
            Repr::Shared(b) => b.len() + 2 * std::mem::size_of::<usize>(),
        }
    }
}

impl Default for Key {
    fn default() -> Key {
        Key::new(b"")
    }
}

impl From<&[u8]> for Key {
    fn from(b: &[u8]) -> Key {
        Key::new(b)
    }
}

impl From<&Bytes> for Key {
    fn from(b: &Bytes) -> Key {
        Key::new(b)
    }
}

impl From<Bytes> for Key {
    fn from(b: Bytes) -> Key {
        Key::new(&b)
    }
}

impl From<&Key> for Bytes {
    fn from(k: &Key) -> Bytes {
        k.to_bytes()
    }
}

impl Deref for Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Maps keyed by `Key` are looked up by `&[u8]`: equal slices hash alike.
impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Key {}

impl PartialEq<[u8]> for Key {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Bytes> for Key {
    fn eq(&self, other: &Bytes) -> bool {
        self.as_slice() == &other[..]
    }
}

impl PartialEq<Key> for Bytes {
    fn eq(&self, other: &Key) -> bool {
        &self[..] == other.as_slice()
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self.as_slice()), f)
    }
}

/// Strings past this are shared rather than copied: replies and the log
/// then hand them on without a copy, and a SETRANGE on a large bitmap
/// writes in place. Up to it, a copy costs less than the 32-byte shared
/// handle and its reference-count block would for as long as it lives.
pub const SHARED_MIN: usize = 4097;

/// Longest string value kept inside a [`Str`].
pub const STR_INLINE_MAX: usize = 15;

/// What a [`Str`] holds, in its first byte: an inline string's length, or
/// where the bytes are. The unused values (18..=255) are where `Value`
/// keeps its other variants' tags, so a value is 16 bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[rustfmt::skip]
enum Tag {
    L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15,
    /// An exact-size block; its length in `head[3..7]`.
    Heap,
    /// A `Box<Bytes>`.
    Shared,
}

#[rustfmt::skip]
const STR_LENS: [Tag; STR_INLINE_MAX + 1] = [
    Tag::L0, Tag::L1, Tag::L2, Tag::L3, Tag::L4, Tag::L5, Tag::L6, Tag::L7,
    Tag::L8, Tag::L9, Tag::L10, Tag::L11, Tag::L12, Tag::L13, Tag::L14, Tag::L15,
];

/// The second word: inline bytes 7..15, or the pointer.
#[derive(Clone, Copy)]
#[repr(C)]
union Tail {
    bytes: [u8; 8],
    ptr: *mut u8,
}

/// A string value: inline up to [`STR_INLINE_MAX`] bytes (so a counter
/// costs no heap allocation), an exact-size block up to 4 KiB, and a shared
/// `Bytes` past that. 16 bytes, which makes every key's slot 8 bytes
/// smaller than a `Key`-sized value would: the block's length lives beside
/// a thin pointer instead of in a fat one.
#[repr(C)]
pub struct Str {
    tag: Tag,
    head: [u8; 7],
    tail: Tail,
}

// SAFETY: a `Str` owns its block or its `Box<Bytes>` outright (it is never
// aliased by another `Str`), as a `Box` would.
unsafe impl Send for Str {}
unsafe impl Sync for Str {}

impl Str {
    pub fn new(b: &[u8]) -> Str {
        match STR_LENS.get(b.len()) {
            Some(&tag) => {
                let mut buf = [0u8; STR_INLINE_MAX];
                buf[..b.len()].copy_from_slice(b);
                let mut head = [0u8; 7];
                head.copy_from_slice(&buf[..7]);
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&buf[7..]);
                Str {
                    tag,
                    head,
                    tail: Tail { bytes },
                }
            }
            None if b.len() < SHARED_MIN => Str::heap(b.into()),
            None => Str::shared(Bytes::copy_from_slice(b)),
        }
    }

    /// Takes `block` (longer than inline, shorter than shared) as it is.
    fn heap(block: Box<[u8]>) -> Str {
        debug_assert!(block.len() > STR_INLINE_MAX && block.len() < SHARED_MIN);
        let mut head = [0u8; 7];
        head[3..].copy_from_slice(&(block.len() as u32).to_ne_bytes());
        Str {
            tag: Tag::Heap,
            head,
            tail: Tail {
                ptr: Box::into_raw(block) as *mut u8,
            },
        }
    }

    fn shared(b: Bytes) -> Str {
        Str {
            tag: Tag::Shared,
            head: [0; 7],
            tail: Tail {
                ptr: Box::into_raw(Box::new(b)) as *mut u8,
            },
        }
    }

    fn heap_len(&self) -> usize {
        let mut n = [0u8; 4];
        n.copy_from_slice(&self.head[3..]);
        u32::from_ne_bytes(n) as usize
    }

    /// The shared handle of a `Shared` string.
    fn shared_ref(&self) -> &Bytes {
        debug_assert!(self.tag == Tag::Shared);
        // SAFETY: a `Shared` string's pointer came from `Box::into_raw` of
        // a `Box<Bytes>` this string owns.
        unsafe { &*(self.tail.ptr as *const Bytes) }
    }

    /// Keeps `b` itself when it is large, copies it otherwise.
    pub fn from_bytes(b: &Bytes) -> Str {
        if b.len() >= SHARED_MIN {
            Str::shared(b.clone())
        } else {
            Str::new(b)
        }
    }

    /// Like [`Str::from_bytes`] without a copy of a block it can keep.
    pub fn from_vec(v: Vec<u8>) -> Str {
        if v.len() >= SHARED_MIN {
            Str::shared(Bytes::from(v))
        } else if v.len() <= STR_INLINE_MAX {
            Str::new(&v)
        } else {
            Str::heap(v.into_boxed_slice())
        }
    }

    /// Bytes on the heap besides the 16 bytes of the string itself.
    pub fn heap_bytes(&self) -> usize {
        match self.tag {
            Tag::Heap => self.heap_len(),
            // The handle's box, its shared block's header, the data.
            Tag::Shared => 32 + 32 + self.shared_ref().len(),
            _ => 0,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self.tag {
            // SAFETY: the block is `heap_len` bytes, owned by this string.
            Tag::Heap => unsafe { std::slice::from_raw_parts(self.tail.ptr, self.heap_len()) },
            Tag::Shared => self.shared_ref(),
            len => {
                // SAFETY: `head` and `tail` are contiguous in this `repr(C)`
                // struct (offsets 1..8 and 8..16) and every byte of an
                // inline string's is initialized.
                unsafe {
                    let start = (self as *const Str as *const u8).add(1);
                    std::slice::from_raw_parts(start, len as usize)
                }
            }
        }
    }

    /// The value as `Bytes`, for replies and logged mutations: a share of
    /// a large value, a copy of a small one.
    pub fn to_bytes(&self) -> Bytes {
        match self.tag {
            Tag::Shared => self.shared_ref().clone(),
            _ => Bytes::copy_from_slice(self.as_slice()),
        }
    }

    /// Whether this string owns a block of exactly `n` bytes.
    pub fn heap_len_is(&self, n: usize) -> bool {
        self.tag == Tag::Heap && self.heap_len() == n
    }

    /// Writes `b` over this string's bytes when it owns a block of exactly
    /// that length; false, changing nothing, otherwise. Overwriting a value
    /// with one of the same size (a fixed-size record, a benchmark's
    /// values) then costs no allocation, and no free of a block that, with
    /// connections on several threads, another thread allocated.
    pub fn overwrite_same_len(&mut self, b: &[u8]) -> bool {
        if !self.heap_len_is(b.len()) {
            return false;
        }
        // SAFETY: the block is `heap_len` bytes, owned by this string
        // alone (`&mut self`), and `b` is another allocation's bytes.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.tail.ptr, b.len()) };
        true
    }

    /// Gives up the block or the shared handle, leaving an empty string
    /// (an inline string is left as it is).
    fn take_owned(&mut self) -> Owned {
        let tag = self.tag;
        let len = self.heap_len();
        // SAFETY: the pointer of a `Heap` or `Shared` string is read once
        // and `self` is overwritten with an inline string right after, so
        // the allocation has exactly one owner.
        let owned = unsafe {
            match tag {
                Tag::Heap => Owned::Block(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.tail.ptr,
                    len,
                ))),
                Tag::Shared => Owned::Shared(Box::from_raw(self.tail.ptr as *mut Bytes)),
                _ => return Owned::Inline,
            }
        };
        self.tag = Tag::L0;
        self.tail = Tail { bytes: [0; 8] };
        owned
    }

    /// The bytes, to be changed, as a vector (without a copy when this
    /// string owns an exact-size block, or is the only holder of a shared
    /// one); [`Str::from_vec`] puts it back.
    pub fn take_vec(&mut self) -> Vec<u8> {
        match self.take_owned() {
            Owned::Inline => {
                let v = self.as_slice().to_vec();
                *self = Str::default();
                v
            }
            Owned::Block(b) => b.into_vec(),
            Owned::Shared(b) => match (*b).try_into_mut() {
                Ok(m) => m.into(),
                Err(shared) => shared.to_vec(),
            },
        }
    }
}

/// What a [`Str`] owns, as safe types (an inline one: nothing, and it is
/// left as it was).
enum Owned {
    Inline,
    Block(Box<[u8]>),
    Shared(Box<Bytes>),
}

impl Drop for Str {
    fn drop(&mut self) {
        drop(self.take_owned());
    }
}

impl Clone for Str {
    fn clone(&self) -> Str {
        match self.tag {
            Tag::Heap => Str::heap(self.as_slice().into()),
            Tag::Shared => Str::shared(self.shared_ref().clone()),
            _ => Str {
                tag: self.tag,
                head: self.head,
                tail: self.tail,
            },
        }
    }
}

impl Default for Str {
    fn default() -> Str {
        Str::new(b"")
    }
}

impl From<Bytes> for Str {
    fn from(b: Bytes) -> Str {
        Str::from_bytes(&b)
    }
}

impl From<&Bytes> for Str {
    fn from(b: &Bytes) -> Str {
        Str::from_bytes(b)
    }
}

impl From<&[u8]> for Str {
    fn from(b: &[u8]) -> Str {
        Str::new(b)
    }
}

impl From<&Str> for Bytes {
    fn from(s: &Str) -> Bytes {
        s.to_bytes()
    }
}

impl Deref for Str {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Str {}

impl PartialEq<[u8]> for Str {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Bytes> for Str {
    fn eq(&self, other: &Bytes) -> bool {
        self.as_slice() == &other[..]
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self.as_slice()), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_24_bytes_and_round_trips() {
        assert_eq!(std::mem::size_of::<Key>(), 24);
        assert_eq!(std::mem::size_of::<Option<Key>>(), 24);
        for n in [0, 1, 22, 23, 24, 100] {
            let b: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let k = Key::new(&b);
            assert_eq!(&k[..], &b[..]);
            assert_eq!(k.heap_bytes(), if n <= INLINE_MAX { 0 } else { n });
            assert_eq!(k.clone(), k);
        }
        let mut set = std::collections::HashSet::new();
        set.insert(Key::new(b"abc"));
        assert!(set.contains(&b"abc"[..]));
    }

    #[test]
    fn shared_keys_are_inline_when_short_and_one_block_when_long() {
        let short = Key::shared(b"abc");
        assert_eq!((short.heap_bytes(), &short[..]), (0, &b"abc"[..]));
        let long = Key::shared(&[7u8; 36]);
        let copy = long.clone();
        assert_eq!(long.as_slice().as_ptr(), copy.as_slice().as_ptr());
        assert_eq!(copy, Key::new(&[7u8; 36]));
        assert_eq!(long.heap_bytes(), 36 + 16);
        assert_eq!(std::mem::size_of_val(&long), 24);
    }

    #[test]
    fn strings_are_16_bytes_inline_exact_or_shared() {
        assert_eq!(std::mem::size_of::<Str>(), 16);
        for n in [0, 1, 7, 8, 14, 15, 16, 20, 23, 24, 128, 4096, 4097, 100_000] {
            let b = Bytes::from((0..n).map(|i| i as u8).collect::<Vec<u8>>());
            let mut s = Str::from_bytes(&b);
            assert_eq!(&s[..], &b[..]);
            assert_eq!(s.to_bytes(), b);
            if n >= SHARED_MIN {
                assert_eq!(s.to_bytes().as_ptr(), b.as_ptr(), "shared, not copied");
            }
            let mut v = s.take_vec();
            v.push(1);
            s = Str::from_vec(v);
            assert_eq!(s.len(), n + 1);
        }
    }

    /// Every shape through clone, take, overwrite and drop: the unsafe
    /// parts of `Str` (run under Miri to check them).
    #[test]
    fn every_shape_clones_takes_and_drops_once() {
        for n in [0, 1, 6, 7, 8, 15, 16, 17, 4096, 4097, 5000] {
            let b: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            let shared = Bytes::from(b.clone());
            for s in [
                Str::new(&b),
                Str::from_bytes(&shared),
                Str::from_vec(b.clone()),
            ] {
                let c = s.clone();
                assert_eq!(c, s);
                assert_eq!(&c[..], &b[..]);
                assert_eq!(c.to_bytes(), b);
                let mut t = c.clone();
                assert_eq!(t.take_vec(), b);
                assert!(t.is_empty(), "taking leaves an empty string");
                t = Str::from_vec(b.clone());
                assert_eq!(t, s);
                let heap = if n <= STR_INLINE_MAX {
                    0
                } else if n < SHARED_MIN {
                    n
                } else {
                    64 + n
                };
                assert_eq!(s.heap_bytes(), heap);
                drop(c);
                assert_eq!(&s[..], &b[..], "a clone's drop leaves the original");
            }
        }
        assert_eq!(std::mem::size_of::<Option<Str>>(), 16);
    }
}
