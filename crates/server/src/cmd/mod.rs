//! Command implementations, one module per command family. Every handler
//! has the same shape: parse the arguments, read or apply to the keyspace
//! through the transaction, and return the reply frame. Each module exports
//! `commands()`, its part of the command table.

use crate::command::CommandSpec;

pub mod connection;
pub mod hashes;
pub mod keys;
pub mod lists;
pub mod server;
pub mod sets;
pub mod strings;
pub mod transaction;
pub mod zsets;

pub fn all_commands() -> Vec<CommandSpec> {
    let mut v = Vec::new();
    v.extend(connection::commands());
    v.extend(transaction::commands());
    v.extend(server::commands());
    v.extend(keys::commands());
    v.extend(strings::commands());
    v.extend(hashes::commands());
    v.extend(zsets::commands());
    v.extend(lists::commands());
    v.extend(sets::commands());
    v
}
