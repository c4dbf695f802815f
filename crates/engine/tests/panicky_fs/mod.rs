//! The real file system, except that fdatasync and fsync of the files a
//! rule picks panic: a bug on a path that makes data durable, for tests of
//! what a panic there leaves behind.
#![allow(dead_code)]

use durakv_engine::io::{HookedFs, Hooks};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Which files' syncs panic.
pub type Rule = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

#[derive(Default)]
pub struct SyncPanics {
    rule: Mutex<Option<Rule>>,
}

impl SyncPanics {
    /// From now on, fdatasync and fsync of every file `rule` picks panic;
    /// `None`: of none.
    pub fn when(&self, rule: Option<Rule>) {
        *self.rule.lock().unwrap() = rule;
    }
}

impl Hooks for SyncPanics {
    fn sync(&self, path: &Path, real: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
        // Read apart from the panic, which would otherwise poison the lock.
        let rule = self.rule.lock().unwrap().clone();
        if rule.is_some_and(|picks| picks(path)) {
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
