//! REPLICAOF / SLAVEOF, FAILOVER, and the commands a replica sends its primary:
//! REPLCONF, PSYNC and SYNC (see `crate::repl`).

use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::errors;
use crate::repl::primary::PsyncRequest;
use crate::util::is;
use bytes::Bytes;
use durakv_protocol::Frame;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("replicaof", 3, ADMIN | NOSCRIPT | STALE, NO_KEYS, Handler::Conn(replicaof), "server", "Makes this server follow a primary, or with NO ONE stop following one."),
        spec("slaveof", 3, ADMIN | NOSCRIPT | STALE, NO_KEYS, Handler::Conn(replicaof), "server", "Old name for REPLICAOF: follows a primary, or stops with NO ONE."),
        spec("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, Handler::Conn(replconf), "server", "Internal: a replica's settings and acknowledgements."),
        spec("psync", -3, ADMIN | NOSCRIPT | NO_MULTI, NO_KEYS, Handler::Conn(psync), "server", "Internal: a replica asking to resume or restart."),
        spec("failover", -1, ADMIN | NOSCRIPT | STALE, NO_KEYS, Handler::Conn(failover), "server", "Hands the primary role to a replica, or aborts that."),
        spec("sync", 1, ADMIN | NOSCRIPT | NO_MULTI, NO_KEYS, Handler::Conn(sync), "server", "Internal: an old-style replica's full copy request."),
    ]
}

fn replicaof(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let repl = &ctx.shared.repl;
    if is(&args[1], "no") && is(&args[2], "one") {
        if repl.is_replica() {
            crate::repl::become_primary(ctx.shared);
            tracing::info!("MASTER MODE enabled (user request)");
        } else {
            crate::repl::remember_primary(ctx.shared, "");
        }
        return Ok(Frame::ok());
    }
    let port = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| Frame::error("ERR Invalid master port"))?;
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    if repl.is_replica() {
        let l = repl.link.lock();
        if l.host == host && l.port == port {
            return Ok(Frame::simple("OK Already connected to specified master"));
        }
    }
    repl.demote(ctx.shared, host.clone(), port);
    crate::repl::remember_primary(ctx.shared, &format!("{host} {port}"));
    tracing::info!(
        "REPLICAOF {host}:{port} enabled (user request from client {})",
        ctx.client.id()
    );
    Ok(Frame::ok())
}

/// `FAILOVER [TO host port [FORCE]] [TIMEOUT ms] | FAILOVER ABORT`, checked
/// in Redis's order (see `crate::repl::failover`).
fn failover(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    use crate::repl::failover::Request;
    if args.len() == 2 && is(&args[1], "abort") {
        if !crate::repl::failover::abort(ctx.shared, "Failover manually aborted") {
            return Err(Frame::error("ERR No failover in progress."));
        }
        return Ok(Frame::ok());
    }
    let mut req = Request {
        target: None,
        timeout: None,
        force: false,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(&args[i], "timeout") && more >= 1 && req.timeout.is_none() {
            let ms = crate::util::arg_i64(&args[i + 1])?;
            if ms <= 0 {
                return Err(Frame::error("ERR FAILOVER timeout must be greater than 0"));
            }
            req.timeout = Some(std::time::Duration::from_millis(ms as u64));
            i += 2;
        } else if is(&args[i], "to") && more >= 2 && req.target.is_none() {
            let port = crate::util::arg_i64(&args[i + 2])?;
            let host = String::from_utf8_lossy(&args[i + 1]).into_owned();
            // A port no replica listens on matches none, as in Redis.
            req.target = Some((host, u16::try_from(port).unwrap_or(0)));
            i += 3;
        } else if is(&args[i], "force") && !req.force {
            req.force = true;
            i += 1;
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
    }
    ctx.shared
        .repl
        .failover
        .start(ctx.shared, req)
        .map_err(Frame::error)?;
    Ok(Frame::ok())
}

fn replconf(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return Err(errors::err(errors::SYNTAX));
    }
    for pair in args[1..].chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        if is(opt, "listening-port") {
            ctx.client.repl_listening_port = std::str::from_utf8(val)
                .ok()
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| errors::err(errors::NOT_INTEGER))?;
        } else if is(opt, "ip-address") {
            ctx.client.repl_announced_ip = Some(String::from_utf8_lossy(val).into_owned());
        } else if is(opt, "ack") || is(opt, "getack") {
            // Only meaningful on a replication link, which does not come
            // through here; Redis answers nothing either.
            ctx.client.suppress_this_reply = true;
            return Ok(Frame::ok());
        } else if is(opt, "capa") {
            ctx.client.repl_capa_eof |= is(val, "eof");
        } else if is(opt, "rdb-only") {
            ctx.client.repl_rdb_only = match &val[..] {
                b"0" => false,
                b"1" => true,
                _ => {
                    return Err(Frame::error(
                        "ERR value is out of range, must be between 0 and 1",
                    ))
                }
            };
        } else if is(opt, "rdb-filter-only") {
            // Include filters, space-separated; none means everything.
            let text = String::from_utf8_lossy(val);
            let mut functions_only = false;
            for f in text.split_ascii_whitespace() {
                if !f.eq_ignore_ascii_case("functions") {
                    return Err(Frame::error(format!(
                        "ERR Unsupported rdb-filter-only option: {f}"
                    )));
                }
                functions_only = true;
            }
            ctx.client.repl_functions_only = functions_only;
        } else {
            return Err(Frame::error(format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    Ok(Frame::ok())
}

fn begin_sync(ctx: &mut Ctx<'_>, req: PsyncRequest) -> Reply {
    // A replica serves replicas of its own (chained replication) from its
    // primary's stream, once it has one.
    if ctx.shared.repl.is_replica() && !ctx.shared.repl.link.lock().up {
        return Err(Frame::error(
            "NOMASTERLINK Can't SYNC while not connected with my master",
        ));
    }
    ctx.client.psync = Some(req);
    ctx.client.suppress_this_reply = true;
    ctx.client.close_after_reply = true;
    Ok(Frame::ok())
}

fn psync(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let offset = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|o| o.parse::<i64>().ok())
        .ok_or_else(|| errors::err(errors::NOT_INTEGER))?;
    let replid = String::from_utf8_lossy(&args[1]).into_owned();
    if args.get(3).is_some_and(|a| is(a, "failover")) {
        take_over(ctx, &replid)?;
    }
    if ctx.shared.repl.failover.phase() != crate::repl::failover::Phase::None {
        return Err(Frame::error("NOMASTERLINK Can't SYNC while failing over"));
    }
    begin_sync(
        ctx,
        PsyncRequest {
            replid,
            offset,
            legacy: false,
        },
    )
}

/// `PSYNC <replid> <offset> FAILOVER` from this replica's primary, which
/// holds its writes and hands over (its FAILOVER command): this server
/// becomes a primary, and the PSYNC then continues the old primary as its
/// replica from the backlog.
fn take_over(ctx: &mut Ctx<'_>, replid: &str) -> Result<(), Frame> {
    let repl = &ctx.shared.repl;
    if !repl.is_replica() {
        return Err(Frame::error(
            "ERR PSYNC FAILOVER can't be sent to a master.",
        ));
    }
    if repl.ids.lock().replid != replid {
        return Err(Frame::error(
            "ERR PSYNC FAILOVER replid must match my replid.",
        ));
    }
    crate::repl::become_primary(ctx.shared);
    tracing::info!("Failover request received for replid {replid}.");
    Ok(())
}

fn sync(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    begin_sync(
        ctx,
        PsyncRequest {
            replid: "?".into(),
            offset: -1,
            legacy: true,
        },
    )
}
