//! The real file system with a hook on the writes and syncs of its files:
//! tests give a disk a capped bandwidth, a slow fsync or a bug on its sync
//! path without repeating the rest of [`FileSystem`].

use super::{FileSystem, FsFile, Mapped, OsFs};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What [`HookedFs`] does around its files' writes and syncs.
pub trait Hooks: Send + Sync + 'static {
    /// Called before `len` bytes are written to `path`.
    fn on_write(&self, _path: &Path, _len: usize) {}

    /// Makes `path` durable; `real` is the operating system's fdatasync or
    /// fsync. By default it only calls `real`.
    fn sync(&self, _path: &Path, real: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
        real()
    }
}

/// [`OsFs`] with `H` on every file it creates or opens.
pub struct HookedFs<H: Hooks> {
    hooks: Arc<H>,
}

impl<H: Hooks> HookedFs<H> {
    pub fn new(hooks: Arc<H>) -> HookedFs<H> {
        HookedFs { hooks }
    }

    fn wrap(&self, path: &Path, file: Box<dyn FsFile>) -> Box<dyn FsFile> {
        Box::new(HookedFile {
            file,
            path: path.to_path_buf(),
            hooks: self.hooks.clone(),
        })
    }
}

struct HookedFile<H: Hooks> {
    file: Box<dyn FsFile>,
    path: PathBuf,
    hooks: Arc<H>,
}

impl<H: Hooks> FsFile for HookedFile<H> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.hooks.on_write(&self.path, buf.len());
        self.file.write_all_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.file.allocate(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.hooks.sync(&self.path, &|| self.file.sync_data())
    }
    fn sync_all(&self) -> io::Result<()> {
        self.hooks.sync(&self.path, &|| self.file.sync_all())
    }
    fn release_cache(&self) {
        self.file.release_cache()
    }
    fn map(&self) -> Option<Mapped> {
        self.file.map()
    }
}

impl<H: Hooks> FileSystem for HookedFs<H> {
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(self.wrap(path, OsFs.create_file(path)?))
    }
    fn open_file(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(self.wrap(path, OsFs.open_file(path)?))
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        OsFs.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        OsFs.create_dir_all(dir)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        OsFs.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsFs.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        OsFs.exists(path)
    }
    fn now_ms(&self) -> u64 {
        OsFs.now_ms()
    }
    fn random_u64(&self) -> u64 {
        OsFs.random_u64()
    }
}
