//! The flags of each command's key specs (Redis 7's `RO`/`RW`/`OW`/`RM`
//! with `access`/`update`/`insert`/`delete`), as COMMAND INFO and COMMAND
//! GETKEYSANDFLAGS report them.
//!
//! A command's keys map onto its specs in order: the i-th key reported has
//! the i-th spec's flags, and every key past the last spec has the last
//! one's (MSET's pairs, ZUNIONSTORE's sources, LMOVE's destination).

const RO_ACCESS: &[&str] = &["RO", "access"];
const RO: &[&str] = &["RO"];
const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
const RW_ACCESS_DELETE: &[&str] = &["RW", "access", "delete"];
const RW_INSERT: &[&str] = &["RW", "insert"];
const RW_UPDATE: &[&str] = &["RW", "update"];
const OW_UPDATE: &[&str] = &["OW", "update"];
const OW_INSERT: &[&str] = &["OW", "insert"];
const RM_DELETE: &[&str] = &["RM", "delete"];

/// The key specs' flags of `name`; `write` picks the default for commands
/// not listed (a read is `RO access`, a write `RW access update`).
pub fn key_spec_flags(name: &str, write: bool) -> &'static [&'static [&'static str]] {
    match name {
        "set" | "mset" | "psetex" | "setex" => &[OW_UPDATE],
        "msetnx" => &[OW_INSERT],
        "setnx" | "append" | "lpush" | "rpush" | "lpushx" | "rpushx" | "linsert" | "sadd"
        | "xadd" | "pfadd" | "geoadd" => &[RW_INSERT],
        "hset" | "hmset" | "hsetnx" | "zadd" | "lset" | "expire" | "pexpire" | "expireat"
        | "pexpireat" | "persist" | "setrange" | "setbit" | "pfmerge" => &[RW_UPDATE],
        "del" | "unlink" => &[RM_DELETE],
        "getdel" | "lpop" | "rpop" | "blpop" | "brpop" | "spop" | "zpopmin" | "zpopmax"
        | "bzpopmin" | "bzpopmax" | "lmpop" | "blmpop" | "zmpop" | "bzmpop" | "srem" | "zrem"
        | "hdel" | "lrem" | "ltrim" | "xdel" | "xtrim" | "zremrangebyscore" | "zremrangebyrank"
        | "zremrangebylex" => &[RW_ACCESS_DELETE],
        "lmove" | "blmove" | "rpoplpush" | "brpoplpush" | "smove" => &[RW_ACCESS_DELETE, RW_INSERT],
        "rename" | "renamenx" => &[RW_ACCESS_DELETE, OW_INSERT],
        "copy" | "sort" | "georadius" | "georadiusbymember" | "geosearchstore" => {
            &[RO_ACCESS, OW_UPDATE]
        }
        "sinterstore" | "sunionstore" | "sdiffstore" | "zunionstore" | "zinterstore"
        | "zdiffstore" | "zrangestore" => &[OW_UPDATE, RO_ACCESS],
        "exists" | "type" | "ttl" | "pttl" | "expiretime" | "pexpiretime" | "strlen" | "llen"
        | "scard" | "zcard" | "hlen" | "hstrlen" | "xlen" | "touch" | "object" | "watch"
        | "hexists" | "sismember" | "smismember" | "memory" => &[RO],
        // A script may read and write the keys it names.
        "eval" | "evalsha" | "fcall" => &[RW_ACCESS_UPDATE],
        _ if write => &[RW_ACCESS_UPDATE],
        _ => &[RO_ACCESS],
    }
}

/// The flags of the `i`-th key a command reports.
pub fn flags_of_key(
    specs: &'static [&'static [&'static str]],
    i: usize,
) -> &'static [&'static str] {
    specs
        .get(i)
        .or_else(|| specs.last())
        .copied()
        .unwrap_or(RO_ACCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_past_the_last_spec_take_its_flags() {
        let lmove = key_spec_flags("lmove", true);
        assert_eq!(flags_of_key(lmove, 0), RW_ACCESS_DELETE);
        assert_eq!(flags_of_key(lmove, 1), RW_INSERT);
        let mset = key_spec_flags("mset", true);
        assert_eq!(flags_of_key(mset, 3), OW_UPDATE);
        assert_eq!(flags_of_key(key_spec_flags("get", false), 0), RO_ACCESS);
    }
}
