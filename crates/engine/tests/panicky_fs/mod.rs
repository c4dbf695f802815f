//! The real file system, except that fdatasync and fsync of the files under
//! a chosen directory panic: a bug on a path that makes data durable, for
//! tests of what a panic there leaves behind.
#![allow(dead_code)]

use durakv_engine::io::{HookedFs, Hooks};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct SyncPanics {
    under: Mutex<Option<PathBuf>>,
}

impl SyncPanics {
    /// From now on, fdatasync and fsync of every file under `dir` panic;
    /// `None`: of none.
    pub fn under(&self, dir: Option<&Path>) {
        *self.under.lock().unwrap() = dir.map(Path::to_path_buf);
    }
}

impl Hooks for SyncPanics {
    fn sync(&self, path: &Path, real: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
        // Read apart from the panic, which would otherwise poison the lock.
        let under = self.under.lock().unwrap().clone();
        if under.is_some_and(|dir| path.starts_with(dir)) {
            panic!("a bug on the sync path of {}", path.display());
        }
        real()
    }
}

/// A file system whose syncs panic where the returned switch says.
pub fn panicky_fs() -> (Arc<HookedFs<SyncPanics>>, Arc<SyncPanics>) {
    let panics = Arc::new(SyncPanics::default());
    (Arc::new(HookedFs::new(panics.clone())), panics)
}
