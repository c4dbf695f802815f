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
            "A container for Redis Cluster commands.",
        ),
        spec(
            "readonly",
            1,
            FAST | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(disabled),
            "cluster",
            "Enables read-only queries for a connection to a Redis Cluster replica node.",
        ),
        spec(
            "readwrite",
            1,
            FAST | LOADING | STALE,
            NO_KEYS,
            Handler::Conn(disabled),
            "cluster",
            "Enables read-write queries for a connection to a Redis Cluster replica node.",
        ),
        spec(
            "asking",
            1,
            FAST,
            NO_KEYS,
            Handler::Conn(disabled),
            "cluster",
            "Signals that a cluster client is following an -ASK redirect.",
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
        "Assigns new hash slots to a node.",
    ),
    sub(
        "addslotsrange",
        -4,
        ADMIN_SUB,
        "Assigns new hash slot ranges to a node.",
    ),
    sub(
        "bumpepoch",
        2,
        ADMIN_SUB,
        "Advances the cluster config epoch.",
    ),
    sub(
        "count-failure-reports",
        3,
        ADMIN_SUB,
        "Returns the number of active failure reports active for a node.",
    ),
    sub(
        "countkeysinslot",
        3,
        INFO_SUB,
        "Returns the number of keys in a hash slot.",
    ),
    sub(
        "delslots",
        -3,
        ADMIN_SUB,
        "Sets hash slots as unbound for a node.",
    ),
    sub(
        "delslotsrange",
        -4,
        ADMIN_SUB,
        "Sets hash slot ranges as unbound for a node.",
    ),
    sub(
        "failover",
        -2,
        ADMIN_SUB,
        "Forces a replica to perform a manual failover of its master.",
    ),
    sub(
        "flushslots",
        2,
        ADMIN_SUB,
        "Deletes all slots information from a node.",
    ),
    sub(
        "forget",
        3,
        ADMIN_SUB,
        "Removes a node from the nodes table.",
    ),
    sub(
        "getkeysinslot",
        4,
        INFO_SUB,
        "Returns the key names in a hash slot.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Returns helpful text about the different subcommands.",
    ),
    sub(
        "info",
        2,
        INFO_SUB,
        "Returns information about the state of a node.",
    ),
    sub("keyslot", 3, INFO_SUB, "Returns the hash slot for a key."),
    sub(
        "links",
        2,
        INFO_SUB,
        "Returns a list of all TCP links to and from peer nodes.",
    ),
    sub(
        "meet",
        -4,
        ADMIN_SUB,
        "Forces a node to handshake with another node.",
    ),
    sub("myid", 2, INFO_SUB, "Returns the ID of a node."),
    sub(
        "nodes",
        2,
        INFO_SUB,
        "Returns the cluster configuration for a node.",
    ),
    sub(
        "replicas",
        3,
        ADMIN_SUB,
        "Lists the replica nodes of a master node.",
    ),
    sub(
        "replicate",
        3,
        ADMIN_SUB,
        "Configure a node as replica of a master node.",
    ),
    sub("reset", -2, ADMIN | STALE | NOSCRIPT, "Resets a node."),
    sub(
        "saveconfig",
        2,
        ADMIN_SUB,
        "Forces a node to save the cluster configuration to disk.",
    ),
    sub(
        "set-config-epoch",
        3,
        ADMIN_SUB,
        "Sets the configuration epoch for a new node.",
    ),
    sub("setslot", -4, ADMIN_SUB, "Binds a hash slot to a node."),
    sub(
        "shards",
        2,
        INFO_SUB,
        "Returns the mapping of cluster slots to shards.",
    ),
    sub(
        "slaves",
        3,
        ADMIN_SUB,
        "Lists the replica nodes of a master node.",
    ),
    sub(
        "slots",
        2,
        INFO_SUB,
        "Returns the mapping of cluster slots to nodes.",
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
