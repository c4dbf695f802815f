//! Pub/sub: who listens to which channel, pattern or shard channel, and
//! each connection's mailbox of messages not yet written to it.
//!
//! PUBLISH never waits for a subscriber. It appends the message to each
//! receiving connection's [`Mailbox`] and wakes that connection, whose loop
//! encodes it for the connection's protocol on its next turn. A mailbox is
//! bounded by `client-output-buffer-limit pubsub`: as in Redis, a
//! subscriber that does not keep up is disconnected, so a slow reader can
//! never make the server's memory grow without bound.
//!
//! Nothing here knows the keyspace; keyspace notifications
//! (`crate::notify`) publish through [`PubSub::publish`] like PUBLISH does.

use crate::client::ClientHandle;
use crate::config::{Config, OutputBufferLimit, OutputCheck, SharedOutputLimit, PUBSUB_CLASS};
use crate::glob::glob_match;
use bytes::{Bytes, BytesMut};
use durakv_protocol::frame::{write_bulk, write_push_header};
use durakv_protocol::Protocol;
use indexmap::IndexSet;
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a queued message costs beyond its strings, counted against the
/// output buffer limit (the queue entry and the RESP framing).
const MESSAGE_OVERHEAD_BYTES: usize = 64;
/// Most message bytes one turn of a connection's loop encodes: a backlog
/// stays in the mailbox (where the limit sees it) instead of ballooning the
/// write buffer.
pub const DELIVERY_BATCH_BYTES: usize = 64 * 1024;

/// The three subscription namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel = 0,
    Pattern = 1,
    Shard = 2,
}

/// One message on its way to one client.
pub struct Message {
    body: Body,
    /// The LSN that must be durable before the client may see this message,
    /// because it reveals a write (0: none).
    pub dependency_lsn: u64,
}

enum Body {
    Published(Published),
    /// A client tracking message (`crate::tracking`).
    Tracking(crate::tracking::Push),
    /// Bytes ready to send as they are: a MONITOR line (`crate::monitor`).
    Raw(Bytes),
}

/// A published message, to one subscriber.
struct Published {
    /// The pattern that matched, for a `pmessage`.
    pattern: Option<Bytes>,
    shard: bool,
    channel: Bytes,
    payload: Bytes,
}

impl Message {
    fn cost_bytes(&self) -> usize {
        match &self.body {
            Body::Published(m) => {
                m.channel.len()
                    + m.payload.len()
                    + m.pattern.as_ref().map_or(0, Bytes::len)
                    + MESSAGE_OVERHEAD_BYTES
            }
            Body::Tracking(p) => p.cost_bytes(),
            Body::Raw(b) => b.len() + MESSAGE_OVERHEAD_BYTES,
        }
    }

    /// An invalidation, which a connection delivers only after the reply
    /// of the command it is executing.
    pub fn is_tracking(&self) -> bool {
        matches!(self.body, Body::Tracking(_))
    }

    /// `message`/`smessage <channel> <payload>` or `pmessage <pattern>
    /// <channel> <payload>`: a push in RESP3, an array in RESP2; tracking
    /// messages as `crate::tracking::Push` says (`subscribed`: the
    /// receiving connection has subscriptions).
    pub fn encode(&self, proto: Protocol, subscribed: bool, out: &mut BytesMut) {
        let m = match &self.body {
            Body::Published(m) => m,
            Body::Tracking(p) => return p.encode(proto, subscribed, out),
            Body::Raw(b) => return out.extend_from_slice(b),
        };
        match &m.pattern {
            Some(p) => {
                write_push_header(out, proto, 4);
                write_bulk(out, b"pmessage");
                write_bulk(out, p);
            }
            None => {
                write_push_header(out, proto, 3);
                write_bulk(out, if m.shard { b"smessage" } else { b"message" });
            }
        }
        write_bulk(out, &m.channel);
        write_bulk(out, &m.payload);
    }
}

/// Bytes of invalidations queued in all mailboxes, which `maxmemory` does
/// not count (INFO's `mem_not_counted_for_evict`): an eviction queues one
/// for each reader of the key, its connection writes them out at its next
/// turn, and counted they would make the next command evict again, then
/// again for those evictions' own invalidations. Redis writes a client's
/// replies before it runs the next command, so its count never sees them.
static TRACKING_QUEUED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// What [`TRACKING_QUEUED_BYTES`] holds now.
pub fn tracking_queued_bytes() -> usize {
    TRACKING_QUEUED_BYTES.load(Ordering::Relaxed)
}

/// A connection's queue of undelivered messages (on its [`ClientHandle`],
/// where publishers reach it) and its subscription counts.
#[derive(Default)]
pub struct Mailbox {
    inbox: Mutex<Inbox>,
    /// Bytes queued, read without the lock: CLIENT LIST's `omem`, and the
    /// connection's "anything for me?" before each reply.
    queued_bytes: AtomicUsize,
    queued_messages: AtomicUsize,
    /// Subscriptions per [`Kind`], for CLIENT LIST's `sub=`, `psub=`, `ssub=`.
    counts: [AtomicUsize; 3],
}

#[derive(Default)]
struct Inbox {
    messages: VecDeque<Message>,
    bytes: usize,
    /// Of `bytes`, those of invalidations ([`TRACKING_QUEUED_BYTES`]).
    tracking_bytes: usize,
    /// Since when the queue has been over the soft limit.
    over_soft_since: Option<Instant>,
}

impl Mailbox {
    pub fn has_mail(&self) -> bool {
        self.queued_bytes.load(Ordering::Acquire) != 0
    }

    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes.load(Ordering::Relaxed)
    }

    pub fn queued_messages(&self) -> usize {
        self.queued_messages.load(Ordering::Relaxed)
    }

    pub fn subscriptions(&self, kind: Kind) -> usize {
        self.counts[kind as usize].load(Ordering::Relaxed)
    }

    /// Subscribed to anything: Redis's `P` flag and `pubsub` client type.
    pub fn is_subscriber(&self) -> bool {
        self.counts.iter().any(|c| c.load(Ordering::Relaxed) != 0)
    }

    /// Takes the oldest messages, up to [`DELIVERY_BATCH_BYTES`] (at least
    /// one), stopping before the first tracking message if `before_reply`.
    /// The second value says whether more remain that the byte limit left.
    pub fn take_batch(&self, before_reply: bool) -> (VecDeque<Message>, bool) {
        let mut inbox = self.inbox.lock();
        let stop_at_tracking = before_reply && inbox.messages.iter().any(Message::is_tracking);
        let batch = if inbox.bytes <= DELIVERY_BATCH_BYTES && !stop_at_tracking {
            inbox.bytes = 0;
            let tracking = inbox.tracking_bytes;
            inbox.untrack(tracking);
            std::mem::take(&mut inbox.messages)
        } else {
            let mut batch = VecDeque::new();
            let mut taken = 0;
            let mut tracking = 0;
            while taken < DELIVERY_BATCH_BYTES {
                if stop_at_tracking && inbox.messages.front().is_some_and(Message::is_tracking) {
                    break;
                }
                let Some(m) = inbox.messages.pop_front() else {
                    break;
                };
                let cost = m.cost_bytes();
                taken += cost;
                if m.is_tracking() {
                    tracking += cost;
                }
                batch.push_back(m);
            }
            inbox.bytes -= taken;
            inbox.untrack(tracking);
            batch
        };
        self.queued_bytes.store(inbox.bytes, Ordering::Release);
        self.queued_messages
            .store(inbox.messages.len(), Ordering::Relaxed);
        let held_back =
            stop_at_tracking && inbox.messages.front().is_some_and(Message::is_tracking);
        let more = !inbox.messages.is_empty() && !held_back;
        (batch, more)
    }

    /// Drops everything queued (the connection is closing).
    fn clear(&self) {
        let mut inbox = self.inbox.lock();
        // The old queue's invalidations leave the count as it drops.
        *inbox = Inbox::default();
        self.queued_bytes.store(0, Ordering::Release);
        self.queued_messages.store(0, Ordering::Relaxed);
    }
}

impl Inbox {
    /// Takes `bytes` of invalidations off this queue's and the global count.
    fn untrack(&mut self, bytes: usize) {
        if bytes != 0 {
            self.tracking_bytes -= bytes;
            TRACKING_QUEUED_BYTES.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        let tracking = self.tracking_bytes;
        self.untrack(tracking);
    }
}

/// What offering a message to a mailbox came to.
enum Offer {
    Queued,
    /// Now over the soft limit for the first time: the periodic check must
    /// watch this client.
    QueuedOverSoft,
    /// Over a limit: the client must go.
    Overflow,
}

impl Mailbox {
    /// Queues `m` unless that takes the subscriber's output past `limit`:
    /// what is queued here plus `written_later`, the replies and messages
    /// its connection holds but has not written yet, as Redis counts one
    /// output buffer.
    fn offer(&self, m: Message, limit: OutputBufferLimit, written_later: usize) -> Offer {
        let cost = m.cost_bytes();
        let mut inbox = self.inbox.lock();
        let total = (inbox.bytes + cost + written_later) as u64;
        let offer = match limit.check(total, &mut inbox.over_soft_since) {
            OutputCheck::Exceeded => return Offer::Overflow,
            OutputCheck::NewlyOverSoft => Offer::QueuedOverSoft,
            OutputCheck::Within => Offer::Queued,
        };
        if m.is_tracking() {
            inbox.tracking_bytes += cost;
            TRACKING_QUEUED_BYTES.fetch_add(cost, Ordering::Relaxed);
        }
        inbox.messages.push_back(m);
        inbox.bytes += cost;
        self.queued_bytes.store(inbox.bytes, Ordering::Release);
        self.queued_messages
            .store(inbox.messages.len(), Ordering::Relaxed);
        offer
    }

    /// Whether a queue over the soft limit has been so for too long; forgets
    /// the timer once the queue is back under it.
    fn soft_limit_expired(&self, limit: OutputBufferLimit, written_later: usize) -> Option<bool> {
        let mut inbox = self.inbox.lock();
        let since = inbox.over_soft_since?;
        if limit.soft_bytes == 0 || ((inbox.bytes + written_later) as u64) <= limit.soft_bytes {
            inbox.over_soft_since = None;
            return None;
        }
        Some(since.elapsed() > Duration::from_secs(limit.soft_secs))
    }
}

/// A connection's own subscriptions (in its `ClientState`).
#[derive(Default)]
pub struct Subscriptions {
    /// In the order subscribed (a removal moves the last one into its
    /// place), so that an UNSUBSCRIBE without arguments answers in the same
    /// order for the same subscriptions, as Redis does.
    names: [IndexSet<Bytes>; 3],
    /// What the names take, as `maxmemory-clients` counts them.
    bytes: usize,
}

impl Subscriptions {
    /// What the subscriptions take: each name and its entries here and in
    /// the registry.
    pub fn memory_bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.names.iter().all(IndexSet::is_empty)
    }

    pub fn count(&self, kind: Kind) -> usize {
        self.names[kind as usize].len()
    }

    pub fn names(&self, kind: Kind) -> Vec<Bytes> {
        self.names[kind as usize].iter().cloned().collect()
    }
}

/// Subscribers by name, for one namespace.
#[derive(Default)]
struct Registry {
    names: RwLock<HashMap<Bytes, HashMap<u64, Arc<ClientHandle>>>>,
    /// How many names have subscribers, read without the lock (PUBLISH skips
    /// the pattern registry when it is empty).
    len: AtomicUsize,
}

impl Registry {
    fn add(&self, name: &Bytes, h: &Arc<ClientHandle>) {
        let mut names = self.names.write();
        names
            .entry(name.clone())
            .or_default()
            .insert(h.id, h.clone());
        self.len.store(names.len(), Ordering::Relaxed);
    }

    fn remove(&self, name: &[u8], id: u64) {
        let mut names = self.names.write();
        if let Some(subs) = names.get_mut(name) {
            subs.remove(&id);
            if subs.is_empty() {
                names.remove(name);
            }
        }
        self.len.store(names.len(), Ordering::Relaxed);
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn subscribers(&self, name: &[u8]) -> usize {
        self.names.read().get(name).map_or(0, HashMap::len)
    }

    /// The names client `id` is subscribed to.
    fn of_client(&self, id: u64) -> Vec<Bytes> {
        self.names
            .read()
            .iter()
            .filter(|(_, subs)| subs.contains_key(&id))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Names with subscribers, those matching `pattern` if given.
    fn matching(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.names
            .read()
            .keys()
            .filter(|n| pattern.is_none_or(|p| glob_match(p, n, false)))
            .cloned()
            .collect()
    }
}

/// Every subscription on the server, the pub/sub limits, and the keyspace
/// notification classes in force.
#[derive(Default)]
pub struct PubSub {
    channels: Registry,
    patterns: Registry,
    shard_channels: Registry,
    /// Connections subscribed to anything (INFO `pubsub_clients`).
    subscribed_clients: AtomicUsize,
    /// `client-output-buffer-limit pubsub`, copied out of the configuration
    /// so publishers never take the configuration lock.
    limit: SharedOutputLimit,
    /// Effective `notify-keyspace-events` (see `crate::notify::effective`).
    keyspace_events: AtomicU32,
    /// Clients whose mailbox went over the soft limit, which the periodic
    /// check disconnects once they have been over it too long even if
    /// nothing more is published to them.
    over_soft: Mutex<HashMap<u64, Arc<ClientHandle>>>,
}

impl PubSub {
    /// Takes the pub/sub settings from `config`. Returns whether expired
    /// keys must now be recorded, if that changed.
    pub fn configure(&self, config: &Config) -> Option<bool> {
        self.limit
            .store(config.client_output_buffer_limit[PUBSUB_CLASS]);
        let flags = crate::notify::effective(config.notify_keyspace_events);
        let before = self.keyspace_events.swap(flags, Ordering::Relaxed);
        let wants = crate::notify::wants_expired(flags);
        (wants != crate::notify::wants_expired(before)).then_some(wants)
    }

    /// The keyspace notification classes in force; 0 when off.
    #[inline]
    pub fn keyspace_events(&self) -> u32 {
        self.keyspace_events.load(Ordering::Relaxed)
    }

    fn limit(&self) -> OutputBufferLimit {
        self.limit.load()
    }

    fn registry(&self, kind: Kind) -> &Registry {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard_channels,
        }
    }

    /// Subscribes the connection to `name`; false if it already was.
    pub fn subscribe(
        &self,
        subs: &mut Subscriptions,
        h: &Arc<ClientHandle>,
        kind: Kind,
        name: &Bytes,
    ) -> bool {
        let was_empty = subs.is_empty();
        if !subs.names[kind as usize].insert(name.clone()) {
            return false;
        }
        subs.bytes += name.len() + crate::client::ENTRY_OVERHEAD_BYTES;
        self.registry(kind).add(name, h);
        h.mailbox.counts[kind as usize].store(subs.count(kind), Ordering::Relaxed);
        if was_empty {
            self.subscribed_clients.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Unsubscribes the connection from `name`; false if it was not.
    pub fn unsubscribe(
        &self,
        subs: &mut Subscriptions,
        h: &ClientHandle,
        kind: Kind,
        name: &[u8],
    ) -> bool {
        if !subs.names[kind as usize].swap_remove(name) {
            return false;
        }
        subs.bytes -= name.len() + crate::client::ENTRY_OVERHEAD_BYTES;
        self.registry(kind).remove(name, h.id);
        h.mailbox.counts[kind as usize].store(subs.count(kind), Ordering::Relaxed);
        if subs.is_empty() {
            self.subscribed_clients.fetch_sub(1, Ordering::Relaxed);
        }
        true
    }

    /// Unsubscribes the connection from every name of `kind`; returns them.
    pub fn unsubscribe_all(
        &self,
        subs: &mut Subscriptions,
        h: &ClientHandle,
        kind: Kind,
    ) -> Vec<Bytes> {
        let names = subs.names(kind);
        for n in &names {
            self.unsubscribe(subs, h, kind, n);
        }
        names
    }

    /// Every subscription of every kind (RESET); queued messages stay.
    pub fn unsubscribe_everything(&self, subs: &mut Subscriptions, h: &ClientHandle) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            self.unsubscribe_all(subs, h, kind);
        }
    }

    /// Forgets a closing connection: its subscriptions and its queue.
    pub fn forget(&self, subs: &mut Subscriptions, h: &ClientHandle) {
        self.unsubscribe_everything(subs, h);
        self.over_soft.lock().remove(&h.id);
        h.mailbox.clear();
    }

    /// Delivers `payload` to the subscribers of `channel` (and, unless it
    /// is a shard channel, to those of every matching pattern). Returns how
    /// many received it.
    pub fn publish(&self, channel: &Bytes, payload: &Bytes, shard: bool, dep: u64) -> usize {
        let limit = self.limit();
        let mut receivers = 0;
        let message = |pattern: Option<&Bytes>| Message {
            body: Body::Published(Published {
                pattern: pattern.cloned(),
                shard,
                channel: channel.clone(),
                payload: payload.clone(),
            }),
            dependency_lsn: dep,
        };
        let exact = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        if let Some(subs) = exact.names.read().get(channel) {
            for h in subs.values() {
                receivers += usize::from(self.deliver(h, message(None), limit));
            }
        }
        if !shard && self.patterns.len() > 0 {
            for (pattern, subs) in self.patterns.names.read().iter() {
                if glob_match(pattern, channel, false) {
                    for h in subs.values() {
                        receivers += usize::from(self.deliver(h, message(Some(pattern)), limit));
                    }
                }
            }
        }
        receivers
    }

    /// The clients a publish to `channel` would reach now, stopping once
    /// more than `most` are found.
    pub fn subscribers_to(
        &self,
        channel: &[u8],
        shard: bool,
        most: usize,
    ) -> Vec<Arc<ClientHandle>> {
        let exact = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        let mut found = Vec::new();
        let mut take = |subs: &HashMap<u64, Arc<ClientHandle>>| {
            found.extend(subs.values().take(most + 1 - found.len()).cloned());
            found.len() > most
        };
        if exact.len() > 0 {
            if let Some(subs) = exact.names.read().get(channel) {
                if take(subs) {
                    return found;
                }
            }
        }
        if !shard && self.patterns.len() > 0 {
            for (pattern, subs) in self.patterns.names.read().iter() {
                if glob_match(pattern, channel, false) && take(subs) {
                    break;
                }
            }
        }
        found
    }

    /// How many a publish to `channel` would reach now (for a message held
    /// back until its MULTI or script commits).
    pub fn receivers(&self, channel: &[u8], shard: bool) -> usize {
        if shard {
            return self.shard_channels.subscribers(channel);
        }
        let mut n = self.channels.subscribers(channel);
        if self.patterns.len() > 0 {
            n += self
                .patterns
                .names
                .read()
                .iter()
                .filter(|(p, _)| glob_match(p, channel, false))
                .map(|(_, subs)| subs.len())
                .sum::<usize>();
        }
        n
    }

    /// Queues a client tracking message for `h` (never held for fsync:
    /// see `crate::tracking`), under the same output limit as messages.
    pub fn push_tracking(&self, h: &Arc<ClientHandle>, push: crate::tracking::Push) -> bool {
        self.push_now(h, Body::Tracking(push))
    }

    /// Queues bytes to send to `h` as they are (a MONITOR line), held
    /// until `dep` is durable, under the same output limit as messages.
    pub fn push_raw(&self, h: &Arc<ClientHandle>, bytes: Bytes, dep: u64) -> bool {
        let m = Message {
            body: Body::Raw(bytes),
            dependency_lsn: dep,
        };
        self.deliver(h, m, self.limit())
    }

    /// Queues a message no write holds back.
    fn push_now(&self, h: &Arc<ClientHandle>, body: Body) -> bool {
        let m = Message {
            body,
            dependency_lsn: 0,
        };
        self.deliver(h, m, self.limit())
    }

    fn deliver(&self, h: &Arc<ClientHandle>, m: Message, limit: OutputBufferLimit) -> bool {
        if h.is_killed() {
            return false;
        }
        let written_later = h.output_bytes.load(Ordering::Relaxed);
        match h.mailbox.offer(m, limit, written_later) {
            Offer::Queued => {}
            Offer::QueuedOverSoft => {
                self.over_soft.lock().insert(h.id, h.clone());
            }
            Offer::Overflow => {
                disconnect_slow(h);
                return false;
            }
        }
        h.wake.notify_one();
        true
    }

    /// Disconnects subscribers that stayed over the soft limit for longer
    /// than allowed while nothing was published to them. Run periodically.
    pub fn enforce_soft_limit(&self) {
        let mut watched = self.over_soft.lock();
        if watched.is_empty() {
            return;
        }
        let limit = self.limit();
        watched.retain(|_, h| {
            match h
                .mailbox
                .soft_limit_expired(limit, h.output_bytes.load(Ordering::Relaxed))
            {
                _ if h.is_killed() => false,
                None => false,
                Some(true) => {
                    disconnect_slow(h);
                    false
                }
                Some(false) => true,
            }
        });
    }

    /// Every subscription of client `id`, of each kind (ACL SETUSER checks
    /// them when a user's channels shrink). Scans every name.
    pub fn subscriptions_of(&self, id: u64) -> Vec<(Kind, Bytes)> {
        let mut out = Vec::new();
        for (kind, r) in [
            (Kind::Channel, &self.channels),
            (Kind::Pattern, &self.patterns),
            (Kind::Shard, &self.shard_channels),
        ] {
            out.extend(r.of_client(id).into_iter().map(|n| (kind, n)));
        }
        out
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS.
    pub fn channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let r = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        r.matching(pattern)
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB for one channel.
    pub fn numsub(&self, shard: bool, channel: &[u8]) -> usize {
        let r = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        r.subscribers(channel)
    }

    /// INFO `pubsub_channels`, `pubsub_patterns`, `pubsubshard_channels`,
    /// `pubsub_clients`.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
            self.subscribed_clients.load(Ordering::Relaxed),
        )
    }
}

fn disconnect_slow(h: &ClientHandle) {
    tracing::warn!(
        client = h.id,
        addr = %h.addr,
        omem = h.mailbox.queued_bytes(),
        "closing a subscriber over client-output-buffer-limit pubsub"
    );
    h.kill();
}

/// Applies the pub/sub settings of the current configuration (at start-up
/// and after every CONFIG SET).
pub fn apply_config(shared: &crate::state::Shared) {
    shared.pubsub.configure(&shared.config.read());
    // Tracking needs expired keys too: it decides with notifications, once
    // the command holds no shard locks (CONFIG SET may run inside EXEC).
    shared.tracking.expired_log_changed();
}
