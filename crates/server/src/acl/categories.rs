//! Redis 7.2's ACL categories (`@read`, `@admin`, ...) for every command
//! and subcommand durakv registers, plus ACL's own.
//!
//! Redis computes a command's categories from two sources: the categories
//! its command table names explicitly, and implicit ones implied by its
//! flags (write, read, admin, pubsub, fast, blocking; `@slow` when not
//! `@fast`). [`REDIS`] holds the result of that computation for Redis 7.2,
//! so `ACL CAT` and `+@category` rules agree with Redis. Commands or
//! subcommands Redis lacks fall back to the same rules applied to durakv's
//! own flags and `COMMAND DOCS` group (see [`of`]).

use crate::command::flags;

/// Redis's categories, in the order `ACL CAT` lists them.
pub const NAMES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

// One bit per category; bit `i` is `NAMES[i]`.
pub const KEYSPACE: u32 = 1 << 0;
pub const READ: u32 = 1 << 1;
pub const WRITE: u32 = 1 << 2;
pub const SET: u32 = 1 << 3;
pub const SORTEDSET: u32 = 1 << 4;
pub const LIST: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const STRING: u32 = 1 << 7;
pub const BITMAP: u32 = 1 << 8;
pub const HYPERLOGLOG: u32 = 1 << 9;
pub const GEO: u32 = 1 << 10;
pub const STREAM: u32 = 1 << 11;
pub const PUBSUB: u32 = 1 << 12;
pub const ADMIN: u32 = 1 << 13;
pub const FAST: u32 = 1 << 14;
pub const SLOW: u32 = 1 << 15;
pub const BLOCKING: u32 = 1 << 16;
pub const DANGEROUS: u32 = 1 << 17;
pub const CONNECTION: u32 = 1 << 18;
pub const TRANSACTION: u32 = 1 << 19;
pub const SCRIPTING: u32 = 1 << 20;

/// Every category bit.
pub const ALL: u32 = (1 << NAMES.len()) - 1;

/// Bit of a category name (lower-case, without '@'), or None.
///
/// The value is the category's mask (a single bit, e.g. [`READ`]), ready to
/// be or-ed into or tested against a command's categories.
pub fn bit(name: &str) -> Option<u32> {
    NAMES.iter().position(|n| *n == name).map(|i| 1 << i)
}

/// Names of the bits set in `mask`, in NAMES order.
pub fn names(mask: u32) -> Vec<&'static str> {
    NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// Categories of command `name` (lower-case), or of its subcommand `sub`
/// (lower-case) when it is a container, as Redis assigns them; None when
/// Redis has no such command/subcommand.
///
/// `sub` is ignored when `name` is not a container in Redis (e.g. `get`),
/// and `sub: None` on a container gives the container's own categories.
pub fn redis_categories(name: &str, sub: Option<&str>) -> Option<u32> {
    if let Some(sub) = sub {
        if is_container(name) {
            return lookup(name, Some(sub));
        }
    }
    lookup(name, None)
}

/// What durakv uses: [`redis_categories`] when Redis knows the command,
/// else derived from durakv's own `flags` ([`crate::command::flags`]:
/// WRITE, READONLY, ADMIN, FAST, BLOCKING) and its `COMMAND DOCS` group
/// ("string", "hash", "list", "set", "sorted-set", "generic" (@keyspace),
/// "connection", "transactions", "pubsub", "scripting", "bitmap",
/// "hyperloglog", "geo", "stream"; others add nothing), with Redis's
/// implicit rules: write, read (not for scripting), admin + dangerous,
/// fast, blocking, and slow when not fast.
///
/// For a subcommand Redis lacks (CLIENT DURABILITY), pass the subcommand's
/// flags and the container's group.
pub fn of(name: &str, sub: Option<&str>, flags: u32, group: &str) -> u32 {
    redis_categories(name, sub).unwrap_or_else(|| derived(flags, group))
}

/// Redis's rules applied to durakv's flags and group.
fn derived(f: u32, group: &str) -> u32 {
    let mut m = match group {
        "string" => STRING,
        "hash" => HASH,
        "list" => LIST,
        "set" => SET,
        "sorted-set" | "sorted_set" | "zset" => SORTEDSET,
        "generic" => KEYSPACE,
        "connection" => CONNECTION,
        "transactions" => TRANSACTION,
        "pubsub" => PUBSUB,
        "scripting" => SCRIPTING,
        "bitmap" => BITMAP,
        "hyperloglog" => HYPERLOGLOG,
        "geo" => GEO,
        "stream" => STREAM,
        _ => 0,
    };
    if f & flags::WRITE != 0 {
        m |= WRITE;
    }
    // Scripts may write, so Redis keeps read-only scripting out of @read.
    if f & flags::READONLY != 0 && m & SCRIPTING == 0 {
        m |= READ;
    }
    if f & flags::ADMIN != 0 {
        m |= ADMIN | DANGEROUS;
    }
    if f & flags::FAST != 0 {
        m |= FAST;
    }
    if f & flags::BLOCKING != 0 {
        m |= BLOCKING;
    }
    if m & FAST == 0 {
        m |= SLOW;
    }
    m
}

/// Whether Redis lists subcommands under `name`.
fn is_container(name: &str) -> bool {
    let prefix = || name.bytes().chain(*b"|");
    let i = REDIS.partition_point(|(k, _)| k.bytes().lt(prefix()));
    REDIS
        .get(i)
        .is_some_and(|(k, _)| k.bytes().take(name.len() + 1).eq(prefix()))
}

/// The entry keyed `name` or `name|sub`, found without building the key.
fn lookup(name: &str, sub: Option<&str>) -> Option<u32> {
    let sep: &[u8] = if sub.is_some() { b"|" } else { b"" };
    let wanted = || {
        name.bytes()
            .chain(sep.iter().copied())
            .chain(sub.unwrap_or("").bytes())
    };
    REDIS
        .binary_search_by(|(k, _)| k.bytes().cmp(wanted()))
        .ok()
        .map(|i| REDIS[i].1)
}

/// Redis 7.2's final categories (explicit plus implied by flags), keyed by
/// command or `container|subcommand`, sorted by key. Covers the commands
/// durakv registers, every Redis subcommand of its containers, and ACL.
static REDIS: &[(&str, u32)] = &[
    ("acl", SLOW),
    ("acl|cat", SLOW),
    ("acl|deluser", ADMIN | SLOW | DANGEROUS),
    ("acl|dryrun", ADMIN | SLOW | DANGEROUS),
    ("acl|genpass", SLOW),
    ("acl|getuser", ADMIN | SLOW | DANGEROUS),
    ("acl|help", SLOW),
    ("acl|list", ADMIN | SLOW | DANGEROUS),
    ("acl|load", ADMIN | SLOW | DANGEROUS),
    ("acl|log", ADMIN | SLOW | DANGEROUS),
    ("acl|save", ADMIN | SLOW | DANGEROUS),
    ("acl|setuser", ADMIN | SLOW | DANGEROUS),
    ("acl|users", ADMIN | SLOW | DANGEROUS),
    ("acl|whoami", SLOW),
    ("append", WRITE | STRING | FAST),
    ("asking", FAST | CONNECTION),
    ("auth", FAST | CONNECTION),
    ("bgrewriteaof", ADMIN | SLOW | DANGEROUS),
    ("bgsave", ADMIN | SLOW | DANGEROUS),
    ("bitcount", READ | BITMAP | SLOW),
    ("bitfield", WRITE | BITMAP | SLOW),
    ("bitfield_ro", READ | BITMAP | FAST),
    ("bitop", WRITE | BITMAP | SLOW),
    ("bitpos", READ | BITMAP | SLOW),
    ("blmove", WRITE | LIST | SLOW | BLOCKING),
    ("blmpop", WRITE | LIST | SLOW | BLOCKING),
    ("blpop", WRITE | LIST | SLOW | BLOCKING),
    ("brpop", WRITE | LIST | SLOW | BLOCKING),
    ("brpoplpush", WRITE | LIST | SLOW | BLOCKING),
    ("bzmpop", WRITE | SORTEDSET | SLOW | BLOCKING),
    ("bzpopmax", WRITE | SORTEDSET | FAST | BLOCKING),
    ("bzpopmin", WRITE | SORTEDSET | FAST | BLOCKING),
    ("client", SLOW),
    ("client|caching", SLOW | CONNECTION),
    ("client|getname", SLOW | CONNECTION),
    ("client|getredir", SLOW | CONNECTION),
    ("client|help", SLOW | CONNECTION),
    ("client|id", SLOW | CONNECTION),
    ("client|info", SLOW | CONNECTION),
    ("client|kill", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|list", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|no-evict", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|no-touch", SLOW | CONNECTION),
    ("client|pause", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|reply", SLOW | CONNECTION),
    ("client|setinfo", SLOW | CONNECTION),
    ("client|setname", SLOW | CONNECTION),
    ("client|tracking", SLOW | CONNECTION),
    ("client|trackinginfo", SLOW | CONNECTION),
    ("client|unblock", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|unpause", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("cluster", SLOW),
    ("cluster|addslots", ADMIN | SLOW | DANGEROUS),
    ("cluster|addslotsrange", ADMIN | SLOW | DANGEROUS),
    ("cluster|bumpepoch", ADMIN | SLOW | DANGEROUS),
    ("cluster|count-failure-reports", ADMIN | SLOW | DANGEROUS),
    ("cluster|countkeysinslot", SLOW),
    ("cluster|delslots", ADMIN | SLOW | DANGEROUS),
    ("cluster|delslotsrange", ADMIN | SLOW | DANGEROUS),
    ("cluster|failover", ADMIN | SLOW | DANGEROUS),
    ("cluster|flushslots", ADMIN | SLOW | DANGEROUS),
    ("cluster|forget", ADMIN | SLOW | DANGEROUS),
    ("cluster|getkeysinslot", SLOW),
    ("cluster|help", SLOW),
    ("cluster|info", SLOW),
    ("cluster|keyslot", SLOW),
    ("cluster|links", SLOW),
    ("cluster|meet", ADMIN | SLOW | DANGEROUS),
    ("cluster|myid", SLOW),
    ("cluster|myshardid", SLOW),
    ("cluster|nodes", SLOW),
    ("cluster|replicas", ADMIN | SLOW | DANGEROUS),
    ("cluster|replicate", ADMIN | SLOW | DANGEROUS),
    ("cluster|reset", ADMIN | SLOW | DANGEROUS),
    ("cluster|saveconfig", ADMIN | SLOW | DANGEROUS),
    ("cluster|set-config-epoch", ADMIN | SLOW | DANGEROUS),
    ("cluster|setslot", ADMIN | SLOW | DANGEROUS),
    ("cluster|shards", SLOW),
    ("cluster|slaves", ADMIN | SLOW | DANGEROUS),
    ("cluster|slots", SLOW),
    ("command", SLOW | CONNECTION),
    ("command|count", SLOW | CONNECTION),
    ("command|docs", SLOW | CONNECTION),
    ("command|getkeys", SLOW | CONNECTION),
    ("command|getkeysandflags", SLOW | CONNECTION),
    ("command|help", SLOW | CONNECTION),
    ("command|info", SLOW | CONNECTION),
    ("command|list", SLOW | CONNECTION),
    ("config", SLOW),
    ("config|get", ADMIN | SLOW | DANGEROUS),
    ("config|help", SLOW),
    ("config|resetstat", ADMIN | SLOW | DANGEROUS),
    ("config|rewrite", ADMIN | SLOW | DANGEROUS),
    ("config|set", ADMIN | SLOW | DANGEROUS),
    ("copy", KEYSPACE | WRITE | SLOW),
    ("dbsize", KEYSPACE | READ | FAST),
    ("debug", ADMIN | SLOW | DANGEROUS),
    ("decr", WRITE | STRING | FAST),
    ("decrby", WRITE | STRING | FAST),
    ("del", KEYSPACE | WRITE | SLOW),
    ("discard", FAST | TRANSACTION),
    ("dump", KEYSPACE | READ | SLOW),
    ("echo", FAST | CONNECTION),
    ("eval", SLOW | SCRIPTING),
    ("eval_ro", SLOW | SCRIPTING),
    ("evalsha", SLOW | SCRIPTING),
    ("evalsha_ro", SLOW | SCRIPTING),
    ("exec", SLOW | TRANSACTION),
    ("exists", KEYSPACE | READ | FAST),
    ("expire", KEYSPACE | WRITE | FAST),
    ("expireat", KEYSPACE | WRITE | FAST),
    ("expiretime", KEYSPACE | READ | FAST),
    ("failover", ADMIN | SLOW | DANGEROUS),
    ("fcall", SLOW | SCRIPTING),
    ("fcall_ro", SLOW | SCRIPTING),
    ("flushall", KEYSPACE | WRITE | SLOW | DANGEROUS),
    ("flushdb", KEYSPACE | WRITE | SLOW | DANGEROUS),
    ("function", SLOW),
    ("function|delete", WRITE | SLOW | SCRIPTING),
    ("function|dump", SLOW | SCRIPTING),
    ("function|flush", WRITE | SLOW | SCRIPTING),
    ("function|help", SLOW | SCRIPTING),
    ("function|kill", SLOW | SCRIPTING),
    ("function|list", SLOW | SCRIPTING),
    ("function|load", WRITE | SLOW | SCRIPTING),
    ("function|restore", WRITE | SLOW | SCRIPTING),
    ("function|stats", SLOW | SCRIPTING),
    ("geoadd", WRITE | GEO | SLOW),
    ("geodist", READ | GEO | SLOW),
    ("geohash", READ | GEO | SLOW),
    ("geopos", READ | GEO | SLOW),
    ("georadius", WRITE | GEO | SLOW),
    ("georadius_ro", READ | GEO | SLOW),
    ("georadiusbymember", WRITE | GEO | SLOW),
    ("georadiusbymember_ro", READ | GEO | SLOW),
    ("geosearch", READ | GEO | SLOW),
    ("geosearchstore", WRITE | GEO | SLOW),
    ("get", READ | STRING | FAST),
    ("getbit", READ | BITMAP | FAST),
    ("getdel", WRITE | STRING | FAST),
    ("getex", WRITE | STRING | FAST),
    ("getrange", READ | STRING | SLOW),
    ("getset", WRITE | STRING | FAST),
    ("hdel", WRITE | HASH | FAST),
    ("hello", FAST | CONNECTION),
    ("hexists", READ | HASH | FAST),
    ("hget", READ | HASH | FAST),
    ("hgetall", READ | HASH | SLOW),
    ("hincrby", WRITE | HASH | FAST),
    ("hincrbyfloat", WRITE | HASH | FAST),
    ("hkeys", READ | HASH | SLOW),
    ("hlen", READ | HASH | FAST),
    ("hmget", READ | HASH | FAST),
    ("hmset", WRITE | HASH | FAST),
    ("hrandfield", READ | HASH | SLOW),
    ("hscan", READ | HASH | SLOW),
    ("hset", WRITE | HASH | FAST),
    ("hsetnx", WRITE | HASH | FAST),
    ("hstrlen", READ | HASH | FAST),
    ("hvals", READ | HASH | SLOW),
    ("incr", WRITE | STRING | FAST),
    ("incrby", WRITE | STRING | FAST),
    ("incrbyfloat", WRITE | STRING | FAST),
    ("info", SLOW | DANGEROUS),
    ("keys", KEYSPACE | READ | SLOW | DANGEROUS),
    ("lastsave", ADMIN | FAST | DANGEROUS),
    ("latency", SLOW),
    ("latency|doctor", ADMIN | SLOW | DANGEROUS),
    ("latency|graph", ADMIN | SLOW | DANGEROUS),
    ("latency|help", SLOW),
    ("latency|histogram", ADMIN | SLOW | DANGEROUS),
    ("latency|history", ADMIN | SLOW | DANGEROUS),
    ("latency|latest", ADMIN | SLOW | DANGEROUS),
    ("latency|reset", ADMIN | SLOW | DANGEROUS),
    ("lcs", READ | STRING | SLOW),
    ("lindex", READ | LIST | SLOW),
    ("linsert", WRITE | LIST | SLOW),
    ("llen", READ | LIST | FAST),
    ("lmove", WRITE | LIST | SLOW),
    ("lmpop", WRITE | LIST | SLOW),
    ("lolwut", READ | FAST),
    ("lpop", WRITE | LIST | FAST),
    ("lpos", READ | LIST | SLOW),
    ("lpush", WRITE | LIST | FAST),
    ("lpushx", WRITE | LIST | FAST),
    ("lrange", READ | LIST | SLOW),
    ("lrem", WRITE | LIST | SLOW),
    ("lset", WRITE | LIST | SLOW),
    ("ltrim", WRITE | LIST | SLOW),
    ("memory", SLOW),
    ("memory|doctor", SLOW),
    ("memory|help", SLOW),
    ("memory|malloc-stats", SLOW),
    ("memory|purge", SLOW),
    ("memory|stats", SLOW),
    ("memory|usage", READ | SLOW),
    ("mget", READ | STRING | FAST),
    ("migrate", KEYSPACE | WRITE | SLOW | DANGEROUS),
    ("module", SLOW),
    ("module|help", SLOW),
    ("module|list", ADMIN | SLOW | DANGEROUS),
    ("module|load", ADMIN | SLOW | DANGEROUS),
    ("module|loadex", ADMIN | SLOW | DANGEROUS),
    ("module|unload", ADMIN | SLOW | DANGEROUS),
    ("monitor", ADMIN | SLOW | DANGEROUS),
    ("move", KEYSPACE | WRITE | FAST),
    ("mset", WRITE | STRING | SLOW),
    ("msetnx", WRITE | STRING | SLOW),
    ("multi", FAST | TRANSACTION),
    ("object", SLOW),
    ("object|encoding", KEYSPACE | READ | SLOW),
    ("object|freq", KEYSPACE | READ | SLOW),
    ("object|help", KEYSPACE | SLOW),
    ("object|idletime", KEYSPACE | READ | SLOW),
    ("object|refcount", KEYSPACE | READ | SLOW),
    ("persist", KEYSPACE | WRITE | FAST),
    ("pexpire", KEYSPACE | WRITE | FAST),
    ("pexpireat", KEYSPACE | WRITE | FAST),
    ("pexpiretime", KEYSPACE | READ | FAST),
    ("pfadd", WRITE | HYPERLOGLOG | FAST),
    ("pfcount", READ | HYPERLOGLOG | SLOW),
    ("pfdebug", WRITE | HYPERLOGLOG | ADMIN | SLOW | DANGEROUS),
    ("pfmerge", WRITE | HYPERLOGLOG | SLOW),
    ("pfselftest", HYPERLOGLOG | ADMIN | SLOW | DANGEROUS),
    ("ping", FAST | CONNECTION),
    ("psetex", WRITE | STRING | SLOW),
    ("psubscribe", PUBSUB | SLOW),
    ("psync", ADMIN | SLOW | DANGEROUS),
    ("pttl", KEYSPACE | READ | FAST),
    ("publish", PUBSUB | FAST),
    ("pubsub", SLOW),
    ("pubsub|channels", PUBSUB | SLOW),
    ("pubsub|help", SLOW),
    ("pubsub|numpat", PUBSUB | SLOW),
    ("pubsub|numsub", PUBSUB | SLOW),
    ("pubsub|shardchannels", PUBSUB | SLOW),
    ("pubsub|shardnumsub", PUBSUB | SLOW),
    ("punsubscribe", PUBSUB | SLOW),
    ("quit", FAST | CONNECTION),
    ("randomkey", KEYSPACE | READ | SLOW),
    ("readonly", FAST | CONNECTION),
    ("readwrite", FAST | CONNECTION),
    ("rename", KEYSPACE | WRITE | SLOW),
    ("renamenx", KEYSPACE | WRITE | FAST),
    ("replconf", ADMIN | SLOW | DANGEROUS),
    ("replicaof", ADMIN | SLOW | DANGEROUS),
    ("reset", FAST | CONNECTION),
    ("restore", KEYSPACE | WRITE | SLOW | DANGEROUS),
    ("restore-asking", KEYSPACE | WRITE | SLOW | DANGEROUS),
    ("role", ADMIN | FAST | DANGEROUS),
    ("rpop", WRITE | LIST | FAST),
    ("rpoplpush", WRITE | LIST | SLOW),
    ("rpush", WRITE | LIST | FAST),
    ("rpushx", WRITE | LIST | FAST),
    ("sadd", WRITE | SET | FAST),
    ("save", ADMIN | SLOW | DANGEROUS),
    ("scan", KEYSPACE | READ | SLOW),
    ("scard", READ | SET | FAST),
    ("script", SLOW),
    ("script|debug", SLOW | SCRIPTING),
    ("script|exists", SLOW | SCRIPTING),
    ("script|flush", SLOW | SCRIPTING),
    ("script|help", SLOW | SCRIPTING),
    ("script|kill", SLOW | SCRIPTING),
    ("script|load", SLOW | SCRIPTING),
    ("sdiff", READ | SET | SLOW),
    ("sdiffstore", WRITE | SET | SLOW),
    ("select", FAST | CONNECTION),
    ("set", WRITE | STRING | SLOW),
    ("setbit", WRITE | BITMAP | SLOW),
    ("setex", WRITE | STRING | SLOW),
    ("setnx", WRITE | STRING | FAST),
    ("setrange", WRITE | STRING | SLOW),
    ("shutdown", ADMIN | SLOW | DANGEROUS),
    ("sinter", READ | SET | SLOW),
    ("sintercard", READ | SET | SLOW),
    ("sinterstore", WRITE | SET | SLOW),
    ("sismember", READ | SET | FAST),
    ("slaveof", ADMIN | SLOW | DANGEROUS),
    ("slowlog", SLOW),
    ("slowlog|get", ADMIN | SLOW | DANGEROUS),
    ("slowlog|help", SLOW),
    ("slowlog|len", ADMIN | SLOW | DANGEROUS),
    ("slowlog|reset", ADMIN | SLOW | DANGEROUS),
    ("smembers", READ | SET | SLOW),
    ("smismember", READ | SET | FAST),
    ("smove", WRITE | SET | FAST),
    ("sort", WRITE | SET | SORTEDSET | LIST | SLOW | DANGEROUS),
    ("sort_ro", READ | SET | SORTEDSET | LIST | SLOW | DANGEROUS),
    ("spop", WRITE | SET | FAST),
    ("spublish", PUBSUB | FAST),
    ("srandmember", READ | SET | SLOW),
    ("srem", WRITE | SET | FAST),
    ("sscan", READ | SET | SLOW),
    ("ssubscribe", PUBSUB | SLOW),
    ("strlen", READ | STRING | FAST),
    ("subscribe", PUBSUB | SLOW),
    ("substr", READ | STRING | SLOW),
    ("sunion", READ | SET | SLOW),
    ("sunionstore", WRITE | SET | SLOW),
    ("sunsubscribe", PUBSUB | SLOW),
    ("swapdb", KEYSPACE | WRITE | FAST | DANGEROUS),
    ("sync", ADMIN | SLOW | DANGEROUS),
    ("time", FAST),
    ("touch", KEYSPACE | READ | FAST),
    ("ttl", KEYSPACE | READ | FAST),
    ("type", KEYSPACE | READ | FAST),
    ("unlink", KEYSPACE | WRITE | FAST),
    ("unsubscribe", PUBSUB | SLOW),
    ("unwatch", FAST | TRANSACTION),
    ("wait", SLOW | CONNECTION),
    ("waitaof", SLOW | CONNECTION),
    ("watch", FAST | TRANSACTION),
    ("xack", WRITE | STREAM | FAST),
    ("xadd", WRITE | STREAM | FAST),
    ("xautoclaim", WRITE | STREAM | FAST),
    ("xclaim", WRITE | STREAM | FAST),
    ("xdel", WRITE | STREAM | FAST),
    ("xgroup", SLOW),
    ("xgroup|create", WRITE | STREAM | SLOW),
    ("xgroup|createconsumer", WRITE | STREAM | SLOW),
    ("xgroup|delconsumer", WRITE | STREAM | SLOW),
    ("xgroup|destroy", WRITE | STREAM | SLOW),
    ("xgroup|help", STREAM | SLOW),
    ("xgroup|setid", WRITE | STREAM | SLOW),
    ("xinfo", SLOW),
    ("xinfo|consumers", READ | STREAM | SLOW),
    ("xinfo|groups", READ | STREAM | SLOW),
    ("xinfo|help", STREAM | SLOW),
    ("xinfo|stream", READ | STREAM | SLOW),
    ("xlen", READ | STREAM | FAST),
    ("xpending", READ | STREAM | SLOW),
    ("xrange", READ | STREAM | SLOW),
    ("xread", READ | STREAM | SLOW | BLOCKING),
    ("xreadgroup", WRITE | STREAM | SLOW | BLOCKING),
    ("xrevrange", READ | STREAM | SLOW),
    ("xsetid", WRITE | STREAM | FAST),
    ("xtrim", WRITE | STREAM | SLOW),
    ("zadd", WRITE | SORTEDSET | FAST),
    ("zcard", READ | SORTEDSET | FAST),
    ("zcount", READ | SORTEDSET | FAST),
    ("zdiff", READ | SORTEDSET | SLOW),
    ("zdiffstore", WRITE | SORTEDSET | SLOW),
    ("zincrby", WRITE | SORTEDSET | FAST),
    ("zinter", READ | SORTEDSET | SLOW),
    ("zintercard", READ | SORTEDSET | SLOW),
    ("zinterstore", WRITE | SORTEDSET | SLOW),
    ("zlexcount", READ | SORTEDSET | FAST),
    ("zmpop", WRITE | SORTEDSET | SLOW),
    ("zmscore", READ | SORTEDSET | FAST),
    ("zpopmax", WRITE | SORTEDSET | FAST),
    ("zpopmin", WRITE | SORTEDSET | FAST),
    ("zrandmember", READ | SORTEDSET | SLOW),
    ("zrange", READ | SORTEDSET | SLOW),
    ("zrangebylex", READ | SORTEDSET | SLOW),
    ("zrangebyscore", READ | SORTEDSET | SLOW),
    ("zrangestore", WRITE | SORTEDSET | SLOW),
    ("zrank", READ | SORTEDSET | FAST),
    ("zrem", WRITE | SORTEDSET | FAST),
    ("zremrangebylex", WRITE | SORTEDSET | SLOW),
    ("zremrangebyrank", WRITE | SORTEDSET | SLOW),
    ("zremrangebyscore", WRITE | SORTEDSET | SLOW),
    ("zrevrange", READ | SORTEDSET | SLOW),
    ("zrevrangebylex", READ | SORTEDSET | SLOW),
    ("zrevrangebyscore", READ | SORTEDSET | SLOW),
    ("zrevrank", READ | SORTEDSET | FAST),
    ("zscan", READ | SORTEDSET | SLOW),
    ("zscore", READ | SORTEDSET | FAST),
    ("zunion", READ | SORTEDSET | SLOW),
    ("zunionstore", WRITE | SORTEDSET | SLOW),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(REDIS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(REDIS
            .iter()
            .all(|(_, m)| m & !ALL == 0 && m & (FAST | SLOW) != 0));
    }

    #[test]
    fn names_and_bits() {
        assert_eq!(NAMES.len(), 21);
        assert_eq!(names(ALL), NAMES);
        assert_eq!(bit("keyspace"), Some(KEYSPACE));
        assert_eq!(bit("scripting"), Some(SCRIPTING));
        assert_eq!(bit("nope"), None);
        assert_eq!(bit("@read"), None);
        assert_eq!(
            names(SLOW | READ | DANGEROUS | KEYSPACE),
            ["keyspace", "read", "slow", "dangerous"]
        );
        assert!(names(0).is_empty());
        for (i, n) in NAMES.iter().enumerate() {
            assert_eq!(bit(n), Some(1 << i));
        }
    }

    #[test]
    fn well_known_commands() {
        assert_eq!(redis_categories("get", None), Some(READ | STRING | FAST));
        assert_eq!(redis_categories("set", None), Some(WRITE | STRING | SLOW));
        assert_eq!(
            redis_categories("keys", None),
            Some(KEYSPACE | READ | SLOW | DANGEROUS)
        );
        assert_eq!(
            redis_categories("blpop", None),
            Some(WRITE | LIST | SLOW | BLOCKING)
        );
        assert_eq!(redis_categories("multi", None), Some(FAST | TRANSACTION));
        assert_eq!(redis_categories("publish", None), Some(PUBSUB | FAST));
        assert_eq!(
            redis_categories("flushall", None),
            Some(KEYSPACE | WRITE | SLOW | DANGEROUS)
        );
        // Read-only scripting stays out of @read.
        assert_eq!(redis_categories("eval_ro", None), Some(SLOW | SCRIPTING));
        assert_eq!(redis_categories("nosuchcommand", None), None);
    }

    #[test]
    fn subcommands() {
        let list = redis_categories("client", Some("list")).unwrap_or(0);
        assert_eq!(
            list & (ADMIN | DANGEROUS | CONNECTION),
            ADMIN | DANGEROUS | CONNECTION
        );
        assert_eq!(
            redis_categories("client", Some("id")),
            Some(SLOW | CONNECTION)
        );
        assert_eq!(redis_categories("acl", Some("whoami")), Some(SLOW));
        assert_eq!(
            redis_categories("acl", Some("setuser")),
            Some(ADMIN | SLOW | DANGEROUS)
        );
        assert_eq!(
            redis_categories("config", Some("get")),
            Some(ADMIN | SLOW | DANGEROUS)
        );
        assert_eq!(
            redis_categories("xinfo", Some("stream")),
            Some(READ | STREAM | SLOW)
        );
        // A container alone is just @slow.
        assert_eq!(redis_categories("client", None), Some(SLOW));
        // Unknown subcommand of a container; `sub` ignored on a plain command.
        assert_eq!(redis_categories("client", Some("durability")), None);
        assert_eq!(
            redis_categories("get", Some("x")),
            redis_categories("get", None)
        );
        assert!(!is_container("get"));
        assert!(is_container("acl") && is_container("xgroup"));
    }

    #[test]
    fn durakv_falls_back_on_its_own_flags() {
        use crate::command::flags as f;
        // Redis knows it: durakv's flags and group are ignored.
        assert_eq!(of("get", None, f::WRITE, "hash"), READ | STRING | FAST);
        assert_eq!(
            of("nosuch", None, f::READONLY | f::FAST, "string"),
            READ | STRING | FAST
        );
        assert_eq!(
            of("nosuch", None, f::WRITE | f::BLOCKING, "sorted-set"),
            WRITE | SORTEDSET | SLOW | BLOCKING
        );
        assert_eq!(
            of("nosuch", None, f::ADMIN, "server"),
            ADMIN | SLOW | DANGEROUS
        );
        assert_eq!(
            of("nosuch", None, f::READONLY, "scripting"),
            SLOW | SCRIPTING
        );
        assert_eq!(of("nosuch", None, 0, "generic"), KEYSPACE | SLOW);
        assert_eq!(
            of("client", Some("durability"), 0, "connection"),
            SLOW | CONNECTION
        );
    }
}
