//! Background loops that outlive a panic. A panic in a task or thread
//! that nobody joins until shutdown would otherwise end it silently: active
//! expiry, eviction, replication or the checkpointer would stop while the
//! server kept serving. A panic inside a write aborts the process instead
//! (the engine's `Txn`, and active expiry's removals), so what these loops
//! leave behind is unchanged data.

use futures_util::FutureExt;
use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

/// Pause before starting a loop again, so that a loop that panics at once
/// does not spin.
pub const PAUSE: Duration = Duration::from_secs(1);

/// Runs the loop `start` makes until it returns, starting a new one after
/// each panic.
pub async fn restarting<F, Fut>(name: &'static str, mut start: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    while let Err(panic) = AssertUnwindSafe(start()).catch_unwind().await {
        report(name, &*panic);
        tokio::time::sleep(PAUSE).await;
    }
}

/// The thread counterpart of `restarting`.
pub fn restarting_thread(name: &'static str, mut run: impl FnMut()) {
    while let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(&mut run)) {
        report(name, &*panic);
        std::thread::sleep(PAUSE);
    }
}

fn report(name: &str, panic: &(dyn Any + Send)) {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string payload");
    tracing::error!("{name} panicked ({what}); starting it again in {PAUSE:?}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_task_that_panics_is_started_again_until_it_returns() {
        let starts = AtomicUsize::new(0);
        restarting("test loop", || {
            let n = starts.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::task::yield_now().await;
                if n < 2 {
                    panic!("start {n} fails");
                }
            }
        })
        .await;
        assert_eq!(starts.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_thread_loop_that_panics_is_run_again_until_it_returns() {
        let mut runs = 0;
        let began = std::time::Instant::now();
        restarting_thread("test thread", || {
            runs += 1;
            if runs == 1 {
                panic!("the first run fails");
            }
        });
        assert_eq!(runs, 2);
        assert!(began.elapsed() >= PAUSE);
    }
}
