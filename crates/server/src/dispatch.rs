//! Turns one parsed request into a reply: lookup, arity and auth checks,
//! MULTI queueing, locking, running the handler, committing its writes, and
//! working out which LSN the reply must wait for.

use crate::client::{MultiState, Watched};
use crate::command::{flags, lookup, Ctx, Handler, Keys};
use crate::errors;
use crate::util::now_ms;
use bytes::Bytes;
use durakv_engine::mutation::Mutation;
use durakv_engine::txn::Txn;
use durakv_engine::Durability;
use durakv_protocol::Frame;
use std::sync::atomic::Ordering;

/// A reply, and the LSN that must be durable before it may be sent (0: none).
pub struct Outcome {
    pub frame: Frame,
    pub dependency_lsn: u64,
}

impl Outcome {
    pub fn now(frame: Frame) -> Outcome {
        Outcome {
            frame,
            dependency_lsn: 0,
        }
    }
}

/// Executes one request. Never panics on client input.
pub fn execute(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Outcome {
    ctx.shared
        .stats
        .total_commands_processed
        .fetch_add(1, Ordering::Relaxed);
    let Some(spec) = lookup(&args[0]) else {
        flag_multi(ctx);
        return Outcome::now(errors::unknown_command(&args[0], &args[1..]));
    };
    if !spec.arity_ok(args.len()) {
        flag_multi(ctx);
        return Outcome::now(errors::wrong_args(spec.name));
    }
    if !ctx.client.authenticated && spec.flags & flags::NOAUTH == 0 {
        flag_multi(ctx);
        return Outcome::now(errors::err(errors::NOAUTH));
    }
    ctx.client.last_cmd.clear();
    ctx.client.last_cmd.push_str(spec.name);
    if ctx.client.multi.is_some() && spec.flags & flags::NO_MULTI != 0 {
        flag_multi(ctx);
        return Outcome::now(Frame::error("ERR Command not allowed inside a transaction"));
    }
    if ctx.client.multi.is_some() && spec.flags & flags::MULTI_CONTROL == 0 {
        if let Some(m) = ctx.client.multi.as_mut() {
            m.queued.push(args.to_vec());
        }
        return Outcome::now(Frame::queued());
    }
    if spec.is_write() {
        if let Some(refusal) = refuse_write(ctx, spec.flags) {
            flag_multi(ctx);
            return Outcome::now(refusal);
        }
    }
    match spec.handler {
        Handler::Conn(f) => Outcome::now(f(ctx, args)),
        Handler::Outcome(f) => f(ctx, args),
        Handler::Data(f) => {
            let now = now_ms();
            let ks = &ctx.shared.store.keyspace;
            let mut txn = match spec.keys {
                Keys::All => ks.lock_all(now),
                _ => {
                    let idx = spec.key_indexes(args);
                    ks.lock_keys(idx.iter().map(|&i| &args[i][..]), now)
                }
            };
            let frame = f(ctx, &mut txn, args);
            finish(ctx, txn, frame)
        }
    }
}

/// A reason to refuse a write before running it: a failed log, or memory.
fn refuse_write(ctx: &Ctx<'_>, cmd_flags: u32) -> Option<Frame> {
    if ctx.shared.log_failure().is_some() {
        return Some(errors::err(errors::MISCONF));
    }
    if cmd_flags & flags::DENYOOM != 0 {
        let max = ctx.shared.config.read().maxmemory_bytes;
        if max > 0 && crate::memory::used_memory_bytes() > max {
            return Some(errors::err(errors::OOM));
        }
    }
    None
}

fn flag_multi(ctx: &mut Ctx<'_>) {
    if let Some(m) = ctx.client.multi.as_mut() {
        m.failed = true;
    }
}

/// The durability level for the writes in `muts` from this connection.
fn level_for(ctx: &Ctx<'_>, muts: &[Mutation]) -> Durability {
    let db = muts
        .iter()
        .find_map(|m| match m {
            Mutation::Key { db, .. } => Some(*db as usize),
            Mutation::FlushDb { db } => Some(*db as usize),
            _ => None,
        })
        .unwrap_or(ctx.client.db);
    ctx.shared.effective_durability(ctx.client.durability, db)
}

/// Commits what the handler applied and computes the reply's dependency.
fn finish(ctx: &mut Ctx<'_>, txn: Txn<'_>, frame: Frame) -> Outcome {
    let shared = ctx.shared;
    let muts = txn.mutations();
    let level = if muts.is_empty() {
        shared.effective_durability(ctx.client.durability, ctx.client.db)
    } else {
        shared.watches.touch(muts);
        shared
            .stats
            .dirty
            .fetch_add(muts.len() as u64, Ordering::Relaxed);
        level_for(ctx, muts)
    };
    match txn.commit(shared.store.log.as_deref(), level) {
        Ok(out) => {
            if out.lsn != 0 {
                ctx.client.last_write_lsn = ctx.client.last_write_lsn.max(out.lsn);
            }
            // Only `full` replies wait; `delayed` and `none` answer at once.
            let dependency_lsn = if level == Durability::Full {
                out.dependency_lsn
            } else {
                0
            };
            Outcome {
                frame,
                dependency_lsn,
            }
        }
        Err(e) => {
            tracing::error!("commit failed: {e}");
            Outcome::now(errors::err(errors::MISCONF))
        }
    }
}

pub fn multi(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    if ctx.client.multi.is_some() {
        return errors::err(errors::MULTI_NESTED);
    }
    ctx.client.multi = Some(MultiState::default());
    Frame::ok()
}

pub fn discard(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    if ctx.client.multi.take().is_none() {
        return errors::err(errors::DISCARD_WITHOUT_MULTI);
    }
    unwatch_all(ctx);
    Frame::ok()
}

pub fn unwatch(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    unwatch_all(ctx);
    Frame::ok()
}

pub fn unwatch_all(ctx: &mut Ctx<'_>) {
    let id = ctx.client.id();
    for w in ctx.client.watched.drain(..) {
        ctx.shared.watches.unwatch(id, w.db, &w.key);
    }
    ctx.client
        .handle
        .watch_dirty
        .store(false, Ordering::Release);
}

pub fn watch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if ctx.client.multi.is_some() {
        return errors::err(errors::WATCH_INSIDE_MULTI);
    }
    let db = ctx.client.db;
    let now = now_ms();
    let keys = &args[1..];
    let mut txn = ctx
        .shared
        .store
        .keyspace
        .lock_keys(keys.iter().map(|k| &k[..]), now);
    for key in keys {
        if ctx
            .client
            .watched
            .iter()
            .any(|w| w.db == db && w.key == *key)
        {
            continue;
        }
        let expire_at_ms = txn.get(db, key).map(|e| e.expire_at_ms).unwrap_or(0);
        ctx.shared.watches.watch(
            ctx.client.id(),
            &ctx.client.handle.watch_dirty,
            db,
            key.clone(),
        );
        ctx.client.watched.push(Watched {
            db,
            key: key.clone(),
            expire_at_ms,
        });
    }
    drop(txn);
    Frame::ok()
}

/// EXEC: runs the queued commands atomically, under the locks of every key
/// they and the WATCHed keys name, and commits them as one log record.
pub fn exec(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Outcome {
    let Some(multi) = ctx.client.multi.take() else {
        return Outcome::now(errors::err(errors::EXEC_WITHOUT_MULTI));
    };
    if multi.failed {
        unwatch_all(ctx);
        return Outcome::now(errors::err(errors::EXECABORT));
    }
    let now = now_ms();
    let mut lock_all = false;
    let mut keys: Vec<Bytes> = ctx.client.watched.iter().map(|w| w.key.clone()).collect();
    for args in &multi.queued {
        if let Some(spec) = lookup(&args[0]) {
            match spec.keys {
                Keys::All => lock_all = true,
                _ => keys.extend(spec.key_indexes(args).into_iter().map(|i| args[i].clone())),
            }
        }
    }
    let ks = &ctx.shared.store.keyspace;
    let mut txn = if lock_all {
        ks.lock_all(now)
    } else {
        ks.lock_keys(keys.iter().map(|k| &k[..]), now)
    };
    let expired = ctx
        .client
        .watched
        .iter()
        .any(|w| w.expire_at_ms != 0 && w.expire_at_ms <= now);
    if expired || ctx.client.handle.watch_dirty.load(Ordering::Acquire) {
        drop(txn);
        unwatch_all(ctx);
        ctx.shared
            .stats
            .watch_aborts
            .fetch_add(1, Ordering::Relaxed);
        return Outcome::now(Frame::NullArray);
    }
    let mut replies = Vec::with_capacity(multi.queued.len());
    for args in &multi.queued {
        let Some(spec) = lookup(&args[0]) else {
            replies.push(errors::unknown_command(&args[0], &args[1..]));
            continue;
        };
        let reply = if spec.is_write() && ctx.shared.log_failure().is_some() {
            errors::err(errors::MISCONF)
        } else {
            match spec.handler {
                Handler::Data(f) => f(ctx, &mut txn, args),
                Handler::Conn(f) => f(ctx, args),
                // Its own wait is subsumed by the transaction's commit.
                Handler::Outcome(f) => f(ctx, args).frame,
            }
        };
        replies.push(reply);
    }
    unwatch_all(ctx);
    finish(ctx, txn, Frame::Array(replies))
}
