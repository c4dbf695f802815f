//! Test harness: starts the real `durakv` binary on an ephemeral loopback
//! port with a fresh data directory, and kills it when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Path of the `durakv` binary built by cargo for this workspace.
pub fn binary() -> PathBuf {
    if let Ok(p) = std::env::var("DURAKV_BIN") {
        return PathBuf::from(p);
    }
    // tests run from target/<profile>/deps/<test>; the binary is in target/<profile>.
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir");
    let bin = profile_dir.join("durakv");
    assert!(
        bin.exists(),
        "{} not found: run `cargo build -p durakv` (the test command in the README does)",
        bin.display()
    );
    bin
}

pub struct Server {
    pub child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub args: Vec<String>,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, args)
    }

    /// Starts a server on an existing data directory (restart tests).
    pub fn start_in(dir: tempfile::TempDir, args: &[&str]) -> Server {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (child, port) = spawn(dir.path(), &args);
        Server {
            child: Some(child),
            port,
            dir,
            args,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().expect("connect")
    }

    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("raw connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s
    }

    /// SIGKILL, as in a crash.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for exit; returns the exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        unsafe_sigterm(c.id());
        let status = c.wait().ok()?;
        status.code()
    }

    /// Restarts on the same data directory with the same arguments.
    pub fn restart(&mut self) {
        self.kill9();
        let (child, port) = spawn(self.dir.path(), &self.args);
        self.child = Some(child);
        self.port = port;
    }
}

fn unsafe_sigterm(pid: u32) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn spawn(dir: &Path, args: &[String]) -> (Child, u16) {
    let mut cmd = Command::new(binary());
    cmd.arg("serve")
        .arg("--port")
        .arg("0")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn durakv");
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("no stdout from durakv");
    };
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).unwrap_or(0);
        if n == 0 {
            let status = child.wait();
            panic!("server exited before listening: {status:?}");
        }
        if let Some(p) = line.trim().strip_prefix("durakv listening on port ") {
            let port: u16 = p.parse().expect("port");
            // Keep draining stdout so the server never blocks on a full pipe.
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink);
            });
            return (child, port);
        }
    }
}

/// Sends raw bytes and reads until `expected_len` bytes or EOF/timeout.
pub fn send_raw(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).expect("write");
}

pub fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).expect("read reply");
    buf
}

pub fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}
