//! Configuration directives.
//!
//! Every directive is declared once, in [`DIRECTIVES`], with its Redis name,
//! default, bounds and documentation. That one table drives all three ways to
//! set it: a TOML file (`--config FILE`), a `--name value` flag, and
//! `CONFIG GET/SET` for the ones that can change at run time. Setters parse
//! text, so the three paths cannot disagree.

use durakv_engine::value::EncodingLimits;
use durakv_engine::wal::Preallocate;
use durakv_engine::Durability;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Upper bound on `databases`, to keep per-shard database vectors small.
pub const DATABASES_MAX: usize = 1024;

/// How the configuration file is written: durakv's TOML, or Redis's
/// `redis.conf` lines (`redis_conf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigFormat {
    Toml,
    Redis,
}

/// Which level applies when both the connection and the database set one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurabilityPolicy {
    /// The connection's `CLIENT DURABILITY` level, if set, wins.
    Connection,
    /// The stricter of the connection's and the database's level.
    Strictest,
}

/// The level of a reply from a connection with override `conn` about a
/// database whose own level is `db_level`, under `policy`.
pub fn combine_levels(
    conn: Option<Durability>,
    db_level: Durability,
    policy: DurabilityPolicy,
) -> Durability {
    match (conn, policy) {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalRecoveryMode {
    Strict,
    TolerateCorruption,
}

/// `oom-score-adj`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OomScoreAdj {
    /// The process's score is left alone (restored if durakv had set it).
    No,
    /// The role's value added to the score the process had before.
    Relative,
    /// The role's value as the score.
    Absolute,
}

/// One class's `client-output-buffer-limit`: a client whose pending output
/// passes `hard_bytes`, or stays above `soft_bytes` for more than
/// `soft_secs`, is disconnected. 0 disables a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputBufferLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_secs: u64,
}

/// Where a client's pending output stands against its class's
/// [`OutputBufferLimit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputCheck {
    Within,
    /// Over the soft limit, and it was not at the last check: whoever
    /// watches soft limits with no new output must watch this client.
    NewlyOverSoft,
    /// Over the hard limit, or over the soft one for too long: the client
    /// must be disconnected.
    Exceeded,
}

impl OutputBufferLimit {
    /// Checks `pending` bytes, with `over_soft_since` the time they first
    /// passed the soft limit (set here when they pass it, cleared once they
    /// are back under). As in Redis, a soft limit is exceeded only once it
    /// has been passed for more than `soft_secs` without a break.
    pub fn check(
        &self,
        pending: u64,
        over_soft_since: &mut Option<std::time::Instant>,
    ) -> OutputCheck {
        if self.hard_bytes > 0 && pending > self.hard_bytes {
            return OutputCheck::Exceeded;
        }
        if self.soft_bytes == 0 || pending <= self.soft_bytes {
            *over_soft_since = None;
            return OutputCheck::Within;
        }
        match over_soft_since {
            None => {
                *over_soft_since = Some(std::time::Instant::now());
                OutputCheck::NewlyOverSoft
            }
            Some(t) if t.elapsed() > Duration::from_secs(self.soft_secs) => OutputCheck::Exceeded,
            Some(_) => OutputCheck::Within,
        }
    }

    /// When a client over the soft limit since `since` is over it for too
    /// long (None without a soft limit).
    pub fn soft_deadline(&self, since: Option<std::time::Instant>) -> Option<std::time::Instant> {
        if self.soft_bytes == 0 {
            return None;
        }
        Some(since? + Duration::from_secs(self.soft_secs))
    }
}

/// An [`OutputBufferLimit`] that connections and publishers read without
/// the configuration's lock (set after every CONFIG SET).
#[derive(Default)]
pub struct SharedOutputLimit {
    hard_bytes: std::sync::atomic::AtomicU64,
    soft_bytes: std::sync::atomic::AtomicU64,
    soft_secs: std::sync::atomic::AtomicU64,
}

impl SharedOutputLimit {
    pub fn store(&self, l: OutputBufferLimit) {
        use std::sync::atomic::Ordering::Relaxed;
        self.hard_bytes.store(l.hard_bytes, Relaxed);
        self.soft_bytes.store(l.soft_bytes, Relaxed);
        self.soft_secs.store(l.soft_secs, Relaxed);
    }

    pub fn load(&self) -> OutputBufferLimit {
        use std::sync::atomic::Ordering::Relaxed;
        OutputBufferLimit {
            hard_bytes: self.hard_bytes.load(Relaxed),
            soft_bytes: self.soft_bytes.load(Relaxed),
            soft_secs: self.soft_secs.load(Relaxed),
        }
    }
}

/// The client classes of `client-output-buffer-limit`, in Redis's order and
/// with the names CONFIG GET reports: `normal` limits a connection's
/// replies not yet written, `slave` a replica's stream not yet sent, and
/// `pubsub` a subscriber's queued messages and replies.
pub const OUTPUT_CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];
/// Index of the `normal` class in [`Config::client_output_buffer_limit`].
pub const NORMAL_CLASS: usize = 0;
/// Index of the `slave` (replica) class.
pub const REPLICA_CLASS: usize = 1;
/// Index of the `pubsub` class.
pub const PUBSUB_CLASS: usize = 2;

#[derive(Clone, Debug)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    /// `tls-port` (0: no TLS listener) and its files (`crate::tls`).
    pub tls_port: u16,
    /// Port of the Prometheus endpoint (`metrics_http`); 0: none.
    pub metrics_port: u16,
    /// Address the Prometheus endpoint listens on.
    pub metrics_bind: String,
    /// `unixsocket`: a Unix socket path to listen on as well ("" = none).
    pub unixsocket: String,
    /// `unixsocketperm`: the socket file's permission bits (0 = leave the
    /// umask's).
    pub unixsocketperm: u32,
    pub tls_cert_file: String,
    pub tls_key_file: String,
    pub tls_ca_cert_file: String,
    pub tls_ca_cert_dir: String,
    /// What this server presents when it connects out (a replica to its
    /// primary); `tls-cert-file`/`tls-key-file` when empty.
    pub tls_client_cert_file: String,
    pub tls_client_key_file: String,
    pub tls_auth_clients: crate::tls::ClientAuth,
    /// A replica connects to its primary over TLS.
    pub tls_replication: bool,
    pub dir: PathBuf,
    pub requirepass: Option<String>,
    /// `user` lines: `<name> <rule> ...`, one per user.
    pub users: Vec<String>,
    /// The ACL file ACL LOAD / ACL SAVE use; users come from it at start.
    pub aclfile: Option<PathBuf>,
    pub acllog_max_len: usize,
    /// `acl-pubsub-default allchannels`: new users get every channel.
    pub acl_pubsub_default_all: bool,
    pub maxclients: usize,
    pub proto_max_bulk_len: u64,
    pub client_query_buffer_limit: u64,
    pub databases: usize,
    pub protected_mode: bool,
    pub timeout_secs: u64,
    pub tcp_keepalive_secs: u64,
    pub loglevel: String,
    pub logfile: String,
    pub maxmemory_bytes: u64,
    /// What to do over `maxmemory`: refuse writes, or evict which keys.
    pub maxmemory_policy: crate::evict::Policy,
    /// Keys sampled per database and shard when looking for one to evict.
    pub maxmemory_samples: u64,
    /// 0..=100: how long one command may spend evicting (100 = unbounded).
    pub maxmemory_eviction_tenacity: u64,
    pub lfu_log_factor: u64,
    /// Minutes per step of LFU counter decay (0 = never decays).
    pub lfu_decay_time: u64,
    pub hz: u64,
    /// Redis's testing delays, per key, in microseconds (negative: one
    /// microsecond once in that many keys): `key-load-delay` while a full
    /// sync loads, `rdb-key-save-delay` while one is produced.
    pub key_load_delay: i64,
    pub rdb_key_save_delay: i64,
    pub keyspace_shards: usize,
    /// Redis's `disable-thp`: transparent huge pages off for the process.
    pub disable_thp: bool,
    /// `oom-score-adj`: how the process's OOM score is set by role
    /// (`crate::oom_score`).
    pub oom_score_adj: OomScoreAdj,
    /// `oom-score-adj-values`: for a primary, a replica, and a background
    /// child (durakv forks none; the third is kept for Redis's files).
    pub oom_score_adj_values: [i32; 3],
    pub durability: Durability,
    pub durability_db: BTreeMap<usize, Durability>,
    pub durability_policy: DurabilityPolicy,
    /// `min-replicas-to-ack`: replicas a `replicated` write must be durable on.
    pub min_replicas_to_ack: u64,
    /// `replicated-timeout-ms`: how long a `replicated` reply waits for them.
    pub replicated_timeout_ms: u64,
    /// `min-replicas-to-write` / `min-replicas-max-lag` (Redis's): writes are
    /// refused with fewer replicas than this that acknowledged recently.
    pub min_replicas_to_write: u64,
    pub min_replicas_max_lag: u64,
    pub wal_dir: Vec<PathBuf>,
    pub wal_segment_size_mb: u64,
    pub wal_max_record_size_mb: u64,
    pub wal_syncs_in_flight: u64,
    pub wal_sync_overlap_us: u64,
    /// `wal-sync-gather-writers`; None: `auto` (`Config::sync_gather_writers`).
    pub wal_sync_gather_writers: Option<u64>,
    pub wal_sync_inline: bool,
    pub wal_preallocate: Preallocate,
    /// `wal-ordering total`: see `WalConfig::total_order`.
    pub wal_total_order: bool,
    pub delayed_flush_ms: u64,
    pub delayed_flush_bytes: u64,
    pub wal_recovery_mode: WalRecoveryMode,
    pub recovery_target_secs: u64,
    pub checkpoint_wal_size_mb: u64,
    pub checkpoint_keep: u64,
    /// Checkpoint file format version written (`checkpoint-format-version`):
    /// the newest, or the one before it for a rollback to an older build.
    pub checkpoint_format_version: u32,
    /// The file the configuration was loaded from, if any.
    pub config_file: String,
    /// The format of `config_file`, which CONFIG REWRITE writes back.
    pub config_format: ConfigFormat,
    /// `tcp-backlog`: connections each listening socket queues unaccepted.
    pub tcp_backlog: i32,
    /// `pidfile`: where the process id is written at start ("" = nowhere).
    pub pidfile: String,
    /// `supervised`: how readiness is told to a service manager (no,
    /// upstart, systemd, auto).
    pub supervised: String,
    /// `daemonize`: detach into the background at start.
    pub daemonize: bool,
    /// `rename-command` lines of a redis.conf: (command, new name or "").
    pub rename_commands: Vec<(String, String)>,
    pub io_threads: usize,
    /// `busy-reply-threshold` (`lua-time-limit`): how long a script runs
    /// before other clients get -BUSY and SCRIPT KILL may stop it; 0 = never.
    pub busy_reply_threshold_ms: u64,
    /// Compact-encoding thresholds (`hash-max-listpack-entries`, ...).
    pub encodings: EncodingLimits,
    /// `notify-keyspace-events`: the keyspace notification classes
    /// (`crate::notify::class`), 0 = off.
    pub notify_keyspace_events: u32,
    /// `client-output-buffer-limit`, per class of [`OUTPUT_CLASSES`].
    pub client_output_buffer_limit: [OutputBufferLimit; 3],
    /// `hll-sparse-max-bytes`: the size past which a sparse HyperLogLog
    /// is promoted to the dense encoding.
    pub hll_sparse_max_bytes: u64,
    /// `tracking-table-max-keys`: keys CLIENT TRACKING remembers; 0 = no limit.
    pub tracking_table_max_keys: u64,
    /// `slowlog-log-slower-than` (microseconds; -1 logs nothing).
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: u64,
    /// `latency-monitor-threshold` (milliseconds; 0 turns the monitor off).
    pub latency_monitor_threshold: u64,
    /// `latency-tracking`: per-command latency histograms.
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: what INFO latencystats reports.
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// Redis compatibility directives accepted and reported but without
    /// effect in durakv (`appendonly`, `save`, ...): name → value.
    pub compat: BTreeMap<&'static str, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            tls_port: 0,
            metrics_port: 0,
            metrics_bind: "127.0.0.1".into(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            tls_ca_cert_file: String::new(),
            tls_ca_cert_dir: String::new(),
            tls_client_cert_file: String::new(),
            tls_client_key_file: String::new(),
            tls_auth_clients: crate::tls::ClientAuth::Required,
            tls_replication: false,
            dir: PathBuf::from("./data"),
            requirepass: None,
            users: Vec::new(),
            aclfile: None,
            acllog_max_len: 128,
            acl_pubsub_default_all: false,
            maxclients: 10_000,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            databases: 16,
            protected_mode: true,
            timeout_secs: 0,
            tcp_keepalive_secs: 300,
            loglevel: "notice".into(),
            logfile: String::new(),
            unixsocket: String::new(),
            unixsocketperm: 0,
            maxmemory_bytes: 0,
            maxmemory_policy: crate::evict::Policy::NoEviction,
            maxmemory_samples: 5,
            maxmemory_eviction_tenacity: 10,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            hz: 10,
            key_load_delay: 0,
            rdb_key_save_delay: 0,
            keyspace_shards: durakv_engine::keyspace::DEFAULT_SHARD_COUNT,
            disable_thp: true,
            oom_score_adj: OomScoreAdj::No,
            oom_score_adj_values: [0, 200, 800],
            durability: Durability::Full,
            durability_db: BTreeMap::new(),
            durability_policy: DurabilityPolicy::Connection,
            min_replicas_to_ack: 1,
            replicated_timeout_ms: 5000,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            wal_dir: Vec::new(),
            wal_segment_size_mb: 64,
            wal_max_record_size_mb: 1024,
            wal_syncs_in_flight: 6,
            wal_sync_overlap_us: 500,
            wal_sync_gather_writers: None,
            wal_sync_inline: true,
            wal_total_order: true,
            wal_preallocate: Preallocate::Auto,
            delayed_flush_ms: 10,
            delayed_flush_bytes: 1024 * 1024,
            wal_recovery_mode: WalRecoveryMode::Strict,
            recovery_target_secs: 60,
            checkpoint_wal_size_mb: 1024,
            checkpoint_keep: 2,
            checkpoint_format_version: durakv_engine::checkpoint::format::FORMAT_VERSION,
            config_file: String::new(),
            config_format: ConfigFormat::Toml,
            tcp_backlog: 511,
            pidfile: String::new(),
            supervised: "no".into(),
            daemonize: false,
            rename_commands: Vec::new(),
            io_threads: 0,
            busy_reply_threshold_ms: 5000,
            encodings: EncodingLimits::default(),
            notify_keyspace_events: 0,
            hll_sparse_max_bytes: 3000,
            tracking_table_max_keys: 1_000_000,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            latency_monitor_threshold: 0,
            latency_tracking: true,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            client_output_buffer_limit: [
                OutputBufferLimit {
                    hard_bytes: 0,
                    soft_bytes: 0,
                    soft_secs: 0,
                },
                OutputBufferLimit {
                    hard_bytes: 256 << 20,
                    soft_bytes: 64 << 20,
                    soft_secs: 60,
                },
                OutputBufferLimit {
                    hard_bytes: 32 << 20,
                    soft_bytes: 8 << 20,
                    soft_secs: 60,
                },
            ],
            compat: BTreeMap::new(),
        }
    }
}

impl Config {
    /// The durability configured for database `db` (before any connection override).
    pub fn db_durability(&self, db: usize) -> Durability {
        self.durability_db
            .get(&db)
            .copied()
            .unwrap_or(self.durability)
    }

    /// The level a reply from a connection with override `conn` about
    /// database `db` gets. See `docs/durability.md`, "When the reply goes
    /// out".
    pub fn effective_durability(&self, conn: Option<Durability>, db: usize) -> Durability {
        combine_levels(conn, self.db_durability(db), self.durability_policy)
    }

    /// The log directories, defaulting to `<dir>/wal`.
    pub fn wal_dirs(&self) -> Vec<PathBuf> {
        if self.wal_dir.is_empty() {
            vec![self.dir.join("wal")]
        } else {
            self.wal_dir.clone()
        }
    }

    /// `wal-sync-gather-writers`, `auto` resolved: 8 writers per core. Each
    /// request-reply client keeps its core busy only part of the time, so a
    /// few per core still leave the disk's latency setting the pace, where
    /// a batch must not wait (docs/durability.md, group commit).
    pub fn sync_gather_writers(&self) -> u64 {
        self.wal_sync_gather_writers
            .unwrap_or_else(|| 8 * crate::util::cores() as u64)
    }

    /// Applies one directive from text; the error is the reason, worded for
    /// `CONFIG SET` (`argument couldn't be parsed ...`).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let lname = name.to_ascii_lowercase();
        if let Some(n) = lname.strip_prefix("durability-db-") {
            let db: usize = n
                .parse()
                .map_err(|_| format!("invalid database index '{n}'"))?;
            if db >= self.databases {
                return Err(format!(
                    "database {db} is out of range (databases is {})",
                    self.databases
                ));
            }
            if value.eq_ignore_ascii_case("default") {
                self.durability_db.remove(&db);
            } else {
                self.durability_db.insert(db, value.parse()?);
            }
            return Ok(());
        }
        let d = find(&lname).ok_or_else(|| format!("unknown directive '{name}'"))?;
        (d.set)(self, value)
    }

    /// Reads one directive as text, as `CONFIG GET` reports it.
    pub fn get(&self, name: &str) -> Option<String> {
        let lname = name.to_ascii_lowercase();
        if let Some(n) = lname.strip_prefix("durability-db-") {
            let db: usize = n.parse().ok()?;
            return (db < self.databases).then(|| self.db_durability(db).to_string());
        }
        find(&lname)
            .filter(|d| !d.name.eq("user"))
            .map(|d| (d.get)(self))
    }

    /// Every (name, value) pair whose name matches the glob `pattern`.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = DIRECTIVES
            .iter()
            // `user` lines hold passwords (ACL LIST shows users, hashed);
            // Redis's hidden test-only settings show only when named.
            .filter(|d| d.name != "user")
            .filter(|d| {
                !HIDDEN.contains(&d.name) || pattern.eq_ignore_ascii_case(d.name.as_bytes())
            })
            .filter(|d| crate::glob::glob_match(pattern, d.name.as_bytes(), true))
            .map(|d| (d.name.to_string(), (d.get)(self)))
            .collect();
        for db in 0..self.databases {
            let name = format!("durability-db-{db}");
            if crate::glob::glob_match(pattern, name.as_bytes(), true) {
                out.push((name, self.db_durability(db).to_string()));
            }
        }
        out
    }

    /// Loads a TOML file: top-level `name = value` pairs use directive names;
    /// a `[durability-db]` table maps database numbers to levels.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), String> {
        let table: toml::Table = text.parse().map_err(|e| format!("invalid TOML: {e}"))?;
        // `databases` first: other directives are validated against it.
        if let Some(v) = table.get("databases") {
            self.set("databases", &toml_text(v)?)?;
        }
        for (name, v) in &table {
            if name == "databases" {
                continue;
            }
            match v {
                toml::Value::Table(t) if name == "durability-db" => {
                    for (db, level) in t {
                        self.set(&format!("durability-db-{db}"), &toml_text(level)?)
                            .map_err(|e| format!("durability-db.{db}: {e}"))?;
                    }
                }
                toml::Value::Array(pairs) if name == "rename-command" => {
                    for pair in pairs {
                        let words: Vec<String> = match pair.as_array() {
                            Some(a) if a.len() == 2 => {
                                a.iter().map(toml_text).collect::<Result<_, _>>()?
                            }
                            _ => {
                                return Err(
                                    "rename-command takes pairs: [[\"FLUSHALL\", \"\"], ...]"
                                        .into(),
                                )
                            }
                        };
                        self.rename_command(&words[0], &words[1])
                            .map_err(|e| format!("rename-command: {e}"))?;
                    }
                }
                toml::Value::Array(items) => {
                    let d = find(name).ok_or_else(|| format!("unknown directive '{name}'"))?;
                    if !d.repeatable {
                        return Err(format!("'{name}' takes one value, not a list"));
                    }
                    let joined = items.iter().map(toml_text).collect::<Result<Vec<_>, _>>()?;
                    self.set(name, &joined.join("\n"))?;
                }
                other => self
                    .set(name, &toml_text(other)?)
                    .map_err(|e| format!("{name}: {e}"))?,
            }
        }
        Ok(())
    }
}

fn toml_text(v: &toml::Value) -> Result<String, String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => if *b { "yes" } else { "no" }.to_string(),
        other => return Err(format!("unsupported value {other}")),
    })
}

/// Directives Redis leaves out of `CONFIG GET *` (its HIDDEN_CONFIG
/// ones): they answer only when asked for by name.
const HIDDEN: &[&str] = &["key-load-delay", "rdb-key-save-delay"];

/// One configuration directive.
pub struct Directive {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
    /// Can `CONFIG SET` change it while the server runs?
    pub runtime: bool,
    /// May be given several times (`bind`, `wal-dir`).
    pub repeatable: bool,
    pub set: fn(&mut Config, &str) -> Result<(), String>,
    pub get: fn(&Config) -> String,
}

pub fn find(name: &str) -> Option<&'static Directive> {
    DIRECTIVES
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name))
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// Parses a number with Redis's memory units (`1k`, `5mb`, `2gb`).
pub fn parse_memory(v: &str) -> Result<u64, String> {
    let lower = v.trim().to_ascii_lowercase();
    let units: [(&str, u64); 8] = [
        ("kb", 1024),
        ("mb", 1024 * 1024),
        ("gb", 1024 * 1024 * 1024),
        ("k", 1000),
        ("m", 1000 * 1000),
        ("g", 1000 * 1000 * 1000),
        ("b", 1),
        ("", 1),
    ];
    for (suffix, mul) in units {
        if let Some(num) = lower.strip_suffix(suffix) {
            if let Ok(n) = num.parse::<u64>() {
                return n
                    .checked_mul(mul)
                    .ok_or_else(|| "argument is out of range".to_string());
            }
        }
    }
    Err("argument must be a memory value".into())
}

/// `client-output-buffer-limit`: groups of `<class> <hard> <soft>
/// <soft-seconds>`; classes not named keep their limits.
fn parse_output_limits(
    v: &str,
    mut limits: [OutputBufferLimit; 3],
) -> Result<[OutputBufferLimit; 3], String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    for group in words.chunks_exact(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => PUBSUB_CLASS,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let bad = || "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
        limits[class] = OutputBufferLimit {
            hard_bytes: parse_memory(group[1]).map_err(|_| bad())?,
            soft_bytes: parse_memory(group[2]).map_err(|_| bad())?,
            soft_secs: group[3].parse().map_err(|_| bad())?,
        };
    }
    Ok(limits)
}

/// An integer directive, read as Redis reads one: a signed number (so -1
/// is out of range, not "not a number"), then its range.
/// A percentile as Redis spells it in CONFIG GET and INFO latencystats:
/// `50`, `99.9` (no trailing zeros).
pub fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `latency-tracking-info-percentiles`: numbers from 0 to 100, with
/// Redis's errors.
fn parse_percentiles(v: &str) -> Result<Vec<f64>, String> {
    v.split_ascii_whitespace()
        .map(|w| {
            let p: f64 = w
                .parse()
                .ok()
                .filter(|p: &f64| p.is_finite())
                .ok_or_else(|| {
                    "Invalid latency-tracking-info-percentiles parameters".to_string()
                })?;
            if !(0.0..=100.0).contains(&p) {
                return Err(
                    "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                        .to_string(),
                );
            }
            Ok(p)
        })
        .collect()
}

fn int_in(v: &str, min: i64, max: i64) -> Result<i64, String> {
    let n: i64 = v
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

/// A C `int` directive, as Redis bounds it.
fn signed_int(v: &str) -> Result<i64, String> {
    int_in(v, i32::MIN.into(), i32::MAX.into())
}

/// A non-negative directive; every `max` given fits an i64.
fn bounded(v: &str, min: u64, max: u64) -> Result<u64, String> {
    Ok(int_in(v, min as i64, max as i64)? as u64)
}

/// An old name of a directive (`min-slaves-to-write`): it reads and sets
/// the current one's value.
macro_rules! old_name {
    ($old:literal, $new:literal, $default:literal) => {
        Directive {
            name: $old,
            default: $default,
            help: concat!("Old name of ", $new),
            runtime: true,
            repeatable: false,
            set: |c, v| c.set($new, v),
            get: |c| c.get($new).unwrap_or_default(),
        }
    };
}

/// A Redis directive that durakv accepts and reports, with Redis's default,
/// because tools, clients and Redis's own tests set or read it, but that
/// does not change durakv's behaviour (durability, for one, is governed by
/// `durability`, not by AOF/RDB settings). The README lists them.
macro_rules! compat {
    ($name:literal, $default:literal) => {
        compat!($name, $default, |v| Ok(v.to_string()), true)
    };
    ($name:literal, $default:literal, $check:expr) => {
        compat!($name, $default, $check, true)
    };
    // `$check` reads a value as Redis does (its errors, its spelling on
    // CONFIG GET); `$runtime` false: Redis refuses CONFIG SET of it.
    ($name:literal, $default:literal, $check:expr, $runtime:expr) => {
        Directive {
            name: $name,
            default: $default,
            help: "Accepted for Redis compatibility; has no effect in durakv",
            runtime: $runtime,
            repeatable: false,
            set: |c, v| {
                let check: fn(&str) -> Result<String, String> = $check;
                c.compat.insert($name, check(v)?);
                Ok(())
            },
            get: |c| {
                c.compat
                    .get($name)
                    .cloned()
                    .unwrap_or_else(|| $default.to_string())
            },
        }
    };
}

/// Checks of compatibility directives' values, with Redis's errors.
mod redis_check {
    pub fn yes_no(v: &str) -> Result<String, String> {
        let v = v.to_ascii_lowercase();
        match v.as_str() {
            "yes" | "no" => Ok(v),
            _ => Err("argument must be 'yes' or 'no'".into()),
        }
    }

    pub fn one_of(v: &str, options: &[&str]) -> Result<String, String> {
        let v = v.to_ascii_lowercase();
        if options.contains(&v.as_str()) {
            return Ok(v);
        }
        Err(format!(
            "argument(s) must be one of the following: {}",
            options.join(", ")
        ))
    }

    /// `tls-protocols`: Redis's names, at least one (`tls::acceptor`
    /// keeps those rustls speaks).
    pub fn tls_protocols(v: &str) -> Result<String, String> {
        for p in v.split_whitespace() {
            if !["tlsv1", "tlsv1.1", "tlsv1.2", "tlsv1.3"]
                .contains(&p.to_ascii_lowercase().as_str())
            {
                return Err(format!("Invalid tls-protocols specified: {p}"));
            }
        }
        Ok(v.to_string())
    }

    /// A setting only its empty default is accepted for.
    pub fn unsupported(v: &str, why: &str) -> Result<String, String> {
        if v.is_empty() {
            return Ok(String::new());
        }
        Err(why.to_string())
    }

    pub fn int(v: &str, min: i64, max: i64) -> Result<String, String> {
        Ok(super::int_in(v, min, max)?.to_string())
    }

    /// A memory value (`1mb`) of at least `min` bytes; digits past a u64
    /// are out of range, as Redis's saturating read makes them.
    pub fn memory(v: &str, min: u64) -> Result<String, String> {
        let range = || format!("argument must be between {min} and {} inclusive", i64::MAX);
        let n = match super::parse_memory(v) {
            Ok(n) => n,
            Err(_) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => return Err(range()),
            Err(e) => return Err(e),
        };
        if n < min || n > i64::MAX as u64 {
            return Err(range());
        }
        Ok(n.to_string())
    }
}

/// A file name read once at start-up (the TLS certificates and keys).
macro_rules! text_file {
    ($name:literal, $field:ident, $help:literal) => {
        Directive {
            name: $name,
            default: "",
            help: $help,
            // CONFIG SET reloads TLS (`tls::reload`), even to the same
            // path: how a renewed certificate is put in service.
            runtime: true,
            repeatable: false,
            set: |c, v| {
                c.$field = v.to_string();
                Ok(())
            },
            get: |c| c.$field.clone(),
        }
    };
}

/// A directive kept as text where the code that applies it reads it
/// (replication, TLS); `$key` is where it is stored, shared by Redis's
/// old `slave-*` name and the current one. CONFIG SET of a `tls-*` one
/// rebuilds the acceptor (`tls::reload`), or is refused with the reason.
macro_rules! stored_text {
    ($name:literal, $key:literal, $default:literal, $help:literal, $check:expr) => {
        Directive {
            name: $name,
            default: $default,
            help: $help,
            runtime: true,
            repeatable: false,
            set: |c, v| {
                let check: fn(&str) -> Result<String, String> = $check;
                c.compat.insert($key, check(v)?);
                Ok(())
            },
            get: |c| {
                c.compat
                    .get($key)
                    .cloned()
                    .unwrap_or_else(|| $default.to_string())
            },
        }
    };
}

fn repl_priority(v: &str) -> Result<String, String> {
    Ok(bounded(v, 0, i32::MAX as u64)?.to_string())
}

fn repl_ping_period(v: &str) -> Result<String, String> {
    Ok(bounded(v, 1, i32::MAX as u64)?.to_string())
}

fn repl_port(v: &str) -> Result<String, String> {
    Ok(bounded(v, 0, 65_535)?.to_string())
}

fn repl_ip(v: &str) -> Result<String, String> {
    Ok(v.to_string())
}

/// A compact-encoding threshold; Redis 7's older `*-ziplist-*` names are
/// declared as well, setting the same field.
macro_rules! encoding {
    ($name:literal, $field:ident, $default:literal, $help:literal) => {
        encoding!($name, $field, $default, $help, 0, i32::MAX as i64)
    };
    ($name:literal, $field:ident, $default:literal, $help:literal, $min:expr, $max:expr) => {
        Directive {
            name: $name,
            default: $default,
            help: $help,
            runtime: true,
            repeatable: false,
            set: |c, v| {
                let n: i64 = v
                    .parse()
                    .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
                if !($min..=$max).contains(&n) {
                    return Err(format!(
                        "argument must be between {} and {} inclusive",
                        $min, $max
                    ));
                }
                c.encodings.$field = n as _;
                Ok(())
            },
            get: |c| c.encodings.$field.to_string(),
        }
    };
}

/// `busy-reply-threshold` and its old name `lua-time-limit`: one setting.
const fn busy_reply_threshold(name: &'static str) -> Directive {
    Directive {
        name,
        default: "5000",
        help: "Milliseconds a script may run before other clients get -BUSY and SCRIPT KILL can stop it (0 = no limit)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.busy_reply_threshold_ms = bounded(v, 0, i64::MAX as u64)?;
            Ok(())
        },
        get: |c| c.busy_reply_threshold_ms.to_string(),
    }
}

/// `replicaof` and its old name `slaveof`: kept as text, read by the
/// replication task at start-up.
fn set_replicaof(c: &mut Config, v: &str) -> Result<(), String> {
    c.compat.insert("replicaof", v.to_string());
    Ok(())
}

fn get_replicaof(c: &Config) -> String {
    c.compat.get("replicaof").cloned().unwrap_or_default()
}

pub static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "bind",
        default: "127.0.0.1",
        help: "Addresses to listen on (space-separated, or the flag repeated): * is every IPv4 address, ::* every IPv6 one, and a leading - makes an address optional",
        runtime: true,
        repeatable: true,
        set: |c, v| {
            let addrs: Vec<String> = v.split_whitespace().map(String::from).collect();
            if addrs.is_empty() {
                return Err("bind needs at least one address".into());
            }
            c.bind = addrs;
            Ok(())
        },
        get: |c| c.bind.join(" "),
    },
    Directive {
        name: "port",
        default: "6379",
        help: "TCP port. 0 turns TCP off beside a unixsocket or tls-port (as in Redis); with nowhere else to listen it picks a free port and prints it",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.port = bounded(v, 0, 65535)? as u16;
            Ok(())
        },
        get: |c| c.port.to_string(),
    },
    Directive {
        name: "unixsocket",
        default: "",
        help: "Also listen on this Unix socket path (\"\" = none); a file already there is replaced",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.unixsocket = v.to_string();
            Ok(())
        },
        get: |c| c.unixsocket.clone(),
    },
    Directive {
        name: "unixsocketperm",
        default: "0",
        help: "Permissions of the unixsocket file, in octal (0 = as the umask leaves them)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.unixsocketperm = u32::from_str_radix(v, 8)
                .ok()
                .filter(|p| *p <= 0o777)
                .ok_or("argument must be between 0 and 777 (octal)")?;
            Ok(())
        },
        get: |c| format!("{:o}", c.unixsocketperm),
    },
    Directive {
        name: "tls-port",
        default: "0",
        help: "TCP port for TLS connections (0 = none); needs tls-cert-file and tls-key-file",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.tls_port = bounded(v, 0, 65535)? as u16;
            Ok(())
        },
        get: |c| c.tls_port.to_string(),
    },
    Directive {
        name: "metrics-port",
        default: "0",
        help: "TCP port of the Prometheus endpoint, GET /metrics: every INFO field as a metric (0 = none)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.metrics_port = bounded(v, 0, 65535)? as u16;
            Ok(())
        },
        get: |c| c.metrics_port.to_string(),
    },
    Directive {
        name: "metrics-bind",
        default: "127.0.0.1",
        help: "Address the Prometheus endpoint listens on; it has no authentication",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            if v.parse::<std::net::IpAddr>().is_err() {
                return Err(format!("'{v}' is not an IP address"));
            }
            c.metrics_bind = v.to_string();
            Ok(())
        },
        get: |c| c.metrics_bind.clone(),
    },
    text_file!("tls-cert-file", tls_cert_file, "The server's certificate chain (PEM) for tls-port"),
    text_file!("tls-key-file", tls_key_file, "The private key (PEM) of tls-cert-file"),
    text_file!("tls-ca-cert-file", tls_ca_cert_file, "CA certificates (PEM) that client certificates and a TLS primary's certificate must be signed by"),
    text_file!("tls-ca-cert-dir", tls_ca_cert_dir, "A directory of CA certificates (PEM files, such as /etc/ssl/certs), trusted with tls-ca-cert-file's"),
    text_file!("tls-client-cert-file", tls_client_cert_file, "The certificate (PEM) this server presents when it connects to a primary over TLS; tls-cert-file when empty"),
    text_file!("tls-client-key-file", tls_client_key_file, "The private key (PEM) of tls-client-cert-file"),
    Directive {
        name: "tls-auth-clients",
        default: "yes",
        help: "Client certificates on tls-port: yes (required), optional (checked when sent) or no (not asked for)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.tls_auth_clients = crate::tls::ClientAuth::parse(v)?;
            Ok(())
        },
        get: |c| c.tls_auth_clients.as_str().to_string(),
    },
    Directive {
        name: "tls-replication",
        default: "no",
        help: "A replica connects to its primary's tls-port over TLS, checking it against tls-ca-cert-file and presenting tls-cert-file (from its next connection on)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.tls_replication = parse_bool(v)?;
            Ok(())
        },
        get: |c| yes_no(c.tls_replication),
    },
    Directive {
        name: "dir",
        default: "./data",
        help: "Data directory (write-ahead log, checkpoints, lock file)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.dir = PathBuf::from(v);
            Ok(())
        },
        get: |c| c.dir.display().to_string(),
    },
    Directive {
        name: "requirepass",
        default: "",
        help: "Password for the default user; empty disables authentication",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.requirepass = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        get: |c| c.requirepass.clone().unwrap_or_default(),
    },
    Directive {
        name: "maxclients",
        default: "10000",
        help: "Maximum simultaneous clients; more get '-ERR max number of clients reached'. The open-files limit is raised to fit it, or it is capped to that limit with a warning",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.maxclients = bounded(v, 1, 1_000_000)? as usize;
            Ok(())
        },
        get: |c| c.maxclients.to_string(),
    },
    Directive {
        name: "proto-max-bulk-len",
        default: "512mb",
        help: "Largest bulk string a request may carry (1mb..2gb)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            let n = parse_memory(v)?;
            if !(1024 * 1024..=2 * 1024 * 1024 * 1024).contains(&n) {
                return Err("argument must be between 1048576 and 2147483648".into());
            }
            c.proto_max_bulk_len = n;
            Ok(())
        },
        get: |c| c.proto_max_bulk_len.to_string(),
    },
    Directive {
        name: "client-query-buffer-limit",
        default: "1gb",
        help: "Largest unparsed input a client may accumulate before it is disconnected",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            let n = parse_memory(v)?;
            if n < 1024 * 1024 {
                return Err("argument must be at least 1mb".into());
            }
            c.client_query_buffer_limit = n;
            Ok(())
        },
        get: |c| c.client_query_buffer_limit.to_string(),
    },
    Directive {
        name: "databases",
        default: "16",
        help: "Number of logical databases (1..1024)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.databases = bounded(v, 1, DATABASES_MAX as u64)? as usize;
            Ok(())
        },
        get: |c| c.databases.to_string(),
    },
    Directive {
        name: "protected-mode",
        default: "yes",
        help: "Without a password, serve only loopback clients even when bound beyond loopback",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.protected_mode = parse_bool(v)?;
            Ok(())
        },
        get: |c| yes_no(c.protected_mode),
    },
    Directive {
        name: "timeout",
        default: "0",
        help: "Close a client idle for this many seconds (0 = never)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.timeout_secs = bounded(v, 0, i32::MAX as u64)?;
            Ok(())
        },
        get: |c| c.timeout_secs.to_string(),
    },
    Directive {
        name: "tcp-keepalive",
        default: "300",
        help: "TCP keepalive interval in seconds (0 = off)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.tcp_keepalive_secs = bounded(v, 0, i32::MAX as u64)?;
            Ok(())
        },
        get: |c| c.tcp_keepalive_secs.to_string(),
    },
    Directive {
        name: "loglevel",
        default: "notice",
        help: "debug, verbose, notice or warning",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            let l = v.to_ascii_lowercase();
            if !["debug", "verbose", "notice", "warning", "nothing"].contains(&l.as_str()) {
                return Err("argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into());
            }
            c.loglevel = l;
            Ok(())
        },
        get: |c| c.loglevel.clone(),
    },
    Directive {
        name: "logfile",
        default: "",
        help: "Log file path; empty logs to standard output",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.logfile = v.to_string();
            Ok(())
        },
        get: |c| c.logfile.clone(),
    },
    Directive {
        name: "maxmemory",
        default: "0",
        help: "Past this many bytes in use, evict keys by maxmemory-policy or refuse writes with -OOM (0 = no limit)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.maxmemory_bytes = parse_memory(v)?;
            Ok(())
        },
        get: |c| c.maxmemory_bytes.to_string(),
    },
    Directive {
        name: "maxmemory-policy",
        default: "noeviction",
        help: "noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu, volatile-random or volatile-ttl",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.maxmemory_policy = crate::evict::Policy::parse(v)?;
            Ok(())
        },
        get: |c| c.maxmemory_policy.name().to_string(),
    },
    Directive {
        name: "maxmemory-samples",
        default: "5",
        help: "Keys sampled per database and shard to pick one to evict (1..64)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.maxmemory_samples = bounded(v, 1, 64)?;
            Ok(())
        },
        get: |c| c.maxmemory_samples.to_string(),
    },
    Directive {
        name: "maxmemory-eviction-tenacity",
        default: "10",
        help: "How long a command may evict before going ahead, 0..100 (100 = until under the limit)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.maxmemory_eviction_tenacity = bounded(v, 0, 100)?;
            Ok(())
        },
        get: |c| c.maxmemory_eviction_tenacity.to_string(),
    },
    Directive {
        name: "lfu-log-factor",
        default: "10",
        help: "How slowly the LFU counter grows with accesses",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.lfu_log_factor = bounded(v, 0, i32::MAX as u64)?;
            Ok(())
        },
        get: |c| c.lfu_log_factor.to_string(),
    },
    Directive {
        name: "lfu-decay-time",
        default: "1",
        help: "Minutes without access per step down of the LFU counter (0 = never)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.lfu_decay_time = bounded(v, 0, i32::MAX as u64)?;
            Ok(())
        },
        get: |c| c.lfu_decay_time.to_string(),
    },
    Directive {
        name: "hz",
        default: "10",
        help: "Background task frequency (active expiry cycles per second, 1..500)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            // Redis takes any int and keeps it within 1..500.
            c.hz = bounded(v, 0, i32::MAX as u64)?.clamp(1, 500);
            Ok(())
        },
        get: |c| c.hz.to_string(),
    },
    Directive {
        name: "keyspace-shards",
        default: "64",
        help: "Number of keyspace partitions, each with its own lock (power of two, 1..4096)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            let n = bounded(v, 1, 4096)? as usize;
            if !n.is_power_of_two() {
                return Err("argument must be a power of two".into());
            }
            c.keyspace_shards = n;
            Ok(())
        },
        get: |c| c.keyspace_shards.to_string(),
    },
    Directive {
        name: "io-threads",
        default: "0",
        help: "Worker threads for connections (0 = one per core)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.io_threads = bounded(v, 0, 1024)? as usize;
            Ok(())
        },
        get: |c| c.io_threads.to_string(),
    },
    Directive {
        name: "durability",
        default: "full",
        help: "Default durability: full (reply after fsync, shared by concurrent writers), delayed (reply at once, flush within delayed-flush-ms), none (memory only), replicated (as full, and durable on min-replicas-to-ack replicas)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.durability = v.parse()?;
            Ok(())
        },
        get: |c| c.durability.to_string(),
    },
    Directive {
        name: "min-replicas-to-ack",
        default: "1",
        help: "Replicas a write at durability 'replicated' must be durable on before its reply",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.min_replicas_to_ack = bounded(v, 0, 1024)?;
            Ok(())
        },
        get: |c| c.min_replicas_to_ack.to_string(),
    },
    Directive {
        name: "replicated-timeout-ms",
        default: "5000",
        help: "How long a 'replicated' reply waits for min-replicas-to-ack replicas before it fails with -NOREPLICAS",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.replicated_timeout_ms = bounded(v, 1, 86_400_000)?;
            Ok(())
        },
        get: |c| c.replicated_timeout_ms.to_string(),
    },
    Directive {
        name: "min-replicas-to-write",
        default: "0",
        help: "Refuse writes with -NOREPLICAS unless this many replicas acknowledged within min-replicas-max-lag seconds (0 = off)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.min_replicas_to_write = bounded(v, 0, i32::MAX as u64)?;
            Ok(())
        },
        get: |c| c.min_replicas_to_write.to_string(),
    },
    Directive {
        name: "min-replicas-max-lag",
        default: "10",
        help: "Seconds since its last acknowledgement within which a replica counts for min-replicas-to-write",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.min_replicas_max_lag = bounded(v, 0, i32::MAX as u64)?;
            Ok(())
        },
        get: |c| c.min_replicas_max_lag.to_string(),
    },
    old_name!("min-slaves-to-write", "min-replicas-to-write", "0"),
    old_name!("min-slaves-max-lag", "min-replicas-max-lag", "10"),
    Directive {
        name: "durability-policy",
        default: "connection",
        help: "When a connection sets CLIENT DURABILITY: 'connection' (its level wins) or 'strictest' (stricter of connection and database)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.durability_policy = match v.to_ascii_lowercase().as_str() {
                "connection" => DurabilityPolicy::Connection,
                "strictest" => DurabilityPolicy::Strictest,
                _ => return Err("argument must be 'connection' or 'strictest'".into()),
            };
            Ok(())
        },
        get: |c| match c.durability_policy {
            DurabilityPolicy::Connection => "connection".into(),
            DurabilityPolicy::Strictest => "strictest".into(),
        },
    },
    Directive {
        name: "wal-dir",
        default: "<dir>/wal",
        help: "Write-ahead log directory; repeat (one per disk) for parallel log streams",
        runtime: false,
        repeatable: true,
        set: |c, v| {
            c.wal_dir = v.split_whitespace().map(PathBuf::from).collect();
            Ok(())
        },
        get: |c| {
            c.wal_dirs()
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        },
    },
    Directive {
        name: "wal-segment-size-mb",
        default: "64",
        help: "Size of each preallocated log segment, in MiB (1..4096)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_segment_size_mb = bounded(v, 1, 4096)?;
            Ok(())
        },
        get: |c| c.wal_segment_size_mb.to_string(),
    },
    Directive {
        name: "wal-max-record-size-mb",
        default: "1024",
        help: "Largest log record, in MiB (1..1024): a command or MULTI whose writes would exceed it is refused with an error before it changes anything",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_max_record_size_mb = bounded(v, 1, 1024)?;
            Ok(())
        },
        get: |c| c.wal_max_record_size_mb.to_string(),
    },
    Directive {
        name: "wal-syncs-in-flight",
        default: "6",
        help: "Log batches per WAL directory that may be waiting for their fsync at once (1..16): a write arriving during an fsync starts its own instead of waiting for it; where fsyncs take longer than wal-sync-overlap-us, batches start evenly through one, this many per fsync",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_syncs_in_flight = bounded(v, 1, 16)?;
            Ok(())
        },
        get: |c| c.wal_syncs_in_flight.to_string(),
    },
    Directive {
        name: "wal-sync-overlap-us",
        default: "500",
        help: "Start another fsync on a WAL directory while one runs only once the running one is this old, in microseconds (0..1000000): overlapping pays on network block storage, not on a fast local disk; where fsyncs average longer than this, batches start sooner (see wal-syncs-in-flight)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_sync_overlap_us = bounded(v, 0, 1_000_000)?;
            Ok(())
        },
        get: |c| c.wal_sync_overlap_us.to_string(),
    },
    Directive {
        name: "wal-sync-gather-writers",
        default: "auto",
        help: "On a fast disk, once about this many clients write, a log batch waits up to 500 microseconds after the last fsync for as many more writes as it holds, so that one fsync serves more of them (0..1000000, 0 never; auto: 8 per CPU core): pays when the CPU, not the disk, is the bottleneck",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_sync_gather_writers = if v.eq_ignore_ascii_case("auto") {
                None
            } else {
                Some(bounded(v, 0, 1_000_000)?)
            };
            Ok(())
        },
        get: |c| match c.wal_sync_gather_writers {
            None => "auto".into(),
            Some(n) => n.to_string(),
        },
    },
    Directive {
        name: "wal-sync-inline",
        default: "yes",
        help: "On a fast disk, a connection thread writes and fsyncs the log batch its own full writes wait for (as Redis does before its event loop sleeps) instead of waking a log writer thread and then being woken by it (yes/no)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_sync_inline = parse_bool(v)?;
            Ok(())
        },
        get: |c| yes_no(c.wal_sync_inline),
    },
    Directive {
        name: "wal-preallocate",
        default: "auto",
        help: "How new log segments are preallocated: 'zeros' (every later fsync is cheaper), 'fallocate' (no extra disk bandwidth), or 'auto' (zeros while the disk has bandwidth to spare, as on a local disk; fallocate on a bandwidth-capped volume)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_preallocate = match v.to_ascii_lowercase().as_str() {
                "auto" => Preallocate::Auto,
                "zeros" => Preallocate::Zeros,
                "fallocate" => Preallocate::Fallocate,
                _ => return Err("argument must be 'auto', 'zeros' or 'fallocate'".into()),
            };
            Ok(())
        },
        get: |c| match c.wal_preallocate {
            Preallocate::Auto => "auto".into(),
            Preallocate::Zeros => "zeros".into(),
            Preallocate::Fallocate => "fallocate".into(),
        },
    },
    Directive {
        name: "wal-ordering",
        default: "total",
        help: "With several WAL directories, what a crash keeps besides every acknowledged write: 'causal' (each write comes back with the earlier writes to the keys it read or wrote and its connection's earlier writes; a `full` reply waits only for its own directory's fsync) or 'total' (a prefix of the whole commit order; every reply waits for every directory). The same with one directory",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_total_order = match v.to_ascii_lowercase().as_str() {
                "causal" => false,
                "total" => true,
                _ => return Err("argument must be 'causal' or 'total'".into()),
            };
            Ok(())
        },
        get: |c| if c.wal_total_order { "total" } else { "causal" }.into(),
    },
    Directive {
        name: "delayed-flush-ms",
        default: "10",
        help: "Under 'delayed', the longest an acknowledged write waits before it is fsynced (1..10000)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.delayed_flush_ms = bounded(v, 1, 10_000)?;
            Ok(())
        },
        get: |c| c.delayed_flush_ms.to_string(),
    },
    Directive {
        name: "delayed-flush-bytes",
        default: "1048576",
        help: "Under 'delayed', flush as soon as this many log bytes are pending",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.delayed_flush_bytes = parse_memory(v)?.max(1);
            Ok(())
        },
        get: |c| c.delayed_flush_bytes.to_string(),
    },
    Directive {
        name: "wal-recovery-mode",
        default: "strict",
        help: "On a checksum failure mid-log: 'strict' stops start-up; 'tolerate-corruption' keeps the valid prefix",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.wal_recovery_mode = match v.to_ascii_lowercase().as_str() {
                "strict" => WalRecoveryMode::Strict,
                "tolerate-corruption" => WalRecoveryMode::TolerateCorruption,
                _ => return Err("argument must be 'strict' or 'tolerate-corruption'".into()),
            };
            Ok(())
        },
        get: |c| match c.wal_recovery_mode {
            WalRecoveryMode::Strict => "strict".into(),
            WalRecoveryMode::TolerateCorruption => "tolerate-corruption".into(),
        },
    },
    Directive {
        name: "recovery-target-secs",
        default: "60",
        help: "Checkpoint before replaying the log would take longer than this",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.recovery_target_secs = bounded(v, 1, 86_400)?;
            Ok(())
        },
        get: |c| c.recovery_target_secs.to_string(),
    },
    Directive {
        name: "checkpoint-wal-size-mb",
        default: "1024",
        help: "Also checkpoint once this much log has accumulated since the last one",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.checkpoint_wal_size_mb = bounded(v, 1, 1 << 30)?;
            Ok(())
        },
        get: |c| c.checkpoint_wal_size_mb.to_string(),
    },
    Directive {
        name: "checkpoint-keep",
        default: "2",
        help: "Older checkpoints kept besides the newest",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.checkpoint_keep = bounded(v, 0, 100)?;
            Ok(())
        },
        get: |c| c.checkpoint_keep.to_string(),
    },
    Directive {
        name: "checkpoint-format-version",
        default: "6",
        help: "Checkpoint format written: 6, or 5 for a build that reads no newer (a rollback)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.checkpoint_format_version = bounded(
                v,
                durakv_engine::checkpoint::format::OLDEST_WRITTEN_VERSION as u64,
                durakv_engine::checkpoint::format::FORMAT_VERSION as u64,
            )? as u32;
            Ok(())
        },
        get: |c| c.checkpoint_format_version.to_string(),
    },
    compat!("appendonly", "no", redis_check::yes_no),
    compat!("appendfsync", "everysec", |v| redis_check::one_of(v, &["everysec", "always", "no"])),
    compat!("save", ""),
    stored_text!("slave-read-only", "replica-read-only", "yes", "Old name of replica-read-only", redis_check::yes_no),
    stored_text!("replica-read-only", "replica-read-only", "yes", "A replica refuses writes from its clients (-READONLY)", redis_check::yes_no),
    busy_reply_threshold("busy-reply-threshold"),
    busy_reply_threshold("lua-time-limit"),
    encoding!("hash-max-listpack-entries", hash_entries, "512", "Hashes with at most this many fields report the listpack encoding"),
    encoding!("hash-max-ziplist-entries", hash_entries, "512", "Old name of hash-max-listpack-entries"),
    encoding!("hash-max-listpack-value", hash_value, "64", "Hashes whose fields and values are at most this long report the listpack encoding"),
    encoding!("hash-max-ziplist-value", hash_value, "64", "Old name of hash-max-listpack-value"),
    encoding!("set-max-intset-entries", set_intset_entries, "512", "Sets of at most this many integers report the intset encoding"),
    encoding!("set-max-listpack-entries", set_entries, "128", "Sets with at most this many members report the listpack encoding"),
    encoding!("set-max-listpack-value", set_value, "64", "Sets whose members are at most this long report the listpack encoding"),
    encoding!("zset-max-listpack-entries", zset_entries, "128", "Sorted sets with at most this many members report the listpack encoding"),
    encoding!("zset-max-ziplist-entries", zset_entries, "128", "Old name of zset-max-listpack-entries"),
    encoding!("zset-max-listpack-value", zset_value, "64", "Sorted sets whose members are at most this long report the listpack encoding"),
    encoding!("zset-max-ziplist-value", zset_value, "64", "Old name of zset-max-listpack-value"),
    encoding!("list-max-listpack-size", list_size, "-2", "Lists within this size (entries if positive, -1..-5 for 4..64 KiB) report the listpack encoding", i32::MIN as i64, i32::MAX as i64),
    encoding!("list-max-ziplist-size", list_size, "-2", "Old name of list-max-listpack-size", i32::MIN as i64, i32::MAX as i64),
    Directive {
        name: "notify-keyspace-events",
        default: "",
        help: "Keyspace notification classes, in Redis's letters (K E g $ l s h z x e t m d n A); empty = off",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.notify_keyspace_events = crate::notify::parse_classes(v)?;
            Ok(())
        },
        get: |c| crate::notify::format_classes(c.notify_keyspace_events),
    },
    Directive {
        name: "client-output-buffer-limit",
        default: "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        help: "Per client class (normal, replica, pubsub): <hard> <soft> <soft-seconds>; a subscriber whose queued messages pass the hard limit, or stay over the soft one that long, is disconnected (0 = no limit; only pubsub is enforced)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.client_output_buffer_limit = parse_output_limits(v, c.client_output_buffer_limit)?;
            Ok(())
        },
        get: |c| {
            let mut out = Vec::new();
            for (name, l) in OUTPUT_CLASSES.iter().zip(&c.client_output_buffer_limit) {
                out.push(format!("{name} {} {} {}", l.hard_bytes, l.soft_bytes, l.soft_secs));
            }
            out.join(" ")
        },
    },
    // Accepting `yes` would let an operator believe the keyspace is
    // sharded across nodes.
    Directive {
        name: "cluster-enabled",
        default: "no",
        help: "Always no: durakv does not run in Redis Cluster mode",
        runtime: false,
        repeatable: false,
        set: |_, v| match parse_bool(v)? {
            false => Ok(()),
            true => Err("durakv does not run in Redis Cluster mode".into()),
        },
        get: |_| "no".into(),
    },
    compat!("list-compress-depth", "0", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    Directive {
        name: "maxmemory-clients",
        default: "0",
        help: "Disconnect the clients holding the most memory once all clients hold more than this: a memory value, or a percentage of maxmemory up to 100% (0 = no limit)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            match v.strip_suffix('%') {
                Some(p) => {
                    let p: u64 = p.parse().map_err(|_| "argument must be a memory or percent value".to_string())?;
                    if p > 100 {
                        return Err("percentage argument must be less or equal to 100".into());
                    }
                }
                None => {
                    parse_memory(v)?;
                }
            }
            c.compat.insert("maxmemory-clients", v.to_string());
            Ok(())
        },
        get: |c| c.compat.get("maxmemory-clients").cloned().unwrap_or_else(|| "0".into()),
    },
    Directive {
        name: "daemonize",
        default: "no",
        help: "Detach into the background at start (with its output sent to /dev/null unless logfile is set)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.daemonize = parse_bool(v)?;
            Ok(())
        },
        get: |c| yes_no(c.daemonize),
    },
    Directive {
        name: "pidfile",
        default: "",
        help: "Write the process id to this file at start, and remove it at exit (\"\" = no file)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.pidfile = v.to_string();
            Ok(())
        },
        get: |c| c.pidfile.clone(),
    },
    Directive {
        name: "supervised",
        default: "no",
        help: "Tell a service manager when the server is ready: systemd (sd_notify READY=1), upstart (SIGSTOP), auto (whichever started it), or no",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.supervised = redis_check::one_of(v, &["upstart", "systemd", "auto", "no"])?;
            Ok(())
        },
        get: |c| c.supervised.clone(),
    },
    Directive {
        name: "tcp-backlog",
        default: "511",
        help: "Connections each listening socket queues before they are accepted (the kernel caps it at net.core.somaxconn)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.tcp_backlog = int_in(v, 0, i64::from(i32::MAX))? as i32;
            Ok(())
        },
        get: |c| c.tcp_backlog.to_string(),
    },
    Directive {
        name: "slowlog-log-slower-than",
        default: "10000",
        help: "Commands running at least this many microseconds go into the slow log (SLOWLOG GET); 0 logs every command, -1 none",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.slowlog_log_slower_than = int_in(v, -1, i64::MAX)?;
            Ok(())
        },
        get: |c| c.slowlog_log_slower_than.to_string(),
    },
    Directive {
        name: "slowlog-max-len",
        default: "128",
        help: "Entries the slow log keeps; older ones are dropped",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.slowlog_max_len = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        get: |c| c.slowlog_max_len.to_string(),
    },
    Directive {
        name: "latency-monitor-threshold",
        default: "0",
        help: "Commands and expiry passes taking at least this many milliseconds are latency events (LATENCY LATEST); 0 turns the monitor off",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.latency_monitor_threshold = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        get: |c| c.latency_monitor_threshold.to_string(),
    },
    Directive {
        name: "latency-tracking",
        default: "yes",
        help: "Keep a latency histogram per command (LATENCY HISTOGRAM, INFO latencystats)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.latency_tracking = redis_check::yes_no(v)? == "yes";
            Ok(())
        },
        get: |c| yes_no(c.latency_tracking),
    },
    Directive {
        name: "latency-tracking-info-percentiles",
        default: "50 99 99.9",
        help: "Percentiles of each command's latency that INFO latencystats reports, space-separated",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.latency_tracking_info_percentiles = parse_percentiles(v)?;
            Ok(())
        },
        get: |c| {
            c.latency_tracking_info_percentiles
                .iter()
                .map(|&p| percentile_label(p))
                .collect::<Vec<_>>()
                .join(" ")
        },
    },
    compat!("stream-node-max-entries", "100", |v| redis_check::int(v, 0, i64::MAX)),
    compat!("stream-node-max-bytes", "4096", |v| redis_check::memory(v, 0)),
    Directive {
        name: "hll-sparse-max-bytes",
        default: "3000",
        help: "Largest sparse HyperLogLog, header included; a larger one is converted to the dense encoding",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.hll_sparse_max_bytes = parse_memory(v)?;
            if c.hll_sparse_max_bytes > i64::MAX as u64 {
                return Err("argument must be a memory value".into());
            }
            Ok(())
        },
        get: |c| c.hll_sparse_max_bytes.to_string(),
    },
    Directive {
        name: "disable-thp",
        default: "yes",
        help: "Turn transparent huge pages off for the process, as Redis does: the allocator asks for them on its arenas, and then every 4 KiB page touched makes 2 MiB resident",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.disable_thp = parse_bool(v)?;
            Ok(())
        },
        get: |c| yes_no(c.disable_thp),
    },
    compat!("activedefrag", "no", redis_check::yes_no),
    compat!("active-defrag-ignore-bytes", "104857600", |v| redis_check::memory(v, 1)),
    compat!("active-defrag-threshold-lower", "10", |v| redis_check::int(v, 0, 1000)),
    compat!("active-defrag-threshold-upper", "100", |v| redis_check::int(v, 0, 1000)),
    compat!("active-defrag-cycle-min", "1", |v| redis_check::int(v, 1, 99)),
    compat!("active-defrag-cycle-max", "25", |v| redis_check::int(v, 1, 99)),
    compat!("active-defrag-max-scan-fields", "1000", |v| redis_check::int(v, 1, i64::MAX)),
    compat!("activerehashing", "yes", redis_check::yes_no),
    compat!("dynamic-hz", "yes", redis_check::yes_no),
    Directive {
        name: "oom-score-adj",
        default: "no",
        help: "Set the process's OOM score by its role, from oom-score-adj-values: no, yes (relative: added to the score it started with) or absolute",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.oom_score_adj = match redis_check::one_of(v, &["no", "yes", "relative", "absolute"])?.as_str() {
                "no" => OomScoreAdj::No,
                "absolute" => OomScoreAdj::Absolute,
                _ => OomScoreAdj::Relative,
            };
            Ok(())
        },
        // `relative` is Redis's other name for `yes`, which it answers.
        get: |c| match c.oom_score_adj {
            OomScoreAdj::No => "no".into(),
            OomScoreAdj::Relative => "yes".into(),
            OomScoreAdj::Absolute => "absolute".into(),
        },
    },
    Directive {
        name: "oom-score-adj-values",
        default: "0 200 800",
        help: "OOM scores for a primary, a replica and a background child (three integers from -2000 to 2000)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            let words: Vec<&str> = v.split_ascii_whitespace().collect();
            if words.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            for (slot, w) in c.oom_score_adj_values.iter_mut().zip(words) {
                *slot = w
                    .parse::<i32>()
                    .ok()
                    .filter(|n| (-2000..=2000).contains(n))
                    .ok_or("Invalid oom-score-adj-values, elements must be between -2000 and 2000.")?;
            }
            Ok(())
        },
        get: |c| {
            let [a, b, d] = c.oom_score_adj_values;
            format!("{a} {b} {d}")
        },
    },
    compat!("rdbcompression", "yes", redis_check::yes_no),
    compat!("rdbchecksum", "yes", redis_check::yes_no, false),
    Directive {
        name: "rdb-key-save-delay",
        default: "0",
        help: "Testing: microseconds to wait per key while producing a full sync (negative: 1 us once in that many keys)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.rdb_key_save_delay = signed_int(v)?;
            Ok(())
        },
        get: |c| c.rdb_key_save_delay.to_string(),
    },
    Directive {
        name: "key-load-delay",
        default: "0",
        help: "Testing: microseconds to wait per key while loading a full sync (negative: 1 us once in that many keys)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.key_load_delay = signed_int(v)?;
            Ok(())
        },
        get: |c| c.key_load_delay.to_string(),
    },
    compat!("sanitize-dump-payload", "no", |v| redis_check::one_of(v, &["no", "yes", "clients"])),
    compat!("aof-use-rdb-preamble", "yes", redis_check::yes_no),
    compat!("appendfilename", "appendonly.aof", |v| Ok(v.to_string()), false),
    compat!("dbfilename", "dump.rdb"),
    compat!("lazyfree-lazy-eviction", "no", redis_check::yes_no),
    compat!("lazyfree-lazy-expire", "no", redis_check::yes_no),
    compat!("lazyfree-lazy-server-del", "no", redis_check::yes_no),
    compat!("lazyfree-lazy-user-del", "no", redis_check::yes_no),
    compat!("lazyfree-lazy-user-flush", "no", redis_check::yes_no),
    stored_text!("replica-serve-stale-data", "replica-serve-stale-data", "yes", "Accepted for Redis compatibility; has no effect in durakv", redis_check::yes_no),
    Directive {
        name: "replicaof",
        default: "",
        help: "Replicate the server at \"host port\" from start-up (REPLICAOF at run time)",
        runtime: false,
        repeatable: false,
        set: set_replicaof,
        get: get_replicaof,
    },
    Directive {
        name: "slaveof",
        default: "",
        help: "Old name of replicaof",
        runtime: false,
        repeatable: false,
        set: set_replicaof,
        get: get_replicaof,
    },
    stored_text!("slave-serve-stale-data", "replica-serve-stale-data", "yes", "Old name of replica-serve-stale-data", redis_check::yes_no),
    stored_text!("replica-priority", "replica-priority", "100", "Sentinel promotes the replica with the lowest priority first; 0 = never promote it", repl_priority),
    stored_text!("slave-priority", "replica-priority", "100", "Old name of replica-priority", repl_priority),
    stored_text!("replica-announced", "replica-announced", "yes", "Whether Sentinel lists this replica (SENTINEL REPLICAS); reported as replica_announced in INFO", redis_check::yes_no),
    stored_text!("replica-announce-ip", "replica-announce-ip", "", "Address this replica gives its primary (REPLCONF ip-address) for INFO and Sentinel, when it is reached through another address", repl_ip),
    stored_text!("slave-announce-ip", "replica-announce-ip", "", "Old name of replica-announce-ip", repl_ip),
    stored_text!("replica-announce-port", "replica-announce-port", "0", "Port this replica gives its primary (REPLCONF listening-port); 0 = the port it listens on", repl_port),
    stored_text!("slave-announce-port", "replica-announce-port", "0", "Old name of replica-announce-port", repl_port),
    stored_text!("repl-ping-replica-period", "repl-ping-replica-period", "10", "Seconds between the PINGs a primary sends its replicas, so that an idle link does not time out", repl_ping_period),
    stored_text!("repl-ping-slave-period", "repl-ping-replica-period", "10", "Old name of repl-ping-replica-period", repl_ping_period),
    stored_text!("masterauth", "masterauth", "", "Password this replica gives its primary (AUTH) when it connects", |v| Ok(v.to_string())),
    stored_text!("masteruser", "masteruser", "", "ACL user this replica logs in to its primary as, with masterauth", |v| Ok(v.to_string())),
    compat!("repl-backlog-size", "1048576", |v| redis_check::memory(v, 1)),
    compat!("repl-backlog-ttl", "3600", |v| redis_check::int(v, 0, i64::MAX)),
    compat!("repl-diskless-sync", "yes", redis_check::yes_no),
    compat!("repl-diskless-sync-delay", "5", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    compat!("repl-diskless-load", "disabled", |v| redis_check::one_of(v, &["disabled", "on-empty-db", "swapdb"])),
    Directive {
        name: "acl-pubsub-default",
        default: "resetchannels",
        help: "Channels a new ACL user gets: resetchannels (none) or allchannels",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.acl_pubsub_default_all = match v.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => return Err("argument(s) must be one of the following: allchannels, resetchannels".into()),
            };
            Ok(())
        },
        get: |c| if c.acl_pubsub_default_all { "allchannels" } else { "resetchannels" }.into(),
    },
    Directive {
        name: "user",
        default: "",
        help: "An ACL user, as `<name> <rule> ...` (repeat for more users); not together with aclfile",
        runtime: false,
        repeatable: true,
        set: |c, v| {
            let scratch = crate::acl::Acl::default();
            scratch.set_pubsub_default_all(c.acl_pubsub_default_all);
            let mut users = Vec::new();
            for line in v.lines().map(str::trim).filter(|l| !l.is_empty()) {
                crate::acl::file::parse_user(&scratch, line)?;
                users.push(line.to_string());
            }
            c.users = users;
            Ok(())
        },
        get: |c| c.users.join("\n"),
    },
    Directive {
        name: "aclfile",
        default: "",
        help: "ACL file the users are loaded from at start, and by ACL LOAD / saved to by ACL SAVE",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            c.aclfile = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        },
        get: |c| c.aclfile.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
    },
    Directive {
        name: "acllog-max-len",
        default: "128",
        help: "Most entries ACL LOG keeps",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.acllog_max_len = bounded(v, 0, i64::MAX as u64)? as usize;
            Ok(())
        },
        get: |c| c.acllog_max_len.to_string(),
    },
    Directive {
        name: "tracking-table-max-keys",
        default: "1000000",
        help: "Most keys CLIENT TRACKING remembers; over it, keys are dropped and their readers told (0 = no limit)",
        runtime: true,
        repeatable: false,
        set: |c, v| {
            c.tracking_table_max_keys = bounded(v, 0, i64::MAX as u64)?;
            Ok(())
        },
        get: |c| c.tracking_table_max_keys.to_string(),
    },
    compat!("shutdown-on-sigterm", "default", |v| redis_check::one_of(v, &["default", "save", "nosave", "now", "force"])),
    compat!("shutdown-on-sigint", "default", |v| redis_check::one_of(v, &["default", "save", "nosave", "now", "force"])),
    compat!("shutdown-timeout", "10", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    // DEBUG can stall or inspect the server: like Redis, only the
    // configuration file or command line may enable it.
    Directive {
        name: "enable-debug-command",
        default: "no",
        help: "Allow DEBUG: yes, no, or local (loopback clients only)",
        runtime: false,
        repeatable: false,
        set: |c, v| {
            let v = v.to_ascii_lowercase();
            if !["yes", "no", "local"].contains(&v.as_str()) {
                return Err("argument(s) must be one of the following: no, yes, local".into());
            }
            c.compat.insert("enable-debug-command", v);
            Ok(())
        },
        get: |c| {
            c.compat
                .get("enable-debug-command")
                .cloned()
                .unwrap_or_else(|| "no".to_string())
        },
    },
    compat!("enable-protected-configs", "no", |v| redis_check::one_of(v, &["no", "yes", "local"]), false),
    compat!("enable-module-command", "no", |v| redis_check::one_of(v, &["no", "yes", "local"]), false),
    // Redis directives of features durakv has in another form or not at
    // all, accepted so that an operator's redis.conf loads unchanged
    // (`redis_conf`), checked as Redis checks them.
    compat!("always-show-logo", "no", redis_check::yes_no, false),
    compat!("set-proc-title", "yes", redis_check::yes_no, false),
    compat!("proc-title-template", "{title} {listen-addr} {server-mode}"),
    compat!("syslog-enabled", "no", redis_check::yes_no, false),
    compat!("syslog-ident", "redis", |v| Ok(v.to_string()), false),
    compat!("syslog-facility", "local0", |v| redis_check::one_of(v, &["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]), false),
    compat!("crash-log-enabled", "yes", redis_check::yes_no),
    compat!("crash-memcheck-enabled", "yes", redis_check::yes_no),
    compat!("ignore-warnings", ""),
    compat!("jemalloc-bg-thread", "yes", redis_check::yes_no),
    compat!("active-expire-effort", "1", |v| redis_check::int(v, 1, 10)),
    compat!("io-threads-do-reads", "no", redis_check::yes_no, false),
    compat!("server_cpulist", "", |v| Ok(v.to_string()), false),
    compat!("bio_cpulist", "", |v| Ok(v.to_string()), false),
    compat!("aof_rewrite_cpulist", "", |v| Ok(v.to_string()), false),
    compat!("bgsave_cpulist", "", |v| Ok(v.to_string()), false),
    compat!("bind-source-addr", ""),
    compat!("socket-mark-id", "0", |v| redis_check::int(v, 0, i64::from(u32::MAX))),
    compat!("stop-writes-on-bgsave-error", "yes", redis_check::yes_no),
    compat!("rdb-del-sync-files", "no", redis_check::yes_no),
    compat!("rdb-save-incremental-fsync", "yes", redis_check::yes_no),
    compat!("appenddirname", "appendonlydir", |v| Ok(v.to_string()), false),
    compat!("no-appendfsync-on-rewrite", "no", redis_check::yes_no),
    compat!("auto-aof-rewrite-percentage", "100", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    compat!("auto-aof-rewrite-min-size", "67108864", |v| redis_check::memory(v, 0)),
    compat!("aof-load-truncated", "yes", redis_check::yes_no),
    compat!("aof-timestamp-enabled", "no", redis_check::yes_no),
    compat!("aof-rewrite-incremental-fsync", "yes", redis_check::yes_no),
    compat!("aof-disable-auto-gc", "no", redis_check::yes_no),
    stored_text!("repl-timeout", "repl-timeout", "60", "Seconds a replication link may stay silent before it is dropped: a replica's primary sending nothing, a primary's replica not acknowledging or not taking what is sent", repl_ping_period),
    compat!("repl-disable-tcp-nodelay", "no", redis_check::yes_no),
    compat!("repl-diskless-sync-max-replicas", "0", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    compat!("replica-lazy-flush", "no", redis_check::yes_no),
    old_name!("slave-lazy-flush", "replica-lazy-flush", "no"),
    compat!("replica-ignore-maxmemory", "yes", redis_check::yes_no),
    old_name!("slave-ignore-maxmemory", "replica-ignore-maxmemory", "yes"),
    compat!("replica-ignore-disk-write-errors", "no", redis_check::yes_no),
    compat!("propagation-error-behavior", "ignore", |v| redis_check::one_of(v, &["ignore", "panic", "panic-on-replicas"])),
    stored_text!("tls-protocols", "tls-protocols", "", "The TLS versions offered: TLSv1.2 and/or TLSv1.3 (TLSv1 and TLSv1.1 are accepted and not offered)", redis_check::tls_protocols),
    stored_text!("tls-ciphers", "tls-ciphers", "", "TLS 1.2 suites offered, by OpenSSL's names (ECDHE-RSA-AES256-GCM-SHA384...); class keywords such as HIGH keep rustls's set", |v| Ok(v.to_string())),
    stored_text!("tls-ciphersuites", "tls-ciphersuites", "", "TLS 1.3 suites offered (TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256...)", |v| Ok(v.to_string())),
    stored_text!("tls-prefer-server-ciphers", "tls-prefer-server-ciphers", "no", "The server's order of tls-ciphers / tls-ciphersuites decides, not the client's", redis_check::yes_no),
    // DH parameters: rustls never uses DHE, which a startup warning says.
    compat!("tls-dh-params-file", ""),
    // Encrypted keys and CA directories would fail at the first TLS
    // connection rather than at start: refused here instead.
    compat!("tls-key-file-pass", "", |v| redis_check::unsupported(v, "encrypted private keys are not supported: give tls-key-file unencrypted")),
    compat!("tls-client-key-file-pass", "", |v| redis_check::unsupported(v, "encrypted private keys are not supported: give tls-client-key-file unencrypted")),
    compat!("tls-cluster", "no", redis_check::yes_no),
    compat!("tls-session-caching", "yes", redis_check::yes_no),
    compat!("tls-session-cache-size", "20480", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    compat!("tls-session-cache-timeout", "300", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    compat!("cluster-config-file", "nodes.conf", |v| Ok(v.to_string()), false),
    compat!("cluster-port", "0", |v| redis_check::int(v, 0, 65535), false),
    compat!("cluster-node-timeout", "15000", |v| redis_check::int(v, 0, i64::MAX)),
    compat!("cluster-announce-ip", ""),
    compat!("cluster-announce-hostname", ""),
    compat!("cluster-announce-port", "0", |v| redis_check::int(v, 0, 65535)),
    compat!("cluster-announce-bus-port", "0", |v| redis_check::int(v, 0, 65535)),
    compat!("cluster-announce-tls-port", "0", |v| redis_check::int(v, 0, 65535)),
    compat!("cluster-preferred-endpoint-type", "ip", |v| redis_check::one_of(v, &["ip", "hostname", "unknown-endpoint"])),
    compat!("cluster-require-full-coverage", "yes", redis_check::yes_no),
    compat!("cluster-allow-reads-when-down", "no", redis_check::yes_no),
    compat!("cluster-allow-pubsubshard-when-down", "yes", redis_check::yes_no),
    compat!("cluster-allow-replica-migration", "yes", redis_check::yes_no),
    compat!("cluster-replica-no-failover", "no", redis_check::yes_no),
    old_name!("cluster-slave-no-failover", "cluster-replica-no-failover", "no"),
    compat!("cluster-migration-barrier", "1", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    compat!("cluster-replica-validity-factor", "10", |v| redis_check::int(v, 0, i64::from(i32::MAX))),
    old_name!("cluster-slave-validity-factor", "cluster-replica-validity-factor", "10"),
    compat!("cluster-link-sendbuf-limit", "0", |v| redis_check::memory(v, 0)),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_table() {
        let c = Config::default();
        for d in DIRECTIVES {
            if d.default.starts_with('<') || d.default.ends_with("mb") || d.default.ends_with("gb")
            {
                continue;
            }
            assert_eq!((d.get)(&c), d.default, "{}", d.name);
        }
    }

    #[test]
    fn toml_and_set() {
        let mut c = Config::default();
        c.apply_toml(
            "port = 7000\nprotected-mode = false\ndurability = \"delayed\"\nwal-dir = [\"/a\", \"/b\"]\n[durability-db]\n3 = \"none\"\n",
        )
        .unwrap();
        assert_eq!(c.port, 7000);
        assert!(!c.protected_mode);
        assert_eq!(c.db_durability(3), Durability::None);
        assert_eq!(c.db_durability(0), Durability::Delayed);
        assert_eq!(c.wal_dirs().len(), 2);
        assert!(c.set("durability-db-99", "full").is_err());
        assert!(c.set("maxmemory", "2gb").is_ok());
        assert_eq!(c.maxmemory_bytes, 2 * 1024 * 1024 * 1024);
        assert!(c.apply_toml("nonsense = 1").is_err());
    }
}
