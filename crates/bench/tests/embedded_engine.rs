//! The embedded target on durakv's real engine: records written at
//! `durability=full` must be in the write-ahead log when the run reports
//! them, so reopening the data directory recovers all of them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::scratch_dir;
use durakv_bench::props::Props;
use durakv_bench::runner::{run_ycsb, YcsbOptions};
use durakv_bench::workload::Phase;
use durakv_engine::store::{Store, StoreConfig};

fn opts(phase: Phase, dir: &str, durability: &str, extra: &[(&str, &str)]) -> YcsbOptions {
    let mut p = Props::new();
    for (k, v) in [
        ("recordcount", "200"),
        ("operationcount", "300"),
        ("fieldcount", "3"),
        ("fieldlength", "16"),
        ("readproportion", "0.5"),
        ("updateproportion", "0.3"),
        ("scanproportion", "0.1"),
        ("insertproportion", "0.1"),
        ("maxscanlength", "4"),
        ("embedded.dir", dir),
        ("durability", durability),
    ] {
        p.set(k, v);
    }
    for (k, v) in extra {
        p.set(*k, *v);
    }
    YcsbOptions {
        phase,
        db: "embedded".into(),
        props: p,
        threads: 4,
        target_ops_per_sec: None,
        status: false,
        label: String::new(),
    }
}

#[test]
fn full_durability_records_survive_reopening() {
    let dir = scratch_dir("engine-full");
    let d = dir.display().to_string();
    let load = run_ycsb(&opts(Phase::Load, &d, "full", &[]), None).expect("load");
    assert_eq!(load.operations, 200);
    assert_eq!(load.errors_total, 0, "{:?}", load.error_samples);
    assert_eq!(load.durability, "full");
    let run = run_ycsb(&opts(Phase::Run, &d, "full", &[]), None).expect("run");
    assert_eq!(run.operations, 300);
    assert_eq!(run.errors_total, 0, "{:?}", run.error_samples);
    assert_eq!(
        run.op("READ")
            .and_then(|o| o.returns.get("NOT_FOUND").copied()),
        Some(0)
    );
    let inserted = run
        .op("INSERT")
        .and_then(|o| o.returns.get("OK").copied())
        .unwrap_or(0);

    let store = Store::open(&StoreConfig::new(&dir)).expect("reopen");
    // Every record plus the `_indices` sorted set.
    assert_eq!(store.keyspace.db_len(0) as u64, 200 + inserted + 1);
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn preload_feeds_an_in_memory_run() {
    let dir = scratch_dir("engine-none");
    let d = dir.display().to_string();
    let run = run_ycsb(
        &opts(Phase::Run, &d, "none", &[("embedded.preload", "true")]),
        None,
    )
    .expect("run");
    assert_eq!(run.operations, 300);
    assert_eq!(run.errors_total, 0);
    // The preloaded records were found in this process.
    assert_eq!(
        run.op("READ")
            .and_then(|o| o.returns.get("NOT_FOUND").copied()),
        Some(0)
    );
    assert!(run
        .notes
        .iter()
        .any(|n| n.contains("embedded.preload: 200 records")));
    let _ = std::fs::remove_dir_all(dir);
}
