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

/// WAITAOF: the reply is held by the connection until this connection's
/// last logged write is durable, so `[1, 0]` is true when it is delivered.
/// The timeout cannot shorten the wait: durakv has no timer on held replies.
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
        parse_timeout(&args[3])?;
        if numreplicas > 0 {
            return Err(Frame::error(
                "ERR WAITAOF cannot be used when numreplicas > 0: durakv has no replicas",
            ));
        }
        Ok(numlocal)
    })();
    let numlocal = match checked {
        Ok(n) => n,
        Err(e) => return Outcome::now(e),
    };
    let pair = |local: i64| Frame::Array(vec![Frame::Integer(local), Frame::Integer(0)]);
    let level = ctx
        .shared
        .effective_durability(ctx.client.durability, ctx.client.db);
    // In a database the log does not cover, nothing this connection writes
    // is ever fsynced (in a logged one, even a `none` connection's writes are).
    if level == Durability::None && !ctx.shared.store.keyspace.is_logged(ctx.client.db) {
        return Outcome::now(pair(0));
    }
    let lsn = ctx.client.last_write_lsn;
    if numlocal == 0 {
        let done = i64::from(lsn <= ctx.shared.durable_lsn());
        return Outcome::now(pair(done));
    }
    Outcome {
        frame: pair(1),
        dependency_lsn: lsn,
    }
}

/// WAIT: replicas that acknowledged the stream up to where it stood when
/// WAIT began (which covers this connection's writes). Asks them for an
/// acknowledgement at once, then polls until enough answered or the
/// timeout passes (0: no timeout), holding this connection's thread.
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
    let target = repl.offset();
    let count = repl.acked(target);
    if count as i64 >= wanted || repl.replicas.lock().is_empty() {
        return Ok(Frame::Integer(count as i64));
    }
    let mut getack = Vec::new();
    crate::repl::effects::resp(&mut getack, &[b"REPLCONF", b"GETACK", b"*"]);
    repl.stream.append_raw(&getack);
    let deadline = (timeout_ms > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms as u64));
    let count = crate::checkpointer::blocking(|| loop {
        let n = repl.acked(target);
        if n as i64 >= wanted
            || deadline.is_some_and(|d| std::time::Instant::now() >= d)
            || ctx.client.handle.is_killed()
            || ctx
                .shared
                .shutting_down
                .load(std::sync::atomic::Ordering::Acquire)
        {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    });
    Ok(Frame::Integer(count as i64))
}
