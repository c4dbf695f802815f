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
//! A TCP client's bytes carry the time the kernel received them
//! (`SO_TIMESTAMPNS`, [`timestamp_reads`]), which a read takes with them
//! ([`recv_stamped`]). Where a stream has no such time (TLS, a Unix
//! socket), a read's data arrived when the I/O driver woke its connection
//! for it: each connection reads through a waker of its own
//! ([`ReadOrder`]) that notes the time before waking the task; a read that
//! found data without a wake (the connection was still busy when it came)
//! takes the time of the read. Every time is of the one clock the kernel
//! stamps packets with (`CLOCK_REALTIME`), in nanoseconds.
//!
//! The wake time alone misplaces a connection whose bytes came while its
//! task was busy: it read them after a later arrival's wake, and a client
//! that sent first queued second now and then (2 runs in 10 of the
//! blocking test `commands_sent_microseconds_apart_queue_in_the_order_sent`).

use atomic_waker::AtomicWaker;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Now, in nanoseconds of the clock the kernel stamps packets with; never
/// 0, which means "no wake since the last read".
fn now_ns() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_nanos() as u64).max(1)
}

/// A connection's read wake-ups, stamped.
struct Stamp {
    /// The connection task's waker, woken after stamping.
    task: AtomicWaker,
    /// The time of the latest wake not yet followed by a read (0: none).
    woke: AtomicU64,
}

impl Wake for Stamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Stored before the task is woken, so the task's next poll sees it.
        self.woke.store(now_ns(), Ordering::Release);
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

    /// A read returned data: it arrived at `received`, the kernel's time
    /// for it if the stream gave one; else at the latest wake, or, without
    /// one, now.
    pub fn arrived(&mut self, received: Option<u64>) {
        let woke = self.stamp.woke.swap(0, Ordering::Acquire);
        self.last = match (received, woke) {
            (Some(at), _) => at,
            (None, 0) => now_ns(),
            (None, woke) => woke,
        };
    }

    /// Where the latest read's data stands in the order (0: nothing read).
    pub fn last(&self) -> u64 {
        self.last
    }
}

/// Has the kernel note when each packet reaches the TCP socket `fd`, for
/// [`recv_stamped`]; set on a listening socket, the connections it
/// accepts inherit it.
pub fn timestamp_reads(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one int through the pointer, of the size
    // passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Reads what `fd` holds onto the spare room of `buf`, without waiting,
/// with the time the kernel received the last of it when the socket
/// notes it ([`timestamp_reads`]).
pub fn recv_stamped(
    fd: std::os::fd::RawFd,
    buf: &mut bytes::BytesMut,
) -> std::io::Result<(usize, Option<u64>)> {
    let spare = buf.spare_capacity_mut();
    // SAFETY: the spare room is `spare.len()` writable bytes.
    let (n, at) = unsafe { recvmsg_stamped(fd, spare.as_mut_ptr().cast(), spare.len(), 0)? };
    // SAFETY: recvmsg initialized the first n bytes of the spare room.
    unsafe { buf.set_len(buf.len() + n) };
    Ok((n, at))
}

/// When the kernel received the first bytes still unread in the TCP socket
/// `fd`, if it holds any and notes the times ([`timestamp_reads`]), with
/// how many of them it copied to the start of `head`; the data stays for
/// the socket's own reader.
pub fn peek_stamped(fd: std::os::fd::RawFd, head: &mut [u8]) -> Option<(usize, u64)> {
    // SAFETY: `head` is `head.len()` writable bytes; MSG_PEEK leaves the
    // data queued. A descriptor closed meanwhile fails (EBADF).
    let r = unsafe { recvmsg_stamped(fd, head.as_mut_ptr(), head.len(), libc::MSG_PEEK) };
    match r {
        Ok((n, Some(at))) if n > 0 => Some((n, at)),
        _ => None,
    }
}

/// recvmsg into `len` bytes at `to`, without waiting, with the receive
/// time the kernel attached.
///
/// # Safety
/// `to` must be valid for writes of `len` bytes.
unsafe fn recvmsg_stamped(
    fd: std::os::fd::RawFd,
    to: *mut u8,
    len: usize,
    flags: libc::c_int,
) -> std::io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: to.cast(),
        iov_len: len,
    };
    // Room for one timestamp message, 8-byte aligned as cmsghdr needs.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data, and all zeros is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: the kernel writes at most iov_len bytes at `to` (valid, by
    // the caller) and at most msg_controllen into `control`, both alive
    // for the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT | flags) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((n as usize, stamp_of(&msg)))
}

/// The receive time in the control messages `recvmsg` wrote into `msg`.
fn stamp_of(msg: &libc::msghdr) -> Option<u64> {
    let mut received = None;
    // SAFETY: the CMSG macros walk the control messages the kernel wrote
    // within msg_controllen; a timestamp's data is one timespec, read
    // unaligned as CMSG_DATA need not be aligned for it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                let ns = (ts.tv_sec as u64)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(ts.tv_nsec as u64);
                received = Some(ns.max(1));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    received
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
        std::thread::sleep(std::time::Duration::from_micros(10));
        ra.unwrap().wake();
        assert_eq!(count_a.woken(), 1);
        assert_eq!(count_b.woken(), 1);
        a.arrived(None);
        b.arrived(None);
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
        b.arrived(None);
        let _ = a.poll(&mut Context::from_waker(&task), pending);
        std::thread::sleep(std::time::Duration::from_micros(10));
        a.arrived(None);
        assert!(b.last() < a.last(), "{} {}", b.last(), a.last());
        // A wake is used once: the next read without one is later still.
        let before = b.last();
        std::thread::sleep(std::time::Duration::from_micros(10));
        b.arrived(None);
        assert!(b.last() > before);
    }

    #[test]
    fn the_kernels_time_wins_over_a_later_wake() {
        let (_, task) = waker();
        let mut a = ReadOrder::default();
        let mut ra = None;
        let _ = a.poll(&mut Context::from_waker(&task), |cx| {
            ra = Some(cx.waker().clone());
            Poll::<()>::Pending
        });
        ra.unwrap().wake_by_ref();
        a.arrived(Some(5));
        assert_eq!(a.last(), 5);
    }

    #[test]
    fn a_tcp_read_carries_when_the_kernel_received_it() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        timestamp_reads(l.as_raw_fd()).unwrap();
        // The kernel turns packet stamping on in deferred work.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut first = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        let mut second = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let before = now_ns();
        first.write_all(b"PING\r\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        second.write_all(b"PING\r\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        // Read in the other order: the times still say who sent first.
        let mut buf = bytes::BytesMut::with_capacity(64);
        let (n, at_b) = recv_stamped(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((n, &buf[..]), (6, &b"PING\r\n"[..]));
        let (_, at_a) = recv_stamped(a.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..], b"PING\r\nPING\r\n");
        let (at_a, at_b) = (at_a.unwrap(), at_b.unwrap());
        assert!(before <= at_a && at_a < at_b && at_b <= now_ns());
        let err = recv_stamped(a.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    }
}
