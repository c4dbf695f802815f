//! One client connection: read, parse, execute, and write replies in order,
//! holding back any reply whose write (or observed write) is not yet durable.
//!
//! The loop never blocks on durability: while replies wait for an fsync, it
//! keeps reading and executing the client's pipelined commands, and queues
//! their replies behind the held ones. When the durable LSN passes a held
//! reply's dependency, that reply and every reply behind it that is also
//! covered are written together.
//!
//! An idle connection owns no buffers. Requests are read into, and replies
//! encoded into, scratch buffers lent by the worker thread for one turn of
//! the loop ([`scratch`]); a connection keeps a buffer of its own only while
//! it has bytes in flight: a request not yet complete, replies held for an
//! fsync, or output the socket has not taken yet.

use crate::arrival::ReadOrder;
use crate::client::{ClientHandle, ClientState, ReplyMode};
use crate::command::Ctx;
use crate::config::{OutputCheck, NORMAL_CLASS, PUBSUB_CLASS};
use crate::dispatch;
use crate::durable_wait::Registration;
use crate::errors;
use crate::state::Shared;
use crate::tls::ClientStream;
use bytes::{Buf, Bytes, BytesMut};
use durakv_engine::txn::UNLOGGED_FAILED_LSN;
use durakv_engine::wal::{Owed, Wal};
use durakv_protocol::request::pending_query_bytes;
use durakv_protocol::{Frame, RequestLimits, RequestParser};
use futures_util::FutureExt;
use std::collections::VecDeque;
use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Room a read offers the socket; a request bigger than this grows the
/// buffer up to the query buffer limit.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Room the reply buffer starts with; a bigger batch of replies grows it.
const WRITE_CHUNK_BYTES: usize = 16 * 1024;
/// Replies a turn writes before it goes on with the requests left in the
/// read buffer (Redis writes at most 64 KiB per event too). Unbounded, 600
/// pipelined GETs of 1 MiB values built one 600 MiB buffer, doubling it
/// nine times, before writing a byte: twice Redis's time, and that much
/// more memory.
const TURN_OUTPUT_BYTES: usize = 64 * 1024;
/// How stale CLIENT LIST's per-client counters (qbuf, cmd) may get, in ms.
const INFO_REFRESH_MS: u64 = 20;

/// Per worker thread buffers that connections borrow for one turn of their
/// loop (no `.await` while borrowed), so that thousands of idle connections
/// do not each keep a read and a write buffer.
mod scratch {
    use bytes::BytesMut;
    use std::cell::Cell;
    use std::thread::LocalKey;

    /// A buffer that grew past this (a large request or reply) is freed
    /// instead of being kept for the next borrower.
    const KEEP_MAX_BYTES: usize = 64 * 1024;

    thread_local! {
        pub static READ: Cell<BytesMut> = Cell::new(BytesMut::new());
        pub static WRITE: Cell<BytesMut> = Cell::new(BytesMut::new());
    }

    /// Borrows the thread's buffer `key`, empty, with at least `spare` bytes
    /// of room (allocating only when another connection kept it).
    pub fn take(key: &'static LocalKey<Cell<BytesMut>>, spare: usize) -> BytesMut {
        let mut b = key.try_with(Cell::take).unwrap_or_default();
        b.clear();
        if b.capacity() < spare {
            b.reserve(spare);
        }
        b
    }

    /// Hands an emptied buffer back to the thread for the next borrower.
    pub fn give_back(key: &'static LocalKey<Cell<BytesMut>>, mut b: BytesMut) {
        debug_assert!(b.is_empty(), "a buffer with bytes in flight is not scratch");
        if b.capacity() == 0 || b.capacity() > KEEP_MAX_BYTES {
            return;
        }
        b.clear();
        let _ = key.try_with(|c| c.set(b));
    }
}

/// Replies waiting for their LSN to become durable, in order: their bytes
/// back to back in one buffer (no allocation per reply), and per reply its
/// length, dependency, whether it is a pub/sub message rather than a
/// reply, and for a `replicated` dependency when it was queued (unix ms;
/// `replicated-timeout-ms` runs from there). Both go back to the thread's
/// spares (`held_pool`) whenever the queue empties.
#[derive(Default)]
pub(crate) struct Held {
    bytes: BytesMut,
    replies: VecDeque<HeldReply>,
}

/// One reply (or published message) in the held queue.
#[derive(Clone, Copy)]
struct HeldReply {
    /// Its bytes, the next `len` of `Held::bytes`.
    len: usize,
    /// What it waits for (`crate::repl::dep_parts`).
    dep: u64,
    /// A published message, not a reply: it is dropped rather than
    /// answered with an error, and its wait is not counted.
    message: bool,
    /// When it was queued (Unix ms), if it waits for replicas: their
    /// timeout counts from then. 0 otherwise.
    queued_ms: u64,
    /// When it was held (`reply_wait::now_us`).
    held_us: u64,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    fn len(&self) -> usize {
        self.replies.len()
    }

    /// What the oldest held reply waits for, if any: its local dependency,
    /// and whether it waits for replicas once that is met.
    fn first_wait(&self) -> Option<(u64, bool)> {
        self.replies.front().map(|r| crate::repl::dep_parts(r.dep))
    }

    /// When the oldest reply waiting for replicas was queued (they are
    /// queued in time order), if any waits for them.
    fn first_replicated_ms(&self) -> Option<u64> {
        self.replies
            .iter()
            .find(|r| r.queued_ms != 0)
            .map(|r| r.queued_ms)
    }

    /// Gives the buffers back once nothing is held, so an idle connection
    /// owns none.
    fn release_memory_if_empty(&mut self) {
        if self.is_empty() && (self.bytes.capacity() > 0 || self.replies.capacity() > 0) {
            held_pool::give_back(std::mem::take(self));
        }
    }

    /// Borrows buffers for the first reply held since the queue emptied.
    fn prepare(&mut self) {
        if self.replies.capacity() == 0 {
            *self = held_pool::take();
        }
    }
}

/// Per worker thread spare held queues. At `full` every write's reply is
/// held, so a client sending one request at a time fills and empties its
/// queue once per write; allocating and freeing the two buffers each time
/// was 2% of the server's CPU under `durakv bench memtier`.
mod held_pool {
    use super::Held;
    use std::cell::RefCell;

    /// Queues kept per thread: about as many as release and hold again
    /// between two of its turns.
    const KEEP: usize = 64;
    /// A queue that grew past these (a large reply, a long pipeline) is
    /// freed instead.
    const KEEP_MAX_BYTES: usize = 4096;
    const KEEP_MAX_REPLIES: usize = 64;

    thread_local! {
        static POOL: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
    }

    pub fn take() -> Held {
        POOL.try_with(|p| p.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    pub fn give_back(mut held: Held) {
        debug_assert!(held.is_empty(), "a queue with replies in it is not spare");
        held.bytes.clear();
        if held.bytes.capacity() > KEEP_MAX_BYTES || held.replies.capacity() > KEEP_MAX_REPLIES {
            return;
        }
        let _ = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < KEEP {
                p.push(held);
            }
        });
    }
}

/// Serves one connection, over plain TCP (with no delay already set) or
/// TLS, until it closes.
pub async fn serve<S: ClientStream>(
    shared: Arc<Shared>,
    mut stream: S,
    handle: Arc<ClientHandle>,
    authenticated: bool,
) {
    let id = handle.id;
    let _parked = handle.parked.emptied_on_drop();
    let mut client = ClientState::new(handle.clone(), authenticated, shared.acl.default_user());
    // A panic here (a bug in a command that changed nothing: one that
    // changes the keyspace aborts the process) ends this connection only,
    // and the clean-up below still runs. Without it the client would stay
    // registered, watching, subscribed and blocked for ever.
    match AssertUnwindSafe(run(&shared, &mut stream, &mut client))
        .catch_unwind()
        .await
    {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(client = id, "connection closed: {e}"),
        Err(_) => tracing::error!(client = id, "a command panicked; the connection is closed"),
    }
    let mut ctx = Ctx {
        shared: &shared,
        client: &mut client,
    };
    dispatch::unwatch_all(&mut ctx);
    shared
        .pubsub
        .forget(&mut client.subscriptions, &client.handle);
    crate::blocking::abandon(&shared, &mut client);
    if client.paused_request.take().is_some() {
        shared.pause.note_held(false);
    }
    crate::tracking::forget(&shared, &mut client);
    crate::tracking::sync_if_changed(&shared);
    crate::monitor::send_all(&shared, &mut client);
    shared.monitors.remove(&client.handle);
    shared.clients.unregister(id);
}

/// Takes `timeout` from the configuration (at start-up and after CONFIG
/// SET); a change wakes every connection to measure its idle time again.
pub fn apply_config(shared: &Shared) {
    let secs = shared.config.read().timeout_secs;
    if shared.idle_timeout_secs.swap(secs, Ordering::Relaxed) != secs {
        for handle in shared.clients.all() {
            handle.wake.notify_one();
        }
    }
}

async fn run<S: ClientStream>(
    shared: &Arc<Shared>,
    stream: &mut S,
    client: &mut ClientState,
) -> io::Result<()> {
    let (limits, query_limit) = {
        let c = shared.config.read();
        (
            RequestLimits {
                max_bulk_len_bytes: c.proto_max_bulk_len,
                max_multibulk_len: i32::MAX as u64,
                unauthenticated: false,
            },
            c.client_query_buffer_limit as usize,
        )
    };
    let parser = RequestParser::new(limits);
    // Empty (no allocation) unless a request is partly read: see
    // `poll_read_lent`.
    let mut rbuf = BytesMut::new();
    let mut order = ReadOrder::default();
    let mut held = Held::default();
    let mut registration = Registration::default();
    // A receiver is an Arc clone, no allocation; it registers for wake-ups
    // only while `changed()` is polled, that is while a held reply waits
    // for replicas.
    let mut durable_rx = shared.durable_tx.subscribe();
    let mut closing = false;
    let handle = client.handle.clone();
    // The wake-up (a kill, or a published message; `crate::signal`),
    // polled on every turn without a lock.
    let mut woken = std::pin::pin!(handle.wake.notified());
    let mut published_sig = [usize::MAX; 9];
    let mut published_ms = crate::util::monotonic_ms_coarse();
    loop {
        // A turn woken by anything (a durable write releasing a reply, a
        // served wait) is a turn: a listing waits for the replies it
        // writes to be counted out (`crate::settle`).
        handle.activity.busy();
        // DEBUG SLEEP stops the whole server, as in Redis, where tools use
        // it to stand for a busy one.
        if shared.debug.sleeping() {
            shared.debug.slept().await;
        }
        let mut out = scratch::take(&scratch::WRITE, WRITE_CHUNK_BYTES);
        // A served blocked command's reply goes before what its serving
        // queued (its invalidations are queued after the reply is ready).
        let blocked = if client.blocked.is_some() {
            let blocked = resume_blocked(shared, client, &mut out, &mut held);
            deliver_messages(shared, client, &mut out, &mut held, false);
            blocked
        } else {
            deliver_messages(shared, client, &mut out, &mut held, false);
            resume_blocked(shared, client, &mut out, &mut held)
        };
        // A wait ended by this server becoming a replica closes the
        // connection once its reply is written.
        closing |= client.close_after_reply;
        // This loop writes and fsyncs its own `full` writes (below) when
        // the log lets it; the guard hands them to the log's writers on any
        // early return.
        let mut owed = OwedSyncs {
            wal: &shared.store.wal,
            owed: Owed(0),
        };
        let mut more = false;
        if !closing && !blocked {
            client.arrival = order.last();
            let (end, o) = shared
                .store
                .wal
                .defer_syncs(|| process(shared, client, &parser, &mut rbuf, &mut out, &mut held));
            closing = end == TurnEnd::Close;
            more = end == TurnEnd::OutputFull;
            owed.owed = o;
            if end == TurnEnd::OverLimit {
                return Ok(());
            }
        }
        if rbuf.is_empty() {
            scratch::give_back(&scratch::READ, std::mem::take(&mut rbuf));
        }
        release(shared, &mut out, &mut held);
        held.release_memory_if_empty();
        // Publishing takes a lock and copies strings: do it when something
        // others must see changed, otherwise at most every few milliseconds.
        let sig = client.info_signature();
        let now_ms = crate::util::monotonic_ms_coarse();
        if sig != published_sig || now_ms.saturating_sub(published_ms) >= INFO_REFRESH_MS {
            client.publish_info();
            published_sig = sig;
            published_ms = now_ms;
        }
        if client.served_blocked && !out.is_empty() {
            // The clients this one's writes unblocked were woken just now:
            // let them run and write their replies before this one's.
            client.served_blocked = false;
            tokio::task::yield_now().await;
        }
        // A served blocked command's reply and delivered messages count
        // too (a pub/sub message also counts in its subscriber's queue).
        if !output_within_limit(shared, client, out.len() + held.bytes.len()) {
            return Ok(());
        }
        // After the output limit: a client that passed it is closed for
        // that, not counted against `maxmemory-clients` to evict others.
        report_memory(
            shared,
            client,
            &rbuf,
            out.len() + held.bytes.capacity(),
            held.len(),
        );
        // QUIT's reply is the last: once the client has it, it may write
        // from another connection at once, and a tracker redirected here
        // must find this one gone (Redis frees it before reading anything
        // more), not wait for this task's clean-up after the write.
        let leaving = closing && held.is_empty() && client.psync.is_none();
        if leaving {
            shared.clients.unregister(handle.id);
        }
        if !out.is_empty() {
            shared.stats.total_net_output_bytes.add(out.len() as u64);
            shared.stats.total_writes_processed.add(1);
            stream.write_now(&mut out)?;
            if !out.is_empty() {
                if leaving {
                    // Until the client reads, it stays listed, and CLIENT
                    // KILL and shutdown still reach it.
                    shared.clients.reinstate(&handle);
                }
                // The client is not reading (or this is TLS, which always
                // writes here): this connection keeps the buffer until the
                // socket takes it, and meanwhile takes in, but does not
                // run, what the client sends.
                let reading = Reading {
                    rbuf: &mut rbuf,
                    order: &mut order,
                    limit: query_limit,
                    shared,
                };
                let limit = shared.hot.output_limit(output_class(client));
                let waiting = Waiting {
                    handle: &handle,
                    soft_limit: limit
                        .soft_deadline(client.output_over_soft_since)
                        .map(|at| (at, limit.soft_bytes as usize)),
                };
                // Waiting for the client to take its replies: what it sends
                // meanwhile is taken in, not run (`crate::settle`).
                handle.activity.idle();
                if !write_all_unless_killed(stream, &out, reading, waiting, &mut woken).await? {
                    return Ok(());
                }
                handle.activity.busy();
                out.clear();
            }
        }
        scratch::give_back(&scratch::WRITE, out);
        report_memory(shared, client, &rbuf, held.bytes.capacity(), held.len());
        if held.is_empty() {
            // Everything went out: a later burst over the soft limit
            // starts its own count, as Redis's does once the buffer drains.
            client.output_over_soft_since = None;
        }
        // A held reply whose wait is over is released (and written) on the
        // next turn: the monitor lines wait for it.
        if !client.monitor_pending.is_empty()
            && !held
                .first_wait()
                .is_some_and(|(lsn, _)| shared.dep_met(lsn))
        {
            crate::monitor::send_ready(shared, client);
        }
        if owed.owed != Owed(0) {
            // Let the other connections with requests ready on this thread
            // run first (a yield waits for the next poll of the sockets), so
            // that one fsync covers their writes too.
            tokio::task::yield_now().await;
            owed.lead();
        }
        if more && !handle.is_killed() {
            // The replies so far are written (the socket took them, or
            // the wait above did); the requests left need no new bytes.
            tokio::task::yield_now().await;
            continue;
        }
        if closing && held.is_empty() {
            if let Some(req) = client.psync.take() {
                return crate::repl::primary::serve(shared, stream, client, req).await;
            }
            return Ok(());
        }
        if handle.is_killed() {
            return Ok(());
        }
        // The log wakes this connection (`durable_wait`) only once it meets
        // the oldest held reply's local dependency; the durable signal, once
        // that is met, only if it waits for replicas. A dependency met since
        // `release` resolves at once and the loop goes round again.
        let (local_wait, for_replicas) = match held.first_wait() {
            Some((lsn, true)) if shared.dep_met(lsn) => (0, true),
            Some((lsn, _)) => (lsn, false),
            None => (0, false),
        };
        // Counted from the last request, with the setting of now: CONFIG
        // SET `timeout` wakes every connection (`apply_config`), so a
        // change reaches those idle already, as in Redis.
        let timeout_secs = shared.idle_timeout_secs.load(Ordering::Relaxed);
        let idle = async {
            if timeout_secs == 0 {
                std::future::pending::<()>().await
            } else {
                let last = handle.last_interaction_ms.load(Ordering::Relaxed);
                let due = last.saturating_add(timeout_secs.saturating_mul(1000));
                let wait = due.saturating_sub(crate::util::now_ms());
                tokio::time::sleep(Duration::from_millis(wait)).await
            }
        };
        let holding = !held.is_empty();
        let replicated_ms = held.first_replicated_ms();
        // Waiting for nothing but the fsync of its replies, the connection
        // leaves them for the flusher to write (`crate::parked`).
        let parked = (holding
            && local_wait != 0
            && replicated_ms.is_none()
            && !closing
            && client.monitor_pending.is_empty()
            && client.blocked.is_none()
            && client.paused_request.is_none()
            && shared.durable_waiters.flusher.running())
        .then(|| stream.raw_fd())
        .flatten()
        .map(|fd| {
            handle.parked.park(fd, &mut held);
            &handle
        });
        // Everything read so far has run: a CLIENT LIST on another loop
        // need not wait for this connection (`crate::settle`).
        handle.activity.idle();
        tokio::select! {
            _ = &mut woken => {
                if handle.is_killed() {
                    return Ok(());
                }
                woken.set(handle.wake.notified());
            }
            r = std::future::poll_fn(|cx| {
                handle.activity.busy();
                handle.activity.reading();
                let r = poll_read_lent(stream, &mut rbuf, &mut order, cx);
                let took = matches!(r, Poll::Ready(Ok(n)) if n > 0);
                handle.activity.read(took.then(|| order.last()));
                if !took {
                    // Nothing to run: none yet, or the connection is ending
                    // (a write waiting for what arrived before it need not
                    // wait for the rest of its closing).
                    handle.activity.idle();
                }
                r
            }), if !closing => {
                let n = r?;
                if n == 0 {
                    return Ok(());
                }
                if !took_input(shared, &handle, &rbuf, query_limit, n) {
                    return Ok(());
                }
            }
            _ = shared.durable_waiters.met(&shared.store.wal, local_wait, &mut registration, parked), if holding && !for_replicas => {}
            r = durable_rx.changed(), if for_replicas => {
                if r.is_err() {
                    return Ok(());
                }
            }
            _ = replicated_timeout(shared, replicated_ms), if holding => {}
            _ = crate::blocking::unblocked(client.blocked.as_ref()), if client.blocked.is_some() => {}
            _ = shared.pause.ended(), if client.paused_request.is_some() => {}
            _ = idle, if !holding && client.multi.is_none() && client.blocked.is_none() && client.paused_request.is_none() => {
                return Ok(());
            }
        }
        if parked.is_some() {
            handle.parked.unpark(&mut held);
        }
    }
}

/// Streams whose `full` writes this connection's turn left for it to make
/// durable (`Wal::defer_syncs`).
struct OwedSyncs<'a> {
    wal: &'a Wal,
    owed: Owed,
}

impl OwedSyncs<'_> {
    /// Writes and fsyncs them on this thread (blocking it for the fsync).
    fn lead(&mut self) {
        self.wal.lead(std::mem::take(&mut self.owed));
    }
}

impl Drop for OwedSyncs<'_> {
    fn drop(&mut self) {
        if self.owed != Owed(0) {
            self.wal.hand_off(self.owed);
        }
    }
}

/// Reads what the socket has onto the end of `rbuf`: into the thread's
/// scratch buffer when no partial request is pending, handed back within
/// the same poll unless the read leaves bytes in it, so a connection waiting
/// for a request owns no buffer. Ready(0) at end of stream. `order` places
/// what it read in the order of arrival.
fn poll_read_lent<S: ClientStream>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    order: &mut ReadOrder,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    if rbuf.is_empty() {
        *rbuf = scratch::take(&scratch::READ, READ_CHUNK_BYTES);
    } else {
        // A buffer the parser sized for a large argument has room for just
        // the rest of it; asking for a chunk more would double it (BytesMut
        // grows by doubling): 3 MB held, and counted for
        // `maxmemory-clients`, for a 1.5 MB request.
        let spare = rbuf.capacity() - rbuf.len();
        if spare == 0 || (spare < READ_CHUNK_BYTES / 2 && rbuf.capacity() <= 4 * READ_CHUNK_BYTES) {
            rbuf.reserve(READ_CHUNK_BYTES);
        }
    }
    let r = order
        .poll(cx, |cx| stream.poll_read_stamped(cx, rbuf))
        .map_ok(|(n, received)| {
            if n > 0 {
                order.arrived(received);
            }
            n
        });
    if rbuf.is_empty() {
        scratch::give_back(&scratch::READ, std::mem::take(rbuf));
    }
    r
}

/// Accounts for `n` bytes just read onto `rbuf`. False when they took it
/// past `client-query-buffer-limit` (logged), or made `maxmemory-clients`
/// evict this client: the connection is to close.
fn took_input(
    shared: &Shared,
    handle: &ClientHandle,
    rbuf: &BytesMut,
    limit: usize,
    n: usize,
) -> bool {
    shared.stats.total_net_input_bytes.add(n as u64);
    shared.stats.total_reads_processed.add(1);
    handle.activity.took(n);
    handle
        .last_interaction_ms
        .store(crate::util::now_ms_coarse(), Ordering::Relaxed);
    if rbuf.len() > limit {
        tracing::warn!(
            client = handle.id,
            "closing client that exceeded client-query-buffer-limit"
        );
        return false;
    }
    let grew = ClientHandle::set_part(&handle.input_bytes, rbuf.capacity());
    if grew && shared.evict.clients_limit() != 0 {
        handle.recount();
        // Before the request runs, as Redis checks after every read: a
        // client evicted for what it sent does not get it run.
        crate::client_evict::check(shared);
        return !handle.is_killed();
    }
    true
}

/// Tells the handle what the connection holds: its read buffer (and how
/// much of it CLIENT LIST's `qbuf` shows), its unwritten output, the
/// replies it holds and its state; if any of them grew, checks
/// `maxmemory-clients`.
fn report_memory(
    shared: &Shared,
    client: &ClientState,
    rbuf: &BytesMut,
    output: usize,
    held_replies: usize,
) {
    let h = &*client.handle;
    ClientHandle::set_part(&h.held_replies, held_replies);
    ClientHandle::set_part(&h.query_pending, pending_query_bytes(rbuf));
    let grew = ClientHandle::set_part(&h.input_bytes, rbuf.capacity())
        | ClientHandle::set_part(&h.output_bytes, output)
        | ClientHandle::set_part(&h.state_bytes, client.state_bytes());
    // Without a limit nothing reads the total: keeping it would cost a
    // write to a shared counter per turn. Setting one recounts everyone.
    if shared.evict.clients_limit() != 0 {
        h.recount();
        if grew {
            crate::client_evict::check(shared);
        }
    }
}

/// Where a connection blocked on a write puts what the client sends
/// meanwhile.
struct Reading<'a> {
    rbuf: &'a mut BytesMut,
    order: &'a mut ReadOrder,
    /// `client-query-buffer-limit`.
    limit: usize,
    shared: &'a Shared,
}

/// Writes all of `out`, waiting for the socket as long as it takes, unless
/// the connection is killed meanwhile: a subscriber that stopped reading is
/// killed by its output buffer limit while this waits. False when killed,
/// or when what the client sent meanwhile passed the query buffer limit.
///
/// While the socket takes nothing, what the client sends is read into
/// `reading.rbuf`, to be run once the write is done. A client that writes
/// a whole pipeline before reading any reply (hiredis's blocking API does)
/// would otherwise wait forever for this connection to read, and it for
/// the client to read, once both sockets' buffers are full. Redis reads on
/// and runs it, keeping the replies in its output buffer.
async fn write_all_unless_killed<'h, S: ClientStream>(
    stream: &mut S,
    out: &[u8],
    reading: Reading<'_>,
    waiting: Waiting<'h>,
    woken: &mut std::pin::Pin<&mut crate::signal::Notified<'h>>,
) -> io::Result<bool> {
    let Reading {
        rbuf,
        order,
        limit,
        shared,
    } = reading;
    let Waiting { handle, soft_limit } = waiting;
    let (soft_deadline, soft_bytes) = soft_limit.unwrap_or((std::time::Instant::now(), 0));
    let mut soft_over = std::pin::pin!(tokio::time::sleep_until(soft_deadline.into()));
    let mut soft_armed = soft_limit.is_some();
    // Read by the soft limit's check below while the write holds it (an
    // atomic only because the task must be Send).
    let written = std::sync::atomic::AtomicUsize::new(0);
    let mut read_closed = false;
    let mut write = std::pin::pin!(std::future::poll_fn(|cx| loop {
        while written.load(Ordering::Relaxed) < out.len() {
            match std::pin::Pin::new(&mut *stream)
                .poll_write(cx, &out[written.load(Ordering::Relaxed)..])
            {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    written.fetch_add(n, Ordering::Relaxed);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => break,
            }
        }
        if written.load(Ordering::Relaxed) == out.len() {
            // TLS buffers records until flushed; a socket's flush does nothing.
            return std::pin::Pin::new(&mut *stream)
                .poll_flush(cx)
                .map(|r| r.map(|()| true));
        }
        if read_closed {
            return Poll::Pending;
        }
        match poll_read_lent(stream, rbuf, order, cx) {
            Poll::Ready(Ok(0)) => read_closed = true,
            Poll::Ready(Ok(n)) => {
                if !took_input(shared, handle, rbuf, limit, n) {
                    return Poll::Ready(Ok(false));
                }
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    }));
    loop {
        tokio::select! {
            r = write.as_mut() => {
                // As Redis does: a client whose reply went out (a blocked
                // one, say) was not idle meanwhile.
                handle.last_interaction_ms.store(crate::util::now_ms(), Ordering::Relaxed);
                return r;
            }
            _ = woken.as_mut() => {
                if handle.is_killed() {
                    return Ok(false);
                }
                woken.set(handle.wake.notified());
            }
            _ = soft_over.as_mut(), if soft_armed => {
                // The client read too little for the soft limit's seconds
                // while its output stayed over it: as Redis does, it goes
                // (unless what the socket took brought it under).
                let left = out.len() - written.load(Ordering::Relaxed);
                if left > soft_bytes {
                    log_over_limit(handle, left);
                    return Ok(false);
                }
                soft_armed = false;
            }
        }
    }
}

/// What [`write_all_unless_killed`] watches besides the socket: the
/// connection's handle (a kill wakes it) and, when its output is over the
/// soft `client-output-buffer-limit`, when it will have been so for too
/// long, with that limit.
struct Waiting<'h> {
    handle: &'h ClientHandle,
    soft_limit: Option<(std::time::Instant, usize)>,
}

/// The `client-output-buffer-limit` class a connection's replies count
/// under: `pubsub` while it is subscribed to anything, as in Redis, else
/// `normal` (a replica's stream is limited in `repl::primary`).
pub(crate) fn output_class(client: &ClientState) -> usize {
    if client.subscriptions.is_empty() {
        NORMAL_CLASS
    } else {
        PUBSUB_CLASS
    }
}

/// Checks `pending`, the bytes of replies this connection has not written
/// yet (those ready and those held for durability), against its class's
/// `client-output-buffer-limit`. False when they pass it: the connection is
/// then closed without writing them, as Redis stops adding replies for a
/// client past its limit and frees it. Redis's default for `normal` is no
/// limit; a command whose reply passes a set one still ran (an EXEC ran
/// every command) and only its reply is lost.
fn output_within_limit(shared: &Shared, client: &mut ClientState, pending: usize) -> bool {
    if !output_limited(shared, client) {
        return true;
    }
    let limit = shared.hot.output_limit(output_class(client));
    if limit.check(pending as u64, &mut client.output_over_soft_since) == OutputCheck::Exceeded {
        log_over_limit(&client.handle, pending);
        return false;
    }
    true
}

/// Whether the connection's class has any output limit set.
fn output_limited(shared: &Shared, client: &ClientState) -> bool {
    let limit = shared.hot.output_limit(output_class(client));
    limit.hard_bytes != 0 || limit.soft_bytes != 0
}

fn log_over_limit(handle: &ClientHandle, pending: usize) {
    tracing::warn!(
        client = handle.id,
        addr = %handle.addr,
        omem = pending,
        "closing a client over client-output-buffer-limit"
    );
}

/// An HTTP request's `POST` or `Host:` line: a web page tricking a
/// browser into sending commands to this port (cross-protocol scripting).
/// As Redis does, the connection is closed unanswered and the attempt
/// logged, at most once a minute.
fn is_cross_protocol(name: &[u8]) -> bool {
    static LOGGED_MS: AtomicU64 = AtomicU64::new(0);
    if !name.eq_ignore_ascii_case(b"post") && !name.eq_ignore_ascii_case(b"host:") {
        return false;
    }
    let now = crate::util::now_ms();
    let last = LOGGED_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) >= 60_000
        && LOGGED_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(
            "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to durakv. This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your durakv instance. Connection aborted."
        );
    }
    true
}

/// CLIENT PAUSE holds this request (never a replication link's).
fn held_by_pause(shared: &Shared, client: &ClientState, args: &[Bytes]) -> bool {
    if client.is_master || !shared.pause.is_paused() {
        return false;
    }
    // Unknown commands and wrong arities are answered at once, as in Redis.
    let Some(spec) = crate::command::lookup(&args[0]).filter(|s| s.arity_ok(args.len())) else {
        return false;
    };
    let queued = client.multi.as_ref().map(|m| &m.queued[..]);
    let read_only_script = |s: &crate::command::CommandSpec, a: &[Bytes]| {
        crate::cmd::scripting::declares_no_writes(shared, s, a)
    };
    shared.pause.holds(spec, args, queued, &read_only_script)
}

/// How a turn of [`process`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TurnEnd {
    /// No complete request is left (or the connection waits: blocked,
    /// paused).
    Drained,
    /// `TURN_OUTPUT_BYTES` of replies are ready; requests may be left.
    OutputFull,
    /// The connection closes once its replies are delivered.
    Close,
    /// The replies not yet written passed `client-output-buffer-limit`:
    /// the connection closes without writing them.
    OverLimit,
}

/// Executes the complete requests in `rbuf`, until their replies fill
/// `TURN_OUTPUT_BYTES`.
fn process(
    shared: &Shared,
    client: &mut ClientState,
    parser: &RequestParser,
    rbuf: &mut BytesMut,
    out: &mut BytesMut,
    held: &mut Held,
) -> TurnEnd {
    let mut asked = 0;
    // Requests ahead whose keys were prefetched and have not run yet.
    let mut prefetched = 0usize;
    // Read once a turn: most servers set no limit for normal clients, and
    // then a command pays one test of this flag.
    let mut limited = output_limited(shared, client);
    // One vector holds each request's arguments in turn.
    let mut args = Vec::new();
    loop {
        if prefetched == 0 {
            prefetched = prefetch_keys(shared, client.db, rbuf);
        }
        prefetched = prefetched.saturating_sub(1);
        let unparsed = rbuf.len();
        args.clear();
        let parsed = if let Some(held) = client.paused_request.take() {
            shared.pause.note_held(false);
            args = held;
            Ok(true)
        } else if client.authenticated {
            parser.parse_into(rbuf, &mut args)
        } else {
            let mut limits = parser.limits;
            limits.unauthenticated = true;
            RequestParser::new(limits).parse_into(rbuf, &mut args)
        };
        match parsed {
            // CLIENT LIST's qbuf for this client, as Redis counts it while
            // a command runs: the request and what follows it.
            Ok(true) => client.query_bytes = unparsed,
            Ok(false) => return TurnEnd::Drained,
            Err(e) => {
                let frame = Frame::error(e.reply_text());
                push(client, out, held, frame, 0);
                return TurnEnd::Close;
            }
        };
        if is_cross_protocol(&args[0]) {
            // What went before is answered; this connection is dropped.
            return TurnEnd::Close;
        }
        if held_by_pause(shared, client, &args) {
            client.paused_request = Some(std::mem::take(&mut args));
            shared.pause.note_held(true);
            return TurnEnd::Drained;
        }
        if client.reply_mode == ReplyMode::SkipNext {
            client.reply_mode = ReplyMode::Skipping;
        }
        // Evictions run before the command, as in Redis, so what they
        // queue (this client's invalidations too) goes before its reply;
        // `dispatch` only checks the outcome then.
        client.eviction = (shared.evict.maxmemory() != 0).then(|| crate::evict::perform(shared));
        // What was queued before this command goes before its reply.
        deliver_messages(shared, client, out, held, false);
        let mut ctx = Ctx {
            shared,
            client: &mut *client,
        };
        let outcome = dispatch::execute(&mut ctx, &args);
        // Pushes (subscription confirmations) go out even when replies
        // are off, as in Redis.
        let silent = (std::mem::take(&mut client.suppress_this_reply)
            || match client.reply_mode {
                ReplyMode::Off => true,
                ReplyMode::Skipping => {
                    client.reply_mode = ReplyMode::On;
                    true
                }
                ReplyMode::On | ReplyMode::SkipNext => false,
            })
            && !outcome.frame.is_push();
        if crate::blocking::parked(client, silent, outcome.dependency_lsn) {
            return TurnEnd::Drained;
        }
        if silent {
            deliver_messages(shared, client, out, held, false);
            if client.close_after_reply {
                return TurnEnd::Close;
            }
            continue;
        }
        if outcome.frame.is_error() && !std::mem::take(&mut client.error_counted) {
            shared.stats.total_error_replies.add(1);
        }
        let (lsn, replicated) = crate::repl::dep_parts(outcome.dependency_lsn);
        let dep = if lsn != 0 && !shared.dep_met(lsn) {
            if lsn != asked {
                shared.hurry(lsn);
                asked = lsn;
            }
            outcome.dependency_lsn
        } else if replicated && durakv_engine::dep::lsn(lsn) > replicated_upto(shared) {
            outcome.dependency_lsn
        } else {
            0
        };
        // A message published while the command ran goes before its reply,
        // as it would in Redis's single thread; an invalidation queued
        // meanwhile after it, so the client never caches a value the reply
        // read after dropping it.
        deliver_messages(shared, client, out, held, true);
        push(client, out, held, outcome.frame, dep);
        deliver_messages(shared, client, out, held, false);
        if limited && !output_within_limit(shared, client, out.len() + held.bytes.len()) {
            return TurnEnd::OverLimit;
        }
        if client.close_after_reply {
            return TurnEnd::Close;
        }
        if !client.subscriptions.is_empty() {
            // A SUBSCRIBE moved it to the pubsub class.
            limited = output_limited(shared, client);
        }
        if out.len() >= TURN_OUTPUT_BYTES {
            return TurnEnd::OutputFull;
        }
    }
}

/// How many pipelined requests ahead have their keys prefetched at once.
const PREFETCH_AHEAD: usize = durakv_engine::keyspace::Keyspace::PREFETCH_BATCH;

/// When `rbuf` holds several requests (a pipeline), asks the CPU to fetch
/// what the next ones' keys will read before the first runs: on a keyspace
/// larger than the cache each lookup waits for misses, and issued together
/// they overlap (`Keyspace::prefetch_batch`). A lone request
/// gains nothing from it and is left alone. Returns how many requests it
/// looked at.
fn prefetch_keys(shared: &Shared, db: usize, rbuf: &[u8]) -> usize {
    let mut keys: [&[u8]; PREFETCH_AHEAD] = [&[]; PREFETCH_AHEAD];
    let mut n = 0;
    let walked = durakv_protocol::request::peek_second_args(rbuf, PREFETCH_AHEAD, |k| {
        keys[n] = k;
        n += 1;
    });
    if walked > 1 {
        shared.store.keyspace.prefetch_batch(db, &keys[..n]);
    }
    walked
}

/// Queues a blocked command's reply once its wait is over. True while it
/// still waits: the connection executes nothing else meanwhile, as Redis.
fn resume_blocked(
    shared: &Shared,
    client: &mut ClientState,
    out: &mut BytesMut,
    held: &mut Held,
) -> bool {
    if let Some((frame, dep)) = crate::blocking::resume(shared, client) {
        let (lsn, replicated) = crate::repl::dep_parts(dep);
        let dep = if lsn != 0 && !shared.dep_met(lsn) {
            shared.hurry(lsn);
            dep
        } else if replicated && durakv_engine::dep::lsn(lsn) > replicated_upto(shared) {
            dep
        } else {
            0
        };
        push(client, out, held, frame, dep);
    }
    client.blocked.is_some()
}

fn push(client: &ClientState, out: &mut BytesMut, held: &mut Held, frame: Frame, dep: u64) {
    push_with(out, held, dep, false, |buf| {
        frame.encode(client.protocol, buf)
    });
}

/// Appends one reply (or message) encoded by `encode`: straight to `out`,
/// or, when it must wait for durability or something ahead of it waits,
/// to the held queue behind what is already there.
fn push_with(
    out: &mut BytesMut,
    held: &mut Held,
    dep: u64,
    message: bool,
    encode: impl FnOnce(&mut BytesMut),
) {
    if dep == 0 && held.is_empty() {
        encode(out);
        return;
    }
    held.prepare();
    let before = held.bytes.len();
    encode(&mut held.bytes);
    let queued_ms = if crate::repl::dep_parts(dep).1 {
        crate::util::now_ms().max(1)
    } else {
        0
    };
    held.replies.push_back(HeldReply {
        len: held.bytes.len() - before,
        dep,
        message,
        queued_ms,
        held_us: if message {
            0
        } else {
            crate::reply_wait::now_us()
        },
    });
}

/// The LSN up to which `replicated` dependencies are met: every logged
/// write up to it is durable on `min-replicas-to-ack` replicas. On a
/// replica (which has none of its own) and with `min-replicas-to-ack 0`,
/// `replicated` is `full`.
fn replicated_upto(shared: &Shared) -> u64 {
    if shared.repl.is_replica() || shared.config.read().min_replicas_to_ack == 0 {
        return u64::MAX;
    }
    shared.repl.replicated_lsn.load(Ordering::Acquire)
}

/// Resolves when the oldest held `replicated` reply queued at
/// `queued_ms` reaches `replicated-timeout-ms` (never if there is none).
async fn replicated_timeout(shared: &Shared, queued_ms: Option<u64>) {
    let Some(queued) = queued_ms else {
        return std::future::pending().await;
    };
    let timeout = shared.config.read().replicated_timeout_ms;
    let wait = (queued + timeout).saturating_sub(crate::util::now_ms());
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

/// Moves published messages from the connection's mailbox into its output.
/// A message joins the replies in order: it never overtakes a reply already
/// queued (held for durability or not), as in Redis, where a message is
/// appended to the same output buffer as replies. One that reveals a write
/// not yet durable (a keyspace event under `full`) is held like the reply
/// of that write would be.
fn deliver_messages(
    shared: &Shared,
    client: &ClientState,
    out: &mut BytesMut,
    held: &mut Held,
    before_reply: bool,
) {
    let mailbox = &client.handle.mailbox;
    if !mailbox.has_mail() {
        return;
    }
    let (batch, more) = mailbox.take_batch(before_reply);
    let subscribed = !client.subscriptions.is_empty();
    let mut repl_upto = None;
    for m in &batch {
        let (lsn, replicated) = crate::repl::dep_parts(m.dependency_lsn);
        let dep = if (lsn != 0 && !shared.dep_met(lsn))
            || (replicated
                && durakv_engine::dep::lsn(lsn)
                    > *repl_upto.get_or_insert_with(|| replicated_upto(shared)))
        {
            m.dependency_lsn
        } else {
            0
        };
        push_with(out, held, dep, true, |buf| {
            m.encode(client.protocol, subscribed, buf)
        });
    }
    if more {
        // Come back for the rest once this batch is written.
        client.handle.wake.notify_one();
    }
}

/// Moves held replies whose dependency is durable to `out`, in order. If the
/// log has failed, replies that can never become durable become errors, and
/// such messages are dropped (their write never happened as far as a
/// restart is concerned).
fn release(shared: &Shared, out: &mut BytesMut, held: &mut Held) {
    if held.is_empty() {
        return;
    }
    let failed = shared.log_failure().is_some();
    // Read once per call, and only if some reply waits for replicas.
    let mut repl: Option<(u64, u64, u64)> = None;
    let mut repl_state = || {
        *repl.get_or_insert_with(|| {
            (
                replicated_upto(shared),
                shared.config.read().replicated_timeout_ms,
                crate::util::now_ms(),
            )
        })
    };
    let mut ready = 0;
    let mut now_us = None;
    while let Some(&HeldReply {
        len,
        dep,
        message,
        queued_ms,
        held_us,
    }) = held.replies.front()
    {
        let (lsn, replicated) = crate::repl::dep_parts(dep);
        let local = shared.dep_met(lsn);
        let (covered, timed_out) = if replicated && local {
            let (upto, timeout, now) = repl_state();
            (
                durakv_engine::dep::lsn(lsn) <= upto,
                now >= queued_ms + timeout,
            )
        } else {
            (local, false)
        };
        if covered {
            ready += len;
        } else if failed || lsn == UNLOGGED_FAILED_LSN || timed_out {
            out.extend_from_slice(&held.bytes[..ready]);
            held.bytes.advance(ready + len);
            ready = 0;
            // Each entry is exactly one reply, so substituting keeps order.
            if !message {
                let e = if timed_out && !failed {
                    errors::NOREPLICAS_TIMEOUT
                } else {
                    errors::NOT_DURABLE
                };
                errors::err(e).encode(durakv_protocol::Protocol::Resp2, out);
            }
        } else {
            break;
        }
        if !message {
            let now = *now_us.get_or_insert_with(crate::reply_wait::now_us);
            shared.reply_waits.record(now.saturating_sub(held_us));
        }
        held.replies.pop_front();
    }
    out.extend_from_slice(&held.bytes[..ready]);
    held.bytes.advance(ready);
}

/// Writes the replies in `held` (parked by `handle`'s connection,
/// `crate::parked`) whose dependency the log `met` to the socket `fd`, if
/// it takes them without waiting. True if nothing is left for the
/// connection's task: every reply went, whole. Otherwise what went is
/// gone from `held`, and the task, woken, writes the rest.
pub(crate) fn send_held(
    shared: &Shared,
    met: &dyn Fn(u64) -> bool,
    handle: &ClientHandle,
    held: &mut Held,
    fd: std::os::fd::RawFd,
) -> bool {
    let mut ready = 0;
    let mut count = 0;
    for r in &held.replies {
        // Parked replies wait for no replica (`run`).
        if !met(r.dep) {
            break;
        }
        ready += r.len;
        count += 1;
    }
    if count == 0 {
        return false;
    }
    // Counted out before the write, as the connection's own turn does
    // (`report_memory`, and a listing waits for the turn: `crate::settle`):
    // a client that has its reply and lists clients must not see it held.
    let left = held.len() - count;
    ClientHandle::set_part(&handle.held_replies, left);
    if left == 0 {
        ClientHandle::set_part(&handle.output_bytes, 0);
    }
    let counted_back = |held: &Held| {
        ClientHandle::set_part(&handle.held_replies, held.len());
        ClientHandle::set_part(&handle.output_bytes, held.bytes.capacity());
    };
    // SAFETY: `fd` is the connection's open socket: the connection takes
    // its replies back from the slot, whose lock the caller holds, before
    // it closes the socket. The buffer is `ready` initialised bytes.
    let sent = unsafe {
        libc::send(
            fd,
            held.bytes.as_ptr().cast(),
            ready,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    // Would block, or an error the task will meet on its own write.
    let Ok(sent @ 1..) = usize::try_from(sent) else {
        counted_back(held);
        return false;
    };
    let now = crate::reply_wait::now_us();
    for r in held.replies.drain(..count) {
        if !r.message {
            shared.reply_waits.record(now.saturating_sub(r.held_us));
        }
    }
    held.bytes.advance(sent);
    if sent < ready {
        // The rest of those replies, already durable, goes first.
        held.replies.push_front(HeldReply {
            len: ready - sent,
            dep: 0,
            message: true,
            queued_ms: 0,
            held_us: 0,
        });
        counted_back(held);
    }
    shared.stats.total_net_output_bytes.add(sent as u64);
    shared.stats.total_writes_processed.add(1);
    held.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Peer;
    use std::pin::Pin;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    /// A client that sends `script` and then, at its next read, makes the
    /// connection's task panic, as a bug in a command would.
    struct PanicsAfter {
        script: &'static [u8],
    }

    impl AsyncRead for PanicsAfter {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if self.script.is_empty() {
                panic!("a bug while serving the client");
            }
            let n = self.script.len().min(buf.remaining());
            buf.put_slice(&self.script[..n]);
            self.script = &self.script[n..];
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for PanicsAfter {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(b.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl ClientStream for PanicsAfter {
        fn write_now(&mut self, out: &mut BytesMut) -> io::Result<()> {
            out.clear();
            Ok(())
        }
    }

    /// A server state on a fresh directory (kept alive by the guard) and
    /// one registered client.
    fn server_and_client() -> (tempfile::TempDir, Arc<Shared>, Arc<ClientHandle>) {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::Config {
            dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        let shared = crate::open_with(config, Arc::new(durakv_engine::io::OsFs)).unwrap();
        let peer = Peer::Unix("test".into());
        let handle = shared.clients.register(peer.clone(), peer, -1);
        (dir, shared, handle)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_connection_is_forgotten_as_a_closed_one_is() {
        let (_dir, shared, handle) = server_and_client();
        let script = b"*2\r\n$5\r\nWATCH\r\n$1\r\nk\r\n*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n";
        let task = tokio::spawn(serve(shared.clone(), PanicsAfter { script }, handle, true));
        task.await.expect("the panic stays inside the connection");
        assert_eq!(shared.clients.len(), 0, "the client is still registered");
        assert!(!shared.watches.is_active(), "its WATCH is still registered");
        assert_eq!(
            shared.pubsub.numsub(false, b"ch"),
            0,
            "its subscription is still there"
        );
    }

    /// Parked replies written by the flusher (`send_held`): only
    /// those whose dependency is met, in order; what a full socket does
    /// not take stays first in the queue, met, for the connection to
    /// write; a second call after the client read sends the rest.
    #[test]
    fn send_held_writes_met_replies_in_order_and_keeps_what_the_socket_refused() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let (_dir, shared, handle) = server_and_client();
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        // Three replies met (LSN 5 and below), far more than a socket
        // buffer holds, then one that is not.
        let mut held = Held::default();
        let mut expected = Vec::new();
        for (i, dep) in [(0u8, 3u64), (1, 5), (2, 5), (3, 9)] {
            let reply: Vec<u8> = std::iter::repeat_n(b'a' + i, 1 << 20).collect();
            push_with(&mut BytesMut::new(), &mut held, dep, false, |b| {
                b.extend_from_slice(&reply)
            });
            if dep <= 5 {
                expected.extend_from_slice(&reply);
            }
        }
        let met = |dep: u64| dep <= 5;
        let send = |held: &mut Held| send_held(&shared, &met, &handle, held, ours.as_raw_fd());
        let before = shared.stats.total_net_output_bytes.get();
        assert!(!send(&mut held));
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        theirs.set_nonblocking(true).unwrap();
        while let Ok(n @ 1..) = theirs.read(&mut chunk) {
            got.extend_from_slice(&chunk[..n]);
        }
        assert!(
            !got.is_empty() && got.len() < expected.len(),
            "sent {}",
            got.len()
        );
        assert_eq!(got[..], expected[..got.len()], "sent out of order");
        assert_eq!(
            shared.stats.total_net_output_bytes.get() - before,
            got.len() as u64
        );
        // What the socket refused leads the queue, met, and the reply that
        // waits on LSN 9 is still behind it.
        let first = *held.replies.front().unwrap();
        assert_eq!((first.len, first.dep), (expected.len() - got.len(), 0));
        assert_eq!(held.len(), 2);
        assert_eq!(held.bytes.len(), first.len + (1 << 20));
        // The client read: the next call sends the rest of the met bytes,
        // and still leaves the unmet reply (so the connection is woken).
        while got.len() < expected.len() {
            let sent_before = got.len();
            assert!(!send(&mut held));
            while let Ok(n @ 1..) = theirs.read(&mut chunk) {
                got.extend_from_slice(&chunk[..n]);
            }
            assert!(got.len() > sent_before, "nothing more was sent");
        }
        assert_eq!(got, expected);
        assert_eq!(held.len(), 1);
        assert_eq!(held.bytes.len(), 1 << 20);
        assert_eq!(handle.held_replies.load(Ordering::Relaxed), 1);
        // Nothing met is left: nothing is sent.
        assert!(!send(&mut held));
        assert_eq!(held.len(), 1);
    }
}
