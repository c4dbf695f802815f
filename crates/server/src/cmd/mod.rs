//! Command implementations, one module per command family. Every handler
//! has the same shape: parse the arguments, read or apply to the keyspace
//! through the transaction, and return a [`Reply`](crate::command::Reply),
//! whose `Err` arm lets parsing and WRONGTYPE checks use `?`. Each module
//! exports `commands()`, its part of the command table. The helpers below
//! are the ones several families share.

use crate::command::{CommandSpec, Ctx};
use crate::errors;
use crate::util::arg_i64;
use bytes::Bytes;
use durakv_engine::mutation::{KeyOp, Mutation};
use durakv_engine::txn::Txn;
use durakv_engine::value::parse_i64;
use durakv_engine::value::Value;
use durakv_protocol::Frame;
use durakv_protocol::Protocol;
use rand::Rng;

/// The value at `key` as the type `pick` accepts (e.g. `Value::as_list`):
/// `Ok(None)` when the key is missing, WRONGTYPE when it holds another type.
/// Reads go through `Txn::get`, so the reply's durability dependency is kept.
pub(crate) fn read_as<'t, T: ?Sized>(
    txn: &'t mut Txn<'_>,
    db: usize,
    key: &[u8],
    pick: fn(&Value) -> Option<&T>,
) -> Result<Option<&'t T>, Frame> {
    match txn.get(db, key) {
        None => Ok(None),
        Some(e) => pick(&e.value)
            .map(Some)
            .ok_or_else(|| crate::errors::err(crate::errors::WRONGTYPE)),
    }
}

pub mod acl;
pub mod bitmaps;
pub mod blocking;
pub mod client;
pub mod cluster;
mod command_complexity_table;
mod command_doc_facts;
pub mod command_docs;
pub mod command_flags;
mod command_history_table;
mod command_syntax;
mod command_syntax_table;
pub mod command_tips;
pub mod config;
pub mod connection;
pub mod debug;
pub mod diagnostics;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod info;
pub mod key_flags;
pub mod key_specs;
pub mod keys;
pub mod lists;
pub mod memory;
pub mod migrate;
pub mod module;
pub mod mpop;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scan;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod stream_groups;
pub mod stream_info;
pub mod stream_read;
pub mod streams;
pub mod strings;
pub mod subcommands;
pub mod tracking;
pub mod transaction;
pub mod zset_algebra;
pub mod zsets;

pub fn all_commands() -> Vec<CommandSpec> {
    let mut v = Vec::new();
    v.extend(connection::commands());
    v.extend(acl::commands());
    v.extend(module::commands());
    v.extend(transaction::commands());
    v.extend(client::commands());
    v.extend(command_docs::commands());
    v.extend(config::commands());
    v.extend(replication::commands());
    v.extend(info::commands());
    v.extend(server::commands());
    v.extend(persistence::commands());
    v.extend(diagnostics::commands());
    v.extend(cluster::commands());
    v.extend(memory::commands());
    v.extend(keys::commands());
    v.extend(strings::commands());
    v.extend(bitmaps::commands());
    v.extend(hashes::commands());
    v.extend(hyperloglog::commands());
    v.extend(geo::commands());
    v.extend(zsets::commands());
    v.extend(zset_algebra::commands());
    v.extend(lists::commands());
    v.extend(sets::commands());
    v.extend(sort::commands());
    v.extend(scripting::commands());
    v.extend(pubsub::commands());
    v.extend(blocking::commands());
    v.extend(functions::commands());
    v.extend(dump::commands());
    v.extend(debug::commands());
    v.extend(migrate::commands());
    v.extend(streams::commands());
    v.extend(stream_read::commands());
    v.extend(stream_groups::commands());
    v.extend(stream_info::commands());
    v
}

// ---------------------------------------------------------------------------
// Helpers the command families share.

/// Whether a command Redis protects behind `directive` (DEBUG behind
/// `enable-debug-command`, MODULE LOAD behind `enable-module-command`) may
/// run for this client: "yes", or "local" from loopback or the Unix socket.
pub(crate) fn protected_allowed(ctx: &Ctx<'_>, directive: &str) -> bool {
    let setting = ctx.shared.config.read().get(directive).unwrap_or_default();
    match setting.as_str() {
        "yes" => true,
        "local" => ctx.client.handle.addr.is_local(),
        _ => false,
    }
}

/// Redis's refusal of a protected command.
pub(crate) fn not_allowed(command: &str, directive: &str) -> Frame {
    Frame::error(format!(
        "ERR {command} command not allowed. If the {directive} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
    ))
}

pub(crate) fn wrongtype() -> Frame {
    errors::err(errors::WRONGTYPE)
}

pub(crate) fn syntax() -> Frame {
    errors::err(errors::SYNTAX)
}

/// Applies `op` to `key` (see [`super::keys::apply`]).
pub(crate) fn apply(txn: &mut Txn<'_>, db: usize, key: &Bytes, op: KeyOp) -> Result<(), Frame> {
    keys::apply(txn, Mutation::key(db as u32, key.clone(), op))
}

/// Whether a TTL ending at `at_ms` (0: none) has run out, so that the
/// command deletes the key instead of setting it. Never for the primary's
/// stream, as on Redis's replicas: the primary set a time that was still
/// ahead of it, and deletes the key itself when it passes (a replica that
/// applied it late deleted a key its primary went on writing to).
pub(crate) fn ttl_already_over(ctx: &Ctx<'_>, txn: &Txn<'_>, at_ms: u64) -> bool {
    at_ms != 0 && at_ms <= txn.now_ms && !ctx.client.is_master
}

/// The longest string a command may build (`proto-max-bulk-len`). None
/// for the primary's stream or an imported append-only file, as in Redis:
/// the primary accepted the write under its own limit, and a replica that
/// refused it would diverge from it for good.
pub(crate) fn string_limit(ctx: &Ctx<'_>) -> u64 {
    if ctx.client.is_master {
        u64::MAX
    } else {
        ctx.shared.config.read().proto_max_bulk_len
    }
}

/// The compact-encoding thresholds as configured now (OBJECT ENCODING,
/// and whether a HSCAN/SSCAN/ZSCAN answers in one call).
pub(crate) fn encoding_limits(ctx: &Ctx<'_>) -> durakv_engine::value::EncodingLimits {
    ctx.shared.config.read().encodings
}

pub(crate) fn resp3(ctx: &Ctx<'_>) -> bool {
    ctx.client.protocol == Protocol::Resp3
}

/// Field/value or member/score pairs: nested two-element arrays in RESP3,
/// one flat array in RESP2 (Redis's WITHSCORES / WITHVALUES shapes).
pub(crate) fn pairs_reply(pairs: Vec<(Frame, Frame)>, resp3: bool) -> Frame {
    if resp3 {
        Frame::Array(
            pairs
                .into_iter()
                .map(|(a, b)| Frame::Array(vec![a, b]))
                .collect(),
        )
    } else {
        let mut out = Vec::with_capacity(pairs.len() * 2);
        for (a, b) in pairs {
            out.push(a);
            out.push(b);
        }
        Frame::Array(out)
    }
}

/// The count of LPOP/RPOP/SPOP/ZPOPMIN/ZPOPMAX: Redis answers a negative and
/// a non-numeric count alike.
pub(crate) fn positive_count(arg: &[u8]) -> Result<u64, Frame> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(Frame::error("ERR value is out of range, must be positive")),
    }
}

/// The count of HRANDFIELD/SRANDMEMBER/ZRANDMEMBER (negative: repeats allowed).
pub(crate) fn random_count(arg: &[u8]) -> Result<i64, Frame> {
    let n = arg_i64(arg)?;
    if n == i64::MIN {
        return Err(Frame::error(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(n)
}

/// A negative sampling count is answered with that many elements; beyond
/// this the reply would be built in memory only to exhaust it, so it is
/// refused instead (Redis would try).
const MAX_REPEATED_SAMPLES: u64 = 1 << 20;

/// A negative sampling count whose reply could not fit the client's output
/// buffer (its class's hard `client-output-buffer-limit`) is cut to just
/// past what fits: the reply then passes the limit and the connection
/// closes the client, as Redis stops building such a reply once its client
/// is to be closed. Each element's reply takes at least 4 bytes.
fn capped_by_output_limit(ctx: &Ctx<'_>, count: i64) -> i64 {
    if count >= 0 {
        return count;
    }
    let class = crate::connection::output_class(ctx.client);
    let hard = ctx.shared.hot.output_limit(class).hard_bytes;
    let past = (hard / 4).saturating_add(1);
    if hard == 0 || count.unsigned_abs() <= past {
        return count;
    }
    -i64::try_from(past).unwrap_or(i64::MAX)
}

/// Positions to sample from a collection of `len` elements: distinct ones
/// for `count >= 0` (all of them when `count >= len`), `|count|` independent
/// draws otherwise, as many as the client's output limit lets through
/// ([`capped_by_output_limit`]).
pub(crate) fn random_positions(ctx: &Ctx<'_>, len: usize, count: i64) -> Result<Vec<usize>, Frame> {
    let count = capped_by_output_limit(ctx, count);
    let mut rng = rand::thread_rng();
    if count >= 0 {
        let n = count as u64;
        if n >= len as u64 {
            return Ok((0..len).collect());
        }
        return Ok(rand::seq::index::sample(&mut rng, len, n as usize).into_vec());
    }
    let n = count.unsigned_abs();
    if n > MAX_REPEATED_SAMPLES {
        return Err(Frame::error("ERR value is out of range"));
    }
    if len == 0 {
        return Ok(Vec::new());
    }
    Ok((0..n).map(|_| rng.gen_range(0..len)).collect())
}

pub(crate) fn random_position(len: usize) -> Option<usize> {
    (len > 0).then(|| rand::thread_rng().gen_range(0..len))
}
