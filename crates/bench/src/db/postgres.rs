//! The `postgres` target: PostgreSQL used as a key-value store, the way
//! YCSB's JDBC binding uses a relational database.
//!
//! One table `usertable(YCSB_KEY varchar(255) primary key, FIELD0..FIELDn
//! text)`, created if missing; every operation is a prepared statement on
//! the connection's own session. `db.batchsize > 1` groups load-phase inserts
//! into multi-row `INSERT` statements, each its own transaction, as the
//! reference report's batched load did. `postgres.synchronous_commit=on|off`
//! selects the commit durability for the session.

use super::{FieldSel, Schema, Status, TargetInfo, Values};
use crate::props::Props;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Statement};

/// PostgreSQL's limit on bind parameters in one statement; a batch larger
/// than fits is split into several statements.
const MAX_BIND_PARAMS: usize = 65_535;

pub struct PgTarget {
    config: Config,
    display_url: String,
    table: String,
    columns: Vec<String>,
    synchronous_commit: Option<String>,
    batch_size: usize,
}

/// Accepts libpq URLs (`postgresql://host:port/db`), key=value strings and
/// JDBC URLs (`jdbc:postgresql://host:port/db?...`, whose JDBC-only query
/// options are dropped).
pub fn parse_db_url(url: &str) -> Result<Config, String> {
    let cleaned = match url.strip_prefix("jdbc:") {
        Some(rest) => rest.split('?').next().unwrap_or(rest).to_string(),
        None => url.to_string(),
    };
    cleaned
        .parse::<Config>()
        .map_err(|e| format!("cannot parse db.url {url:?}: {e}"))
}

/// SQL identifiers are interpolated into statements, so only plain names
/// are accepted.
fn check_ident(name: &str) -> Result<String, String> {
    if !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
    {
        Ok(name.to_string())
    } else {
        Err(format!("{name:?} is not a plain SQL identifier"))
    }
}

impl PgTarget {
    pub fn new(props: &Props, schema: Arc<Schema>) -> Result<Self, String> {
        let url = props
            .get("db.url")
            .ok_or("the postgres target needs -p db.url=postgresql://HOST:PORT/DB")?;
        let mut config = parse_db_url(url)?;
        if let Some(user) = props.get("db.user") {
            config.user(user);
        }
        if let Some(pass) = props.get("db.passwd") {
            config.password(pass);
        }
        config.connect_timeout(Duration::from_secs(10));
        let sync = props.get("postgres.synchronous_commit").map(str::to_string);
        if let Some(s) = &sync {
            if !matches!(
                s.as_str(),
                "on" | "off" | "local" | "remote_write" | "remote_apply"
            ) {
                return Err(format!(
                    "postgres.synchronous_commit={s:?} must be on or off"
                ));
            }
        }
        let batch_size = props
            .u64_or("db.batchsize", 1)
            .map_err(|e| e.to_string())?
            .max(1) as usize;
        let table = check_ident(&schema.table)?;
        let columns = schema
            .field_names
            .iter()
            .map(|f| check_ident(&f.to_ascii_uppercase()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PgTarget {
            config,
            display_url: url.to_string(),
            table,
            columns,
            synchronous_commit: sync,
            batch_size,
        })
    }

    async fn open(&self) -> Result<Client, String> {
        let (client, connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.display_url))?;
        // The connection object performs the socket I/O; it lives on the
        // caller's runtime and ends when the client is dropped.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        if let Some(s) = &self.synchronous_commit {
            client
                .batch_execute(&format!("SET synchronous_commit TO {s}"))
                .await
                .map_err(|e| format!("cannot set synchronous_commit: {e}"))?;
        }
        Ok(client)
    }

    pub async fn prepare(&self) -> Result<TargetInfo, String> {
        let client = self.open().await?;
        let cols: Vec<String> = self.columns.iter().map(|c| format!("{c} TEXT")).collect();
        let ddl = format!(
            "CREATE TABLE IF NOT EXISTS {} (YCSB_KEY VARCHAR(255) PRIMARY KEY, {})",
            self.table,
            cols.join(", ")
        );
        client
            .batch_execute(&ddl)
            .await
            .map_err(|e| format!("cannot create table {}: {e}", self.table))?;
        let mut parts = Vec::new();
        for setting in ["synchronous_commit", "fsync"] {
            if let Ok(row) = client.query_one(&format!("SHOW {setting}"), &[]).await {
                if let Ok(v) = row.try_get::<_, String>(0) {
                    parts.push(format!("{setting}={v}"));
                }
            }
        }
        Ok(TargetInfo {
            durability: if parts.is_empty() {
                "unknown".into()
            } else {
                parts.join(" ")
            },
            notes: vec![format!(
                "postgres target {} (batch size {})",
                self.display_url, self.batch_size
            )],
        })
    }

    fn select_list(&self, fields: FieldSel) -> String {
        match fields {
            FieldSel::All => "*".to_string(),
            FieldSel::One(i) => self.columns.get(i).cloned().unwrap_or_else(|| "*".into()),
        }
    }
}

#[derive(Default)]
struct Statements {
    read: HashMap<FieldSel, Statement>,
    scan: HashMap<FieldSel, Statement>,
    update: HashMap<Vec<usize>, Statement>,
    insert: HashMap<usize, Statement>,
    delete: Option<Statement>,
}

pub struct PgClient {
    target: Arc<PgTarget>,
    client: Option<Client>,
    stmts: Statements,
    batch: Vec<(String, Vec<Option<String>>)>,
    lost_batched_rows: u64,
    pub last_error: Option<String>,
}

impl PgClient {
    pub async fn connect(target: Arc<PgTarget>) -> Result<PgClient, String> {
        let client = target.open().await?;
        Ok(PgClient {
            target,
            client: Some(client),
            stmts: Statements::default(),
            batch: Vec::new(),
            lost_batched_rows: 0,
            last_error: None,
        })
    }

    /// The session, reopened (with a fresh statement cache) if it died.
    async fn session(&mut self) -> Option<&Client> {
        let dead = self.client.as_ref().is_none_or(|c| c.is_closed());
        if dead {
            self.client = None;
            self.stmts = Statements::default();
            match self.target.open().await {
                Ok(c) => self.client = Some(c),
                Err(e) => {
                    self.last_error = Some(e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return None;
                }
            }
        }
        self.client.as_ref()
    }

    fn fail(&mut self, e: impl std::fmt::Display) -> Status {
        self.last_error = Some(e.to_string());
        Status::Error
    }

    async fn statement(&mut self, kind: StmtKind) -> Result<Statement, String> {
        let cached = match &kind {
            StmtKind::Read(f) => self.stmts.read.get(f),
            StmtKind::Scan(f) => self.stmts.scan.get(f),
            StmtKind::Update(fs) => self.stmts.update.get(fs),
            StmtKind::Insert(rows) => self.stmts.insert.get(rows),
            StmtKind::Delete => self.stmts.delete.as_ref(),
        };
        if let Some(s) = cached {
            return Ok(s.clone());
        }
        let t = &self.target;
        let sql = match &kind {
            StmtKind::Read(f) => format!(
                "SELECT {} FROM {} WHERE YCSB_KEY = $1",
                t.select_list(*f),
                t.table
            ),
            StmtKind::Scan(f) => format!(
                "SELECT {} FROM {} WHERE YCSB_KEY >= $1 ORDER BY YCSB_KEY LIMIT $2",
                t.select_list(*f),
                t.table
            ),
            StmtKind::Update(fs) => {
                let sets: Vec<String> = fs
                    .iter()
                    .enumerate()
                    .map(|(n, i)| format!("{} = ${}", t.columns[*i], n + 1))
                    .collect();
                format!(
                    "UPDATE {} SET {} WHERE YCSB_KEY = ${}",
                    t.table,
                    sets.join(", "),
                    fs.len() + 1
                )
            }
            StmtKind::Insert(rows) => {
                let width = t.columns.len() + 1;
                let tuples: Vec<String> = (0..*rows)
                    .map(|r| {
                        let ps: Vec<String> =
                            (1..=width).map(|c| format!("${}", r * width + c)).collect();
                        format!("({})", ps.join(", "))
                    })
                    .collect();
                format!(
                    "INSERT INTO {} (YCSB_KEY, {}) VALUES {}",
                    t.table,
                    t.columns.join(", "),
                    tuples.join(", ")
                )
            }
            StmtKind::Delete => format!("DELETE FROM {} WHERE YCSB_KEY = $1", t.table),
        };
        let Some(client) = self.session().await else {
            return Err(self
                .last_error
                .clone()
                .unwrap_or_else(|| "not connected".into()));
        };
        let stmt = client.prepare(&sql).await.map_err(|e| e.to_string())?;
        match kind {
            StmtKind::Read(f) => self.stmts.read.insert(f, stmt.clone()),
            StmtKind::Scan(f) => self.stmts.scan.insert(f, stmt.clone()),
            StmtKind::Update(fs) => self.stmts.update.insert(fs, stmt.clone()),
            StmtKind::Insert(rows) => self.stmts.insert.insert(rows, stmt.clone()),
            StmtKind::Delete => self.stmts.delete.replace(stmt.clone()),
        };
        Ok(stmt)
    }

    pub async fn read(&mut self, key: &str, fields: FieldSel) -> Status {
        let stmt = match self.statement(StmtKind::Read(fields)).await {
            Ok(s) => s,
            Err(e) => return self.fail(e),
        };
        let Some(client) = self.session().await else {
            return Status::Error;
        };
        match client.query(&stmt, &[&key]).await {
            Ok(rows) if rows.is_empty() => Status::NotFound,
            Ok(_) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub async fn scan(&mut self, start_key: &str, count: usize, fields: FieldSel) -> Status {
        let stmt = match self.statement(StmtKind::Scan(fields)).await {
            Ok(s) => s,
            Err(e) => return self.fail(e),
        };
        let Some(client) = self.session().await else {
            return Status::Error;
        };
        let limit = count as i64;
        match client.query(&stmt, &[&start_key, &limit]).await {
            Ok(_) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub async fn update(&mut self, key: &str, values: &Values) -> Status {
        let idx: Vec<usize> = values.iter().map(|(i, _)| *i).collect();
        if idx.iter().any(|i| *i >= self.target.columns.len()) || idx.is_empty() {
            return self.fail("update names a field outside fieldcount");
        }
        let stmt = match self.statement(StmtKind::Update(idx)).await {
            Ok(s) => s,
            Err(e) => return self.fail(e),
        };
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(values.len() + 1);
        for (_, v) in values {
            params.push(v);
        }
        let key = key.to_string();
        params.push(&key);
        let Some(client) = self.session().await else {
            return Status::Error;
        };
        match client.execute(&stmt, &params).await {
            Ok(0) => Status::NotFound,
            Ok(_) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub async fn insert(&mut self, key: &str, values: &Values) -> Status {
        let mut row = vec![None; self.target.columns.len()];
        for (i, v) in values {
            if let Some(slot) = row.get_mut(*i) {
                *slot = Some(v.clone());
            }
        }
        self.batch.push((key.to_string(), row));
        if self.batch.len() < self.target.batch_size {
            return Status::BatchedOk;
        }
        self.flush_batch(true).await
    }

    /// Writes the buffered rows; each chunk is one statement and therefore
    /// one transaction.
    /// `triggered` says an insert caused the flush: that row's failure is
    /// reported by the insert's own status, the other rows were reported
    /// `BATCHED_OK` earlier and are counted as lost.
    async fn flush_batch(&mut self, triggered: bool) -> Status {
        if self.batch.is_empty() {
            return Status::Ok;
        }
        let mut failed_rows = 0usize;
        let rows = std::mem::take(&mut self.batch);
        let width = self.target.columns.len() + 1;
        let max_rows = (MAX_BIND_PARAMS / width).max(1);
        let mut status = Status::Ok;
        for chunk in rows.chunks(max_rows) {
            let stmt = match self.statement(StmtKind::Insert(chunk.len())).await {
                Ok(s) => s,
                Err(e) => {
                    status = self.fail(e);
                    failed_rows += chunk.len();
                    continue;
                }
            };
            let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(chunk.len() * width);
            for (k, fields) in chunk {
                params.push(k);
                for f in fields {
                    params.push(f);
                }
            }
            let Some(client) = self.session().await else {
                failed_rows += chunk.len();
                status = Status::Error;
                continue;
            };
            if let Err(e) = client.execute(&stmt, &params).await {
                status = self.fail(e);
                failed_rows += chunk.len();
            }
        }
        let reported_by_trigger = usize::from(triggered && failed_rows > 0);
        self.lost_batched_rows += (failed_rows - reported_by_trigger) as u64;
        status
    }

    pub async fn delete(&mut self, key: &str) -> Status {
        let stmt = match self.statement(StmtKind::Delete).await {
            Ok(s) => s,
            Err(e) => return self.fail(e),
        };
        let Some(client) = self.session().await else {
            return Status::Error;
        };
        match client.execute(&stmt, &[&key]).await {
            Ok(0) => Status::NotFound,
            Ok(_) => Status::Ok,
            Err(e) => self.fail(e),
        }
    }

    pub async fn cleanup(&mut self) -> Status {
        let status = self.flush_batch(false).await;
        self.client = None;
        status
    }

    pub fn take_lost_batched_rows(&mut self) -> u64 {
        std::mem::take(&mut self.lost_batched_rows)
    }
}

enum StmtKind {
    Read(FieldSel),
    Scan(FieldSel),
    Update(Vec<usize>),
    Insert(usize),
    Delete,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_jdbc_urls() {
        let c = parse_db_url("jdbc:postgresql://127.0.0.1:5433/ycsb?reWriteBatchedInserts=true")
            .expect("jdbc url");
        assert_eq!(c.get_dbname(), Some("ycsb"));
        assert_eq!(c.get_ports(), &[5433]);
        assert!(parse_db_url("postgresql://u@localhost/db").is_ok());
    }

    #[test]
    fn rejects_odd_identifiers() {
        assert!(check_ident("usertable").is_ok());
        assert!(check_ident("user table").is_err());
        assert!(check_ident("x;drop").is_err());
    }
}
