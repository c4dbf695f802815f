//! `unixsocket`: clients on a Unix socket as well as TCP, as Redis serves
//! them. Such a client is local (`enable-debug-command local` lets it in),
//! never refused by protected mode, and shown with the socket's path as
//! its address and the `U` flag in CLIENT LIST.

use crate::client::Peer;
use crate::state::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};

/// Binds `path`, replacing a socket file a previous run left, and gives it
/// `perm` when that is not 0.
pub fn bind(path: &str, perm: u32) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)?,
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    if perm != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(listener)
}

/// Accepts clients on `listener` until the server shuts down (which then
/// removes the socket file).
pub async fn accept_loop(shared: Arc<Shared>, listener: UnixListener, path: Arc<str>) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept on {path} failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shared.shutting_down.load(Ordering::Acquire) {
            return;
        }
        shared
            .stats
            .total_connections_received
            .fetch_add(1, Ordering::Relaxed);
        let maxclients = shared.config.read().maxclients;
        if shared.clients.len() >= maxclients {
            shared
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            tokio::spawn(refuse(stream));
            continue;
        }
        let fd = {
            use std::os::fd::AsRawFd;
            stream.as_raw_fd() as i64
        };
        let peer = Peer::Unix(path.clone());
        let handle = shared.clients.register(peer.clone(), peer, fd);
        let authenticated = shared.acl.default_needs_no_auth();
        tokio::spawn(crate::connection::serve(
            shared.clone(),
            stream,
            handle,
            authenticated,
        ));
    }
}

async fn refuse(mut stream: UnixStream) {
    let msg = format!("-{}\r\n", crate::errors::MAX_CLIENTS);
    let _ = stream.write_all(msg.as_bytes()).await;
    let _ = stream.shutdown().await;
}
