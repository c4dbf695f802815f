//! Connections holding replies, indexed by what they wait for, so that a
//! durable-LSN change wakes only the connections it releases. Waking every
//! holder on every change (a broadcast) cost a task poll per holder per
//! fsync, and with several WAL directories per stream acknowledgement.
//!
//! Each connection waits for one dependency at a time, the local part of
//! its oldest held reply (`durakv_engine::dep`), and registers it once: it
//! remembers what it registered (`Registration`), so that a poll for
//! another reason (a read, a published message) takes no lock. A
//! registration is removed only when the log meets it (`wake_met`) or
//! fails (`wake_all`), and either makes the dependency met for good, so a
//! connection that still waits for what it registered is still registered.
//! One met before it is woken is left in place and woken once later, which
//! costs one spurious poll and saves a lock per released reply.
//!
//! The waits are kept in LSN order in a ring buffer, and a wake pops what
//! the log now meets from its front. A connection registers right after
//! its write is appended, so a new wait almost always goes at the back (a
//! binary search, then an insert that moves the few later ones). A map
//! keyed by (LSN, client) did the same with a node search per
//! registration and a split per wake: 2% of the server's CPU at `full`
//! under `durakv bench memtier`; a binary heap, half as much, most of it
//! sifting on each pop.

use crate::client::ClientHandle;
use durakv_engine::dep;
use durakv_engine::wal::Wal;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::task::{Poll, Waker};

/// Waiters in LSN order, least first: index 0 waits for the durable LSN
/// (every stream), index `s + 1` for stream `s`'s acknowledged LSN. A
/// waiter that parked its replies (`crate::parked`) has its connection's
/// handle with it, for the flusher to write them.
pub struct DurableWaiters {
    by_stream: Mutex<Vec<VecDeque<Waiter>>>,
    /// Writes the replies of the waiters that parked them.
    pub flusher: crate::parked::Flusher,
}

type Waiter = (u64, Waker, Option<Arc<ClientHandle>>);

/// What one connection last registered: the dependency, the waker it
/// registered with, and whether its replies were parked.
#[derive(Default)]
pub struct Registration(Option<(u64, Waker, bool)>);

impl DurableWaiters {
    pub fn new(streams: usize) -> DurableWaiters {
        DurableWaiters {
            by_stream: Mutex::new(vec![VecDeque::new(); streams + 1]),
            flusher: Default::default(),
        }
    }

    /// Resolves once the local dependency `dep` is met (`Wal::dep_met`),
    /// or the log has failed and it never will be. `reg` is the
    /// connection's own, kept from one wait to the next. `parked`: the
    /// connection parked its replies, and the flusher writes them rather
    /// than waking it when it can (`crate::parked`).
    pub fn met<'a>(
        &'a self,
        wal: &'a Wal,
        dep: u64,
        reg: &'a mut Registration,
        parked: Option<&'a Arc<ClientHandle>>,
    ) -> impl Future<Output = ()> + 'a {
        self.met_when(dep, reg, parked, move || {
            wal.dep_met(dep) || wal.is_failed()
        })
    }

    fn met_when<'a>(
        &'a self,
        dep: u64,
        reg: &'a mut Registration,
        parked: Option<&'a Arc<ClientHandle>>,
        done: impl Fn() -> bool + 'a,
    ) -> impl Future<Output = ()> + 'a {
        std::future::poll_fn(move |cx| {
            if done() {
                return Poll::Ready(());
            }
            if matches!(&reg.0, Some((d, w, p)) if *d == dep && *p == parked.is_some() && w.will_wake(cx.waker()))
            {
                return Poll::Pending;
            }
            self.register(dep, cx.waker(), parked.cloned());
            reg.0 = Some((dep, cx.waker().clone(), parked.is_some()));
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

    fn register(&self, d: u64, waker: &Waker, parked: Option<Arc<ClientHandle>>) {
        let lsn = dep::lsn(d);
        let mut queues = self.by_stream.lock();
        // A stream the log does not have: only the durable LSN meets it.
        let slot = dep::stream(d)
            .map(|s| s + 1)
            .filter(|&s| s < queues.len())
            .unwrap_or(0);
        let q = &mut queues[slot];
        let at = q.partition_point(|w| w.0 <= lsn);
        q.insert(at, (lsn, waker.clone(), parked));
    }

    /// Wakes the waiters whose dependency the log now meets, given its
    /// durable LSN and each stream's acknowledged LSN (the WAL's durable
    /// listener). Those that parked their replies are queued for the
    /// flusher (`crate::parked`), woken once for them all.
    pub fn wake_met(&self, durable: u64, acked: &[u64]) {
        let mut met: SmallVec<[(Waker, Option<Arc<ClientHandle>>); 32]> = SmallVec::new();
        {
            let mut queues = self.by_stream.lock();
            for (slot, q) in queues.iter_mut().enumerate() {
                let upto = match slot {
                    0 => durable,
                    s => acked.get(s - 1).map_or(durable, |&a| a.max(durable)),
                };
                let n = q.partition_point(|w| w.0 <= upto);
                met.extend(q.drain(..n).map(|w| (w.1, w.2)));
            }
        }
        let mut flush = false;
        for (w, parked) in met {
            match parked {
                Some(handle) => {
                    self.flusher.due(handle, w);
                    flush = true;
                }
                None => w.wake(),
            }
        }
        if flush {
            self.flusher.wake();
        }
    }

    /// Wakes every waiter: the log failed, and held replies become errors.
    pub fn wake_all(&self) {
        let all: Vec<Waker> = {
            let mut queues = self.by_stream.lock();
            queues
                .iter_mut()
                .flat_map(|q| std::mem::take(q).into_iter().map(|w| w.1))
                .collect()
        };
        for w in all {
            w.wake();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_stream.lock().iter().map(|q| q.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::counting::{waker, Count};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn wakes_only_what_the_log_meets() {
        let w = DurableWaiters::new(2);
        let (plain, pw) = waker();
        let (s0, s0w) = waker();
        let (s1, s1w) = waker();
        w.register(10, &pw, None);
        w.register(dep::on_stream(0, 12), &s0w, None);
        w.register(dep::on_stream(1, 11), &s1w, None);
        // Stream 0 acknowledged 12: only its waiter goes.
        w.wake_met(9, &[12, 9]);
        assert_eq!((plain.woken(), s0.woken(), s1.woken()), (0, 1, 0));
        assert_eq!(w.len(), 2);
        // The durable LSN meets a plain dependency and any stream's.
        w.wake_met(11, &[12, 9]);
        assert_eq!((plain.woken(), s0.woken(), s1.woken()), (1, 1, 1));
        assert_eq!(w.len(), 0);
        w.wake_met(20, &[20, 20]);
        assert_eq!(
            (plain.woken(), s0.woken(), s1.woken()),
            (1, 1, 1),
            "woken once"
        );
    }

    #[test]
    fn waiters_go_in_lsn_order_whatever_order_they_came_in() {
        let w = DurableWaiters::new(1);
        let counts: Vec<(u64, Arc<Count>)> = [7u64, 3, 9, 1, 5, 3]
            .into_iter()
            .map(|lsn| {
                let (c, wk) = waker();
                w.register(lsn, &wk, None);
                (lsn, c)
            })
            .collect();
        for upto in [0u64, 3, 6, 9] {
            w.wake_met(upto, &[0]);
            for (lsn, c) in &counts {
                assert_eq!(c.woken(), usize::from(*lsn <= upto), "lsn {lsn} at {upto}");
            }
        }
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn failure_wakes_every_waiter_and_a_missing_stream_waits_for_the_durable_lsn() {
        let w = DurableWaiters::new(1);
        let (a, aw) = waker();
        w.register(5, &aw, None);
        // A stream the log does not have falls back to the durable LSN.
        let (c, cw) = waker();
        w.register(dep::on_stream(5, 6), &cw, None);
        w.wake_met(4, &[100]);
        assert_eq!(c.woken(), 0);
        w.wake_all();
        assert_eq!((a.woken(), c.woken()), (1, 1));
        assert_eq!(w.len(), 0);
    }

    fn poll_met(
        w: &DurableWaiters,
        dep: u64,
        reg: &mut Registration,
        waker: &Waker,
        met: &std::sync::atomic::AtomicBool,
    ) -> Poll<()> {
        let f = std::pin::pin!(w.met_when(dep, reg, None, || met.load(Ordering::SeqCst)));
        f.poll(&mut std::task::Context::from_waker(waker))
    }

    #[test]
    fn a_connection_registers_each_dependency_once() {
        let w = DurableWaiters::new(1);
        let (c, wk) = waker();
        let mut reg = Registration::default();
        let met = std::sync::atomic::AtomicBool::new(false);
        for _ in 0..3 {
            assert!(poll_met(&w, 5, &mut reg, &wk, &met).is_pending());
        }
        assert_eq!(w.len(), 1, "polled three times, registered once");
        // Another waker (another task) registers anew.
        let (_, other) = waker();
        assert!(poll_met(&w, 5, &mut reg, &other, &met).is_pending());
        assert_eq!(w.len(), 2);
        // The log meets it: both go, and the wait resolves.
        met.store(true, Ordering::SeqCst);
        w.wake_met(5, &[5]);
        assert_eq!((c.woken(), w.len()), (1, 0));
        assert!(poll_met(&w, 5, &mut reg, &wk, &met).is_ready());
        // The next dependency registers again.
        met.store(false, Ordering::SeqCst);
        assert!(poll_met(&w, 6, &mut reg, &wk, &met).is_pending());
        assert_eq!(w.len(), 1);
    }
}
