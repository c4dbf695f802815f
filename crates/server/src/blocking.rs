//! Clients blocked until a key can serve them (BLPOP and the other blocking
//! pops, XREAD BLOCK), and serving them; and clients blocked until a
//! condition of the server holds ([`Condition`]: WAIT and WAITAOF, which
//! wait for replicas' acknowledgements and are looked at again whenever
//! one arrives, [`Blocking::recheck`]).
//!
//! Waiters queue per (database, key) in the order their commands arrived
//! (`crate::arrival`), so the client that blocked first on a key is served
//! first, even when another event loop ran a later one's command first.
//!
//! No write is missed: a blocking command registers its waiter while it
//! still holds the shard locks of its keys, and a write looks for waiters on
//! the keys it wrote ([`Blocking::ready_keys`]) while it holds its locks.
//! Either the write came first and the command saw its data, or the waiter
//! is there when the write looks.
//!
//! Serving runs once the write has committed, so a MULTI/EXEC or a script is
//! seen whole (`MULTI; LPUSH k a; LPOP k; EXEC` leaves nothing to serve), on
//! the writer's thread before its reply is queued, so the writer's next
//! command sees the served state. Each served waiter is its own transaction
//! and log record (the pop, and BLMOVE's push), committed at the blocked
//! client's durability; the blocked connection holds the reply for that
//! record's LSN like any write's. Between the writer's commit and the
//! serving lock, another client's command may still take the data first.
//!
//! Lock order: shard locks, then the registry, then a waiter's reply slot.

use crate::client::{ClientHandle, ClientState};
use crate::state::Shared;
use bytes::Bytes;
use durakv_engine::mutation::Mutation;
use durakv_engine::txn::Txn;
use durakv_engine::Durability;
use durakv_protocol::{Frame, Protocol};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// What a blocked command does when one of its keys may serve it.
pub trait Serve: Send + Sync {
    /// Keys that serving writes besides the ready one (BLMOVE's
    /// destination); they are locked with it.
    fn extra_keys(&self) -> &[Bytes] {
        &[]
    }

    /// The command as keyspace notifications name its events (BLPOP,
    /// BZPOPMAX, BLMOVE).
    fn command(&self) -> &'static str;

    /// Tries to serve the waiter from `key`, in `txn`, which holds the locks
    /// of `key` and [`Serve::extra_keys`].
    fn serve(&self, txn: &mut Txn<'_>, db: usize, key: &Bytes, resp3: bool) -> Served;

    /// The reply when the wait ends with nothing: a timeout, or CLIENT
    /// UNBLOCK without ERROR.
    fn timeout_reply(&self) -> Frame;

    /// The reply where the command may not block at all (inside MULTI or
    /// a script) and nothing is there.
    fn no_wait_reply(&self) -> Frame {
        self.timeout_reply()
    }
}

/// A wait on the server's state rather than on keys. Parked like a key
/// wait, so a waiting client holds no thread.
pub trait Condition: Send + Sync {
    /// The command, for the slow log and command statistics.
    fn command(&self) -> &'static str;

    /// The reply if the wait is over now, given the replicas'
    /// acknowledgements as they are.
    fn met(&self, shared: &Shared, acks: &crate::repl::Acks) -> Option<Unblocked>;

    /// The reply when the wait ends unmet: a timeout, or CLIENT UNBLOCK
    /// without ERROR.
    fn expired(&self, shared: &Shared) -> Unblocked;
}

/// What a waiter waits for.
enum Op {
    Keys(Box<dyn Serve>),
    Condition(Box<dyn Condition>),
}

impl Op {
    fn command(&self) -> &'static str {
        match self {
            Op::Keys(s) => s.command(),
            Op::Condition(c) => c.command(),
        }
    }

    fn expired(&self, shared: &Shared) -> Unblocked {
        match self {
            Op::Keys(s) => Unblocked::now(s.timeout_reply()),
            Op::Condition(c) => c.expired(shared),
        }
    }
}

pub enum Served {
    /// The wait is over with this reply, possibly an error (BLMOVE into a
    /// key of another type); what `serve` applied is committed for it.
    Reply(Frame),
    /// Neither this waiter nor any behind it can be served from the key now
    /// (it is empty, or holds another type). Nothing was applied.
    Exhausted,
    /// Not this waiter, though maybe those behind it (a stream reader
    /// waiting for newer entries). Nothing was applied.
    Skip,
}

/// Waiter states, changed only under the registry's lock.
const WAITING: u8 = 0;
/// A writer is serving it, under the shard locks of the ready key.
const CLAIMED: u8 = 1;
/// Claimed, and meanwhile its connection timed out or went away: unless
/// the claim serves it, releasing the claim ends the wait.
const CLAIMED_CANCELLED: u8 = 2;
const DONE: u8 = 3;

/// Beyond this a timeout is as good as none (and stays clear of the
/// timer's range).
const MAX_WAIT_SECS: u64 = 365 * 24 * 3600;

pub struct Waiter {
    handle: Arc<ClientHandle>,
    db: usize,
    /// The keys waited on, without repeats.
    keys: Vec<Bytes>,
    resp3: bool,
    /// The client's `CLIENT DURABILITY` when it blocked.
    durability: Option<Durability>,
    /// The client's last write when it blocked (`durakv_engine::dep`): the
    /// write serving it makes follows it, as if the client had made it.
    after: u64,
    deadline: Option<Instant>,
    /// When its command arrived (`ClientState::arrival`).
    arrival: u64,
    op: Op,
    /// The ACL user the client ran the command as: a writer serving it
    /// checks the user's rules as they are then.
    user: String,
    state: AtomicU8,
    /// A writer passed it over while another was serving it from another
    /// key: if that claim gives it back unserved, its keys get another look.
    passed_over: AtomicBool,
    reply: Mutex<Option<Unblocked>>,
    wake: Notify,
}

impl Waiter {
    fn deliver(&self, u: Unblocked) {
        *self.reply.lock() = Some(u);
        self.wake.notify_one();
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Relaxed)
    }

    fn set_state(&self, s: u8) {
        self.state.store(s, Ordering::Relaxed);
    }
}

/// How a wait ended.
pub struct Unblocked {
    pub frame: Frame,
    /// The LSN that must be durable before the reply goes out (0: none).
    pub dependency_lsn: u64,
    /// The LSN of the record that serving wrote (0: none), for WAITAOF.
    pub lsn: u64,
    /// That record as the client's next write follows it
    /// (`durakv_engine::dep`; 0: none).
    pub written: u64,
    /// Refused on being served (ACL): counted as rejected, not failed.
    pub rejected: bool,
    /// The connection closes once the reply is written.
    pub close: bool,
}

impl Unblocked {
    pub fn now(frame: Frame) -> Unblocked {
        Unblocked {
            frame,
            dependency_lsn: 0,
            lsn: 0,
            written: 0,
            rejected: false,
            close: false,
        }
    }
}

/// The connection's side of a blocked command.
pub struct Blocked {
    waiter: Arc<Waiter>,
    /// Its reply is suppressed (CLIENT REPLY OFF or SKIP).
    silent: bool,
    /// What the command read before blocking depends on; a timeout's nil
    /// reveals that read, so it waits for it too.
    read_dependency: u64,
    /// The deadline passed while a writer was serving it: from then on
    /// only the writer's word ends the wait.
    expired: bool,
    /// The command and how long its first run took, for the slow log,
    /// which logs it once the wait ends (as Redis does).
    call: Option<(Vec<Bytes>, Duration)>,
}

impl Blocked {
    pub fn remember_call(&mut self, args: &[Bytes], took: Duration) {
        self.call = Some((args.to_vec(), took));
    }

    /// Resolves when [`resume`] may have an answer: a reply arrived or the
    /// deadline passed.
    async fn ready(&self) {
        let w = &self.waiter;
        match w.deadline {
            Some(d) if !self.expired => {
                tokio::select! {
                    _ = w.wake.notified() => {}
                    _ = tokio::time::sleep_until(d.into()) => {}
                }
            }
            _ => w.wake.notified().await,
        }
    }
}

#[derive(Default)]
struct Registry {
    by_key: HashMap<(usize, Bytes), VecDeque<Arc<Waiter>>>,
    by_client: HashMap<u64, Arc<Waiter>>,
    /// Waiters on a [`Condition`], in arrival order.
    conditions: Vec<Arc<Waiter>>,
}

#[derive(Default)]
pub struct Blocking {
    registry: Mutex<Registry>,
    /// Clients blocked (INFO's blocked_clients).
    blocked: AtomicUsize,
    /// Keys waited on: writers skip the registry while there are none.
    waited_keys: AtomicUsize,
    /// Clients waiting on a condition: [`Blocking::recheck`] skips the
    /// registry while there are none.
    conditions: AtomicUsize,
}

impl Blocking {
    pub fn blocked_clients(&self) -> usize {
        self.blocked.load(Ordering::Relaxed)
    }

    pub fn blocking_keys(&self) -> usize {
        self.waited_keys.load(Ordering::Relaxed)
    }

    /// Blocks `client` on `keys` of its database until `timeout` (None:
    /// forever). Called by a command holding the shard locks of `keys`.
    pub fn block(
        &self,
        client: &mut ClientState,
        keys: &[Bytes],
        timeout: Option<std::time::Duration>,
        op: Box<dyn Serve>,
    ) {
        let mut seen = HashSet::with_capacity(keys.len());
        let keys: Vec<Bytes> = keys.iter().filter(|k| seen.insert(*k)).cloned().collect();
        self.register(client, keys, timeout, Op::Keys(op));
    }

    /// Blocks `client` until `cond` is met or `timeout` passes (None:
    /// never). What makes it true must call [`Blocking::recheck`]; this
    /// looks once after registering, so nothing that happened before is
    /// missed.
    pub fn block_until(
        &self,
        shared: &Shared,
        client: &mut ClientState,
        timeout: Option<std::time::Duration>,
        cond: Box<dyn Condition>,
    ) {
        let waiter = self.register(client, Vec::new(), timeout, Op::Condition(cond));
        self.check_condition(shared, &shared.repl.acks(), &waiter);
    }

    fn register(
        &self,
        client: &mut ClientState,
        keys: Vec<Bytes>,
        timeout: Option<std::time::Duration>,
        op: Op,
    ) -> Arc<Waiter> {
        let deadline = timeout
            .filter(|t| t.as_secs() < MAX_WAIT_SECS)
            .and_then(|t| Instant::now().checked_add(t));
        let waiter = Arc::new(Waiter {
            handle: client.handle.clone(),
            db: client.db,
            keys,
            resp3: client.protocol == Protocol::Resp3,
            durability: client.durability,
            after: client.last_write_dep,
            deadline,
            arrival: client.arrival,
            op,
            user: client.user.name.clone(),
            state: AtomicU8::new(WAITING),
            passed_over: AtomicBool::new(false),
            reply: Mutex::new(None),
            wake: Notify::new(),
        });
        let mut reg = self.registry.lock();
        for key in &waiter.keys {
            let q = reg.by_key.entry((waiter.db, key.clone())).or_default();
            // Nearly always at the back; ahead of those whose commands
            // arrived later but ran first.
            let at = q
                .iter()
                .rposition(|w| w.arrival <= waiter.arrival)
                .map_or(0, |i| i + 1);
            q.insert(at, waiter.clone());
        }
        if matches!(waiter.op, Op::Condition(_)) {
            reg.conditions.push(waiter.clone());
        }
        if let Some(earlier) = reg.by_client.insert(waiter.handle.id, waiter.clone()) {
            // A connection runs one command at a time; never expected.
            self.remove(&mut reg, &earlier);
            reg.by_client.insert(waiter.handle.id, waiter.clone());
        }
        waiter.handle.blocked.store(true, Ordering::Release);
        self.recount(&reg);
        client.blocked = Some(Blocked {
            waiter: waiter.clone(),
            silent: false,
            read_dependency: 0,
            expired: false,
            call: None,
        });
        waiter
    }

    /// Ends the waits on conditions that now hold. Called by whatever may
    /// make one true (a replica's acknowledgement), with no locks held.
    pub fn recheck(&self, shared: &Shared) {
        if self.conditions.load(Ordering::Relaxed) == 0 {
            return;
        }
        let waiting = self.registry.lock().conditions.clone();
        let acks = shared.repl.acks();
        for w in &waiting {
            self.check_condition(shared, &acks, w);
        }
    }

    fn check_condition(&self, shared: &Shared, acks: &crate::repl::Acks, w: &Arc<Waiter>) {
        let Op::Condition(cond) = &w.op else {
            return;
        };
        if w.state() != WAITING {
            return;
        }
        if let Some(u) = cond.met(shared, acks) {
            // Only one of two racing rechecks ends the wait.
            if self.cancel(w) {
                w.deliver(u);
            }
        }
    }

    /// Takes `w` out of every queue; it no longer counts as blocked.
    fn remove(&self, reg: &mut Registry, w: &Arc<Waiter>) {
        for key in &w.keys {
            let k = (w.db, key.clone());
            if let Some(q) = reg.by_key.get_mut(&k) {
                q.retain(|x| !Arc::ptr_eq(x, w));
                if q.is_empty() {
                    reg.by_key.remove(&k);
                }
            }
        }
        if reg
            .by_client
            .get(&w.handle.id)
            .is_some_and(|x| Arc::ptr_eq(x, w))
        {
            reg.by_client.remove(&w.handle.id);
            w.handle.blocked.store(false, Ordering::Release);
        }
        if matches!(w.op, Op::Condition(_)) {
            reg.conditions.retain(|x| !Arc::ptr_eq(x, w));
        }
        w.set_state(DONE);
        self.recount(reg);
    }

    fn recount(&self, reg: &Registry) {
        self.blocked.store(reg.by_client.len(), Ordering::Relaxed);
        self.waited_keys.store(reg.by_key.len(), Ordering::Relaxed);
        self.conditions
            .store(reg.conditions.len(), Ordering::Relaxed);
    }

    /// The keys among `muts` that clients wait on, in the order written.
    /// Called with the writer's shard locks held, before it commits.
    pub fn ready_keys(&self, muts: &[Mutation]) -> Vec<(usize, Bytes)> {
        // The shard locks order this load after any registration on the
        // keys written (made under the same locks).
        if muts.is_empty() || self.waited_keys.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let reg = self.registry.lock();
        let mut ready: Vec<(usize, Bytes)> = Vec::new();
        let mut add = |k: &(usize, Bytes)| {
            if !ready.contains(k) {
                ready.push(k.clone());
            }
        };
        for m in muts {
            match m {
                Mutation::Key { db, key, .. } => {
                    let k = (*db as usize, key.clone());
                    if reg.by_key.contains_key(&k) {
                        add(&k);
                    }
                }
                Mutation::SwapDb { a, b } => {
                    let swapped = [*a as usize, *b as usize];
                    reg.by_key
                        .keys()
                        .filter(|(db, _)| swapped.contains(db))
                        .for_each(&mut add);
                }
                // Stream group readers learn that their key is gone.
                Mutation::FlushDb { db } => reg
                    .by_key
                    .keys()
                    .filter(|(d, _)| *d == *db as usize)
                    .for_each(&mut add),
                Mutation::FlushAll => reg.by_key.keys().for_each(&mut add),
                Mutation::Function(_) | Mutation::ReplOrigin(_) => {}
            }
        }
        ready
    }

    /// Serves the clients waiting on the `ready` keys, and on the keys that
    /// serving makes ready in turn (a BLMOVE into a key others wait on).
    /// Called with no shard locks held. Returns what the served clients'
    /// replies wait for, combined (0: none), and whether any was served.
    /// `writer`: the client whose write made them ready.
    pub fn serve(&self, shared: &Shared, writer: u64, ready: Vec<(usize, Bytes)>) -> (u64, bool) {
        // Nearly every write (and every read) wakes nobody.
        if ready.is_empty() {
            return (0, false);
        }
        let mut queue: VecDeque<(usize, Bytes)> = ready.into();
        let mut served = (0, false);
        while let Some((db, key)) = queue.pop_front() {
            self.serve_key(shared, writer, db, &key, &mut queue, &mut served);
        }
        served
    }

    fn serve_key(
        &self,
        shared: &Shared,
        writer: u64,
        db: usize,
        key: &Bytes,
        queue: &mut VecDeque<(usize, Bytes)>,
        served: &mut (u64, bool),
    ) {
        // Waiters passed over (`Served::Skip`), still waiting ahead of the
        // next candidate.
        let mut passed = 0;
        loop {
            let Some(w) = self.nth_waiting(db, key, passed) else {
                return;
            };
            // Only key waits are queued on keys.
            let Op::Keys(op) = &w.op else {
                return;
            };
            let keys = std::iter::once(key).chain(op.extra_keys()).map(|k| &k[..]);
            // Serving writes these keys for the waiter, as if it sent its
            // command again now (`crate::settle::watchers`).
            let watched = std::iter::once(key).chain(op.extra_keys());
            crate::settle::watchers(shared, writer, db, watched);
            let mut txn = lock(shared, keys);
            if !self.claim(&w) {
                // Served elsewhere or gone meanwhile: the next one.
                continue;
            }
            if let Some(denied) = self.acl_denial(shared, &w, op.as_ref(), key) {
                self.remove(&mut self.registry.lock(), &w);
                w.deliver(Unblocked {
                    rejected: true,
                    ..Unblocked::now(denied)
                });
                continue;
            }
            let touched = std::iter::once(key).chain(op.extra_keys());
            let events = crate::notify::Serving::start(&shared.pubsub, &mut txn, db, touched);
            match op.serve(&mut txn, db, key, w.resp3) {
                Served::Exhausted => {
                    self.release(shared, &w, queue);
                    return;
                }
                Served::Skip => {
                    self.release(shared, &w, queue);
                    passed += 1;
                }
                Served::Reply(frame) => {
                    self.remove(&mut self.registry.lock(), &w);
                    let more = self.ready_keys(txn.mutations());
                    let events = events.map(|e| e.finish(op.command(), &mut txn));
                    let mut written = crate::tracking::written_keys(shared, txn.mutations());
                    txn.after_write(w.after);
                    let u = match crate::dispatch::commit(shared, w.durability, db, &mut txn) {
                        Ok(out) => {
                            if let Some(events) = events {
                                events.publish(&shared.pubsub, out.dependency_lsn);
                            }
                            Unblocked {
                                dependency_lsn: out.dependency_lsn,
                                lsn: out.lsn,
                                written: durakv_engine::dep::on_stream(out.stream, out.lsn),
                                ..Unblocked::now(frame)
                            }
                        }
                        Err(e) => {
                            written = None;
                            Unblocked::now(e)
                        }
                    };
                    // Only its local part: a writer at `full` does not
                    // wait for the replicas a `replicated` client waits for.
                    let local = crate::repl::dep_parts(u.dependency_lsn).0;
                    *served = (crate::repl::combine_deps(served.0, local), true);
                    w.deliver(u);
                    // After the reply is handed over, so the served client
                    // (which may track what it just wrote) sees it first.
                    if let Some(written) = written {
                        let writer = Some(w.handle.id);
                        shared
                            .tracking
                            .invalidate(shared, writer, &written, false, &[]);
                    }
                    // This key is being served already; the others (BLMOVE's
                    // destination) wait their turn.
                    more.into_iter()
                        .filter(|k| k.0 != db || k.1 != *key)
                        .for_each(|k| enqueue(queue, k));
                }
            }
        }
    }

    /// Redis runs a blocked command again when a key can serve it, so rules
    /// changed during the wait apply: the command, the key serving it and
    /// any other key it writes must still be allowed.
    fn acl_denial(
        &self,
        shared: &Shared,
        w: &Waiter,
        op: &dyn Serve,
        key: &Bytes,
    ) -> Option<Frame> {
        let spec = crate::command::lookup_original(op.command().as_bytes())?;
        let Some(user) = shared.acl.get(&w.user) else {
            // Deleted meanwhile: its connection is being closed.
            let denial = crate::acl::check::Denial {
                reason: crate::acl::log::Reason::Command,
                object: spec.name.to_string(),
                pos: 0,
            };
            return Some(denial.reply(&w.user));
        };
        if user.unrestricted() {
            return None;
        }
        let mut args = vec![Bytes::from_static(op.command().as_bytes()), key.clone()];
        args.extend(op.extra_keys().iter().cloned());
        let denial = crate::acl::check::check_keys(&user, spec, &args).err()?;
        shared.cmdstats.rejected(spec);
        Some(denial.reply(&user.name))
    }

    /// Whether a client whose blocking command is one of `commands` waits
    /// on `key` in `db` and is not being served yet. Called under the
    /// key's shard lock: data of the kind it waits for, there while it
    /// waits, was written after it blocked, by a write whose serving will
    /// reach it (`serve`), not yet run.
    pub fn is_waited(&self, db: usize, key: &Bytes, commands: &[&str]) -> bool {
        if self.waited_keys.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let reg = self.registry.lock();
        reg.by_key.get(&(db, key.clone())).is_some_and(|q| {
            q.iter()
                .any(|w| w.state() == WAITING && commands.contains(&w.op.command()))
        })
    }

    /// The `n`th waiter on the key that is not being served already.
    fn nth_waiting(&self, db: usize, key: &Bytes, mut n: usize) -> Option<Arc<Waiter>> {
        let reg = self.registry.lock();
        for w in reg.by_key.get(&(db, key.clone()))? {
            if w.state() != WAITING {
                w.passed_over.store(true, Ordering::Relaxed);
            } else if n == 0 {
                return Some(w.clone());
            } else {
                n -= 1;
            }
        }
        None
    }

    fn claim(&self, w: &Waiter) -> bool {
        let _reg = self.registry.lock();
        if w.state() != WAITING {
            return false;
        }
        w.set_state(CLAIMED);
        true
    }

    /// Gives back a claim that did not serve `w`. Keys it was passed over
    /// on meanwhile join `queue`, since data there may have been meant for it.
    fn release(&self, shared: &Shared, w: &Arc<Waiter>, queue: &mut VecDeque<(usize, Bytes)>) {
        let mut reg = self.registry.lock();
        if w.state() == CLAIMED_CANCELLED {
            self.remove(&mut reg, w);
            drop(reg);
            w.deliver(w.op.expired(shared));
            return;
        }
        w.set_state(WAITING);
        if w.passed_over.swap(false, Ordering::Relaxed) {
            w.keys
                .iter()
                .for_each(|k| enqueue(queue, (w.db, k.clone())));
        }
    }

    /// Ends `w`'s wait if no writer is serving it; true if it ended here.
    fn cancel(&self, w: &Arc<Waiter>) -> bool {
        let mut reg = self.registry.lock();
        match w.state() {
            WAITING => {
                self.remove(&mut reg, w);
                true
            }
            CLAIMED => {
                w.set_state(CLAIMED_CANCELLED);
                false
            }
            _ => false,
        }
    }

    /// CLIENT UNBLOCK: ends client `id`'s wait with `error`, or with its
    /// command's timeout reply. False if it is not blocked, or a writer is
    /// serving it at this moment.
    pub fn unblock(&self, shared: &Shared, id: u64, error: Option<Frame>) -> bool {
        let mut reg = self.registry.lock();
        let Some(w) = reg.by_client.get(&id).cloned() else {
            return false;
        };
        if w.state() != WAITING {
            return false;
        }
        self.remove(&mut reg, &w);
        drop(reg);
        w.deliver(match error {
            Some(e) => Unblocked::now(e),
            None => w.op.expired(shared),
        });
        true
    }

    /// This server became a replica (REPLICAOF host port, FAILOVER): as
    /// in Redis, every blocked client gets an UNBLOCKED error and is
    /// disconnected after it, so that it finds the new primary (its keys
    /// now change only through the replication stream, and the replicas a
    /// WAIT counted are gone).
    pub fn disconnect_all(&self) {
        let waiting: Vec<Arc<Waiter>> = self.registry.lock().by_client.values().cloned().collect();
        for w in waiting {
            if self.cancel(&w) {
                w.deliver(Unblocked {
                    close: true,
                    ..Unblocked::now(Frame::error(
                        "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
                    ))
                });
            }
        }
    }
}

/// Locks `keys` for serving. Serving cannot answer -BUSY, so while a script
/// past busy-reply-threshold holds them it waits as the script's own thread
/// runs, having handed this worker's other connections to a fresh thread.
fn lock<'s, 'k>(shared: &'s Shared, keys: impl Iterator<Item = &'k [u8]> + Clone) -> Txn<'s> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let ks = &shared.store.keyspace;
    loop {
        if let Some(txn) = ks.try_lock_keys_for(keys.clone(), crate::scripting::BUSY_POLL, None) {
            return txn;
        }
        let multi_thread =
            Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
        if multi_thread && shared.scripting.timed_out(shared) {
            return tokio::task::block_in_place(|| ks.lock_keys(keys));
        }
    }
}

/// Adds a key to serve from, unless it is queued already.
fn enqueue(queue: &mut VecDeque<(usize, Bytes)>, k: (usize, Bytes)) {
    if !queue.contains(&k) {
        queue.push_back(k);
    }
}

/// After a command ran: if it blocked, keeps what its eventual reply needs
/// and returns true (the connection then waits for [`resume`]).
pub fn parked(client: &mut ClientState, silent: bool, read_dependency: u64) -> bool {
    match client.blocked.as_mut() {
        Some(b) => {
            b.silent = silent;
            b.read_dependency = read_dependency;
            true
        }
        None => false,
    }
}

/// A blocked command's reply once its wait is over (served, timed out, or
/// CLIENT UNBLOCK), with the LSN it waits for; None while it still waits,
/// or when the reply is suppressed.
pub fn resume(shared: &Shared, client: &mut ClientState) -> Option<(Frame, u64)> {
    let b = client.blocked.as_mut()?;
    let u = match b.waiter.reply.lock().take() {
        Some(u) => u,
        None => {
            let due = b.waiter.deadline.is_some_and(|d| Instant::now() >= d);
            if !due || b.expired {
                return None;
            }
            if !shared.blocking.cancel(&b.waiter) {
                b.expired = true;
                return None;
            }
            b.waiter.op.expired(shared)
        }
    };
    let b = client.blocked.take()?;
    client.close_after_reply |= u.close;
    if let Some((args, took)) = &b.call {
        let who = crate::slowlog::Who::Client {
            addr: &client.handle.addr,
            name: client.name.as_ref(),
        };
        shared.slowlog.note(args, *took, who);
    }
    client.last_write_lsn = client.last_write_lsn.max(u.lsn);
    if u.lsn != 0 {
        client.last_write_dep = u.written;
        client.last_write_offset = shared.repl.end_offset();
    }
    if b.silent {
        return None;
    }
    if u.frame.is_error() {
        shared.stats.total_error_replies.add(1);
        shared.cmdstats.error_reply(&u.frame);
        match crate::command::lookup_original(b.waiter.op.command().as_bytes()) {
            Some(spec) if !u.rejected => shared.cmdstats.failed_after_block(spec),
            _ => {}
        }
    }
    Some((
        u.frame,
        crate::repl::combine_deps(u.dependency_lsn, b.read_dependency),
    ))
}

/// Resolves when a blocked client's wait may be over (never if `blocked` is
/// None): the connection loop selects on it next to its socket.
pub async fn unblocked(blocked: Option<&Blocked>) {
    match blocked {
        Some(b) => b.ready().await,
        None => std::future::pending().await,
    }
}

/// A closing connection leaves the queues it waits in.
pub fn abandon(shared: &Shared, client: &mut ClientState) {
    if let Some(b) = client.blocked.take() {
        shared.blocking.cancel(&b.waiter);
    }
}
