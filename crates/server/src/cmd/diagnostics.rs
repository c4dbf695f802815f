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
            "Parent of the subcommands that report latency spikes.",
        ),
        spec(
            "slowlog",
            -2,
            ADMIN | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(slowlog),
            "server",
            "Parent of the subcommands that read the slow command log.",
        ),
    ]
}

pub(super) const LATENCY_SUBS: &[SubSpec] = &[
    sub(
        "latest",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Gives each event's newest and worst spike.",
    ),
    sub(
        "history",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Lists one event's recorded spikes and their times.",
    ),
    sub(
        "reset",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Forgets the spikes of some or all events.",
    ),
    sub(
        "graph",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Draws one event's spikes as ASCII art.",
    ),
    sub(
        "doctor",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Explains the recorded latency spikes in prose.",
    ),
    sub(
        "histogram",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Gives per-command latency histograms for some or all commands.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each LATENCY subcommand.",
    ),
];

pub(super) const SLOWLOG_SUBS: &[SubSpec] = &[
    sub(
        "get",
        -2,
        ADMIN | LOADING | STALE,
        "Shows the most recent slow commands, ten unless told otherwise.",
    ),
    sub(
        "len",
        2,
        ADMIN | LOADING | STALE,
        "Gives how many commands the slow log holds.",
    ),
    sub("reset", 2, ADMIN | LOADING | STALE, "Empties the slow log."),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each SLOWLOG subcommand.",
    ),
];

// ---------------------------------------------------------------------------
// LATENCY (crate::latency, and the histograms in crate::cmdstats)
// ---------------------------------------------------------------------------

fn latency(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("latency", args)?;
    note_subcommand(ctx, "latency", s);
    let monitor = &ctx.shared.latency;
    match s.name {
        "latest" => Ok(Frame::Array(
            monitor
                .latest()
                .into_iter()
                .map(|(name, time, last, max)| {
                    Frame::Array(vec![
                        Frame::Bulk(Bytes::from_static(name.as_bytes())),
                        Frame::Integer(time as i64),
                        Frame::Integer(last as i64),
                        Frame::Integer(max as i64),
                    ])
                })
                .collect(),
        )),
        "history" => Ok(Frame::Array(
            monitor
                .history(&args[2])
                .into_iter()
                .map(|(time, ms)| {
                    Frame::Array(vec![Frame::Integer(time as i64), Frame::Integer(ms as i64)])
                })
                .collect(),
        )),
        "reset" => {
            let names: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
            Ok(Frame::Integer(monitor.reset(&names) as i64))
        }
        "graph" => match monitor.graph(&args[2]) {
            Some(g) => Ok(Frame::Verbatim(Bytes::from(g))),
            None => Err(Frame::error(format!(
                "ERR No samples available for event '{}'",
                lossy(&args[2])
            ))),
        },
        "doctor" => Ok(Frame::Verbatim(Bytes::from(monitor.doctor()))),
        "histogram" => Ok(ctx.shared.cmdstats.latency_histogram(&args[2..])),
        _ => help(
            "latency",
            &[
                "DOCTOR",
                "    Explain in plain language the latency spikes recorded so far.",
                "GRAPH <event>",
                "    Draw the samples recorded for <event> as a chart made of text.",
                "HISTORY <event>",
                "    List the samples of <event> as (unix time, milliseconds) pairs.",
                "LATEST",
                "    For each event: when its last spike happened, how long it took, and",
                "    the longest one seen.",
                "RESET [<event> ...]",
                "    Forget the samples of the named events, or of every event if none is",
                "    named. Replies with how many events were cleared.",
                "HISTOGRAM [COMMAND ...]",
                "    Per-command latency histograms with cumulative bucket counts, for the",
                "    commands named or, with no names, for every command that has run.",
            ],
        ),
    }
}

// ---------------------------------------------------------------------------
// SLOWLOG (crate::slowlog)
// ---------------------------------------------------------------------------

/// Entries SLOWLOG GET returns without a count.
const SLOWLOG_GET_DEFAULT: usize = 10;

fn slowlog(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("slowlog", args)?;
    note_subcommand(ctx, "slowlog", s);
    let log = &ctx.shared.slowlog;
    match s.name {
        "get" => {
            if args.len() > 3 {
                return Err(errors::err(errors::SYNTAX));
            }
            let count = match args.get(2).map(|a| parse_i64(a)) {
                None => Some(SLOWLOG_GET_DEFAULT),
                Some(Some(-1)) => None,
                Some(Some(n)) if n >= 0 => Some(n as usize),
                Some(_) => {
                    return Err(Frame::error(
                        "ERR count should be greater than or equal to -1",
                    ))
                }
            };
            Ok(log.get(count))
        }
        "len" => Ok(Frame::Integer(log.len() as i64)),
        "reset" => {
            log.reset();
            Ok(Frame::ok())
        }
        _ => help(
            "slowlog",
            &[
                "GET [<count>]",
                "    Show the newest <count> slow commands, newest first (10 when no count",
                "    is given, all of them for -1). Each entry holds an ID, the unix time,",
                "    the run time in microseconds, the arguments, and the client's address",
                "    and name.",
                "LEN",
                "    Give how many entries the slow log holds now.",
                "RESET",
                "    Empty the slow log.",
            ],
        ),
    }
}
