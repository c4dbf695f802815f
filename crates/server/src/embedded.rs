//! A server inside the calling process, on any [`FileSystem`]: what crash
//! tests use to cut the power under a real server (the in-memory
//! `FaultFs` models what a power loss keeps) while clients talk to it over
//! real loopback sockets.

use crate::state::Shared;
use crate::Config;
use durakv_engine::io::FileSystem;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long [`EmbeddedServer::start`] waits for the listener.
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct EmbeddedServer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<(), String>>>,
    port: u16,
}

impl EmbeddedServer {
    /// Opens `config.dir` on `fs` (recovery included), starts serving on
    /// `config.bind`:`config.port` (0 picks a free port) and returns once
    /// it listens.
    pub fn start(config: Config, fs: Arc<dyn FileSystem>) -> Result<EmbeddedServer, String> {
        let shared = crate::open_with(config, fs)?;
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("durakv-embedded".into())
            .spawn(move || crate::serve_until_shutdown(serving))
            .map_err(|e| format!("cannot start the server thread: {e}"))?;
        let started = Instant::now();
        loop {
            let port = shared.bound_port.load(Ordering::Acquire);
            if port != 0 {
                return Ok(EmbeddedServer {
                    shared,
                    thread: Some(thread),
                    port: port as u16,
                });
            }
            if thread.is_finished() || started.elapsed() > START_TIMEOUT {
                shared.request_shutdown();
                let why = match thread.join() {
                    Ok(Err(e)) => e,
                    _ => "the server did not start listening".to_string(),
                };
                return Err(why);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops serving without a final checkpoint, as a killed process would,
    /// and waits until the data directory is released. The caller has
    /// already killed or crashed the file system, so nothing written from
    /// here on reaches the disk the next server sees.
    pub fn abandon(self) {
        // Dropping does it.
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        self.shared.checkpoints.set_final_save(false);
        self.shared.request_shutdown();
        if let Some(t) = self.thread.take() {
            // The disk is gone, so the shutdown's own errors say nothing.
            let _ = t.join();
        }
    }
}
