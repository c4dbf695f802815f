//! DUMP / RESTORE payloads in Redis 7.0's layout, so values move between
//! Redis and durakv in both directions: one RDB type byte, the value in
//! that type's RDB serialization, the RDB version (u16 LE) and a
//! CRC-64/REDIS of all of it (u64 LE).
//!
//! [`dump`] writes what Redis 7.0 writes for the value's current encoding
//! (`OBJECT ENCODING` under the configured limits); [`restore`] reads every
//! encoding Redis 7.0 loads, including the ones only older versions wrote.
//! Types are dispatched on the type byte in one place each way
//! ([`encode`], [`decode`]), so a new data type is one arm in each.

mod decode;
mod encode;
pub mod legacy;
pub mod listpack;
pub mod primitives;
mod stream;

use durakv_engine::value::{EncodingLimits, ListValue, Value};

/// Redis 7.0's RDB version: DUMP writes it, RESTORE refuses newer ones.
pub const RDB_VERSION: u16 = 10;

/// RDB object type bytes (Redis's `RDB_TYPE_*`).
pub(crate) mod ty {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// Why RESTORE refused a payload; `message` is Redis's reply.
#[derive(Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// Too short, from a newer RDB version, or the checksum differs.
    VersionOrChecksum,
    /// The trailer is fine but the value inside is not.
    BadData,
}

impl RestoreError {
    pub fn message(&self) -> &'static str {
        match self {
            RestoreError::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            RestoreError::BadData => "ERR Bad data format",
        }
    }
}

/// The DUMP payload of `value`.
pub fn dump(value: &Value, limits: &EncodingLimits) -> Vec<u8> {
    primitives::seal(encode::value(value, limits), RDB_VERSION)
}

/// The value a DUMP payload holds.
pub fn restore(payload: &[u8]) -> Result<Value, RestoreError> {
    let body = primitives::open(payload, RDB_VERSION).ok_or(RestoreError::VersionOrChecksum)?;
    match decode::value(body) {
        Some(v) if !v.is_empty_collection() => Ok(v),
        _ => Err(RestoreError::BadData),
    }
}

/// `value` as an RDB file holds it: its type byte, and its serialization
/// (without the key, which goes between them).
pub(crate) fn rdb_object(value: &Value, limits: &EncodingLimits) -> Option<(u8, Vec<u8>)> {
    let mut body = encode::value(value, limits);
    let t = body.first().copied()?;
    body.remove(0);
    Some((t, body))
}

/// Reads a value of RDB type `t` at `r` (an RDB file's object after its key).
pub(crate) fn read_rdb_object(t: u8, r: &mut primitives::Reader<'_>) -> Option<Value> {
    decode::typed(t, r).filter(|v| !v.is_empty_collection())
}

/// Whether values of RDB type `t` can be read at all.
pub(crate) fn is_known_type(t: u8) -> bool {
    decode::known(t)
}

/// The serialized length of `value` without the trailer (DEBUG OBJECT's
/// `serializedlength`).
pub fn serialized_length(value: &Value, limits: &EncodingLimits) -> usize {
    encode::value(value, limits).len().saturating_sub(1)
}

/// List nodes as Redis 7.0 would build them by appending (DEBUG OBJECT's
/// `ql_nodes`).
pub fn list_nodes(list: &ListValue, limits: &EncodingLimits) -> usize {
    encode::quicklist_nodes(list, limits).len()
}

#[cfg(test)]
mod tests;
