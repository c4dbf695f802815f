//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: a connection's
//! client-side caching settings (the table itself is `crate::tracking`).
use crate::command::{Ctx, Reply};
use crate::errors;
use crate::tracking::Options;
use crate::util::is;
use bytes::Bytes;
use durakv_engine::value::parse_i64;
use durakv_protocol::Frame;

/// What `CLIENT TRACKING ON|OFF <options>` asked for.
struct Request {
    on: bool,
    redirect: u64,
    bcast: bool,
    optin: bool,
    optout: bool,
    noloop: bool,
    prefixes: Vec<Bytes>,
}

fn parse(ctx: &Ctx<'_>, args: &[Bytes]) -> Result<Request, Frame> {
    let mut r = Request {
        on: false,
        redirect: 0,
        bcast: false,
        optin: false,
        optout: false,
        noloop: false,
        prefixes: Vec::new(),
    };
    let mut i = 3;
    while i < args.len() {
        let opt = &args[i];
        let has_value = i + 1 < args.len();
        if is(opt, "redirect") && has_value {
            i += 1;
            if r.redirect != 0 {
                return Err(Frame::error(
                    "ERR A client can only redirect to a single other client",
                ));
            }
            let id = parse_i64(&args[i]).ok_or_else(|| errors::err(errors::NOT_INTEGER))?;
            // Checked now, though the target may go later (then the
            // tracking client is told its redirect broke).
            if id <= 0 || ctx.shared.clients.get(id as u64).is_none() {
                return Err(Frame::error(
                    "ERR The client ID you want redirect to does not exist",
                ));
            }
            r.redirect = id as u64;
        } else if is(opt, "bcast") {
            r.bcast = true;
        } else if is(opt, "optin") {
            r.optin = true;
        } else if is(opt, "optout") {
            r.optout = true;
        } else if is(opt, "noloop") {
            r.noloop = true;
        } else if is(opt, "prefix") && has_value {
            i += 1;
            r.prefixes.push(args[i].clone());
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
        i += 1;
    }
    if is(&args[2], "on") {
        r.on = true;
    } else if !is(&args[2], "off") {
        return Err(errors::err(errors::SYNTAX));
    }
    Ok(r)
}

/// Redis's checks, in Redis's order, of turning tracking on with `r`.
fn check(ctx: &Ctx<'_>, r: &Request) -> Result<(), Frame> {
    let cur = &ctx.client.tracking;
    if !r.bcast && !r.prefixes.is_empty() {
        return Err(Frame::error(
            "ERR PREFIX option requires BCAST mode to be enabled",
        ));
    }
    if cur.on && cur.bcast != r.bcast {
        return Err(Frame::error(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if r.bcast && (r.optin || r.optout) {
        return Err(Frame::error(
            "ERR OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if r.optin && r.optout {
        return Err(Frame::error(
            "ERR You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if (r.optin && cur.optout) || (r.optout && cur.optin) {
        return Err(Frame::error(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if r.bcast {
        ctx.shared
            .tracking
            .check_prefixes(ctx.client.id(), &r.prefixes)?;
    }
    Ok(())
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN]
/// [OPTOUT] [NOLOOP].
pub(super) fn tracking(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let r = parse(ctx, args)?;
    if !r.on {
        crate::tracking::forget(ctx.shared, ctx.client);
        return Ok(Frame::ok());
    }
    check(ctx, &r)?;
    let handle = ctx.client.handle.clone();
    let prefix_bytes = ctx.shared.tracking.enable(
        &handle,
        Options {
            redirect: r.redirect,
            bcast: r.bcast,
            noloop: r.noloop,
            prefixes: r.prefixes,
        },
    );
    let t = &mut ctx.client.tracking;
    t.on = true;
    t.redirect = r.redirect;
    t.bcast = r.bcast;
    t.optin = r.optin;
    t.optout = r.optout;
    t.noloop = r.noloop;
    t.prefix_bytes = prefix_bytes;
    Ok(Frame::ok())
}

/// CLIENT CACHING YES|NO: whether the next command's reads are tracked,
/// in OPTIN (YES) or OPTOUT (NO) mode.
pub(super) fn caching(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let t = &mut ctx.client.tracking;
    if !t.on {
        return Err(Frame::error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    }
    if is(&args[2], "yes") {
        if !t.optin {
            return Err(Frame::error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if is(&args[2], "no") {
        if !t.optout {
            return Err(Frame::error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(errors::err(errors::SYNTAX));
    }
    t.caching = true;
    Ok(Frame::ok())
}

/// CLIENT GETREDIR: -1 when not tracking, else the redirect (0: none).
pub(super) fn getredir(ctx: &mut Ctx<'_>) -> Reply {
    let t = &ctx.client.tracking;
    Ok(Frame::Integer(if t.on { t.redirect as i64 } else { -1 }))
}

/// CLIENT TRACKINGINFO: flags (a set), redirect and prefixes.
pub(super) fn trackinginfo(ctx: &mut Ctx<'_>) -> Reply {
    let t = &ctx.client.tracking;
    let (prefixes, broken) = ctx.shared.tracking.prefixes_and_broken(ctx.client.id());
    let mut flags = vec![if t.on { "on" } else { "off" }];
    if t.bcast {
        flags.push("bcast");
    }
    if t.optin {
        flags.push("optin");
        if t.caching {
            flags.push("caching-yes");
        }
    }
    if t.optout {
        flags.push("optout");
        if t.caching {
            flags.push("caching-no");
        }
    }
    if t.noloop {
        flags.push("noloop");
    }
    if broken {
        flags.push("broken_redirect");
    }
    let bulk = |s: &str| Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    Ok(Frame::Map(vec![
        (
            bulk("flags"),
            Frame::Set(flags.into_iter().map(bulk).collect()),
        ),
        (
            bulk("redirect"),
            Frame::Integer(if t.on { t.redirect as i64 } else { -1 }),
        ),
        (
            bulk("prefixes"),
            Frame::Array(prefixes.into_iter().map(Frame::Bulk).collect()),
        ),
    ]))
}

/// CLIENT LIST's tracking flags (`t`, `R`, `B`) and `redir=` of client `id`.
pub(super) fn list_fields(ctx: &Ctx<'_>, id: u64) -> (String, i64) {
    match ctx.shared.tracking.shown(id) {
        None => (String::new(), -1),
        Some(s) => {
            let mut flags = String::from("t");
            if s.broken {
                flags.push('R');
            }
            if s.bcast {
                flags.push('B');
            }
            (flags, s.redirect as i64)
        }
    }
}
