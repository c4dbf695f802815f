//! CONFIG REWRITE: writes the running configuration back into the TOML file
//! the server was started with, keeping the file's comments, layout and the
//! keys it already had, and adding only directives that differ from their
//! defaults (a `redis.conf` goes to `redis_conf::rewrite`, with the same
//! rules). The new file replaces the old one atomically.

use crate::config::{Config, Directive, DIRECTIVES};
use std::path::Path;
use toml_edit::{value, Array, DocumentMut, Item, Table};

/// Older names Redis still accepts; a file that uses one keeps it, and a
/// file that has neither gets the current name.
pub(crate) const ALIASES: &[(&str, &str)] = &[
    ("lua-time-limit", "busy-reply-threshold"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slave-priority", "replica-priority"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("slaveof", "replicaof"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
];

pub fn rewrite(cfg: &Config) -> Result<(), String> {
    if cfg.config_file.is_empty() {
        return Err("The server is running without a config file".into());
    }
    let path = Path::new(&cfg.config_file);
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("Rewriting config file: {e}")),
    };
    if cfg.config_format == crate::config::ConfigFormat::Redis {
        let out = crate::redis_conf::rewrite(&text, cfg);
        return crate::util::replace_file(path, out.as_bytes())
            .map_err(|e| format!("Rewriting config file: {e}"));
    }
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| format!("Rewriting config file: the file is not valid TOML: {e}"))?;
    update(&mut doc, cfg);
    crate::util::replace_file(path, doc.to_string().as_bytes())
        .map_err(|e| format!("Rewriting config file: {e}"))
}

/// What CONFIG REWRITE does with one directive, in either file format.
pub(crate) enum Plan {
    /// Leave the file as it is.
    Keep,
    /// Take the directive out of the file.
    Remove,
    /// Write it with this value.
    Write(String),
}

/// The rules both formats follow; `in_file` says whether the file names a
/// directive. A directive the file has, or whose value differs from its
/// default, is written; an old name only where the file uses it, and the
/// current name not where the file uses only the old one.
pub(crate) fn plan(
    d: &Directive,
    cfg: &Config,
    defaults: &Config,
    in_file: impl Fn(&str) -> bool,
) -> Plan {
    let current = (d.get)(cfg);
    let here = in_file(d.name);
    if d.name == "wal-dir" && cfg.wal_dir.is_empty() && !here {
        // Derived from `dir`: written out, it would stay behind when `dir`
        // changes.
        return Plan::Keep;
    }
    if matches!(d.name, "replicaof" | "slaveof") && current.is_empty() {
        // A primary's file names no primary: after REPLICAOF NO ONE the
        // line goes, as in Redis, so a restart keeps the new role.
        return Plan::Remove;
    }
    let is_old = ALIASES.iter().any(|(old, _)| *old == d.name);
    let old_in_file = ALIASES
        .iter()
        .any(|(old, new)| *new == d.name && in_file(old));
    if !here && (is_old || old_in_file) {
        return Plan::Keep;
    }
    // Compared as the server reports them, so `512mb` equals 536870912.
    if here || current != (d.get)(defaults) {
        return Plan::Write(current);
    }
    Plan::Keep
}

fn update(doc: &mut DocumentMut, cfg: &Config) {
    let defaults = Config::default();
    for d in DIRECTIVES {
        match plan(d, cfg, &defaults, |name| doc.contains_key(name)) {
            Plan::Keep => {}
            Plan::Remove => {
                doc.remove(d.name);
            }
            Plan::Write(current) => {
                set_keeping_decor(doc, d.name, item_for(d.name, d.repeatable, &current))
            }
        }
    }
    let mut levels = Table::new();
    for (db, level) in &cfg.durability_db {
        levels[db.to_string().as_str()] = value(level.to_string());
    }
    if !levels.is_empty() || doc.contains_key("durability-db") {
        doc["durability-db"] = Item::Table(levels);
    }
}

/// Replaces a key's value but keeps the comment and spacing around it.
fn set_keeping_decor(doc: &mut DocumentMut, key: &str, mut item: Item) {
    if let (Some(old), Some(new)) = (doc.get(key).and_then(Item::as_value), item.as_value_mut()) {
        *new.decor_mut() = old.decor().clone();
    }
    doc[key] = item;
}

/// Numbers stay numbers and lists (`bind`, `wal-dir`) stay lists, so the
/// file reads back as it was written.
fn item_for(name: &str, repeatable: bool, text: &str) -> Item {
    if repeatable {
        let mut a = Array::new();
        // `user` values are whole lines; `bind` and `wal-dir` are words.
        let parts: Vec<&str> = if name == "user" {
            text.lines().filter(|l| !l.is_empty()).collect()
        } else {
            text.split_whitespace().collect()
        };
        for part in parts {
            a.push(part);
        }
        return value(a);
    }
    match text.parse::<i64>() {
        Ok(n) => value(n),
        Err(_) => value(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_comments_and_adds_only_changed_directives() {
        let mut cfg = Config::default();
        let text = "# my server\nport = 7000 # the port\nhash-max-ziplist-entries = 64\n";
        cfg.apply_toml(text).unwrap();
        cfg.set("maxclients", "77").unwrap();
        cfg.set("hash-max-listpack-entries", "32").unwrap();
        cfg.set("durability-db-2", "none").unwrap();
        let mut doc: DocumentMut = text.parse().unwrap();
        update(&mut doc, &cfg);
        let out = doc.to_string();
        assert!(
            out.starts_with("# my server\nport = 7000 # the port\n"),
            "{out}"
        );
        assert!(out.contains("maxclients = 77"), "{out}");
        assert!(out.contains("hash-max-ziplist-entries = 32"), "{out}");
        assert!(!out.contains("hash-max-listpack-entries"), "{out}");
        assert!(!out.contains("databases"), "{out}");
        let mut back = Config::default();
        back.apply_toml(&out).unwrap();
        assert_eq!(back.maxclients, 77);
        assert_eq!(back.port, 7000);
        assert_eq!(back.encodings.hash_entries, 32);
        assert_eq!(back.db_durability(2), durakv_engine::Durability::None);
    }
}
