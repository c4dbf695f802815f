//! Lua scripting: the one Lua VM, the script cache, and the state other
//! connections consult while a script runs (BUSY, SCRIPT KILL).
//!
//! A script runs on its client's connection thread, inside a `Txn` that
//! holds every shard, so no other client sees half of it and its writes
//! are one log record. Other connections never block on those shard locks
//! for long: `dispatch` asks [`Scripting::busy_refusal`] first and locks
//! with a timeout, so once the script has run past `busy-reply-threshold`
//! they answer -BUSY, and SCRIPT KILL / SHUTDOWN NOSAVE get through.
//!
//! - [`vm`]: building the sandboxed VM and running one script in it.
//! - [`convert`]: Lua values ⇄ reply frames, as Redis converts them.
//! - [`cjson`], [`bit`]: libraries Redis gives scripts.

pub mod bit;
pub mod cjson;
pub mod convert;
pub mod vm;

use crate::state::Shared;
use bytes::Bytes;
use durakv_protocol::Frame;
use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// How long a waiting command sleeps between looks at a running script,
/// and how long it waits for a contended lock before looking again.
pub const BUSY_POLL: Duration = Duration::from_millis(2);

/// Why the running script must stop at its next hook.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Kill {
    None = 0,
    /// SCRIPT KILL: only granted to a script that has not written.
    User = 1,
    /// SHUTDOWN NOSAVE: whatever the script did.
    Shutdown = 2,
}

/// What other connections may know about the running script.
#[derive(Default)]
pub struct RunState {
    running: AtomicBool,
    started_ms: AtomicU64,
    wrote: AtomicBool,
    kill: AtomicU8,
}

impl RunState {
    pub fn kill_requested(&self) -> Kill {
        match self.kill.load(Ordering::Acquire) {
            1 => Kill::User,
            2 => Kill::Shutdown,
            _ => Kill::None,
        }
    }

    pub fn note_write(&self) {
        self.wrote.store(true, Ordering::Release);
    }

    fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    pub fn elapsed_ms(&self) -> u64 {
        crate::util::now_ms().saturating_sub(self.started_ms.load(Ordering::Acquire))
    }
}

/// Marks a script as running for as long as it lives.
pub struct Running<'a>(&'a RunState);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
        self.0.kill.store(Kill::None as u8, Ordering::Release);
    }
}

/// The VM is created on first use and recreated by SCRIPT FLUSH.
#[derive(Default)]
pub struct Engine {
    vm: Option<vm::Vm>,
}

impl Engine {
    pub fn vm(&mut self, run: &Arc<RunState>) -> Result<&mut vm::Vm, Frame> {
        if self.vm.is_none() {
            let v = vm::Vm::new(run.clone())
                .map_err(|e| Frame::error(format!("ERR cannot start the Lua VM: {e}")))?;
            self.vm = Some(v);
        }
        self.vm
            .as_mut()
            .ok_or_else(|| Frame::error("ERR cannot start the Lua VM"))
    }
}

#[derive(Default)]
pub struct Scripting {
    run: Arc<RunState>,
    engine: Mutex<Engine>,
    /// SHA1 (lower-case hex) → body: what EVALSHA and SCRIPT EXISTS see.
    cache: Mutex<HashMap<String, Bytes>>,
}

impl Scripting {
    pub fn run_state(&self) -> &Arc<RunState> {
        &self.run
    }

    /// Marks a script as started; the guard marks it finished.
    pub fn begin(&self) -> Running<'_> {
        let r = &self.run;
        r.started_ms.store(crate::util::now_ms(), Ordering::Release);
        r.wrote.store(false, Ordering::Release);
        r.kill.store(Kill::None as u8, Ordering::Release);
        r.running.store(true, Ordering::Release);
        Running(r)
    }

    /// True while a script runs past `busy-reply-threshold`.
    pub fn timed_out(&self, shared: &Shared) -> bool {
        if !self.run.is_running() {
            return false;
        }
        let threshold = shared.config.read().busy_reply_threshold_ms;
        threshold > 0 && self.run.elapsed_ms() >= threshold
    }

    /// The -BUSY refusal while another connection's script has run too
    /// long, unless Redis allows the command then (`allowed_when_busy`).
    /// Otherwise the command goes ahead: data commands wait for the
    /// script's shard locks (woken the moment it ends, see
    /// `dispatch::lock`), and the rest touch no data a script could be
    /// halfway through. Costs one atomic load when no script runs.
    pub fn busy_refusal(
        &self,
        shared: &Shared,
        allowed_when_busy: impl FnOnce() -> bool,
    ) -> Option<Frame> {
        if self.timed_out(shared) && !allowed_when_busy() {
            return Some(crate::errors::err(BUSY));
        }
        None
    }

    /// The engine, waiting (and answering -BUSY) while a script holds it.
    pub fn engine(&self, shared: &Shared) -> Result<MutexGuard<'_, Engine>, Frame> {
        loop {
            if let Some(g) = self.engine.try_lock_for(BUSY_POLL) {
                return Ok(g);
            }
            if self.timed_out(shared) {
                return Err(crate::errors::err(BUSY));
            }
        }
    }

    /// SCRIPT KILL.
    pub fn kill(&self) -> Frame {
        if !self.run.is_running() {
            return crate::errors::err(NOTBUSY);
        }
        if self.run.wrote.load(Ordering::Acquire) {
            return crate::errors::err(UNKILLABLE);
        }
        self.run.kill.store(Kill::User as u8, Ordering::Release);
        Frame::ok()
    }

    /// SHUTDOWN NOSAVE: stop a running script whatever it did.
    pub fn kill_for_shutdown(&self) {
        if self.run.is_running() {
            self.run.kill.store(Kill::Shutdown as u8, Ordering::Release);
        }
    }

    pub fn cached(&self, sha: &str) -> Option<Bytes> {
        self.cache.lock().get(sha).cloned()
    }

    pub fn exists(&self, sha: &str) -> bool {
        self.cache.lock().contains_key(sha)
    }

    pub fn remember(&self, sha: &str, body: &Bytes) {
        let mut c = self.cache.lock();
        if !c.contains_key(sha) {
            c.insert(sha.to_string(), body.clone());
        }
    }

    pub fn cached_count(&self) -> usize {
        self.cache.lock().len()
    }

    /// SCRIPT FLUSH: forgets every script and starts a fresh VM.
    pub fn flush(&self, shared: &Shared) -> Result<(), Frame> {
        let mut engine = self.engine(shared)?;
        self.cache.lock().clear();
        engine.vm = None;
        Ok(())
    }

    /// Memory the Lua VM uses (INFO's `used_memory_lua`), if it exists.
    pub fn used_memory(&self) -> usize {
        self.engine
            .try_lock()
            .and_then(|e| e.vm.as_ref().map(vm::Vm::used_memory))
            .unwrap_or(0)
    }
}

/// Lower-case hex SHA1 of `body`, as Redis names scripts.
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}
