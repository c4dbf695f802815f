//! server commands (being written).

use crate::command::CommandSpec;

pub fn commands() -> Vec<CommandSpec> {
    Vec::new()
}

/// Client names may not contain spaces, newlines or other special characters.
pub fn validate_client_name(name: &[u8]) -> Result<(), durakv_protocol::Frame> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(durakv_protocol::Frame::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}
