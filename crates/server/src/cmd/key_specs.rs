//! Redis 7.0.15's key specs, as `COMMAND INFO` reports them, for every
//! command and subcommand that has any (the others, containers included,
//! have none). COMMAND INFO sends them, its (first, last, step) triple is
//! derived from them as Redis derives it, and COMMAND GETKEYSANDFLAGS and
//! ACL key permissions take each key's flags from them ([`super::key_flags`]).
//!
//! The table was produced from Redis 7.0.15's `COMMAND` reply; keep it in
//! step with Redis rather than with durakv's own key positions (dispatch
//! locks by [`crate::command::Keys`], which may differ, e.g. for scripts).

/// Where the search for a spec's keys starts (`begin_search`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begin {
    /// At this argument (0 is the command name).
    Index(i32),
    /// After `keyword`, searched from argument `startfrom` (from the end
    /// when negative).
    Keyword(&'static str, i32),
    Unknown,
}

/// How a spec's keys are found from where the search begins (`find_keys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Find {
    /// `lastkey` counts from the begin index (negative: from the end).
    Range {
        lastkey: i32,
        keystep: i32,
        limit: i32,
    },
    /// The argument at `keynumidx` holds the number of keys.
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    },
    Unknown,
}

#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    pub notes: Option<&'static str>,
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

/// The common shape: keys from `index` to `lastkey` past it, every one.
const fn ks(flags: &'static [&'static str], index: i32, lastkey: i32) -> KeySpec {
    KeySpec {
        notes: None,
        flags,
        begin: Begin::Index(index),
        find: Find::Range {
            lastkey,
            keystep: 1,
            limit: 0,
        },
    }
}

/// Redis's key specs of `name` (`get`, `xgroup|create`), or None for a
/// command Redis gives none or does not have.
#[rustfmt::skip]
pub fn redis_key_specs(name: &str) -> Option<&'static [KeySpec]> {
    let specs: &'static [KeySpec] = match name {
        "append" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "bitcount" => const { &[ks(&["RO", "access"], 1, 0)] },
        "bitfield" => const { &[
            KeySpec { notes: Some("This command allows both access and modification of the key"), flags: &["RW", "access", "update", "variable_flags"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } },
        ] },
        "bitfield_ro" => const { &[ks(&["RO", "access"], 1, 0)] },
        "bitop" => const { &[
            ks(&["OW", "update"], 2, 0),
            ks(&["RO", "access"], 3, -1),
        ] },
        "bitpos" => const { &[ks(&["RO", "access"], 1, 0)] },
        "blmove" => const { &[
            ks(&["RW", "access", "delete"], 1, 0),
            ks(&["RW", "insert"], 2, 0),
        ] },
        "blmpop" => const { &[
            KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "blpop" => const { &[ks(&["RW", "access", "delete"], 1, -2)] },
        "brpop" => const { &[ks(&["RW", "access", "delete"], 1, -2)] },
        "brpoplpush" => const { &[
            ks(&["RW", "access", "delete"], 1, 0),
            ks(&["RW", "insert"], 2, 0),
        ] },
        "bzmpop" => const { &[
            KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "bzpopmax" => const { &[ks(&["RW", "access", "delete"], 1, -2)] },
        "bzpopmin" => const { &[ks(&["RW", "access", "delete"], 1, -2)] },
        "copy" => const { &[
            ks(&["RO", "access"], 1, 0),
            ks(&["OW", "update"], 2, 0),
        ] },
        "decr" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "decrby" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "del" => const { &[ks(&["RM", "delete"], 1, -1)] },
        "dump" => const { &[ks(&["RO", "access"], 1, 0)] },
        "eval" => const { &[
            KeySpec { notes: Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"), flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "eval_ro" => const { &[
            KeySpec { notes: Some("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"), flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "evalsha" => const { &[
            KeySpec { notes: None, flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "evalsha_ro" => const { &[
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "exists" => const { &[ks(&["RO"], 1, -1)] },
        "expire" => const { &[ks(&["RW", "update"], 1, 0)] },
        "expireat" => const { &[ks(&["RW", "update"], 1, 0)] },
        "expiretime" => const { &[ks(&["RO", "access"], 1, 0)] },
        "fcall" => const { &[
            KeySpec { notes: Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"), flags: &["RW", "access", "update"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "fcall_ro" => const { &[
            KeySpec { notes: Some("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"), flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "geoadd" => const { &[ks(&["RW", "update"], 1, 0)] },
        "geodist" => const { &[ks(&["RO", "access"], 1, 0)] },
        "geohash" => const { &[ks(&["RO", "access"], 1, 0)] },
        "geopos" => const { &[ks(&["RO", "access"], 1, 0)] },
        "georadius" => const { &[
            ks(&["RO", "access"], 1, 0),
            KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Keyword("STORE", 6), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } },
            KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Keyword("STOREDIST", 6), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } },
        ] },
        "georadius_ro" => const { &[ks(&["RO", "access"], 1, 0)] },
        "georadiusbymember" => const { &[
            ks(&["RO", "access"], 1, 0),
            KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Keyword("STORE", 5), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } },
            KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Keyword("STOREDIST", 5), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } },
        ] },
        "georadiusbymember_ro" => const { &[ks(&["RO", "access"], 1, 0)] },
        "geosearch" => const { &[ks(&["RO", "access"], 1, 0)] },
        "geosearchstore" => const { &[
            ks(&["OW", "update"], 1, 0),
            ks(&["RO", "access"], 2, 0),
        ] },
        "get" => const { &[ks(&["RO", "access"], 1, 0)] },
        "getbit" => const { &[ks(&["RO", "access"], 1, 0)] },
        "getdel" => const { &[ks(&["RW", "access", "delete"], 1, 0)] },
        "getex" => const { &[
            KeySpec { notes: Some("RW and UPDATE because it changes the TTL"), flags: &["RW", "access", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } },
        ] },
        "getrange" => const { &[ks(&["RO", "access"], 1, 0)] },
        "getset" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "hdel" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "hexists" => const { &[ks(&["RO"], 1, 0)] },
        "hget" => const { &[ks(&["RO", "access"], 1, 0)] },
        "hgetall" => const { &[ks(&["RO", "access"], 1, 0)] },
        "hincrby" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "hincrbyfloat" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "hkeys" => const { &[ks(&["RO", "access"], 1, 0)] },
        "hlen" => const { &[ks(&["RO"], 1, 0)] },
        "hmget" => const { &[ks(&["RO", "access"], 1, 0)] },
        "hmset" => const { &[ks(&["RW", "update"], 1, 0)] },
        "hrandfield" => const { &[ks(&["RO", "access"], 1, 0)] },
        "hscan" => const { &[ks(&["RO", "access"], 1, 0)] },
        "hset" => const { &[ks(&["RW", "update"], 1, 0)] },
        "hsetnx" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "hstrlen" => const { &[ks(&["RO"], 1, 0)] },
        "hvals" => const { &[ks(&["RO", "access"], 1, 0)] },
        "incr" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "incrby" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "incrbyfloat" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "lcs" => const { &[ks(&["RO", "access"], 1, 1)] },
        "lindex" => const { &[ks(&["RO", "access"], 1, 0)] },
        "linsert" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "llen" => const { &[ks(&["RO"], 1, 0)] },
        "lmove" => const { &[
            ks(&["RW", "access", "delete"], 1, 0),
            ks(&["RW", "insert"], 2, 0),
        ] },
        "lmpop" => const { &[
            KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "lpop" => const { &[ks(&["RW", "access", "delete"], 1, 0)] },
        "lpos" => const { &[ks(&["RO", "access"], 1, 0)] },
        "lpush" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "lpushx" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "lrange" => const { &[ks(&["RO", "access"], 1, 0)] },
        "lrem" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "lset" => const { &[ks(&["RW", "update"], 1, 0)] },
        "ltrim" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "memory|usage" => const { &[ks(&["RO"], 2, 0)] },
        "mget" => const { &[ks(&["RO", "access"], 1, -1)] },
        "migrate" => const { &[
            ks(&["RW", "access", "delete"], 3, 0),
            KeySpec { notes: None, flags: &["RW", "access", "delete", "incomplete"], begin: Begin::Keyword("KEYS", -2), find: Find::Range { lastkey: -1, keystep: 1, limit: 0 } },
        ] },
        "move" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "mset" => const { &[
            KeySpec { notes: None, flags: &["OW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, keystep: 2, limit: 0 } },
        ] },
        "msetnx" => const { &[
            KeySpec { notes: None, flags: &["OW", "insert"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, keystep: 2, limit: 0 } },
        ] },
        "object|encoding" => const { &[ks(&["RO"], 2, 0)] },
        "object|freq" => const { &[ks(&["RO"], 2, 0)] },
        "object|idletime" => const { &[ks(&["RO"], 2, 0)] },
        "object|refcount" => const { &[ks(&["RO"], 2, 0)] },
        "persist" => const { &[ks(&["RW", "update"], 1, 0)] },
        "pexpire" => const { &[ks(&["RW", "update"], 1, 0)] },
        "pexpireat" => const { &[ks(&["RW", "update"], 1, 0)] },
        "pexpiretime" => const { &[ks(&["RO", "access"], 1, 0)] },
        "pfadd" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "pfcount" => const { &[
            KeySpec { notes: Some("RW because it may change the internal representation of the key, and propagate to replicas"), flags: &["RW", "access"], begin: Begin::Index(1), find: Find::Range { lastkey: -1, keystep: 1, limit: 0 } },
        ] },
        "pfdebug" => const { &[ks(&["RW", "access"], 2, 0)] },
        "pfmerge" => const { &[
            ks(&["RW", "access", "insert"], 1, 0),
            ks(&["RO", "access"], 2, -1),
        ] },
        "psetex" => const { &[ks(&["OW", "update"], 1, 0)] },
        "pttl" => const { &[ks(&["RO", "access"], 1, 0)] },
        "rename" => const { &[
            ks(&["RW", "access", "delete"], 1, 0),
            ks(&["OW", "update"], 2, 0),
        ] },
        "renamenx" => const { &[
            ks(&["RW", "access", "delete"], 1, 0),
            ks(&["OW", "insert"], 2, 0),
        ] },
        "restore" => const { &[ks(&["OW", "update"], 1, 0)] },
        "restore-asking" => const { &[ks(&["OW", "update"], 1, 0)] },
        "rpop" => const { &[ks(&["RW", "access", "delete"], 1, 0)] },
        "rpoplpush" => const { &[
            ks(&["RW", "access", "delete"], 1, 0),
            ks(&["RW", "insert"], 2, 0),
        ] },
        "rpush" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "rpushx" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "sadd" => const { &[ks(&["RW", "insert"], 1, 0)] },
        "scard" => const { &[ks(&["RO"], 1, 0)] },
        "sdiff" => const { &[ks(&["RO", "access"], 1, -1)] },
        "sdiffstore" => const { &[
            ks(&["OW", "update"], 1, 0),
            ks(&["RO", "access"], 2, -1),
        ] },
        "set" => const { &[
            KeySpec { notes: Some("RW and ACCESS due to the optional `GET` argument"), flags: &["RW", "access", "update", "variable_flags"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } },
        ] },
        "setbit" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "setex" => const { &[ks(&["OW", "update"], 1, 0)] },
        "setnx" => const { &[ks(&["OW", "insert"], 1, 0)] },
        "setrange" => const { &[ks(&["RW", "update"], 1, 0)] },
        "sinter" => const { &[ks(&["RO", "access"], 1, -1)] },
        "sintercard" => const { &[
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "sinterstore" => const { &[
            ks(&["RW", "update"], 1, 0),
            ks(&["RO", "access"], 2, -1),
        ] },
        "sismember" => const { &[ks(&["RO"], 1, 0)] },
        "smembers" => const { &[ks(&["RO", "access"], 1, 0)] },
        "smismember" => const { &[ks(&["RO", "access"], 1, 0)] },
        "smove" => const { &[
            ks(&["RW", "access", "delete"], 1, 0),
            ks(&["RW", "insert"], 2, 0),
        ] },
        "sort" => const { &[
            ks(&["RO", "access"], 1, 0),
            KeySpec { notes: Some("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"), flags: &["RO", "access"], begin: Begin::Unknown, find: Find::Unknown },
            KeySpec { notes: Some("For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array"), flags: &["OW", "update"], begin: Begin::Unknown, find: Find::Unknown },
        ] },
        "sort_ro" => const { &[
            ks(&["RO", "access"], 1, 0),
            KeySpec { notes: Some("For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"), flags: &["RO", "access"], begin: Begin::Unknown, find: Find::Unknown },
        ] },
        "spop" => const { &[ks(&["RW", "access", "delete"], 1, 0)] },
        "spublish" => const { &[ks(&["not_key"], 1, 0)] },
        "srandmember" => const { &[ks(&["RO", "access"], 1, 0)] },
        "srem" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "sscan" => const { &[ks(&["RO", "access"], 1, 0)] },
        "ssubscribe" => const { &[ks(&["not_key"], 1, -1)] },
        "strlen" => const { &[ks(&["RO"], 1, 0)] },
        "substr" => const { &[ks(&["RO", "access"], 1, 0)] },
        "sunion" => const { &[ks(&["RO", "access"], 1, -1)] },
        "sunionstore" => const { &[
            ks(&["OW", "update"], 1, 0),
            ks(&["RO", "access"], 2, -1),
        ] },
        "sunsubscribe" => const { &[ks(&["not_key"], 1, -1)] },
        "touch" => const { &[ks(&["RO"], 1, -1)] },
        "ttl" => const { &[ks(&["RO", "access"], 1, 0)] },
        "type" => const { &[ks(&["RO"], 1, 0)] },
        "unlink" => const { &[ks(&["RM", "delete"], 1, -1)] },
        "watch" => const { &[ks(&["RO"], 1, -1)] },
        "xack" => const { &[ks(&["RW", "update"], 1, 0)] },
        "xadd" => const { &[
            KeySpec { notes: Some("UPDATE instead of INSERT because of the optional trimming feature"), flags: &["RW", "update"], begin: Begin::Index(1), find: Find::Range { lastkey: 0, keystep: 1, limit: 0 } },
        ] },
        "xautoclaim" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "xclaim" => const { &[ks(&["RW", "update"], 1, 0)] },
        "xdel" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "xgroup|create" => const { &[ks(&["RW", "insert"], 2, 0)] },
        "xgroup|createconsumer" => const { &[ks(&["RW", "insert"], 2, 0)] },
        "xgroup|delconsumer" => const { &[ks(&["RW", "delete"], 2, 0)] },
        "xgroup|destroy" => const { &[ks(&["RW", "delete"], 2, 0)] },
        "xgroup|setid" => const { &[ks(&["RW", "update"], 2, 0)] },
        "xinfo|consumers" => const { &[ks(&["RO", "access"], 2, 0)] },
        "xinfo|groups" => const { &[ks(&["RO", "access"], 2, 0)] },
        "xinfo|stream" => const { &[ks(&["RO", "access"], 2, 0)] },
        "xlen" => const { &[ks(&["RO"], 1, 0)] },
        "xpending" => const { &[ks(&["RO", "access"], 1, 0)] },
        "xrange" => const { &[ks(&["RO", "access"], 1, 0)] },
        "xread" => const { &[
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Keyword("STREAMS", 1), find: Find::Range { lastkey: -1, keystep: 1, limit: 2 } },
        ] },
        "xreadgroup" => const { &[
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Keyword("STREAMS", 4), find: Find::Range { lastkey: -1, keystep: 1, limit: 2 } },
        ] },
        "xrevrange" => const { &[ks(&["RO", "access"], 1, 0)] },
        "xsetid" => const { &[ks(&["RW", "update"], 1, 0)] },
        "xtrim" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "zadd" => const { &[ks(&["RW", "update"], 1, 0)] },
        "zcard" => const { &[ks(&["RO"], 1, 0)] },
        "zcount" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zdiff" => const { &[
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "zdiffstore" => const { &[
            ks(&["OW", "update"], 1, 0),
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "zincrby" => const { &[ks(&["RW", "access", "update"], 1, 0)] },
        "zinter" => const { &[
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "zintercard" => const { &[
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "zinterstore" => const { &[
            ks(&["OW", "update"], 1, 0),
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "zlexcount" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zmpop" => const { &[
            KeySpec { notes: None, flags: &["RW", "access", "delete"], begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "zmscore" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zpopmax" => const { &[ks(&["RW", "access", "delete"], 1, 0)] },
        "zpopmin" => const { &[ks(&["RW", "access", "delete"], 1, 0)] },
        "zrandmember" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zrange" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zrangebylex" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zrangebyscore" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zrangestore" => const { &[
            ks(&["OW", "update"], 1, 0),
            ks(&["RO", "access"], 2, 0),
        ] },
        "zrank" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zrem" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "zremrangebylex" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "zremrangebyrank" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "zremrangebyscore" => const { &[ks(&["RW", "delete"], 1, 0)] },
        "zrevrange" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zrevrangebylex" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zrevrangebyscore" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zrevrank" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zscan" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zscore" => const { &[ks(&["RO", "access"], 1, 0)] },
        "zunion" => const { &[
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(1), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        "zunionstore" => const { &[
            ks(&["OW", "update"], 1, 0),
            KeySpec { notes: None, flags: &["RO", "access"], begin: Begin::Index(2), find: Find::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 } },
        ] },
        _ => return None,
    };
    Some(specs)
}

/// Redis's legacy (first, last, step) for a command with these key specs
/// (`populateCommandLegacyRangeSpec`): the index/range specs that follow
/// one another with step 1, merged; (0, 0, 0) when there are none.
pub fn legacy_triple(specs: &[KeySpec]) -> (i64, i64, i64) {
    if let [KeySpec {
        begin: Begin::Index(pos),
        find: Find::Range {
            lastkey, keystep, ..
        },
        ..
    }] = specs
    {
        let last = if *lastkey >= 0 {
            lastkey + pos
        } else {
            *lastkey
        };
        return (*pos as i64, last as i64, *keystep as i64);
    }
    let (mut first, mut last, mut prev_last) = (i32::MAX, 0i32, 0i32);
    for s in specs {
        let (
            Begin::Index(pos),
            Find::Range {
                lastkey, keystep, ..
            },
        ) = (s.begin, s.find)
        else {
            continue;
        };
        if keystep != 1 || (prev_last != 0 && prev_last != pos - 1) {
            continue;
        }
        first = first.min(pos);
        let abs = if lastkey >= 0 { lastkey + pos } else { lastkey };
        // Redis compares as unsigned, so a count from the end (-1) wins.
        if (abs as u32) > (last as u32) {
            last = abs;
        }
        prev_last = last;
    }
    if first == i32::MAX {
        return (0, 0, 0);
    }
    (first as i64, last as i64, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_triples_are_redis_ones() {
        let t = |n: &str| legacy_triple(redis_key_specs(n).unwrap());
        assert_eq!(t("get"), (1, 1, 1));
        assert_eq!(t("mset"), (1, -1, 2));
        assert_eq!(t("bitop"), (2, -1, 1));
        assert_eq!(t("sort"), (1, 1, 1));
        assert_eq!(t("zunionstore"), (1, 1, 1));
        assert_eq!(t("migrate"), (3, 3, 1));
        assert_eq!(t("eval"), (0, 0, 0));
        assert_eq!(t("xread"), (0, 0, 0));
        assert_eq!(t("xgroup|create"), (2, 2, 1));
        assert!(redis_key_specs("object|help").is_none());
    }
}
