//! YCSB-style properties: the `-P file` / `-p name=value` configuration bag.
//!
//! YCSB configures everything through Java properties, and its workload files
//! are written in that format. Keeping the same names and precedence (files in
//! order, then `-p` overrides) lets existing workload files and command lines
//! be reused unchanged.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Ordered so the JSON report lists the configuration deterministically.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Props {
    map: BTreeMap<String, String>,
}

/// A property that is present but does not parse as the type it needs.
#[derive(Clone, Debug, PartialEq)]
pub struct PropError(pub String);

impl fmt::Display for PropError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PropError {}

impl Props {
    pub fn new() -> Self {
        Props::default()
    }

    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.map.insert(name.into(), value.into());
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.map.iter()
    }

    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.map
    }

    pub fn str_or(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or(default).to_string()
    }

    pub fn i64_or(&self, name: &str, default: i64) -> Result<i64, PropError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| PropError(format!("property {name}={v:?} is not an integer"))),
        }
    }

    pub fn u64_or(&self, name: &str, default: u64) -> Result<u64, PropError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| {
                PropError(format!(
                    "property {name}={v:?} is not a non-negative integer"
                ))
            }),
        }
    }

    pub fn f64_or(&self, name: &str, default: f64) -> Result<f64, PropError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| PropError(format!("property {name}={v:?} is not a number"))),
        }
    }

    /// Java's `Boolean.parseBoolean`: only a case-insensitive "true" is true,
    /// anything else (including typos) is false. Kept for fidelity with YCSB.
    pub fn bool_or(&self, name: &str, default: bool) -> bool {
        match self.get(name) {
            None => default,
            Some(v) => v.trim().eq_ignore_ascii_case("true"),
        }
    }

    /// Merges a properties file; later files override earlier ones, as YCSB
    /// applies multiple `-P` options in order.
    pub fn load_file(&mut self, path: &Path) -> Result<(), PropError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PropError(format!("cannot read {}: {e}", path.display())))?;
        self.load_str(&text);
        Ok(())
    }

    /// Parses the subset of the Java properties syntax workload files use:
    /// `#`/`!` comments, `key=value`, `key: value`, `key value`, and lines
    /// continued with a trailing backslash.
    pub fn load_str(&mut self, text: &str) {
        let mut logical = String::new();
        for raw in text.lines() {
            let line = raw.trim_start();
            if logical.is_empty()
                && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
            {
                continue;
            }
            if let Some(stripped) = line.strip_suffix('\\') {
                if !stripped.ends_with('\\') {
                    logical.push_str(stripped);
                    continue;
                }
            }
            logical.push_str(line);
            self.insert_line(&logical);
            logical.clear();
        }
        if !logical.is_empty() {
            let pending = std::mem::take(&mut logical);
            self.insert_line(&pending);
        }
    }

    fn insert_line(&mut self, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let split = line.find(|c: char| c == '=' || c == ':' || c.is_whitespace());
        let (key, value) = match split {
            Some(i) => {
                let key = &line[..i];
                let mut rest = line[i..].trim_start();
                if rest.starts_with('=') || rest.starts_with(':') {
                    rest = rest[1..].trim_start();
                }
                (key, rest)
            }
            None => (line, ""),
        };
        self.set(key, value.trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_workload_file_syntax() {
        let mut p = Props::new();
        p.load_str(
            "# comment\n! other\nrecordcount=1000\noperationcount : 5\nworkload site.ycsb.workloads.CoreWorkload\n\
             long=a\\\n  b\n  readallfields=true  \n",
        );
        assert_eq!(p.get("recordcount"), Some("1000"));
        assert_eq!(p.get("operationcount"), Some("5"));
        assert_eq!(p.get("workload"), Some("site.ycsb.workloads.CoreWorkload"));
        assert_eq!(p.get("long"), Some("ab"));
        assert!(p.bool_or("readallfields", false));
        assert!(!p.bool_or("missing", false));
        assert_eq!(p.i64_or("recordcount", 0), Ok(1000));
        assert!(p.i64_or("workload", 0).is_err());
    }
}
