//! MULTI / EXEC / DISCARD / WATCH / UNWATCH: durakv's optimistic concurrency.
//! The mechanics live in [`crate::dispatch`], which owns locking and commit.

use crate::command::{flags::*, spec, CommandSpec, Handler, ALL_ARGS_KEYS, NO_KEYS};
use crate::dispatch;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec(
            "multi",
            1,
            NOSCRIPT | LOADING | STALE | FAST | MULTI_CONTROL,
            NO_KEYS,
            Handler::Conn(dispatch::multi),
            "transactions",
            "Starts a transaction.",
        ),
        spec(
            "exec",
            1,
            NOSCRIPT | LOADING | STALE | MULTI_CONTROL,
            NO_KEYS,
            Handler::Outcome(dispatch::exec),
            "transactions",
            "Executes all commands in a transaction.",
        ),
        spec(
            "discard",
            1,
            NOSCRIPT | LOADING | STALE | FAST | MULTI_CONTROL,
            NO_KEYS,
            Handler::Conn(dispatch::discard),
            "transactions",
            "Discards a transaction.",
        ),
        spec(
            "watch",
            -2,
            NOSCRIPT | LOADING | STALE | FAST | MULTI_CONTROL,
            ALL_ARGS_KEYS,
            Handler::Conn(dispatch::watch),
            "transactions",
            "Monitors changes to keys to determine the execution of a transaction.",
        ),
        spec(
            "unwatch",
            1,
            NOSCRIPT | LOADING | STALE | FAST,
            NO_KEYS,
            Handler::Conn(dispatch::unwatch),
            "transactions",
            "Forgets about watched keys of a transaction.",
        ),
    ]
}
