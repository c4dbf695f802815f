//! A wake-up for one task: a flag, and the waker of the one task that
//! waits for it (a connection's loop: a kill, a published message).
//!
//! A connection polls its wake-up on every turn, two turns per write at
//! `full` (the request, then the release of its held reply). tokio's
//! `Notify` locks its list of waiters on each poll of a pending
//! `notified()`; this takes two atomic operations and no lock.

use atomic_waker::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

#[derive(Default)]
pub struct Signal {
    set: AtomicBool,
    waker: AtomicWaker,
}

impl Signal {
    pub fn new() -> Signal {
        Signal::default()
    }

    /// Wakes the waiting task, or the next one to wait if none waits now
    /// (a permit, as `Notify::notify_one` stores).
    pub fn notify_one(&self) {
        self.set.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Resolves once `notify_one` is called, or at once if it was called
    /// since the last wait resolved. One task at a time may wait.
    pub fn notified(&self) -> Notified<'_> {
        Notified(self)
    }

    fn take(&self) -> bool {
        self.set.load(Ordering::Acquire) && self.set.swap(false, Ordering::AcqRel)
    }
}

pub struct Notified<'a>(&'a Signal);

impl Future for Notified<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let s = self.0;
        if s.take() {
            return Poll::Ready(());
        }
        s.waker.register(cx.waker());
        // A notify between the check and the registration found no waker.
        if s.take() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// A waker that counts its wake-ups, for tests of wake-up logic.
#[cfg(test)]
pub(crate) mod counting {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    pub struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Count {
        pub fn woken(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    pub fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }
}

#[cfg(test)]
mod tests {
    use super::counting::waker;
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_notify_wakes_the_waiter_or_is_kept_for_the_next_wait() {
        let (count, waker) = waker();
        let mut cx = Context::from_waker(&waker);
        let s = Signal::new();
        // Kept: the first wait after it resolves at once, the second waits.
        s.notify_one();
        assert!(std::pin::pin!(s.notified()).poll(&mut cx).is_ready());
        let mut f = std::pin::pin!(s.notified());
        assert!(f.as_mut().poll(&mut cx).is_pending());
        assert!(
            f.as_mut().poll(&mut cx).is_pending(),
            "a second poll is no notify"
        );
        assert_eq!(count.woken(), 0);
        // Wakes the waiter, and the wait resolves, once.
        s.notify_one();
        s.notify_one();
        assert!(count.woken() >= 1);
        assert!(f.as_mut().poll(&mut cx).is_ready());
        assert!(std::pin::pin!(s.notified()).poll(&mut cx).is_pending());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_notify_from_another_thread_is_never_lost() {
        let s = Arc::new(Signal::new());
        for _ in 0..2000 {
            let s2 = s.clone();
            let t = std::thread::spawn(move || s2.notify_one());
            s.notified().await;
            t.join().unwrap();
        }
    }
}
