//! The order in which requests reached the server, across event loops.
//!
//! Redis serves the clients blocked on a key in the order their commands
//! arrived, and its own tests rely on it: two clients send BRPOPLPUSH a
//! few microseconds apart, a third pushes, and the first must be served.
//! Redis runs both on its one loop in the order the sockets became
//! readable. Here the two connections may be run by the two event loops,
//! and the second can register its wait first: the loop that polled the
//! sockets queues both wake-ups, and an idle worker may take the older one
//! while the first finishes something else. So a blocking command's place
//! in its key's queue follows when its bytes arrived, not when it ran
//! ([`crate::blocking`]).
//!
//! The I/O driver wakes connections in the order epoll reports their
//! sockets ready, which is the order data reached them. Each connection
//! reads through a waker of its own ([`ReadOrder`]) that stamps each wake
//! with the next number of one server-wide counter before waking the
//! task. A read that found data without a wake (the socket was still
//! readable from an earlier read) takes the counter's value as it reads:
//! after every wake stamped before it.

use atomic_waker::AtomicWaker;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// The next stamp. Starts at 1: 0 means "no wake since the last read".
static NEXT: AtomicU64 = AtomicU64::new(1);

/// A connection's read wake-ups, stamped.
struct Stamp {
    /// The connection task's waker, woken after stamping.
    task: AtomicWaker,
    /// The stamp of the latest wake not yet followed by a read (0: none).
    woke: AtomicU64,
}

impl Wake for Stamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Stored before the task is woken, so the task's next poll sees it.
        self.woke
            .store(NEXT.fetch_add(1, Ordering::Relaxed), Ordering::Release);
        self.task.wake();
    }
}

/// One connection's place in the arrival order: poll its reads through
/// [`ReadOrder::poll`] and call [`ReadOrder::arrived`] when one returns
/// data.
pub struct ReadOrder {
    stamp: Arc<Stamp>,
    /// `stamp` as a waker, made once.
    waker: Waker,
    last: u64,
}

impl Default for ReadOrder {
    fn default() -> Self {
        let stamp = Arc::new(Stamp {
            task: AtomicWaker::new(),
            woke: AtomicU64::new(0),
        });
        ReadOrder {
            waker: Waker::from(stamp.clone()),
            stamp,
            last: 0,
        }
    }
}

impl ReadOrder {
    /// Polls a read with the stamping waker in place of `cx`'s.
    pub fn poll<R>(
        &mut self,
        cx: &mut Context<'_>,
        read: impl FnOnce(&mut Context<'_>) -> Poll<R>,
    ) -> Poll<R> {
        self.stamp.task.register(cx.waker());
        read(&mut Context::from_waker(&self.waker))
    }

    /// A read returned data: it arrived at the latest stamped wake, or,
    /// without one, now.
    pub fn arrived(&mut self) {
        self.last = match self.stamp.woke.swap(0, Ordering::Acquire) {
            0 => NEXT.load(Ordering::Relaxed),
            woke => woke,
        };
    }

    /// Where the latest read's data stands in the order (0: nothing read).
    pub fn last(&self) -> u64 {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::counting::waker;

    fn pending(_: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }

    #[test]
    fn wakes_are_stamped_in_the_order_they_happen_and_reach_the_task() {
        let (count_a, task_a) = waker();
        let (count_b, task_b) = waker();
        let mut a = ReadOrder::default();
        let mut b = ReadOrder::default();
        // Each read registers the stamping waker, as a socket would.
        let mut ra = None;
        let mut rb = None;
        let _ = a.poll(&mut Context::from_waker(&task_a), |cx| {
            ra = Some(cx.waker().clone());
            Poll::<()>::Pending
        });
        let _ = b.poll(&mut Context::from_waker(&task_b), |cx| {
            rb = Some(cx.waker().clone());
            Poll::<()>::Pending
        });
        rb.unwrap().wake_by_ref();
        ra.unwrap().wake();
        assert_eq!(count_a.woken(), 1);
        assert_eq!(count_b.woken(), 1);
        a.arrived();
        b.arrived();
        assert!(b.last() < a.last(), "{} {}", b.last(), a.last());
    }

    #[test]
    fn a_read_without_a_wake_comes_after_every_earlier_wake() {
        let (_, task) = waker();
        let mut a = ReadOrder::default();
        let mut b = ReadOrder::default();
        let mut rb = None;
        let _ = b.poll(&mut Context::from_waker(&task), |cx| {
            rb = Some(cx.waker().clone());
            Poll::<()>::Pending
        });
        rb.unwrap().wake_by_ref();
        b.arrived();
        let _ = a.poll(&mut Context::from_waker(&task), pending);
        a.arrived();
        assert!(b.last() < a.last(), "{} {}", b.last(), a.last());
        // A wake is used once: the next read without one is later still.
        let before = b.last();
        b.arrived();
        assert!(b.last() > before);
    }
}
