//! LATENCY and SLOWLOG.
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use crate::errors;
use bytes::Bytes;
use durakv_engine::value::parse_i64;
use durakv_protocol::Frame;

use super::subcommands::*;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec(
            "latency",
            -2,
            ADMIN | NOSCRIPT | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(latency),
            "server",
            "A container for latency diagnostics commands.",
        ),
        spec(
            "slowlog",
            -2,
            ADMIN | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(slowlog),
            "server",
            "A container for slow log commands.",
        ),
    ]
}

pub(super) const LATENCY_SUBS: &[SubSpec] = &[
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

pub(super) const SLOWLOG_SUBS: &[SubSpec] = &[
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

// ---------------------------------------------------------------------------
// LATENCY, SLOWLOG: neither is recorded yet, so both report empty.
// ---------------------------------------------------------------------------

fn latency(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("latency", args)?;
    note_subcommand(ctx, "latency", s);
    match s.name {
        "latest" | "history" => Ok(Frame::Array(Vec::new())),
        "reset" => Ok(Frame::Integer(0)),
        "graph" => Err(Frame::error(format!(
            "ERR No samples available for event '{}'",
            lossy(&args[2])
        ))),
        "doctor" => Ok(Frame::Verbatim(Bytes::from_static(
            b"durakv does not record latency events yet, so there is nothing to analyse.\n",
        ))),
        "histogram" => Ok(Frame::Map(Vec::new())),
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

fn slowlog(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("slowlog", args)?;
    note_subcommand(ctx, "slowlog", s);
    match s.name {
        "get" => {
            if args.len() > 3 {
                return Err(errors::err(errors::SYNTAX));
            }
            if args.len() == 3 {
                match parse_i64(&args[2]) {
                    Some(n) if n >= -1 => {}
                    _ => {
                        return Err(Frame::error(
                            "ERR count should be greater than or equal to -1",
                        ))
                    }
                }
            }
            Ok(Frame::Array(Vec::new()))
        }
        "len" => Ok(Frame::Integer(0)),
        "reset" => Ok(Frame::ok()),
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
