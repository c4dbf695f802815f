//! ACL: users, their permissions, the denial log and the ACL file.
use crate::acl::check::{check, Denial};
use crate::acl::{categories, file, index::INDEX, User};
use crate::command::{flags::*, lookup, spec, CommandSpec, Ctx, Handler, Keys, Reply};
use crate::errors;
use crate::util::is;
use bytes::Bytes;
use durakv_engine::value::parse_i64;
use durakv_protocol::Frame;

use super::subcommands::*;

pub fn commands() -> Vec<CommandSpec> {
    vec![spec(
        "acl",
        -2,
        0,
        Keys::None,
        Handler::Conn(acl),
        "server",
        "Parent of the subcommands that manage users and permissions.",
    )]
}

const ADMIN_SUB: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

pub(super) const ACL_SUBS: &[SubSpec] = &[
    sub(
        "cat",
        -2,
        NOSCRIPT | LOADING | STALE,
        "Gives the category names, or with a category, its commands.",
    ),
    sub(
        "deluser",
        -3,
        ADMIN_SUB,
        "Removes users and disconnects anyone logged in as them.",
    ),
    sub(
        "dryrun",
        -4,
        ADMIN_SUB,
        "Checks whether a user may run a given command.",
    ),
    sub(
        "genpass",
        -2,
        NOSCRIPT | LOADING | STALE,
        "Produces a random hex string suitable as a strong user password.",
    ),
    sub(
        "getuser",
        3,
        ADMIN_SUB,
        "Shows one user's flags, passwords and rules.",
    ),
    sub(
        "list",
        2,
        ADMIN_SUB,
        "Prints every user as an ACL file line.",
    ),
    sub(
        "load",
        2,
        ADMIN_SUB,
        "Replaces all users with those in the aclfile.",
    ),
    sub(
        "log",
        -2,
        ADMIN_SUB,
        "Shows or clears the record of recent ACL denials.",
    ),
    sub(
        "save",
        2,
        ADMIN_SUB,
        "Writes all users, as ACL rules, to the aclfile.",
    ),
    sub(
        "setuser",
        -3,
        ADMIN_SUB,
        "Creates a user or applies rules to one.",
    ),
    sub("users", 2, ADMIN_SUB, "Names every defined user."),
    sub(
        "whoami",
        2,
        NOSCRIPT | LOADING | STALE,
        "Names the user this connection is authenticated as.",
    ),
    sub("help", 2, LOADING | STALE, "Describes each ACL subcommand."),
];

fn acl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("acl", args)?;
    note_subcommand(ctx, "acl", s);
    match s.name {
        "cat" => cat(args),
        "deluser" => deluser(ctx, args),
        "dryrun" => dryrun(ctx, args),
        "genpass" => genpass(args),
        "getuser" => Ok(getuser(ctx, &args[2])),
        "list" => Ok(Frame::Array(
            file::lines(&ctx.shared.acl)
                .iter()
                .map(|l| bulk(l))
                .collect(),
        )),
        "users" => Ok(Frame::Array(
            ctx.shared.acl.names().iter().map(|n| bulk(n)).collect(),
        )),
        "whoami" => Ok(bulk(&ctx.client.user.name)),
        "setuser" => setuser(ctx, args),
        "load" => load(ctx),
        "save" => save(ctx),
        "log" => log(ctx, args),
        _ => help(
            "acl",
            &[
                "CAT [<category>]",
                "    With no argument, name the command categories; with one, name the",
                "    commands that category holds.",
                "DELUSER <username> [<username> ...]",
                "    Remove the named users, closing their connections; replies with how",
                "    many existed. The default user cannot be removed.",
                "DRYRUN <username> <command> [<arg> ...]",
                "    Check, without running it, whether the user may run that command:",
                "    OK if so, otherwise the reason it would be refused.",
                "GETUSER <username>",
                "    Show one user's flags, hashed passwords, command, key and channel",
                "    rules, and any selectors.",
                "GENPASS [<bits>]",
                "    Make a random hex string to use as a password: 256 bits of randomness",
                "    unless <bits> (1 to 4096) asks for another amount.",
                "LIST",
                "    Give every user as the line an ACL file would hold for it.",
                "LOAD",
                "    Replace all users with those read from the aclfile.",
                "LOG [<count> | RESET]",
                "    Show the newest ACL denials (10 unless <count> is given), or clear the",
                "    record with RESET.",
                "SAVE",
                "    Write every user out to the aclfile as ACL rules.",
                "SETUSER <username> <attribute> [<attribute> ...]",
                "    Create the user if needed, then apply the given rules to it in order.",
                "USERS",
                "    Name every user that is defined.",
                "WHOAMI",
                "    Name the user this connection is authenticated as.",
            ],
        ),
    }
}

fn cat(args: &[Bytes]) -> Reply {
    match args.len() {
        2 => Ok(Frame::Array(
            categories::NAMES.iter().map(|c| bulk(c)).collect(),
        )),
        3 => {
            let name = lossy(&args[2]).to_ascii_lowercase();
            let mask = categories::bit(&name).ok_or_else(|| {
                Frame::error(format!("ERR Unknown category '{}'", lossy(&args[2])))
            })?;
            Ok(Frame::Array(
                (0..INDEX.count)
                    .filter(|&id| INDEX.categories[id] & mask != 0)
                    .map(|id| bulk(&INDEX.names[id]))
                    .collect(),
            ))
        }
        _ => Err(sub_syntax(&args[1])),
    }
}

/// Redis's reply when a subcommand's arguments do not fit its forms.
fn sub_syntax(sub: &[u8]) -> Frame {
    errors::sub_usage(sub, "acl")
}

fn setuser(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let name = lossy(&args[2]);
    if name.chars().any(|c| c.is_whitespace() || c == '\0') || args[2].len() != name.len() {
        return Err(Frame::error(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    let rules: Vec<String> = args[3..].iter().map(|a| lossy(a)).collect();
    let user = ctx
        .shared
        .acl
        .build(&name, &rules)
        .map_err(|e| Frame::error(format!("ERR {e}")))?;
    kill_subscribers_that_lost_channels(ctx, &user);
    ctx.shared.acl.put(user);
    Ok(Frame::ok())
}

/// When a user's channels change, its subscribers that hold a
/// subscription the new rules no longer allow are disconnected, as in
/// Redis, rather than left listening where they may not.
fn kill_subscribers_that_lost_channels(ctx: &mut Ctx<'_>, new: &User) {
    if ctx.shared.acl.get(&new.name).is_none() || new.all_selectors().any(|s| s.all_channels()) {
        return;
    }
    let allowed =
        |name: &[u8], pattern: bool| new.all_selectors().any(|s| s.allows_channel(name, pattern));
    let mut doomed = Vec::new();
    for h in ctx.shared.clients.all() {
        if !h.mailbox.is_subscriber() {
            continue;
        }
        if super::client::user_of(ctx, &h) != new.name {
            continue;
        }
        let subs = ctx.shared.pubsub.subscriptions_of(h.id);
        if subs
            .iter()
            .any(|(kind, n)| !allowed(n, *kind == crate::pubsub::Kind::Pattern))
        {
            doomed.push(h);
        }
    }
    for h in doomed {
        disconnect(ctx, &h);
    }
}

/// Closes a client: the caller after its reply, another at once (it
/// leaves CLIENT LIST now, though its task notices at its next turn).
fn disconnect(ctx: &mut Ctx<'_>, h: &crate::client::ClientHandle) {
    if h.id == ctx.client.id() {
        ctx.client.close_after_reply = true;
    } else {
        h.kill();
        ctx.shared.clients.unregister(h.id);
    }
}

/// Disconnects the clients logged in as `name`.
fn kill_users_clients(ctx: &mut Ctx<'_>, name: &str) {
    for h in ctx.shared.clients.all() {
        if super::client::user_of(ctx, &h) == name {
            disconnect(ctx, &h);
        }
    }
}

fn deluser(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let names: Vec<String> = args[2..].iter().map(|a| lossy(a)).collect();
    if names.iter().any(|n| n == "default") {
        return Err(Frame::error("ERR The 'default' user cannot be removed"));
    }
    let existing: Vec<String> = names
        .iter()
        .filter(|n| ctx.shared.acl.get(n).is_some())
        .cloned()
        .collect();
    for n in &existing {
        kill_users_clients(ctx, n);
    }
    Ok(Frame::Integer(ctx.shared.acl.delete(&names) as i64))
}

fn dryrun(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let name = lossy(&args[2]);
    let user = ctx
        .shared
        .acl
        .get(&name)
        .ok_or_else(|| Frame::error(format!("ERR User '{name}' not found")))?;
    let cmd = &args[3..];
    let spec = lookup(&cmd[0])
        .ok_or_else(|| Frame::error(format!("ERR Command '{}' not found", lossy(&cmd[0]))))?;
    if !spec.arity_ok(cmd.len()) {
        return Err(errors::wrong_args(spec.name));
    }
    Ok(match check(&user, spec, cmd) {
        Ok(()) => Frame::ok(),
        Err(d) => bulk(&Denial::message(&d, &user.name, true)),
    })
}

fn genpass(args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return Err(sub_syntax(&args[1]));
    }
    let bits = match args.get(2) {
        None => 256,
        Some(a) => match parse_i64(a) {
            None => return Err(errors::err(errors::NOT_INTEGER)),
            Some(n) if (1..=4096).contains(&n) => n as usize,
            Some(_) => {
                return Err(Frame::error(
                    "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
                ))
            }
        },
    };
    let chars = bits.div_ceil(4);
    let hex: String = (0..chars)
        .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap_or('0'))
        .collect();
    Ok(bulk(&hex))
}

fn getuser(ctx: &Ctx<'_>, name: &[u8]) -> Frame {
    let Some(u) = ctx.shared.acl.get(&lossy(name)) else {
        return Frame::Null;
    };
    let selector = |s: &crate::acl::selector::Selector| {
        vec![
            (bulk("commands"), bulk(&s.describe_commands())),
            (bulk("keys"), bulk(&s.describe_keys())),
            (bulk("channels"), bulk(&s.describe_channels())),
        ]
    };
    let mut fields = vec![
        (
            bulk("flags"),
            Frame::Set(u.flags().iter().map(|f| bulk(f)).collect()),
        ),
        (
            bulk("passwords"),
            Frame::Array(u.passwords.iter().map(|p| bulk(p)).collect()),
        ),
    ];
    fields.extend(selector(&u.root));
    fields.push((
        bulk("selectors"),
        Frame::Array(
            u.selectors
                .iter()
                .map(|s| Frame::Map(selector(s)))
                .collect(),
        ),
    ));
    Frame::Map(fields)
}

const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn load(ctx: &mut Ctx<'_>) -> Reply {
    let path = ctx.shared.config.read().aclfile.clone();
    let path = path.ok_or_else(|| Frame::error(NO_ACLFILE))?;
    let before = ctx.shared.acl.names();
    file::load(&ctx.shared.acl, &path).map_err(|e| Frame::error(format!("ERR {e}")))?;
    // Clients of users that are gone are closed; the others pick up their
    // user's new rules before their next command.
    for name in before {
        if ctx.shared.acl.get(&name).is_none() {
            kill_users_clients(ctx, &name);
        }
    }
    Ok(Frame::ok())
}

fn save(ctx: &mut Ctx<'_>) -> Reply {
    let path = ctx.shared.config.read().aclfile.clone();
    let path = path.ok_or_else(|| Frame::error(NO_ACLFILE))?;
    file::save(&ctx.shared.acl, &path).map_err(|e| {
        tracing::warn!("ACL SAVE to {} failed: {e}", path.display());
        Frame::error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
    })?;
    Ok(Frame::ok())
}

fn log(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let count = match args.get(2) {
        None => 10,
        Some(a) if is(a, "reset") && args.len() == 3 => {
            ctx.shared.acl.log.lock().reset();
            return Ok(Frame::ok());
        }
        Some(a) if args.len() == 3 => match parse_i64(a) {
            None => return Err(errors::err(errors::NOT_INTEGER)),
            // Redis shows nothing for a negative count.
            Some(n) => n.max(0) as usize,
        },
        _ => return Err(sub_syntax(&args[1])),
    };
    let now = crate::util::now_ms();
    let log = ctx.shared.acl.log.lock();
    let entries = log
        .newest(count)
        .map(|e| {
            Frame::Map(vec![
                (bulk("count"), Frame::Integer(e.count as i64)),
                (bulk("reason"), bulk(e.reason.name())),
                (bulk("context"), bulk(e.context.name())),
                (bulk("object"), bulk(&e.object)),
                (bulk("username"), bulk(&e.username)),
                (
                    bulk("age-seconds"),
                    Frame::Double(now.saturating_sub(e.created_ms) as f64 / 1000.0),
                ),
                (bulk("client-info"), bulk(&e.client_info)),
                (bulk("entry-id"), Frame::Integer(e.entry_id as i64)),
                (
                    bulk("timestamp-created"),
                    Frame::Integer(e.created_ms as i64),
                ),
                (
                    bulk("timestamp-last-updated"),
                    Frame::Integer(e.updated_ms as i64),
                ),
            ])
        })
        .collect();
    Ok(Frame::Array(entries))
}
