//! Where `used_memory` goes, as Redis breaks it down in INFO memory and
//! MEMORY STATS: the server's own structures (its overhead) and the rest,
//! the data. Monitoring tools chart `used_memory_dataset` and
//! `used_memory_overhead`, and MEMORY DOCTOR reads the same figures.
//!
//! The overhead is what Redis counts as such: the memory held at start,
//! the replication backlog, clients' buffers, the cached scripts and the
//! function libraries, and the tables that find keys (each database's map
//! of keys and map of TTLs). durakv's Lua VMs allocate through the same
//! counted allocator as everything else, so they are in `used_memory` and
//! counted as overhead too; Redis's use an allocator of their own and are
//! left out of its `used_memory`.

use crate::memory::{self, AllocatorStats};
use crate::scripting::ScriptMemory;
use crate::state::Shared;
use std::sync::atomic::Ordering;

/// One database with keys: how many, and the bytes of its two maps.
pub struct DbTables {
    pub db: usize,
    pub keys: usize,
    pub main: u64,
    pub expires: u64,
}

pub struct Breakdown {
    pub used: u64,
    pub peak: u64,
    pub startup: u64,
    pub rss: u64,
    pub backlog: u64,
    pub clients_replicas: u64,
    pub clients_normal: u64,
    pub scripts: ScriptMemory,
    pub dbs: Vec<DbTables>,
    pub allocator: AllocatorStats,
}

impl Breakdown {
    /// `dbs`: the databases with keys (INFO's key counts bring them, from
    /// shards locked or, in a script, already held).
    pub fn take(shared: &Shared, dbs: Vec<DbTables>) -> Breakdown {
        let used = memory::used_memory_bytes();
        let rss = memory::read_rss_bytes();
        // What clients hold (`ClientHandle::memory_bytes`), replication
        // links apart, as `maxmemory-clients` counts it.
        let (clients_replicas, clients_normal) =
            shared.clients.all().iter().fold((0, 0), |(r, n), c| {
                if c.replication.load(Ordering::Relaxed) {
                    (r + c.counted_memory_bytes() as u64, n)
                } else {
                    (r, n + c.counted_memory_bytes() as u64)
                }
            });
        Breakdown {
            used,
            peak: memory::peak_memory_bytes().max(used),
            startup: memory::startup_memory_bytes(),
            rss,
            backlog: shared.repl.stream.backlog.lock().histlen(),
            clients_replicas,
            clients_normal,
            scripts: shared.scripting.memory(),
            dbs,
            // Without figures from the allocator, what it was asked for
            // and what is resident stand in for them.
            allocator: memory::allocator_stats().unwrap_or(AllocatorStats {
                active: used,
                resident: rss,
            }),
        }
    }

    /// Both Lua VMs (see the module comment).
    pub fn lua_vms(&self) -> u64 {
        (self.scripts.vm_eval + self.scripts.vm_functions) as u64
    }

    /// The server's own structures (see the module comment).
    pub fn overhead(&self) -> u64 {
        let tables: u64 = self.dbs.iter().map(|d| d.main + d.expires).sum();
        self.startup
            + self.backlog
            + self.clients_replicas
            + self.clients_normal
            + self.scripts.scripts_eval as u64
            + self.scripts.functions as u64
            + self.lua_vms()
            + tables
    }

    /// `used_memory` less the overhead.
    pub fn dataset(&self) -> u64 {
        self.used.saturating_sub(self.overhead())
    }

    /// What has been allocated since start-up.
    fn net(&self) -> u64 {
        self.used.saturating_sub(self.startup)
    }

    /// The dataset's share of what was allocated since start-up, in %.
    pub fn dataset_percentage(&self) -> f64 {
        percent(self.dataset(), self.net())
    }

    pub fn peak_percentage(&self) -> f64 {
        percent(self.used, self.peak)
    }

    pub fn keys(&self) -> usize {
        self.dbs.iter().map(|d| d.keys).sum()
    }

    /// Memory allocated since start-up per key (0 without keys).
    pub fn bytes_per_key(&self) -> u64 {
        self.net()
            .checked_div(self.keys() as u64)
            .unwrap_or_default()
    }

    /// (ratio, bytes) of the allocator's active pages to what was asked
    /// of it, of its resident pages to its active ones, and of the
    /// process's resident set to the allocator's.
    pub fn allocator_frag(&self) -> (f64, i64) {
        ratio(self.allocator.active, self.used)
    }

    pub fn allocator_rss(&self) -> (f64, i64) {
        ratio(self.allocator.resident, self.allocator.active)
    }

    pub fn rss_overhead(&self) -> (f64, i64) {
        ratio(self.rss, self.allocator.resident)
    }

    /// The process's resident set to `used_memory`.
    pub fn fragmentation(&self) -> (f64, i64) {
        ratio(self.rss, self.used)
    }
}

/// Sets `used_memory_startup` to what the server holds for itself once it
/// is ready to serve, as Redis's is taken after its own set-up: the empty
/// keyspace, the log's buffers and threads, the event loops. Redis takes
/// it before loading its data; here the log is replayed before the event
/// loops exist, so what loading took (`Store::loaded_bytes`) is left
/// out, and so is what the breakdown counts apart (clients, the backlog,
/// the Lua VMs, cached scripts). Before this runs (while loading), the
/// figure is what was held before the data directory was opened.
pub fn note_startup(shared: &Shared) {
    let opened = memory::startup_memory_bytes();
    let b = Breakdown::take(shared, Vec::new());
    let apart = b.backlog
        + b.clients_replicas
        + b.clients_normal
        + b.scripts.scripts_eval as u64
        + b.lua_vms();
    let loaded = shared.store.loaded_bytes.load(Ordering::Relaxed);
    let own = b.used.saturating_sub(loaded + apart);
    memory::set_startup_memory_bytes(own.max(opened));
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn ratio(a: u64, b: u64) -> (f64, i64) {
    let r = if b == 0 { 0.0 } else { a as f64 / b as f64 };
    (r, a as i64 - b as i64)
}

/// MEMORY DOCTOR's report: the problems these figures show, if any.
pub fn doctor(b: &Breakdown) -> String {
    const SMALL_BYTES: u64 = 5 << 20;
    if b.used < SMALL_BYTES {
        return "This instance holds less than 5 MB: too little for its memory figures to \
                say anything yet. Ask again once it holds some data.\n"
            .into();
    }
    let mut found = Vec::new();
    if b.peak as f64 > b.used as f64 * 1.5 {
        found.push(format!(
            " * Peak: memory in use peaked at {} against {} now. The allocator may keep \
             part of the difference, and the resident set counts it.",
            crate::cmd::info::bytes_to_human(b.peak),
            crate::cmd::info::bytes_to_human(b.used)
        ));
    }
    let (frag, frag_bytes) = b.fragmentation();
    if frag > 1.4 && frag_bytes > 10 << 20 {
        found.push(format!(
            " * Fragmentation: the resident set is {frag:.2} times the memory in use \
             ({} more). Deleting many keys, or values of changing sizes, leaves pages \
             partly empty; MEMORY PURGE asks the allocator to return what it can.",
            crate::cmd::info::bytes_to_human(frag_bytes.max(0) as u64)
        ));
    }
    if b.clients_normal > 200 << 10 && b.clients_normal > b.used / 10 {
        found.push(format!(
            " * Clients: connections hold {} in buffers, a tenth of the memory in use or \
             more. Large pipelines, replies that are not read, or slow subscribers grow \
             them; CLIENT LIST shows which (qbuf, omem).",
            crate::cmd::info::bytes_to_human(b.clients_normal)
        ));
    }
    if b.clients_replicas > 10 << 20 {
        found.push(format!(
            " * Replicas: replication links hold {} of stream not yet sent.",
            crate::cmd::info::bytes_to_human(b.clients_replicas)
        ));
    }
    if found.is_empty() {
        return "No memory problem found in this instance's figures.\n".into();
    }
    let mut out = String::from("Memory problems found in this instance's figures:\n\n");
    for f in found {
        out.push_str(&f);
        out.push_str("\n\n");
    }
    out
}
