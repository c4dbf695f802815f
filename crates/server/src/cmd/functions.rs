//! FUNCTION (LOAD, LIST, DELETE, FLUSH, DUMP, RESTORE, STATS, KILL, HELP),
//! FCALL and FCALL_RO, as in Redis 7.0.
//!
//! A change to the libraries is a mutation of the engine
//! (`Mutation::Function`), so it is logged, checkpointed and replayed like
//! a write; the compiled libraries live in `scripting::functions`. A change
//! is compiled and checked first, then applied to the transaction (which
//! may refuse it), and only then installed in the registry. FCALL runs a
//! function as EVAL runs a script: over every shard, its writes one record.
//!
//! Lock order: shards, then the engine's library lock
//! (`Txn::lock_functions`), then the Lua engine; FUNCTION takes no shard,
//! so KILL and STATS answer while a script holds them all.

use super::keys::{apply, apply_all};
use super::subcommands::{find_sub, note_subcommand, sub, SubSpec};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, NO_KEYS};
use crate::errors;
use crate::glob::glob_match;
use crate::scripting::function_payload;
use crate::scripting::functions::{flags, Library, Registry, LOAD_TIMEOUT};
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::{FunctionOp, Mutation};
use durakv_engine::txn::Txn;
use durakv_protocol::Frame;

const NOT_FOUND: &str = "ERR Function not found";
const BAD_NUMKEYS: &str = "ERR Bad number of keys provided";
pub(super) const WRITE_FLAG_ON_RO: &str =
    "ERR Can not execute a script with write flag using *_ro command.";

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("function", -2, NOSCRIPT, NO_KEYS, Handler::Data(function), "scripting", "Parent of the subcommands that manage function libraries."),
        spec("fcall", -3, NOSCRIPT | STALE | SKIP_MONITOR, Keys::All, Handler::Data(fcall), "scripting", "Runs a library function with the given keys and arguments.").reporting_keys(super::scripting::NUMKEYS_KEYS),
        spec("fcall_ro", -3, NOSCRIPT | STALE | READONLY | SKIP_MONITOR, Keys::All, Handler::Data(fcall_ro), "scripting", "Runs a no-writes library function with keys and arguments.").reporting_keys(super::scripting::NUMKEYS_KEYS),
    ]
}

/// FUNCTION's subcommands, with Redis's arity (FUNCTION itself counted)
/// and flags.
#[rustfmt::skip]
pub(super) const FUNCTION_SUBS: &[SubSpec] = &[
    sub("delete", 3, WRITE | NOSCRIPT, "Unloads a library and every function it registered."),
    sub("dump", 2, NOSCRIPT, "Serializes every loaded library into one payload."),
    sub("flush", -2, WRITE | NOSCRIPT, "Unloads every library."),
    sub("help", 2, LOADING | STALE, "Describes each FUNCTION subcommand."),
    sub("kill", 2, NOSCRIPT, "Stops the running function if it has not written."),
    sub("list", -2, NOSCRIPT, "Describes the loaded libraries."),
    sub("load", -3, WRITE | DENYOOM | NOSCRIPT, "Compiles and registers a library."),
    sub("restore", -3, WRITE | DENYOOM | NOSCRIPT, "Loads the libraries in a FUNCTION DUMP payload."),
    sub("stats", 2, NOSCRIPT, "Reports any running function and the engines."),
];

/// May FUNCTION `args` run while a script runs too long? (KILL, STATS.)
pub fn allowed_when_busy(args: &[Bytes]) -> bool {
    args.get(1).is_some_and(|a| is(a, "kill") || is(a, "stats"))
}

fn function(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let s = find_sub("function", args)?;
    note_subcommand(ctx, "function", s);
    match s.name {
        "load" => load(ctx, txn, args),
        "delete" => delete(ctx, txn, args),
        "flush" => flush(ctx, txn, args),
        "restore" => restore(ctx, txn, args),
        "dump" => dump(ctx, txn),
        "list" => list(ctx, txn, args),
        "stats" => stats(ctx),
        "kill" => Ok(ctx.shared.scripting.kill(false)),
        _ => Ok(help()),
    }
}

/// Refuses a write on a failed log (and, for `denyoom`, over maxmemory);
/// then holds the libraries' lock before the Lua engine's.
fn prepare_write(ctx: &Ctx<'_>, txn: &mut Txn<'_>, cmd_flags: u32) -> Result<(), Frame> {
    if let Some(refusal) = crate::dispatch::refuse_write(ctx, cmd_flags) {
        return Err(refusal);
    }
    txn.lock_functions();
    Ok(())
}

fn syntax_error(sub: &str) -> Frame {
    errors::sub_usage(sub.as_bytes(), "function")
}

/// FUNCTION LOAD [REPLACE] code
fn load(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let mut replace = false;
    for opt in &args[2..args.len() - 1] {
        if !is(opt, "replace") {
            return Err(Frame::error(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(opt)
            )));
        }
        replace = true;
    }
    let code = &args[args.len() - 1];
    prepare_write(ctx, txn, DENYOOM)?;
    let scripting = &ctx.shared.scripting;
    let mut engine = scripting.engine(ctx.shared)?;
    let registry = &mut engine.functions;
    let meta = crate::scripting::functions::metadata(code)?;
    if !replace && registry.library(&meta.name).is_some() {
        return Err(Frame::error(format!(
            "ERR Library '{}' already exists",
            meta.name
        )));
    }
    let lib = registry.compile(scripting.run_state(), code, Some(LOAD_TIMEOUT))?;
    if let Some(e) = registry.collision(&lib, &[&lib.name]) {
        return Err(e);
    }
    apply(txn, load_op(&lib))?;
    let name = lib.name.clone();
    registry.install(lib);
    scripting.note_function_counts(registry);
    Ok(Frame::Bulk(Bytes::from(name)))
}

fn load_op(lib: &Library) -> Mutation {
    Mutation::Function(FunctionOp::Load {
        name: Bytes::from(lib.name.clone()),
        code: lib.code.clone(),
    })
}

/// FUNCTION DELETE library
fn delete(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    prepare_write(ctx, txn, 0)?;
    let scripting = &ctx.shared.scripting;
    let mut engine = scripting.engine(ctx.shared)?;
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    if engine.functions.library(&name).is_none() {
        return Err(Frame::error("ERR Library not found"));
    }
    apply(
        txn,
        Mutation::Function(FunctionOp::Delete {
            name: args[2].clone(),
        }),
    )?;
    engine.functions.remove(&name);
    scripting.note_function_counts(&engine.functions);
    Ok(Frame::ok())
}

/// FUNCTION FLUSH [ASYNC|SYNC]
fn flush(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return Err(syntax_error("flush"));
    }
    if args.len() == 3 && !is(&args[2], "sync") && !is(&args[2], "async") {
        return Err(Frame::error(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    prepare_write(ctx, txn, 0)?;
    let scripting = &ctx.shared.scripting;
    let mut engine = scripting.engine(ctx.shared)?;
    apply(txn, Mutation::Function(FunctionOp::Flush))?;
    engine.functions.flush();
    scripting.note_function_counts(&engine.functions);
    Ok(Frame::ok())
}

#[derive(PartialEq, Clone, Copy)]
enum Policy {
    Flush,
    Append,
    Replace,
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]: every library of the
/// payload, or none of them.
fn restore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 4 {
        return Err(syntax_error("restore"));
    }
    let policy =
        match args.get(3) {
            None => Policy::Append,
            Some(p) if is(p, "append") => Policy::Append,
            Some(p) if is(p, "replace") => Policy::Replace,
            Some(p) if is(p, "flush") => Policy::Flush,
            Some(_) => return Err(Frame::error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    prepare_write(ctx, txn, DENYOOM)?;
    let codes = function_payload::parse(&args[2]).map_err(|e| Frame::error(e.message()))?;
    let scripting = &ctx.shared.scripting;
    let mut engine = scripting.engine(ctx.shared)?;
    let registry = &mut engine.functions;
    let libs = compile_all(registry, scripting.run_state(), &codes)?;
    let mut muts = Vec::with_capacity(libs.len() + 1);
    match policy {
        Policy::Flush => muts.push(Mutation::Function(FunctionOp::Flush)),
        Policy::Append => {
            if let Some(l) = libs.iter().find(|l| registry.library(&l.name).is_some()) {
                return Err(Frame::error(format!(
                    "ERR Library {} already exists",
                    l.name
                )));
            }
        }
        Policy::Replace => {}
    }
    if policy != Policy::Flush {
        let replaced: Vec<&str> = libs.iter().map(|l| l.name.as_str()).collect();
        if let Some(e) = libs.iter().find_map(|l| registry.collision(l, &replaced)) {
            return Err(e);
        }
    }
    muts.extend(libs.iter().map(load_op));
    apply_all(txn, muts)?;
    if policy == Policy::Flush {
        registry.clear();
    }
    for lib in libs {
        registry.install(lib);
    }
    scripting.note_function_counts(registry);
    Ok(Frame::ok())
}

/// Compiles a payload's libraries as one set: a name twice, or a function
/// twice, is refused as Redis refuses it.
fn compile_all(
    registry: &mut Registry,
    run: &std::sync::Arc<crate::scripting::RunState>,
    codes: &[Bytes],
) -> Result<Vec<Library>, Frame> {
    let mut libs: Vec<Library> = Vec::with_capacity(codes.len());
    for code in codes {
        let lib = registry.compile(run, code, None)?;
        if libs.iter().any(|l| l.name == lib.name) {
            return Err(Frame::error(format!(
                "ERR Library '{}' already exists",
                lib.name
            )));
        }
        for f in &lib.functions {
            let taken = libs
                .iter()
                .flat_map(|l| &l.functions)
                .any(|g| g.name.eq_ignore_ascii_case(&f.name));
            if taken {
                return Err(Frame::error(format!(
                    "ERR Function {} already exists",
                    f.name
                )));
            }
        }
        libs.push(lib);
    }
    Ok(libs)
}

/// FUNCTION DUMP
fn dump(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>) -> Reply {
    txn.depend_on_functions();
    let engine = ctx.shared.scripting.engine(ctx.shared)?;
    let payload = function_payload::dump(engine.functions.libraries().map(|l| &l.code[..]));
    Ok(Frame::Bulk(Bytes::from(payload)))
}

/// FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern]
fn list(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let mut with_code = false;
    let mut pattern: Option<&Bytes> = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if !with_code && is(a, "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(a, "libraryname") {
            i += 1;
            pattern = Some(
                args.get(i)
                    .ok_or_else(|| Frame::error("ERR library name argument was not given"))?,
            );
        } else {
            return Err(Frame::error(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(a)
            )));
        }
        i += 1;
    }
    txn.depend_on_functions();
    let engine = ctx.shared.scripting.engine(ctx.shared)?;
    let bulk = |s: &str| Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let libs = engine
        .functions
        .libraries()
        .filter(|l| pattern.is_none_or(|p| glob_match(p, l.name.as_bytes(), false)))
        .map(|l| {
            let functions = l
                .functions
                .iter()
                .map(|f| {
                    let flag_set = flags::NAMES
                        .iter()
                        .filter(|(bit, _)| f.has(*bit))
                        .map(|(_, n)| Frame::Simple(Bytes::from_static(n.as_bytes())))
                        .collect();
                    Frame::Map(vec![
                        (bulk("name"), bulk(&f.name)),
                        (
                            bulk("description"),
                            f.description.clone().map_or(Frame::Null, Frame::Bulk),
                        ),
                        (bulk("flags"), Frame::Set(flag_set)),
                    ])
                })
                .collect();
            let mut fields = vec![
                (bulk("library_name"), bulk(&l.name)),
                (bulk("engine"), bulk("LUA")),
                (bulk("functions"), Frame::Array(functions)),
            ];
            if with_code {
                fields.push((bulk("library_code"), Frame::Bulk(l.code.clone())));
            }
            Frame::Map(fields)
        })
        .collect();
    Ok(Frame::Array(libs))
}

/// FUNCTION STATS: answered without the Lua engine, so it works while a
/// function runs (and refused, as in Redis, while an EVAL runs too long).
fn stats(ctx: &mut Ctx<'_>) -> Reply {
    let scripting = &ctx.shared.scripting;
    if scripting.eval_timed_out(ctx.shared) {
        return Err(errors::err(crate::scripting::BUSY));
    }
    let bulk = |s: &str| Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let running = match scripting.run_state().running_function() {
        None => Frame::Null,
        Some((name, cmd, ms)) => Frame::Map(vec![
            (bulk("name"), bulk(&name)),
            (
                bulk("command"),
                Frame::Array(cmd.into_iter().map(Frame::Bulk).collect()),
            ),
            (bulk("duration_ms"), Frame::Integer(ms as i64)),
        ]),
    };
    let (libraries, functions) = scripting.function_counts();
    Ok(Frame::Map(vec![
        (bulk("running_script"), running),
        (
            bulk("engines"),
            Frame::Map(vec![(
                bulk("LUA"),
                Frame::Map(vec![
                    (bulk("libraries_count"), Frame::Integer(libraries as i64)),
                    (bulk("functions_count"), Frame::Integer(functions as i64)),
                ]),
            )]),
        ),
    ]))
}

fn fcall(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    call(ctx, txn, args, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    call(ctx, txn, args, true)
}

/// FCALL / FCALL_RO function numkeys key... arg...
fn call(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes], ro: bool) -> Reply {
    crate::monitor::show_script(ctx, args);
    txn.depend_on_functions();
    let shared = ctx.shared;
    let scripting = &shared.scripting;
    let mut engine = scripting.engine(shared)?;
    let registry = &mut engine.functions;
    let f = registry
        .find(&args[1])
        .ok_or_else(|| errors::err(NOT_FOUND))?;
    let (name, callback, fflags) = (f.name.clone(), f.callback().clone(), f.flags);
    let numkeys = arg_i64(&args[2]).map_err(|_| errors::err(BAD_NUMKEYS))?;
    let n = super::scripting::numkeys_in_range(numkeys, args.len() - 3)?;
    let no_writes = fflags & flags::NO_WRITES != 0;
    if ro && !no_writes {
        return Err(errors::err(WRITE_FLAG_ON_RO));
    }
    // A function may write unless it says otherwise, so it is refused up
    // front on a failed log or under memory pressure, as in Redis.
    if !no_writes {
        let deny = if fflags & flags::ALLOW_OOM != 0 {
            0
        } else {
            DENYOOM
        };
        if let Some(refusal) = crate::dispatch::refuse_write(ctx, deny) {
            return Err(refusal);
        }
    }
    let vm = registry.vm(scripting.run_state())?;
    let callback = vm.registered(&callback)?;
    let (keys, argv) = args[3..].split_at(n);
    let _running = scripting.begin_function(&name, args);
    let (db, protocol) = (ctx.client.db, ctx.client.protocol);
    let reply = {
        let mut exec = |cmd: Vec<Bytes>, resp: u8| {
            super::scripting::call(ctx, txn, &cmd, resp, no_writes || ro)
        };
        vm.run(&name, &callback, keys, argv, &mut exec)
    };
    ctx.client.error_counted = vm.reply_already_counted();
    ctx.client.db = db;
    ctx.client.protocol = protocol;
    Ok(reply)
}

fn help() -> Frame {
    const LINES: &[&str] = &[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Compile a library (its name comes from the #!lua shebang line) and",
        "    register its functions. REPLACE lets it take the place of a library",
        "    already loaded under that name.",
        "DELETE <LIBRARY NAME>",
        "    Unload the named library along with every function it registered.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Describe each loaded library:",
        "    * its name",
        "    * its engine (always LUA)",
        "    * the functions it registered",
        "    * its source code, when WITHCODE is given",
        "    LIBRARYNAME keeps only libraries whose name matches the glob PATTERN.",
        "STATS",
        "    Describe the function running at the moment, if there is one:",
        "    * its name",
        "    * the command that called it",
        "    * how many milliseconds it has been running",
        "    (nil when nothing is running), followed by each engine with its",
        "    library and function counts.",
        "KILL",
        "    Stop the function now running, provided it has not written yet.",
        "FLUSH [ASYNC|SYNC]",
        "    Unload every library. durakv always does this before replying; the",
        "    mode is checked but changes nothing:",
        "    * ASYNC: treated like SYNC.",
        "    * SYNC: unload the libraries before replying.",
        "DUMP",
        "    Pack every loaded library into one binary payload for FUNCTION RESTORE.",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Load all the libraries of a DUMP payload, or none if any fails. The",
        "    policy decides what happens to libraries already loaded (APPEND when",
        "    none is given):",
        "    * FLUSH: unload them all first.",
        "    * APPEND: keep them; fail if the payload has a library of the same name.",
        "    * REPLACE: keep them, but let a payload library take the place of one",
        "      with its name. A function name already used by another library",
        "      still makes it fail.",
        "HELP",
        "    Show this list of subcommands.",
    ];
    Frame::Array(
        LINES
            .iter()
            .map(|l| Frame::Simple(Bytes::from_static(l.as_bytes())))
            .collect(),
    )
}
