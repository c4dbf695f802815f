//! The `sqlite` target: an embedded SQL database as the durable single-node
//! baseline, with the same `usertable` schema as the `postgres` target.
//!
//! The database runs in WAL mode; `sqlite.synchronous=FULL|NORMAL|OFF`
//! chooses whether each commit waits for the log to reach the disk. SQLite is
//! a blocking library, so every client gets its own OS thread and its own
//! connection (the runner schedules `ThreadPerClient` targets that way);
//! writers are serialised by SQLite itself and wait up to
//! `sqlite.busy_timeout_ms` for the write lock.

use super::{FieldSel, Schema, Status, TargetInfo, Values};
use crate::props::Props;
use rusqlite::{params_from_iter, Connection};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub struct SqliteTarget {
    path: PathBuf,
    synchronous: String,
    busy_timeout_ms: u64,
    table: String,
    columns: Vec<String>,
    batch_size: usize,
}

fn check_ident(name: &str) -> Result<String, String> {
    if !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
    {
        Ok(name.to_string())
    } else {
        Err(format!("{name:?} is not a plain SQL identifier"))
    }
}

impl SqliteTarget {
    pub fn new(props: &Props, schema: Arc<Schema>) -> Result<Self, String> {
        let synchronous = props
            .str_or("sqlite.synchronous", "FULL")
            .to_ascii_uppercase();
        if !matches!(synchronous.as_str(), "FULL" | "NORMAL" | "OFF" | "EXTRA") {
            return Err(format!(
                "sqlite.synchronous={synchronous:?} must be FULL, NORMAL or OFF"
            ));
        }
        Ok(SqliteTarget {
            path: PathBuf::from(props.str_or("sqlite.path", "./bench-data/ycsb.sqlite")),
            synchronous,
            busy_timeout_ms: props
                .u64_or("sqlite.busy_timeout_ms", 10_000)
                .map_err(|e| e.to_string())?,
            table: check_ident(&schema.table)?,
            columns: schema
                .field_names
                .iter()
                .map(|f| check_ident(&f.to_ascii_uppercase()))
                .collect::<Result<_, _>>()?,
            batch_size: props
                .u64_or("db.batchsize", 1)
                .map_err(|e| e.to_string())?
                .max(1) as usize,
        })
    }

    fn open(&self) -> Result<Connection, String> {
        if let Some(dir) = self.path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
        }
        let conn = Connection::open(&self.path)
            .map_err(|e| format!("cannot open {}: {e}", self.path.display()))?;
        conn.busy_timeout(Duration::from_millis(self.busy_timeout_ms))
            .map_err(|e| e.to_string())?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| format!("cannot enable WAL: {e}"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("SQLite refused WAL mode (journal_mode={mode})"));
        }
        conn.pragma_update(None, "synchronous", &self.synchronous)
            .map_err(|e| e.to_string())?;
        Ok(conn)
    }

    pub fn prepare(&self) -> Result<TargetInfo, String> {
        let conn = self.open()?;
        let cols: Vec<String> = self.columns.iter().map(|c| format!("{c} TEXT")).collect();
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {} (YCSB_KEY VARCHAR(255) PRIMARY KEY, {})",
            self.table,
            cols.join(", ")
        ))
        .map_err(|e| format!("cannot create table: {e}"))?;
        Ok(TargetInfo {
            durability: format!("synchronous={} journal_mode=wal", self.synchronous),
            notes: vec![format!(
                "sqlite target {} (batch size {})",
                self.path.display(),
                self.batch_size
            )],
        })
    }

    fn select_list(&self, fields: FieldSel) -> String {
        match fields {
            FieldSel::All => "*".into(),
            FieldSel::One(i) => self.columns.get(i).cloned().unwrap_or_else(|| "*".into()),
        }
    }
}

pub struct SqliteClient {
    target: Arc<SqliteTarget>,
    conn: Connection,
    /// Inserts executed inside the open batch transaction.
    in_batch: usize,
    lost_batched_rows: u64,
    pub last_error: Option<String>,
}

impl SqliteClient {
    pub fn open(target: Arc<SqliteTarget>) -> Result<SqliteClient, String> {
        let conn = target.open()?;
        Ok(SqliteClient {
            target,
            conn,
            in_batch: 0,
            lost_batched_rows: 0,
            last_error: None,
        })
    }

    fn fail(&mut self, e: impl std::fmt::Display) -> Status {
        self.last_error = Some(e.to_string());
        Status::Error
    }

    pub fn read(&mut self, key: &str, fields: FieldSel) -> Status {
        let sql = format!(
            "SELECT {} FROM {} WHERE YCSB_KEY = ?1",
            self.target.select_list(fields),
            self.target.table
        );
        let res = (|| -> rusqlite::Result<bool> {
            let mut stmt = self.conn.prepare_cached(&sql)?;
            let mut rows = stmt.query([key])?;
            Ok(rows.next()?.is_some())
        })();
        match res {
            Ok(true) => Status::Ok,
            Ok(false) => Status::NotFound,
            Err(e) => self.fail(e),
        }
    }

    pub fn scan(&mut self, start_key: &str, count: usize, fields: FieldSel) -> Status {
        let sql = format!(
            "SELECT {} FROM {} WHERE YCSB_KEY >= ?1 ORDER BY YCSB_KEY LIMIT ?2",
            self.target.select_list(fields),
            self.target.table
        );
        let res = (|| -> rusqlite::Result<()> {
            let mut stmt = self.conn.prepare_cached(&sql)?;
            let mut rows = stmt.query(rusqlite::params![start_key, count as i64])?;
            while rows.next()?.is_some() {}
            Ok(())
        })();
        match res {
            Ok(()) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub fn update(&mut self, key: &str, values: &Values) -> Status {
        let t = &self.target;
        if values.is_empty() || values.iter().any(|(i, _)| *i >= t.columns.len()) {
            return self.fail("update names a field outside fieldcount");
        }
        let sets: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(n, (i, _))| format!("{} = ?{}", t.columns[*i], n + 1))
            .collect();
        let sql = format!(
            "UPDATE {} SET {} WHERE YCSB_KEY = ?{}",
            t.table,
            sets.join(", "),
            values.len() + 1
        );
        let params = values
            .iter()
            .map(|(_, v)| v.as_str())
            .chain(std::iter::once(key));
        let res = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut s| s.execute(params_from_iter(params)));
        match res {
            Ok(0) => Status::NotFound,
            Ok(_) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub fn insert(&mut self, key: &str, values: &Values) -> Status {
        let t = self.target.clone();
        let mut row: Vec<Option<&str>> = vec![None; t.columns.len()];
        for (i, v) in values {
            if let Some(slot) = row.get_mut(*i) {
                *slot = Some(v.as_str());
            }
        }
        let placeholders: Vec<String> =
            (1..=t.columns.len() + 1).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT INTO {} (YCSB_KEY, {}) VALUES ({})",
            t.table,
            t.columns.join(", "),
            placeholders.join(", ")
        );
        if t.batch_size > 1 && self.in_batch == 0 {
            if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
                return self.fail(e);
            }
        }
        let params = std::iter::once(Some(key)).chain(row.iter().copied());
        let res = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut s| s.execute(params_from_iter(params)));
        if t.batch_size <= 1 {
            return match res {
                Ok(_) => Status::Ok,
                Err(e) => self.fail(e),
            };
        }
        self.in_batch += 1;
        let mut failed = false;
        if let Err(e) = res {
            self.fail(e);
            failed = true;
        }
        if self.in_batch < t.batch_size && !failed {
            return Status::BatchedOk;
        }
        self.commit_batch(true, failed)
    }

    /// Ends the batch transaction (rolling back if a row already failed).
    fn commit_batch(&mut self, triggered: bool, already_failed: bool) -> Status {
        if self.in_batch == 0 {
            return Status::Ok;
        }
        let rows = self.in_batch;
        self.in_batch = 0;
        let end = if already_failed { "ROLLBACK" } else { "COMMIT" };
        let ok = match self.conn.execute_batch(end) {
            Ok(()) => !already_failed,
            Err(e) => {
                self.fail(e);
                let _ = self.conn.execute_batch("ROLLBACK");
                false
            }
        };
        if ok {
            return Status::Ok;
        }
        self.lost_batched_rows += (rows - usize::from(triggered)) as u64;
        Status::Error
    }

    pub fn delete(&mut self, key: &str) -> Status {
        let sql = format!("DELETE FROM {} WHERE YCSB_KEY = ?1", self.target.table);
        let res = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut s| s.execute([key]));
        match res {
            Ok(0) => Status::NotFound,
            Ok(_) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub fn cleanup(&mut self) -> Status {
        self.commit_batch(false, false)
    }

    pub fn take_lost_batched_rows(&mut self) -> u64 {
        std::mem::take(&mut self.lost_batched_rows)
    }
}
