//! The `durakv` binary: wires the command line to the server and the
//! benchmark. All behaviour lives in the library crates.

use clap::{Arg, ArgAction, Command};
use libmimalloc_sys as ffi;
use std::alloc::GlobalAlloc;

// Many small, short-lived allocations (argument slices, reply frames) and
// millions of long-lived ones (keys, values): mimalloc handles both better
// than the system allocator, as jemalloc does for Redis.
#[global_allocator]
static GLOBAL: Counting = Counting;

/// mimalloc, counting the bytes in use for INFO's `used_memory` and
/// `maxmemory` (see `durakv_server::memory`).
///
/// Requests that need no more than 8-byte alignment, nearly all of them,
/// go to mimalloc's plain entry points: every block it hands out is 8-byte
/// aligned, and its aligned entry points (which the `mimalloc` crate's
/// allocator calls for every request) miss their fast path whenever the
/// thread's free list is empty, as it is after blocks freed by another
/// thread, and then over-allocate. Under `redis-benchmark -P 16` SET that
/// was 68 instructions per allocation, about 12% of the server's.
struct Counting;

/// What the plain entry points guarantee (mimalloc's smallest block is a
/// word, and every block size is a multiple of it).
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

// SAFETY: every call goes to mimalloc with the same pointer and size; the
// plain entry points are used only where their 8-byte alignment satisfies
// the layout. The counting touches only atomics and a const thread-local,
// and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = if layout.align() <= PLAIN_ALIGN {
            ffi::mi_malloc(layout.size())
        } else {
            ffi::mi_malloc_aligned(layout.size(), layout.align())
        } as *mut u8;
        if !p.is_null() {
            debug_assert!((p as usize).is_multiple_of(layout.align()));
            durakv_server::memory::note_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = if layout.align() <= PLAIN_ALIGN {
            ffi::mi_zalloc(layout.size())
        } else {
            ffi::mi_zalloc_aligned(layout.size(), layout.align())
        } as *mut u8;
        if !p.is_null() {
            debug_assert!((p as usize).is_multiple_of(layout.align()));
            durakv_server::memory::note_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        ffi::mi_free(ptr.cast());
        durakv_server::memory::note_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let p = if layout.align() <= PLAIN_ALIGN {
            ffi::mi_realloc(ptr.cast(), new_size)
        } else {
            ffi::mi_realloc_aligned(ptr.cast(), new_size, layout.align())
        } as *mut u8;
        if !p.is_null() {
            debug_assert!((p as usize).is_multiple_of(layout.align()));
            durakv_server::memory::note_free(layout.size());
            durakv_server::memory::note_alloc(new_size);
        }
        p
    }
}
use durakv_server::config::{Config, DIRECTIVES};

/// Purges the allocator's freed pages whose delay has passed, and frees
/// what idle threads hold, without forcing anything still in use.
fn release_freed_memory() {
    // SAFETY: mi_collect takes a flag and touches only mimalloc's own
    // state, which it synchronises itself.
    unsafe { ffi::mi_collect(false) }
}

/// mimalloc's version as Redis names its allocator (`jemalloc-5.3.0`).
fn allocator_name() -> String {
    // SAFETY: mi_version reads a constant.
    let v = unsafe { ffi::mi_version() };
    // Major, then two digits of minor and two of patch: 30302 is 3.3.2.
    format!("mimalloc-{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
}

/// The memory mimalloc has committed: on Linux it estimates its resident
/// set by the same figure.
fn allocator_stats() -> durakv_server::memory::AllocatorStats {
    let (mut rss, mut commit) = (0usize, 0usize);
    let null = std::ptr::null_mut();
    // SAFETY: every out-parameter is either null (not wanted) or a valid
    // pointer to a usize that lives across the call.
    unsafe {
        ffi::mi_process_info(null, null, null, &mut rss, null, &mut commit, null, null);
    }
    durakv_server::memory::AllocatorStats {
        active: commit as u64,
        resident: rss.max(commit) as u64,
    }
}

fn serve_command() -> Command {
    let mut cmd = Command::new("serve")
        .about("Start the Redis-protocol server")
        .after_help("Every directive can also be set in the file given with --config (TOML, or a redis.conf with the same names), and the ones marked [runtime] with CONFIG SET.\nPer-database durability: --durability-db-N full|delayed|none, or a [durability-db] table in the TOML file.")
        .arg(
            Arg::new("config")
                .long("config")
                .value_name("FILE")
                .help("Configuration file: durakv's TOML, or a redis.conf (read as Redis reads it); flags given on the command line override it"),
        )
        .arg(
            Arg::new("rename-command")
                .long("rename-command")
                .num_args(2)
                .value_names(["COMMAND", "NEW_NAME"])
                .action(ArgAction::Append)
                .help("Serve COMMAND under NEW_NAME only (\"\" removes it), as Redis's rename-command; repeat for more"),
        )
        .arg(
            Arg::new("config-file")
                .value_name("FILE")
                .conflicts_with("config")
                .help("The configuration file as a first argument, as redis-server takes it (same as --config)"),
        )
        .arg(
            Arg::new("durability-db")
                .long("durability-db")
                .value_name("N=LEVEL")
                .action(ArgAction::Append)
                .help("Durability for one database, e.g. --durability-db 3=none (same as --durability-db-3 none)"),
        );
    for d in DIRECTIVES {
        let runtime = if d.runtime { " [runtime]" } else { "" };
        let mut arg = Arg::new(d.name)
            .long(d.name)
            .value_name("VALUE")
            .help(format!(
                "{}{} [default: {}]",
                d.help,
                runtime,
                display_default(d.default)
            ));
        if d.repeatable {
            arg = arg.action(ArgAction::Append);
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

fn display_default(d: &str) -> &str {
    if d.is_empty() {
        "\"\""
    } else {
        d
    }
}

fn cli() -> Command {
    Command::new("durakv")
        .version(env!("CARGO_PKG_VERSION"))
        .about("durakv: a Redis-protocol key-value store that keeps every write it acknowledges")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(serve_command())
        .subcommand(
            Command::new("bench")
                .about("Benchmark durakv, Redis, PostgreSQL or SQLite (YCSB and memtier workloads); see `durakv bench help`")
                .disable_help_flag(true)
                .arg(Arg::new("args").num_args(0..).trailing_var_arg(true).allow_hyphen_values(true)),
        )
}

/// Builds the configuration: defaults, then the file, then flags.
fn config_from(m: &clap::ArgMatches) -> Result<Config, String> {
    let mut config = Config::default();
    let file = m
        .get_one::<String>("config")
        .or(m.get_one::<String>("config-file"));
    if let Some(path) = file {
        config.load_file(path)?;
    }
    // `databases` first, since per-database directives are checked against it.
    if let Some(v) = m.get_one::<String>("databases") {
        config.set("databases", v)?;
    }
    for d in DIRECTIVES {
        if d.name == "databases" {
            continue;
        }
        if let Some(values) = m.get_many::<String>(d.name) {
            let joined: Vec<&str> = values.map(String::as_str).collect();
            config
                .set(d.name, &joined.join("\n"))
                .map_err(|e| format!("--{}: {e}", d.name))?;
        }
    }
    if let Some(pairs) = m.get_occurrences::<String>("rename-command") {
        for pair in pairs {
            let pair: Vec<&String> = pair.collect();
            config
                .rename_command(pair[0], pair[1])
                .map_err(|e| format!("--rename-command {} {}: {e}", pair[0], pair[1]))?;
        }
    }
    if let Some(values) = m.get_many::<String>("durability-db") {
        for v in values {
            let (db, level) = v
                .split_once('=')
                .ok_or_else(|| format!("--durability-db expects N=LEVEL, got '{v}'"))?;
            config.set(&format!("durability-db-{db}"), level)?;
        }
    }
    Ok(config)
}

/// Rewrites `--durability-db-N value` into `--durability-db N=value`, since
/// clap cannot declare a flag per database number.
fn normalize_args(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if let Some(n) = a.strip_prefix("--durability-db-") {
            let (n, value) = match n.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (n.to_string(), it.next()),
            };
            out.push("--durability-db".into());
            out.push(format!("{n}={}", value.unwrap_or_default()));
        } else {
            out.push(a);
        }
    }
    out
}

/// Logs at `level` to standard output, or appended to `logfile` when one
/// is set (as Redis's `logfile`, relative to the working directory).
fn init_logging(level: &str, logfile: &str) -> Result<(), String> {
    let filter = match level {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "error",
    };
    let env = tracing_subscriber::EnvFilter::try_from_env("DURAKV_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env)
        .with_target(false);
    if logfile.is_empty() {
        let _ = builder.try_init();
        return Ok(());
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logfile)
        .map_err(|e| format!("Can't open the log file: {logfile}: {e}"))?;
    let _ = builder
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
    Ok(())
}

/// Started under redis-server's name (a link, as a drop-in replacement):
/// the arguments are `serve`'s, as redis-server's are.
fn as_redis_server(mut args: Vec<String>) -> Vec<String> {
    let name = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned());
    if name.as_deref() == Some("redis-server") {
        if matches!(args.get(1).map(String::as_str), Some("-v" | "--version")) {
            // What scripts that check redis-server's version parse.
            println!(
                "Redis server v={} sha=00000000:0 malloc=mimalloc bits=64 build=durakv-{}",
                durakv_server::cmd::connection::REDIS_COMPAT_VERSION,
                env!("CARGO_PKG_VERSION")
            );
            std::process::exit(0);
        }
        args.insert(1, "serve".into());
    }
    args
}

fn main() {
    let args = as_redis_server(std::env::args().collect());
    if args.get(1).map(String::as_str) == Some("bench") {
        std::process::exit(durakv_bench::run(args[2..].to_vec()));
    }
    let matches = cli().get_matches_from(normalize_args(args));
    match matches.subcommand() {
        Some(("serve", m)) => {
            let config = match config_from(m) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("durakv: {e}");
                    std::process::exit(2);
                }
            };
            if config.daemonize {
                if let Err(e) = durakv_server::service::daemonize() {
                    eprintln!("durakv: {e}");
                    std::process::exit(1);
                }
            }
            if let Err(e) = init_logging(&config.loglevel, &config.logfile) {
                eprintln!("durakv: {e}");
                std::process::exit(1);
            }
            durakv_server::memory::set_release_hook(release_freed_memory);
            durakv_server::memory::set_allocator(allocator_name(), allocator_stats);
            if let Err(e) = durakv_server::run(config) {
                tracing::error!("{e}");
                eprintln!("durakv: {e}");
                std::process::exit(1);
            }
        }
        _ => unreachable!("clap requires a subcommand"),
    }
}
