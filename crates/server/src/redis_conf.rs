//! Redis's configuration file format (`redis.conf`): one directive per
//! line, its arguments split as Redis splits them (quotes, `\xHH`
//! escapes), `#` comments, and `include`. A server started on an
//! operator's existing `redis.conf` reads it here, and CONFIG REWRITE
//! writes it back in the same format (`rewrite`).

use crate::config::{find, Config, DIRECTIVES};
use crate::config_rewrite::{plan, Plan};
use std::path::Path;

/// Directives whose repeated lines add up instead of the last one winning:
/// one ACL user or log directory per line, and Redis's `save` pairs.
const ACCUMULATE: &[&str] = &["user", "wal-dir", "save"];

/// Directives that take several arguments on one line; the others take
/// exactly one, as in Redis.
const MULTI_ARG: &[&str] = &[
    "bind",
    "save",
    "user",
    "wal-dir",
    "client-output-buffer-limit",
    "oom-score-adj-values",
    "latency-tracking-info-percentiles",
    "replicaof",
    "slaveof",
];

/// Names Redis 7.0 still reads from a file and ignores.
const DEPRECATED: &[&str] = &[
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
];

/// How deeply `include` may nest: a file that includes itself fails here
/// rather than overflowing the stack.
const MAX_INCLUDE_DEPTH: usize = 16;

/// Splits one line into arguments as Redis's `sdssplitargs` does (the
/// protocol's inline-command splitter). None when the quotes do not
/// balance.
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let words = durakv_protocol::request::split_args(line.as_bytes())?;
    Some(
        words
            .into_iter()
            .map(|w| String::from_utf8_lossy(&w).into_owned())
            .collect(),
    )
}

/// Quotes one argument so that `split_args` reads it back unchanged:
/// bare when it is plain, else in double quotes with escapes.
pub fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|c| c.is_ascii_graphic() && !matches!(c, b'"' | b'\'' | b'\\'));
    if plain {
        return arg.to_string();
    }
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('"');
    for c in arg.bytes() {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            8 => out.push_str("\\b"),
            7 => out.push_str("\\a"),
            c if c == b' ' || c.is_ascii_graphic() => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
    out
}

/// Why a file could not be loaded: where, and Redis's reason.
#[derive(Debug)]
pub struct LoadError {
    pub file: String,
    pub line: usize,
    pub text: String,
    pub reason: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            return write!(f, "{}: {}", self.file, self.reason);
        }
        write!(
            f,
            "FATAL CONFIG FILE ERROR: reading {}, at line {}\n>>> '{}'\n{}",
            self.file, self.line, self.text, self.reason
        )
    }
}

/// One directive line, after `include`s were followed.
struct Line {
    file: String,
    number: usize,
    text: String,
    args: Vec<String>,
}

impl Line {
    /// Why this line could not be applied.
    fn error(&self, reason: String) -> LoadError {
        LoadError {
            file: self.file.clone(),
            line: self.number,
            text: self.text.clone(),
            reason,
        }
    }
}

/// Reads `path` and the files it includes, in order.
fn read_lines(path: &Path, depth: usize, out: &mut Vec<Line>) -> Result<(), LoadError> {
    let file = path.display().to_string();
    let fail = |line: usize, text: &str, reason: String| LoadError {
        file: file.clone(),
        line,
        text: text.to_string(),
        reason,
    };
    if depth > MAX_INCLUDE_DEPTH {
        return Err(fail(0, "", "includes nest too deeply".into()));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| fail(0, "", format!("cannot read the file: {e}")))?;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut args = split_args(trimmed).ok_or_else(|| {
            fail(
                i + 1,
                trimmed,
                "Unbalanced quotes in configuration line".into(),
            )
        })?;
        if args.is_empty() {
            continue;
        }
        args[0].make_ascii_lowercase();
        if args[0] == "include" {
            if args.len() != 2 {
                return Err(fail(i + 1, trimmed, "wrong number of arguments".into()));
            }
            for included in expand_include(&args[1]).map_err(|e| fail(i + 1, trimmed, e))? {
                read_lines(&included, depth + 1, out)?;
            }
            continue;
        }
        out.push(Line {
            file: file.clone(),
            number: i + 1,
            text: trimmed.to_string(),
            args,
        });
    }
    Ok(())
}

/// The files an `include` names: a path, or a pattern (`*`, `?`, `[...]`)
/// in its last component, matched in name order. A pattern may match
/// nothing; a plain path must exist.
fn expand_include(pattern: &str) -> Result<Vec<std::path::PathBuf>, String> {
    let path = Path::new(pattern);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let Some(name) = name.filter(|n| n.contains(['*', '?', '['])) else {
        return Ok(vec![path.to_path_buf()]);
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let entries =
        std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut found: Vec<_> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            crate::glob::glob_match(name.as_bytes(), e.file_name().as_encoded_bytes(), false)
        })
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    Ok(found)
}

impl Config {
    /// Loads a `redis.conf`-style file onto this configuration, with
    /// Redis's rules: the last line of a directive wins, except `user`,
    /// `save` and `wal-dir`, whose lines add up; directives Redis knows
    /// and durakv has no use for are accepted (see `config.rs`), and
    /// `loadmodule` and `sentinel` are refused, since
    /// ignoring them would leave the server unlike what the file asks for.
    pub fn apply_redis_conf(&mut self, path: &Path) -> Result<(), LoadError> {
        let mut lines = Vec::new();
        read_lines(path, 0, &mut lines)?;
        // `databases` first: per-database directives are checked against it.
        lines.sort_by_key(|l| l.args[0] != "databases");
        let mut accumulated: Vec<(&'static str, Vec<String>, usize)> = Vec::new();
        for (idx, line) in lines.iter().enumerate() {
            let fail = |reason: String| line.error(reason);
            let name = line.args[0].as_str();
            let values = &line.args[1..];
            if DEPRECATED.contains(&name) {
                continue;
            }
            if let Some(why) = refused(name) {
                return Err(fail(why.into()));
            }
            if name == "rename-command" {
                if values.len() != 2 {
                    return Err(fail("wrong number of arguments".into()));
                }
                self.rename_command(&values[0], &values[1]).map_err(fail)?;
                continue;
            }
            let per_db = name.starts_with("durability-db-");
            let Some(d) = find(name).filter(|_| !per_db) else {
                if per_db && values.len() == 1 {
                    self.set(name, &values[0]).map_err(fail)?;
                    continue;
                }
                return Err(fail("Bad directive or wrong number of arguments".into()));
            };
            let multi = MULTI_ARG.contains(&d.name);
            if values.is_empty() || (!multi && values.len() != 1) {
                return Err(fail("wrong number of arguments".into()));
            }
            let value = values.join(" ");
            if let Some(&name) = ACCUMULATE.iter().find(|n| **n == d.name) {
                match accumulated.iter_mut().find(|(n, _, _)| *n == name) {
                    Some((_, all, _)) => all.push(value),
                    None => accumulated.push((name, vec![value], idx)),
                }
                continue;
            }
            self.set(d.name, &value).map_err(fail)?;
        }
        for (name, values, idx) in accumulated {
            let joined = if name == "save" {
                values.join(" ")
            } else {
                values.join("\n")
            };
            self.set(name, &joined)
                .map_err(|reason| lines[idx].error(reason))?;
        }
        Ok(())
    }

    /// One `rename-command` (a line of the file, a flag or a TOML pair),
    /// checked as Redis checks it; `command::install_renames` applies
    /// them all at start.
    pub fn rename_command(&mut self, old: &str, new: &str) -> Result<(), String> {
        crate::command::check_rename(&self.rename_commands, old, new)?;
        self.rename_commands
            .push((old.to_string(), new.to_string()));
        Ok(())
    }
}

/// Redis directives that durakv cannot honour and must not ignore.
fn refused(name: &str) -> Option<&'static str> {
    Some(match name {
        "loadmodule" => "durakv does not load Redis modules",
        "sentinel" => {
            "sentinel directive while not in sentinel mode: run redis-sentinel for Sentinel"
        }
        _ => return None,
    })
}

/// The file as CONFIG REWRITE leaves it: comments, blank lines and lines
/// it does not own stay as they are; each directive the file has, or
/// whose value differs from the default, is written where it first
/// appeared (its other lines go), and the rest are appended after a
/// `# Generated by CONFIG REWRITE` line, as Redis does.
pub fn rewrite(text: &str, cfg: &Config) -> String {
    let mut lines: Vec<Option<String>> = text.lines().map(|l| Some(l.to_string())).collect();
    let name_of = |line: &str| -> Option<String> {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return None;
        }
        split_args(t)?
            .into_iter()
            .next()
            .map(|n| n.to_ascii_lowercase())
    };
    let names: Vec<Option<String>> = lines.iter().map(|l| name_of(l.as_deref()?)).collect();
    let at = |name: &str| -> Vec<usize> {
        (0..names.len())
            .filter(|&i| names[i].as_deref() == Some(name))
            .collect()
    };
    let defaults = Config::default();
    let mut appended: Vec<String> = Vec::new();
    let mut place = |lines: &mut Vec<Option<String>>, name: &str, new: Vec<String>| {
        let found = at(name);
        match found.first() {
            Some(&first) => {
                for &i in &found {
                    lines[i] = None;
                }
                if !new.is_empty() {
                    lines[first] = Some(new.join("\n"));
                }
            }
            None => appended.extend(new),
        }
    };
    for d in DIRECTIVES {
        match plan(d, cfg, &defaults, |name| !at(name).is_empty()) {
            Plan::Keep => {}
            Plan::Remove => place(&mut lines, d.name, Vec::new()),
            Plan::Write(value) => place(&mut lines, d.name, directive_lines(d.name, &value)),
        }
    }
    for db in 0..cfg.databases {
        let name = format!("durability-db-{db}");
        let overridden = cfg.durability_db.get(&db);
        if let Some(level) = overridden {
            place(&mut lines, &name, vec![format!("{name} {level}")]);
        } else {
            place(&mut lines, &name, Vec::new());
        }
    }
    let mut out: Vec<String> = lines.into_iter().flatten().collect();
    if !appended.is_empty() {
        const MARK: &str = "# Generated by CONFIG REWRITE";
        if !out.iter().any(|l| l == MARK) {
            out.push(MARK.to_string());
        }
        out.extend(appended);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// A directive's value as the lines that set it.
fn directive_lines(name: &str, value: &str) -> Vec<String> {
    if name == "user" || name == "wal-dir" {
        let sep: &[char] = if name == "user" {
            &['\n']
        } else {
            &[' ', '\n']
        };
        return value
            .split(sep)
            .filter(|v| !v.is_empty())
            .map(|v| format!("{name} {v}"))
            .collect();
    }
    if name == "client-output-buffer-limit" {
        let words: Vec<&str> = value.split_whitespace().collect();
        return words
            .chunks(4)
            .map(|c| format!("{name} {}", c.join(" ")))
            .collect();
    }
    if MULTI_ARG.contains(&name) {
        if value.trim().is_empty() {
            return vec![format!("{name} \"\"")];
        }
        return vec![format!("{name} {value}")];
    }
    vec![format!("{name} {}", quote(value))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_redis_does() {
        assert_eq!(split_args("  port   6379 ").unwrap(), ["port", "6379"]);
        assert_eq!(
            split_args(r#"proc-title-template "{title} {listen-addr}""#).unwrap(),
            ["proc-title-template", "{title} {listen-addr}"]
        );
        assert_eq!(
            split_args(r#"a "x\x41\n\"y" 'it\'s'"#).unwrap(),
            ["a", "xA\n\"y", "it's"]
        );
        assert_eq!(
            split_args(r#"notify-keyspace-events """#).unwrap(),
            ["notify-keyspace-events", ""]
        );
        assert_eq!(split_args(r#"a foo"bar""#).unwrap(), ["a", "foobar"]);
        assert!(split_args(r#"a "open"#).is_none());
        assert!(split_args(r#"a "x"y"#).is_none());
        assert!(split_args("a 'x").is_none());
    }

    #[test]
    fn quote_reads_back() {
        for s in [
            "plain",
            "",
            "two words",
            "q\"uo'te",
            "back\\slash",
            "nl\n\x01",
            "{a} {b}",
        ] {
            let line = format!("k {}", quote(s));
            assert_eq!(split_args(&line).unwrap(), ["k", s], "{line}");
        }
        assert_eq!(quote("6379"), "6379");
    }

    fn load(text: &str) -> Result<Config, LoadError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redis.conf");
        std::fs::write(&path, text).unwrap();
        let mut c = Config::default();
        c.apply_redis_conf(&path).map(|_| c)
    }

    #[test]
    fn loads_redis_directives() {
        let c = load(
            "# comment\n\nbind 127.0.0.1 -::1\nport 7000\nPort 7001\nmaxmemory 2mb\n\
             save 900 1\nsave 300 10\nclient-output-buffer-limit pubsub 32mb 8mb 60\n\
             tcp-backlog 128\nappendfsync always\nnotify-keyspace-events \"\"\n\
             user alice on >secret ~* +@all\nuser bob off\nlist-max-ziplist-entries 512\n\
             durability-db-1 none\ndatabases 4\n",
        )
        .unwrap();
        assert_eq!(c.get("port").unwrap(), "7001");
        assert_eq!(c.get("bind").unwrap(), "127.0.0.1 -::1");
        assert_eq!(c.get("maxmemory").unwrap(), "2097152");
        assert_eq!(c.get("save").unwrap(), "900 1 300 10");
        assert_eq!(c.get("tcp-backlog").unwrap(), "128");
        assert_eq!(c.get("appendfsync").unwrap(), "always");
        assert_eq!(c.get("durability-db-1").unwrap(), "none");
        assert_eq!(c.databases, 4);
        assert_eq!(c.users.len(), 2);
        assert!(c
            .get("client-output-buffer-limit")
            .unwrap()
            .contains("pubsub 33554432 8388608 60"));
    }

    #[test]
    fn refuses_what_it_cannot_honour_with_the_line() {
        let e = load("port 7000\nnosuch thing\n").unwrap_err();
        assert_eq!((e.line, e.text.as_str()), (2, "nosuch thing"));
        assert_eq!(e.reason, "Bad directive or wrong number of arguments");
        let e = load("port 1 2\n").unwrap_err();
        assert_eq!(e.reason, "wrong number of arguments");
        let e = load("port \"7000\n").unwrap_err();
        assert_eq!(e.reason, "Unbalanced quotes in configuration line");
        let e = load("maxmemory lots\n").unwrap_err();
        assert_eq!(e.line, 1);
        for line in [
            "loadmodule /x.so",
            "sentinel monitor m 1 2 3",
            "rename-command nosuch x",
            "rename-command flushall get",
            "rename-command flushall a\nrename-command flushdb a",
            "rename-command flushall",
        ] {
            assert!(load(line).is_err(), "{line}");
        }
    }

    #[test]
    fn collects_renames() {
        let c = load("rename-command FLUSHALL \"\"\nrename-command config cfg-7f3a\n").unwrap();
        assert_eq!(
            c.rename_commands,
            [
                ("FLUSHALL".into(), "".into()),
                ("config".into(), "cfg-7f3a".into())
            ]
        );
    }

    #[test]
    fn toml_takes_renames_as_pairs() {
        let mut c = Config::default();
        c.apply_toml("rename-command = [[\"FLUSHALL\", \"\"], [\"keys\", \"k2\"]]\n")
            .unwrap();
        assert_eq!(c.rename_commands.len(), 2);
        assert!(Config::default()
            .apply_toml("rename-command = [\"FLUSHALL\"]\n")
            .is_err());
    }

    #[test]
    fn follows_includes_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("conf.d")).unwrap();
        std::fs::write(d.join("conf.d/b.conf"), "maxclients 20\n").unwrap();
        std::fs::write(d.join("conf.d/a.conf"), "maxclients 10\nport 7002\n").unwrap();
        std::fs::write(d.join("conf.d/skip.txt"), "nonsense\n").unwrap();
        let main = d.join("redis.conf");
        std::fs::write(
            &main,
            format!("port 7000\ninclude {}/conf.d/*.conf\n", d.display()),
        )
        .unwrap();
        let mut c = Config::default();
        c.apply_redis_conf(&main).unwrap();
        assert_eq!(c.get("maxclients").unwrap(), "20");
        assert_eq!(c.get("port").unwrap(), "7002");
        std::fs::write(&main, format!("include {}\n", main.display())).unwrap();
        assert!(Config::default().apply_redis_conf(&main).is_err());
    }

    #[test]
    fn rewrite_keeps_the_file_and_reads_back() {
        let text = "# my server\nport 7000\n\n# memory\nmaxmemory 1mb\nmaxmemory 3mb\nhash-max-ziplist-entries 64\nrename-me-not yes\n";
        let mut cfg = Config::default();
        cfg.set("dir", "/srv/durakv").unwrap();
        cfg.set("port", "7000").unwrap();
        cfg.set("maxmemory", "5mb").unwrap();
        cfg.set("hash-max-ziplist-entries", "64").unwrap();
        cfg.set("notify-keyspace-events", "KEA").unwrap();
        cfg.set("proc-title-template", "{title} x").unwrap();
        cfg.set("durability-db-2", "none").unwrap();
        let out = rewrite(text, &cfg);
        let expected_head = "# my server\nport 7000\n\n# memory\nmaxmemory 5242880\nhash-max-ziplist-entries 64\nrename-me-not yes\n# Generated by CONFIG REWRITE\n";
        assert!(out.starts_with(expected_head), "{out}");
        assert!(!out.contains("hash-max-listpack-entries"), "{out}");
        // The log directory follows `dir` unless it was set.
        assert!(!out.contains("wal-dir"), "{out}");
        assert!(
            out.contains("\nproc-title-template \"{title} x\"\n"),
            "{out}"
        );
        assert!(out.contains("\ndurability-db-2 none\n"), "{out}");
        // Rewriting again changes nothing.
        assert_eq!(rewrite(&out, &cfg), out);
        let loaded = load(&out.replace("rename-me-not yes\n", "")).unwrap();
        for name in [
            "port",
            "maxmemory",
            "notify-keyspace-events",
            "proc-title-template",
        ] {
            assert_eq!(loaded.get(name), cfg.get(name), "{name}");
        }
        assert_eq!(loaded.get("durability-db-2").unwrap(), "none");
    }
}
