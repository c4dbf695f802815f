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
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

const KEYS_NEED_EMPTY_KEY: &str =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";
const CONNECT_FAILED: &str = "IOERR error or timeout connecting to the client";
const WRITE_FAILED: &str = "IOERR error or timeout writing to target instance";
const READ_FAILED: &str = "IOERR error or timeout reading to target instance";
/// Redis's timeout when the argument is not positive.
const DEFAULT_TIMEOUT_MS: i64 = 1000;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("migrate", -6, WRITE, Keys::Custom(migrate_keys), Handler::Data(migrate), "generic", "Atomically transfers a key from one Redis instance to another."),
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
    let port = String::from_utf8_lossy(&args[2]).into_owned();
    let timeout = Duration::from_millis(timeout as u64);
    let expected = sent.len() + 1 + usize::from(opts.auth.is_some());
    let replies =
        crate::checkpointer::blocking(|| exchange(&host, &port, timeout, &wire, expected))?;
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

/// Sends `wire` and reads `expected` one-line replies: Ok for a status,
/// the error text for an error.
fn exchange(
    host: &str,
    port: &str,
    timeout: Duration,
    wire: &[u8],
    expected: usize,
) -> Result<Vec<Result<(), String>>, Frame> {
    let connect_failed = || Frame::error(CONNECT_FAILED);
    let port: u16 = port.parse().map_err(|_| connect_failed())?;
    let addr = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(connect_failed)?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|_| connect_failed())?;
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
