//! DEBUG: the subset test suites use, behind `enable-debug-command` as in
//! Redis (`no` by default; `local` allows loopback clients only).
//! SLEEP, OBJECT, RELOAD, CHANGE-REPL-ID, SET-ACTIVE-EXPIRE, DIGEST,
//! DIGEST-VALUE, ERROR, POPULATE, PROTOCOL and LOADAOF.

use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::dispatch::Outcome;
use crate::errors;
use crate::util::is;
use bytes::Bytes;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::mutation::{ExpireMode, KeyOp};
use durakv_engine::value::Value;
use durakv_protocol::Frame;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

const RELOAD_FAILED: &str = "ERR Error trying to load the RDB dump";

/// What DEBUG switches at runtime.
pub struct DebugState {
    /// Cleared by DEBUG SET-ACTIVE-EXPIRE 0: the background expiry pauses.
    pub active_expire: AtomicBool,
    /// DEBUG SLEEPs in progress: while there is one, no connection starts
    /// a turn, as no command runs in Redis while its one thread sleeps.
    sleepers: AtomicUsize,
    woke: tokio::sync::Notify,
}

impl Default for DebugState {
    fn default() -> DebugState {
        DebugState {
            active_expire: AtomicBool::new(true),
            sleepers: AtomicUsize::new(0),
            woke: tokio::sync::Notify::new(),
        }
    }
}

impl DebugState {
    /// Whether a DEBUG SLEEP is stopping the server.
    pub fn sleeping(&self) -> bool {
        self.sleepers.load(Ordering::Acquire) != 0
    }

    /// Resolves once no DEBUG SLEEP is stopping the server.
    pub async fn slept(&self) {
        loop {
            let woke = self.woke.notified();
            tokio::pin!(woke);
            woke.as_mut().enable();
            if !self.sleeping() {
                return;
            }
            woke.await;
        }
    }

    /// Stops the server for `d`: this thread sleeps, and every other
    /// connection waits at the start of its next turn.
    fn sleep(&self, d: Duration) {
        self.sleepers.fetch_add(1, Ordering::AcqRel);
        crate::checkpointer::blocking(|| std::thread::sleep(d));
        if self.sleepers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.woke.notify_waiters();
        }
    }
}

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, Handler::Outcome(debug), "server", "Runs test-suite helpers, if enable-debug-command allows it."),
    ]
}

fn debug(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    if !super::protected_allowed(ctx, "enable-debug-command") {
        return Outcome::now(super::not_allowed("DEBUG", "enable-debug-command"));
    }
    // The one subcommand that writes, so its reply waits for the log.
    if is(&args[1], "populate") && (3..=5).contains(&args.len()) {
        return populate(ctx, args);
    }
    match debug_now(ctx, args) {
        Ok(f) | Err(f) => Outcome::now(f),
    }
}

fn debug_now(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("help", 2) => Ok(help()),
        ("sleep", 3) => sleep(ctx, &args[2]),
        // Client libraries test their handling of LOADING, READONLY, OOM
        // and auth errors with it.
        ("error", 3) => {
            let text: Vec<u8> = args[2]
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                .collect();
            Err(Frame::Error(Bytes::from(text)))
        }
        ("object", 3) => object(ctx, &args[2]),
        ("protocol", 3) => protocol(ctx, &args[2]),
        ("digest", 2) => digest(ctx),
        ("digest-value", _) => digest_values(ctx, &args[2..]),
        ("reload", _) => reload(ctx),
        // Redis writes out its AOF and loads it back. durakv's log is
        // always written out; what a restart rebuilds is the newest
        // checkpoint and the log after it, and RELOAD's checkpoint waits
        // for every record it holds to be durable, so the same check
        // covers both.
        ("loadaof", 2) => reload(ctx),
        ("change-repl-id", 2) => {
            ctx.shared.repl.change_replid();
            Ok(Frame::ok())
        }
        ("set-active-expire", 3) => {
            let on = !is(&args[2], "0");
            ctx.shared.debug.active_expire.store(on, Ordering::Relaxed);
            Ok(Frame::ok())
        }
        _ => Err(errors::sub_usage(&args[1], "debug")),
    }
}

fn help() -> Frame {
    let lines = [
        "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANGE-REPL-ID",
        "    Give the server a new random replication ID and forget the previous",
        "    one; meant for testing replication.",
        "DIGEST",
        "    Give one hex checksum of the whole dataset, all databases included:",
        "    equal data gives an equal checksum.",
        "DIGEST-VALUE <key> [<key> ...]",
        "    Give a hex checksum of each named key's value (all zeros if missing).",
        "ERROR <string>",
        "    Reply with an error whose text is <string>, so that a client library can",
        "    test how it handles one.",
        "LOADAOF",
        "    Make the log durable and check, as RELOAD does, that a restart would rebuild",
        "    the current dataset.",
        "OBJECT <key>",
        "    Give internal details of the value under <key>: encoding, serialized",
        "    length, idle time and, for a list, its node layout.",
        "PROTOCOL <type>",
        "    Reply with a sample of a RESP type, so that a client library can test its",
        "    parser: string, integer, double, bignum, null, array, set, map, attrib,",
        "    push, verbatim, true or false.",
        "POPULATE <count> [<prefix>] [<size>]",
        "    Create string keys <prefix>:0 to <prefix>:<count-1> (prefix 'key') with",
        "    values 'value:<n>', zero-padded or cut to <size> bytes when one is given.",
        "    Keys that exist are left as they are. The keys are logged like SETs.",
        "RELOAD",
        "    Take a checkpoint and check that loading it gives back the current dataset.",
        "SET-ACTIVE-EXPIRE <0|1>",
        "    0 halts the background sweep that removes expired keys nobody reads;",
        "    1 lets it run again.",
        "SLEEP <seconds>",
        "    Freeze the whole server for <seconds> (fractions allowed): no other",
        "    connection starts a command until the time is up.",
        "HELP",
        "    Show this list of subcommands.",
    ];
    Frame::Array(lines.iter().map(|l| Frame::simple(l)).collect())
}

/// DEBUG PROTOCOL: one sample of each reply type, with Redis's values
/// (client libraries' tests compare them).
fn protocol(ctx: &Ctx<'_>, kind: &[u8]) -> Reply {
    let bulk = |s: &'static str| Frame::Bulk(Bytes::from_static(s.as_bytes()));
    let ints = || (0..3).map(Frame::Integer).collect::<Vec<_>>();
    let resp3 = super::resp3(ctx);
    let kind = String::from_utf8_lossy(kind).to_ascii_lowercase();
    Ok(match kind.as_str() {
        "string" => bulk("Hello World"),
        "integer" => Frame::Integer(12345),
        // Redis's sample value, not pi.
        "double" => Frame::DoubleText(Bytes::from_static(b"3.141")),
        "bignum" => Frame::BigNumber(Bytes::from_static(b"1234567999999999999999999999999999999")),
        "null" => Frame::Null,
        "array" => Frame::Array(ints()),
        "set" => Frame::Set(ints()),
        "map" => Frame::Map(
            (0..3)
                .map(|j| (Frame::Integer(j), Frame::Boolean(j == 1)))
                .collect(),
        ),
        "attrib" => Frame::Sequence(vec![
            Frame::Attribute(vec![(
                bulk("key-popularity"),
                Frame::Array(vec![bulk("key:123"), Frame::Integer(90)]),
            )]),
            bulk("Some real reply following the attribute"),
        ]),
        // RESP2 has no out-of-band reply to send it as.
        "push" if !resp3 => return Err(Frame::error("ERR RESP2 is not supported by this command")),
        "push" => Frame::Sequence(vec![
            Frame::Push(vec![bulk("server-cpu-usage"), Frame::Integer(42)]),
            bulk("Some real reply following the push reply"),
        ]),
        "verbatim" => Frame::Verbatim(Bytes::from_static(b"This is a verbatim\nstring")),
        "true" => Frame::Boolean(true),
        "false" => Frame::Boolean(false),
        _ => return Err(Frame::error(
            "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        )),
    })
}

/// Keys written per transaction by POPULATE: each batch is one log record
/// and holds its shards' locks only while it is applied, so a populate of
/// millions of keys neither outgrows `wal-max-record-size-mb` nor stalls
/// the other clients for its whole run, as Redis's does.
const POPULATE_BATCH: u64 = 1024;

/// DEBUG POPULATE count [prefix [size]]. Redis adds the keys without
/// propagating them, so its AOF and replicas never see them; here they
/// are written as SETs are, logged at the connection's level and
/// replicated, so that no acknowledged key is lost in a crash.
fn populate(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    let count = match super::positive_count(&args[2]) {
        Ok(n) => n,
        Err(e) => return Outcome::now(e),
    };
    let size = match args.get(4).map(|a| super::positive_count(a)).transpose() {
        Ok(s) => s.unwrap_or(0) as usize,
        Err(e) => return Outcome::now(e),
    };
    // Redis would try to allocate any size and abort; a value no request
    // could have carried is refused instead.
    if size as u64 > ctx.shared.config.read().proto_max_bulk_len {
        return Outcome::now(Frame::error(
            "ERR DEBUG POPULATE value size is larger than proto-max-bulk-len",
        ));
    }
    let prefix: &[u8] = args.get(3).map_or(b"key", |p| &p[..]);
    let db = ctx.db();
    let mut dep = 0;
    let mut next = 0u64;
    while next < count {
        // Checked per batch: memory over `maxmemory` (as for any command
        // that adds data) or a failed log stops it with what it wrote.
        if let Some(refused) = crate::dispatch::refuse_write(ctx, DENYOOM) {
            return Outcome {
                frame: refused,
                dependency_lsn: dep,
            };
        }
        let end = count.min(next + POPULATE_BATCH);
        let keys: Vec<Bytes> = (next..end)
            .map(|j| {
                let mut k = Vec::with_capacity(prefix.len() + 21);
                k.extend_from_slice(prefix);
                k.push(b':');
                k.extend_from_slice(itoa::Buffer::new().format(j).as_bytes());
                Bytes::from(k)
            })
            .collect();
        let mut txn = match crate::dispatch::lock(ctx.shared, false, keys.iter().map(|k| &k[..])) {
            Ok(t) => t,
            Err(busy) => return Outcome::now(busy),
        };
        // Under the locks, as for any write: a FAILOVER between batches
        // makes this server a replica.
        if crate::dispatch::read_only_replica(ctx) {
            return Outcome {
                frame: Frame::error(errors::READONLY_REPLICA),
                dependency_lsn: dep,
            };
        }
        for (j, key) in (next..end).zip(&keys) {
            if txn.get_untouched(db, key).is_some() {
                continue;
            }
            let mut value = format!("value:{j}").into_bytes();
            if size > 0 {
                value.resize(size, 0);
            }
            let op = KeyOp::SetString {
                value: Bytes::from(value),
                expire: ExpireMode::Clear,
            };
            if let Err(e) = super::apply(&mut txn, db, key, op) {
                // What the batch applied so far is committed with it.
                let out = crate::dispatch::finish(ctx, &mut txn, e);
                return Outcome {
                    frame: out.frame,
                    dependency_lsn: crate::repl::combine_deps(dep, out.dependency_lsn),
                };
            }
        }
        let out = crate::dispatch::finish(ctx, &mut txn, Frame::ok());
        if out.frame.is_error() {
            return out;
        }
        dep = crate::repl::combine_deps(dep, out.dependency_lsn);
        next = end;
    }
    Outcome {
        frame: Frame::ok(),
        dependency_lsn: dep,
    }
}

/// Redis blocks its whole server; here only this connection waits.
/// DEBUG SLEEP: stops the server for a number of seconds, read as Redis
/// reads it (C's strtod: the longest number at the start, 0 if none), so
/// `0\r\n` and `abc` are 0; a negative or infinite time does not sleep.
fn sleep(ctx: &Ctx<'_>, arg: &[u8]) -> Reply {
    let secs = crate::util::leading_f64(arg);
    if secs.is_finite() && secs > 0.0 {
        ctx.shared.debug.sleep(Duration::from_secs_f64(secs));
    }
    Ok(Frame::ok())
}

fn object(ctx: &mut Ctx<'_>, key: &Bytes) -> Reply {
    let limits = super::encoding_limits(ctx);
    let mut txn = crate::dispatch::lock(ctx.shared, false, std::iter::once(&key[..]))?;
    let now_s = txn.now_ms / 1000;
    let Some(e) = txn.get_untouched(ctx.db(), key) else {
        return Err(errors::err(errors::NO_SUCH_KEY));
    };
    let idle = e.access().idle_secs(now_s as u32);
    let v = &e.value;
    let encoding = v.encoding_name(&limits);
    let mut s = format!(
        "Value at:{:p} refcount:1 encoding:{encoding} serializedlength:{} lru:{} lru_seconds_idle:{idle}",
        v as *const Value,
        crate::rdb_value::serialized_length(v, &limits),
        e.access().secs,
    );
    if let Value::List(l) = v {
        let nodes = crate::rdb_value::list_nodes(l, &limits).max(1);
        let bytes: usize = l.iter().map(|i| i.len()).sum();
        s.push_str(&format!(
            " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:0 ql_uncompressed_size:{bytes}",
            l.len() as f64 / nodes as f64,
            limits.list_size,
        ));
    }
    Ok(Frame::Simple(Bytes::from(s)))
}

fn digest(ctx: &mut Ctx<'_>) -> Reply {
    let mut txn = crate::dispatch::lock(ctx.shared, true, std::iter::empty())?;
    let now = txn.now_ms;
    let dbs = ctx.shared.store.keyspace.num_dbs();
    let mut total = [0u8; 20];
    for db in 0..dbs {
        let mut keys: Vec<(Bytes, durakv_engine::db::Entry)> = Vec::new();
        for shard in txn.shards_mut() {
            let d = &shard.dbs[db];
            keys.extend(
                d.iter()
                    .filter(|(k, e)| !d.is_expired(k, e, now))
                    .map(|(k, e)| (k.to_bytes(), e.clone())),
            );
        }
        if keys.is_empty() {
            continue;
        }
        crate::digest::begin_db(&mut total, db);
        for (k, e) in &keys {
            crate::digest::add_key(&mut total, k, e);
        }
    }
    Ok(Frame::Simple(Bytes::from(crate::digest::hex(&total))))
}

fn digest_values(ctx: &mut Ctx<'_>, keys: &[Bytes]) -> Reply {
    let mut txn = crate::dispatch::lock(ctx.shared, false, keys.iter().map(|k| &k[..]))?;
    let db = ctx.db();
    let out = keys
        .iter()
        .map(|k| {
            let d = txn.get(db, k).map(crate::digest::value).unwrap_or([0; 20]);
            Frame::Simple(Bytes::from(crate::digest::hex(&d)))
        })
        .collect();
    Ok(Frame::Array(out))
}

/// Takes a checkpoint, loads it into a scratch keyspace, and checks that
/// it holds exactly the live data. The live keyspace is not swapped for
/// the loaded copy: they are equal, and the log already covers every
/// write, so replacing it would change nothing but cost a pause.
fn reload(ctx: &mut Ctx<'_>) -> Reply {
    let shared = ctx.shared;
    let failed = |why: String| {
        tracing::warn!("DEBUG RELOAD: {why}");
        Frame::error(RELOAD_FAILED)
    };
    let stats = crate::checkpointer::blocking(|| {
        crate::checkpointer::checkpoint_now(
            shared,
            "debug reload",
            crate::checkpointer::Pace::Foreground,
        )
    })
    .map_err(|e| failed(e.to_string()))?;
    let live = &shared.store.keyspace;
    let scratch = Keyspace::new(live.num_dbs(), live.num_shards());
    let cp = &shared.store.checkpointer;
    durakv_engine::checkpoint::load_into(cp.fs(), &stats.path, &scratch, 1)
        .map_err(|e| failed(e.to_string()))?;
    let mut txn = crate::dispatch::lock(shared, true, std::iter::empty())?;
    let now = txn.now_ms;
    let mut mismatches = 0usize;
    for (i, shard) in txn.shards_mut().enumerate() {
        let copy = scratch.shard(i).lock();
        for (db, live_db) in shard.dbs.iter().enumerate() {
            let loaded = &copy.dbs[db];
            let alive = live_db
                .iter()
                .filter(|(k, e)| !live_db.is_expired(k, e, now));
            for (k, e) in alive {
                match loaded.peek(k) {
                    Some(c)
                        if c.value == e.value
                            && loaded.expire_of(k, c) == live_db.expire_of(k, e) => {}
                    _ => mismatches += 1,
                }
            }
        }
    }
    if mismatches > 0 {
        // Writes between the checkpoint and the comparison also land here.
        return Err(failed(format!(
            "{mismatches} keys differ from the checkpoint"
        )));
    }
    Ok(Frame::ok())
}
