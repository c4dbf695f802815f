//! Turns one parsed request into a reply: lookup, arity and auth checks,
//! MULTI queueing, locking, running the handler, committing its writes, and
//! working out which LSN the reply must wait for.

use crate::command::{flags, into_frame, lookup, CommandSpec, Ctx, Handler};
use crate::errors;
use crate::state::Shared;
use bytes::Bytes;
use durakv_engine::mutation::Mutation;
use durakv_engine::txn::{CommitOutcome, Txn};
use durakv_engine::Durability;
use durakv_protocol::Frame;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A reply, and the LSN that must be durable before it may be sent (0: none).
pub struct Outcome {
    pub frame: Frame,
    pub dependency_lsn: u64,
}

impl Outcome {
    pub fn now(frame: Frame) -> Outcome {
        Outcome {
            frame,
            dependency_lsn: 0,
        }
    }
}

/// Executes one request. Never panics on client input.
pub fn execute(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    ctx.client.error_counted = false;
    let out = check_and_run(ctx, args);
    // Only the local part of a `replicated` dependency: a write that no
    // replica confirms must not hold a monitor's lines for good.
    crate::monitor::end_request(ctx, crate::repl::dep_parts(out.dependency_lsn).0);
    crate::tracking::after_command(ctx, &args[0]);
    if out.frame.is_error() && !ctx.client.error_counted {
        ctx.shared.cmdstats.error_reply(&out.frame);
    }
    out
}

fn check_and_run(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    ctx.shared.stats.total_commands_processed.add(1);
    let spec = lookup(&args[0]);
    let blocking = spec.is_some_and(|s| s.flags & flags::BLOCKING != 0);
    ctx.client.handle.activity.runs(blocking);
    let Some(spec) = spec else {
        flag_multi(ctx);
        return Outcome::now(errors::unknown_command(&args[0], &args[1..]));
    };
    // Set before the checks, as Redis does: CLIENT INFO in ACL LOG names
    // the refused command.
    ctx.client.last_cmd.clear();
    ctx.client.last_cmd.push_str(spec.name);
    if !spec.arity_ok(args.len()) {
        return reject(ctx, spec, errors::wrong_args(spec.name));
    }
    if let Err(e) = crate::cmd::subcommands::check_subcommand(spec.name, args) {
        return reject(ctx, spec, e);
    }
    if !ctx.client.authenticated && spec.flags & flags::NOAUTH == 0 {
        return reject(ctx, spec, errors::err(errors::NOAUTH));
    }
    if let Some(noperm) = crate::acl::check::enforce(ctx, spec, args) {
        return reject(ctx, spec, noperm);
    }
    if let Some(refusal) = crate::cmd::pubsub::refuse_in_subscribed_mode(ctx, spec, args) {
        return reject(ctx, spec, refusal);
    }
    if let Some(busy) = ctx.shared.scripting.busy_refusal(ctx.shared, || {
        crate::cmd::scripting::allowed_when_busy(spec.name, args)
    }) {
        return reject(ctx, spec, busy);
    }
    // The primary's stream is applied whatever the memory: refusing part
    // of it would leave this replica holding other data.
    if ctx.shared.evict.maxmemory() != 0 && !ctx.client.is_master {
        if let Some(oom) = refuse_for_memory(ctx, spec) {
            return reject(ctx, spec, oom);
        }
    }
    if ctx.client.multi.is_some() && spec.flags & flags::NO_MULTI != 0 {
        flag_multi(ctx);
        return Outcome::now(Frame::error("ERR Command not allowed inside a transaction"));
    }
    if spec.is_write() && read_only_replica(ctx) {
        return reject(ctx, spec, Frame::error(errors::READONLY_REPLICA));
    }
    if spec.flags & flags::LOADING == 0
        && !ctx.client.is_master
        && ctx.shared.repl.loading.load(Ordering::Relaxed)
    {
        return reject(ctx, spec, Frame::error(errors::LOADING));
    }
    if ctx.client.multi.is_some() && spec.flags & flags::MULTI_CONTROL == 0 {
        if let Some(m) = ctx.client.multi.as_mut() {
            m.queue(args);
        }
        return Outcome::now(Frame::queued());
    }
    if spec.is_write() {
        // Memory was dealt with above, evicting first.
        if let Some(refusal) = refuse_write(ctx, spec.flags & !flags::DENYOOM) {
            return reject(ctx, spec, refusal);
        }
    }
    let started = crate::util::mono_ns();
    let out = run(ctx, spec, args, started);
    crate::monitor::show(ctx, spec, args);
    let took = crate::util::mono_elapsed(started);
    account(ctx, spec, args, took, out.frame.is_error(), false);
    if let Some(b) = ctx.client.blocked.as_mut() {
        b.remember_call(args, took);
    }
    out
}

/// Accounts for a command that ran (`by_script`: one a script called):
/// INFO commandstats and the command's latency histogram, the latency
/// monitor, and the slow log. EXEC is not logged, the commands it ran
/// are; a command that blocked is logged once its wait ends.
pub(crate) fn account(
    ctx: &Ctx<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
    took: Duration,
    failed: bool,
    by_script: bool,
) {
    let shared = ctx.shared;
    shared
        .cmdstats
        .call(spec, &ctx.client.last_cmd, took, failed);
    if shared.latency.notable(took) {
        let fast = crate::cmd::subcommands::flags_of(spec, args) & flags::FAST != 0;
        let event = if fast { "fast-command" } else { "command" };
        shared.latency.add(event, took);
    }
    if spec.name == "exec" || (!by_script && ctx.client.blocked.is_some()) {
        return;
    }
    let who = if by_script {
        crate::slowlog::Who::Script
    } else {
        crate::slowlog::Who::Client {
            addr: &ctx.client.handle.addr,
            name: ctx.client.name.as_ref(),
        }
    };
    shared.slowlog.note(args, took, who);
}

/// Runs a command that passed every check, taking the locks it needs;
/// `started` is when it started (`util::mono_ns`), which gives its time.
fn run(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &[Bytes], started: u64) -> Outcome {
    match spec.handler {
        Handler::Conn(f) => Outcome::now(into_frame(f(ctx, args))),
        Handler::Outcome(f) => f(ctx, args),
        Handler::Data(f) => {
            let all = spec.locks_all(args);
            let idx = if all {
                Default::default()
            } else {
                spec.key_indexes(args)
            };
            let keys = idx.iter().map(|&i| &args[i][..]);
            // The keys this call writes, as far as they are known before it
            // runs: a write's own, or those a script or function that may
            // write declares (it locks every shard). Their watchers first run
            // what reached them.
            let declared;
            let written = if spec.is_write() && !all {
                Some(&idx)
            } else if all && spec.flags & flags::READONLY == 0 && spec.reported_keys.is_some() {
                declared = crate::command::key_indexes_of(spec.shown_keys(), args);
                Some(&declared)
            } else {
                None
            };
            let inside = ctx.client.in_exec || ctx.client.in_script;
            if (written.is_some() || spec.flags & flags::BLOCKING != 0) && !inside {
                // A request that arrived before this one from a client that
                // has just connected runs first (`settle::fresh`).
                crate::settle::fresh(ctx.shared, ctx.client.id(), ctx.client.arrival);
            }
            if let Some(written) = written {
                let keys = written.iter().map(|&i| &args[i]);
                crate::settle::watchers(ctx.shared, ctx.client.id(), ctx.client.db, keys);
            } else if spec.writes_every_key() && !inside {
                // FLUSHALL, FLUSHDB and SWAPDB change every key, so every
                // connection first runs what reached it: a blocking read
                // that arrived before the flush blocks and is then told its
                // key is gone, as in Redis, instead of running after it.
                // Not inside EXEC or a script, which hold locks the others
                // need to finish their turns.
                crate::settle::others(ctx.shared, ctx.client.id());
            }
            let now_ms = crate::util::wall_ms_at(started);
            let mut txn = match lock_since(ctx.shared, all, keys, Some(now_ms)) {
                Ok(t) => t,
                Err(busy) => return Outcome::now(busy),
            };
            // Checked again under the locks: a write that passed the check
            // above may have waited for them while this server became a
            // replica (FAILOVER hands over under every shard lock); it is
            // refused, not applied where no stream carries it on.
            if spec.is_write() && read_only_replica(ctx) {
                drop(txn);
                return reject(ctx, spec, Frame::error(errors::READONLY_REPLICA));
            }
            as_client(ctx, &mut txn);
            ctx.client.may_block = spec.flags & flags::BLOCKING != 0;
            let frame = into_frame(crate::notify::run_data(f, ctx, &mut txn, spec, args));
            ctx.client.may_block = false;
            finish(ctx, &mut txn, frame)
        }
    }
}

/// Whether this server is a read-only replica to this client (anyone but
/// its primary's link): writes then get -READONLY.
pub(crate) fn read_only_replica(ctx: &Ctx<'_>) -> bool {
    ctx.shared.repl.is_replica() && !ctx.client.is_master && crate::repl::read_only(ctx.shared)
}

/// What the client's mode asks of a transaction it runs: NO-TOUCH, and
/// for the primary's stream no expiry of its own (`Txn::hold_expiry`).
fn as_client(ctx: &Ctx<'_>, txn: &mut Txn<'_>) {
    txn.set_no_touch(ctx.client.no_touch);
    if ctx.client.is_master {
        txn.hold_expiry();
    }
}

/// Locks every shard (`all`) or those of `keys`. Waits with a timeout, so
/// a script running past `busy-reply-threshold` turns the wait into -BUSY
/// instead of holding this thread until it ends.
pub(crate) fn lock<'s, 'k>(
    shared: &'s Shared,
    all: bool,
    keys: impl Iterator<Item = &'k [u8]> + Clone,
) -> Result<Txn<'s>, Frame> {
    lock_since(shared, all, keys, None)
}

/// [`lock`] with the wall clock as the caller read it just before
/// (`now_ms`), the transaction's time unless the locks had to be waited
/// for.
fn lock_since<'s, 'k>(
    shared: &'s Shared,
    all: bool,
    keys: impl Iterator<Item = &'k [u8]> + Clone,
    mut now_ms: Option<u64>,
) -> Result<Txn<'s>, Frame> {
    let ks = &shared.store.keyspace;
    let patience = crate::scripting::BUSY_POLL;
    loop {
        // The caller's reading serves the first try only.
        let now_ms = now_ms.take();
        let got = if all {
            ks.try_lock_all_for(patience, now_ms)
        } else {
            ks.try_lock_keys_for(keys.clone(), patience, now_ms)
        };
        if let Some(txn) = got {
            return Ok(txn);
        }
        if shared.scripting.timed_out(shared) {
            return Err(shared.scripting.busy_error());
        }
    }
}

/// A reason to refuse a write before running it: a failed log, or (for
/// `denyoom`) memory over `maxmemory`. Only checks: it may run under shard
/// locks (inside scripts), where evicting could deadlock.
pub(crate) fn refuse_write(ctx: &Ctx<'_>, cmd_flags: u32) -> Option<Frame> {
    if ctx.shared.log_failure().is_some() {
        return Some(errors::err(errors::MISCONF));
    }
    if cmd_flags & flags::DENYOOM != 0 && crate::evict::over_limit(ctx.shared) {
        return Some(errors::err(errors::OOM));
    }
    if !ctx.shared.repl.is_replica() {
        let (min, lag) = ctx.shared.hot.min_replicas();
        if min > 0 && (ctx.shared.repl.good_replicas(lag) as u64) < min {
            return Some(Frame::error(errors::NOREPLICAS));
        }
    }
    None
}

/// With `maxmemory` set, before any command: evict by the policy, and if
/// still over with nothing left to evict, refuse what Redis refuses then
/// (a `denyoom` command; any command but EXEC, DISCARD, QUIT or RESET
/// while queueing a MULTI, since queueing grows memory; an EXEC whose
/// queue holds a `denyoom` command). Reads keep working.
fn refuse_for_memory(ctx: &mut Ctx<'_>, spec: &CommandSpec) -> Option<Frame> {
    let outcome = match ctx.client.eviction.take() {
        Some(o) => o,
        None => crate::evict::perform(ctx.shared),
    };
    if outcome != crate::evict::Outcome::Fail {
        return None;
    }
    let deny = spec.flags & flags::DENYOOM != 0
        || match &ctx.client.multi {
            Some(m) if spec.name == "exec" => m
                .queued
                .iter()
                .any(|args| lookup(&args[0]).is_some_and(|s| s.flags & flags::DENYOOM != 0)),
            Some(_) => !matches!(spec.name, "discard" | "quit" | "reset"),
            None => false,
        };
    deny.then(|| errors::err(errors::OOM))
}

/// A command refused before it runs. Inside MULTI the refusal dooms the
/// transaction; if the refused command is EXEC itself, the transaction is
/// discarded with the reason, as Redis does (a client whose EXEC met a
/// busy script must not be left in MULTI, nor have half of it run).
fn reject(ctx: &mut Ctx<'_>, spec: &CommandSpec, error: Frame) -> Outcome {
    ctx.shared.cmdstats.rejected(spec);
    // Redis aborts a rejected EXEC's transaction, and says so even when
    // there was none (an EXEC before AUTH).
    if spec.name == "exec" {
        return exec_abort(ctx, error);
    }
    flag_multi(ctx);
    Outcome::now(error)
}

/// Discards the transaction (and its WATCHes) with Redis's EXECABORT
/// naming `error`.
fn exec_abort(ctx: &mut Ctx<'_>, error: Frame) -> Outcome {
    ctx.client.multi = None;
    unwatch_all(ctx);
    let reason = match &error {
        Frame::Error(e) => String::from_utf8_lossy(e).into_owned(),
        _ => String::new(),
    };
    // Redis formats its own refusals (arity, unknown command) without the
    // `ERR` code; coded ones (NOAUTH, OOM, READONLY) keep theirs.
    let reason = reason.strip_prefix("ERR ").unwrap_or(&reason);
    Outcome::now(Frame::error(format!(
        "EXECABORT Transaction discarded because of: {reason}"
    )))
}

fn flag_multi(ctx: &mut Ctx<'_>) {
    if let Some(m) = ctx.client.multi.as_mut() {
        m.failed = true;
    }
}

/// The level that decides when a client's reply goes out: for a command
/// that wrote, the strictest level among the databases it wrote (each as
/// seen by a client with override `conn`); otherwise that of `db`, the
/// client's current database. Whether anything is logged is decided by the
/// databases, not by this (`docs/durability.md`, "Which writes are logged").
fn reply_level(
    shared: &Shared,
    conn: Option<Durability>,
    db: usize,
    muts: &[Mutation],
) -> Durability {
    let of = |db: usize| shared.effective_durability(conn, db);
    let mut level: Option<Durability> = None;
    let mut add = |l: Durability| {
        if level.is_none_or(|cur| l.strictness() > cur.strictness()) {
            level = Some(l);
        }
    };
    for m in muts {
        match m {
            Mutation::Key { db, .. } | Mutation::FlushDb { db } => add(of(*db as usize)),
            Mutation::SwapDb { a, b } => {
                add(of(*a as usize));
                add(of(*b as usize));
            }
            Mutation::FlushAll => {
                for db in 0..shared.store.keyspace.num_dbs() {
                    add(of(db));
                }
            }
            // Libraries belong to no database: the connection's decides.
            Mutation::Function(_) => add(of(db)),
            // Only the replication link writes it, next to its writes.
            Mutation::ReplOrigin(_) => {}
        }
    }
    level.unwrap_or_else(|| of(db))
}

/// Commits what the handler applied, then serves clients blocked on the
/// keys it wrote, and computes the reply's dependency.
pub(crate) fn finish(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, frame: Frame) -> Outcome {
    let shared = ctx.shared;
    if let Some((replid, offset)) = ctx.client.repl_origin.take() {
        if !txn.mutations().is_empty() {
            let origin = durakv_engine::mutation::ReplOrigin {
                replid,
                offset,
                db: ctx.client.db as u32,
            };
            if let Err(e) = txn.apply(Mutation::ReplOrigin(origin)) {
                tracing::warn!("replication: the stream position could not be logged: {e}");
            }
        }
    }
    let ready = shared.blocking.ready_keys(txn.mutations());
    txn.after_write(ctx.client.last_write_dep);
    match commit(shared, ctx.client.durability, ctx.client.db, txn) {
        Ok(out) => {
            if out.lsn != 0 {
                ctx.client.last_write_lsn = ctx.client.last_write_lsn.max(out.lsn);
                ctx.client.last_write_dep = durakv_engine::dep::on_stream(out.stream, out.lsn);
            }
            if out.mutations > 0 {
                ctx.client.last_write_offset = shared.repl.end_offset();
            }
            // The locks are released: a subscriber that reacts to an event
            // sees the change.
            crate::notify::flush(ctx, out.dependency_lsn);
            crate::tracking::flush(ctx);
            // Redis sends the replies of the clients a write unblocked
            // before the write's own (its list of clients to write to is
            // last in, first out), and job queues rely on it: a worker
            // woken for a job asks for it before a newcomer does. So this
            // reply waits for theirs to be durable, and the connection
            // lets them go out first (`ClientState::served_blocked`).
            let (served_dep, served) = shared.blocking.serve(shared, ctx.client.id(), ready);
            ctx.client.served_blocked |= served;
            Outcome {
                frame,
                dependency_lsn: crate::repl::combine_deps(out.dependency_lsn, served_dep),
            }
        }
        Err(e) => {
            crate::notify::discard(ctx);
            crate::tracking::discard(ctx);
            Outcome::now(e)
        }
    }
}

/// Commits `txn` for a client with level override `conn` whose current
/// database is `db`: marks WATCHers of what it wrote dirty and writes its
/// record at the reply's level. The outcome's `dependency_lsn` is what the
/// reply waits for: 0 unless that level is `full`.
pub(crate) fn commit(
    shared: &Shared,
    conn: Option<Durability>,
    db: usize,
    txn: &mut Txn<'_>,
) -> Result<CommitOutcome, Frame> {
    let muts = txn.mutations();
    if !muts.is_empty() {
        shared.watches.touch(muts);
        shared.stats.dirty.add(muts.len() as u64);
    }
    let level = reply_level(shared, conn, db, muts);
    let mut out = txn
        .commit(shared.store.wal.as_ref(), level)
        .map_err(|e| errors::commit_error(&e))?;
    // Only `full` and `replicated` replies wait; `delayed` and `none`
    // answer at once.
    match level {
        Durability::Full => {}
        Durability::Replicated => {
            out.dependency_lsn = crate::repl::replicated_dep(out.dependency_lsn)
        }
        Durability::Delayed | Durability::None => out.dependency_lsn = 0,
    }
    Ok(out)
}

pub fn unwatch_all(ctx: &mut Ctx<'_>) {
    let id = ctx.client.id();
    for w in ctx.client.watched.drain(..) {
        ctx.shared.watches.unwatch(id, w.db, &w.key);
    }
    ctx.client.watched_bytes = 0;
    ctx.client
        .handle
        .watch_dirty
        .store(false, Ordering::Release);
}

/// EXEC: runs the queued commands atomically, under the locks of every key
/// they and the WATCHed keys name, and commits them as one log record.
pub fn exec(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Outcome {
    let Some(multi) = ctx.client.multi.take() else {
        return Outcome::now(errors::err(errors::EXEC_WITHOUT_MULTI));
    };
    if multi.failed {
        unwatch_all(ctx);
        return Outcome::now(errors::err(errors::EXECABORT));
    }
    let mut lock_all = false;
    let mut writes = false;
    let mut keys: Vec<Bytes> = ctx.client.watched.iter().map(|w| w.key.clone()).collect();
    for args in &multi.queued {
        if let Some(spec) = lookup(&args[0]) {
            writes |= spec.is_write();
            if spec.locks_all(args) {
                lock_all = true;
            } else {
                keys.extend(spec.key_indexes(args).into_iter().map(|i| args[i].clone()));
            }
        }
    }
    // As a single write does (`run`): the clients watching what this
    // transaction writes first run what reached them before it. Walked
    // only when someone watches something.
    let written = multi.queued.iter().flat_map(|args| {
        let spec = lookup(&args[0]).filter(|s| s.is_write() && !s.locks_all(args));
        let idx = spec.map(|s| s.key_indexes(args)).unwrap_or_default();
        idx.into_iter().map(move |i| &args[i])
    });
    crate::settle::watchers(ctx.shared, ctx.client.id(), ctx.client.db, written);
    let mut txn = match lock(ctx.shared, lock_all, keys.iter().map(|k| &k[..])) {
        Ok(t) => t,
        Err(busy) => {
            unwatch_all(ctx);
            return Outcome::now(busy);
        }
    };
    if writes && read_only_replica(ctx) {
        drop(txn);
        return exec_abort(ctx, Frame::error(errors::READONLY_REPLICA));
    }
    as_client(ctx, &mut txn);
    let now = txn.now_ms;
    let expired = ctx
        .client
        .watched
        .iter()
        .any(|w| w.expire_at_ms != 0 && w.expire_at_ms <= now);
    if expired || ctx.client.handle.watch_dirty.load(Ordering::Acquire) {
        // The nil reveals that someone wrote a watched key: it may go out
        // only once that write is durable (the keys' current LSNs cover it).
        for w in &ctx.client.watched {
            txn.get_untouched(w.db, &w.key);
        }
        unwatch_all(ctx);
        ctx.shared.stats.watch_aborts.add(1);
        return finish(ctx, &mut txn, Frame::NullArray);
    }
    let mut replies = Vec::with_capacity(multi.queued.len());
    // Commands that take shard locks themselves, by place in the queue.
    let mut after = Vec::new();
    for (i, args) in multi.queued.iter().enumerate() {
        let Some(spec) = lookup(&args[0]) else {
            replies.push(errors::unknown_command(&args[0], &args[1..]));
            continue;
        };
        if takes_shard_locks(spec) {
            after.push((i, spec));
            replies.push(Frame::Null);
            continue;
        }
        let (reply, dep) = run_queued(ctx, Some(&mut txn), spec, args);
        txn.depend_on(dep);
        replies.push(reply);
    }
    unwatch_all(ctx);
    let mut outcome = finish(ctx, &mut txn, Frame::Array(replies));
    // The transaction's locks are released now; a failed commit answered
    // for the whole transaction.
    if let Frame::Array(replies) = &mut outcome.frame {
        for (i, spec) in after {
            let (reply, dep) = run_queued(ctx, None, spec, &multi.queued[i]);
            let (local, replicated) = crate::repl::dep_parts(outcome.dependency_lsn);
            let merged = durakv_engine::dep::combine(local, dep);
            outcome.dependency_lsn = if replicated {
                crate::repl::replicated_dep(merged)
            } else {
                merged
            };
            replies[i] = reply;
        }
    }
    outcome
}

/// Commands whose handlers lock shards on their own, beside any
/// transaction's (INFO's key counts, MEMORY STATS, CONFIG RESETSTAT and
/// SET, DEBUG OBJECT and DIGEST, SAVE): under EXEC's locks they would wait
/// for the very thread that holds them, and every client after them for
/// that shard. EXEC runs them once its locks are released, each as it
/// would run alone, their replies in their places; what they report then
/// includes the whole transaction.
fn takes_shard_locks(spec: &CommandSpec) -> bool {
    matches!(spec.name, "info" | "memory" | "config" | "debug" | "save")
}

/// Runs one command of an EXEC: under the transaction's locks, or without
/// (`txn` None) for one that takes shard locks itself. Returns its reply
/// and the local dependency of what it read (an Outcome command's).
fn run_queued(
    ctx: &mut Ctx<'_>,
    txn: Option<&mut Txn<'_>>,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> (Frame, u64) {
    let refused = if spec.is_write() && ctx.shared.log_failure().is_some() {
        Some(errors::err(errors::MISCONF))
    } else {
        crate::acl::check::recheck_in_exec(ctx, spec, args)
    };
    let (reply, dep) = match refused {
        Some(why) => (why, 0),
        None => run_counted(ctx, txn, spec, args),
    };
    if reply.is_error() && !std::mem::take(&mut ctx.client.error_counted) {
        // An error inside EXEC's reply is an error reply all the same, in
        // INFO stats as in errorstats, as in Redis.
        ctx.shared.cmdstats.error_reply(&reply);
        ctx.shared.stats.total_error_replies.add(1);
    }
    (reply, dep)
}

/// `run_queued` past its refusals: runs the command and counts the call.
fn run_counted(
    ctx: &mut Ctx<'_>,
    txn: Option<&mut Txn<'_>>,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> (Frame, u64) {
    ctx.client.last_cmd.clear();
    ctx.client.last_cmd.push_str(spec.name);
    let started = crate::util::mono_ns();
    ctx.client.in_exec = true;
    let mut dep = 0;
    let reply = match txn {
        Some(txn) => into_frame(match spec.handler {
            Handler::Data(f) => crate::notify::run_data(f, ctx, txn, spec, args),
            Handler::Conn(f) => f(ctx, args),
            Handler::Outcome(f) => {
                let out = f(ctx, args);
                dep = crate::repl::dep_parts(out.dependency_lsn).0;
                Ok(out.frame)
            }
        }),
        // As it would run alone, taking its own locks.
        None => {
            let out = run(ctx, spec, args, started);
            dep = crate::repl::dep_parts(out.dependency_lsn).0;
            out.frame
        }
    };
    ctx.client.in_exec = false;
    crate::monitor::show(ctx, spec, args);
    account(
        ctx,
        spec,
        args,
        crate::util::mono_elapsed(started),
        reply.is_error(),
        false,
    );
    (reply, dep)
}
