//! Black-box tests of the server commands (CLIENT, CONFIG, INFO, COMMAND,
//! AUTH, SHUTDOWN, ...) against the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use common::{err as error, q as ok, try_q as query};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Parses an INFO reply into (section → fields).
fn parse_info(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut section = String::new();
    for line in text.split("\r\n") {
        if let Some(title) = line.strip_prefix("# ") {
            section = title.to_ascii_lowercase();
            out.entry(section.clone()).or_default();
        } else if !line.is_empty() {
            let (k, v) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("bad INFO line {line:?}"));
            out.entry(section.clone())
                .or_default()
                .insert(k.to_string(), v.to_string());
        }
    }
    out
}

fn info(c: &mut redis::Connection, sections: &[&str]) -> HashMap<String, HashMap<String, String>> {
    let mut args = vec!["INFO"];
    args.extend_from_slice(sections);
    let text: String = ok(c, &args);
    assert!(
        !text.contains('\n') || text.contains("\r\n"),
        "INFO lines end in CRLF"
    );
    parse_info(&text)
}

/// The `key=value` fields of one CLIENT LIST line.
fn client_fields(line: &str) -> HashMap<String, String> {
    line.trim_end()
        .split(' ')
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("bad field {kv:?} in {line:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn raw_roundtrip(s: &mut TcpStream, req: &[u8], expect: &[u8]) {
    send_raw(s, req);
    let got = read_exactly(s, expect.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expect),
        "reply to {:?}",
        String::from_utf8_lossy(req)
    );
}

#[test]
fn client_name_info_list_and_durability() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut other = srv.conn();
    let id: i64 = ok(&mut c, &["CLIENT", "ID"]);
    assert!(id > 0);

    assert_eq!(ok::<Option<String>>(&mut c, &["CLIENT", "GETNAME"]), None);
    let _: () = ok(&mut c, &["CLIENT", "SETNAME", "worker-1"]);
    assert_eq!(ok::<String>(&mut c, &["CLIENT", "GETNAME"]), "worker-1");
    assert_eq!(
        error(&mut c, &["CLIENT", "SETNAME", "has space"]),
        "ERR Client names cannot contain spaces, newlines or special characters."
    );

    let line: String = ok(&mut c, &["CLIENT", "INFO"]);
    assert!(
        line.ends_with('\n') && line.lines().count() == 1,
        "{line:?}"
    );
    let f = client_fields(&line);
    assert_eq!(f["id"], id.to_string());
    assert_eq!(f["name"], "worker-1");
    assert_eq!(f["cmd"], "client|info");
    assert_eq!(f["db"], "0");
    assert_eq!(f["user"], "default");
    assert_eq!(f["resp"], "2");
    assert_eq!(f["flags"], "N");
    assert_eq!(f["multi"], "-1");
    // As Redis counts it while the command runs: CLIENT INFO's own 26
    // bytes (*2 $6 CLIENT $4 INFO).
    assert_eq!(f["qbuf"], "26");
    assert_eq!(
        f["lib-name"], "redis-rs",
        "the redis crate sends CLIENT SETINFO"
    );
    assert!(f["addr"].starts_with("127.0.0.1:"));
    assert_eq!(f["laddr"], format!("127.0.0.1:{}", srv.port));
    // Redis 7.2's fields in its order (no `watch=`, which came in 7.4),
    // and no others: go-redis refuses a line with a field it does not
    // know.
    let order: Vec<&str> = line
        .trim_end()
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "id",
            "addr",
            "laddr",
            "fd",
            "name",
            "age",
            "idle",
            "flags",
            "db",
            "sub",
            "psub",
            "ssub",
            "multi",
            "qbuf",
            "qbuf-free",
            "argv-mem",
            "multi-mem",
            "rbs",
            "rbp",
            "obl",
            "oll",
            "omem",
            "tot-mem",
            "events",
            "cmd",
            "user",
            "redir",
            "resp",
            "lib-name",
            "lib-ver"
        ]
    );

    // CLIENT DURABILITY with no argument reads the level back.
    let level = |c: &mut redis::Connection| ok::<String>(c, &["CLIENT", "DURABILITY"]);
    assert_eq!(level(&mut c), "default");
    let _: () = ok(&mut c, &["CLIENT", "DURABILITY", "none"]);
    assert_eq!(level(&mut c), "none");
    let list: String = ok(&mut other, &["CLIENT", "LIST"]);
    assert_eq!(list.lines().count(), 2, "{list}");
    let mine = list
        .lines()
        .map(client_fields)
        .find(|f| f["id"] == id.to_string())
        .expect("listed");
    assert!(!mine.contains_key("durability"), "{list}");
    assert_eq!(mine["name"], "worker-1");
    let _: () = ok(&mut c, &["CLIENT", "DURABILITY", "DELAYED"]);
    let _: () = ok(&mut c, &["SELECT", "3"]);
    let f = client_fields(&ok::<String>(&mut c, &["CLIENT", "INFO"]));
    assert_eq!((level(&mut c).as_str(), f["db"].as_str()), ("delayed", "3"));
    let _: () = ok(&mut c, &["CLIENT", "DURABILITY", "default"]);
    assert_eq!(level(&mut c), "default");
    let e = error(&mut c, &["CLIENT", "DURABILITY", "fast"]);
    assert!(e.starts_with("ERR invalid durability level 'fast'"), "{e}");

    // Filters.
    let only: String = ok(
        &mut other,
        &["CLIENT", "LIST", "ID", &id.to_string(), "99999"],
    );
    assert_eq!(only.lines().count(), 1);
    assert_eq!(
        client_fields(only.lines().next().unwrap())["id"],
        id.to_string()
    );
    let all: String = ok(&mut other, &["CLIENT", "LIST", "TYPE", "normal"]);
    assert_eq!(all.lines().count(), 2);
    let none: String = ok(&mut other, &["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(none, "");
    assert_eq!(
        error(&mut other, &["CLIENT", "LIST", "TYPE", "bogus"]),
        "ERR Unknown client type 'bogus'"
    );
    assert_eq!(
        error(&mut other, &["CLIENT", "LIST", "ID", "abc"]),
        "ERR Invalid client ID"
    );
    // An integer no client has is no error.
    let none: String = ok(&mut other, &["CLIENT", "LIST", "ID", "-1", "0"]);
    assert_eq!(none, "");

    // SETINFO, and the no-op compatibility subcommands.
    let _: () = ok(&mut c, &["CLIENT", "SETINFO", "LIB-NAME", "mylib"]);
    let _: () = ok(&mut c, &["CLIENT", "SETINFO", "lib-ver", "1.2.3"]);
    let f = client_fields(&ok::<String>(&mut c, &["CLIENT", "INFO"]));
    assert_eq!(
        (f["lib-name"].as_str(), f["lib-ver"].as_str()),
        ("mylib", "1.2.3")
    );
    assert_eq!(
        error(&mut c, &["CLIENT", "SETINFO", "color", "red"]),
        "ERR Unrecognized option 'color'"
    );
    assert_eq!(
        error(&mut c, &["CLIENT", "SETINFO", "lib-name", "a b"]),
        "ERR lib-name cannot contain spaces, newlines or special characters."
    );
    let _: () = ok(&mut c, &["CLIENT", "NO-EVICT", "on"]);
    let _: () = ok(&mut c, &["CLIENT", "NO-TOUCH", "off"]);
    let _: () = ok(&mut c, &["CLIENT", "REPLY", "ON"]);
    assert_eq!(
        error(&mut c, &["CLIENT", "NO-EVICT", "maybe"]),
        "ERR syntax error"
    );

    // Unknown subcommands and wrong arity are reported like Redis does.
    assert_eq!(
        error(&mut c, &["CLIENT", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try CLIENT HELP."
    );
    assert_eq!(
        error(&mut c, &["CLIENT", "GETNAME", "extra"]),
        "ERR wrong number of arguments for 'client|getname' command"
    );
    let help: Vec<String> = ok(&mut c, &["CLIENT", "HELP"]);
    assert!(help[0].starts_with("CLIENT <subcommand>"), "{help:?}");
    assert!(help.iter().any(|l| l.starts_with("DURABILITY")), "{help:?}");
}

/// Waits for a killed connection to be closed by the server. A command sent
/// just as the kill lands may still be answered, so poll.
fn assert_closed(c: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while query::<String>(c, &["PING"]).is_ok() {
        assert!(Instant::now() < deadline, "killed connection still answers");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn client_kill_by_id_addr_and_self() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    let mut victim = srv.conn();
    let victim_id: i64 = ok(&mut victim, &["CLIENT", "ID"]);
    let killed: i64 = ok(
        &mut admin,
        &["CLIENT", "KILL", "ID", &victim_id.to_string()],
    );
    assert_eq!(killed, 1);
    assert_closed(&mut victim);

    // The old form takes an address and answers OK or an error.
    let mut victim2 = srv.conn();
    let addr = client_fields(&ok::<String>(&mut victim2, &["CLIENT", "INFO"]))["addr"].clone();
    let _: () = ok(&mut admin, &["CLIENT", "KILL", &addr]);
    assert_closed(&mut victim2);
    assert_eq!(
        error(&mut admin, &["CLIENT", "KILL", &addr]),
        "ERR No such client"
    );

    let n: i64 = ok(&mut admin, &["CLIENT", "KILL", "ID", "999999"]);
    assert_eq!(n, 0);
    assert_eq!(
        error(&mut admin, &["CLIENT", "KILL", "ID", "0"]),
        "ERR client-id should be greater than 0"
    );
    assert_eq!(
        error(&mut admin, &["CLIENT", "KILL", "BOGUS", "1"]),
        "ERR syntax error"
    );

    // By default a client does not kill itself; with SKIPME no it does,
    // after receiving the reply.
    let admin_id: i64 = ok(&mut admin, &["CLIENT", "ID"]);
    let n: i64 = ok(&mut admin, &["CLIENT", "KILL", "ID", &admin_id.to_string()]);
    assert_eq!(n, 0);
    let laddr = format!("127.0.0.1:{}", srv.port);
    let mut a = srv.conn();
    let mut b = srv.conn();
    let n: i64 = ok(
        &mut admin,
        &["CLIENT", "KILL", "LADDR", &laddr, "SKIPME", "no"],
    );
    assert_eq!(n, 3, "admin, a and b");
    for c in [&mut admin, &mut a, &mut b] {
        assert_closed(c);
    }
    let mut fresh = srv.conn();
    assert_eq!(ok::<String>(&mut fresh, &["PING"]), "PONG");
}

fn answers(port: u16) -> bool {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection_with_timeout(std::time::Duration::from_secs(5)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok()
}

#[test]
fn config_set_port_and_bind_move_the_listener() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    // A new port: connections open already stay, the old port closes.
    let p1 = free_port();
    let _: () = ok(&mut c, &["CONFIG", "SET", "port", &p1.to_string()]);
    assert!(answers(p1));
    assert!(!answers(srv.port), "the old port no longer listens");
    assert_eq!(ok::<String>(&mut c, &["PING"]), "PONG");
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "port"]);
    assert_eq!(got, ["port", &p1.to_string()]);
    let info: String = ok(&mut c, &["INFO", "server"]);
    assert!(info.contains(&format!("tcp_port:{p1}\r\n")), "{info}");

    // A port taken by somebody else: Redis's error, and nothing changes,
    // not even the other settings of the same command.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p2 = taken.local_addr().unwrap().port().to_string();
    assert_eq!(
        error(&mut c, &["CONFIG", "SET", "maxmemory", "12345", "port", &p2]),
        "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port"
    );
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "maxmemory", "port"]);
    assert_eq!(got, ["maxmemory", "0", "port", &p1.to_string()]);
    assert!(answers(p1));

    // bind: an address that does not parse, then a second loopback
    // address and an optional one the host may lack, on the same port.
    assert_eq!(
        error(&mut c, &["CONFIG", "SET", "bind", "999.999.999.999"]),
        "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."
    );
    let _: () = ok(
        &mut c,
        &["CONFIG", "SET", "bind", "127.0.0.1 127.0.0.2 -::1"],
    );
    assert!(answers(p1));
    let second = redis::Client::open(format!("redis://127.0.0.2:{p1}/"))
        .and_then(|cl| cl.get_connection_with_timeout(std::time::Duration::from_secs(5)));
    assert!(second.is_ok(), "127.0.0.2 listens too");
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "bind"]);
    assert_eq!(got, ["bind", "127.0.0.1 127.0.0.2 -::1"]);
    // Only the second address, same port: the first closes.
    let _: () = ok(&mut c, &["CONFIG", "SET", "bind", "127.0.0.2"]);
    assert!(!answers(p1), "127.0.0.1 closed");
    let mut moved = redis::Client::open(format!("redis://127.0.0.2:{p1}/"))
        .and_then(|cl| cl.get_connection_with_timeout(std::time::Duration::from_secs(5)))
        .expect("127.0.0.2 still listens");
    let _: () = ok(
        &mut moved,
        &[
            "CONFIG",
            "SET",
            "bind",
            "127.0.0.1",
            "port",
            &srv.port.to_string(),
        ],
    );
    assert!(answers(srv.port));
    // The command's own connection is kept across all of it.
    assert_eq!(ok::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn config_get_set_round_trip() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let got: HashMap<String, String> = ok(&mut c, &["CONFIG", "GET", "maxclients"]);
    assert_eq!(
        got,
        HashMap::from([("maxclients".to_string(), "10000".to_string())])
    );
    let _: () = ok(&mut c, &["CONFIG", "SET", "maxclients", "500"]);
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "maxclients"]);
    assert_eq!(got, ["maxclients", "500"]);

    // Glob patterns, several patterns, and no duplicates.
    let got: HashMap<String, String> = ok(&mut c, &["CONFIG", "GET", "max*", "maxclients", "hz"]);
    assert_eq!(got["maxmemory"], "0");
    assert_eq!(got["hz"], "10");
    let flat: Vec<String> = ok(&mut c, &["CONFIG", "GET", "max*", "maxclients"]);
    assert_eq!(flat.iter().filter(|s| *s == "maxclients").count(), 1);
    let got: HashMap<String, String> = ok(&mut c, &["CONFIG", "GET", "save", "appendonly"]);
    assert_eq!(got.len(), 2, "redis-benchmark reads these");
    let none: Vec<String> = ok(&mut c, &["CONFIG", "GET", "no-such-*"]);
    assert!(none.is_empty());

    // Several pairs at once; all-or-nothing.
    let _: () = ok(&mut c, &["CONFIG", "SET", "hz", "20", "timeout", "0"]);
    assert_eq!(
        error(&mut c, &["CONFIG", "SET", "hz", "30", "maxclients", "abc"]),
        "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer"
    );
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "hz"]);
    assert_eq!(got, ["hz", "20"], "a failed CONFIG SET changes nothing");
    assert_eq!(
        error(&mut c, &["CONFIG", "SET", "databases", "7"]),
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
    );
    // The value in force is not a change (tools replay CONFIG GET *).
    let _: () = ok(&mut c, &["CONFIG", "SET", "databases", "16"]);
    assert_eq!(
        error(&mut c, &["CONFIG", "SET", "nonsense", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nonsense'"
    );
    assert_eq!(
        error(&mut c, &["CONFIG", "SET", "hz", "1", "hz", "2"]),
        "ERR CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter"
    );
    assert_eq!(
        error(&mut c, &["CONFIG", "SET", "hz", "1", "timeout"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["CONFIG", "SET", "hz"]),
        "ERR wrong number of arguments for 'config|set' command"
    );

    // Per-database durability is settable and shows in INFO.
    let _: () = ok(&mut c, &["CONFIG", "SET", "durability-db-3", "none"]);
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "durability-db-3"]);
    assert_eq!(got, ["durability-db-3", "none"]);
    let p = &info(&mut c, &["persistence"])["persistence"];
    assert_eq!(p["db3_durability"], "none");
    assert_eq!(p["db0_durability"], "full");
    assert_eq!(p["durability"], "full");
    let e = error(&mut c, &["CONFIG", "SET", "durability-db-99", "none"]);
    assert!(
        e.starts_with("ERR CONFIG SET failed (possibly related to argument 'durability-db-99') - "),
        "{e}"
    );

    let _: () = ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let s = &info(&mut c, &["stats"])["stats"];
    let processed: u64 = s["total_commands_processed"].parse().unwrap();
    assert!(processed <= 2, "reset: {processed}");
    assert_eq!(
        error(&mut c, &["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );
    assert_eq!(
        error(&mut c, &["CONFIG", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try CONFIG HELP."
    );
}

#[test]
fn maxclients_limit_refuses_extra_connections() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["CONFIG", "SET", "maxclients", "2"]);
    let mut second = srv.raw();
    raw_roundtrip(&mut second, b"PING\r\n", b"+PONG\r\n");
    let mut third = srv.raw();
    assert_eq!(
        String::from_utf8_lossy(&read_to_close(&mut third)),
        "-ERR max number of clients reached\r\n"
    );
    let s = &info(&mut c, &["stats"])["stats"];
    assert!(s["rejected_connections"].parse::<u64>().unwrap() >= 1);
    // Room again once a client leaves.
    drop(second);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = srv.raw();
        send_raw(&mut s, b"PING\r\n");
        let mut buf = [0u8; 7];
        if s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "slot never freed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// INFO's socket counters, the memory held before the data, the LRU clock
/// and the function counts: fields that redis_exporter and other
/// dashboards chart.
#[test]
fn info_counts_socket_reads_and_writes_and_memory_since_startup() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let num = |m: &HashMap<String, String>, f: &str| -> i64 {
        m.get(f)
            .unwrap_or_else(|| panic!("no {f}"))
            .parse()
            .unwrap_or_else(|_| panic!("{f}: {}", m[f]))
    };
    let st = &info(&mut c, &["stats"])["stats"];
    let (reads, writes) = (
        num(st, "total_reads_processed"),
        num(st, "total_writes_processed"),
    );
    // One request at a time: a read and a write each.
    for _ in 0..10 {
        let _: String = ok(&mut c, &["PING"]);
    }
    let st = &info(&mut c, &["stats"])["stats"];
    assert!(num(st, "total_reads_processed") >= reads + 10, "{st:?}");
    assert!(num(st, "total_writes_processed") >= writes + 10, "{st:?}");

    let m = &info(&mut c, &["memory"])["memory"];
    let startup = num(m, "used_memory_startup");
    assert!(
        startup > 0 && startup <= num(m, "used_memory_peak"),
        "{m:?}"
    );
    assert_eq!(
        num(m, "mem_fragmentation_bytes"),
        num(m, "used_memory_rss") - num(m, "used_memory")
    );
    // A megabyte of data is memory in use beyond the start-up baseline.
    let value = "x".repeat(1 << 20);
    let _: () = ok(&mut c, &["SET", "big", &value]);
    let m = &info(&mut c, &["memory"])["memory"];
    assert_eq!(num(m, "used_memory_startup"), startup, "fixed at start-up");
    assert!(num(m, "used_memory") - startup >= 1 << 20, "{m:?}");

    let server = &info(&mut c, &["server"])["server"];
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let lru = num(server, "lru_clock");
    let behind = ((now_s & 0xFF_FFFF) - lru).rem_euclid(1 << 24);
    assert!(behind <= 2, "lru_clock {lru}, now {now_s}");
    assert_eq!(server["monotonic_clock"], "POSIX clock_gettime");

    // FUNCTION LOAD's libraries and functions.
    let m = &info(&mut c, &["memory"])["memory"];
    assert_eq!(
        (num(m, "number_of_libraries"), num(m, "number_of_functions")),
        (0, 0)
    );
    let lib = "#!lua name=counts\n\
               redis.register_function('one', function() return 1 end)\n\
               redis.register_function('two', function() return 2 end)";
    let _: String = ok(&mut c, &["FUNCTION", "LOAD", lib]);
    let m = &info(&mut c, &["memory"])["memory"];
    assert_eq!(
        (num(m, "number_of_libraries"), num(m, "number_of_functions")),
        (1, 2)
    );

    let _: () = ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let st = &info(&mut c, &["stats"])["stats"];
    assert!(num(st, "total_reads_processed") <= 3, "reset: {st:?}");
}

/// The section headers a tool reading INFO finds, in Redis 7's order,
/// the empty Modules section among them.
#[test]
fn info_prints_redis_sections_in_redis_order() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let modules: String = q(&mut c, &["INFO", "modules"]);
    assert_eq!(modules, "# Modules\r\n");
    let mut headers = |args: &[&str]| -> Vec<String> {
        let text: String = q(&mut c, args);
        text.lines()
            .filter_map(|l| l.strip_prefix("# "))
            .map(str::to_owned)
            .collect()
    };
    let default = [
        "Server",
        "Clients",
        "Memory",
        "Persistence",
        "Stats",
        "Replication",
        "CPU",
        "Modules",
        "Errorstats",
        "Cluster",
        "Keyspace",
    ];
    assert_eq!(headers(&["INFO"]), default);
    assert_eq!(headers(&["INFO", "default"]), default);
    let mut all = default.to_vec();
    all.insert(
        all.iter().position(|s| *s == "Errorstats").unwrap(),
        "Commandstats",
    );
    all.insert(
        all.iter().position(|s| *s == "Cluster").unwrap(),
        "Latencystats",
    );
    assert_eq!(headers(&["INFO", "all"]), all);
}

#[test]
fn info_sections_have_real_values() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    // Enough commands for the connection threads' CPU time to show.
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("ECHO").arg(i).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let all = info(&mut c, &[]);
    for s in [
        "server",
        "clients",
        "memory",
        "persistence",
        "stats",
        "replication",
        "cpu",
        "keyspace",
    ] {
        assert!(
            all.contains_key(s),
            "default INFO lacks {s}: {:?}",
            all.keys()
        );
    }
    let server = &all["server"];
    assert_eq!(server["redis_version"], "7.2.4");
    assert_eq!(server["redis_mode"], "standalone");
    assert_eq!(server["tcp_port"], srv.port.to_string());
    assert_eq!(
        server["process_id"],
        srv.child.as_ref().unwrap().id().to_string()
    );
    assert_eq!(server["run_id"].len(), 40);
    assert!(
        server["executable"].ends_with("durakv"),
        "{}",
        server["executable"]
    );
    assert!(!server["durakv_version"].is_empty());
    assert!(server["uptime_in_seconds"].parse::<u64>().is_ok());
    assert_eq!(server["hz"], "10");
    assert_eq!(all["clients"]["connected_clients"], "1");
    assert_eq!(all["clients"]["maxclients"], "10000");
    assert!(all["memory"]["used_memory"].parse::<u64>().unwrap() > 0);
    assert!(all["memory"]["used_memory_rss"].parse::<u64>().unwrap() > 0);
    assert!(!all["memory"]["used_memory_human"].is_empty());
    assert_eq!(all["memory"]["maxmemory_policy"], "noeviction");
    let p = &all["persistence"];
    assert_eq!(p["loading"], "0");
    assert_eq!(p["rdb_bgsave_in_progress"], "0");
    assert_eq!(p["aof_enabled"], "0");
    assert_eq!(p["durability_policy"], "connection");
    assert_eq!(
        (0..16)
            .filter(|d| p.contains_key(&format!("db{d}_durability")))
            .count(),
        16
    );
    assert_eq!(p["wal_failure"], "");
    assert_eq!(all["replication"]["role"], "master");
    assert_eq!(all["replication"]["connected_slaves"], "0");
    // The connection threads run commands: Redis's "main thread".
    let main: f64 = ["used_cpu_user_main_thread", "used_cpu_sys_main_thread"]
        .iter()
        .map(|f| all["cpu"][*f].parse::<f64>().unwrap())
        .sum();
    assert!(main > 0.0, "{:?}", all["cpu"]);
    assert!(all["cpu"]["used_cpu_user"].parse::<f64>().is_ok());
    assert!(all["cpu"]["used_cpu_sys"].parse::<f64>().is_ok());
    let st = &all["stats"];
    assert!(st["total_connections_received"].parse::<u64>().unwrap() >= 1);
    assert!(st["instantaneous_ops_per_sec"].parse::<u64>().is_ok());
    assert!(all["keyspace"].is_empty());

    // Keyspace reflects keys, per database, with TTL counts.
    let _: () = ok(&mut c, &["SET", "a", "1"]);
    let _: () = ok(&mut c, &["SET", "b", "2", "EX", "100"]);
    let _: () = ok(&mut c, &["SELECT", "2"]);
    let _: () = ok(&mut c, &["SET", "c", "3"]);
    let ks = info(&mut c, &["keyspace"]);
    assert_eq!(ks.len(), 1, "only the section asked for: {:?}", ks.keys());
    // avg_ttl in ms, as Redis estimates it: b's 100 s, less the time since.
    let db0 = ks["keyspace"]["db0"].clone();
    let avg: u64 = db0
        .strip_prefix("keys=2,expires=1,avg_ttl=")
        .unwrap_or_else(|| panic!("{db0}"))
        .parse()
        .unwrap();
    assert!((90_000..=100_000).contains(&avg), "{db0}");
    assert_eq!(ks["keyspace"]["db2"], "keys=1,expires=0,avg_ttl=0");
    let before: u64 = info(&mut c, &["persistence"])["persistence"]["rdb_changes_since_last_save"]
        .parse()
        .unwrap();
    assert!(before >= 3);

    // Several sections at once; unknown ones are ignored; `everything`.
    let two = info(&mut c, &["server", "CLIENTS", "nosuch"]);
    let mut names: Vec<&String> = two.keys().collect();
    names.sort();
    assert_eq!(names, ["clients", "server"]);
    let every = info(&mut c, &["everything"]);
    assert!(every.contains_key("commandstats") && every.contains_key("keyspace"));

    // The ops rate is measured between INFO calls.
    for _ in 0..200 {
        let _: String = ok(&mut c, &["PING"]);
    }
    std::thread::sleep(Duration::from_millis(150));
    for _ in 0..200 {
        let _: String = ok(&mut c, &["PING"]);
    }
    let ops: u64 = info(&mut c, &["stats"])["stats"]["instantaneous_ops_per_sec"]
        .parse()
        .unwrap();
    assert!(ops > 0, "ops/sec after a burst");
}

#[test]
fn command_count_info_docs_list_getkeys() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let count: i64 = ok(&mut c, &["COMMAND", "COUNT"]);
    assert!(count > 20, "{count}");
    let table: Vec<redis::Value> = ok(&mut c, &["COMMAND"]);
    assert_eq!(table.len() as i64, count);
    for entry in &table {
        let redis::Value::Array(fields) = entry else {
            panic!("{entry:?}")
        };
        assert_eq!(fields.len(), 10, "Redis 7 shape: {entry:?}");
    }

    let got: Vec<redis::Value> = ok(&mut c, &["COMMAND", "INFO", "get", "nosuch"]);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1], redis::Value::Nil);
    let redis::Value::Array(get) = &got[0] else {
        panic!("{got:?}")
    };
    let text = |v: &redis::Value| -> String { redis::from_redis_value_ref(v).unwrap() };
    let texts = |v: &redis::Value| -> Vec<String> { redis::from_redis_value_ref(v).unwrap() };
    assert_eq!(text(&get[0]), "get");
    assert_eq!(get[1], redis::Value::Int(2));
    assert_eq!(texts(&get[2]), ["readonly", "fast"]);
    assert_eq!(
        (&get[3], &get[4], &get[5]),
        (
            &redis::Value::Int(1),
            &redis::Value::Int(1),
            &redis::Value::Int(1)
        )
    );
    let cats = texts(&get[6]);
    assert!(
        cats.contains(&"@read".to_string()) && cats.contains(&"@string".to_string()),
        "{cats:?}"
    );
    let redis::Value::Array(specs) = &get[8] else {
        panic!()
    };
    assert_eq!(specs.len(), 1, "one key spec");

    let mset: Vec<redis::Value> = ok(&mut c, &["COMMAND", "INFO", "mset"]);
    let redis::Value::Array(mset) = &mset[0] else {
        panic!()
    };
    assert_eq!(texts(&mset[2])[0], "write");
    assert_eq!(
        (&mset[3], &mset[4], &mset[5]),
        (
            &redis::Value::Int(1),
            &redis::Value::Int(-1),
            &redis::Value::Int(2)
        )
    );

    // Containers list their subcommands, which can be asked about by name.
    let client: Vec<redis::Value> = ok(&mut c, &["COMMAND", "INFO", "client", "config|get"]);
    let redis::Value::Array(client0) = &client[0] else {
        panic!()
    };
    let redis::Value::Array(subs) = &client0[9] else {
        panic!()
    };
    let sub_names: Vec<String> = subs
        .iter()
        .map(|s| {
            let redis::Value::Array(f) = s else { panic!() };
            text(&f[0])
        })
        .collect();
    assert!(
        sub_names.contains(&"client|list".to_string()),
        "{sub_names:?}"
    );
    let redis::Value::Array(cfg_get) = &client[1] else {
        panic!("{client:?}")
    };
    assert_eq!(text(&cfg_get[0]), "config|get");
    assert_eq!(cfg_get[1], redis::Value::Int(-3));

    let docs: HashMap<String, HashMap<String, redis::Value>> =
        ok(&mut c, &["COMMAND", "DOCS", "get", "nosuch"]);
    assert_eq!(docs.len(), 1);
    assert_eq!(text(&docs["get"]["group"]), "string");
    assert!(!text(&docs["get"]["summary"]).is_empty());
    let all_docs: Vec<redis::Value> = ok(&mut c, &["COMMAND", "DOCS"]);
    assert_eq!(all_docs.len() as i64, 2 * count);
    let client_docs: HashMap<String, HashMap<String, redis::Value>> =
        ok(&mut c, &["COMMAND", "DOCS", "client"]);
    let subs: HashMap<String, redis::Value> =
        redis::from_redis_value_ref(&client_docs["client"]["subcommands"]).unwrap();
    assert!(
        subs.contains_key("client|kill"),
        "redis-cli needs `container|sub` names"
    );

    let names: Vec<String> = ok(&mut c, &["COMMAND", "LIST"]);
    assert!(names.contains(&"set".to_string()) && names.contains(&"client|kill".to_string()));
    let z: Vec<String> = ok(&mut c, &["COMMAND", "LIST", "FILTERBY", "PATTERN", "z*"]);
    assert!(
        !z.is_empty() && z.iter().all(|n| n.starts_with('z')),
        "{z:?}"
    );
    let conn_cmds: Vec<String> = ok(
        &mut c,
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection"],
    );
    assert!(conn_cmds.contains(&"ping".to_string()), "{conn_cmds:?}");
    let m: Vec<String> = ok(&mut c, &["COMMAND", "LIST", "FILTERBY", "MODULE", "x"]);
    assert!(m.is_empty());

    let keys: Vec<String> = ok(&mut c, &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"]);
    assert_eq!(keys, ["a", "b"]);
    // Redis 7.0's COMMAND GETKEYS wants the command and an argument.
    assert_eq!(
        error(&mut c, &["COMMAND", "GETKEYS", "PING"]),
        "ERR wrong number of arguments for 'command|getkeys' command"
    );
    assert_eq!(
        error(&mut c, &["COMMAND", "GETKEYS", "PING", "x"]),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        error(&mut c, &["COMMAND", "GETKEYS", "NOPE", "x"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        error(&mut c, &["COMMAND", "GETKEYS", "GET", "a", "b"]),
        "ERR Invalid number of arguments specified for command"
    );

    // A script's keys are its numkeys, even none, although it locks every shard.
    let keys: Vec<String> = ok(
        &mut c,
        &["COMMAND", "GETKEYS", "EVAL", "return 1", "1", "k"],
    );
    assert_eq!(keys, ["k"]);
    let keys: Vec<String> = ok(&mut c, &["COMMAND", "GETKEYS", "FCALL", "f", "0"]);
    assert!(keys.is_empty());
    let info: Vec<redis::Value> = ok(&mut c, &["COMMAND", "INFO", "EVAL", "SORT_RO", "GET"]);
    let flags = |i: usize| format!("{:?}", info[i]);
    assert!(flags(0).contains("movablekeys"), "{}", flags(0));
    assert!(flags(1).contains("movablekeys"), "{}", flags(1));
    assert!(!flags(2).contains("movablekeys"), "{}", flags(2));

    let got: Vec<(String, Vec<String>)> = ok(
        &mut c,
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "LMOVE",
            "a",
            "b",
            "LEFT",
            "RIGHT",
        ],
    );
    assert_eq!(
        got,
        [
            (
                "a".to_string(),
                vec!["RW".into(), "access".into(), "delete".into()]
            ),
            ("b".to_string(), vec!["RW".into(), "insert".into()]),
        ]
    );
    let got: Vec<(String, Vec<String>)> = ok(
        &mut c,
        &["COMMAND", "GETKEYSANDFLAGS", "MSET", "a", "1", "b", "2"],
    );
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].1, ["OW", "update"]);

    let scripting: Vec<String> = ok(
        &mut c,
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "scripting"],
    );
    assert!(
        scripting.contains(&"script|kill".to_string()),
        "{scripting:?}"
    );
}

/// Client libraries read COMMAND's flags and key positions: redis-py's
/// CommandsParser finds PUBLISH's and SUBSCRIBE's channels by the `pubsub`
/// flag. They are Redis 7.0's, in its order.
#[test]
fn command_info_flags_and_keys_as_redis_7() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let got: Vec<redis::Value> = ok(
        &mut c,
        &[
            "COMMAND",
            "INFO",
            "publish",
            "subscribe",
            "exec",
            "sort",
            "zunionstore",
            "client|list",
            "client",
            "eval",
            "xgroup|create",
        ],
    );
    let entry = |i: usize| -> (String, Vec<String>, [i64; 3]) {
        let redis::Value::Array(f) = &got[i] else {
            panic!("{got:?}")
        };
        let int = |v: &redis::Value| -> i64 { redis::from_redis_value_ref(v).unwrap() };
        (
            redis::from_redis_value_ref(&f[0]).unwrap(),
            redis::from_redis_value_ref(&f[2]).unwrap(),
            [int(&f[3]), int(&f[4]), int(&f[5])],
        )
    };
    let want: [(&str, &[&str], [i64; 3]); 9] = [
        (
            "publish",
            &["pubsub", "loading", "stale", "fast"],
            [0, 0, 0],
        ),
        (
            "subscribe",
            &["pubsub", "noscript", "loading", "stale"],
            [0, 0, 0],
        ),
        (
            "exec",
            &["noscript", "loading", "stale", "skip_slowlog"],
            [0, 0, 0],
        ),
        ("sort", &["write", "denyoom", "movablekeys"], [1, 1, 1]),
        (
            "zunionstore",
            &["write", "denyoom", "movablekeys"],
            [1, 1, 1],
        ),
        (
            "client|list",
            &["admin", "noscript", "loading", "stale"],
            [0, 0, 0],
        ),
        // A container has no flags of its own.
        ("client", &[], [0, 0, 0]),
        (
            "eval",
            &[
                "noscript",
                "stale",
                "skip_monitor",
                "no_mandatory_keys",
                "movablekeys",
            ],
            [0, 0, 0],
        ),
        ("xgroup|create", &["write", "denyoom"], [2, 2, 1]),
    ];
    for (i, (name, flags, triple)) in want.into_iter().enumerate() {
        let (got_name, got_flags, got_triple) = entry(i);
        assert_eq!(got_name, name);
        assert_eq!(got_flags, flags, "{name}");
        assert_eq!(got_triple, triple, "{name}");
    }

    // Key specs: BITOP's destination and sources are two specs; SPUBLISH's
    // channel is no key, so GETKEYS leaves it out.
    let bitop: Vec<redis::Value> = ok(&mut c, &["COMMAND", "INFO", "bitop"]);
    let redis::Value::Array(bitop) = &bitop[0] else {
        panic!("{bitop:?}")
    };
    let redis::Value::Array(specs) = &bitop[8] else {
        panic!("{bitop:?}")
    };
    assert_eq!(specs.len(), 2, "{specs:?}");
    let spec0 = format!("{:?}", specs[0]);
    assert!(spec0.contains("OW") && spec0.contains("update"), "{spec0}");
    assert_eq!(
        error(&mut c, &["COMMAND", "GETKEYS", "SPUBLISH", "ch", "msg"]),
        "ERR The command has no key arguments"
    );
    let got: Vec<(String, Vec<String>)> =
        ok(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "HDEL", "h", "f"]);
    assert_eq!(got, [("h".to_string(), vec!["RW".into(), "delete".into()])]);
    let got: Vec<(String, Vec<String>)> = ok(
        &mut c,
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "XGROUP",
            "CREATE",
            "s",
            "g",
            "$",
        ],
    );
    assert_eq!(got, [("s".to_string(), vec!["RW".into(), "insert".into()])]);
}

/// Cluster clients route and merge replies by these tips (go-redis's
/// "should Command Tips" compares them), so they are Redis 7.0's, in order.
#[test]
fn command_info_tips_as_redis_7() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let tips_of = |entry: &redis::Value| -> (String, Vec<String>) {
        let redis::Value::Array(f) = entry else {
            panic!("{entry:?}")
        };
        (
            redis::from_redis_value_ref(&f[0]).unwrap(),
            redis::from_redis_value_ref(&f[7]).unwrap(),
        )
    };
    let got: Vec<redis::Value> = ok(
        &mut c,
        &[
            "COMMAND",
            "INFO",
            "touch",
            "flushall",
            "keys",
            "randomkey",
            "client|list",
            "slowlog|len",
            "get",
        ],
    );
    let got: Vec<(String, Vec<String>)> = got.iter().map(tips_of).collect();
    let want: [(&str, &[&str]); 7] = [
        (
            "touch",
            &["request_policy:multi_shard", "response_policy:agg_sum"],
        ),
        (
            "flushall",
            &["request_policy:all_shards", "response_policy:all_succeeded"],
        ),
        (
            "keys",
            &["request_policy:all_shards", "nondeterministic_output_order"],
        ),
        (
            "randomkey",
            &["request_policy:all_shards", "nondeterministic_output"],
        ),
        ("client|list", &["nondeterministic_output"]),
        (
            "slowlog|len",
            &[
                "request_policy:all_nodes",
                "response_policy:agg_sum",
                "nondeterministic_output",
            ],
        ),
        ("get", &[]),
    ];
    assert_eq!(got.len(), want.len());
    for ((name, tips), (want_name, want_tips)) in got.iter().zip(want) {
        assert_eq!(name, want_name);
        assert_eq!(tips, want_tips, "{name}");
    }

    // A container's own entry lists its subcommands with their tips.
    let config: Vec<redis::Value> = ok(&mut c, &["COMMAND", "INFO", "config"]);
    let redis::Value::Array(fields) = &config[0] else {
        panic!("{config:?}")
    };
    assert_eq!(tips_of(&config[0]).1, Vec::<String>::new());
    let redis::Value::Array(subs) = &fields[9] else {
        panic!("{fields:?}")
    };
    let subs: HashMap<String, Vec<String>> = subs.iter().map(tips_of).collect();
    assert_eq!(
        subs["config|set"],
        ["request_policy:all_nodes", "response_policy:all_succeeded"]
    );
    assert!(subs["config|get"].is_empty(), "{subs:?}");

    // Redis 7.0's COMMAND DOCS has no tips field.
    let docs: HashMap<String, HashMap<String, redis::Value>> =
        ok(&mut c, &["COMMAND", "DOCS", "touch"]);
    assert!(!docs["touch"].contains_key("tips"), "{docs:?}");
}

/// COMMAND DOCS gives each command's first version and its arguments as
/// Redis 7.0.15 does, so redis-cli's hints and `help` read the same; only
/// what Redis 7.2 added (which durakv serves) differs. Skipped without
/// `redis-server`.
#[test]
fn command_docs_arguments_match_redis() {
    let Some(redis) = RealRedis::start(&[]) else {
        return;
    };
    let srv = Server::start(&[]);
    let (mut ours, mut theirs) = (srv.conn(), redis.conn());
    type Docs = HashMap<String, HashMap<String, redis::Value>>;
    let want: Docs = ok(&mut theirs, &["COMMAND", "DOCS"]);
    let got: Docs = ok(&mut ours, &["COMMAND", "DOCS"]);
    // Redis 7.2's WITHSCORE.
    const CHANGED_IN_7_2: &[&str] = &["zrank", "zrevrank"];
    let mut compared = 0;
    let mut check =
        |name: &str, want: &HashMap<String, redis::Value>, got: &HashMap<String, redis::Value>| {
            for field in ["since", "arguments"] {
                if field == "arguments" && CHANGED_IN_7_2.contains(&name) {
                    continue;
                }
                assert_eq!(got.get(field), want.get(field), "{name} {field}");
            }
            compared += 1;
        };
    for (name, w) in &want {
        let g = got
            .get(name)
            .unwrap_or_else(|| panic!("no docs for {name}"));
        check(name, w, g);
        let subs = |d: &HashMap<String, redis::Value>| -> Docs {
            d.get("subcommands")
                .map(|v| redis::from_redis_value_ref(v).unwrap())
                .unwrap_or_default()
        };
        let got_subs = subs(g);
        for (sub, ws) in subs(w) {
            check(&sub, &ws, &got_subs[&sub]);
        }
    }
    assert!(compared > 300, "{compared}");
    let withscore = |name: &str| format!("{:?}", got[name]["arguments"]);
    for name in CHANGED_IN_7_2 {
        assert!(withscore(name).contains("WITHSCORE"), "{name}");
    }
}

/// COMMAND DOCS carries complexity, doc_flags, deprecated_since,
/// replaced_by and history where Redis 7 does, in its key order and
/// shapes (sets in RESP3): typed APIs (Jedis's `commandDocs()`) read
/// them and give null for a missing one.
#[test]
fn command_docs_complexity_deprecation_and_history() {
    use durakv_protocol::Frame;
    let srv = Server::start(&[]);
    let text = |f: &Frame| match f {
        Frame::Bulk(b) | Frame::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not text: {other:?}"),
    };
    for resp3 in [false, true] {
        let mut r = RespConn::new(srv.raw());
        if resp3 {
            r.send(&["HELLO", "3"]);
            r.frame();
        }
        r.send(&["COMMAND", "DOCS", "getset", "set", "get", "debug"]);
        // (command, [(field, value)]) whatever the protocol.
        let pairs = |f: Frame| -> Vec<(String, Frame)> {
            match f {
                Frame::Map(m) => m.into_iter().map(|(k, v)| (text(&k), v)).collect(),
                Frame::Array(a) if !resp3 => a
                    .chunks(2)
                    .map(|kv| (text(&kv[0]), kv[1].clone()))
                    .collect(),
                other => panic!("not a map: {other:?}"),
            }
        };
        let docs: HashMap<String, Vec<(String, Frame)>> = pairs(r.frame())
            .into_iter()
            .map(|(name, d)| (name, pairs(d)))
            .collect();
        let keys =
            |name: &str| -> Vec<&str> { docs[name].iter().map(|(k, _)| k.as_str()).collect() };
        let field = |name: &str, key: &str| -> &Frame {
            let found = docs[name].iter().find(|(k, _)| k == key);
            &found.unwrap_or_else(|| panic!("{name} has no {key}")).1
        };
        // A set in RESP3, an array in RESP2.
        let items = |f: &Frame| -> Vec<Frame> {
            match (f, resp3) {
                (Frame::Set(v), true) | (Frame::Array(v), false) => v.clone(),
                (other, _) => panic!("resp3={resp3}: {other:?}"),
            }
        };

        let at = format!("resp3={resp3}");
        assert_eq!(
            keys("getset"),
            [
                "summary",
                "since",
                "group",
                "complexity",
                "doc_flags",
                "deprecated_since",
                "replaced_by",
                "arguments"
            ],
            "{at}"
        );
        assert_eq!(text(field("getset", "complexity")), "O(1)", "{at}");
        assert_eq!(
            items(field("getset", "doc_flags")),
            [Frame::Simple("deprecated".into())],
            "{at}"
        );
        assert_eq!(text(field("getset", "deprecated_since")), "6.2.0", "{at}");
        assert!(text(field("getset", "replaced_by")).contains("SET"), "{at}");

        assert_eq!(
            keys("set"),
            [
                "summary",
                "since",
                "group",
                "complexity",
                "history",
                "arguments"
            ],
            "{at}"
        );
        let history = items(field("set", "history"));
        let versions: Vec<String> = history
            .iter()
            .map(|change| {
                let Frame::Array(pair) = change else {
                    panic!("{at}: {change:?}")
                };
                assert_eq!(pair.len(), 2, "{at}");
                assert!(!text(&pair[1]).is_empty(), "{at}");
                text(&pair[0])
            })
            .collect();
        // Oldest first: SET's EX/PX/NX/XX options came in 2.6.12.
        assert_eq!(versions.first().map(String::as_str), Some("2.6.12"), "{at}");

        assert_eq!(text(field("get", "complexity")), "O(1)", "{at}");
        for absent in ["doc_flags", "deprecated_since", "replaced_by", "history"] {
            assert!(!keys("get").contains(&absent), "{at}: get has {absent}");
        }
        assert_eq!(
            items(field("debug", "doc_flags")),
            [Frame::Simple("syscmd".into())],
            "{at}"
        );
    }
}

/// Client libraries probe CLUSTER to tell a cluster from a single server:
/// the answers must be a Redis with cluster support disabled.
#[test]
fn cluster_commands_answer_as_cluster_support_disabled() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    const DISABLED: &str = "ERR This instance has cluster support disabled";
    for args in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "KEYSLOT", "k"],
        &["CLUSTER", "HELP"],
        &["READONLY"],
        &["READWRITE"],
        &["ASKING"],
    ] {
        assert_eq!(error(&mut c, args), DISABLED, "{args:?}");
    }
    assert_eq!(
        error(&mut c, &["CLUSTER", "nosuch"]),
        "ERR unknown subcommand 'nosuch'. Try CLUSTER HELP."
    );
    assert_eq!(
        error(&mut c, &["CLUSTER", "INFO", "x"]),
        "ERR wrong number of arguments for 'cluster|info' command"
    );
    let listed: Vec<String> = ok(&mut c, &["COMMAND", "LIST"]);
    for name in ["cluster|help", "cluster|slots", "readonly"] {
        assert!(listed.iter().any(|n| n == name), "{name}");
    }
    // A script may not reset a cluster (CLUSTER RESET is `noscript`), and
    // `cluster-enabled` stays `no` in INFO.
    let e = error(
        &mut c,
        &["EVAL", "return redis.call('cluster','reset','hard')", "0"],
    );
    assert!(e.contains("not allowed from script"), "{e}");
    let info: String = ok(&mut c, &["INFO", "cluster"]);
    assert!(info.contains("cluster_enabled:0"), "{info}");
    assert_eq!(ok::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn auth_with_requirepass() {
    let srv = Server::start(&["--requirepass", "secret"]);
    let mut s = srv.raw();
    raw_roundtrip(&mut s, b"PING\r\n", b"-NOAUTH Authentication required.\r\n");
    raw_roundtrip(
        &mut s,
        b"CLIENT ID\r\n",
        b"-NOAUTH Authentication required.\r\n",
    );
    raw_roundtrip(
        &mut s,
        b"AUTH wrong\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    raw_roundtrip(&mut s, b"AUTH secret\r\n", b"+OK\r\n");
    raw_roundtrip(&mut s, b"PING\r\n", b"+PONG\r\n");

    let mut s = srv.raw();
    raw_roundtrip(
        &mut s,
        b"AUTH someone secret\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    raw_roundtrip(&mut s, b"AUTH default secret\r\n", b"+OK\r\n");
    raw_roundtrip(&mut s, b"PING\r\n", b"+PONG\r\n");

    // HELLO authenticates, switches protocol and names the client at once.
    let mut s = srv.raw();
    send_raw(&mut s, b"HELLO 3\r\n");
    let mut head = [0u8; 6];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"-NOAUT");
    let mut s = srv.raw();
    send_raw(&mut s, b"HELLO 3 AUTH default secret SETNAME x\r\n");
    let mut head = [0u8; 4];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"%7\r\n", "HELLO 3 answers with a RESP3 map");
    // Drain the rest of the map, then check state.
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut sink = [0u8; 4096];
    let _ = s.read(&mut sink);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw_roundtrip(&mut s, b"CLIENT GETNAME\r\n", b"$1\r\nx\r\n");
    raw_roundtrip(&mut s, b"GET missing\r\n", b"_\r\n");

    // Clients that give the password in the URL connect normally.
    let client = redis::Client::open(format!("redis://:secret@127.0.0.1:{}/", srv.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    assert_eq!(ok::<String>(&mut c, &["PING"]), "PONG");
    let bad = redis::Client::open(format!("redis://:nope@127.0.0.1:{}/", srv.port)).unwrap();
    assert!(bad.get_connection().is_err());
}

#[test]
fn shutdown_exits_zero() {
    let mut srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(error(&mut c, &["SHUTDOWN", "BOGUS"]), "ERR syntax error");
    assert_eq!(
        error(&mut c, &["SHUTDOWN", "SAVE", "NOSAVE"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress."
    );
    let _: () = ok(&mut c, &["SET", "k", "v"]);
    let mut s = srv.raw();
    send_raw(&mut s, b"SHUTDOWN NOSAVE\r\n");
    // Redis closes without a reply; durakv may send +OK first. Either way
    // the connection ends.
    let rest = read_to_close(&mut s);
    assert!(
        rest.is_empty() || rest == b"+OK\r\n",
        "{:?}",
        String::from_utf8_lossy(&rest)
    );
    let mut child = srv.child.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after SHUTDOWN"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

#[test]
fn sigterm_exits_zero() {
    let mut srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(srv.terminate(), Some(0));
}

#[test]
fn serve_help_lists_every_directive_with_its_default() {
    let out = std::process::Command::new(binary())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    // Clap may wrap long help lines; compare with whitespace collapsed.
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for d in durakv_server::config::DIRECTIVES {
        assert!(
            flat.contains(&format!("--{} ", d.name)),
            "--{} missing from help",
            d.name
        );
        let shown = if d.default.is_empty() {
            "\"\""
        } else {
            d.default
        };
        assert!(
            flat.contains(&format!("[default: {shown}]")),
            "default of {} ({shown}) missing from help",
            d.name
        );
    }
}

#[test]
fn time_lastsave_wait_waitaof_role_and_diagnostics() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let t: Vec<String> = ok(&mut c, &["TIME"]);
    let secs: u64 = t[0].parse().unwrap();
    let micros: u64 = t[1].parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 5 && micros < 1_000_000);
    let last: u64 = ok(&mut c, &["LASTSAVE"]);
    assert!(last <= now + 1 && now - last < 300);
    assert_eq!(ok::<String>(&mut c, &["SAVE"]), "OK");
    assert_eq!(
        ok::<String>(&mut c, &["BGSAVE"]),
        "Background saving started"
    );

    assert_eq!(ok::<i64>(&mut c, &["WAIT", "0", "0"]), 0);
    assert_eq!(
        error(&mut c, &["WAIT", "0", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        error(&mut c, &["WAIT", "x", "0"]),
        "ERR value is not an integer or out of range"
    );

    let _: () = ok(&mut c, &["SET", "k", "v"]);
    let wal: bool = info(&mut c, &["persistence"])["persistence"]["wal_enabled"] == "1";
    let got: Vec<i64> = ok(&mut c, &["WAITAOF", "1", "0", "0"]);
    assert_eq!(got, if wal { [1, 0] } else { [0, 0] }, "wal_enabled={wal}");
    let got: Vec<i64> = ok(&mut c, &["WAITAOF", "0", "0", "0"]);
    assert_eq!(got[1], 0);
    assert_eq!(
        error(&mut c, &["WAITAOF", "2", "0", "0"]),
        "ERR value is out of range, value must between 0 and 1"
    );
    assert_eq!(
        error(&mut c, &["WAITAOF", "0", "-1", "0"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        error(&mut c, &["WAITAOF", "0", "0", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        error(&mut c, &["WAITAOF", "x", "0", "0"]),
        "ERR value is not an integer or out of range"
    );
    // A threshold below the 50 ms the WAITAOF below blocks, but above
    // what running any command here takes even on a loaded machine.
    assert_eq!(
        ok::<String>(
            &mut c,
            &["CONFIG", "SET", "slowlog-log-slower-than", "40000"]
        ),
        "OK"
    );
    let _: () = ok(&mut c, &["SLOWLOG", "RESET"]);
    let t = std::time::Instant::now();
    let got: Vec<i64> = ok(&mut c, &["WAITAOF", "1", "1", "50"]);
    assert_eq!(got, vec![1, 0]);
    assert!(t.elapsed() >= std::time::Duration::from_millis(45));

    let role: Vec<redis::Value> = ok(&mut c, &["ROLE"]);
    assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));

    // The WAITAOF that waited 50 ms for a replica is not in the slow log:
    // as in Redis, time blocked is not time executing (tests/diagnostics.rs
    // covers the rest).
    let log: Vec<redis::Value> = ok(&mut c, &["SLOWLOG", "GET", "10"]);
    assert!(log.is_empty(), "{log:?}");
    assert_eq!(
        ok::<String>(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        "OK"
    );
    let _: Vec<i64> = ok(&mut c, &["WAITAOF", "1", "1", "10"]);
    let log: Vec<redis::Value> = ok(&mut c, &["SLOWLOG", "GET", "1"]);
    assert!(format!("{log:?}").contains("WAITAOF"), "{log:?}");
    assert_eq!(
        ok::<String>(
            &mut c,
            &["CONFIG", "SET", "slowlog-log-slower-than", "10000"]
        ),
        "OK"
    );
    assert_eq!(ok::<String>(&mut c, &["SLOWLOG", "RESET"]), "OK");
    assert_eq!(ok::<i64>(&mut c, &["SLOWLOG", "LEN"]), 0);
    let latest: Vec<redis::Value> = ok(&mut c, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty());

    let usage: Option<i64> = ok(&mut c, &["MEMORY", "USAGE", "k"]);
    assert!(usage.unwrap() > 0);
    let usage: Option<i64> = ok(&mut c, &["MEMORY", "USAGE", "missing"]);
    assert_eq!(usage, None);
    assert_eq!(
        error(&mut c, &["MEMORY", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try MEMORY HELP."
    );
}

#[test]
fn client_list_sees_raw_connections_in_multi() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let mut s = srv.raw();
    s.write_all(b"CLIENT SETNAME raw\r\nMULTI\r\nPING\r\n")
        .unwrap();
    let expect = b"+OK\r\n+OK\r\n+QUEUED\r\n";
    assert_eq!(read_exactly(&mut s, expect.len()), expect);
    // A connection publishes its CLIENT LIST snapshot just after writing its
    // reply, so another client may briefly see the previous state.
    let deadline = Instant::now() + Duration::from_secs(5);
    let raw = loop {
        let list: String = ok(&mut c, &["CLIENT", "LIST"]);
        let raw = list.lines().map(client_fields).find(|f| f["name"] == "raw");
        if let Some(raw) = raw.filter(|f| f["multi"] == "1") {
            break raw;
        }
        assert!(
            Instant::now() < deadline,
            "raw client never listed in MULTI: {list}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(raw["flags"], "x");
    assert_eq!(raw["multi"], "1");
    assert_eq!(raw["lib-name"], "");
}

/// CONFIG REWRITE writes what CONFIG SET changed back into the TOML file,
/// keeping the file's own lines, and the restarted server reads it back.
/// Directives durakv accepts only for compatibility still check values as
/// Redis 7.0.15 does (its replies, side by side), and store its spelling.
#[test]
fn compatibility_directives_check_values_as_redis() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let fails = |name: &str, why: &str| {
        format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
    };
    for (name, value, why) in [
        ("appendonly", "maybe", "argument must be 'yes' or 'no'"),
        ("appendonly", "1", "argument must be 'yes' or 'no'"),
        (
            "appendfsync",
            "bad",
            "argument(s) must be one of the following: everysec, always, no",
        ),
        ("cluster-enabled", "yes", "can't set immutable config"),
        (
            "list-compress-depth",
            "-1",
            "argument must be between 0 and 2147483647 inclusive",
        ),
        (
            "active-defrag-cycle-min",
            "0",
            "argument must be between 1 and 99 inclusive",
        ),
        (
            "stream-node-max-bytes",
            "-2",
            "argument must be a memory value",
        ),
        (
            "timeout",
            "-1",
            "argument must be between 0 and 2147483647 inclusive",
        ),
    ] {
        assert_eq!(
            error(&mut c, &["CONFIG", "SET", name, value]),
            fails(name, why),
            "{name} {value}"
        );
    }
    let get = |c: &mut redis::Connection, name: &str| -> String {
        let got: Vec<String> = ok(c, &["CONFIG", "GET", name]);
        got[1].clone()
    };
    let _: () = ok(&mut c, &["CONFIG", "SET", "appendonly", "YES"]);
    assert_eq!(get(&mut c, "appendonly"), "yes");
    let _: () = ok(&mut c, &["CONFIG", "SET", "stream-node-max-bytes", "1kb"]);
    assert_eq!(get(&mut c, "stream-node-max-bytes"), "1024");
    // One setting under two names.
    let _: () = ok(&mut c, &["CONFIG", "SET", "slave-read-only", "no"]);
    assert_eq!(get(&mut c, "replica-read-only"), "no");
    // hz takes any int and keeps within 1..500.
    let _: () = ok(&mut c, &["CONFIG", "SET", "hz", "1000"]);
    assert_eq!(get(&mut c, "hz"), "500");
}

#[test]
fn oom_score_adj_sets_the_process_score_by_role_and_gives_it_back() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let pid = srv.child.as_ref().unwrap().id();
    let path = format!("/proc/{pid}/oom_score_adj");
    let score = || -> i64 {
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let base = score();
    // Values above the score it started with: an unprivileged process may
    // raise its score and lower it back, not below where it started.
    let _: () = ok(
        &mut c,
        &["CONFIG", "SET", "oom-score-adj-values", "10 20 30"],
    );
    assert_eq!(score(), base, "off: left alone");
    let _: () = ok(&mut c, &["CONFIG", "SET", "oom-score-adj", "yes"]);
    assert_eq!(score(), base + 10);
    let _: () = ok(
        &mut c,
        &["CONFIG", "SET", "oom-score-adj-values", "15 20 30"],
    );
    assert_eq!(score(), base + 15);
    // A replica's score is its own (port 1 refuses: it stays a replica).
    let _: () = ok(&mut c, &["REPLICAOF", "127.0.0.1", "1"]);
    assert_eq!(score(), base + 20);
    let _: () = ok(&mut c, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(score(), base + 15);
    let _: () = ok(&mut c, &["CONFIG", "SET", "oom-score-adj", "absolute"]);
    assert_eq!(score(), 15.clamp(-1000, 1000));
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "oom-score-adj"]);
    assert_eq!(got[1], "absolute");
    let _: () = ok(&mut c, &["CONFIG", "SET", "oom-score-adj", "relative"]);
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "oom-score-adj"]);
    assert_eq!(got[1], "yes", "Redis answers relative's first name");
    let _: () = ok(&mut c, &["CONFIG", "SET", "oom-score-adj", "no"]);
    assert_eq!(score(), base, "given back");
    let fails = |why: &str| {
        format!(
            "ERR CONFIG SET failed (possibly related to argument 'oom-score-adj-values') - {why}"
        )
    };
    let range = "Invalid oom-score-adj-values, elements must be between -2000 and 2000.";
    for (value, why) in [
        ("-2001 0 0", range),
        ("0 2001 0", range),
        ("0 x 0", range),
        ("0 200", "wrong number of arguments"),
    ] {
        assert_eq!(
            error(&mut c, &["CONFIG", "SET", "oom-score-adj-values", value]),
            fails(why),
            "{value}"
        );
    }
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "oom-score-adj-values"]);
    assert_eq!(got[1], "15 20 30");
}

#[test]
fn config_rewrite_persists_runtime_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("durakv.toml");
    std::fs::write(
        &file,
        "# kept\nhz = 15 # kept too\nzset-max-ziplist-entries = 64\n",
    )
    .unwrap();
    let path = file.to_str().unwrap().to_string();
    let mut srv = Server::start_in(dir, &["--config", &path]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["CONFIG", "SET", "maxclients", "321", "hz", "25"]);
    let _: () = ok(
        &mut c,
        &["CONFIG", "SET", "zset-max-listpack-entries", "16"],
    );
    let _: () = ok(&mut c, &["CONFIG", "REWRITE"]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("# kept\nhz = 25 # kept too\n"), "{text}");
    assert!(text.contains("maxclients = 321"), "{text}");
    assert!(text.contains("zset-max-ziplist-entries = 16"), "{text}");
    srv.restart();
    let mut c = srv.conn();
    let got: HashMap<String, String> = ok(
        &mut c,
        &[
            "CONFIG",
            "GET",
            "maxclients",
            "hz",
            "zset-max-listpack-entries",
        ],
    );
    assert_eq!(got["maxclients"], "321");
    assert_eq!(got["hz"], "25");
    assert_eq!(got["zset-max-listpack-entries"], "16");
}

#[test]
fn config_rewrite_without_a_file_is_refused() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    assert_eq!(
        error(&mut c, &["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );
}

/// The encoding thresholds take Redis's names and their old ziplist
/// aliases, and OBJECT ENCODING follows them.
#[test]
fn encoding_thresholds_follow_config() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    // redis-server's built-in defaults (its sample redis.conf says 128 for
    // hashes, but a server started without it uses 512).
    let defaults: HashMap<String, String> = ok(&mut c, &["CONFIG", "GET", "*-max-*-entries"]);
    for (name, want) in [
        ("hash-max-listpack-entries", "512"),
        ("hash-max-ziplist-entries", "512"),
        ("set-max-intset-entries", "512"),
        ("set-max-listpack-entries", "128"),
        ("zset-max-listpack-entries", "128"),
        ("zset-max-ziplist-entries", "128"),
    ] {
        assert_eq!(defaults[name], want, "{name}");
    }
    let fields: Vec<String> = (0..400).map(|i| format!("f{i}")).collect();
    let mut hset = vec!["HSET", "big"];
    for f in &fields {
        hset.extend([f.as_str(), "v"]);
    }
    let _: i64 = ok(&mut c, &hset);
    assert_eq!(
        ok::<String>(&mut c, &["OBJECT", "ENCODING", "big"]),
        "listpack"
    );
    let _: () = ok(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "4"]);
    let _: i64 = ok(&mut c, &["SADD", "s", "1", "2", "3"]);
    assert_eq!(ok::<String>(&mut c, &["OBJECT", "ENCODING", "s"]), "intset");
    let _: i64 = ok(&mut c, &["SADD", "s", "4", "5"]);
    assert_eq!(
        ok::<String>(&mut c, &["OBJECT", "ENCODING", "s"]),
        "listpack"
    );
    let _: () = ok(&mut c, &["CONFIG", "SET", "hash-max-ziplist-entries", "2"]);
    let got: Vec<String> = ok(&mut c, &["CONFIG", "GET", "hash-max-listpack-entries"]);
    assert_eq!(got, ["hash-max-listpack-entries", "2"]);
    let _: i64 = ok(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(
        ok::<String>(&mut c, &["OBJECT", "ENCODING", "h"]),
        "hashtable"
    );
    let _: () = ok(&mut c, &["CONFIG", "SET", "list-max-ziplist-size", "-2"]);
    let _: () = ok(&mut c, &["CONFIG", "SET", "list-compress-depth", "1"]);
    assert!(
        error(&mut c, &["CONFIG", "SET", "zset-max-listpack-value", "x"])
            .contains("argument couldn't be parsed into an integer")
    );
    // Directives accepted for compatibility report Redis's defaults.
    let got: HashMap<String, String> = ok(
        &mut c,
        &[
            "CONFIG",
            "GET",
            "slowlog-max-len",
            "stream-node-max-entries",
        ],
    );
    assert_eq!(got["slowlog-max-len"], "128");
    assert_eq!(got["stream-node-max-entries"], "100");
}

fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| {
        l.strip_prefix(&format!("{name}:"))
            .map(|v| v.trim().to_string())
    })
}

/// INFO commandstats counts calls, failures and rejections per command and
/// subcommand; errorstats counts error replies per code; RESETSTAT clears.
#[test]
fn commandstats_and_errorstats() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "s", "abc"]);
    let _: () = ok(&mut c, &["SET", "n", "1"]);
    let _: i64 = ok(&mut c, &["INCR", "n"]);
    error(&mut c, &["INCR", "s"]);
    error(&mut c, &["GET"]);
    error(&mut c, &["LPUSH", "s", "x"]);
    error(&mut c, &["NOSUCHCOMMAND"]);
    let _: HashMap<String, String> = ok(&mut c, &["CONFIG", "GET", "hz"]);
    let _: () = ok(&mut c, &["MULTI"]);
    let _: String = ok(&mut c, &["INCR", "n"]);
    let _: Vec<i64> = ok(&mut c, &["EXEC"]);
    let info: String = ok(&mut c, &["INFO", "commandstats"]);
    let set = info_field(&info, "cmdstat_set").expect("set");
    assert!(set.starts_with("calls=2,usec="), "{set}");
    assert!(set.ends_with("rejected_calls=0,failed_calls=0"), "{set}");
    let incr = info_field(&info, "cmdstat_incr").expect("incr");
    assert!(incr.starts_with("calls=3,"), "{incr}");
    assert!(incr.ends_with("rejected_calls=0,failed_calls=1"), "{incr}");
    let get = info_field(&info, "cmdstat_get").expect("get");
    assert!(get.starts_with("calls=0,"), "{get}");
    assert!(get.ends_with("rejected_calls=1,failed_calls=0"), "{get}");
    assert!(info_field(&info, "cmdstat_config|get").is_some(), "{info}");
    assert!(info_field(&info, "cmdstat_nosuchcommand").is_none());

    let errs: String = ok(&mut c, &["INFO", "errorstats"]);
    assert_eq!(
        info_field(&errs, "errorstat_ERR").as_deref(),
        Some("count=3"),
        "{errs}"
    );
    assert_eq!(
        info_field(&errs, "errorstat_WRONGTYPE").as_deref(),
        Some("count=1"),
        "{errs}"
    );
    let default: String = ok(&mut c, &["INFO"]);
    assert!(!default.contains("rejected_calls"));
    assert!(default.contains("errorstat_ERR"));
    let stats: String = ok(&mut c, &["INFO", "stats"]);
    assert_eq!(
        info_field(&stats, "total_error_replies").as_deref(),
        Some("4")
    );

    // An error inside EXEC's reply counts in both, as in Redis.
    let _: () = ok(&mut c, &["MULTI"]);
    let _: String = ok(&mut c, &["INCR", "s"]);
    // The client library turns the array's error into its own.
    let exec: redis::RedisResult<redis::Value> = redis::cmd("EXEC").query(&mut c);
    assert!(exec.is_err());
    let errs: String = ok(&mut c, &["INFO", "errorstats"]);
    assert_eq!(
        info_field(&errs, "errorstat_ERR").as_deref(),
        Some("count=4"),
        "{errs}"
    );
    let stats: String = ok(&mut c, &["INFO", "stats"]);
    assert_eq!(
        info_field(&stats, "total_error_replies").as_deref(),
        Some("5")
    );

    let _: () = ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let info: String = ok(&mut c, &["INFO", "commandstats"]);
    assert!(info_field(&info, "cmdstat_set").is_none(), "{info}");
    let errs: String = ok(&mut c, &["INFO", "errorstats"]);
    assert!(info_field(&errs, "errorstat_ERR").is_none(), "{errs}");
}

/// The commands tools probe with: MODULE LIST is empty, and a module load
/// is refused as Redis refuses it without `enable-module-command`, and with
/// it ("local" lets loopback clients in) as Redis refuses a module it
/// cannot load; RESTORE-ASKING (what MIGRATE sends a cluster node)
/// restores like RESTORE; SCRIPT DEBUG NO is the mode every connection is
/// in and YES/SYNC are refused; LOLWUT names the versions.
#[test]
fn module_restore_asking_script_debug_and_lolwut() {
    let locked = Server::start(&[]);
    let mut c = locked.conn();
    let modules: Vec<redis::Value> = ok(&mut c, &["MODULE", "LIST"]);
    assert!(modules.is_empty());
    for args in [
        &["LOAD", "/m.so"][..],
        &["LOADEX", "/m.so"],
        &["UNLOAD", "search"],
    ] {
        let cmd: Vec<&str> = std::iter::once("MODULE")
            .chain(args.iter().copied())
            .collect();
        assert_eq!(
            error(&mut c, &cmd),
            "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
        );
    }
    drop(c);
    drop(locked);

    let srv = Server::start(&["--enable-module-command", "local"]);
    let mut c = srv.conn();
    assert_eq!(
        error(&mut c, &["MODULE", "LOAD", "/nonexistent/module.so"]),
        "ERR Error loading the extension. Please check the server logs."
    );
    assert_eq!(
        error(&mut c, &["MODULE", "UNLOAD", "search"]),
        "ERR Error unloading module: no such module with that name"
    );
    assert_eq!(
        error(&mut c, &["MODULE", "LIST", "x"]),
        "ERR wrong number of arguments for 'module|list' command"
    );

    let _: () = ok(&mut c, &["RPUSH", "src", "a", "b"]);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut c).unwrap();
    let reply: String = redis::cmd("RESTORE-ASKING")
        .arg("dst")
        .arg(0)
        .arg(&payload)
        .query(&mut c)
        .unwrap();
    assert_eq!(reply, "OK");
    assert_eq!(strs(&mut c, &["LRANGE", "dst", "0", "-1"]), ["a", "b"]);
    let busy = redis::cmd("RESTORE-ASKING")
        .arg("dst")
        .arg(0)
        .arg(&payload)
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(
        busy.to_string().contains("Target key name already exists"),
        "{busy}"
    );

    assert_eq!(ok::<String>(&mut c, &["SCRIPT", "DEBUG", "NO"]), "OK");
    assert!(error(&mut c, &["SCRIPT", "DEBUG", "YES"]).contains("no Lua debugger"));
    assert_eq!(
        error(&mut c, &["SCRIPT", "DEBUG", "MAYBE"]),
        "ERR Use SCRIPT DEBUG YES/SYNC/NO"
    );

    let art: String = ok(&mut c, &["LOLWUT"]);
    assert!(art.ends_with("(Redis ver. 7.2.4 compatible)\n"), "{art}");
    let _: String = ok(&mut c, &["LOLWUT", "VERSION", "5", "10", "10"]);
    assert_eq!(
        error(&mut c, &["LOLWUT", "VERSION", "five"]),
        "ERR value is not an integer or out of range"
    );
    // Versions 5 and 6 read integers after VERSION; others, and LOLWUT
    // without VERSION, ignore what follows, as in Redis.
    assert_eq!(
        error(&mut c, &["LOLWUT", "VERSION", "6", "x"]),
        "ERR value is not an integer or out of range"
    );
    let _: String = ok(&mut c, &["LOLWUT", "l1", "abc"]);
    let _: String = ok(&mut c, &["LOLWUT", "VERSION", "7", "abc"]);
}

/// CLIENT PAUSE holds commands rather than refusing them: WRITE holds
/// writes (and EXEC of a transaction that writes) while reads go on, ALL
/// holds everything; held commands run, in order, when the pause ends,
/// by its timeout or by CLIENT UNPAUSE from another connection.
#[test]
fn client_pause_holds_writes_or_everything_until_it_ends() {
    let srv = Server::start(&[]);
    let mut admin = srv.conn();
    let _: () = ok(&mut admin, &["SET", "k", "0"]);
    let mut w = RespConn::new(srv.raw());

    assert_eq!(
        error(&mut admin, &["CLIENT", "PAUSE", "10", "READ"]),
        "ERR CLIENT PAUSE mode must be WRITE or ALL"
    );
    assert_eq!(
        error(&mut admin, &["CLIENT", "PAUSE", "10", "WRITE", "x"]),
        "ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP."
    );
    let _: () = ok(&mut admin, &["CLIENT", "PAUSE", "100000", "WRITE"]);
    // Reads go on; a write and what follows it on the connection wait.
    w.send(&["GET", "k"]);
    w.expect("$1\r\n0\r\n");
    w.send(&["INCR", "k"]);
    w.send(&["GET", "k"]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        ok::<String>(&mut admin, &["GET", "k"]),
        "0",
        "the INCR ran while paused"
    );
    // Queued in MULTI, judged at EXEC.
    let mut m = RespConn::new(srv.raw());
    m.send(&["MULTI"]);
    m.expect("+OK\r\n");
    m.send(&["SET", "t", "1"]);
    m.expect("+QUEUED\r\n");
    m.send(&["EXEC"]);
    let _: () = ok(&mut admin, &["CLIENT", "UNPAUSE"]);
    w.expect(":1\r\n");
    w.expect("$1\r\n1\r\n");
    m.expect("*1\r\n+OK\r\n");

    // ALL holds reads too, and ends by itself.
    let started = Instant::now();
    let _: () = ok(&mut admin, &["CLIENT", "PAUSE", "300", "ALL"]);
    w.send(&["GET", "k"]);
    w.expect("$1\r\n1\r\n");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );

    assert_eq!(
        error(&mut admin, &["CLIENT", "PAUSE", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        error(&mut admin, &["CLIENT", "PAUSE", "x"]),
        "ERR timeout is not an integer or out of range"
    );
    // An endless pause is lifted by UNPAUSE.
    let _: () = ok(
        &mut admin,
        &["CLIENT", "PAUSE", "9223372036854775807", "WRITE"],
    );
    let _: () = ok(&mut admin, &["CLIENT", "UNPAUSE"]);
    let _: () = ok(&mut admin, &["SET", "k", "2"]);
}

/// During a pause nothing may change the dataset, so that a replica can
/// catch up to exactly the primary's state: an expired key reads as
/// missing but is neither deleted nor counted until the pause ends.
#[test]
fn client_pause_leaves_expired_keys_in_place() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let expired = |c: &mut redis::Connection| -> u64 {
        let text: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
        info_field(&text, "expired_keys").unwrap().parse().unwrap()
    };
    let before = expired(&mut c);
    let _: () = ok(&mut c, &["SET", "foo", "1", "PX", "50"]);
    let _: () = ok(&mut c, &["SET", "bar", "1", "PX", "50"]);
    let _: () = ok(&mut c, &["CLIENT", "PAUSE", "60000", "WRITE"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ok::<Option<String>>(&mut c, &["GET", "foo"]), None);
    assert_eq!(ok::<i64>(&mut c, &["EXISTS", "bar"]), 0);
    // The reads that walk or sample the keyspace, which otherwise remove
    // the expired keys they meet, leave them too.
    assert_eq!(ok::<Option<String>>(&mut c, &["RANDOMKEY"]), None);
    let (next, keys): (String, Vec<String>) = ok(&mut c, &["SCAN", "0", "COUNT", "100"]);
    assert_eq!((next.as_str(), keys.len()), ("0", 0));
    assert_eq!(expired(&mut c), before, "nothing expired during the pause");
    assert_eq!(ok::<i64>(&mut c, &["DBSIZE"]), 2, "both keys still stored");

    let _: () = ok(&mut c, &["CLIENT", "UNPAUSE"]);
    assert_eq!(ok::<Option<String>>(&mut c, &["GET", "foo"]), None);
    assert_eq!(ok::<Option<String>>(&mut c, &["GET", "bar"]), None);
    assert_eq!(
        expired(&mut c),
        before + 2,
        "reads expire them once unpaused"
    );
}

#[test]
fn keyspace_hits_and_misses_count_the_lookups_of_reads() {
    let srv = Server::start(&[]);
    let mut c = srv.conn();
    let _: () = ok(&mut c, &["SET", "a", "1"]);
    let _: () = ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let _: Option<String> = ok(&mut c, &["GET", "a"]);
    let _: Option<String> = ok(&mut c, &["GET", "missing"]);
    let _: Vec<Option<String>> = ok(&mut c, &["MGET", "a", "b", "c"]);
    let _: i64 = ok(&mut c, &["EXISTS", "a"]);
    // Writes look keys up too, but as in Redis they do not count.
    let _: i64 = ok(&mut c, &["SETNX", "a", "2"]);
    let _: i64 = ok(&mut c, &["INCR", "n"]);
    // Reads queued in a transaction count when EXEC runs them.
    let _: () = ok(&mut c, &["MULTI"]);
    let _: String = ok(&mut c, &["GET", "a"]);
    let _: Vec<redis::Value> = ok(&mut c, &["EXEC"]);
    let s = &info(&mut c, &["stats"])["stats"];
    assert_eq!(s["keyspace_hits"], "4");
    assert_eq!(s["keyspace_misses"], "3");
    let _: () = ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let s = &info(&mut c, &["stats"])["stats"];
    assert_eq!(s["keyspace_hits"], "0");
    assert_eq!(s["keyspace_misses"], "0");
}

/// INFO memory and MEMORY STATS split `used_memory` into the server's
/// own structures and the data, with every field Redis 7.0.15 reports,
/// in its order (names taken from redis-server 7.0.15): dashboards chart
/// `used_memory_dataset` and `used_memory_overhead`.
#[test]
fn memory_is_split_into_overhead_and_dataset_as_redis_reports_it() {
    let mut srv = Server::start(&[]);
    let mut c = srv.conn();
    let text: String = ok(&mut c, &["INFO", "memory"]);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect();
    let redis_names = "used_memory used_memory_human used_memory_rss used_memory_rss_human \
        used_memory_peak used_memory_peak_human used_memory_peak_perc used_memory_overhead \
        used_memory_startup used_memory_dataset used_memory_dataset_perc allocator_allocated \
        allocator_active allocator_resident total_system_memory total_system_memory_human \
        used_memory_lua used_memory_vm_eval used_memory_lua_human used_memory_scripts_eval \
        number_of_cached_scripts number_of_functions number_of_libraries \
        used_memory_vm_functions used_memory_vm_total used_memory_vm_total_human \
        used_memory_functions used_memory_scripts used_memory_scripts_human maxmemory \
        maxmemory_human maxmemory_policy allocator_frag_ratio allocator_frag_bytes \
        allocator_rss_ratio allocator_rss_bytes rss_overhead_ratio rss_overhead_bytes \
        mem_fragmentation_ratio mem_fragmentation_bytes mem_not_counted_for_evict \
        mem_replication_backlog mem_total_replication_buffers mem_clients_slaves \
        mem_clients_normal mem_cluster_links mem_aof_buffer mem_allocator \
        active_defrag_running lazyfree_pending_objects lazyfreed_objects";
    assert_eq!(names, redis_names.split_whitespace().collect::<Vec<_>>());
    let num = |m: &HashMap<String, String>, f: &str| -> i64 {
        m[f].parse().unwrap_or_else(|_| panic!("{f}: {}", m[f]))
    };
    let before = info(&mut c, &["memory"]).remove("memory").unwrap();
    // What the server holds for itself once ready (its empty keyspace,
    // the log's buffers, the event loops) is start-up memory, as in
    // Redis, not data: an empty server's dataset is small beside the 2 MB
    // stored below (it was 1.1 MB when the figure was taken before the
    // data directory was opened).
    assert!(num(&before, "used_memory_dataset") < 400_000, "{before:?}");

    // 20,000 keys of 100 bytes, 5,000 of them with a TTL, a cached script
    // and a library.
    let value = "v".repeat(100);
    for chunk in 0..20 {
        let mut p = redis::pipe();
        for i in 0..1000 {
            let k = format!("key:{}", chunk * 1000 + i);
            p.cmd("SET").arg(&k).arg(&value).ignore();
            if chunk < 5 {
                p.cmd("EXPIRE").arg(&k).arg(1000).ignore();
            }
        }
        let _: () = p.query(&mut c).unwrap();
    }
    let _: i64 = ok(&mut c, &["EVAL", "return 1", "0"]);
    let lib = "#!lua name=mem\nredis.register_function('f', function() return 1 end)";
    let _: String = ok(&mut c, &["FUNCTION", "LOAD", lib]);

    let m = info(&mut c, &["memory"]).remove("memory").unwrap();
    let (used, overhead, dataset) = (
        num(&m, "used_memory"),
        num(&m, "used_memory_overhead"),
        num(&m, "used_memory_dataset"),
    );
    assert_eq!(overhead + dataset, used, "{m:?}");
    // The values' 2 MB (the keys are inside the map's entries, which
    // are overhead); what was freed meanwhile (a pipeline's buffers)
    // takes a few KB off.
    let stored = 20_000 * 100;
    assert!(
        dataset - num(&before, "used_memory_dataset") >= stored * 95 / 100,
        "{m:?} before {before:?}"
    );
    // Finding 20,000 keys takes some bytes per key: at least a slot of
    // the map's vector each.
    assert!(
        overhead - num(&before, "used_memory_overhead") >= 20_000 * 24,
        "{m:?}"
    );
    assert!(num(&m, "used_memory_scripts_eval") > 0, "{m:?}");
    assert!(num(&m, "used_memory_functions") > 0, "{m:?}");
    assert!(num(&m, "used_memory_vm_functions") > 0, "{m:?}");
    assert_eq!(
        num(&m, "used_memory_vm_total"),
        num(&m, "used_memory_vm_eval") + num(&m, "used_memory_vm_functions")
    );
    assert_eq!(
        num(&m, "used_memory_scripts"),
        num(&m, "used_memory_scripts_eval") + num(&m, "used_memory_functions")
    );
    assert!(m["mem_allocator"].starts_with("mimalloc-"), "{m:?}");

    // MEMORY STATS: the same split, per database too.
    let stats: Vec<redis::Value> = ok(&mut c, &["MEMORY", "STATS"]);
    let mut names = Vec::new();
    let mut fields = HashMap::new();
    for pair in stats.chunks(2) {
        let name: String = redis::from_redis_value(pair[0].clone()).unwrap();
        names.push(name.clone());
        fields.insert(name, pair[1].clone());
    }
    let redis_names = "peak.allocated total.allocated startup.allocated replication.backlog \
        clients.slaves clients.normal cluster.links aof.buffer lua.caches functions.caches \
        db.0 overhead.total keys.count keys.bytes-per-key dataset.bytes dataset.percentage \
        peak.percentage allocator.allocated allocator.active allocator.resident \
        allocator-fragmentation.ratio allocator-fragmentation.bytes allocator-rss.ratio \
        allocator-rss.bytes rss-overhead.ratio rss-overhead.bytes fragmentation \
        fragmentation.bytes";
    assert_eq!(names, redis_names.split_whitespace().collect::<Vec<_>>());
    let int = |f: &str| -> i64 { redis::from_redis_value(fields[f].clone()).unwrap() };
    assert_eq!(int("keys.count"), 20_000);
    assert_eq!(
        int("dataset.bytes") + int("overhead.total"),
        int("total.allocated")
    );
    let db0: Vec<redis::Value> = redis::from_redis_value(fields["db.0"].clone()).unwrap();
    let db0: HashMap<String, i64> = db0
        .chunks(2)
        .map(|p| {
            (
                redis::from_redis_value(p[0].clone()).unwrap(),
                redis::from_redis_value(p[1].clone()).unwrap(),
            )
        })
        .collect();
    assert!(db0["overhead.hashtable.main"] >= 20_000 * 24, "{db0:?}");
    assert!(db0["overhead.hashtable.expires"] >= 5_000 * 8, "{db0:?}");
    let pct: f64 = redis::from_redis_value(fields["dataset.percentage"].clone()).unwrap();
    assert!(pct > 0.0 && pct < 100.0, "{pct}");

    // From a script, which holds every shard: the same figures, no wait.
    let in_script: Vec<redis::Value> = ok(
        &mut c,
        &["EVAL", "return redis.call('memory', 'stats')", "0"],
    );
    assert_eq!(in_script.len(), stats.len());
    let text: String = ok(
        &mut c,
        &["EVAL", "return redis.call('info', 'memory')", "0"],
    );
    assert!(text.contains("used_memory_dataset:"), "{text}");
    let doctor: String = ok(&mut c, &["MEMORY", "DOCTOR"]);
    assert!(!doctor.is_empty());

    // Data loaded at start, from the log after a crash or from the
    // checkpoint taken at shutdown, is data, not start-up memory.
    let startup = num(&m, "used_memory_startup");
    for crash in [true, false] {
        if crash {
            srv.kill9();
        } else {
            srv.terminate();
        }
        srv.restart();
        let mut c = srv.conn();
        let m = info(&mut c, &["memory"]).remove("memory").unwrap();
        let how = if crash { "log replay" } else { "checkpoint" };
        assert!(
            num(&m, "used_memory_dataset") >= stored * 95 / 100,
            "{how}: {m:?}"
        );
        assert!(
            (num(&m, "used_memory_startup") - startup).abs() < 400_000,
            "{how}: {startup} then {m:?}"
        );
    }
}
