//! Container commands (CLIENT, CONFIG, ...) declare their subcommands in
//! [`SubSpec`] tables. One table checks a subcommand's arity, describes it
//! to COMMAND INFO / DOCS / LIST (as `client|list`, the name redis-cli's
//! help expects) and names it in CLIENT LIST's `cmd=` field, so the three
//! cannot disagree.
use crate::command::{Ctx, Reply};
use crate::errors;
use crate::util::is;
use bytes::Bytes;
use durakv_protocol::Frame;

/// One subcommand of a container command, as `COMMAND INFO` reports it.
pub struct SubSpec {
    pub name: &'static str,
    /// Redis arity, counting the container and the subcommand name.
    pub arity: i32,
    pub flags: u32,
    pub summary: &'static str,
}

pub(super) const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    summary: &'static str,
) -> SubSpec {
    SubSpec {
        name,
        arity,
        flags,
        summary,
    }
}

/// The subcommand table of a container command, if it is one of ours.
pub fn subcommands_of(container: &str) -> &'static [SubSpec] {
    match container {
        "acl" => super::acl::ACL_SUBS,
        "client" => super::client::CLIENT_SUBS,
        "cluster" => super::cluster::CLUSTER_SUBS,
        "command" => super::command_docs::COMMAND_SUBS,
        "config" => super::config::CONFIG_SUBS,
        "function" => super::functions::FUNCTION_SUBS,
        "latency" => super::diagnostics::LATENCY_SUBS,
        "slowlog" => super::diagnostics::SLOWLOG_SUBS,
        "memory" => super::memory::MEMORY_SUBS,
        "module" => super::module::MODULE_SUBS,
        "object" => super::keys::OBJECT_SUBS,
        "pubsub" => super::pubsub::PUBSUB_SUBS,
        "script" => super::scripting::SCRIPT_SUBS,
        "xgroup" => super::stream_groups::XGROUP_SUBS,
        "xinfo" => super::stream_info::XINFO_SUBS,
        _ => &[],
    }
}

/// A command's flags with those of the subcommand `args` names, if it is
/// a container: Redis checks CLIENT LIST's flags, not CLIENT's.
pub fn flags_of(spec: &crate::command::CommandSpec, args: &[Bytes]) -> u32 {
    let sub = args
        .get(1)
        .and_then(|a| subcommands_of(spec.name).iter().find(|s| is(a, s.name)));
    spec.flags | sub.map_or(0, |s| s.flags)
}

pub(super) fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = argc as i32;
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

/// Resolves `args[1]` in `container`'s table and checks its arity.
pub(super) fn find_sub(container: &str, args: &[Bytes]) -> Result<&'static SubSpec, Frame> {
    let table = subcommands_of(container);
    let s = table
        .iter()
        .find(|s| is(&args[1], s.name))
        .ok_or_else(|| errors::unknown_subcommand(&args[1], container))?;
    if !arity_ok(s.arity, args.len()) {
        return Err(errors::wrong_args(&format!("{container}|{}", s.name)));
    }
    Ok(s)
}

/// What Redis checks of a subcommand before it runs or queues the command
/// (`processCommand`): that the container knows it and its arity. So
/// `OBJECT ENCODING a b` inside MULTI is refused, and fails the EXEC, at
/// once rather than when EXEC runs it.
pub fn check_subcommand(container: &str, args: &[Bytes]) -> Result<(), Frame> {
    if args.len() < 2 || subcommands_of(container).is_empty() {
        return Ok(());
    }
    find_sub(container, args).map(|_| ())
}

/// Redis reports `client|list`, not `client`, as a connection's last command.
pub(super) fn note_subcommand(ctx: &mut Ctx<'_>, container: &str, s: &SubSpec) {
    ctx.client.last_cmd.clear();
    ctx.client.last_cmd.push_str(container);
    ctx.client.last_cmd.push('|');
    ctx.client.last_cmd.push_str(s.name);
}

/// A HELP reply: status lines, as Redis sends them.
pub(super) fn help(container: &str, lines: &[&str]) -> Reply {
    let mut out = vec![Frame::Simple(Bytes::from(format!(
        "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        container.to_ascii_uppercase()
    )))];
    for l in lines
        .iter()
        .chain(["HELP", "    Show this list of subcommands."].iter())
    {
        out.push(Frame::Simple(Bytes::copy_from_slice(l.as_bytes())));
    }
    Ok(Frame::Array(out))
}

pub(super) fn status(s: impl Into<String>) -> Frame {
    Frame::Simple(Bytes::from(s.into()))
}

pub(super) fn bulk(s: &str) -> Frame {
    Frame::bulk_from_str(s)
}

pub(super) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommand_tables_have_help_and_valid_arity() {
        for c in [
            "client", "cluster", "command", "config", "latency", "slowlog", "memory", "pubsub",
            "script",
        ] {
            let t = subcommands_of(c);
            assert!(t.iter().any(|s| s.name == "help"), "{c}");
            assert!(t.iter().all(|s| s.arity.abs() >= 2), "{c}");
        }
    }
}
