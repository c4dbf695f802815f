//! The narrow I/O interface every durable byte of the engine goes through.
//!
//! The write-ahead log (and later checkpoints) never touch `std::fs`
//! directly: they go through [`FileSystem`] and [`FsFile`]. That one seam lets
//! the same code run against the real operating system ([`OsFs`]) and against
//! an in-memory disk that models power loss and media faults
//! ([`FaultFs`]), chosen per test by seed. The trait is deliberately small:
//! positional reads and writes, length control, the two flavours of fsync,
//! and the handful of directory operations a log needs (list, create,
//! remove, rename, fsync a directory). It also owns the wall clock and a
//! random source so simulated runs can be made deterministic.

mod fault;
mod hooked;
mod mapped;

pub use fault::{CrashMode, CrashReport, CrashSpec, FaultFs, FaultStats, Flip};
pub use hooked::{HookedFs, Hooks};
pub use mapped::Mapped;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// An open file. All offsets are absolute (positional I/O), so one handle can
/// be shared by readers without a seek position to fight over.
pub trait FsFile: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read
    /// (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Writes all of `buf` at `offset`, extending the file if needed. On error
    /// an unknown prefix of `buf` may have been written.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// `len() == 0`.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Truncates or extends (with zeros) to exactly `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Reserves disk blocks so the file is at least `len` bytes long and reads
    /// as zeros past its old end (`fallocate(2)` mode 0 on Linux).
    fn allocate(&self, len: u64) -> io::Result<()>;

    /// Makes the file's data (and the metadata needed to read it back, such
    /// as its size) durable: `fdatasync(2)`.
    fn sync_data(&self) -> io::Result<()>;

    /// Makes data and all metadata durable: `fsync(2)`.
    fn sync_all(&self) -> io::Result<()>;

    /// Tells the OS this file's data will not be read again soon, so that
    /// its cached pages (those already written back) go before anything
    /// else's: `posix_fadvise(POSIX_FADV_DONTNEED)`. A hint: ignoring it
    /// changes nothing but memory.
    fn release_cache(&self) {}

    /// The whole file mapped read-only, if this file system can map it;
    /// read in place only the ranges [`Mapped::resident`] vouches for, and
    /// the rest with [`FsFile::read_at`]. `None`: read all of it so.
    fn map(&self) -> Option<Mapped> {
        None
    }

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with
    /// `UnexpectedEof`.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "failed to fill whole buffer",
                    ))
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads as many bytes as are available at `offset`, up to `buf.len()`;
    /// returns the count (short only at end of file).
    fn read_up_to(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

/// The file system: opens files and changes directory entries.
///
/// Directory entry changes (create, rename, remove) are only durable after
/// [`FileSystem::sync_dir`] on the parent directory; file contents only after
/// [`FsFile::sync_data`] / [`FsFile::sync_all`]. [`FaultFs`] enforces exactly
/// that on a simulated crash.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates `path` (truncating it if it exists) for reading and writing.
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing file for reading and writing.
    fn open_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Full paths of the regular files directly inside `dir`, sorted.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Atomically replaces `to` with `from` (same directory in our use).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the entries of `dir` durable (fsync on the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    /// Wall clock, milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// A random number (seeded in simulations).
    fn random_u64(&self) -> u64;
}

/// The real operating system, through `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

struct OsFile(File);

impl FsFile for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        // fallocate(2) where supported (ext4, xfs, tmpfs); fs4 falls back to
        // extending the length elsewhere.
        fs4::FileExt::allocate(&self.0, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn map(&self) -> Option<Mapped> {
        mapped::map(&self.0, self.len().ok()?)
    }

    fn release_cache(&self) {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is this open file's; the call only drops
        // clean cached pages and reports errors as its return value, which
        // a hint has no use for.
        unsafe {
            libc::posix_fadvise(self.0.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

impl FileSystem for OsFs {
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(OsFile(f)))
    }

    fn open_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Box::new(OsFile(f)))
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                out.push(entry.path());
            }
        }
        out.sort();
        Ok(out)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    fn random_u64(&self) -> u64 {
        rand::random()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_fs_roundtrip() {
        let dir = std::env::temp_dir().join(format!("durakv-osfs-{}", std::process::id()));
        let fs = OsFs;
        fs.create_dir_all(&dir).unwrap();
        let p = dir.join("a.dat");
        let f = fs.create_file(&p).unwrap();
        f.allocate(4096).unwrap();
        assert_eq!(f.len().unwrap(), 4096);
        f.write_all_at(b"hello", 10).unwrap();
        f.sync_data().unwrap();
        let mut buf = [0u8; 5];
        f.read_exact_at(&mut buf, 10).unwrap();
        assert_eq!(&buf, b"hello");
        fs.sync_dir(&dir).unwrap();
        fs.rename(&p, &dir.join("b.dat")).unwrap();
        assert_eq!(fs.list_dir(&dir).unwrap(), vec![dir.join("b.dat")]);
        fs.remove_file(&dir.join("b.dat")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
