//! What COMMAND DOCS says about a command besides its summary, version
//! and arguments: its complexity, doc flags, deprecation and history.
//! Typed client APIs (Jedis's `commandDocs()`) read these fields and give
//! null where one is missing, so each is sent whenever Redis 7.2 sends
//! it, and left out where Redis leaves it out.

use super::command_complexity_table::COMPLEXITY;
use super::command_history_table::HISTORY;
use super::subcommands::{bulk, status};
use durakv_protocol::Frame;

/// Commands Redis 7.2 documents no complexity for (XREAD lost its own
/// in 7.2's doc overhaul), so COMMAND DOCS omits the field as Redis does.
#[cfg(test)]
const NO_COMPLEXITY: &[&str] = &["lolwut", "monitor", "psync", "sync", "xread"];

/// (name, deprecated since, what to use instead), sorted by name.
const DEPRECATED: &[(&str, &str, &str)] = &[
    (
        "brpoplpush",
        "6.2.0",
        "BLMOVE source destination RIGHT LEFT timeout",
    ),
    ("cluster|slaves", "5.0.0", "CLUSTER REPLICAS"),
    ("cluster|slots", "7.0.0", "CLUSTER SHARDS"),
    (
        "georadius",
        "6.2.0",
        "GEOSEARCH or GEOSEARCHSTORE, BYRADIUS",
    ),
    ("georadius_ro", "6.2.0", "GEOSEARCH, BYRADIUS"),
    (
        "georadiusbymember",
        "6.2.0",
        "GEOSEARCH or GEOSEARCHSTORE, FROMMEMBER and BYRADIUS",
    ),
    (
        "georadiusbymember_ro",
        "6.2.0",
        "GEOSEARCH, FROMMEMBER and BYRADIUS",
    ),
    ("getset", "6.2.0", "SET key value GET"),
    (
        "hmset",
        "4.0.0",
        "HSET, which takes several field-value pairs",
    ),
    ("psetex", "2.6.12", "SET key value PX milliseconds"),
    (
        "quit",
        "7.2.0",
        "closing the connection from the client side",
    ),
    ("rpoplpush", "6.2.0", "LMOVE source destination RIGHT LEFT"),
    ("setex", "2.6.12", "SET key value EX seconds"),
    ("setnx", "2.6.12", "SET key value NX"),
    ("slaveof", "5.0.0", "REPLICAOF"),
    ("substr", "2.0.0", "GETRANGE"),
    ("zrangebylex", "6.2.0", "ZRANGE with BYLEX"),
    ("zrangebyscore", "6.2.0", "ZRANGE with BYSCORE"),
    ("zrevrange", "6.2.0", "ZRANGE with REV"),
    ("zrevrangebylex", "6.2.0", "ZRANGE with REV and BYLEX"),
    ("zrevrangebyscore", "6.2.0", "ZRANGE with REV and BYSCORE"),
];

/// Commands Redis marks `syscmd`: meant for servers and tools talking to
/// each other, not for applications. Sorted.
const SYSCMD: &[&str] = &[
    "debug",
    "pfdebug",
    "pfselftest",
    "replconf",
    "restore-asking",
];

fn find<T: Copy>(table: &[T], key: impl Fn(&T) -> &str, name: &str) -> Option<T> {
    let i = table.binary_search_by(|e| key(e).cmp(name)).ok()?;
    Some(table[i])
}

/// The complexity of `name` (`client|kill` for a subcommand).
fn complexity_of(name: &str) -> Option<&'static str> {
    find(COMPLEXITY, |e| e.0, name).map(|(_, c)| c)
}

/// The fields COMMAND DOCS sends between `group` and `arguments`, in
/// Redis's order: complexity, doc_flags, deprecated_since, replaced_by,
/// history.
pub(super) fn doc_fields(name: &str) -> Vec<(Frame, Frame)> {
    let mut m = Vec::new();
    if let Some(c) = complexity_of(name) {
        m.push((bulk("complexity"), bulk(c)));
    }
    let deprecated = find(DEPRECATED, |e| e.0, name);
    let mut flags = Vec::new();
    if deprecated.is_some() {
        flags.push(status("deprecated"));
    }
    if SYSCMD.binary_search(&name).is_ok() {
        flags.push(status("syscmd"));
    }
    if !flags.is_empty() {
        m.push((bulk("doc_flags"), Frame::Set(flags)));
    }
    if let Some((_, since, replaced_by)) = deprecated {
        m.push((bulk("deprecated_since"), bulk(since)));
        m.push((bulk("replaced_by"), bulk(replaced_by)));
    }
    if let Some((_, changes)) = find(HISTORY, |e| e.0, name) {
        // Redis sends a set of [version, change] pairs (an array in RESP2).
        let changes = changes
            .iter()
            .map(|(v, c)| Frame::Array(vec![bulk(v), bulk(c)]))
            .collect();
        m.push((bulk("history"), Frame::Set(changes)));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::super::subcommands::subcommands_of;
    use super::*;

    fn every_name() -> Vec<String> {
        let mut names = Vec::new();
        for c in crate::command::COMMANDS.values() {
            names.push(c.name.to_string());
            for s in subcommands_of(c.name) {
                names.push(format!("{}|{}", c.name, s.name));
            }
        }
        names
    }

    #[test]
    fn the_tables_are_sorted_for_binary_search() {
        assert!(COMPLEXITY.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(HISTORY.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(DEPRECATED.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(SYSCMD.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn every_command_and_subcommand_has_a_complexity_unless_redis_has_none() {
        for name in every_name() {
            let omitted = NO_COMPLEXITY.contains(&name.as_str());
            assert_eq!(complexity_of(&name).is_some(), !omitted, "{name}");
        }
    }

    #[test]
    fn every_entry_names_a_command_the_server_has() {
        let names = every_name();
        let known = |n: &str| names.iter().any(|m| m == n);
        let entries = COMPLEXITY.iter().map(|e| e.0);
        let entries = entries.chain(HISTORY.iter().map(|e| e.0));
        let entries = entries.chain(DEPRECATED.iter().map(|e| e.0));
        for n in entries
            .chain(SYSCMD.iter().copied())
            .chain(NO_COMPLEXITY.iter().copied())
        {
            assert!(known(n), "{n}");
        }
    }

    #[test]
    fn history_is_oldest_first() {
        let key = |v: &str| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap()).collect() };
        for (name, changes) in HISTORY {
            assert!(!changes.is_empty(), "{name}");
            assert!(
                changes.windows(2).all(|w| key(w[0].0) <= key(w[1].0)),
                "{name}"
            );
        }
    }

    #[test]
    fn getset_is_deprecated_in_redis_order() {
        let fields: Vec<Frame> = doc_fields("getset").into_iter().map(|(k, _)| k).collect();
        let want = ["complexity", "doc_flags", "deprecated_since", "replaced_by"];
        assert_eq!(fields, want.map(bulk).to_vec());
    }
}
