//! Typed errors of the write-ahead log.
//!
//! Callers need to tell apart "the log is damaged, here is where" (refuse to
//! start, or start in tolerant mode), "the log failed at run time" (refuse
//! writes until restart), and plain misuse. Corruption always carries the
//! file, byte offset and LSN so an operator can look at the bytes.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// An I/O call failed (during open/recovery or an administrative call).
    #[error("WAL I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Bytes on disk that cannot be explained by a crash: damage in the
    /// middle of the log, or acknowledged records missing. `lsn` is the first
    /// LSN that could not be read (or the LSN the damaged batch claims).
    #[error(
        "WAL corruption in {} at offset {offset} (LSN {lsn}): {reason}",
        file.display()
    )]
    Corruption {
        file: PathBuf,
        offset: u64,
        lsn: u64,
        reason: String,
    },

    /// A write or fsync failed earlier; the log refuses writes until restart.
    #[error("WAL failed and refuses writes until restart: {0}")]
    Failed(String),

    /// The log was closed.
    #[error("WAL is closed")]
    Closed,

    /// One record is larger than `max_record_bytes`.
    #[error("WAL record of {len} bytes exceeds max_record_bytes ({max})")]
    RecordTooLarge { len: u64, max: u64 },

    /// The configuration is invalid or does not match the log on disk.
    #[error("invalid WAL configuration: {0}")]
    Config(String),

    /// The caller's `apply` callback rejected a recovered record.
    #[error("WAL recovery: applying LSN {lsn} failed: {reason}")]
    Apply { lsn: u64, reason: String },
}

impl WalError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> WalError {
        WalError::Io {
            path: path.into(),
            source,
        }
    }

    /// True for [`WalError::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, WalError::Corruption { .. })
    }
}
