//! Each YCSB target exercised end to end against a real server: SQLite
//! always; the `redis` target against an in-process RESP server always and
//! against `redis-server` when `DURAKV_TEST_REDIS_PORT` is set; PostgreSQL
//! when `DURAKV_TEST_PG_URL` is set; the embedded target through its store
//! interface. Nothing here asserts timings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{scratch_dir, MockServer};
use durakv_bench::db::embedded::{set_opener, EmbeddedStore};
use durakv_bench::props::Props;
use durakv_bench::report::{parse_ycsb_text, YcsbReport};
use durakv_bench::runner::{run_ycsb, YcsbOptions};
use durakv_bench::workload::Phase;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// A workload touching every operation type.
fn mixed_workload(records: u64, ops: u64) -> Vec<(String, String)> {
    [
        ("recordcount", records.to_string()),
        ("operationcount", ops.to_string()),
        ("fieldcount", "4".into()),
        ("fieldlength", "20".into()),
        ("readproportion", "0.4".into()),
        ("updateproportion", "0.2".into()),
        ("insertproportion", "0.1".into()),
        ("scanproportion", "0.1".into()),
        ("maxscanlength", "5".into()),
        ("readmodifywriteproportion", "0.2".into()),
        ("requestdistribution", "zipfian".into()),
        ("seed", "42".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn run(
    db: &str,
    phase: Phase,
    threads: usize,
    base: &[(String, String)],
    extra: &[(&str, &str)],
) -> YcsbReport {
    let mut p = Props::new();
    for (k, v) in base {
        p.set(k.clone(), v.clone());
    }
    for (k, v) in extra {
        p.set(*k, *v);
    }
    let opts = YcsbOptions {
        phase,
        db: db.into(),
        props: p,
        threads,
        target_ops_per_sec: None,
        status: false,
        label: String::new(),
    };
    match run_ycsb(&opts, None) {
        Ok(r) => r,
        Err(e) => panic!("{db} {phase:?} failed: {e}"),
    }
}

fn returns(r: &YcsbReport, op: &str, status: &str) -> u64 {
    r.op(op)
        .and_then(|o| o.returns.get(status).copied())
        .unwrap_or(0)
}

/// Checks a load of `records` rows and a mixed run of `ops` operations.
fn check_load_and_run(
    db: &str,
    records: u64,
    ops: u64,
    extra: &[(&str, &str)],
) -> (YcsbReport, YcsbReport) {
    let w = mixed_workload(records, ops);
    let load = run(db, Phase::Load, 4, &w, extra);
    assert_eq!(load.operations, records, "{db} load operations");
    assert_eq!(
        load.errors_total, 0,
        "{db} load errors: {:?}",
        load.error_samples
    );
    let inserted = returns(&load, "INSERT", "OK") + returns(&load, "INSERT", "BATCHED_OK");
    assert_eq!(inserted, records);

    let r = run(db, Phase::Run, 4, &w, extra);
    assert_eq!(r.operations, ops, "{db} run operations");
    assert_eq!(r.errors_total, 0, "{db} run errors: {:?}", r.error_samples);
    for op in ["READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"] {
        assert!(r.op(op).is_some(), "{db}: no {op} in the report");
    }
    // Every read targets an existing record (YCSB only reads acknowledged keys).
    assert_eq!(
        returns(&r, "READ", "NOT_FOUND"),
        0,
        "{db} reads of missing keys"
    );
    // A read-modify-write is also measured as a READ and an UPDATE.
    let rmw = returns(&r, "READ-MODIFY-WRITE", "OK");
    assert!(returns(&r, "READ", "OK") >= rmw && returns(&r, "UPDATE", "OK") >= rmw);
    (load, r)
}

#[test]
fn sqlite_target_load_and_run() {
    let dir = scratch_dir("sqlite");
    let path = dir.join("ycsb.db");
    let path_s = path.display().to_string();
    let (_, r) = check_load_and_run(
        "sqlite",
        300,
        400,
        &[
            ("sqlite.path", &path_s),
            ("sqlite.synchronous", "NORMAL"),
            ("db.batchsize", "7"),
        ],
    );
    assert!(r.durability.contains("synchronous=NORMAL"));
    let conn = rusqlite::Connection::open(&path).expect("open");
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM usertable", [], |row| row.get(0))
        .expect("count");
    assert_eq!(rows as u64, 300 + returns(&r, "INSERT", "OK"));
    let key: String = conn
        .query_row(
            "SELECT YCSB_KEY FROM usertable WHERE YCSB_KEY = 'user6284781860667377211'",
            [],
            |row| row.get(0),
        )
        .expect("record 0 stored under YCSB's key");
    assert_eq!(key, "user6284781860667377211");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn redis_target_against_in_process_server() {
    let server = MockServer::start();
    let port = server.port.to_string();
    let (load, r) = check_load_and_run("redis", 200, 300, &[("redis.port", &port)]);
    assert_eq!(load.durability, "full", "durability probed from INFO");
    let total = 200 + returns(&r, "INSERT", "OK") as usize;
    assert_eq!(server.hash_count(), total);
    assert_eq!(server.zcard("_indices"), total);
    assert_eq!(server.hash_len("user6284781860667377211"), 4);
}

#[test]
fn redis_target_sends_reads_and_scans_to_replicas_and_writes_to_the_primary() {
    let primary = MockServer::start();
    let empty = MockServer::start();
    let port = primary.port.to_string();
    let w = mixed_workload(100, 200);
    run("redis", Phase::Load, 2, &w, &[("redis.port", &port)]);
    // A "replica" with no data: every read and scan comes back empty, and
    // every write still lands on the primary.
    let replicas = format!("127.0.0.1:{}", empty.port);
    let r = run(
        "redis",
        Phase::Run,
        4,
        &w,
        &[("redis.port", &port), ("redis.replicas", &replicas)],
    );
    assert_eq!(r.errors_total, 0, "{:?}", r.error_samples);
    assert_eq!(returns(&r, "READ", "OK"), 0);
    assert!(returns(&r, "READ", "NOT_FOUND") > 0);
    assert_eq!(empty.hash_count(), 0);
    assert_eq!(empty.zcard("_indices"), 0);
    let total = 100 + returns(&r, "INSERT", "OK") as usize;
    assert_eq!(primary.hash_count(), total);
    // Two replicas with the data (the primary itself, twice): reads find it.
    let both = format!("127.0.0.1:{port},[127.0.0.1]:{port}");
    let r = run(
        "redis",
        Phase::Run,
        4,
        &w,
        &[("redis.port", &port), ("redis.replicas", &both)],
    );
    assert_eq!(returns(&r, "READ", "NOT_FOUND"), 0);
    assert!(returns(&r, "READ", "OK") > 0);
    // A bad list is refused before the run starts.
    let mut p = Props::new();
    for (k, v) in &w {
        p.set(k.clone(), v.clone());
    }
    p.set("redis.port", port.clone());
    p.set("redis.replicas", "127.0.0.1");
    let opts = YcsbOptions {
        phase: Phase::Run,
        db: "redis".into(),
        props: p,
        threads: 1,
        target_ops_per_sec: None,
        status: false,
        label: String::new(),
    };
    let e = run_ycsb(&opts, None).unwrap_err().to_string();
    assert!(e.contains("redis.replicas"), "{e}");
}

#[test]
fn redis_target_counts_errors_when_the_server_goes_away() {
    let server = MockServer::start();
    let port = server.port.to_string();
    let w = mixed_workload(50, 10);
    run("redis", Phase::Load, 2, &w, &[("redis.port", &port)]);
    drop(server);
    let mut p = Props::new();
    for (k, v) in &w {
        p.set(k.clone(), v.clone());
    }
    p.set("redis.port", port);
    let opts = YcsbOptions {
        phase: Phase::Run,
        db: "redis".into(),
        props: p,
        threads: 2,
        target_ops_per_sec: None,
        status: false,
        label: String::new(),
    };
    // With the server gone the run cannot even start: a clean error, no panic.
    assert!(run_ycsb(&opts, None).is_err());
}

#[test]
fn redis_target_against_redis_server() {
    let Ok(port) = std::env::var("DURAKV_TEST_REDIS_PORT") else {
        eprintln!("DURAKV_TEST_REDIS_PORT not set; skipping");
        return;
    };
    let (load, _) = check_load_and_run("redis", 500, 500, &[("redis.port", &port)]);
    assert_ne!(load.durability, "", "durability recorded");
}

#[test]
fn postgres_target() {
    let Ok(url) = std::env::var("DURAKV_TEST_PG_URL") else {
        eprintln!("DURAKV_TEST_PG_URL not set; skipping");
        return;
    };
    let table = format!("ycsb_test_{}", std::process::id());
    let (load, _) = check_load_and_run(
        "postgres",
        300,
        300,
        &[
            ("db.url", &url),
            ("table", &table),
            ("db.batchsize", "16"),
            ("postgres.synchronous_commit", "off"),
        ],
    );
    assert!(
        load.durability.contains("synchronous_commit=off"),
        "{}",
        load.durability
    );
    let config = durakv_bench::db::postgres::parse_db_url(&url).expect("url");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let (client, conn) = config
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(conn);
        let n: i64 = client
            .query_one(&format!("SELECT COUNT(*) FROM {table}"), &[])
            .await
            .expect("count")
            .get(0);
        assert!(n >= 300);
        client
            .batch_execute(&format!("DROP TABLE {table}"))
            .await
            .expect("drop");
    });
}

/// A minimal in-memory engine standing in for durakv's, to exercise the
/// embedded target's mapping of YCSB operations.
type Hashes = HashMap<Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>>;

#[derive(Default)]
struct MemStore {
    hashes: Mutex<Hashes>,
    index: Mutex<Vec<(f64, Vec<u8>)>>,
}

impl EmbeddedStore for MemStore {
    fn hset(&self, key: &[u8], fields: &[(&[u8], &[u8])]) -> Result<(), String> {
        let mut h = self.hashes.lock().map_err(|e| e.to_string())?;
        let e = h.entry(key.to_vec()).or_default();
        for (f, v) in fields {
            e.insert(f.to_vec(), v.to_vec());
        }
        Ok(())
    }
    fn hget_count(&self, key: &[u8], fields: &[&[u8]]) -> Result<usize, String> {
        let h = self.hashes.lock().map_err(|e| e.to_string())?;
        Ok(h.get(key).map_or(0, |e| {
            if fields.is_empty() {
                e.len()
            } else {
                fields.iter().filter(|f| e.contains_key(**f)).count()
            }
        }))
    }
    fn zadd(&self, _key: &[u8], score: f64, member: &[u8]) -> Result<(), String> {
        let mut z = self.index.lock().map_err(|e| e.to_string())?;
        z.push((score, member.to_vec()));
        z.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(())
    }
    fn zrange_by_score(&self, _key: &[u8], min: f64, limit: usize) -> Result<Vec<Vec<u8>>, String> {
        let z = self.index.lock().map_err(|e| e.to_string())?;
        Ok(z.iter()
            .filter(|(s, _)| *s >= min)
            .take(limit)
            .map(|(_, m)| m.clone())
            .collect())
    }
    fn del(&self, key: &[u8]) -> Result<bool, String> {
        Ok(self
            .hashes
            .lock()
            .map_err(|e| e.to_string())?
            .remove(key)
            .is_some())
    }
    fn zrem(&self, _key: &[u8], member: &[u8]) -> Result<bool, String> {
        let mut z = self.index.lock().map_err(|e| e.to_string())?;
        let before = z.len();
        z.retain(|(_, m)| m != member);
        Ok(z.len() != before)
    }
    fn durability(&self) -> String {
        "none (test store)".into()
    }
    fn close(&self) -> Result<(), String> {
        Ok(())
    }
}

static STORE: std::sync::OnceLock<Arc<MemStore>> = std::sync::OnceLock::new();

fn open_mem(_dir: &std::path::Path, _durability: &str) -> Result<Arc<dyn EmbeddedStore>, String> {
    Ok(STORE.get_or_init(|| Arc::new(MemStore::default())).clone())
}

#[test]
fn embedded_target_through_the_store_interface() {
    set_opener(open_mem);
    let dir = scratch_dir("embedded");
    let d = dir.display().to_string();
    let (load, r) = check_load_and_run(
        "embedded",
        150,
        200,
        &[("embedded.dir", &d), ("durability", "none")],
    );
    assert_eq!(load.durability, "none (test store)");
    let store = STORE.get().expect("store");
    let n = store.hashes.lock().expect("lock").len() as u64;
    assert_eq!(n, 150 + returns(&r, "INSERT", "OK"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn target_mode_reports_corrected_and_service_latency() {
    let dir = scratch_dir("target");
    let path = dir.join("t.db").display().to_string();
    let w = mixed_workload(50, 60);
    run("sqlite", Phase::Load, 2, &w, &[("sqlite.path", &path)]);
    let mut p = Props::new();
    for (k, v) in &w {
        p.set(k.clone(), v.clone());
    }
    p.set("sqlite.path", path);
    let opts = YcsbOptions {
        phase: Phase::Run,
        db: "sqlite".into(),
        props: p,
        threads: 2,
        target_ops_per_sec: Some(600.0),
        status: false,
        label: String::new(),
    };
    let r = run_ycsb(&opts, None).expect("paced run");
    assert_eq!(r.latency_measured_from, "intended_start");
    assert_eq!(r.operations, 60);
    let text = r.to_text();
    assert!(text.contains("coordinated omission corrected"));
    let parsed = parse_ycsb_text(&text);
    assert!(parsed.contains_key(&("SERVICE-READ".to_string(), "Operations".to_string())));
    let _ = std::fs::remove_dir_all(dir);
}
