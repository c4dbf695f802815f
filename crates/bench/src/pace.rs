//! Precise waits for open-loop (`-target`) pacing.
//!
//! Under `-target`, latency is charged from each request's intended start
//! time, so any lateness of the client's own timer is added to every
//! measured latency. Tokio's timer wheel has a 1 ms resolution, which would
//! inflate sub-millisecond latencies by about a millisecond; each paced
//! client therefore waits on its own Linux `timerfd` (nanosecond
//! resolution, woken through the runtime's epoll like a socket). If a
//! timerfd cannot be created the tokio timer is used instead.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

pub struct Pacer {
    timer: Option<AsyncFd<OwnedFd>>,
}

impl Pacer {
    /// Must be called inside a tokio runtime (the timerfd registers with it).
    pub fn new() -> Pacer {
        let timer = create_timerfd().ok().and_then(|fd| {
            // SAFETY: the OwnedFd is moved into the AsyncFd, so the
            // descriptor stays open and unchanged for the AsyncFd's lifetime.
            unsafe { AsyncFd::register(fd) }.ok()
        });
        Pacer { timer }
    }

    pub fn is_precise(&self) -> bool {
        self.timer.is_some()
    }

    /// Returns at `at` (or at once if it has passed).
    pub async fn sleep_until(&mut self, at: Instant) {
        let now = Instant::now();
        if at <= now {
            return;
        }
        let Some(fd) = &self.timer else {
            tokio::time::sleep_until(at.into()).await;
            return;
        };
        if arm(fd.get_ref(), at - now).is_err() {
            tokio::time::sleep_until(at.into()).await;
            return;
        }
        loop {
            let Ok(mut guard) = fd.readable().await else {
                tokio::time::sleep_until(at.into()).await;
                return;
            };
            match guard.try_io(|inner| read_expirations(inner.get_ref())) {
                Ok(_) => return,
                Err(_would_block) => continue,
            }
        }
    }
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

fn create_timerfd() -> io::Result<OwnedFd> {
    // SAFETY: timerfd_create has no memory-safety preconditions; a
    // non-negative return value is a new descriptor that we own.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by timerfd_create and is not shared.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms a one-shot timer `after` from now (relative, CLOCK_MONOTONIC like
/// `Instant`).
fn arm(fd: &OwnedFd, after: Duration) -> io::Result<()> {
    // A zero value would disarm the timer; wait at least a nanosecond.
    let after = after.max(Duration::from_nanos(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: `spec` is a valid itimerspec for the duration of the call and
    // the old-value pointer may be null.
    let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn read_expirations(fd: &OwnedFd) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    // SAFETY: `buf` is valid for writes of its length for the whole call.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(u64::from_ne_bytes(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_until_the_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut p = Pacer::new();
            let start = Instant::now();
            for i in 1..=5u32 {
                let at = start + Duration::from_micros(300) * i;
                p.sleep_until(at).await;
                assert!(Instant::now() >= at);
            }
            // A deadline in the past returns at once.
            p.sleep_until(start).await;
        });
    }
}
