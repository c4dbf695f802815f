//! The ways taking or loading a checkpoint can fail.
//!
//! One typed error for the whole checkpoint layer, so callers can tell a
//! damaged file (fall back to an older checkpoint) from an I/O failure, a
//! refused request (one already running, the log has failed) or a
//! configuration that does not fit the file.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// An I/O call failed.
    #[error("checkpoint I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file does not verify: a checksum, magic, length, order or
    /// content check failed at `offset`.
    #[error("corrupt checkpoint {} at byte {offset}: {reason}", file.display())]
    Corruption {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    /// A checkpoint was asked for in a format version this build does not
    /// write.
    #[error("checkpoint format version {0} is not written by this build (it writes {oldest}..={newest})", oldest = super::format::OLDEST_WRITTEN_VERSION, newest = super::format::FORMAT_VERSION)]
    UnwritableVersion(u32),
    /// The file verifies but is in a format version newer than this build
    /// reads: a newer durakv wrote it. Not damage, so it is neither set
    /// aside nor skipped for an older checkpoint.
    #[error("checkpoint {} is in format version {version}, which a newer durakv wrote; this build reads versions {oldest}..={newest}. Start the build that wrote it, set checkpoint-format-version {newest} there if it offers it, and take a checkpoint (SAVE or SHUTDOWN) before starting this one", file.display(), oldest = super::format::MIN_FORMAT_VERSION, newest = super::format::FORMAT_VERSION)]
    NewerVersion { file: PathBuf, version: u32 },
    /// Another checkpoint is running (SAVE/BGSAVE report it as Redis does).
    #[error("a checkpoint is already in progress")]
    InProgress,
    /// The write-ahead log has failed: the keyspace may hold writes that
    /// are in no record, so it must not be snapshotted.
    #[error("the write-ahead log has failed, not checkpointing: {0}")]
    WalFailed(String),
    /// Files exist but none could be loaded. Starting from the log alone
    /// could silently lose data (the log may have been truncated).
    #[error("no usable checkpoint in {}: {details}; move the checkpoint files away to start from the log alone (only complete if the log was never truncated)", dir.display())]
    NoUsableCheckpoint { dir: PathBuf, details: String },
    /// The snapshot holds keys in a database the configuration lacks.
    #[error("checkpoint {} holds keys in database {db} but only {databases} databases are configured", file.display())]
    TooFewDatabases {
        file: PathBuf,
        db: usize,
        databases: usize,
    },
    /// Truncating the log after a checkpoint failed.
    #[error("write-ahead log: {0}")]
    Wal(#[source] crate::wal::WalError),
    /// The log ends before the last record the snapshot already contains.
    #[error("the write-ahead log ends at LSN {log_last_lsn} but checkpoint {} already contains records up to LSN {checkpoint_lsn}: records are missing from the log", file.display())]
    LogBehindCheckpoint {
        file: PathBuf,
        log_last_lsn: u64,
        checkpoint_lsn: u64,
    },
}

impl CheckpointError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> CheckpointError {
        CheckpointError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> CheckpointError {
        CheckpointError::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True when the file itself is damaged (as opposed to I/O trouble).
    pub fn is_corruption(&self) -> bool {
        matches!(self, CheckpointError::Corruption { .. })
    }
}
