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
//! - [`functions`]: FUNCTION's libraries, compiled in a VM of their own;
//!   [`function_payload`]: FUNCTION DUMP / RESTORE's bytes.
//! - [`convert`]: Lua values ⇄ reply frames, as Redis converts them.
//! - [`cjson`], [`cmsgpack`], [`bit`], [`struct_lib`]: libraries Redis
//!   gives scripts.

pub mod bit;
pub mod cjson;
mod cjson_decode;
pub mod cmsgpack;
pub mod convert;
pub mod function_payload;
pub mod functions;
pub mod struct_lib;
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
/// -BUSY while the running script is a function.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
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
    /// The running script is a function (FCALL), not an EVAL.
    function: AtomicBool,
    /// FUNCTION STATS's `running_script`: the function's name and the
    /// command that called it.
    caller: Mutex<Option<(String, Vec<Bytes>)>>,
}

impl RunState {
    pub fn kill_requested(&self) -> Kill {
        match self.kill.load(Ordering::Acquire) {
            1 => Kill::User,
            2 => Kill::Shutdown,
            _ => Kill::None,
        }
    }

    /// The running script has written: from then on, Redis lets it write
    /// over `maxmemory` rather than stop it half done.
    pub fn has_written(&self) -> bool {
        self.wrote.load(Ordering::Acquire)
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

    fn is_function(&self) -> bool {
        self.function.load(Ordering::Acquire)
    }

    /// (function name, calling command, milliseconds so far) of a running
    /// function.
    pub fn running_function(&self) -> Option<(String, Vec<Bytes>, u64)> {
        if !self.is_running() || !self.is_function() {
            return None;
        }
        let (name, cmd) = self.caller.lock().clone()?;
        Some((name, cmd, self.elapsed_ms()))
    }
}

/// Marks a script as running for as long as it lives.
pub struct Running<'a>(&'a RunState);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
        self.0.kill.store(Kill::None as u8, Ordering::Release);
        self.0.function.store(false, Ordering::Release);
        *self.0.caller.lock() = None;
    }
}

/// Bytes that scripts and functions take: their VMs, and what the server
/// keeps beside them (cached script bodies; libraries' code and names).
#[derive(Clone, Copy, Default)]
pub struct ScriptMemory {
    pub vm_eval: usize,
    pub vm_functions: usize,
    pub scripts_eval: usize,
    pub functions: usize,
}

/// EVAL's VM is created on first use and recreated by SCRIPT FLUSH;
/// FUNCTION's libraries have a VM of their own (see [`functions`]).
#[derive(Default)]
pub struct Engine {
    vm: Option<vm::Vm>,
    pub functions: functions::Registry,
}

impl Engine {
    pub fn vm(&mut self, run: &Arc<RunState>) -> Result<&mut vm::Vm, Frame> {
        if self.vm.is_none() {
            let v = vm::Vm::new(run.clone(), vm::Kind::Eval)
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
    /// `memory()`'s last figures, for when a script holds the engine.
    last_memory: Mutex<ScriptMemory>,
    /// (libraries, functions), for FUNCTION STATS while a script holds the
    /// engine.
    function_counts: Mutex<(usize, usize)>,
}

impl Scripting {
    pub fn run_state(&self) -> &Arc<RunState> {
        &self.run
    }

    /// Marks a function (FCALL of `name` by `cmd`) as started.
    pub fn begin_function(&self, name: &str, cmd: &[Bytes]) -> Running<'_> {
        *self.run.caller.lock() = Some((name.to_string(), cmd.to_vec()));
        self.run.function.store(true, Ordering::Release);
        self.begin()
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

    /// The -BUSY reply for the running script's kind.
    pub fn busy_error(&self) -> Frame {
        crate::errors::err(if self.run.is_function() {
            BUSY_FUNCTION
        } else {
            BUSY
        })
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
            return Some(self.busy_error());
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
                return Err(self.busy_error());
            }
        }
    }

    /// Whether function `name` declares `no-writes`; None when it is not
    /// known or the engine is busy (a running script holds it), so a
    /// caller that must not wait assumes the worst.
    pub fn function_declares_no_writes(&self, name: &[u8]) -> Option<bool> {
        let engine = self.engine.try_lock()?;
        let f = engine.functions.find(name)?;
        Some(f.flags & functions::flags::NO_WRITES != 0)
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: each stops only its own
    /// kind of script, and answers the other kind with its -BUSY.
    pub fn kill(&self, eval: bool) -> Frame {
        if !self.run.is_running() {
            return crate::errors::err(NOTBUSY);
        }
        if self.run.wrote.load(Ordering::Acquire) {
            return crate::errors::err(UNKILLABLE);
        }
        if eval == self.run.is_function() {
            return self.busy_error();
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

    /// True while an EVAL script runs past `busy-reply-threshold`
    /// (FUNCTION STATS answers -BUSY then, as in Redis).
    pub fn eval_timed_out(&self, shared: &Shared) -> bool {
        self.timed_out(shared) && !self.run.is_function()
    }

    /// Records FUNCTION STATS's counts after the libraries changed.
    pub fn note_function_counts(&self, registry: &functions::Registry) {
        *self.function_counts.lock() = registry.counts();
    }

    /// (libraries, functions).
    pub fn function_counts(&self) -> (usize, usize) {
        *self.function_counts.lock()
    }

    /// Compiles the libraries recovered from the log and checkpoint at
    /// start-up. Only code that compiled was ever logged, so a failure
    /// here is a bug or a changed sandbox: it is reported, and the server
    /// starts without that library rather than not at all.
    pub fn load_recovered(&self, libraries: &[(Bytes, Bytes)]) {
        let mut engine = self.engine.lock();
        let registry = &mut engine.functions;
        for (name, code) in libraries {
            let loaded = registry
                .compile(&self.run, code, None)
                .map(|lib| registry.install(lib));
            if let Err(e) = loaded {
                tracing::error!(
                    "function library '{}' could not be loaded at start-up: {}",
                    String::from_utf8_lossy(name),
                    match &e {
                        Frame::Error(m) => String::from_utf8_lossy(m).into_owned(),
                        other => format!("{other:?}"),
                    }
                );
            }
        }
        self.note_function_counts(registry);
    }

    /// What scripts and functions take, for INFO memory and MEMORY STATS.
    /// While a script runs (holding the engine), the figures of the last
    /// look: the VMs' sizes are read under the engine's lock.
    pub fn memory(&self) -> ScriptMemory {
        let cached = self.cache.lock();
        // A cached script: its body, its 40-byte SHA, and the map's slot.
        let scripts_eval = cached.values().map(|b| b.len() + 40 + 64).sum();
        drop(cached);
        let mut m = *self.last_memory.lock();
        m.scripts_eval = scripts_eval;
        if let Some(e) = self.engine.try_lock() {
            m.vm_eval = e.vm.as_ref().map_or(0, vm::Vm::used_memory);
            m.vm_functions = e.functions.vm_used_memory();
            m.functions = e.functions.metadata_bytes();
            *self.last_memory.lock() = m;
        }
        m
    }
}

/// A function for the libraries scripts use (cjson, cmsgpack, bit,
/// struct) whose errors reach Lua as plain strings, as those of Redis's C
/// libraries do: `pcall(cjson.decode, '{')` returns the message, not an
/// opaque Rust error value. The Rust side returns `(true, results...)` or
/// `(false, message)`, and a C function in front of it raises the message
/// at the caller's line, as `luaL_error` does (`user_script:1: ...`).
///
/// That front is a C function, as Redis's libraries are, because Lua 5.1
/// keeps the caller of a C function on the stack even when the call is a
/// tail call: `return cjson.encode(x)` reports its line and the name
/// `encode`. A Lua wrapper there was replaced by the tail call and lost
/// both.
///
/// The arguments reach the Rust side packed in a table: mlua reads a
/// number next to zero (`8e-26`, `-0`) off the Lua stack as the integer 0,
/// while a table slot can be read again exactly (`convert::exact`).
pub(crate) fn lib_fn<A, R, F>(lua: &mlua::Lua, f: F) -> mlua::Result<mlua::Function>
where
    A: mlua::FromLuaMulti,
    R: mlua::IntoLuaMulti,
    F: Fn(&mlua::Lua, A) -> mlua::Result<R> + mlua::MaybeSend + 'static,
{
    use mlua::{MultiValue, Value};
    let inner = lua.create_function(move |lua, (n, packed): (usize, mlua::Table)| {
        let args = (1..=n)
            .map(|i| convert::exact_get(&packed, i))
            .collect::<mlua::Result<MultiValue>>()?;
        let result = A::from_lua_multi(args, lua)
            .and_then(|a| f(lua, a))
            .and_then(|r| r.into_lua_multi(lua));
        Ok(match result {
            Ok(mut values) => {
                values.push_front(Value::Boolean(true));
                values
            }
            Err(e) => MultiValue::from_iter([
                Value::Boolean(false),
                Value::String(lua.create_string(named_as_called(lua, vm::error_message(&e)))?),
            ]),
        })
    })?;
    // SAFETY: `exec_raw` runs the closure with `inner` pushed and room on
    // the stack; it leaves one value, the closure made of them.
    unsafe {
        lua.exec_raw(inner, |state| {
            mlua::ffi::lua_pushcclosure(state, lib_front, 1);
        })
    }
}

/// The C function in front of a library function (upvalue 1, the Rust
/// side of [`lib_fn`]): calls it with its arguments packed, returns its
/// results, or raises its message at the caller's line.
///
/// # Safety
/// Called by Lua only, as a C closure made by [`lib_fn`]. No Rust value
/// that needs dropping lives in this frame when `lua_error` unwinds it.
unsafe extern "C-unwind" fn lib_front(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    ffi::luaL_checkstack(state, 4, std::ptr::null());
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_pushinteger(state, ffi::lua_Integer::from(n));
    ffi::lua_createtable(state, n, 0);
    for i in 1..=n {
        ffi::lua_pushvalue(state, i);
        ffi::lua_rawseti(state, -2, ffi::lua_Integer::from(i));
    }
    ffi::lua_call(state, 2, ffi::LUA_MULTRET);
    // From n + 1: the flag, then the results or the message.
    if ffi::lua_toboolean(state, n + 1) != 0 {
        return ffi::lua_gettop(state) - n - 1;
    }
    ffi::luaL_where(state, 1);
    ffi::lua_pushvalue(state, n + 2);
    ffi::lua_concat(state, 2);
    ffi::lua_error(state)
}

/// luaL_argerror names the function as its caller's call instruction
/// does: `struct.pack(...)` says 'pack', `local f = struct.pack; f(...)`
/// says 'f', a call through pcall '?'. The libraries' messages name the
/// function; this puts the name the C front (level 1 from here) was
/// called by in its place.
fn named_as_called(lua: &mlua::Lua, msg: String) -> String {
    if !msg.starts_with("bad argument #") {
        return msg;
    }
    let name = lua
        .inspect_stack(1)
        .and_then(|d| d.names().name.map(|n| n.to_string()))
        .unwrap_or_else(|| "?".to_string());
    match (msg.find(" to '"), msg.find("' (")) {
        (Some(a), Some(b)) if a + 5 <= b => format!("{}{name}{}", &msg[..a + 5], &msg[b..]),
        _ => msg,
    }
}

/// Lower-case hex SHA1 of `body`, as Redis names scripts.
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}
