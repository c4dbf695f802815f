//! `maxmemory-clients`: once the memory all clients hold passes it, the
//! clients holding the most are disconnected until the rest fit, as in
//! Redis 7. CLIENT NO-EVICT exempts a client, and replication links are
//! never evicted. What a client holds is [`ClientHandle::memory_bytes`]:
//! its input and output buffers, the messages queued for it, its growing
//! state (queued MULTI commands, watched keys, subscriptions, tracking
//! prefixes) and its fixed state.
//!
//! With a limit set, connections keep a running total of what all clients
//! hold ([`crate::client::ClientRegistry::memory_bytes`]) and [`check`] it
//! after every read and every turn that grew their memory, so a client is
//! evicted before the request that took it over the limit runs, as in
//! Redis. The background task and CONFIG SET run [`enforce`], which also
//! recounts every client (a publisher does not recount the subscribers it
//! queues messages for); so does the key eviction for `maxmemory` before
//! any key goes, as Redis's order has it.

use crate::client::ClientHandle;
use crate::state::Shared;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// After an [`enforce`] that could evict no one (every client over is
/// exempt), how long [`check`] leaves the O(clients) walk to the
/// background task.
const RETRY_AFTER_NOTHING_MS: u64 = 10;

/// When an [`enforce`] last found no client to evict (unix ms).
static NOTHING_TO_EVICT_MS: AtomicU64 = AtomicU64::new(0);

/// One [`enforce`] at a time: two threads over the limit at once would
/// each pick the same largest client, and together evict more than needed.
static ENFORCING: Mutex<()> = Mutex::new(());

/// Called by a connection whose memory grew, with `maxmemory-clients`
/// set: O(1) unless all clients together hold more than the limit.
pub fn check(shared: &Shared) {
    let limit = shared.evict.clients_limit();
    if limit == 0 || shared.clients.memory_bytes() as u64 <= limit {
        return;
    }
    let last = NOTHING_TO_EVICT_MS.load(Ordering::Relaxed);
    if crate::util::now_ms().saturating_sub(last) < RETRY_AFTER_NOTHING_MS {
        return;
    }
    enforce(shared);
}

/// Recounts every client, then disconnects the clients holding the most
/// memory while all clients together hold more than `maxmemory-clients`.
/// Returns the memory the disconnected clients held (freed as their
/// connections close).
pub fn enforce(shared: &Shared) -> u64 {
    let limit = shared.evict.clients_limit();
    if limit == 0 {
        return 0;
    }
    let _one_at_a_time = ENFORCING.lock();
    let clients = shared.clients.all();
    for h in &clients {
        h.recount();
    }
    if shared.clients.memory_bytes() as u64 <= limit {
        return 0;
    }
    let mut candidates: Vec<(usize, &Arc<ClientHandle>)> = clients
        .iter()
        .filter(|h| evictable(h))
        .map(|h| (h.memory_bytes(), h))
        .collect();
    candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
    let mut evicted = 0;
    let mut released = 0;
    for (bytes, h) in candidates {
        let total = shared.clients.memory_bytes() as u64;
        if total <= limit {
            break;
        }
        tracing::warn!(
            client = h.id,
            addr = %h.addr,
            bytes,
            total,
            limit,
            "evicting a client: all clients hold more than maxmemory-clients"
        );
        // Takes the client out of the running total at once.
        h.kill();
        released += bytes as u64;
        evicted += 1;
    }
    if evicted == 0 {
        NOTHING_TO_EVICT_MS.store(crate::util::now_ms(), Ordering::Relaxed);
    }
    shared.stats.evicted_clients.add(evicted);
    released
}

/// Redis evicts normal and pub/sub clients only.
fn evictable(h: &ClientHandle) -> bool {
    !h.no_evict.load(Ordering::Relaxed) && !h.replication.load(Ordering::Relaxed) && !h.is_killed()
}

/// `maxmemory-clients` in bytes: a memory value, or a percentage of
/// `maxmemory` (none while `maxmemory` is 0). 0: no limit.
pub fn limit_bytes(setting: &str, maxmemory: u64) -> u64 {
    match setting.strip_suffix('%') {
        Some(p) => p
            .parse::<u64>()
            .map_or(0, |p| maxmemory.saturating_mul(p) / 100),
        None => crate::config::parse_memory(setting).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_bytes_or_a_share_of_maxmemory() {
        assert_eq!(limit_bytes("0", 1 << 30), 0);
        assert_eq!(limit_bytes("3mb", 0), 3 << 20);
        assert_eq!(limit_bytes("10%", 1000), 100);
        assert_eq!(limit_bytes("10%", 0), 0);
    }
}
