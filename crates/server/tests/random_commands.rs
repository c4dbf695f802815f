//! Every command in the server's own COMMAND table, called with random
//! arguments (keys of every type, edge-case numbers, option words, junk)
//! against the real server: each call gets a reply or an error reply, the
//! connection stays open and the server keeps answering. A debug build
//! checks integer overflow, so an unchecked offset or count panics here.
//! `DURAKV_FUZZ_SEED` picks another sequence, `DURAKV_FUZZ_CALLS` another
//! length.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Commands that end or change the connection, block, change the server's
/// settings or role, or wipe what the calls work on: called with random
/// arguments they would test the harness, not the command.
const LEFT_OUT: &[&str] = &[
    "shutdown",
    "debug",
    "config",
    "replicaof",
    "slaveof",
    "client",
    "monitor",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "sync",
    "psync",
    "quit",
    "reset",
    "acl",
    "auth",
    "hello",
    "migrate",
    "module",
    "failover",
    "wait",
    "waitaof",
    "blpop",
    "brpop",
    "blmove",
    "brpoplpush",
    "bzpopmin",
    "bzpopmax",
    "blmpop",
    "bzmpop",
    "save",
    "bgsave",
    "bgrewriteaof",
    "flushall",
    "swapdb",
    "multi",
    "exec",
    "watch",
    "replconf",
    "pfselftest",
    "xread",
    "xreadgroup",
];

const KEYS: &[&str] = &[
    "s", "l", "h", "st", "z", "x", "hll", "bm", "geo", "nokey", "{a}1", "{a}2",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "-2",
    "10",
    "-100",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "17179869184",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "1e308",
    "-1e308",
    "inf",
    "-inf",
    "nan",
    "1.5",
    "-0",
    "(1",
    "[a",
    "(a",
    "-",
    "+",
    "$",
    "*",
    ">",
    "0-0",
    "0-1",
    "18446744073709551615-18446744073709551615",
    "",
];

const WORDS: &[&str] = &[
    "WITHSCORES",
    "LIMIT",
    "COUNT",
    "MATCH",
    "TYPE",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "KEEPTTL",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "GET",
    "STORE",
    "REV",
    "BYSCORE",
    "BYLEX",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "WITHVALUES",
    "IDLE",
    "MAXLEN",
    "MINID",
    "~",
    "=",
    "STREAMS",
    "ASC",
    "DESC",
    "ALPHA",
    "BY",
    "OVERFLOW",
    "WRAP",
    "SAT",
    "FAIL",
    "u8",
    "i64",
    "u63",
    "i1",
    "#1",
    "#99999999",
    "SET",
    "INCRBY",
    "RANK",
    "LEN",
    "IDX",
    "MINMATCHLEN",
    "WITHMATCHLEN",
    "FROMMEMBER",
    "FROMLONLAT",
    "BYRADIUS",
    "BYBOX",
    "km",
    "WITHCOORD",
    "WITHDIST",
    "WITHHASH",
    "ANY",
    "STOREDIST",
    "AGGREGATE",
    "SUM",
    "WEIGHTS",
    "JUSTID",
    "FORCE",
    "RETRYCOUNT",
    "ENTRIESREAD",
    "MKSTREAM",
    "CREATE",
    "SETID",
    "DELCONSUMER",
    "CREATECONSUMER",
    "GROUP",
    "g",
    "c",
    "CONSUMERS",
    "GROUPS",
    "STREAM",
    "FULL",
    "BIT",
    "BYTE",
    "AND",
    "OR",
    "NOT",
    "REPLACE",
    "ABSTTL",
    "FREQ",
    "ENCODING",
    "USAGE",
    "SAMPLES",
    "DB",
    "RESETSTAT",
    "HELP",
    "ASYNC",
    "return 1",
    "a",
    "field",
    "member",
];

fn random_arg(rng: &mut StdRng) -> String {
    match rng.gen_range(0..10) {
        0..=2 => KEYS[rng.gen_range(0..KEYS.len())].to_string(),
        3..=5 => NUMBERS[rng.gen_range(0..NUMBERS.len())].to_string(),
        6..=8 => WORDS[rng.gen_range(0..WORDS.len())].to_string(),
        _ => (0..rng.gen_range(0..12))
            .map(|_| b"abc-+*()[]~$0123456789.e"[rng.gen_range(0..24)] as char)
            .collect(),
    }
}

/// Gives the keys the calls work on a value of each type again.
fn fill(c: &mut redis::Connection) {
    for args in [
        &["SET", "s", "hello"][..],
        &["RPUSH", "l", "a", "b", "c", "d"],
        &["HSET", "h", "a", "1", "field", "x"],
        &["SADD", "st", "a", "b", "1", "2"],
        &["ZADD", "z", "1", "a", "2", "member"],
        &["XADD", "x", "*", "f", "v"],
        &["XGROUP", "CREATE", "x", "g", "0"],
        &["PFADD", "hll", "a", "b"],
        &["SETBIT", "bm", "100", "1"],
        &["GEOADD", "geo", "13.36", "38.11", "a", "15.08", "37.5", "b"],
    ] {
        // A key of another type from the last round refuses some of these.
        let _ = try_q::<redis::Value>(c, args);
    }
}

/// The commands of the server's COMMAND reply, with their arities, less
/// those left out and container commands (their subcommands are listed
/// on their own).
fn commands(c: &mut redis::Connection) -> Vec<(String, i64)> {
    let table: Vec<redis::Value> = redis::cmd("COMMAND").query(c).unwrap();
    table
        .into_iter()
        .filter_map(|entry| {
            let redis::Value::Array(fields) = entry else {
                return None;
            };
            let name: String = redis::from_redis_value(fields[0].clone()).ok()?;
            let arity: i64 = redis::from_redis_value(fields[1].clone()).ok()?;
            let name = name.to_lowercase();
            (!LEFT_OUT.contains(&name.as_str())).then_some((name, arity))
        })
        .collect()
}

#[test]
fn random_arguments_to_every_command_get_replies_and_never_a_dropped_connection() {
    let seed: u64 = env_number("DURAKV_FUZZ_SEED").unwrap_or(20261130);
    let calls: usize = env_number("DURAKV_FUZZ_CALLS").unwrap_or(50_000);
    let srv = Server::start(&["--durability", "none"]);
    let mut c = srv.conn();
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let table = commands(&mut c);
    assert!(table.len() > 150, "COMMAND lists {} commands", table.len());
    let mut rng = StdRng::seed_from_u64(seed);
    let mut errors = 0;
    for i in 0..calls {
        if i % 200 == 0 {
            fill(&mut c);
        }
        let (name, arity) = &table[rng.gen_range(0..table.len())];
        let fixed = arity.unsigned_abs() as usize - 1;
        let n = if rng.gen_ratio(1, 10) {
            rng.gen_range(0..8)
        } else if *arity > 0 {
            fixed
        } else {
            rng.gen_range(fixed..fixed + 7)
        };
        let args: Vec<String> = (0..n).map(|_| random_arg(&mut rng)).collect();
        let mut call = redis::cmd(name);
        for a in &args {
            call.arg(a);
        }
        match call.query::<redis::Value>(&mut c) {
            Ok(_) => {}
            Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() => {
                panic!("seed {seed}, call {i}: {name} {args:?}: {e}")
            }
            Err(_) => errors += 1,
        }
    }
    // Most random argument lists are wrong; some must have been right.
    assert!(errors > calls / 4 && errors < calls, "{errors} errors");
    assert_eq!(q::<String>(&mut srv.conn(), &["PING"]), "PONG");
}
