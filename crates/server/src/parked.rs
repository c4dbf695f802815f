//! Replies a connection leaves for the server to write.
//!
//! At `full` a write's reply is held until the log makes the write
//! durable. Waking the connection for it cost a whole turn of its task:
//! tokio schedules and polls it, the loop looks at its mailbox, blocked
//! command, clock and memory, writes the reply and sets up its waits
//! again. Counted with `bench/instructions.sh` at `-P 1`, that turn was
//! about a third of a durable SET's user-space instructions (5,000 of
//! 15,400), for a reply of a few bytes.
//!
//! So a connection that waits for nothing but its replies' fsync leaves
//! them here with its socket ([`Slot::park`]). When the log meets what
//! they wait for, its listener (`DurableWaiters::wake_met`) queues the
//! connection and wakes one task, the [`Flusher`], which writes every
//! queued connection's replies to its socket: one wake-up per fsync
//! instead of one per connection. The log's thread does not write them
//! itself: it calls the listener from inside a batch's completion (an
//! event loop that led the batch still holds the batch buffer there), and
//! a socket write per connection at that point measured a quarter slower
//! at `-P 1` (42,265 against 55,157 SET/s, nine rounds of
//! `bench/server_cpu.sh`), where the flusher is as fast as waking each
//! connection and uses less CPU. A connection is
//! woken only when its socket does not take its replies whole, when later
//! replies still wait, or when it took its replies back meanwhile.
//!
//! The socket is written only under the slot's lock, and the connection
//! takes its replies back ([`Slot::unpark`], or a guard's drop) before
//! it writes anything else or closes the socket: replies keep their
//! order, and a descriptor is never written after its connection let go
//! of it.

use crate::client::ClientHandle;
use crate::connection::Held;
use crate::state::Shared;
use atomic_waker::AtomicWaker;
use parking_lot::Mutex;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};

/// A connection's parked replies and the socket they go to, if parked.
#[derive(Default)]
pub struct Slot(Mutex<Option<(RawFd, Held)>>);

impl Slot {
    /// Leaves `held` (taken, so the connection's own is empty meanwhile)
    /// for the flusher to write to `fd`.
    pub(crate) fn park(&self, fd: RawFd, held: &mut Held) {
        *self.0.lock() = Some((fd, std::mem::take(held)));
    }

    /// Takes back what was not written yet.
    pub(crate) fn unpark(&self, held: &mut Held) {
        if let Some(h) = self.take() {
            *held = h;
        }
    }

    fn take(&self) -> Option<Held> {
        self.0.lock().take().map(|(_, held)| held)
    }

    /// A guard for the socket's owner, declared after the socket: however
    /// the connection ends (a panic, the runtime dropping its task), the
    /// slot lets go of the descriptor before the socket is closed.
    pub fn emptied_on_drop(&self) -> Emptied<'_> {
        Emptied(self)
    }
}

pub struct Emptied<'a>(&'a Slot);

impl Drop for Emptied<'_> {
    fn drop(&mut self) {
        self.0.take();
    }
}

/// Connections whose parked replies the log met.
type Due = Vec<(Arc<ClientHandle>, Waker)>;

/// The task that writes parked replies once the log meets them.
#[derive(Default)]
pub struct Flusher {
    due: Mutex<Due>,
    task: AtomicWaker,
    /// The task runs: until it does, no connection parks (nothing would
    /// write its replies).
    running: AtomicBool,
}

impl Flusher {
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// The log met what `handle`'s parked replies wait for. Queued for
    /// the task, which [`Flusher::wake`] wakes once for the lot.
    pub fn due(&self, handle: Arc<ClientHandle>, waker: Waker) {
        self.due.lock().push((handle, waker));
    }

    pub fn wake(&self) {
        self.task.wake();
    }

    /// Writes the queued connections' replies, waking each connection
    /// whose replies did not all go.
    fn flush(&self, shared: &Shared, spare: &mut Due) {
        std::mem::swap(&mut *self.due.lock(), spare);
        let met = |dep: u64| shared.dep_met(dep);
        for (handle, waker) in spare.drain(..) {
            // A bug here must not leave the rest of the batch unwoken, its
            // clients waiting for ever: whoever it hits is woken too.
            let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                send(shared, &met, &handle)
            }));
            if !sent.unwrap_or(false) {
                waker.wake();
            }
        }
    }
}

/// The flusher's task: runs for as long as the server does.
pub async fn run(shared: Arc<Shared>) {
    let flusher = &shared.durable_waiters.flusher;
    let mut spare = Due::default();
    flusher.running.store(true, Ordering::Release);
    loop {
        std::future::poll_fn(|cx| {
            flusher.task.register(cx.waker());
            if flusher.due.lock().is_empty() {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        flusher.flush(&shared, &mut spare);
    }
}

/// Writes what `handle` parked that the log met; true if nothing is left
/// for its task to do.
fn send(shared: &Shared, met: &dyn Fn(u64) -> bool, handle: &ClientHandle) -> bool {
    // DEBUG SLEEP stops every connection's output, as a busy Redis would.
    if shared.debug.sleeping() {
        return false;
    }
    let mut slot = handle.parked.0.lock();
    match slot.as_mut() {
        Some((fd, held)) => crate::connection::send_held(shared, met, handle, held, *fd),
        None => false,
    }
}
