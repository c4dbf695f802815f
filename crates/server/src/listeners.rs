//! The listening sockets, plain and TLS. They are bound here, on the
//! caller's thread, both at start-up and when CONFIG SET changes `bind` or
//! `port`: a bind that fails is then the command's error and the sockets in
//! force keep listening, as in Redis. A successful change goes to the
//! server's accept loops through a channel.
//!
//! Addresses are written as Redis writes them: `*` is every IPv4 address,
//! `::*` every IPv6 one, and a leading `-` makes an address optional (an
//! address this host does not have is skipped rather than stopping the
//! bind).

use parking_lot::Mutex;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::sync::mpsc;

/// Pending connections a listening socket queues (`tcp-backlog`, read
/// once at start; 511 is Redis's default). Process-wide, as the setting is.
static BACKLOG: AtomicI32 = AtomicI32::new(511);

/// `tcp-backlog`, for every socket bound from now on.
pub fn set_backlog(backlog: i32) {
    BACKLOG.store(backlog, Ordering::Relaxed);
}

/// One listening socket and whether its connections speak TLS.
pub struct Listening {
    pub socket: TcpListener,
    pub tls: bool,
}

/// One `bind` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddr {
    pub ip: IpAddr,
    /// Written with a leading `-`: skipped where this host lacks it.
    pub optional: bool,
}

impl BindAddr {
    pub fn parse(s: &str) -> Option<BindAddr> {
        let (optional, addr) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let ip = match addr {
            "*" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            "::*" => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            a => a.parse().ok()?,
        };
        Some(BindAddr { ip, optional })
    }
}

/// Whether every address parses and is a loopback one (protected mode
/// then has nothing to protect).
pub fn loopback_only(binds: &[String]) -> bool {
    binds
        .iter()
        .all(|b| BindAddr::parse(b).is_some_and(|a| a.ip.is_loopback()))
}

/// What the accept loops are told when the sockets change.
pub enum Change {
    /// Stop accepting on these (address, TLS) sockets and drop them, then
    /// answer: a new socket may want the same port on a wider address.
    Close(Vec<(SocketAddr, bool)>, std::sync::mpsc::SyncSender<()>),
    /// Accept on these as well.
    Serve(Vec<Listening>),
}

/// The sockets in force and the way to the accept loops.
pub struct Listeners {
    /// Duplicates of the sockets the accept loops serve, so that a change
    /// keeps the socket of an address it does not change.
    bound: Mutex<Vec<Listening>>,
    tx: mpsc::UnboundedSender<Change>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Change>>>,
}

impl Default for Listeners {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Listeners {
            bound: Mutex::new(Vec::new()),
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }
}

/// Why a bind failed, in the words CONFIG SET answers with.
#[derive(Debug)]
pub enum BindError {
    /// An address that does not parse, or a required one that cannot be
    /// bound for a reason other than its port.
    Address(String),
    /// The port is taken or not allowed.
    Port(String),
}

impl BindError {
    /// Redis's reason, after "CONFIG SET failed (possibly related to
    /// argument '...') - ".
    pub fn reason(&self) -> &'static str {
        match self {
            BindError::Address(_) => "Failed to bind to specified addresses.",
            BindError::Port(_) => "Unable to listen on this port",
        }
    }
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindError::Address(e) | BindError::Port(e) => f.write_str(e),
        }
    }
}

impl Listeners {
    /// Start-up: binds `port` (and `tls_port` unless 0) on every address
    /// and returns the port bound and the sockets to serve. Port 0 turns
    /// plain TCP off when another listener is configured ([`tcp_off`]):
    /// the port returned is then 0. Otherwise it picks a free port.
    pub fn start(
        &self,
        binds: &[String],
        port: u16,
        tls_port: u16,
        unix_socket: bool,
    ) -> Result<(u16, Vec<Listening>), BindError> {
        let addrs = parse_all(binds)?;
        let mut bound = self.bound.lock();
        let mut fresh = Vec::new();
        let port = if tcp_off(port, tls_port, unix_socket) {
            0
        } else {
            bind_port(&addrs, port, false, &[], &mut fresh)?
        };
        if tls_port != 0 {
            bind_port(&addrs, tls_port, true, &[], &mut fresh)?;
        }
        *bound = dup_all(&fresh)?;
        Ok((port, fresh))
    }

    /// CONFIG SET: listens on `binds` at `port` (and `tls_port`) from now
    /// on. Sockets whose address and port stay are kept; the others are
    /// closed first, so that `*` can take over a port `127.0.0.1` had, and
    /// bound again if the new ones cannot be. Returns the port bound (0:
    /// plain TCP is off, see [`Listeners::start`]).
    pub fn change(
        &self,
        binds: &[String],
        port: u16,
        tls_port: u16,
        unix_socket: bool,
    ) -> Result<u16, BindError> {
        let addrs = parse_all(binds)?;
        let plain = !tcp_off(port, tls_port, unix_socket);
        let mut bound = self.bound.lock();
        let wanted = |l: &Listening| {
            let Ok(at) = l.socket.local_addr() else {
                return false;
            };
            let p = if l.tls { tls_port } else { port };
            p != 0 && at.port() == p && addrs.iter().any(|(a, _)| a.ip == at.ip())
        };
        let (kept, dropped): (Vec<Listening>, Vec<Listening>) =
            std::mem::take(&mut *bound).into_iter().partition(wanted);
        let closed: Vec<(SocketAddr, bool)> = dropped
            .iter()
            .filter_map(|l| l.socket.local_addr().ok().map(|a| (a, l.tls)))
            .collect();
        if !closed.is_empty() {
            self.close(closed.clone());
        }
        drop(dropped);
        let mut fresh = Vec::new();
        let plain_now = if plain {
            bind_port(&addrs, port, false, &kept, &mut fresh)
        } else {
            Ok(0)
        };
        let bound_now = plain_now.and_then(|p| {
            if tls_port != 0 {
                bind_port(&addrs, tls_port, true, &kept, &mut fresh)?;
            }
            Ok(p)
        });
        *bound = kept;
        let port = match bound_now {
            Ok(p) => p,
            Err(e) => {
                drop(fresh);
                self.restore(&mut bound, &closed);
                return Err(e);
            }
        };
        bound.extend(dup_all(&fresh)?);
        if !fresh.is_empty() {
            // The receiver lives as long as the server serves.
            let _ = self.tx.send(Change::Serve(fresh));
        }
        Ok(port)
    }

    /// Has the accept loops drop these sockets, and waits until they have.
    fn close(&self, which: Vec<(SocketAddr, bool)>) {
        if self.rx.lock().is_some() {
            // Nobody serves yet: nothing else holds them.
            return;
        }
        let (ack, done) = std::sync::mpsc::sync_channel(1);
        if self.tx.send(Change::Close(which, ack)).is_ok() {
            // The accept loops run on the runtime this may be called from.
            let _ = crate::checkpointer::blocking(|| done.recv_timeout(CLOSE_WAIT));
        }
    }

    /// Binds the closed sockets again after a failed change.
    fn restore(&self, bound: &mut Vec<Listening>, closed: &[(SocketAddr, bool)]) {
        let mut back = Vec::new();
        for &(at, tls) in closed {
            match listen(at) {
                Ok(socket) => back.push(Listening { socket, tls }),
                Err(e) => tracing::error!("could not listen on {at} again: {e}"),
            }
        }
        match dup_all(&back) {
            Ok(d) => bound.extend(d),
            Err(e) => tracing::error!("listening sockets: {e}"),
        }
        if !back.is_empty() {
            let _ = self.tx.send(Change::Serve(back));
        }
    }

    /// The accept loops' end of the channel; once.
    pub fn take_changes(&self) -> Option<mpsc::UnboundedReceiver<Change>> {
        self.rx.lock().take()
    }

    /// Where the plain sockets in force listen.
    #[cfg(test)]
    fn addrs(&self) -> Vec<SocketAddr> {
        self.bound
            .lock()
            .iter()
            .filter(|l| !l.tls)
            .filter_map(|l| l.socket.local_addr().ok())
            .collect()
    }
}

/// Whether `port` 0 turns plain TCP off: as in Redis, when the server
/// listens elsewhere (a Unix socket or `tls-port`). With nowhere else to
/// listen Redis refuses to start; durakv picks a free port instead, which
/// is how tests and scripts start it on an ephemeral one (it prints the
/// port it took).
pub fn tcp_off(port: u16, tls_port: u16, unix_socket: bool) -> bool {
    port == 0 && (tls_port != 0 || unix_socket)
}

/// Longest a change waits for the accept loops to let go of a socket.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn parse_all(binds: &[String]) -> Result<Vec<(BindAddr, &str)>, BindError> {
    binds
        .iter()
        .map(|b| {
            BindAddr::parse(b)
                .map(|a| (a, b.as_str()))
                .ok_or_else(|| BindError::Address(format!("invalid bind address '{b}'")))
        })
        .collect()
}

fn dup_all(set: &[Listening]) -> Result<Vec<Listening>, BindError> {
    set.iter()
        .map(|l| {
            Ok(Listening {
                socket: l
                    .socket
                    .try_clone()
                    .map_err(|e| BindError::Address(e.to_string()))?,
                tls: l.tls,
            })
        })
        .collect()
}

/// Binds `port` on every address into `out`, except where a socket of
/// `kept` already listens. With port 0 the first address picks a port and
/// the others bind the same one.
fn bind_port(
    addrs: &[(BindAddr, &str)],
    mut port: u16,
    tls: bool,
    kept: &[Listening],
    out: &mut Vec<Listening>,
) -> Result<u16, BindError> {
    let mut any = false;
    for &(addr, b) in addrs {
        let at = SocketAddr::new(addr.ip, port);
        let listening_there = |set: &[Listening]| {
            set.iter()
                .any(|l| l.tls == tls && l.socket.local_addr().ok() == Some(at))
        };
        if port != 0 && listening_there(kept) {
            any = true;
            continue;
        }
        let socket = match listen(at) {
            Ok(s) => s,
            Err(e) if addr.optional && unavailable(&e) => {
                tracing::warn!("skipping optional bind address {b}: {e}");
                continue;
            }
            Err(e) if listening_there(out) => {
                // The same address twice in `bind`.
                tracing::debug!("{b} is listed twice: {e}");
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse || is_permission(&e) => {
                return Err(BindError::Port(format!("could not bind {b}:{port}: {e}")))
            }
            Err(e) => {
                return Err(BindError::Address(format!(
                    "could not bind {b}:{port}: {e}"
                )))
            }
        };
        port = socket
            .local_addr()
            .map_err(|e| BindError::Address(e.to_string()))?
            .port();
        out.push(Listening { socket, tls });
        any = true;
    }
    if !any {
        return Err(BindError::Address(
            "none of the bind addresses could be bound".into(),
        ));
    }
    Ok(port)
}

/// A listening, non-blocking socket on `at`. An IPv6 one takes only IPv6,
/// so that `*` and `::*` can share a port.
fn listen(at: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(at), Type::STREAM, Some(Protocol::TCP))?;
    if at.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&at.into())?;
    socket.listen(BACKLOG.load(Ordering::Relaxed))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The host lacks the address or its family.
fn unavailable(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AddrNotAvailable
        || matches!(
            e.raw_os_error(),
            Some(libc::EAFNOSUPPORT) | Some(libc::EPROTONOSUPPORT)
        )
}

fn is_permission(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_redis_writes_them() {
        let p = |s| BindAddr::parse(s);
        assert_eq!(
            p("*"),
            Some(BindAddr {
                ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                optional: false
            })
        );
        assert_eq!(
            p("-::*").map(|a| (a.ip.is_ipv6(), a.optional)),
            Some((true, true))
        );
        assert_eq!(p("127.0.0.1").map(|a| a.ip.is_loopback()), Some(true));
        assert_eq!(p("999.999.999.999"), None);
        assert!(loopback_only(&["127.0.0.1".into(), "-::1".into()]));
        assert!(!loopback_only(&["127.0.0.1".into(), "*".into()]));
    }

    #[test]
    fn a_change_keeps_the_sockets_of_addresses_it_keeps() {
        let l = Listeners::default();
        let binds = vec!["127.0.0.1".to_string()];
        let (port, served) = l.start(&binds, 0, 0, false).unwrap();
        assert_eq!(served.len(), 1);
        let loops = accept_loops(&l, served);
        // The same address and port again: no second bind, which would
        // fail with the first socket still listening.
        assert_eq!(l.change(&binds, port, 0, false).unwrap(), port);
        // The same address twice is one socket.
        let twice = vec!["127.0.0.1".to_string(), "127.0.0.1".to_string()];
        assert_eq!(l.change(&twice, port, 0, false).unwrap(), port);
        assert_eq!(l.addrs().len(), 1);
        // A port somebody else holds: refused, and the old one stays.
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = taken.local_addr().unwrap().port();
        let e = l.change(&binds, other, 0, false).unwrap_err();
        assert_eq!(e.reason(), "Unable to listen on this port");
        assert_eq!(
            l.addrs(),
            vec![SocketAddr::new([127, 0, 0, 1].into(), port)]
        );
        let e = l
            .change(&["999.999.999.999".to_string()], port, 0, false)
            .unwrap_err();
        assert_eq!(e.reason(), "Failed to bind to specified addresses.");
        // From one address to all of them on the same port: the narrower
        // socket goes first.
        assert_eq!(l.change(&["*".to_string()], port, 0, false).unwrap(), port);
        assert_eq!(l.addrs(), vec![SocketAddr::new([0, 0, 0, 0].into(), port)]);
        // An optional address the host lacks is skipped.
        let p2 = l
            .change(&["127.0.0.1".into(), "-192.0.2.77".into()], 0, 0, false)
            .unwrap();
        assert_eq!(l.addrs(), vec![SocketAddr::new([127, 0, 0, 1].into(), p2)]);
        drop(l);
        let serving: Vec<SocketAddr> = loops.join().unwrap();
        assert_eq!(serving, vec![SocketAddr::new([127, 0, 0, 1].into(), p2)]);
    }

    #[test]
    fn port_0_turns_plain_tcp_off_only_where_the_server_listens_elsewhere() {
        let binds = vec!["127.0.0.1".to_string()];
        assert!(tcp_off(0, 0, true));
        assert!(tcp_off(0, 6380, false));
        assert!(!tcp_off(0, 0, false));
        assert!(!tcp_off(6379, 0, true));
        // Beside a Unix socket: no TCP socket at all.
        let l = Listeners::default();
        let (port, served) = l.start(&binds, 0, 0, true).unwrap();
        assert_eq!((port, served.len()), (0, 0));
        // Beside a TLS port: only the TLS socket.
        let l = Listeners::default();
        let (port, served) = l.start(&binds, 0, 0, false).unwrap();
        assert_ne!(port, 0, "nowhere else to listen: a free port");
        drop((served, l));
        let l = Listeners::default();
        let (port, served) = l.start(&binds, 0, port, false).unwrap();
        assert_eq!(port, 0);
        assert_eq!(served.len(), 1);
        assert!(served[0].tls);
        // CONFIG SET port 0 with a Unix socket closes the TCP socket.
        let l = Listeners::default();
        let (port, served) = l.start(&binds, 0, 0, false).unwrap();
        let loops = accept_loops(&l, served);
        assert_eq!(l.change(&binds, 0, 0, true).unwrap(), 0);
        assert!(l.addrs().is_empty());
        assert!(
            TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "the port was let go"
        );
        drop(l);
        assert!(loops.join().unwrap().is_empty());
    }

    /// Stands in for the server's accept loops: holds the sockets it is
    /// given until told to close them, and returns where it still listens
    /// once the channel closes.
    fn accept_loops(
        l: &Listeners,
        first: Vec<Listening>,
    ) -> std::thread::JoinHandle<Vec<SocketAddr>> {
        let mut rx = l.take_changes().unwrap();
        std::thread::spawn(move || {
            let mut held = first;
            while let Some(change) = rx.blocking_recv() {
                match change {
                    Change::Serve(more) => held.extend(more),
                    Change::Close(which, done) => {
                        held.retain(|h| !which.contains(&(h.socket.local_addr().unwrap(), h.tls)));
                        done.send(()).unwrap();
                    }
                }
            }
            held.iter()
                .map(|h| h.socket.local_addr().unwrap())
                .collect()
        })
    }
}
