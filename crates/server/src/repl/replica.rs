//! The link to this server's primary (REPLICAOF): handshake, full or
//! partial sync, then the command stream applied as a privileged client.
//!
//! A full sync replaces the dataset: FLUSHALL, then one logged record per
//! key (a RESTORE of its value), each at the database's own durability
//! level, and the link waits until the last is durable before applying the
//! stream. The stream is executed through the normal command path by a
//! "master" client that bypasses READONLY and whose replies are dropped.

use super::effects::resp;
use crate::client::ClientState;
use crate::command::Ctx;
use crate::state::Shared;
use crate::tls::Stream;
use bytes::{Bytes, BytesMut};
use durakv_engine::mutation::{Mutation, ReplOrigin};
use durakv_protocol::{RequestLimits, RequestParser};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a command of a primary's stream (or of an append-only file) may
/// be: any number of arguments, each up to a terabyte. As in Redis, the
/// replica's own `proto-max-bulk-len` does not apply: the primary accepted
/// the command under its limit, and refusing it here would end the link.
pub(crate) const STREAM_LIMITS: RequestLimits = RequestLimits {
    max_bulk_len_bytes: 1 << 40,
    max_multibulk_len: i32::MAX as u64,
    unauthenticated: false,
};

/// Wait before reconnecting after the link fails.
const RETRY: Duration = Duration::from_secs(1);
/// How often the replica acknowledges its offset (REPLCONF ACK).
const ACK_PERIOD: Duration = Duration::from_secs(1);

type LinkResult<T> = Result<T, String>;

/// Takes the role `replicaof` configures. Called before connections are
/// accepted: done later, by a task, it could undo a REPLICAOF NO ONE that a
/// client (Sentinel, say) sent right after start-up.
pub fn adopt_configured_primary(shared: &Arc<Shared>) {
    let initial = shared.config.read().get("replicaof").unwrap_or_default();
    if !initial.trim().is_empty() {
        restore_origin(shared);
    }
    let mut parts = initial.split_whitespace();
    if let (Some(h), Some(p)) = (parts.next(), parts.next()) {
        if let Ok(port) = p.parse::<u16>() {
            shared.repl.history_known.store(false, Ordering::Release);
            shared.repl.demote(shared, h.to_string(), port);
        }
    }
}

/// Follows REPLICAOF's target: one link task at a time.
pub async fn supervise(shared: Arc<Shared>) {
    let mut rx = shared.repl.target.subscribe();
    let mut task: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let target = rx.borrow_and_update().clone();
        if let Some(t) = task.take() {
            t.abort();
        }
        if let Some((host, port)) = target {
            task = Some(tokio::spawn(link(shared.clone(), host, port)));
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

async fn link(shared: Arc<Shared>, host: String, port: u16) {
    let generation = shared.repl.link_generation.load(Ordering::Acquire);
    loop {
        if let Err(e) = session(&shared, &host, port, generation).await {
            tracing::warn!("replication link to {host}:{port}: {e}");
            // A failover whose target cannot be reached leaves this server
            // the primary rather than no server at all.
            if shared.repl.failover.in_progress() {
                super::failover::abort(&shared, &format!("cannot reach the target: {e}"));
                return;
            }
        }
        {
            let mut l = shared.repl.link.lock();
            if l.up {
                l.down_since_ms = crate::util::now_ms();
            }
            l.up = false;
            l.sync_in_progress = false;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Reads bytes until one line (without CRLF) is complete.
/// `t` is `repl-timeout`: how long the primary may send nothing.
async fn read_line<S: Stream>(
    stream: &mut S,
    buf: &mut BytesMut,
    t: Duration,
) -> LinkResult<String> {
    loop {
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let line = buf.split_to(i + 1);
            let text = String::from_utf8_lossy(&line[..i]);
            return Ok(text.trim_end_matches('\r').to_string());
        }
        read_more(stream, buf, t).await?;
    }
}

async fn read_more<S: Stream>(
    stream: &mut S,
    buf: &mut BytesMut,
    t: Duration,
) -> LinkResult<usize> {
    let n = tokio::time::timeout(t, stream.read_buf(buf))
        .await
        .map_err(|_| {
            format!(
                "the primary sent nothing for {} s (repl-timeout)",
                t.as_secs()
            )
        })?
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("connection closed by the primary".into());
    }
    Ok(n)
}

async fn send<S: Stream>(stream: &mut S, args: &[&[u8]]) -> LinkResult<()> {
    let mut out = Vec::new();
    resp(&mut out, args);
    write_flushed(stream, &out).await
}

/// Writes and flushes: TLS holds records back until flushed.
async fn write_flushed<S: Stream>(stream: &mut S, bytes: &[u8]) -> LinkResult<()> {
    stream.write_all(bytes).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())
}

/// Sends a handshake command and returns the reply line.
async fn ask<S: Stream>(
    stream: &mut S,
    buf: &mut BytesMut,
    t: Duration,
    args: &[&[u8]],
) -> LinkResult<String> {
    send(stream, args).await?;
    read_line(stream, buf, t).await
}

async fn session(shared: &Shared, host: &str, port: u16, generation: u64) -> LinkResult<()> {
    let t = super::link_timeout(&shared.config.read());
    let stream = tokio::time::timeout(t, TcpStream::connect((host, port)))
        .await
        .map_err(|_| {
            format!(
                "cannot connect: no answer in {} s (repl-timeout)",
                t.as_secs()
            )
        })?
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let fallback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let addrs = (
        stream.peer_addr().unwrap_or(fallback),
        stream.local_addr().unwrap_or(fallback),
    );
    let tls = {
        let c = shared.config.read();
        if c.tls_replication {
            Some(crate::tls::connector(&crate::tls::TlsSettings::outgoing(
                &c,
            ))?)
        } else {
            None
        }
    };
    match tls {
        None => {
            let mut stream = stream;
            sync_over(shared, &mut stream, addrs, host, port, generation).await
        }
        Some(connector) => {
            let name = crate::tls::server_name(host)?;
            let mut stream = tokio::time::timeout(
                crate::tls::HANDSHAKE_TIMEOUT,
                connector.connect(name, stream),
            )
            .await
            .map_err(|_| "TLS handshake with the primary timed out".to_string())?
            .map_err(|e| format!("TLS handshake with the primary failed: {e}"))?;
            sync_over(shared, &mut stream, addrs, host, port, generation).await
        }
    }
}

/// The handshake (PING, AUTH, REPLCONF, PSYNC), then a full sync or a
/// continuation, then the stream, over plain TCP or TLS.
async fn sync_over<S: Stream>(
    shared: &Shared,
    stream: &mut S,
    addrs: (std::net::SocketAddr, std::net::SocketAddr),
    host: &str,
    port: u16,
    generation: u64,
) -> LinkResult<()> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    // Fixed for the handshake and the full sync; the stream reads it anew.
    let t = super::link_timeout(&shared.config.read());
    let pong = ask(stream, &mut buf, t, &[b"PING"]).await?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") {
        return Err(format!("PING: {pong}"));
    }
    let (user, pass) = {
        let c = shared.config.read();
        (
            c.get("masteruser").filter(|u| !u.is_empty()),
            c.get("masterauth").filter(|p| !p.is_empty()),
        )
    };
    if let Some(pass) = pass {
        let reply = match &user {
            Some(u) => {
                ask(
                    stream,
                    &mut buf,
                    t,
                    &[b"AUTH", u.as_bytes(), pass.as_bytes()],
                )
                .await?
            }
            None => ask(stream, &mut buf, t, &[b"AUTH", pass.as_bytes()]).await?,
        };
        if reply.starts_with('-') {
            return Err(format!("AUTH: {reply}"));
        }
    }
    // What the primary lists in INFO (`slaveN:ip=,port=`), and so where
    // Sentinel looks for this replica: `replica-announce-ip/port` when this
    // server is reached through another address (NAT, containers); else,
    // as Redis, the TLS port when replication speaks TLS and this server
    // has one (Sentinel then reaches it over TLS), the plain port
    // otherwise.
    let (announce_ip, announce_port) = {
        let c = shared.config.read();
        let tls = (c.tls_replication && c.tls_port != 0).then_some(u64::from(c.tls_port));
        (
            c.get("replica-announce-ip").filter(|ip| !ip.is_empty()),
            c.get("replica-announce-port")
                .and_then(|p| p.parse::<u64>().ok())
                .filter(|&p| p != 0)
                .or(tls),
        )
    };
    let my_port = announce_port
        .unwrap_or_else(|| shared.bound_port.load(Ordering::Acquire))
        .to_string();
    let r = ask(
        stream,
        &mut buf,
        t,
        &[b"REPLCONF", b"listening-port", my_port.as_bytes()],
    )
    .await?;
    if r.starts_with('-') {
        return Err(format!("REPLCONF listening-port: {r}"));
    }
    if let Some(ip) = announce_ip {
        let r = ask(
            stream,
            &mut buf,
            t,
            &[b"REPLCONF", b"ip-address", ip.as_bytes()],
        )
        .await?;
        if r.starts_with('-') {
            return Err(format!("REPLCONF ip-address: {r}"));
        }
    }
    // Only `eof` and `psync2` are announced: their absence would make a
    // Redis primary fall back to older formats.
    let _ = ask(
        stream,
        &mut buf,
        t,
        &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
    )
    .await?;
    // A replica switching primaries (or a demoted primary) offers its ID
    // and offset: a promoted sibling knows them as its `replid2` and
    // continues instead of sending everything again.
    let (replid, offset) = {
        let ids = shared.repl.ids.lock();
        // Or a position its log recorded (a restart), when it has one.
        if shared.repl.history_known.load(Ordering::Acquire)
            || shared.repl.resumable.load(Ordering::Acquire)
        {
            (ids.replid.clone(), (shared.repl.offset() + 1).to_string())
        } else {
            ("?".to_string(), "-1".to_string())
        }
    };
    // A primary handing over (FAILOVER) asks its replica to take over.
    let failing_over = shared.repl.failover.in_progress();
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), offset.as_bytes()];
    if failing_over {
        psync.push(b"FAILOVER");
    }
    let mut reply = ask(stream, &mut buf, t, &psync).await?;
    // A Redis primary sends newlines to keep the link alive until its
    // snapshot starts (`repl-diskless-sync-delay`).
    while reply.is_empty() {
        reply = read_line(stream, &mut buf, t).await?;
    }
    let words: Vec<&str> = reply.split_whitespace().collect();
    let accepted = matches!(words.first().copied(), Some("+FULLRESYNC" | "+CONTINUE"));
    if failing_over {
        if !accepted {
            super::failover::abort(shared, "Failover target rejected psync request");
            return Err(format!("PSYNC FAILOVER: {reply}"));
        }
        shared.repl.failover.completed(shared);
    }
    match words.first().copied() {
        Some("+FULLRESYNC") if words.len() >= 3 => {
            let id = words[1].to_string();
            let off: u64 = words[2].parse().map_err(|_| format!("bad reply {reply}"))?;
            shared.repl.link.lock().sync_in_progress = true;
            // The dataset is about to be replaced: until the load is done
            // the old ID and offset no longer describe it, and this
            // server's own replicas must sync again from the new one.
            shared.repl.history_known.store(false, Ordering::Release);
            shared.repl.drop_replicas(shared);
            let started = std::time::Instant::now();
            shared.repl.resumable.store(false, Ordering::Release);
            shared.repl.master_db.store(0, Ordering::Release);
            let mut master = MasterClient::new(shared, addrs);
            let origin = (Bytes::from(id.clone().into_bytes()), off);
            // Clients get -LOADING until the dataset is whole again: it is
            // replaced as the file arrives.
            shared.repl.loading.store(true, Ordering::Release);
            let _loading = ClearOnDrop(&shared.repl.loading);
            let mut load = crate::checkpointer::blocking(|| Load::begin(shared, &mut master))?;
            let received = receive_rdb(stream, &mut buf, t, |piece| {
                shared
                    .stats
                    .total_net_repl_input_bytes
                    .add(piece.len() as u64);
                crate::checkpointer::blocking(|| load.feed(piece))
            })
            .await;
            let loaded = received.and_then(|bytes| {
                let keys = crate::checkpointer::blocking(|| load.finish(&mut master, origin))?;
                Ok((bytes, keys))
            });
            let (bytes, keys) = match loaded {
                Ok(done) => done,
                Err(e) => {
                    // Part of a dataset would answer reads wrongly without
                    // saying so: none is left instead, as Redis does when
                    // a diskless load fails.
                    crate::checkpointer::blocking(|| {
                        crate::rdb_load::empty_dataset(shared, "a failed full sync");
                    });
                    return Err(e);
                }
            };
            drop(_loading);
            tracing::info!(
                "full sync: loaded {keys} keys ({bytes} bytes of RDB, read as it arrived) in {:.3}s",
                started.elapsed().as_secs_f64()
            );
            if shared.repl.link_generation.load(Ordering::Acquire) != generation {
                return Err("REPLICAOF changed the primary during the full sync".into());
            }
            {
                let mut b = shared.repl.stream.backlog.lock();
                b.reset_to(off);
                b.active = true;
                let mut ids = shared.repl.ids.lock();
                ids.replid = id;
                ids.replid2 = super::NO_REPLID.to_string();
                ids.second_offset = -1;
            }
            shared.repl.history_known.store(true, Ordering::Release);
            apply_stream(shared, stream, buf, master, generation).await
        }
        Some("+CONTINUE") => {
            if let Some(id) = words.get(1) {
                let mut ids = shared.repl.ids.lock();
                if *id != ids.replid {
                    ids.replid2 = std::mem::replace(&mut ids.replid, id.to_string());
                    ids.second_offset = shared.repl.offset() as i64 + 1;
                    drop(ids);
                    // They reconnect and continue under the new ID (their
                    // old one is this server's `replid2`), as in Redis.
                    shared.repl.drop_replicas(shared);
                }
            }
            tracing::info!("partial resync with {host}:{port} accepted");
            let master = MasterClient::new(shared, addrs);
            apply_stream(shared, stream, buf, master, generation).await
        }
        _ => Err(format!("PSYNC: {reply}")),
    }
}

/// Bytes the link asks the socket for at a time while a full sync arrives.
const RECEIVE_CHUNK: usize = 256 * 1024;

/// Receives the RDB payload after +FULLRESYNC, `$<len>\r\n<bytes>` or
/// diskless `$EOF:<40-byte mark>\r\n<bytes><mark>`, handing its bytes to
/// `sink` as they arrive; returns how many there were. Newlines before it
/// are the primary's keepalives while it prepares the file. What follows
/// the payload (the stream, which a durakv primary sends at once) stays in
/// `buf`.
async fn receive_rdb<S: Stream>(
    stream: &mut S,
    buf: &mut BytesMut,
    t: Duration,
    mut sink: impl FnMut(&[u8]) -> LinkResult<()>,
) -> LinkResult<u64> {
    let header = loop {
        let line = read_line(stream, buf, t).await?;
        if !line.is_empty() {
            break line;
        }
    };
    let Some(spec) = header.strip_prefix('$') else {
        return Err(format!("expected the RDB payload, got {header:?}"));
    };
    if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes();
        if mark.is_empty() {
            return Err("empty end mark for the RDB payload".into());
        }
        let mut total = 0u64;
        loop {
            if let Some(i) = buf.windows(mark.len()).position(|w| w == mark) {
                sink(&buf[..i])?;
                let _ = buf.split_to(i + mark.len());
                return Ok(total + i as u64);
            }
            // All but what could be the start of the mark.
            let n = buf.len().saturating_sub(mark.len() - 1);
            if n > 0 {
                sink(&buf[..n])?;
                let _ = buf.split_to(n);
                total += n as u64;
            }
            buf.reserve(RECEIVE_CHUNK);
            read_more(stream, buf, t).await?;
        }
    }
    let len: u64 = spec
        .parse()
        .map_err(|_| format!("bad RDB length {spec:?}"))?;
    let mut left = len;
    loop {
        let n = (buf.len() as u64).min(left) as usize;
        if n > 0 {
            sink(&buf[..n])?;
            let _ = buf.split_to(n);
            left -= n as u64;
        }
        if left == 0 {
            return Ok(len);
        }
        buf.reserve(RECEIVE_CHUNK);
        read_more(stream, buf, t).await?;
    }
}

/// The privileged client the stream runs as (and an import of Redis's
/// append-only file, `aof_import`).
pub(crate) struct MasterClient<'s> {
    shared: &'s Shared,
    pub(crate) state: ClientState,
}

impl<'s> MasterClient<'s> {
    pub(crate) fn new(
        shared: &'s Shared,
        (addr, laddr): (std::net::SocketAddr, std::net::SocketAddr),
    ) -> MasterClient<'s> {
        let handle = shared.clients.register(
            crate::client::Peer::Tcp(addr),
            crate::client::Peer::Tcp(laddr),
            -1,
        );
        handle.replication.store(true, Ordering::Release);
        handle.master_link.store(true, Ordering::Release);
        let mut state = ClientState::new(handle, true, Arc::new(crate::acl::User::default_user()));
        state.is_master = true;
        state.db = shared.repl.master_db.load(Ordering::Acquire) as usize;
        state.reply_mode = crate::client::ReplyMode::Off;
        MasterClient { shared, state }
    }

    pub(crate) fn shared(&self) -> &'s Shared {
        self.shared
    }

    /// Runs one command and returns its reply.
    pub(crate) fn execute(&mut self, args: &[Bytes]) -> durakv_protocol::Frame {
        let mut ctx = Ctx {
            shared: self.shared,
            client: &mut self.state,
        };
        let out = crate::dispatch::execute(&mut ctx, args);
        crate::monitor::send_all(self.shared, &mut self.state);
        out.frame
    }

    fn run(&mut self, args: &[Bytes]) {
        if let durakv_protocol::Frame::Error(e) = &self.execute(args) {
            tracing::warn!(
                "replicated {} failed on this replica: {}",
                String::from_utf8_lossy(&args[0]),
                String::from_utf8_lossy(e)
            );
        }
    }
}

impl Drop for MasterClient<'_> {
    fn drop(&mut self) {
        // Not a connection: it leaves the client registry with the link.
        self.shared.clients.unregister(self.state.id());
    }
}

/// Clears a flag when dropped (however the full sync ends).
struct ClearOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Replaces the dataset with an RDB file's as it arrives, and logs the
/// primary's ID and the sync's offset once all of it is. The first record
/// forgets any earlier position, so a crash mid-load never resumes from
/// one.
struct Load<'s> {
    shared: &'s Shared,
    reader: super::rdb::Loader,
    last_lsn: u64,
}

impl<'s> Load<'s> {
    /// Empties the dataset (keys and functions).
    fn begin(shared: &'s Shared, master: &mut MasterClient<'_>) -> LinkResult<Load<'s>> {
        let ks = &shared.store.keyspace;
        let mut txn = ks.lock_all();
        txn.apply(Mutation::FlushAll).map_err(|e| e.to_string())?;
        txn.apply(Mutation::ReplOrigin(ReplOrigin {
            replid: Bytes::new(),
            offset: 0,
            db: 0,
        }))
        .map_err(|e| e.to_string())?;
        let level = shared.effective_durability(None, 0);
        let out = txn
            .commit(shared.store.wal.as_ref(), level)
            .map_err(|e| e.to_string())?;
        master.run(&[
            Bytes::from_static(b"FUNCTION"),
            Bytes::from_static(b"FLUSH"),
        ]);
        Ok(Load {
            shared,
            reader: super::rdb::Loader::default(),
            last_lsn: out.lsn,
        })
    }

    /// Loads the keys the next bytes of the file complete, one logged
    /// record per key.
    fn feed(&mut self, bytes: &[u8]) -> LinkResult<()> {
        let shared = self.shared;
        let last_lsn = &mut self.last_lsn;
        self.reader
            .feed(bytes, &mut |db, key, value, expire_at_ms| {
                crate::rdb_load::restore(shared, db, key, value, expire_at_ms, last_lsn)
            })
    }

    /// The file is complete: its checksum is checked, the functions it
    /// held are loaded, the position is logged, and all of it is waited
    /// for to be durable. Returns the keys loaded.
    fn finish(self, master: &mut MasterClient<'_>, origin: (Bytes, u64)) -> LinkResult<u64> {
        let Load {
            shared,
            reader,
            mut last_lsn,
        } = self;
        let loaded = reader.finish(&mut |db, key, value, expire_at_ms| {
            crate::rdb_load::restore(shared, db, key, value, expire_at_ms, &mut last_lsn)
        })?;
        for code in &loaded.functions {
            master.run(&[
                Bytes::from_static(b"FUNCTION"),
                Bytes::from_static(b"LOAD"),
                Bytes::from_static(b"REPLACE"),
                code.clone(),
            ]);
        }
        last_lsn = last_lsn.max(master.state.last_write_lsn);
        // The stream goes on in the database the primary's had selected at
        // the sync's offset (a replica serving this one sends no SELECT).
        if loaded.stream_db as usize >= shared.store.keyspace.num_dbs() {
            return Err(format!(
                "the primary's stream selects database {}, past this server's `databases`",
                loaded.stream_db
            ));
        }
        master.state.db = loaded.stream_db as usize;
        shared
            .repl
            .master_db
            .store(loaded.stream_db, Ordering::Release);
        let ks = &shared.store.keyspace;
        let wal = shared.store.wal.as_ref();
        {
            let mut txn = ks.lock_keys(std::iter::empty::<&[u8]>());
            txn.apply(Mutation::ReplOrigin(ReplOrigin {
                replid: origin.0,
                offset: origin.1,
                db: loaded.stream_db,
            }))
            .map_err(|e| e.to_string())?;
            let level = shared.effective_durability(None, 0);
            let out = txn.commit(wal, level).map_err(|e| e.to_string())?;
            last_lsn = last_lsn.max(out.lsn);
        }
        if last_lsn > 0 {
            shared.store.wal.request_sync_upto(last_lsn);
            durakv_engine::store::wait_durable(
                &shared.store.wal,
                last_lsn,
                Duration::from_secs(600),
            )
            .map_err(|e| e.to_string())?;
        }
        Ok(loaded.keys)
    }
}

/// Where the replica's own log stands against the stream it applied: the
/// LSN of the last logged write of each command not yet durable here, with
/// the offset the stream had before that command.
struct DurableOffsets {
    pending: std::collections::VecDeque<(u64, u64)>,
    /// The stream offset applied so far.
    applied: u64,
}

impl DurableOffsets {
    /// A command that ended the stream at `end` after starting at `start`
    /// and whose writes, if it logged any, are in records up to `lsn`
    /// (`None`: it logged nothing).
    fn applied(&mut self, start: u64, end: u64, lsn: Option<u64>) {
        if let Some(lsn) = lsn {
            self.pending.push_back((start, lsn));
        }
        self.applied = end;
    }

    /// `FACK`: the offset up to which every applied write is durable in
    /// this server's log. The log becomes durable in LSN order, so that is
    /// the start of the first command whose last record is not durable yet.
    /// While any database is unlogged (level `none`) its writes are never
    /// durable, and the replica reports 0.
    fn durable(&mut self, shared: &Shared) -> u64 {
        let ks = &shared.store.keyspace;
        if (0..ks.num_dbs()).any(|d| !ks.is_logged(d)) {
            return 0;
        }
        let durable = shared.durable_lsn();
        while self.pending.front().is_some_and(|&(_, l)| l <= durable) {
            self.pending.pop_front();
        }
        self.pending
            .front()
            .map_or(self.applied, |&(start, _)| start)
    }
}

/// Applies the command stream, counting its bytes as the offset, and
/// acknowledges it (`REPLCONF ACK <offset> FACK <durable offset>`) every
/// second, on REPLCONF GETACK, and whenever the durable offset advances.
async fn apply_stream<S: Stream>(
    shared: &Shared,
    stream: &mut S,
    mut buf: BytesMut,
    mut master: MasterClient<'_>,
    generation: u64,
) -> LinkResult<()> {
    {
        let mut l = shared.repl.link.lock();
        l.up = true;
        l.sync_in_progress = false;
        l.last_io_ms = crate::util::now_ms();
    }
    let parser = RequestParser::new(STREAM_LIMITS);
    let mut ack_timer = tokio::time::interval(ACK_PERIOD);
    let handle = master.state.handle.clone();
    let mut durable_rx = shared.durable_tx.subscribe();
    let mut offsets = DurableOffsets {
        pending: std::collections::VecDeque::new(),
        applied: shared.repl.offset(),
    };
    let mut sent_fack = None;
    let replid = Bytes::from(shared.repl.ids.lock().replid.clone().into_bytes());
    // The bytes of a transaction still open (MULTI and what it queued):
    // they count as applied, reach the backlog and this server's own
    // replicas only with their EXEC, as in Redis. A link lost before it
    // resumes from the MULTI, which the primary then sends again.
    let mut open_tx: Vec<u8> = Vec::new();
    let mut heard = tokio::time::Instant::now();
    let result = loop {
        // CLIENT KILL TYPE master: drop the link; it reconnects and asks
        // for a partial resync, as Redis's replica does.
        if handle.is_killed() {
            break Err("link killed by CLIENT KILL".into());
        }
        let mut ack_now = false;
        let gate = shared.repl.apply_gate.lock();
        loop {
            let before = buf.len();
            let args = match parser.parse(&mut buf) {
                Ok(Some(a)) if !a.is_empty() => a,
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(e) => return Err(format!("bad stream from the primary: {e:?}")),
            };
            let used = before - buf.len();
            if shared.repl.link_generation.load(Ordering::Acquire) != generation {
                return Err("REPLICAOF changed the primary".into());
            }
            let getack = args.len() >= 2
                && args[0].eq_ignore_ascii_case(b"replconf")
                && args[1].eq_ignore_ascii_case(b"getack");
            let lsn_before = master.state.last_write_lsn;
            // The backlog keeps the primary's bytes, so replicas of this
            // server (now, or after a promotion) continue from them.
            let mut raw = Vec::with_capacity(used);
            resp(&mut raw, &args.iter().map(|a| &a[..]).collect::<Vec<_>>());
            let start = shared.repl.stream.backlog.lock().end;
            let end = start + (open_tx.len() + raw.len()) as u64;
            if getack {
                ack_now = true;
            } else if !args[0].eq_ignore_ascii_case(b"ping") {
                master.state.repl_origin = Some((replid.clone(), end));
                master.run(&args);
                master.state.repl_origin = None;
                shared
                    .repl
                    .master_db
                    .store(master.state.db as u32, Ordering::Release);
            }
            if master.state.multi.is_some() {
                open_tx.extend_from_slice(&raw);
                continue;
            }
            let mut b = shared.repl.stream.backlog.lock();
            if open_tx.is_empty() {
                b.append(&raw);
            } else {
                open_tx.extend_from_slice(&raw);
                b.append(&open_tx);
                open_tx.clear();
            }
            drop(b);
            let lsn = master.state.last_write_lsn;
            offsets.applied(start, end, (lsn > lsn_before).then_some(lsn));
        }
        drop(gate);
        shared.repl.stream.announce();
        let fack = offsets.durable(shared);
        if ack_now || sent_fack.is_none_or(|s| fack > s) {
            if let Err(e) = send_ack(shared, stream, fack).await {
                break Err(e);
            }
            sent_fack = Some(fack);
        }
        // The primary PINGs every repl-ping-replica-period, so silence
        // past repl-timeout means a dead link (a half-open connection never
        // ends by itself). Counted from the last byte read, not from this
        // iteration: the ACK timer starts one every second.
        let t = super::link_timeout(&shared.config.read());
        let silent_until = heard + t;
        tokio::select! {
            r = stream.read_buf(&mut buf) => {
                match r {
                    Err(e) => break Err(e.to_string()),
                    Ok(0) => break Err("connection closed by the primary".into()),
                    Ok(n) => {
                        heard = tokio::time::Instant::now();
                        shared.stats.total_net_repl_input_bytes.add(n as u64);
                        shared.repl.link.lock().last_io_ms = crate::util::now_ms();
                    }
                }
            }
            _ = tokio::time::sleep_until(silent_until) => {
                break Err(format!(
                    "the primary sent nothing, not even a PING, for {} s (repl-timeout)",
                    t.as_secs()
                ));
            }
            _ = handle.wake.notified() => {}
            r = durable_rx.changed(), if !offsets.pending.is_empty() => {
                if r.is_err() {
                    break Err("shutting down".into());
                }
            }
            _ = ack_timer.tick() => {
                let fack = offsets.durable(shared);
                if let Err(e) = send_ack(shared, stream, fack).await {
                    break Err(e);
                }
                sent_fack = Some(fack);
            }
        }
    };
    drop(master);
    result
}

async fn send_ack<S: Stream>(shared: &Shared, stream: &mut S, fack: u64) -> LinkResult<()> {
    let off = shared.repl.offset().to_string();
    let fack = fack.to_string();
    send(
        stream,
        &[
            b"REPLCONF",
            b"ACK",
            off.as_bytes(),
            b"FACK",
            fack.as_bytes(),
        ],
    )
    .await
}

/// At start-up as a replica: the primary's ID and the offset this
/// server's log reached, if the log recorded them with the writes, so the
/// first PSYNC asks to continue from there. Not when a database is
/// unlogged: its content after a restart is older than that offset.
fn restore_origin(shared: &Shared) {
    let ks = &shared.store.keyspace;
    let Some(origin) = ks.repl_origin() else {
        return;
    };
    if (0..ks.num_dbs()).any(|d| !ks.is_logged(d)) {
        return;
    }
    let replid = String::from_utf8_lossy(&origin.replid).into_owned();
    tracing::info!(
        "the log reached offset {} of replication ID {replid}: asking to continue from there",
        origin.offset
    );
    {
        let mut b = shared.repl.stream.backlog.lock();
        b.reset_to(origin.offset);
        let mut ids = shared.repl.ids.lock();
        ids.replid = replid;
        ids.replid2 = super::NO_REPLID.to_string();
        ids.second_offset = -1;
    }
    shared.repl.master_db.store(origin.db, Ordering::Release);
    shared.repl.resumable.store(true, Ordering::Release);
}

/// Logs that this server's data no longer follows a primary's stream
/// position (REPLICAOF NO ONE: it takes its own writes from now on), so a
/// restart never asks to continue from that position.
pub fn forget_origin(shared: &Shared) {
    let ks = &shared.store.keyspace;
    if ks.repl_origin().is_none() {
        return;
    }
    let mut txn = ks.lock_keys(std::iter::empty::<&[u8]>());
    let cleared = txn.apply(Mutation::ReplOrigin(ReplOrigin {
        replid: Bytes::new(),
        offset: 0,
        db: 0,
    }));
    let level = shared.effective_durability(None, 0);
    if let Err(e) = cleared.map_err(|e| e.to_string()).and_then(|()| {
        txn.commit(shared.store.wal.as_ref(), level)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }) {
        tracing::warn!("could not log the end of the replication position: {e}");
    }
}
