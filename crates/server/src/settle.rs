//! Other connections' requests run as of the moment a command arrives.
//!
//! Redis runs every command on one loop, in the order the sockets became
//! readable, so a command sent right after another client's request sees
//! what that request did: a CLIENT LIST shows the query buffer it filled,
//! or the client it got evicted or closed for passing its output limit; a
//! PUBLISH does not reach a subscriber whose UNSUBSCRIBE arrived first;
//! a write does not abort an EXEC that arrived first on a connection
//! watching the key.
//! Here a connection's turn runs on whichever event loop took its socket,
//! and the other loop may not have read that request yet; tools and
//! Redis's own tests read such a listing as the server's state, and the
//! count PUBLISH returns as who was subscribed.
//!
//! So, before listing, [`others`] waits until every other connection has
//! run what arrived before the listing: it is between turns with nothing
//! unread in its socket, or it has since read all that its socket held and
//! ended that turn; before delivering, [`receivers`] waits so for the
//! subscribers it delivers to, and before writing, [`watchers`] for the
//! clients watching the keys. The wait gives up after [`MAX_WAIT`], for
//! a connection that will not read (one closing after QUIT with more sent
//! behind it).
//!
//! A connection marks its turns in its [`Activity`]: a few plain stores to
//! its own handle per request, nothing shared.
//!
//! A client may connect and send at once (Redis's tests do, with a fresh
//! deferring client), its request then waiting in a listening socket's
//! queue where no connection's count shows it. So [`others`] first waits
//! for each accept loop ([`Door`]) to have taken in the connections queued
//! when it was called: an accept loop registers a connection before it
//! looks for the next one.

use crate::client::ClientHandle;
use crate::state::Shared;
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a listing waits for the other connections.
pub const MAX_WAIT: Duration = Duration::from_millis(100);
/// How often it looks again.
const POLL: Duration = Duration::from_micros(100);
/// Most subscribers a PUBLISH waits for. A wide fan-out is not an
/// exchange between two clients whose order matters, and waiting costs
/// there: `redis-benchmark -c 10 publish` to 40 busy subscribers ran 25%
/// slower when every publish waited for all of them; to 8, within 5%.
pub const MAX_RECEIVERS: usize = 8;
/// Quick looks again, the thread yielding in between, before a PUBLISH
/// leaves its event loop to wait: a subscriber seen busy is nearly always
/// one writing out earlier messages on the other loop, done within
/// microseconds, and a publisher slowed by 100 µs for it would publish at
/// a tenth of its rate.
const QUICK_LOOKS: usize = 64;

/// What a connection's task is doing, as another thread may read it.
/// Written only by the connection's task, so no update needs an atomic
/// read-modify-write.
#[derive(Default)]
pub struct Activity {
    /// Odd from the moment the connection reads until its turn ends.
    turns: AtomicU64,
    /// Bytes it has read from its socket.
    bytes_in: AtomicU64,
    /// It has ended a turn after reading something: no newcomer any more.
    ran: AtomicBool,
}

impl Activity {
    /// About to read, or to run what it read: set before the read, so that
    /// a socket seen drained is never seen with its reader idle.
    #[inline]
    pub fn busy(&self) {
        let t = self.turns.load(Ordering::Relaxed);
        if t & 1 == 0 {
            self.turns.store(t + 1, Ordering::Release);
        }
    }

    /// Waiting on the network (for requests, or for the client to take
    /// replies), with everything read so far run.
    #[inline]
    pub fn idle(&self) {
        let t = self.turns.load(Ordering::Relaxed);
        if t & 1 == 1 {
            if !self.ran.load(Ordering::Relaxed) && self.bytes_in.load(Ordering::Relaxed) > 0 {
                self.ran.store(true, Ordering::Release);
            }
            self.turns.store(t + 1, Ordering::Release);
        }
    }

    /// Not yet through a turn that ran something it read: a connection
    /// just accepted, or one that has only waited for its first request.
    /// Not derivable from `turns` and `bytes_in`: a connection in a later
    /// turn (a FLUSHALL waiting for the others) would count as new, and a
    /// newer client's blocking command would wait for it while it waits
    /// for that client.
    #[inline]
    pub fn is_new(&self) -> bool {
        !self.ran.load(Ordering::Acquire)
    }

    /// Counts `n` bytes just read.
    #[inline]
    pub fn took(&self, n: usize) {
        let b = self.bytes_in.load(Ordering::Relaxed);
        self.bytes_in.store(b + n as u64, Ordering::Release);
    }
}

/// How a connection looked when the listing arrived.
enum Seen {
    /// Idle with nothing unread.
    Settled,
    /// It must read up to this many bytes in all and end that turn.
    Owes(u64),
}

fn look(h: &ClientHandle, owed: Option<u64>) -> Seen {
    let a = &h.activity;
    let before = a.turns.load(Ordering::Acquire);
    let read = a.bytes_in.load(Ordering::Acquire);
    let unread = unread_bytes(h.fd);
    let after = a.turns.load(Ordering::Acquire);
    // The same even count on both sides of the other reads: no turn ran
    // between them, so what they saw belongs to one idle moment.
    let idle = before == after && before & 1 == 0;
    match owed {
        _ if idle && unread == 0 => Seen::Settled,
        Some(target) if idle && read >= target => Seen::Settled,
        Some(target) => Seen::Owes(target),
        None => Seen::Owes(read + unread),
    }
}

/// Bytes waiting in the socket `fd` (0 if it is gone).
fn unread_bytes(fd: i64) -> u64 {
    let Ok(fd) = libc::c_int::try_from(fd) else {
        return 0;
    };
    if fd < 0 {
        return 0;
    }
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer; a descriptor
    // closed meanwhile makes it fail with EBADF, read as nothing unread.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if r < 0 {
        0
    } else {
        n.max(0) as u64
    }
}

/// Connections whose turns this waits for: those served by the request
/// loop, other than `me`. A replication link runs its own loop.
fn counted(h: &ClientHandle, me: u64) -> bool {
    h.id != me
        && !h.is_killed()
        && !h.replication.load(Ordering::Relaxed)
        && !h.master_link.load(Ordering::Relaxed)
}

/// Waits (up to [`MAX_WAIT`]) until every connection but `me` has run
/// what it had received when this was called, those still queued to be
/// accepted included. Blocks the calling thread; the runtime's other
/// tasks move to another worker meanwhile.
pub fn others(shared: &Shared, me: u64) {
    let deadline = Instant::now() + MAX_WAIT;
    let mut doors = shared.doors.owing();
    if !doors.is_empty() {
        block(shared, deadline, || {
            doors.retain(|(d, target)| d.owes(*target));
            doors.is_empty()
        });
    }
    wait_for(shared, me, owing(shared.clients.all(), me), deadline);
}

/// [`others`] for the connections accepted before `me` that have not yet
/// run a request they read ([`ClientRegistry::newcomers`]): before a
/// blocking command. Clients that connect and send a blocking command at
/// once, as Redis's tests' deferring clients do, are accepted in the order
/// they connected, but each event loop reads its own: the one accepted
/// later could run first, take the data, and leave the earlier one blocked
/// for good. The earlier one now runs first, as in Redis's one loop,
/// where it blocks in its place in the key's queue (by arrival,
/// `crate::blocking`) or takes the data itself. Waiting only for older
/// connections keeps two newcomers from waiting for each other; those
/// that have run a request are left to the key's queue, and the check
/// costs a command a lock of an almost always empty list.
///
/// [`ClientRegistry::newcomers`]: crate::client::ClientRegistry::newcomers
pub fn newcomers(shared: &Shared, me: u64) {
    let older = shared.clients.newcomers().into_iter().filter(|h| h.id < me);
    wait_for(
        shared,
        me,
        owing(older.collect(), me),
        Instant::now() + MAX_WAIT,
    );
}

/// [`others`] for the subscribers a PUBLISH is about to reach (at most
/// [`MAX_RECEIVERS`] of them; none are waited for past that).
pub fn receivers(shared: &Shared, me: u64, subscribers: Vec<Arc<ClientHandle>>) {
    if subscribers.is_empty() || subscribers.len() > MAX_RECEIVERS {
        return;
    }
    let mut pending = owing(subscribers, me);
    for _ in 0..QUICK_LOOKS {
        if pending.is_empty() {
            return;
        }
        std::thread::yield_now();
        pending.retain(|(h, target)| still_owes(shared, h, me, *target));
    }
    wait_for(shared, me, pending, Instant::now() + MAX_WAIT);
}

/// [`receivers`] for the clients watching `keys` in `db`, before a write
/// to them: a WATCH ... EXEC that arrived before the write runs before it,
/// as in Redis, instead of being aborted by it.
pub fn watchers<'k>(shared: &Shared, me: u64, db: usize, keys: impl Iterator<Item = &'k Bytes>) {
    let ids = shared.watches.watchers_of(db, keys, me, MAX_RECEIVERS);
    let handles = ids
        .iter()
        .filter_map(|&id| shared.clients.get(id))
        .collect();
    receivers(shared, me, handles);
}

/// Those of `handles` with something received but not run yet, and how
/// many bytes in all each must have read when it has.
fn owing(handles: Vec<Arc<ClientHandle>>, me: u64) -> Vec<(Arc<ClientHandle>, u64)> {
    handles
        .into_iter()
        .filter(|h| counted(h, me))
        .filter_map(|h| match look(&h, None) {
            Seen::Settled => None,
            Seen::Owes(target) => Some((h, target)),
        })
        .collect()
}

fn still_owes(shared: &Shared, h: &ClientHandle, me: u64, target: u64) -> bool {
    // Gone from the registry (closed) counts as settled.
    shared.clients.get(h.id).is_some()
        && counted(h, me)
        && matches!(look(h, Some(target)), Seen::Owes(_))
}

/// Waits until each of `pending` has run what it owes, or `deadline`.
fn wait_for(
    shared: &Shared,
    me: u64,
    mut pending: Vec<(Arc<ClientHandle>, u64)>,
    deadline: Instant,
) {
    if !pending.is_empty() {
        block(shared, deadline, || {
            pending.retain(|(h, target)| still_owes(shared, h, me, *target));
            pending.is_empty()
        });
    }
}

/// Looks every [`POLL`] until `done` says so or `deadline` passes.
fn block(shared: &Shared, deadline: Instant, mut done: impl FnMut() -> bool) {
    // Writes this turn made before the command, whose fsync the turn was
    // to make itself once done (`Wal::defer_syncs`), must not wait for it:
    // other connections' replies may wait on the same batch.
    shared.store.wal.release_deferred();
    crate::checkpointer::blocking(|| {
        while Instant::now() < deadline {
            std::thread::sleep(POLL);
            if done() {
                return;
            }
        }
    });
}

/// An accept loop's listening socket and its turns: busy from the moment
/// it looks for a connection until the socket has none left for it, each
/// one taken registered (`Clients::register`) before it looks again.
pub struct Door {
    activity: Activity,
    fd: libc::c_int,
}

impl Door {
    /// About to accept; any connection it gets is registered before
    /// [`Door::waiting`].
    #[inline]
    pub fn accepting(&self) {
        self.activity.busy();
    }

    /// The socket had no connection left to accept.
    #[inline]
    pub fn waiting(&self) {
        self.activity.idle();
    }

    /// None if it has taken in everything queued; else the turn count it
    /// must reach, which it does only after finding its queue empty.
    fn owed(&self) -> Option<u64> {
        let before = self.activity.turns.load(Ordering::Acquire);
        let queued = has_queued(self.fd);
        let after = self.activity.turns.load(Ordering::Acquire);
        match (before == after, before & 1 == 0, queued) {
            (true, true, false) => None,
            (_, true, _) => Some(before + 2),
            (_, false, _) => Some(before + 1),
        }
    }

    fn owes(&self, target: u64) -> bool {
        self.activity.turns.load(Ordering::Acquire) < target
    }
}

/// Whether the listening socket `fd` has a connection waiting in its queue.
fn has_queued(fd: libc::c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll reads and writes the one pollfd passed, and returns at
    // once with a timeout of 0; a closed descriptor shows as POLLNVAL.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & libc::POLLIN != 0
}

/// The accept loops serving now.
#[derive(Default)]
pub struct Doors(parking_lot::Mutex<Vec<Arc<Door>>>);

impl Doors {
    /// An accept loop on `fd` starts; it is counted until the guard drops.
    pub fn open(&self, fd: libc::c_int) -> Opened<'_> {
        let door = Arc::new(Door {
            activity: Activity::default(),
            fd,
        });
        self.0.lock().push(door.clone());
        Opened { doors: self, door }
    }

    fn owing(&self) -> Vec<(Arc<Door>, u64)> {
        let doors = self.0.lock().clone();
        doors
            .into_iter()
            .filter_map(|d| d.owed().map(|t| (d, t)))
            .collect()
    }
}

/// An accept loop's place in [`Doors`], left when it ends.
pub struct Opened<'a> {
    doors: &'a Doors,
    pub door: Arc<Door>,
}

impl Drop for Opened<'_> {
    fn drop(&mut self) {
        self.doors.0.lock().retain(|d| !Arc::ptr_eq(d, &self.door));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_odd_while_busy_and_count_once() {
        let a = Activity::default();
        a.busy();
        a.busy();
        assert_eq!(a.turns.load(Ordering::Relaxed), 1);
        a.idle();
        a.idle();
        assert_eq!(a.turns.load(Ordering::Relaxed), 2);
        a.took(10);
        a.took(5);
        assert_eq!(a.bytes_in.load(Ordering::Relaxed), 15);
    }

    #[test]
    fn a_door_owes_the_connections_queued_until_it_finds_none() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let doors = Doors::default();
        let opened = doors.open(l.as_raw_fd());
        assert!(doors.owing().is_empty());
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let t = Instant::now();
        while !has_queued(l.as_raw_fd()) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let owing = doors.owing();
        assert_eq!(owing.len(), 1);
        let target = owing[0].1;
        opened.door.accepting();
        let _s = l.accept().unwrap();
        assert!(
            opened.door.owes(target),
            "taken, not yet found the queue empty"
        );
        opened.door.waiting();
        assert!(!opened.door.owes(target));
        assert!(doors.owing().is_empty());
        drop(opened);
        assert!(doors.0.lock().is_empty());
    }

    #[test]
    fn a_closed_descriptor_has_nothing_unread() {
        assert_eq!(unread_bytes(-1), 0);
        assert_eq!(unread_bytes(i64::MAX), 0);
    }

    #[test]
    fn unread_bytes_counts_what_a_socket_holds() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(b"PING\r\n").unwrap();
        let fd = s.as_raw_fd() as i64;
        let t = Instant::now();
        while unread_bytes(fd) < 6 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(unread_bytes(fd), 6);
    }
}
