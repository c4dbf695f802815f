//! MIGRATE: moves (or with COPY, copies) keys to another server by sending
//! it RESTORE commands carrying their DUMP payloads, then deletes the keys
//! the target acknowledged.
//!
//! The keys' shards stay locked for the round trip, so a key cannot change
//! between being sent and being deleted (Redis blocks its whole server for
//! it). No connection is cached: each call connects, authenticates and
//! selects the database anew.

use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply};
use crate::errors;
use crate::rdb_value;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::KeyOp;
use durakv_engine::txn::Txn;
use durakv_protocol::Frame;
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

const KEYS_NEED_EMPTY_KEY: &str =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";
/// Only when there is no address to dial: Redis's connect just starts the
/// handshake, so a refused or timed-out connection fails the first write.
const CONNECT_FAILED: &str = "IOERR error or timeout connecting to the client";
const WRITE_FAILED: &str = "IOERR error or timeout writing to target instance";
const READ_FAILED: &str = "IOERR error or timeout reading to target instance";
/// Redis's timeout when the argument is not positive.
const DEFAULT_TIMEOUT_MS: i64 = 1000;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("migrate", -6, WRITE, Keys::Custom(migrate_keys), Handler::Data(migrate), "generic", "Sends keys to another server, then deletes them unless COPY."),
    ]
}

#[derive(Default)]
struct Options {
    copy: bool,
    replace: bool,
    /// (username, password) of AUTH / AUTH2.
    auth: Option<(Option<Bytes>, Bytes)>,
    /// Index of the first key after KEYS.
    keys_from: Option<usize>,
}

fn options(args: &[Bytes]) -> Result<Options, Frame> {
    let mut o = Options::default();
    let mut i = 6;
    while i < args.len() {
        let left = args.len() - i - 1;
        if is(&args[i], "copy") {
            o.copy = true;
        } else if is(&args[i], "replace") {
            o.replace = true;
        } else if is(&args[i], "auth") && left >= 1 {
            o.auth = Some((None, args[i + 1].clone()));
            i += 1;
        } else if is(&args[i], "auth2") && left >= 2 {
            o.auth = Some((Some(args[i + 1].clone()), args[i + 2].clone()));
            i += 2;
        } else if is(&args[i], "keys") {
            if !args[3].is_empty() {
                return Err(Frame::error(KEYS_NEED_EMPTY_KEY));
            }
            o.keys_from = Some(i + 1);
            break;
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
        i += 1;
    }
    Ok(o)
}

fn key_range(args: &[Bytes]) -> Result<std::ops::Range<usize>, Frame> {
    Ok(match options(args)?.keys_from {
        Some(from) => from..args.len(),
        None => 3..4,
    })
}

fn migrate_keys(args: &[Bytes]) -> Vec<usize> {
    key_range(args).map(|r| r.collect()).unwrap_or_default()
}

/// RESP for one command.
fn command(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
    for p in parts {
        out.extend_from_slice(format!("${}\r\n", p.len()).as_bytes());
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
}

fn migrate(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let opts = options(args)?;
    let keys = key_range(args)?;
    let timeout = match arg_i64(&args[5])? {
        t if t <= 0 => DEFAULT_TIMEOUT_MS,
        t => t,
    };
    let dest_db = arg_i64(&args[4])?;
    let (db, now) = (ctx.db(), txn.now_ms);
    let limits = super::encoding_limits(ctx);
    let mut sent = Vec::new();
    let mut wire = Vec::new();
    if let Some((user, pass)) = &opts.auth {
        match user {
            Some(u) => command(&mut wire, &[b"AUTH", u, pass]),
            None => command(&mut wire, &[b"AUTH", pass]),
        }
    }
    command(&mut wire, &[b"SELECT", dest_db.to_string().as_bytes()]);
    for key in &args[keys] {
        let Some((e, expire_at_ms)) = txn.get_with_expiry(db, key, true) else {
            continue;
        };
        let ttl = match expire_at_ms {
            0 => 0,
            at => at.saturating_sub(now).max(1),
        };
        let payload = rdb_value::dump(&e.value, &limits);
        let ttl = ttl.to_string();
        let mut parts: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), &payload];
        if opts.replace {
            parts.push(b"REPLACE");
        }
        command(&mut wire, &parts);
        sent.push(key.clone());
    }
    if sent.is_empty() {
        return Ok(Frame::simple("NOKEY"));
    }
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    let port = target_port(&args[2]).ok_or_else(|| Frame::error(CONNECT_FAILED))?;
    let timeout = Duration::from_millis(timeout as u64);
    let expected = sent.len() + 1 + usize::from(opts.auth.is_some());
    let replies =
        crate::checkpointer::blocking(|| exchange(&host, port, timeout, &wire, expected))?;
    let mut first_error = None;
    let mut replies = replies.into_iter();
    // AUTH and SELECT first: if either fails, nothing was restored.
    for _ in 0..expected - sent.len() {
        if let Some(Err(e)) = replies.next() {
            first_error.get_or_insert(e);
        }
    }
    if first_error.is_none() {
        for (key, r) in sent.iter().zip(replies) {
            match r {
                Err(e) => {
                    first_error.get_or_insert(e);
                }
                Ok(()) if !opts.copy => super::apply(txn, db, key, KeyOp::Del)?,
                Ok(()) => {}
            }
        }
    }
    match first_error {
        Some(e) => Err(Frame::error(format!(
            "ERR Target instance replied with error: {e}"
        ))),
        None => Ok(Frame::ok()),
    }
}

/// The port Redis dials for MIGRATE's port argument, so that a malformed
/// one fails as it does there: Redis reads it as C's `atoi` would (into an
/// `int`), prints it back into a five-character buffer for the address
/// lookup, and the lookup keeps the low 16 bits. "1x" is port 1, "70000"
/// 4464, "123456" 12345; a negative number is no service at all (None).
fn target_port(arg: &[u8]) -> Option<u16> {
    // C's isspace: space, \t, \n, \v, \f, \r.
    let blank = arg
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t'..=b'\r'))
        .count();
    let text = &arg[blank..];
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    // strtol saturates at the bounds of a 64-bit long; atoi then truncates.
    let mut n: i64 = 0;
    for d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        let d = i64::from(d - b'0');
        n = n.saturating_mul(10);
        n = if negative {
            n.saturating_sub(d)
        } else {
            n.saturating_add(d)
        };
    }
    let n = n as i32;
    if n < 0 {
        return None;
    }
    let printed = n.to_string();
    let kept = printed.get(..5).unwrap_or(&printed);
    kept.parse::<u32>().ok().map(|p| p as u16)
}

/// Connects as Redis does: the first address where a non-blocking connect
/// gets under way is used, whether or not the handshake then succeeds.
/// Back in blocking mode, the first write waits up to its timeout for the
/// handshake and fails if it was refused or never completes.
fn connect(host: &str, port: u16) -> Result<TcpStream, Frame> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|_| Frame::error(CONNECT_FAILED))?;
    for addr in addrs {
        let Ok(socket) = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        else {
            continue;
        };
        if socket.set_nonblocking(true).is_err() {
            continue;
        }
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(_) => continue,
        }
        socket
            .set_nonblocking(false)
            .map_err(|_| Frame::error(WRITE_FAILED))?;
        return Ok(socket.into());
    }
    Err(Frame::error(CONNECT_FAILED))
}

/// Sends `wire` and reads `expected` one-line replies: Ok for a status,
/// the error text for an error.
fn exchange(
    host: &str,
    port: u16,
    timeout: Duration,
    wire: &[u8],
    expected: usize,
) -> Result<Vec<Result<(), String>>, Frame> {
    let mut stream = connect(host, port)?;
    let io = |r: std::io::Result<()>, msg: &'static str| r.map_err(|_| Frame::error(msg));
    io(stream.set_write_timeout(Some(timeout)), WRITE_FAILED)?;
    io(stream.set_read_timeout(Some(timeout)), READ_FAILED)?;
    io(stream.write_all(wire), WRITE_FAILED)?;
    let mut reader = BufReader::new(stream);
    let mut out = Vec::with_capacity(expected);
    let mut line = Vec::new();
    for _ in 0..expected {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(n) if n > 0 && line.ends_with(b"\r\n") => {}
            _ => return Err(Frame::error(READ_FAILED)),
        }
        let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        out.push(match line[0] {
            b'-' => Err(text),
            _ => Ok(()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::target_port;

    #[test]
    fn port_is_read_as_redis_reads_it() {
        assert_eq!(target_port(b"6379"), Some(6379));
        assert_eq!(target_port(b" +6379x"), Some(6379));
        assert_eq!(target_port(b"abc"), Some(0));
        assert_eq!(target_port(b"70000"), Some(4464));
        assert_eq!(target_port(b"123456"), Some(12345));
        // An int's worth of a long: 99999999999 wraps to 1215752191.
        assert_eq!(target_port(b"99999999999"), Some(12157));
        assert_eq!(target_port(b"-4294967295"), Some(1));
        assert_eq!(target_port(b"-1"), None);
        assert_eq!(target_port(b"99999999999999999999"), None);
    }
}
