//! MULTI / EXEC / DISCARD / WATCH / UNWATCH: durakv's optimistic concurrency.
//! EXEC lives in [`crate::dispatch`], which owns locking and commit.

use crate::client::{MultiState, Watched};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Reply, ALL_ARGS_KEYS, NO_KEYS};
use crate::dispatch;
use crate::errors;
use bytes::Bytes;
use durakv_protocol::Frame;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec(
            "multi",
            1,
            NOSCRIPT | LOADING | STALE | FAST | MULTI_CONTROL,
            NO_KEYS,
            Handler::Conn(multi),
            "transactions",
            "Opens a transaction: later commands queue until EXEC.",
        ),
        spec(
            "exec",
            1,
            NOSCRIPT | LOADING | STALE | MULTI_CONTROL,
            NO_KEYS,
            Handler::Outcome(dispatch::exec),
            "transactions",
            "Runs the queued commands unless a watched key changed.",
        ),
        spec(
            "discard",
            1,
            NOSCRIPT | LOADING | STALE | FAST | MULTI_CONTROL,
            NO_KEYS,
            Handler::Conn(discard),
            "transactions",
            "Throws away the queued commands and ends the transaction.",
        ),
        spec(
            "watch",
            -2,
            NOSCRIPT | LOADING | STALE | FAST | MULTI_CONTROL,
            ALL_ARGS_KEYS,
            Handler::Conn(watch),
            "transactions",
            "Makes the next EXEC fail if any of these keys changes first.",
        ),
        spec(
            "unwatch",
            1,
            NOSCRIPT | LOADING | STALE | FAST,
            NO_KEYS,
            Handler::Conn(unwatch),
            "transactions",
            "Stops watching every watched key.",
        ),
    ]
}

fn multi(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    if ctx.client.multi.is_some() {
        return Err(errors::err(errors::MULTI_NESTED));
    }
    ctx.client.multi = Some(MultiState::default());
    Ok(Frame::ok())
}

fn discard(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    if ctx.client.multi.take().is_none() {
        return Err(errors::err(errors::DISCARD_WITHOUT_MULTI));
    }
    dispatch::unwatch_all(ctx);
    Ok(Frame::ok())
}

fn unwatch(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    dispatch::unwatch_all(ctx);
    Ok(Frame::ok())
}

fn watch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if ctx.client.multi.is_some() {
        return Err(errors::err(errors::WATCH_INSIDE_MULTI));
    }
    let db = ctx.client.db;
    let keys = &args[1..];
    let mut txn = dispatch::lock(ctx.shared, false, keys.iter().map(|k| &k[..]))?;
    for key in keys {
        if ctx
            .client
            .watched
            .iter()
            .any(|w| w.db == db && w.key == *key)
        {
            continue;
        }
        let expire_at_ms = txn.expire_at(db, key, true).unwrap_or(0);
        ctx.shared.watches.watch(
            ctx.client.id(),
            &ctx.client.handle.watch_dirty,
            db,
            key.clone(),
        );
        ctx.client.watched_bytes += key.len() + crate::client::ENTRY_OVERHEAD_BYTES;
        ctx.client.watched.push(Watched {
            db,
            key: key.clone(),
            expire_at_ms,
        });
    }
    drop(txn);
    Ok(Frame::ok())
}
