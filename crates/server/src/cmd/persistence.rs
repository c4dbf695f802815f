//! Persistence and durability waits: LASTSAVE, SAVE, BGSAVE (all backed
//! by checkpoints), WAITAOF and WAIT.
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::dispatch::Outcome;
use crate::errors;
use crate::util::is;
use bytes::Bytes;
use durakv_engine::value::parse_i64;
use durakv_engine::Durability;
use durakv_protocol::Frame;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("lastsave", 1, LOADING | STALE | FAST, NO_KEYS, Handler::Conn(lastsave), "server", "Returns the Unix timestamp of the last successful save to disk."),
        spec("save", 1, ADMIN | NOSCRIPT | NO_MULTI, NO_KEYS, Handler::Conn(save), "server", "Synchronously saves the database(s) to disk."),
        spec("bgsave", -1, ADMIN | NOSCRIPT, NO_KEYS, Handler::Conn(bgsave), "server", "Asynchronously saves the database(s) to disk."),
        spec("bgrewriteaof", 1, ADMIN | NOSCRIPT, NO_KEYS, Handler::Conn(bgrewriteaof), "server", "Asynchronously rewrites the append-only file to disk."),
        spec("waitaof", 4, NOSCRIPT, NO_KEYS, Handler::Outcome(waitaof), "generic", "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas."),
        spec("wait", 3, NOSCRIPT, NO_KEYS, Handler::Conn(wait), "generic", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed."),
    ]
}

// ---------------------------------------------------------------------------
// Persistence: LASTSAVE, SAVE, BGSAVE, all backed by checkpoints.
// ---------------------------------------------------------------------------

fn lastsave(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    Ok(Frame::Integer(
        super::info::last_save_unix(ctx.shared) as i64
    ))
}

/// SAVE: a checkpoint on this connection's thread; the reply waits for it.
/// Other connections keep being served (the checkpoint locks one shard at a
/// time), unlike Redis, whose SAVE blocks the whole server.
fn save(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    let shared = ctx.shared;
    if !shared.checkpoints.enabled() {
        return Err(Frame::error(
            "ERR checkpoints are not available (no data directory)",
        ));
    }
    if shared.checkpoints.in_progress() {
        return Err(Frame::error(crate::checkpointer::ERR_IN_PROGRESS));
    }
    match crate::checkpointer::blocking(|| {
        crate::checkpointer::checkpoint_now(shared, "save", crate::checkpointer::Pace::Foreground)
    }) {
        Ok(_) => Ok(Frame::ok()),
        Err(durakv_engine::checkpoint::CheckpointError::InProgress) => {
            Err(Frame::error(crate::checkpointer::ERR_IN_PROGRESS))
        }
        Err(e) => Err(Frame::error(format!(
            "ERR {}",
            e.to_string().replace(['\r', '\n'], " ")
        ))),
    }
}

/// BGSAVE [SCHEDULE]: hands a checkpoint to the checkpointer thread.
fn bgsave(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let schedule = match args.len() {
        1 => false,
        2 if is(&args[1], "schedule") => true,
        _ => return Err(errors::err(errors::SYNTAX)),
    };
    match ctx.shared.checkpoints.request_bgsave() {
        Ok(()) => Ok(Frame::simple("Background saving started")),
        // One is running; it covers everything written before it finishes
        // only partly, so SCHEDULE queues another behind it.
        Err(e) if schedule && e == crate::checkpointer::ERR_IN_PROGRESS => {
            crate::checkpointer::schedule_bgsave(ctx.shared);
            Ok(Frame::simple("Background saving scheduled"))
        }
        Err(e) => Err(Frame::error(e)),
    }
}

/// The write-ahead log is durakv's append-only file, and what shortens it
/// is a checkpoint (the log before it is dropped): so a rewrite is one,
/// queued behind a checkpoint already running, as Redis schedules a
/// rewrite behind a BGSAVE.
fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    match ctx.shared.checkpoints.request_bgsave() {
        Ok(()) => Ok(Frame::simple(
            "Background append only file rewriting started",
        )),
        Err(e) if e == crate::checkpointer::ERR_IN_PROGRESS => {
            crate::checkpointer::schedule_bgsave(ctx.shared);
            Ok(Frame::simple(
                "Background append only file rewriting scheduled",
            ))
        }
        Err(e) => Err(Frame::error(e)),
    }
}

// ---------------------------------------------------------------------------
// WAITAOF, WAIT
// ---------------------------------------------------------------------------

fn parse_timeout(arg: &[u8]) -> Result<i64, Frame> {
    match parse_i64(arg) {
        None => Err(Frame::error(
            "ERR timeout is not an integer or out of range",
        )),
        Some(t) if t < 0 => Err(Frame::error("ERR timeout is negative")),
        Some(t) => Ok(t),
    }
}

/// WAITAOF: with `numreplicas` 0 the reply is held by the connection until
/// this connection's last logged write is durable, so `[1, 0]` is true when
/// it is delivered (the timeout cannot shorten that wait: durakv has no
/// timer on held replies). With replicas wanted it waits here, like WAIT,
/// for replicas whose acknowledged durable offset (REPLCONF ACK ... FACK)
/// covers the connection's last write, and for the local log if asked.
fn waitaof(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    let checked = (|| {
        let numlocal = parse_i64(&args[1]).ok_or_else(|| errors::err(errors::NOT_INTEGER))?;
        if !(0..=1).contains(&numlocal) {
            return Err(Frame::error(
                "ERR value is out of range, value must between 0 and 1",
            ));
        }
        let numreplicas = parse_i64(&args[2]).ok_or_else(|| errors::err(errors::NOT_INTEGER))?;
        if numreplicas < 0 {
            return Err(Frame::error("ERR value is out of range, must be positive"));
        }
        let timeout = parse_timeout(&args[3])?;
        if ctx.shared.repl.is_replica() {
            return Err(Frame::error(
                "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.",
            ));
        }
        Ok((numlocal, numreplicas, timeout))
    })();
    let (numlocal, numreplicas, timeout_ms) = match checked {
        Ok(n) => n,
        Err(e) => return Outcome::now(e),
    };
    let pair = |local: i64, replicas: usize| {
        Frame::Array(vec![Frame::Integer(local), Frame::Integer(replicas as i64)])
    };
    let level = ctx
        .shared
        .effective_durability(ctx.client.durability, ctx.client.db);
    // In a database the log does not cover, nothing this connection writes
    // is ever fsynced (in a logged one, even a `none` connection's writes are).
    let unlogged = level == Durability::None && !ctx.shared.store.keyspace.is_logged(ctx.client.db);
    let lsn = ctx.client.last_write_lsn;
    let repl = &ctx.shared.repl;
    let target = ctx.client.last_write_offset;
    if numreplicas == 0 {
        if unlogged {
            return Outcome::now(pair(0, repl.facked(target)));
        }
        if numlocal == 0 {
            let done = i64::from(lsn <= ctx.shared.durable_lsn());
            return Outcome::now(pair(done, repl.facked(target)));
        }
        return Outcome {
            frame: pair(1, repl.facked(target)),
            dependency_lsn: lsn,
        };
    }
    if numlocal == 1 && !unlogged && lsn > ctx.shared.durable_lsn() {
        ctx.shared.store.wal.request_sync_upto(lsn);
    }
    ctx.shared.repl.request_acks();
    let local_done = |shared: &crate::state::Shared| !unlogged && lsn <= shared.durable_lsn();
    let (local, count) = poll_until(ctx, timeout_ms, |shared| {
        let local = local_done(shared);
        let n = shared.repl.facked(target);
        let done = (numlocal == 0 || local) && n as i64 >= numreplicas;
        (done, (local, n))
    });
    Outcome::now(pair(i64::from(local), count))
}

/// Polls `check` until it says done, the timeout passes (0: none), the
/// client is killed or the server shuts down, holding this connection's
/// thread; returns the last value it computed.
fn poll_until<T>(
    ctx: &Ctx<'_>,
    timeout_ms: i64,
    check: impl Fn(&crate::state::Shared) -> (bool, T),
) -> T {
    let deadline = (timeout_ms > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms as u64));
    // This connection's own writes may be waiting for it to lead their
    // fsync once its requests are done (`Wal::defer_syncs`).
    ctx.shared.store.wal.release_deferred();
    crate::checkpointer::blocking(|| loop {
        let (done, v) = check(ctx.shared);
        if done
            || deadline.is_some_and(|d| std::time::Instant::now() >= d)
            || ctx.client.handle.is_killed()
            || ctx
                .shared
                .shutting_down
                .load(std::sync::atomic::Ordering::Acquire)
        {
            return v;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    })
}

/// WAIT: replicas whose acknowledged offset covers this connection's last
/// write. Asks them for an acknowledgement at once, then polls until
/// enough answered or the timeout passes (0: no timeout), holding this
/// connection's thread.
fn wait(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some(wanted) = parse_i64(&args[1]) else {
        return Err(errors::err(errors::NOT_INTEGER));
    };
    let timeout_ms = parse_timeout(&args[2])?;
    let repl = &ctx.shared.repl;
    if repl.is_replica() {
        return Err(Frame::error(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let target = ctx.client.last_write_offset;
    let count = repl.acked(target);
    // As Redis: too few replicas (none at all included; one may connect
    // and catch up meanwhile) means waiting out the timeout, except where
    // a command may not block (MULTI/EXEC, scripts). Unlike Redis, a WAIT
    // with no timeout on a server with no replica answers at once: the
    // wait holds a thread, and clients could otherwise pin any number of
    // them on a standalone server.
    if count as i64 >= wanted
        || ctx.client.in_exec
        || ctx.client.in_script
        || (timeout_ms == 0 && repl.replicas.lock().is_empty())
    {
        return Ok(Frame::Integer(count as i64));
    }
    ctx.shared.repl.request_acks();
    let count = poll_until(ctx, timeout_ms, |shared| {
        let n = shared.repl.acked(target);
        (n as i64 >= wanted, n)
    });
    Ok(Frame::Integer(count as i64))
}
