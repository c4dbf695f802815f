//! `durakv bench ceiling` over a real socket: it answers what a benchmark
//! client sends, pipelined or split across reads, and closes on a
//! malformed request as durakv does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use durakv_bench::ceiling::serve_on;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn started(data_size: usize) -> TcpStream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_on(listener, data_size));
    TcpStream::connect(addr).await.unwrap()
}

async fn read_exactly(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut got = vec![0; n];
    stream.read_exact(&mut got).await.unwrap();
    got
}

#[tokio::test]
async fn answers_a_pipeline_split_across_writes() {
    let mut c = started(4).await;
    let one = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n*1\r\n$4\r\nPING\r\n";
    let batch = one.repeat(100);
    // Cut mid-argument, so a request arrives in two reads.
    let (a, b) = batch.split_at(batch.len() / 2 + 3);
    c.write_all(a.as_bytes()).await.unwrap();
    c.flush().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    c.write_all(b.as_bytes()).await.unwrap();
    let want = "+OK\r\n$4\r\nxxxx\r\n+PONG\r\n".repeat(100);
    assert_eq!(read_exactly(&mut c, want.len()).await, want.as_bytes());
}

#[tokio::test]
async fn answers_config_get_as_redis_benchmark_expects() {
    let mut c = started(128).await;
    c.write_all(b"*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$10\r\nappendonly\r\n")
        .await
        .unwrap();
    let want = b"*2\r\n$10\r\nappendonly\r\n$0\r\n\r\n";
    assert_eq!(read_exactly(&mut c, want.len()).await, want);
}

#[tokio::test]
async fn closes_after_a_malformed_request() {
    let mut c = started(128).await;
    c.write_all(b"*1\r\nx\r\n").await.unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"-ERR Protocol error: expected '$', got 'x'\r\n");
}
