//! The data types a key can hold, and the names Redis reports for them.

use crate::zset::ZSet;
use bytes::Bytes;
use indexmap::{IndexMap, IndexSet};
use std::collections::VecDeque;

pub type HashBuilder = ahash::RandomState;
pub type HashValue = IndexMap<Bytes, Bytes, HashBuilder>;
pub type SetValue = IndexSet<Bytes, HashBuilder>;
pub type ListValue = VecDeque<Bytes>;

/// Thresholds below which Redis uses its compact encodings; we report the
/// same names from `OBJECT ENCODING` so tools that inspect them behave alike.
pub const LISTPACK_MAX_ENTRIES: usize = 128;
pub const LISTPACK_MAX_VALUE_BYTES: usize = 64;
pub const INTSET_MAX_ENTRIES: usize = 512;
pub const EMBSTR_MAX_BYTES: usize = 44;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Bytes),
    Hash(HashValue),
    List(ListValue),
    Set(SetValue),
    ZSet(ZSet),
}

/// The type of a value, as `TYPE` and `SCAN ... TYPE` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    Str,
    Hash,
    List,
    Set,
    ZSet,
}

impl ValueType {
    pub fn name(self) -> &'static str {
        match self {
            ValueType::Str => "string",
            ValueType::Hash => "hash",
            ValueType::List => "list",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<ValueType> {
        Some(match name.to_ascii_lowercase().as_slice() {
            b"string" => ValueType::Str,
            b"hash" => ValueType::Hash,
            b"list" => ValueType::List,
            b"set" => ValueType::Set,
            b"zset" => ValueType::ZSet,
            _ => return None,
        })
    }
}

impl Value {
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Str(_) => ValueType::Str,
            Value::Hash(_) => ValueType::Hash,
            Value::List(_) => ValueType::List,
            Value::Set(_) => ValueType::Set,
            Value::ZSet(_) => ValueType::ZSet,
        }
    }

    pub fn as_str(&self) -> Option<&Bytes> {
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

    pub fn new_hash() -> Value {
        Value::Hash(HashValue::default())
    }

    pub fn new_set() -> Value {
        Value::Set(SetValue::default())
    }

    /// True for a collection with no elements; such keys must not exist.
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }

    /// Approximate heap footprint, for INFO memory and `maxmemory` accounting.
    pub fn approx_size_bytes(&self) -> usize {
        const PER_ELEMENT_OVERHEAD: usize = 48;
        match self {
            Value::Str(s) => s.len() + 16,
            Value::Hash(h) => h
                .iter()
                .map(|(k, v)| k.len() + v.len() + PER_ELEMENT_OVERHEAD)
                .sum(),
            Value::List(l) => l.iter().map(|v| v.len() + 24).sum(),
            Value::Set(s) => s.iter().map(|v| v.len() + PER_ELEMENT_OVERHEAD).sum(),
            Value::ZSet(z) => z.iter().map(|(m, _)| 2 * m.len() + 80).sum(),
        }
    }

    /// The name `OBJECT ENCODING` reports, following Redis 7's thresholds.
    pub fn encoding_name(&self) -> &'static str {
        let small = |n: usize, max_len: usize| {
            n <= LISTPACK_MAX_ENTRIES && max_len <= LISTPACK_MAX_VALUE_BYTES
        };
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
                    .iter()
                    .map(|(k, v)| k.len().max(v.len()))
                    .max()
                    .unwrap_or(0);
                if small(h.len(), max) {
                    "listpack"
                } else {
                    "hashtable"
                }
            }
            Value::List(l) => {
                let max = l.iter().map(|v| v.len()).max().unwrap_or(0);
                if small(l.len(), max) {
                    "listpack"
                } else {
                    "quicklist"
                }
            }
            Value::Set(s) => {
                if s.len() <= INTSET_MAX_ENTRIES && s.iter().all(|m| parse_i64(m).is_some()) {
                    "intset"
                } else if small(s.len(), s.iter().map(|m| m.len()).max().unwrap_or(0)) {
                    "listpack"
                } else {
                    "hashtable"
                }
            }
            Value::ZSet(z) => {
                if small(z.len(), z.iter().map(|(m, _)| m.len()).max().unwrap_or(0)) {
                    "listpack"
                } else {
                    "skiplist"
                }
            }
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
        assert_eq!(Value::Str(Bytes::from_static(b"12")).encoding_name(), "int");
        assert_eq!(
            Value::Str(Bytes::from_static(b"abc")).encoding_name(),
            "embstr"
        );
        assert_eq!(
            Value::Str(Bytes::from(vec![b'a'; 45])).encoding_name(),
            "raw"
        );
    }
}
