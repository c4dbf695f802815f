//! One server per data directory, and per WAL directory.
//!
//! Two processes appending to the same WAL would interleave LSNs and destroy
//! each other's segments, and nothing in the log format could detect it
//! afterwards. [`DirLock`] takes an exclusive `flock(2)` on `<dir>/LOCK` for
//! as long as it lives; the kernel releases it when the process dies, so a
//! crash never leaves a stale lock behind. The file also records the PID of
//! the holder, for the error message a second server prints.
//!
//! A `wal-dir` may live outside the data directory, where the data
//! directory's lock does not reach: two servers with different data
//! directories but one WAL directory would each think the log is theirs.
//! [`DirLock::acquire_all`] therefore locks every directory a server writes
//! to, each through its own `LOCK` file. The WAL reader ignores that file
//! (it is neither a segment nor a spare name).

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

    /// Locks `<dir>/LOCK` in every distinct directory of `dirs` (creating
    /// them), failing at once if another process holds any of them; locks
    /// taken before the failure are released. Directories are compared
    /// after resolving symbolic links and `..`, because locking one
    /// directory twice would conflict with itself (`flock` locks belong to
    /// the open file, not the process). For the same reason, pass the data
    /// directory and every WAL directory in one call rather than holding a
    /// separate [`DirLock`] on one of them.
    pub fn acquire_all<P: AsRef<Path>>(dirs: &[P]) -> Result<DirLocks, LockError> {
        let mut seen: Vec<PathBuf> = Vec::with_capacity(dirs.len());
        let mut locks = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let dir = dir.as_ref();
            let io_err = |source| LockError::Io {
                path: dir.join(LOCK_FILE_NAME),
                source,
            };
            std::fs::create_dir_all(dir).map_err(io_err)?;
            let canonical = std::fs::canonicalize(dir).map_err(io_err)?;
            if seen.contains(&canonical) {
                continue;
            }
            seen.push(canonical);
            locks.push(DirLock::acquire(dir)?);
        }
        Ok(DirLocks { locks })
    }
}

/// Exclusive locks on a set of directories (see [`DirLock::acquire_all`]),
/// released on drop.
#[derive(Debug)]
pub struct DirLocks {
    locks: Vec<DirLock>,
}

impl DirLocks {
    /// The lock files held, one per distinct directory, in the order given.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.locks.iter().map(DirLock::path)
    }

    /// How many directories are locked.
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
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

    #[test]
    fn a_shared_wal_dir_is_locked_by_whoever_came_first() {
        let tmp = tempfile::tempdir().unwrap();
        let data1 = tmp.path().join("data1");
        let data2 = tmp.path().join("data2");
        let wal = tmp.path().join("shared-wal");
        let first = DirLock::acquire_all(&[&data1, &wal]).unwrap();
        assert_eq!(first.len(), 2);
        assert!(wal.join(LOCK_FILE_NAME).exists());

        let e = DirLock::acquire_all(&[&data2, &wal]).unwrap_err();
        match &e {
            LockError::Held { path, dir, holder } => {
                assert_eq!(path, &wal.join(LOCK_FILE_NAME));
                assert_eq!(dir, &wal);
                assert_eq!(holder, &std::process::id().to_string());
            }
            other => panic!("expected Held, got {other}"),
        }
        let msg = e.to_string();
        assert!(msg.contains(&wal.display().to_string()), "{msg}");
        assert!(msg.contains(&std::process::id().to_string()), "{msg}");
        // The failed call let go of data2 again.
        drop(DirLock::acquire(&data2).unwrap());

        drop(first);
        let second = DirLock::acquire_all(&[&data2, &wal]).unwrap();
        assert_eq!(second.len(), 2);
    }

    #[test]
    fn one_directory_named_twice_is_locked_once() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("d");
        let same = tmp.path().join("d").join("..").join("d");
        let link = tmp.path().join("link");
        std::fs::create_dir_all(&d).unwrap();
        std::os::unix::fs::symlink(&d, &link).unwrap();
        let locks = DirLock::acquire_all(&[d.clone(), same, link, d.join("wal")]).unwrap();
        assert_eq!(locks.len(), 2);
        let held: Vec<&Path> = locks.paths().collect();
        assert_eq!(
            held,
            vec![d.join(LOCK_FILE_NAME), d.join("wal").join(LOCK_FILE_NAME)]
        );
        assert!(DirLock::acquire(&d).is_err());
        assert!(DirLocks::is_empty(
            &DirLock::acquire_all::<PathBuf>(&[]).unwrap()
        ));
    }
}
