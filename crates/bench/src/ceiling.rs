//! `durakv bench ceiling`: a RESP server that stores nothing, to measure
//! what a benchmark client can drive on this machine.
//!
//! On a small machine the client shares the cores with the server, so a
//! server's throughput can be capped by the client rather than by anything
//! the server does. This server parses each request as durakv does and
//! answers from constants (`+OK`, a fixed value for reads, `+PONG`), with
//! no keyspace, log or bookkeeping. What a client reaches against it, with
//! the same thread count, is the most any server could reach with that
//! client here: the ceiling a ratio against Redis must be read under.

use bytes::{Bytes, BytesMut};
use durakv_protocol::request::{RequestLimits, RequestParser};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const CEILING_USAGE: &str = "\
usage: durakv bench ceiling [options]
  a RESP server that stores nothing and answers every request from constants:
  what a client reaches against it is the most any server can reach with that
  client on this machine. Runs until killed.
  --port P          port on 127.0.0.1 (6399; 0 picks a free one and prints it)
  --threads N       event-loop threads (one per core)
  -d, --data-size D bytes of the value every read returns (128)";

/// What the ceiling server was asked to do.
#[derive(Clone, Debug)]
pub struct CeilingOptions {
    pub port: u16,
    pub threads: usize,
    pub data_size: usize,
}

impl Default for CeilingOptions {
    fn default() -> Self {
        CeilingOptions {
            port: 6399,
            // One event loop per core, as durakv runs by default.
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            data_size: 128,
        }
    }
}

/// Parses the options after `durakv bench ceiling`.
pub fn parse(args: &[String]) -> Result<CeilingOptions, String> {
    let mut o = CeilingOptions::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("{name} needs a value"))
                .cloned()
        };
        match arg.as_str() {
            "--port" => o.port = number(&value(arg)?, arg)?,
            "--threads" => o.threads = number(&value(arg)?, arg)?,
            "-d" | "--data-size" => o.data_size = number(&value(arg)?, arg)?,
            other => return Err(format!("unknown option {other:?}\n{CEILING_USAGE}")),
        }
    }
    if o.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    Ok(o)
}

fn number<T: std::str::FromStr>(s: &str, name: &str) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("{name} expects a number, got {s:?}"))
}

/// Entry point for `durakv bench ceiling`.
pub fn main(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.threads)
        .enable_io()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ceiling: {e}");
            return 1;
        }
    };
    match runtime.block_on(serve(o)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ceiling: {e}");
            1
        }
    }
}

async fn serve(o: CeilingOptions) -> std::io::Result<()> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], o.port))).await?;
    eprintln!(
        "ceiling server on {} ({} thread(s), {}-byte reads)",
        listener.local_addr()?,
        o.threads,
        o.data_size
    );
    serve_on(listener, o.data_size).await
}

/// Serves every connection `listener` accepts, answering reads with
/// `data_size` bytes, until accepting fails.
pub async fn serve_on(listener: TcpListener, data_size: usize) -> std::io::Result<()> {
    let replies = Arc::new(Replies::new(data_size));
    loop {
        let (stream, _) = listener.accept().await?;
        let replies = replies.clone();
        tokio::spawn(async move {
            // A client that goes away or sends garbage just ends its task.
            let _ = connection(stream, &replies).await;
        });
    }
}

/// The constant answers, encoded once.
struct Replies {
    value: Vec<u8>,
}

impl Replies {
    fn new(data_size: usize) -> Self {
        let mut value = format!("${data_size}\r\n").into_bytes();
        value.resize(value.len() + data_size, b'x');
        value.extend_from_slice(b"\r\n");
        Replies { value }
    }

    /// Appends what durakv would answer to `args` on a hit, without
    /// looking anything up.
    fn answer(&self, args: &[Bytes], out: &mut Vec<u8>) {
        let name = &args[0];
        if name.eq_ignore_ascii_case(b"get") {
            out.extend_from_slice(&self.value);
        } else if name.eq_ignore_ascii_case(b"ping") {
            out.extend_from_slice(b"+PONG\r\n");
        } else if name.eq_ignore_ascii_case(b"config") && args.len() == 3 {
            // redis-benchmark asks for `save` and `appendonly` first and
            // warns unless each comes back as a name and a value.
            let param = &args[2];
            out.extend_from_slice(format!("*2\r\n${}\r\n", param.len()).as_bytes());
            out.extend_from_slice(param);
            out.extend_from_slice(b"\r\n$0\r\n\r\n");
        } else {
            out.extend_from_slice(b"+OK\r\n");
        }
    }
}

async fn connection(mut stream: TcpStream, replies: &Replies) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let parser = RequestParser::new(RequestLimits::default());
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut output = Vec::with_capacity(16 * 1024);
    loop {
        if stream.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
        loop {
            match parser.parse(&mut input) {
                Ok(Some(args)) => replies.answer(&args, &mut output),
                Ok(None) => break,
                Err(e) => {
                    output.extend_from_slice(format!("-{}\r\n", e.reply_text()).as_bytes());
                    stream.write_all(&output).await?;
                    return Ok(());
                }
            }
        }
        if !output.is_empty() {
            stream.write_all(&output).await?;
            output.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_from_constants() {
        let r = Replies::new(3);
        let answer = |args: &[&'static str]| {
            let args: Vec<Bytes> = args
                .iter()
                .map(|a| Bytes::from_static(a.as_bytes()))
                .collect();
            let mut out = Vec::new();
            r.answer(&args, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(answer(&["GET", "k"]), "$3\r\nxxx\r\n");
        assert_eq!(answer(&["ping"]), "+PONG\r\n");
        assert_eq!(answer(&["SET", "k", "v"]), "+OK\r\n");
        assert_eq!(
            answer(&["CONFIG", "GET", "save"]),
            "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"
        );
    }

    #[test]
    fn parses_its_options() {
        let args: Vec<String> = ["--port", "7000", "--threads", "2", "-d", "64"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = parse(&args).unwrap();
        assert_eq!((o.port, o.threads, o.data_size), (7000, 2, 64));
        assert!(parse(&["--threads".into(), "0".into()]).is_err());
        assert!(parse(&["--bogus".into()]).is_err());
    }
}
