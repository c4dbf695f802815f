//! Durability levels: how long a write may wait, and how much a crash may lose.

use std::fmt;
use std::str::FromStr;

/// When a write is acknowledged relative to the log reaching the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Reply only after the write's record, and every record before it in
    /// commit order, is fsynced. Concurrent writers share fsyncs.
    Full,
    /// Reply at once; the log is flushed within `delayed-flush-ms` or
    /// `delayed-flush-bytes`, whichever comes first. A crash loses at most
    /// that window of acknowledged writes.
    Delayed,
    /// Not logged at all: memory (and checkpoints) only.
    None,
    /// As `Full` in this engine (the record is fsynced before the reply);
    /// the server also holds the reply until enough replicas report the
    /// write durable in their own logs (`min-replicas-to-ack`).
    Replicated,
}

impl Durability {
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Delayed => "delayed",
            Durability::None => "none",
            Durability::Replicated => "replicated",
        }
    }

    /// Higher is stricter; used by the `strictest` durability policy.
    pub fn strictness(self) -> u8 {
        match self {
            Durability::None => 0,
            Durability::Delayed => 1,
            Durability::Full => 2,
            Durability::Replicated => 3,
        }
    }

    /// The local log must be fsynced before the reply (`full`, `replicated`).
    pub fn syncs(self) -> bool {
        matches!(self, Durability::Full | Durability::Replicated)
    }

    pub fn is_logged(self) -> bool {
        self != Durability::None
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "full" => Ok(Durability::Full),
            "delayed" => Ok(Durability::Delayed),
            "none" => Ok(Durability::None),
            "replicated" => Ok(Durability::Replicated),
            other => Err(format!(
                "invalid durability level '{other}' (expected full, delayed, none or replicated)"
            )),
        }
    }
}
