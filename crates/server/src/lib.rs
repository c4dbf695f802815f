//! durakv's network server: accepts Redis-protocol connections, dispatches
//! commands to the engine, and holds replies until the writes they reveal
//! are durable.
//!
//! Module map:
//! - [`config`]: every directive, its default and bounds; TOML, flags, CONFIG.
//! - [`server`]: listener, `maxclients`, protected mode, graceful shutdown.
//! - [`connection`]: per-connection read → parse → execute → reply loop,
//!   with replies held in order until their LSN is durable.
//! - [`dispatch`]: lookup, checks, MULTI queueing, locking, commit.
//! - [`command`]: the command table and handler shapes.
//! - [`acl`]: ACL users, their permission checks, ACL LOG, the ACL file.
//! - [`cmd`]: the commands, one module per family.
//! - [`client`], [`watch`]: per-connection state, client registry, WATCH.
//! - [`blocking`]: clients blocked on keys (BLPOP...), and serving them;
//!   [`arrival`]: the order their requests arrived in, across event loops.
//! - [`state`]: what all connections share.
//! - [`embedded`]: a server inside the calling process, on any file system
//!   (crash tests on a simulated disk).
//! - [`expiry`], [`memory`]: background active expiry and memory sampling.
//! - [`checkpointer`]: when checkpoints run (schedule, SAVE, BGSAVE,
//!   shutdown) and the persistence counters INFO reports.
//! - [`scripting`]: the Lua VM, the script cache, and the running
//!   script's state (BUSY, SCRIPT KILL).
//! - [`pubsub`]: subscriptions, each connection's mailbox of messages and
//!   its output buffer limit.
//! - [`pause`]: CLIENT PAUSE, the commands it holds until it ends.
//! - [`notify`]: keyspace notifications, read off the mutations a command
//!   applied and published once it commits.
//! - [`tracking`]: CLIENT TRACKING, the keys clients cache and the
//!   invalidations writes send them.
//! - [`errors`], [`glob`], [`util`]: Redis error strings and helpers.

/// The name of the runtime's threads, which run connections and commands.
pub const IO_THREAD_NAME: &str = "durakv-io";
/// Stack of each event-loop thread (see `run`).
const IO_THREAD_STACK: usize = 8 << 20;

pub mod acl;
pub mod aof_import;
pub mod arrival;
pub mod blocking;
pub mod checkpointer;
pub mod client;
pub mod client_evict;
pub mod cmd;
pub mod cmdstats;
pub mod command;
pub mod config;
pub mod config_file;
pub mod config_rewrite;
pub mod connection;
pub mod cpu_idle;
pub mod cpu_usage;
pub mod decimal;
pub mod digest;
pub mod dispatch;
pub mod durable_wait;
pub mod embedded;
pub mod errors;
pub mod evict;
pub mod expiry;
pub mod geohash;
pub mod glob;
pub mod hll;
pub mod hot_config;
pub mod latency;
pub mod listeners;
pub mod memory;
pub mod memory_breakdown;
pub mod metrics_export;
pub mod metrics_http;
pub mod monitor;
pub mod notify;
pub mod oom_score;
pub mod parked;
pub mod pause;
pub mod pubsub;
pub mod rates;
pub mod rdb_load;
pub mod rdb_value;
pub mod redis_conf;
pub mod repl;
pub mod reply_wait;
pub mod restart;
pub mod scripting;
pub mod server;
pub mod service;
pub mod settle;
pub mod signal;
pub mod slowlog;
pub mod state;
pub mod stripe;
pub mod tls;
mod tls_suites;
pub mod tracking;
pub mod unix_socket;
pub mod util;
pub mod wal_info;
pub mod watch;

pub use config::Config;

use durakv_engine::io::FileSystem;
use state::{Shared, Store};
use std::sync::Arc;

/// Opens the store described by `config` and serves until shutdown.
pub fn run(config: Config) -> Result<(), String> {
    if config.disable_thp {
        memory::disable_thp();
    }
    // Written before the data is loaded, as Redis does, so a service
    // manager waiting for it finds it early; removed when this returns.
    let _pidfile = service::PidFile::create(&config.pidfile);
    if config
        .get("tls-dh-params-file")
        .is_some_and(|v| !v.is_empty())
    {
        tracing::warn!(
            "tls-dh-params-file is not used: TLS here offers ECDHE key exchange only, never DHE"
        );
    }
    let shared = open_on(config, None)?;
    // A failure is logged; the server runs with the score it has.
    let _ = oom_score::apply(&shared, &shared.config.read());
    let before = memory::counted_or_zero();
    rdb_load::import_at_start(&shared)?;
    let imported = memory::counted_or_zero().saturating_sub(before);
    shared
        .store
        .loaded_bytes
        .fetch_add(imported, std::sync::atomic::Ordering::Relaxed);
    serve_until_shutdown(shared)
}

/// Opens the store on `fs` (tests use a fault-injecting disk) and returns
/// the state a server on it shares; call [`serve_until_shutdown`] next.
pub fn open_with(config: Config, fs: Arc<dyn FileSystem>) -> Result<Arc<Shared>, String> {
    open_on(config, Some(fs))
}

/// Opens the store on `fs` (None: the real disk).
fn open_on(config: Config, fs: Option<Arc<dyn FileSystem>>) -> Result<Arc<Shared>, String> {
    let acl = acl::file::from_config(&config)?;
    command::install_renames(&config.rename_commands)?;
    memory::note_startup();
    let store = match fs {
        Some(fs) => Store::open_with(&config, fs)?,
        None => Store::open(&config)?,
    };
    Ok(prepare(config, store, acl))
}

fn prepare(config: Config, store: Store, acl: acl::Acl) -> Arc<Shared> {
    let c = &store.checkpoint_recovery;
    if let Some(l) = &c.loaded {
        tracing::info!(
            "loaded checkpoint {} ({} keys, {} bytes) in {:.3}s",
            l.path.display(),
            l.keys,
            l.file_bytes,
            c.duration.as_secs_f64()
        );
    }
    for (path, why) in &c.fallbacks {
        tracing::warn!("skipped damaged checkpoint {}: {why}", path.display());
    }
    let r = &store.recovery;
    tracing::info!(
        "recovered {} records ({} bytes) in {:.3}s; last LSN {}",
        r.records,
        r.bytes,
        r.duration.as_secs_f64(),
        r.last_lsn
    );
    for db in 0..store.keyspace.num_dbs() {
        let logged = config.db_durability(db).is_logged();
        store.keyspace.set_logged_at_start(db, logged);
    }
    let shared = Arc::new(Shared::new(config, store, acl));
    let tx = shared.durable_tx.clone();
    let waiters = shared.durable_waiters.clone();
    shared
        .store
        .wal
        .set_durable_listener(Box::new(move |lsn, acked| {
            waiters.wake_met(lsn, acked);
            tx.send_replace(lsn);
        }));
    shared
}

/// Tasks a runtime worker runs between two polls of the sockets (tokio's
/// default).
const EVENT_INTERVAL: u32 = 61;
/// Ready sockets taken per poll: below `EVENT_INTERVAL`, see
/// `serve_until_shutdown`.
const MAX_IO_EVENTS_PER_TICK: usize = 48;

/// Serves connections until SHUTDOWN or a signal, then takes the final
/// checkpoint (unless told not to) and closes the log.
pub fn serve_until_shutdown(shared: Arc<Shared>) -> Result<(), String> {
    let threads = match shared.config.read().io_threads {
        0 => util::cores(),
        n => n,
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(threads)
        .enable_all()
        .thread_name(IO_THREAD_NAME)
        .on_thread_start(cpu_usage::note_io_thread)
        .on_thread_stop(cpu_usage::forget_io_thread)
        // Scripts run on these threads, and cjson, cmsgpack and the reply
        // conversion recurse once per level of nesting (cjson up to 1,000
        // levels, as in Redis). Tokio's default of 2 MiB overflowed on a
        // 1,000-deep JSON array in a debug build, which kills the process;
        // untouched stack costs address space only.
        .thread_stack_size(IO_THREAD_STACK)
        // A worker runs EVENT_INTERVAL tasks between two polls of the
        // sockets. Taking fewer ready sockets than that per poll keeps its
        // run queue (256 tasks) from overflowing into the shared one, and
        // leaves the rest in the kernel's ready list, which is served in
        // arrival order. With tokio's default of 1,024, 3,200 busy
        // connections kept about 2,800 tasks in the shared queue, behind
        // which every wake-up from outside the event loops waited: a `full`
        // SET, whose reply a log writer thread releases, took 82 ms at the
        // median and a GET 5.5 ms (p99 377 and 213 ms). With 48: 49 and
        // 42 ms (p99 116 and 64), about as fair as Redis's single loop, at
        // the same throughput; no change measured at 50 connections.
        .event_interval(EVENT_INTERVAL)
        .max_io_events_per_tick(MAX_IO_EVENTS_PER_TICK);
    // Tokio's LIFO slot runs the last task woken first, so two connections
    // made readable by one poll ran newest first: a PUBLISH sent just after
    // another client's UNSUBSCRIBE, or an LPUSH just after another's EXEC,
    // overtook it. Redis serves them in arrival order and its test suite
    // (and some applications) rely on it. No throughput cost measured.
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    let rt = builder
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))?;
    let scheduler = checkpointer::spawn(shared.clone())
        .map_err(|e| format!("cannot start the checkpointer: {e}"))?;
    let served = rt.block_on(server::serve(shared.clone()));
    service::notify_stopping(&shared.config.read().supervised);
    shared.checkpoints.stop();
    if scheduler.join().is_err() {
        tracing::error!("the checkpointer thread panicked");
    }
    let mut final_error = None;
    if shared.checkpoints.enabled() && shared.checkpoints.final_save() {
        tracing::info!("taking the final checkpoint before exiting");
        if let Err(e) =
            checkpointer::checkpoint_now(&shared, "shutdown", checkpointer::Pace::Foreground)
        {
            // Logged writes are safe in the log; unlogged ones are lost.
            final_error = Some(format!("final checkpoint failed: {e}"));
        }
    }
    if let Err(e) = shared.store.wal.close() {
        tracing::error!("closing the write-ahead log failed: {e}");
    }
    served.map_err(|e| e.to_string())?;
    if let Some(e) = final_error {
        return Err(e);
    }
    tracing::info!("durakv is now ready to exit, bye bye...");
    Ok(())
}
