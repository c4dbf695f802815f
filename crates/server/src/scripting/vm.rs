//! The Lua VM scripts run in: Lua 5.1 with the string, table and math
//! libraries, Redis's libraries, the `redis` API and the sandbox built by
//! `prelude.lua`; and the running of one script in it. EVAL scripts and
//! FUNCTION libraries each get a VM of their own, as in Redis.

use super::convert::{frame_to_lua, lua_to_frame, number_arg};
use super::{Kill, RunState, KILLED};
use bytes::Bytes;
use durakv_protocol::Frame;
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, Variadic, VmState};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Instructions between looks at SCRIPT KILL (Redis's count too): cheap
/// enough to be invisible, frequent enough to stop within milliseconds.
const HOOK_EVERY: u32 = 100_000;
/// Runs between incremental garbage collection steps (Redis's period).
const GC_EVERY_RUNS: u32 = 50;
/// The chunk names errors report (`user_script:1: ...`), as in Redis.
const SCRIPT_CHUNK: &str = "@user_script";
const FUNCTION_CHUNK: &str = "@user_function";
/// Instructions between looks at FUNCTION LOAD's deadline.
const LOAD_HOOK_EVERY: u32 = 100_000;
const LOAD_TIMEOUT: &str = "FUNCTION LOAD timeout";

/// Which VM: EVAL's scripts, or FUNCTION's libraries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Eval,
    Functions,
}

/// One `redis.register_function` call of a library being loaded.
pub struct Registration {
    pub name: String,
    pub description: Option<Bytes>,
    pub flags: u8,
    /// In the registry rather than held as a `Function`: mlua keeps every
    /// value Rust holds in a stack of about 8,000 slots and panics past it.
    pub callback: mlua::RegistryKey,
}

/// Present (as app data) only while a library's code runs at load time.
struct Loading(Vec<Registration>);

/// Runs one command for `redis.call`: (arguments, the script's RESP level).
pub type Exec<'a> = dyn FnMut(Vec<Bytes>, u8) -> Frame + 'a;

/// The RESP level an [`Exec`] is called with to ask only whether the
/// calling user may run the command (`redis.acl_check_cmd`): it answers
/// 1 or 0, or an error for an unknown command.
pub const ACL_CHECK_ONLY: u8 = 0;

/// Per-VM values the hook and the API functions reach through app data.
struct Shared {
    run: Arc<RunState>,
    /// The running script's `redis.setresp` level.
    resp: AtomicU8,
    /// The hook fires on every instruction once a kill was requested.
    escalated: AtomicBool,
    /// Script time (ms) at which the hook next hands this I/O thread's
    /// other work to another thread.
    next_detach_ms: AtomicU64,
}

pub struct Vm {
    kind: Kind,
    lua: Lua,
    /// The table behind the protected globals (KEYS and ARGV go there).
    store: Table,
    xpcall: Function,
    handler: Function,
    /// `loading(on)`: switches the globals to FUNCTION LOAD's environment.
    loading: Function,
    /// `runner(f, keys, argv)`: what xpcall runs for a function's call.
    runner: Function,
    /// Compiled scripts by SHA, kept in a Lua table: one reference on
    /// mlua's auxiliary stack for all of them. A `Function` held per
    /// script took a slot each, and mlua panics past about 8,000, so a
    /// server that had run that many distinct scripts dropped every
    /// connection that ran a new one.
    funcs: Table,
    runs: u32,
    /// The last run's reply is an error a `redis.call` already counted in
    /// the error statistics (a raised or returned call error).
    reply_counted: bool,
}

impl Vm {
    pub fn new(run: Arc<RunState>, kind: Kind) -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        lua.set_app_data(Shared {
            run,
            resp: AtomicU8::new(2),
            escalated: AtomicBool::new(false),
            next_detach_ms: AtomicU64::new(DETACH_AFTER_MS),
        });
        let globals = lua.globals();
        globals.raw_set("cjson", super::cjson::module(&lua)?)?;
        globals.raw_set("bit", super::bit::module(&lua)?)?;
        globals.raw_set("cmsgpack", super::cmsgpack::module(&lua)?)?;
        globals.raw_set("struct", super::struct_lib::module(&lua)?)?;
        let xpcall: Function = globals.raw_get("xpcall")?;
        let api = api_table(&lua)?;
        let (store, loading, runner): (Table, Function, Function) = lua
            .load(include_str!("prelude.lua"))
            .set_name("=prelude")
            .call(api.clone())?;
        let handler = lua.create_function(error_handler)?;
        let funcs = lua.create_table()?;
        lua.set_hook(normal_hook(), hook);
        Ok(Vm {
            kind,
            lua,
            store,
            xpcall,
            handler,
            loading,
            runner,
            funcs,
            runs: 0,
            reply_counted: false,
        })
    }

    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// A library function's callback, registered by this VM's FUNCTION
    /// LOAD (an error if the key is another VM's).
    pub fn registered(&self, key: &mlua::RegistryKey) -> Result<Function, Frame> {
        self.lua
            .registry_value(key)
            .map_err(|e| Frame::error(format!("ERR {e}")))
    }

    /// Compiles `body` once per SHA; the error is Redis's reply for it.
    pub fn function(&mut self, sha: &str, body: &[u8]) -> Result<Function, Frame> {
        if let Ok(Some(f)) = self.funcs.raw_get::<Option<Function>>(sha) {
            return Ok(f);
        }
        let f = self
            .lua
            .load(body)
            .set_name(SCRIPT_CHUNK)
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
            .map_err(|e| {
                Frame::error(format!(
                    "ERR Error compiling script (new function): {}",
                    one_line(&lua_message(&e))
                ))
            })?;
        self.funcs
            .raw_set(sha, &f)
            .map_err(|e| Frame::error(format!("ERR {}", one_line(&lua_message(&e)))))?;
        Ok(f)
    }

    /// Compiles a library's code (after its shebang line) and runs it in
    /// FUNCTION LOAD's environment, where only `redis.register_function`,
    /// `redis.log` and the version are reachable, for at most `timeout`.
    /// Returns what it registered; the error is Redis's reply for it.
    pub fn load_library(
        &mut self,
        code: &[u8],
        timeout: Option<std::time::Duration>,
    ) -> Result<Vec<Registration>, Frame> {
        let chunk = self
            .lua
            .load(code)
            .set_name(FUNCTION_CHUNK)
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
            .map_err(|e| {
                Frame::error(format!(
                    "ERR Error compiling function: {}",
                    one_line(&lua_message(&e))
                ))
            })?;
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        self.lua.set_hook(
            HookTriggers::new().every_nth_instruction(LOAD_HOOK_EVERY),
            move |lua, _| {
                if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                    // Every instruction from now on, so pcall cannot go on.
                    lua.set_hook(HookTriggers::new().every_nth_instruction(1), |_, _| {
                        Err(mlua::Error::RuntimeError(LOAD_TIMEOUT.to_string()))
                    });
                    return Err(mlua::Error::RuntimeError(LOAD_TIMEOUT.to_string()));
                }
                Ok(VmState::Continue)
            },
        );
        self.lua.set_app_data(Loading(Vec::new()));
        // Under xpcall with the scripts' handler, so that an error reads as
        // Redis's (`ERR user_function:2: ...`, `ERR unknown flag given`),
        // without mlua's traceback.
        let ran = self.loading.call::<()>(true).and_then(|()| {
            let (ok, err): (bool, Value) = self.xpcall.call((chunk, self.handler.clone()))?;
            Ok(if ok { None } else { Some(err) })
        });
        // The hook first: a timed-out load's hook fails every instruction,
        // and the switch back to the usual globals is Lua code.
        self.lua.set_hook(normal_hook(), hook);
        let _ = self.loading.call::<()>(false);
        let registered = self
            .lua
            .remove_app_data::<Loading>()
            .map(|l| l.0)
            .unwrap_or_default();
        let text = match ran {
            Ok(None) => return Ok(registered),
            Ok(Some(err)) => err_text(&err),
            Err(e) => lua_message(&e).into_bytes(),
        };
        let mut msg = b"ERR Error registering functions: ".to_vec();
        msg.extend_from_slice(&text);
        Err(Frame::Error(super::convert::error_text(&msg)))
    }

    /// Runs a compiled script with its KEYS and ARGV; `exec` runs the
    /// commands it calls. Returns the reply, errors formatted as Redis's.
    pub fn run(
        &mut self,
        sha: &str,
        func: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
        exec: &mut Exec<'_>,
    ) -> Frame {
        let outcome = self.run_inner(func, keys, argv, exec);
        self.reply_counted = match &outcome {
            Ok(Ok(v)) | Ok(Err(v)) => counted_error(v),
            Err(_) => false,
        };
        let reply = match outcome {
            Ok(Ok(v)) => lua_to_frame(&v, self.resp()),
            Ok(Err(err)) => self.error_reply(sha, &err),
            Err(e) => Frame::error(format!(
                "ERR Error running script {sha}: {}",
                lua_message(&e)
            )),
        };
        // A little collection every few runs, as Redis does, instead of an
        // occasional full cycle in the middle of some unlucky script.
        self.runs += 1;
        if self.runs >= GC_EVERY_RUNS {
            self.runs = 0;
            let _ = self.lua.gc_step_kbytes(GC_EVERY_RUNS as i32);
        }
        reply
    }

    /// Whether the last run's error reply was already counted when the
    /// script's `redis.call` / `redis.pcall` got it, so it is not counted
    /// twice as Redis does not.
    pub fn reply_already_counted(&self) -> bool {
        self.reply_counted
    }

    fn resp(&self) -> u8 {
        self.lua
            .app_data_ref::<Shared>()
            .map(|s| s.resp.load(Ordering::Relaxed))
            .unwrap_or(2)
    }

    /// Ok(Ok(result)) or Ok(Err(error table)) from the script; Err for a
    /// failure of the VM itself.
    fn run_inner(
        &mut self,
        func: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
        exec: &mut Exec<'_>,
    ) -> mlua::Result<Result<Value, Value>> {
        if let Some(s) = self.lua.app_data_ref::<Shared>() {
            s.resp.store(2, Ordering::Relaxed);
            s.next_detach_ms.store(DETACH_AFTER_MS, Ordering::Relaxed);
            if s.escalated.swap(false, Ordering::Relaxed) {
                self.lua.set_hook(normal_hook(), hook);
            }
        }
        if self.kind == Kind::Eval {
            self.store.raw_set("KEYS", self.array(keys)?)?;
            self.store.raw_set("ARGV", self.array(argv)?)?;
        }
        let (lua, xpcall, handler) = (&self.lua, &self.xpcall, &self.handler);
        let as_arguments = match self.kind {
            Kind::Eval => None,
            Kind::Functions => Some((self.array(keys)?, self.array(argv)?)),
        };
        let run = match as_arguments {
            None => func.clone(),
            Some((k, a)) => self.runner.call::<Function>((func.clone(), k, a))?,
        };
        let out = self.lua.scope(|scope| {
            let call = scope.create_function_mut(
                |lua,
                 (args, n, check): (Table, usize, Option<bool>)|
                 -> mlua::Result<(bool, Value)> {
                    let args = match command_args(&args, n) {
                        Ok(a) => a,
                        Err(msg) => return Ok((false, error_table(lua, msg)?)),
                    };
                    if check == Some(true) {
                        return Ok(match exec(args, ACL_CHECK_ONLY) {
                            Frame::Integer(n) => (true, Value::Boolean(n == 1)),
                            other => (false, frame_to_lua(lua, &other, 2)?),
                        });
                    }
                    let resp = lua
                        .app_data_ref::<Shared>()
                        .map(|s| s.resp.load(Ordering::Relaxed))
                        .unwrap_or(2);
                    let reply = exec(args, resp);
                    let failed = reply.is_error();
                    let value = frame_to_lua(lua, &reply, resp)?;
                    if let (true, Value::Table(t)) = (failed, &value) {
                        t.raw_set(COUNTED, true)?;
                    }
                    Ok((!failed, value))
                },
            )?;
            lua.set_named_registry_value(EXEC_KEY, call)?;
            let res = xpcall.call::<mlua::MultiValue>((run, handler.clone()));
            lua.set_named_registry_value(EXEC_KEY, Value::Nil)?;
            res
        })?;
        let mut vals = out.into_iter();
        let ok = matches!(vals.next(), Some(Value::Boolean(true)));
        let v = vals.next().unwrap_or(Value::Nil);
        Ok(if ok { Ok(v) } else { Err(v) })
    }

    fn array(&self, items: &[Bytes]) -> mlua::Result<Table> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, it) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(it)?)?;
        }
        Ok(t)
    }

    /// `ERR msg script: <sha>, on @user_script:<line>.` from the error
    /// table the handler built.
    fn error_reply(&self, sha: &str, err: &Value) -> Frame {
        let killed = self
            .lua
            .app_data_ref::<Shared>()
            .map(|s| s.run.kill_requested() != Kill::None)
            .unwrap_or(false);
        let Value::Table(t) = err else {
            return Frame::error(format!("ERR Error running script {sha}, execution failure"));
        };
        let mut out = if killed {
            KILLED.as_bytes().to_vec()
        } else {
            err_text(err)
        };
        if let (Ok(Value::String(src)), Ok(line)) =
            (t.raw_get::<Value>("source"), t.raw_get::<i64>("line"))
        {
            out.extend_from_slice(format!(" script: {sha}, on ").as_bytes());
            out.extend_from_slice(super::convert::c_str(&src.as_bytes()));
            out.extend_from_slice(format!(":{line}.").as_bytes());
        }
        Frame::Error(super::convert::error_text(&out))
    }
}

/// A script running this long hands its I/O thread's other work (queued
/// connections, the I/O driver) to a fresh thread, so the server keeps
/// answering -BUSY and SCRIPT KILL while it runs. Short scripts never pay.
const DETACH_AFTER_MS: u64 = 10;
/// The hand-off is retried this often for as long as the script runs:
/// tokio takes the worker back if the fresh thread was not scheduled in
/// time, which on a loaded machine left every connection unanswered.
const DETACH_RETRY_MS: u64 = 10;
/// How long one hand-off waits to see the fresh thread run.
const DETACH_WAIT: std::time::Duration = std::time::Duration::from_millis(5);

fn detach_from_runtime() {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let Ok(handle) = Handle::try_current() else {
        return;
    };
    if handle.runtime_flavor() != RuntimeFlavor::MultiThread {
        return;
    }
    // The probe lands in this worker's own queue, which travels with the
    // worker to the fresh thread; once it has run there, tokio can no
    // longer hand the worker back to this thread. (Already detached, the
    // probe runs on any worker at once and this costs a wake-up.)
    let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
    handle.spawn(async move {
        let _ = tx.try_send(());
    });
    tokio::task::block_in_place(|| {
        let _ = rx.recv_timeout(DETACH_WAIT);
    });
}

fn normal_hook() -> HookTriggers {
    HookTriggers::new().every_nth_instruction(HOOK_EVERY)
}

/// Stops a script asked to stop. After the first refusal it fires on every
/// instruction, so a script catching the error with pcall cannot go on.
fn hook(lua: &Lua, _: mlua::Debug) -> mlua::Result<VmState> {
    let Some(s) = lua.app_data_ref::<Shared>() else {
        return Ok(VmState::Continue);
    };
    let elapsed = s.run.elapsed_ms();
    if elapsed >= s.next_detach_ms.load(Ordering::Relaxed) {
        s.next_detach_ms
            .store(elapsed + DETACH_RETRY_MS, Ordering::Relaxed);
        detach_from_runtime();
    }
    if s.run.kill_requested() == Kill::None {
        return Ok(VmState::Continue);
    }
    if !s.escalated.swap(true, Ordering::Relaxed) {
        drop(s);
        lua.set_hook(HookTriggers::new().every_nth_instruction(1), hook);
    }
    Err(mlua::Error::RuntimeError(KILLED.to_string()))
}

/// The text of an error table the handler made (`err`, up to its first
/// NUL as Redis reads it); Redis's generic failure for anything else.
fn err_text(err: &Value) -> Vec<u8> {
    match err {
        Value::Table(t) => match t.raw_get::<Value>("err") {
            Ok(Value::String(s)) => super::convert::c_str(&s.as_bytes()).to_vec(),
            _ => b"ERR execution failure".to_vec(),
        },
        _ => b"ERR execution failure".to_vec(),
    }
}

/// The xpcall message handler: makes every error a table
/// `{err=..., source=..., line=...}`, naming the script line it came from.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let t = match err {
        Value::Table(t) => t,
        Value::String(s) => {
            let mut text = b"ERR ".to_vec();
            text.extend_from_slice(&s.as_bytes());
            error_table_bytes(lua, &text)?
        }
        Value::Error(e) => error_table_bytes(lua, format!("ERR {}", error_message(&e)).as_bytes())?,
        other => {
            let text = format!("ERR {}", other.to_string().unwrap_or_default());
            error_table_bytes(lua, text.as_bytes())?
        }
    };
    for level in 1..64 {
        let Some(d) = lua.inspect_stack(level) else {
            break;
        };
        let src = d.source();
        if let Some(name) = src
            .source
            .as_deref()
            .filter(|s| *s == SCRIPT_CHUNK || *s == FUNCTION_CHUNK)
        {
            t.raw_set("source", name)?;
            t.raw_set("line", d.curr_line())?;
            break;
        }
    }
    Ok(t)
}

/// The text of an error raised by Rust code (mlua wraps it).
pub(super) fn error_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => error_message(cause),
        other => other.to_string(),
    }
}

fn lua_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => error_message(other),
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// The field marking an error table from a command a script called, whose
/// error the statistics have counted already.
const COUNTED: &str = "ignore_error_stats_update";

fn counted_error(v: &Value) -> bool {
    matches!(v, Value::Table(t) if t.raw_get::<bool>(COUNTED).unwrap_or(false))
}

/// `{err = msg}` with Redis's code rule: no code → ERR.
fn error_table(lua: &Lua, msg: &str) -> mlua::Result<Value> {
    Ok(Value::Table(error_table_bytes(
        lua,
        format!("ERR {msg}").as_bytes(),
    )?))
}

fn error_table_bytes(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 3)?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok(t)
}

/// A command's arguments from Lua: strings as they are, numbers as Redis
/// prints them; anything else is refused.
fn command_args(args: &Table, n: usize) -> Result<Vec<Bytes>, &'static str> {
    if n == 0 {
        return Err("Please specify at least one argument for this redis lib call");
    }
    let mut out = Vec::with_capacity(n);
    for i in 1..=n {
        out.push(
            match super::convert::exact_get(args, i).unwrap_or(Value::Nil) {
                Value::String(s) => Bytes::copy_from_slice(&s.as_bytes()),
                // Lua 5.1 numbers are doubles, which `%.17g` prints with an
                // exponent from 1e17 on; below that, the digits are the same.
                Value::Integer(i) if i.unsigned_abs() < 100_000_000_000_000_000 => {
                    Bytes::from(i.to_string())
                }
                Value::Integer(i) => Bytes::from(number_arg(i as f64)),
                Value::Number(n) => Bytes::from(number_arg(n)),
                _ => return Err("Lua redis lib command arguments must be strings or integers"),
            },
        );
    }
    Ok(out)
}

/// Registry slot of the running script's command runner (a scoped
/// function, valid only while the script runs).
const EXEC_KEY: &str = "durakv.exec";
const EXEC_KEY_C: &std::ffi::CStr = c"durakv.exec";

/// `redis.call` and `redis.pcall` are C functions, as in Redis, for two
/// reasons a Lua wrapper cannot meet: `return redis.call(...)` must keep
/// the script's frame (a Lua callee would be tail-called, and the error
/// could not name the script line), and `redis.call` must raise the error
/// *table*, which a Rust callback cannot raise.
///
/// Safety: called by Lua with a valid state and LUA_MINSTACK free slots;
/// the runner's errors propagate as Lua errors
/// through this frame, which owns nothing that needs dropping.
unsafe extern "C-unwind" fn redis_call(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    call_runner(state, true)
}

unsafe extern "C-unwind" fn redis_pcall(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    call_runner(state, false)
}

/// Calls the runner with this call's arguments; it returns (ok, reply).
/// The arguments move into a table first, in place: a script may pass
/// nearly as many arguments as Lua's C stack holds (`unpack` of ~8000),
/// leaving no room to push anything below them.
unsafe fn call_runner(state: *mut mlua::ffi::lua_State, raise: bool) -> std::ffi::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    // Lua gives every C function LUA_MINSTACK (20) free slots above its
    // arguments, however many there are; this uses at most three.
    ffi::lua_createtable(state, n, 0);
    ffi::lua_insert(state, 1);
    for i in (1..=n).rev() {
        // Pops the top argument (argument i) into table[i].
        ffi::lua_rawseti(state, 1, i as ffi::lua_Integer);
    }
    ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, EXEC_KEY_C.as_ptr());
    ffi::lua_insert(state, 1);
    ffi::lua_pushinteger(state, n as ffi::lua_Integer);
    ffi::lua_call(state, 2, 2);
    if raise && ffi::lua_toboolean(state, -2) == 0 {
        ffi::lua_error(state);
    }
    1
}

/// The Rust half of the `redis` table (see `prelude.lua`).
fn api_table(lua: &Lua) -> mlua::Result<Table> {
    let api = lua.create_table()?;
    // SAFETY: see `redis_call`.
    api.raw_set("call", unsafe { lua.create_c_function(redis_call)? })?;
    api.raw_set("pcall", unsafe { lua.create_c_function(redis_pcall)? })?;
    api.raw_set(
        "sha1hex",
        lua.create_function(|_, v: Value| {
            let bytes = match &v {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => Value::Number(*n)
                    .to_string()
                    .unwrap_or_default()
                    .into_bytes(),
                _ => Vec::new(),
            };
            Ok(super::sha1_hex(&bytes))
        })?,
    )?;
    api.raw_set(
        "log",
        lua.create_function(|_, args: Variadic<Value>| {
            let level = match args.first() {
                Some(Value::Number(n)) => *n as i64,
                Some(Value::Integer(i)) => *i,
                _ => 2,
            };
            let parts: Vec<String> = args
                .iter()
                .skip(1)
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.to_string_lossy()),
                    Value::Integer(i) => Some(i.to_string()),
                    Value::Number(_) => v.to_string().ok(),
                    _ => None,
                })
                .collect();
            let msg = parts.join(" ");
            match level {
                0 => tracing::debug!(target: "lua", "{msg}"),
                1 => tracing::debug!(target: "lua", "{msg}"),
                2 => tracing::info!(target: "lua", "{msg}"),
                _ => tracing::warn!(target: "lua", "{msg}"),
            }
            Ok(())
        })?,
    )?;
    api.raw_set(
        "setresp",
        lua.create_function(|lua, v: f64| {
            if let Some(s) = lua.app_data_ref::<Shared>() {
                s.resp
                    .store(if v == 3.0 { 3 } else { 2 }, Ordering::Relaxed);
            }
            Ok(())
        })?,
    )?;
    api.raw_set(
        "acl_check_cmd",
        lua.create_function(|lua, args: Variadic<Value>| {
            let n = args.len();
            let t = lua.create_table_with_capacity(n, 0)?;
            for (i, a) in args.into_iter().enumerate() {
                t.raw_set(i + 1, a)?;
            }
            // (true, allowed) or (false, the error's text without its code).
            let exec: mlua::Function = lua.named_registry_value(EXEC_KEY)?;
            let (ok, v): (bool, Value) = exec.call((t, n, true))?;
            if ok {
                return Ok((true, v));
            }
            let text = match &v {
                Value::Table(t) => t.raw_get::<String>("err").unwrap_or_default(),
                _ => String::new(),
            };
            let text = text.strip_prefix("ERR ").unwrap_or(&text).to_string();
            Ok((false, Value::String(lua.create_string(text)?)))
        })?,
    )?;
    api.raw_set(
        "command_exists",
        lua.create_function(|_, name: Value| {
            Ok(match name {
                Value::String(s) => crate::command::lookup(&s.as_bytes()).is_some(),
                _ => false,
            })
        })?,
    )?;
    api.raw_set(
        "register_function",
        lua.create_function(|lua, args: Variadic<Value>| {
            let r = registration(lua, &args).map_err(mlua::Error::RuntimeError)?;
            let Some(mut loading) = lua.app_data_mut::<Loading>() else {
                return Err(mlua::Error::RuntimeError(
                    "redis.register_function can only be called on FUNCTION LOAD command".into(),
                ));
            };
            if !super::functions::valid_name(&r.name) {
                return Err(mlua::Error::RuntimeError(super::functions::BAD_NAME.into()));
            }
            if loading.0.iter().any(|x| x.name == r.name) {
                return Err(mlua::Error::RuntimeError(
                    "Function already exists in the library".into(),
                ));
            }
            loading.0.push(r);
            Ok(())
        })?,
    )?;
    let version = crate::cmd::connection::REDIS_COMPAT_VERSION;
    api.raw_set("version", version)?;
    api.raw_set("version_num", version_num(version))?;
    Ok(api)
}

/// A string argument as Lua's `lua_isstring` accepts it (numbers too).
fn lua_string(lua: &Lua, v: &Value) -> Option<Bytes> {
    match v {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(_) | Value::Number(_) => lua
            .coerce_string(v.clone())
            .ok()
            .flatten()
            .map(|s| Bytes::copy_from_slice(&s.as_bytes())),
        _ => None,
    }
}

/// The arguments of `redis.register_function`: (name, callback) or one
/// table of named arguments, with Redis's errors.
fn registration(lua: &Lua, args: &[Value]) -> Result<Registration, String> {
    let named = match args {
        [Value::Table(t)] => t,
        [_] => return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into()),
        [name, callback] => {
            let name = lua_string(lua, name)
                .ok_or("first argument to redis.register_function must be a string")?;
            let Value::Function(callback) = callback else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            return Ok(Registration {
                name: String::from_utf8_lossy(&name).into_owned(),
                description: None,
                flags: 0,
                callback: registered(lua, callback.clone())?,
            });
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    let (mut name, mut description, mut callback, mut flags) = (None, None, None, 0u8);
    for pair in named.clone().pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        let Some(key) = lua_string(lua, &k) else {
            return Err(
                "named argument key given to redis.register_function is not a string".into(),
            );
        };
        match key.to_ascii_lowercase().as_slice() {
            b"function_name" => {
                name = Some(lua_string(lua, &v).ok_or(
                    "function_name argument given to redis.register_function must be a string",
                )?)
            }
            b"description" => {
                description = Some(lua_string(lua, &v).ok_or(
                    "description argument given to redis.register_function must be a string",
                )?)
            }
            b"callback" => match v {
                Value::Function(f) => callback = Some(f),
                _ => {
                    return Err(
                        "callback argument given to redis.register_function must be a function"
                            .into(),
                    )
                }
            },
            b"flags" => {
                let Value::Table(t) = v else {
                    return Err("flags argument to redis.register_function must be a table representing function flags".into());
                };
                for i in 1.. {
                    let flag = match t.raw_get::<Value>(i).map_err(|e| e.to_string())? {
                        Value::Nil => break,
                        f => lua_string(lua, &f).ok_or("unknown flag given")?,
                    };
                    flags |= super::functions::flag_bit(&flag).ok_or("unknown flag given")?;
                }
            }
            _ => return Err("unknown argument given to redis.register_function".into()),
        }
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let callback = callback.ok_or("redis.register_function must get a callback argument")?;
    Ok(Registration {
        name: String::from_utf8_lossy(&name).into_owned(),
        description,
        flags,
        callback: registered(lua, callback)?,
    })
}

fn registered(lua: &Lua, callback: Function) -> Result<mlua::RegistryKey, String> {
    lua.create_registry_value(callback)
        .map_err(|e| e.to_string())
}

/// `7.2.4` → 0x070204, Redis's REDIS_VERSION_NUM.
fn version_num(v: &str) -> i64 {
    v.split('.')
        .take(3)
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .fold(0, |acc, p| (acc << 8) | p)
}
