//! A compact byte string for keys and sorted-set members: 24 bytes, with
//! strings up to [`INLINE_MAX`] bytes stored inside it and longer ones in an
//! exact-size heap block.
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
    Inline { len: Len, buf: [u8; INLINE_MAX] },
    Heap(Box<[u8]>),
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

    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, buf } => &buf[..*len as usize],
            Repr::Heap(b) => b,
        }
    }

    /// A `Bytes` copy, for replies and logged mutations.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_slice())
    }

    /// Bytes on the heap besides the key itself.
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Heap(b) => b.len(),
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

/// A string value: inline up to [`INLINE_MAX`] bytes (so every integer
/// Redis would encode as `int` costs no heap allocation), an exact-size
/// block up to 4 KiB, and a shared `Bytes` past that. 24 bytes.
#[derive(Clone)]
pub struct Str(StrRepr);

#[derive(Clone)]
enum StrRepr {
    Owned(Key),
    Shared(Box<Bytes>),
}

impl Str {
    pub fn new(b: &[u8]) -> Str {
        Str(StrRepr::Owned(Key::new(b)))
    }

    /// Keeps `b` itself when it is large, copies it otherwise.
    pub fn from_bytes(b: &Bytes) -> Str {
        if b.len() >= SHARED_MIN {
            Str(StrRepr::Shared(Box::new(b.clone())))
        } else {
            Str::new(b)
        }
    }

    /// Like [`Str::from_bytes`] without a copy of a block it can keep.
    pub fn from_vec(v: Vec<u8>) -> Str {
        if v.len() >= SHARED_MIN {
            Str(StrRepr::Shared(Box::new(Bytes::from(v))))
        } else if v.len() <= INLINE_MAX {
            Str::new(&v)
        } else {
            Str(StrRepr::Owned(Key(Repr::Heap(v.into_boxed_slice()))))
        }
    }

    /// Bytes on the heap besides the 24 bytes of the string itself.
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            StrRepr::Owned(k) => k.heap_bytes(),
            // The handle's box, its shared block's header, the data.
            StrRepr::Shared(b) => 32 + 32 + b.len(),
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            StrRepr::Owned(k) => k.as_slice(),
            StrRepr::Shared(b) => b,
        }
    }

    /// The value as `Bytes`, for replies and logged mutations: a share of
    /// a large value, a copy of a small one.
    pub fn to_bytes(&self) -> Bytes {
        match &self.0 {
            StrRepr::Owned(k) => k.to_bytes(),
            StrRepr::Shared(b) => (**b).clone(),
        }
    }

    /// The bytes, to be changed, as a vector (without a copy when this
    /// string owns an exact-size block, or is the only holder of a shared
    /// one); [`Str::from_vec`] puts it back.
    pub fn take_vec(&mut self) -> Vec<u8> {
        match std::mem::take(self).0 {
            StrRepr::Owned(Key(Repr::Heap(b))) => b.into_vec(),
            StrRepr::Owned(k) => k.as_slice().to_vec(),
            StrRepr::Shared(b) => match (*b).try_into_mut() {
                Ok(m) => m.into(),
                Err(shared) => shared.to_vec(),
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
    fn strings_are_24_bytes_inline_exact_or_shared() {
        assert_eq!(std::mem::size_of::<Str>(), 24);
        for n in [0, 20, 23, 24, 128, 4096, 4097, 100_000] {
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
}
