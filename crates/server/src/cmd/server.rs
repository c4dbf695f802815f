//! Whole-server commands that fit no other family: TIME, SHUTDOWN, ROLE,
//! MONITOR, LOLWUT.
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::errors;
use crate::util::{is, now_us};
use bytes::Bytes;
use durakv_protocol::Frame;

use super::subcommands::*;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec(
            "lolwut",
            -1,
            READONLY | FAST,
            NO_KEYS,
            Handler::Conn(lolwut),
            "server",
            "Draws the write-ahead log, then the version.",
        ),
        spec(
            "time",
            1,
            LOADING | STALE | FAST,
            NO_KEYS,
            Handler::Conn(time),
            "server",
            "Gives the server's clock in seconds and microseconds.",
        ),
        spec(
            "shutdown",
            -1,
            ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI,
            NO_KEYS,
            Handler::Conn(shutdown),
            "server",
            "Stops the server, taking a final checkpoint unless told NOSAVE.",
        ),
        spec(
            "role",
            1,
            NOSCRIPT | LOADING | STALE | FAST,
            NO_KEYS,
            Handler::Conn(role),
            "server",
            "Says whether this is a primary or a replica.",
        ),
        spec(
            "monitor",
            1,
            ADMIN | NOSCRIPT | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(monitor),
            "server",
            "Streams every command the server runs to this connection.",
        ),
    ]
}

/// Turns the connection into a monitor (`crate::monitor`). As in Redis, a
/// second MONITOR, or one from a replication link, gets no reply at all.
fn monitor(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    if ctx.client.in_exec {
        return Err(Frame::error(
            "ERR MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    let h = &ctx.client.handle;
    if h.replication.load(std::sync::atomic::Ordering::Relaxed) || !ctx.shared.monitors.add(h) {
        ctx.client.suppress_this_reply = true;
    }
    Ok(Frame::ok())
}

// ---------------------------------------------------------------------------
// TIME, SHUTDOWN, ROLE
// ---------------------------------------------------------------------------

fn time(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    let us = now_us();
    Ok(Frame::Array(vec![
        bulk(&(us / 1_000_000).to_string()),
        bulk(&(us % 1_000_000).to_string()),
    ]))
}

fn shutdown(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for a in &args[1..] {
        if is(a, "nosave") {
            nosave = true;
        } else if is(a, "save") {
            save = true;
        } else if is(a, "now") || is(a, "force") {
            other = true;
        } else if is(a, "abort") {
            abort = true;
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
    }
    if (abort && (save || nosave || other)) || (save && nosave) {
        return Err(errors::err(errors::SYNTAX));
    }
    if abort {
        // Shutdown starts at once and cannot be waiting to be aborted.
        return Err(Frame::error("ERR No shutdown in progress."));
    }
    // Logged writes are already in the log; the final checkpoint (taken
    // once connections have drained, unless NOSAVE) also keeps the data of
    // `durability none` databases and shortens the next start-up.
    ctx.shared.checkpoints.set_final_save(!nosave);
    if nosave {
        ctx.shared.scripting.kill_for_shutdown();
    }
    tracing::info!(
        client = ctx.client.id(),
        nosave,
        "SHUTDOWN requested by client"
    );
    ctx.shared.request_shutdown();
    ctx.client.close_after_reply = true;
    // Redis closes the connection without a reply; clients expect that.
    ctx.client.suppress_this_reply = true;
    Ok(Frame::ok())
}

fn role(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    Ok(crate::repl::role_frame(ctx.shared))
}

/// LOLWUT [VERSION n] [n ...]: a drawing of the log (batches appended,
/// each made durable by one fsync), then the versions. Redis draws a
/// different piece per version; the arguments are checked as integers.
fn lolwut(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    // As in Redis: VERSION takes an integer; its versions 5 and 6 draw
    // from integer arguments after it, and any other version, like the
    // default, ignores what follows.
    let int = |a: &Bytes| {
        durakv_engine::value::parse_i64(a).ok_or_else(|| errors::err(errors::NOT_INTEGER))
    };
    if args.len() >= 3 && is(&args[1], "version") && matches!(int(&args[2])?, 5 | 6) {
        for a in &args[3..] {
            int(a)?;
        }
    }
    let art = "\
+----+----+----+----+--
|####|####|####|##  |  <- appends
+----+----+----+----+--
  ^    ^    ^    fsync: what a reply waits for
";
    // Verbatim text in RESP3, as Redis sends it.
    Ok(Frame::Verbatim(Bytes::from(format!(
        "{art}durakv ver. {} (Redis ver. {} compatible)\n",
        env!("CARGO_PKG_VERSION"),
        crate::cmd::connection::REDIS_COMPAT_VERSION
    ))))
}
