//! CLUSTER, READONLY, READWRITE and ASKING. durakv has no cluster mode, so
//! they answer as a Redis started with `cluster-enabled no` does: the
//! subcommand's name and arity are checked, then every one is refused.
//! Client libraries probe with them to tell a cluster from a single server,
//! and COMMAND lists them.
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, NO_KEYS};
use bytes::Bytes;
use durakv_protocol::Frame;

use super::subcommands::*;

const DISABLED: &str = "ERR This instance has cluster support disabled";

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec(
            "cluster",
            -2,
            0,
            NO_KEYS,
            Handler::Conn(cluster),
            "cluster",
            "Parent of the cluster subcommands; all are refused without cluster mode.",
        ),
        spec(
            "readonly",
            1,
            FAST | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(disabled),
            "cluster",
            "Would let a cluster replica serve reads; refused without cluster mode.",
        ),
        spec(
            "readwrite",
            1,
            FAST | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(disabled),
            "cluster",
            "Would end READONLY on a cluster replica; refused without cluster mode.",
        ),
        spec(
            "asking",
            1,
            FAST,
            NO_KEYS,
            Handler::Conn(disabled),
            "cluster",
            "Flags the next command as an ASK redirect; refused without cluster mode.",
        ),
    ]
}

// Redis's flags: scripts may call CLUSTER's subcommands (but RESET), and
// none but HELP answers while loading.
const ADMIN_SUB: u32 = ADMIN | STALE;
const INFO_SUB: u32 = STALE;

pub(super) const CLUSTER_SUBS: &[SubSpec] = &[
    sub(
        "addslots",
        -3,
        ADMIN_SUB,
        "Makes this node the owner of the listed hash slots.",
    ),
    sub(
        "addslotsrange",
        -4,
        ADMIN_SUB,
        "Makes this node the owner of hash slot ranges.",
    ),
    sub(
        "bumpepoch",
        2,
        ADMIN_SUB,
        "Raises this node's config epoch.",
    ),
    sub(
        "count-failure-reports",
        3,
        ADMIN_SUB,
        "Counts the failure reports other nodes hold about a node.",
    ),
    sub(
        "countkeysinslot",
        3,
        INFO_SUB,
        "Counts the keys hashing to one slot.",
    ),
    sub(
        "delslots",
        -3,
        ADMIN_SUB,
        "Takes hash slots away from this node.",
    ),
    sub(
        "delslotsrange",
        -4,
        ADMIN_SUB,
        "Takes ranges of hash slots away from this node.",
    ),
    sub(
        "failover",
        -2,
        ADMIN_SUB,
        "Has a replica take over from its primary by hand.",
    ),
    sub(
        "flushslots",
        2,
        ADMIN_SUB,
        "Drops all of this node's slots.",
    ),
    sub(
        "forget",
        3,
        ADMIN_SUB,
        "Drops a node from this node's peer list.",
    ),
    sub(
        "getkeysinslot",
        4,
        INFO_SUB,
        "Names keys hashing to one slot.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each CLUSTER subcommand.",
    ),
    sub(
        "info",
        2,
        INFO_SUB,
        "Reports the cluster's state as this node sees it.",
    ),
    sub("keyslot", 3, INFO_SUB, "Computes a key's hash slot."),
    sub(
        "links",
        2,
        INFO_SUB,
        "Describes this node's links with its peers.",
    ),
    sub(
        "meet",
        -4,
        ADMIN_SUB,
        "Introduces this node to another so they join up.",
    ),
    sub(
        "myid",
        2,
        INFO_SUB,
        "Identifies this node by its 40-character ID.",
    ),
    sub(
        "nodes",
        2,
        INFO_SUB,
        "Prints this node's view of the cluster's members.",
    ),
    sub(
        "replicas",
        3,
        ADMIN_SUB,
        "Names the replicas of a given primary.",
    ),
    sub(
        "replicate",
        3,
        ADMIN_SUB,
        "Makes this node a replica of a given primary.",
    ),
    sub(
        "reset",
        -2,
        ADMIN | STALE | NOSCRIPT,
        "Clears this node's cluster state.",
    ),
    sub(
        "saveconfig",
        2,
        ADMIN_SUB,
        "Writes this node's cluster state file.",
    ),
    sub(
        "set-config-epoch",
        3,
        ADMIN_SUB,
        "Gives a fresh node its config epoch.",
    ),
    sub(
        "setslot",
        -4,
        ADMIN_SUB,
        "Changes a slot's owner or migration state.",
    ),
    sub(
        "shards",
        2,
        INFO_SUB,
        "Describes each shard's slots and nodes.",
    ),
    sub("slaves", 3, ADMIN_SUB, "Old name for CLUSTER REPLICAS."),
    sub(
        "slots",
        2,
        INFO_SUB,
        "Maps slot ranges to the nodes serving them.",
    ),
];

fn cluster(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("cluster", args)?;
    note_subcommand(ctx, "cluster", s);
    Err(Frame::error(DISABLED))
}

fn disabled(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    Err(Frame::error(DISABLED))
}
