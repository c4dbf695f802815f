//! A minimal asynchronous, pipelining RESP client connection.
//!
//! Both the YCSB `redis` target and the memtier mode drive thousands of
//! requests per second per connection from a handful of threads, so the
//! client must cost much less than the server it measures: commands are
//! encoded straight into a reusable write buffer (no intermediate frames),
//! several commands are flushed with one `write`, and replies are parsed
//! with the workspace's `durakv-protocol` reply parser from a reusable read
//! buffer.

use bytes::BytesMut;
use durakv_protocol::frame::write_bulk;
use durakv_protocol::{parse_reply, Frame, ReplyError};
use std::fmt;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How much spare room the read buffer gets before each socket read; large
/// enough that a pipeline of small replies arrives in one read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

#[derive(Debug)]
pub enum RespError {
    Io(io::Error),
    Protocol(ReplyError),
    /// The server closed the connection.
    Closed,
    Timeout,
    /// An `-ERR ...` reply where the caller needed a value.
    Server(String),
}

impl fmt::Display for RespError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RespError::Io(e) => write!(f, "i/o error: {e}"),
            RespError::Protocol(e) => write!(f, "{e}"),
            RespError::Closed => f.write_str("connection closed by server"),
            RespError::Timeout => f.write_str("timed out"),
            RespError::Server(m) => write!(f, "server error: {m}"),
        }
    }
}

impl std::error::Error for RespError {}

impl From<io::Error> for RespError {
    fn from(e: io::Error) -> Self {
        RespError::Io(e)
    }
}

impl From<ReplyError> for RespError {
    fn from(e: ReplyError) -> Self {
        RespError::Protocol(e)
    }
}

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct RespEndpoint {
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    pub connect_timeout_ms: u64,
}

impl RespEndpoint {
    pub fn addr(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

pub struct RespConn {
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
}

impl RespConn {
    /// Connects and authenticates (`AUTH [user] password`) if configured.
    pub async fn connect(ep: &RespEndpoint) -> Result<RespConn, RespError> {
        let timeout = Duration::from_millis(ep.connect_timeout_ms.max(1));
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(ep.addr())).await {
            Ok(r) => r?,
            Err(_) => return Err(RespError::Timeout),
        };
        // Requests are small and latency-bound; never let Nagle hold them.
        stream.set_nodelay(true)?;
        let mut conn = RespConn {
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            wbuf: BytesMut::with_capacity(16 * 1024),
        };
        if let Some(pass) = &ep.password {
            match &ep.username {
                Some(user) => conn.push(&[b"AUTH", user.as_bytes(), pass.as_bytes()]),
                None => conn.push(&[b"AUTH", pass.as_bytes()]),
            }
            if let Frame::Error(e) = conn.call_pushed().await? {
                return Err(RespError::Server(String::from_utf8_lossy(&e).into_owned()));
            }
        }
        Ok(conn)
    }

    /// Appends one command to the pending write buffer.
    pub fn push(&mut self, args: &[&[u8]]) {
        push_command(&mut self.wbuf, args);
    }

    /// Starts a command whose arguments are added with [`RespConn::arg`];
    /// avoids building an argument slice for variable-length commands.
    pub fn begin(&mut self, argc: usize) {
        let mut n = itoa::Buffer::new();
        self.wbuf.extend_from_slice(b"*");
        self.wbuf.extend_from_slice(n.format(argc).as_bytes());
        self.wbuf.extend_from_slice(b"\r\n");
    }

    pub fn arg(&mut self, a: &[u8]) {
        write_bulk(&mut self.wbuf, a);
    }

    pub fn pending_write_bytes(&self) -> usize {
        self.wbuf.len()
    }

    /// Sends everything pushed so far.
    pub async fn flush(&mut self) -> Result<(), RespError> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf).await?;
            self.wbuf.clear();
        }
        Ok(())
    }

    /// Waits for and returns the next reply.
    pub async fn read_reply(&mut self) -> Result<Frame, RespError> {
        loop {
            if let Some(frame) = parse_reply(&mut self.rbuf)? {
                return Ok(frame);
            }
            self.fill().await?;
        }
    }

    /// Like [`RespConn::read_reply`] but also reports the reply's size on the
    /// wire (memtier counts bytes per request).
    pub async fn read_reply_sized(&mut self) -> Result<(Frame, usize), RespError> {
        loop {
            let before = self.rbuf.len();
            if let Some(frame) = parse_reply(&mut self.rbuf)? {
                return Ok((frame, before - self.rbuf.len()));
            }
            self.fill().await?;
        }
    }

    /// Returns a reply only if one is already fully buffered.
    pub fn try_buffered_reply(&mut self) -> Result<Option<(Frame, usize)>, RespError> {
        let before = self.rbuf.len();
        Ok(parse_reply(&mut self.rbuf)?.map(|f| (f, before - self.rbuf.len())))
    }

    async fn fill(&mut self) -> Result<(), RespError> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK_BYTES / 4 {
            self.rbuf.reserve(READ_CHUNK_BYTES);
        }
        let n = self.stream.read_buf(&mut self.rbuf).await?;
        if n == 0 {
            return Err(RespError::Closed);
        }
        Ok(())
    }

    /// Flushes the pushed command(s) and reads one reply.
    pub async fn call_pushed(&mut self) -> Result<Frame, RespError> {
        self.flush().await?;
        self.read_reply().await
    }

    /// Sends one command and waits for its reply.
    pub async fn call(&mut self, args: &[&[u8]]) -> Result<Frame, RespError> {
        self.push(args);
        self.call_pushed().await
    }
}

/// Encodes `args` as a RESP multibulk request.
pub fn push_command(out: &mut BytesMut, args: &[&[u8]]) {
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"*");
    out.extend_from_slice(n.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        write_bulk(out, a);
    }
}

/// Text of a bulk/simple/verbatim reply, if it is one.
pub fn frame_text(f: &Frame) -> Option<String> {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) | Frame::Verbatim(b) => {
            Some(String::from_utf8_lossy(b).into_owned())
        }
        _ => None,
    }
}

/// Finds `name:value` in an INFO reply.
pub fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| {
        let l = l.trim_end_matches('\r');
        let (k, v) = l.split_once(':')?;
        (k == name).then(|| v.trim().to_string())
    })
}

/// Asks a server how durable its writes are, for the report.
///
/// durakv reports `durability:` in `INFO persistence` (or per database as
/// `db0_durability:`). A server without that field that answers
/// `CONFIG GET appendonly/appendfsync` is treated as Redis; anything else is
/// "unknown".
pub async fn probe_durability(conn: &mut RespConn) -> String {
    let info = match conn.call(&[b"INFO", b"persistence"]).await {
        Ok(f) => frame_text(&f).unwrap_or_default(),
        Err(_) => return "unknown".into(),
    };
    if let Some(d) = info_field(&info, "durability").or_else(|| info_field(&info, "db0_durability"))
    {
        return d;
    }
    let server = match conn.call(&[b"INFO", b"server"]).await {
        Ok(f) => frame_text(&f).unwrap_or_default(),
        Err(_) => String::new(),
    };
    if server.to_ascii_lowercase().contains("durakv") {
        return "unknown".into();
    }
    let mut parts = Vec::new();
    for name in ["appendonly", "appendfsync"] {
        let reply = conn.call(&[b"CONFIG", b"GET", name.as_bytes()]).await;
        if let Ok(Frame::Array(items)) = reply {
            if let Some(v) = items.get(1).and_then(frame_text) {
                parts.push(format!("{name}={v}"));
            }
        }
    }
    if parts.is_empty() {
        "unknown".into()
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_multibulk() {
        let mut b = BytesMut::new();
        push_command(&mut b, &[b"SET", b"k", b"vv"]);
        assert_eq!(&b[..], b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n");
    }

    #[test]
    fn finds_info_fields() {
        let info = "# Persistence\r\nloading:0\r\ndurability:full\r\n";
        assert_eq!(info_field(info, "durability").as_deref(), Some("full"));
        assert_eq!(info_field(info, "db0_durability"), None);
    }
}
