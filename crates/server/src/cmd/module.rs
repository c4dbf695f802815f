//! MODULE: durakv loads no Redis modules (they are C code written against
//! Redis's internals), but tools and client libraries ask MODULE LIST to
//! learn which are there; they get the empty list. LOAD, LOADEX and UNLOAD
//! are refused as Redis refuses them without `enable-module-command`, and
//! with it as Redis refuses a module it cannot load.
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use bytes::Bytes;
use durakv_protocol::Frame;

use super::subcommands::*;

pub fn commands() -> Vec<CommandSpec> {
    vec![spec(
        "module",
        -2,
        0,
        NO_KEYS,
        Handler::Conn(module),
        "server",
        "Parent of the module subcommands; durakv loads no modules.",
    )]
}

const ADMIN_SUB: u32 = ADMIN | NOSCRIPT;

pub(super) const MODULE_SUBS: &[SubSpec] = &[
    sub("list", 2, ADMIN_SUB, "Lists loaded modules (none)."),
    sub(
        "load",
        -3,
        ADMIN_SUB,
        "Refused: durakv cannot load modules.",
    ),
    sub(
        "loadex",
        -3,
        ADMIN_SUB,
        "Refused, like MODULE LOAD: durakv cannot load modules.",
    ),
    sub(
        "unload",
        3,
        ADMIN_SUB,
        "Refused: there is never a module to unload.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each MODULE subcommand.",
    ),
];

fn module(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("module", args)?;
    note_subcommand(ctx, "module", s);
    let protected = matches!(s.name, "load" | "loadex" | "unload");
    if protected && !super::protected_allowed(ctx, "enable-module-command") {
        return Err(super::not_allowed("MODULE", "enable-module-command"));
    }
    match s.name {
        "list" => Ok(Frame::Array(Vec::new())),
        "load" | "loadex" => {
            tracing::warn!(
                "MODULE {} {}: durakv does not load Redis modules",
                s.name.to_ascii_uppercase(),
                lossy(&args[2])
            );
            Err(Frame::error(
                "ERR Error loading the extension. Please check the server logs.",
            ))
        }
        "unload" => Err(Frame::error(
            "ERR Error unloading module: no such module with that name",
        )),
        _ => help(
            "module",
            &[
                "LIST",
                "    Always an empty list: durakv runs no modules.",
                "LOAD <path> [<arg> ...]",
                "    Always fails: durakv cannot load Redis modules.",
                "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
                "    Fails the same way as LOAD, whatever configs or arguments are given.",
                "UNLOAD <name>",
                "    Always fails, as no module is ever loaded to be removed.",
            ],
        ),
    }
}
