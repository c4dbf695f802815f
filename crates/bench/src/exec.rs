//! Runs client tasks on a fixed set of single-threaded tokio runtimes.
//!
//! Both load generators use memtier's execution model: `t` OS threads, each
//! with its own event loop driving its share of the connections. A
//! current-thread runtime per OS thread avoids work-stealing overhead and
//! cross-thread wakeups on the request path, and lets blocking clients
//! (SQLite, the embedded engine) run one per thread without stalling
//! anyone else.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

pub type ClientFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Builds the future of client `client` placed on thread `thread`.
pub type MakeClient = Arc<dyn Fn(usize, usize) -> ClientFuture + Send + Sync>;

pub struct ClientThreads {
    handles: Vec<JoinHandle<()>>,
    done_rx: Receiver<()>,
    remaining: usize,
}

/// Starts `threads` OS threads and distributes `clients` round-robin over
/// them (client `c` runs on thread `c % threads`).
pub fn spawn(
    threads: usize,
    clients: usize,
    name: &str,
    make: MakeClient,
) -> Result<ClientThreads, String> {
    let threads = threads.clamp(1, clients.max(1));
    let (done_tx, done_rx) = channel();
    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        let make = make.clone();
        let done_tx = done_tx.clone();
        let mine: Vec<usize> = (t..clients).step_by(threads).collect();
        let handle = std::thread::Builder::new()
            .name(format!("{name}-{t}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match rt {
                    // The caller notices that this thread's clients never
                    // connected and aborts the run with this message.
                    Err(e) => eprintln!("cannot start a tokio runtime: {e}"),
                    Ok(rt) => rt.block_on(async {
                        let mut set = tokio::task::JoinSet::new();
                        for c in mine {
                            set.spawn(make(c, t));
                        }
                        while set.join_next().await.is_some() {}
                    }),
                }
                let _ = done_tx.send(());
            })
            .map_err(|e| format!("cannot start client thread: {e}"))?;
        handles.push(handle);
    }
    Ok(ClientThreads {
        handles,
        done_rx,
        remaining: threads,
    })
}

impl ClientThreads {
    pub fn threads(&self) -> usize {
        self.handles.len()
    }

    /// Waits until every thread has finished or `deadline` passes; true
    /// when all are done.
    pub fn wait_until(&mut self, deadline: Instant) -> bool {
        while self.remaining > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done_rx.recv_timeout(left) {
                Ok(()) => self.remaining -= 1,
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => self.remaining = 0,
            }
        }
        true
    }

    /// Joins the threads; a panicked client thread is reported as an error.
    pub fn join(self) -> Result<(), String> {
        let mut panicked = 0;
        for h in self.handles {
            if h.join().is_err() {
                panicked += 1;
            }
        }
        if panicked > 0 {
            Err(format!("{panicked} client thread(s) panicked"))
        } else {
            Ok(())
        }
    }
}
