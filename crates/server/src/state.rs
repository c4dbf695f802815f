//! State shared by every connection: the store, the configuration, the
//! client registry, counters, and the durable-LSN signal that releases held
//! replies.

use crate::checkpointer::Checkpoints;
use crate::client::ClientRegistry;
use crate::config::{Config, WalRecoveryMode};
use crate::durable_wait::DurableWaiters;
use crate::stripe::Counter;
use crate::watch::WatchRegistry;
use durakv_engine::checkpoint::Checkpointer;
use durakv_engine::io::FileSystem;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::lock::DirLocks;
use durakv_engine::store::{CheckpointRecovery, Store as EngineStore, StoreConfig};
use durakv_engine::txn::CommitError;
use durakv_engine::wal::{RecoveryMode, RecoveryStats, Wal};
use durakv_engine::Durability;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// Counters reported by INFO stats; reset by CONFIG RESETSTAT. Striped
/// (`crate::stripe`): every command adds to some of them.
#[derive(Default)]
pub struct Stats {
    pub total_connections_received: Counter,
    pub total_commands_processed: Counter,
    pub rejected_connections: Counter,
    /// The keyspace's count of expired keys (`Keyspace::expired_keys`,
    /// which counts lazy and active expiry alike) when stats were last
    /// reset or the server started: INFO reports the count since.
    pub expired_keys_base: AtomicU64,
    /// Keys removed by `maxmemory` eviction.
    pub evicted_keys: Counter,
    /// Clients disconnected by `maxmemory-clients`.
    pub evicted_clients: Counter,
    pub keyspace_hits: Counter,
    pub keyspace_misses: Counter,
    pub total_net_input_bytes: Counter,
    pub total_net_output_bytes: Counter,
    /// Bytes read from this replica's primary, and written to replicas.
    pub total_net_repl_input_bytes: Counter,
    pub total_net_repl_output_bytes: Counter,
    /// Reads from and writes to client sockets (Redis's
    /// `total_reads_processed` and `total_writes_processed`).
    pub total_reads_processed: Counter,
    pub total_writes_processed: Counter,
    pub total_error_replies: Counter,
    pub watch_aborts: Counter,
    /// Writes since the last checkpoint (`rdb_changes_since_last_save`).
    pub dirty: Counter,
}

impl Stats {
    pub fn reset(&self) {
        for c in [
            &self.total_connections_received,
            &self.total_commands_processed,
            &self.rejected_connections,
            &self.evicted_keys,
            &self.evicted_clients,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.total_net_input_bytes,
            &self.total_net_output_bytes,
            &self.total_net_repl_input_bytes,
            &self.total_net_repl_output_bytes,
            &self.total_reads_processed,
            &self.total_writes_processed,
            &self.total_error_replies,
            &self.watch_aborts,
        ] {
            c.set(0);
        }
    }
}

/// The keyspace plus the log writes are committed to.
pub struct Store {
    pub keyspace: Keyspace,
    /// The write-ahead log: the one handle for appending, the durable LSN
    /// and failures.
    pub wal: Arc<Wal>,
    /// What recovery found at start-up.
    pub recovery: RecoveryStats,
    /// Takes checkpoints of `keyspace` (scheduled by `crate::checkpointer`).
    pub checkpointer: Arc<Checkpointer>,
    /// What start-up did with checkpoints (loaded, fell back, resharded).
    pub checkpoint_recovery: CheckpointRecovery,
    /// What loading the data allocated (see `memory_breakdown::note_startup`):
    /// the store's own, and a Redis data directory's imported at start.
    pub loaded_bytes: AtomicU64,
    /// Held for the server's lifetime: one server per data directory.
    pub dir_lock: DirLocks,
}

impl Store {
    /// Opens the data directory described by `config`, replaying the log.
    pub fn open(config: &Config) -> Result<Store, String> {
        Self::open_on(config, None)
    }

    /// Like [`Store::open`] on another file system (tests inject faults).
    pub fn open_with(config: &Config, fs: Arc<dyn FileSystem>) -> Result<Store, String> {
        Self::open_on(config, Some(fs))
    }

    fn open_on(config: &Config, fs: Option<Arc<dyn FileSystem>>) -> Result<Store, String> {
        let mut sc = StoreConfig::new(config.dir.clone());
        sc.databases = config.databases;
        sc.shards = config.keyspace_shards;
        sc.wal_dirs = config.wal_dirs();
        sc.wal_segment_size_bytes = config.wal_segment_size_mb * 1024 * 1024;
        sc.wal_max_record_bytes = config.wal_max_record_size_mb * 1024 * 1024;
        sc.delayed_flush_ms = config.delayed_flush_ms;
        sc.wal_syncs_in_flight = config.wal_syncs_in_flight as usize;
        sc.wal_sync_overlap_us = config.wal_sync_overlap_us;
        sc.wal_sync_inline = config.wal_sync_inline;
        sc.wal_sync_gather_writers = config.sync_gather_writers();
        sc.wal_total_order = config.wal_total_order;
        sc.wal_preallocate = config.wal_preallocate;
        sc.delayed_flush_bytes = config.delayed_flush_bytes;
        sc.recovery_mode = match config.wal_recovery_mode {
            WalRecoveryMode::Strict => RecoveryMode::Strict,
            WalRecoveryMode::TolerateCorruption => RecoveryMode::TolerateCorruption,
        };
        sc.checkpoint_keep = config.checkpoint_keep as usize;
        sc.memory_probe =
            crate::memory::counted_bytes().map(|_| crate::memory::counted_or_zero as fn() -> u64);
        let store = match fs {
            None => EngineStore::open(&sc),
            Some(fs) => EngineStore::open_with(&sc, fs),
        }
        .map_err(|e| e.to_string())?;
        let p = store.into_parts();
        Ok(Store {
            keyspace: p.keyspace,
            wal: p.wal,
            recovery: p.recovery,
            checkpointer: p.checkpointer,
            checkpoint_recovery: p.checkpoint_recovery,
            loaded_bytes: AtomicU64::new(p.loaded_bytes),
            dir_lock: p.lock,
        })
    }
}

pub struct Shared {
    pub store: Store,
    pub config: RwLock<Config>,
    pub clients: ClientRegistry,
    pub watches: WatchRegistry,
    pub stats: Stats,
    pub started: Instant,
    pub run_id: String,
    /// The highest LSN known durable, watched by replicas' acknowledgement
    /// and by connections holding replies that wait for replicas.
    pub durable_tx: watch::Sender<u64>,
    /// Connections holding replies until the log meets their dependency.
    pub durable_waiters: Arc<DurableWaiters>,
    pub shutting_down: AtomicBool,
    /// Fired to stop the accept loop (SHUTDOWN, signals).
    pub shutdown_tx: watch::Sender<bool>,
    /// The address actually bound (port 0 resolves to a real port).
    pub bound_port: AtomicU64,
    /// Checkpoint scheduling and persistence counters.
    pub checkpoints: Checkpoints,
    /// The Lua VM, the script cache and the running script's state.
    pub scripting: crate::scripting::Scripting,
    /// Readings behind INFO's instantaneous rates.
    pub rates: crate::rates::Rates,
    /// INFO commandstats, errorstats and latencystats.
    pub cmdstats: crate::cmdstats::CommandStats,
    /// How long replies were held for durability (`crate::reply_wait`).
    pub reply_waits: crate::reply_wait::ReplyWaits,
    /// SLOWLOG.
    pub slowlog: crate::slowlog::SlowLog,
    /// The latency monitor (LATENCY LATEST and friends).
    pub latency: crate::latency::LatencyMonitor,
    /// Subscriptions, pub/sub limits, keyspace notification classes.
    pub pubsub: crate::pubsub::PubSub,
    /// Connections in MONITOR mode.
    pub monitors: crate::monitor::Monitors,
    /// Clients in blocking commands, by the keys they wait on.
    pub blocking: crate::blocking::Blocking,
    /// DEBUG's switches and the replication ID it may change.
    pub debug: crate::cmd::debug::DebugState,
    /// CLIENT TRACKING: who may cache which keys.
    pub tracking: crate::tracking::Tracking,
    /// `maxmemory` and its eviction policy.
    pub evict: crate::evict::Eviction,
    /// Replication: this server's stream and replicas, or its primary link.
    pub repl: crate::repl::Replication,
    /// ACL users and ACL LOG.
    pub acl: crate::acl::Acl,
    /// CLIENT PAUSE in force, if any.
    pub pause: crate::pause::Pause,
    /// What `tls-port` connections are accepted with; CONFIG SET of a
    /// `tls-*` file replaces it, for connections accepted from then on.
    pub tls_acceptor: parking_lot::RwLock<Option<tokio_rustls::TlsAcceptor>>,
    /// The listening sockets; CONFIG SET `bind` and `port` rebind them.
    pub listeners: crate::listeners::Listeners,
    /// The accept loops, as a listing waits for them (`crate::settle`).
    pub doors: crate::settle::Doors,
    /// The Prometheus endpoint's socket (`metrics-port`).
    pub metrics: crate::metrics_http::Endpoint,
    /// `timeout`, read by every connection each time it goes idle.
    pub idle_timeout_secs: AtomicU64,
    /// What every write reads of the configuration, without its lock.
    pub hot: crate::hot_config::HotConfig,
}

impl Shared {
    pub fn new(config: Config, store: Store, acl: crate::acl::Acl) -> Shared {
        let run_id: String = (0..40)
            .map(|_| {
                let n: u8 = rand::random::<u8>() % 16;
                char::from_digit(n as u32, 16).unwrap_or('0')
            })
            .collect();
        let scripting = crate::scripting::Scripting::default();
        scripting.load_recovered(&store.keyspace.function_libraries());
        let checkpoints = Checkpoints::new(
            Some(store.checkpointer.clone()),
            Some(&store.recovery),
            Some(&store.checkpoint_recovery),
        );
        let pubsub = crate::pubsub::PubSub::default();
        if let Some(record) = pubsub.configure(&config) {
            store.keyspace.log_expired(record);
        }
        let tracking = crate::tracking::Tracking::new(
            crate::notify::wants_expired(pubsub.keyspace_events()),
            config.tracking_table_max_keys,
        );
        let repl = crate::repl::Replication::new(&run_id, crate::repl::backlog_bytes(&config));
        store
            .keyspace
            .set_replication_feed(repl.feed(config.encodings));
        let durable_waiters = Arc::new(DurableWaiters::new(store.wal.num_streams()));
        let hot = crate::hot_config::HotConfig::new(&config);
        let shared = Shared {
            hot,
            acl,
            pause: Default::default(),
            tls_acceptor: parking_lot::RwLock::new(None),
            listeners: crate::listeners::Listeners::default(),
            doors: Default::default(),
            metrics: crate::metrics_http::Endpoint::default(),
            repl,
            checkpoints,
            store,
            config: RwLock::new(config),
            clients: ClientRegistry::default(),
            watches: WatchRegistry::default(),
            rates: crate::rates::Rates::default(),
            cmdstats: crate::cmdstats::CommandStats::default(),
            reply_waits: crate::reply_wait::ReplyWaits::default(),
            slowlog: crate::slowlog::SlowLog::default(),
            latency: crate::latency::LatencyMonitor::default(),
            stats: Stats::default(),
            started: Instant::now(),
            run_id: run_id.clone(),
            durable_tx: watch::channel(0).0,
            durable_waiters,
            shutting_down: AtomicBool::new(false),
            shutdown_tx: watch::channel(false).0,
            bound_port: AtomicU64::new(0),
            scripting,
            pubsub,
            monitors: Default::default(),
            blocking: crate::blocking::Blocking::default(),
            debug: crate::cmd::debug::DebugState::default(),
            tracking,
            evict: crate::evict::Eviction::default(),
            idle_timeout_secs: AtomicU64::new(0),
        };
        crate::evict::apply_config(&shared);
        crate::connection::apply_config(&shared);
        crate::latency::apply_config(&shared);
        crate::repl::apply_config(&shared);
        // Recovery's replay expires keys too; INFO counts from here.
        shared.count_expired_from_now();
        shared
    }

    /// INFO's `expired_keys` counts from the keyspace's count now
    /// (start-up, CONFIG RESETSTAT).
    pub fn count_expired_from_now(&self) {
        let expired = self.store.keyspace.expired_keys();
        self.stats
            .expired_keys_base
            .store(expired, Ordering::Relaxed);
    }

    /// The level a write from a connection with override `conn` to database
    /// `db` gets. See `docs/durability.md`, "Choosing a level".
    pub fn effective_durability(&self, conn: Option<Durability>, db: usize) -> Durability {
        self.hot
            .effective_durability(conn, db)
            .unwrap_or_else(|| self.config.read().effective_durability(conn, db))
    }

    pub fn durable_lsn(&self) -> u64 {
        self.store.wal.durable_lsn()
    }

    /// Whether a reply's local dependency (`durakv_engine::dep`, without
    /// the replicated flag) is met: its stream, or every stream, has it.
    pub fn dep_met(&self, dep: u64) -> bool {
        self.store.wal.dep_met(dep)
    }

    /// Asks the log to meet a local dependency soon.
    pub fn hurry(&self, dep: u64) {
        self.store.wal.request_sync_for(dep)
    }

    pub fn log_failure(&self) -> Option<String> {
        self.store.wal.failure()
    }

    /// Brings the keyspace's per-database logging in line with the
    /// configured levels, one database per record: a database that becomes
    /// logged has its content logged whole first (`docs/durability.md`,
    /// "Which writes are logged"). Returns the LSN of the last record
    /// written (0: none), which the caller's reply waits for.
    pub fn sync_logged_dbs(&self) -> Result<u64, CommitError> {
        let ks = &self.store.keyspace;
        let wanted: Vec<bool> = {
            let cfg = self.config.read();
            (0..ks.num_dbs())
                .map(|db| cfg.db_durability(db).is_logged())
                .collect()
        };
        let mut lsn = 0;
        for (db, &logged) in wanted.iter().enumerate() {
            if ks.is_logged(db) == logged {
                continue;
            }
            let mut txn = ks.lock_all();
            txn.set_db_logged(db, logged)?;
            let out = txn.commit(self.store.wal.as_ref(), Durability::Full)?;
            lsn = lsn.max(out.lsn);
        }
        Ok(lsn)
    }

    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        // `send` would drop the value while nobody subscribes (before the
        // accept loop does, the channel's own receiver being gone).
        self.shutdown_tx.send_replace(true);
    }
}
