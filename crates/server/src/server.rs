//! The listener: binds, accepts connections (enforcing `maxclients` and
//! protected mode), runs background tasks, and shuts down gracefully on
//! SIGTERM, SIGINT or SHUTDOWN.

use crate::client::Peer;
use crate::connection;
use crate::expiry;
use crate::listeners::{Change, Listening};
use crate::restart::restarting;
use crate::state::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// How long shutdown waits for connections to finish their in-flight work.
const SHUTDOWN_DRAIN_MS: u64 = 5_000;

/// File descriptors kept out of `maxclients`' reach: the log's segments,
/// checkpoints, the listeners, the runtime's own, and one to refuse a
/// client with an error instead of leaving it unaccepted.
const RESERVED_FDS: u64 = 64;

const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Binds every configured address and serves until shutdown.
pub async fn serve(shared: Arc<Shared>) -> std::io::Result<()> {
    let (binds, port, tls_port, unixsocket) = {
        let c = shared.config.read();
        (c.bind.clone(), c.port, c.tls_port, c.unixsocket.clone())
    };
    if tls_port != 0 {
        let acceptor = {
            let c = shared.config.read();
            crate::tls::acceptor(&crate::tls::TlsSettings::server(&c))
        }
        .map_err(std::io::Error::other)?;
        *shared.tls_acceptor.write() = Some(acceptor);
    }
    crate::listeners::set_backlog(shared.config.read().tcp_backlog);
    let (port, listening) = shared
        .listeners
        .start(&binds, port, tls_port, !unixsocket.is_empty())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    shared.bound_port.store(port as u64, Ordering::Release);
    // Bound before the port is announced, so that whoever waits for that
    // line finds the socket too.
    let unix = if unixsocket.is_empty() {
        None
    } else {
        let perm = shared.config.read().unixsocketperm;
        let listener = crate::unix_socket::bind(&unixsocket, perm).map_err(|e| {
            std::io::Error::other(format!("Failed opening Unix socket {unixsocket}: {e}"))
        })?;
        tracing::info!("Ready to accept connections unix on {unixsocket}");
        let path: Arc<str> = unixsocket.into();
        let (listener, at, s) = (Arc::new(listener), path.clone(), shared.clone());
        let task = tokio::spawn(restarting("the unix socket's accept loop", move || {
            crate::unix_socket::accept_loop(s.clone(), listener.clone(), at.clone())
        }));
        Some((path, task))
    };

    // Before the port is announced, so that no client sees the figure
    // taken before the data was loaded.
    crate::memory_breakdown::note_startup(&shared);
    shared.metrics.apply(&shared.config.read())?;
    let metrics = tokio::spawn(crate::metrics_http::run(shared.clone()));
    if port != 0 {
        tracing::info!("Ready to accept connections tcp on port {port}");
        // Tests and scripts read this line to learn an ephemeral port.
        println!("durakv listening on port {port}");
    }
    let tls_bound = listening
        .iter()
        .find(|l| l.tls)
        .and_then(|l| l.socket.local_addr().ok());
    if let Some(tls_addr) = tls_bound {
        let tls_port = tls_addr.port();
        tracing::info!("Ready to accept connections tls on port {tls_port}");
        println!("durakv listening for TLS on port {tls_port}");
    }

    crate::service::notify_ready(&shared.config.read().supervised);
    crate::repl::replica::adopt_configured_primary(&shared);
    let background = spawn_restarting("the background loop", &shared, expiry::run);
    // Not stopped at shutdown: connections still holding replies need it.
    spawn_restarting("the reply flusher", &shared, crate::parked::run);
    let replication = [
        spawn_restarting("the replica link", &shared, crate::repl::replica::supervise),
        spawn_restarting(
            "the replica pings",
            &shared,
            crate::repl::primary::ping_replicas,
        ),
        spawn_restarting("the failover loop", &shared, crate::repl::failover::run),
    ];
    let mut accepts = Vec::new();
    spawn_accepts(&shared, listening, &mut accepts);
    let mut changes = shared
        .listeners
        .take_changes()
        .ok_or_else(|| std::io::Error::other("the server is already serving"))?;
    let mut shutdown_rx = shared.shutdown_tx.subscribe();
    // Made once, so that no signal falls between two turns of the loop.
    let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
    let mut terminated = std::pin::pin!(sigterm());
    loop {
        tokio::select! {
            Some(change) = changes.recv() => {
                // CONFIG SET bind/port: `Listeners::change` binds and asks.
                match change {
                    Change::Serve(listening) => spawn_accepts(&shared, listening, &mut accepts),
                    Change::Close(which, done) => {
                        let (gone, stay): (Vec<_>, Vec<_>) = std::mem::take(&mut accepts)
                            .into_iter()
                            .partition(|(at, _)| which.contains(at));
                        accepts = stay;
                        for (_, task) in gone {
                            task.abort();
                            // Its socket is closed once the task is dropped.
                            let _ = task.await;
                        }
                        let _ = done.send(());
                    }
                }
                continue;
            }
            _ = shutdown_rx.wait_for(|s| *s) => tracing::info!("shutdown requested"),
            _ = &mut interrupted => tracing::info!("received SIGINT, shutting down"),
            _ = &mut terminated => tracing::info!("received SIGTERM, shutting down"),
        }
        break;
    }
    shared.request_shutdown();
    for (_, a) in accepts {
        a.abort();
    }
    if let Some((path, task)) = unix {
        task.abort();
        let _ = std::fs::remove_file(&*path);
    }
    background.abort();
    metrics.abort();
    for t in replication {
        t.abort();
    }
    shared.clients.kill_all();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(SHUTDOWN_DRAIN_MS);
    while !shared.clients.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Spawns `run(shared)`, started again whenever it panics.
fn spawn_restarting<Fut>(
    name: &'static str,
    shared: &Arc<Shared>,
    run: fn(Arc<Shared>) -> Fut,
) -> tokio::task::JoinHandle<()>
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let shared = shared.clone();
    tokio::spawn(restarting(name, move || run(shared.clone())))
}

/// An accept loop per socket, with the socket's (address, TLS).
type Accepting = ((std::net::SocketAddr, bool), tokio::task::JoinHandle<()>);

fn spawn_accepts(shared: &Arc<Shared>, listening: Vec<Listening>, accepts: &mut Vec<Accepting>) {
    let limit = ClientLimit::for_maxclients(shared.config.read().maxclients);
    for l in listening {
        let at = l.socket.local_addr().map(|a| (a, l.tls));
        match (at, TcpListener::from_std(l.socket)) {
            (Ok(at), Ok(socket)) => {
                let (socket, shared) = (Arc::new(socket), shared.clone());
                let task = tokio::spawn(restarting("an accept loop", move || {
                    accept_loop(shared.clone(), socket.clone(), limit, at.1)
                }));
                accepts.push((at, task))
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!("cannot accept on a listening socket: {e}")
            }
        }
    }
}

async fn sigterm() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    }
    #[cfg(not(unix))]
    std::future::pending::<()>().await
}

/// How many clients may connect: `maxclients`, unless the open-files limit
/// cannot be raised far enough, as Redis does at start-up.
#[derive(Clone, Copy)]
struct ClientLimit {
    /// The `maxclients` this was worked out for (CONFIG SET may change it).
    maxclients: usize,
    clients: usize,
}

impl ClientLimit {
    fn for_maxclients(maxclients: usize) -> ClientLimit {
        let files = raise_open_files_limit((maxclients as u64).saturating_add(RESERVED_FDS));
        let clients = match files {
            Some(files) => maxclients.min(files.saturating_sub(RESERVED_FDS) as usize),
            None => maxclients,
        };
        if clients < maxclients {
            tracing::warn!(
                "maxclients {maxclients} needs {} open files, but the limit is {} and cannot be raised: at most {clients} clients will be accepted",
                maxclients as u64 + RESERVED_FDS,
                files.unwrap_or(0)
            );
        }
        ClientLimit {
            maxclients,
            clients,
        }
    }
}

/// Raises this process's soft limit on open files towards `wanted` (up to
/// the hard limit) and returns the limit in force; `None` when unlimited or
/// unknown.
#[cfg(unix)]
fn raise_open_files_limit(wanted: u64) -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed by reference.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    let wanted = wanted as libc::rlim_t;
    if lim.rlim_cur < wanted {
        let target = if lim.rlim_max == libc::RLIM_INFINITY {
            wanted
        } else {
            wanted.min(lim.rlim_max)
        };
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct passed by reference.
        if target > lim.rlim_cur && unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = target;
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not everywhere
    Some(lim.rlim_cur as u64)
}

#[cfg(not(unix))]
fn raise_open_files_limit(_wanted: u64) -> Option<u64> {
    None
}

/// The next connection `accept` takes, counted in
/// `total_connections_received`; None once the server is shutting down.
/// A failed accept (EMFILE and friends) is retried after a pause instead
/// of spinning. `door` is busy from the call until `accept` finds no
/// connection queued, so the connection returned is registered before a
/// listing waiting on it sees the loop idle (`crate::settle`).
pub(crate) async fn next_accepted<T>(
    shared: &Shared,
    door: &crate::settle::Door,
    mut accept: impl FnMut(&mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<T>>,
) -> Option<T> {
    loop {
        let accepted = std::future::poll_fn(|cx| {
            door.accepting();
            let r = accept(cx);
            if r.is_pending() {
                door.waiting();
            }
            r
        });
        match accepted.await {
            Ok(accepted) => {
                if shared.shutting_down.load(Ordering::Acquire) {
                    return None;
                }
                shared.stats.total_connections_received.add(1);
                return Some(accepted);
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn accept_loop(
    shared: Arc<Shared>,
    listener: Arc<TcpListener>,
    mut limit: ClientLimit,
    tls: bool,
) {
    let opened = {
        use std::os::fd::AsRawFd;
        // When each request arrived, for the order blocked clients are
        // served in (`crate::arrival`); the connections accepted inherit
        // it, and the kernel stamps packets from now on, not only once a
        // first connection asks.
        if let Err(e) = crate::arrival::timestamp_reads(listener.as_raw_fd()) {
            tracing::debug!("no receive timestamps: {e}");
        }
        shared.doors.open(listener.as_raw_fd())
    };
    while let Some((stream, addr)) =
        next_accepted(&shared, &opened.door, |cx| listener.poll_accept(cx)).await
    {
        let (maxclients, protected, authenticated, keepalive) = {
            let c = shared.config.read();
            // As in Redis: a `default` user without a password, on or off.
            let protected = c.protected_mode
                && shared.acl.default_user().nopass
                && !crate::listeners::loopback_only(&c.bind)
                && !addr.ip().is_loopback();
            (
                c.maxclients,
                protected,
                shared.acl.default_needs_no_auth(),
                c.tcp_keepalive_secs,
            )
        };
        if maxclients != limit.maxclients {
            limit = ClientLimit::for_maxclients(maxclients);
        }
        if shared.clients.len() >= limit.clients {
            shared.stats.rejected_connections.add(1);
            tokio::spawn(refuse(
                stream,
                format!("-{}\r\n", crate::errors::MAX_CLIENTS),
            ));
            continue;
        }
        if protected {
            shared.stats.rejected_connections.add(1);
            tokio::spawn(refuse(stream, DENIED.to_string()));
            continue;
        }
        if keepalive > 0 {
            if let Err(e) = set_keepalive(&stream, keepalive) {
                tracing::debug!("could not set keepalive: {e}");
            }
        }
        let laddr = stream.local_addr().unwrap_or(addr);
        let fd = {
            use std::os::fd::AsRawFd;
            stream.as_raw_fd() as i64
        };
        let _ = stream.set_nodelay(true);
        let acceptor = if tls {
            shared.tls_acceptor.read().clone()
        } else {
            None
        };
        let Some(acceptor) = acceptor else {
            let handle = shared
                .clients
                .register(Peer::Tcp(addr), Peer::Tcp(laddr), fd);
            tokio::spawn(connection::serve(
                shared.clone(),
                stream,
                handle,
                authenticated,
            ));
            continue;
        };
        // The handshake runs in the connection's own task, bounded in time,
        // so a client that stalls in it holds up nobody else.
        let shared = shared.clone();
        tokio::spawn(async move {
            let accepted =
                tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            match accepted {
                Ok(Ok(stream)) => {
                    let handle = shared
                        .clients
                        .register(Peer::Tcp(addr), Peer::Tcp(laddr), fd);
                    connection::serve(shared, stream, handle, authenticated).await;
                }
                Ok(Err(e)) => tracing::debug!("TLS handshake with {addr} failed: {e}"),
                Err(_) => tracing::debug!("TLS handshake with {addr} timed out"),
            }
        });
    }
}

/// `tcp-keepalive`: tokio has no setter, so go through the socket itself.
fn set_keepalive(stream: &TcpStream, secs: u64) -> std::io::Result<()> {
    let keepalive = socket2::TcpKeepalive::new().with_time(Duration::from_secs(secs));
    socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive)
}

/// Answers a connection turned away with `msg`, and closes it.
pub(crate) async fn refuse<S: tokio::io::AsyncWrite + Unpin>(mut stream: S, msg: String) {
    let _ = stream.write_all(msg.as_bytes()).await;
    let _ = stream.shutdown().await;
}
