//! `durakv bench`: the load generator that answers the reference reports.
//!
//! The reports this project is measured against were produced with YCSB
//! (workload A against a relational store) and memtier_benchmark (SET/GET
//! mixes against Redis-compatible stores). This crate reimplements both
//! tools' semantics and output formats in one asynchronous client that is
//! cheap enough not to be the bottleneck on a small machine, adds the
//! targets the comparison needs (any RESP server, the embedded engine,
//! PostgreSQL, SQLite), and can sweep concurrency and compare systems on one
//! machine.
//!
//! The `durakv` binary calls [`run`] with the arguments after `durakv bench`.
//!
//! Module map:
//! - [`cli`], [`props`]: YCSB command line and properties.
//! - [`workload`], [`generator`], [`keys`]: YCSB's CoreWorkload.
//! - [`db`]: the YCSB targets (durakv's engine is reached only from
//!   `db::engine_store`); [`resp`]: the RESP client they and memtier use.
//! - [`runner`], [`exec`], [`pace`], [`measure`]: running clients (paced or
//!   not) and measuring them.
//! - [`report`]: YCSB and memtier output; [`memtier`]: the memtier mode.
//! - [`sweep`], [`chart`], [`compare`]: series of runs, charts, peers.
//! - [`ceiling`]: a server that stores nothing, for the client's ceiling.

pub mod ceiling;
pub mod chart;
pub mod cli;
pub mod compare;
pub mod db;
pub mod exec;
pub mod generator;
pub mod keys;
pub mod measure;
pub mod memtier;
pub mod pace;
pub mod props;
pub mod report;
pub mod resp;
pub mod runner;
pub mod sweep;
pub mod workload;

use std::path::Path;

pub const USAGE: &str = "\
usage: durakv bench <command> [options]
  ycsb load|run DB [options]   YCSB CoreWorkload against redis, embedded, postgres or sqlite
  memtier [options]            memtier_benchmark-style SET/GET load against a RESP server
  sweep [--out PREFIX] ycsb|memtier ...   the same over a list of concurrencies (CSV + SVG)
  compare [options]            run the peers and durakv on this machine and tabulate
  ceiling [options]            a server that stores nothing: the client's ceiling here
run `durakv bench <command> --help` for a command's options";

/// Entry point for `durakv bench ...`; `args` are the arguments after
/// `bench`. Returns the process exit code: 0 on success, 1 when the run
/// failed or recorded errors, 2 for usage errors.
pub fn run(args: Vec<String>) -> i32 {
    let rest = args.get(1..).unwrap_or(&[]);
    if rest.iter().any(|a| a == "-h" || a == "--help") {
        let usage = match args.first().map(String::as_str) {
            Some("ycsb") => cli::YCSB_USAGE,
            Some("memtier") => memtier::MEMTIER_USAGE,
            Some("sweep") => sweep::SWEEP_USAGE,
            Some("compare") => compare::COMPARE_USAGE,
            Some("ceiling") => ceiling::CEILING_USAGE,
            _ => USAGE,
        };
        println!("{usage}");
        return 0;
    }
    match args.first().map(String::as_str) {
        Some("ycsb") => ycsb_main(rest),
        Some("memtier") => memtier::main(rest),
        Some("sweep") => sweep::main(rest),
        Some("compare") => compare::main(rest),
        Some("ceiling") => ceiling::main(rest),
        Some("help" | "-h" | "--help") => {
            println!("{USAGE}");
            0
        }
        Some(other) => {
            eprintln!("unknown bench command {other:?}\n{USAGE}");
            2
        }
        None => {
            eprintln!("{USAGE}");
            2
        }
    }
}

fn ycsb_main(args: &[String]) -> i32 {
    let cli = match cli::parse_ycsb(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    if cli.threads_list.len() > 1 {
        return sweep::ycsb_sweep(&cli);
    }
    match runner::run_ycsb(&cli.opts, None) {
        Ok(report) => {
            print!("{}", report.to_text());
            if let Some(path) = &cli.json {
                if let Err(e) = write_json(path, &report.to_json()) {
                    eprintln!("{e}");
                    return 1;
                }
            }
            i32::from(report.errors_total > 0)
        }
        Err(e) => {
            eprintln!("ycsb: {e}");
            1
        }
    }
}

pub(crate) fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), String> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| format!("cannot encode JSON: {e}"))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}
