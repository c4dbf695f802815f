//! keys commands (being written).

use crate::command::CommandSpec;

pub fn commands() -> Vec<CommandSpec> {
    Vec::new()
}
