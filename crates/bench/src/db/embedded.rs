//! The `embedded` target: the durakv engine in-process, no network, so a
//! run measures the engine and its write-ahead log alone.
//!
//! Records use the same data model as the `redis` target (a hash per record
//! plus the `_indices` sorted set for scans), so embedded and over-the-wire
//! results differ only by the server and network cost. The engine is reached
//! through the small [`EmbeddedStore`] trait, which names exactly the
//! operations the benchmark needs; `engine_store` implements it with
//! durakv's engine, and tests can substitute another store.

use super::{FieldSel, Schema, Status, TargetInfo, Values};
use crate::keys::java_string_hash;
use crate::props::Props;
use std::path::PathBuf;
use std::sync::Arc;

/// What the benchmark needs from an in-process engine. Each write call is
/// one durable unit at the engine's configured durability level.
pub trait EmbeddedStore: Send + Sync {
    /// `HSET key f v [f v ...]`.
    fn hset(&self, key: &[u8], fields: &[(&[u8], &[u8])]) -> Result<(), String>;
    /// Number of fields of `key` that exist among `fields` (all fields when
    /// `fields` is empty); 0 when the key does not exist.
    fn hget_count(&self, key: &[u8], fields: &[&[u8]]) -> Result<usize, String>;
    /// `ZADD key score member`.
    fn zadd(&self, key: &[u8], score: f64, member: &[u8]) -> Result<(), String>;
    /// `ZRANGEBYSCORE key min +inf LIMIT 0 limit`.
    fn zrange_by_score(&self, key: &[u8], min: f64, limit: usize) -> Result<Vec<Vec<u8>>, String>;
    /// `DEL key`; true if it existed.
    fn del(&self, key: &[u8]) -> Result<bool, String>;
    /// `ZREM key member`; true if it existed.
    fn zrem(&self, key: &[u8], member: &[u8]) -> Result<bool, String>;
    /// The durability level in effect, as the engine names it.
    fn durability(&self) -> String;
    /// Flushes and closes the engine (called once after all clients finish).
    fn close(&self) -> Result<(), String>;
}

/// Opens the engine for a data directory at a durability level. Provided by
/// the code that links the engine in (see [`set_opener`]).
pub type Opener =
    fn(dir: &std::path::Path, durability: &str) -> Result<Arc<dyn EmbeddedStore>, String>;

static OPENER: std::sync::OnceLock<Opener> = std::sync::OnceLock::new();

/// Registers how to open the engine. The `durakv` binary (which depends on
/// the engine) calls this before running `durakv bench ... embedded`.
pub fn set_opener(open: Opener) {
    let _ = OPENER.set(open);
}

const INDEX_KEY: &[u8] = b"_indices";

pub struct EmbeddedTarget {
    store: Arc<dyn EmbeddedStore>,
    schema: Arc<Schema>,
    dir: PathBuf,
}

impl EmbeddedTarget {
    pub fn new(props: &Props, schema: Arc<Schema>) -> Result<Self, String> {
        let dir = PathBuf::from(props.str_or("embedded.dir", "./bench-data"));
        let durability = props.str_or("durability", "full");
        if !matches!(durability.as_str(), "full" | "delayed" | "none") {
            return Err(format!(
                "durability={durability:?} must be full, delayed or none"
            ));
        }
        let open = OPENER
            .get()
            .copied()
            .unwrap_or(super::engine_store::open_engine);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let store = open(&dir, &durability)?;
        Ok(EmbeddedTarget { store, schema, dir })
    }

    /// For tests and alternative engines: a target over any store.
    pub fn with_store(store: Arc<dyn EmbeddedStore>, schema: Arc<Schema>, dir: PathBuf) -> Self {
        EmbeddedTarget { store, schema, dir }
    }

    pub fn prepare(&self) -> Result<TargetInfo, String> {
        Ok(TargetInfo {
            durability: self.store.durability(),
            notes: vec![format!("embedded engine in {}", self.dir.display())],
        })
    }

    pub fn finish(&self) -> Result<(), String> {
        self.store.close()
    }
}

pub struct EmbeddedClient {
    target: Arc<EmbeddedTarget>,
    pub last_error: Option<String>,
}

impl EmbeddedClient {
    pub fn new(target: Arc<EmbeddedTarget>, _index: usize) -> Result<Self, String> {
        Ok(EmbeddedClient {
            target,
            last_error: None,
        })
    }

    fn fail(&mut self, e: String) -> Status {
        self.last_error = Some(e);
        Status::Error
    }

    fn field(&self, i: usize) -> &[u8] {
        self.target
            .schema
            .field_names
            .get(i)
            .map_or(b"field0", |s| s.as_bytes())
    }

    fn read_key(&mut self, key: &[u8], fields: FieldSel) -> Status {
        let res = match fields {
            FieldSel::All => self.target.store.hget_count(key, &[]),
            FieldSel::One(i) => {
                let f = self.field(i).to_vec();
                self.target.store.hget_count(key, &[&f])
            }
        };
        match res {
            Ok(0) => Status::NotFound,
            Ok(_) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub fn read(&mut self, key: &str, fields: FieldSel) -> Status {
        self.read_key(key.as_bytes(), fields)
    }

    pub fn scan(&mut self, start_key: &str, count: usize, fields: FieldSel) -> Status {
        let score = f64::from(java_string_hash(start_key));
        let keys = match self.target.store.zrange_by_score(INDEX_KEY, score, count) {
            Ok(k) => k,
            Err(e) => return self.fail(e),
        };
        let mut status = Status::Ok;
        for k in keys {
            if self.read_key(&k, fields) == Status::Error {
                status = Status::Error;
            }
        }
        status
    }

    fn hset(&mut self, key: &str, values: &Values) -> Result<(), String> {
        let names: Vec<&[u8]> = values.iter().map(|(i, _)| self.field(*i)).collect();
        let pairs: Vec<(&[u8], &[u8])> = names
            .iter()
            .zip(values)
            .map(|(n, (_, v))| (*n, v.as_bytes()))
            .collect();
        self.target.store.hset(key.as_bytes(), &pairs)
    }

    pub fn update(&mut self, key: &str, values: &Values) -> Status {
        match self.hset(key, values) {
            Ok(()) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub fn insert(&mut self, key: &str, values: &Values) -> Status {
        if let Err(e) = self.hset(key, values) {
            return self.fail(e);
        }
        let score = f64::from(java_string_hash(key));
        match self.target.store.zadd(INDEX_KEY, score, key.as_bytes()) {
            Ok(()) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub fn delete(&mut self, key: &str) -> Status {
        let del = self.target.store.del(key.as_bytes());
        let zrem = self.target.store.zrem(INDEX_KEY, key.as_bytes());
        match (del, zrem) {
            (Err(e), _) | (_, Err(e)) => self.fail(e),
            (Ok(false), Ok(false)) => Status::Error,
            _ => Status::Ok,
        }
    }

    pub fn cleanup(&mut self) -> Status {
        Status::Ok
    }
}
