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
//! Before a write or a blocking command, [`fresh`] waits so for the
//! connections that have just connected, for the requests that arrived
//! before its own.
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
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
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
    /// Turns it has ended after reading something, counted up to
    /// `FRESH_TURNS + 1`; `turns` also counts the wake-ups that read
    /// nothing (a `full` reply released by the log).
    ran: AtomicU8,
    /// `bytes_in` when the last of those turns ended.
    bytes_at_ran: AtomicU64,
    /// When the bytes it read last for a turn to run arrived
    /// (`crate::arrival`); 0 before its first read.
    arrival: AtomicU64,
    /// From a read for a turn until the turn's first command starts: what
    /// it took may have arrived at any time until `arrival` says, and may
    /// be a blocking command until `blocking` says.
    reading: AtomicBool,
    /// The turn runs a blocking command (BLPOP, XREADGROUP, ...).
    blocking: AtomicBool,
    /// In a wait that does not follow arrival order ([`others`],
    /// [`receivers`], [`watchers`]): every wait passes over it (see
    /// `counted`), or two could wait for each other.
    settling: AtomicBool,
}

/// Turns a connection may have run and still be fresh for [`fresh`]: a
/// test's deferring client has run a SELECT or a PING, perhaps a CLIENT
/// ID, before the request whose order matters; a benchmark's client has
/// run thousands within its first second.
const FRESH_TURNS: u8 = 3;

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
            let ran = self.ran.load(Ordering::Relaxed);
            if ran <= FRESH_TURNS {
                let read = self.bytes_in.load(Ordering::Relaxed);
                if read > self.bytes_at_ran.load(Ordering::Relaxed) {
                    self.bytes_at_ran.store(read, Ordering::Relaxed);
                    self.ran.store(ran + 1, Ordering::Release);
                }
            }
            self.blocking.store(false, Ordering::Relaxed);
            self.reading.store(false, Ordering::Release);
            self.turns.store(t + 1, Ordering::Release);
        }
    }

    /// Through at most [`FRESH_TURNS`] turns that ran what it read.
    #[inline]
    pub fn is_fresh(&self) -> bool {
        self.ran.load(Ordering::Acquire) <= FRESH_TURNS
    }

    /// About to read requests for a turn to run; only a fresh
    /// connection's reads are followed ([`fresh`]).
    #[inline]
    pub fn reading(&self) {
        if self.is_fresh() {
            self.reading.store(true, Ordering::Release);
        }
    }

    /// The read is over; it took bytes that arrived at `arrived`, if any
    /// (if not, the turn ends, see [`Activity::idle`]).
    #[inline]
    pub fn read(&self, arrived: Option<u64>) {
        if let Some(at) = arrived {
            self.arrival.store(at, Ordering::Release);
        }
    }

    /// A command starts: a blocking one if `blocking`. Only a fresh
    /// connection's are told apart ([`fresh`]).
    #[inline]
    pub fn runs(&self, blocking: bool) {
        if self.reading.load(Ordering::Relaxed) {
            if blocking {
                self.blocking.store(true, Ordering::Release);
            }
            self.reading.store(false, Ordering::Release);
        }
    }

    /// Counts `n` bytes just read.
    #[inline]
    pub fn took(&self, n: usize) {
        let b = self.bytes_in.load(Ordering::Relaxed);
        self.bytes_in.store(b + n as u64, Ordering::Release);
    }

    fn is_settling(&self) -> bool {
        self.settling.load(Ordering::SeqCst)
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
/// loop, other than `me`. A replication link runs its own loop. A
/// connection in a wait of its own is passed over: two clients that WATCH
/// a key and EXEC writes to it at once would otherwise each wait for the
/// other to finish its turn, both until [`MAX_WAIT`] (go-redis's optimistic
/// transactions ran at ten a second so). Of two such commands Redis runs
/// one first, whichever; here too, whichever takes the key's lock first.
fn counted(h: &ClientHandle, me: u64) -> bool {
    h.id != me
        && !h.is_killed()
        && !h.replication.load(Ordering::Relaxed)
        && !h.master_link.load(Ordering::Relaxed)
        && !h.activity.is_settling()
}

/// Waits (up to [`MAX_WAIT`]) until every connection but `me` has run
/// what it had received when this was called, those still queued to be
/// accepted included. Blocks the calling thread; the runtime's other
/// tasks move to another worker meanwhile.
pub fn others(shared: &Shared, me: u64) {
    let deadline = Instant::now() + MAX_WAIT;
    let mut doors = shared.doors.owing();
    if !doors.is_empty() {
        block(shared, me, deadline, Kind::Unordered, || {
            doors.retain(|(d, target)| d.owes(*target));
            doors.is_empty()
        });
    }
    let pending = owing(shared.clients.all(), me);
    wait_for(shared, me, pending, deadline);
}

/// Before a write or a blocking command that arrived at `arrival`
/// (`crate::arrival`): waits for the fresh connections (accepted in the
/// last [`FRESH_FOR`] and through at most [`FRESH_TURNS`] turns; none if
/// more than [`MAX_RECEIVERS`], a burst of connections) holding a request
/// that arrived before it, until they have run it.
///
/// Redis's tests connect a deferring client and send it a blocking
/// command, then at once write on another connection: two clients send
/// BRPOPLPUSH and a third pushes, and the first sent must be served; or
/// one sends a blocking XREADGROUP and another deletes the stream, and the
/// read must block and then be told its key is gone. Redis's one loop
/// runs them in the order they arrived. Here the other event loop may not
/// have read the earlier request yet: the push could run first and the
/// later BRPOPLPUSH take the element, leaving the first blocked for good,
/// or the delete run first and the read find no group.
///
/// A request still in a socket carries the time the kernel received it,
/// and one being run the time its connection published when it read it
/// ([`Activity::took`]): a request that arrived after this one is not
/// waited for, so two such waits never wait for each other (one without
/// a time, on a Unix socket, is not waited for either). A connection past
/// its first few turns is left alone, so a benchmark's clients cost a
/// write nothing past their first requests, and a server without new
/// connections one atomic load.
///
/// [`FRESH_FOR`]: crate::client::FRESH_FOR
pub fn fresh(shared: &Shared, me: u64, arrival: u64) {
    let mut pending = shared.clients.fresh(me, MAX_RECEIVERS);
    let owes = |h: &ClientHandle| {
        shared.clients.get(h.id).is_some() && counted(h, me) && runs_earlier(h, arrival)
    };
    pending.retain(|h| owes(h));
    for _ in 0..QUICK_LOOKS {
        if pending.is_empty() {
            return;
        }
        std::thread::yield_now();
        pending.retain(|h| owes(h));
    }
    block(
        shared,
        me,
        Instant::now() + MAX_WAIT,
        Kind::ByArrival,
        || {
            pending.retain(|h| owes(h));
            pending.is_empty()
        },
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
    // Every write comes here, and nearly always nobody watches anything.
    if !shared.watches.is_active() {
        return;
    }
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

/// Whether `h` has yet to run a blocking command that arrived before
/// `arrival`: one in its socket, not yet read, or one it is running, or
/// maybe one it has just read. Other commands run in whatever order: a
/// SET on one connection need not wait for another's.
fn runs_earlier(h: &ClientHandle, arrival: u64) -> bool {
    let a = &h.activity;
    let Ok(fd) = libc::c_int::try_from(h.fd) else {
        return false;
    };
    // The socket first: bytes gone from it were taken by a read that
    // marked itself before, and published their time before unmarking.
    let mut head = [0u8; 64];
    if let Some((n, at)) = crate::arrival::peek_stamped(fd, &mut head) {
        if at < arrival && may_block(&head[..n]) {
            return true;
        }
    }
    let last = a.arrival.load(Ordering::Acquire);
    let reading = a.reading.load(Ordering::Acquire);
    let blocking = a.blocking.load(Ordering::Acquire);
    let busy = a.turns.load(Ordering::Acquire) & 1 == 1;
    last < arrival && (reading || (busy && blocking))
}

/// Whether the request starting with `head` may be a blocking command:
/// unless its name is there, and names a command that never blocks.
fn may_block(head: &[u8]) -> bool {
    durakv_protocol::request::peek_first_arg(head).is_none_or(|name| {
        crate::command::lookup(name)
            .is_some_and(|spec| spec.flags & crate::command::flags::BLOCKING != 0)
    })
}

/// Which wait [`block`] is in.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// A listing, or a delivery: it waits for every connection it counts,
    /// to its deadline, and marks its own as settling meanwhile.
    Unordered,
    /// [`fresh`]: it waits only for requests that arrived before its own,
    /// so two such waits never wait for each other, and it passes over
    /// connections marked as settling, which may be waiting for it.
    ByArrival,
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
        block(shared, me, deadline, Kind::Unordered, || {
            pending.retain(|(h, target)| still_owes(shared, h, me, *target));
            pending.is_empty()
        });
    }
}

/// Looks every [`POLL`] until `done` says so or `deadline` passes, `me`
/// marked as settling meanwhile in a wait of `kind` [`Kind::Unordered`].
fn block(shared: &Shared, me: u64, deadline: Instant, kind: Kind, mut done: impl FnMut() -> bool) {
    // Writes this turn made before the command, whose fsync the turn was
    // to make itself once done (`Wal::defer_syncs`), must not wait for it:
    // other connections' replies may wait on the same batch.
    shared.store.wal.release_deferred();
    let me = match kind {
        Kind::Unordered => shared.clients.get(me),
        Kind::ByArrival => None,
    };
    let _mark = me.as_deref().map(Settling::mark);
    crate::checkpointer::blocking(|| {
        while Instant::now() < deadline {
            std::thread::sleep(POLL);
            if done() {
                return;
            }
        }
    });
}

/// A connection's [`Activity::settling`] mark, cleared when dropped.
struct Settling<'a>(&'a Activity);

impl<'a> Settling<'a> {
    fn mark(h: &'a ClientHandle) -> Settling<'a> {
        // Sequentially consistent, as the loads in the waits that pass
        // over it: a connection marked before it looks at another is seen
        // marked by that one's next look.
        h.activity.settling.store(true, Ordering::SeqCst);
        Settling(&h.activity)
    }
}

impl Drop for Settling<'_> {
    fn drop(&mut self) {
        self.0.settling.store(false, Ordering::SeqCst);
    }
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
    fn a_request_head_tells_whether_it_may_block() {
        assert!(may_block(b"*5\r\n$10\r\nBRPOPLPUSH\r\n$5\r\nbl"));
        assert!(may_block(b"*3\r\n$5\r\nblpop\r\n"));
        assert!(!may_block(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n"));
        assert!(!may_block(b"PING\r\n"));
        assert!(may_block(b"BLPOP k 0\r\n"));
        // Cut before the name ends, or not RESP (TLS): it may.
        assert!(may_block(b"*3\r\n$5\r\nBLP"));
        assert!(may_block(b"*3\r\n$5\r"));
        assert!(may_block(b"SE"));
        assert!(may_block(&[0x16, 0x03, 0x01]));
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
