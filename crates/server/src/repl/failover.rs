//! FAILOVER: a planned switch of roles between this primary and one of its
//! replicas, without losing a write, as in Redis 6.2+.
//!
//! 1. `waiting-for-sync`: client writes are held (a pause of the
//!    failover's own, apart from CLIENT PAUSE) and the replicas are asked
//!    for acknowledgements until the target (or, with no target, any
//!    replica) has acknowledged the whole stream.
//! 2. `failover-in-progress`: under every shard lock, so that no write is
//!    half done, this server becomes the target's replica and asks it with
//!    `PSYNC <replid> <offset> FAILOVER` to take over. The target promotes
//!    itself and continues this server's stream from its backlog.
//! 3. Once the target accepts the PSYNC, the hold ends; held writes then
//!    meet a replica and get -READONLY. If the target refuses, or cannot
//!    be reached, this server becomes a primary again (`abort`).
//!
//! A timeout aborts a failover still waiting for sync, or with FORCE
//! starts it anyway. `FAILOVER ABORT` stops one at any point.

use crate::state::Shared;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Phase {
    #[default]
    None,
    WaitForSync,
    InProgress,
}

impl Phase {
    /// INFO's `master_failover_state`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::None => "no-failover",
            Phase::WaitForSync => "waiting-for-sync",
            Phase::InProgress => "failover-in-progress",
        }
    }
}

/// What FAILOVER asked for.
pub struct Request {
    pub target: Option<(String, u16)>,
    pub timeout: Option<Duration>,
    pub force: bool,
}

#[derive(Default)]
struct State {
    phase: Phase,
    target: Option<(String, u16)>,
    deadline: Option<Instant>,
    force: bool,
}

#[derive(Default)]
pub struct Failover {
    state: Mutex<State>,
    /// Wakes the driver when a failover starts.
    started: Notify,
}

/// How often the driver looks at the replicas' acknowledgements, and how
/// often it asks for fresh ones while one is missing.
const POLL: Duration = Duration::from_millis(10);
const GETACK_EVERY: Duration = Duration::from_millis(100);

impl Failover {
    pub fn phase(&self) -> Phase {
        self.state.lock().phase
    }

    /// Starts a failover, after Redis's checks in Redis's order.
    pub fn start(&self, shared: &Shared, req: Request) -> Result<(), &'static str> {
        let mut st = self.state.lock();
        if st.phase != Phase::None {
            return Err("ERR FAILOVER already in progress.");
        }
        if shared.repl.is_replica() {
            return Err("ERR FAILOVER is not valid when server is a replica.");
        }
        if shared.repl.replicas.lock().is_empty() {
            return Err("ERR FAILOVER requires connected replicas.");
        }
        if req.force && (req.timeout.is_none() || req.target.is_none()) {
            return Err(
                "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
            );
        }
        if let Some((host, port)) = &req.target {
            let replicas = shared.repl.replicas.lock();
            let Some(r) = replicas.iter().find(|r| is_at(r, host, *port)) else {
                return Err("ERR FAILOVER target HOST and PORT is not a replica.");
            };
            if !r.online.load(Ordering::Acquire) {
                return Err("ERR FAILOVER target replica is not online.");
            }
            tracing::info!("FAILOVER requested to {host}:{port}.");
        } else {
            tracing::info!("FAILOVER requested to any replica.");
        }
        *st = State {
            phase: Phase::WaitForSync,
            target: req.target,
            deadline: req.timeout.map(|t| Instant::now() + t),
            force: req.force,
        };
        shared.pause.hold_for_failover(true);
        drop(st);
        shared.repl.request_acks();
        self.started.notify_one();
        Ok(())
    }

    /// Whether this server's link should ask its primary to take over.
    pub fn in_progress(&self) -> bool {
        self.phase() == Phase::InProgress
    }

    /// The target accepted this server's PSYNC: the failover is done.
    pub fn completed(&self, shared: &Shared) {
        let mut st = self.state.lock();
        if st.phase == Phase::InProgress {
            *st = State::default();
            shared.pause.hold_for_failover(false);
            tracing::info!("Failover completed.");
        }
    }
}

/// Whether replica `r` is the one at `host:port` (its announced or peer
/// address, and its listening port), as FAILOVER TO names it.
fn is_at(r: &super::ReplicaInfo, host: &str, port: u16) -> bool {
    r.ip.eq_ignore_ascii_case(host) && r.port.load(Ordering::Acquire) == u64::from(port)
}

/// Ends a failover that did not complete (false: there was none): a
/// server that already turned replica becomes a primary again (keeping its
/// history, so its replicas continue), and held writes go on here.
pub fn abort(shared: &Shared, why: &str) -> bool {
    // Not under the state's lock: promoting takes others (hand_over takes
    // the shards' first, then this one).
    let was = std::mem::take(&mut *shared.repl.failover.state.lock()).phase;
    if was == Phase::None {
        return false;
    }
    if was == Phase::InProgress && shared.repl.is_replica() {
        super::become_primary(shared);
    }
    shared.pause.hold_for_failover(false);
    tracing::warn!("FAILOVER aborted: {why}");
    true
}

/// The driver: one task for the server's life, waiting for FAILOVER.
pub async fn run(shared: Arc<Shared>) {
    loop {
        shared.repl.failover.started.notified().await;
        wait_for_sync(&shared).await;
    }
}

/// Phase 1, until the target is caught up (or the timeout decides).
async fn wait_for_sync(shared: &Arc<Shared>) {
    let mut asked = Instant::now();
    loop {
        tokio::time::sleep(POLL).await;
        let (deadline, force, target) = {
            let st = shared.repl.failover.state.lock();
            if st.phase != Phase::WaitForSync {
                return;
            }
            (st.deadline, st.force, st.target.clone())
        };
        if deadline.is_some_and(|d| d <= Instant::now()) {
            match target.filter(|_| force) {
                Some((host, port)) => {
                    tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                    crate::checkpointer::blocking(|| hand_over(shared, host, port, true));
                }
                None => {
                    abort(shared, "Replica never caught up before timeout");
                }
            }
            return;
        }
        if let Some((host, port)) = caught_up(shared, target.as_ref()) {
            if crate::checkpointer::blocking(|| hand_over(shared, host, port, false)) {
                return;
            }
        }
        if asked.elapsed() >= GETACK_EVERY {
            shared.repl.request_acks();
            asked = Instant::now();
        }
    }
}

/// The replica (the target, or any) that acknowledged the whole stream.
fn caught_up(shared: &Shared, target: Option<&(String, u16)>) -> Option<(String, u16)> {
    let end = shared.repl.offset();
    let replicas = shared.repl.replicas.lock();
    replicas
        .iter()
        .filter(|r| r.online.load(Ordering::Acquire) && r.ack.load(Ordering::Acquire) >= end)
        .find(|r| target.is_none_or(|(h, p)| is_at(r, h, *p)))
        .map(|r| {
            let port = r.port.load(Ordering::Acquire);
            (r.ip.clone(), u16::try_from(port).unwrap_or(0))
        })
}

/// Phase 2: turns this server into `host:port`'s replica under every
/// shard lock, unless (without `force`) a write slipped in since the
/// replica caught up. A write that passed the pause just before it began
/// and waits for its lock finds a replica and is refused (`dispatch`).
fn hand_over(shared: &Shared, host: String, port: u16, force: bool) -> bool {
    {
        let Ok(_all) = crate::dispatch::lock(shared, true, std::iter::empty()) else {
            return false;
        };
        let mut st = shared.repl.failover.state.lock();
        if st.phase != Phase::WaitForSync {
            return true;
        }
        if !force && caught_up(shared, Some(&(host.clone(), port))).is_none() {
            return false;
        }
        if !force {
            tracing::info!("Failover target {host}:{port} is synced, failing over.");
        }
        st.phase = Phase::InProgress;
        st.target = Some((host.clone(), port));
        drop(st);
        shared.repl.demote(shared, host.clone(), port);
    }
    // Outside the shard locks, where REPLICAOF records it too.
    super::remember_primary(shared, &format!("{host} {port}"));
    true
}
