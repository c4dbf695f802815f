//! The data types a key can hold, and the names Redis reports for them.

pub use crate::hash::HashValue;
pub use crate::key::Str;
pub use crate::list::ListValue;
pub use crate::set::SetValue;
use crate::stream::Stream;
use crate::zset::ZSet;
use std::sync::Arc;

pub type HashBuilder = ahash::RandomState;

/// Strings up to this long are `embstr` in Redis.
pub const EMBSTR_MAX_BYTES: usize = 44;

/// The thresholds below which Redis keeps a collection in a compact
/// encoding (its `*-max-listpack-*` and `set-max-intset-entries`
/// directives). `OBJECT ENCODING` reports the name Redis would for the same
/// data and settings, so tools that inspect encodings behave alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingLimits {
    pub hash_entries: usize,
    pub hash_value: usize,
    pub set_intset_entries: usize,
    pub set_entries: usize,
    pub set_value: usize,
    pub zset_entries: usize,
    pub zset_value: usize,
    /// `list-max-listpack-size`: positive, entries; negative, -1..-5 for a
    /// byte budget of 4 KiB..64 KiB.
    pub list_size: i64,
}

impl Default for EncodingLimits {
    /// Redis 7's defaults.
    fn default() -> Self {
        EncodingLimits {
            hash_entries: 512,
            hash_value: 64,
            set_intset_entries: 512,
            set_entries: 128,
            set_value: 64,
            zset_entries: 128,
            zset_value: 64,
            list_size: -2,
        }
    }
}

impl EncodingLimits {
    /// Whether a list of `len` entries totalling `bytes` fits one listpack.
    fn list_fits(&self, len: usize, bytes: usize) -> bool {
        if self.list_size >= 0 {
            return len as i64 <= self.list_size;
        }
        let shift = (-self.list_size - 1).min(4) as u32;
        bytes <= 4096usize << shift
    }

    /// Whether a set this small of integers only would be an intset.
    pub fn intset_fits(&self, s: &SetValue) -> bool {
        s.len() <= self.set_intset_entries && s.iter().all(|m| parse_i64(m).is_some())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Str),
    Hash(HashValue),
    // Behind a pointer: every key's entry is as large as the largest
    // variant, and most keys are strings or small hashes. A value is 16
    // bytes: the other variants' tags are spare values of a string's first
    // byte, and each is a pointer in the second word. Shared (`Arc`), so
    // that a snapshot takes a collection of any size in O(1) under its
    // shard's lock; writes go through `crate::cow`.
    List(Arc<ListValue>),
    Set(Arc<SetValue>),
    ZSet(Arc<ZSet>),
    Stream(Arc<Stream>),
}

/// The type of a value, as `TYPE` and `SCAN ... TYPE` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    Str,
    Hash,
    List,
    Set,
    ZSet,
    Stream,
}

impl ValueType {
    pub fn name(self) -> &'static str {
        match self {
            ValueType::Str => "string",
            ValueType::Hash => "hash",
            ValueType::List => "list",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Stream => "stream",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<ValueType> {
        Some(match name.to_ascii_lowercase().as_slice() {
            b"string" => ValueType::Str,
            b"hash" => ValueType::Hash,
            b"list" => ValueType::List,
            b"set" => ValueType::Set,
            b"zset" => ValueType::ZSet,
            b"stream" => ValueType::Stream,
            _ => return None,
        })
    }
}

impl Value {
    /// Asks the CPU for the first line of what this value points to, for a
    /// pipelined batch's prefetch (`Keyspace::prefetch_batch`): a string's
    /// bytes (its first two lines: most values in a key-value workload are
    /// 100-1000 bytes), a collection's header.
    pub fn prefetch(&self) {
        let at = match self {
            Value::Str(s) => {
                let b = s.as_slice();
                if b.len() > 64 {
                    crate::keymap::prefetch_line(b.as_ptr() as usize + 64);
                }
                b.as_ptr() as usize
            }
            Value::Hash(h) => h.repr_addr(),
            Value::List(a) => Arc::as_ptr(a) as usize,
            Value::Set(a) => Arc::as_ptr(a) as usize,
            Value::ZSet(a) => Arc::as_ptr(a) as usize,
            Value::Stream(a) => Arc::as_ptr(a) as usize,
        };
        crate::keymap::prefetch_line(at);
    }

    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Str(_) => ValueType::Str,
            Value::Hash(_) => ValueType::Hash,
            Value::List(_) => ValueType::List,
            Value::Set(_) => ValueType::Set,
            Value::ZSet(_) => ValueType::ZSet,
            Value::Stream(_) => ValueType::Stream,
        }
    }

    pub fn as_str(&self) -> Option<&Str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_hash(&self) -> Option<&HashValue> {
        match self {
            Value::Hash(h) => Some(h),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&ListValue> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    pub fn as_set(&self) -> Option<&SetValue> {
        match self {
            Value::Set(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_zset(&self) -> Option<&ZSet> {
        match self {
            Value::ZSet(z) => Some(z),
            _ => None,
        }
    }

    pub fn as_stream(&self) -> Option<&Stream> {
        match self {
            Value::Stream(s) => Some(s),
            _ => None,
        }
    }

    /// The list, to write (a copy if a snapshot still shares it:
    /// `crate::cow`); likewise the three below.
    pub(crate) fn list_mut(&mut self) -> Option<&mut ListValue> {
        match self {
            Value::List(l) => Some(crate::cow::make_mut(l)),
            _ => None,
        }
    }

    pub(crate) fn set_mut(&mut self) -> Option<&mut SetValue> {
        match self {
            Value::Set(s) => Some(crate::cow::make_mut(s)),
            _ => None,
        }
    }

    pub(crate) fn zset_mut(&mut self) -> Option<&mut ZSet> {
        match self {
            Value::ZSet(z) => Some(crate::cow::make_mut(z)),
            _ => None,
        }
    }

    pub(crate) fn stream_mut(&mut self) -> Option<&mut Stream> {
        match self {
            Value::Stream(s) => Some(crate::cow::make_mut(s)),
            _ => None,
        }
    }

    pub fn new_hash() -> Value {
        Value::Hash(HashValue::default())
    }

    pub fn new_set() -> Value {
        Value::Set(Arc::default())
    }

    /// The element count of a value whose clone shares its contents
    /// rather than copying them (every list, set, sorted set and stream,
    /// and a hash past the packed shape), and where they live
    /// (`crate::cow`); None for one a clone copies.
    pub fn shared(&self) -> Option<(usize, usize)> {
        use crate::cow::address;
        match self {
            Value::Str(_) => None,
            Value::Hash(h) => h.table().map(|t| (t.len(), address(t))),
            Value::List(l) => Some((l.len(), address(&**l))),
            Value::Set(s) => Some((s.len(), address(&**s))),
            Value::ZSet(z) => Some((z.len(), address(&**z))),
            Value::Stream(s) => Some((
                usize::try_from(s.len()).unwrap_or(usize::MAX),
                address(&**s),
            )),
        }
    }

    /// True for a collection with no elements; such keys must not exist.
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // An empty stream keeps its last ID and groups: it stays.
            Value::Stream(_) => false,
        }
    }

    /// Approximate heap footprint, for INFO memory and `maxmemory` accounting.
    pub fn approx_size_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.heap_bytes(),
            Value::Hash(h) => h.heap_bytes(),
            Value::List(l) => l.heap_bytes(),
            // A member's slot in the map and in its index, and its block
            // when it is too long to be inline.
            Value::Set(s) => s.iter().map(|m| 24 + 7 + m.heap_bytes()).sum(),
            // A slot of the member map (key and score) and of its index,
            // and a B-tree element at typical fill; a long member's block,
            // which the two share.
            Value::ZSet(z) => z.iter().map(|(m, _)| 32 + 7 + 48 + m.heap_bytes()).sum(),
            Value::Stream(s) => s.approx_size_bytes(),
        }
    }

    /// The name `OBJECT ENCODING` reports under `limits`.
    pub fn encoding_name(&self, limits: &EncodingLimits) -> &'static str {
        match self {
            Value::Str(s) => {
                if s.len() <= 20 && parse_i64(s).is_some() {
                    "int"
                } else if s.len() <= EMBSTR_MAX_BYTES {
                    "embstr"
                } else {
                    "raw"
                }
            }
            Value::Hash(h) => {
                let max = h
                    .slices()
                    .map(|(k, v)| k.len().max(v.len()))
                    .max()
                    .unwrap_or(0);
                if h.len() <= limits.hash_entries && max <= limits.hash_value {
                    "listpack"
                } else {
                    "hashtable"
                }
            }
            Value::List(l) => {
                // Each entry costs its bytes plus a small header in a listpack.
                let bytes = l.iter().map(|v| v.len() + 2).sum();
                if limits.list_fits(l.len(), bytes) {
                    "listpack"
                } else {
                    "quicklist"
                }
            }
            Value::Set(s) => {
                let max = s.iter().map(|m| m.len()).max().unwrap_or(0);
                if limits.intset_fits(s) {
                    "intset"
                } else if s.len() <= limits.set_entries && max <= limits.set_value {
                    "listpack"
                } else {
                    "hashtable"
                }
            }
            Value::ZSet(z) => {
                let max = z.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
                if z.len() <= limits.zset_entries && max <= limits.zset_value {
                    "listpack"
                } else {
                    "skiplist"
                }
            }
            Value::Stream(_) => "stream",
        }
    }
}

/// Parses a canonical decimal integer the way Redis's `string2ll` does: no
/// spaces, no `+`, no leading zeros, within i64.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || digits.starts_with('+') || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    if s == "-0" {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"123"), Some(123));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"007"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }

    #[test]
    fn encodings() {
        let l = EncodingLimits::default();
        assert_eq!(Value::Str(Str::new(b"12")).encoding_name(&l), "int");
        assert_eq!(Value::Str(Str::new(b"abc")).encoding_name(&l), "embstr");
        assert_eq!(Value::Str(Str::new(&[b'a'; 45])).encoding_name(&l), "raw");
    }

    #[test]
    fn encodings_follow_the_limits() {
        let mut l = EncodingLimits::default();
        let list = Value::List(std::sync::Arc::new(
            (0..10).map(|i| i.to_string()).collect(),
        ));
        assert_eq!(list.encoding_name(&l), "listpack");
        l.list_size = 4;
        assert_eq!(list.encoding_name(&l), "quicklist");
        let set = Value::Set(std::sync::Arc::new(
            (0..10).map(|i| Bytes::from(i.to_string())).collect(),
        ));
        assert_eq!(set.encoding_name(&l), "intset");
        l.set_intset_entries = 5;
        assert_eq!(set.encoding_name(&l), "listpack");
        l.set_entries = 5;
        assert_eq!(set.encoding_name(&l), "hashtable");
    }
}
