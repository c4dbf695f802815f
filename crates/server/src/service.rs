//! Running under a service manager as redis-server does: `daemonize`
//! (detach into the background), `pidfile`, and `supervised` (tell
//! systemd or upstart when the server is ready and when it stops).

use std::path::PathBuf;

/// Detaches into the background: the parent exits, the child leads a new
/// session with its standard streams on /dev/null. Must run before any
/// thread starts, since only the calling thread survives a fork.
pub fn daemonize() -> Result<(), String> {
    // SAFETY: called from main before any other thread exists, so the
    // child inherits a consistent process; nothing runs in between but
    // plain system calls.
    match unsafe { libc::fork() } {
        -1 => return Err(format!("cannot fork: {}", std::io::Error::last_os_error())),
        0 => {}
        _ => std::process::exit(0),
    }
    // SAFETY: plain system calls on the child's own descriptors.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..=2 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
    Ok(())
}

/// The pidfile, removed when dropped (at exit).
pub struct PidFile(PathBuf);

impl PidFile {
    /// Writes this process's id to `path` ("" = no file). As in Redis, a
    /// file that cannot be written is a warning, not a reason to stop.
    pub fn create(path: &str) -> Option<PidFile> {
        if path.is_empty() {
            return None;
        }
        match std::fs::write(path, format!("{}\n", std::process::id())) {
            Ok(()) => Some(PidFile(PathBuf::from(path))),
            Err(e) => {
                tracing::warn!("Failed to write PID file {path}: {e}");
                None
            }
        }
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Who `supervised` says to tell.
#[derive(Debug, PartialEq, Eq)]
enum Supervisor {
    Systemd(String),
    Upstart,
}

/// `supervised` resolved against the environment: `auto` picks whichever
/// manager started the process, and a manager that did not is nobody.
fn supervisor(mode: &str) -> Option<Supervisor> {
    let systemd = std::env::var("NOTIFY_SOCKET")
        .ok()
        .filter(|s| !s.is_empty());
    let upstart = std::env::var_os("UPSTART_JOB").is_some();
    match mode {
        "systemd" => match systemd {
            Some(s) => Some(Supervisor::Systemd(s)),
            None => {
                tracing::warn!("systemd supervision requested, but NOTIFY_SOCKET not found");
                None
            }
        },
        "upstart" if upstart => Some(Supervisor::Upstart),
        "upstart" => {
            tracing::warn!("upstart supervision requested, but UPSTART_JOB not found");
            None
        }
        "auto" => systemd
            .map(Supervisor::Systemd)
            .or(upstart.then_some(Supervisor::Upstart)),
        _ => None,
    }
}

/// Sends systemd a notification (`sd_notify`): a datagram to the socket
/// it named, which `@` at the start makes an abstract one.
fn notify_systemd(socket: &str, message: &str) {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let addr = match socket.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())
        }
        None => SocketAddr::from_pathname(socket),
    };
    let sent = addr.and_then(|a| UnixDatagram::unbound()?.send_to_addr(message.as_bytes(), &a));
    if let Err(e) = sent {
        tracing::warn!("cannot notify systemd at {socket}: {e}");
    }
}

/// The supervisor `notify_ready` found, for INFO's `process_supervised`.
static SUPERVISED_BY: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// INFO's `process_supervised`: `systemd`, `upstart` or `no`.
pub fn supervised_by() -> &'static str {
    SUPERVISED_BY.get().copied().unwrap_or("no")
}

/// The server accepts connections: systemd gets READY=1, upstart a
/// SIGSTOP (its signal that the job is up).
pub fn notify_ready(mode: &str) {
    let found = supervisor(mode);
    let _ = SUPERVISED_BY.set(match found {
        Some(Supervisor::Systemd(_)) => "systemd",
        Some(Supervisor::Upstart) => "upstart",
        None => "no",
    });
    match found {
        Some(Supervisor::Systemd(s)) => {
            notify_systemd(&s, "STATUS=Ready to accept connections\nREADY=1\n");
            tracing::info!("supervised by systemd: told it the server is ready");
        }
        Some(Supervisor::Upstart) => {
            tracing::info!("supervised by upstart: stopping until it resumes the server");
            std::env::remove_var("UPSTART_JOB");
            // SAFETY: raising a signal on this process.
            unsafe {
                libc::raise(libc::SIGSTOP);
            }
        }
        None => {}
    }
}

/// The server is shutting down: systemd gets STOPPING=1.
pub fn notify_stopping(mode: &str) {
    if let Some(Supervisor::Systemd(s)) = supervisor(mode) {
        notify_systemd(&s, "STOPPING=1\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pidfile_holds_the_pid_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.pid");
        let f = PidFile::create(path.to_str().unwrap()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        drop(f);
        assert!(!path.exists());
        assert!(PidFile::create("").is_none());
        assert!(PidFile::create("/nonexistent-dir/x.pid").is_none());
    }

    #[test]
    fn systemd_gets_ready_on_its_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        notify_systemd(path.to_str().unwrap(), "READY=1\n");
        let mut buf = [0u8; 64];
        let n = sock.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");
    }
}
