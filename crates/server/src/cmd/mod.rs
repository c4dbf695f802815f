//! Command implementations, one module per command family. Every handler
//! has the same shape: parse the arguments, read or apply to the keyspace
//! through the transaction, and return the reply frame. Each module exports
//! `commands()`, its part of the command table.

use crate::command::CommandSpec;
use durakv_engine::txn::Txn;
use durakv_engine::value::Value;
use durakv_protocol::Frame;

/// The value at `key` as the type `pick` accepts (e.g. `Value::as_list`):
/// `Ok(None)` when the key is missing, WRONGTYPE when it holds another type.
/// Reads go through `Txn::get`, so the reply's durability dependency is kept.
pub(crate) fn read_as<'t, T: ?Sized>(
    txn: &'t mut Txn<'_>,
    db: usize,
    key: &[u8],
    pick: fn(&Value) -> Option<&T>,
) -> Result<Option<&'t T>, Frame> {
    match txn.get(db, key) {
        None => Ok(None),
        Some(e) => pick(&e.value)
            .map(Some)
            .ok_or_else(|| crate::errors::err(crate::errors::WRONGTYPE)),
    }
}

pub mod connection;
pub mod functions;
pub mod hashes;
pub mod keys;
pub mod lists;
pub mod scripting;
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
    v.extend(scripting::commands());
    v.extend(functions::commands());
    v
}
