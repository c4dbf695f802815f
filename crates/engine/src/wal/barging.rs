//! A mutex and condition variable for a WAL stream's state that never
//! hand the lock to a thread that is not running.
//!
//! `parking_lot`'s mutex is eventually fair: about every half millisecond
//! an unlock passes the lock straight to the thread it wakes, and a
//! condition variable notified under the lock moves its waiter onto the
//! mutex, so the notifier's unlock wakes it the same way. Until the
//! scheduler runs that thread, the lock is held by nobody on a CPU, and
//! every event loop appending to the stream spins and yields. On two
//! vCPUs, where the client holds one, the woken writer thread could wait
//! a whole time slice. The standard library's futex mutex only wakes a
//! waiter and lets whoever runs first take the lock ("barging"), which is
//! what a lock held for a few hundred nanoseconds wants.
//!
//! A panic while the lock is held does not poison it: as with
//! `parking_lot`, the state's own invariants (a failed log stays failed)
//! are what the code relies on. A wait may return without a notification
//! (the standard library allows spurious wake-ups); every waiter in group
//! commit looks at the stream's state again after it wakes.

use std::sync::{self, PoisonError, TryLockError};
use std::time::{Duration, Instant};

pub(crate) use std::sync::MutexGuard;

pub(crate) struct Mutex<T>(sync::Mutex<T>);

impl<T> Mutex<T> {
    pub fn new(value: T) -> Mutex<T> {
        Mutex(sync::Mutex::new(value))
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Tries for up to `timeout`, polling: only diagnostics use it, where
    /// a stuck holder must not hang the caller too.
    pub fn try_lock_for(&self, timeout: Duration) -> Option<MutexGuard<'_, T>> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(g) = self.try_lock() {
                return Some(g);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

pub(crate) struct Condvar(sync::Condvar);

impl Condvar {
    pub fn new() -> Condvar {
        Condvar(sync::Condvar::new())
    }

    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    pub fn wait_until<'a, T>(&self, guard: MutexGuard<'a, T>, at: Instant) -> MutexGuard<'a, T> {
        let timeout = at.saturating_duration_since(Instant::now());
        match self.0.wait_timeout(guard, timeout) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    pub fn notify_one(&self) {
        self.0.notify_one();
    }

    pub fn notify_all(&self) {
        self.0.notify_all();
    }
}
