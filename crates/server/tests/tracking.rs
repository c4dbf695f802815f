//! Client-side caching (CLIENT TRACKING) over real sockets: invalidations
//! of keys read, after other clients' writes, MULTI/EXEC, scripts, expiry
//! and flushes; NOLOOP, BCAST with prefixes, OPTIN/OPTOUT with CLIENT
//! CACHING; REDIRECT to a RESP2 subscriber of `__redis__:invalidate` and a
//! broken redirect; the table limit; TRACKINGINFO, GETREDIR, CLIENT LIST
//! and INFO; and Redis's error replies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use durakv_protocol::Frame;
use std::time::Duration;

/// A raw RESP3 connection (pushes are read as frames, in order).
fn tracker(srv: &Server) -> RespConn {
    let mut c = RespConn::new(srv.raw());
    c.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    call(&mut c, &["HELLO", "3"]);
    c
}

fn call(c: &mut RespConn, args: &[&str]) -> Frame {
    c.send(args);
    c.frame()
}

fn b(s: &str) -> Frame {
    Frame::bulk_from_str(s)
}

fn ok() -> Frame {
    Frame::simple("OK")
}

fn inval(keys: &[&str]) -> Frame {
    Frame::Push(vec![
        b("invalidate"),
        Frame::Array(keys.iter().map(|k| b(k)).collect()),
    ])
}

/// Nothing is queued for `c`: a PING's reply is the next frame (what was
/// queued before a command goes out before its reply).
fn nothing_pending(c: &mut RespConn) {
    assert_eq!(call(c, &["PING"]), Frame::simple("PONG"));
}

/// The keys of the next invalidation push.
fn invalidated_keys(c: &mut RespConn) -> Vec<String> {
    match c.frame() {
        Frame::Push(items) if items.len() == 2 && items[0] == b("invalidate") => match &items[1] {
            Frame::Array(keys) => {
                let mut v: Vec<String> = keys
                    .iter()
                    .map(|k| match k {
                        Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                        other => panic!("key {other:?}"),
                    })
                    .collect();
                v.sort();
                v
            }
            other => panic!("keys {other:?}"),
        },
        other => panic!("expected an invalidation, got {other:?}"),
    }
}

fn info_field(c: &mut redis::Connection, name: &str) -> i64 {
    let info: String = q(c, &["INFO", "all"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} missing from INFO"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn keys_read_are_invalidated_once_after_another_clients_write() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    assert_eq!(call(&mut t, &["CLIENT", "TRACKING", "ON"]), ok());
    let _: () = q(&mut w, &["MSET", "a", "1", "b", "1"]);
    assert_eq!(call(&mut t, &["GET", "a"]), b("1"));
    // b was never read by the tracker: nothing for it.
    let _: i64 = q(&mut w, &["INCR", "b"]);
    nothing_pending(&mut t);
    let _: i64 = q(&mut w, &["INCR", "a"]);
    assert_eq!(t.frame(), inval(&["a"]));
    // Invalidated keys are forgotten until read again.
    let _: i64 = q(&mut w, &["INCR", "a"]);
    nothing_pending(&mut t);
    // Every key a multi-key read names is remembered.
    assert_eq!(
        call(&mut t, &["MGET", "a", "b", "nokey"]),
        Frame::Array(vec![b("3"), b("2"), Frame::Null])
    );
    let _: () = q(&mut w, &["SET", "nokey", "x"]);
    assert_eq!(t.frame(), inval(&["nokey"]));
    // Writes do not register a key.
    assert_eq!(call(&mut t, &["SET", "c", "1"]), ok());
    let _: () = q(&mut w, &["SET", "c", "2"]);
    nothing_pending(&mut t);
}

#[test]
fn own_writes_invalidate_after_the_reply_unless_noloop() {
    let srv = Server::start(&[]);
    let mut t = tracker(&srv);
    call(&mut t, &["CLIENT", "TRACKING", "ON"]);
    call(&mut t, &["HSET", "h", "f", "1"]);
    assert_eq!(call(&mut t, &["HGET", "h", "f"]), b("1"));
    // The reply first, then the invalidation it caused.
    assert_eq!(call(&mut t, &["HDEL", "h", "f"]), Frame::Integer(1));
    assert_eq!(t.frame(), inval(&["h"]));

    assert_eq!(call(&mut t, &["CLIENT", "TRACKING", "ON", "NOLOOP"]), ok());
    call(&mut t, &["GET", "k"]);
    call(&mut t, &["SET", "k", "mine"]);
    nothing_pending(&mut t);
    // NOLOOP spares only the client's own writes.
    call(&mut t, &["GET", "k"]);
    let mut w = srv.conn();
    let _: () = q(&mut w, &["SET", "k", "theirs"]);
    assert_eq!(t.frame(), inval(&["k"]));
}

/// Redis remembers a read after the command, so a read that writes the key
/// (PFCOUNT caching its count) does not invalidate it for the reader; a
/// later write does, and the next recount, no longer tracked, again not.
/// In a transaction each command counts on its own: GET then SET of the
/// same key invalidates it.
#[test]
fn a_read_that_writes_does_not_invalidate_its_reader() {
    let srv = Server::start(&[]);
    let mut t = tracker(&srv);
    call(&mut t, &["CLIENT", "TRACKING", "ON"]);
    assert_eq!(call(&mut t, &["PFADD", "hll", "a"]), Frame::Integer(1));
    assert_eq!(call(&mut t, &["PFCOUNT", "hll"]), Frame::Integer(1));
    nothing_pending(&mut t);
    assert_eq!(call(&mut t, &["PFADD", "hll", "b"]), Frame::Integer(1));
    assert_eq!(t.frame(), inval(&["hll"]));
    assert_eq!(call(&mut t, &["PFCOUNT", "hll"]), Frame::Integer(2));
    nothing_pending(&mut t);

    call(&mut t, &["MULTI"]);
    call(&mut t, &["GET", "k"]);
    call(&mut t, &["SET", "k", "v"]);
    assert_eq!(
        call(&mut t, &["EXEC"]),
        Frame::Array(vec![Frame::Null, ok()])
    );
    assert_eq!(t.frame(), inval(&["k"]));
}

#[test]
fn bcast_announces_writes_under_each_prefix() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    assert_eq!(
        call(
            &mut t,
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a:", "PREFIX", "b:"]
        ),
        ok()
    );
    // Nothing needs to be read first; one message per prefix per command.
    let _: () = q(
        &mut w,
        &["MSET", "a:1", "1", "a:2", "1", "b:1", "1", "c:1", "1"],
    );
    let mut got = vec![invalidated_keys(&mut t), invalidated_keys(&mut t)];
    got.sort();
    assert_eq!(got, vec![vec!["a:1", "a:2"], vec!["b:1"]]);
    nothing_pending(&mut t);
    // Prefixes accumulate; overlapping ones are refused.
    assert_eq!(
        call(
            &mut t,
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "c:"]
        ),
        ok()
    );
    let _: () = q(&mut w, &["SET", "c:1", "2"]);
    assert_eq!(t.frame(), inval(&["c:1"]));
    assert_eq!(
        call(&mut t, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a"]),
        Frame::error("ERR Prefix 'a' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.")
    );
    // NOLOOP in BCAST mode.
    call(&mut t, &["CLIENT", "TRACKING", "OFF"]);
    call(&mut t, &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]);
    call(&mut t, &["SET", "mine", "1"]);
    nothing_pending(&mut t);
    let _: () = q(&mut w, &["SET", "theirs", "1"]);
    assert_eq!(t.frame(), inval(&["theirs"]));
    let mut c = srv.conn();
    let e = err(
        &mut c,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "FOOBAR",
        ],
    );
    assert_eq!(e, "ERR Prefix 'FOO' overlaps with another provided prefix 'FOOBAR'. Prefixes for a single client must not overlap.");
    assert_eq!(
        err(&mut c, &["CLIENT", "TRACKING", "ON", "PREFIX", "x"]),
        "ERR PREFIX option requires BCAST mode to be enabled"
    );
    let _: () = q(&mut c, &["CLIENT", "TRACKING", "ON"]);
    assert_eq!(
        err(&mut c, &["CLIENT", "TRACKING", "ON", "BCAST"]),
        "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
    );
}

#[test]
fn optin_and_optout_follow_client_caching() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    call(&mut t, &["CLIENT", "TRACKING", "ON", "OPTIN"]);
    call(&mut t, &["GET", "k"]);
    let _: () = q(&mut w, &["SET", "k", "1"]);
    nothing_pending(&mut t);
    assert_eq!(call(&mut t, &["CLIENT", "CACHING", "YES"]), ok());
    call(&mut t, &["GET", "k"]);
    // CACHING covers the next command only.
    call(&mut t, &["GET", "other"]);
    let _: () = q(&mut w, &["MSET", "k", "2", "other", "2"]);
    assert_eq!(t.frame(), inval(&["k"]));
    nothing_pending(&mut t);
    // ... or a whole transaction.
    call(&mut t, &["CLIENT", "CACHING", "YES"]);
    call(&mut t, &["MULTI"]);
    call(&mut t, &["GET", "x"]);
    call(&mut t, &["GET", "y"]);
    call(&mut t, &["EXEC"]);
    let _: () = q(&mut w, &["MSET", "x", "1", "y", "1"]);
    assert_eq!(t.frame(), inval(&["x"]));
    assert_eq!(t.frame(), inval(&["y"]));

    assert_eq!(
        call(&mut t, &["CLIENT", "CACHING", "NO"]),
        Frame::error(
            "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
        )
    );
    assert_eq!(
        call(&mut t, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
        Frame::error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
    );
    call(&mut t, &["CLIENT", "TRACKING", "OFF"]);
    call(&mut t, &["CLIENT", "TRACKING", "ON", "OPTOUT"]);
    call(&mut t, &["CLIENT", "CACHING", "NO"]);
    call(&mut t, &["GET", "k"]);
    let _: () = q(&mut w, &["SET", "k", "3"]);
    nothing_pending(&mut t);
    call(&mut t, &["GET", "k"]);
    let _: () = q(&mut w, &["SET", "k", "4"]);
    assert_eq!(t.frame(), inval(&["k"]));

    let mut c = srv.conn();
    assert_eq!(
        err(&mut c, &["CLIENT", "CACHING", "YES"]),
        "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"]),
        "ERR You can't specify both OPTIN mode and OPTOUT mode"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"]),
        "ERR OPTIN and OPTOUT are not compatible with BCAST"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "TRACKING", "MAYBE"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "TRACKING", "ON", "REDIRECT", "99999"]),
        "ERR The client ID you want redirect to does not exist"
    );
    let me: i64 = q(&mut c, &["CLIENT", "ID"]);
    let me = me.to_string();
    assert_eq!(
        err(
            &mut c,
            &["CLIENT", "TRACKING", "ON", "REDIRECT", &me, "REDIRECT", &me]
        ),
        "ERR A client can only redirect to a single other client"
    );
}

#[test]
fn redirect_reaches_a_resp2_subscriber_and_reports_a_broken_target() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut sub = RespConn::new(srv.raw());
    sub.s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let Frame::Integer(sub_id) = call(&mut sub, &["CLIENT", "ID"]) else {
        panic!("client id")
    };
    call(&mut sub, &["SUBSCRIBE", "__redis__:invalidate"]);

    // A RESP2 client tracking with its invalidations sent elsewhere.
    let mut t = srv.conn();
    let id = sub_id.to_string();
    let _: () = q(&mut t, &["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
    assert_eq!(q::<i64>(&mut t, &["CLIENT", "GETREDIR"]), sub_id);
    let line: String = q(&mut t, &["CLIENT", "INFO"]);
    assert!(line.contains(" flags=t "), "{line}");
    assert!(line.contains(&format!(" redir={sub_id} ")), "{line}");
    let _: Option<String> = q(&mut t, &["GET", "k"]);
    let _: () = q(&mut w, &["SET", "k", "v"]);
    sub.expect("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n");

    // A RESP3 tracker whose target goes away is told so.
    let mut t3 = tracker(&srv);
    call(&mut t3, &["CLIENT", "TRACKING", "ON", "REDIRECT", &id]);
    call(&mut t3, &["GET", "j"]);
    sub.send(&["QUIT"]);
    let _ = read_to_close(&mut sub.s);
    eventually("the target to be gone", || {
        let list: String = q(&mut w, &["CLIENT", "LIST"]);
        !list.contains(&format!("id={sub_id} "))
    });
    let _: () = q(&mut w, &["SET", "j", "1"]);
    assert_eq!(
        t3.frame(),
        Frame::Push(vec![b("tracking-redir-broken"), Frame::Integer(sub_id)])
    );
    let Frame::Map(info) = call(&mut t3, &["CLIENT", "TRACKINGINFO"]) else {
        panic!("map")
    };
    assert_eq!(info[0].1, Frame::Set(vec![b("on"), b("broken_redirect")]));
    assert_eq!(info[1].1, Frame::Integer(sub_id));
    let list: String = q(&mut w, &["CLIENT", "LIST"]);
    assert!(list.contains(" flags=tR "), "{list}");
}

/// Redis frees a client that sent QUIT before it reads anything more, so
/// a write sent the moment QUIT's reply arrives already finds a tracker's
/// redirect broken (Redis's unit/tracking relies on it).
#[test]
fn a_target_is_gone_once_its_quit_is_answered() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t3 = tracker(&srv);
    for round in 0..30 {
        let mut target = RespConn::new(srv.raw());
        let Frame::Integer(id) = call(&mut target, &["CLIENT", "ID"]) else {
            panic!("client id")
        };
        let key = format!("k{round}");
        call(
            &mut t3,
            &["CLIENT", "TRACKING", "ON", "REDIRECT", &id.to_string()],
        );
        call(&mut t3, &["GET", &key]);
        target.send(&["QUIT"]);
        target.expect("+OK\r\n");
        let _: () = q(&mut w, &["SET", &key, "v"]);
        assert_eq!(
            t3.frame(),
            Frame::Push(vec![b("tracking-redir-broken"), Frame::Integer(id)]),
            "round {round}"
        );
        call(&mut t3, &["CLIENT", "TRACKING", "OFF"]);
    }
}

#[test]
fn flushes_invalidate_everything_and_empty_the_table() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    call(&mut t, &["CLIENT", "TRACKING", "ON"]);
    call(&mut t, &["MGET", "a", "b"]);
    assert_eq!(info_field(&mut w, "tracking_total_keys"), 2);
    assert_eq!(info_field(&mut w, "tracking_total_items"), 2);
    assert_eq!(info_field(&mut w, "tracking_clients"), 1);
    let _: () = q(&mut w, &["FLUSHALL"]);
    assert_eq!(t.frame(), Frame::Push(vec![b("invalidate"), Frame::Null]));
    assert_eq!(info_field(&mut w, "tracking_total_keys"), 0);
    // Inside MULTI, after EXEC's reply.
    call(&mut t, &["GET", "a"]);
    call(&mut t, &["MULTI"]);
    call(&mut t, &["FLUSHDB"]);
    assert_eq!(call(&mut t, &["EXEC"]), Frame::Array(vec![ok()]));
    assert_eq!(t.frame(), Frame::Push(vec![b("invalidate"), Frame::Null]));
    // Flushing empties the table even once nobody tracks any more.
    call(&mut t, &["GET", "a"]);
    call(&mut t, &["CLIENT", "TRACKING", "OFF"]);
    assert_eq!(info_field(&mut w, "tracking_clients"), 0);
    let _: () = q(&mut w, &["FLUSHALL"]);
    assert_eq!(info_field(&mut w, "tracking_total_keys"), 0);
}

#[test]
fn transactions_and_scripts_invalidate_what_they_write() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    call(&mut t, &["CLIENT", "TRACKING", "ON"]);
    call(&mut t, &["MGET", "a", "b", "c"]);
    let (_, _): (i64, i64) = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("a")
        .cmd("INCR")
        .arg("b")
        .query(&mut w)
        .unwrap();
    assert_eq!(t.frame(), inval(&["a"]));
    assert_eq!(t.frame(), inval(&["b"]));
    let _: () = q(
        &mut w,
        &["EVAL", "redis.call('set', KEYS[1], 'x')", "1", "c"],
    );
    assert_eq!(t.frame(), inval(&["c"]));

    // A script's declared keys are remembered if it read anything...
    call(
        &mut t,
        &["EVAL", "return redis.call('get', 'other')", "2", "k1", "k2"],
    );
    let _: () = q(&mut w, &["MSET", "k2", "1", "k1", "1", "other", "1"]);
    assert_eq!(t.frame(), inval(&["k2"]));
    assert_eq!(t.frame(), inval(&["k1"]));
    nothing_pending(&mut t);
    // ... and not if it only wrote.
    call(&mut t, &["EVAL", "redis.call('set', 'z', '1')", "1", "k1"]);
    let _: () = q(&mut w, &["SET", "k1", "2"]);
    nothing_pending(&mut t);
}

#[test]
fn expired_keys_are_invalidated() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    call(&mut t, &["CLIENT", "TRACKING", "ON"]);
    let _: () = q(&mut w, &["SET", "gone", "v", "PX", "50"]);
    assert_eq!(call(&mut t, &["GET", "gone"]), b("v"));
    // Nobody reads it: active expiry removes it and tells the reader.
    assert_eq!(t.frame(), inval(&["gone"]));

    // Expired by another client's read (or by active expiry first).
    let _: () = q(&mut w, &["SET", "lazy", "v", "PX", "50"]);
    call(&mut t, &["GET", "lazy"]);
    std::thread::sleep(Duration::from_millis(120));
    let _: Option<String> = q(&mut w, &["GET", "lazy"]);
    assert_eq!(t.frame(), inval(&["lazy"]));
}

#[test]
fn trackinginfo_getredir_and_client_list_describe_the_mode() {
    let srv = Server::start(&[]);
    let mut t = tracker(&srv);
    let info = |t: &mut RespConn| match call(t, &["CLIENT", "TRACKINGINFO"]) {
        Frame::Map(pairs) => pairs,
        other => panic!("{other:?}"),
    };
    let off = info(&mut t);
    assert_eq!(off[0], (b("flags"), Frame::Set(vec![b("off")])));
    assert_eq!(off[1], (b("redirect"), Frame::Integer(-1)));
    assert_eq!(off[2], (b("prefixes"), Frame::Array(vec![])));
    assert_eq!(call(&mut t, &["CLIENT", "GETREDIR"]), Frame::Integer(-1));

    call(&mut t, &["CLIENT", "TRACKING", "ON", "OPTIN", "NOLOOP"]);
    call(&mut t, &["CLIENT", "CACHING", "YES"]);
    let on = info(&mut t);
    assert_eq!(
        on[0].1,
        Frame::Set(vec![b("on"), b("optin"), b("caching-yes"), b("noloop")])
    );
    assert_eq!(on[1].1, Frame::Integer(0));
    assert_eq!(call(&mut t, &["CLIENT", "GETREDIR"]), Frame::Integer(0));

    call(&mut t, &["CLIENT", "TRACKING", "OFF"]);
    call(
        &mut t,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "foo", "PREFIX", "bar",
        ],
    );
    let bcast = info(&mut t);
    assert_eq!(bcast[0].1, Frame::Set(vec![b("on"), b("bcast")]));
    assert_eq!(bcast[2].1, Frame::Array(vec![b("foo"), b("bar")]));
    let Frame::Verbatim(line) = call(&mut t, &["CLIENT", "INFO"]) else {
        panic!("verbatim")
    };
    let line = String::from_utf8_lossy(&line).into_owned();
    assert!(line.contains(" flags=tB "), "{line}");
    assert!(line.contains(" redir=0 "), "{line}");
    let mut w = srv.conn();
    assert_eq!(info_field(&mut w, "tracking_total_prefixes"), 2);
    call(&mut t, &["CLIENT", "TRACKING", "OFF"]);
    assert_eq!(info_field(&mut w, "tracking_total_prefixes"), 0);
    assert_eq!(info_field(&mut w, "tracking_clients"), 0);
}

#[test]
fn the_table_limit_evicts_keys_and_tells_their_readers() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    call(&mut t, &["CLIENT", "TRACKING", "ON"]);
    call(&mut t, &["MGET", "k1", "k2", "k3", "k4", "k5"]);
    let _: () = q(&mut w, &["CONFIG", "SET", "tracking-table-max-keys", "2"]);
    assert_eq!(
        q::<Vec<String>>(&mut w, &["CONFIG", "GET", "tracking-table-max-keys"]),
        ["tracking-table-max-keys", "2"]
    );
    let mut evicted: Vec<String> = (0..3).flat_map(|_| invalidated_keys(&mut t)).collect();
    evicted.sort();
    evicted.dedup();
    assert_eq!(evicted.len(), 3);
    assert_eq!(info_field(&mut w, "tracking_total_keys"), 2);
    // Reading more keeps the table at the limit.
    call(&mut t, &["GET", "k9"]);
    let _ = invalidated_keys(&mut t);
    assert_eq!(info_field(&mut w, "tracking_total_keys"), 2);
    assert!(
        err(&mut w, &["CONFIG", "SET", "tracking-table-max-keys", "-1"])
            .starts_with("ERR CONFIG SET failed")
    );
}

#[test]
fn tracking_switched_on_inside_a_transaction_takes_effect() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    call(&mut t, &["MULTI"]);
    call(&mut t, &["CLIENT", "TRACKING", "ON"]);
    call(&mut t, &["GET", "k"]);
    assert_eq!(
        call(&mut t, &["EXEC"]),
        Frame::Array(vec![ok(), Frame::Null])
    );
    let _: () = q(&mut w, &["SET", "k", "1"]);
    assert_eq!(t.frame(), inval(&["k"]));
    // Expired keys are recorded for it from then on.
    let _: () = q(&mut w, &["SET", "e", "v", "PX", "30"]);
    call(&mut t, &["GET", "e"]);
    assert_eq!(t.frame(), inval(&["e"]));
    // RESET turns it off.
    assert_eq!(call(&mut t, &["RESET"]), Frame::simple("RESET"));
    assert_eq!(info_field(&mut w, "tracking_clients"), 0);
}

#[test]
fn a_blocked_client_gets_invalidations_and_its_served_reply_first() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    call(&mut t, &["CLIENT", "TRACKING", "ON"]);
    let _: i64 = q(&mut w, &["RPUSH", "dst", "a"]);
    call(&mut t, &["LRANGE", "dst", "0", "-1"]);
    call(&mut t, &["GET", "other"]);
    t.send(&["BLMOVE", "src", "dst", "LEFT", "LEFT", "0"]);
    eventually("the client to block", || {
        info_field(&mut w, "blocked_clients") == 1
    });
    // Invalidations reach a client while it waits...
    let _: () = q(&mut w, &["SET", "other", "1"]);
    assert_eq!(t.frame(), inval(&["other"]));
    // ... and those its served command causes follow its reply.
    let _: i64 = q(&mut w, &["RPUSH", "src", "foo"]);
    assert_eq!(t.frame(), b("foo"));
    assert_eq!(t.frame(), inval(&["dst"]));
    nothing_pending(&mut t);
}

/// A client that sent QUIT behind replies it does not read stays listed
/// until they are taken, and CLIENT KILL still reaches it, whether its
/// connection waits for the socket before the QUIT or after it (then it
/// left the client table and went back: `connection::run`).
#[test]
fn a_quitting_client_that_does_not_read_stays_killable() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let big = "x".repeat(1 << 20);
    let _: () = q(&mut w, &["SET", "big", &big]);
    let mut stuck = RespConn::new(srv.raw());
    let Frame::Integer(id) = call(&mut stuck, &["CLIENT", "ID"]) else {
        panic!("client id")
    };
    // 32 MiB of replies, more than the socket buffers hold, then QUIT.
    let mut burst = Vec::new();
    for _ in 0..32 {
        burst.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    }
    burst.extend_from_slice(b"*1\r\n$4\r\nQUIT\r\n");
    send_raw(&mut stuck.s, &burst);
    std::thread::sleep(Duration::from_millis(300));
    let list: String = q(&mut w, &["CLIENT", "LIST"]);
    assert!(list.contains(&format!("id={id} ")), "{list}");
    let killed: i64 = q(&mut w, &["CLIENT", "KILL", "ID", &id.to_string()]);
    assert_eq!(killed, 1);
    eventually("the killed client to be gone", || {
        let list: String = q(&mut w, &["CLIENT", "LIST"]);
        !list.contains(&format!("id={id} "))
    });
}

/// Redis 7.0.15 answers the same (checked side by side over RESP3).
#[test]
fn two_key_moves_invalidate_in_redis_order() {
    let srv = Server::start(&[]);
    let mut w = srv.conn();
    let mut t = tracker(&srv);
    assert_eq!(call(&mut t, &["CLIENT", "TRACKING", "ON"]), ok());
    let _: () = q(&mut w, &["MSET", "src", "1", "dst", "2"]);
    assert_eq!(
        call(&mut t, &["MGET", "src", "dst"]),
        Frame::Array(vec![b("1"), b("2")])
    );
    let _: () = q(&mut w, &["RENAME", "src", "dst"]);
    assert_eq!(t.frame(), inval(&["src"]));
    assert_eq!(t.frame(), inval(&["dst"]));
    nothing_pending(&mut t);

    // The LMOVE family announces its push before its pop.
    let _: i64 = q(&mut w, &["RPUSH", "from", "a", "b"]);
    let _: i64 = q(&mut w, &["RPUSH", "to", "x"]);
    for cmd in [
        &["LMOVE", "from", "to", "LEFT", "RIGHT"][..],
        &["RPOPLPUSH", "from", "to"][..],
    ] {
        call(&mut t, &["LRANGE", "from", "0", "-1"]);
        call(&mut t, &["LRANGE", "to", "0", "-1"]);
        let _: String = q(&mut w, cmd);
        assert_eq!(t.frame(), inval(&["to"]), "{cmd:?}");
        assert_eq!(t.frame(), inval(&["from"]), "{cmd:?}");
        nothing_pending(&mut t);
    }
}
