//! Replication in Redis's protocol: this server as a primary (SYNC/PSYNC,
//! an RDB full sync, then every committed write as commands) and as a
//! replica (REPLICAOF: handshake, RDB load, command stream). See
//! `docs/replication.md`.
//!
//! - [`backlog`]: the stream's recent bytes and its offsets.
//! - [`effects`]: committed mutations as Redis commands.
//! - [`failover`]: FAILOVER, a planned switch of roles with a replica.
//! - [`rdb`]: the RDB file a full sync carries.
//! - [`stream_effects`]: stream changes as the commands Redis propagates.
//! - [`primary`]: serving a replica's connection.
//! - [`replica`]: the link to this server's primary.

pub mod backlog;
mod chunks;
pub mod effects;
pub mod failover;
pub mod primary;
pub mod rdb;
pub mod replica;
mod stream_effects;

use backlog::Backlog;
use bytes::Bytes;
use durakv_engine::mutation::Mutation;
use durakv_engine::replication::{ExpiredKey, ReplicationFeed};
use durakv_engine::value::EncodingLimits;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::watch;

/// Default `repl-backlog-size`.
pub const DEFAULT_BACKLOG_BYTES: usize = 1024 * 1024;

/// `repl-backlog-size` in bytes.
pub fn backlog_bytes(config: &crate::config::Config) -> usize {
    config
        .get("repl-backlog-size")
        .and_then(|v| crate::config::parse_memory(&v).ok())
        .map_or(DEFAULT_BACKLOG_BYTES, |b| b as usize)
}

/// `repl-timeout`: how long a link may stay silent, either way, before it
/// is dropped. Read at each use, so CONFIG SET applies at once.
pub fn link_timeout(config: &crate::config::Config) -> std::time::Duration {
    let secs = config
        .get("repl-timeout")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(60);
    std::time::Duration::from_secs(secs.max(1))
}

/// Applies `repl-backlog-size` and `client-output-buffer-limit replica`'s
/// hard limit to the stream (at start-up and after CONFIG SET; Redis
/// resizes its backlog on CONFIG SET too).
pub fn apply_config(shared: &crate::state::Shared) {
    let (backlog, replica_hard) = {
        let c = shared.config.read();
        (
            backlog_bytes(&c),
            c.client_output_buffer_limit[crate::config::REPLICA_CLASS].hard_bytes,
        )
    };
    let mut b = shared.repl.stream.backlog.lock();
    b.set_capacity(backlog);
    b.set_replica_limit(replica_hard);
}

/// The replication stream: its backlog, and a signal carrying its end
/// offset that replica senders wait on.
pub struct Stream {
    pub backlog: Mutex<Backlog>,
    /// Sent to only through `publish_end`, which keeps `end` equal to it.
    end_tx: watch::Sender<u64>,
    /// What `end_tx` holds, for readers that only want the number: every
    /// write reads it, and the watch's read lock is a write to a cache line
    /// that all event loops share; this is written only when the stream
    /// grows, which it does only while replicas are attached.
    end: AtomicU64,
    /// Where the last `REPLCONF GETACK *` went: every byte before this
    /// offset precedes it, so the acknowledgements it asks for cover them.
    getack_at: AtomicU64,
}

impl Stream {
    /// Appends bytes that are not a committed write (PING, GETACK).
    pub fn append_raw(&self, bytes: &[u8]) {
        self.append_raw_if(bytes, |_| true);
    }

    /// [`Stream::append_raw`], if `wanted` says so when it sees the
    /// backlog (under its lock).
    fn append_raw_if(&self, bytes: &[u8], wanted: impl FnOnce(&Backlog) -> bool) {
        let mut b = self.backlog.lock();
        if b.paused || !b.active || !wanted(&b) {
            return;
        }
        b.append(bytes);
        let end = b.end;
        drop(b);
        self.publish_end(end);
    }

    /// A receiver of the stream's end as it is published: what replica
    /// senders wait on.
    pub fn subscribe_end(&self) -> watch::Receiver<u64> {
        self.end_tx.subscribe()
    }

    /// Tells the senders (and [`Replication::end_offset`]) the stream's end,
    /// waking them only if it moved.
    fn publish_end(&self, end: u64) {
        if self.end.load(Ordering::Acquire) != end {
            self.end.store(end, Ordering::Release);
        }
        self.end_tx
            .send_if_modified(|e| std::mem::replace(e, end) != end);
    }

    /// Wakes the senders if the backlog grew past what they were told: a
    /// replica appends its primary's stream (which its own replicas get
    /// byte for byte) a command at a time and announces it once per read.
    pub fn announce(&self) {
        let end = self.backlog.lock().end;
        self.publish_end(end);
    }
}

/// The engine's feed: translates each commit and appends it to the stream.
pub struct Feed {
    stream: Arc<Stream>,
    limits: EncodingLimits,
}

impl ReplicationFeed for Feed {
    fn committed(&self, lsn: u64, _time_ms: u64, muts: &[Mutation], expired: &[ExpiredKey]) {
        let cmds = if expired.is_empty() {
            effects::translate(muts, &self.limits)
        } else {
            effects::translate_with_expired(muts, expired, &self.limits)
        };
        if cmds.is_empty() {
            // Nothing to send, but a reply may still depend on the LSN:
            // it is covered with what the stream holds so far.
            if lsn != 0 {
                let mut b = self.stream.backlog.lock();
                if b.active && !b.paused {
                    b.index_commit(lsn);
                }
            }
            return;
        }
        let mut b = self.stream.backlog.lock();
        if b.paused || !b.active {
            return;
        }
        let mut out = Vec::new();
        let select = |out: &mut Vec<u8>, b: &mut Backlog, db: Option<u32>| {
            if let Some(db) = db {
                if b.seldb != Some(db) {
                    effects::resp(out, &[b"SELECT", db.to_string().as_bytes()]);
                    b.seldb = Some(db);
                }
            }
        };
        let wrap = cmds.len() > 1;
        if wrap {
            select(&mut out, &mut b, cmds[0].0);
            effects::resp(&mut out, &[b"MULTI"]);
        }
        for (db, c) in &cmds {
            select(&mut out, &mut b, *db);
            out.extend_from_slice(c);
        }
        if wrap {
            effects::resp(&mut out, &[b"EXEC"]);
        }
        b.append(&out);
        b.index_commit(lsn);
        let end = b.end;
        drop(b);
        self.stream.publish_end(end);
    }
}

/// A replica attached to this server.
pub struct ReplicaInfo {
    pub client_id: u64,
    pub ip: String,
    pub port: AtomicU64,
    /// Offset the replica acknowledged (REPLCONF ACK).
    pub ack: AtomicU64,
    /// Offset whose writes the replica reports durable in its own log
    /// (REPLCONF ACK ... FACK); 0 for replicas that do not say (Redis 7.0).
    pub fack: AtomicU64,
    pub last_ack_ms: AtomicU64,
    /// Past its full sync: receiving the command stream.
    pub online: AtomicBool,
}

/// Replication IDs (`master_replid`, `master_replid2`,
/// `second_repl_offset`).
pub struct Ids {
    pub replid: String,
    pub replid2: String,
    pub second_offset: i64,
}

/// This server's link to its primary, when it is a replica.
#[derive(Clone, Debug, Default)]
pub struct MasterLink {
    pub host: String,
    pub port: u16,
    /// `master_link_status`: up once the stream flows.
    pub up: bool,
    pub sync_in_progress: bool,
    pub last_io_ms: u64,
    /// When an established link was lost (`master_link_down_since_seconds`;
    /// 0: it never was up since REPLICAOF, reported as -1).
    pub down_since_ms: u64,
}

pub struct Replication {
    pub stream: Arc<Stream>,
    pub replicas: Mutex<Vec<Arc<ReplicaInfo>>>,
    /// Bumped on every REPLCONF ACK (WAIT waits on it).
    pub acks: AtomicU64,
    /// Every logged write with an LSN up to this is durable on at least
    /// `min-replicas-to-ack` replicas (as they were when it was computed).
    pub replicated_lsn: AtomicU64,
    pub ids: Mutex<Ids>,
    /// Set while this server replicates another (the one check writes pay).
    pub is_replica: AtomicBool,
    /// The replication ID and offset describe this dataset, so a PSYNC may
    /// offer them for a partial resync: false only for a server started as
    /// a replica that has not synced yet (it sends `PSYNC ? -1`).
    pub history_known: AtomicBool,
    /// Bumped by every REPLICAOF: a link task from before it stops
    /// applying its stream even before it is aborted.
    pub link_generation: AtomicU64,
    /// REPLICAOF's target; the link task follows it.
    pub target: watch::Sender<Option<(String, u16)>>,
    pub link: Mutex<MasterLink>,
    /// INFO stats' `sync_full`, `sync_partial_ok`, `sync_partial_err`.
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// The database the primary's stream has selected, kept across links
    /// (a partial resync does not repeat the SELECT).
    pub master_db: AtomicU32,
    /// The replication ID and offset were restored from this server's log
    /// at start-up: the first PSYNC asks to continue from them.
    pub resumable: AtomicBool,
    /// A full sync is replacing the dataset (INFO's `loading`): clients get
    /// `-LOADING` except for the commands Redis allows then.
    pub loading: AtomicBool,
    /// On a replica, held by the link while it applies stream commands and
    /// appends their bytes: a full sync this replica serves fixes its point
    /// under it, so the snapshot and the stream after its offset never
    /// overlap or leave a gap.
    pub apply_gate: Mutex<()>,
    pub failover: failover::Failover,
}

/// Marks a reply dependency at level `replicated`: the LSN with this bit
/// set must be durable here and on `min-replicas-to-ack` replicas. LSNs
/// never come near it; `UNLOGGED_FAILED_LSN` (all ones) is not a flagged LSN.
pub const REPLICATED_DEP: u64 = 1 << 62;

/// The online replicas' acknowledged offsets at one moment.
pub struct Acks {
    ack: Vec<u64>,
    fack: Vec<u64>,
}

impl Acks {
    /// Replicas whose acknowledged offset reached `offset` (WAIT).
    pub fn acked(&self, offset: u64) -> usize {
        self.ack.iter().filter(|a| **a >= offset).count()
    }

    /// Replicas whose reported durable offset reached `offset` (WAITAOF).
    pub fn facked(&self, offset: u64) -> usize {
        self.fack.iter().filter(|a| **a >= offset).count()
    }
}

/// A dependency's LSN, and whether it waits for replicas too.
pub fn dep_parts(dep: u64) -> (u64, bool) {
    if dep == durakv_engine::txn::UNLOGGED_FAILED_LSN {
        return (dep, false);
    }
    (dep & !REPLICATED_DEP, dep & REPLICATED_DEP != 0)
}

/// `lsn` as a dependency at level `replicated` (0 stays 0: nothing to wait for).
pub fn replicated_dep(lsn: u64) -> u64 {
    if lsn == 0 || lsn == durakv_engine::txn::UNLOGGED_FAILED_LSN {
        lsn
    } else {
        lsn | REPLICATED_DEP
    }
}

/// A dependency covering both `a` and `b`.
pub fn combine_deps(a: u64, b: u64) -> u64 {
    let (la, ra) = dep_parts(a);
    let (lb, rb) = dep_parts(b);
    let lsn = durakv_engine::dep::combine(la, lb);
    if ra || rb {
        replicated_dep(lsn)
    } else {
        lsn
    }
}

pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

impl Replication {
    pub fn new(replid: &str, backlog_bytes: usize) -> Replication {
        let (end_tx, _) = watch::channel(0);
        Replication {
            stream: Arc::new(Stream {
                backlog: Mutex::new(Backlog::new(backlog_bytes)),
                end_tx,
                end: AtomicU64::new(0),
                getack_at: AtomicU64::new(0),
            }),
            replicas: Mutex::new(Vec::new()),
            acks: AtomicU64::new(0),
            replicated_lsn: AtomicU64::new(0),
            ids: Mutex::new(Ids {
                replid: replid.to_string(),
                replid2: NO_REPLID.to_string(),
                second_offset: -1,
            }),
            is_replica: AtomicBool::new(false),
            history_known: AtomicBool::new(true),
            link_generation: AtomicU64::new(0),
            target: watch::channel(None).0,
            link: Mutex::new(MasterLink::default()),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            master_db: AtomicU32::new(0),
            resumable: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            apply_gate: Mutex::new(()),
            failover: failover::Failover::default(),
        }
    }

    pub fn feed(&self, limits: EncodingLimits) -> Box<dyn ReplicationFeed> {
        Box::new(Feed {
            stream: self.stream.clone(),
            limits,
        })
    }

    pub fn is_replica(&self) -> bool {
        self.is_replica.load(Ordering::Acquire)
    }

    /// `master_repl_offset`: the stream produced (primary) or applied
    /// (replica).
    pub fn offset(&self) -> u64 {
        self.stream.backlog.lock().end
    }

    /// The stream's end as the feed last published it (no backlog lock).
    pub fn end_offset(&self) -> u64 {
        self.stream.end.load(Ordering::Acquire)
    }

    /// Replicas whose last acknowledgement is at most `max_lag_secs` old
    /// (`min-replicas-max-lag`).
    pub fn good_replicas(&self, max_lag_secs: u64) -> usize {
        let now = crate::util::now_ms();
        self.replicas
            .lock()
            .iter()
            .filter(|r| {
                r.online.load(Ordering::Acquire)
                    && now.saturating_sub(r.last_ack_ms.load(Ordering::Acquire))
                        <= max_lag_secs * 1000
            })
            .count()
    }

    /// Recomputes [`Replication::replicated_lsn`] after an acknowledgement:
    /// the `k`-th highest durable offset among online replicas, mapped to
    /// LSNs. True when it advanced.
    pub fn advance_replicated(&self, k: usize) -> bool {
        if k == 0 {
            return false;
        }
        let mut facks: Vec<u64> = self
            .replicas
            .lock()
            .iter()
            .filter(|r| r.online.load(Ordering::Acquire))
            .map(|r| r.fack.load(Ordering::Acquire))
            .collect();
        if facks.len() < k {
            return false;
        }
        facks.sort_unstable_by(|a, b| b.cmp(a));
        let offset = facks[k - 1];
        let lsn = self.stream.backlog.lock().covered_lsn(offset);
        self.replicated_lsn.fetch_max(lsn, Ordering::AcqRel) < lsn
    }

    /// Disconnects every replica of this server: its history changed (a
    /// new primary, a full resync, a new replication ID), and they
    /// reconnect to learn the new one.
    pub fn drop_replicas(&self, shared: &crate::state::Shared) {
        for r in self.replicas.lock().iter() {
            if let Some(h) = shared.clients.get(r.client_id) {
                h.kill();
            }
        }
    }

    /// Asks the replicas for an acknowledgement now (REPLCONF GETACK *).
    pub fn request_acks(&self) {
        self.request_acks_covering(u64::MAX);
    }

    /// Asks the replicas for an acknowledgement of the stream up to
    /// `offset`, unless a request already sent follows it: hundreds of
    /// clients entering WAIT at once then cost one GETACK, and one round
    /// of acknowledgements, rather than one each.
    pub fn request_acks_covering(&self, offset: u64) {
        if self.replicas.lock().is_empty() {
            return;
        }
        let mut getack = Vec::new();
        effects::resp(&mut getack, &[b"REPLCONF", b"GETACK", b"*"]);
        let at = &self.stream.getack_at;
        self.stream.append_raw_if(&getack, |b| {
            let last = at.load(Ordering::Relaxed);
            // A last request past the end: the stream started again below it.
            if offset <= last && last <= b.end {
                return false;
            }
            at.store(b.end, Ordering::Relaxed);
            true
        });
    }

    /// The acknowledged offsets of the online replicas, read once for
    /// many waiting clients.
    pub fn acks(&self) -> Acks {
        let replicas = self.replicas.lock();
        let online = replicas.iter().filter(|r| r.online.load(Ordering::Acquire));
        let (ack, fack) = online
            .map(|r| {
                (
                    r.ack.load(Ordering::Acquire),
                    r.fack.load(Ordering::Acquire),
                )
            })
            .unzip();
        Acks { ack, fack }
    }

    /// DEBUG CHANGE-REPL-ID: a new ID, and no previous one.
    pub fn change_replid(&self) {
        let mut ids = self.ids.lock();
        ids.replid = new_replid();
        ids.replid2 = NO_REPLID.to_string();
        ids.second_offset = -1;
    }

    /// Makes this server a primary again (REPLICAOF NO ONE): a new ID,
    /// the old one kept as `replid2` so its replicas can continue.
    pub fn promote(&self, shared: &crate::state::Shared) {
        self.is_replica.store(false, Ordering::Release);
        // Its own clock decides expiry again, as a primary's does.
        durakv_engine::db::keep_expired_on_replica(false);
        self.link_generation.fetch_add(1, Ordering::AcqRel);
        self.history_known.store(true, Ordering::Release);
        let _ = self.target.send_replace(None);
        // Its replicas continue from the backlog at once: from here on its
        // own writes must reach the stream, not only after a full sync.
        shared.store.keyspace.start_feeding();
        {
            let mut b = self.stream.backlog.lock();
            let mut ids = self.ids.lock();
            ids.replid2 = std::mem::replace(&mut ids.replid, new_replid());
            ids.second_offset = b.end as i64 + 1;
            b.paused = false;
            b.seldb = None;
        }
        // Its own replicas learn the new ID by reconnecting, and continue
        // under it from the backlog (the old one is `replid2`), as in Redis.
        self.drop_replicas(shared);
        let _ = crate::oom_score::apply(shared, &shared.config.read());
    }

    /// Makes this server a replica of `host:port`: replicas attached to it
    /// are dropped (they reconnect and resync through it from the new
    /// primary's history), and so are blocked clients.
    pub fn demote(&self, shared: &crate::state::Shared, host: String, port: u16) {
        self.is_replica.store(true, Ordering::Release);
        // Reads hide expired keys but leave them for the primary's DEL.
        durakv_engine::db::keep_expired_on_replica(true);
        self.link_generation.fetch_add(1, Ordering::AcqRel);
        self.stream.backlog.lock().paused = true;
        self.drop_replicas(shared);
        shared.blocking.disconnect_all();
        *self.link.lock() = MasterLink {
            host: host.clone(),
            port,
            ..MasterLink::default()
        };
        let _ = self.target.send_replace(Some((host, port)));
        let _ = crate::oom_score::apply(shared, &shared.config.read());
    }
}

/// A primary again (REPLICAOF NO ONE, a FAILOVER target taking over, a
/// FAILOVER undone): promoted, its recorded origin dropped, `replicaof`
/// cleared.
pub fn become_primary(shared: &crate::state::Shared) {
    shared.repl.promote(shared);
    replica::forget_origin(shared);
    remember_primary(shared, "");
}

/// Keeps `replicaof` in the running configuration, so CONFIG REWRITE
/// (which Sentinel sends with every REPLICAOF) makes a restarted server
/// come back in the role it was given.
pub fn remember_primary(shared: &crate::state::Shared, target: &str) {
    if let Err(e) = shared.config.write().set("replicaof", target) {
        tracing::warn!("cannot record replicaof {target:?}: {e}");
    }
}

pub fn new_replid() -> String {
    (0..40)
        .map(|_| char::from_digit(u32::from(rand::random::<u8>() % 16), 16).unwrap_or('0'))
        .collect()
}

/// INFO's replication section, with Redis's field names.
pub fn info_section(shared: &crate::state::Shared) -> String {
    let repl = &shared.repl;
    let mut s = String::new();
    let mut f = |k: &str, v: String| {
        s.push_str(k);
        s.push(':');
        s.push_str(&v);
        s.push_str("\r\n");
    };
    let now = crate::util::now_ms();
    let (end, first, histlen, active, cap) = {
        let b = repl.stream.backlog.lock();
        (b.end, b.first_byte(), b.histlen(), b.active, b.capacity())
    };
    if repl.is_replica() {
        let link = repl.link.lock().clone();
        f("role", "slave".into());
        f("master_host", link.host.clone());
        f("master_port", link.port.to_string());
        f(
            "master_link_status",
            if link.up { "up" } else { "down" }.into(),
        );
        let io = if link.last_io_ms == 0 {
            -1
        } else {
            (now.saturating_sub(link.last_io_ms) / 1000) as i64
        };
        f("master_last_io_seconds_ago", io.to_string());
        f(
            "master_sync_in_progress",
            u8::from(link.sync_in_progress).to_string(),
        );
        f("slave_read_repl_offset", end.to_string());
        f("slave_repl_offset", end.to_string());
        if !link.up {
            // Sentinel reads it to skip replicas cut off from the primary
            // for long when it picks one to promote.
            let down = if link.down_since_ms == 0 {
                -1
            } else {
                (now.saturating_sub(link.down_since_ms) / 1000) as i64
            };
            f("master_link_down_since_seconds", down.to_string());
        }
        let (priority, announced) = {
            let c = shared.config.read();
            (
                c.get("replica-priority").unwrap_or_else(|| "100".into()),
                c.get("replica-announced").is_none_or(|v| v != "no"),
            )
        };
        f("slave_priority", priority);
        f("slave_read_only", u8::from(read_only(shared)).to_string());
        f("replica_announced", u8::from(announced).to_string());
    } else {
        f("role", "master".into());
    }
    let replicas = repl.replicas.lock().clone();
    f("connected_slaves", replicas.len().to_string());
    let (min_write, max_lag) = {
        let c = shared.config.read();
        (c.min_replicas_to_write, c.min_replicas_max_lag)
    };
    if min_write > 0 && max_lag > 0 {
        f(
            "min_slaves_good_slaves",
            repl.good_replicas(max_lag).to_string(),
        );
    }
    for (i, r) in replicas.iter().enumerate() {
        let state = if r.online.load(Ordering::Acquire) {
            "online"
        } else {
            "wait_bgsave"
        };
        let lag = now.saturating_sub(r.last_ack_ms.load(Ordering::Acquire)) / 1000;
        f(
            &format!("slave{i}"),
            format!(
                "ip={},port={},state={state},offset={},lag={lag}",
                r.ip,
                r.port.load(Ordering::Acquire),
                r.ack.load(Ordering::Acquire)
            ),
        );
    }
    f("master_failover_state", repl.failover.phase().name().into());
    let ids = repl.ids.lock();
    f("master_replid", ids.replid.clone());
    f("master_replid2", ids.replid2.clone());
    f("master_repl_offset", end.to_string());
    f("second_repl_offset", ids.second_offset.to_string());
    f("repl_backlog_active", u8::from(active).to_string());
    f("repl_backlog_size", cap.to_string());
    f(
        "repl_backlog_first_byte_offset",
        if active { first } else { 0 }.to_string(),
    );
    f("repl_backlog_histlen", histlen.to_string());
    s
}

/// `replica-read-only` in force.
pub fn read_only(shared: &crate::state::Shared) -> bool {
    shared
        .config
        .read()
        .get("replica-read-only")
        .is_none_or(|v| v != "no")
}

/// ROLE's reply.
pub fn role_frame(shared: &crate::state::Shared) -> durakv_protocol::Frame {
    use durakv_protocol::Frame;
    let repl = &shared.repl;
    let s = |t: &str| Frame::Bulk(Bytes::copy_from_slice(t.as_bytes()));
    if repl.is_replica() {
        let link = repl.link.lock().clone();
        let state = if link.up {
            "connected"
        } else if link.sync_in_progress {
            "sync"
        } else {
            "connect"
        };
        return Frame::Array(vec![
            s("slave"),
            s(&link.host),
            Frame::Integer(i64::from(link.port)),
            s(state),
            Frame::Integer(repl.offset() as i64),
        ]);
    }
    let replicas = repl
        .replicas
        .lock()
        .iter()
        .filter(|r| r.online.load(Ordering::Acquire))
        .map(|r| {
            Frame::Array(vec![
                s(&r.ip),
                s(&r.port.load(Ordering::Acquire).to_string()),
                s(&r.ack.load(Ordering::Acquire).to_string()),
            ])
        })
        .collect();
    Frame::Array(vec![
        s("master"),
        Frame::Integer(repl.offset() as i64),
        Frame::Array(replicas),
    ])
}
