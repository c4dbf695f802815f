//! ACL (Redis 7.2 semantics) against the real binary: users and their
//! rules (SETUSER / GETUSER / LIST / USERS / DELUSER), logging in (AUTH,
//! HELLO, requirepass), command / key / channel permissions (also inside
//! MULTI and scripts), selectors, CAT / GENPASS / DRYRUN / LOG, users from
//! the command line and from an ACL file (SAVE / LOAD, restarts), and
//! malformed requests that must leave the server serving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use durakv_protocol::Frame;
use redis::Value;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

// SHA-256 of the test passwords, lower-case hex, as ACL GETUSER, ACL LIST
// and `#<hash>` rules spell them (`printf %s p1 | sha256sum`).
const SHA_P1: &str = "f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a";
const SHA_P2: &str = "3946ca64ff78d93ca61090a437cbb6b3d2ca0d488f5f9ccf3059608368b27693";
const SHA_P3: &str = "43bb00d0ce7790a53b91256b370c887b24791a5539a6fbfb70c5870e8c91ae5d";
const SHA_PW: &str = "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4";
const SHA_B: &str = "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d";
const SHA_SECRET: &str = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b";

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
const NOPERM_KEY: &str = "NOPERM No permissions to access a key";
const NOPERM_CHANNEL: &str = "NOPERM No permissions to access a channel";

/// The NOPERM error for a command `user` may not run (`cmd` as Redis names
/// it, `container|sub` for subcommands).
fn noperm_cmd(user: &str, cmd: &str) -> String {
    format!("NOPERM User {user} has no permissions to run the '{cmd}' command")
}

/// `ACL SETUSER name rules...`, which must succeed.
fn setuser(c: &mut redis::Connection, name: &str, rules: &[&str]) {
    let mut args = vec!["ACL", "SETUSER", name];
    args.extend_from_slice(rules);
    assert_eq!(q::<String>(c, &args), "OK", "{args:?}");
}

/// `ACL SETUSER name rules...`, which must fail; returns the error.
fn setuser_err(c: &mut redis::Connection, name: &str, rules: &[&str]) -> String {
    let mut args = vec!["ACL", "SETUSER", name];
    args.extend_from_slice(rules);
    err(c, &args)
}

/// `AUTH user pass`: "OK" or the error text.
fn auth(c: &mut redis::Connection, user: &str, pass: &str) -> String {
    match try_q::<String>(c, &["AUTH", user, pass]) {
        Ok(s) => s,
        Err(e) => error_text(&e),
    }
}

/// A new connection (its client library's set-up ran as `default`)
/// logged in as `user`.
fn login(srv: &Server, user: &str, pass: &str) -> redis::Connection {
    let mut c = srv.conn();
    assert_eq!(auth(&mut c, user, pass), "OK", "AUTH {user} {pass}");
    c
}

/// A raw RESP2 connection logged in as `user`.
fn raw_login(srv: &Server, user: &str, pass: &str) -> RespConn {
    let mut r = RespConn::new(srv.raw());
    r.send(&["AUTH", user, pass]);
    assert_eq!(r.frame(), Frame::Simple("OK".into()));
    r
}

fn err_frame(text: &str) -> Frame {
    Frame::Error(bytes::Bytes::copy_from_slice(text.as_bytes()))
}

/// A string-like reply as text.
fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::VerbatimString { text, .. } => text.clone(),
        other => panic!("expected a string reply, got {other:?}"),
    }
}

/// An array (or set) of string-like replies.
fn texts(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("expected an array reply, got {other:?}"),
    }
}

/// A map reply (a flat key, value array in RESP2) as ordered pairs.
fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(items) => {
            assert!(items.len() % 2 == 0, "odd-length map {items:?}");
            items
                .chunks(2)
                .map(|kv| (text(&kv[0]), kv[1].clone()))
                .collect()
        }
        Value::Map(items) => items.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        other => panic!("expected a map reply, got {other:?}"),
    }
}

/// `ACL GETUSER name` as field → value; panics if the user is unknown.
fn getuser(c: &mut redis::Connection, name: &str) -> HashMap<String, Value> {
    let v: Value = q(c, &["ACL", "GETUSER", name]);
    assert_ne!(v, Value::Nil, "ACL GETUSER {name}: no such user");
    pairs(&v).into_iter().collect()
}

/// One string field of `ACL GETUSER name`.
fn user_field(c: &mut redis::Connection, name: &str, field: &str) -> String {
    text(&getuser(c, name)[field])
}

fn flags(c: &mut redis::Connection, name: &str) -> Vec<String> {
    texts(&getuser(c, name)["flags"])
}

fn passwords(c: &mut redis::Connection, name: &str) -> Vec<String> {
    texts(&getuser(c, name)["passwords"])
}

/// The `ACL LIST` line describing `name`.
fn list_line(c: &mut redis::Connection, name: &str) -> String {
    let lines = strs(c, &["ACL", "LIST"]);
    let head = format!("user {name} ");
    lines
        .iter()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no ACL LIST line for {name}: {lines:?}"))
        .clone()
}

/// `ACL LOG [args]` entries, newest first, as field → value.
fn acl_log(c: &mut redis::Connection, args: &[&str]) -> Vec<HashMap<String, Value>> {
    let mut full = vec!["ACL", "LOG"];
    full.extend_from_slice(args);
    let v: Value = q(c, &full);
    match v {
        Value::Array(entries) => entries
            .iter()
            .map(|e| pairs(e).into_iter().collect())
            .collect(),
        other => panic!("ACL LOG: expected an array, got {other:?}"),
    }
}

fn int_field(e: &HashMap<String, Value>, field: &str) -> i64 {
    match &e[field] {
        Value::Int(i) => *i,
        other => panic!("{field}: expected an integer, got {other:?}"),
    }
}

/// The (reason, context, object, username) of a log entry.
fn log_what(e: &HashMap<String, Value>) -> (String, String, String, String) {
    (
        text(&e["reason"]),
        text(&e["context"]),
        text(&e["object"]),
        text(&e["username"]),
    )
}

fn what(reason: &str, context: &str, object: &str, user: &str) -> (String, String, String, String) {
    (reason.into(), context.into(), object.into(), user.into())
}

/// True once the server closed `c`: the next command fails with an I/O
/// error rather than a reply.
fn closed(c: &mut redis::Connection) -> bool {
    match try_q::<Value>(c, &["PING"]) {
        Ok(_) => false,
        Err(e) => {
            assert!(
                e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error(),
                "expected the connection to be closed, got the reply {e}"
            );
            true
        }
    }
}

/// Writes an ACL file in its own directory (kept apart from the data
/// directory) and returns the directory and the file's path.
fn acl_file(contents: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users.acl");
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn whoami_is_default_and_users_lists_names_sorted() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "default");
    assert_eq!(strs(&mut c, &["ACL", "USERS"]), ["default"]);
    setuser(&mut c, "zed", &[]);
    setuser(&mut c, "alice", &[]);
    setuser(&mut c, "bob", &[]);
    assert_eq!(
        strs(&mut c, &["ACL", "USERS"]),
        ["alice", "bob", "default", "zed"]
    );
    // Creating users does not change who this connection is.
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "default");
}

#[test]
fn a_new_user_is_off_with_no_passwords_commands_keys_or_channels() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    setuser(&mut c, "alice", &[]);

    let lines = strs(&mut c, &["ACL", "LIST"]);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("user alice "), "sorted: {lines:?}");
    assert!(lines[1].starts_with("user default "), "sorted: {lines:?}");
    // Redis 7.2: "user alice off sanitize-payload resetchannels -@all"
    // (acl-pubsub-default resetchannels); whether sanitize-payload is shown
    // is not checked.
    let alice = &lines[0];
    assert!(alice.starts_with("user alice off "), "{alice}");
    assert!(alice.ends_with(" resetchannels -@all"), "{alice}");
    for absent in ["nopass", "#", "~", "&", "+"] {
        assert!(!alice.contains(absent), "{absent:?} in {alice}");
    }
    // Redis 7.2: "user default on nopass sanitize-payload ~* &* +@all".
    let default = &lines[1];
    assert!(default.starts_with("user default on nopass "), "{default}");
    assert!(default.ends_with(" ~* &* +@all"), "{default}");

    let f = flags(&mut c, "alice");
    assert!(f.contains(&"off".to_string()), "{f:?}");
    assert!(!f.contains(&"on".to_string()), "{f:?}");
    assert!(!f.contains(&"nopass".to_string()), "{f:?}");
    assert!(passwords(&mut c, "alice").is_empty());
    assert_eq!(user_field(&mut c, "alice", "commands"), "-@all");
    assert_eq!(user_field(&mut c, "alice", "keys"), "");
    assert_eq!(user_field(&mut c, "alice", "channels"), "");

    // SETUSER on an existing user with no rules changes nothing.
    setuser(&mut c, "alice", &[]);
    assert_eq!(list_line(&mut c, "alice"), *alice);
}

#[test]
fn usernames_with_spaces_or_nul_are_refused() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for name in ["a b", "a\u{0}b", " ", "tab\tbed"] {
        assert_eq!(
            setuser_err(&mut c, name, &["on"]),
            "ERR Usernames can't contain spaces or null characters",
            "{name:?}"
        );
    }
    assert_eq!(strs(&mut c, &["ACL", "USERS"]), ["default"]);
}

#[test]
fn bad_rules_are_refused_and_change_nothing() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        setuser_err(&mut c, "alice", &["bogus"]),
        "ERR Error in ACL SETUSER modifier 'bogus': Syntax error"
    );
    // A failed SETUSER does not create the user either.
    assert_eq!(strs(&mut c, &["ACL", "USERS"]), ["default"]);

    setuser(&mut c, "alice", &[]);
    let before = list_line(&mut c, "alice");
    // All or nothing: "on" and ">pw" before the bad rule are not applied.
    assert_eq!(
        setuser_err(&mut c, "alice", &["on", ">pw", "bogus"]),
        "ERR Error in ACL SETUSER modifier 'bogus': Syntax error"
    );
    assert_eq!(list_line(&mut c, "alice"), before);
    assert!(flags(&mut c, "alice").contains(&"off".to_string()));
    assert_eq!(auth(&mut c, "alice", "pw"), WRONGPASS);

    assert_eq!(
        setuser_err(&mut c, "alice", &["+nosuchcommand"]),
        "ERR Error in ACL SETUSER modifier '+nosuchcommand': Unknown command or category name in ACL"
    );
    assert_eq!(
        setuser_err(&mut c, "alice", &["+@nosuchcategory"]),
        "ERR Error in ACL SETUSER modifier '+@nosuchcategory': Unknown command or category name in ACL"
    );
    assert_eq!(
        setuser_err(&mut c, "alice", &["allkeys", "~k*"]),
        "ERR Error in ACL SETUSER modifier '~k*': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
    );
    assert_eq!(
        setuser_err(&mut c, "alice", &["allchannels", "&news"]),
        "ERR Error in ACL SETUSER modifier '&news': Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
    );
    assert_eq!(list_line(&mut c, "alice"), before);
}

#[test]
fn auth_and_hello_log_in_only_enabled_users_with_a_right_password() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    let mut c = srv.conn();

    // Off, then off with a password, then an unknown user.
    setuser(&mut admin, "alice", &[]);
    assert_eq!(auth(&mut c, "alice", "pw"), WRONGPASS);
    setuser(&mut admin, "alice", &[">pw"]);
    assert_eq!(auth(&mut c, "alice", "pw"), WRONGPASS);
    assert_eq!(auth(&mut c, "nosuch", "pw"), WRONGPASS);
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "default");

    setuser(
        &mut admin,
        "alice",
        &["on", ">pw", "+get", "+acl|whoami", "~k*"],
    );
    assert_eq!(auth(&mut c, "alice", "wrong"), WRONGPASS);
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "default");
    assert_eq!(auth(&mut c, "alice", "pw"), "OK");
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "alice");
    // A failed AUTH keeps the current user.
    assert_eq!(auth(&mut c, "alice", "wrong"), WRONGPASS);
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "alice");

    // HELLO's AUTH option: refused, then accepted with RESP3's map.
    let mut r = RespConn::new(srv.raw());
    r.send(&["HELLO", "3", "AUTH", "alice", "wrong"]);
    assert_eq!(r.frame(), err_frame(WRONGPASS));
    r.send(&["HELLO", "3", "AUTH", "alice", "pw"]);
    let hello = r.frame();
    assert!(matches!(hello, Frame::Map(_)), "{hello:?}");
    r.send(&["ACL", "WHOAMI"]);
    assert_eq!(r.frame(), Frame::bulk_from_str("alice"));

    // HELLO acts on AUTH and SETNAME where they stand, as Redis 7.0 does:
    // a bad option after them leaves the login and the name in place, and
    // the protocol as it was.
    let mut r = RespConn::new(srv.raw());
    r.send(&["HELLO", "3", "AUTH", "alice", "pw", "SETNAME", "n1", "BAR"]);
    assert_eq!(
        r.frame(),
        err_frame("ERR Syntax error in HELLO option 'BAR'")
    );
    r.send(&["ACL", "WHOAMI"]);
    assert_eq!(r.frame(), Frame::bulk_from_str("alice"));
    let list: String = q(&mut srv.conn(), &["CLIENT", "LIST"]);
    assert!(list.contains(" name=n1 "), "{list}");
    r.send(&["HELLO", "2", "AUTH", "alice", "wrong", "SETNAME", "a b"]);
    assert_eq!(r.frame(), err_frame(WRONGPASS));
    r.send(&["HELLO", "2", "SETNAME", "a b", "AUTH", "alice", "wrong"]);
    assert_eq!(
        r.frame(),
        err_frame("ERR Client names cannot contain spaces, newlines or special characters.")
    );
}

#[test]
fn commands_categories_and_subcommands_are_checked() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(&mut admin, "alice", &["on", ">pw", "+get", "~k*"]);
    let mut a = login(&srv, "alice", "pw");

    assert_eq!(q::<Option<String>>(&mut a, &["GET", "k1"]), None);
    assert_eq!(err(&mut a, &["SET", "k1", "v"]), noperm_cmd("alice", "set"));
    assert_eq!(err(&mut a, &["GET", "other"]), NOPERM_KEY);
    // Unknown commands and wrong arity are reported before permissions.
    let e = err(&mut a, &["NOSUCHCOMMAND", "x"]);
    assert!(e.starts_with("ERR unknown command"), "{e}");
    assert_eq!(
        err(&mut a, &["SET", "k1"]),
        "ERR wrong number of arguments for 'set' command"
    );
    assert_eq!(q::<Option<String>>(&mut admin, &["GET", "k1"]), None);

    // Rule changes apply to connections already logged in.
    setuser(&mut admin, "alice", &["+@string"]);
    assert_eq!(q::<String>(&mut a, &["SET", "k1", "v"]), "OK");
    assert_eq!(q::<String>(&mut a, &["GET", "k1"]), "v");
    assert_eq!(
        err(&mut a, &["LPUSH", "k2", "x"]),
        noperm_cmd("alice", "lpush")
    );

    setuser(&mut admin, "alice", &["-@all", "+@read", "~*"]);
    assert_eq!(q::<Option<String>>(&mut a, &["GET", "other"]), None);
    assert_eq!(q::<i64>(&mut a, &["EXISTS", "k1"]), 1);
    assert_eq!(
        err(&mut a, &["SET", "k1", "v2"]),
        noperm_cmd("alice", "set")
    );
    assert_eq!(err(&mut a, &["DEL", "k1"]), noperm_cmd("alice", "del"));

    setuser(&mut admin, "alice", &["+@all", "-@dangerous"]);
    assert_eq!(q::<String>(&mut a, &["SET", "k1", "v3"]), "OK");
    assert_eq!(err(&mut a, &["FLUSHALL"]), noperm_cmd("alice", "flushall"));
    assert_eq!(q::<String>(&mut admin, &["GET", "k1"]), "v3");

    // One subcommand of a container command.
    setuser(&mut admin, "alice", &["-@all", "+client|id"]);
    let _: i64 = q(&mut a, &["CLIENT", "ID"]);
    assert_eq!(
        err(&mut a, &["CLIENT", "KILL", "ID", "999999"]),
        noperm_cmd("alice", "client|kill")
    );
    assert_eq!(err(&mut a, &["GET", "k1"]), noperm_cmd("alice", "get"));
}

#[test]
fn auth_and_hello_need_no_permission() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(&mut admin, "nobody", &["on", "nopass", "-@all"]);
    let mut c = login(&srv, "nobody", "anything");
    assert_eq!(err(&mut c, &["PING"]), noperm_cmd("nobody", "ping"));
    assert_eq!(
        err(&mut c, &["ACL", "WHOAMI"]),
        noperm_cmd("nobody", "acl|whoami")
    );
    let hello: Value = q(&mut c, &["HELLO", "2"]);
    assert!(!pairs(&hello).is_empty(), "{hello:?}");
    assert_eq!(auth(&mut c, "nobody", "again"), "OK");
    // Back to default (nopass: any password).
    assert_eq!(auth(&mut c, "default", "whatever"), "OK");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "default");
}

#[test]
fn read_and_write_key_patterns() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(
        &mut admin,
        "kp",
        &["on", "nopass", "+@all", "%R~r*", "%W~w*", "~both*"],
    );
    assert_eq!(user_field(&mut admin, "kp", "keys"), "%R~r* %W~w* ~both*");
    let _: () = q(&mut admin, &["SET", "r1", "from-admin"]);
    let mut c = login(&srv, "kp", "x");

    assert_eq!(q::<String>(&mut c, &["GET", "r1"]), "from-admin");
    assert_eq!(err(&mut c, &["SET", "r1", "v"]), NOPERM_KEY);
    assert_eq!(q::<String>(&mut c, &["SET", "w1", "v"]), "OK");
    assert_eq!(err(&mut c, &["GET", "w1"]), NOPERM_KEY);
    assert_eq!(q::<String>(&mut c, &["SET", "both1", "v"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "both1"]), "v");
    assert_eq!(err(&mut c, &["GET", "other"]), NOPERM_KEY);
    // Every key of a multi-key command is checked.
    assert_eq!(err(&mut c, &["MGET", "r1", "other"]), NOPERM_KEY);
    assert_eq!(err(&mut c, &["MSET", "w1", "a", "r1", "b"]), NOPERM_KEY);
    assert_eq!(q::<String>(&mut admin, &["GET", "r1"]), "from-admin");
    // Commands without keys need no key permission.
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");

    // allkeys / ~* allow every key; resetkeys removes them all.
    setuser(&mut admin, "kp", &["allkeys"]);
    assert_eq!(user_field(&mut admin, "kp", "keys"), "~*");
    assert_eq!(q::<String>(&mut c, &["SET", "r1", "mine"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "w1"]), "v");
    setuser(&mut admin, "kp", &["resetkeys"]);
    assert_eq!(user_field(&mut admin, "kp", "keys"), "");
    assert_eq!(err(&mut c, &["GET", "r1"]), NOPERM_KEY);
    setuser(&mut admin, "kp", &["~*"]);
    assert_eq!(q::<String>(&mut c, &["GET", "r1"]), "mine");
}

#[test]
fn copy_and_lmove_need_read_on_the_source_and_write_on_the_destination() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(
        &mut admin,
        "mover",
        &["on", "nopass", "+@all", "%R~r*", "%W~w*", "~both*"],
    );
    let _: () = q(&mut admin, &["SET", "r1", "x"]);
    let _: () = q(&mut admin, &["SET", "w1", "y"]);
    let _: i64 = q(&mut admin, &["RPUSH", "rlist", "a"]);
    let _: i64 = q(&mut admin, &["RPUSH", "bothlist", "a", "b"]);
    let mut c = login(&srv, "mover", "x");

    // COPY reads its source and writes its destination.
    assert_eq!(q::<i64>(&mut c, &["COPY", "r1", "w2"]), 1);
    assert_eq!(q::<String>(&mut admin, &["GET", "w2"]), "x");
    assert_eq!(err(&mut c, &["COPY", "w1", "w3"]), NOPERM_KEY);
    assert_eq!(err(&mut c, &["COPY", "r1", "r2"]), NOPERM_KEY);

    // LMOVE also removes from its source: read and write there.
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "bothlist", "wlist", "LEFT", "RIGHT"]),
        "a"
    );
    assert_eq!(
        err(&mut c, &["LMOVE", "rlist", "wlist", "LEFT", "RIGHT"]),
        NOPERM_KEY
    );
    assert_eq!(
        err(&mut c, &["LMOVE", "bothlist", "rlist", "LEFT", "RIGHT"]),
        NOPERM_KEY
    );
    assert_eq!(strs(&mut admin, &["LRANGE", "rlist", "0", "-1"]), ["a"]);
    assert_eq!(strs(&mut admin, &["LRANGE", "bothlist", "0", "-1"]), ["b"]);
    assert_eq!(strs(&mut admin, &["LRANGE", "wlist", "0", "-1"]), ["a"]);
}

#[test]
fn channel_permissions_for_publish_subscribe_and_psubscribe() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(
        &mut admin,
        "sub",
        &["on", "nopass", "+@all", "resetchannels", "&news.*"],
    );
    assert_eq!(user_field(&mut admin, "sub", "channels"), "&news.*");
    let mut p = login(&srv, "sub", "x");
    assert_eq!(q::<i64>(&mut p, &["PUBLISH", "news.1", "x"]), 0);
    assert_eq!(err(&mut p, &["PUBLISH", "other", "x"]), NOPERM_CHANNEL);

    let mut r = raw_login(&srv, "sub", "x");
    r.send(&["SUBSCRIBE", "other"]);
    assert_eq!(r.frame(), err_frame(NOPERM_CHANNEL));
    // One channel not allowed refuses the whole command.
    r.send(&["SUBSCRIBE", "news.2", "other"]);
    assert_eq!(r.frame(), err_frame(NOPERM_CHANNEL));
    r.send(&["SUBSCRIBE", "news.1"]);
    assert_eq!(
        r.frame(),
        Frame::Array(vec![
            Frame::bulk_from_str("subscribe"),
            Frame::bulk_from_str("news.1"),
            Frame::Integer(1),
        ])
    );
    // A pattern subscription must name an allowed pattern literally.
    r.send(&["PSUBSCRIBE", "news.*"]);
    assert_eq!(
        r.frame(),
        Frame::Array(vec![
            Frame::bulk_from_str("psubscribe"),
            Frame::bulk_from_str("news.*"),
            Frame::Integer(2),
        ])
    );
    r.send(&["PSUBSCRIBE", "news.1*"]);
    assert_eq!(r.frame(), err_frame(NOPERM_CHANNEL));
    r.send(&["PSUBSCRIBE", "*"]);
    assert_eq!(r.frame(), err_frame(NOPERM_CHANNEL));

    // allchannels / &* allow everything.
    setuser(&mut admin, "sub", &["allchannels"]);
    assert_eq!(user_field(&mut admin, "sub", "channels"), "&*");
    assert_eq!(q::<i64>(&mut p, &["PUBLISH", "other", "x"]), 0);
    r.send(&["PSUBSCRIBE", "news.1*"]);
    assert_eq!(
        r.frame(),
        Frame::Array(vec![
            Frame::bulk_from_str("psubscribe"),
            Frame::bulk_from_str("news.1*"),
            Frame::Integer(3),
        ])
    );
    setuser(&mut admin, "sub2", &["on", "nopass", "+@all", "&*"]);
    let mut p2 = login(&srv, "sub2", "x");
    assert_eq!(q::<i64>(&mut p2, &["PUBLISH", "anything", "x"]), 0);
}

#[test]
fn revoking_a_channel_disconnects_its_subscribers() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(
        &mut admin,
        "sub",
        &["on", "nopass", "+@all", "resetchannels", "&news.*"],
    );
    let mut r = raw_login(&srv, "sub", "x");
    r.send(&["SUBSCRIBE", "news.1"]);
    assert!(matches!(r.frame(), Frame::Array(_)));

    // Adding a channel keeps the subscriber.
    setuser(&mut admin, "sub", &["&sports"]);
    r.send(&["PING"]);
    assert_eq!(
        r.frame(),
        Frame::Array(vec![Frame::bulk_from_str("pong"), Frame::bulk_from_str("")])
    );

    // Taking away the channel it listens on closes it.
    setuser(&mut admin, "sub", &["resetchannels", "&sports"]);
    let mut buf = [0u8; 64];
    match r.s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the subscriber to be disconnected, got {other:?}"),
    }
    assert_eq!(q::<String>(&mut admin, &["PING"]), "PONG");
}

#[test]
fn passwords_added_removed_hashed_nopass_and_resetpass() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    let mut c = srv.conn();

    setuser(&mut admin, "alice", &["on", ">p1", ">p2", "+@all", "~*"]);
    assert_eq!(passwords(&mut admin, "alice"), [SHA_P1, SHA_P2]);
    assert_eq!(auth(&mut c, "alice", "p1"), "OK");
    assert_eq!(auth(&mut c, "alice", "p2"), "OK");
    assert_eq!(auth(&mut c, "alice", "p3"), WRONGPASS);
    // Adding a password twice keeps one copy.
    setuser(&mut admin, "alice", &[">p1"]);
    assert_eq!(passwords(&mut admin, "alice"), [SHA_P1, SHA_P2]);

    setuser(&mut admin, "alice", &["<p1"]);
    assert_eq!(passwords(&mut admin, "alice"), [SHA_P2]);
    assert_eq!(auth(&mut c, "alice", "p1"), WRONGPASS);
    assert_eq!(auth(&mut c, "alice", "p2"), "OK");
    assert_eq!(
        setuser_err(&mut admin, "alice", &["<p1"]),
        "ERR Error in ACL SETUSER modifier '<p1': The password you are trying to remove from the user does not exist"
    );

    // A password given by its SHA-256.
    let hashed = format!("#{SHA_P3}");
    setuser(&mut admin, "alice", &[&hashed]);
    assert_eq!(passwords(&mut admin, "alice"), [SHA_P2, SHA_P3]);
    assert_eq!(auth(&mut c, "alice", "p3"), "OK");
    let line = list_line(&mut admin, "alice");
    assert!(line.contains(&format!("#{SHA_P2} #{SHA_P3} ")), "{line}");
    assert_eq!(
        setuser_err(&mut admin, "alice", &["#abc"]),
        "ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
    );
    let upper = format!("#{}", SHA_P1.to_uppercase());
    assert_eq!(
        setuser_err(&mut admin, "alice", &[&upper]),
        format!("ERR Error in ACL SETUSER modifier '{upper}': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
    );
    // And removed by its hash.
    let unhash = format!("!{SHA_P2}");
    setuser(&mut admin, "alice", &[&unhash]);
    assert_eq!(passwords(&mut admin, "alice"), [SHA_P3]);
    assert_eq!(auth(&mut c, "alice", "p2"), WRONGPASS);

    // nopass: any password, and the list is cleared.
    setuser(&mut admin, "alice", &["nopass"]);
    assert!(flags(&mut admin, "alice").contains(&"nopass".to_string()));
    assert!(passwords(&mut admin, "alice").is_empty());
    assert_eq!(auth(&mut c, "alice", "anything"), "OK");
    assert_eq!(auth(&mut c, "alice", ""), "OK");
    // A new password ends nopass.
    setuser(&mut admin, "alice", &[">p1"]);
    assert!(!flags(&mut admin, "alice").contains(&"nopass".to_string()));
    assert_eq!(auth(&mut c, "alice", "anything"), WRONGPASS);
    assert_eq!(auth(&mut c, "alice", "p1"), "OK");

    // resetpass: no passwords and no nopass, so nobody can log in.
    setuser(&mut admin, "alice", &["nopass"]);
    setuser(&mut admin, "alice", &["resetpass"]);
    assert!(!flags(&mut admin, "alice").contains(&"nopass".to_string()));
    assert!(passwords(&mut admin, "alice").is_empty());
    assert_eq!(auth(&mut c, "alice", "anything"), WRONGPASS);
    assert_eq!(auth(&mut c, "alice", "p1"), WRONGPASS);
}

#[test]
fn getuser_describes_a_user_and_nil_for_unknown() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    setuser(
        &mut c,
        "alice",
        &["on", ">p1", "+get", "~k*", "%R~r*", "&news.*"],
    );
    let v: Value = q(&mut c, &["ACL", "GETUSER", "alice"]);
    let fields = pairs(&v);
    let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "flags",
            "passwords",
            "commands",
            "keys",
            "channels",
            "selectors"
        ]
    );
    let u: HashMap<String, Value> = fields.into_iter().collect();
    let f = texts(&u["flags"]);
    assert!(f.contains(&"on".to_string()), "{f:?}");
    assert!(!f.contains(&"off".to_string()), "{f:?}");
    assert_eq!(texts(&u["passwords"]), [SHA_P1]);
    assert_eq!(text(&u["commands"]), "-@all +get");
    assert_eq!(text(&u["keys"]), "~k* %R~r*");
    assert_eq!(text(&u["channels"]), "&news.*");
    assert_eq!(u["selectors"], Value::Array(vec![]));

    // The default user.
    let d = getuser(&mut c, "default");
    let f = texts(&d["flags"]);
    assert!(f.contains(&"on".to_string()), "{f:?}");
    assert!(f.contains(&"nopass".to_string()), "{f:?}");
    assert_eq!(texts(&d["passwords"]), Vec::<String>::new());
    assert_eq!(text(&d["commands"]), "+@all");
    assert_eq!(text(&d["keys"]), "~*");
    assert_eq!(text(&d["channels"]), "&*");

    assert_eq!(
        q::<Value>(&mut c, &["ACL", "GETUSER", "nosuch"]),
        Value::Nil
    );
}

#[test]
fn command_rules_are_described_in_order() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let cases: &[(&str, &[&str], &str)] = &[
        ("bob", &["+@all", "-debug"], "+@all -debug"),
        // A later rule for the same command replaces the earlier one.
        (
            "carol",
            &["-@all", "+get", "+set", "-get"],
            "-@all +set -get",
        ),
        ("dave", &["allcommands"], "+@all"),
        ("erin", &["+@string", "-get"], "-@all +@string -get"),
        (
            "frank",
            &["+client|id", "+acl|whoami"],
            "-@all +client|id +acl|whoami",
        ),
        ("gina", &["+GET"], "-@all +get"),
        // A rule for a whole command replaces those for its subcommands.
        (
            "ivan",
            &["+client|id", "+client|kill", "-client"],
            "-@all -client",
        ),
        (
            "hank",
            &["+@all", "-@dangerous", "+flushdb"],
            "+@all -@dangerous +flushdb",
        ),
    ];
    for (name, rules, want) in cases {
        setuser(&mut c, name, rules);
        assert_eq!(user_field(&mut c, name, "commands"), *want, "{rules:?}");
    }
    // +@all / -@all start over.
    setuser(&mut c, "dave", &["-get", "nocommands"]);
    assert_eq!(user_field(&mut c, "dave", "commands"), "-@all");
    setuser(&mut c, "carol", &["allcommands"]);
    assert_eq!(user_field(&mut c, "carol", "commands"), "+@all");
    // ACL LIST ends with the same rules.
    let bob = list_line(&mut c, "bob");
    assert!(bob.ends_with(" resetchannels +@all -debug"), "{bob}");
}

#[test]
fn selectors_grant_alternative_permissions() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(
        &mut admin,
        "sel",
        &["on", "nopass", "-@all", "+set", "~w*", "(~r* +get)"],
    );
    let u = getuser(&mut admin, "sel");
    assert_eq!(text(&u["commands"]), "-@all +set");
    assert_eq!(text(&u["keys"]), "~w*");
    let Value::Array(selectors) = &u["selectors"] else {
        panic!("selectors: {:?}", u["selectors"]);
    };
    assert_eq!(selectors.len(), 1);
    let s: HashMap<String, Value> = pairs(&selectors[0]).into_iter().collect();
    assert_eq!(text(&s["commands"]), "-@all +get");
    assert_eq!(text(&s["keys"]), "~r*");
    assert_eq!(text(&s["channels"]), "");
    let line = list_line(&mut admin, "sel");
    assert!(
        line.ends_with(" ~w* resetchannels -@all +set (~r* resetchannels -@all +get)"),
        "{line}"
    );

    let _: () = q(&mut admin, &["SET", "r1", "x"]);
    let mut c = login(&srv, "sel", "x");
    assert_eq!(q::<String>(&mut c, &["SET", "w1", "v"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "r1"]), "x");
    // Neither selector allows these; the key error wins over the command
    // error of the root selector.
    assert_eq!(err(&mut c, &["GET", "w1"]), NOPERM_KEY);
    assert_eq!(err(&mut c, &["SET", "r1", "v"]), NOPERM_KEY);
    assert_eq!(err(&mut c, &["DEL", "w1"]), noperm_cmd("sel", "del"));

    setuser(&mut admin, "sel", &["clearselectors"]);
    assert_eq!(
        getuser(&mut admin, "sel")["selectors"],
        Value::Array(vec![])
    );
    assert_eq!(err(&mut c, &["GET", "r1"]), noperm_cmd("sel", "get"));
}

#[test]
fn deluser_counts_deleted_users_protects_default_and_disconnects_their_clients() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(&mut admin, "alice", &["on", ">pw", "+@all", "~*"]);
    setuser(&mut admin, "bob", &["on", ">pw", "+@all", "~*"]);
    let mut a = login(&srv, "alice", "pw");
    assert_eq!(q::<String>(&mut a, &["PING"]), "PONG");

    assert_eq!(
        err(&mut admin, &["ACL", "DELUSER", "alice", "default"]),
        "ERR The 'default' user cannot be removed"
    );
    // Nothing was deleted by the refused command.
    assert_eq!(
        strs(&mut admin, &["ACL", "USERS"]),
        ["alice", "bob", "default"]
    );

    assert_eq!(
        q::<i64>(&mut admin, &["ACL", "DELUSER", "alice", "bob", "nosuch"]),
        2
    );
    assert_eq!(strs(&mut admin, &["ACL", "USERS"]), ["default"]);
    assert_eq!(q::<i64>(&mut admin, &["ACL", "DELUSER", "alice"]), 0);
    eventually("alice's connection to be closed", || closed(&mut a));
    assert_eq!(auth(&mut admin, "alice", "pw"), WRONGPASS);
    assert_eq!(q::<String>(&mut admin, &["PING"]), "PONG");
}

#[test]
fn acl_cat_lists_categories_and_their_commands() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        strs(&mut c, &["ACL", "CAT"]),
        [
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
        ]
    );
    let string = strs(&mut c, &["ACL", "CAT", "string"]);
    for cmd in ["get", "set", "append", "mget", "incr"] {
        assert!(string.contains(&cmd.to_string()), "{cmd} not in {string:?}");
    }
    for cmd in ["lpush", "hset", "flushall"] {
        assert!(!string.contains(&cmd.to_string()), "{cmd} in {string:?}");
    }
    // Subcommands are listed by their full name.
    let dangerous = strs(&mut c, &["ACL", "CAT", "dangerous"]);
    for cmd in ["flushall", "client|kill", "keys"] {
        assert!(
            dangerous.contains(&cmd.to_string()),
            "{cmd} not in {dangerous:?}"
        );
    }
    assert!(!dangerous.contains(&"get".to_string()));
    // Category names are case-insensitive.
    let mut upper = strs(&mut c, &["ACL", "CAT", "STRING"]);
    let mut lower = string.clone();
    upper.sort();
    lower.sort();
    assert_eq!(upper, lower);
    assert_eq!(
        err(&mut c, &["ACL", "CAT", "nosuch"]),
        "ERR Unknown category 'nosuch'"
    );
}

#[test]
fn genpass_returns_random_hex_of_the_requested_bits() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let is_hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let a: String = q(&mut c, &["ACL", "GENPASS"]);
    let b: String = q(&mut c, &["ACL", "GENPASS"]);
    assert_eq!(a.len(), 64, "{a}");
    assert!(is_hex(&a), "{a}");
    assert_ne!(a, b);
    let short: String = q(&mut c, &["ACL", "GENPASS", "32"]);
    assert_eq!(short.len(), 8, "{short}");
    assert!(is_hex(&short), "{short}");
    // Bits round up to whole hex digits.
    assert_eq!(q::<String>(&mut c, &["ACL", "GENPASS", "5"]).len(), 2);
    assert_eq!(q::<String>(&mut c, &["ACL", "GENPASS", "4096"]).len(), 1024);
    for bad in ["0", "-1", "4097"] {
        assert_eq!(
            err(&mut c, &["ACL", "GENPASS", bad]),
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
            "{bad}"
        );
    }
    assert_eq!(err(&mut c, &["ACL", "GENPASS", "x"]), NOT_INTEGER);
}

#[test]
fn dryrun_reports_without_executing() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    setuser(
        &mut c,
        "alice",
        &[
            "on",
            ">pw",
            "+get",
            "+publish",
            "~k*",
            "resetchannels",
            "&news.*",
        ],
    );
    assert_eq!(
        q::<String>(&mut c, &["ACL", "DRYRUN", "alice", "get", "k1"]),
        "OK"
    );
    assert_eq!(
        q::<String>(&mut c, &["ACL", "DRYRUN", "alice", "set", "k1", "v"]),
        "User alice has no permissions to run the 'set' command"
    );
    assert_eq!(
        q::<String>(&mut c, &["ACL", "DRYRUN", "alice", "get", "other"]),
        "User alice has no permissions to access the 'other' key"
    );
    assert_eq!(
        q::<String>(&mut c, &["ACL", "DRYRUN", "alice", "publish", "other", "m"]),
        "User alice has no permissions to access the 'other' channel"
    );
    assert_eq!(
        q::<String>(
            &mut c,
            &["ACL", "DRYRUN", "alice", "publish", "news.1", "m"]
        ),
        "OK"
    );
    assert_eq!(
        err(&mut c, &["ACL", "DRYRUN", "nosuch", "get", "k1"]),
        "ERR User 'nosuch' not found"
    );
    assert_eq!(
        err(&mut c, &["ACL", "DRYRUN", "alice", "nosuch"]),
        "ERR Command 'nosuch' not found"
    );
    assert_eq!(
        err(&mut c, &["ACL", "DRYRUN", "alice", "get"]),
        "ERR wrong number of arguments for 'get' command"
    );
    // Nothing ran, and nothing was logged.
    assert_eq!(
        q::<String>(&mut c, &["ACL", "DRYRUN", "default", "set", "k1", "v"]),
        "OK"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k1"]), 0);
    assert!(acl_log(&mut c, &[]).is_empty());
}

#[test]
fn acl_log_records_denials_and_failed_auth() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    assert!(acl_log(&mut admin, &[]).is_empty());
    setuser(
        &mut admin,
        "alice",
        &[
            "on",
            ">pw",
            "+get",
            "+publish",
            "~k*",
            "resetchannels",
            "&news.*",
        ],
    );
    let mut a = login(&srv, "alice", "pw");
    assert_eq!(err(&mut a, &["SET", "k1", "v"]), noperm_cmd("alice", "set"));
    assert_eq!(err(&mut a, &["SET", "k1", "v"]), noperm_cmd("alice", "set"));
    assert_eq!(err(&mut a, &["GET", "other"]), NOPERM_KEY);
    assert_eq!(err(&mut a, &["PUBLISH", "other", "m"]), NOPERM_CHANNEL);
    assert_eq!(auth(&mut a, "alice", "wrong"), WRONGPASS);

    let log = acl_log(&mut admin, &[]);
    assert_eq!(log.len(), 4, "{log:?}");
    // Newest first; two identical denials share one entry.
    assert_eq!(log_what(&log[0]), what("auth", "toplevel", "AUTH", "alice"));
    assert_eq!(
        log_what(&log[1]),
        what("channel", "toplevel", "other", "alice")
    );
    assert_eq!(log_what(&log[2]), what("key", "toplevel", "other", "alice"));
    assert_eq!(
        log_what(&log[3]),
        what("command", "toplevel", "set", "alice")
    );
    let counts: Vec<i64> = log.iter().map(|e| int_field(e, "count")).collect();
    assert_eq!(counts, [1, 1, 1, 2]);

    for e in &log {
        let mut names: Vec<&str> = e.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "age-seconds",
                "client-info",
                "context",
                "count",
                "entry-id",
                "object",
                "reason",
                "timestamp-created",
                "timestamp-last-updated",
                "username",
            ]
        );
        let age: f64 = text(&e["age-seconds"]).parse().unwrap();
        assert!((0.0..60.0).contains(&age), "{age}");
        let created = int_field(e, "timestamp-created");
        let updated = int_field(e, "timestamp-last-updated");
        assert!(created > 1_600_000_000_000, "milliseconds: {created}");
        assert!(updated >= created, "{updated} < {created}");
        let info = text(&e["client-info"]);
        assert!(info.starts_with("id="), "{info}");
        assert!(info.contains(" addr=127.0.0.1:"), "{info}");
    }
    assert!(text(&log[3]["client-info"]).contains(" user=alice "));
    let ids: Vec<i64> = log.iter().map(|e| int_field(e, "entry-id")).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");

    let newest = acl_log(&mut admin, &["1"]);
    assert_eq!(newest.len(), 1);
    assert_eq!(log_what(&newest[0]), log_what(&log[0]));
    assert!(acl_log(&mut admin, &["0"]).is_empty());
    // As Redis: a negative count shows nothing rather than failing.
    assert!(acl_log(&mut admin, &["-1"]).is_empty());
    assert_eq!(acl_log(&mut admin, &["100"]).len(), 4);

    assert_eq!(q::<String>(&mut admin, &["ACL", "LOG", "RESET"]), "OK");
    assert!(acl_log(&mut admin, &[]).is_empty());
    // Unknown users that fail AUTH are logged under the name tried.
    assert_eq!(auth(&mut admin, "nosuch", "x"), WRONGPASS);
    let log = acl_log(&mut admin, &[]);
    assert_eq!(log.len(), 1);
    assert_eq!(
        log_what(&log[0]),
        what("auth", "toplevel", "AUTH", "nosuch")
    );
    assert_eq!(err(&mut admin, &["ACL", "LOG", "bogus"]), NOT_INTEGER);
}

#[test]
fn a_denied_command_in_multi_aborts_exec() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(&mut admin, "alice", &["on", ">pw", "+@all", "-set", "~k*"]);
    let mut a = login(&srv, "alice", "pw");
    assert_eq!(q::<String>(&mut a, &["MULTI"]), "OK");
    assert_eq!(q::<String>(&mut a, &["INCR", "k1"]), "QUEUED");
    assert_eq!(err(&mut a, &["SET", "k1", "v"]), noperm_cmd("alice", "set"));
    assert_eq!(err(&mut a, &["GET", "other"]), NOPERM_KEY);
    assert_eq!(
        err(&mut a, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    // The queued INCR did not run.
    assert_eq!(q::<i64>(&mut admin, &["EXISTS", "k1"]), 0);

    let log = acl_log(&mut admin, &[]);
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log_what(&log[0]), what("key", "multi", "other", "alice"));
    assert_eq!(log_what(&log[1]), what("command", "multi", "set", "alice"));
}

#[test]
fn scripts_check_the_permissions_of_each_call() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(
        &mut admin,
        "scripter",
        &["on", ">pw", "+@scripting", "+get", "~k*"],
    );
    let _: () = q(&mut admin, &["SET", "k1", "v"]);
    let mut c = login(&srv, "scripter", "pw");

    assert_eq!(
        q::<String>(&mut c, &["EVAL", "return redis.call('get','k1')", "0"]),
        "v"
    );
    let e = err(&mut c, &["EVAL", "return redis.call('set','k1','x')", "0"]);
    assert!(
        e.contains("User scripter has no permissions to run the 'set' command"),
        "{e}"
    );
    let e = err(&mut c, &["EVAL", "return redis.call('get','other')", "0"]);
    assert!(e.contains("No permissions to access a key"), "{e}");
    assert_eq!(q::<String>(&mut admin, &["GET", "k1"]), "v");

    // redis.acl_check_cmd: true (1) or false (nil), checking keys too.
    let check = |c: &mut redis::Connection, call: &str| -> Option<i64> {
        q(
            c,
            &["EVAL", &format!("return redis.acl_check_cmd({call})"), "0"],
        )
    };
    assert_eq!(check(&mut c, "'get','k1'"), Some(1));
    assert_eq!(check(&mut c, "'set','k1','1'"), None);
    assert_eq!(check(&mut c, "'get','other'"), None);
    assert_eq!(check(&mut admin, "'set','k1','1'"), Some(1));
    let e = err(
        &mut c,
        &["EVAL", "return redis.acl_check_cmd('nosuch')", "0"],
    );
    assert!(
        e.contains("Invalid command passed to redis.acl_check_cmd()"),
        "{e}"
    );

    // Denials inside scripts are logged with the "lua" context.
    let log = acl_log(&mut admin, &[]);
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log_what(&log[0]), what("key", "lua", "other", "scripter"));
    assert_eq!(log_what(&log[1]), what("command", "lua", "set", "scripter"));
}

#[test]
fn requirepass_is_the_default_users_password() {
    let srv = Server::start(&["--requirepass", "secret"]);
    let mut c = srv.conn();
    assert_eq!(
        err(&mut c, &["GET", "x"]),
        "NOAUTH Authentication required."
    );
    assert_eq!(auth(&mut c, "default", "wrong"), WRONGPASS);
    assert_eq!(q::<String>(&mut c, &["AUTH", "secret"]), "OK");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "x"]), None);
    let mut c2 = srv.conn();
    assert_eq!(auth(&mut c2, "default", "secret"), "OK");
    assert_eq!(q::<String>(&mut c2, &["ACL", "WHOAMI"]), "default");

    let line = list_line(&mut c, "default");
    assert!(line.starts_with("user default on "), "{line}");
    assert!(line.contains(&format!(" #{SHA_SECRET} ")), "{line}");
    assert!(!line.contains("nopass"), "{line}");
    assert!(line.ends_with(" ~* &* +@all"), "{line}");
    assert_eq!(passwords(&mut c, "default"), [SHA_SECRET]);

    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", ""]);
    assert!(flags(&mut c, "default").contains(&"nopass".to_string()));
    assert!(passwords(&mut c, "default").is_empty());
    let mut fresh = srv.conn();
    assert_eq!(q::<Option<String>>(&mut fresh, &["GET", "x"]), None);
    assert_eq!(q::<String>(&mut fresh, &["ACL", "WHOAMI"]), "default");
}

#[test]
fn user_directives_create_users_at_start() {
    let srv = Server::start(&[
        "--user",
        "alice on >pw ~* +@all",
        "--user",
        "bob on nopass +get ~b*",
    ]);
    let mut c = srv.conn();
    assert_eq!(strs(&mut c, &["ACL", "USERS"]), ["alice", "bob", "default"]);
    let alice = list_line(&mut c, "alice");
    assert!(alice.starts_with("user alice on "), "{alice}");
    assert!(alice.contains(&format!(" #{SHA_PW} ")), "{alice}");
    assert!(alice.ends_with(" ~* resetchannels +@all"), "{alice}");
    assert_eq!(user_field(&mut c, "bob", "commands"), "-@all +get");

    let mut a = login(&srv, "alice", "pw");
    assert_eq!(q::<String>(&mut a, &["SET", "k", "v"]), "OK");
    assert_eq!(q::<String>(&mut a, &["ACL", "WHOAMI"]), "alice");
    let mut b = login(&srv, "bob", "anything");
    assert_eq!(q::<Option<String>>(&mut b, &["GET", "b1"]), None);
    assert_eq!(err(&mut b, &["SET", "b1", "v"]), noperm_cmd("bob", "set"));
    assert_eq!(err(&mut b, &["GET", "k"]), NOPERM_KEY);

    // A bad rule in a user directive stops the start-up.
    let dir = tempfile::tempdir().unwrap();
    let bad = try_spawn(dir.path(), &["--user".into(), "zed on bogus".into()]);
    if let Ok((mut child, _)) = bad {
        let _ = child.kill();
        let _ = child.wait();
        panic!("started with an invalid user directive");
    }
}

#[test]
fn aclfile_loads_at_start_and_acl_save_and_load_use_it() {
    let (_acl_dir, path) = acl_file("user alice on >pw ~* +@all\n");
    let srv = Server::start(&["--aclfile", path_str(&path)]);
    let mut admin = srv.conn();
    assert_eq!(strs(&mut admin, &["ACL", "USERS"]), ["alice", "default"]);
    let mut a = login(&srv, "alice", "pw");
    assert_eq!(q::<String>(&mut a, &["ACL", "WHOAMI"]), "alice");

    setuser(&mut admin, "bob", &["on", ">b", "+@all"]);
    assert_eq!(q::<String>(&mut admin, &["ACL", "SAVE"]), "OK");
    let saved = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = saved.lines().collect();
    assert_eq!(lines.len(), 3, "{saved}");
    let bob = lines
        .iter()
        .find(|l| l.starts_with("user bob "))
        .unwrap_or_else(|| panic!("no bob in {saved}"));
    assert!(bob.starts_with("user bob on "), "{bob}");
    assert!(bob.contains(&format!(" #{SHA_B} ")), "{bob}");
    assert!(bob.ends_with(" +@all"), "{bob}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("user alice on ") && l.contains(SHA_PW)),
        "{saved}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("user default on nopass ")),
        "{saved}"
    );
    // The saved file is loadable as it is.
    assert_eq!(q::<String>(&mut admin, &["ACL", "LOAD"]), "OK");
    assert_eq!(
        strs(&mut admin, &["ACL", "USERS"]),
        ["alice", "bob", "default"]
    );

    // Edited by hand, then loaded: the new set replaces the old one.
    std::fs::write(
        &path,
        "user default on nopass ~* &* +@all\n\nuser carol on >c ~c* +@all\n",
    )
    .unwrap();
    assert_eq!(q::<String>(&mut admin, &["ACL", "LOAD"]), "OK");
    assert_eq!(strs(&mut admin, &["ACL", "USERS"]), ["carol", "default"]);
    assert_eq!(auth(&mut admin, "bob", "b"), WRONGPASS);
    let mut cc = login(&srv, "carol", "c");
    assert_eq!(err(&mut cc, &["GET", "other"]), NOPERM_KEY);
    assert_eq!(q::<Option<String>>(&mut cc, &["GET", "c1"]), None);

    // A bad line fails the load and keeps the current users.
    std::fs::write(
        &path,
        "user default on nopass ~* &* +@all\nuser dave on bogus\n",
    )
    .unwrap();
    let e = err(&mut admin, &["ACL", "LOAD"]);
    assert!(
        e.starts_with(&format!("ERR {}:2: Syntax error. ", path_str(&path))),
        "{e}"
    );
    assert!(
        e.ends_with(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        ),
        "{e}"
    );
    std::fs::write(&path, "usr eve on\n").unwrap();
    let e = err(&mut admin, &["ACL", "LOAD"]);
    assert!(
        e.contains(&format!(
            "{}:1 should start with user keyword followed by the username. ",
            path_str(&path)
        )),
        "{e}"
    );
    assert_eq!(strs(&mut admin, &["ACL", "USERS"]), ["carol", "default"]);
    assert_eq!(auth(&mut admin, "carol", "c"), "OK");
}

#[test]
fn acl_save_and_load_need_an_aclfile() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    for sub in ["SAVE", "LOAD"] {
        let e = err(&mut c, &["ACL", sub]);
        assert!(
            e.starts_with("ERR This Redis instance is not configured to use an ACL file"),
            "{sub}: {e}"
        );
    }
}

#[test]
fn users_survive_a_restart_only_when_saved() {
    // Without an ACL file, SETUSER is not persisted.
    let mut plain = Server::start(&[]);
    let mut c = plain.conn();
    setuser(&mut c, "ghost", &["on", ">pw", "+@all"]);
    drop(c);
    plain.restart();
    let mut c = plain.conn();
    assert_eq!(strs(&mut c, &["ACL", "USERS"]), ["default"]);

    // With one, what ACL SAVE wrote comes back; later changes do not.
    let (_acl_dir, path) = acl_file("user default on nopass ~* &* +@all\n");
    let mut srv = Server::start(&["--aclfile", path_str(&path)]);
    let mut c = srv.conn();
    setuser(&mut c, "eve", &["on", ">p1", "~e*", "+@all"]);
    assert_eq!(q::<String>(&mut c, &["ACL", "SAVE"]), "OK");
    setuser(&mut c, "frank", &["on", ">p2", "+@all"]);
    setuser(&mut c, "eve", &["<p1", ">p2"]);
    drop(c);
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(strs(&mut c, &["ACL", "USERS"]), ["default", "eve"]);
    assert_eq!(passwords(&mut c, "eve"), [SHA_P1]);
    assert_eq!(user_field(&mut c, "eve", "keys"), "~e*");
    let mut e = login(&srv, "eve", "p1");
    assert_eq!(q::<String>(&mut e, &["SET", "e1", "v"]), "OK");
    assert_eq!(err(&mut e, &["SET", "x1", "v"]), NOPERM_KEY);
}

#[test]
fn malformed_acl_requests_are_errors_and_the_server_keeps_serving() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        err(&mut c, &["ACL"]),
        "ERR wrong number of arguments for 'acl' command"
    );
    assert_eq!(
        err(&mut c, &["ACL", "nosuch"]),
        "ERR unknown subcommand 'nosuch'. Try ACL HELP."
    );
    for sub in ["SETUSER", "GETUSER", "DELUSER", "DRYRUN"] {
        assert_eq!(
            err(&mut c, &["ACL", sub]),
            format!(
                "ERR wrong number of arguments for 'acl|{}' command",
                sub.to_lowercase()
            )
        );
    }
    assert_eq!(
        err(&mut c, &["ACL", "GETUSER", "a", "b"]),
        "ERR wrong number of arguments for 'acl|getuser' command"
    );
    assert_eq!(
        err(&mut c, &["ACL", "WHOAMI", "extra"]),
        "ERR wrong number of arguments for 'acl|whoami' command"
    );
    assert_eq!(
        setuser_err(&mut c, "alice", &["("]),
        "ERR Unmatched parenthesis in acl selector starting at '('."
    );
    assert_eq!(
        setuser_err(&mut c, "alice", &["(", "+get"]),
        "ERR Unmatched parenthesis in acl selector starting at '('."
    );
    assert_eq!(
        setuser_err(&mut c, "alice", &[")"]),
        "ERR Error in ACL SETUSER modifier ')': Syntax error"
    );
    assert_eq!(
        setuser_err(&mut c, "alice", &["+"]),
        "ERR Error in ACL SETUSER modifier '+': Unknown command or category name in ACL"
    );
    assert_eq!(
        setuser_err(&mut c, "alice", &["+get|"]),
        "ERR Error in ACL SETUSER modifier '+get|': Syntax error"
    );
    assert_eq!(strs(&mut c, &["ACL", "USERS"]), ["default"]);

    // A very long user name works like any other.
    let long = "u".repeat(100_000);
    setuser(&mut c, &long, &["on", "nopass", "+@all"]);
    let users = strs(&mut c, &["ACL", "USERS"]);
    assert!(
        users.len() == 2 && users[0] == "default" && users[1] == long,
        "ACL USERS does not list default and the long name"
    );
    assert_eq!(auth(&mut c, &long, "x"), "OK");
    let me: String = q(&mut c, &["ACL", "WHOAMI"]);
    assert!(me == long, "WHOAMI is not the long name");
    assert_eq!(auth(&mut c, "default", "x"), "OK");
    assert_eq!(q::<i64>(&mut c, &["ACL", "DELUSER", &long]), 1);
    assert_eq!(
        q::<Value>(&mut c, &["ACL", "GETUSER", &"v".repeat(100_000)]),
        Value::Nil
    );

    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    let mut fresh = srv.conn();
    assert_eq!(q::<String>(&mut fresh, &["PING"]), "PONG");
}

/// Until a client logs in, a request may have at most 10 arguments of at
/// most 16 KB each, as in Redis, so a stranger cannot make the server
/// buffer a large request; once logged in the usual limits apply.
#[test]
fn unauthenticated_clients_send_only_small_requests() {
    let srv = Server::start(&["--requirepass", "secret"]);
    for (request, error) in [
        (&b"*100\r\n"[..], "multibulk"),
        (&b"*1\r\n$100000000\r\n"[..], "bulk"),
    ] {
        let mut s = srv.raw();
        send_raw(&mut s, request);
        let reply = String::from_utf8(read_to_close(&mut s)).unwrap();
        assert_eq!(
            reply,
            format!("-ERR Protocol error: unauthenticated {error} length\r\n")
        );
    }
    let mut r = RespConn::new(srv.raw());
    r.send(&["AUTH", "secret"]);
    r.expect("+OK\r\n");
    let big = "v".repeat(100_000);
    let mut args = vec!["MSET"];
    for _ in 0..10 {
        args.extend_from_slice(&["k", big.as_str()]);
    }
    r.send(&args);
    r.expect("+OK\r\n");
    let mut c = srv.conn();
    assert_eq!(auth(&mut c, "default", "secret"), "OK");
    assert_eq!(q::<usize>(&mut c, &["STRLEN", "k"]), 100_000);
}

/// A blocked command is checked again when a write could serve it, as
/// Redis runs it again then: keys taken away during the wait are refused
/// and the element stays in the list.
#[test]
fn a_blocked_pop_is_refused_when_its_keys_were_taken_away_meanwhile() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(&mut admin, "popper", &["on", ">pw", "+@all", "allkeys"]);
    let mut r = raw_login(&srv, "popper", "pw");
    r.send(&["BLPOP", "list1", "0"]);
    eventually("the client blocks", || {
        q::<String>(&mut admin, &["INFO", "clients"]).contains("blocked_clients:1")
    });
    setuser(&mut admin, "popper", &["resetkeys"]);
    let _: i64 = q(&mut admin, &["LPUSH", "list1", "foo"]);
    assert_eq!(r.frame(), err_frame(NOPERM_KEY));
    assert_eq!(q::<i64>(&mut admin, &["LLEN", "list1"]), 1);
    let stats: String = q(&mut admin, &["INFO", "commandstats"]);
    let blpop = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_blpop:"))
        .unwrap_or_default();
    assert!(blpop.contains("rejected_calls=1,failed_calls=0"), "{blpop}");
    // The connection goes on, and with its keys back it pops.
    setuser(&mut admin, "popper", &["allkeys"]);
    r.send(&["BLPOP", "list1", "0"]);
    assert_eq!(
        r.frame(),
        Frame::Array(vec![
            Frame::bulk_from_str("list1"),
            Frame::bulk_from_str("foo")
        ])
    );
}

/// ACL SAVE replaces the file through a synced temporary file and a
/// rename: a kill -9 at any moment, even during a save, leaves a whole
/// file, the server restarts by itself, and every user whose save was
/// acknowledged is there.
#[test]
fn a_kill_during_acl_save_leaves_a_whole_file_and_the_server_restarts() {
    let (_dir, path) = acl_file("user default on nopass ~* &* +@all\n");
    let mut srv = Server::start(&["--aclfile", path_str(&path)]);
    let mut next = 0usize;
    for round in 0..6 {
        let port = srv.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let saver = {
            let stop = stop.clone();
            let mut i = next;
            std::thread::spawn(move || {
                let mut saved = Vec::new();
                let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
                    return saved;
                };
                let Ok(mut c) = client.get_connection() else {
                    return saved;
                };
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let name = format!("u{i}");
                    let set =
                        try_q::<String>(&mut c, &["ACL", "SETUSER", &name, "on", ">pw", "+get"]);
                    let save = try_q::<String>(&mut c, &["ACL", "SAVE"]);
                    match (set, save) {
                        (Ok(_), Ok(_)) => saved.push(name),
                        _ => break,
                    }
                    i += 1;
                }
                saved
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20 + 37 * round));
        srv.kill9();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let saved = saver.join().unwrap();
        next += saved.len() + 1;
        srv.try_restart()
            .unwrap_or_else(|e| panic!("round {round}: the server did not come back: {e}"));
        let mut c = srv.conn();
        let users = strs(&mut c, &["ACL", "USERS"]);
        for name in &saved {
            assert!(
                users.contains(name),
                "round {round}: {name} was saved but is gone"
            );
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'), "round {round}: a torn file: {text:?}");
        assert!(saved.is_empty() || !text.is_empty());
    }
    assert!(next > 6, "the saves ran");
}

/// CLIENT KILL USER names any ACL user, not only `default`, and kills
/// that user's connections; options are read one by one, as Redis does.
#[test]
fn client_kill_user_kills_that_users_connections() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    setuser(&mut admin, "alice", &["on", ">pw", "+@all", "~*"]);
    let mut a = login(&srv, "alice", "pw");
    assert_eq!(q::<String>(&mut a, &["PING"]), "PONG");
    assert_eq!(
        q::<i64>(&mut admin, &["CLIENT", "KILL", "USER", "alice"]),
        1
    );
    assert!(
        try_q::<String>(&mut a, &["PING"]).is_err(),
        "alice's connection is closed"
    );
    assert_eq!(
        err(&mut admin, &["CLIENT", "KILL", "USER", "nobody", "SKIPME"]),
        "ERR No such user 'nobody'"
    );
    assert_eq!(
        err(&mut admin, &["CLIENT", "KILL", "USER", "alice", "SKIPME"]),
        "ERR syntax error"
    );
}
