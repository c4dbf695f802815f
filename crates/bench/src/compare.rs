//! `durakv bench compare`: the reference reports' comparison, rerun on this
//! machine.
//!
//! Published figures come from different hardware, so the only meaningful
//! comparison is one where every system runs on the same machine with the
//! same data. This command starts each installed peer on loopback with a
//! fresh data directory at each of its durability levels (Redis with
//! `appendfsync always` / `everysec` / no AOF, PostgreSQL with
//! `synchronous_commit` on/off, SQLite `synchronous=FULL`/`NORMAL`, durakv
//! `full`/`delayed`/`none`), loads the same dataset, runs YCSB workload A and
//! (for RESP servers) memtier 1:0 and 1:10, and prints one table plus a
//! chart. Peers that are not installed are skipped with installation hints;
//! nothing is ever installed. Every server started here is stopped by its
//! process id when its step ends.

use crate::chart::BarLineChart;
use crate::memtier::{run_memtier, KeyPattern, MemtierOptions, Requests};
use crate::props::Props;
use crate::runner::{block_on_small, run_ycsb, YcsbOptions};
use crate::workload::Phase;
use std::fmt::Write as _;
use std::fs;
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const COMPARE_USAGE: &str = "\
usage: durakv bench compare [options]
  --systems LIST        redis,postgres,sqlite,durakv (default: all; missing peers are skipped)
  --records N           records loaded into each system (10000)
  --operations N        YCSB workload A operations (10000)
  --threads N           YCSB client connections (16)
  --distribution D      workload A request distribution (uniform, as the reference report)
  --memtier-threads N   memtier threads (1)
  --memtier-clients N   memtier connections per thread (16)
  --memtier-requests N  memtier requests per connection (2000)
  --data-size BYTES     memtier value size (128)
  --batch N             rows per load transaction for postgres/sqlite (100)
  --durakv-bin PATH     durakv binary (target/release/durakv)
  --redis-bin PATH      redis-server binary (redis-server from PATH)
  --pg-bin-dir DIR      directory with initdb/pg_ctl (PATH or /usr/lib/postgresql/*/bin)
  --base-port N         first loopback port to use (17400)
  --workdir DIR         where data directories go (a new directory under the temp dir)
  --out PREFIX          PREFIX.csv, PREFIX.json, PREFIX-ycsb-a.svg, PREFIX-memtier.svg (compare)
  --keep                keep the data directories";

#[derive(Clone, Debug)]
pub struct CompareOptions {
    pub systems: Vec<String>,
    pub records: u64,
    pub operations: u64,
    pub threads: usize,
    pub distribution: String,
    pub memtier_threads: usize,
    pub memtier_clients: usize,
    pub memtier_requests: u64,
    pub data_size: usize,
    pub batch: u64,
    pub durakv_bin: PathBuf,
    pub redis_bin: String,
    pub pg_bin_dir: Option<PathBuf>,
    pub base_port: u16,
    pub workdir: Option<PathBuf>,
    pub out: String,
    pub keep: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            systems: ["redis", "postgres", "sqlite", "durakv"]
                .map(String::from)
                .to_vec(),
            records: 10_000,
            operations: 10_000,
            threads: 16,
            distribution: "uniform".into(),
            memtier_threads: 1,
            memtier_clients: 16,
            memtier_requests: 2000,
            data_size: 128,
            batch: 100,
            durakv_bin: PathBuf::from("target/release/durakv"),
            redis_bin: "redis-server".into(),
            pg_bin_dir: None,
            base_port: 17_400,
            workdir: None,
            out: "compare".into(),
            keep: false,
        }
    }
}

pub fn parse_compare(args: &[String]) -> Result<CompareOptions, String> {
    let mut o = CompareOptions::default();
    let mut i = 0;
    while i < args.len() {
        let (name, inline) = match args[i].split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (args[i].clone(), None),
        };
        if name == "--keep" {
            o.keep = true;
            i += 1;
            continue;
        }
        if name == "-h" || name == "--help" {
            return Err(COMPARE_USAGE.into());
        }
        let value = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or_else(|| format!("{name} needs a value"))?
            }
        };
        let num = |v: &str| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("{name}: not a number: {v:?}"))
        };
        match name.as_str() {
            "--systems" => o.systems = value.split(',').map(|s| s.trim().to_string()).collect(),
            "--records" => o.records = num(&value)?.max(1),
            "--operations" => o.operations = num(&value)?.max(1),
            "--threads" => o.threads = num(&value)?.max(1) as usize,
            "--distribution" => o.distribution = value,
            "--memtier-threads" => o.memtier_threads = num(&value)?.max(1) as usize,
            "--memtier-clients" => o.memtier_clients = num(&value)?.max(1) as usize,
            "--memtier-requests" => o.memtier_requests = num(&value)?.max(1),
            "--data-size" => o.data_size = num(&value)? as usize,
            "--batch" => o.batch = num(&value)?.max(1),
            "--durakv-bin" => o.durakv_bin = PathBuf::from(value),
            "--redis-bin" => o.redis_bin = value,
            "--pg-bin-dir" => o.pg_bin_dir = Some(PathBuf::from(value)),
            "--base-port" => {
                o.base_port = u16::try_from(num(&value)?)
                    .map_err(|_| "--base-port out of range".to_string())?
            }
            "--workdir" => o.workdir = Some(PathBuf::from(value)),
            "--out" => o.out = value,
            other => return Err(format!("unknown option {other}\n{COMPARE_USAGE}")),
        }
        i += 1;
    }
    for s in &o.systems {
        if !matches!(s.as_str(), "redis" | "postgres" | "sqlite" | "durakv") {
            return Err(format!("unknown system {s:?} in --systems"));
        }
    }
    Ok(o)
}

/// How long a server gets to exit after SIGTERM before it is killed.
const STOP_GRACE_SECS: u64 = 10;

/// One line of the comparison table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CompareRow {
    pub system: String,
    /// full / delayed / none, as this tool configured it.
    pub durability: String,
    /// What the system itself reported.
    pub reported_durability: String,
    pub workload: String,
    pub records: u64,
    pub threads: usize,
    pub ops_per_sec: f64,
    pub avg_read_ms: Option<f64>,
    pub avg_write_ms: Option<f64>,
    pub p99_ms: f64,
    pub errors: u64,
}

/// A server process started by this command; stopped (by pid) on drop.
struct Server {
    label: String,
    child: Option<Child>,
    stop: Option<Box<dyn FnOnce()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
        if let Some(mut c) = self.child.take() {
            // Ask politely (SIGTERM, by this child's pid), then insist.
            if let Ok(pid) = libc::pid_t::try_from(c.id()) {
                // SAFETY: kill(2) with a pid we spawned and have not reaped.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
            let deadline = Instant::now() + Duration::from_secs(STOP_GRACE_SECS);
            while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        eprintln!("compare: stopped {}", self.label);
    }
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Polls until `port` accepts connections, the process exits, or the
/// timeout passes.
fn wait_for_port(port: u16, child: Option<&mut Child>, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut child = child;
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Some(c) = child.as_deref_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(format!("server exited early ({status})"));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "nothing listening on port {port} after {} s",
        timeout.as_secs()
    ))
}

fn tail(path: &Path) -> String {
    fs::read_to_string(path)
        .map(|s| {
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(5)..].join(" | ")
        })
        .unwrap_or_default()
}

struct Ctx<'a> {
    o: &'a CompareOptions,
    work: PathBuf,
    next_port: u16,
    rows: Vec<CompareRow>,
}

impl Ctx<'_> {
    fn port(&mut self) -> u16 {
        let p = self.next_port;
        self.next_port = self.next_port.wrapping_add(1);
        p
    }

    fn ycsb_props(&self, extra: &[(&str, String)]) -> Props {
        let mut p = Props::new();
        // YCSB workload A (50% reads, 50% single-field updates), ten 100-byte fields.
        for (k, v) in [
            ("recordcount", self.o.records.to_string()),
            ("operationcount", self.o.operations.to_string()),
            ("fieldcount", "10".into()),
            ("fieldlength", "100".into()),
            ("readallfields", "true".into()),
            ("readproportion", "0.5".into()),
            ("updateproportion", "0.5".into()),
            ("scanproportion", "0".into()),
            ("insertproportion", "0".into()),
            ("requestdistribution", self.o.distribution.clone()),
        ] {
            p.set(k, v);
        }
        for (k, v) in extra {
            p.set(*k, v.clone());
        }
        p
    }

    /// Loads the dataset and runs workload A; pushes both rows.
    fn ycsb(
        &mut self,
        system: &str,
        durability: &str,
        db: &str,
        extra: &[(&str, String)],
    ) -> Result<(), String> {
        for phase in [Phase::Load, Phase::Run] {
            let opts = YcsbOptions {
                phase,
                db: db.to_string(),
                props: self.ycsb_props(extra),
                threads: self.o.threads,
                target_ops_per_sec: None,
                status: false,
                label: String::new(),
            };
            let r = run_ycsb(&opts, None)?;
            let workload = if phase == Phase::Load {
                "ycsb-load"
            } else {
                "ycsb-a"
            };
            eprintln!(
                "compare: {system} {durability} {workload}: {:.0} ops/s, errors {}",
                r.throughput_ops_per_sec, r.errors_total
            );
            self.rows.push(CompareRow {
                system: system.into(),
                durability: durability.into(),
                reported_durability: r.durability.clone(),
                workload: workload.into(),
                records: self.o.records,
                threads: self.o.threads,
                ops_per_sec: r.throughput_ops_per_sec,
                avg_read_ms: r.avg_read_ms(),
                avg_write_ms: r.avg_write_ms(),
                p99_ms: r.overall_p99_us as f64 / 1000.0,
                errors: r.errors_total,
            });
        }
        Ok(())
    }

    /// memtier 1:0 and 1:10 against a RESP server on `port`.
    fn memtier(&mut self, system: &str, durability: &str, port: u16) -> Result<(), String> {
        for (ratio_set, ratio_get) in [(1, 0), (1, 10)] {
            let o = MemtierOptions {
                host: "127.0.0.1".into(),
                port,
                threads: self.o.memtier_threads,
                clients: self.o.memtier_clients,
                requests: Requests::PerClient(self.o.memtier_requests),
                ratio_set,
                ratio_get,
                data_size: self.o.data_size,
                random_data: true,
                key_prefix: "kv_".into(),
                key_min: 1,
                key_max: self.o.records,
                set_pattern: KeyPattern::Random,
                get_pattern: KeyPattern::Random,
                distinct_client_seed: true,
                hide_histogram: true,
                quiet: true,
                ..MemtierOptions::default()
            };
            let r = run_memtier(&o, None)?;
            let totals = r.totals();
            let h = totals.latency.as_ref().filter(|h| !h.is_empty());
            let mean = |s: &crate::report::MemtierTypeStats| {
                s.latency
                    .as_ref()
                    .filter(|h| !h.is_empty())
                    .map(|h| h.mean() / 1000.0)
            };
            let workload = format!("memtier-{ratio_set}:{ratio_get}");
            eprintln!(
                "compare: {system} {durability} {workload}: {:.0} ops/s, errors {}",
                r.ops_per_sec(),
                totals.errors + r.connection_errors
            );
            self.rows.push(CompareRow {
                system: system.into(),
                durability: durability.into(),
                reported_durability: r.durability.clone(),
                workload,
                records: self.o.records,
                threads: self.o.memtier_threads * self.o.memtier_clients,
                ops_per_sec: r.ops_per_sec(),
                avg_read_ms: mean(&r.gets),
                avg_write_ms: mean(&r.sets),
                p99_ms: h.map_or(0.0, |h| h.value_at_quantile(0.99) as f64 / 1000.0),
                errors: totals.errors + r.connection_errors,
            });
        }
        Ok(())
    }

    /// Starts a RESP server process, runs the whole suite, stops it.
    fn resp_suite(
        &mut self,
        system: &str,
        durability: &str,
        mut cmd: Command,
        port: u16,
        log: &Path,
    ) -> Result<(), String> {
        let log_file =
            fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start {system}: {e}"))?;
        let mut server = Server {
            label: format!("{system} ({durability}, port {port}, pid {})", child.id()),
            child: Some(child),
            stop: None,
        };
        wait_for_port(port, server.child.as_mut(), Duration::from_secs(15))
            .map_err(|e| format!("{system} did not start: {e}; log: {}", tail(log)))?;
        let db_props = [
            ("redis.host", "127.0.0.1".to_string()),
            ("redis.port", port.to_string()),
        ];
        self.ycsb(system, durability, "redis", &db_props)?;
        self.memtier(system, durability, port)?;
        drop(server);
        Ok(())
    }

    fn redis(&mut self) -> Result<(), String> {
        let Some(bin) = find_in_path(&self.o.redis_bin) else {
            eprintln!(
                "compare: skipping redis: {} not found (install Redis 7, e.g. `apt-get install redis-server`)",
                self.o.redis_bin
            );
            return Ok(());
        };
        for (durability, aof) in [
            (
                "full",
                &["--appendonly", "yes", "--appendfsync", "always"][..],
            ),
            (
                "delayed",
                &["--appendonly", "yes", "--appendfsync", "everysec"][..],
            ),
            ("none", &["--appendonly", "no"][..]),
        ] {
            let port = self.port();
            let dir = self.work.join(format!("redis-{durability}"));
            fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let mut cmd = Command::new(&bin);
            cmd.args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--daemonize",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .args(aof);
            let log = self.work.join(format!("redis-{durability}.log"));
            self.resp_suite("redis", durability, cmd, port, &log)?;
        }
        Ok(())
    }

    fn durakv(&mut self) -> Result<(), String> {
        let bin = self.o.durakv_bin.clone();
        if !bin.is_file() {
            eprintln!(
                "compare: skipping durakv: {} not found (build it with `cargo build --release -p durakv` or pass --durakv-bin)",
                bin.display()
            );
            return Ok(());
        }
        for durability in ["full", "delayed", "none"] {
            let port = self.port();
            let dir = self.work.join(format!("durakv-{durability}"));
            fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let mut cmd = Command::new(&bin);
            cmd.args(["serve", "--port", &port.to_string(), "--dir"])
                .arg(&dir)
                .args(["--durability", durability]);
            let log = self.work.join(format!("durakv-{durability}.log"));
            self.resp_suite("durakv", durability, cmd, port, &log)?;
        }
        Ok(())
    }

    fn sqlite(&mut self) -> Result<(), String> {
        for (durability, sync) in [("full", "FULL"), ("delayed", "NORMAL")] {
            let path = self.work.join(format!("sqlite-{durability}.db"));
            let props = [
                ("sqlite.path", path.display().to_string()),
                ("sqlite.synchronous", sync.to_string()),
                ("db.batchsize", self.o.batch.to_string()),
            ];
            self.ycsb("sqlite", durability, "sqlite", &props)?;
        }
        Ok(())
    }

    fn postgres(&mut self) -> Result<(), String> {
        let Some(bin_dir) = pg_bin_dir(self.o.pg_bin_dir.as_deref()) else {
            eprintln!(
                "compare: skipping postgres: initdb/pg_ctl not found (install PostgreSQL, e.g. `apt-get install postgresql`, or pass --pg-bin-dir)"
            );
            return Ok(());
        };
        let port = self.port();
        let base = self.work.join("postgres");
        let data = base.join("data");
        let log = base.join("server.log");
        fs::create_dir_all(&base).map_err(|e| e.to_string())?;
        // PostgreSQL refuses to run as root; run it as the `postgres` user then.
        let run_as = if running_as_root() {
            let (uid, gid) = user_ids("postgres").ok_or(
                "running as root and there is no `postgres` user to run PostgreSQL as; create one or run as a normal user",
            )?;
            std::os::unix::fs::chown(&base, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", base.display()))?;
            Some("postgres")
        } else {
            None
        };
        let pg = |args: &[&str]| -> Command {
            let mut c = match run_as {
                Some(user) => {
                    let mut c = Command::new("runuser");
                    c.args(["-u", user, "--"]).arg(bin_dir.join(args[0]));
                    c
                }
                None => Command::new(bin_dir.join(args[0])),
            };
            c.args(&args[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            c
        };
        let data_s = data.display().to_string();
        let status = pg(&[
            "initdb",
            "-D",
            &data_s,
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
        ])
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run initdb: {e}"))?;
        if !status.success() {
            return Err(format!("initdb failed ({status})"));
        }
        let server_opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections={}",
            base.display(),
            self.o.threads + 20
        );
        let log_s = log.display().to_string();
        let status = pg(&[
            "pg_ctl",
            "-D",
            &data_s,
            "-l",
            &log_s,
            "-w",
            "-t",
            "60",
            "-o",
            &server_opts,
            "start",
        ])
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
        if !status.success() {
            return Err(format!(
                "pg_ctl start failed ({status}); log: {}",
                tail(&log)
            ));
        }
        let stop_cmd = {
            let mut c = pg(&["pg_ctl", "-D", &data_s, "-m", "fast", "-w", "stop"]);
            c.stderr(Stdio::null());
            c
        };
        let _server = Server {
            label: format!("postgres (port {port})"),
            child: None,
            stop: Some(Box::new(move || {
                let mut c = stop_cmd;
                let _ = c.status();
            })),
        };
        wait_for_port(port, None, Duration::from_secs(30))?;
        let url = format!("postgresql://postgres@127.0.0.1:{port}/postgres");
        for (durability, sync) in [("full", "on"), ("delayed", "off")] {
            drop_table(&url)?;
            let props = [
                ("db.url", url.clone()),
                ("postgres.synchronous_commit", sync.to_string()),
                ("db.batchsize", self.o.batch.to_string()),
            ];
            self.ycsb("postgres", durability, "postgres", &props)?;
        }
        Ok(())
    }
}

fn drop_table(url: &str) -> Result<(), String> {
    let config = crate::db::postgres::parse_db_url(url)?;
    block_on_small(async move {
        let (client, conn) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| format!("cannot connect to {url}: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
            .batch_execute("DROP TABLE IF EXISTS usertable")
            .await
            .map_err(|e| format!("cannot drop usertable: {e}"))
    })?
}

fn running_as_root() -> bool {
    // /proc/self is owned by the process's effective user.
    fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn user_ids(user: &str) -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, user]).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .flatten()
    };
    Some((id("-u")?, id("-g")?))
}

/// `--pg-bin-dir`, else the directory of `initdb` on PATH (symlinks
/// resolved, so `postgres` is found next to it), else the newest
/// `/usr/lib/postgresql/*/bin`.
fn pg_bin_dir(given: Option<&Path>) -> Option<PathBuf> {
    let ok = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(d) = given {
        return ok(d).then(|| d.to_path_buf());
    }
    if let Some(p) = find_in_path("initdb") {
        if let Some(dir) = fs::canonicalize(&p)
            .ok()
            .and_then(|c| c.parent().map(Path::to_path_buf))
        {
            if ok(&dir) {
                return Some(dir);
            }
        }
    }
    let mut dirs: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| ok(d))
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, d)| d)
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

pub fn table(rows: &[CompareRow]) -> String {
    let mut s = format!(
        "{:<9} {:<10} {:<14} {:>9} {:>8} {:>12} {:>12} {:>13} {:>9} {:>7}\n",
        "system",
        "durability",
        "workload",
        "records",
        "threads",
        "ops/s",
        "avg read ms",
        "avg write ms",
        "p99 ms",
        "errors"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<9} {:<10} {:<14} {:>9} {:>8} {:>12.0} {:>12} {:>13} {:>9.3} {:>7}",
            r.system,
            r.durability,
            r.workload,
            r.records,
            r.threads,
            r.ops_per_sec,
            fmt_ms(r.avg_read_ms),
            fmt_ms(r.avg_write_ms),
            r.p99_ms,
            r.errors
        );
    }
    s
}

fn csv(rows: &[CompareRow]) -> String {
    let mut s = String::from(
        "system,durability,reported_durability,workload,records,threads,ops_per_sec,avg_read_ms,avg_write_ms,p99_ms,errors\n",
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},\"{}\",{},{},{},{:.2},{},{},{:.4},{}",
            r.system,
            r.durability,
            r.reported_durability.replace('"', "'"),
            r.workload,
            r.records,
            r.threads,
            r.ops_per_sec,
            opt(r.avg_read_ms),
            opt(r.avg_write_ms),
            r.p99_ms,
            r.errors
        );
    }
    s
}

fn chart(rows: &[CompareRow], workload: &str, title: &str) -> Option<String> {
    let picked: Vec<&CompareRow> = rows.iter().filter(|r| r.workload == workload).collect();
    if picked.is_empty() {
        return None;
    }
    let avg = |r: &CompareRow| match (r.avg_read_ms, r.avg_write_ms) {
        (Some(a), Some(b)) => Some((a + b) / 2.0),
        (a, b) => a.or(b),
    };
    Some(
        BarLineChart {
            title: title.into(),
            x_label: "system / durability".into(),
            categories: picked
                .iter()
                .map(|r| format!("{}/{}", r.system, r.durability))
                .collect(),
            bar_label: "throughput (ops/sec)".into(),
            bars: picked.iter().map(|r| r.ops_per_sec).collect(),
            line_label: "average latency (ms)".into(),
            line: picked.iter().map(|r| avg(r)).collect(),
        }
        .to_svg(),
    )
}

pub fn run_compare(o: &CompareOptions) -> Result<Vec<CompareRow>, String> {
    let work = match &o.workdir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("durakv-compare-{}", std::process::id())),
    };
    fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    eprintln!("compare: data directories under {}", work.display());
    let mut ctx = Ctx {
        o,
        work: work.clone(),
        next_port: o.base_port,
        rows: Vec::new(),
    };
    let mut result = Ok(());
    for s in &o.systems {
        let r = match s.as_str() {
            "redis" => ctx.redis(),
            "postgres" => ctx.postgres(),
            "sqlite" => ctx.sqlite(),
            "durakv" => ctx.durakv(),
            _ => Ok(()),
        };
        if let Err(e) = r {
            eprintln!("compare: {s} failed: {e}");
            result = Err(format!("{s}: {e}"));
        }
    }
    if !o.keep {
        let _ = fs::remove_dir_all(&work);
    }
    result.map(|_| ctx.rows.clone()).or_else(|e| {
        if ctx.rows.is_empty() {
            Err(e)
        } else {
            Ok(ctx.rows)
        }
    })
}

/// `durakv bench compare ...`
pub fn main(args: &[String]) -> i32 {
    let o = match parse_compare(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let rows = match run_compare(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("compare: {e}");
            return 1;
        }
    };
    print!("{}", table(&rows));
    let mut files = vec![(format!("{}.csv", o.out), csv(&rows))];
    files.push((
        format!("{}.json", o.out),
        serde_json::to_string_pretty(&rows).unwrap_or_default(),
    ));
    if let Some(svg) = chart(
        &rows,
        "ycsb-a",
        "YCSB workload A: throughput and average latency",
    ) {
        files.push((format!("{}-ycsb-a.svg", o.out), svg));
    }
    if let Some(svg) = chart(
        &rows,
        "memtier-1:10",
        "memtier 1:10: throughput and average latency",
    ) {
        files.push((format!("{}-memtier.svg", o.out), svg));
    }
    let mut code = i32::from(rows.iter().any(|r| r.errors > 0));
    for (path, body) in files {
        match fs::write(&path, body) {
            Ok(()) => eprintln!("wrote {path}"),
            Err(e) => {
                eprintln!("cannot write {path}: {e}");
                code = 1;
            }
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_options() {
        let a: Vec<String> = "--systems redis,sqlite --records=500 --threads 4 --keep"
            .split_whitespace()
            .map(String::from)
            .collect();
        let o = parse_compare(&a).expect("parse");
        assert_eq!(o.systems, vec!["redis", "sqlite"]);
        assert_eq!(o.records, 500);
        assert_eq!(o.threads, 4);
        assert!(o.keep);
        assert!(parse_compare(&["--systems".into(), "mysql".into()]).is_err());
    }

    #[test]
    fn table_has_a_row_per_result() {
        let r = CompareRow {
            system: "sqlite".into(),
            durability: "full".into(),
            reported_durability: "synchronous=FULL".into(),
            workload: "ycsb-a".into(),
            records: 10,
            threads: 2,
            ops_per_sec: 100.0,
            avg_read_ms: Some(0.1),
            avg_write_ms: None,
            p99_ms: 1.0,
            errors: 0,
        };
        let t = table(&[r.clone(), r]);
        assert_eq!(t.lines().count(), 3);
        assert!(t
            .lines()
            .nth(1)
            .is_some_and(|l| l.contains("sqlite") && l.contains("0.100") && l.contains(" - ")));
    }
}
