//! One client connection: read, parse, execute, and write replies in order,
//! holding back any reply whose write (or observed write) is not yet durable.
//!
//! The loop never blocks on durability: while replies wait for an fsync, it
//! keeps reading and executing the client's pipelined commands, and queues
//! their replies behind the held ones. When the durable LSN passes a held
//! reply's dependency, that reply and every reply behind it that is also
//! covered are written together.

use crate::client::{ClientHandle, ClientState, ReplyMode};
use crate::command::Ctx;
use crate::dispatch;
use crate::errors;
use crate::state::Shared;
use bytes::{Buf, BytesMut};
use durakv_engine::txn::UNLOGGED_FAILED_LSN;
use durakv_protocol::{Frame, RequestLimits, RequestParser};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Initial read buffer; it grows for large requests up to the query buffer limit.
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// How stale CLIENT LIST's per-client counters (qbuf, cmd) may get.
const INFO_REFRESH: Duration = Duration::from_millis(20);

/// Replies waiting for their LSN to become durable, in order: their bytes
/// back to back in one buffer (no allocation per reply), and per reply its
/// length and dependency.
#[derive(Default)]
struct Held {
    bytes: BytesMut,
    replies: VecDeque<(usize, u64)>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    fn len(&self) -> usize {
        self.replies.len()
    }
}

pub async fn serve(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    handle: Arc<ClientHandle>,
    authenticated: bool,
) {
    let _ = stream.set_nodelay(true);
    let id = handle.id;
    let mut client = ClientState::new(handle.clone(), authenticated);
    if let Err(e) = run(&shared, &mut stream, &mut client).await {
        tracing::debug!(client = id, "connection closed: {e}");
    }
    let mut ctx = Ctx {
        shared: &shared,
        client: &mut client,
    };
    dispatch::unwatch_all(&mut ctx);
    shared.clients.unregister(id);
}

async fn run(
    shared: &Shared,
    stream: &mut TcpStream,
    client: &mut ClientState,
) -> std::io::Result<()> {
    let (limits, query_limit, timeout_secs) = {
        let c = shared.config.read();
        (
            RequestLimits {
                max_bulk_len_bytes: c.proto_max_bulk_len,
                max_multibulk_len: i32::MAX as u64,
            },
            c.client_query_buffer_limit as usize,
            c.timeout_secs,
        )
    };
    let parser = RequestParser::new(limits);
    let mut rbuf = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let mut out = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let mut held = Held::default();
    let mut durable_rx = shared.durable_tx.subscribe();
    let mut closing = false;
    let handle = client.handle.clone();
    // One registration with the kill notifier for the whole connection, not
    // one (a lock and an unlock) per loop turn.
    let mut killed = Box::pin(handle.wake.notified());
    let mut published_sig = [usize::MAX; 8];
    let mut published_at = std::time::Instant::now();
    loop {
        if !closing {
            closing = process(shared, client, &parser, &mut rbuf, &mut out, &mut held);
        }
        release(shared, &mut out, &mut held);
        // Publishing takes a lock and copies strings: do it when something
        // others must see changed, otherwise at most every few milliseconds.
        let sig = client.info_signature();
        if sig != published_sig || published_at.elapsed() >= INFO_REFRESH {
            client.publish_info(rbuf.len(), held.len());
            published_sig = sig;
            published_at = std::time::Instant::now();
        }
        if !out.is_empty() {
            shared
                .stats
                .total_net_output_bytes
                .fetch_add(out.len() as u64, Ordering::Relaxed);
            stream.write_all(&out).await?;
            out.clear();
        }
        if closing && held.is_empty() {
            return Ok(());
        }
        if handle.is_killed() {
            return Ok(());
        }
        let idle = async {
            if timeout_secs == 0 {
                std::future::pending::<()>().await
            } else {
                tokio::time::sleep(Duration::from_secs(timeout_secs)).await
            }
        };
        tokio::select! {
            _ = &mut killed => {
                if handle.is_killed() {
                    return Ok(());
                }
                killed.set(handle.wake.notified());
            }
            r = stream.read_buf(&mut rbuf), if !closing => {
                let n = r?;
                if n == 0 {
                    return Ok(());
                }
                shared.stats.total_net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                handle.last_interaction_ms.store(crate::util::now_ms(), Ordering::Relaxed);
                if rbuf.len() > query_limit {
                    tracing::warn!(client = handle.id, "closing client that exceeded client-query-buffer-limit");
                    return Ok(());
                }
            }
            r = durable_rx.changed(), if !held.is_empty() => {
                if r.is_err() {
                    return Ok(());
                }
            }
            _ = idle, if held.is_empty() && client.multi.is_none() => {
                return Ok(());
            }
        }
    }
}

/// Executes every complete request in `rbuf`. Returns true when the
/// connection must close once its replies are delivered.
fn process(
    shared: &Shared,
    client: &mut ClientState,
    parser: &RequestParser,
    rbuf: &mut BytesMut,
    out: &mut BytesMut,
    held: &mut Held,
) -> bool {
    let durable = shared.durable_lsn();
    let mut asked_for_sync = false;
    loop {
        let args = match parser.parse(rbuf) {
            Ok(Some(args)) => args,
            Ok(None) => return false,
            Err(e) => {
                let frame = Frame::error(e.reply_text());
                push(client, out, held, frame, 0);
                return true;
            }
        };
        if client.reply_mode == ReplyMode::SkipNext {
            client.reply_mode = ReplyMode::Skipping;
        }
        let mut ctx = Ctx {
            shared,
            client: &mut *client,
        };
        let outcome = dispatch::execute(&mut ctx, &args);
        let silent = std::mem::take(&mut client.suppress_this_reply)
            || match client.reply_mode {
                ReplyMode::Off => true,
                ReplyMode::Skipping => {
                    client.reply_mode = ReplyMode::On;
                    true
                }
                ReplyMode::On | ReplyMode::SkipNext => false,
            };
        if silent {
            if client.close_after_reply {
                return true;
            }
            continue;
        }
        if outcome.frame.is_error() {
            shared
                .stats
                .total_error_replies
                .fetch_add(1, Ordering::Relaxed);
        }
        let dep = if outcome.dependency_lsn > durable {
            if !asked_for_sync {
                shared.store.wal.request_sync();
                asked_for_sync = true;
            }
            outcome.dependency_lsn
        } else {
            0
        };
        push(client, out, held, outcome.frame, dep);
        if client.close_after_reply {
            return true;
        }
    }
}

fn push(client: &ClientState, out: &mut BytesMut, held: &mut Held, frame: Frame, dep: u64) {
    if dep == 0 && held.is_empty() {
        frame.encode(client.protocol, out);
        return;
    }
    let before = held.bytes.len();
    frame.encode(client.protocol, &mut held.bytes);
    held.replies.push_back((held.bytes.len() - before, dep));
}

/// Moves held replies whose dependency is durable to `out`, in order. If the
/// log has failed, replies that can never become durable become errors.
fn release(shared: &Shared, out: &mut BytesMut, held: &mut Held) {
    if held.is_empty() {
        return;
    }
    let durable = shared.durable_lsn();
    let failed = shared.log_failure().is_some();
    let mut ready = 0;
    while let Some(&(len, dep)) = held.replies.front() {
        if dep <= durable {
            ready += len;
        } else if failed || dep == UNLOGGED_FAILED_LSN {
            out.extend_from_slice(&held.bytes[..ready]);
            held.bytes.advance(ready + len);
            ready = 0;
            // Each entry is exactly one reply, so substituting keeps order.
            errors::err(errors::NOT_DURABLE).encode(durakv_protocol::Protocol::Resp2, out);
        } else {
            break;
        }
        held.replies.pop_front();
    }
    out.extend_from_slice(&held.bytes[..ready]);
    held.bytes.advance(ready);
}
