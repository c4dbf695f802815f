//! Stopping the process when a panic (a bug) interrupts work that must not
//! be left half done.

/// Aborts the process if the thread it lives on unwinds while it is alive,
/// after logging which work `0` names. Where a half-done change could
/// reach the log or a checkpoint, or leave clients waiting for ever,
/// recovering from the log is the safe way on: it holds every acknowledged
/// write.
pub struct AbortOnUnwind(pub &'static str);

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::error!(
                "a panic interrupted {}; aborting so that recovery restores what the log holds",
                self.0
            );
            std::process::abort();
        }
    }
}
