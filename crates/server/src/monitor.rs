//! MONITOR: every command the server runs, as one line per command, to the
//! connections that asked for it.
//!
//! A line is what Redis 7 writes: `+<seconds>.<micros> [<db> <client>]`
//! and the arguments, each quoted and escaped. A command is shown once it
//! ran (after its checks, so a refused one is not), with the database the
//! client is in afterwards, as Redis's `call()` does. Commands inside
//! MULTI show when EXEC runs them, before the EXEC itself; a script's
//! EVAL or FCALL is shown before it runs (the commands it calls follow,
//! from `lua`). Administrative commands are never shown, and passwords
//! are replaced by `(redacted)`.
//!
//! Lines travel through each monitor's mailbox (`crate::pubsub`), so a
//! monitor that stops reading is disconnected at the pub/sub output
//! buffer limit instead of growing the server's memory. A request's lines
//! are held, like its reply, until what it wrote is durable: a monitor
//! sees a `full` write no sooner than its writer learns of it (client
//! libraries' tests count on that order, as Redis gives it), and never one
//! a crash takes back.

use crate::client::{ClientHandle, ClientState, Peer};
use crate::command::{flags, CommandSpec, Ctx};
use crate::pubsub::PubSub;
use crate::state::Shared;
use bytes::{BufMut, Bytes, BytesMut};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Who ran a command, as the line names it.
#[derive(Clone)]
pub enum Origin {
    Client(Peer),
    /// A command a script or function called.
    Lua,
}

/// The connections in MONITOR mode.
#[derive(Default)]
pub struct Monitors {
    /// How many there are, read without the lock on every command.
    count: AtomicUsize,
    clients: Mutex<Vec<Arc<ClientHandle>>>,
}

impl Monitors {
    /// Whether any connection monitors: when none does, feeding costs one
    /// atomic load per command.
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Adds a monitor; false if it already was one.
    pub fn add(&self, h: &Arc<ClientHandle>) -> bool {
        let mut clients = self.clients.lock();
        if clients.iter().any(|c| c.id == h.id) {
            return false;
        }
        clients.push(h.clone());
        h.monitor.store(true, Ordering::Relaxed);
        self.count.store(clients.len(), Ordering::Relaxed);
        true
    }

    /// Removes a monitor (RESET, or the connection closed).
    pub fn remove(&self, h: &ClientHandle) {
        if !h.monitor.swap(false, Ordering::Relaxed) {
            return;
        }
        let mut clients = self.clients.lock();
        clients.retain(|c| c.id != h.id);
        self.count.store(clients.len(), Ordering::Relaxed);
    }

    /// Sends one request's lines to every monitor, each held until `dep`
    /// is durable.
    fn feed(&self, pubsub: &PubSub, lines: Vec<Bytes>, dep: u64) {
        let clients: Vec<Arc<ClientHandle>> = self.clients.lock().clone();
        for text in lines {
            for h in &clients {
                pubsub.push_raw(h, text.clone(), dep);
            }
        }
    }
}

/// Shows a command the connection of `ctx` ran, unless its flags say
/// never to (administrative commands, and scripts, which show themselves
/// before they run: [`show_script`]).
pub fn show(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) {
    if shown(ctx, spec, args) {
        let addr = ctx.client.handle.addr.clone();
        note(ctx, Origin::Client(addr), args);
    }
}

/// Shows EVAL, FCALL and friends before their script runs, so that the
/// commands it calls follow it.
pub fn show_script(ctx: &mut Ctx<'_>, args: &[Bytes]) {
    if ctx.shared.monitors.active() {
        let addr = ctx.client.handle.addr.clone();
        note(ctx, Origin::Client(addr), args);
    }
}

/// Shows a command a script called.
pub fn show_called(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) {
    if shown(ctx, spec, args) {
        note(ctx, Origin::Lua, args);
    }
}

/// Ends the request that just ran (a command, or EXEC and the commands
/// it ran, or a script and those it called): its lines wait, with `dep`
/// (what its reply waits for), until [`send_ready`] finds the reply
/// written. A monitor must not see a write before the client that made it
/// is told, nor one a crash could still take back.
pub fn end_request(ctx: &mut Ctx<'_>, dep: u64) {
    if ctx.client.monitor_lines.is_empty() {
        return;
    }
    let lines = std::mem::take(&mut ctx.client.monitor_lines);
    ctx.client.monitor_pending.push_back((dep, lines));
}

/// Sends, in order, the lines of requests whose writes are durable. The
/// connection calls it once it has written the replies it could, so a
/// line goes out after the reply it belongs to.
pub fn send_ready(shared: &Shared, client: &mut ClientState) {
    while let Some((dep, _)) = client.monitor_pending.front() {
        if *dep != 0 && !shared.dep_met(*dep) {
            return;
        }
        if let Some((_, lines)) = client.monitor_pending.pop_front() {
            shared.monitors.feed(&shared.pubsub, lines, 0);
        }
    }
}

/// Sends every line still waiting (the connection is closing, or is the
/// replication link, which writes no replies): each monitor holds them
/// until their writes are durable.
pub fn send_all(shared: &Shared, client: &mut ClientState) {
    for (dep, lines) in std::mem::take(&mut client.monitor_pending) {
        shared.monitors.feed(&shared.pubsub, lines, dep);
    }
}

/// Whether anyone monitors and MONITOR shows this command after it ran; a
/// container's subcommand counts (CLIENT LIST is administrative, CLIENT ID
/// is not). The subcommand is only looked up while someone monitors.
fn shown(ctx: &Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) -> bool {
    ctx.shared.monitors.active()
        && crate::cmd::subcommands::flags_of(spec, args) & (flags::ADMIN | flags::SKIP_MONITOR) == 0
}

/// Keeps a line for [`flush`], timed now.
fn note(ctx: &mut Ctx<'_>, origin: Origin, args: &[Bytes]) {
    let text = line(SystemTime::now(), ctx.client.db, origin, args);
    ctx.client.monitor_lines.push(text);
}

/// One monitor line, `+` to CRLF.
pub fn line(now: SystemTime, db: usize, origin: Origin, args: &[Bytes]) -> Bytes {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut out = BytesMut::with_capacity(48 + args.iter().map(|a| a.len() + 3).sum::<usize>());
    let who = match origin {
        Origin::Client(Peer::Unix(path)) => format!("unix:{path}"),
        Origin::Client(addr) => addr.to_string(),
        Origin::Lua => "lua".to_string(),
    };
    let head = format!(
        "+{}.{:06} [{db} {who}] ",
        since.as_secs(),
        since.subsec_micros()
    );
    out.put_slice(head.as_bytes());
    let hidden = redacted(args);
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.put_u8(b' ');
        }
        if hidden.contains(&i) {
            out.put_slice(b"\"(redacted)\"");
        } else {
            quote(&mut out, a);
        }
    }
    out.put_slice(b"\r\n");
    out.freeze()
}

/// Arguments Redis never shows (here and in SLOWLOG): passwords of AUTH,
/// HELLO ... AUTH and MIGRATE ... AUTH/AUTH2 (usernames included), every
/// argument of ACL SETUSER past the subcommand, and the values CONFIG SET
/// gives `masteruser`, `masterauth` and `requirepass`. (The last two
/// commands are administrative, so only SLOWLOG ever shows them.)
pub(crate) fn redacted(args: &[Bytes]) -> Vec<usize> {
    let name = args[0].to_ascii_lowercase();
    let sub_is = |s: &[u8]| args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(s));
    match name.as_slice() {
        b"auth" => (1..args.len()).collect(),
        b"acl" if sub_is(b"setuser") => (2..args.len()).collect(),
        b"config" if sub_is(b"set") => (2..args.len())
            .step_by(2)
            .filter(|&i| {
                i + 1 < args.len()
                    && [&b"masteruser"[..], b"masterauth", b"requirepass"]
                        .iter()
                        .any(|n| args[i].eq_ignore_ascii_case(n))
            })
            .map(|i| i + 1)
            .collect(),
        b"hello" => match args.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
            Some(at) => (at + 1..(at + 3).min(args.len())).collect(),
            None => Vec::new(),
        },
        b"migrate" => {
            let mut hidden = Vec::new();
            // The options follow host, port, key, db and timeout.
            let mut i = 6;
            while i < args.len() {
                if args[i].eq_ignore_ascii_case(b"keys") {
                    break;
                }
                if args[i].eq_ignore_ascii_case(b"auth") {
                    hidden.extend((i + 1..i + 2).filter(|&j| j < args.len()));
                    i += 2;
                } else if args[i].eq_ignore_ascii_case(b"auth2") {
                    hidden.extend((i + 1..i + 3).filter(|&j| j < args.len()));
                    i += 3;
                } else {
                    i += 1;
                }
            }
            hidden
        }
        _ => Vec::new(),
    }
}

/// An argument between double quotes, escaped as Redis's `sdscatrepr`.
fn quote(out: &mut BytesMut, s: &[u8]) {
    out.put_u8(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => {
                out.put_u8(b'\\');
                out.put_u8(c);
            }
            b'\n' => out.put_slice(b"\\n"),
            b'\r' => out.put_slice(b"\\r"),
            b'\t' => out.put_slice(b"\\t"),
            0x07 => out.put_slice(b"\\a"),
            0x08 => out.put_slice(b"\\b"),
            0x20..=0x7e => out.put_u8(c),
            _ => out.put_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.put_u8(b'"');
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    pub(crate) fn args(list: &[&str]) -> Vec<Bytes> {
        list.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn text(origin: Origin, a: &[&str]) -> String {
        let t = UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_042);
        String::from_utf8(line(t, 3, origin, &args(a)).to_vec()).unwrap()
    }

    #[test]
    fn lines_look_like_redis() {
        let addr = Peer::Tcp("127.0.0.1:50123".parse().unwrap());
        assert_eq!(
            text(Origin::Client(addr), &["SET", "foo", "bar"]),
            "+1700000000.000042 [3 127.0.0.1:50123] \"SET\" \"foo\" \"bar\"\r\n"
        );
        assert_eq!(
            text(
                Origin::Lua,
                &["set", "a\"b\\c", "x\r\n\t\x07\x08\x01\u{7f}"]
            ),
            "+1700000000.000042 [3 lua] \"set\" \"a\\\"b\\\\c\" \"x\\r\\n\\t\\a\\b\\x01\\x7f\"\r\n"
        );
        let v6 = Peer::Tcp("[::1]:7000".parse().unwrap());
        assert!(text(Origin::Client(v6), &["ping"]).contains("[3 [::1]:7000] \"ping\""));
        let unix = Peer::Unix("/tmp/d.sock".into());
        assert!(text(Origin::Client(unix), &["ping"]).contains("[3 unix:/tmp/d.sock] \"ping\""));
    }

    #[test]
    fn passwords_are_redacted() {
        let lua = |a: &[&str]| text(Origin::Lua, a);
        assert!(lua(&["auth", "pw"]).ends_with("\"auth\" \"(redacted)\"\r\n"));
        assert!(lua(&["AUTH", "u", "pw"]).ends_with("\"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"));
        assert!(
            lua(&["hello", "2", "AUTH", "u", "pw", "SETNAME", "n"]).ends_with(
                "\"hello\" \"2\" \"AUTH\" \"(redacted)\" \"(redacted)\" \"SETNAME\" \"n\"\r\n"
            )
        );
        assert!(lua(&["hello", "3"]).ends_with("\"hello\" \"3\"\r\n"));
        let m = lua(&[
            "migrate", "h", "1", "key", "9", "5000", "AUTH2", "u", "pw", "KEYS", "a",
        ]);
        assert!(m.ends_with("\"5000\" \"AUTH2\" \"(redacted)\" \"(redacted)\" \"KEYS\" \"a\"\r\n"));
        let m = lua(&[
            "migrate", "h", "1", "key", "9", "5000", "COPY", "AUTH", "pw",
        ]);
        assert!(m.ends_with("\"COPY\" \"AUTH\" \"(redacted)\"\r\n"));
        // A trailing AUTH without its password hides nothing it does not have.
        let m = lua(&["migrate", "h", "1", "key", "9", "5000", "AUTH"]);
        assert!(m.ends_with("\"AUTH\"\r\n"));
    }
}
