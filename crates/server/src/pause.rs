//! CLIENT PAUSE / UNPAUSE, and FAILOVER's hold on writes: for a while,
//! clients' commands (all of them, or those that write) are held, not
//! refused: each connection stops before such a command and runs it once
//! the pause ends. Operators use it to let a replica catch up before they
//! promote it. Replication links are never held, and while a pause lasts
//! active expiry deletes nothing, so the dataset stands still.

use crate::command::{flags, CommandSpec};
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Commands that write (or may: scripts, PUBLISH, PFCOUNT).
    Write,
    All,
}

/// A pause from CLIENT PAUSE and one from FAILOVER, kept apart as in
/// Redis: CLIENT UNPAUSE does not end a failover's hold on writes, and the
/// end of a failover does not end an operator's pause.
#[derive(Default)]
struct Slots {
    client: Option<(Instant, Mode)>,
    failover: bool,
}

/// How far off a failover's pause reports its end: it has none of its own.
const FAILOVER_HOLD: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Default)]
pub struct Pause {
    /// A pause may be in force: the one load every command pays.
    active: AtomicBool,
    state: Mutex<Slots>,
    /// Wakes held connections when a pause is lifted or replaced.
    changed: Notify,
    /// Connections holding a request: they count in INFO's
    /// `blocked_clients`, as Redis counts its postponed clients.
    held: AtomicUsize,
}

impl Pause {
    /// Starts or extends a pause: the later end and the wider mode win,
    /// as in Redis.
    pub fn pause(&self, until: Instant, mode: Mode) {
        let mut s = self.state.lock();
        s.client = Some(match s.client {
            Some((end, m)) if end > Instant::now() => (end.max(until), m.max(mode)),
            _ => (until, mode),
        });
        self.settle(&s);
        drop(s);
        self.changed.notify_waiters();
    }

    /// Ends CLIENT PAUSE's pause (not a failover's).
    pub fn unpause(&self) {
        let mut s = self.state.lock();
        s.client = None;
        self.settle(&s);
        drop(s);
        self.changed.notify_waiters();
    }

    /// Holds writes while a failover waits for its replica (`on`), or
    /// stops holding them for it.
    pub fn hold_for_failover(&self, on: bool) {
        let mut s = self.state.lock();
        s.failover = on;
        self.settle(&s);
        drop(s);
        self.changed.notify_waiters();
    }

    /// Publishes whether any pause is in force; `s` is the locked state.
    fn settle(&self, s: &Slots) {
        let on = s.client.is_some() || s.failover;
        self.active.store(on, Ordering::Release);
        durakv_engine::db::keep_expired(on);
    }

    /// The pause in force now, if any: a failover holds writes until it
    /// ends, widened by any CLIENT PAUSE.
    pub fn current(&self) -> Option<(Instant, Mode)> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        let mut s = self.state.lock();
        let now = Instant::now();
        if s.client.is_some_and(|(end, _)| end <= now) {
            s.client = None;
            self.settle(&s);
        }
        match (s.client, s.failover) {
            // Held reads must wake when the wider pause ends.
            (Some((end, Mode::All)), true) => Some((end, Mode::All)),
            (_, true) => Some((now + FAILOVER_HOLD, Mode::Write)),
            (c, false) => c,
        }
    }

    /// Whether a client's command must wait. Inside MULTI only EXEC can
    /// (the queued commands are judged there, all together).
    /// `read_only_script` says whether an EVAL/EVALSHA call runs a script
    /// that declares `no-writes`, which a WRITE pause lets through.
    pub fn holds(
        &self,
        spec: &CommandSpec,
        args: &[Bytes],
        queued: Option<&[Vec<Bytes>]>,
        read_only_script: &dyn Fn(&CommandSpec, &[Bytes]) -> bool,
    ) -> bool {
        let Some((_, mode)) = self.current() else {
            return false;
        };
        let writes = |s: &CommandSpec, a: &[Bytes]| may_write(s, a) && !read_only_script(s, a);
        match queued {
            Some(_) if spec.name != "exec" => false,
            _ if mode == Mode::All => true,
            Some(cmds) => cmds
                .iter()
                .any(|c| crate::command::lookup(&c[0]).is_some_and(|s| writes(s, c))),
            None => writes(spec, args),
        }
    }

    /// Resolves when the pause in force ends or changes (at once if there
    /// is none).
    pub async fn ended(&self) {
        let notified = self.changed.notified();
        let Some((end, _)) = self.current() else {
            return;
        };
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep_until(end.into()) => {}
        }
    }

    pub fn is_paused(&self) -> bool {
        self.current().is_some()
    }

    /// A connection started or stopped holding a request.
    pub fn note_held(&self, holding: bool) {
        if holding {
            self.held.fetch_add(1, Ordering::Relaxed);
        } else {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub fn held_clients(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// Writes, or may write or reach replicas: what a WRITE pause holds.
fn may_write(spec: &CommandSpec, args: &[Bytes]) -> bool {
    crate::cmd::subcommands::flags_of(spec, args) & flags::WRITE != 0
        || matches!(
            spec.name,
            "eval" | "evalsha" | "fcall" | "publish" | "spublish" | "pfcount"
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn call(name: &str) -> (&'static CommandSpec, Vec<Bytes>) {
        let spec = crate::command::lookup(name.as_bytes()).unwrap();
        (spec, vec![Bytes::from(name.to_string()), Bytes::from("k")])
    }

    #[test]
    fn a_write_pause_holds_writes_and_scripts_only() {
        let p = Pause::default();
        let no = |_: &CommandSpec, _: &[Bytes]| false;
        let (get, g) = call("get");
        let (set, s) = call("set");
        let (eval, e) = call("eval");
        assert!(!p.holds(set, &s, None, &no));
        p.pause(Instant::now() + Duration::from_secs(60), Mode::Write);
        assert!(!p.holds(get, &g, None, &no));
        assert!(p.holds(set, &s, None, &no));
        assert!(p.holds(eval, &e, None, &no));
        // Queued inside MULTI, then judged at EXEC.
        assert!(!p.holds(set, &s, Some(&[]), &no));
        let (exec, x) = call("exec");
        assert!(p.holds(exec, &x, Some(std::slice::from_ref(&s)), &no));
        assert!(!p.holds(exec, &x, Some(std::slice::from_ref(&g)), &no));
        p.pause(Instant::now(), Mode::All);
        assert!(
            p.holds(get, &g, None, &no),
            "ALL widens the pause, the later end stays"
        );
        p.unpause();
        assert!(!p.holds(set, &s, None, &no));
    }

    #[test]
    fn a_failover_hold_and_client_pause_end_apart() {
        let p = Pause::default();
        let no = |_: &CommandSpec, _: &[Bytes]| false;
        let (get, g) = call("get");
        let (set, s) = call("set");
        p.hold_for_failover(true);
        assert!(p.holds(set, &s, None, &no));
        assert!(!p.holds(get, &g, None, &no));
        p.pause(Instant::now() + Duration::from_millis(20), Mode::All);
        assert!(p.holds(get, &g, None, &no));
        p.unpause();
        assert!(
            p.holds(set, &s, None, &no),
            "CLIENT UNPAUSE leaves the failover's hold"
        );
        assert!(!p.holds(get, &g, None, &no));
        p.pause(Instant::now() + Duration::from_secs(60), Mode::Write);
        p.hold_for_failover(false);
        assert!(
            p.holds(set, &s, None, &no),
            "the end of a failover leaves CLIENT PAUSE"
        );
        p.unpause();
        assert!(!p.is_paused());
    }

    #[test]
    fn a_pause_ends_by_itself() {
        let p = Pause::default();
        p.pause(Instant::now() + Duration::from_millis(20), Mode::All);
        assert!(p.is_paused());
        std::thread::sleep(Duration::from_millis(30));
        assert!(!p.is_paused());
    }
}
