//! INFO and its sections, including what it reads from `/proc`.
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, NO_KEYS};
use crate::dispatch::Outcome;
use crate::memory_breakdown::DbTables;
use crate::state::Shared;
use crate::util::{is, now_us};
use bytes::Bytes;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::shard::Shard;
use durakv_engine::txn::Txn;
use durakv_engine::Durability;
use durakv_protocol::Frame;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::connection::REDIS_COMPAT_VERSION;

pub fn commands() -> Vec<CommandSpec> {
    vec![spec(
        "info",
        -1,
        LOADING | STALE,
        NO_KEYS,
        Handler::Outcome(info),
        "server",
        "Reports server state and statistics by section.",
    )]
}

// ---------------------------------------------------------------------------
// INFO
// ---------------------------------------------------------------------------

/// Sections in the order Redis prints them, and whether `default` includes them.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    // Always empty (durakv loads no modules), but present as in Redis,
    // for tools that look for every section header.
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// INFO. Its keyspace section counts keys, so under `full` it waits for
/// the writes it counts, like DBSIZE. Under `replicated` it waits for
/// nothing more than that: INFO is how Sentinel watches a server, and a
/// freshly promoted primary has no replica to confirm anything until
/// Sentinel, having read `role:master` in its INFO, repoints them. Held
/// for replicas, INFO (and every PING queued behind it) would stall for
/// `replicated-timeout-ms`, and Sentinel would judge the server down.
/// Once the log has failed it waits for nothing: the writes it would wait
/// for never become durable, and INFO is how an operator (or a monitor
/// asking for every section) learns what happened, so it answers, as
/// Redis's does whatever the state of its AOF. Its key counts may then
/// include writes the log refused; `wal_failure` says so.
fn info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    let ks = &ctx.shared.store.keyspace;
    let (frame, counts_keys) = info_text(ctx.shared, args, &mut || KeyCounts::locked(ks));
    let level = ctx
        .shared
        .effective_durability(ctx.client.durability, ctx.client.db);
    let lsn = ctx.shared.store.keyspace.max_write_lsn();
    Outcome {
        frame,
        dependency_lsn: match level {
            _ if !counts_keys || ctx.shared.store.wal.is_failed() => 0,
            Durability::Full | Durability::Replicated => lsn,
            Durability::Delayed | Durability::None => 0,
        },
    }
}

/// INFO called from a script, which holds every shard already: the key
/// counts come from what it holds rather than from locking the shards
/// again.
pub(crate) fn info_in_script(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Frame {
    let ks = &ctx.shared.store.keyspace;
    info_text(ctx.shared, args, &mut || KeyCounts::held(ks, txn)).0
}

/// What INFO and MEMORY STATS report of the keyspace: (keys, keys with a
/// TTL) per database, and keys expired so far.
pub(super) struct KeyCounts {
    per_db: Vec<(usize, usize)>,
    /// Per database, the sampled TTLs of each shard weighted by its count
    /// of keys with one: (sum of mean × count, count).
    ttl: Vec<(u128, u128)>,
    expired: u64,
    /// Per database, the bytes of its map of keys and of its map of TTLs
    /// (`Db::table_bytes`).
    tables: Vec<(u64, u64)>,
}

/// Keys with a TTL sampled per shard and database for `avg_ttl`.
const TTL_SAMPLES: usize = 16;

impl KeyCounts {
    fn new(ks: &Keyspace) -> KeyCounts {
        KeyCounts {
            per_db: vec![(0, 0); ks.num_dbs()],
            ttl: vec![(0, 0); ks.num_dbs()],
            expired: 0,
            tables: vec![(0, 0); ks.num_dbs()],
        }
    }

    fn add(&mut self, shard: &Shard) {
        let now = crate::util::now_ms();
        for (((c, t), m), d) in self
            .per_db
            .iter_mut()
            .zip(&mut self.ttl)
            .zip(&mut self.tables)
            .zip(&shard.dbs)
        {
            let (main, expires) = d.table_bytes();
            m.0 += main as u64;
            m.1 += expires as u64;
            c.0 += d.len();
            c.1 += d.volatile_len();
            self.expired += d.expired_count();
            let (mean, n) = d.sampled_ttl_ms(now, TTL_SAMPLES);
            if n > 0 {
                let weight = d.volatile_len() as u128;
                t.0 += u128::from(mean) * weight;
                t.1 += weight;
            }
        }
    }

    /// INFO keyspace's `avg_ttl` for `db`, in ms (0 when no key has one).
    fn avg_ttl_ms(&self, db: usize) -> u64 {
        match self.ttl.get(db) {
            Some(&(sum, n)) if n > 0 => (sum / n) as u64,
            _ => 0,
        }
    }

    /// Locking each shard in turn.
    pub(super) fn locked(ks: &Keyspace) -> KeyCounts {
        let mut c = KeyCounts::new(ks);
        for i in 0..ks.num_shards() {
            c.add(&ks.shard(i).lock());
        }
        c
    }

    /// From the shards `txn` holds: every one, as a script holds them
    /// (locking them again would wait for ever).
    pub(super) fn held(ks: &Keyspace, txn: &mut Txn<'_>) -> KeyCounts {
        let mut c = KeyCounts::new(ks);
        for shard in txn.shards_mut() {
            c.add(shard);
        }
        c
    }

    /// The databases with keys, for the memory breakdown.
    pub(super) fn tables(&self) -> Vec<DbTables> {
        self.per_db
            .iter()
            .zip(&self.tables)
            .enumerate()
            .filter(|(_, ((keys, _), _))| *keys > 0)
            .map(|(db, (&(keys, _), &(main, expires)))| DbTables {
                db,
                keys,
                main,
                expires,
            })
            .collect()
    }
}

/// INFO EVERYTHING's text, for the metrics endpoint (`metrics_export`).
pub fn everything(shared: &Shared) -> Bytes {
    let args = [
        Bytes::from_static(b"INFO"),
        Bytes::from_static(b"everything"),
    ];
    let ks = &shared.store.keyspace;
    match info_text(shared, &args, &mut || KeyCounts::locked(ks)).0 {
        Frame::Verbatim(text) => text,
        _ => Bytes::new(),
    }
}

fn info_text(
    shared: &Shared,
    args: &[Bytes],
    counts: &mut dyn FnMut() -> KeyCounts,
) -> (Frame, bool) {
    let mut wanted: HashSet<&'static str> = HashSet::new();
    if args.len() == 1 {
        wanted.extend(SECTIONS.iter().filter(|s| s.1).map(|s| s.0));
    }
    for a in &args[1..] {
        if is(a, "all") || is(a, "everything") {
            wanted.extend(SECTIONS.iter().map(|s| s.0));
        } else if is(a, "default") {
            wanted.extend(SECTIONS.iter().filter(|s| s.1).map(|s| s.0));
        } else if let Some((name, _)) = SECTIONS.iter().find(|s| is(a, s.0)) {
            wanted.insert(name);
        }
    }
    let counts = ["stats", "keyspace", "memory"]
        .iter()
        .any(|s| wanted.contains(s))
        .then(counts);
    let expired = counts.as_ref().map_or(0, |c| c.expired);
    let mut out = String::new();
    for (name, _) in SECTIONS {
        if !wanted.contains(name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let (title, body) = match *name {
            "server" => ("Server", server_section(shared)),
            "clients" => ("Clients", clients_section(shared)),
            "memory" => ("Memory", memory_section(shared, counts.as_ref())),
            "persistence" => ("Persistence", persistence_section(shared)),
            "stats" => ("Stats", stats_section(shared, expired)),
            "replication" => ("Replication", replication_section(shared)),
            "cpu" => ("CPU", cpu_section()),
            "modules" => ("Modules", String::new()),
            "commandstats" => ("Commandstats", shared.cmdstats.commandstats()),
            "errorstats" => ("Errorstats", shared.cmdstats.errorstats()),
            "latencystats" => ("Latencystats", shared.cmdstats.latencystats()),
            "cluster" => ("Cluster", "cluster_enabled:0\r\n".to_string()),
            _ => ("Keyspace", keyspace_section(counts.as_ref())),
        };
        let _ = write!(out, "# {title}\r\n{body}");
    }
    (
        Frame::Verbatim(Bytes::from(out)),
        wanted.contains("keyspace"),
    )
}

/// Appends `name:value\r\n`.
fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

/// Redis's `bytesToHuman`: `512B`, `1.50K`, `2.00M`, ...
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in UNITS {
        if n >= size {
            return format!("{:.2}{unit}", n as f64 / size as f64);
        }
    }
    format!("{n}B")
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn uptime_secs(shared: &Shared) -> u64 {
    shared.started.elapsed().as_secs()
}

fn server_section(shared: &Shared) -> String {
    let cfg = shared.config.read();
    let mut s = String::new();
    let uptime = uptime_secs(shared);
    let port = shared.bound_port.load(Ordering::Acquire);
    field(&mut s, "redis_version", REDIS_COMPAT_VERSION);
    field(&mut s, "redis_git_sha1", "00000000");
    field(&mut s, "redis_git_dirty", 0);
    field(&mut s, "durakv_version", env!("CARGO_PKG_VERSION"));
    field(&mut s, "redis_mode", "standalone");
    // Read once: the kernel does not change under a running process.
    static OS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let os = OS.get_or_init(|| {
        let os = format!(
            "{} {} {}",
            read_trimmed("/proc/sys/kernel/ostype"),
            read_trimmed("/proc/sys/kernel/osrelease"),
            std::env::consts::ARCH
        );
        os.trim().to_owned()
    });
    field(&mut s, "os", os);
    field(&mut s, "arch_bits", usize::BITS);
    // Rust's `Instant`, which durakv times with, reads CLOCK_MONOTONIC.
    field(&mut s, "monotonic_clock", "POSIX clock_gettime");
    field(&mut s, "multiplexing_api", "epoll");
    field(&mut s, "process_id", std::process::id());
    field(
        &mut s,
        "process_supervised",
        crate::service::supervised_by(),
    );
    field(&mut s, "run_id", &shared.run_id);
    field(&mut s, "tcp_port", port);
    field(&mut s, "server_time_usec", now_us());
    field(&mut s, "uptime_in_seconds", uptime);
    field(&mut s, "uptime_in_days", uptime / 86_400);
    field(&mut s, "hz", cfg.hz);
    field(&mut s, "configured_hz", cfg.hz);
    field(
        &mut s,
        "lru_clock",
        durakv_engine::db::lru_clock(crate::util::now_ms()),
    );
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    field(&mut s, "executable", exe);
    // The configuration does not record which file (if any) it came from.
    let config_file = shared.config.read().config_file.clone();
    field(&mut s, "config_file", &config_file);
    field(&mut s, "io_threads_active", 0);
    for (i, b) in cfg.bind.iter().enumerate() {
        let _ = write!(s, "listener{i}:name=tcp,bind={b},port={port}\r\n");
    }
    s
}

fn clients_section(shared: &Shared) -> String {
    let clients = shared.clients.all();
    let (mut watching, mut watched_keys) = (0usize, 0usize);
    for c in &clients {
        let w = c.info.lock().watch;
        watched_keys += w;
        watching += usize::from(w > 0);
    }
    let mut s = String::new();
    field(&mut s, "connected_clients", clients.len());
    field(&mut s, "cluster_connections", 0);
    field(&mut s, "maxclients", shared.config.read().maxclients);
    // Redis's peaks of the last few seconds; here the largest buffers the
    // connections hold now (`ClientHandle::input_bytes`, `output_bytes`).
    let (qbuf, omem) = clients.iter().fold((0, 0), |(q, o), c| {
        (
            q.max(c.input_bytes.load(Ordering::Relaxed)),
            o.max(c.output_bytes.load(Ordering::Relaxed) + c.mailbox.queued_bytes()),
        )
    });
    field(&mut s, "client_recent_max_input_buffer", qbuf);
    field(&mut s, "client_recent_max_output_buffer", omem);
    field(
        &mut s,
        "blocked_clients",
        shared.blocking.blocked_clients() + shared.pause.held_clients(),
    );
    field(&mut s, "tracking_clients", shared.tracking.counts().3);
    field(&mut s, "pubsub_clients", shared.pubsub.counts().3);
    field(&mut s, "watching_clients", watching);
    field(&mut s, "clients_in_timeout_table", 0);
    field(&mut s, "total_watched_keys", watched_keys);
    field(
        &mut s,
        "total_blocking_keys",
        shared.blocking.blocking_keys(),
    );
    s
}

/// As Redis reads it: physical pages times the page size.
fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(page.max(0) as u64)
}

fn memory_section(shared: &Shared, counts: Option<&KeyCounts>) -> String {
    let tables = counts.map(KeyCounts::tables).unwrap_or_default();
    let b = crate::memory_breakdown::Breakdown::take(shared, tables);
    let system = total_system_memory();
    let (maxmemory, policy) = {
        let c = shared.config.read();
        (c.maxmemory_bytes, c.maxmemory_policy.name())
    };
    let human = |n: u64| bytes_to_human(n);
    let mut s = String::new();
    field(&mut s, "used_memory", b.used);
    field(&mut s, "used_memory_human", human(b.used));
    field(&mut s, "used_memory_rss", b.rss);
    field(&mut s, "used_memory_rss_human", human(b.rss));
    field(&mut s, "used_memory_peak", b.peak);
    field(&mut s, "used_memory_peak_human", human(b.peak));
    let peak_perc = b.peak_percentage();
    field(&mut s, "used_memory_peak_perc", format!("{peak_perc:.2}%"));
    field(&mut s, "used_memory_overhead", b.overhead());
    field(&mut s, "used_memory_startup", b.startup);
    field(&mut s, "used_memory_dataset", b.dataset());
    let dataset_perc = b.dataset_percentage();
    field(
        &mut s,
        "used_memory_dataset_perc",
        format!("{dataset_perc:.2}%"),
    );
    field(&mut s, "allocator_allocated", b.used);
    field(&mut s, "allocator_active", b.allocator.active);
    field(&mut s, "allocator_resident", b.allocator.resident);
    field(&mut s, "total_system_memory", system);
    field(&mut s, "total_system_memory_human", human(system));
    let sm = &b.scripts;
    field(&mut s, "used_memory_lua", sm.vm_eval);
    field(&mut s, "used_memory_vm_eval", sm.vm_eval);
    field(&mut s, "used_memory_lua_human", human(sm.vm_eval as u64));
    field(&mut s, "used_memory_scripts_eval", sm.scripts_eval);
    field(
        &mut s,
        "number_of_cached_scripts",
        shared.scripting.cached_count(),
    );
    let (libraries, functions) = shared.scripting.function_counts();
    field(&mut s, "number_of_functions", functions);
    field(&mut s, "number_of_libraries", libraries);
    field(&mut s, "used_memory_vm_functions", sm.vm_functions);
    field(&mut s, "used_memory_vm_total", b.lua_vms());
    field(&mut s, "used_memory_vm_total_human", human(b.lua_vms()));
    field(&mut s, "used_memory_functions", sm.functions);
    let scripts = (sm.scripts_eval + sm.functions) as u64;
    field(&mut s, "used_memory_scripts", scripts);
    field(&mut s, "used_memory_scripts_human", human(scripts));
    field(&mut s, "maxmemory", maxmemory);
    field(&mut s, "maxmemory_human", human(maxmemory));
    field(&mut s, "maxmemory_policy", policy);
    for (name, (ratio, bytes)) in [
        ("allocator_frag", b.allocator_frag()),
        ("allocator_rss", b.allocator_rss()),
        ("rss_overhead", b.rss_overhead()),
    ] {
        field(&mut s, &format!("{name}_ratio"), format!("{ratio:.2}"));
        field(&mut s, &format!("{name}_bytes"), bytes);
    }
    let (frag, frag_bytes) = b.fragmentation();
    field(&mut s, "mem_fragmentation_ratio", format!("{frag:.2}"));
    field(&mut s, "mem_fragmentation_bytes", frag_bytes);
    field(
        &mut s,
        "mem_not_counted_for_evict",
        crate::evict::not_counted_bytes(),
    );
    field(&mut s, "mem_replication_backlog", b.backlog);
    field(
        &mut s,
        "mem_total_replication_buffers",
        b.backlog + b.clients_replicas,
    );
    field(&mut s, "mem_clients_slaves", b.clients_replicas);
    field(&mut s, "mem_clients_normal", b.clients_normal);
    field(&mut s, "mem_cluster_links", 0);
    field(&mut s, "mem_aof_buffer", 0);
    field(&mut s, "mem_allocator", crate::memory::allocator_name());
    // No defragmenter runs, and values are freed where they are removed,
    // never handed to a background thread, so nothing is ever pending;
    // tools and tests poll these fields.
    field(&mut s, "active_defrag_running", 0);
    field(&mut s, "lazyfree_pending_objects", 0);
    field(&mut s, "lazyfreed_objects", 0);
    s
}

/// Unix time (seconds) of the last successful checkpoint; start-up time
/// until the first one, as in Redis.
pub(super) fn last_save_unix(shared: &Shared) -> u64 {
    shared.checkpoints.last_save_unix_secs()
}

/// The body of `INFO persistence`: Redis's RDB/AOF fields (so tools that
/// read them keep working) and durakv's durability and log state. The log
/// and checkpoint code add their fields here.
pub fn persistence_section(shared: &Shared) -> String {
    let cfg = shared.config.read();
    let mut s = String::new();
    field(
        &mut s,
        "loading",
        u8::from(
            shared
                .repl
                .loading
                .load(std::sync::atomic::Ordering::Relaxed),
        ),
    );
    field(&mut s, "async_loading", 0);
    crate::checkpointer::rdb_fields(shared, &mut s);
    field(&mut s, "aof_enabled", 0);
    field(&mut s, "aof_rewrite_in_progress", 0);
    field(&mut s, "aof_rewrite_scheduled", 0);
    let failure = shared.log_failure();
    field(
        &mut s,
        "aof_last_write_status",
        if failure.is_some() { "err" } else { "ok" },
    );
    field(&mut s, "durability", cfg.durability);
    let policy = match cfg.durability_policy {
        crate::config::DurabilityPolicy::Connection => "connection",
        crate::config::DurabilityPolicy::Strictest => "strictest",
    };
    field(&mut s, "durability_policy", policy);
    for db in 0..cfg.databases {
        let _ = write!(s, "db{db}_durability:{}\r\n", cfg.db_durability(db));
    }
    field(&mut s, "wal_enabled", 1);
    // A newline in the failure text would end the field early.
    let failure = failure.unwrap_or_default().replace(['\r', '\n'], " ");
    field(&mut s, "wal_failure", failure);
    crate::wal_info::fields(shared, &mut s);
    crate::checkpointer::info_fields(shared, &mut s);
    s
}

fn stats_section(shared: &Shared, expired: u64) -> String {
    let st = &shared.stats;
    let get = |c: &crate::stripe::Counter| c.get();
    let (ops, in_kbps, out_kbps) = shared.rates.instantaneous(&shared.stats);
    let mut s = String::new();
    field(
        &mut s,
        "total_connections_received",
        get(&st.total_connections_received),
    );
    field(
        &mut s,
        "total_commands_processed",
        get(&st.total_commands_processed),
    );
    field(&mut s, "instantaneous_ops_per_sec", ops);
    field(
        &mut s,
        "total_net_input_bytes",
        get(&st.total_net_input_bytes),
    );
    field(
        &mut s,
        "total_net_output_bytes",
        get(&st.total_net_output_bytes),
    );
    field(
        &mut s,
        "total_net_repl_input_bytes",
        get(&st.total_net_repl_input_bytes),
    );
    field(
        &mut s,
        "total_net_repl_output_bytes",
        get(&st.total_net_repl_output_bytes),
    );
    field(&mut s, "instantaneous_input_kbps", format!("{in_kbps:.2}"));
    field(
        &mut s,
        "instantaneous_output_kbps",
        format!("{out_kbps:.2}"),
    );
    field(&mut s, "instantaneous_input_repl_kbps", "0.00");
    field(&mut s, "instantaneous_output_repl_kbps", "0.00");
    field(
        &mut s,
        "rejected_connections",
        get(&st.rejected_connections),
    );
    field(
        &mut s,
        "sync_full",
        shared.repl.sync_full.load(Ordering::Relaxed),
    );
    field(
        &mut s,
        "sync_partial_ok",
        shared.repl.sync_partial_ok.load(Ordering::Relaxed),
    );
    field(
        &mut s,
        "sync_partial_err",
        shared.repl.sync_partial_err.load(Ordering::Relaxed),
    );
    field(
        &mut s,
        "expired_keys",
        expired.saturating_sub(st.expired_keys_base.load(Ordering::Relaxed)),
    );
    field(&mut s, "evicted_keys", get(&st.evicted_keys));
    field(&mut s, "evicted_clients", get(&st.evicted_clients));
    field(&mut s, "keyspace_hits", get(&st.keyspace_hits));
    field(&mut s, "keyspace_misses", get(&st.keyspace_misses));
    let (channels, patterns, shard_channels, _) = shared.pubsub.counts();
    field(&mut s, "pubsub_channels", channels);
    field(&mut s, "pubsub_patterns", patterns);
    field(&mut s, "pubsubshard_channels", shard_channels);
    field(&mut s, "latest_fork_usec", 0);
    let (keys, items, prefixes, _) = shared.tracking.counts();
    field(&mut s, "tracking_total_keys", keys);
    field(&mut s, "tracking_total_items", items);
    field(&mut s, "tracking_total_prefixes", prefixes);
    field(&mut s, "total_forks", 0);
    field(&mut s, "migrate_cached_sockets", 0);
    field(&mut s, "total_error_replies", get(&st.total_error_replies));
    field(&mut s, "unexpected_error_replies", 0);
    let denied = &shared.acl.denied;
    for (name, c) in [
        ("acl_access_denied_auth", &denied.auth),
        ("acl_access_denied_cmd", &denied.cmd),
        ("acl_access_denied_key", &denied.key),
        ("acl_access_denied_channel", &denied.channel),
    ] {
        field(&mut s, name, c.load(Ordering::Relaxed));
    }
    for (name, c) in [
        ("watch_aborts", &st.watch_aborts),
        ("total_reads_processed", &st.total_reads_processed),
        ("total_writes_processed", &st.total_writes_processed),
    ] {
        field(&mut s, name, get(c));
    }
    s
}

fn replication_section(shared: &Shared) -> String {
    crate::repl::info_section(shared)
}

fn cpu_section() -> String {
    let p = crate::cpu_usage::process();
    let c = crate::cpu_usage::children();
    let main = crate::cpu_usage::io_threads().unwrap_or_default();
    let mut s = String::new();
    field(&mut s, "used_cpu_sys", format!("{:.6}", p[1]));
    field(&mut s, "used_cpu_user", format!("{:.6}", p[0]));
    field(&mut s, "used_cpu_sys_children", format!("{:.6}", c[1]));
    field(&mut s, "used_cpu_user_children", format!("{:.6}", c[0]));
    field(
        &mut s,
        "used_cpu_sys_main_thread",
        format!("{:.6}", main[1]),
    );
    field(
        &mut s,
        "used_cpu_user_main_thread",
        format!("{:.6}", main[0]),
    );
    s
}

fn keyspace_section(counts: Option<&KeyCounts>) -> String {
    let mut s = String::new();
    let Some(c) = counts else {
        return s;
    };
    for (db, &(keys, expires)) in c.per_db.iter().enumerate() {
        if keys > 0 {
            let avg_ttl = c.avg_ttl_ms(db);
            let _ = write!(
                s,
                "db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n"
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(bytes_to_human(512), "512B");
        assert_eq!(bytes_to_human(1536), "1.50K");
        assert_eq!(bytes_to_human(3 * 1024 * 1024), "3.00M");
    }
}
