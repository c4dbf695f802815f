//! CONFIG GET / SET / RESETSTAT / REWRITE over the directive table in
//! `crate::config`.
use crate::command::{flags::*, into_frame, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::config::Config;
use crate::dispatch::Outcome;
use crate::errors;
use crate::listeners::BindError;
use crate::state::Shared;
use bytes::Bytes;
use durakv_protocol::Frame;
use std::collections::HashSet;
use std::sync::atomic::Ordering::Release;

use super::subcommands::*;

pub fn commands() -> Vec<CommandSpec> {
    vec![spec(
        "config",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        NO_KEYS,
        Handler::Outcome(config),
        "server",
        "Parent of the subcommands that read and change settings.",
    )]
}

pub(super) const CONFIG_SUBS: &[SubSpec] = &[
    sub(
        "get",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Looks up settings by name or glob pattern.",
    ),
    sub(
        "set",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Changes settings at run time, all or none.",
    ),
    sub(
        "resetstat",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Sets INFO's counters and command statistics back to zero.",
    ),
    sub(
        "rewrite",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Writes the running settings to the config file.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each CONFIG subcommand.",
    ),
];

// ---------------------------------------------------------------------------
// CONFIG
// ---------------------------------------------------------------------------

/// CONFIG. A SET that makes a database logged replies once the record
/// holding that database's content is durable.
fn config(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    if let Some(s) = find_sub("config", args).ok().filter(|s| s.name == "set") {
        note_subcommand(ctx, "config", s);
        let (frame, dependency_lsn) = config_set(ctx, args);
        return Outcome {
            frame,
            dependency_lsn,
        };
    }
    Outcome::now(into_frame(config_other(ctx, args)))
}

fn config_other(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("config", args)?;
    note_subcommand(ctx, "config", s);
    match s.name {
        "get" => {
            let cfg = ctx.shared.config.read();
            let mut seen = HashSet::new();
            let mut pairs = Vec::new();
            for pattern in &args[2..] {
                for (name, value) in cfg.matching(pattern) {
                    if seen.insert(name.clone()) {
                        pairs.push((bulk(&name), bulk(&value)));
                    }
                }
            }
            Ok(Frame::Map(pairs))
        }
        "resetstat" => {
            ctx.shared.stats.reset();
            ctx.shared.count_expired_from_now();
            ctx.shared.rates.reset();
            ctx.shared.cmdstats.reset();
            Ok(Frame::ok())
        }
        "rewrite" => {
            let mut cfg = ctx.shared.config.read().clone();
            // Users go to the file as they are now, passwords hashed; with
            // an ACL file they live there instead.
            if cfg.aclfile.is_none() {
                cfg.users = crate::acl::file::lines(&ctx.shared.acl)
                    .into_iter()
                    .map(|l| l.trim_start_matches("user ").to_string())
                    .collect();
            }
            crate::config_rewrite::rewrite(&cfg).map_err(|e| Frame::error(format!("ERR {e}")))?;
            Ok(Frame::ok())
        }
        _ => help(
            "config",
            &[
                "GET <pattern>",
                "    Look up settings by exact name or glob pattern; replies with each",
                "    matching name and its current value.",
                "SET <directive> <value>",
                "    Change settings while the server runs. Several pairs may be given;",
                "    if any one is refused, none of them is applied.",
                "RESETSTAT",
                "    Zero the counters INFO reports, per-command statistics included.",
                "REWRITE",
                "    Save the running settings back into the TOML file named by --config.",
            ],
        ),
    }
}

/// Puts back the configuration from before a CONFIG SET that failed, and
/// the TLS acceptor built from it if the command named a TLS setting.
fn restore(shared: &Shared, before: Config, tls_named: bool) {
    *shared.config.write() = before;
    if tls_named {
        let _ = crate::tls::reload(shared);
    }
}

/// Applies every pair to a copy and installs it only if all succeed, so a
/// failed CONFIG SET changes nothing.
fn config_set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> (Frame, u64) {
    let before = ctx.shared.config.read().clone();
    let frame = config_set_values(ctx, args);
    if frame.is_error() {
        return (frame, 0);
    }
    let tls_named = args[2..]
        .chunks(2)
        .any(|p| p[0].len() > 4 && p[0][..4].eq_ignore_ascii_case(b"tls-"));
    if tls_named {
        if let Err(e) = crate::tls::reload(ctx.shared) {
            tracing::warn!("CONFIG SET: TLS settings not applied: {e}");
            *ctx.shared.config.write() = before;
            return (
                Frame::error(format!(
                    "ERR CONFIG SET failed - Unable to update TLS configuration: {e}"
                )),
                0,
            );
        }
    }
    let oom_named = args[2..]
        .chunks(2)
        .find(|p| p[0].len() >= 13 && p[0][..13].eq_ignore_ascii_case(b"oom-score-adj"));
    if let Some(name) = oom_named {
        let applied = crate::oom_score::apply(ctx.shared, &ctx.shared.config.read());
        if let Err(e) = applied {
            restore(ctx.shared, before, tls_named);
            return (
                Frame::error(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{}') - {e}",
                    String::from_utf8_lossy(&name[0]).to_ascii_lowercase()
                )),
                0,
            );
        }
    }
    // Last of the steps that can fail but one, so that little has to be
    // undone when one does.
    let moved = match rebind(ctx.shared, &before, args) {
        Ok(moved) => moved,
        Err(e) => {
            restore(ctx.shared, before, tls_named);
            if oom_named.is_some() {
                let _ = crate::oom_score::apply(ctx.shared, &ctx.shared.config.read());
            }
            return (e, 0);
        }
    };
    crate::hot_config::apply_config(ctx.shared);
    crate::acl::apply_config(ctx.shared, &before);
    crate::pubsub::apply_config(ctx.shared);
    crate::tracking::apply_config(ctx.shared);
    crate::evict::apply_config(ctx.shared);
    crate::latency::apply_config(ctx.shared);
    crate::connection::apply_config(ctx.shared);
    crate::repl::apply_config(ctx.shared);
    match ctx.shared.sync_logged_dbs() {
        Ok(lsn) => (frame, lsn),
        Err(e) => {
            listen_as_before(ctx.shared, &before, moved);
            *ctx.shared.config.write() = before;
            let _ = ctx.shared.sync_logged_dbs();
            (
                Frame::error(format!(
                    "ERR CONFIG SET failed - cannot start logging a database: {e}"
                )),
                0,
            )
        }
    }
}

/// Back to the sockets in force before a CONFIG SET: the listeners, if it
/// `moved` them, and the metrics endpoint (a no-op where it did not move).
fn listen_as_before(shared: &Shared, before: &Config, moved: bool) {
    if moved {
        let _ = listen_on(shared, before);
    }
    let _ = shared.metrics.apply(before);
}

/// Has the listeners listen where `c` says, and notes the port bound.
fn listen_on(shared: &Shared, c: &Config) -> Result<u16, BindError> {
    let unix_socket = !c.unixsocket.is_empty();
    let bound = shared
        .listeners
        .change(&c.bind, c.port, c.tls_port, unix_socket)?;
    shared.bound_port.store(bound as u64, Release);
    Ok(bound)
}

/// Listens where a changed `bind`, `port`, `metrics-port` or
/// `metrics-bind` says, keeping the old sockets if any new one cannot be
/// bound (the caller then restores `before`). True if the listeners moved.
fn rebind(shared: &Shared, before: &Config, args: &[Bytes]) -> Result<bool, Frame> {
    let named = |n: &[u8]| args[2..].chunks(2).any(|p| p[0].eq_ignore_ascii_case(n));
    let failed = |arg: &str, reason: &str| {
        Frame::error(format!(
            "ERR CONFIG SET failed (possibly related to argument '{arg}') - {reason}"
        ))
    };
    let moved = move_listeners(shared, before).map_err(|e| {
        tracing::warn!("CONFIG SET: {e}");
        let arg = match e {
            BindError::Port(_) if named(b"port") => "port",
            _ if named(b"bind") => "bind",
            _ => "port",
        };
        failed(arg, e.reason())
    })?;
    // Bound first: the configuration's read lock must be released before
    // `listen_as_before` (and the caller) write it back.
    let metrics_moved = shared.metrics.apply(&shared.config.read());
    if let Err(e) = metrics_moved {
        tracing::warn!("CONFIG SET: {e}");
        listen_as_before(shared, before, moved);
        let arg = if named(b"metrics-port") {
            "metrics-port"
        } else {
            "metrics-bind"
        };
        return Err(failed(arg, "Unable to listen on this port"));
    }
    Ok(moved)
}

/// The listeners' part of [`rebind`]: true if they moved.
fn move_listeners(shared: &Shared, before: &Config) -> Result<bool, BindError> {
    // A copy: the configuration's lock is not held while sockets close,
    // which waits for the accept loops.
    let now = shared.config.read().clone();
    if now.bind == before.bind && now.port == before.port {
        return Ok(false);
    }
    let bound = listen_on(shared, &now)?;
    if bound == 0 {
        tracing::info!("plain TCP is off (port 0 beside another listener)");
    } else {
        tracing::info!("now listening on {:?} port {bound}", now.bind);
    }
    Ok(true)
}

/// Whether setting directive `d` to `value` leaves `cfg` as it is.
fn unchanged(d: &crate::config::Directive, cfg: &Config, value: &[u8]) -> bool {
    let mut probe = cfg.clone();
    (d.set)(&mut probe, &lossy(value)).is_ok() && (d.get)(&probe) == (d.get)(cfg)
}

fn config_set_values(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if !args.len().is_multiple_of(2) {
        return errors::err(errors::SYNTAX);
    }
    let fail = |arg: &str, reason: &str| {
        Frame::error(format!(
            "ERR CONFIG SET failed (possibly related to argument '{arg}') - {reason}"
        ))
    };
    let mut cfg = ctx.shared.config.write();
    let mut next = cfg.clone();
    let mut seen = HashSet::new();
    for pair in args[2..].chunks(2) {
        let name = lossy(&pair[0]);
        let lname = name.to_ascii_lowercase();
        if !lname.starts_with("durability-db-") {
            match crate::config::find(&lname) {
                Some(d) if d.runtime => {}
                // The value in force, as a tool replaying CONFIG GET * sends
                // it back: nothing to change.
                Some(d) if unchanged(d, &next, &pair[1]) => {
                    if !seen.insert(lname.clone()) {
                        return fail(&name, "duplicate parameter");
                    }
                    continue;
                }
                Some(_) => return fail(&name, "can't set immutable config"),
                None => {
                    return Frame::error(format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                    ))
                }
            }
        }
        if !seen.insert(lname.clone()) {
            return fail(&name, "duplicate parameter");
        }
        let value = lossy(&pair[1]);
        if let Err(reason) = next.set(&lname, &value) {
            return fail(&name, &reason);
        }
    }
    *cfg = next;
    Frame::ok()
}
