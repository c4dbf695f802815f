//! CLIENT: a connection's own settings and the server's view of every
//! connection (LIST, INFO, KILL, ...).
use crate::client::{ClientHandle, ClientInfo};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::errors;
use crate::pubsub::Kind;
use crate::util::{is, now_ms};
use bytes::Bytes;
use durakv_engine::value::parse_i64;
use durakv_engine::Durability;
use durakv_protocol::Frame;
use std::collections::HashSet;
use std::sync::atomic::Ordering;

use super::subcommands::*;

pub fn commands() -> Vec<CommandSpec> {
    vec![spec(
        "client",
        -2,
        NOSCRIPT | LOADING | STALE,
        NO_KEYS,
        Handler::Conn(client),
        "connection",
        "Parent of the subcommands that inspect and tune connections.",
    )]
}

/// Client names may not contain spaces, newlines or other special characters.
pub fn validate_client_name(name: &[u8]) -> Result<(), durakv_protocol::Frame> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(durakv_protocol::Frame::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

pub(super) const CLIENT_SUBS: &[SubSpec] = &[
    sub("id", 2, NOSCRIPT | LOADING | STALE, "Gives this connection's numeric ID."),
    sub("setname", 3, NOSCRIPT | LOADING | STALE, "Names this connection."),
    sub("getname", 2, NOSCRIPT | LOADING | STALE, "Reads this connection's name."),
    sub("list", -2, ADMIN | NOSCRIPT | LOADING | STALE, "Describes each connected client."),
    sub("info", 2, NOSCRIPT | LOADING | STALE, "Describes this connection in one line."),
    sub("kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, "Disconnects the clients matching filters."),
    sub("unblock", -3, ADMIN | NOSCRIPT | LOADING | STALE, "Wakes a client waiting in a blocking command, as a timeout or with an error."),
    sub("pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, "Holds all commands, or only writes, for a while."),
    sub("unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, "Ends a CLIENT PAUSE early so held commands run."),
    sub("setinfo", 4, NOSCRIPT | LOADING | STALE, "Records the client library's name or version."),
    sub("no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, "Switches this connection's exemption from client eviction on or off."),
    sub("no-touch", 3, NOSCRIPT | LOADING | STALE, "Chooses whether this connection's reads update keys' access time and counter."),
    sub("reply", 3, NOSCRIPT | LOADING | STALE, "Turns replies to this connection on or off, or skips one."),
    sub("getredir", 2, NOSCRIPT | LOADING | STALE, "Names the client that receives this connection's tracking invalidations."),
    sub("tracking", -3, NOSCRIPT | LOADING | STALE, "Turns invalidation messages for client-side caching on or off."),
    sub("caching", 3, NOSCRIPT | LOADING | STALE, "Chooses whether the next command's keys are tracked, in OPTIN or OPTOUT mode."),
    sub("trackinginfo", 2, NOSCRIPT | LOADING | STALE, "Reports this connection's client-side caching settings."),
    sub("durability", -2, NOSCRIPT | LOADING | STALE, "Sets this connection's durability level: full, delayed, none, replicated, or default (the database's level); with no argument, returns it."),
    sub("help", 2, LOADING | STALE, "Describes each CLIENT subcommand."),
];

// ---------------------------------------------------------------------------
// CLIENT
// ---------------------------------------------------------------------------

fn client(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("client", args)?;
    note_subcommand(ctx, "client", s);
    match s.name {
        "id" => Ok(Frame::Integer(ctx.client.id() as i64)),
        "setname" => {
            validate_client_name(&args[2])?;
            ctx.client.name = (!args[2].is_empty()).then(|| args[2].clone());
            Ok(Frame::ok())
        }
        "getname" => match &ctx.client.name {
            Some(n) => Ok(Frame::Bulk(n.clone())),
            None => Ok(Frame::Null),
        },
        "list" => Ok(client_list(ctx, args)),
        "info" => {
            let tracking = super::tracking::list_fields(ctx, ctx.client.id());
            let mut line = client_line(&ctx.client.handle, &caller_info(ctx), &tracking);
            line.push('\n');
            Ok(Frame::Verbatim(Bytes::from(line)))
        }
        "kill" => Ok(client_kill(ctx, args)),
        "unblock" => super::blocking::client_unblock(ctx, args),
        "pause" => client_pause(ctx, args),
        "unpause" => {
            ctx.shared.pause.unpause();
            Ok(Frame::ok())
        }
        "setinfo" => Ok(client_setinfo(ctx, args)),
        "no-evict" => {
            let on = if is(&args[2], "on") {
                true
            } else if is(&args[2], "off") {
                false
            } else {
                return Err(errors::err(errors::SYNTAX));
            };
            ctx.client.handle.no_evict.store(on, Ordering::Relaxed);
            Ok(Frame::ok())
        }
        "no-touch" => {
            if is(&args[2], "on") {
                ctx.client.no_touch = true;
            } else if is(&args[2], "off") {
                ctx.client.no_touch = false;
            } else {
                return Err(errors::err(errors::SYNTAX));
            }
            Ok(Frame::ok())
        }
        "reply" => {
            if is(&args[2], "on") {
                ctx.client.reply_mode = crate::client::ReplyMode::On;
                Ok(Frame::ok())
            } else if is(&args[2], "off") {
                ctx.client.reply_mode = crate::client::ReplyMode::Off;
                Ok(Frame::ok())
            } else if is(&args[2], "skip") {
                // SKIP itself is not answered, as in Redis.
                if ctx.client.reply_mode != crate::client::ReplyMode::Off {
                    ctx.client.reply_mode = crate::client::ReplyMode::SkipNext;
                }
                ctx.client.suppress_this_reply = true;
                Ok(Frame::ok())
            } else {
                Err(errors::err(errors::SYNTAX))
            }
        }
        "getredir" => super::tracking::getredir(ctx),
        "tracking" => super::tracking::tracking(ctx, args),
        "caching" => super::tracking::caching(ctx, args),
        "trackinginfo" => super::tracking::trackinginfo(ctx),
        "durability" => {
            // Read with no argument, not from CLIENT INFO / LIST: clients
            // parse those lines and some (go-redis) refuse a field Redis
            // does not send.
            let Some(v) = args.get(2) else {
                let level = ctx
                    .client
                    .durability
                    .map(|d| d.as_str())
                    .unwrap_or("default");
                return Ok(Frame::bulk(Bytes::copy_from_slice(level.as_bytes())));
            };
            if args.len() > 3 {
                return Err(errors::err(errors::SYNTAX));
            }
            if is(v, "default") {
                ctx.client.durability = None;
                return Ok(Frame::ok());
            }
            match std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.parse::<Durability>().ok())
            {
                Some(level) => {
                    ctx.client.durability = Some(level);
                    Ok(Frame::ok())
                }
                None => Err(Frame::error(format!(
                    "ERR invalid durability level '{}': expected full, delayed, none, replicated or default",
                    lossy(v)
                ))),
            }
        }
        _ => help(
            "client",
            &[
                "ID",
                "    Give this connection's numeric ID.",
                "SETNAME <name>",
                "    Name this connection <name> (no spaces); an empty name clears it.",
                "GETNAME",
                "    Give this connection's name, or nil when it has none.",
                "LIST [TYPE NORMAL|MASTER|REPLICA|PUBSUB] [ID <id> [<id> ...]]",
                "    Describe each connected client, one line per client; TYPE or ID",
                "    limits the list.",
                "INFO",
                "    Describe this connection in the one-line form LIST uses.",
                "KILL <ip:port>",
                "    Close the connection that comes from <ip:port>; an error if none does.",
                "KILL <option> <value> [<option> <value> [...]]",
                "    Close every connection that passes all the given filters, and reply",
                "    with how many were closed. Filters:",
                "    * ADDR (<ip:port>|<unixsocket>:0)",
                "      the client's own address is this one.",
                "    * LADDR (<ip:port>|<unixsocket>:0)",
                "      the address the client connected to on this server is this one.",
                "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                "      the client is of this kind.",
                "    * USER <username>",
                "      the client is logged in as this user.",
                "    * SKIPME (YES|NO)",
                "      whether the calling connection is spared (YES unless told).",
                "    * ID <client-id>",
                "      the client has this ID.",
                "    * MAXAGE <maxage>",
                "      the client has been connected for at least <maxage> seconds.",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "    Wake a client waiting in a blocking command, as if it timed out",
                "    (TIMEOUT, the default) or with an UNBLOCKED error (ERROR).",
                "PAUSE <timeout> [WRITE|ALL]",
                "    Hold clients' commands for <timeout> ms: every command (ALL, the",
                "    default) or only those that may write (WRITE).",
                "UNPAUSE",
                "    End a pause early; the held commands then run.",
                "SETINFO <option> <value>",
                "    Record facts about the client library, shown by CLIENT LIST:",
                "    * LIB-NAME: which library this is.",
                "    * LIB-VER: which version of it.",
                "NO-EVICT (ON|OFF)",
                "    ON shields this connection from client eviction (maxmemory-clients);",
                "    OFF makes it a candidate again.",
                "NO-TOUCH (ON|OFF)",
                "    ON stops this connection's reads from updating keys' idle time and",
                "    LFU counter; OFF restores the usual behaviour.",
                "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                "         [OPTIN] [OPTOUT] [NOLOOP]",
                "    Turn client-side caching support on or off: the server then sends",
                "    invalidation messages when keys this connection read are changed.",
                "CACHING (YES|NO)",
                "    With OPTIN, YES has the next command's keys tracked; with OPTOUT,",
                "    NO leaves them untracked.",
                "GETREDIR",
                "    Give the ID of the client receiving this connection's invalidations:",
                "    0 when they come here, -1 when tracking is off.",
                "TRACKINGINFO",
                "    Show this connection's tracking flags, redirect and prefixes.",
                "REPLY ON",
                "    Answer every command again. OFF stops replies until ON, and SKIP",
                "    drops the reply to the next command only.",
                "DURABILITY [FULL|DELAYED|NONE|REPLICATED|DEFAULT]",
                "    Set the durability level of this connection's writes (with no",
                "    argument, return it):",
                "    * FULL: reply after the write is fsynced.",
                "    * DELAYED: reply at once; flushed within delayed-flush-ms.",
                "    * NONE: not logged.",
                "    * REPLICATED: as FULL, and durable on min-replicas-to-ack replicas.",
                "    * DEFAULT: use the database's level (durability, durability-db-N).",
            ],
        ),
    }
}

/// The calling connection's CLIENT LIST fields, read from its own state
/// (the published snapshot lags by one command).
fn caller_info(ctx: &Ctx<'_>) -> ClientInfo {
    let c = &*ctx.client;
    ClientInfo {
        name: c.name.clone(),
        db: c.db,
        last_cmd: c.last_cmd.clone(),
        lib_name: c.lib_name.clone(),
        lib_ver: c.lib_ver.clone(),
        resp: c.protocol.version(),
        multi: c
            .multi
            .as_ref()
            .map(|m| m.queued.len() as i64)
            .unwrap_or(-1),
        multi_mem: c.multi_bytes(),
        watch: c.watched.len(),
        durability: c.durability,
        no_touch: c.no_touch,
        user: c.user.name.clone(),
        qbuf: c.query_bytes,
    }
}

/// One CLIENT LIST line, with Redis 7.2's fields in its order.
fn client_line(h: &ClientHandle, info: &ClientInfo, tracking: &(String, i64)) -> String {
    let age = h.created.elapsed().as_secs();
    let idle = now_ms().saturating_sub(h.last_interaction_ms.load(Ordering::Relaxed)) / 1000;
    let mut flags = String::new();
    if h.monitor.load(Ordering::Relaxed) {
        flags.push('O');
    }
    match type_of(h) {
        ClientType::Replica => flags.push('S'),
        ClientType::Master => flags.push('M'),
        _ => {}
    }
    let mailbox = &h.mailbox;
    if mailbox.is_subscriber() {
        flags.push('P');
    }
    if info.multi >= 0 {
        flags.push('x');
    }
    flags.push_str(&tracking.0);
    if h.watch_dirty.load(Ordering::Acquire) {
        flags.push('d');
    }
    if h.is_killed() {
        flags.push('A');
    }
    if h.blocked.load(Ordering::Acquire) {
        flags.push('b');
    }
    if matches!(h.addr, crate::client::Peer::Unix(_)) {
        flags.push('U');
    }
    if info.no_touch {
        flags.push('T');
    }
    if h.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    // The read buffer as it is: an idle connection holds none (a turn
    // borrows its thread's), so `rbs` is 0 where Redis shows 16 KB.
    let rbs = h.input_bytes.load(Ordering::Relaxed).max(info.qbuf);
    let text = |b: &Option<Bytes>| b.as_deref().map(lossy).unwrap_or_default();
    // `fd` is not tracked per connection; -1 keeps the field parseable.
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem={} rbs={} rbp={} obl=0 oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
        h.id,
        h.addr,
        h.laddr,
        h.fd,
        text(&info.name),
        age,
        idle,
        flags,
        info.db,
        mailbox.subscriptions(Kind::Channel),
        mailbox.subscriptions(Kind::Pattern),
        mailbox.subscriptions(Kind::Shard),
        info.multi,
        info.qbuf,
        rbs - info.qbuf.min(rbs),
        info.multi_mem,
        rbs,
        rbs,
        h.held_replies.load(Ordering::Relaxed) + mailbox.queued_messages(),
        h.output_bytes.load(Ordering::Relaxed) + mailbox.queued_bytes(),
        h.memory_bytes().max(rbs + crate::client::CLIENT_STATE_BYTES),
        if info.last_cmd.is_empty() { "NULL" } else { &info.last_cmd },
        info.user,
        tracking.1,
        info.resp,
        text(&info.lib_name),
        text(&info.lib_ver),
    )
}

/// The line for any client: the caller's from its live state, others' from
/// their published snapshot.
fn line_for(ctx: &Ctx<'_>, h: &ClientHandle) -> String {
    let tracking = super::tracking::list_fields(ctx, h.id);
    if h.id == ctx.client.id() {
        client_line(h, &caller_info(ctx), &tracking)
    } else {
        let mut info = h.info.lock().clone();
        info.qbuf = h.query_pending.load(Ordering::Relaxed);
        client_line(h, &info, &tracking)
    }
}

/// The calling connection's CLIENT INFO line (ACL LOG's `client-info`).
pub fn own_line(ctx: &Ctx<'_>) -> String {
    line_for(ctx, &ctx.client.handle)
}

/// Client types of CLIENT LIST / KILL TYPE. A connection with
/// subscriptions is `pubsub`, this replica's link to its primary `master`,
/// a replica's stream `replica` (alias `slave`), any other `normal`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    PubSub,
    Master,
    Replica,
}

fn client_type(t: &[u8]) -> Option<ClientType> {
    if is(t, "normal") {
        Some(ClientType::Normal)
    } else if is(t, "pubsub") {
        Some(ClientType::PubSub)
    } else if is(t, "master") {
        Some(ClientType::Master)
    } else if is(t, "replica") || is(t, "slave") {
        Some(ClientType::Replica)
    } else {
        None
    }
}

fn type_of(h: &ClientHandle) -> ClientType {
    use std::sync::atomic::Ordering::Acquire;
    if h.master_link.load(Acquire) {
        ClientType::Master
    } else if h.replication.load(Acquire) {
        ClientType::Replica
    } else if h.mailbox.is_subscriber() {
        ClientType::PubSub
    } else {
        ClientType::Normal
    }
}

fn client_list(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut ids: Option<HashSet<u64>> = None;
    let mut wanted = None;
    if args.len() == 4 && is(&args[2], "type") {
        match client_type(&args[3]) {
            Some(t) => wanted = Some(t),
            None => {
                return Frame::error(format!("ERR Unknown client type '{}'", lossy(&args[3])));
            }
        }
    } else if args.len() > 3 && is(&args[2], "id") {
        let mut set = HashSet::new();
        for a in &args[3..] {
            // Any integer is a valid ID to ask for; no client has one
            // below 1.
            match parse_i64(a) {
                Some(n) => {
                    set.insert(n.max(0) as u64);
                }
                None => return Frame::error("ERR Invalid client ID"),
            }
        }
        ids = Some(set);
    } else if args.len() != 2 {
        return errors::err(errors::SYNTAX);
    }
    let mut out = String::new();
    let me = ctx.client.id();
    // Not inside EXEC or a script, which may hold locks the others need to
    // finish their turns.
    if !ctx.client.in_exec && !ctx.client.in_script {
        crate::settle::others(ctx.shared, me);
    }
    for h in ctx.shared.clients.all() {
        // A killed or evicted client is gone as far as others can see, as
        // Redis frees it at once; its task may take a moment to close.
        if ids.as_ref().is_some_and(|s| !s.contains(&h.id))
            || wanted.is_some_and(|t| type_of(&h) != t)
            || (h.is_killed() && h.id != me)
        {
            continue;
        }
        out.push_str(&line_for(ctx, &h));
        out.push('\n');
    }
    Frame::Verbatim(Bytes::from(out))
}

#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    user: Option<String>,
    client_type: Option<ClientType>,
    max_age_secs: Option<u64>,
    skipme: bool,
}

impl KillFilter {
    fn matches(&self, h: &ClientHandle, user: &str) -> bool {
        self.id.is_none_or(|id| h.id == id)
            && self.addr.as_ref().is_none_or(|a| h.addr.to_string() == *a)
            && self
                .laddr
                .as_ref()
                .is_none_or(|a| h.laddr.to_string() == *a)
            && self.user.as_ref().is_none_or(|u| u == user)
            && self.client_type.is_none_or(|t| type_of(h) == t)
            && self
                .max_age_secs
                .is_none_or(|m| h.created.elapsed().as_secs() >= m)
    }
}

fn client_kill(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    // The old form, `CLIENT KILL ip:port`, answers OK or an error.
    if args.len() == 3 {
        let filter = KillFilter {
            addr: Some(lossy(&args[2])),
            ..Default::default()
        };
        let killed = kill_matching(ctx, &filter);
        return if killed == 0 {
            Frame::error("ERR No such client")
        } else {
            Frame::ok()
        };
    }
    let mut f = KillFilter {
        skipme: true,
        ..Default::default()
    };
    // Option by option, as Redis reads them: a bad value is reported
    // before a missing one further on.
    for pair in args[2..].chunks(2) {
        let [opt, val] = pair else {
            return errors::err(errors::SYNTAX);
        };
        if is(opt, "id") {
            match parse_i64(val) {
                Some(n) if n > 0 => f.id = Some(n as u64),
                _ => return Frame::error("ERR client-id should be greater than 0"),
            }
        } else if is(opt, "type") {
            match client_type(val) {
                Some(t) => f.client_type = Some(t),
                None => return Frame::error(format!("ERR Unknown client type '{}'", lossy(val))),
            }
        } else if is(opt, "addr") {
            f.addr = Some(lossy(val));
        } else if is(opt, "laddr") {
            f.laddr = Some(lossy(val));
        } else if is(opt, "user") {
            if ctx.shared.acl.get(&lossy(val)).is_none() {
                return Frame::error(format!("ERR No such user '{}'", lossy(val)));
            }
            f.user = Some(lossy(val));
        } else if is(opt, "skipme") {
            if is(val, "yes") {
                f.skipme = true;
            } else if is(val, "no") {
                f.skipme = false;
            } else {
                return errors::err(errors::SYNTAX);
            }
        } else if is(opt, "maxage") {
            match parse_i64(val) {
                Some(n) if n >= 0 => f.max_age_secs = Some(n as u64),
                _ => return errors::err(errors::NOT_INTEGER),
            }
        } else {
            return errors::err(errors::SYNTAX);
        }
    }
    Frame::Integer(kill_matching(ctx, &f) as i64)
}

/// The ACL user client `h` runs as: the caller's from its own state,
/// another's from its published snapshot.
pub(crate) fn user_of(ctx: &Ctx<'_>, h: &ClientHandle) -> String {
    if h.id == ctx.client.id() {
        ctx.client.user.name.clone()
    } else {
        h.info.lock().user.clone()
    }
}

/// Kills every client `f` matches; the caller itself only closes after its
/// reply is sent, as Redis does.
fn kill_matching(ctx: &mut Ctx<'_>, f: &KillFilter) -> usize {
    let me = ctx.client.id();
    let mut killed = 0;
    for h in ctx.shared.clients.all() {
        if h.id == me && f.skipme {
            continue;
        }
        if !f.matches(&h, &user_of(ctx, &h)) {
            continue;
        }
        if h.id == me {
            ctx.client.close_after_reply = true;
        } else {
            h.kill();
        }
        killed += 1;
    }
    killed
}

fn client_setinfo(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (attr, val) = (&args[2], &args[3]);
    let name = if is(attr, "lib-name") {
        "lib-name"
    } else if is(attr, "lib-ver") {
        "lib-ver"
    } else {
        return Frame::error(format!("ERR Unrecognized option '{}'", lossy(attr)));
    };
    if val.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Frame::error(format!(
            "ERR {name} cannot contain spaces, newlines or special characters."
        ));
    }
    let v = (!val.is_empty()).then(|| val.clone());
    if name == "lib-name" {
        ctx.client.lib_name = v;
    } else {
        ctx.client.lib_ver = v;
    }
    Frame::ok()
}

/// CLIENT PAUSE timeout-ms [WRITE|ALL] (ALL when not given).
fn client_pause(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let ms = match durakv_engine::value::parse_i64(&args[2]) {
        None => {
            return Err(Frame::error(
                "ERR timeout is not an integer or out of range",
            ))
        }
        Some(n) if n < 0 => return Err(Frame::error("ERR timeout is negative")),
        Some(n) => n as u64,
    };
    if args.len() > 4 {
        return Err(errors::sub_usage(&args[1], "client"));
    }
    let mode = match args.get(3) {
        None => crate::pause::Mode::All,
        Some(m) if is(m, "all") => crate::pause::Mode::All,
        Some(m) if is(m, "write") => crate::pause::Mode::Write,
        Some(_) => return Err(Frame::error("ERR CLIENT PAUSE mode must be WRITE or ALL")),
    };
    // Beyond a year a pause is as good as endless (and stays clear of the
    // clock's range).
    const MAX_MS: u64 = 365 * 24 * 3600 * 1000;
    let until = std::time::Instant::now() + std::time::Duration::from_millis(ms.min(MAX_MS));
    ctx.shared.pause.pause(until, mode);
    Ok(Frame::ok())
}
