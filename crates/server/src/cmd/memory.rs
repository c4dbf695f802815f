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
use crate::memory_breakdown::Breakdown;

pub fn commands() -> Vec<CommandSpec> {
    vec![spec(
        "memory",
        -2,
        READONLY,
        Keys::Custom(memory_keys),
        Handler::Data(memory),
        "server",
        "Parent of the subcommands that report memory use.",
    )]
}

pub(super) const MEMORY_SUBS: &[SubSpec] = &[
    sub(
        "usage",
        -3,
        READONLY,
        "Gives an estimate of the bytes a key and its value occupy.",
    ),
    sub("stats", 2, 0, "Breaks down the server's memory use."),
    sub("doctor", 2, 0, "Explains any memory problems it finds."),
    sub(
        "malloc-stats",
        2,
        0,
        "Prints allocator statistics, if it has any.",
    ),
    sub(
        "purge",
        2,
        0,
        "Answers OK; durakv's allocator has nothing to purge.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each MEMORY subcommand.",
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
            let ks = &ctx.shared.store.keyspace;
            // From a script, which holds every shard already.
            let counts = if txn.holds_all() {
                KeyCounts::held(ks, txn)
            } else {
                KeyCounts::locked(ks)
            };
            let b = Breakdown::take(ctx.shared, counts.tables());
            let int = |n: u64| Frame::Integer(n as i64);
            let mut m = vec![
                (bulk("peak.allocated"), int(b.peak)),
                (bulk("total.allocated"), int(b.used)),
                (bulk("startup.allocated"), int(b.startup)),
                (bulk("replication.backlog"), int(b.backlog)),
                (bulk("clients.slaves"), int(b.clients_replicas)),
                (bulk("clients.normal"), int(b.clients_normal)),
                (bulk("cluster.links"), int(0)),
                (bulk("aof.buffer"), int(0)),
                (bulk("lua.caches"), int(b.scripts.scripts_eval as u64)),
                (bulk("functions.caches"), int(b.scripts.functions as u64)),
            ];
            for d in &b.dbs {
                m.push((
                    Frame::Bulk(Bytes::from(format!("db.{}", d.db))),
                    Frame::Map(vec![
                        (bulk("overhead.hashtable.main"), int(d.main)),
                        (bulk("overhead.hashtable.expires"), int(d.expires)),
                        (bulk("overhead.hashtable.slot-to-keys"), int(0)),
                    ]),
                ));
            }
            let (af, afb) = b.allocator_frag();
            let (ar, arb) = b.allocator_rss();
            let (ro, rob) = b.rss_overhead();
            let (f, fb) = b.fragmentation();
            m.extend([
                (bulk("overhead.total"), int(b.overhead())),
                (bulk("keys.count"), int(b.keys() as u64)),
                (bulk("keys.bytes-per-key"), int(b.bytes_per_key())),
                (bulk("dataset.bytes"), int(b.dataset())),
                (
                    bulk("dataset.percentage"),
                    Frame::Double(b.dataset_percentage()),
                ),
                (bulk("peak.percentage"), Frame::Double(b.peak_percentage())),
                (bulk("allocator.allocated"), int(b.used)),
                (bulk("allocator.active"), int(b.allocator.active)),
                (bulk("allocator.resident"), int(b.allocator.resident)),
                (bulk("allocator-fragmentation.ratio"), Frame::Double(af)),
                (bulk("allocator-fragmentation.bytes"), Frame::Integer(afb)),
                (bulk("allocator-rss.ratio"), Frame::Double(ar)),
                (bulk("allocator-rss.bytes"), Frame::Integer(arb)),
                (bulk("rss-overhead.ratio"), Frame::Double(ro)),
                (bulk("rss-overhead.bytes"), Frame::Integer(rob)),
                (bulk("fragmentation"), Frame::Double(f)),
                (bulk("fragmentation.bytes"), Frame::Integer(fb)),
            ]);
            Ok(Frame::Map(m))
        }
        "doctor" => {
            // The figures it judges need no per-database detail.
            let b = Breakdown::take(ctx.shared, Vec::new());
            Ok(Frame::Verbatim(Bytes::from(
                crate::memory_breakdown::doctor(&b),
            )))
        }
        "malloc-stats" => Ok(Frame::Verbatim(Bytes::from_static(
            b"Stats not supported for the current allocator\n",
        ))),
        "purge" => Ok(Frame::ok()),
        _ => help(
            "memory",
            &[
                "DOCTOR",
                "    Look over the memory figures and explain, in prose, any trouble found.",
                "MALLOC-STATS",
                "    Meant for allocator statistics; durakv's allocator has none to give,",
                "    so the reply is a one-line note saying so.",
                "PURGE",
                "    Does nothing and answers OK: durakv has no allocator pages to release.",
                "STATS",
                "    Break the server's memory use down: clients, scripts, each database's",
                "    tables, the dataset, fragmentation.",
                "USAGE <key> [SAMPLES <count>]",
                "    Estimate the bytes <key> and its value take up, overhead included.",
                "    SAMPLES is checked but does not change the estimate.",
            ],
        ),
    }
}
