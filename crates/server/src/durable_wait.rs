//! Connections holding replies, indexed by what they wait for, so that a
//! durable-LSN change wakes only the connections it releases. Waking every
//! holder on every change (a broadcast) cost a task poll per holder per
//! fsync, and with several WAL directories per stream acknowledgement.
//!
//! Each connection registers at most one dependency at a time, the local
//! part of its oldest held reply (`durakv_engine::dep`). A registration that
//! is met before it is woken is left in place and woken once later, which
//! costs one spurious poll and saves a lock per released reply.

use durakv_engine::dep;
use durakv_engine::wal::Wal;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::future::Future;
use std::task::{Poll, Waker};

/// Waiters by (LSN, client id): index 0 waits for the durable LSN (every
/// stream), index `s + 1` for stream `s`'s acknowledged LSN.
pub struct DurableWaiters {
    by_stream: Mutex<Vec<BTreeMap<(u64, u64), Waker>>>,
}

impl DurableWaiters {
    pub fn new(streams: usize) -> DurableWaiters {
        DurableWaiters {
            by_stream: Mutex::new(vec![BTreeMap::new(); streams + 1]),
        }
    }

    /// Resolves once the local dependency `dep` is met (`Wal::dep_met`),
    /// or the log has failed and it never will be.
    pub fn met<'a>(&'a self, wal: &'a Wal, client: u64, dep: u64) -> impl Future<Output = ()> + 'a {
        let done = move || wal.dep_met(dep) || wal.is_failed();
        std::future::poll_fn(move |cx| {
            if done() {
                return Poll::Ready(());
            }
            self.register(client, dep, cx.waker());
            // The log may have moved between the check and the
            // registration; it updates its LSNs before `wake_met` takes the
            // lock, so one of the two sees the other. A failure is seen by
            // `wake_all`'s caller's next round.
            if done() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    fn register(&self, client: u64, d: u64, waker: &Waker) {
        let mut maps = self.by_stream.lock();
        // A stream the log does not have: only the durable LSN meets it.
        let slot = dep::stream(d)
            .map(|s| s + 1)
            .filter(|&s| s < maps.len())
            .unwrap_or(0);
        maps[slot]
            .entry((dep::lsn(d), client))
            .and_modify(|w| {
                if !w.will_wake(waker) {
                    w.clone_from(waker)
                }
            })
            .or_insert_with(|| waker.clone());
    }

    /// Wakes the waiters whose dependency the log now meets, given its
    /// durable LSN and each stream's acknowledged LSN (the WAL's durable
    /// listener).
    pub fn wake_met(&self, durable: u64, acked: &[u64]) {
        let mut met = Vec::new();
        {
            let mut maps = self.by_stream.lock();
            for (slot, map) in maps.iter_mut().enumerate() {
                let upto = match slot {
                    0 => durable,
                    s => acked.get(s - 1).map_or(durable, |&a| a.max(durable)),
                };
                if map.first_key_value().is_some_and(|(k, _)| k.0 <= upto) {
                    let rest = map.split_off(&(upto + 1, 0));
                    met.extend(std::mem::replace(map, rest).into_values());
                }
            }
        }
        for w in met {
            w.wake();
        }
    }

    /// Wakes every waiter: the log failed, and held replies become errors.
    pub fn wake_all(&self) {
        let all: Vec<Waker> = {
            let mut maps = self.by_stream.lock();
            maps.iter_mut()
                .flat_map(|m| std::mem::take(m).into_values())
                .collect()
        };
        for w in all {
            w.wake();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_stream.lock().iter().map(|m| m.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn woken(c: &Count) -> usize {
        c.0.load(Ordering::SeqCst)
    }

    #[test]
    fn wakes_only_what_the_log_meets() {
        let w = DurableWaiters::new(2);
        let (plain, pw) = waker();
        let (s0, s0w) = waker();
        let (s1, s1w) = waker();
        w.register(1, 10, &pw);
        w.register(2, dep::on_stream(0, 12), &s0w);
        w.register(3, dep::on_stream(1, 11), &s1w);
        // Stream 0 acknowledged 12: only its waiter goes.
        w.wake_met(9, &[12, 9]);
        assert_eq!((woken(&plain), woken(&s0), woken(&s1)), (0, 1, 0));
        assert_eq!(w.len(), 2);
        // The durable LSN meets a plain dependency and any stream's.
        w.wake_met(11, &[12, 9]);
        assert_eq!((woken(&plain), woken(&s0), woken(&s1)), (1, 1, 1));
        assert_eq!(w.len(), 0);
        w.wake_met(20, &[20, 20]);
        assert_eq!(
            (woken(&plain), woken(&s0), woken(&s1)),
            (1, 1, 1),
            "woken once"
        );
    }

    #[test]
    fn a_client_registers_once_per_dependency_and_failure_wakes_all() {
        let w = DurableWaiters::new(1);
        let (a, aw) = waker();
        let (b, bw) = waker();
        w.register(7, 5, &aw);
        w.register(7, 5, &aw);
        w.register(7, 5, &bw);
        assert_eq!(
            w.len(),
            1,
            "same client and dependency: one entry, newest waker"
        );
        // A stream the log does not have falls back to the durable LSN.
        let (c, cw) = waker();
        w.register(8, dep::on_stream(5, 6), &cw);
        w.wake_met(4, &[100]);
        assert_eq!(woken(&c), 0);
        w.wake_all();
        assert_eq!((woken(&a), woken(&b), woken(&c)), (0, 1, 1));
        assert_eq!(w.len(), 0);
    }
}
