//! `maxmemory-clients`: once the memory all clients hold passes it, the
//! clients holding the most are disconnected until the rest fit, as in
//! Redis 7. CLIENT NO-EVICT exempts a client, and replication links are
//! never evicted. What a client holds is [`ClientHandle::memory_bytes`]:
//! its input and output buffers, the messages queued for it, and its fixed
//! state.
//!
//! Checked by the background task (`hz` times a second) and before keys
//! are evicted for `maxmemory`, so that with both set a burst of client
//! memory costs clients, not keys, as Redis's order of the two has it.

use crate::client::ClientHandle;
use crate::state::Shared;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Most often a connection whose buffers grew looks at all clients
/// ([`enforce_soon`]): the look is O(clients).
const LOOK_EVERY_MS: u64 = 10;

/// When a connection last looked (unix ms).
static LOOKED_MS: AtomicU64 = AtomicU64::new(0);

/// Called by a connection whose buffers grew, with `maxmemory-clients`
/// set: enforces it unless another did within the last few milliseconds.
/// Redis looks after every read and before every command; without this a
/// client filling its buffers fast could pass the limit by what it reads
/// in a tick of the background task.
pub fn enforce_soon(shared: &Shared) {
    let now = crate::util::now_ms();
    let last = LOOKED_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) >= LOOK_EVERY_MS
        && LOOKED_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        enforce(shared);
    }
}

/// Disconnects the clients holding the most memory while all clients
/// together hold more than `maxmemory-clients`. Returns the memory the
/// disconnected clients held (freed as their connections close).
pub fn enforce(shared: &Shared) -> u64 {
    let limit = shared.evict.clients_limit();
    if limit == 0 {
        return 0;
    }
    let clients = shared.clients.all();
    let mut total: u64 = clients.iter().map(|h| h.memory_bytes() as u64).sum();
    if total <= limit {
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
        h.kill();
        total = total.saturating_sub(bytes as u64);
        released += bytes as u64;
        evicted += 1;
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
