//! Serving one replica: after PSYNC the connection stops being a client.
//! It gets `+CONTINUE` and the backlog from its offset, or `+FULLRESYNC`,
//! an RDB snapshot, and the stream from the snapshot's offset; then the
//! stream as it grows, while its REPLCONF ACKs are read.

use super::rdb::{self, Origin, Snapshot};
use super::ReplicaInfo;
use crate::client::ClientState;
use crate::config::{OutputCheck, REPLICA_CLASS};
use crate::rdb_value::primitives::without_lzf;
use crate::state::Shared;
use crate::tls::Stream;
use bytes::Bytes;
use bytes::BytesMut;
use durakv_engine::snapshot::{self, Walk};
use durakv_protocol::{RequestLimits, RequestParser};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes sent to a replica per write from the backlog.
const SEND_CHUNK_BYTES: usize = 256 * 1024;
/// Bytes of a full sync's file written at a time: each must be taken
/// within repl-timeout.
const SYNC_WRITE_BYTES: usize = 1024 * 1024;
/// How often a write the replica is slow to take checks its limits.
const STALL_CHECK: Duration = Duration::from_millis(100);
/// How often a full sync that has yet to send its file says it is alive.
const KEEPALIVE: Duration = Duration::from_secs(1);

/// What PSYNC (or SYNC) asked for.
pub struct PsyncRequest {
    pub replid: String,
    /// The first byte the replica wants (its offset + 1); -1: none.
    pub offset: i64,
    /// Sent as SYNC, the form before PSYNC: the RDB comes without a
    /// `+FULLRESYNC` line first, as Redis sends it.
    pub legacy: bool,
}

/// Fixes a full sync's point: the stream offset it corresponds to, the
/// function libraries then, and the walk that copies the keyspace as it
/// was. The feed is on before the point is fixed (with every shard
/// locked), so every commit is either in the copy or in the stream after
/// that offset. Writers go on while the copy is made.
///
/// The replica (client `id`) is pinned at the byte after that offset at
/// once: encoding and sending the snapshot takes seconds, and under load
/// the stream passes `repl-backlog-size` well before the replica starts
/// reading it (it was then cut off as "behind" as soon as its snapshot
/// was sent, and no full sync could finish while writes went on).
///
/// On a replica (chained replication) the stream is its primary's, relayed
/// by the link after it applies each command: the point is fixed under the
/// link's `apply_gate`, between two commands, and the stream goes on in
/// the database it had selected there (returned, for `repl-stream-db`).
fn snapshot_point(shared: &Shared, id: u64) -> (u64, u32, Vec<Bytes>, Walk<'_>) {
    let ks = &shared.store.keyspace;
    let relaying = shared.repl.is_replica();
    if !relaying {
        ks.start_feeding();
    }
    let _gate = relaying.then(|| shared.repl.apply_gate.lock());
    let ((offset, stream_db, functions), walk) = snapshot::begin(ks, |_| {
        let mut b = shared.repl.stream.backlog.lock();
        b.active = true;
        let stream_db = if relaying {
            shared.repl.master_db.load(Ordering::Acquire)
        } else {
            // The feed selects the database again before its next write.
            b.seldb = None;
            // Every LSN handed out so far is in the snapshot: its commit
            // holds its shard locks until it is stamped, and this runs with
            // them all.
            b.index_snapshot(shared.store.wal.last_lsn());
            0
        };
        let end = b.end;
        b.pin(id, end + 1);
        let functions: Vec<Bytes> = ks
            .function_libraries()
            .into_iter()
            .map(|(_, code)| code)
            .collect();
        (end, stream_db, functions)
    });
    (offset, stream_db, functions, walk)
}

/// Positions the copy walks per batch it hands to the encoder.
const KEYS_PER_BATCH: usize = 2048;
/// Encoded pieces queued between the thread that copies and encodes and
/// the socket, so neither waits for the other (and a replica that loads
/// as the file arrives keeps a third stage busy).
const QUEUED_PIECES: usize = 16;

/// Sends a full sync's RDB: `$EOF:<mark>`, the file in pieces while a
/// blocking thread copies and encodes it, then the mark (Redis's diskless
/// form) when the replica announced `capa eof`; otherwise the file whole
/// after its length. After SYNC (`legacy`), without `+FULLRESYNC` first.
/// Returns the sync's offset and the file's size.
async fn full_sync<S: Stream>(
    shared: &Arc<Shared>,
    stream: &mut S,
    replica: &ReplicaInfo,
    legacy: bool,
    streamed: bool,
    functions_only: bool,
) -> io::Result<(u64, u64)> {
    let id = replica.client_id;
    let (point_tx, point_rx) = tokio::sync::oneshot::channel();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(QUEUED_PIECES);
    let producer = {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || {
            produce(&shared, id, streamed, functions_only, point_tx, tx)
        })
    };
    let failed = || io::Error::other("the full sync's snapshot failed");
    let (replid, offset) = point_rx.await.map_err(|_| failed())?;
    if !legacy {
        stream
            .write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
            .await?;
    }
    // Every write below is flushed: over TLS, records wait in the session
    // until then (over TCP a flush does nothing).
    let mark = streamed.then(super::new_replid);
    if let Some(m) = &mark {
        stream.write_all(format!("$EOF:{m}\r\n").as_bytes()).await?;
    }
    let t = super::link_timeout(&shared.config.read());
    // The stream written since the point waits in the backlog for the
    // replica, as it would in its output buffer in Redis, so
    // `client-output-buffer-limit replica` applies from here: unchecked, a
    // sync slower than the writes kept all of them, without bound, until
    // it ended.
    let mut over_soft_since = None;
    let mut over_limit = || {
        behind_past_limit(shared, offset + 1, &mut over_soft_since).map(|behind| {
            format!(
                "the stream grew by {behind} bytes during the replica's full sync, past client-output-buffer-limit replica"
            )
        })
    };
    let cut_off = |why: String| {
        tracing::warn!(replica = %replica.ip, "{why}; disconnecting it");
        io::Error::other(why)
    };
    let mut bytes = 0u64;
    loop {
        // Until a file sent whole after its length is ready, the replica
        // hears newlines, as from Redis, so that its own repl-timeout does
        // not end a sync of a large dataset. After `$EOF:` any byte is the
        // file's.
        let next = watched(rx.recv(), &mut over_limit);
        let piece = if mark.is_none() && bytes == 0 {
            keepalive_until(stream, next).await?
        } else {
            next.await
        };
        let Some(piece) = piece.map_err(cut_off)? else {
            break;
        };
        if mark.is_none() {
            stream
                .write_all(format!("${}\r\n", piece.len()).as_bytes())
                .await?;
        }
        for part in piece.chunks(SYNC_WRITE_BYTES) {
            watched(within(t, stream.write_all(part)), &mut over_limit)
                .await
                .map_err(cut_off)??;
        }
        watched(within(t, stream.flush()), &mut over_limit)
            .await
            .map_err(cut_off)??;
        bytes += piece.len() as u64;
        shared
            .stats
            .total_net_repl_output_bytes
            .add(piece.len() as u64);
    }
    // A file cut short must not be ended with the mark as if whole.
    if !producer.await.map_err(|_| failed())? {
        return Err(failed());
    }
    if let Some(m) = mark {
        stream.write_all(m.as_bytes()).await?;
    }
    stream.flush().await?;
    Ok((offset, bytes))
}

/// Writes newlines every second until `next` resolves.
async fn keepalive_until<S: Stream, T>(
    stream: &mut S,
    next: impl std::future::Future<Output = T>,
) -> io::Result<T> {
    let mut next = std::pin::pin!(next);
    loop {
        tokio::select! {
            v = &mut next => return Ok(v),
            _ = tokio::time::sleep(KEEPALIVE) => {
                stream.write_all(b"\n").await?;
                stream.flush().await?;
            }
        }
    }
}

/// One write the replica must take within repl-timeout (`t`): a replica
/// that stopped reading, or a link that died without a reset, would
/// otherwise hold its snapshot, and the stream it pins, until TCP gives up
/// minutes later.
async fn within(
    t: Duration,
    write: impl std::future::Future<Output = io::Result<()>>,
) -> io::Result<()> {
    tokio::time::timeout(t, write).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the replica took nothing for {} s (repl-timeout)",
                t.as_secs()
            ),
        )
    })?
}

/// The blocking half of [`full_sync`]: fixes the point, reports it, and
/// hands over the encoded file. False if the socket side went away first
/// (the walk is then dropped, and writers stop keeping values for it).
/// With `functions_only` the file holds no keys.
fn produce(
    shared: &Shared,
    id: u64,
    streamed: bool,
    functions_only: bool,
    point_tx: tokio::sync::oneshot::Sender<(String, u64)>,
    tx: tokio::sync::mpsc::Sender<Vec<u8>>,
) -> bool {
    let (offset, stream_db, functions, walk) = snapshot_point(shared, id);
    let mut walk = (!functions_only).then_some(walk);
    let replid = shared.repl.ids.lock().replid.clone();
    if point_tx.send((replid.clone(), offset)).is_err() {
        return false;
    }
    let limits = shared.config.read().encodings;
    let origin = Origin {
        replid: &replid,
        offset,
        used_mem: crate::memory::used_memory_bytes(),
        stream_db,
    };
    without_lzf(|| {
        if !streamed {
            let num_dbs = shared.store.keyspace.num_dbs();
            let snap = Snapshot {
                dbs: match walk {
                    Some(w) => w.rest(),
                    None => (0..num_dbs).map(|_| Vec::new()).collect(),
                },
                functions,
            };
            return tx
                .blocking_send(rdb::write(&snap, &origin, &limits))
                .is_ok();
        }
        let (mut enc, head) = rdb::Encoder::start(&origin, &functions, &limits);
        if tx.blocking_send(head).is_err() {
            return false;
        }
        while let Some(batch) = walk.as_mut().and_then(|w| w.next_batch(KEYS_PER_BATCH)) {
            let mut piece = Vec::new();
            for (db, keys) in batch.iter().enumerate() {
                piece.extend(enc.keys(db, keys, None));
            }
            let delay = shared.config.read().rdb_key_save_delay;
            if delay != 0 {
                let keys: usize = batch.iter().map(Vec::len).sum();
                (0..keys).for_each(|_| crate::util::debug_delay(delay));
            }
            if tx.blocking_send(piece).is_err() {
                return false;
            }
        }
        tx.blocking_send(enc.finish()).is_ok()
    })
}

/// Whether the replica (client `id`) can continue from the backlog; the ID
/// to announce. If it can, it is pinned there under the same lock, so the
/// bytes it needs cannot be trimmed before its sender starts.
fn can_continue(shared: &Shared, req: &PsyncRequest, id: u64) -> Option<String> {
    if req.offset < 0 {
        return None;
    }
    let pos = req.offset as u64;
    let mut b = shared.repl.stream.backlog.lock();
    let ids = shared.repl.ids.lock();
    let known =
        req.replid == ids.replid || (req.replid == ids.replid2 && req.offset <= ids.second_offset);
    if !known {
        tracing::info!(
            "partial resync not accepted: replication ID mismatch (the replica asked for '{}' at offset {}; mine are '{}' and '{}' up to offset {})",
            req.replid, req.offset, ids.replid, ids.replid2, ids.second_offset
        );
        return None;
    }
    if !b.can_continue_from(pos) {
        tracing::info!(
            "partial resync not accepted: offset {} is not in the backlog ({}..={})",
            req.offset,
            b.first_byte(),
            b.end
        );
        return None;
    }
    b.pin(id, pos);
    Some(ids.replid.clone())
}

pub async fn serve<S: Stream>(
    shared: &Arc<Shared>,
    stream: &mut S,
    client: &mut ClientState,
    req: PsyncRequest,
) -> io::Result<()> {
    let info = Arc::new(ReplicaInfo {
        client_id: client.id(),
        ip: client
            .repl_announced_ip
            .clone()
            .unwrap_or_else(|| match &client.handle.addr {
                crate::client::Peer::Tcp(a) => a.ip().to_string(),
                crate::client::Peer::Unix(path) => path.to_string(),
            }),
        port: AtomicU64::new(u64::from(client.repl_listening_port)),
        ack: AtomicU64::new(0),
        fack: AtomicU64::new(0),
        last_ack_ms: AtomicU64::new(crate::util::now_ms()),
        online: AtomicBool::new(false),
    });
    client.handle.replication.store(true, Ordering::Release);
    shared.repl.replicas.lock().push(info.clone());
    let r = stream_to(shared, stream, client, req, &info).await;
    shared
        .repl
        .replicas
        .lock()
        .retain(|x| !Arc::ptr_eq(x, &info));
    r
}

async fn stream_to<S: Stream>(
    shared: &Arc<Shared>,
    stream: &mut S,
    client: &mut ClientState,
    req: PsyncRequest,
    info: &ReplicaInfo,
) -> io::Result<()> {
    let _unpin = Unpin(shared, info.client_id);
    let parser = RequestParser::new(RequestLimits {
        max_bulk_len_bytes: 1 << 20,
        max_multibulk_len: 1 << 20,
        unauthenticated: false,
    });
    let mut rbuf = BytesMut::with_capacity(1024);
    let mut pos = match can_continue(shared, &req, info.client_id) {
        Some(replid) => {
            stream
                .write_all(format!("+CONTINUE {replid}\r\n").as_bytes())
                .await?;
            stream.flush().await?;
            tracing::info!(replica = %info.ip, "partial resync from offset {}", req.offset);
            shared.repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            req.offset as u64
        }
        None => {
            shared.repl.sync_full.fetch_add(1, Ordering::Relaxed);
            if req.replid != "?" {
                shared.repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
            }
            let started = std::time::Instant::now();
            let streamed = client.repl_capa_eof;
            let functions_only = client.repl_functions_only;
            let (offset, bytes) =
                full_sync(shared, stream, info, req.legacy, streamed, functions_only).await?;
            tracing::info!(
                replica = %info.ip,
                "full resync: {bytes} bytes of RDB at offset {offset} in {:.3}s ({})",
                started.elapsed().as_secs_f64(),
                if streamed { "sent while copied" } else { "copied, then sent" },
            );
            if client.repl_rdb_only {
                // The file was all that was asked for (a backup tool, not a
                // replica): no command stream follows.
                return Ok(());
            }
            if streamed {
                wait_for_first_ack(shared, stream, info, &parser, &mut rbuf).await?;
            }
            offset + 1
        }
    };
    // Its repl-timeout counts from here: a replica loading a large file
    // acknowledges nothing until it is done.
    info.last_ack_ms
        .store(crate::util::now_ms(), Ordering::Release);
    info.online.store(true, Ordering::Release);
    let legacy = req.legacy;
    let mut end_rx = shared.repl.stream.subscribe_end();
    let handle = client.handle.clone();
    let mut over_soft_since = None;
    loop {
        // Killed (the server's history changed): nothing more goes out,
        // not even what the stream already holds.
        if handle.is_killed() {
            return Ok(());
        }
        if let Some(why) = timed_out(shared, info, legacy) {
            tracing::warn!(replica = %info.ip, "{why}; disconnecting it");
            return Ok(());
        }
        loop {
            let (chunk, behind) = {
                let mut b = shared.repl.stream.backlog.lock();
                b.pin(info.client_id, pos);
                (
                    b.read_from(pos, SEND_CHUNK_BYTES),
                    (b.end + 1).saturating_sub(pos),
                )
            };
            let over = past_limit(shared, behind, &mut over_soft_since);
            let Some(chunk) = chunk.filter(|_| !over) else {
                tracing::warn!(
                    replica = %info.ip,
                    behind,
                    "replica fell behind the stream past client-output-buffer-limit replica; disconnecting it"
                );
                return Ok(());
            };
            if chunk.is_empty() {
                break;
            }
            // While it catches up this loop may not reach the select below
            // for a long time: its ACKs are read here too, or its
            // repl-timeout would run out while it is taking everything.
            loop {
                let read = tokio::select! {
                    biased;
                    r = stream.read_buf(&mut rbuf) => r?,
                    _ = std::future::ready(()) => break,
                };
                if read == 0 {
                    return Ok(());
                }
                heard(shared, info, &parser, &mut rbuf);
            }
            // A replica that stops reading stalls this write while the
            // backlog keeps what it has yet to take: its limit and its
            // repl-timeout are checked meanwhile, not only between writes.
            let stalled = || {
                behind_past_limit(shared, pos, &mut over_soft_since)
                    .map(|behind| {
                        format!(
                            "replica fell behind the stream by {behind} bytes, past client-output-buffer-limit replica"
                        )
                    })
                    .or_else(|| timed_out(shared, info, legacy))
            };
            if let Some(why) = unless_stalled(stream.write_all(&chunk), stalled).await? {
                tracing::warn!(replica = %info.ip, "{why}; disconnecting it");
                return Ok(());
            }
            shared
                .stats
                .total_net_repl_output_bytes
                .add(chunk.len() as u64);
            pos += chunk.len() as u64;
        }
        // Over TLS a flush writes what the session holds back.
        if let Some(why) =
            unless_stalled(stream.flush(), || timed_out(shared, info, legacy)).await?
        {
            tracing::warn!(replica = %info.ip, "{why}; disconnecting it");
            return Ok(());
        }
        tokio::select! {
            r = end_rx.changed() => {
                if r.is_err() {
                    return Ok(());
                }
            }
            r = stream.read_buf(&mut rbuf) => {
                if r? == 0 {
                    return Ok(());
                }
                heard(shared, info, &parser, &mut rbuf);
            }
            _ = handle.wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// After a file sent with an end mark, waits (up to repl-timeout) for the
/// replica to speak, as Redis holds the stream until the first REPLCONF
/// ACK: a Redis replica recognizes the mark only as the last bytes of a
/// read, so stream bytes sent right behind it were taken for the file's,
/// and the replica hung, or a tool like RedisShake dropped them.
async fn wait_for_first_ack<S: Stream>(
    shared: &Shared,
    stream: &mut S,
    info: &ReplicaInfo,
    parser: &RequestParser,
    rbuf: &mut BytesMut,
) -> io::Result<()> {
    let t = super::link_timeout(&shared.config.read());
    let read = tokio::time::timeout(t, stream.read_buf(rbuf))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the replica sent nothing for {} s after its full sync (repl-timeout)",
                    t.as_secs()
                ),
            )
        })??;
    if read == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    heard(shared, info, parser, rbuf);
    Ok(())
}

/// Takes what the replica sent: REPLCONF ACKs. Anything at all shows it
/// alive, as in Redis.
fn heard(shared: &Shared, info: &ReplicaInfo, parser: &RequestParser, rbuf: &mut BytesMut) {
    info.last_ack_ms
        .store(crate::util::now_ms(), Ordering::Release);
    while let Ok(Some(args)) = parser.parse(rbuf) {
        acknowledge(shared, info, &args);
    }
}

/// Whether a replica `behind` bytes short of the stream's end is past
/// `client-output-buffer-limit replica` (what it has yet to take is its
/// output buffer in Redis's terms).
fn past_limit(
    shared: &Shared,
    behind: u64,
    over_soft_since: &mut Option<std::time::Instant>,
) -> bool {
    shared
        .hot
        .output_limit(REPLICA_CLASS)
        .check(behind, over_soft_since)
        == OutputCheck::Exceeded
}

/// The bytes a replica whose next byte is `pos` has yet to take, if they
/// are past its limit ([`past_limit`]).
fn behind_past_limit(
    shared: &Shared,
    pos: u64,
    over_soft_since: &mut Option<std::time::Instant>,
) -> Option<u64> {
    let behind = (shared.repl.stream.backlog.lock().end + 1).saturating_sub(pos);
    past_limit(shared, behind, over_soft_since).then_some(behind)
}

/// Why a streaming replica should be dropped: it has sent nothing, not even
/// its once-a-second REPLCONF ACK, for repl-timeout. A replica that came
/// with SYNC never acknowledges (redis-cli --replica), and is exempt, as
/// in Redis.
fn timed_out(shared: &Shared, info: &ReplicaInfo, legacy: bool) -> Option<String> {
    if legacy {
        return None;
    }
    let t = super::link_timeout(&shared.config.read());
    let silent_ms = crate::util::now_ms().saturating_sub(info.last_ack_ms.load(Ordering::Acquire));
    (silent_ms > t.as_millis() as u64).then(|| {
        format!(
            "replica sent nothing for {} s (repl-timeout {} s)",
            silent_ms / 1000,
            t.as_secs()
        )
    })
}

/// Runs `write`, checking `stalled` every STALL_CHECK while it waits; the
/// reason `stalled` gave, if it ended the write.
async fn unless_stalled(
    write: impl std::future::Future<Output = io::Result<()>>,
    stalled: impl FnMut() -> Option<String>,
) -> io::Result<Option<String>> {
    match watched(write, stalled).await {
        Ok(r) => r.map(|()| None),
        Err(why) => Ok(Some(why)),
    }
}

/// Awaits `f`, checking `stalled` every STALL_CHECK meanwhile; the reason
/// `stalled` gave instead, if it ended the wait.
async fn watched<T>(
    f: impl std::future::Future<Output = T>,
    mut stalled: impl FnMut() -> Option<String>,
) -> Result<T, String> {
    let mut f = std::pin::pin!(f);
    // Most waits end at once: they need no timer.
    tokio::select! {
        biased;
        r = &mut f => return Ok(r),
        _ = std::future::ready(()) => {}
    }
    loop {
        tokio::select! {
            r = &mut f => return Ok(r),
            _ = tokio::time::sleep(STALL_CHECK) => {
                if let Some(why) = stalled() {
                    return Err(why);
                }
            }
        }
    }
}

/// Releases a replica's hold on the stream when its sender ends.
struct Unpin<'a>(&'a Shared, u64);

impl Drop for Unpin<'_> {
    fn drop(&mut self) {
        self.0.repl.stream.backlog.lock().unpin(self.1);
    }
}

/// A replica's `REPLCONF ACK <offset> [FACK <durable offset>]`.
fn acknowledge(shared: &Shared, info: &ReplicaInfo, args: &[bytes::Bytes]) {
    let is = |i: usize, w: &str| {
        args.get(i)
            .is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()))
    };
    if !(is(0, "replconf") && is(1, "ack")) {
        return;
    }
    let Some(off) = args
        .get(2)
        .and_then(|a| std::str::from_utf8(a).ok())
        .and_then(|a| a.parse::<u64>().ok())
    else {
        return;
    };
    info.ack.fetch_max(off, Ordering::AcqRel);
    let fack = is(3, "fack")
        .then(|| {
            args.get(4)
                .and_then(|a| std::str::from_utf8(a).ok())
                .and_then(|a| a.parse::<u64>().ok())
        })
        .flatten();
    if let Some(fack) = fack {
        // A replica never reports more durable than it applied.
        info.fack.fetch_max(fack.min(off), Ordering::AcqRel);
    }
    info.last_ack_ms
        .store(crate::util::now_ms(), Ordering::Release);
    shared.repl.acks.fetch_add(1, Ordering::AcqRel);
    // Clients in WAIT or WAITAOF may have what they wait for.
    shared.blocking.recheck(shared);
    if fack.is_some() {
        let k = shared.config.read().min_replicas_to_ack as usize;
        if shared.repl.advance_replicated(k) {
            // Connections holding `replicated` replies re-check.
            shared.durable_tx.send_modify(|_| {});
        }
    }
}

/// Sends PING down the stream every `repl-ping-replica-period` while
/// replicas are attached, as Redis does, so their link timeouts see life.
/// It ticks once a second, as Redis's replication cron does, so a new
/// period applies from the next tick.
pub async fn ping_replicas(shared: Arc<Shared>) {
    let mut ticks = 0u64;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        ticks += 1;
        let period = shared
            .config
            .read()
            .get("repl-ping-replica-period")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(10);
        if !ticks.is_multiple_of(period.max(1)) {
            continue;
        }
        if !shared.repl.replicas.lock().is_empty() {
            let mut out = Vec::new();
            super::effects::resp(&mut out, &[b"PING"]);
            shared.repl.stream.append_raw(&out);
        }
    }
}
