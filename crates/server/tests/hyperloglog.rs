//! HyperLogLog over real sockets: values byte-identical to Redis 7's (the
//! fixtures are GET replies from Redis 7.0.15), counts within the
//! estimator's error, sparse to dense promotion, the cached cardinality,
//! corruption detection, and counts surviving kill -9.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, q, Server, WRONGTYPE};
use redis::Connection;

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// `PFADD s e-0 .. e-199` in Redis 7.0.15, then GET: a sparse value.
const REDIS_SPARSE_200: &[u8] = include_bytes!("fixtures/redis7-hll-sparse-200.bin");
/// `PFADD d e-0 .. e-9999` in Redis 7.0.15, then GET: a dense value.
const REDIS_DENSE_10000: &[u8] = include_bytes!("fixtures/redis7-hll-dense-10000.bin");

fn int(c: &mut Connection, args: &[&str]) -> i64 {
    q(c, args)
}

fn bytes(c: &mut Connection, key: &str) -> Vec<u8> {
    q::<Option<Vec<u8>>>(c, &["GET", key]).unwrap_or_default()
}

fn set_bytes(c: &mut Connection, key: &str, v: &[u8]) {
    let _: () = redis::cmd("SET").arg(key).arg(v).query(c).unwrap();
}

fn pfadd_range(c: &mut Connection, key: &str, prefix: &str, range: std::ops::Range<u32>) -> i64 {
    let mut cmd = redis::cmd("PFADD");
    cmd.arg(key);
    for i in range {
        cmd.arg(format!("{prefix}{i}"));
    }
    cmd.query(c).unwrap()
}

fn encoding(c: &mut Connection, key: &str) -> String {
    q(c, &["PFDEBUG", "ENCODING", key])
}

#[test]
fn values_are_byte_identical_to_redis_and_count_the_same() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    pfadd_range(c, "s", "e-", 0..200);
    assert_eq!(bytes(c, "s"), REDIS_SPARSE_200);
    pfadd_range(c, "d", "e-", 0..10_000);
    assert_eq!(bytes(c, "d"), REDIS_DENSE_10000);
    // Redis's own values, written as plain strings, count as in Redis.
    set_bytes(c, "rs", REDIS_SPARSE_200);
    set_bytes(c, "rd", REDIS_DENSE_10000);
    assert_eq!(int(c, &["PFCOUNT", "rs"]), 200);
    assert_eq!(int(c, &["PFCOUNT", "rd"]), 9999);
    assert_eq!(int(c, &["PFCOUNT", "rs", "rd"]), 9999);
    // The count is cached in the header exactly where Redis keeps it.
    let cached = bytes(c, "rd");
    assert_eq!(&cached[8..16], &9999u64.to_le_bytes());
    assert_eq!(&cached[16..], &REDIS_DENSE_10000[16..]);
    let _: () = q(c, &["PFMERGE", "m", "rs", "rd"]);
    assert_eq!(int(c, &["PFCOUNT", "m"]), 9999);
    assert_eq!(encoding(c, "m"), "dense");
}

#[test]
fn pfadd_reports_register_changes_and_counts_are_close() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    // No elements still creates the key, and says so.
    assert_eq!(int(c, &["PFADD", "h"]), 1);
    assert_eq!(int(c, &["EXISTS", "h"]), 1);
    assert_eq!(int(c, &["PFCOUNT", "h"]), 0);
    assert_eq!(int(c, &["PFADD", "h"]), 0);
    assert_eq!(int(c, &["PFADD", "h", "a", "b", "c"]), 1);
    assert_eq!(int(c, &["PFADD", "h", "a", "b", "c"]), 0);
    assert_eq!(int(c, &["PFADD", "h", ""]), 1);
    assert_eq!(int(c, &["PFCOUNT", "h"]), 4);
    assert_eq!(int(c, &["PFCOUNT", "missing"]), 0);

    // 100k distinct elements: within Redis's documented 0.81% standard
    // error by a wide margin (2%).
    let mut n = 0;
    while n < 100_000 {
        pfadd_range(c, "big", "x", n..n + 5000);
        n += 5000;
    }
    let est = int(c, &["PFCOUNT", "big"]) as f64;
    assert!((est - 100_000.0).abs() < 2000.0, "estimate {est}");
}

#[test]
fn sparse_values_promote_to_dense_at_the_configured_size() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(
        q::<Vec<String>>(c, &["CONFIG", "GET", "hll-sparse-max-bytes"]),
        vec!["hll-sparse-max-bytes", "3000"]
    );
    pfadd_range(c, "h", "e", 0..500);
    assert_eq!(encoding(c, "h"), "sparse");
    assert!(bytes(c, "h").len() <= 3000);
    pfadd_range(c, "h", "e", 500..5000);
    assert_eq!(encoding(c, "h"), "dense");
    assert_eq!(bytes(c, "h").len(), 16 + 12288);

    // A lower limit promotes earlier; the value stays dense once it is.
    let _: () = q(c, &["CONFIG", "SET", "hll-sparse-max-bytes", "100"]);
    pfadd_range(c, "small", "e", 0..10);
    assert_eq!(encoding(c, "small"), "sparse");
    pfadd_range(c, "small", "e", 10..200);
    assert_eq!(encoding(c, "small"), "dense");
    // Sparse and dense hold the same registers, so they count the same.
    let _: () = q(c, &["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]);
    pfadd_range(c, "sp", "e", 0..200);
    assert_eq!(encoding(c, "sp"), "sparse");
    assert_eq!(int(c, &["PFCOUNT", "sp"]), int(c, &["PFCOUNT", "small"]));
    let regs: Vec<i64> = q(c, &["PFDEBUG", "GETREG", "sp"]);
    assert_eq!(regs.len(), 16384);
    assert_eq!(encoding(c, "sp"), "dense");
    assert_eq!(int(c, &["PFDEBUG", "TODENSE", "sp"]), 0);
    assert!(err(c, &["PFDEBUG", "DECODE", "sp"]).contains("HLL encoding is not sparse"));
    pfadd_range(c, "dec", "e", 0..3);
    let decoded: String = q(c, &["PFDEBUG", "DECODE", "dec"]);
    assert!(decoded.starts_with('Z') || decoded.starts_with("XZ"));
    assert_eq!(decoded.matches("v:").count(), 3);
}

#[test]
fn merge_and_multi_key_count_are_unions() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    int(c, &["PFADD", "h1", "a", "b", "c"]);
    int(c, &["PFADD", "h2", "b", "c", "d"]);
    int(c, &["PFADD", "h3", "c", "d", "e"]);
    assert_eq!(int(c, &["PFCOUNT", "h1", "h2", "h3", "nokey"]), 5);
    let _: () = q(c, &["PFMERGE", "u", "h1", "h2", "h3"]);
    assert_eq!(int(c, &["PFCOUNT", "u"]), 5);
    // The destination is one of the inputs.
    let _: () = q(c, &["PFMERGE", "h1", "h3"]);
    assert_eq!(int(c, &["PFCOUNT", "h1"]), 5);
    // Large, overlapping sets: a dense input makes the result dense.
    pfadd_range(c, "x", "k", 0..20_000);
    pfadd_range(c, "y", "k", 10_000..30_000);
    let union = int(c, &["PFCOUNT", "x", "y"]) as f64;
    assert!((union - 30_000.0).abs() < 900.0, "union {union}");
    let _: () = q(c, &["PFMERGE", "xy", "x", "y"]);
    assert_eq!(int(c, &["PFCOUNT", "xy"]) as f64, union);
    assert_eq!(encoding(c, "xy"), "dense");
    // Merging nothing creates an empty value.
    let _: () = q(c, &["PFMERGE", "empty"]);
    assert_eq!(int(c, &["PFCOUNT", "empty"]), 0);
}

#[test]
fn cached_cardinality_is_invalidated_by_changes_only() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    int(c, &["PFADD", "h", "a", "b", "c"]);
    assert_eq!(bytes(c, "h")[15] & 0x80, 0x80);
    assert_eq!(int(c, &["PFCOUNT", "h"]), 3);
    assert_eq!(&bytes(c, "h")[8..16], &3u64.to_le_bytes());
    int(c, &["PFADD", "h", "a", "b", "c"]);
    assert_eq!(bytes(c, "h")[15], 0);
    int(c, &["PFADD", "h", "1", "2", "3"]);
    assert_eq!(bytes(c, "h")[15], 0x80);
    // A cached count is answered as stored, as Redis does.
    let mut v = bytes(c, "h");
    v[8..16].copy_from_slice(&42u64.to_le_bytes());
    set_bytes(c, "h", &v);
    assert_eq!(int(c, &["PFCOUNT", "h"]), 42);
}

#[test]
fn bad_values_are_refused_with_redis_errors() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let _: () = q(c, &["SET", "str", "bar"]);
    int(c, &["RPUSH", "list", "x"]);
    assert_eq!(err(c, &["PFADD", "str", "1"]), NOT_HLL);
    assert_eq!(err(c, &["PFCOUNT", "str"]), NOT_HLL);
    assert_eq!(err(c, &["PFCOUNT", "list"]), WRONGTYPE);
    assert_eq!(err(c, &["PFMERGE", "dst", "str"]), NOT_HLL);
    assert_eq!(err(c, &["PFMERGE", "str", "dst"]), NOT_HLL);

    int(c, &["PFADD", "h", "a", "b", "c"]);
    int(c, &["APPEND", "h", "hello"]);
    assert_eq!(err(c, &["PFCOUNT", "h"]), CORRUPT);
    assert_eq!(err(c, &["PFADD", "h", "zz"]), CORRUPT);
    // A sparse header on a dense-length body, and the other way round.
    int(c, &["DEL", "h"]);
    int(c, &["PFADD", "h", "a"]);
    int(c, &["SETRANGE", "h", "4", "\x00"]);
    assert_eq!(err(c, &["PFCOUNT", "h"]), NOT_HLL);
    int(c, &["SETRANGE", "h", "4", "x"]);
    assert_eq!(err(c, &["PFCOUNT", "h"]), NOT_HLL);
    // Random byte flips never crash the server.
    let mut v = REDIS_SPARSE_200.to_vec();
    for i in 16..v.len() {
        v[i] ^= 0x5a;
        set_bytes(c, "f", &v);
        let _ = redis::cmd("PFCOUNT").arg("f").query::<redis::Value>(c);
        let _ = redis::cmd("PFADD")
            .arg("f")
            .arg("new")
            .query::<redis::Value>(c);
    }
    assert_eq!(q::<String>(c, &["PING"]), "PONG");
    assert!(err(c, &["PFDEBUG", "NOPE", "rs"]).contains("specified key does not exist"));
    int(c, &["PFADD", "ok"]);
    assert_eq!(
        err(c, &["PFDEBUG", "NOPE", "ok"]),
        "ERR Unknown PFDEBUG subcommand 'NOPE'"
    );
}

#[test]
fn acknowledged_pfadds_survive_kill9() {
    let mut srv = Server::start(&["--durability", "full"]);
    let (sparse, dense, merged) = {
        let c = &mut srv.conn();
        pfadd_range(c, "sp", "s", 0..100);
        for chunk in 0..20 {
            pfadd_range(c, "de", "d", chunk * 1000..(chunk + 1) * 1000);
        }
        let _: () = q(c, &["PFMERGE", "m", "sp", "de"]);
        // One more element, added to the dense value alone: logged as a
        // few changed bytes.
        int(c, &["PFADD", "de", "last-one"]);
        (bytes(c, "sp"), bytes(c, "de"), int(c, &["PFCOUNT", "m"]))
    };
    srv.kill9();
    srv.restart();
    let c = &mut srv.conn();
    assert_eq!(bytes(c, "sp"), sparse);
    assert_eq!(bytes(c, "de"), dense);
    assert_eq!(int(c, &["PFCOUNT", "m"]), merged);
}

/// PFSELFTEST runs Redis's checks of the implementation (registers, the
/// estimate's error up to ten million elements, sparse against dense) and
/// answers OK; ACL CAT hyperloglog lists it, as Redis does.
#[test]
fn pfselftest_passes_and_is_listed() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let reply: String = q(c, &["PFSELFTEST"]);
    assert_eq!(reply, "OK");
    let cat: Vec<String> = q(c, &["ACL", "CAT", "hyperloglog"]);
    for name in ["pfadd", "pfcount", "pfmerge", "pfdebug", "pfselftest"] {
        assert!(cat.contains(&name.to_string()), "{cat:?}");
    }
    assert!(err(c, &["PFSELFTEST", "x"]).contains("wrong number of arguments"));
}
