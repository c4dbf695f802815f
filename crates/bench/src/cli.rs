//! Command-line parsing for `durakv bench ycsb` in YCSB's own syntax.
//!
//! YCSB users type single-dash options (`-P`, `-p`, `-threads`, `-target`,
//! `-s`); they are accepted verbatim, along with GNU-style spellings
//! (`--threads`, `--target`, `--status`) and this tool's additions
//! (`--json`, `--sweep-out`). A comma list for `-threads` turns the command
//! into a sweep.

use crate::props::Props;
use crate::runner::YcsbOptions;
use crate::workload::Phase;
use std::path::PathBuf;

pub const YCSB_USAGE: &str = "\
usage: durakv bench ycsb load|run DB [options]
  DB: redis | embedded | postgres | sqlite
  -P FILE            workload properties file (repeatable; later files win)
  -p NAME=VALUE      property (repeatable; overrides files)
  -threads N         client connections (YCSB threads); a list like 10,20,50 runs a sweep
  -target OPS        open-loop target throughput (ops/s); latency is then measured from
                     each request's intended start (coordinated-omission corrected)
  -s                 print a status line to stderr every status.interval seconds (10)
  -l LABEL           prefix for status lines
  --json FILE        write the figures and the full configuration as JSON
  --sweep-out PREFIX files for a sweep: PREFIX.csv and PREFIX.svg (default: sweep)
  also accepted: --threads, --target, --status, -db NAME, -load, -t
useful properties: recordcount operationcount fieldcount fieldlength requestdistribution
  readproportion updateproportion insertproportion scanproportion readmodifywriteproportion
  warmup.seconds maxexecutiontime runtime.threads seed status.interval hdrhistogram.percentiles
  redis.host redis.port redis.password redis.username redis.timeout
  db.url db.user db.passwd db.batchsize postgres.synchronous_commit
  sqlite.path sqlite.synchronous embedded.dir durability";

/// A parsed `ycsb` command line.
#[derive(Clone, Debug)]
pub struct YcsbCli {
    pub opts: YcsbOptions,
    pub json: Option<PathBuf>,
    /// More than one entry means a sweep over client counts.
    pub threads_list: Vec<usize>,
    pub sweep_out: Option<String>,
}

/// Parses `N` or `N,M,...` (positive integers).
pub fn parse_count_list(s: &str, what: &str) -> Result<Vec<usize>, String> {
    let v: Result<Vec<usize>, _> = s.split(',').map(|p| p.trim().parse::<usize>()).collect();
    match v {
        Ok(v) if !v.is_empty() && v.iter().all(|n| *n > 0) => Ok(v),
        _ => Err(format!(
            "{what} expects a positive integer or a comma list, got {s:?}"
        )),
    }
}

/// Splits `--name=value` into its parts.
fn split_eq(arg: &str) -> (&str, Option<&str>) {
    match arg.split_once('=') {
        Some((n, v)) if n.starts_with("--") => (n, Some(v)),
        _ => (arg, None),
    }
}

pub fn parse_ycsb(args: &[String]) -> Result<YcsbCli, String> {
    let mut phase: Option<Phase> = None;
    let mut db: Option<String> = None;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut overrides: Vec<(String, String)> = Vec::new();
    let mut threads: Option<String> = None;
    let mut target: Option<String> = None;
    let mut status = false;
    let mut label = String::new();
    let mut json = None;
    let mut sweep_out = None;
    let mut i = 0;
    while i < args.len() {
        let (name, inline) = split_eq(&args[i]);
        let value = |i: &mut usize| -> Result<String, String> {
            if let Some(v) = inline {
                return Ok(v.to_string());
            }
            *i += 1;
            args.get(*i)
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name {
            "-P" => files.push(PathBuf::from(value(&mut i)?)),
            "-p" => {
                let kv = value(&mut i)?;
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("-p expects NAME=VALUE, got {kv:?}"))?;
                overrides.push((k.to_string(), v.to_string()));
            }
            "-threads" | "--threads" => threads = Some(value(&mut i)?),
            "-target" | "--target" => target = Some(value(&mut i)?),
            "-s" | "--status" => status = true,
            "-l" | "--label" => label = value(&mut i)?,
            "--json" => json = Some(PathBuf::from(value(&mut i)?)),
            "--sweep-out" => sweep_out = Some(value(&mut i)?),
            "-db" | "--db" => db = Some(value(&mut i)?),
            "-load" => phase = Some(Phase::Load),
            "-t" => phase = Some(Phase::Run),
            "-h" | "--help" => return Err(YCSB_USAGE.to_string()),
            s if s.starts_with('-') && s.len() > 1 => {
                return Err(format!("unknown option {s}\n{YCSB_USAGE}"));
            }
            positional => {
                if phase.is_none() && matches!(positional, "load" | "run") {
                    phase = Some(if positional == "load" {
                        Phase::Load
                    } else {
                        Phase::Run
                    });
                } else if db.is_none() {
                    db = Some(positional.to_string());
                } else {
                    return Err(format!("unexpected argument {positional:?}\n{YCSB_USAGE}"));
                }
            }
        }
        i += 1;
    }
    let phase = phase.ok_or_else(|| format!("missing phase (load or run)\n{YCSB_USAGE}"))?;
    let db = db.ok_or_else(|| format!("missing database name\n{YCSB_USAGE}"))?;

    let mut props = Props::new();
    for f in &files {
        props.load_file(f).map_err(|e| e.to_string())?;
    }
    for (k, v) in overrides {
        props.set(k, v);
    }
    // `-threads`/`-target` win over the equivalent properties, as in YCSB.
    let threads_spec = match threads {
        Some(t) => t,
        None => props.str_or("threadcount", "1"),
    };
    let threads_list = parse_count_list(&threads_spec, "-threads")?;
    let target_ops = match target.or_else(|| props.get("target").map(str::to_string)) {
        None => None,
        Some(t) => {
            let v: f64 = t.trim().parse().map_err(|_| {
                format!("-target expects a number of operations per second, got {t:?}")
            })?;
            (v > 0.0).then_some(v)
        }
    };
    Ok(YcsbCli {
        opts: YcsbOptions {
            phase,
            db,
            props,
            threads: threads_list[0],
            target_ops_per_sec: target_ops,
            status,
            label,
        },
        json,
        threads_list,
        sweep_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_ycsb_style_flags() {
        let c = parse_ycsb(&args(
            "run redis -p recordcount=10 -p redis.port=7000 -threads 16 -target 500 -s --json out.json",
        ))
        .expect("parse");
        assert_eq!(c.opts.phase, Phase::Run);
        assert_eq!(c.opts.db, "redis");
        assert_eq!(c.opts.threads, 16);
        assert_eq!(c.opts.target_ops_per_sec, Some(500.0));
        assert!(c.opts.status);
        assert_eq!(c.opts.props.get("redis.port"), Some("7000"));
        assert_eq!(c.json, Some(PathBuf::from("out.json")));
    }

    #[test]
    fn accepts_gnu_spellings_and_lists() {
        let c =
            parse_ycsb(&args("load sqlite --threads=10,20,50 --target=0 --status")).expect("parse");
        assert_eq!(c.threads_list, vec![10, 20, 50]);
        assert_eq!(c.opts.target_ops_per_sec, None);
        assert!(c.opts.status);
        assert_eq!(c.opts.phase, Phase::Load);
    }

    #[test]
    fn rejects_unknown_options() {
        assert!(parse_ycsb(&args("run redis -bogus")).is_err());
        assert!(parse_ycsb(&args("run")).is_err());
        assert!(parse_ycsb(&args("run redis -threads 0")).is_err());
    }
}
