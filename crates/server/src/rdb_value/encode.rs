//! Values to RDB, choosing the RDB type Redis 7.0 would for the value's
//! encoding.

use super::primitives::{put_length, put_string};
use super::{legacy, listpack, stream, ty};
use crate::scripting::convert::format_g;
use durakv_engine::stream::NodeLimits;
use durakv_engine::value::{parse_i64, EncodingLimits, HashValue, ListValue, SetValue, Value};
use durakv_engine::zset::ZSet;

/// Type byte and serialization, without the trailer.
pub fn value(v: &Value, limits: &EncodingLimits) -> Vec<u8> {
    let mut out = Vec::new();
    match v {
        Value::Str(s) => {
            out.push(ty::STRING);
            put_string(&mut out, s);
        }
        Value::List(l) => list(&mut out, l, limits),
        Value::Set(s) => set(&mut out, s, limits),
        Value::Hash(h) => hash(&mut out, h, v.encoding_name(limits) == "listpack"),
        Value::ZSet(z) => zset(&mut out, z, v.encoding_name(limits) == "listpack"),
        Value::Stream(s) => {
            out.push(ty::STREAM_LISTPACKS_2);
            // Redis's default node limits: DUMP does not depend on
            // `stream-node-max-*`, which only shape nodes, not content.
            stream::encode(&mut out, s, NodeLimits::default());
        }
    }
    out
}

/// Quicklist node container kinds (Redis's `QUICKLIST_NODE_CONTAINER_*`).
const CONTAINER_PACKED: u64 = 2;
/// Redis's estimate of an entry's listpack overhead when deciding whether
/// it still fits a node.
const NODE_ENTRY_OVERHEAD: usize = 8;
/// A node never grows past this many bytes, whatever the count limit.
const NODE_SAFETY_LIMIT: usize = 8192;

/// How many elements go in each node, as Redis 7.0 fills nodes when the
/// list is built by appending under `list-max-listpack-size`.
pub fn quicklist_nodes(l: &ListValue, limits: &EncodingLimits) -> Vec<usize> {
    let fill = limits.list_size;
    let mut nodes = Vec::new();
    let (mut count, mut bytes) = (0usize, listpack::EMPTY_SIZE);
    for item in l {
        let new_size = bytes + item.len() + NODE_ENTRY_OVERHEAD;
        let fits = if fill < 0 {
            let shift = (-fill - 1).min(4) as u32;
            new_size <= 4096usize << shift
        } else {
            new_size <= NODE_SAFETY_LIMIT && (count as i64) < fill
        };
        if count > 0 && !fits {
            nodes.push(count);
            count = 0;
            bytes = listpack::EMPTY_SIZE;
        }
        count += 1;
        bytes += listpack::entry_size(item);
    }
    if count > 0 {
        nodes.push(count);
    }
    nodes
}

fn list(out: &mut Vec<u8>, l: &ListValue, limits: &EncodingLimits) {
    out.push(ty::LIST_QUICKLIST_2);
    let nodes = quicklist_nodes(l, limits);
    put_length(out, nodes.len() as u64);
    let mut items = l.iter();
    for n in nodes {
        put_length(out, CONTAINER_PACKED);
        let lp = listpack::encode(items.by_ref().take(n));
        put_string(out, &lp);
    }
}

fn set(out: &mut Vec<u8>, s: &SetValue, limits: &EncodingLimits) {
    if limits.intset_fits(s) {
        out.push(ty::SET_INTSET);
        let ints = s.iter().filter_map(|m| parse_i64(m)).collect();
        put_string(out, &legacy::encode_intset(ints));
        return;
    }
    // Redis 7.0 has no listpack sets: anything else is a plain set.
    out.push(ty::SET);
    put_length(out, s.len() as u64);
    for m in s.iter() {
        put_string(out, m);
    }
}

fn hash(out: &mut Vec<u8>, h: &HashValue, compact: bool) {
    if compact {
        out.push(ty::HASH_LISTPACK);
        let lp = listpack::encode(h.slices().flat_map(|(k, v)| [k, v]));
        put_string(out, &lp);
        return;
    }
    out.push(ty::HASH);
    put_length(out, h.len() as u64);
    for (k, v) in h.slices() {
        put_string(out, k);
        put_string(out, v);
    }
}

fn zset(out: &mut Vec<u8>, z: &ZSet, compact: bool) {
    if compact {
        out.push(ty::ZSET_LISTPACK);
        // Scores as Redis's listpack holds them: `%.17g` text, which the
        // listpack then stores as an integer when it is one.
        let scores: Vec<String> = z.iter().map(|(_, s)| format_g(s, 17)).collect();
        let lp = listpack::encode(
            z.iter()
                .zip(&scores)
                .flat_map(|((m, _), s)| [&m[..], s.as_bytes()]),
        );
        put_string(out, &lp);
        return;
    }
    out.push(ty::ZSET_2);
    put_length(out, z.len() as u64);
    // Highest score first, as Redis walks its skiplist from the tail so
    // that loading inserts at the head.
    for (m, s) in z.iter().rev() {
        put_string(out, m);
        out.extend_from_slice(&s.to_le_bytes());
    }
}
