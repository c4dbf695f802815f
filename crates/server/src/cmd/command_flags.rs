//! The flags COMMAND INFO reports that durakv's dispatch has no use for:
//! Redis 7.0's `pubsub`, `allow_busy`, `skip_slowlog`, `asking`,
//! `no_mandatory_keys` and `no_async_loading`, for each command and
//! subcommand Redis sets them on.
//!
//! They are kept out of the command tables so no check can come to depend
//! on them by accident: what durakv does follows its own rules (which
//! commands may run during a busy script is
//! [`super::scripting::allowed_when_busy`]; EXEC stays out of the slow log
//! in dispatch). Clients read them, though: redis-py's CommandsParser
//! finds the channels of PUBLISH/SUBSCRIBE through `pubsub`.
use crate::command::flags::*;

/// The report-only flags of `name`, a command or `container|sub`,
/// lowercase.
pub fn informational_flags(name: &str) -> u32 {
    match name {
        "publish"
        | "spublish"
        | "subscribe"
        | "psubscribe"
        | "ssubscribe"
        | "unsubscribe"
        | "punsubscribe"
        | "sunsubscribe"
        | "pubsub|channels"
        | "pubsub|numpat"
        | "pubsub|numsub"
        | "pubsub|shardchannels"
        | "pubsub|shardnumsub" => PUBSUB,
        "auth" | "hello" | "quit" | "reset" | "multi" | "discard" | "watch" | "unwatch"
        | "replconf" | "shutdown" | "script|kill" | "function|kill" | "function|stats" => {
            ALLOW_BUSY
        }
        "exec" => SKIP_SLOWLOG,
        "restore-asking" => ASKING,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => NO_MANDATORY_KEYS,
        "bgsave"
        | "bgrewriteaof"
        | "save"
        | "psync"
        | "sync"
        | "replicaof"
        | "slaveof"
        | "module|load"
        | "module|loadex"
        | "module|unload"
        | "cluster|addslots"
        | "cluster|addslotsrange"
        | "cluster|bumpepoch"
        | "cluster|delslots"
        | "cluster|delslotsrange"
        | "cluster|failover"
        | "cluster|flushslots"
        | "cluster|forget"
        | "cluster|meet"
        | "cluster|replicate"
        | "cluster|saveconfig"
        | "cluster|set-config-epoch"
        | "cluster|setslot" => NO_ASYNC_LOADING,
        _ => 0,
    }
}
