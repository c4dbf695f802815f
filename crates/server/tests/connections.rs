//! Many connections at once: thousands of idle clients are each served, the
//! one past `maxclients` gets Redis's error, and idle connections that own
//! no buffers still handle partial, pipelined and large requests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{read_exactly, read_to_close, req, Server};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Connections the test holds open at once (the server's `maxclients`).
const CLIENTS: usize = 2_500;
/// File descriptors the test process needs besides its connections.
const SPARE_FDS: u64 = 64;

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const PONG: &[u8] = b"+PONG\r\n";
const MAX_CLIENTS: &[u8] = b"-ERR max number of clients reached\r\n";

/// Raises this process's open-files limit so it can hold `wanted`
/// descriptors; returns how many it may hold.
fn raise_fd_limit(wanted: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only access the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < wanted {
            lim.rlim_cur = wanted.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
    }
    lim.rlim_cur
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn ping(s: &mut TcpStream) {
    s.write_all(PING).unwrap();
    assert_eq!(read_exactly(s, PONG.len()), PONG);
}

#[test]
fn thousands_of_idle_connections_and_maxclients() {
    let fds = raise_fd_limit(CLIENTS as u64 + SPARE_FDS);
    let clients = CLIENTS.min(fds.saturating_sub(SPARE_FDS) as usize);
    assert!(
        clients >= 500,
        "the open-files limit ({fds}) leaves too few connections for this test"
    );
    let limit = clients.to_string();
    let server = Server::start(&["--maxclients", &limit]);

    // One after another, each answered before the next connects.
    let mut conns: Vec<TcpStream> = (0..clients)
        .map(|_| {
            let mut s = connect(server.port);
            ping(&mut s);
            s
        })
        .collect();

    // One more: refused with the exact error, then closed.
    let mut extra = connect(server.port);
    assert_eq!(read_to_close(&mut extra), MAX_CLIENTS);

    // Every idle connection still answers; half of them first receive a
    // request cut in two, so they hold a partial request while the others
    // are served.
    let (first, second) = PING.split_at(9);
    for s in conns.iter_mut().step_by(2) {
        s.write_all(first).unwrap();
    }
    for s in conns.iter_mut().skip(1).step_by(2) {
        ping(s);
    }
    for s in conns.iter_mut().step_by(2) {
        s.write_all(second).unwrap();
        assert_eq!(read_exactly(s, PONG.len()), PONG);
    }

    // Pipelined requests and one larger than any scratch buffer, sent in
    // pieces, on a connection that was idle.
    let value = vec![b'v'; 200_000];
    let mut pipeline = req(&[b"SET", b"big", &value]);
    pipeline.extend_from_slice(&req(&[b"GET", b"big"]));
    pipeline.extend_from_slice(PING);
    let s = &mut conns[clients / 2];
    for piece in pipeline.chunks(7_000) {
        s.write_all(piece).unwrap();
    }
    let mut expected = b"+OK\r\n".to_vec();
    expected.extend_from_slice(format!("${}\r\n", value.len()).as_bytes());
    expected.extend_from_slice(&value);
    expected.extend_from_slice(b"\r\n");
    expected.extend_from_slice(PONG);
    assert_eq!(read_exactly(s, expected.len()), expected);

    // A slot freed by a client that leaves goes to the next one, once the
    // server has noticed the close.
    drop(conns.pop());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut s = connect(server.port);
        s.write_all(PING).unwrap();
        let first = read_exactly(&mut s, 1);
        if first == b"+" {
            assert_eq!(read_exactly(&mut s, PONG.len() - 1), &PONG[1..]);
            conns.push(s);
            break;
        }
        let mut rest = first;
        rest.extend_from_slice(&read_to_close(&mut s));
        assert_eq!(rest, MAX_CLIENTS);
        assert!(
            Instant::now() < deadline,
            "the server never freed the slot of a closed connection"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(conns.len(), clients);

    // And the server still refuses the next one.
    let mut extra = connect(server.port);
    assert_eq!(read_to_close(&mut extra), MAX_CLIENTS);
}

/// CONFIG SET `timeout` reaches connections that are already open and idle,
/// the one that set it included, as in Redis; `timeout 0` spares them again.
#[test]
fn config_set_timeout_applies_to_open_connections() {
    let srv = Server::start(&[]);
    let mut early = connect(srv.port);
    ping(&mut early);
    let mut setter = connect(srv.port);
    setter
        .write_all(&req(&[b"CONFIG", b"SET", b"timeout", b"1"]))
        .unwrap();
    assert_eq!(read_exactly(&mut setter, 5), b"+OK\r\n");
    let started = Instant::now();
    assert!(read_to_close(&mut early).is_empty());
    assert!(read_to_close(&mut setter).is_empty());
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "closed after {took:?}");

    let mut spared = connect(srv.port);
    ping(&mut spared);
    spared
        .write_all(&req(&[b"CONFIG", b"SET", b"timeout", b"0"]))
        .unwrap();
    assert_eq!(read_exactly(&mut spared, 5), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(2500));
    ping(&mut spared);
}

/// `unixsocket`: clients on a Unix socket are served like TCP ones, with
/// the socket's path as their address and the `U` flag, count as local
/// for `enable-debug-command local`, and the file gets `unixsocketperm`,
/// replaces one a crashed run left, and is removed at shutdown.
#[test]
fn unix_socket_clients() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let sockets = tempfile::tempdir().unwrap();
    let path = sockets.path().join("durakv.sock");
    let path_s = path.to_str().unwrap().to_string();
    // A socket file left behind, as after kill -9.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let mut srv = Server::start(&[
        "--unixsocket",
        &path_s,
        "--unixsocketperm",
        "770",
        "--enable-debug-command",
        "local",
    ]);
    let meta = std::fs::metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o770);

    let client = redis::Client::open(format!("redis+unix://{path_s}")).unwrap();
    let mut c = client.get_connection().unwrap();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let mut tcp = srv.conn();
    let v: String = redis::cmd("GET").arg("k").query(&mut tcp).unwrap();
    assert_eq!(v, "v");
    let me: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
    assert!(
        me.contains(&format!(" addr={path_s}:0 laddr={path_s}:0 ")),
        "{me}"
    );
    assert!(me.contains(" flags=U "), "{me}");
    let _: () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ADDR")
        .arg(format!("{path_s}:0"))
        .query(&mut tcp)
        .unwrap();
    assert_eq!(killed, 1);

    srv.terminate();
    assert!(!path.exists(), "the socket file outlived the server");
}

/// TCP sockets `pid` listens on, from /proc (IPv4 and IPv6).
fn tcp_listening(pid: u32) -> usize {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            let inode = l.strip_prefix("socket:[")?.strip_suffix(']')?;
            Some(inode.to_string())
        })
        .collect();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // st 0A is LISTEN; the inode is the tenth field.
            f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9])
        })
        .count()
}

/// `port 0` beside a Unix socket turns TCP off, as in Redis: a
/// redis.conf written for a socket-only server must not open a TCP port
/// (durakv used to pick a free one). CONFIG SET port turns TCP on and, set
/// to 0 again, off.
#[test]
fn port_0_beside_a_unix_socket_listens_on_no_tcp_port() {
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    /// Kills the server if the test fails before stopping it.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Reaped(
        std::process::Command::new(common::binary())
            .args(["serve", "--port", "0", "--unixsocket"])
            .arg(&path)
            .arg("--dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut s = loop {
        if let Ok(s) = UnixStream::connect(&path) {
            break s;
        }
        assert!(Instant::now() < deadline, "the Unix socket never accepted");
        std::thread::sleep(Duration::from_millis(20));
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(PING).unwrap();
    assert_eq!(read_exactly(&mut s, PONG.len()), PONG);
    let pid = child.0.id();
    assert_eq!(tcp_listening(pid), 0, "port 0 opened a TCP port");
    s.write_all(&req(&[b"CONFIG", b"GET", b"port"])).unwrap();
    let port0 = b"*2\r\n$4\r\nport\r\n$1\r\n0\r\n";
    assert_eq!(read_exactly(&mut s, port0.len()), port0);

    let port = common::free_port();
    s.write_all(&req(&[
        b"CONFIG",
        b"SET",
        b"port",
        port.to_string().as_bytes(),
    ]))
    .unwrap();
    assert_eq!(read_exactly(&mut s, 5), b"+OK\r\n");
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(PING).unwrap();
    assert_eq!(read_exactly(&mut tcp, PONG.len()), PONG);
    assert_eq!(tcp_listening(pid), 1);

    s.write_all(&req(&[b"CONFIG", b"SET", b"port", b"0"]))
        .unwrap();
    assert_eq!(read_exactly(&mut s, 5), b"+OK\r\n");
    assert_eq!(tcp_listening(pid), 0, "CONFIG SET port 0 left TCP on");
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    // A connection made before stays served, as in Redis.
    tcp.write_all(PING).unwrap();
    assert_eq!(read_exactly(&mut tcp, PONG.len()), PONG);

    let _ = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status();
    assert!(child.0.wait().unwrap().success());
}

/// A client that writes a whole pipeline before reading any reply (as
/// hiredis's blocking API does) is served: while its replies wait for the
/// socket, the server goes on reading its requests, so neither side waits
/// for the other forever once both sockets' buffers are full. A Unix
/// socket's small buffers make this quick to reach.
#[test]
fn a_pipeline_written_before_any_reply_is_read_is_served() {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::net::UnixStream;
    const REQUESTS: usize = 20_000;
    let sockets = tempfile::tempdir().unwrap();
    let path = sockets.path().join("s.sock");
    let srv = Server::start(&["--unixsocket", path.to_str().unwrap()]);
    let value = "v".repeat(1000);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg(&value)
        .query(&mut srv.conn())
        .unwrap();

    let mut s = UnixStream::connect(&path).unwrap();
    let mut w = s.try_clone().unwrap();
    let pipeline = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".repeat(REQUESTS);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        w.write_all(pipeline.as_bytes()).unwrap();
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the whole pipeline written while no reply was read");
    writer.join().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut r = BufReader::new(&mut s);
    let mut line = String::new();
    let mut body = vec![0u8; value.len() + 2];
    for i in 0..REQUESTS {
        line.clear();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "$1000\r\n", "reply {i}");
        r.read_exact(&mut body).unwrap();
    }
}
