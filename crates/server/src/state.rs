//! State shared by every connection: the store, the configuration, the
//! client registry, counters, and the durable-LSN signal that releases held
//! replies.

use crate::checkpointer::Checkpoints;
use crate::client::ClientRegistry;
use crate::config::{Config, DurabilityPolicy, WalRecoveryMode};
use crate::watch::WatchRegistry;
use durakv_engine::checkpoint::Checkpointer;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::lock::DirLock;
use durakv_engine::store::{CheckpointRecovery, Store as EngineStore, StoreConfig};
use durakv_engine::txn::CommitLog;
use durakv_engine::wal::{RecoveryMode, RecoveryStats, Wal};
use durakv_engine::Durability;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// Counters reported by INFO stats; reset by CONFIG RESETSTAT.
#[derive(Default)]
pub struct Stats {
    pub total_connections_received: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub expired_keys: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub total_net_input_bytes: AtomicU64,
    pub total_net_output_bytes: AtomicU64,
    pub total_error_replies: AtomicU64,
    pub watch_aborts: AtomicU64,
    /// Writes since the last checkpoint (`rdb_changes_since_last_save`).
    pub dirty: AtomicU64,
}

impl Stats {
    pub fn reset(&self) {
        for c in [
            &self.total_connections_received,
            &self.total_commands_processed,
            &self.rejected_connections,
            &self.expired_keys,
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.total_net_input_bytes,
            &self.total_net_output_bytes,
            &self.total_error_replies,
            &self.watch_aborts,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// The keyspace plus the log writes are committed to.
pub struct Store {
    pub keyspace: Keyspace,
    pub log: Option<Arc<dyn CommitLog>>,
    /// Source of the durable LSN and of log failures.
    pub durability: Option<Arc<dyn DurabilitySource>>,
    pub wal: Option<Arc<Wal>>,
    /// What recovery found at start-up.
    pub recovery: Option<RecoveryStats>,
    /// Takes checkpoints of `keyspace` (scheduled by `crate::checkpointer`).
    pub checkpointer: Option<Arc<Checkpointer>>,
    /// What start-up did with checkpoints (loaded, fell back, resharded).
    pub checkpoint_recovery: Option<CheckpointRecovery>,
    /// Held for the server's lifetime: one server per data directory.
    pub dir_lock: Option<DirLock>,
}

impl Store {
    /// Opens the data directory described by `config`, replaying the log.
    pub fn open(config: &Config) -> Result<Store, String> {
        let mut sc = StoreConfig::new(config.dir.clone());
        sc.databases = config.databases;
        sc.shards = config.keyspace_shards;
        sc.wal_dirs = config.wal_dirs();
        sc.wal_segment_size_bytes = config.wal_segment_size_mb * 1024 * 1024;
        sc.delayed_flush_ms = config.delayed_flush_ms;
        sc.delayed_flush_bytes = config.delayed_flush_bytes;
        sc.recovery_mode = match config.wal_recovery_mode {
            WalRecoveryMode::Strict => RecoveryMode::Strict,
            WalRecoveryMode::TolerateCorruption => RecoveryMode::TolerateCorruption,
        };
        sc.checkpoint_keep = config.checkpoint_keep as usize;
        let store = EngineStore::open(&sc).map_err(|e| e.to_string())?;
        let p = store.into_parts();
        let wal = p.wal;
        Ok(Store {
            keyspace: p.keyspace,
            log: Some(wal.clone() as Arc<dyn CommitLog>),
            durability: Some(wal.clone() as Arc<dyn DurabilitySource>),
            wal: Some(wal),
            recovery: Some(p.recovery),
            checkpointer: Some(p.checkpointer),
            checkpoint_recovery: Some(p.checkpoint_recovery),
            dir_lock: Some(p.lock),
        })
    }
}

impl DurabilitySource for Wal {
    fn durable_lsn(&self) -> u64 {
        Wal::durable_lsn(self)
    }

    fn failure(&self) -> Option<String> {
        Wal::failure(self)
    }

    fn request_sync(&self) {
        Wal::request_sync(self)
    }
}

/// What the server needs to know about the log besides appending.
pub trait DurabilitySource: Send + Sync {
    fn durable_lsn(&self) -> u64;
    fn failure(&self) -> Option<String>;
    /// Ask for everything appended so far to be fsynced soon.
    fn request_sync(&self);
}

pub struct Shared {
    pub store: Store,
    pub config: RwLock<Config>,
    pub clients: ClientRegistry,
    pub watches: WatchRegistry,
    pub stats: Stats,
    pub started: Instant,
    pub run_id: String,
    /// The highest LSN known durable; connections holding replies watch it.
    pub durable_tx: watch::Sender<u64>,
    pub shutting_down: AtomicBool,
    /// Fired to stop the accept loop (SHUTDOWN, signals).
    pub shutdown_tx: watch::Sender<bool>,
    /// The address actually bound (port 0 resolves to a real port).
    pub bound_port: AtomicU64,
    /// Checkpoint scheduling and persistence counters.
    pub checkpoints: Checkpoints,
}

impl Shared {
    pub fn new(config: Config, store: Store) -> Shared {
        let run_id: String = (0..40)
            .map(|_| {
                let n: u8 = rand::random::<u8>() % 16;
                char::from_digit(n as u32, 16).unwrap_or('0')
            })
            .collect();
        let checkpoints = Checkpoints::new(
            store.checkpointer.clone(),
            store.recovery.as_ref(),
            store.checkpoint_recovery.as_ref(),
        );
        Shared {
            checkpoints,
            store,
            config: RwLock::new(config),
            clients: ClientRegistry::default(),
            watches: WatchRegistry::default(),
            stats: Stats::default(),
            started: Instant::now(),
            run_id,
            durable_tx: watch::channel(0).0,
            shutting_down: AtomicBool::new(false),
            shutdown_tx: watch::channel(false).0,
            bound_port: AtomicU64::new(0),
        }
    }

    /// The level a write from a connection with override `conn` to database
    /// `db` gets. See `docs/durability.md`, "Choosing a level".
    pub fn effective_durability(&self, conn: Option<Durability>, db: usize) -> Durability {
        let cfg = self.config.read();
        let db_level = cfg.db_durability(db);
        match (conn, cfg.durability_policy) {
            (None, _) => db_level,
            (Some(c), DurabilityPolicy::Connection) => c,
            (Some(c), DurabilityPolicy::Strictest) => {
                if c.strictness() >= db_level.strictness() {
                    c
                } else {
                    db_level
                }
            }
        }
    }

    pub fn durable_lsn(&self) -> u64 {
        match &self.store.durability {
            Some(d) => d.durable_lsn(),
            None => u64::MAX - 1,
        }
    }

    pub fn log_failure(&self) -> Option<String> {
        self.store.durability.as_ref().and_then(|d| d.failure())
    }

    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        let _ = self.shutdown_tx.send(true);
    }
}
