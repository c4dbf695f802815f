//! The storage systems a YCSB run can drive, behind YCSB's five-operation
//! DB interface (read, scan, update, insert, delete).
//!
//! Each target maps a YCSB record (a key with `fieldcount` named fields) onto
//! its own data model the way YCSB's binding for it does, so results are
//! comparable with published YCSB numbers. Dispatch is a plain enum rather
//! than trait objects: the per-operation path stays monomorphic and the
//! async methods need no boxing.

pub mod embedded;
pub mod engine_store;
pub mod postgres;
pub mod redis;
pub mod sqlite;

use crate::props::Props;
use std::sync::Arc;

/// The outcome of one operation, named as YCSB's `Status` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Ok,
    Error,
    NotFound,
    /// Accepted into a client-side batch that commits later (`db.batchsize`).
    BatchedOk,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Ok,
        Status::Error,
        Status::NotFound,
        Status::BatchedOk,
    ];

    pub fn is_ok(self) -> bool {
        matches!(self, Status::Ok | Status::BatchedOk)
    }

    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Error => "ERROR",
            Status::NotFound => "NOT_FOUND",
            Status::BatchedOk => "BATCHED_OK",
        }
    }

    pub fn index(self) -> usize {
        match self {
            Status::Ok => 0,
            Status::Error => 1,
            Status::NotFound => 2,
            Status::BatchedOk => 3,
        }
    }
}

/// Which fields a read or scan returns (YCSB passes `null` for all fields or
/// a one-element set when `readallfields=false`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldSel {
    All,
    One(usize),
}

/// Field index and value; names come from [`Schema::field_names`].
pub type Values = Vec<(usize, String)>;

/// Table and field names shared by all connections.
#[derive(Clone, Debug)]
pub struct Schema {
    pub table: String,
    pub field_names: Vec<String>,
}

impl Schema {
    pub fn from_props(props: &Props) -> Result<Schema, String> {
        let table = props.str_or("table", "usertable");
        let count = props.u64_or("fieldcount", 10).map_err(|e| e.to_string())?;
        let prefix = props.str_or("fieldnameprefix", "field");
        Ok(Schema {
            table,
            field_names: (0..count).map(|i| format!("{prefix}{i}")).collect(),
        })
    }
}

/// How a target's clients must be scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threading {
    /// Non-blocking clients: many connections share a few runtime threads.
    Async,
    /// Blocking clients (SQLite, the embedded engine): one OS thread each.
    ThreadPerClient,
}

/// What a target reports about itself before the run starts.
#[derive(Clone, Debug, Default)]
pub struct TargetInfo {
    /// Durability level as the system reports it ("unknown" if it cannot tell).
    pub durability: String,
    pub notes: Vec<String>,
}

/// A configured target, shared by all connections of a run.
pub enum DbTarget {
    Redis(Arc<redis::RedisTarget>),
    Postgres(Arc<postgres::PgTarget>),
    Sqlite(Arc<sqlite::SqliteTarget>),
    Embedded(Arc<embedded::EmbeddedTarget>),
}

/// Target names accepted on the command line.
pub const TARGET_NAMES: &[&str] = &["redis", "embedded", "postgres", "sqlite"];

impl DbTarget {
    pub fn new(name: &str, props: &Props, schema: Arc<Schema>) -> Result<DbTarget, String> {
        match name {
            "redis" => Ok(DbTarget::Redis(Arc::new(redis::RedisTarget::new(
                props, schema,
            )?))),
            "postgres" | "postgresql" | "jdbc" => Ok(DbTarget::Postgres(Arc::new(
                postgres::PgTarget::new(props, schema)?,
            ))),
            "sqlite" => Ok(DbTarget::Sqlite(Arc::new(sqlite::SqliteTarget::new(
                props, schema,
            )?))),
            "embedded" => Ok(DbTarget::Embedded(Arc::new(embedded::EmbeddedTarget::new(
                props, schema,
            )?))),
            other => Err(format!(
                "unknown database {other:?}; expected one of {}",
                TARGET_NAMES.join(", ")
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            DbTarget::Redis(_) => "redis",
            DbTarget::Postgres(_) => "postgres",
            DbTarget::Sqlite(_) => "sqlite",
            DbTarget::Embedded(_) => "embedded",
        }
    }

    pub fn threading(&self) -> Threading {
        match self {
            DbTarget::Redis(_) | DbTarget::Postgres(_) => Threading::Async,
            DbTarget::Sqlite(_) | DbTarget::Embedded(_) => Threading::ThreadPerClient,
        }
    }

    /// One-off setup before any client connects (schema creation, probing the
    /// durability setting).
    pub async fn prepare(&self) -> Result<TargetInfo, String> {
        match self {
            DbTarget::Redis(t) => t.prepare().await,
            DbTarget::Postgres(t) => t.prepare().await,
            DbTarget::Sqlite(t) => t.prepare(),
            DbTarget::Embedded(t) => t.prepare(),
        }
    }

    pub async fn connect(&self, index: usize) -> Result<DbClient, String> {
        match self {
            DbTarget::Redis(t) => Ok(DbClient::Redis(
                redis::RedisClient::connect(t.clone()).await?,
            )),
            DbTarget::Postgres(t) => Ok(DbClient::Postgres(
                postgres::PgClient::connect(t.clone()).await?,
            )),
            DbTarget::Sqlite(t) => Ok(DbClient::Sqlite(sqlite::SqliteClient::open(t.clone())?)),
            DbTarget::Embedded(t) => Ok(DbClient::Embedded(embedded::EmbeddedClient::new(
                t.clone(),
                index,
            )?)),
        }
    }

    /// Called once after every client has finished.
    pub fn finish(&self) -> Result<(), String> {
        match self {
            DbTarget::Embedded(t) => t.finish(),
            _ => Ok(()),
        }
    }
}

/// One client connection (one YCSB "thread"). One lives per client for the
/// whole run, so the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum DbClient {
    Redis(redis::RedisClient),
    Postgres(postgres::PgClient),
    Sqlite(sqlite::SqliteClient),
    Embedded(embedded::EmbeddedClient),
}

impl DbClient {
    pub async fn read(&mut self, key: &str, fields: FieldSel) -> Status {
        match self {
            DbClient::Redis(c) => c.read(key, fields).await,
            DbClient::Postgres(c) => c.read(key, fields).await,
            DbClient::Sqlite(c) => c.read(key, fields),
            DbClient::Embedded(c) => c.read(key, fields),
        }
    }

    pub async fn scan(&mut self, start_key: &str, count: usize, fields: FieldSel) -> Status {
        match self {
            DbClient::Redis(c) => c.scan(start_key, count, fields).await,
            DbClient::Postgres(c) => c.scan(start_key, count, fields).await,
            DbClient::Sqlite(c) => c.scan(start_key, count, fields),
            DbClient::Embedded(c) => c.scan(start_key, count, fields),
        }
    }

    pub async fn update(&mut self, key: &str, values: &Values) -> Status {
        match self {
            DbClient::Redis(c) => c.update(key, values).await,
            DbClient::Postgres(c) => c.update(key, values).await,
            DbClient::Sqlite(c) => c.update(key, values),
            DbClient::Embedded(c) => c.update(key, values),
        }
    }

    pub async fn insert(&mut self, key: &str, values: &Values) -> Status {
        match self {
            DbClient::Redis(c) => c.insert(key, values).await,
            DbClient::Postgres(c) => c.insert(key, values).await,
            DbClient::Sqlite(c) => c.insert(key, values),
            DbClient::Embedded(c) => c.insert(key, values),
        }
    }

    pub async fn delete(&mut self, key: &str) -> Status {
        match self {
            DbClient::Redis(c) => c.delete(key).await,
            DbClient::Postgres(c) => c.delete(key).await,
            DbClient::Sqlite(c) => c.delete(key),
            DbClient::Embedded(c) => c.delete(key),
        }
    }

    /// Flushes client-side state (e.g. a partial insert batch) and
    /// disconnects.
    pub async fn cleanup(&mut self) -> Status {
        match self {
            DbClient::Redis(_) => Status::Ok,
            DbClient::Postgres(c) => c.cleanup().await,
            DbClient::Sqlite(c) => c.cleanup(),
            DbClient::Embedded(c) => c.cleanup(),
        }
    }

    /// The most recent failure's message, for the report's error samples.
    pub fn last_error(&mut self) -> Option<String> {
        match self {
            DbClient::Redis(c) => c.last_error.take(),
            DbClient::Postgres(c) => c.last_error.take(),
            DbClient::Sqlite(c) => c.last_error.take(),
            DbClient::Embedded(c) => c.last_error.take(),
        }
    }

    /// Rows that an earlier operation reported as `BATCHED_OK` but whose
    /// batch later failed to commit; the runner counts them as errors so no
    /// failure is lost.
    pub fn take_lost_batched_rows(&mut self) -> u64 {
        match self {
            DbClient::Postgres(c) => c.take_lost_batched_rows(),
            DbClient::Sqlite(c) => c.take_lost_batched_rows(),
            _ => 0,
        }
    }
}
