//! FUNCTION and FCALL against the real binary: loading and the load-time
//! sandbox, calling, LIST / STATS / DELETE / FLUSH, DUMP / RESTORE, flags,
//! FUNCTION KILL, MULTI, and libraries surviving kill -9, with and without
//! a checkpoint in between.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use common::{err as error, q as ok};
use redis::Value;
use std::time::{Duration, Instant};

/// A library `lib` with one function `name` whose body is `body`.
fn library(lib: &str, name: &str, body: &str) -> String {
    format!(
        "#!lua name={lib}\nredis.register_function('{name}', function(KEYS, ARGV)\n {body} \nend)"
    )
}

fn load(c: &mut redis::Connection, code: &str) -> String {
    ok(c, &["FUNCTION", "LOAD", code])
}

fn load_error(c: &mut redis::Connection, code: &str) -> String {
    error(c, &["FUNCTION", "LOAD", "REPLACE", code])
}

#[test]
fn load_call_replace_and_delete() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let code = library(
        "mylib",
        "setter",
        "return redis.call('set', KEYS[1], ARGV[1])",
    );
    assert_eq!(load(&mut c, &code), "mylib");
    assert_eq!(
        ok::<String>(&mut c, &["FCALL", "setter", "1", "k", "v"]),
        "OK"
    );
    assert_eq!(ok::<String>(&mut c, &["GET", "k"]), "v");
    // Function names are case-insensitive, library names are not.
    assert_eq!(
        ok::<String>(&mut c, &["FCALL", "SETTER", "1", "k", "w"]),
        "OK"
    );
    assert_eq!(
        error(&mut c, &["FUNCTION", "LOAD", &code]),
        "ERR Library 'mylib' already exists"
    );
    assert_eq!(
        error(&mut c, &["FUNCTION", "LOAD", "foo", &code]),
        "ERR Unknown option given: foo"
    );
    assert_eq!(
        error(&mut c, &["FCALL", "nosuch", "0"]),
        "ERR Function not found"
    );
    assert_eq!(
        error(&mut c, &["FCALL", "setter", "x"]),
        "ERR Bad number of keys provided"
    );
    assert_eq!(
        error(&mut c, &["FCALL", "setter", "3", "a"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        error(&mut c, &["FCALL", "setter", "-1", "a"]),
        "ERR Number of keys can't be negative"
    );
    // REPLACE swaps the code; a failed REPLACE keeps the old library.
    let v2 = library("mylib", "setter", "return 'v2'");
    assert_eq!(
        ok::<String>(&mut c, &["FUNCTION", "LOAD", "REPLACE", &v2]),
        "mylib"
    );
    assert_eq!(ok::<String>(&mut c, &["FCALL", "setter", "0"]), "v2");
    assert!(
        load_error(&mut c, &library("mylib", "setter", "bad code here"))
            .starts_with("ERR Error compiling function: user_function:")
    );
    assert_eq!(ok::<String>(&mut c, &["FCALL", "setter", "0"]), "v2");
    // Another library may not take an existing function name.
    assert_eq!(
        load_error(&mut c, &library("other", "Setter", "return 1")),
        "ERR Function Setter already exists"
    );
    assert_eq!(ok::<String>(&mut c, &["FUNCTION", "DELETE", "mylib"]), "OK");
    assert_eq!(
        error(&mut c, &["FCALL", "setter", "0"]),
        "ERR Function not found"
    );
    assert_eq!(
        error(&mut c, &["FUNCTION", "DELETE", "mylib"]),
        "ERR Library not found"
    );
    // Errors name the function and the library's line.
    load(
        &mut c,
        &library("errs", "boom", "return redis.call('nosuchcmd')"),
    );
    assert_eq!(
        error(&mut c, &["FCALL", "boom", "0"]),
        "ERR Unknown Redis command called from script script: boom, on @user_function:3."
    );
}

#[test]
fn metadata_and_load_time_sandbox() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let body = "\nredis.register_function('f', function() return 1 end)";
    for (shebang, want) in [
        ("#!lua", "ERR Library name was not given"),
        ("#!lua name=a name=b", "ERR Invalid metadata value, name argument was given multiple times"),
        ("#!lua name=a foo=bar", "ERR Invalid metadata value given: foo=bar"),
        ("#! name=a", "ERR Engine '' not found"),
        ("#!js name=a", "ERR Engine 'js' not found"),
        ("#!lua name=a.b", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
    ] {
        assert_eq!(load_error(&mut c, &format!("{shebang}{body}")), want, "{shebang}");
    }
    assert_eq!(
        load_error(&mut c, "return 1"),
        "ERR Missing library metadata"
    );
    assert_eq!(
        ok::<String>(
            &mut c,
            &["FUNCTION", "LOAD", &format!("#!LUA name=\"quoted\"{body}")]
        ),
        "quoted"
    );
    // Only register_function, log and the version exist while loading.
    // Each message is Redis 7.0.15's, after "Error registering functions: ".
    for (code, want) in [
        ("return math.random()", "ERR user_function:2: Script attempted to access nonexistent global variable 'math'"),
        ("return redis.call('ping')", "ERR user_function:2: Script attempted to access nonexistent global variable 'call'"),
        ("redis.setresp(3)", "ERR user_function:2: Script attempted to access nonexistent global variable 'setresp'"),
        ("error('boom')", "ERR user_function:2: Script attempted to access nonexistent global variable 'error'"),
        ("a = 1", "ERR user_function:2: Attempt to modify a readonly table"),
        ("redis.register_function()", "ERR wrong number of arguments to redis.register_function"),
        ("redis.register_function('f')", "ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."),
        ("redis.register_function(nil, function() end)", "ERR first argument to redis.register_function must be a string"),
        ("redis.register_function('f', 'x')", "ERR second argument to redis.register_function must be a function"),
        ("redis.register_function('a-b', function() end)", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
        ("redis.register_function{function_name='f'}", "ERR redis.register_function must get a callback argument"),
        ("redis.register_function{callback=function() end}", "ERR redis.register_function must get a function name argument"),
        ("redis.register_function{function_name='f', callback=function() end, flags={'bogus'}}", "ERR unknown flag given"),
        ("redis.register_function{function_name='f', callback=function() end, flags='no-writes'}", "ERR flags argument to redis.register_function must be a table representing function flags"),
        ("redis.register_function{function_name='f', callback=function() end, other=1}", "ERR unknown argument given to redis.register_function"),
        ("redis.register_function('f', function() end) redis.register_function('f', function() end)", "ERR Function already exists in the library"),
        ("local a = 1 while true do a = a + 1 end", "ERR FUNCTION LOAD timeout"),
    ] {
        let e = load_error(&mut c, &format!("#!lua name=sandbox\n{code}"));
        assert_eq!(e, format!("ERR Error registering functions: {want}"), "{code}");
    }
    // After a load that timed out, scripts see the usual globals again.
    assert_eq!(
        ok::<i64>(&mut c, &["EVAL", "return math.floor(2.5)", "0"]),
        2
    );
    assert_eq!(
        load_error(&mut c, "#!lua name=empty\nreturn 1"),
        "ERR No functions registered"
    );
    // Nothing of a failed load stays behind.
    assert_eq!(
        ok::<Vec<Value>>(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME", "sandbox"]),
        []
    );
    // At call time the library API is gone: a captured `redis` of the load
    // refuses both changes and registration.
    load(
        &mut c,
        "#!lua name=sneaky\nlocal lib = redis\n\
         redis.register_function('f1', function() lib.x = 1 end)\n\
         redis.register_function('f2', function() lib.register_function('f3', function() end) end)\n\
         redis.register_function('f4', function() return redis.register_function('f5', function() end) end)",
    );
    assert!(error(&mut c, &["FCALL", "f1", "0"]).contains("Attempt to modify a readonly table"));
    assert!(error(&mut c, &["FCALL", "f2", "0"])
        .contains("redis.register_function can only be called on FUNCTION LOAD command"));
    assert!(error(&mut c, &["FCALL", "f4", "0"])
        .contains("attempt to call field 'register_function' (a nil value)"));
    // Functions see the usual globals and libraries when called.
    load(
        &mut c,
        "#!lua name=globals\nlocal function add(a, b) return a + b end\n\
         redis.register_function('g', function(keys, args) return {add(1, 2), cjson.encode({1}), redis.call('ping')} end)",
    );
    assert_eq!(
        ok::<Value>(&mut c, &["FCALL", "g", "0"]),
        Value::Array(vec![
            Value::Int(3),
            bulk("[1]"),
            Value::SimpleString("PONG".into())
        ])
    );
}

#[test]
fn list_stats_flush_and_help() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    load(
        &mut c,
        "#!lua name=lib1\n\
         redis.register_function{function_name='f1', callback=function() return 1 end, description='first', flags={'no-writes', 'allow-oom'}}\n\
         redis.register_function('f2', function() return 2 end)",
    );
    load(&mut c, &library("lib2", "f3", "return 3"));
    let list: Value = ok(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME", "*1"]);
    assert_eq!(
        list,
        Value::Array(vec![Value::Array(vec![
            bulk("library_name"),
            bulk("lib1"),
            bulk("engine"),
            bulk("LUA"),
            bulk("functions"),
            Value::Array(vec![
                Value::Array(vec![
                    bulk("name"),
                    bulk("f1"),
                    bulk("description"),
                    bulk("first"),
                    bulk("flags"),
                    Value::Array(vec![
                        Value::SimpleString("no-writes".into()),
                        Value::SimpleString("allow-oom".into())
                    ]),
                ]),
                Value::Array(vec![
                    bulk("name"),
                    bulk("f2"),
                    bulk("description"),
                    Value::Nil,
                    bulk("flags"),
                    Value::Array(vec![]),
                ]),
            ]),
        ])])
    );
    let with_code: Vec<Vec<Value>> = ok(
        &mut c,
        &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "lib2"],
    );
    assert_eq!(with_code[0][6], bulk("library_code"));
    assert_eq!(with_code[0][7], bulk(&library("lib2", "f3", "return 3")));
    for (args, want) in [
        (vec!["bad"], "ERR Unknown argument bad"),
        (
            vec!["LIBRARYNAME"],
            "ERR library name argument was not given",
        ),
        (
            vec!["WITHCODE", "WITHCODE"],
            "ERR Unknown argument WITHCODE",
        ),
    ] {
        let mut full = vec!["FUNCTION", "LIST"];
        full.extend(args);
        assert_eq!(error(&mut c, &full), want);
    }
    let stats: Value = ok(&mut c, &["FUNCTION", "STATS"]);
    assert_eq!(
        stats,
        Value::Array(vec![
            bulk("running_script"),
            Value::Nil,
            bulk("engines"),
            Value::Array(vec![
                bulk("LUA"),
                Value::Array(vec![
                    bulk("libraries_count"),
                    Value::Int(2),
                    bulk("functions_count"),
                    Value::Int(3)
                ])
            ]),
        ])
    );
    // RESP3 gets maps.
    let mut c3 = resp3(&srv);
    let stats3: Value = ok(&mut c3, &["FUNCTION", "STATS"]);
    assert!(matches!(stats3, Value::Map(_)), "{stats3:?}");
    assert_eq!(
        error(&mut c, &["FUNCTION", "FLUSH", "bad"]),
        "ERR FUNCTION FLUSH only supports SYNC|ASYNC option"
    );
    assert_eq!(
        error(&mut c, &["FUNCTION", "FLUSH", "SYNC", "extra"]),
        "ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP."
    );
    // FLUSHALL leaves libraries alone; FUNCTION FLUSH removes them.
    let _: () = ok(&mut c, &["FLUSHALL"]);
    assert_eq!(ok::<i64>(&mut c, &["FCALL", "f3", "0"]), 3);
    assert_eq!(ok::<String>(&mut c, &["FUNCTION", "FLUSH", "ASYNC"]), "OK");
    assert_eq!(ok::<Vec<Value>>(&mut c, &["FUNCTION", "LIST"]), []);
    assert_eq!(
        error(&mut c, &["FCALL", "f3", "0"]),
        "ERR Function not found"
    );
    assert_eq!(
        error(&mut c, &["FUNCTION", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try FUNCTION HELP."
    );
    assert_eq!(
        error(&mut c, &["FUNCTION", "DELETE"]),
        "ERR wrong number of arguments for 'function|delete' command"
    );
    let help: Vec<String> = ok(&mut c, &["FUNCTION", "HELP"]);
    assert!(help[0].starts_with("FUNCTION <subcommand>"));
    assert!(help.iter().any(|l| l.starts_with("RESTORE <PAYLOAD>")));
}

#[test]
fn dump_and_restore_policies() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    load(&mut c, &library("lib1", "f1", "return 'one'"));
    let payload: Vec<u8> = ok(&mut c, &["FUNCTION", "DUMP"]);
    // Redis's layout: FUNCTION2 opcode, the code, RDB version 10, CRC64.
    assert_eq!(payload[0], 245);
    assert_eq!(&payload[payload.len() - 10..payload.len() - 8], &[10, 0]);
    let restore = |c: &mut redis::Connection, policy: Option<&str>| -> redis::RedisResult<String> {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("RESTORE").arg(&payload);
        if let Some(p) = policy {
            cmd.arg(p);
        }
        cmd.query(c)
    };
    // APPEND (the default) refuses an existing library.
    let e = restore(&mut c, None).unwrap_err();
    assert_eq!(error_text(&e), "ERR Library lib1 already exists");
    let _: String = ok(&mut c, &["FUNCTION", "FLUSH"]);
    assert_eq!(restore(&mut c, None).unwrap(), "OK");
    assert_eq!(ok::<String>(&mut c, &["FCALL", "f1", "0"]), "one");
    // REPLACE swaps the library; a function taken by another library stops it.
    let _: String = ok(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            &library("lib1", "f1", "return 'new'"),
        ],
    );
    assert_eq!(restore(&mut c, Some("REPLACE")).unwrap(), "OK");
    assert_eq!(ok::<String>(&mut c, &["FCALL", "f1", "0"]), "one");
    let _: String = ok(&mut c, &["FUNCTION", "FLUSH"]);
    load(&mut c, &library("lib2", "F1", "return 'two'"));
    let e = restore(&mut c, Some("REPLACE")).unwrap_err();
    assert_eq!(error_text(&e), "ERR Function f1 already exists");
    assert_eq!(ok::<String>(&mut c, &["FCALL", "f1", "0"]), "two");
    // FLUSH replaces everything.
    assert_eq!(restore(&mut c, Some("FLUSH")).unwrap(), "OK");
    assert_eq!(ok::<String>(&mut c, &["FCALL", "f1", "0"]), "one");
    assert_eq!(
        ok::<Vec<Value>>(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME", "lib2"]),
        []
    );
    let e = restore(&mut c, Some("MERGE")).unwrap_err();
    assert_eq!(
        error_text(&e),
        "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
    );
    // Damage anywhere is caught by the checksum; nothing changes.
    for at in [0, 3, payload.len() - 9, payload.len() - 1] {
        let mut bad = payload.clone();
        bad[at] ^= 1;
        let e: redis::RedisError = redis::cmd("FUNCTION")
            .arg("RESTORE")
            .arg(bad)
            .arg("FLUSH")
            .query::<String>(&mut c)
            .unwrap_err();
        assert_eq!(
            error_text(&e),
            "ERR DUMP payload version or checksum are wrong"
        );
    }
    assert_eq!(ok::<String>(&mut c, &["FCALL", "f1", "0"]), "one");
    assert_eq!(
        error(&mut c, &["FUNCTION", "RESTORE", "a", "b", "c"]),
        "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP."
    );
}

#[test]
fn flags_and_fcall_ro() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    load(
        &mut c,
        "#!lua name=flags\n\
         redis.register_function('writer', function(keys) return redis.call('set', keys[1], 'w') end)\n\
         redis.register_function{function_name='reader', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}\n\
         redis.register_function{function_name='sneaky', callback=function(keys) return redis.call('set', keys[1], 's') end, flags={'no-writes'}}",
    );
    assert_eq!(ok::<String>(&mut c, &["FCALL", "writer", "1", "x"]), "OK");
    assert_eq!(ok::<String>(&mut c, &["FCALL_RO", "reader", "1", "x"]), "w");
    assert_eq!(ok::<String>(&mut c, &["FCALL", "reader", "1", "x"]), "w");
    assert_eq!(
        error(&mut c, &["FCALL_RO", "writer", "1", "x"]),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert!(error(&mut c, &["FCALL", "sneaky", "1", "x"])
        .starts_with("ERR Write commands are not allowed from read-only scripts."));
    // FUNCTION and FCALL are not for scripts.
    assert!(error(
        &mut c,
        &["EVAL", "return redis.call('fcall', 'reader', 1, 'x')", "0"]
    )
    .contains("This Redis command is not allowed from script"));
    assert!(error(&mut c, &["FCALL", "writer", "0"]).contains("ERR"));
}

fn wait_for_busy(c: &mut redis::Connection) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match try_q::<String>(c, &["PING"]) {
            Err(e) if error_text(&e).starts_with("BUSY") => return error_text(&e),
            _ => {}
        }
        assert!(Instant::now() < deadline, "the script never became busy");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn function_kill_and_stats_while_busy() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["CONFIG", "SET", "busy-reply-threshold", "50"]);
    assert_eq!(
        error(&mut c, &["FUNCTION", "KILL"]),
        "NOTBUSY No scripts in execution right now."
    );
    load(
        &mut c,
        &library("spin", "spin", "local a = 1 while true do a = a + 1 end"),
    );
    let runner = {
        let mut r = srv.conn();
        std::thread::spawn(move || error(&mut r, &["FCALL", "spin", "0", "extra"]))
    };
    assert_eq!(
        wait_for_busy(&mut c),
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    );
    let stats: Vec<Value> = ok(&mut c, &["FUNCTION", "STATS"]);
    let Value::Array(running) = &stats[1] else {
        panic!("no running_script: {stats:?}");
    };
    assert_eq!(
        running[..4],
        [
            bulk("name"),
            bulk("spin"),
            bulk("command"),
            Value::Array(vec![bulk("FCALL"), bulk("spin"), bulk("0"), bulk("extra")])
        ]
    );
    assert_eq!(running[4], bulk("duration_ms"));
    // SCRIPT KILL does not stop a function.
    assert!(error(&mut c, &["SCRIPT", "KILL"]).contains("FUNCTION KILL"));
    assert_eq!(ok::<String>(&mut c, &["FUNCTION", "KILL"]), "OK");
    assert!(runner.join().unwrap().contains("Script killed by user"));
    assert_eq!(ok::<String>(&mut c, &["PING"]), "PONG");
    // And FUNCTION KILL does not stop an EVAL.
    let runner = {
        let mut r = srv.conn();
        std::thread::spawn(move || error(&mut r, &["EVAL", "while true do end", "0"]))
    };
    wait_for_busy(&mut c);
    assert!(error(&mut c, &["FUNCTION", "KILL"]).contains("You can only call SCRIPT KILL"));
    assert!(error(&mut c, &["FUNCTION", "STATS"]).starts_with("BUSY"));
    assert_eq!(ok::<String>(&mut c, &["SCRIPT", "KILL"]), "OK");
    runner.join().unwrap();
}

#[test]
fn functions_inside_multi() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["MULTI"]);
    for args in [
        vec![
            "FUNCTION",
            "LOAD",
            &library("m", "m1", "return redis.call('incr', KEYS[1])") as &str,
        ],
        vec!["FCALL", "m1", "1", "n"],
        vec![
            "FUNCTION",
            "LOAD",
            "REPLACE",
            &library("m", "m1", "return 'again'"),
        ],
        vec!["SET", "plain", "1"],
        vec!["FCALL", "m1", "0"],
    ] {
        assert_eq!(ok::<String>(&mut c, &args), "QUEUED");
    }
    assert_eq!(
        ok::<Value>(&mut c, &["EXEC"]),
        Value::Array(vec![
            bulk("m"),
            Value::Int(1),
            bulk("m"),
            Value::Okay,
            bulk("again")
        ])
    );
}

/// LOAD acknowledged, kill -9, restart: the library is back (from the log);
/// then a checkpoint, more changes, kill -9: the checkpoint's libraries
/// plus the logged changes after it.
#[test]
fn libraries_survive_kill9_and_checkpoints() {
    let mut srv = Server::start(&[]);
    let mut c = srv.conn();
    load(
        &mut c,
        &library("keep", "counter", "return redis.call('incr', KEYS[1])"),
    );
    load(&mut c, &library("gone", "gone", "return 0"));
    let _: String = ok(&mut c, &["FUNCTION", "DELETE", "gone"]);
    assert_eq!(ok::<i64>(&mut c, &["FCALL", "counter", "1", "n"]), 1);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(ok::<i64>(&mut c, &["FCALL", "counter", "1", "n"]), 2);
    assert_eq!(
        error(&mut c, &["FCALL", "gone", "0"]),
        "ERR Function not found"
    );

    // A checkpoint holds the libraries; the log after it replays on top.
    let _: String = ok(&mut c, &["SAVE"]);
    load(&mut c, &library("after", "after", "return 'after'"));
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(ok::<i64>(&mut c, &["FCALL", "counter", "1", "n"]), 3);
    assert_eq!(ok::<String>(&mut c, &["FCALL", "after", "0"]), "after");
    let stats: Vec<Value> = ok(&mut c, &["FUNCTION", "STATS"]);
    assert_eq!(
        stats[3],
        Value::Array(vec![
            bulk("LUA"),
            Value::Array(vec![
                bulk("libraries_count"),
                Value::Int(2),
                bulk("functions_count"),
                Value::Int(2)
            ])
        ])
    );

    // A flush after a checkpoint stays flushed; a restore after it too.
    let payload: Vec<u8> = ok(&mut c, &["FUNCTION", "DUMP"]);
    let _: String = ok(&mut c, &["SAVE"]);
    let _: String = ok(&mut c, &["FUNCTION", "FLUSH"]);
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(ok::<Vec<Value>>(&mut c, &["FUNCTION", "LIST"]), []);
    let _: String = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query(&mut c)
        .unwrap();
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(ok::<String>(&mut c, &["FCALL", "after", "0"]), "after");
    // Only a checkpoint left to recover from: SAVE, then a clean restart.
    let _: String = ok(&mut c, &["SAVE"]);
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(ok::<i64>(&mut c, &["FCALL", "counter", "1", "n"]), 4);
}

/// Libraries of thousands of functions, loaded again and again: every
/// registered callback was once a value held in Rust, each taking a slot
/// of mlua's auxiliary stack, which runs out near 8,000; a library of
/// 9,000 functions then failed to load (`ERR C stack overflow`).
#[test]
fn thousands_of_functions_stay_callable() {
    let mut srv = Server::start(&[]);
    let mut c = srv.conn();
    let code = "#!lua name=many\nfor i = 1, 9000 do\n redis.register_function('f' .. i, function() return i end)\nend";
    load(&mut c, code);
    for _ in 0..3 {
        let _: String = ok(&mut c, &["FUNCTION", "LOAD", "REPLACE", code]);
    }
    for i in ["1", "4500", "9000"] {
        assert_eq!(ok::<String>(&mut c, &["FCALL", &format!("f{i}"), "0"]), i);
    }
    for i in 0..50 {
        load(
            &mut c,
            &library(&format!("l{i}"), &format!("g{i}"), "return 7"),
        );
    }
    assert_eq!(ok::<i64>(&mut c, &["FCALL", "g49", "0"]), 7);
    assert_eq!(ok::<String>(&mut c, &["FCALL", "f9000", "0"]), "9000");
    // Recovery loads them all again, into a new VM.
    srv.kill9();
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(ok::<String>(&mut c, &["FCALL", "f8999", "0"]), "8999");
}
