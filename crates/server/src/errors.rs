//! Redis's exact error replies. Clients match on these strings, so they are
//! spelled once, here, exactly as Redis spells them.

use durakv_protocol::Frame;

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const SYNTAX: &str = "ERR syntax error";
pub const NO_SUCH_KEY: &str = "ERR no such key";
pub const INDEX_OUT_OF_RANGE: &str = "ERR index out of range";
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const NOAUTH: &str = "NOAUTH Authentication required.";
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const DB_INDEX_OUT_OF_RANGE: &str = "ERR DB index is out of range";
pub const INVALID_EXPIRE: &str = "ERR invalid expire time in '{}' command";
pub const MAX_CLIENTS: &str = "ERR max number of clients reached";
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";
pub const MULTI_NESTED: &str = "ERR MULTI calls can not be nested";
pub const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
pub const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
pub const WATCH_INSIDE_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
pub const MISCONF: &str = "MISCONF Errors writing to the write-ahead log: durakv is configured to refuse writes until the log is healthy again (see INFO persistence for the failure)";
/// The reply for a refused mutation or commit.
pub fn commit_error(e: &durakv_engine::txn::CommitError) -> durakv_protocol::Frame {
    use durakv_engine::txn::CommitError;
    match e {
        CommitError::TooLarge { .. } => durakv_protocol::Frame::error(format!("ERR {e}")),
        CommitError::Invalid(_) => {
            tracing::error!("refused a mutation: {e}");
            durakv_protocol::Frame::error(format!("ERR {e}"))
        }
        CommitError::Log(_) => {
            tracing::error!("commit failed: {e}");
            err(MISCONF)
        }
    }
}

pub const NOT_DURABLE: &str =
    "MISCONF This reply depends on a write that could not be made durable (see INFO persistence)";

pub fn wrong_args(cmd: &str) -> Frame {
    Frame::error(format!(
        "ERR wrong number of arguments for '{}' command",
        cmd.to_ascii_lowercase()
    ))
}

/// `ERR unknown command 'x', with args beginning with: 'a' 'b' ` — Redis
/// quotes at most the first arguments and truncates each to 128 bytes.
pub fn unknown_command(name: &[u8], args: &[bytes::Bytes]) -> Frame {
    // As Redis builds it, in bytes: the name up to 128, then each argument
    // quoted and cut to what is left of 128, until 128 are listed.
    const MAX: usize = 128;
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(&name[..name.len().min(MAX)]);
    msg.extend_from_slice(b"', with args beginning with: ");
    let mut listed = 0;
    for a in args {
        if listed >= MAX {
            break;
        }
        let shown = &a[..a.len().min(MAX - listed)];
        msg.push(b'\'');
        msg.extend_from_slice(shown);
        msg.extend_from_slice(b"' ");
        listed += shown.len() + 3;
    }
    Frame::error(String::from_utf8_lossy(&msg).into_owned())
}

pub fn unknown_subcommand(sub: &[u8], cmd: &str) -> Frame {
    Frame::error(format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        String::from_utf8_lossy(sub),
        cmd.to_ascii_uppercase()
    ))
}

/// Redis's reply when a subcommand's arguments fit none of its forms.
pub fn sub_usage(sub: &[u8], cmd: &str) -> Frame {
    Frame::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(sub),
        cmd.to_ascii_uppercase()
    ))
}

pub fn invalid_expire(cmd: &str) -> Frame {
    Frame::error(INVALID_EXPIRE.replace("{}", &cmd.to_ascii_lowercase()))
}

pub fn err(msg: &'static str) -> Frame {
    Frame::Error(bytes::Bytes::from_static(msg.as_bytes()))
}

/// `min-replicas-to-write` not met (Redis's words).
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
/// A `replicated` reply whose write was not confirmed durable by
/// `min-replicas-to-ack` replicas within `replicated-timeout-ms`.
pub const NOREPLICAS_TIMEOUT: &str = "NOREPLICAS Not enough replicas confirmed the write as durable within replicated-timeout-ms; it is applied and durable on this server, but a failover may lose it";
/// While a replica loads its primary's dataset (Redis's `shared.loadingerr`).
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";
pub const READONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";
