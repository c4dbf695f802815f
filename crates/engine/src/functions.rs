//! The server's function libraries (Redis 7 FUNCTION LOAD and friends), as
//! the engine keeps them: library name → code, both opaque bytes. The
//! server compiles the code; the engine only logs, checkpoints and replays
//! the changes, so libraries survive a restart like keys do.
//!
//! Libraries are not keys: they live beside the shards, behind their own
//! lock, with their own replay position. A transaction takes that lock
//! (after its shard locks) the first time it applies a [`FunctionOp`] and
//! holds it until its LSN is assigned, which is what lets a checkpoint read
//! an exact LSN for them, as it does for a shard (`checkpoint::writer`).

use bytes::Bytes;
use std::collections::BTreeMap;

/// A change to the function libraries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FunctionOp {
    /// Creates library `name`, or replaces it, with `code`.
    Load { name: Bytes, code: Bytes },
    /// Removes library `name` (nothing if it does not exist).
    Delete { name: Bytes },
    /// Removes every library.
    Flush,
}

/// Every library, and the LSNs that describe them.
#[derive(Debug, Default, Clone)]
pub struct FunctionLibraries {
    libs: BTreeMap<Bytes, Bytes>,
    /// Every logged record with an LSN up to this one that changes the
    /// libraries is reflected here (live, in replay, or from a checkpoint).
    pub applied_lsn: u64,
    /// LSN of the last logged change made while the server ran: a reply
    /// that read the libraries depends on it.
    pub write_lsn: u64,
}

impl FunctionLibraries {
    pub fn apply(&mut self, op: &FunctionOp) {
        match op {
            FunctionOp::Load { name, code } => {
                self.libs.insert(name.clone(), code.clone());
            }
            FunctionOp::Delete { name } => {
                self.libs.remove(name);
            }
            FunctionOp::Flush => self.libs.clear(),
        }
    }

    /// (name, code) in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.libs.iter()
    }

    pub fn len(&self) -> usize {
        self.libs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.libs.is_empty()
    }

    /// Replaces every library (loading a checkpoint); `false` if a name
    /// repeats.
    pub fn insert_loaded(&mut self, name: Bytes, code: Bytes) -> bool {
        self.libs.insert(name, code).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_apply_in_order() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let mut f = FunctionLibraries::default();
        f.apply(&FunctionOp::Load {
            name: b("a"),
            code: b("1"),
        });
        f.apply(&FunctionOp::Load {
            name: b("b"),
            code: b("2"),
        });
        f.apply(&FunctionOp::Load {
            name: b("a"),
            code: b("3"),
        });
        f.apply(&FunctionOp::Delete { name: b("b") });
        let v: Vec<_> = f.iter().map(|(n, c)| (n.clone(), c.clone())).collect();
        assert_eq!(v, vec![(b("a"), b("3"))]);
        f.apply(&FunctionOp::Flush);
        assert!(f.is_empty());
    }
}
