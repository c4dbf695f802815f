//! The tips COMMAND INFO reports for each command and subcommand.
//!
//! Cluster-aware clients read the `request_policy` / `response_policy`
//! tips to decide where to send a command and how to merge the replies,
//! and test suites (go-redis's) compare the lists, so these are Redis
//! 7.0's exactly, in its order. The two `nondeterministic_*` tips are
//! what Redis 7 shows instead of the old `random` / `sort_for_script`
//! flags. COMMAND DOCS has no tips in 7.0.

const NONDET: &str = "nondeterministic_output";
const NONDET_ORDER: &str = "nondeterministic_output_order";
const ALL_NODES: &str = "request_policy:all_nodes";
const ALL_SHARDS: &str = "request_policy:all_shards";
const MULTI_SHARD: &str = "request_policy:multi_shard";
const SPECIAL_REQUEST: &str = "request_policy:special";
const AGG_SUM: &str = "response_policy:agg_sum";
const AGG_MIN: &str = "response_policy:agg_min";
const AGG_AND: &str = "response_policy:agg_logical_and";
const ALL_SUCCEEDED: &str = "response_policy:all_succeeded";
const ONE_SUCCEEDED: &str = "response_policy:one_succeeded";
const SPECIAL_RESPONSE: &str = "response_policy:special";

/// The tips of `name`, a command or `container|sub`, lowercase.
pub fn tips_of(name: &str) -> &'static [&'static str] {
    match name {
        "dump" | "hrandfield" | "hscan" | "lastsave" | "migrate" | "pttl" | "spop"
        | "srandmember" | "sscan" | "time" | "ttl" | "xadd" | "xautoclaim" | "xclaim"
        | "xpending" | "xtrim" | "zrandmember" | "zscan" => &[NONDET],
        "client|info" | "client|list" | "object|encoding" | "object|freq" | "object|idletime"
        | "object|refcount" | "xinfo|consumers" => &[NONDET],
        "cluster|bumpepoch" | "cluster|info" | "cluster|links" | "cluster|nodes"
        | "cluster|replicas" | "cluster|shards" | "cluster|slaves" | "cluster|slots" => &[NONDET],
        "cluster|count-failure-reports" | "cluster|getkeysinslot" => &[NONDET],
        "command" | "command|docs" | "command|info" | "command|list" | "function|list"
        | "hgetall" | "hkeys" | "hvals" | "module|list" | "sdiff" | "sinter" | "smembers"
        | "sunion" => &[NONDET_ORDER],
        "flushall" | "flushdb" | "function|delete" | "function|flush" | "function|load"
        | "function|restore" | "memory|purge" | "ping" => &[ALL_SHARDS, ALL_SUCCEEDED],
        "config|set" | "latency|reset" | "script|flush" | "script|load" | "slowlog|reset" => {
            &[ALL_NODES, ALL_SUCCEEDED]
        }
        "function|stats" | "info" | "memory|doctor" | "memory|malloc-stats" | "memory|stats" => {
            &[NONDET, ALL_SHARDS, SPECIAL_RESPONSE]
        }
        "latency|doctor" | "latency|graph" | "latency|histogram" | "latency|history"
        | "latency|latest" => &[NONDET, ALL_NODES, SPECIAL_RESPONSE],
        "del" | "exists" | "touch" | "unlink" => &[MULTI_SHARD, AGG_SUM],
        "function|kill" | "script|kill" => &[ALL_SHARDS, ONE_SUCCEEDED],
        "dbsize" => &[ALL_SHARDS, AGG_SUM],
        "keys" => &[ALL_SHARDS, NONDET_ORDER],
        "mget" => &[MULTI_SHARD],
        "mset" => &[MULTI_SHARD, ALL_SUCCEEDED],
        "msetnx" => &[MULTI_SHARD, AGG_MIN],
        "randomkey" => &[ALL_SHARDS, NONDET],
        "scan" => &[NONDET, SPECIAL_REQUEST],
        "script|exists" => &[ALL_SHARDS, AGG_AND],
        "slowlog|get" => &[ALL_NODES, NONDET],
        "slowlog|len" => &[ALL_NODES, AGG_SUM, NONDET],
        // WAITAOF is 7.2's; it has WAIT's tips there.
        "wait" | "waitaof" => &[ALL_SHARDS, AGG_MIN],
        _ => &[],
    }
}
