//! DUMP and RESTORE: a key's value as Redis 7.0's serialized payload (see
//! [`crate::rdb_value`]), so keys move between durakv and Redis.

use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, FIRST_KEY};
use crate::errors;
use crate::rdb_value::{self, RestoreError};
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::{KeyOp, Mutation};
use durakv_engine::txn::Txn;
use durakv_engine::value::Value;
use durakv_protocol::Frame;

const BUSYKEY: &str = "BUSYKEY Target key name already exists.";
const INVALID_TTL: &str = "ERR Invalid TTL value, must be >= 0";
const INVALID_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
const INVALID_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("dump", 2, READONLY, FIRST_KEY, Handler::Data(dump), "generic", "Serializes a key's value in the format RESTORE accepts."),
        spec("restore", -4, WRITE | DENYOOM, FIRST_KEY, Handler::Data(restore), "generic", "Rebuilds a key from a DUMP payload."),
        // Cluster's MIGRATE target form: without cluster, RESTORE itself.
        spec("restore-asking", -4, WRITE | DENYOOM, FIRST_KEY, Handler::Data(restore), "server", "RESTORE as cluster migration sends it; here plain RESTORE."),
    ]
}

fn dump(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let limits = super::encoding_limits(ctx);
    Ok(match txn.get(ctx.db(), &args[1]) {
        Some(e) => Frame::Bulk(Bytes::from(rdb_value::dump(&e.value, &limits))),
        None => Frame::Null,
    })
}

/// RESTORE's options after the payload.
#[derive(Default)]
struct RestoreOptions {
    replace: bool,
    absttl: bool,
    idle_s: Option<u64>,
    freq: Option<u8>,
}

fn restore_options(args: &[Bytes]) -> Result<RestoreOptions, Frame> {
    let mut o = RestoreOptions::default();
    let mut i = 0;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "replace") {
            o.replace = true;
        } else if is(&args[i], "absttl") {
            o.absttl = true;
        } else if is(&args[i], "idletime") && more && o.freq.is_none() {
            i += 1;
            let idle = arg_i64(&args[i])?;
            if idle < 0 {
                return Err(Frame::error(INVALID_IDLETIME));
            }
            o.idle_s = Some(idle as u64);
        } else if is(&args[i], "freq") && more && o.idle_s.is_none() {
            i += 1;
            let freq = arg_i64(&args[i])?;
            o.freq = Some(u8::try_from(freq).map_err(|_| Frame::error(INVALID_FREQ))?);
        } else {
            return Err(errors::err(errors::SYNTAX));
        }
        i += 1;
    }
    Ok(o)
}

/// The value in a payload, with Redis's reply for a refused one.
pub(crate) fn parse_payload(payload: &[u8]) -> Result<Value, Frame> {
    rdb_value::restore(payload).map_err(|e: RestoreError| Frame::error(e.message()))
}

fn restore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let opts = restore_options(&args[4..])?;
    let (db, key) = (ctx.db(), &args[1]);
    let existed = txn.get(db, key).is_some();
    if existed && !opts.replace {
        return Err(Frame::error(BUSYKEY));
    }
    let ttl = arg_i64(&args[2])?;
    if ttl < 0 {
        return Err(Frame::error(INVALID_TTL));
    }
    let value = parse_payload(&args[3])?;
    let now = txn.now_ms;
    let expire_at_ms = match (ttl as u64, opts.absttl) {
        (0, _) => 0,
        (t, true) => t,
        (t, false) => now.saturating_add(t),
    };
    // Already expired (an absolute TTL in the past): the key ends up
    // absent, and a replaced one is deleted.
    if super::ttl_already_over(ctx, txn, expire_at_ms) {
        if existed {
            super::apply(txn, db, key, KeyOp::Del)?;
        }
        return Ok(Frame::ok());
    }
    let op = KeyOp::Restore {
        value,
        expire_at_ms,
    };
    super::keys::apply(txn, Mutation::key(db as u32, key.clone(), op))?;
    if opts.idle_s.is_some() || opts.freq.is_some() {
        txn.set_access(db, key, opts.idle_s, opts.freq);
    }
    Ok(Frame::ok())
}
