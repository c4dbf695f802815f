//! Server commands: CLIENT, COMMAND, CONFIG, INFO, TIME, SHUTDOWN, the
//! persistence family (LASTSAVE, SAVE, BGSAVE), WAITAOF / WAIT, LATENCY,
//! SLOWLOG, MEMORY and ROLE.
//!
//! Container commands (CLIENT, CONFIG, ...) declare their subcommands in
//! [`SubSpec`] tables. One table checks a subcommand's arity, describes it
//! to COMMAND INFO / DOCS / LIST (as `client|list`, the name redis-cli's
//! help expects) and names it in CLIENT LIST's `cmd=` field, so the three
//! cannot disagree.

use crate::client::{ClientHandle, ClientInfo};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, COMMANDS, NO_KEYS};
use crate::dispatch::Outcome;
use crate::errors;
use crate::glob::glob_match;
use crate::state::Shared;
use crate::util::{is, now_ms, now_us};
use bytes::Bytes;
use durakv_engine::txn::Txn;
use durakv_engine::value::parse_i64;
use durakv_engine::Durability;
use durakv_protocol::Frame;
use std::collections::{HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use super::connection::REDIS_COMPAT_VERSION;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("client", -2, NOSCRIPT | LOADING | STALE, NO_KEYS, Handler::Conn(client), "connection", "A container for client connection commands."),
        spec("command", -1, LOADING | STALE, NO_KEYS, Handler::Conn(command), "server", "Returns detailed information about all commands."),
        spec("config", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, Handler::Outcome(config), "server", "A container for server configuration commands."),
        spec("info", -1, LOADING | STALE, NO_KEYS, Handler::Outcome(info), "server", "Returns information and statistics about the server."),
        spec("time", 1, LOADING | STALE | FAST, NO_KEYS, Handler::Conn(time), "server", "Returns the server time."),
        spec("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI, NO_KEYS, Handler::Conn(shutdown), "server", "Synchronously saves the database(s) to disk and shuts down the server."),
        spec("lastsave", 1, LOADING | STALE | FAST, NO_KEYS, Handler::Conn(lastsave), "server", "Returns the Unix timestamp of the last successful save to disk."),
        spec("save", 1, ADMIN | NOSCRIPT | NO_MULTI, NO_KEYS, Handler::Conn(save), "server", "Synchronously saves the database(s) to disk."),
        spec("bgsave", -1, ADMIN | NOSCRIPT, NO_KEYS, Handler::Conn(bgsave), "server", "Asynchronously saves the database(s) to disk."),
        spec("waitaof", 4, NOSCRIPT, NO_KEYS, Handler::Outcome(waitaof), "generic", "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas."),
        spec("wait", 3, NOSCRIPT, NO_KEYS, Handler::Conn(wait), "generic", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed."),
        spec("latency", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, Handler::Conn(latency), "server", "A container for latency diagnostics commands."),
        spec("slowlog", -2, ADMIN | LOADING | STALE, NO_KEYS, Handler::Conn(slowlog), "server", "A container for slow log commands."),
        spec("memory", -2, READONLY, Keys::Custom(memory_keys), Handler::Data(memory), "server", "A container for memory diagnostics commands."),
        spec("role", 1, NOSCRIPT | LOADING | STALE | FAST, NO_KEYS, Handler::Conn(role), "server", "Returns the replication role."),
    ]
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

// ---------------------------------------------------------------------------
// Subcommand tables
// ---------------------------------------------------------------------------

/// One subcommand of a container command, as `COMMAND INFO` reports it.
pub struct SubSpec {
    pub name: &'static str,
    /// Redis arity, counting the container and the subcommand name.
    pub arity: i32,
    pub flags: u32,
    pub summary: &'static str,
}

const fn sub(name: &'static str, arity: i32, flags: u32, summary: &'static str) -> SubSpec {
    SubSpec {
        name,
        arity,
        flags,
        summary,
    }
}

const CLIENT_SUBS: &[SubSpec] = &[
    sub("id", 2, NOSCRIPT | LOADING | STALE, "Returns the unique client ID of the connection."),
    sub("setname", 3, NOSCRIPT | LOADING | STALE, "Sets the connection name."),
    sub("getname", 2, NOSCRIPT | LOADING | STALE, "Returns the name of the connection."),
    sub("list", -2, ADMIN | NOSCRIPT | LOADING | STALE, "Lists open connections."),
    sub("info", 2, NOSCRIPT | LOADING | STALE, "Returns information about the connection."),
    sub("kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, "Terminates open connections."),
    sub("unblock", -3, ADMIN | NOSCRIPT | LOADING | STALE, "Unblocks a client blocked by a blocking command from a different connection."),
    sub("setinfo", 4, NOSCRIPT | LOADING | STALE, "Sets information specific to the client or connection."),
    sub("no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, "Sets the client eviction mode of the connection."),
    sub("no-touch", 3, NOSCRIPT | LOADING | STALE, "Controls whether commands sent by the client affect the LRU/LFU of accessed keys."),
    sub("reply", 3, NOSCRIPT | LOADING | STALE, "Instructs the server whether to reply to commands."),
    sub("getredir", 2, NOSCRIPT | LOADING | STALE, "Returns the client ID to which the connection's tracking notifications are redirected."),
    sub("durability", 3, NOSCRIPT | LOADING | STALE, "Sets this connection's durability level: full, delayed, none, or default (the database's level)."),
    sub("help", 2, LOADING | STALE, "Returns helpful text about the different subcommands."),
];

const COMMAND_SUBS: &[SubSpec] = &[
    sub("count", 2, LOADING | STALE, "Returns a count of commands."),
    sub(
        "info",
        -2,
        LOADING | STALE,
        "Returns information about one, multiple or all commands.",
    ),
    sub(
        "docs",
        -2,
        LOADING | STALE,
        "Returns documentary information about one, multiple or all commands.",
    ),
    sub(
        "list",
        -2,
        LOADING | STALE,
        "Returns a list of command names.",
    ),
    sub(
        "getkeys",
        -3,
        LOADING | STALE,
        "Extracts the key names from an arbitrary command.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Returns helpful text about the different subcommands.",
    ),
];

const CONFIG_SUBS: &[SubSpec] = &[
    sub(
        "get",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns the effective values of configuration parameters.",
    ),
    sub(
        "set",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Sets configuration parameters in-flight.",
    ),
    sub(
        "resetstat",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Resets the server's statistics.",
    ),
    sub(
        "rewrite",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Persists the effective configuration to file.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Returns helpful text about the different subcommands.",
    ),
];

const LATENCY_SUBS: &[SubSpec] = &[
    sub(
        "latest",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns the latest latency samples for all events.",
    ),
    sub(
        "history",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns timestamp-latency samples for an event.",
    ),
    sub(
        "reset",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Resets the latency data for one or more events.",
    ),
    sub(
        "graph",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns a latency graph for an event.",
    ),
    sub(
        "doctor",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns a human-readable latency analysis report.",
    ),
    sub(
        "histogram",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Returns the cumulative distribution of latencies of a subset or all commands.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Returns helpful text about the different subcommands.",
    ),
];

const SLOWLOG_SUBS: &[SubSpec] = &[
    sub(
        "get",
        -2,
        ADMIN | LOADING | STALE,
        "Returns the slow log's entries.",
    ),
    sub(
        "len",
        2,
        ADMIN | LOADING | STALE,
        "Returns the number of entries in the slow log.",
    ),
    sub(
        "reset",
        2,
        ADMIN | LOADING | STALE,
        "Clears all entries from the slow log.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
    ),
];

const MEMORY_SUBS: &[SubSpec] = &[
    sub(
        "usage",
        -3,
        READONLY,
        "Estimates the memory usage of a key.",
    ),
    sub("stats", 2, 0, "Returns details about memory usage."),
    sub("doctor", 2, 0, "Outputs a memory problems report."),
    sub("malloc-stats", 2, 0, "Returns the allocator statistics."),
    sub("purge", 2, 0, "Asks the allocator to release memory."),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Returns helpful text about the different subcommands.",
    ),
];

/// The subcommand table of a container command, if it is one of ours.
pub fn subcommands_of(container: &str) -> &'static [SubSpec] {
    match container {
        "client" => CLIENT_SUBS,
        "command" => COMMAND_SUBS,
        "config" => CONFIG_SUBS,
        "latency" => LATENCY_SUBS,
        "slowlog" => SLOWLOG_SUBS,
        "memory" => MEMORY_SUBS,
        "object" => super::keys::OBJECT_SUBS,
        _ => &[],
    }
}

fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = argc as i32;
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

/// Resolves `args[1]` in `container`'s table and checks its arity.
fn find_sub(container: &str, args: &[Bytes]) -> Result<&'static SubSpec, Frame> {
    let table = subcommands_of(container);
    let s = table
        .iter()
        .find(|s| is(&args[1], s.name))
        .ok_or_else(|| errors::unknown_subcommand(&args[1], container))?;
    if !arity_ok(s.arity, args.len()) {
        return Err(errors::wrong_args(&format!("{container}|{}", s.name)));
    }
    Ok(s)
}

/// Redis reports `client|list`, not `client`, as a connection's last command.
fn note_subcommand(ctx: &mut Ctx<'_>, container: &str, s: &SubSpec) {
    ctx.client.last_cmd.clear();
    ctx.client.last_cmd.push_str(container);
    ctx.client.last_cmd.push('|');
    ctx.client.last_cmd.push_str(s.name);
}

/// A HELP reply: status lines, as Redis sends them.
fn help(container: &str, lines: &[&str]) -> Frame {
    let mut out = vec![Frame::Simple(Bytes::from(format!(
        "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        container.to_ascii_uppercase()
    )))];
    for l in lines.iter().chain(["HELP", "    Print this help."].iter()) {
        out.push(Frame::Simple(Bytes::copy_from_slice(l.as_bytes())));
    }
    Frame::Array(out)
}

fn status(s: impl Into<String>) -> Frame {
    Frame::Simple(Bytes::from(s.into()))
}

fn bulk(s: &str) -> Frame {
    Frame::bulk_from_str(s)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// ---------------------------------------------------------------------------
// CLIENT
// ---------------------------------------------------------------------------

fn client(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let s = match find_sub("client", args) {
        Ok(s) => s,
        Err(e) => return e,
    };
    note_subcommand(ctx, "client", s);
    match s.name {
        "id" => Frame::Integer(ctx.client.id() as i64),
        "setname" => {
            if let Err(e) = validate_client_name(&args[2]) {
                return e;
            }
            ctx.client.name = (!args[2].is_empty()).then(|| args[2].clone());
            Frame::ok()
        }
        "getname" => match &ctx.client.name {
            Some(n) => Frame::Bulk(n.clone()),
            None => Frame::Null,
        },
        "list" => client_list(ctx, args),
        "info" => {
            let mut line = client_line(&ctx.client.handle, &caller_info(ctx));
            line.push('\n');
            Frame::Verbatim(Bytes::from(line))
        }
        "kill" => client_kill(ctx, args),
        "unblock" => super::blocking::client_unblock(ctx, args),
        "setinfo" => client_setinfo(ctx, args),
        "no-evict" | "no-touch" => {
            // Accepted so client libraries that set them work; durakv never
            // evicts clients and keeps no LRU/LFU to protect.
            if is(&args[2], "on") || is(&args[2], "off") {
                Frame::ok()
            } else {
                errors::err(errors::SYNTAX)
            }
        }
        "reply" => {
            if is(&args[2], "on") {
                ctx.client.reply_mode = crate::client::ReplyMode::On;
                Frame::ok()
            } else if is(&args[2], "off") {
                ctx.client.reply_mode = crate::client::ReplyMode::Off;
                Frame::ok()
            } else if is(&args[2], "skip") {
                ctx.client.reply_mode = crate::client::ReplyMode::SkipNext;
                Frame::ok()
            } else {
                errors::err(errors::SYNTAX)
            }
        }
        "getredir" => Frame::Integer(-1),
        "durability" => {
            let v = &args[2];
            if is(v, "default") {
                ctx.client.durability = None;
                return Frame::ok();
            }
            match std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.parse::<Durability>().ok())
            {
                Some(level) => {
                    ctx.client.durability = Some(level);
                    Frame::ok()
                }
                None => Frame::error(format!(
                    "ERR invalid durability level '{}': expected full, delayed, none or default",
                    lossy(v)
                )),
            }
        }
        _ => help(
            "client",
            &[
                "ID",
                "    Return the ID of the current connection.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "GETNAME",
                "    Return the name of the current connection.",
                "LIST [TYPE NORMAL|MASTER|REPLICA|PUBSUB] [ID <id> [<id> ...]]",
                "    Return information about client connections.",
                "INFO",
                "    Return information about the current client connection.",
                "KILL <ip:port>",
                "    Kill connection made from <ip:port>.",
                "KILL <option> <value> [<option> <value> [...]]",
                "    Kill connections. Options are:",
                "    * ADDR (<ip:port>|<unixsocket>:0)",
                "      Kill connections made from the specified address",
                "    * LADDR (<ip:port>|<unixsocket>:0)",
                "      Kill connections made to specified local address",
                "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                "      Kill connections by type.",
                "    * USER <username>",
                "      Kill connections authenticated by <username>.",
                "    * SKIPME (YES|NO)",
                "      Skip killing current connection (default: yes).",
                "    * ID <client-id>",
                "      Kill connections by client id.",
                "    * MAXAGE <maxage>",
                "      Kill connections older than the specified age.",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "    Unblock the specified blocked client.",
                "SETINFO <option> <value>",
                "    Set client meta attr. Options are:",
                "    * LIB-NAME: the client lib name.",
                "    * LIB-VER: the client lib version.",
                "NO-EVICT (ON|OFF)",
                "    Accepted for compatibility; durakv does not evict clients.",
                "NO-TOUCH (ON|OFF)",
                "    Accepted for compatibility; durakv keeps no LRU/LFU statistics.",
                "REPLY ON",
                "    Reply to every command (OFF and SKIP are not supported).",
                "DURABILITY (FULL|DELAYED|NONE|DEFAULT)",
                "    Set the durability level of this connection's writes:",
                "    * FULL: reply after the write is fsynced.",
                "    * DELAYED: reply at once; flushed within delayed-flush-ms.",
                "    * NONE: not logged.",
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
        watch: c.watched.len(),
        durability: c.durability,
        user: c.user.clone(),
        qbuf: 0,
        omem: 0,
    }
}

/// Size the connection's read buffer starts at (see `connection.rs`).
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Rough fixed cost of one connection's state, for `tot-mem`.
const CLIENT_STATE_BYTES: usize = 2048;

/// One CLIENT LIST line in Redis's field order, plus durakv's `durability=`.
fn client_line(h: &ClientHandle, info: &ClientInfo) -> String {
    let age = h.created.elapsed().as_secs();
    let idle = now_ms().saturating_sub(h.last_interaction_ms.load(Ordering::Relaxed)) / 1000;
    let mut flags = String::new();
    if info.multi >= 0 {
        flags.push('x');
    }
    if h.watch_dirty.load(Ordering::Acquire) {
        flags.push('d');
    }
    if h.is_killed() {
        flags.push('A');
    }
    if h.blocked.load(Ordering::Acquire) {
        flags.push('b');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let rbs = READ_BUFFER_BYTES.max(info.qbuf);
    let text = |b: &Option<Bytes>| b.as_deref().map(lossy).unwrap_or_default();
    let durability = info.durability.map(|d| d.as_str()).unwrap_or("default");
    // `fd` is not tracked per connection; -1 keeps the field parseable.
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi={} watch={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp={} obl=0 oll={} omem=0 tot-mem={} events=r cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={} durability={}",
        h.id,
        h.addr,
        h.laddr,
        h.fd,
        text(&info.name),
        age,
        idle,
        flags,
        info.db,
        info.multi,
        info.watch,
        info.qbuf,
        rbs - info.qbuf.min(rbs),
        rbs,
        rbs,
        info.omem,
        rbs + CLIENT_STATE_BYTES,
        if info.last_cmd.is_empty() { "NULL" } else { &info.last_cmd },
        info.user,
        info.resp,
        text(&info.lib_name),
        text(&info.lib_ver),
        durability,
    )
}

/// The line for any client: the caller's from its live state, others' from
/// their published snapshot.
fn line_for(ctx: &Ctx<'_>, h: &ClientHandle) -> String {
    if h.id == ctx.client.id() {
        client_line(h, &caller_info(ctx))
    } else {
        let info = h.info.lock().clone();
        client_line(h, &info)
    }
}

/// Client types CLIENT LIST / KILL accept; durakv only has normal clients.
fn client_type_is_normal(t: &[u8]) -> Option<bool> {
    if is(t, "normal") {
        Some(true)
    } else if is(t, "master") || is(t, "replica") || is(t, "slave") || is(t, "pubsub") {
        Some(false)
    } else {
        None
    }
}

fn client_list(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut ids: Option<HashSet<u64>> = None;
    let mut include_normal = true;
    if args.len() == 4 && is(&args[2], "type") {
        match client_type_is_normal(&args[3]) {
            Some(n) => include_normal = n,
            None => {
                return Frame::error(format!("ERR Unknown client type '{}'", lossy(&args[3])));
            }
        }
    } else if args.len() > 3 && is(&args[2], "id") {
        let mut set = HashSet::new();
        for a in &args[3..] {
            match parse_i64(a) {
                Some(n) if n > 0 => {
                    set.insert(n as u64);
                }
                _ => return Frame::error("ERR Invalid client ID"),
            }
        }
        ids = Some(set);
    } else if args.len() != 2 {
        return errors::err(errors::SYNTAX);
    }
    let mut out = String::new();
    if include_normal {
        for h in ctx.shared.clients.all() {
            if ids.as_ref().is_some_and(|s| !s.contains(&h.id)) {
                continue;
            }
            out.push_str(&line_for(ctx, &h));
            out.push('\n');
        }
    }
    Frame::Verbatim(Bytes::from(out))
}

#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    user: Option<String>,
    normal_only: Option<bool>,
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
            && self.normal_only.is_none_or(|normal| normal)
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
    if !args.len().is_multiple_of(2) {
        return errors::err(errors::SYNTAX);
    }
    let mut f = KillFilter {
        skipme: true,
        ..Default::default()
    };
    for pair in args[2..].chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        if is(opt, "id") {
            match parse_i64(val) {
                Some(n) if n > 0 => f.id = Some(n as u64),
                _ => return Frame::error("ERR client-id should be greater than 0"),
            }
        } else if is(opt, "type") {
            match client_type_is_normal(val) {
                Some(n) => f.normal_only = Some(n),
                None => return Frame::error(format!("ERR Unknown client type '{}'", lossy(val))),
            }
        } else if is(opt, "addr") {
            f.addr = Some(lossy(val));
        } else if is(opt, "laddr") {
            f.laddr = Some(lossy(val));
        } else if is(opt, "user") {
            if &val[..] != b"default" {
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

/// Kills every client `f` matches; the caller itself only closes after its
/// reply is sent, as Redis does.
fn kill_matching(ctx: &mut Ctx<'_>, f: &KillFilter) -> usize {
    let me = ctx.client.id();
    let mut killed = 0;
    for h in ctx.shared.clients.all() {
        if h.id == me && f.skipme {
            continue;
        }
        let user = if h.id == me {
            ctx.client.user.clone()
        } else {
            h.info.lock().user.clone()
        };
        if !f.matches(&h, &user) {
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

// ---------------------------------------------------------------------------
// COMMAND
// ---------------------------------------------------------------------------

/// What COMMAND INFO / DOCS need to know about a command or subcommand.
struct View {
    name: String,
    arity: i32,
    flags: u32,
    keys: Keys,
    group: &'static str,
    summary: &'static str,
    subs: &'static [SubSpec],
}

impl View {
    fn of(spec: &CommandSpec) -> View {
        View {
            name: spec.name.to_string(),
            arity: spec.arity,
            flags: spec.flags,
            keys: spec.keys,
            group: spec.group,
            summary: spec.summary,
            subs: subcommands_of(spec.name),
        }
    }

    fn of_sub(parent: &CommandSpec, s: &SubSpec) -> View {
        // MEMORY USAGE is the only subcommand with a key (argument 2).
        let keys = if (parent.name == "memory" && s.name == "usage") || parent.name == "object" {
            Keys::Range {
                first: 2,
                last: 2,
                step: 1,
            }
        } else {
            Keys::None
        };
        View {
            name: format!("{}|{}", parent.name, s.name),
            arity: s.arity,
            flags: s.flags,
            keys,
            group: parent.group,
            summary: s.summary,
            subs: &[],
        }
    }

    fn triple(&self) -> (i64, i64, i64) {
        match self.keys {
            Keys::Range { first, last, step } => (first as i64, last as i64, step as i64),
            Keys::Custom(_) => (0, 0, 0),
            Keys::None | Keys::All => (0, 0, 0),
        }
    }

    fn flag_names(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = NAMES
            .iter()
            .filter(|(bit, _)| self.flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        if matches!(self.keys, Keys::Custom(_)) && self.subs.is_empty() {
            v.push("movablekeys");
        }
        v
    }

    fn acl_categories(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.flags & WRITE != 0 {
            v.push("@write");
        }
        if self.flags & READONLY != 0 {
            v.push("@read");
        }
        let group_cat = match self.group {
            "string" => Some("@string"),
            "hash" => Some("@hash"),
            "list" => Some("@list"),
            "set" => Some("@set"),
            "sorted-set" | "sorted_set" | "zset" => Some("@sortedset"),
            "generic" => Some("@keyspace"),
            "connection" => Some("@connection"),
            "transactions" => Some("@transaction"),
            "pubsub" => Some("@pubsub"),
            "scripting" => Some("@scripting"),
            "bitmap" => Some("@bitmap"),
            "hyperloglog" => Some("@hyperloglog"),
            "geo" => Some("@geo"),
            "stream" => Some("@stream"),
            _ => None,
        };
        v.extend(group_cat);
        if self.flags & ADMIN != 0 || matches!(self.keys, Keys::All) {
            v.push("@admin");
            v.push("@dangerous");
        }
        v.push(if self.flags & FAST != 0 {
            "@fast"
        } else {
            "@slow"
        });
        v.dedup();
        v
    }

    fn key_specs(&self) -> Frame {
        let flags = if self.flags & WRITE != 0 { "RW" } else { "RO" };
        let flag_set = Frame::Set(vec![status(flags)]);
        let (begin, find) = match self.keys {
            Keys::Range { first, last, step } => {
                // Redis counts `lastkey` from the first key, not from argv[0].
                let lastkey = if last >= 0 { last - first } else { last };
                (
                    Frame::Map(vec![
                        (bulk("type"), bulk("index")),
                        (
                            bulk("spec"),
                            Frame::Map(vec![(bulk("index"), Frame::Integer(first as i64))]),
                        ),
                    ]),
                    Frame::Map(vec![
                        (bulk("type"), bulk("range")),
                        (
                            bulk("spec"),
                            Frame::Map(vec![
                                (bulk("lastkey"), Frame::Integer(lastkey as i64)),
                                (bulk("keystep"), Frame::Integer(step as i64)),
                                (bulk("limit"), Frame::Integer(0)),
                            ]),
                        ),
                    ]),
                )
            }
            Keys::Custom(_) => {
                let unknown = || {
                    Frame::Map(vec![
                        (bulk("type"), bulk("unknown")),
                        (bulk("spec"), Frame::Map(Vec::new())),
                    ])
                };
                (unknown(), unknown())
            }
            Keys::None | Keys::All => return Frame::Array(Vec::new()),
        };
        Frame::Array(vec![Frame::Map(vec![
            (bulk("flags"), flag_set),
            (bulk("begin_search"), begin),
            (bulk("find_keys"), find),
        ])])
    }

    /// `[name, arity, flags, first, last, step, acl, tips, key specs, subcommands]`.
    fn info(&self, parent: Option<&CommandSpec>) -> Frame {
        let (first, last, step) = self.triple();
        let subs = match parent {
            Some(p) => self
                .subs
                .iter()
                .map(|s| View::of_sub(p, s).info(None))
                .collect(),
            None => Vec::new(),
        };
        Frame::Array(vec![
            bulk(&self.name),
            Frame::Integer(self.arity as i64),
            Frame::Set(self.flag_names().into_iter().map(status).collect()),
            Frame::Integer(first),
            Frame::Integer(last),
            Frame::Integer(step),
            Frame::Set(self.acl_categories().into_iter().map(status).collect()),
            Frame::Set(Vec::new()),
            self.key_specs(),
            Frame::Array(subs),
        ])
    }

    fn docs(&self, parent: Option<&CommandSpec>) -> Frame {
        let mut m = vec![
            (bulk("summary"), bulk(self.summary)),
            (bulk("group"), bulk(self.group)),
        ];
        if let Some(p) = parent {
            if !self.subs.is_empty() {
                let subs = self
                    .subs
                    .iter()
                    .map(|s| {
                        let v = View::of_sub(p, s);
                        (bulk(&v.name), v.docs(None))
                    })
                    .collect();
                m.push((bulk("subcommands"), Frame::Map(subs)));
            }
        }
        Frame::Map(m)
    }
}

/// Every command, sorted by name so replies are stable.
fn all_specs() -> Vec<&'static CommandSpec> {
    let mut v: Vec<&'static CommandSpec> = COMMANDS.values().collect();
    v.sort_by_key(|s| s.name);
    v
}

/// Looks up `name` or `container|sub`.
fn view_by_name(name: &[u8]) -> Option<(View, Option<&'static CommandSpec>)> {
    let text = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    match text.split_once('|') {
        None => {
            let s = crate::command::lookup(text.as_bytes())?;
            Some((View::of(s), Some(s)))
        }
        Some((parent, child)) => {
            let p = crate::command::lookup(parent.as_bytes())?;
            let s = subcommands_of(p.name).iter().find(|s| s.name == child)?;
            Some((View::of_sub(p, s), None))
        }
    }
}

fn command(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() == 1 {
        return Frame::Array(
            all_specs()
                .into_iter()
                .map(|s| View::of(s).info(Some(s)))
                .collect(),
        );
    }
    let s = match find_sub("command", args) {
        Ok(s) => s,
        Err(e) => return e,
    };
    note_subcommand(ctx, "command", s);
    match s.name {
        "count" => Frame::Integer(COMMANDS.len() as i64),
        "info" => {
            if args.len() == 2 {
                return Frame::Array(
                    all_specs()
                        .into_iter()
                        .map(|s| View::of(s).info(Some(s)))
                        .collect(),
                );
            }
            Frame::Array(
                args[2..]
                    .iter()
                    .map(|n| match view_by_name(n) {
                        Some((v, p)) => v.info(p),
                        None => Frame::Null,
                    })
                    .collect(),
            )
        }
        "docs" => {
            let pairs = if args.len() == 2 {
                all_specs()
                    .into_iter()
                    .map(|s| (bulk(s.name), View::of(s).docs(Some(s))))
                    .collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|n| {
                        let (v, p) = view_by_name(n)?;
                        Some((bulk(&v.name), v.docs(p)))
                    })
                    .collect()
            };
            Frame::Map(pairs)
        }
        "list" => command_list(args),
        "getkeys" => {
            let inner = &args[2..];
            let Some(spec) = crate::command::lookup(&inner[0]) else {
                return Frame::error("ERR Invalid command specified");
            };
            if !spec.arity_ok(inner.len()) {
                return Frame::error("ERR Invalid number of arguments specified for command");
            }
            let idx = spec.key_indexes(inner);
            if idx.is_empty() {
                return Frame::error("ERR The command has no key arguments");
            }
            Frame::Array(
                idx.into_iter()
                    .map(|i| Frame::Bulk(inner[i].clone()))
                    .collect(),
            )
        }
        _ => help(
            "command",
            &[
                "(no subcommand)",
                "    Return details about all commands.",
                "COUNT",
                "    Return the total number of commands in this server.",
                "LIST",
                "    Return a list of all commands in this server.",
                "LIST FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)",
                "    Return a list of commands matching the filter.",
                "INFO [<command-name> ...]",
                "    Return details about multiple commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "GETKEYS <full-command>",
                "    Return the keys from a full command.",
            ],
        ),
    }
}

fn command_list(args: &[Bytes]) -> Frame {
    enum Filter {
        All,
        None,
        Category(String),
        Pattern(Bytes),
    }
    let filter = match args.len() {
        2 => Filter::All,
        5 if is(&args[2], "filterby") => {
            if is(&args[3], "module") {
                Filter::None
            } else if is(&args[3], "aclcat") {
                Filter::Category(format!("@{}", lossy(&args[4]).to_ascii_lowercase()))
            } else if is(&args[3], "pattern") {
                Filter::Pattern(args[4].clone())
            } else {
                return errors::err(errors::SYNTAX);
            }
        }
        _ => return errors::err(errors::SYNTAX),
    };
    let mut names = Vec::new();
    for spec in all_specs() {
        let mut views = vec![View::of(spec)];
        views.extend(
            subcommands_of(spec.name)
                .iter()
                .map(|s| View::of_sub(spec, s)),
        );
        for v in views {
            let keep = match &filter {
                Filter::All => true,
                Filter::None => false,
                Filter::Category(c) => v.acl_categories().contains(&c.as_str()),
                Filter::Pattern(p) => glob_match(p, v.name.as_bytes(), true),
            };
            if keep {
                names.push(bulk(&v.name));
            }
        }
    }
    Frame::Array(names)
}

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
    Outcome::now(config_other(ctx, args))
}

fn config_other(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let s = match find_sub("config", args) {
        Ok(s) => s,
        Err(e) => return e,
    };
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
            Frame::Map(pairs)
        }
        "resetstat" => {
            ctx.shared.stats.reset();
            OPS_SAMPLES
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            Frame::ok()
        }
        // Config carries no file path, and a TOML file is not redis.conf.
        "rewrite" => Frame::error("ERR The server is running without a config file"),
        _ => help(
            "config",
            &[
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Not supported: durakv reads TOML (--config) and flags.",
            ],
        ),
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
    match ctx.shared.sync_logged_dbs() {
        Ok(lsn) => (frame, lsn),
        Err(e) => {
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

// ---------------------------------------------------------------------------
// INFO
// ---------------------------------------------------------------------------

/// Sections in the order Redis prints them, and whether `default` includes them.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("commandstats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// INFO. Its keyspace section counts keys, so under `full` it waits for
/// the writes it counts, like DBSIZE.
fn info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    let (frame, counts_keys) = info_text(ctx, args);
    let full = ctx
        .shared
        .effective_durability(ctx.client.durability, ctx.client.db)
        == Durability::Full;
    Outcome {
        frame,
        dependency_lsn: if counts_keys && full {
            ctx.shared.store.keyspace.max_write_lsn()
        } else {
            0
        },
    }
}

fn info_text(ctx: &mut Ctx<'_>, args: &[Bytes]) -> (Frame, bool) {
    let shared = ctx.shared;
    let mut wanted: HashSet<&'static str> = HashSet::new();
    if args.len() == 1 {
        wanted.extend(SECTIONS.iter().filter(|s| s.1).map(|s| s.0));
    }
    for a in &args[1..] {
        if is(a, "all") || is(a, "everything") {
            wanted.extend(SECTIONS.iter().map(|s| s.0));
        } else if is(a, "default") {
            wanted.extend(SECTIONS.iter().filter(|s| s.1).map(|s| s.0));
        } else if let Some((name, _)) = SECTIONS.iter().find(|s| is(a, s.0)) {
            wanted.insert(name);
        }
    }
    let mut out = String::new();
    for (name, _) in SECTIONS {
        if !wanted.contains(name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let (title, body) = match *name {
            "server" => ("Server", server_section(shared)),
            "clients" => ("Clients", clients_section(shared)),
            "memory" => ("Memory", memory_section(shared)),
            "persistence" => ("Persistence", persistence_section(shared)),
            "stats" => ("Stats", stats_section(shared)),
            "replication" => ("Replication", replication_section(shared)),
            "cpu" => ("CPU", cpu_section()),
            // Per-command call counts are not kept.
            "commandstats" => ("Commandstats", String::new()),
            "cluster" => ("Cluster", "cluster_enabled:0\r\n".to_string()),
            _ => ("Keyspace", keyspace_section(shared)),
        };
        let _ = write!(out, "# {title}\r\n{body}");
    }
    (
        Frame::Verbatim(Bytes::from(out)),
        wanted.contains("keyspace"),
    )
}

/// Appends `name:value\r\n`.
fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

/// Redis's `bytesToHuman`: `512B`, `1.50K`, `2.00M`, ...
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in UNITS {
        if n >= size {
            return format!("{:.2}{unit}", n as f64 / size as f64);
        }
    }
    format!("{n}B")
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn uptime_secs(shared: &Shared) -> u64 {
    shared.started.elapsed().as_secs()
}

fn server_section(shared: &Shared) -> String {
    let cfg = shared.config.read();
    let mut s = String::new();
    let uptime = uptime_secs(shared);
    let port = shared.bound_port.load(Ordering::Acquire);
    field(&mut s, "redis_version", REDIS_COMPAT_VERSION);
    field(&mut s, "redis_git_sha1", "00000000");
    field(&mut s, "redis_git_dirty", 0);
    field(&mut s, "durakv_version", env!("CARGO_PKG_VERSION"));
    field(&mut s, "redis_mode", "standalone");
    let os = format!(
        "{} {} {}",
        read_trimmed("/proc/sys/kernel/ostype"),
        read_trimmed("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH
    );
    field(&mut s, "os", os.trim());
    field(&mut s, "arch_bits", usize::BITS);
    field(&mut s, "multiplexing_api", "epoll");
    field(&mut s, "process_id", std::process::id());
    field(&mut s, "process_supervised", "no");
    field(&mut s, "run_id", &shared.run_id);
    field(&mut s, "tcp_port", port);
    field(&mut s, "server_time_usec", now_us());
    field(&mut s, "uptime_in_seconds", uptime);
    field(&mut s, "uptime_in_days", uptime / 86_400);
    field(&mut s, "hz", cfg.hz);
    field(&mut s, "configured_hz", cfg.hz);
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    field(&mut s, "executable", exe);
    // The configuration does not record which file (if any) it came from.
    let config_file = shared.config.read().config_file.clone();
    field(&mut s, "config_file", &config_file);
    field(&mut s, "io_threads_active", 0);
    for (i, b) in cfg.bind.iter().enumerate() {
        let _ = write!(s, "listener{i}:name=tcp,bind={b},port={port}\r\n");
    }
    s
}

fn clients_section(shared: &Shared) -> String {
    let clients = shared.clients.all();
    let (mut watching, mut watched_keys) = (0usize, 0usize);
    for c in &clients {
        let w = c.info.lock().watch;
        watched_keys += w;
        watching += usize::from(w > 0);
    }
    let mut s = String::new();
    field(&mut s, "connected_clients", clients.len());
    field(&mut s, "cluster_connections", 0);
    field(&mut s, "maxclients", shared.config.read().maxclients);
    field(&mut s, "client_recent_max_input_buffer", 0);
    field(&mut s, "client_recent_max_output_buffer", 0);
    field(&mut s, "blocked_clients", shared.blocking.blocked_clients());
    field(&mut s, "tracking_clients", 0);
    field(&mut s, "pubsub_clients", 0);
    field(&mut s, "watching_clients", watching);
    field(&mut s, "clients_in_timeout_table", 0);
    field(&mut s, "total_watched_keys", watched_keys);
    field(
        &mut s,
        "total_blocking_keys",
        shared.blocking.blocking_keys(),
    );
    s
}

fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn memory_section(shared: &Shared) -> String {
    let used = crate::memory::used_memory_bytes();
    let rss = crate::memory::read_rss_bytes();
    let peak = crate::memory::peak_memory_bytes().max(used);
    let system = total_system_memory();
    let (maxmemory, policy) = {
        let c = shared.config.read();
        (
            c.maxmemory_bytes,
            c.compat
                .get("maxmemory-policy")
                .cloned()
                .unwrap_or_else(|| "noeviction".into()),
        )
    };
    let mut s = String::new();
    field(&mut s, "used_memory", used);
    field(&mut s, "used_memory_human", bytes_to_human(used));
    field(&mut s, "used_memory_rss", rss);
    field(&mut s, "used_memory_rss_human", bytes_to_human(rss));
    field(&mut s, "used_memory_peak", peak);
    field(&mut s, "used_memory_peak_human", bytes_to_human(peak));
    let perc = if peak > 0 {
        used as f64 * 100.0 / peak as f64
    } else {
        0.0
    };
    field(&mut s, "used_memory_peak_perc", format!("{perc:.2}%"));
    field(&mut s, "total_system_memory", system);
    field(&mut s, "total_system_memory_human", bytes_to_human(system));
    let lua = shared.scripting.used_memory();
    field(&mut s, "used_memory_lua", lua);
    field(&mut s, "used_memory_lua_human", bytes_to_human(lua as u64));
    field(
        &mut s,
        "number_of_cached_scripts",
        shared.scripting.cached_count(),
    );
    field(&mut s, "maxmemory", maxmemory);
    field(&mut s, "maxmemory_human", bytes_to_human(maxmemory));
    field(&mut s, "maxmemory_policy", policy);
    // used_memory is the sampled RSS, so the ratio is 1 by construction.
    field(&mut s, "mem_fragmentation_ratio", "1.00");
    field(&mut s, "mem_allocator", "libc");
    s
}

/// Unix time (seconds) of the last successful checkpoint; start-up time
/// until the first one, as in Redis.
fn last_save_unix(shared: &Shared) -> u64 {
    shared.checkpoints.last_save_unix_secs()
}

/// The body of `INFO persistence`: Redis's RDB/AOF fields (so tools that
/// read them keep working) and durakv's durability and log state. The log
/// and checkpoint code add their fields here.
pub fn persistence_section(shared: &Shared) -> String {
    let cfg = shared.config.read();
    let mut s = String::new();
    field(&mut s, "loading", 0);
    field(&mut s, "async_loading", 0);
    crate::checkpointer::rdb_fields(shared, &mut s);
    field(&mut s, "aof_enabled", 0);
    field(&mut s, "aof_rewrite_in_progress", 0);
    field(&mut s, "aof_rewrite_scheduled", 0);
    let failure = shared.log_failure();
    field(
        &mut s,
        "aof_last_write_status",
        if failure.is_some() { "err" } else { "ok" },
    );
    field(&mut s, "durability", cfg.durability);
    let policy = match cfg.durability_policy {
        crate::config::DurabilityPolicy::Connection => "connection",
        crate::config::DurabilityPolicy::Strictest => "strictest",
    };
    field(&mut s, "durability_policy", policy);
    for db in 0..cfg.databases {
        let _ = write!(s, "db{db}_durability:{}\r\n", cfg.db_durability(db));
    }
    field(&mut s, "wal_enabled", 1);
    // A newline in the failure text would end the field early.
    let failure = failure.unwrap_or_default().replace(['\r', '\n'], " ");
    field(&mut s, "wal_failure", failure);
    crate::wal_info::fields(shared, &mut s);
    crate::checkpointer::info_fields(shared, &mut s);
    s
}

/// A reading of the traffic counters, for the instantaneous rates.
struct OpsSample {
    at: Instant,
    commands: u64,
    net_in: u64,
    net_out: u64,
}

/// Recent readings, oldest first. INFO takes one each time it reports; the
/// server's periodic task may add more through [`record_ops_sample`] so the
/// rates stay current however rarely INFO is asked.
static OPS_SAMPLES: Mutex<VecDeque<OpsSample>> = Mutex::new(VecDeque::new());
/// Readings older than this no longer count as "instantaneous".
const RATE_WINDOW_SECS: f64 = 2.0;
/// Readings closer together than this give too noisy a rate.
const MIN_RATE_INTERVAL_SECS: f64 = 0.1;
/// Bounds the queue even at the highest `hz`.
const MAX_OPS_SAMPLES: usize = 1024;

fn reading(shared: &Shared) -> OpsSample {
    let st = &shared.stats;
    OpsSample {
        at: Instant::now(),
        commands: st.total_commands_processed.load(Ordering::Relaxed),
        net_in: st.total_net_input_bytes.load(Ordering::Relaxed),
        net_out: st.total_net_output_bytes.load(Ordering::Relaxed),
    }
}

/// Drops readings that fell out of the window, keeping the newest of them
/// as a fallback base for callers that sample rarely.
fn prune(q: &mut VecDeque<OpsSample>) {
    while q.len() > MAX_OPS_SAMPLES
        || (q.len() > 1 && q[1].at.elapsed().as_secs_f64() > RATE_WINDOW_SECS)
    {
        q.pop_front();
    }
}

/// Adds a reading for `instantaneous_ops_per_sec` and the kbps rates.
pub fn record_ops_sample(shared: &Shared) {
    let mut q = OPS_SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
    prune(&mut q);
    q.push_back(reading(shared));
}

/// (ops/sec, input kbps, output kbps), averaged from the oldest reading in
/// the window (or, with none there, the newest usable one) to now.
fn instantaneous_rates(shared: &Shared) -> (u64, f64, f64) {
    let now = reading(shared);
    let mut q = OPS_SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
    prune(&mut q);
    let age = |s: &&OpsSample| s.at.elapsed().as_secs_f64();
    let base = q
        .iter()
        .find(|s| (MIN_RATE_INTERVAL_SECS..=RATE_WINDOW_SECS).contains(&age(s)))
        .or_else(|| q.iter().rev().find(|s| age(s) >= MIN_RATE_INTERVAL_SECS));
    let rates = match base {
        Some(b) => {
            let dt = now.at.duration_since(b.at).as_secs_f64();
            (
                (now.commands.saturating_sub(b.commands) as f64 / dt) as u64,
                now.net_in.saturating_sub(b.net_in) as f64 / dt / 1024.0,
                now.net_out.saturating_sub(b.net_out) as f64 / dt / 1024.0,
            )
        }
        None => (0, 0.0, 0.0),
    };
    q.push_back(now);
    rates
}

fn stats_section(shared: &Shared) -> String {
    let st = &shared.stats;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let (ops, in_kbps, out_kbps) = instantaneous_rates(shared);
    let mut s = String::new();
    field(
        &mut s,
        "total_connections_received",
        get(&st.total_connections_received),
    );
    field(
        &mut s,
        "total_commands_processed",
        get(&st.total_commands_processed),
    );
    field(&mut s, "instantaneous_ops_per_sec", ops);
    field(
        &mut s,
        "total_net_input_bytes",
        get(&st.total_net_input_bytes),
    );
    field(
        &mut s,
        "total_net_output_bytes",
        get(&st.total_net_output_bytes),
    );
    field(&mut s, "total_net_repl_input_bytes", 0);
    field(&mut s, "total_net_repl_output_bytes", 0);
    field(&mut s, "instantaneous_input_kbps", format!("{in_kbps:.2}"));
    field(
        &mut s,
        "instantaneous_output_kbps",
        format!("{out_kbps:.2}"),
    );
    field(&mut s, "instantaneous_input_repl_kbps", "0.00");
    field(&mut s, "instantaneous_output_repl_kbps", "0.00");
    field(
        &mut s,
        "rejected_connections",
        get(&st.rejected_connections),
    );
    field(&mut s, "sync_full", 0);
    field(&mut s, "sync_partial_ok", 0);
    field(&mut s, "sync_partial_err", 0);
    field(&mut s, "expired_keys", get(&st.expired_keys));
    field(&mut s, "evicted_keys", 0);
    field(&mut s, "evicted_clients", 0);
    field(&mut s, "keyspace_hits", get(&st.keyspace_hits));
    field(&mut s, "keyspace_misses", get(&st.keyspace_misses));
    field(&mut s, "pubsub_channels", 0);
    field(&mut s, "pubsub_patterns", 0);
    field(&mut s, "pubsubshard_channels", 0);
    field(&mut s, "latest_fork_usec", 0);
    field(&mut s, "total_forks", 0);
    field(&mut s, "migrate_cached_sockets", 0);
    field(&mut s, "total_error_replies", get(&st.total_error_replies));
    field(&mut s, "unexpected_error_replies", 0);
    field(&mut s, "watch_aborts", get(&st.watch_aborts));
    s
}

fn replication_section(shared: &Shared) -> String {
    let mut s = String::new();
    field(&mut s, "role", "master");
    field(&mut s, "connected_slaves", 0);
    field(&mut s, "master_failover_state", "no-failover");
    field(&mut s, "master_replid", &shared.run_id);
    field(
        &mut s,
        "master_replid2",
        "0000000000000000000000000000000000000000",
    );
    field(&mut s, "master_repl_offset", 0);
    field(&mut s, "second_repl_offset", -1);
    field(&mut s, "repl_backlog_active", 0);
    field(&mut s, "repl_backlog_size", 1_048_576);
    field(&mut s, "repl_backlog_first_byte_offset", 0);
    field(&mut s, "repl_backlog_histlen", 0);
    s
}

/// Linux reports /proc CPU times in USER_HZ, fixed at 100 for user space.
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// (user, system, children user, children system) seconds from a
/// `/proc/.../stat` file.
fn cpu_times(path: &str) -> Option<[f64; 4]> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let secs = |i: usize| Some(f.get(i)?.parse::<u64>().ok()? as f64 / CLOCK_TICKS_PER_SEC);
    // Fields 14..=17 (utime, stime, cutime, cstime); `rest` starts at field 3.
    Some([secs(11)?, secs(12)?, secs(13)?, secs(14)?])
}

fn cpu_section() -> String {
    let p = cpu_times("/proc/self/stat").unwrap_or_default();
    let main =
        cpu_times(&format!("/proc/self/task/{}/stat", std::process::id())).unwrap_or_default();
    let mut s = String::new();
    field(&mut s, "used_cpu_sys", format!("{:.6}", p[1]));
    field(&mut s, "used_cpu_user", format!("{:.6}", p[0]));
    field(&mut s, "used_cpu_sys_children", format!("{:.6}", p[3]));
    field(&mut s, "used_cpu_user_children", format!("{:.6}", p[2]));
    field(
        &mut s,
        "used_cpu_sys_main_thread",
        format!("{:.6}", main[1]),
    );
    field(
        &mut s,
        "used_cpu_user_main_thread",
        format!("{:.6}", main[0]),
    );
    s
}

fn keyspace_section(shared: &Shared) -> String {
    let ks = &shared.store.keyspace;
    let mut s = String::new();
    for db in 0..ks.num_dbs() {
        let (keys, expires) = ks.db_stats(db);
        if keys > 0 {
            let _ = write!(s, "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n");
        }
    }
    s
}

// ---------------------------------------------------------------------------
// TIME, SHUTDOWN, ROLE
// ---------------------------------------------------------------------------

fn time(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    let us = now_us();
    Frame::Array(vec![
        bulk(&(us / 1_000_000).to_string()),
        bulk(&(us % 1_000_000).to_string()),
    ])
}

fn shutdown(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
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
            return errors::err(errors::SYNTAX);
        }
    }
    if (abort && (save || nosave || other)) || (save && nosave) {
        return errors::err(errors::SYNTAX);
    }
    if abort {
        // Shutdown starts at once and cannot be waiting to be aborted.
        return Frame::error("ERR No shutdown in progress.");
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
    Frame::ok()
}

fn role(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    Frame::Array(vec![
        bulk("master"),
        Frame::Integer(0),
        Frame::Array(Vec::new()),
    ])
}

// ---------------------------------------------------------------------------
// Persistence: LASTSAVE, SAVE, BGSAVE, all backed by checkpoints.
// ---------------------------------------------------------------------------

fn lastsave(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    Frame::Integer(last_save_unix(ctx.shared) as i64)
}

/// SAVE: a checkpoint on this connection's thread; the reply waits for it.
/// Other connections keep being served (the checkpoint locks one shard at a
/// time), unlike Redis, whose SAVE blocks the whole server.
fn save(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    let shared = ctx.shared;
    if !shared.checkpoints.enabled() {
        return Frame::error("ERR checkpoints are not available (no data directory)");
    }
    if shared.checkpoints.in_progress() {
        return Frame::error(crate::checkpointer::ERR_IN_PROGRESS);
    }
    match crate::checkpointer::blocking(|| {
        crate::checkpointer::checkpoint_now(shared, "save", crate::checkpointer::Pace::Foreground)
    }) {
        Ok(_) => Frame::ok(),
        Err(durakv_engine::checkpoint::CheckpointError::InProgress) => {
            Frame::error(crate::checkpointer::ERR_IN_PROGRESS)
        }
        Err(e) => Frame::error(format!("ERR {}", e.to_string().replace(['\r', '\n'], " "))),
    }
}

/// BGSAVE [SCHEDULE]: hands a checkpoint to the checkpointer thread.
fn bgsave(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let schedule = match args.len() {
        1 => false,
        2 if is(&args[1], "schedule") => true,
        _ => return errors::err(errors::SYNTAX),
    };
    match ctx.shared.checkpoints.request_bgsave() {
        Ok(()) => Frame::simple("Background saving started"),
        // One is running; it covers everything written before it finishes
        // only partly, so SCHEDULE queues another behind it.
        Err(e) if schedule && e == crate::checkpointer::ERR_IN_PROGRESS => {
            crate::checkpointer::schedule_bgsave(ctx.shared);
            Frame::simple("Background saving scheduled")
        }
        Err(e) => Frame::error(e),
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

fn wait(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if parse_i64(&args[1]).is_none() {
        return errors::err(errors::NOT_INTEGER);
    }
    if let Err(e) = parse_timeout(&args[2]) {
        return e;
    }
    // No replicas: none acknowledged, and waiting could never change that.
    Frame::Integer(0)
}

// ---------------------------------------------------------------------------
// LATENCY, SLOWLOG: neither is recorded yet, so both report empty.
// ---------------------------------------------------------------------------

fn latency(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let s = match find_sub("latency", args) {
        Ok(s) => s,
        Err(e) => return e,
    };
    note_subcommand(ctx, "latency", s);
    match s.name {
        "latest" | "history" => Frame::Array(Vec::new()),
        "reset" => Frame::Integer(0),
        "graph" => Frame::error(format!(
            "ERR No samples available for event '{}'",
            lossy(&args[2])
        )),
        "doctor" => Frame::Verbatim(Bytes::from_static(
            b"durakv does not record latency events yet, so there is nothing to analyse.\n",
        )),
        "histogram" => Frame::Map(Vec::new()),
        _ => help(
            "latency",
            &[
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return an ASCII latency graph for the <event> class.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "HISTOGRAM [COMMAND ...]",
                "    Return a cumulative distribution of latencies in the format of a histogram.",
            ],
        ),
    }
}

fn slowlog(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let s = match find_sub("slowlog", args) {
        Ok(s) => s,
        Err(e) => return e,
    };
    note_subcommand(ctx, "slowlog", s);
    match s.name {
        "get" => {
            if args.len() > 3 {
                return errors::err(errors::SYNTAX);
            }
            if args.len() == 3 {
                match parse_i64(&args[2]) {
                    Some(n) if n >= -1 => {}
                    _ => return Frame::error("ERR count should be greater than or equal to -1"),
                }
            }
            Frame::Array(Vec::new())
        }
        "len" => Frame::Integer(0),
        "reset" => Frame::ok(),
        _ => help(
            "slowlog",
            &[
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
            ],
        ),
    }
}

// ---------------------------------------------------------------------------
// MEMORY
// ---------------------------------------------------------------------------

/// MEMORY USAGE names a key (argument 2); the other subcommands none.
fn memory_keys(args: &[Bytes]) -> Vec<usize> {
    if args.len() >= 3 && is(&args[1], "usage") {
        vec![2]
    } else {
        Vec::new()
    }
}

/// Per-key bookkeeping beyond key and value bytes (matches the keyspace's
/// own estimate for INFO).
const PER_KEY_OVERHEAD_BYTES: usize = 64;

fn memory(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Frame {
    let s = match find_sub("memory", args) {
        Ok(s) => s,
        Err(e) => return e,
    };
    note_subcommand(ctx, "memory", s);
    match s.name {
        "usage" => {
            match args.len() {
                3 => {}
                5 if is(&args[3], "samples") => {
                    if parse_i64(&args[4]).is_none_or(|n| n < 0) {
                        return errors::err(errors::NOT_INTEGER);
                    }
                }
                _ => return errors::err(errors::SYNTAX),
            }
            let db = ctx.db();
            match txn.get(db, &args[2]) {
                Some(e) => Frame::Integer(
                    (args[2].len() + e.value.approx_size_bytes() + PER_KEY_OVERHEAD_BYTES) as i64,
                ),
                None => Frame::Null,
            }
        }
        "stats" => {
            // keys.count counts keys: it waits for the writes it counts.
            txn.depend_on(ctx.shared.store.keyspace.max_write_lsn());
            let used = crate::memory::used_memory_bytes();
            let keys: usize = (0..ctx.shared.store.keyspace.num_dbs())
                .map(|db| ctx.shared.store.keyspace.db_len(db))
                .sum();
            Frame::Map(vec![
                (
                    bulk("peak.allocated"),
                    Frame::Integer(crate::memory::peak_memory_bytes() as i64),
                ),
                (bulk("total.allocated"), Frame::Integer(used as i64)),
                (
                    bulk("clients.normal"),
                    Frame::Integer(ctx.shared.clients.len() as i64),
                ),
                (bulk("keys.count"), Frame::Integer(keys as i64)),
            ])
        }
        "doctor" => Frame::Verbatim(Bytes::from_static(
            b"durakv measures memory as the process's resident set size; see INFO memory.\n",
        )),
        "malloc-stats" => Frame::Verbatim(Bytes::from_static(
            b"Stats not supported for the current allocator\n",
        )),
        "purge" => Frame::ok(),
        _ => help(
            "memory",
            &[
                "DOCTOR",
                "    Return memory problems reports.",
                "MALLOC-STATS",
                "    Return internal statistics report from the memory allocator.",
                "PURGE",
                "    Attempt to purge dirty pages for reclamation by the allocator.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value.",
            ],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(bytes_to_human(512), "512B");
        assert_eq!(bytes_to_human(1536), "1.50K");
        assert_eq!(bytes_to_human(3 * 1024 * 1024), "3.00M");
    }

    #[test]
    fn cpu_times_parse_own_stat() {
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(cpu_times("/proc/self/stat").is_some());
        }
    }

    #[test]
    fn subcommand_tables_have_help_and_valid_arity() {
        for c in [
            "client", "command", "config", "latency", "slowlog", "memory",
        ] {
            let t = subcommands_of(c);
            assert!(t.iter().any(|s| s.name == "help"), "{c}");
            assert!(t.iter().all(|s| s.arity.abs() >= 2), "{c}");
        }
    }
}
