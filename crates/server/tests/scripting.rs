//! EVAL / EVALSHA / EVAL_RO / SCRIPT against the real binary: conversions,
//! errors, the sandbox, libraries, atomicity, BUSY / SCRIPT KILL, and a
//! script's writes surviving kill -9.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use common::{err as error, q as ok};
use redis::Value;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const GET_SHA: &str = "fd758d1589d044dd850a6f05d52f2eefd27f033f";

#[test]
fn lua_values_become_replies() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        ok::<String>(&mut c, &["EVAL", "return 'hello'", "0"]),
        "hello"
    );
    assert_eq!(ok::<i64>(&mut c, &["EVAL", "return 100.5", "0"]), 100);
    assert_eq!(ok::<i64>(&mut c, &["EVAL", "return -3.9", "0"]), -3);
    // Numbers no integer holds come out as Redis's cast gives them.
    for n in ["1/0", "0/0", "2^63", "-2^70"] {
        assert_eq!(
            ok::<i64>(&mut c, &["EVAL", &format!("return {n}"), "0"]),
            i64::MIN,
            "{n}"
        );
    }
    assert_eq!(ok::<i64>(&mut c, &["EVAL", "return 2^62", "0"]), 1 << 62);
    assert_eq!(ok::<i64>(&mut c, &["EVAL", "return true", "0"]), 1);
    assert_eq!(
        ok::<Value>(&mut c, &["EVAL", "return false", "0"]),
        Value::Nil
    );
    assert_eq!(
        ok::<Value>(&mut c, &["EVAL", "return nil", "0"]),
        Value::Nil
    );
    assert_eq!(
        ok::<Value>(&mut c, &["EVAL", "return {ok='fine'}", "0"]),
        Value::SimpleString("fine".into())
    );
    assert_eq!(
        error(
            &mut c,
            &["EVAL", "return {err='ERR this is an error'}", "0"]
        ),
        "ERR this is an error"
    );
    assert_eq!(
        ok::<Value>(&mut c, &["EVAL", "return {1,2,3,'ciao',{1,2}}", "0"]),
        Value::Array(vec![
            Value::Int(1),
            Value::Int(2),
            Value::Int(3),
            bulk("ciao"),
            Value::Array(vec![Value::Int(1), Value::Int(2)]),
        ])
    );
    // Arrays stop at their first nil.
    assert_eq!(
        ok::<Value>(&mut c, &["EVAL", "return {1,nil,3}", "0"]),
        Value::Array(vec![Value::Int(1)])
    );
    assert_eq!(
        ok::<Value>(&mut c, &["EVAL", "return _G", "0"]),
        Value::Array(vec![])
    );
    assert_eq!(
        error(
            &mut c,
            &[
                "EVAL",
                "return redis.error_reply('MY_CODE custom msg')",
                "0"
            ]
        ),
        "MY_CODE custom msg"
    );
    assert_eq!(
        ok::<Value>(&mut c, &["EVAL", "return redis.status_reply('FINE')", "0"]),
        Value::SimpleString("FINE".into())
    );
}

#[test]
fn replies_become_lua_values() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "n", "0"]);
    let _: () = ok(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    let got: Value = ok(
        &mut c,
        &[
            "EVAL",
            "local i = redis.call('incr', KEYS[1]) \
             local b = redis.call('get', KEYS[1]) \
             local l = redis.call('lrange', KEYS[2], 0, -1) \
             local s = redis.call('set', 'x', 'y') \
             local nilbulk = redis.call('get', 'missing') \
             return {type(i), i, type(b), b, type(l), #l, s['ok'], tostring(nilbulk)}",
            "2",
            "n",
            "l",
        ],
    );
    assert_eq!(
        got,
        Value::Array(vec![
            bulk("number"),
            Value::Int(1),
            bulk("string"),
            bulk("1"),
            bulk("table"),
            Value::Int(3),
            bulk("OK"),
            bulk("false"),
        ])
    );
    // Numbers passed to commands keep every digit (%.17g).
    let got: String = ok(
        &mut c,
        &[
            "EVAL",
            "redis.call('set', 'big', 9007199254740991) return redis.call('get', 'big')",
            "0",
        ],
    );
    assert_eq!(got, "9007199254740991");
    // RESP3 inside the script: a map arrives as {map=...}.
    let _: () = ok(&mut c, &["HSET", "h", "f", "v"]);
    let got: String = ok(
        &mut c,
        &[
            "EVAL",
            "redis.setresp(3) local r = redis.call('hgetall', KEYS[1]) return r['map']['f']",
            "1",
            "h",
        ],
    );
    assert_eq!(got, "v");
}

#[test]
fn keys_argv_and_numkeys() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        strs(
            &mut c,
            &[
                "EVAL",
                "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}",
                "2",
                "a",
                "b",
                "c",
                "d"
            ]
        ),
        ["a", "b", "c", "d"]
    );
    assert_eq!(
        error(&mut c, &["EVAL", "return 1", "-1"]),
        "ERR Number of keys can't be negative"
    );
    assert_eq!(
        error(&mut c, &["EVAL", "return 1", "3", "a"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(error(&mut c, &["EVAL", "return 1", "x"]), NOT_INTEGER);
}

#[test]
fn call_raises_and_pcall_returns_errors() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "s", "text"]);
    let e = error(
        &mut c,
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "s"],
    );
    assert!(
        e.starts_with("ERR value is not an integer or out of range script: ")
            && e.ends_with(", on @user_script:1."),
        "{e}"
    );
    let got: String = ok(
        &mut c,
        &[
            "EVAL",
            "local t = redis.pcall('incr', KEYS[1]) return t['err']",
            "1",
            "s",
        ],
    );
    assert_eq!(got, NOT_INTEGER);
    // Lua's pcall hands back what redis.call raised as its text, as Redis's.
    let e: String = ok(
        &mut c,
        &[
            "EVAL",
            "local ok, e = pcall(redis.call, 'incr', KEYS[1]) \
             return tostring(ok) .. ' ' .. type(e) .. ' ' .. tostring(e:find('^ERR') ~= nil)",
            "1",
            "s",
        ],
    );
    assert_eq!(e, "false string true");
    let e: String = ok(
        &mut c,
        &[
            "EVAL",
            "local ok, e = pcall(function() error({x = 1}) end) return type(e) .. ' ' .. e.x \
             .. ' ' .. select('#', pcall(function() return 1, nil, 3 end))",
            "0",
        ],
    );
    assert_eq!(e, "table 1 4");
    // A pcall'ed error returned as is is an error reply without the suffix.
    assert_eq!(
        error(
            &mut c,
            &["EVAL", "return redis.pcall('incr', KEYS[1])", "1", "s"]
        ),
        NOT_INTEGER
    );
    for (script, want) in [
        (
            "redis.call('nosuchcommand')",
            "ERR Unknown Redis command called from script",
        ),
        (
            "redis.call('get','a','b')",
            "ERR Wrong number of args calling Redis command from script",
        ),
        (
            "redis.call('multi')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "redis.call('eval', 'return 1', 0)",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "redis.call()",
            "ERR Please specify at least one argument for this redis lib call",
        ),
        (
            "redis.call('ping', {})",
            "ERR Lua redis lib command arguments must be strings or integers",
        ),
        (
            "return a + 1",
            "ERR user_script:1: Script attempted to access nonexistent global variable 'a'",
        ),
        ("error('boom')", "ERR user_script:1: boom"),
    ] {
        let e = error(&mut c, &["EVAL", script, "0"]);
        assert!(e.starts_with(want), "{script}: {e}");
        assert!(
            e.contains(" script: ") && e.ends_with(", on @user_script:1."),
            "{script}: {e}"
        );
    }
    // Writes before an error stay, as in Redis.
    let _ = error(
        &mut c,
        &["EVAL", "redis.call('set','w','1') error('x')", "0"],
    );
    assert_eq!(ok::<String>(&mut c, &["GET", "w"]), "1");
    let e = error(&mut c, &["EVAL", "return +", "0"]);
    assert!(
        e.starts_with("ERR Error compiling script (new function): user_script:1:"),
        "{e}"
    );
}

#[test]
fn evalsha_and_the_script_cache() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "mykey", "myval"]);
    assert!(error(&mut c, &["EVALSHA", GET_SHA, "1", "mykey"])
        .starts_with("NOSCRIPT No matching script"));
    assert_eq!(
        ok::<String>(
            &mut c,
            &["EVAL", "return redis.call('get',KEYS[1])", "1", "mykey"]
        ),
        "myval"
    );
    // EVAL cached it; the SHA is case-insensitive.
    assert_eq!(
        ok::<String>(&mut c, &["EVALSHA", GET_SHA, "1", "mykey"]),
        "myval"
    );
    assert_eq!(
        ok::<String>(&mut c, &["EVALSHA", &GET_SHA.to_uppercase(), "1", "mykey"]),
        "myval"
    );
    assert_eq!(
        ok::<String>(&mut c, &["SCRIPT", "LOAD", "return 'loaded'"]),
        "b534286061d4b9e4026607613b95c06c06015ae8"
    );
    assert_eq!(
        ok::<Vec<i64>>(
            &mut c,
            &[
                "SCRIPT",
                "EXISTS",
                GET_SHA,
                "b534286061d4b9e4026607613b95c06c06015ae8",
                "ffff"
            ]
        ),
        [1, 1, 0]
    );
    assert_eq!(
        ok::<String>(
            &mut c,
            &["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"]
        ),
        "loaded"
    );
    let _: () = ok(&mut c, &["SCRIPT", "FLUSH", "ASYNC"]);
    assert_eq!(ok::<Vec<i64>>(&mut c, &["SCRIPT", "EXISTS", GET_SHA]), [0]);
    assert_eq!(
        error(&mut c, &["EVALSHA", GET_SHA, "1", "mykey"]),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    for extra in [&["LATER"][..], &["SYNC", "extra"]] {
        let mut args = vec!["SCRIPT", "FLUSH"];
        args.extend_from_slice(extra);
        assert_eq!(
            error(&mut c, &args),
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
        );
    }
    assert!(
        error(&mut c, &["SCRIPT", "LOAD", "return +"]).starts_with("ERR Error compiling script")
    );
    assert_eq!(
        ok::<String>(
            &mut c,
            &["EVAL", "return redis.sha1hex('Pizza & Mandolino')", "0"]
        ),
        "74822d82031af7493c20eefa13bd07ec4fada82f"
    );
}

#[test]
fn read_only_scripts_refuse_writes() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "foo", "bar"]);
    assert_eq!(
        ok::<String>(
            &mut c,
            &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "foo"]
        ),
        "bar"
    );
    let e = error(
        &mut c,
        &["EVAL_RO", "redis.call('del', KEYS[1])", "1", "foo"],
    );
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts."),
        "{e}"
    );
    // Declared flags without no-writes declare a writer: refused up front.
    assert_eq!(
        error(&mut c, &["EVAL_RO", "#!lua\nreturn 1", "0"]),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(
        ok::<i64>(&mut c, &["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"]),
        1
    );
    // PUBLISH and PFCOUNT reach replicas: Redis refuses them here too.
    for call in [
        "redis.call('publish', 'ch', 'm')",
        "redis.call('pfcount', KEYS[1])",
    ] {
        let e = error(&mut c, &["EVAL_RO", call, "1", "hll"]);
        assert!(
            e.starts_with("ERR Write commands are not allowed from read-only scripts."),
            "{call}: {e}"
        );
    }
    let sha: String = ok(
        &mut c,
        &["SCRIPT", "LOAD", "return redis.call('del', KEYS[1])"],
    );
    assert!(error(&mut c, &["EVALSHA_RO", &sha, "1", "foo"]).starts_with("ERR Write commands"));
    let e = error(
        &mut c,
        &[
            "EVAL",
            "#!lua flags=no-writes\nredis.call('del', KEYS[1])",
            "1",
            "foo",
        ],
    );
    assert!(e.starts_with("ERR Write commands"), "{e}");
    assert_eq!(ok::<String>(&mut c, &["GET", "foo"]), "bar");
    assert!(error(&mut c, &["EVAL", "#!perl\nreturn 1", "0"]).contains("Unexpected engine"));
}

/// The shebang line read as Redis 7.0.15 reads it (its replies, side by
/// side), and numbers passed to redis.call() printed as its `%.17g` does.
#[test]
fn shebangs_and_number_arguments_as_redis_reads_them() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for body in [
        "#!lua\r\nreturn 1",
        "#!lua flags=no-writes\r\nreturn 1",
        "#!lua\tflags=no-writes\nreturn 1",
        "#!lua \"flags=no-writes\"\nreturn 1",
        "#!lua flags=\nreturn 1",
    ] {
        assert_eq!(ok::<i64>(&mut c, &["EVAL", body, "0"]), 1, "{body:?}");
    }
    for (body, want) in [
        (
            "#!lua flags=no-writes,\nreturn 1",
            // The empty flag after the comma (the client trims the space).
            "ERR Unexpected flag in script shebang:",
        ),
        ("#!lua", "ERR Invalid script shebang"),
        (
            "#!lua \"open\nreturn 1",
            "ERR Invalid engine in script shebang",
        ),
        (
            "#!\nreturn 1",
            "ERR Unexpected engine in script shebang: #!",
        ),
    ] {
        assert_eq!(error(&mut c, &["EVAL", body, "0"]), want, "{body:?}");
    }
    let get_after_set = |c: &mut redis::Connection, n: &str| -> String {
        let body = format!("redis.call('set', 'n', {n}) return redis.call('get', 'n')");
        ok(c, &["EVAL", &body, "0"])
    };
    assert_eq!(get_after_set(&mut c, "123456789012"), "123456789012");
    assert_eq!(get_after_set(&mut c, "2^60"), "1.152921504606847e+18");
    assert_eq!(get_after_set(&mut c, "-2^62"), "-4.6116860184273879e+18");
    assert_eq!(get_after_set(&mut c, "0.1"), "0.10000000000000001");
    // Numbers next to zero, and -0, keep their value (mlua hands them over
    // as the integer 0; they are read again as doubles).
    assert_eq!(get_after_set(&mut c, "8e-26"), "8.0000000000000003e-26");
    assert_eq!(get_after_set(&mut c, "-0.0"), "-0");
    assert_eq!(get_after_set(&mut c, "-1e-300"), "-1e-300");
    assert_eq!(get_after_set(&mut c, "0"), "0");
    // The same in cjson (`%.14g`, as lua-cjson prints every number),
    // cmsgpack and RESP3 doubles. Texts and bytes from Redis 7.0.15.
    assert_eq!(
        ok::<String>(
            &mut c,
            &[
                "EVAL",
                "return cjson.encode({1e17, 8e-26, -0.0, 9007199254740993, 2^63, 3, {a=1e-20}})",
                "0"
            ]
        ),
        r#"[1e+17,8e-26,-0,9.007199254741e+15,9.2233720368548e+18,3,{"a":1e-20}]"#
    );
    let packed: Vec<u8> = ok(
        &mut c,
        &["EVAL", "return cmsgpack.pack({8e-26, -0.0, 0})", "0"],
    );
    assert_eq!(packed, b"\x93\xcb\x3a\xb8\xc2\x40\xc4\xae\xcb\x14\x00\x00");
    let mut r = common::RespConn::new(srv.raw());
    r.send(&["HELLO", "3"]);
    r.frame();
    r.send(&["EVAL", "return {double=8e-26}", "0"]);
    r.expect(",8.0000000000000003e-26\r\n");
    r.send(&["EVAL", "return {double=-0.0}", "0"]);
    r.expect(",-0\r\n");
    // A big number goes out as RESP3's, and to RESP2 as a bulk string.
    r.send(&["EVAL", "return {big_number='123'}", "0"]);
    r.expect("(123\r\n");
    assert_eq!(
        ok::<String>(&mut c, &["EVAL", "return {big_number='123'}", "0"]),
        "123"
    );
    assert!(error(
        &mut c,
        &["EVAL", "return redis.call('incrby', 'c', 1e17)", "0"]
    )
    .starts_with("ERR value is not an integer or out of range"));
}

/// INFO and MEMORY run inside a script, as in Redis, although the script
/// holds every shard: their key counts come from what the script holds.
#[test]
fn info_runs_inside_a_script() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "a", "1"]);
    let _: () = ok(&mut c, &["SET", "b", "1", "EX", "100"]);
    let text: String = ok(
        &mut c,
        &[
            "EVAL",
            "redis.call('SET', 'c', '1'); return redis.call('INFO', 'keyspace')",
            "0",
        ],
    );
    assert!(text.contains("db0:keys=3,expires=1"), "{text}");
    let all: String = ok(&mut c, &["EVAL", "return redis.call('INFO')", "0"]);
    assert!(
        all.contains("expired_keys:") && all.contains("redis_version:"),
        "{all}"
    );
    // MEMORY too, USAGE and STATS alike.
    let usage: i64 = ok(
        &mut c,
        &["EVAL", "return redis.call('MEMORY', 'USAGE', 'a')", "0"],
    );
    assert!(usage > 0);
    let stats: Value = ok(
        &mut c,
        &["EVAL", "return redis.call('MEMORY', 'STATS')", "0"],
    );
    assert!(format!("{stats:?}").contains("keys.count"), "{stats:?}");
    // Other clients are served afterwards: nothing was left locked.
    let mut other = srv.conn();
    assert_eq!(ok::<i64>(&mut other, &["DBSIZE"]), 3);
}

#[test]
fn the_sandbox_holds() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for script in [
        "a = 10",
        "redis = 1",
        "_G = {}",
        "redis.call = function() end",
        "cjson.encode = nil",
        "bit.band = nil",
        "setmetatable(_G, {})",
        "getmetatable(_G).__index = {}",
        "rawset(_G, 'x', 1)",
    ] {
        let e = error(&mut c, &["EVAL", script, "0"]);
        assert!(
            e.contains("Attempt to modify a readonly table"),
            "{script}: {e}"
        );
    }
    for name in [
        "os", "io", "loadfile", "dofile", "print", "require", "debug",
    ] {
        let e = error(&mut c, &["EVAL", &format!("return {name}"), "0"]);
        assert!(
            e.contains(&format!(
                "Script attempted to access nonexistent global variable '{name}'"
            )),
            "{name}: {e}"
        );
    }
    let e = error(
        &mut c,
        &[
            "EVAL",
            "return loadstring(string.dump(function() return 1 end))()",
            "0",
        ],
    );
    assert!(e.contains("attempt to call a nil value"), "{e}");
    // Local state is fine, and nothing leaks into the next script.
    assert_eq!(
        ok::<i64>(&mut c, &["EVAL", "local x = 41 return x + 1", "0"]),
        42
    );
    let got: String = ok(
        &mut c,
        &[
            "EVAL",
            "local ok, e = pcall(function() return foo end) return tostring(ok) .. ' ' .. e",
            "0",
        ],
    );
    assert_eq!(
        got,
        "false user_script:1: Script attempted to access nonexistent global variable 'foo'"
    );
}

#[test]
fn cjson_and_bit_round_trip() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let got: String = ok(
        &mut c,
        &[
            "EVAL",
            "return cjson.encode({1, 'two', {three=3}, true})",
            "0",
        ],
    );
    assert_eq!(got, r#"[1,"two",{"three":3},true]"#);
    let got: Value = ok(
        &mut c,
        &[
            "EVAL",
            "local t = cjson.decode(ARGV[1]) return {t.a, t.b[2], tostring(t.c == cjson.null), t.d}",
            "0",
            r#"{"a":"x","b":[1,2.5],"c":null,"d":"/\"q\""}"#,
        ],
    );
    assert_eq!(
        got,
        Value::Array(vec![bulk("x"), Value::Int(2), bulk("true"), bulk("/\"q\"")])
    );
    let got: String = ok(
        &mut c,
        &[
            "EVAL",
            "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')",
            "0",
        ],
    );
    assert_eq!(got, "0 -5000 -1 0.0003 1023.2 0");
    assert_eq!(
        ok::<i64>(
            &mut c,
            &[
                "EVAL",
                "local ok = pcall(cjson.encode, {[false]=1}) return ok and 1 or 0",
                "0"
            ]
        ),
        0
    );
    let got: Value = ok(
        &mut c,
        &[
            "EVAL",
            "return {bit.tobit(0xffffffff), bit.band(0xff, 0x0f), bit.bor(1,2,4), bit.bxor(5,1), \
             bit.bnot(0), bit.lshift(1, 4), bit.rshift(-1, 28), bit.arshift(-16, 2), \
             bit.rol(1, 33), bit.ror(1, 1), bit.tohex(255), bit.tohex(-1, -4), bit.bswap(1)}",
            "0",
        ],
    );
    assert_eq!(
        got,
        Value::Array(vec![
            Value::Int(-1),
            Value::Int(15),
            Value::Int(7),
            Value::Int(4),
            Value::Int(-1),
            Value::Int(16),
            Value::Int(15),
            Value::Int(-4),
            Value::Int(2),
            Value::Int(i32::MIN as i64),
            bulk("000000ff"),
            bulk("FFFF"),
            Value::Int(16777216),
        ])
    );
}

#[test]
fn select_inside_a_script_is_the_scripts_own() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "k", "db0"]);
    let got: String = ok(
        &mut c,
        &[
            "EVAL",
            "redis.call('select', 1) redis.call('set', 'k', 'db1') return redis.call('get', 'k')",
            "0",
        ],
    );
    assert_eq!(got, "db1");
    assert_eq!(ok::<String>(&mut c, &["GET", "k"]), "db0");
}

/// A concurrent reader sees both of a script's writes or neither.
#[test]
fn a_script_is_atomic_for_other_clients() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let _: () = ok(&mut w, &["MSET", "a", "0", "b", "0"]);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let mut r = srv.conn();
        std::thread::spawn(move || {
            let mut seen = 0;
            while !stop.load(Ordering::Relaxed) {
                let v: Vec<i64> = ok(&mut r, &["MGET", "a", "b"]);
                assert_eq!(v[0], v[1], "saw half of a script");
                seen += 1;
            }
            seen
        })
    };
    // The undeclared key `b` is covered too: the script holds every shard.
    for _ in 0..300 {
        let _: i64 = ok(
            &mut w,
            &[
                "EVAL",
                "redis.call('incr', KEYS[1]) for i=1,200 do end return redis.call('incr', 'b')",
                "1",
                "a",
            ],
        );
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(ok::<Vec<i64>>(&mut w, &["MGET", "a", "b"]), [300, 300]);
}

#[test]
fn long_scripts_answer_busy_and_can_be_killed() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "50"]);
    assert_eq!(
        ok::<Vec<String>>(&mut c, &["CONFIG", "GET", "lua-time-limit"]),
        ["lua-time-limit", "50"]
    );
    assert_eq!(
        error(&mut c, &["SCRIPT", "KILL"]),
        "NOTBUSY No scripts in execution right now."
    );
    let runner = {
        let mut r = srv.conn();
        std::thread::spawn(move || error(&mut r, &["EVAL", "while true do end", "0"]))
    };
    wait_for_busy(&mut c);
    assert!(error(&mut c, &["GET", "x"]).starts_with("BUSY Redis is busy running a script."));
    assert_eq!(ok::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    let e = runner.join().unwrap();
    assert!(
        e.starts_with("ERR Script killed by user with SCRIPT KILL..."),
        "{e}"
    );
    assert_eq!(ok::<String>(&mut c, &["PING"]), "PONG");

    // pcall cannot swallow the kill.
    let runner = {
        let mut r = srv.conn();
        std::thread::spawn(move || {
            error(
                &mut r,
                &["EVAL", "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end", "0"],
            )
        })
    };
    wait_for_busy(&mut c);
    assert_eq!(ok::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    assert!(runner.join().unwrap().contains("killed by user"));

    // A script that wrote cannot be killed; it finishes by itself here.
    let runner = {
        let mut r = srv.conn();
        std::thread::spawn(move || {
            ok::<i64>(
                &mut r,
                &[
                    "EVAL",
                    "redis.call('set', KEYS[1], 'y') \
                   local function ms() local t = redis.call('time') return t[1] * 1000 + t[2] / 1000 end \
                   local start = ms() while ms() - start < 800 do end return 7",
                    "1",
                    "x",
                ],
            )
        })
    };
    wait_for_busy(&mut c);
    assert!(error(&mut c, &["SCRIPT", "KILL"]).starts_with("UNKILLABLE"));
    assert_eq!(runner.join().unwrap(), 7);
    assert_eq!(ok::<String>(&mut c, &["GET", "x"]), "y");
}

fn wait_for_busy(c: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match try_q::<String>(c, &["PING"]) {
            Err(e) if error_text(&e).starts_with("BUSY") => return,
            _ => {}
        }
        assert!(Instant::now() < deadline, "the script never became busy");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A script's writes are one log record: after kill -9 all of them are
/// there (the reply waited for the fsync under `full`).
#[test]
fn script_writes_survive_kill9() {
    let mut srv = Server::start(&[]);
    let mut c = srv.conn();
    let n: i64 = ok(
        &mut c,
        &[
            "EVAL",
            "for i = 1, 50 do redis.call('set', 'k' .. i, i) end redis.call('rpush', KEYS[1], 'a', 'b') return 50",
            "1",
            "list",
        ],
    );
    assert_eq!(n, 50);
    // A read-only script writes no record and still answers.
    assert_eq!(
        ok::<String>(&mut c, &["EVAL", "return redis.call('get', 'k7')", "0"]),
        "7"
    );
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    for i in [1, 25, 50] {
        assert_eq!(
            ok::<String>(&mut c, &["GET", &format!("k{i}")]),
            i.to_string()
        );
    }
    assert_eq!(strs(&mut c, &["LRANGE", "list", "0", "-1"]), ["a", "b"]);
    assert_eq!(ok::<i64>(&mut c, &["DBSIZE"]), 51);
}

#[test]
fn eval_inside_multi_runs_at_exec() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["MULTI"]);
    assert_eq!(
        ok::<String>(&mut c, &["EVAL", "return redis.call('incr', 'm')", "0"]),
        "QUEUED"
    );
    assert_eq!(ok::<String>(&mut c, &["INCR", "m"]), "QUEUED");
    assert_eq!(ok::<Vec<i64>>(&mut c, &["EXEC"]), [1, 2]);
}

/// `cmsgpack` and `struct` produce the bytes and errors Redis 7.0's do
/// (expected values taken from redis-server 7.0.15 running the same
/// scripts).
#[test]
fn cmsgpack_and_struct_match_redis() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let hex = "local function hex(s) local h='' for i=1,#s do h=h..string.format('%02x',string.byte(s,i)) end return h end ";
    for (script, want) in [
        ("return hex(cmsgpack.pack(0.1))", "cb3fb999999999999a"),
        ("return hex(cmsgpack.pack(-1099511627776))", "d3ffffff0000000000"),
        (
            "return hex(cmsgpack.pack({1,2,{a=1}}, 1.5, -3, true, false, nil))",
            "93010281a16101ca3fc00000fdc3c2c0",
        ),
        (
            "return hex(cmsgpack.pack({}, {[1]=1,[3]=3}, {[0]=1}, {1.5}, 2^53, 2^63, -2^63, 1/0, -1/0, 0/0))",
            "90820101030381000191ca3fc00000cf0020000000000000ca5f000000d38000000000000000ca7f800000caff800000cbfff8000000000000",
        ),
        (
            "return hex(cmsgpack.pack(2^31, -2^31, 2^32, -129, 255, 256, 65536, -33, -32))",
            "ce80000000d280000000cf0000000100000000d1ff7fccffcd0100ce00010000d0dfe0",
        ),
        (
            "return hex(struct.pack('>i2Bc0s!4d', -2, 255, 'ab', 'cd', 1.5))",
            "fffeff61626364003ff8000000000000",
        ),
        (
            "return hex(struct.pack('<bBhHlLTiIi3I5fd', -1, 200, -300, 60000, -5, 7, 9, -7, 8, -100, 1099511627775, 1.25, -2.5))",
            "ffc8d4fe60eafbffffffffffffff07000000000000000900000000000000f9ffffff080000009cffffffffffffff0000a03f00000000000004c0",
        ),
    ] {
        assert_eq!(ok::<String>(&mut c, &["EVAL", &format!("{hex}{script}"), "0"]), want, "{script}");
    }
    for (script, want) in [
        ("return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 0)}", vec![1, 1]),
        ("return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 2, 1)}", vec![-1, 2, 3]),
        (
            "return {struct.unpack('<bBhHlLi3', struct.pack('<bBhHlLi3', -1, 200, -300, 60000, -5, 7, -100))}",
            vec![-1, 200, -300, 60000, -5, 7, -100, 26],
        ),
        ("return {struct.size('!4bd'), struct.size('i3xh')}", vec![12, 6]),
    ] {
        assert_eq!(ok::<Vec<i64>>(&mut c, &["EVAL", script, "0"]), want, "{script}");
    }
    // Errors reach pcall as strings, as from Redis's C libraries.
    for (script, want) in [
        (
            "return {pcall(cmsgpack.unpack_one, 'abc', 10)}",
            "Start offset 10 greater than input length 3.",
        ),
        (
            "return {pcall(cmsgpack.pack)}",
            "bad argument #0 to '?' (MessagePack pack needs input.)",
        ),
        (
            "return {pcall(cmsgpack.unpack, string.char(0xc1))}",
            "Bad data format in input.",
        ),
        (
            "return {pcall(cmsgpack.unpack, string.char(0xda, 0))}",
            "Missing bytes in input.",
        ),
        (
            "return {pcall(struct.size, 's')}",
            "bad argument #1 to '?' (option 's' has no fixed size)",
        ),
        (
            "return {pcall(struct.pack, 'i33', 1)}",
            "integral size 33 is larger than limit of 32",
        ),
        (
            "return {pcall(struct.pack, 'c3', 'ab')}",
            "bad argument #3 to '?' (string too short)",
        ),
        (
            "return {pcall(struct.unpack, 's', 'ab')}",
            "unfinished string in data",
        ),
    ] {
        assert_eq!(
            ok::<Vec<Value>>(&mut c, &["EVAL", script, "0"]),
            [Value::Nil, bulk(want)],
            "{script}"
        );
    }
    // Big maps and arrays round-trip; cycles stop at 16 levels.
    assert_eq!(
        ok::<i64>(
            &mut c,
            &[
                "EVAL",
                "local t = {} for i = 1, 100000 do t[tostring(i)] = i end \
                 local d = cmsgpack.unpack(cmsgpack.pack(t)) return d['77777']",
                "0"
            ]
        ),
        77777
    );
    assert_eq!(
        ok::<i64>(
            &mut c,
            &[
                "EVAL",
                "local a = {y = 5} a.x = a local re = cmsgpack.unpack(cmsgpack.pack(a)) \
                 return re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.y + (re.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x == nil and 1 or 0)",
                "0"
            ]
        ),
        6
    );
    // Deep nesting is refused, not a stack overflow that aborts the server.
    let e = error(
        &mut c,
        &[
            "EVAL",
            "return cmsgpack.unpack(string.rep(string.char(0x91), 5000) .. string.char(1))",
            "0",
        ],
    );
    assert!(
        e.contains("stack overflow (in function mp_decode_to_lua_array)"),
        "{e}"
    );
    let e = error(
        &mut c,
        &[
            "EVAL",
            "return cmsgpack.unpack(string.rep(string.char(0x81, 1), 5000) .. string.char(1))",
            "0",
        ],
    );
    assert!(
        e.contains("stack overflow (in function mp_decode_to_lua_hash)"),
        "{e}"
    );
    let depth: i64 = ok(
        &mut c,
        &[
            "EVAL",
            "local t = cmsgpack.unpack(string.rep(string.char(0x91), 120) .. string.char(7)) \
             local n = 0 while type(t) == 'table' do t = t[1] n = n + 1 end return n * 10 + t",
            "0",
        ],
    );
    assert_eq!(depth, 1207);
    // The libraries are readonly, in EVAL and in functions.
    assert!(error(&mut c, &["EVAL", "cmsgpack.pack = nil", "0"])
        .contains("Attempt to modify a readonly table"));
    assert!(error(&mut c, &["EVAL", "struct.pack = nil", "0"])
        .contains("Attempt to modify a readonly table"));
    // Every string's metatable is shared by all scripts: none may change
    // it, or the string library behind it, for the scripts after it.
    for script in [
        "getmetatable('').__index = nil",
        "getmetatable('').__add = function() return 1 end",
        "setmetatable('', {})",
    ] {
        let e = error(&mut c, &["EVAL", script, "0"]);
        assert!(e.starts_with("ERR"), "{script}: {e}");
    }
    assert!(try_q::<String>(
        &mut c,
        &["EVAL", "getmetatable('').__index.upper = nil", "0"]
    )
    .is_err());
    let up: String = ok(
        &mut c,
        &["EVAL", "return ('abc'):upper() .. string.rep('x', 2)", "0"],
    );
    assert_eq!(up, "ABCxx");
    let e: String = ok(
        &mut c,
        &["EVAL", "return redis.error_reply('boom')['err']", "0"],
    );
    assert_eq!(e, "ERR boom");
}

#[test]
fn scripts_refuse_blocking_calls_and_sort_sets_in_order() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let err: String = ok(
        &mut c,
        &["EVAL", "return redis.pcall('blpop','x',0)['err']", "0"],
    );
    assert_eq!(err, "ERR This Redis command is not allowed from script");
    let err: String = ok(
        &mut c,
        &[
            "EVAL",
            "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')['err']",
            "1",
            "s",
        ],
    );
    assert_eq!(
        err,
        "ERR xread command is not allowed with BLOCK option from scripts"
    );
    // Without BLOCK it answers at once.
    let v: Value = ok(
        &mut c,
        &[
            "EVAL",
            "return redis.pcall('xread','STREAMS','s','$')",
            "1",
            "s",
        ],
    );
    assert_eq!(v, Value::Nil);

    // A set has no order: a script gets SORT BY <constant> sorted.
    ok::<i64>(&mut c, &["SADD", "s2", "b", "aa", "c", "a"]);
    let got: Vec<String> = ok(
        &mut c,
        &[
            "EVAL",
            "return redis.call('sort',KEYS[1],'by','_')",
            "1",
            "s2",
        ],
    );
    assert_eq!(got, ["a", "aa", "b", "c"]);
}

#[test]
fn refused_script_calls_count_as_rejected() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    ok::<String>(&mut c, &["CONFIG", "RESETSTAT"]);
    let e = error(
        &mut c,
        &["EVAL_RO", "return redis.call('set','x','y')", "1", "x"],
    );
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts"),
        "{e}"
    );
    let info: String = ok(&mut c, &["INFO", "commandstats"]);
    let set = info
        .lines()
        .find(|l| l.starts_with("cmdstat_set:"))
        .unwrap();
    assert!(
        set.contains("calls=0,") && set.contains("rejected_calls=1,failed_calls=0"),
        "{set}"
    );
}

/// The libraries' arguments keep numbers next to zero, and their errors
/// carry the script's line, as Redis's C libraries raise them with
/// `luaL_error` (nothing under pcall, where the caller is C). Bytes and
/// texts from Redis 7.0.15.
#[test]
fn library_arguments_and_errors_as_redis_gives_them() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let eval = |c: &mut redis::Connection, body: &str| -> Vec<u8> { ok(c, &["EVAL", body, "0"]) };
    assert_eq!(eval(&mut c, "return cjson.encode(8e-26)"), b"8e-26");
    assert_eq!(
        eval(&mut c, "return cmsgpack.pack(-0.0, 8e-26)"),
        b"\x00\xcb\x3a\xb8\xc2\x40\xc4\xae\xcb\x14"
    );
    assert_eq!(
        eval(&mut c, "return struct.pack('d', 1e-300)"),
        b"\x59\xf3\xf8\xc2\x1f\x6e\xa5\x01"
    );
    // A tail call, `return cjson.encode(...)`, keeps the script's line
    // and the function's name too, as Redis's C functions do.
    for body in [
        "local s = cjson.encode({1/0}) return s",
        "return cjson.encode({1/0})",
    ] {
        let e = error(&mut c, &["EVAL", body, "0"]);
        assert!(
            e.starts_with(
                "ERR user_script:1: Cannot serialise number: must not be NaN or Inf script: "
            ),
            "{body}: {e}"
        );
    }
    for (body, name) in [
        ("local s = cjson.encode() return s", "encode"),
        ("return cjson.encode()", "encode"),
        ("return cmsgpack.pack()", "pack"),
        ("local f = cjson.encode return f()", "f"),
    ] {
        let e = error(&mut c, &["EVAL", body, "0"]);
        let want = if name == "pack" {
            "ERR user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)"
                .to_string()
        } else {
            format!("ERR user_script:1: bad argument #1 to '{name}' (expected 1 argument)")
        };
        assert!(e.starts_with(&want), "{body}: {e}");
    }
    let caught: String = ok(
        &mut c,
        &[
            "EVAL",
            "local ok, e = pcall(cjson.encode, {1/0}) return e",
            "0",
        ],
    );
    assert_eq!(caught, "Cannot serialise number: must not be NaN or Inf");
    // Argument errors name the function, as luaL_argerror does.
    for (body, want) in [
        (
            "local s = struct.pack('q', 1) return s",
            "bad argument #1 to 'pack' (invalid format option 'q')",
        ),
        (
            "local s = bit.band(1, 'x') return s",
            "bad argument #2 to 'band' (number expected, got string)",
        ),
        (
            "local s = bit.tohex(255, nil) return s",
            "bad argument #2 to 'tohex' (number expected, got nil)",
        ),
        (
            "local s = bit.lshift(1) return s",
            "bad argument #2 to 'lshift' (number expected, got no value)",
        ),
    ] {
        let e = error(&mut c, &["EVAL", body, "0"]);
        assert!(e.starts_with(&format!("ERR user_script:1: {want}")), "{e}");
    }
    assert_eq!(
        ok::<i64>(&mut c, &["EVAL", "return bit.bor(1, 2, 4, '8')", "0"]),
        15
    );
    // Several results still come back from a library call.
    let both: Vec<i64> = ok(
        &mut c,
        &[
            "EVAL",
            "local a, b = cmsgpack.unpack(cmsgpack.pack(1, 2)) return {a, b}",
            "0",
        ],
    );
    assert_eq!(both, [1, 2]);
}

/// EVALSHA with a name that is not 40 characters long answers NOSCRIPT
/// before it reads numkeys, as Redis does; one of the right length reads
/// numkeys first.
#[test]
fn evalsha_of_a_short_name_is_noscript_first() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let noscript = "NOSCRIPT No matching script. Please use EVAL.";
    assert_eq!(error(&mut c, &["EVALSHA", "abc", "1.5"]), noscript);
    assert_eq!(error(&mut c, &["EVALSHA_RO", "abc", "5"]), noscript);
    let forty = "0123456789012345678901234567890123456789";
    assert_eq!(
        error(&mut c, &["EVALSHA", forty, "1.5"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(error(&mut c, &["EVALSHA", forty, "0"]), noscript);
}

/// `cjson.decode` reads JSON as Redis 7.0.15's lua-cjson does: bytes pass
/// through, numbers are read as strtod reads them, a NUL ends the text,
/// nesting stops at 1,000, and a parse error says where, in lua-cjson's
/// words. Every expected value here is what redis-server 7.0.15 returned.
#[test]
fn cjson_decodes_as_redis_does() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let eval = |c: &mut redis::Connection, body: &str| -> redis::Value {
        redis::cmd("EVAL").arg(body).arg(0).query(c).unwrap()
    };
    let bulk = |b: &[u8]| redis::Value::BulkString(b.to_vec());
    for (body, want) in [
        (r#"return cjson.decode('"\255\254"')"#, bulk(b"\xff\xfe")),
        (r#"return cjson.decode('"a\tb"')"#, bulk(b"a\tb")),
        (
            r#"return cjson.decode('"\\u00e9\\ud83d\\ude00"')"#,
            bulk("é😀".as_bytes()),
        ),
        (r#"return cjson.decode('"\\u0000"')"#, bulk(b"\0")),
        ("return cjson.decode('0x10')", redis::Value::Int(16)),
        ("return cjson.decode('01')", redis::Value::Int(1)),
        ("return cjson.decode('-inf')", redis::Value::Int(i64::MIN)),
        ("return tostring(cjson.decode('nan'))", bulk(b"nan")),
        ("return tostring(cjson.decode('Infinity'))", bulk(b"inf")),
        ("return tostring(cjson.decode('[1e400]')[1])", bulk(b"inf")),
        ("return cjson.decode('+5')", redis::Value::Int(5)),
        ("return cjson.decode(12)", redis::Value::Int(12)),
        (r#"return cjson.decode('[1]\0 x')[1]"#, redis::Value::Int(1)),
        (
            "return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))",
            redis::Value::Int(2000),
        ),
        (
            r#"local t = cjson.decode('{"a":[1,{"b":null}],"a2":"\\/\\b"}') return {t.a2, tostring(t.a[2].b == cjson.null)}"#,
            redis::Value::Array(vec![bulk(b"/\x08"), bulk(b"true")]),
        ),
        (
            "local t = {} local c = t for i = 1, 999 do c[1] = {} c = c[1] end return #cjson.encode(t)",
            redis::Value::Int(2000),
        ),
        // Encoding keeps bytes as they are, invalid UTF-8 included.
        (r#"return cjson.encode('\255\254')"#, bulk(b"\"\xff\xfe\"")),
        (
            r#"return cjson.encode(cjson.decode('{"k":"\255"}'))"#,
            bulk(b"{\"k\":\"\xff\"}"),
        ),
    ] {
        assert_eq!(eval(&mut c, body), want, "{body}");
    }
    for (body, want) in [
        ("local x = cjson.decode('[1,') return x", "Expected value but found T_END at character 4"),
        ("local x = cjson.decode('[1 2]') return x", "Expected comma or array end but found T_NUMBER at character 4"),
        (r#"local x = cjson.decode('{"a" 1}') return x"#, "Expected colon but found T_NUMBER at character 6"),
        ("local x = cjson.decode('{1:2}') return x", "Expected object key string but found T_NUMBER at character 2"),
        (r#"local x = cjson.decode('{"a":1,}') return x"#, "Expected object key string but found T_OBJ_END at character 8"),
        ("local x = cjson.decode('tru') return x", "Expected value but found invalid token at character 1"),
        (r#"local x = cjson.decode('"abc') return x"#, "Expected value but found unexpected end of string at character 5"),
        (r#"local x = cjson.decode('"a\0b"') return x"#, "Expected value but found unexpected end of string at character 3"),
        (r#"local x = cjson.decode('"\\x"') return x"#, "Expected value but found invalid escape code at character 2"),
        (r#"local x = cjson.decode('"\\ud83d"') return x"#, "Expected value but found invalid unicode escape code at character 2"),
        ("local x = cjson.decode('') return x", "Expected value but found T_END at character 1"),
        ("local x = cjson.decode('[1] x') return x", "Expected the end but found invalid token at character 5"),
        ("local x = cjson.decode('1.5e') return x", "Expected the end but found invalid token at character 4"),
        ("local x = cjson.decode('-') return x", "Expected value but found invalid number at character 1"),
        (r#"local x = cjson.decode('a\0') return x"#, "JSON parser does not support UTF-16 or UTF-32"),
        (
            "local x = cjson.decode(string.rep('[', 1001)) return x",
            "Found too many nested data structures (1001) at character 1001",
        ),
        (
            "local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end local s = cjson.encode(t) return s",
            "Cannot serialise, excessive nesting (1001)",
        ),
        ("local x = cjson.decode() return x", "bad argument #1 to 'decode' (expected 1 argument)"),
        ("local x = cjson.decode({}) return x", "bad argument #1 to 'decode' (string expected, got table)"),
        (
            "cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '01') cjson.decode_invalid_numbers(true) error(e)",
            "Expected value but found invalid number at character 1",
        ),
    ] {
        let e = error(&mut c, &["EVAL", body, "0"]);
        assert!(e.starts_with(&format!("ERR user_script:1: {want}")), "{body}: {e}");
    }
}

/// A script's status and error tables reach the client as Redis 7.0.15
/// writes them: up to the first NUL, line breaks that end an error
/// dropped and others turned into spaces, an empty error left empty.
#[test]
fn status_and_error_replies_of_scripts_as_redis_writes_them() {
    let srv = Server::start(&[]);
    let mut c = srv.raw();
    for (body, want) in [
        ("return {err=''}", &b"-\r\n"[..]),
        ("return {err='  '}", b"-  \r\n"),
        ("return {err='x\\r\\n'}", b"-x\r\n"),
        ("return {err='a\\r\\nb'}", b"-a  b\r\n"),
        ("return {err='a\\0b'}", b"-a\r\n"),
        ("return {ok='a\\0b'}", b"+a\r\n"),
        ("return redis.error_reply('')", b"-ERR \r\n"),
        ("return redis.error_reply('a\\0b')", b"-ERR a\r\n"),
        ("return redis.status_reply('\\0')", b"+\r\n"),
    ] {
        let cmd = format!(
            "*3\r\n$4\r\nEVAL\r\n${}\r\n{body}\r\n$1\r\n0\r\n",
            body.len()
        );
        c.write_all(cmd.as_bytes()).unwrap();
        let mut got = vec![0u8; want.len()];
        c.read_exact(&mut got).unwrap();
        assert_eq!(got, want, "{body}: {}", String::from_utf8_lossy(&got));
    }
    let mut c = srv.conn();
    let e = error(&mut c, &["EVAL", "error({err='x\\r\\n'})", "0"]);
    assert!(e.starts_with("x   script: "), "{e}");
    let e = error(&mut c, &["EVAL", "error('a\\0b')", "0"]);
    assert!(e.starts_with("ERR user_script:1: a script: "), "{e}");
}

/// A field a library does not have is nil, as in Redis: scripts test for
/// features that way. A global Redis leaves out is an error, as there.
#[test]
fn missing_library_fields_are_nil() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let got: Vec<String> = ok(
        &mut c,
        &[
            "EVAL",
            "return {type(cjson.version), type(bit.foo), type(cmsgpack.unpack_one), type(struct.foo)}",
            "0",
        ],
    );
    assert_eq!(got, ["nil", "nil", "function", "nil"]);
    let e = error(&mut c, &["EVAL", "cjson.foo = 1", "0"]);
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
    // Globals Redis 7.0 leaves out are missing here too.
    for name in ["getfenv", "setfenv", "newproxy"] {
        let e = error(&mut c, &["EVAL", &format!("return type({name})"), "0"]);
        assert!(
            e.contains(&format!(
                "Script attempted to access nonexistent global variable '{name}'"
            )),
            "{e}"
        );
    }
}

/// A script or function that returns many values replies with the first,
/// as Redis does, and the server goes on (Lua 5.1's xpcall and pcall,
/// handed all of them, push past their stack space: a debug build's Lua
/// aborted).
#[test]
fn many_return_values_reply_with_the_first() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let first: i64 = ok(
        &mut c,
        &[
            "EVAL",
            "return string.byte(string.rep('x', 4000), 1, -1)",
            "0",
        ],
    );
    assert_eq!(first, 120);
    // So does a script's own pcall that returns them all (Lua's pcall
    // tripped the API check of a debug build's Lua).
    let n: i64 = ok(
        &mut c,
        &[
            "EVAL",
            "local t = {pcall(string.byte, string.rep('x', 4000), 1, -1)} return #t",
            "0",
        ],
    );
    assert_eq!(n, 4001);
    let _: String = ok(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=many\nredis.register_function('many', function() return unpack({7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28}) end)",
        ],
    );
    assert_eq!(ok::<i64>(&mut c, &["FCALL", "many", "0"]), 7);
    assert_eq!(ok::<String>(&mut c, &["PING"]), "PONG");
}

/// Thousands of distinct scripts stay cached and runnable: each compiled
/// script once held a slot of mlua's auxiliary stack, which runs out
/// near 8,000, and every new script after that dropped its connection.
#[test]
fn many_distinct_scripts_keep_running() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for i in 0..9_000i64 {
        let n: i64 = ok(&mut c, &["EVAL", &format!("return {i}"), "0"]);
        assert_eq!(n, i);
    }
    // The first ones are still cached, by SHA.
    let sha: String = ok(&mut c, &["SCRIPT", "LOAD", "return 0"]);
    assert_eq!(ok::<i64>(&mut c, &["EVALSHA", &sha, "0"]), 0);
    assert_eq!(ok::<String>(&mut c, &["PING"]), "PONG");
}
