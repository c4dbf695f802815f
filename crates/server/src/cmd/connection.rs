//! Connection commands: PING, ECHO, SELECT, QUIT, RESET, AUTH, HELLO.

use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::dispatch;
use crate::errors;
use crate::util::is;
use bytes::Bytes;
use durakv_protocol::{Frame, Protocol};

/// The Redis version durakv reports to clients, which gate features on it.
pub const REDIS_COMPAT_VERSION: &str = "7.2.4";

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec(
            "ping",
            -1,
            FAST,
            NO_KEYS,
            Handler::Conn(ping),
            "connection",
            "Answers PONG, or echoes its argument.",
        ),
        spec(
            "echo",
            2,
            FAST | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(echo),
            "connection",
            "Replies with its argument.",
        ),
        spec(
            "select",
            2,
            LOADING | STALE | FAST,
            NO_KEYS,
            Handler::Conn(select),
            "connection",
            "Switches to another numbered database.",
        ),
        spec(
            "quit",
            -1,
            NOAUTH | NOSCRIPT | LOADING | STALE | FAST | MULTI_CONTROL,
            NO_KEYS,
            Handler::Conn(quit),
            "connection",
            "Asks the server to hang up.",
        ),
        spec(
            "reset",
            1,
            NOAUTH | NOSCRIPT | LOADING | STALE | FAST | MULTI_CONTROL,
            NO_KEYS,
            Handler::Conn(reset),
            "connection",
            "Restores this connection's initial state.",
        ),
        spec(
            "auth",
            -2,
            NOAUTH | NOSCRIPT | LOADING | STALE | FAST,
            NO_KEYS,
            Handler::Conn(auth),
            "connection",
            "Logs this connection in.",
        ),
        spec(
            "hello",
            -1,
            NOAUTH | NOSCRIPT | LOADING | STALE | FAST,
            NO_KEYS,
            Handler::Conn(hello),
            "connection",
            "Picks the protocol version; may log in and name the connection.",
        ),
    ]
}

fn ping(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() <= 2 {
        if let Some(pong) = super::pubsub::subscribed_pong(ctx, args) {
            return Ok(pong);
        }
    }
    match args.len() {
        1 => Ok(Frame::simple("PONG")),
        2 => Ok(Frame::Bulk(args[1].clone())),
        _ => {
            let _ = ctx;
            Err(errors::wrong_args("ping"))
        }
    }
}

fn echo(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Ok(Frame::Bulk(args[1].clone()))
}

fn select(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    ctx.client.db = super::keys::db_index_arg(ctx, &args[1])?;
    Ok(Frame::ok())
}

fn quit(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    ctx.client.close_after_reply = true;
    Ok(Frame::ok())
}

fn reset(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    ctx.client.multi = None;
    dispatch::unwatch_all(ctx);
    super::pubsub::unsubscribe_everything(ctx);
    crate::tracking::forget(ctx.shared, ctx.client);
    ctx.shared.monitors.remove(&ctx.client.handle);
    ctx.client.db = 0;
    ctx.client.protocol = Protocol::Resp2;
    ctx.client.name = None;
    ctx.client.durability = None;
    ctx.client.no_touch = false;
    ctx.client.authenticated = ctx.shared.acl.default_needs_no_auth();
    ctx.client.user = ctx.shared.acl.default_user();
    ctx.client.acl_generation = ctx.shared.acl.generation();
    Ok(Frame::simple("RESET"))
}

/// Logs the connection in as `user` if `pass` is one of its passwords;
/// a failure goes to ACL LOG under the name tried.
fn log_in(ctx: &mut Ctx<'_>, command: &[u8], user: &[u8], pass: &[u8]) -> Result<(), Frame> {
    match ctx.shared.acl.authenticate(user, pass) {
        Some(u) => {
            ctx.client.authenticated = true;
            ctx.client.user = u;
            ctx.client.acl_generation = ctx.shared.acl.generation();
            Ok(())
        }
        None => {
            let context = if ctx.client.multi.is_some() || ctx.client.in_exec {
                crate::acl::log::Context::Multi
            } else {
                crate::acl::log::Context::Toplevel
            };
            crate::acl::check::log(
                ctx,
                crate::acl::log::Reason::Auth,
                context,
                String::from_utf8_lossy(command).into_owned(),
                Some(&String::from_utf8_lossy(user)),
            );
            Err(errors::err(errors::WRONGPASS))
        }
    }
}

fn auth(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let (user, pass) = match args.len() {
        2 => {
            if ctx.shared.acl.default_user().nopass {
                return Err(Frame::error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
            }
            (&b"default"[..], &args[1][..])
        }
        3 => (&args[1][..], &args[2][..]),
        _ => return Err(errors::err(errors::SYNTAX)),
    };
    log_in(ctx, &args[0], user, pass)?;
    Ok(Frame::ok())
}

fn hello(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut i = 1;
    let mut proto = None;
    if args.len() > 1 {
        let Some(v) = durakv_engine::value::parse_i64(&args[1]) else {
            return Err(Frame::error(
                "ERR Protocol version is not an integer or out of range",
            ));
        };
        proto = match v {
            2 => Some(Protocol::Resp2),
            3 => Some(Protocol::Resp3),
            _ => return Err(Frame::error("NOPROTO unsupported protocol version")),
        };
        i = 2;
    }
    // Redis acts on AUTH and SETNAME where they stand: a later bad option
    // leaves the login and the name in place.
    while i < args.len() {
        if is(&args[i], "auth") && i + 2 < args.len() {
            log_in(ctx, &args[0], &args[i + 1], &args[i + 2])?;
            i += 3;
        } else if is(&args[i], "setname") && i + 1 < args.len() {
            let name = &args[i + 1];
            super::client::validate_client_name(name)?;
            ctx.client.name = (!name.is_empty()).then(|| name.clone());
            i += 2;
        } else {
            return Err(Frame::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            )));
        }
    }
    if !ctx.client.authenticated {
        return Err(Frame::error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(p) = proto {
        ctx.client.protocol = p;
    }
    let s = |t: &str| Frame::bulk_from_str(t);
    Ok(Frame::Map(vec![
        (s("server"), s("redis")),
        (s("version"), s(REDIS_COMPAT_VERSION)),
        (s("proto"), Frame::Integer(ctx.client.protocol.version())),
        (s("id"), Frame::Integer(ctx.client.id() as i64)),
        (s("mode"), s("standalone")),
        (
            s("role"),
            s(if ctx.shared.repl.is_replica() {
                "replica"
            } else {
                "master"
            }),
        ),
        (s("modules"), Frame::Array(Vec::new())),
    ]))
}
