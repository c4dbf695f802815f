//! One server per data directory.
//!
//! Two processes appending to the same WAL would interleave LSNs and destroy
//! each other's segments, and nothing in the log format could detect it
//! afterwards. [`DirLock`] takes an exclusive `flock(2)` on `<dir>/LOCK` for
//! as long as it lives; the kernel releases it when the process dies, so a
//! crash never leaves a stale lock behind. The file also records the PID of
//! the holder, for the error message a second server prints.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Name of the lock file inside the data directory.
pub const LOCK_FILE_NAME: &str = "LOCK";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another process holds the lock.
    #[error(
        "{} is locked: another durakv server (pid {holder}) is using the directory {}",
        path.display(),
        dir.display()
    )]
    Held {
        path: PathBuf,
        dir: PathBuf,
        /// PID recorded by the holder, or "unknown".
        holder: String,
    },
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// An exclusive lock on a data directory, released on drop.
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
}

impl DirLock {
    /// Creates `dir` if needed and locks `<dir>/LOCK`, failing at once (not
    /// waiting) if another process holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock, LockError> {
        let path = dir.join(LOCK_FILE_NAME);
        let io_err = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err)?;
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => {}
            Err(fs4::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(LockError::Held {
                    path: path.clone(),
                    dir: dir.to_path_buf(),
                    holder: if holder.is_empty() {
                        "unknown".into()
                    } else {
                        holder.to_string()
                    },
                });
            }
            Err(fs4::TryLockError::Error(e)) => return Err(io_err(e)),
        }
        let pid = std::process::id().to_string();
        file.set_len(0).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        file.write_all(pid.as_bytes()).map_err(io_err)?;
        Ok(DirLock { file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_fails_with_a_clear_message() {
        let dir = std::env::temp_dir().join(format!("durakv-lock-{}", std::process::id()));
        let a = DirLock::acquire(&dir).unwrap();
        let e = DirLock::acquire(&dir).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("LOCK"), "{msg}");
        assert!(msg.contains("another durakv server"), "{msg}");
        assert!(msg.contains(&std::process::id().to_string()), "{msg}");
        drop(a);
        let b = DirLock::acquire(&dir).unwrap();
        drop(b);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
