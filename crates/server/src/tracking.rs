//! Client-side caching (`CLIENT TRACKING`): which clients may hold a copy
//! of which keys, and the invalidation messages writes send them.
//!
//! In the default mode a key read by a read-only command of a tracking
//! client is remembered (key → client ids) while the command still holds
//! the key's shard lock, so a writer that commits afterwards always finds
//! the reader. Writers look their keys up after committing, remove them
//! from the table and queue an invalidation in each reader's mailbox; it is
//! not held for fsync: an early invalidation only costs the client a
//! refetch, a late one leaves it a stale copy. A connection delivers an
//! invalidation only after the reply of the command it is executing, so a
//! reply that read the old value never follows the invalidation of it.
//!
//! In BCAST mode nothing is remembered: every write to a key under one of a
//! client's prefixes is announced, one message per prefix per command.
//!
//! With nobody tracking, a write pays one atomic load (`is_active`).

use crate::client::ClientHandle;
use crate::command::{flags, CommandSpec, Ctx, DataFn, Reply};
use crate::state::Shared;
use bytes::{BufMut, Bytes, BytesMut};
use durakv_engine::mutation::Mutation;
use durakv_engine::txn::Txn;
use durakv_protocol::frame::{write_bulk, write_integer, write_push_header};
use durakv_protocol::{Frame, Protocol};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Where a RESP2 client redirected to receives invalidations.
const INVALIDATION_CHANNEL: &[u8] = b"__redis__:invalidate";
/// What a queued invalidation costs beyond its keys (queue entry, framing).
const PUSH_OVERHEAD_BYTES: usize = 48;

/// A message for a tracking client, encoded by the receiving connection for
/// its own protocol (which may change after it was queued).
pub enum Push {
    /// Keys to drop; None drops everything (FLUSHDB, FLUSHALL).
    Invalidate {
        keys: Option<Vec<Bytes>>,
        /// Sent to a REDIRECT target rather than to the tracking client.
        redirected: bool,
    },
    /// The REDIRECT target with this id has gone.
    RedirBroken(u64),
}

impl Push {
    pub fn cost_bytes(&self) -> usize {
        let keys = match self {
            Push::Invalidate {
                keys: Some(keys), ..
            } => keys.iter().map(Bytes::len).sum(),
            _ => 0,
        };
        keys + PUSH_OVERHEAD_BYTES
    }

    /// RESP3 gets a push; a RESP2 redirect target subscribed to
    /// `__redis__:invalidate` a pub/sub message there; anyone else nothing,
    /// as RESP2 has no way to carry it.
    pub fn encode(&self, proto: Protocol, subscribed: bool, out: &mut BytesMut) {
        match self {
            Push::Invalidate { keys, redirected } => {
                if proto == Protocol::Resp3 {
                    write_push_header(out, proto, 2);
                    write_bulk(out, b"invalidate");
                } else if *redirected && subscribed {
                    write_push_header(out, proto, 3);
                    write_bulk(out, b"message");
                    write_bulk(out, INVALIDATION_CHANNEL);
                } else {
                    return;
                }
                match keys {
                    None => Frame::Null.encode(proto, out),
                    Some(keys) => {
                        out.put_u8(b'*');
                        out.put_slice(itoa::Buffer::new().format(keys.len()).as_bytes());
                        out.put_slice(b"\r\n");
                        for k in keys {
                            write_bulk(out, k);
                        }
                    }
                }
            }
            Push::RedirBroken(id) => {
                if proto == Protocol::Resp3 {
                    write_push_header(out, proto, 2);
                    write_bulk(out, b"tracking-redir-broken");
                    write_integer(out, *id as i64);
                }
            }
        }
    }
}

/// A connection's own tracking state (in its `ClientState`).
#[derive(Default)]
pub struct Local {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// Client id invalidations go to; 0: this connection.
    pub redirect: u64,
    /// What this client's BCAST prefixes take, as `maxmemory-clients`
    /// counts them.
    pub prefix_bytes: usize,
    /// `CLIENT CACHING` was given for the next command.
    pub caching: bool,
    /// Nesting of data handler calls (a script's commands run inside it).
    depth: u32,
    /// A command run by the current script read something.
    script_read: bool,
    /// Keys the current command wrote (true) or found expired (false),
    /// invalidated once it commits.
    written: Vec<(Bytes, bool)>,
    /// The current command flushed a database.
    flushed: bool,
    /// Keys a command started tracking and wrote itself: the client keeps
    /// tracking them without an invalidation (see `run_data`).
    spared: Vec<Bytes>,
}

impl Local {
    /// A key the current command's lookups expired.
    pub fn note_expired(&mut self, key: Bytes) {
        self.written.push((key, false));
    }

    /// Whether this command's reads are remembered (OPTIN needs CLIENT
    /// CACHING YES first, OPTOUT skips them after CLIENT CACHING NO).
    fn caches_reads(&self) -> bool {
        let skipped = if self.optin {
            !self.caching
        } else {
            self.optout && self.caching
        };
        self.on && !self.bcast && !skipped
    }
}

/// A tracking client as writers see it.
struct Tracker {
    handle: Arc<ClientHandle>,
    redirect: u64,
    bcast: bool,
    noloop: bool,
    prefixes: Vec<Bytes>,
    broken: bool,
}

#[derive(Default)]
struct Table {
    /// Key → ids of the clients that read it. Ids of clients that turned
    /// tracking off stay until the key is invalidated (as in Redis).
    keys: HashMap<Bytes, HashSet<u64>>,
    /// Sum of the id sets' sizes.
    items: usize,
    trackers: HashMap<u64, Tracker>,
    /// BCAST prefix → ids of the clients registered for it.
    prefixes: HashMap<Bytes, HashSet<u64>>,
}

/// Every tracking client and the keys they read.
pub struct Tracking {
    /// Clients with tracking on; writers read only this when it is 0.
    clients: AtomicUsize,
    /// `tracking-table-max-keys`; 0: unlimited.
    max_keys: AtomicUsize,
    table: Mutex<Table>,
    /// Whether the keyspace records expired keys (for notifications or for
    /// tracking); changed under this lock.
    expired_logged: Mutex<bool>,
    /// Tracking clients or `notify-keyspace-events` changed: the
    /// expired-key log must follow, once the command that did it holds no
    /// shard locks (CLIENT TRACKING and CONFIG SET may run inside EXEC).
    log_dirty: AtomicBool,
}

/// What `CLIENT TRACKING ON` asks for.
pub struct Options {
    pub redirect: u64,
    pub bcast: bool,
    pub noloop: bool,
    pub prefixes: Vec<Bytes>,
}

/// `CLIENT LIST`'s view of one client: (bcast, broken redirect, redirect).
pub struct Shown {
    pub bcast: bool,
    pub broken: bool,
    pub redirect: u64,
}

impl Tracking {
    pub fn new(expired_logged: bool, max_keys: u64) -> Tracking {
        Tracking {
            clients: AtomicUsize::new(0),
            max_keys: AtomicUsize::new(max_keys as usize),
            table: Mutex::new(Table::default()),
            expired_logged: Mutex::new(expired_logged),
            log_dirty: AtomicBool::new(false),
        }
    }

    /// What decides whether expired keys are recorded changed; applied by
    /// [`sync_if_changed`] after the command.
    pub fn expired_log_changed(&self) {
        self.log_dirty.store(true, Ordering::Relaxed);
    }

    /// Whether any client tracks: all a write pays when none does.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.clients.load(Ordering::Relaxed) != 0
    }

    /// INFO: (tracking_total_keys, tracking_total_items,
    /// tracking_total_prefixes, tracking_clients).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let t = self.table.lock();
        (
            t.keys.len(),
            t.items,
            t.prefixes.len(),
            self.clients.load(Ordering::Relaxed),
        )
    }

    pub fn shown(&self, id: u64) -> Option<Shown> {
        let t = self.table.lock();
        t.trackers.get(&id).map(|tr| Shown {
            bcast: tr.bcast,
            broken: tr.broken,
            redirect: tr.redirect,
        })
    }

    /// The client's BCAST prefixes and whether its redirect is broken.
    pub fn prefixes_and_broken(&self, id: u64) -> (Vec<Bytes>, bool) {
        let t = self.table.lock();
        t.trackers
            .get(&id)
            .map(|tr| (tr.prefixes.clone(), tr.broken))
            .unwrap_or_default()
    }

    /// Redis's overlap rule: no prefix of a client may be a prefix of
    /// another of its prefixes, existing or given.
    pub fn check_prefixes(&self, id: u64, given: &[Bytes]) -> Result<(), Frame> {
        let overlaps = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
        let t = self.table.lock();
        let existing = t
            .trackers
            .get(&id)
            .map(|tr| &tr.prefixes[..])
            .unwrap_or(&[]);
        for (i, p) in given.iter().enumerate() {
            if let Some(e) = existing.iter().find(|e| overlaps(e, p)) {
                return Err(overlap_error(p, e, "an existing prefix"));
            }
            if let Some(q) = given[i + 1..].iter().find(|q| overlaps(p, q)) {
                return Err(overlap_error(p, q, "another provided prefix"));
            }
        }
        Ok(())
    }

    /// Turns tracking on (or changes its options) for the client `h`.
    /// Returns what the client's BCAST prefixes take (`Local::prefix_bytes`).
    pub fn enable(&self, h: &Arc<ClientHandle>, opts: Options) -> usize {
        let (added, prefix_bytes) = {
            let mut t = self.table.lock();
            let Table {
                trackers, prefixes, ..
            } = &mut *t;
            let mut added = false;
            let tr = trackers.entry(h.id).or_insert_with(|| {
                added = true;
                Tracker {
                    handle: h.clone(),
                    redirect: 0,
                    bcast: false,
                    noloop: false,
                    prefixes: Vec::new(),
                    broken: false,
                }
            });
            tr.redirect = opts.redirect;
            tr.bcast = opts.bcast;
            tr.noloop = opts.noloop;
            tr.broken = false;
            if opts.bcast {
                let wanted = if opts.prefixes.is_empty() {
                    vec![Bytes::new()]
                } else {
                    opts.prefixes
                };
                for p in wanted {
                    if !tr.prefixes.contains(&p) {
                        prefixes.entry(p.clone()).or_default().insert(h.id);
                        tr.prefixes.push(p);
                    }
                }
            }
            let prefix_bytes = tr
                .prefixes
                .iter()
                .map(|p| p.len() + crate::client::ENTRY_OVERHEAD_BYTES)
                .sum();
            (added, prefix_bytes)
        };
        if added {
            self.clients.fetch_add(1, Ordering::Relaxed);
            self.expired_log_changed();
        }
        prefix_bytes
    }

    /// Turns tracking off for client `id`; the keys it read stay in the
    /// table until invalidated.
    pub fn disable(&self, id: u64) {
        let removed = {
            let mut t = self.table.lock();
            let Table {
                keys,
                items,
                trackers,
                prefixes,
            } = &mut *t;
            let removed = trackers.remove(&id);
            if trackers.is_empty() {
                // Nobody left to tell: forget every key read.
                *keys = HashMap::new();
                *items = 0;
            }
            match removed {
                Some(tr) => {
                    for p in &tr.prefixes {
                        if let Some(ids) = prefixes.get_mut(p) {
                            ids.remove(&id);
                            if ids.is_empty() {
                                prefixes.remove(p);
                            }
                        }
                    }
                    true
                }
                None => false,
            }
        };
        if removed {
            self.clients.fetch_sub(1, Ordering::Relaxed);
            self.expired_log_changed();
        }
    }

    /// Remembers that client `id` read `keys`; called while the command
    /// holds their shard locks.
    fn remember(&self, shared: &Shared, id: u64, keys: impl Iterator<Item = Bytes>) {
        let mut t = self.table.lock();
        for k in keys {
            if t.keys.entry(k).or_default().insert(id) {
                t.items += 1;
            }
        }
        let max = self.max_keys.load(Ordering::Relaxed);
        evict_over(shared, &mut t, max);
    }

    /// Whether client `id` tracks `key` now.
    fn tracks(&self, id: u64, key: &Bytes) -> bool {
        self.table
            .lock()
            .keys
            .get(key)
            .is_some_and(|ids| ids.contains(&id))
    }

    /// Invalidates what a committed command wrote (`written`: key, and
    /// whether `writer` itself wrote it rather than found it expired) and,
    /// if it flushed a database, everything. `spared` are keys the writer
    /// started tracking in the same command: it keeps tracking them
    /// without an invalidation.
    pub fn invalidate(
        &self,
        shared: &Shared,
        writer: Option<u64>,
        written: &[(Bytes, bool)],
        flushed: bool,
        spared: &[Bytes],
    ) {
        let mut t = self.table.lock();
        let Table {
            keys,
            items,
            trackers,
            prefixes,
        } = &mut *t;
        if flushed {
            for tr in trackers.values_mut() {
                send(shared, tr, None);
            }
            keys.clear();
            *items = 0;
        }
        for (key, mine) in written {
            let Some(ids) = keys.remove(key) else {
                continue;
            };
            *items -= ids.len();
            for id in ids {
                if writer == Some(id) && spared.contains(key) {
                    keys.entry(key.clone()).or_default().insert(id);
                    *items += 1;
                    continue;
                }
                let Some(tr) = trackers.get_mut(&id) else {
                    continue;
                };
                if tr.bcast || (tr.noloop && *mine && writer == Some(id)) {
                    continue;
                }
                send(shared, tr, Some(vec![key.clone()]));
            }
        }
        if prefixes.is_empty() || written.is_empty() {
            return;
        }
        // A key written twice is announced once; NOLOOP spares it only if
        // every write of it was the client's own.
        let mut distinct: Vec<(Bytes, bool)> = Vec::new();
        let mut seen: HashMap<&Bytes, usize> = HashMap::new();
        for (key, mine) in written {
            match seen.get(key) {
                Some(&i) => distinct[i].1 &= *mine,
                None => {
                    seen.insert(key, distinct.len());
                    distinct.push((key.clone(), *mine));
                }
            }
        }
        for (prefix, ids) in prefixes.iter() {
            let matching: Vec<&(Bytes, bool)> = distinct
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .collect();
            if matching.is_empty() {
                continue;
            }
            for id in ids {
                let Some(tr) = trackers.get_mut(id) else {
                    continue;
                };
                let spare_mine = tr.noloop && writer == Some(*id);
                let ks: Vec<Bytes> = matching
                    .iter()
                    .filter(|(_, mine)| !(spare_mine && *mine))
                    .map(|(k, _)| k.clone())
                    .collect();
                if !ks.is_empty() {
                    send(shared, tr, Some(ks));
                }
            }
        }
    }
}

fn overlap_error(p: &[u8], other: &[u8], which: &str) -> Frame {
    Frame::error(format!(
        "ERR Prefix '{}' overlaps with {which} '{}'. Prefixes for a single client must not overlap.",
        String::from_utf8_lossy(p),
        String::from_utf8_lossy(other)
    ))
}

/// Queues `keys` (None: everything) for the tracker, at its redirect target
/// if it has one; a target that has gone gets the tracker a
/// `tracking-redir-broken` instead.
fn send(shared: &Shared, tr: &mut Tracker, keys: Option<Vec<Bytes>>) {
    if tr.redirect == 0 {
        let push = Push::Invalidate {
            keys,
            redirected: false,
        };
        shared.pubsub.push_tracking(&tr.handle, push);
        return;
    }
    match shared.clients.get(tr.redirect) {
        Some(target) if !target.is_killed() => {
            let push = Push::Invalidate {
                keys,
                redirected: true,
            };
            shared.pubsub.push_tracking(&target, push);
        }
        _ => {
            tr.broken = true;
            shared
                .pubsub
                .push_tracking(&tr.handle, Push::RedirBroken(tr.redirect));
        }
    }
}

/// Drops keys until the table holds at most `max` (0: no limit), telling
/// their readers, as Redis does when `tracking-table-max-keys` is reached.
fn evict_over(shared: &Shared, t: &mut Table, max: usize) {
    if max == 0 || t.keys.len() <= max {
        return;
    }
    let excess = t.keys.len() - max;
    let victims: Vec<Bytes> = t.keys.keys().take(excess).cloned().collect();
    for key in victims {
        let Some(ids) = t.keys.remove(&key) else {
            continue;
        };
        t.items -= ids.len();
        for id in ids {
            if let Some(tr) = t.trackers.get_mut(&id) {
                if !tr.bcast {
                    send(shared, tr, Some(vec![key.clone()]));
                }
            }
        }
    }
}

/// Applies `tracking-table-max-keys` (at start-up and after CONFIG SET).
pub fn apply_config(shared: &Shared) {
    let max = shared.config.read().tracking_table_max_keys as usize;
    let tracking = &shared.tracking;
    tracking.max_keys.store(max, Ordering::Relaxed);
    evict_over(shared, &mut tracking.table.lock(), max);
}

/// Keeps the keyspace recording expired keys while notifications want
/// `expired` events or anyone tracks (expiry invalidates too).
pub fn sync_expired_log(shared: &Shared) {
    let mut logged = shared.tracking.expired_logged.lock();
    let want = crate::notify::wants_expired(shared.pubsub.keyspace_events())
        || shared.tracking.is_active();
    if *logged != want {
        shared.store.keyspace.log_expired(want);
        *logged = want;
    }
}

/// Scripts and functions: their own keys are remembered only if a command
/// they ran read something, as in Redis.
fn is_script(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// The keys a script or function call declares (`numkeys` then the keys).
fn script_keys(args: &[Bytes]) -> Vec<Bytes> {
    let n = args
        .get(2)
        .and_then(|a| std::str::from_utf8(a).ok())
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(0);
    args.iter().skip(3).take(n).cloned().collect()
}

/// Runs a data handler (through `notify`) while some client tracks: notes
/// the keys a tracking caller reads, and what the command writes.
pub fn run_data(
    notify_flags: u32,
    f: DataFn,
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Reply {
    let before = txn.mutations().len();
    ctx.client.tracking.depth += 1;
    let reply = crate::notify::run_notified(notify_flags, f, ctx, txn, spec, args);
    ctx.client.tracking.depth -= 1;
    let local = &mut ctx.client.tracking;
    let outermost = local.depth == 0;
    let mut reads: Vec<Bytes> = Vec::new();
    if local.caches_reads() {
        if is_script(spec) {
            if outermost && std::mem::take(&mut local.script_read) {
                reads = script_keys(args);
            }
        } else if spec.flags & flags::READONLY != 0 {
            if outermost {
                reads = spec
                    .key_indexes(args)
                    .into_iter()
                    .map(|i| args[i].clone())
                    .collect();
            } else {
                local.script_read = true;
            }
        }
    }
    if outermost {
        let me = ctx.client.handle.id;
        let tracking = &ctx.shared.tracking;
        let local = &mut ctx.client.tracking;
        for m in crate::notify::in_announced_order(spec.name, &txn.mutations()[before..]) {
            match m {
                Mutation::Key { key, op, .. } if crate::watch::touches_value(op) => {
                    // A read that wrote its own key (PFCOUNT caching its
                    // count): Redis remembers the read after the command,
                    // so that write does not invalidate a key this client
                    // did not track before.
                    if reads.contains(key) && !tracking.tracks(me, key) {
                        local.spared.push(key.clone());
                    }
                    local.written.push((key.clone(), true))
                }
                Mutation::Key { .. } => {}
                Mutation::FlushDb { .. } | Mutation::FlushAll => local.flushed = true,
                Mutation::SwapDb { .. } | Mutation::Function(_) | Mutation::ReplOrigin(_) => {}
            }
        }
        if !crate::notify::wants_expired(notify_flags) {
            txn.take_expired(|_, key| local.note_expired(key));
        }
    }
    if !reads.is_empty() {
        ctx.shared
            .tracking
            .remember(ctx.shared, ctx.client.handle.id, reads.into_iter());
    }
    reply
}

/// Sends the invalidations of what the command wrote, now committed.
pub fn flush(ctx: &mut Ctx<'_>) {
    let local = &mut ctx.client.tracking;
    let spared = std::mem::take(&mut local.spared);
    if local.written.is_empty() && !local.flushed {
        return;
    }
    let written = std::mem::take(&mut local.written);
    let flushed = std::mem::take(&mut local.flushed);
    // A flush empties the table even with nobody tracking now: the keys
    // of clients that stopped are gone.
    if flushed || ctx.shared.tracking.is_active() {
        let me = ctx.client.handle.id;
        ctx.shared
            .tracking
            .invalidate(ctx.shared, Some(me), &written, flushed, &spared);
    }
}

/// Drops what a command that failed to commit wrote.
pub fn discard(ctx: &mut Ctx<'_>) {
    ctx.client.tracking.written.clear();
    ctx.client.tracking.flushed = false;
    ctx.client.tracking.spared.clear();
}

/// The keys a served blocked command (or anything committing outside a
/// connection's command) wrote, to pass to [`Tracking::invalidate`] once
/// committed; None when nobody tracks.
pub fn written_keys(shared: &Shared, muts: &[Mutation]) -> Option<Vec<(Bytes, bool)>> {
    if !shared.tracking.is_active() {
        return None;
    }
    let keys: Vec<(Bytes, bool)> = muts
        .iter()
        .filter_map(|m| match m {
            Mutation::Key { key, op, .. } if crate::watch::touches_value(op) => {
                Some((key.clone(), true))
            }
            _ => None,
        })
        .collect();
    (!keys.is_empty()).then_some(keys)
}

/// After each command, with no shard locks held: `CLIENT CACHING` applies
/// to the next command only (or to a whole MULTI ... EXEC), as in Redis;
/// and the commands that turn tracking on or off bring the expired-key log
/// in line.
pub fn after_command(ctx: &mut Ctx<'_>, name: &[u8]) {
    let is_client = name.eq_ignore_ascii_case(b"client");
    let local = &mut ctx.client.tracking;
    if local.caching && ctx.client.multi.is_none() && !is_client {
        local.caching = false;
    }
    if is_client
        || ["exec", "reset", "config"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
    {
        sync_if_changed(ctx.shared);
    }
}

/// Applies a pending change of the expired-key log; call with no shard
/// locks held.
pub fn sync_if_changed(shared: &Shared) {
    if shared.tracking.log_dirty.swap(false, Ordering::Relaxed) {
        sync_expired_log(shared);
    }
}

/// Tracking off (CLIENT TRACKING OFF, RESET, a closing connection). What
/// the current command wrote is still invalidated when it commits.
pub fn forget(shared: &Shared, client: &mut crate::client::ClientState) {
    let t = &mut client.tracking;
    if t.on {
        shared.tracking.disable(client.handle.id);
    }
    *t = Local {
        written: std::mem::take(&mut t.written),
        flushed: t.flushed,
        depth: t.depth,
        ..Local::default()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(p: &Push, proto: Protocol, subscribed: bool) -> String {
        let mut out = BytesMut::new();
        p.encode(proto, subscribed, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn invalidations_encode_per_protocol() {
        let keys = Push::Invalidate {
            keys: Some(vec![Bytes::from_static(b"k")]),
            redirected: true,
        };
        assert_eq!(
            enc(&keys, Protocol::Resp3, false),
            ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert_eq!(
            enc(&keys, Protocol::Resp2, true),
            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert_eq!(enc(&keys, Protocol::Resp2, false), "");
        let all = Push::Invalidate {
            keys: None,
            redirected: false,
        };
        assert_eq!(
            enc(&all, Protocol::Resp3, false),
            ">2\r\n$10\r\ninvalidate\r\n_\r\n"
        );
        assert_eq!(enc(&all, Protocol::Resp2, true), "");
        assert_eq!(
            enc(&Push::RedirBroken(7), Protocol::Resp3, false),
            ">2\r\n$21\r\ntracking-redir-broken\r\n:7\r\n"
        );
        assert_eq!(enc(&Push::RedirBroken(7), Protocol::Resp2, false), "");
    }
}
