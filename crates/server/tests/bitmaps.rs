//! Bitmaps and bitfields over real sockets: Redis's replies and error
//! texts, a randomized comparison with a bit-by-bit model, BITFIELD's
//! overflow policies, and bit writes surviving kill -9.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, q, Server, NOT_INTEGER, WRONGTYPE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};

const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BIT_VALUE: &str = "ERR bit is not an integer or out of range";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

fn int(c: &mut Connection, args: &[&str]) -> i64 {
    q(c, args)
}

fn bytes(c: &mut Connection, key: &str) -> Vec<u8> {
    q::<Option<Vec<u8>>>(c, &["GET", key]).unwrap_or_default()
}

fn set_bytes(c: &mut Connection, key: &str, v: &[u8]) {
    let _: () = redis::cmd("SET").arg(key).arg(v).query(c).unwrap();
}

/// A BITFIELD reply: integers, with FAIL'ed writes as `None`.
fn fields(c: &mut Connection, args: &[&str]) -> Vec<Option<i64>> {
    q(c, args)
}

#[test]
fn setbit_and_getbit() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(int(c, &["SETBIT", "b", "7", "1"]), 0);
    assert_eq!(bytes(c, "b"), vec![0x01]);
    assert_eq!(int(c, &["SETBIT", "b", "7", "1"]), 1);
    assert_eq!(int(c, &["SETBIT", "b", "0", "1"]), 0);
    assert_eq!(bytes(c, "b"), vec![0x81]);
    // A far offset zero-fills the gap; clearing a bit past the end still
    // extends the string, as in Redis.
    assert_eq!(int(c, &["SETBIT", "b", "33", "1"]), 0);
    assert_eq!(bytes(c, "b"), vec![0x81, 0, 0, 0, 0x40]);
    assert_eq!(int(c, &["SETBIT", "z", "20", "0"]), 0);
    assert_eq!(bytes(c, "z"), vec![0, 0, 0]);
    assert_eq!(int(c, &["GETBIT", "b", "0"]), 1);
    assert_eq!(int(c, &["GETBIT", "b", "1"]), 0);
    assert_eq!(int(c, &["GETBIT", "b", "33"]), 1);
    assert_eq!(int(c, &["GETBIT", "b", "100000"]), 0);
    assert_eq!(int(c, &["GETBIT", "missing", "5"]), 0);
    // The largest offset is accepted (GETBIT allocates nothing); one more is not.
    assert_eq!(int(c, &["GETBIT", "b", "4294967295"]), 0);
    assert_eq!(err(c, &["GETBIT", "b", "4294967296"]), BIT_OFFSET);
    assert_eq!(err(c, &["SETBIT", "b", "4294967296", "1"]), BIT_OFFSET);
    assert_eq!(err(c, &["SETBIT", "b", "-1", "1"]), BIT_OFFSET);
    assert_eq!(err(c, &["SETBIT", "b", "x", "1"]), BIT_OFFSET);
    assert_eq!(err(c, &["SETBIT", "b", "1", "2"]), BIT_VALUE);
    assert_eq!(err(c, &["SETBIT", "b", "1", "-1"]), BIT_VALUE);
    assert_eq!(err(c, &["SETBIT", "b", "1", "on"]), BIT_VALUE);
    // Integer-looking strings are bitmaps of their text.
    q::<()>(c, &["SET", "n", "1"]);
    assert_eq!(int(c, &["GETBIT", "n", "2"]), 1);
    assert_eq!(int(c, &["SETBIT", "n", "6", "1"]), 0);
    assert_eq!(q::<String>(c, &["GET", "n"]), "3");
    q::<()>(c, &["LPUSH", "l", "x"]);
    assert_eq!(err(c, &["SETBIT", "l", "0", "1"]), WRONGTYPE);
    assert_eq!(err(c, &["GETBIT", "l", "0"]), WRONGTYPE);
    // The key keeps its TTL.
    q::<()>(c, &["SET", "t", "a", "EX", "100"]);
    int(c, &["SETBIT", "t", "100", "1"]);
    assert!(int(c, &["TTL", "t"]) > 90);
}

#[test]
fn setbit_limit_follows_proto_max_bulk_len() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    q::<()>(c, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    let last = (8 * 1024 * 1024 - 1).to_string();
    assert_eq!(int(c, &["SETBIT", "b", &last, "1"]), 0);
    assert_eq!(int(c, &["STRLEN", "b"]), 1024 * 1024);
    assert_eq!(int(c, &["BITCOUNT", "b"]), 1);
    assert_eq!(int(c, &["BITPOS", "b", "1"]), 8 * 1024 * 1024 - 1);
    let past = (8 * 1024 * 1024).to_string();
    assert_eq!(err(c, &["SETBIT", "b", &past, "1"]), BIT_OFFSET);
    // A field starting in range but ending past the limit.
    let near = (8 * 1024 * 1024 - 4).to_string();
    assert_eq!(
        err(c, &["BITFIELD", "b", "SET", "u8", &near, "1"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
}

#[test]
fn bitcount_and_bitpos_ranges_and_errors() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    set_bytes(c, "s", b"foobar");
    assert_eq!(int(c, &["BITCOUNT", "s"]), 26);
    assert_eq!(int(c, &["BITCOUNT", "s", "0", "0"]), 4);
    assert_eq!(int(c, &["BITCOUNT", "s", "1", "1"]), 6);
    assert_eq!(int(c, &["BITCOUNT", "s", "1", "1", "BYTE"]), 6);
    assert_eq!(int(c, &["BITCOUNT", "s", "5", "30", "BIT"]), 17);
    assert_eq!(int(c, &["BITCOUNT", "s", "-2", "-1"]), 7);
    assert_eq!(int(c, &["BITCOUNT", "s", "-1", "-2"]), 0);
    assert_eq!(int(c, &["BITCOUNT", "s", "10", "20"]), 0);
    assert_eq!(int(c, &["BITCOUNT", "s", "-100", "100"]), 26);
    assert_eq!(int(c, &["BITCOUNT", "missing"]), 0);
    assert_eq!(err(c, &["BITCOUNT", "s", "0"]), "ERR syntax error");
    assert_eq!(
        err(c, &["BITCOUNT", "s", "0", "1", "bits"]),
        "ERR syntax error"
    );
    assert_eq!(err(c, &["BITCOUNT", "s", "a", "1"]), NOT_INTEGER);

    set_bytes(c, "p", &[0xff, 0xf0, 0x00]);
    assert_eq!(int(c, &["BITPOS", "p", "0"]), 12);
    assert_eq!(int(c, &["BITPOS", "p", "1", "2"]), -1);
    assert_eq!(int(c, &["BITPOS", "p", "1", "1"]), 8);
    assert_eq!(int(c, &["BITPOS", "p", "0", "2", "-1", "BYTE"]), 16);
    assert_eq!(int(c, &["BITPOS", "p", "1", "7", "15", "BIT"]), 7);
    assert_eq!(int(c, &["BITPOS", "p", "0", "3", "7", "BIT"]), -1);
    set_bytes(c, "ones", &[0xff, 0xff, 0xff]);
    // Without an end the string is padded with zeros; with one it is not.
    assert_eq!(int(c, &["BITPOS", "ones", "0"]), 24);
    assert_eq!(int(c, &["BITPOS", "ones", "0", "0"]), 24);
    assert_eq!(int(c, &["BITPOS", "ones", "0", "0", "-1"]), -1);
    assert_eq!(int(c, &["BITPOS", "missing", "0"]), 0);
    assert_eq!(int(c, &["BITPOS", "missing", "1"]), -1);
    assert_eq!(
        err(c, &["BITPOS", "p", "2"]),
        "ERR The bit argument must be 1 or 0."
    );
    assert_eq!(
        err(c, &["BITPOS", "p", "1", "0", "1", "x"]),
        "ERR syntax error"
    );
    q::<()>(c, &["SADD", "set", "a"]);
    assert_eq!(err(c, &["BITCOUNT", "set"]), WRONGTYPE);
    assert_eq!(err(c, &["BITPOS", "set", "1"]), WRONGTYPE);
}

/// Redis's BITCOUNT/BITPOS semantics, one bit at a time.
struct Model(Vec<u8>);

impl Model {
    fn bit(&self, p: i64) -> bool {
        self.0
            .get((p / 8) as usize)
            .is_some_and(|b| b & (0x80 >> (p % 8)) != 0)
    }

    fn range(&self, start: i64, end: i64, bits: bool) -> Option<(i64, i64)> {
        let total = self.0.len() as i64 * if bits { 8 } else { 1 };
        let norm = |i: i64| if i < 0 { (total + i).max(0) } else { i };
        let (s, e) = (norm(start), norm(end).min(total - 1));
        if s > e {
            return None;
        }
        Some(if bits { (s, e) } else { (s * 8, e * 8 + 7) })
    }

    fn count(&self, range: Option<(i64, i64, bool)>) -> i64 {
        let r = match range {
            None => self.range(0, -1, false),
            Some((s, e, _)) if s < 0 && e < 0 && s > e => None,
            Some((s, e, bits)) => self.range(s, e, bits),
        };
        r.map_or(0, |(lo, hi)| {
            (lo..=hi).filter(|&p| self.bit(p)).count() as i64
        })
    }

    fn pos(&self, want: bool, start: Option<i64>, end: Option<i64>, bits: bool) -> i64 {
        let Some((lo, hi)) = self.range(start.unwrap_or(0), end.unwrap_or(-1), bits) else {
            return -1;
        };
        match (lo..=hi).find(|&p| self.bit(p) == want) {
            Some(p) => p,
            None if !want && end.is_none() => hi + 1,
            None => -1,
        }
    }
}

#[test]
fn randomized_against_a_model() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let mut rng = StdRng::seed_from_u64(0xb17b17);
    for round in 0..6 {
        let key = format!("r{round}");
        let mut m = Model(Vec::new());
        // Rounds differ in size and density so both word scans and edge
        // bytes are exercised, with mostly-set and mostly-clear bitmaps.
        let span: i64 = [40, 200, 1500, 9000, 300, 64][round];
        let density: f64 = [0.5, 0.05, 0.95, 0.01, 0.5, 0.99][round];
        for step in 0..600 {
            match rng.gen_range(0..10) {
                0..=3 => {
                    let off = rng.gen_range(0..span);
                    let on = rng.gen_bool(density);
                    let old = int(
                        c,
                        &["SETBIT", &key, &off.to_string(), if on { "1" } else { "0" }],
                    );
                    assert_eq!(old, i64::from(m.bit(off)), "round {round} step {step}");
                    let byte = (off / 8) as usize;
                    if m.0.len() <= byte {
                        m.0.resize(byte + 1, 0);
                    }
                    let mask = 0x80u8 >> (off % 8);
                    if on {
                        m.0[byte] |= mask;
                    } else {
                        m.0[byte] &= !mask;
                    }
                }
                4 => {
                    let off = rng.gen_range(0..span + 16);
                    let got = int(c, &["GETBIT", &key, &off.to_string()]);
                    assert_eq!(got, i64::from(m.bit(off)));
                }
                5..=6 => {
                    let len = m.0.len() as i64 * 8 + 3;
                    let (s, e) = (rng.gen_range(-len..len), rng.gen_range(-len..len));
                    let unit = ["", "BYTE", "BIT"][rng.gen_range(0..3)];
                    let (s_, e_) = (s.to_string(), e.to_string());
                    let mut args = vec!["BITCOUNT", &key, &s_, &e_];
                    if !unit.is_empty() {
                        args.push(unit);
                    }
                    let want = m.count(Some((s, e, unit == "BIT")));
                    assert_eq!(int(c, &args), want, "{args:?}");
                    assert_eq!(int(c, &["BITCOUNT", &key]), m.count(None));
                }
                _ => {
                    let len = m.0.len() as i64 * 8 + 3;
                    let bit = rng.gen_bool(0.5);
                    let start = rng.gen_bool(0.7).then(|| rng.gen_range(-len..len));
                    let end = start
                        .filter(|_| rng.gen_bool(0.6))
                        .map(|_| rng.gen_range(-len..len));
                    let unit = if end.is_some() {
                        ["", "BYTE", "BIT"][rng.gen_range(0..3)]
                    } else {
                        ""
                    };
                    let (s_, e_) = (
                        start.map(|s| s.to_string()).unwrap_or_default(),
                        end.map(|e| e.to_string()).unwrap_or_default(),
                    );
                    let mut args = vec!["BITPOS", &key, if bit { "1" } else { "0" }];
                    if start.is_some() {
                        args.push(&s_);
                    }
                    if end.is_some() {
                        args.push(&e_);
                    }
                    if !unit.is_empty() {
                        args.push(unit);
                    }
                    if m.0.is_empty() {
                        continue;
                    }
                    let want = m.pos(bit, start, end, unit == "BIT");
                    assert_eq!(int(c, &args), want, "{args:?} on {:02x?}", m.0);
                }
            }
        }
        assert_eq!(bytes(c, &key), m.0, "round {round}: final value");
    }
}

#[test]
fn bitop_combines_and_stores() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    set_bytes(c, "a", &[0xf0, 0x0f, 0xff]);
    set_bytes(c, "b", &[0x3c]);
    assert_eq!(int(c, &["BITOP", "AND", "d", "a", "b"]), 3);
    assert_eq!(bytes(c, "d"), vec![0x30, 0, 0]);
    assert_eq!(int(c, &["BITOP", "or", "d", "a", "b"]), 3);
    assert_eq!(bytes(c, "d"), vec![0xfc, 0x0f, 0xff]);
    assert_eq!(int(c, &["BITOP", "XOR", "d", "a", "b", "missing"]), 3);
    assert_eq!(bytes(c, "d"), vec![0xcc, 0x0f, 0xff]);
    assert_eq!(int(c, &["BITOP", "NOT", "d", "a"]), 3);
    assert_eq!(bytes(c, "d"), vec![0x0f, 0xf0, 0x00]);
    // A missing source is all zeros: AND with it clears everything.
    assert_eq!(int(c, &["BITOP", "AND", "d", "a", "missing"]), 3);
    assert_eq!(bytes(c, "d"), vec![0, 0, 0]);
    // Destination may be a source, of any type, and loses its TTL.
    assert_eq!(int(c, &["BITOP", "NOT", "a", "a"]), 3);
    assert_eq!(bytes(c, "a"), vec![0x0f, 0xf0, 0x00]);
    q::<()>(c, &["RPUSH", "list", "x"]);
    assert_eq!(int(c, &["BITOP", "OR", "list", "b"]), 1);
    assert_eq!(bytes(c, "list"), vec![0x3c]);
    q::<()>(c, &["EXPIRE", "d", "100"]);
    int(c, &["BITOP", "OR", "d", "b"]);
    assert_eq!(int(c, &["TTL", "d"]), -1);
    // An empty result deletes the destination.
    set_bytes(c, "empty", b"");
    assert_eq!(int(c, &["BITOP", "OR", "d", "missing", "empty"]), 0);
    assert_eq!(int(c, &["EXISTS", "d"]), 0);
    assert_eq!(
        err(c, &["BITOP", "NOT", "d", "a", "b"]),
        "ERR BITOP NOT must be called with a single source key."
    );
    assert_eq!(err(c, &["BITOP", "NAND", "d", "a"]), "ERR syntax error");
    q::<()>(c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(c, &["BITOP", "AND", "d", "a", "h"]), WRONGTYPE);
}

#[test]
fn bitfield_get_set_incrby() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    assert_eq!(fields(c, &["BITFIELD", "f"]), vec![]);
    assert_eq!(int(c, &["EXISTS", "f"]), 0);
    assert_eq!(
        fields(
            c,
            &["BITFIELD", "f", "SET", "i8", "0", "-100", "GET", "i8", "0", "GET", "u8", "0"]
        ),
        vec![Some(0), Some(-100), Some(156)]
    );
    // Redis reads the type's sign letter in lower case only.
    for t in ["U8", "I8"] {
        assert!(err(c, &["BITFIELD", "f", "GET", t, "0"]).starts_with("ERR Invalid bitfield type"));
    }
    assert_eq!(
        fields(
            c,
            &[
                "BITFIELD", "f", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "i4",
                "104", "100"
            ]
        ),
        vec![Some(1), Some(7)]
    );
    // #N addresses the Nth field of the type's width.
    assert_eq!(
        fields(
            c,
            &["BITFIELD", "g", "SET", "u8", "#1", "200", "GET", "u8", "8", "GET", "u4", "#2"]
        ),
        vec![Some(0), Some(200), Some(12)]
    );
    assert_eq!(bytes(c, "g"), vec![0, 200]);
    // Extremes of the widest types.
    assert_eq!(
        fields(
            c,
            &[
                "BITFIELD",
                "w",
                "SET",
                "i64",
                "0",
                "-9223372036854775808",
                "GET",
                "i64",
                "0"
            ]
        ),
        vec![Some(0), Some(i64::MIN)]
    );
    assert_eq!(
        fields(
            c,
            &[
                "BITFIELD",
                "w",
                "SET",
                "u63",
                "64",
                "9223372036854775807",
                "GET",
                "u63",
                "64",
                "GET",
                "u1",
                "126"
            ]
        ),
        vec![Some(0), Some(i64::MAX), Some(1)]
    );
    // Redis's regression #3564: fields past the end of a growing string.
    assert_eq!(
        fields(
            c,
            &[
                "BITFIELD", "m", "SET", "i8", "0", "10", "SET", "i8", "64", "10", "INCRBY", "i8",
                "10", "99900"
            ]
        ),
        vec![Some(0), Some(0), Some(60)]
    );
    // BITFIELD_RO reads; writes are refused.
    assert_eq!(
        fields(c, &["BITFIELD_RO", "g", "GET", "u8", "8", "GET", "i8", "8"]),
        vec![Some(200), Some(-56)]
    );
    assert_eq!(
        fields(c, &["BITFIELD_RO", "missing", "GET", "u8", "0"]),
        vec![Some(0)]
    );
    assert_eq!(
        err(c, &["BITFIELD_RO", "g", "SET", "u8", "0", "1"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    for bad in ["u64", "i65", "i0", "x8", "u", "i-1"] {
        assert_eq!(
            err(c, &["BITFIELD", "g", "GET", bad, "0"]),
            BAD_TYPE,
            "{bad}"
        );
    }
    assert_eq!(err(c, &["BITFIELD", "g", "GET", "u8", "-1"]), BIT_OFFSET);
    assert_eq!(err(c, &["BITFIELD", "g", "GET", "u8", "#-1"]), BIT_OFFSET);
    assert_eq!(
        err(c, &["BITFIELD", "g", "SET", "u8", "0", "x"]),
        NOT_INTEGER
    );
    assert_eq!(
        err(c, &["BITFIELD", "g", "SET", "u8", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["BITFIELD", "g", "FROB", "u8", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["BITFIELD", "g", "OVERFLOW", "CLAMP", "GET", "u8", "0"]),
        "ERR Invalid OVERFLOW type specified"
    );
    // A bad argument anywhere means nothing was executed.
    err(
        c,
        &["BITFIELD", "g", "SET", "u8", "0", "7", "GET", "u99", "0"],
    );
    assert_eq!(bytes(c, "g"), vec![0, 200]);
    q::<()>(c, &["SADD", "s", "m"]);
    assert_eq!(err(c, &["BITFIELD", "s", "GET", "u8", "0"]), WRONGTYPE);
    assert_eq!(err(c, &["BITFIELD_RO", "s", "GET", "u8", "0"]), WRONGTYPE);
}

#[test]
fn bitfield_overflow_policies() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let run = |c: &mut Connection, args: &[&str]| fields(c, args);
    // Unsigned: wrap is modulo 2^bits, sat clamps, fail leaves the field.
    q::<()>(c, &["DEL", "u"]);
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "SET", "u8", "0", "250", "INCRBY", "u8", "0", "10"]
        ),
        vec![Some(0), Some(4)]
    );
    assert_eq!(
        run(c, &["BITFIELD", "u", "INCRBY", "u8", "0", "-5"]),
        vec![Some(255)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "OVERFLOW", "SAT", "INCRBY", "u8", "0", "10"]
        ),
        vec![Some(255)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "OVERFLOW", "SAT", "INCRBY", "u8", "0", "-300"]
        ),
        vec![Some(0)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "-1", "GET", "u8", "0"]
        ),
        vec![None, Some(0)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "255"]
        ),
        vec![Some(255)]
    );
    // SET of an out-of-range value follows the policy too (replying the old value).
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "SET", "u8", "0", "-1", "GET", "u8", "0"]
        ),
        vec![Some(255), Some(255)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "SET", "u4", "0", "20", "GET", "u4", "0"]
        ),
        vec![Some(15), Some(4)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "OVERFLOW", "SAT", "SET", "u4", "0", "20", "GET", "u4", "0"]
        ),
        vec![Some(4), Some(15)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "u", "OVERFLOW", "FAIL", "SET", "u4", "0", "16", "GET", "u4", "0"]
        ),
        vec![None, Some(15)]
    );

    // Signed: wrap is two's complement.
    q::<()>(c, &["DEL", "i"]);
    assert_eq!(
        run(
            c,
            &["BITFIELD", "i", "SET", "i8", "0", "127", "INCRBY", "i8", "0", "1"]
        ),
        vec![Some(0), Some(-128)]
    );
    assert_eq!(
        run(c, &["BITFIELD", "i", "INCRBY", "i8", "0", "-1"]),
        vec![Some(127)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "i", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "1000"]
        ),
        vec![Some(127)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "i", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "-1000"]
        ),
        vec![Some(-128)]
    );
    assert_eq!(
        run(
            c,
            &[
                "BITFIELD", "i", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "-1", "INCRBY", "i8",
                "0", "1"
            ]
        ),
        vec![None, Some(-127)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "i", "SET", "i5", "8", "16", "GET", "i5", "8"]
        ),
        vec![Some(0), Some(-16)]
    );
    // The overflow policy applies to the operations after it only.
    assert_eq!(
        run(
            c,
            &[
                "BITFIELD", "i", "SET", "i4", "16", "7", "INCRBY", "i4", "16", "1", "OVERFLOW",
                "FAIL", "INCRBY", "i4", "16", "-1", "INCRBY", "i4", "16", "-1"
            ]
        ),
        vec![Some(0), Some(-8), None, None]
    );
    // i64 at both ends, where the sum does not fit in 64 bits.
    q::<()>(c, &["DEL", "w"]);
    assert_eq!(
        run(
            c,
            &[
                "BITFIELD",
                "w",
                "SET",
                "i64",
                "0",
                "9223372036854775807",
                "INCRBY",
                "i64",
                "0",
                "1"
            ]
        ),
        vec![Some(0), Some(i64::MIN)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "w", "OVERFLOW", "SAT", "INCRBY", "i64", "0", "-1"]
        ),
        vec![Some(i64::MIN)]
    );
    assert_eq!(
        run(
            c,
            &[
                "BITFIELD",
                "w",
                "OVERFLOW",
                "SAT",
                "INCRBY",
                "i64",
                "0",
                "-1",
                "INCRBY",
                "i64",
                "0",
                "9223372036854775807",
                "INCRBY",
                "i64",
                "0",
                "9223372036854775807",
                "INCRBY",
                "i64",
                "0",
                "9"
            ]
        ),
        vec![Some(i64::MIN), Some(-1), Some(i64::MAX - 1), Some(i64::MAX)]
    );
    assert_eq!(
        run(
            c,
            &["BITFIELD", "w", "OVERFLOW", "WRAP", "INCRBY", "u63", "64", "-1"]
        ),
        vec![Some(i64::MAX)]
    );
    // A FAIL'ed write onto a new key still creates it long enough, as in Redis.
    assert_eq!(
        run(
            c,
            &["BITFIELD", "n", "OVERFLOW", "FAIL", "SET", "u2", "20", "9"]
        ),
        vec![None]
    );
    assert_eq!(bytes(c, "n"), vec![0, 0, 0]);
}

#[test]
fn unchanged_bits_are_not_writes() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let changes = |c: &mut Connection| -> i64 {
        let info: String = q(c, &["INFO", "persistence"]);
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = changes(c);
    int(c, &["SETBIT", "k", "3", "0"]);
    fields(c, &["BITFIELD", "f", "INCRBY", "u8", "0", "1"]);
    assert_eq!(changes(c), before + 2, "creating writes count once each");
    int(c, &["SETBIT", "k", "3", "0"]);
    fields(
        c,
        &[
            "BITFIELD", "f", "SET", "u8", "0", "1", "INCRBY", "u8", "0", "0",
        ],
    );
    assert_eq!(changes(c), before + 2, "no-op writes are no changes");
    int(c, &["SETBIT", "k", "3", "1"]);
    int(c, &["SETBIT", "k", "100", "0"]);
    assert_eq!(changes(c), before + 4);
}

#[test]
fn acknowledged_bit_writes_survive_kill9() {
    let mut srv = Server::start(&["--durability", "full"]);
    let mut model = vec![0u8; 0];
    {
        let c = &mut srv.conn();
        let mut rng = StdRng::seed_from_u64(9);
        for _ in 0..300 {
            let off: usize = rng.gen_range(0..20_000);
            int(c, &["SETBIT", "bm", &off.to_string(), "1"]);
            if model.len() <= off / 8 {
                model.resize(off / 8 + 1, 0);
            }
            model[off / 8] |= 0x80 >> (off % 8);
        }
        int(c, &["SETBIT", "far", "1000000", "1"]);
        fields(
            c,
            &[
                "BITFIELD", "bf", "SET", "i16", "#3", "-1234", "INCRBY", "u4", "0", "9",
            ],
        );
        int(c, &["BITOP", "NOT", "inv", "bm"]);
    }
    srv.kill9();
    srv.restart();
    let c = &mut srv.conn();
    assert_eq!(bytes(c, "bm"), model);
    assert_eq!(int(c, &["GETBIT", "far", "1000000"]), 1);
    assert_eq!(int(c, &["STRLEN", "far"]), 125_001);
    assert_eq!(int(c, &["BITCOUNT", "far"]), 1);
    assert_eq!(
        fields(
            c,
            &["BITFIELD_RO", "bf", "GET", "i16", "#3", "GET", "u4", "0"]
        ),
        vec![Some(-1234), Some(9)]
    );
    let inv: Vec<u8> = model.iter().map(|b| !b).collect();
    assert_eq!(bytes(c, "inv"), inv);
}

#[test]
fn reads_taken_before_a_bit_write_keep_their_value() {
    // SETRANGE updates a string in place when nothing shares it; a value
    // already being sent, or held by a transaction's queued reply, must not
    // change under it.
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    set_bytes(c, "v", &[0u8; 64]);
    let replies: Vec<Value> = redis::pipe()
        .cmd("GET")
        .arg("v")
        .cmd("SETBIT")
        .arg("v")
        .arg(0)
        .arg(1)
        .cmd("GET")
        .arg("v")
        .query(c)
        .unwrap();
    let mut after = vec![0u8; 64];
    after[0] = 0x80;
    assert_eq!(replies[0], Value::BulkString(vec![0u8; 64]));
    assert_eq!(replies[2], Value::BulkString(after.clone()));
    q::<()>(c, &["MULTI"]);
    q::<()>(c, &["GET", "v"]);
    q::<()>(c, &["SETBIT", "v", "1", "1"]);
    let out: Vec<Value> = q(c, &["EXEC"]);
    assert_eq!(out[0], Value::BulkString(after));
    assert_eq!(bytes(c, "v")[0], 0xc0);
}
