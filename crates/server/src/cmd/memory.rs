//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE.
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply};
use crate::errors;
use crate::util::is;
use bytes::Bytes;
use durakv_engine::txn::Txn;
use durakv_engine::value::parse_i64;
use durakv_protocol::Frame;

use super::info::KeyCounts;
use super::subcommands::*;

pub fn commands() -> Vec<CommandSpec> {
    vec![spec(
        "memory",
        -2,
        READONLY,
        Keys::Custom(memory_keys),
        Handler::Data(memory),
        "server",
        "A container for memory diagnostics commands.",
    )]
}

pub(super) const MEMORY_SUBS: &[SubSpec] = &[
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

fn memory(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("memory", args)?;
    note_subcommand(ctx, "memory", s);
    match s.name {
        "usage" => {
            match args.len() {
                3 => {}
                5 if is(&args[3], "samples") => {
                    if parse_i64(&args[4]).is_none_or(|n| n < 0) {
                        return Err(errors::err(errors::NOT_INTEGER));
                    }
                }
                _ => return Err(errors::err(errors::SYNTAX)),
            }
            let db = ctx.db();
            match txn.get(db, &args[2]) {
                Some(e) => Ok(Frame::Integer(
                    durakv_engine::db::key_memory_bytes(&args[2], &e.value) as i64,
                )),
                None => Ok(Frame::Null),
            }
        }
        "stats" => {
            // keys.count counts keys: it waits for the writes it counts.
            txn.depend_on(ctx.shared.store.keyspace.max_write_lsn());
            let used = crate::memory::used_memory_bytes();
            let ks = &ctx.shared.store.keyspace;
            // From a script, which holds every shard already.
            let keys = if txn.holds_all() {
                KeyCounts::held(ks, txn)
            } else {
                KeyCounts::locked(ks)
            }
            .keys();
            Ok(Frame::Map(vec![
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
            ]))
        }
        "doctor" => Ok(Frame::Verbatim(Bytes::from_static(
            b"durakv measures memory as the process's resident set size; see INFO memory.\n",
        ))),
        "malloc-stats" => Ok(Frame::Verbatim(Bytes::from_static(
            b"Stats not supported for the current allocator\n",
        ))),
        "purge" => Ok(Frame::ok()),
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
