//! `unixsocket`: clients on a Unix socket as well as TCP, as Redis serves
//! them. Such a client is local (`enable-debug-command local` lets it in),
//! never refused by protected mode, and shown with the socket's path as
//! its address and the `U` flag in CLIENT LIST.

use crate::client::Peer;
use crate::state::Shared;
use std::sync::Arc;
use tokio::net::UnixListener;

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
pub async fn accept_loop(shared: Arc<Shared>, listener: Arc<UnixListener>, path: Arc<str>) {
    let opened = {
        use std::os::fd::AsRawFd;
        shared.doors.open(listener.as_raw_fd())
    };
    let door = &opened.door;
    while let Some((stream, _)) =
        crate::server::next_accepted(&shared, door, |cx| listener.poll_accept(cx)).await
    {
        let maxclients = shared.config.read().maxclients;
        if shared.clients.len() >= maxclients {
            shared.stats.rejected_connections.add(1);
            let msg = format!("-{}\r\n", crate::errors::MAX_CLIENTS);
            tokio::spawn(crate::server::refuse(stream, msg));
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
