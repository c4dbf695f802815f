//! Per-connection state, and the registry of connected clients that CLIENT
//! LIST / KILL / INFO read.

use bytes::Bytes;
use durakv_engine::Durability;
use durakv_protocol::Protocol;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

/// One end of a client's connection, as Redis names it: `ip:port`, or for
/// a Unix socket its path and port 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    Unix(Arc<str>),
}

impl Peer {
    /// Whether this end is on this machine: a loopback address or a Unix
    /// socket (what `local` allows for DEBUG and MODULE).
    pub fn is_local(&self) -> bool {
        match self {
            Peer::Tcp(a) => a.ip().is_loopback(),
            Peer::Unix(_) => true,
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Tcp(a) => a.fmt(f),
            Peer::Unix(path) => write!(f, "{path}:0"),
        }
    }
}

/// What other tasks may see or change about a connection.
pub struct ClientHandle {
    pub id: u64,
    pub addr: Peer,
    pub laddr: Peer,
    /// The socket's file descriptor, as CLIENT LIST reports it.
    pub fd: i64,
    pub created: Instant,
    /// Set by CLIENT KILL or shutdown; the connection closes at its next turn.
    pub killed: AtomicBool,
    /// Wakes the connection's loop: it was killed, or a message arrived in
    /// its mailbox.
    pub wake: crate::signal::Signal,
    /// Published messages waiting to be written to this connection.
    pub mailbox: crate::pubsub::Mailbox,
    /// Snapshot of fields CLIENT LIST reports, refreshed by the connection.
    pub info: Mutex<ClientInfo>,
    /// Set when a key this client WATCHes is modified.
    pub watch_dirty: Arc<AtomicBool>,
    pub last_interaction_ms: AtomicU64,
    /// In a blocking command's wait (CLIENT LIST flag `b`).
    pub blocked: AtomicBool,
    /// In MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: AtomicBool,
    /// A replication link: a replica's stream, or this replica's primary
    /// (CLIENT KILL TYPE replica/master).
    pub replication: AtomicBool,
    /// Of those, this replica's link to its primary (TYPE master).
    pub master_link: AtomicBool,
    /// Bytes of input this connection holds: a request still arriving, or
    /// what it read while its replies wait for the socket.
    pub input_bytes: AtomicUsize,
    /// Bytes of replies it has not written yet, those held for an fsync
    /// included.
    pub output_bytes: AtomicUsize,
    /// Replies it holds until their writes are durable (CLIENT LIST's
    /// `oll`), kept with `output_bytes` so a listing never shows a reply
    /// released since.
    pub held_replies: AtomicUsize,
    /// Bytes of its state that grows with use ([`ClientState::state_bytes`]):
    /// queued MULTI commands, watched keys, subscriptions, tracking
    /// prefixes, its name.
    pub state_bytes: AtomicUsize,
    /// Bytes of a request still arriving, as Redis's `qbuf` counts them
    /// (`durakv_protocol::request::pending_query_bytes`), for CLIENT LIST.
    pub query_pending: AtomicUsize,
    /// Its turns and what it read, for a listing that waits for them
    /// (`crate::settle`).
    pub activity: crate::settle::Activity,
    /// Replies it left for the flusher to write (`crate::parked`).
    pub parked: crate::parked::Slot,
    /// CLIENT NO-EVICT on: `maxmemory-clients` passes over it.
    pub no_evict: AtomicBool,
    /// What this client adds to its registry's running total: what
    /// [`ClientHandle::memory_bytes`] said at the last
    /// [`ClientHandle::recount`], or 0 once killed.
    counted: AtomicUsize,
    /// The registry's running total of all clients' memory
    /// ([`ClientRegistry::memory_bytes`]).
    total: Arc<AtomicUsize>,
}

/// What a connection's own state takes besides its buffers (its task, its
/// `ClientState`, this handle), as CLIENT LIST's `tot-mem` and
/// `maxmemory-clients` count it.
pub const CLIENT_STATE_BYTES: usize = 2048;

impl ClientHandle {
    /// The memory this client holds, as `maxmemory-clients` and CLIENT
    /// LIST's `tot-mem` count it: its input and output buffers, the
    /// messages queued for it, and its fixed state.
    pub fn memory_bytes(&self) -> usize {
        CLIENT_STATE_BYTES
            + self.input_bytes.load(Ordering::Relaxed)
            + self.output_bytes.load(Ordering::Relaxed)
            + self.state_bytes.load(Ordering::Relaxed)
            + self.mailbox.queued_bytes()
    }

    /// [`ClientHandle::memory_bytes`] as `maxmemory-clients` and INFO count
    /// it: nothing once the client is killed, as its memory is about to be
    /// freed (Redis frees it at once; its task may take a moment to close).
    pub fn counted_memory_bytes(&self) -> usize {
        if self.is_killed() {
            0
        } else {
            self.memory_bytes()
        }
    }

    /// Brings the registry's running total up to date with this client's
    /// memory, after any of its parts changed; a killed client counts
    /// nothing, as its memory is about to be freed. Each swap returns what
    /// the client counted before it, so racing recounts leave the total
    /// equal to the sum of what the clients count.
    pub fn recount(&self) {
        let now = self.counted_memory_bytes();
        // Most turns change nothing: a load, not a write to a line that
        // publishers to this client share.
        if self.counted.load(Ordering::Relaxed) == now {
            return;
        }
        let before = self.counted.swap(now, Ordering::Relaxed);
        if now > before {
            self.total.fetch_add(now - before, Ordering::Relaxed);
        } else if before > now {
            self.total.fetch_sub(before - now, Ordering::Relaxed);
        }
    }

    /// Sets one part of this client's memory (`input_bytes`,
    /// `output_bytes` or `state_bytes`), storing only a change; true if it
    /// grew. [`ClientHandle::recount`] brings the total up to date.
    pub fn set_part(part: &AtomicUsize, bytes: usize) -> bool {
        let before = part.load(Ordering::Relaxed);
        if before != bytes {
            part.store(bytes, Ordering::Relaxed);
        }
        bytes > before
    }
}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        self.total
            .fetch_sub(*self.counted.get_mut(), Ordering::Relaxed);
    }
}

#[derive(Clone, Debug, Default)]
pub struct ClientInfo {
    pub name: Option<Bytes>,
    pub db: usize,
    pub last_cmd: String,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub resp: i64,
    pub multi: i64,
    /// What the queued MULTI commands take (CLIENT LIST's `multi-mem`).
    pub multi_mem: usize,
    pub watch: usize,
    pub durability: Option<Durability>,
    pub no_touch: bool,
    pub user: String,
    pub qbuf: usize,
}

impl ClientHandle {
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.recount();
        self.wake.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

/// What one entry of a connection's growing state (a queued command, a
/// watched key, a subscription, a tracking prefix) takes besides its bytes:
/// its slot in the connection's collection and in the server-wide one.
pub const ENTRY_OVERHEAD_BYTES: usize = 48;

/// A queued MULTI transaction.
#[derive(Default)]
pub struct MultiState {
    pub queued: Vec<Vec<Bytes>>,
    /// What the queued commands take: their arguments, each a `Bytes`.
    pub bytes: usize,
    /// A command failed to queue: EXEC must answer EXECABORT.
    pub failed: bool,
}

/// A WATCHed key and the expiry it had when watched (0 = none).
#[derive(Clone, Debug)]
pub struct Watched {
    pub db: usize,
    pub key: Bytes,
    pub expire_at_ms: u64,
}

/// `CLIENT REPLY`: whether replies are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    SkipNext,
    /// Set while executing the command whose reply is skipped.
    Skipping,
}

/// State owned by the connection task itself.
pub struct ClientState {
    pub handle: Arc<ClientHandle>,
    pub db: usize,
    pub protocol: Protocol,
    pub authenticated: bool,
    /// The ACL user this connection runs as, refreshed before each command
    /// when the ACL changed (`acl::check::refresh`).
    pub user: Arc<crate::acl::User>,
    /// The ACL generation `user` was read at.
    pub acl_generation: u64,
    pub name: Option<Bytes>,
    pub multi: Option<MultiState>,
    pub watched: Vec<Watched>,
    /// What `watched` takes (`state_bytes`).
    pub watched_bytes: usize,
    /// `CLIENT DURABILITY`; None means the database's level.
    pub durability: Option<Durability>,
    /// `CLIENT NO-TOUCH`: this client's reads leave LRU/LFU alone.
    pub no_touch: bool,
    /// Close the connection after the current reply (QUIT, protocol error).
    pub close_after_reply: bool,
    /// Highest LSN this connection's writes produced (WAITAOF waits for it).
    /// The last write's record as a dependency (`durakv_engine::dep`):
    /// the next write of this connection is never recovered without it.
    pub last_write_dep: u64,
    pub last_write_lsn: u64,
    /// The replication stream's end after this connection's last write
    /// (WAIT and WAITAOF wait for replicas to acknowledge it).
    pub last_write_offset: u64,
    /// When the request being run arrived, in the server-wide order of
    /// reads (`crate::arrival`): a blocking command queues by it.
    pub arrival: u64,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub last_cmd: String,
    pub reply_mode: ReplyMode,
    /// Drop the reply of the command being executed (SHUTDOWN).
    pub suppress_this_reply: bool,
    /// Channels, patterns and shard channels this connection listens to.
    pub subscriptions: crate::pubsub::Subscriptions,
    /// Keyspace events (and messages behind them) of the command being
    /// executed, published once it commits.
    pub notifications: crate::notify::Pending,
    /// MONITOR lines of the request running.
    pub monitor_lines: Vec<Bytes>,
    /// Lines of requests that ran, each with what its reply waits for,
    /// sent once that reply is written (`crate::monitor::send_ready`).
    pub monitor_pending: VecDeque<(u64, Vec<Bytes>)>,
    /// The command being executed may block: it was sent by the client
    /// itself, not queued in MULTI or called from a script.
    pub may_block: bool,
    /// A command of this client served blocked clients: its next write
    /// to the socket lets theirs go first (`dispatch::finish`).
    pub served_blocked: bool,
    /// The command being executed was called by a script (`redis.call`).
    pub in_script: bool,
    /// The command being executed was queued in MULTI and runs in EXEC.
    pub in_exec: bool,
    /// Bytes of input from the current request on, when it was parsed.
    pub query_bytes: usize,
    /// Since when the replies not yet written have been over the soft
    /// `client-output-buffer-limit` (`connection::output_within_limit`).
    pub output_over_soft_since: Option<std::time::Instant>,
    /// How the evictions run just before the current command ended
    /// (`connection::process`); None: none ran, `dispatch` runs them.
    pub eviction: Option<crate::evict::Outcome>,
    /// The current command's error reply was counted in the error
    /// statistics already (a script returning a call's error).
    pub error_counted: bool,
    /// Waiting in a blocking command (BLPOP...); nothing else runs meanwhile.
    pub blocked: Option<crate::blocking::Blocked>,
    /// CLIENT TRACKING settings, and what the current command wrote.
    pub tracking: crate::tracking::Local,
    /// The replication link's client on a replica: exempt from READONLY.
    pub is_master: bool,
    /// On the replication link's client: the primary's replication ID and
    /// the stream offset the current command ends at. Logged with the
    /// command's writes (`Mutation::ReplOrigin`) so a restarted replica
    /// knows where its log left the stream.
    pub repl_origin: Option<(bytes::Bytes, u64)>,
    /// REPLCONF listening-port of a replica connecting.
    pub repl_listening_port: u16,
    /// REPLCONF ip-address (`replica-announce-ip`) of a replica connecting.
    pub repl_announced_ip: Option<String>,
    /// REPLCONF capa eof: the replica takes a full sync's RDB of unknown
    /// length (ended by a mark), so it can be sent while it is produced.
    pub repl_capa_eof: bool,
    /// `REPLCONF rdb-only 1` (redis-cli --rdb): the full sync's file, then
    /// the connection closes instead of streaming commands.
    pub repl_rdb_only: bool,
    /// `REPLCONF rdb-filter-only functions` (redis-cli --functions-rdb):
    /// the file holds the function libraries and no keys.
    pub repl_functions_only: bool,
    /// PSYNC/SYNC was accepted: the connection becomes a replica's stream.
    pub psync: Option<crate::repl::primary::PsyncRequest>,
    /// A request CLIENT PAUSE holds: it runs, before anything after it,
    /// once the pause ends.
    pub paused_request: Option<Vec<Bytes>>,
}

impl MultiState {
    pub fn queue(&mut self, args: &[Bytes]) {
        self.bytes += ENTRY_OVERHEAD_BYTES
            + args
                .iter()
                .map(|a| a.len() + std::mem::size_of::<Bytes>())
                .sum::<usize>();
        self.queued.push(args.to_vec());
    }
}

impl ClientState {
    /// What this connection's state takes beyond its buffers, as
    /// `maxmemory-clients` and CLIENT LIST's `tot-mem` count it: Redis
    /// counts the same parts, so that a client cannot hold unbounded
    /// memory through WATCH, MULTI, SUBSCRIBE or tracking prefixes.
    pub fn state_bytes(&self) -> usize {
        self.multi_bytes()
            + self.watched_bytes
            + self.subscriptions.memory_bytes()
            + self.tracking.prefix_bytes
            + self.name.as_ref().map_or(0, Bytes::len)
    }

    /// What the queued MULTI commands take (CLIENT LIST's `multi-mem`).
    pub fn multi_bytes(&self) -> usize {
        self.multi.as_ref().map_or(0, |m| m.bytes)
    }

    pub fn new(
        handle: Arc<ClientHandle>,
        authenticated: bool,
        user: Arc<crate::acl::User>,
    ) -> ClientState {
        ClientState {
            handle,
            db: 0,
            protocol: Protocol::Resp2,
            authenticated,
            user,
            acl_generation: 0,
            name: None,
            multi: None,
            watched: Vec::new(),
            watched_bytes: 0,
            durability: None,
            no_touch: false,
            close_after_reply: false,
            last_write_lsn: 0,
            last_write_dep: 0,
            last_write_offset: 0,
            arrival: 0,
            lib_name: None,
            lib_ver: None,
            last_cmd: String::new(),
            reply_mode: ReplyMode::On,
            suppress_this_reply: false,
            subscriptions: Default::default(),
            notifications: Default::default(),
            monitor_lines: Vec::new(),
            monitor_pending: Default::default(),
            may_block: false,
            served_blocked: false,
            in_script: false,
            in_exec: false,
            query_bytes: 0,
            output_over_soft_since: None,
            eviction: None,
            error_counted: false,
            blocked: None,
            tracking: Default::default(),
            is_master: false,
            repl_origin: None,
            repl_listening_port: 0,
            repl_announced_ip: None,
            repl_capa_eof: false,
            repl_rdb_only: false,
            repl_functions_only: false,
            psync: None,
            paused_request: None,
        }
    }

    pub fn id(&self) -> u64 {
        self.handle.id
    }

    /// A cheap fingerprint of the fields other clients must see at once
    /// (CLIENT LIST/KILL by name, db, level); the rest may lag a little.
    pub fn info_signature(&self) -> [usize; 9] {
        let ptr = |b: &Option<Bytes>| {
            b.as_ref()
                .map(|b| b.as_ptr() as usize ^ b.len())
                .unwrap_or(0)
        };
        [
            ptr(&self.name),
            self.db,
            self.durability
                .map(|d| d.strictness() as usize + 1)
                .unwrap_or(0)
                | (self.no_touch as usize) << 8,
            self.protocol.version() as usize,
            self.multi.as_ref().map(|m| m.queued.len() + 1).unwrap_or(0),
            self.watched.len(),
            ptr(&self.lib_name) ^ ptr(&self.lib_ver),
            Arc::as_ptr(&self.user) as usize,
            // The last command's name: a connection that goes quiet right
            // after a SUBSCRIBE must not stay listed with the command
            // before it (tools find connections by `cmd=`).
            self.last_cmd.bytes().fold(self.last_cmd.len(), |h, b| {
                h.rotate_left(5) ^ usize::from(b)
            }),
        ]
    }

    /// Copies the fields CLIENT LIST shows into the shared handle.
    pub fn publish_info(&self) {
        let mut i = self.handle.info.lock();
        i.name = self.name.clone();
        i.db = self.db;
        i.last_cmd.clone_from(&self.last_cmd);
        i.lib_name = self.lib_name.clone();
        i.lib_ver = self.lib_ver.clone();
        i.resp = self.protocol.version();
        i.multi = self
            .multi
            .as_ref()
            .map(|m| m.queued.len() as i64)
            .unwrap_or(-1);
        i.multi_mem = self.multi_bytes();
        i.watch = self.watched.len();
        i.durability = self.durability;
        i.no_touch = self.no_touch;
        i.user.clone_from(&self.user.name);
    }
}

/// How long a connection counts as fresh at most
/// (`crate::settle::fresh`). One that connects and sends at once has run
/// its request within microseconds; one that connected and sent nothing
/// since (a pool's spare) must not cost every write a look for as long as
/// it stays open.
pub const FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(1);
/// Fresh connections that a command looks through at most: more is a
/// burst, not an exchange between a few clients whose order matters.
const RECENT_LOOKED: usize = 256;

/// Drops from the front of `recent` those accepted [`FRESH_FOR`] before
/// `now` or closed.
fn prune(recent: &mut VecDeque<(Instant, Weak<ClientHandle>)>, now: Instant) {
    while let Some((at, w)) = recent.front() {
        if now.saturating_duration_since(*at) < FRESH_FOR && w.strong_count() > 0 {
            break;
        }
        recent.pop_front();
    }
}

#[derive(Default)]
pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<HashMap<u64, Arc<ClientHandle>>>,
    /// Connections accepted in the last [`FRESH_FOR`], oldest first, for
    /// [`crate::settle::fresh`]; pruned from the front at each
    /// registration, and of those closed or past their first turns at each
    /// look.
    recent: Mutex<VecDeque<(Instant, Weak<ClientHandle>)>>,
    /// `recent` may hold one: a write on a server without new
    /// connections looks no further.
    any_recent: AtomicBool,
    /// What all clients not killed hold ([`ClientHandle::recount`]): read
    /// after every read and turn, so `maxmemory-clients` is checked as
    /// often as Redis checks it without a walk over the clients.
    memory: Arc<AtomicUsize>,
}

impl ClientRegistry {
    pub fn register(&self, addr: Peer, laddr: Peer, fd: i64) -> Arc<ClientHandle> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let h = Arc::new(ClientHandle {
            id,
            addr,
            laddr,
            fd,
            created: Instant::now(),
            killed: AtomicBool::new(false),
            replication: AtomicBool::new(false),
            master_link: AtomicBool::new(false),
            wake: crate::signal::Signal::new(),
            mailbox: Default::default(),
            info: Mutex::new(ClientInfo {
                resp: 2,
                multi: -1,
                user: "default".into(),
                ..Default::default()
            }),
            watch_dirty: Arc::new(AtomicBool::new(false)),
            last_interaction_ms: AtomicU64::new(crate::util::now_ms()),
            blocked: AtomicBool::new(false),
            monitor: AtomicBool::new(false),
            input_bytes: AtomicUsize::new(0),
            output_bytes: AtomicUsize::new(0),
            held_replies: AtomicUsize::new(0),
            state_bytes: AtomicUsize::new(0),
            query_pending: AtomicUsize::new(0),
            activity: Default::default(),
            parked: Default::default(),
            no_evict: AtomicBool::new(false),
            counted: AtomicUsize::new(0),
            total: self.memory.clone(),
        });
        h.recount();
        self.clients.lock().insert(id, h.clone());
        let mut recent = self.recent.lock();
        prune(&mut recent, h.created);
        recent.push_back((h.created, Arc::downgrade(&h)));
        self.any_recent.store(true, Ordering::Release);
        drop(recent);
        h
    }

    /// Connections still open, accepted in the last [`FRESH_FOR`] and
    /// through at most a few turns (`crate::settle::Activity::is_fresh`),
    /// other than `me`; none if more than `most`, or if more than
    /// [`RECENT_LOOKED`] are to be looked at. Each closed or no longer
    /// fresh is dropped from `recent` once.
    pub fn fresh(&self, me: u64, most: usize) -> Vec<Arc<ClientHandle>> {
        if !self.any_recent.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut recent = self.recent.lock();
        prune(&mut recent, Instant::now());
        let mut picked = Vec::new();
        let (mut looked, mut i) = (0, 0);
        while i < recent.len() {
            let c = match recent[i].1.upgrade() {
                Some(c) if c.activity.is_fresh() => c,
                _ => {
                    recent.remove(i);
                    continue;
                }
            };
            looked += 1;
            if looked > RECENT_LOOKED {
                return Vec::new();
            }
            if c.id != me {
                if picked.len() == most {
                    return Vec::new();
                }
                picked.push(c);
            }
            i += 1;
        }
        if recent.is_empty() {
            self.any_recent.store(false, Ordering::Release);
        }
        picked
    }

    /// What all clients hold, as `maxmemory-clients` counts it.
    pub fn memory_bytes(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    pub fn unregister(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    /// Lists an unregistered client again (one whose last reply the socket
    /// did not take at once).
    pub fn reinstate(&self, h: &Arc<ClientHandle>) {
        self.clients.lock().insert(h.id, h.clone());
    }

    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All clients, ordered by id.
    pub fn all(&self) -> Vec<Arc<ClientHandle>> {
        let mut v: Vec<_> = self.clients.lock().values().cloned().collect();
        v.sort_by_key(|c| c.id);
        v
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientHandle>> {
        self.clients.lock().get(&id).cloned()
    }

    pub fn kill_all(&self) {
        for c in self.clients.lock().values() {
            c.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> Peer {
        Peer::Tcp("127.0.0.1:1".parse().unwrap())
    }

    #[test]
    fn the_running_total_is_what_live_clients_count() {
        let reg = ClientRegistry::default();
        let a = reg.register(peer(), peer(), -1);
        let b = reg.register(peer(), peer(), -1);
        assert_eq!(reg.memory_bytes(), 2 * CLIENT_STATE_BYTES);
        assert!(ClientHandle::set_part(&a.input_bytes, 1000));
        assert!(!ClientHandle::set_part(&a.input_bytes, 1000));
        ClientHandle::set_part(&b.state_bytes, 300);
        a.recount();
        b.recount();
        assert_eq!(reg.memory_bytes(), 2 * CLIENT_STATE_BYTES + 1300);
        // Shrinking counts too; a killed client counts nothing at once.
        assert!(!ClientHandle::set_part(&a.input_bytes, 10));
        a.recount();
        assert_eq!(reg.memory_bytes(), 2 * CLIENT_STATE_BYTES + 310);
        b.kill();
        assert_eq!(reg.memory_bytes(), CLIENT_STATE_BYTES + 10);
        // Gone with the last reference to it.
        reg.unregister(a.id);
        drop(a);
        reg.unregister(b.id);
        drop(b);
        assert_eq!(reg.memory_bytes(), 0);
    }
}
