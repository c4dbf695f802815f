//! Persistence and durability waits: LASTSAVE, SAVE, BGSAVE (all backed
//! by checkpoints), WAITAOF and WAIT.
use crate::blocking::{Condition, Unblocked};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::dispatch::Outcome;
use crate::errors;
use crate::util::is;
use bytes::Bytes;
use durakv_engine::value::parse_i64;
use durakv_engine::Durability;
use durakv_protocol::Frame;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("lastsave", 1, LOADING | STALE | FAST, NO_KEYS, Handler::Conn(lastsave), "server", "Gives the Unix time of the latest checkpoint that completed."),
        spec("save", 1, ADMIN | NOSCRIPT | NO_MULTI, NO_KEYS, Handler::Conn(save), "server", "Takes a checkpoint, replying once it is on disk."),
        spec("bgsave", -1, ADMIN | NOSCRIPT, NO_KEYS, Handler::Conn(bgsave), "server", "Starts, or schedules, a background checkpoint."),
        spec("bgrewriteaof", 1, ADMIN | NOSCRIPT, NO_KEYS, Handler::Conn(bgrewriteaof), "server", "Shortens the write-ahead log with a checkpoint."),
        spec("waitaof", 4, NOSCRIPT, NO_KEYS, Handler::Outcome(waitaof), "generic", "Waits until this connection's writes are durable locally and on enough replicas."),
        spec("wait", 3, NOSCRIPT, NO_KEYS, Handler::Conn(wait), "generic", "Waits until enough replicas acknowledge this connection's writes, or a timeout."),
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
/// timer on held replies). With replicas wanted the client blocks, like
/// WAIT, until enough replicas' acknowledged durable offsets (REPLCONF ACK
/// ... FACK) cover the connection's last write; a local write asked for
/// holds that reply in the same way.
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
    let level = ctx
        .shared
        .effective_durability(ctx.client.durability, ctx.client.db);
    // In a database the log does not cover, nothing this connection writes
    // is ever fsynced (in a logged one, even a `none` connection's writes are).
    let unlogged = level == Durability::None && !ctx.shared.store.keyspace.is_logged(ctx.client.db);
    let wait = WaitAofAcks {
        target: ctx.client.last_write_offset,
        wanted: numreplicas,
        lsn: ctx.client.last_write_lsn,
        local: if unlogged {
            Local::Never
        } else if numlocal == 1 {
            Local::Held
        } else {
            Local::Report
        },
    };
    let done = if numreplicas == 0 || ctx.client.in_exec || ctx.client.in_script {
        Some(wait.reply(ctx.shared))
    } else {
        if wait.local == Local::Held && wait.lsn > ctx.shared.durable_lsn() {
            ctx.shared.store.wal.request_sync_upto(wait.lsn);
        }
        wait.met(ctx.shared, &ctx.shared.repl.acks())
    };
    if let Some(u) = done {
        return Outcome {
            frame: u.frame,
            dependency_lsn: u.dependency_lsn,
        };
    }
    block_until(ctx, timeout_ms, Box::new(wait));
    Outcome::now(Frame::Null)
}

/// How WAITAOF answers for the local log.
#[derive(Clone, Copy, PartialEq)]
enum Local {
    /// Asked for (`numlocal` 1): the reply says 1 and waits for the fsync.
    Held,
    /// Not asked for: whether the write is durable when the reply is made.
    Report,
    /// The connection's writes are never logged: 0.
    Never,
}

/// WAITAOF's wait for replicas whose durable offset covers `target`.
struct WaitAofAcks {
    target: u64,
    wanted: i64,
    /// The connection's last logged write.
    lsn: u64,
    local: Local,
}

impl WaitAofAcks {
    fn reply(&self, shared: &crate::state::Shared) -> Unblocked {
        let (local, dependency_lsn) = match self.local {
            Local::Held => (1, self.lsn),
            Local::Report => (i64::from(self.lsn <= shared.durable_lsn()), 0),
            Local::Never => (0, 0),
        };
        let replicas = shared.repl.acks().facked(self.target) as i64;
        Unblocked {
            dependency_lsn,
            ..Unblocked::now(Frame::Array(vec![
                Frame::Integer(local),
                Frame::Integer(replicas),
            ]))
        }
    }
}

impl Condition for WaitAofAcks {
    fn command(&self) -> &'static str {
        "waitaof"
    }

    fn met(&self, shared: &crate::state::Shared, acks: &crate::repl::Acks) -> Option<Unblocked> {
        (acks.facked(self.target) as i64 >= self.wanted).then(|| self.reply(shared))
    }

    fn expired(&self, shared: &crate::state::Shared) -> Unblocked {
        self.reply(shared)
    }
}

/// Blocks the client on `cond` for `timeout_ms` (0: no timeout), after
/// asking the replicas to acknowledge its last write. The connection
/// answers when the wait ends, holding no thread meanwhile.
fn block_until(ctx: &mut Ctx<'_>, timeout_ms: i64, cond: Box<dyn Condition>) {
    let timeout = (timeout_ms > 0).then(|| std::time::Duration::from_millis(timeout_ms as u64));
    ctx.shared
        .blocking
        .block_until(ctx.shared, ctx.client, timeout, cond);
    ctx.shared
        .repl
        .request_acks_covering(ctx.client.last_write_offset);
}

/// WAIT: replicas whose acknowledged offset covers this connection's last
/// write. Blocks until enough of them acknowledge it or the timeout passes
/// (0: none), as Redis does; a replica that connects and catches up
/// meanwhile counts. Where a command may not block (MULTI/EXEC, scripts)
/// it answers at once.
fn wait(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some(wanted) = parse_i64(&args[1]) else {
        return Err(errors::err(errors::NOT_INTEGER));
    };
    let timeout_ms = parse_timeout(&args[2])?;
    if ctx.shared.repl.is_replica() {
        return Err(Frame::error(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let wait = WaitAcks {
        target: ctx.client.last_write_offset,
        wanted,
    };
    if let Some(u) = wait.met(ctx.shared, &ctx.shared.repl.acks()) {
        return Ok(u.frame);
    }
    if ctx.client.in_exec || ctx.client.in_script {
        return Ok(wait.expired(ctx.shared).frame);
    }
    block_until(ctx, timeout_ms, Box::new(wait));
    // Never sent: the connection answers when the wait ends.
    Ok(Frame::Null)
}

/// WAIT's wait for replicas whose acknowledged offset covers `target`.
struct WaitAcks {
    target: u64,
    wanted: i64,
}

impl Condition for WaitAcks {
    fn command(&self) -> &'static str {
        "wait"
    }

    fn met(&self, _shared: &crate::state::Shared, acks: &crate::repl::Acks) -> Option<Unblocked> {
        let n = acks.acked(self.target) as i64;
        (n >= self.wanted).then(|| Unblocked::now(Frame::Integer(n)))
    }

    fn expired(&self, shared: &crate::state::Shared) -> Unblocked {
        Unblocked::now(Frame::Integer(shared.repl.acks().acked(self.target) as i64))
    }
}
