//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT: Lua scripts run
//! atomically over every shard, their writes committed as one log record
//! (see `crate::scripting` for the VM and why other clients answer -BUSY).

use super::subcommands::{sub, SubSpec};
use crate::command::{flags::*, lookup, spec, CommandSpec, Ctx, Handler, Keys, Reply, NO_KEYS};
use crate::errors;
use crate::scripting::sha1_hex;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::txn::Txn;
use durakv_protocol::{Frame, Protocol};

const NUMKEYS_TOO_BIG: &str = "ERR Number of keys can't be greater than number of args";
const NUMKEYS_NEGATIVE: &str = "ERR Number of keys can't be negative";
const UNKNOWN_COMMAND: &str = "ERR Unknown Redis command called from script";
const WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";
const NOT_ALLOWED: &str = "ERR This Redis command is not allowed from script";
const WRITE_FROM_RO: &str = "ERR Write commands are not allowed from read-only scripts.";
const FLUSH_OPTION: &str = "ERR SCRIPT FLUSH only support SYNC|ASYNC option";

/// A script reaches every key, declared or not, so it holds every shard:
/// no other client observes half of it.
const SCRIPT_KEYS: Keys = Keys::All;

/// The keys a script declares, `numkeys` (argument 2) of them, as COMMAND
/// INFO and GETKEYS report them.
pub(super) const NUMKEYS_KEYS: Keys = Keys::Custom(super::mpop::keys_after_numkeys_at_2);

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("eval", -3, NOSCRIPT | STALE | SKIP_MONITOR, SCRIPT_KEYS, Handler::Data(eval), "scripting", "Runs a Lua script atomically.").reporting_keys(NUMKEYS_KEYS),
        spec("evalsha", -3, NOSCRIPT | STALE | SKIP_MONITOR, SCRIPT_KEYS, Handler::Data(evalsha), "scripting", "Runs a cached Lua script named by its SHA1.").reporting_keys(NUMKEYS_KEYS),
        spec("eval_ro", -3, NOSCRIPT | STALE | READONLY | SKIP_MONITOR, SCRIPT_KEYS, Handler::Data(eval_ro), "scripting", "Runs a Lua script that may not write.").reporting_keys(NUMKEYS_KEYS),
        spec("evalsha_ro", -3, NOSCRIPT | STALE | READONLY | SKIP_MONITOR, SCRIPT_KEYS, Handler::Data(evalsha_ro), "scripting", "Runs a cached Lua script by SHA1, without writes.").reporting_keys(NUMKEYS_KEYS),
        spec("script", -2, NOSCRIPT, NO_KEYS, Handler::Conn(script), "scripting", "Parent of the subcommands that manage cached Lua scripts."),
    ]
}

/// SCRIPT's subcommands as COMMAND INFO / LIST report them; `script`
/// parses its arguments itself.
pub(super) const SCRIPT_SUBS: &[SubSpec] = &[
    sub(
        "debug",
        3,
        NOSCRIPT,
        "Accepts NO only: durakv has no Lua debugger to switch on.",
    ),
    sub(
        "exists",
        -3,
        NOSCRIPT,
        "Tells, for each SHA1, whether that script is cached.",
    ),
    sub("flush", -2, NOSCRIPT, "Empties the Lua script cache."),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each SCRIPT subcommand.",
    ),
    sub(
        "kill",
        2,
        NOSCRIPT,
        "Stops the running Lua script if it has not written.",
    ),
    sub(
        "load",
        3,
        NOSCRIPT | STALE,
        "Caches a Lua script and gives its SHA1.",
    ),
];

/// May `args` run while a script has been running too long? (Redis's
/// `allow-busy` commands.)
pub fn allowed_when_busy(name: &str, args: &[Bytes]) -> bool {
    let sub = |word: &str| args.get(1).is_some_and(|a| is(a, word));
    match name {
        "auth" | "hello" | "multi" | "discard" | "unwatch" | "reset" | "quit" => true,
        "script" => sub("kill"),
        "function" => super::functions::allowed_when_busy(args),
        "shutdown" => args[1..].iter().any(|a| is(a, "nosave")),
        _ => false,
    }
}

fn eval(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(run(ctx, txn, args, false, false))
}

fn evalsha(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(run(ctx, txn, args, true, false))
}

fn eval_ro(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(run(ctx, txn, args, false, true))
}

fn evalsha_ro(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    Ok(run(ctx, txn, args, true, true))
}

/// EVAL-family arguments: script numkeys key... arg...
fn numkeys(args: &[Bytes]) -> Result<usize, Frame> {
    numkeys_in_range(arg_i64(&args[2])?, args.len() - 3)
}

/// Whether an EVAL or EVALSHA call runs a script whose first line
/// declares `no-writes`, or an FCALL a function that does (CLIENT PAUSE
/// WRITE lets them through, as Redis does); false for anything else, a
/// script not in the cache, or a function while a script runs.
pub(crate) fn declares_no_writes(
    shared: &crate::state::Shared,
    spec: &CommandSpec,
    args: &[Bytes],
) -> bool {
    let body = match spec.name {
        "eval" => args.get(1).cloned(),
        "evalsha" => args.get(1).and_then(|sha| {
            shared
                .scripting
                .cached(&String::from_utf8_lossy(sha).to_ascii_lowercase())
        }),
        "fcall" => {
            return args.get(1).is_some_and(|name| {
                shared.scripting.function_declares_no_writes(name) == Some(true)
            })
        }
        _ => None,
    };
    body.is_some_and(|b| Shebang::parse(&b).is_ok_and(|s| s.no_writes))
}

/// A key count with Redis's errors, given `available` arguments after it.
pub(crate) fn numkeys_in_range(n: i64, available: usize) -> Result<usize, Frame> {
    if n > available as i64 {
        return Err(errors::err(NUMKEYS_TOO_BIG));
    }
    if n < 0 {
        return Err(errors::err(NUMKEYS_NEGATIVE));
    }
    Ok(n as usize)
}

fn run(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], by_sha: bool, ro: bool) -> Frame {
    crate::monitor::show_script(ctx, args);
    match try_run(ctx, txn, args, by_sha, ro) {
        Ok(f) | Err(f) => f,
    }
}

fn try_run(
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    by_sha: bool,
    ro: bool,
) -> Result<Frame, Frame> {
    // No script has a name of another length: Redis says so before it
    // reads numkeys.
    if by_sha && args[1].len() != 40 {
        return Err(errors::err(crate::scripting::NOSCRIPT));
    }
    let n = numkeys(args)?;
    let shared = ctx.shared;
    let scripting = &shared.scripting;
    let (sha, body) = if by_sha {
        let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        let body = scripting
            .cached(&sha)
            .ok_or_else(|| errors::err(crate::scripting::NOSCRIPT))?;
        (sha, body)
    } else {
        (sha1_hex(&args[1]), args[1].clone())
    };
    let shebang = Shebang::parse(&body)?;
    // A script that declares flags without no-writes declares it writes.
    if ro && shebang.declared && !shebang.no_writes {
        return Err(errors::err(super::functions::WRITE_FLAG_ON_RO));
    }
    let ro = ro || shebang.no_writes;
    // A script that declares its flags may write unless it says otherwise,
    // so it is refused up front under memory pressure, as in Redis.
    if shebang.declared && !ro && !shebang.allow_oom {
        if let Some(refusal) = crate::dispatch::refuse_write(ctx, DENYOOM) {
            return Err(refusal);
        }
    }
    let mut engine = scripting.engine(shared)?;
    let vm = engine.vm(scripting.run_state())?;
    let func = vm.function(&sha, &body[shebang.len..])?;
    scripting.remember(&sha, &body);
    let (keys, argv) = args[3..].split_at(n);
    let _running = scripting.begin();
    let (db, protocol) = (ctx.client.db, ctx.client.protocol);
    let reply = {
        let mut exec = |cmd: Vec<Bytes>, resp: u8| call(ctx, txn, &cmd, resp, ro);
        vm.run(&sha, &func, keys, argv, &mut exec)
    };
    ctx.client.error_counted = vm.reply_already_counted();
    // SELECT and the RESP level inside the script are the script's own.
    ctx.client.db = db;
    ctx.client.protocol = protocol;
    Ok(reply)
}

/// One `redis.call`: Redis's checks, then the command's own handler on the
/// script's transaction.
pub(crate) fn call(
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    resp: u8,
    ro: bool,
) -> Frame {
    if resp == crate::scripting::vm::ACL_CHECK_ONLY {
        return match lookup(&args[0]) {
            Some(spec) if spec.arity_ok(args.len()) => Frame::Integer(
                crate::acl::check::check(&ctx.client.user, spec, args).is_ok() as i64,
            ),
            _ => Frame::error("ERR Invalid command passed to redis.acl_check_cmd()"),
        };
    }
    let Some(spec) = lookup(&args[0]) else {
        return errors::err(UNKNOWN_COMMAND);
    };
    if let Some(refusal) = refusal(ctx, spec, args, ro) {
        // Counted as Redis counts a command refused before it runs.
        ctx.shared.cmdstats.rejected(spec);
        count_error(ctx, &refusal);
        return refusal;
    }
    ctx.client.protocol = if resp == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    };
    let before = txn.mutations().len();
    // A script's commands count in INFO commandstats, as in Redis.
    let script_cmd = std::mem::replace(&mut ctx.client.last_cmd, spec.name.to_string());
    let started = std::time::Instant::now();
    ctx.client.in_script = true;
    let reply = crate::command::into_frame(match spec.handler {
        Handler::Data(f) => crate::notify::run_data(f, ctx, txn, spec, args),
        Handler::Conn(f) => f(ctx, args),
        Handler::Outcome(_) if spec.name == "info" => {
            Ok(super::info::info_in_script(ctx, txn, args))
        }
        // EXEC, WAITAOF, CONFIG: they wait for or lock what the script
        // already holds.
        Handler::Outcome(_) => Err(errors::err(NOT_ALLOWED)),
    });
    ctx.client.in_script = false;
    crate::monitor::show_called(ctx, spec, args);
    let took = started.elapsed();
    crate::dispatch::account(ctx, spec, args, took, reply.is_error(), true);
    ctx.client.last_cmd = script_cmd;
    if reply.is_error() {
        count_error(ctx, &reply);
    }
    if txn.mutations().len() > before {
        ctx.shared.scripting.run_state().note_write();
    }
    reply
}

/// A called command's error counts in INFO errorstats and
/// `total_error_replies` even when the script catches it, as in Redis.
fn count_error(ctx: &Ctx<'_>, error: &Frame) {
    ctx.shared.cmdstats.error_reply(error);
    ctx.shared.stats.total_error_replies.add(1);
}

/// Why `redis.call` refuses `args` before running it, if it does.
fn refusal(ctx: &Ctx<'_>, spec: &CommandSpec, args: &[Bytes], ro: bool) -> Option<Frame> {
    if !spec.arity_ok(args.len()) {
        return Some(errors::err(WRONG_ARITY));
    }
    if let Some(denied) = crate::acl::check::in_script(ctx, spec, args) {
        return Some(denied);
    }
    // A subcommand's own flags count, as Redis looks the subcommand up
    // before it checks them (CLUSTER RESET, CONFIG SET, ...).
    if super::subcommands::flags_of(spec, args) & NOSCRIPT != 0 {
        return Some(errors::err(NOT_ALLOWED));
    }
    if matches!(spec.name, "xread" | "xreadgroup") && super::stream_read::asks_to_block(args) {
        // Named as the script wrote it, as Redis does.
        return Some(Frame::error(format!(
            "ERR {} command is not allowed with BLOCK option from scripts",
            String::from_utf8_lossy(&args[0])
        )));
    }
    // PUBLISH and PFCOUNT (which may rewrite its key) reach replicas:
    // Redis counts them as writes here.
    if ro && matches!(spec.name, "publish" | "spublish" | "pfcount") {
        return Some(errors::err(WRITE_FROM_RO));
    }
    if spec.is_write() {
        if ro {
            return Some(errors::err(WRITE_FROM_RO));
        }
        // Redis lets a script that has already written go on writing under
        // OOM, so it is never left half applied.
        let deny = if ctx.shared.scripting.run_state().has_written() {
            spec.flags & !crate::command::flags::DENYOOM
        } else {
            spec.flags
        };
        return crate::dispatch::refuse_write(ctx, deny);
    }
    None
}

/// The `#!lua flags=...` first line of a script.
#[derive(Default)]
struct Shebang {
    /// Bytes to skip before compiling (the line, not its newline, so line
    /// numbers stay the user's).
    len: usize,
    /// The script has a shebang line.
    declared: bool,
    no_writes: bool,
    allow_oom: bool,
}

impl Shebang {
    /// Read as Redis reads it: the line up to its newline (required), split
    /// into words as the inline protocol splits them (any white space,
    /// quotes), `flags=` split on every comma.
    fn parse(body: &[u8]) -> Result<Shebang, Frame> {
        if !body.starts_with(b"#!") {
            return Ok(Shebang::default());
        }
        let Some(len) = body.iter().position(|&c| c == b'\n') else {
            return Err(Frame::error("ERR Invalid script shebang"));
        };
        let parts = durakv_protocol::request::split_args(&body[..len])
            .filter(|p| !p.is_empty())
            .ok_or_else(|| Frame::error("ERR Invalid engine in script shebang"))?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        if parts[0] != b"#!lua" {
            return Err(Frame::error(format!(
                "ERR Unexpected engine in script shebang: {}",
                text(&parts[0])
            )));
        }
        let mut out = Shebang {
            len,
            declared: true,
            ..Shebang::default()
        };
        for part in &parts[1..] {
            let Some(list) = part.strip_prefix(b"flags=") else {
                return Err(Frame::error(format!(
                    "ERR Unknown lua shebang option: {}",
                    text(part)
                )));
            };
            if list.is_empty() {
                continue;
            }
            for flag in list.split(|&c| c == b',') {
                match flag {
                    b"no-writes" => out.no_writes = true,
                    b"allow-oom" => out.allow_oom = true,
                    b"allow-stale" | b"no-cluster" | b"allow-cross-slot-keys" => {}
                    other => {
                        return Err(Frame::error(format!(
                            "ERR Unexpected flag in script shebang: {}",
                            text(other)
                        )))
                    }
                }
            }
        }
        Ok(out)
    }
}

fn script(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let sub = &args[1];
    let scripting = &ctx.shared.scripting;
    if is(sub, "load") && args.len() == 3 {
        let body = &args[2];
        let sha = sha1_hex(body);
        let shebang = Shebang::parse(body)?;
        let compiled = scripting.engine(ctx.shared).and_then(|mut engine| {
            engine
                .vm(scripting.run_state())?
                .function(&sha, &body[shebang.len..])
                .map(|_| ())
        });
        compiled?;
        scripting.remember(&sha, body);
        Ok(Frame::Bulk(Bytes::from(sha)))
    } else if is(sub, "exists") && args.len() >= 3 {
        Ok(Frame::Array(
            args[2..]
                .iter()
                .map(|a| {
                    let sha = String::from_utf8_lossy(a).to_ascii_lowercase();
                    Frame::Integer(scripting.exists(&sha) as i64)
                })
                .collect(),
        ))
    } else if is(sub, "flush") {
        let mode_ok = args.len() == 3 && (is(&args[2], "sync") || is(&args[2], "async"));
        if args.len() != 2 && !mode_ok {
            return Err(errors::err(FLUSH_OPTION));
        }
        match scripting.flush(ctx.shared) {
            Ok(()) => Ok(Frame::ok()),
            Err(e) => Err(e),
        }
    } else if is(sub, "kill") && args.len() == 2 {
        Ok(scripting.kill(true))
    } else if is(sub, "debug") && args.len() == 3 {
        // There is no Lua debugger (LDB) to switch to: NO, the mode every
        // connection is in, is accepted; YES and SYNC are refused.
        if is(&args[2], "no") {
            Ok(Frame::ok())
        } else if is(&args[2], "yes") || is(&args[2], "sync") {
            Err(Frame::error(
                "ERR SCRIPT DEBUG YES/SYNC: durakv has no Lua debugger; debug scripts with redis.log and redis.pcall",
            ))
        } else {
            Err(Frame::error("ERR Use SCRIPT DEBUG YES/SYNC/NO"))
        }
    } else if is(sub, "help") && args.len() == 2 {
        Ok(Frame::Array(
            HELP.iter()
                .map(|l| Frame::Simple(Bytes::from_static(l.as_bytes())))
                .collect(),
        ))
    } else if ["load", "exists", "flush", "kill", "help", "debug"]
        .iter()
        .any(|s| is(sub, s))
    {
        Err(Frame::error(format!(
            "ERR wrong number of arguments for 'script|{}' command",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )))
    } else {
        Err(errors::unknown_subcommand(sub, "script"))
    }
}

const HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "EXISTS <sha1> [<sha1> ...]",
    "    For each SHA1 given, reply 1 if the script cache holds it, else 0.",
    "FLUSH [ASYNC|SYNC]",
    "    Empty the script cache. durakv always does this before replying; the",
    "    mode is checked but changes nothing:",
    "    * ASYNC: treated like SYNC.",
    "    * SYNC: clear the cache before replying.",
    "KILL",
    "    Stop the EVAL script now running, provided it has not written yet.",
    "LOAD <script>",
    "    Compile <script> and keep it in the cache without running it; replies",
    "    with the SHA1 that EVALSHA takes.",
    "HELP",
    "    Show this list of subcommands.",
];
