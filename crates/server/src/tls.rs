//! TLS on `tls-port`: the certificate, key and client-certificate policy
//! from the configuration, turned into a rustls acceptor at start-up, and
//! the stream type connections run over (plain TCP or TLS).
//!
//! The directives are Redis's: `tls-port`, `tls-cert-file`,
//! `tls-key-file`, `tls-ca-cert-file` and `tls-ca-cert-dir` (the CAs
//! trusted, from either or both), and `tls-auth-clients` (`yes`: a
//! client must present a certificate signed by the CA; `optional`: one it
//! presents must be; `no`: none is asked for). A configuration that cannot
//! be loaded stops the server at start-up with the reason, rather than
//! serving without the encryption the operator asked for; CONFIG SET of
//! one that cannot be loaded is refused and the old settings stay.

use crate::config::Config;
use bytes::{Buf, BytesMut};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// How long a client gets to finish its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `tls-auth-clients`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    Required,
    Optional,
    None,
}

impl ClientAuth {
    pub fn parse(v: &str) -> Result<ClientAuth, String> {
        match v.to_ascii_lowercase().as_str() {
            "yes" => Ok(ClientAuth::Required),
            "optional" => Ok(ClientAuth::Optional),
            "no" => Ok(ClientAuth::None),
            _ => Err("argument must be 'yes', 'no' or 'optional'".into()),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::Required => "yes",
            ClientAuth::Optional => "optional",
            ClientAuth::None => "no",
        }
    }
}

/// What `tls-*` says.
pub struct TlsSettings<'a> {
    pub cert_file: &'a str,
    pub key_file: &'a str,
    pub ca_cert_file: &'a str,
    pub ca_cert_dir: &'a str,
    pub auth_clients: ClientAuth,
    /// `tls-protocols`: the versions offered ("" = TLS 1.2 and 1.3).
    pub protocols: &'a str,
    /// `tls-ciphers` and `tls-ciphersuites` ("" = rustls's suites).
    pub ciphers: &'a str,
    pub ciphersuites: &'a str,
    /// `tls-prefer-server-ciphers`: the server's order decides.
    pub prefer_server_ciphers: bool,
}

impl<'a> TlsSettings<'a> {
    /// What `tls-port` serves with.
    pub fn server(c: &'a Config) -> TlsSettings<'a> {
        TlsSettings {
            cert_file: &c.tls_cert_file,
            key_file: &c.tls_key_file,
            ca_cert_file: &c.tls_ca_cert_file,
            ca_cert_dir: &c.tls_ca_cert_dir,
            auth_clients: c.tls_auth_clients,
            protocols: c.compat.get("tls-protocols").map_or("", String::as_str),
            ciphers: c.compat.get("tls-ciphers").map_or("", String::as_str),
            ciphersuites: c.compat.get("tls-ciphersuites").map_or("", String::as_str),
            prefer_server_ciphers: c
                .compat
                .get("tls-prefer-server-ciphers")
                .is_some_and(|v| v == "yes"),
        }
    }

    /// What a replica connects to its primary with: as in Redis, the
    /// `tls-client-*` pair when set, else the server's own.
    pub fn outgoing(c: &'a Config) -> TlsSettings<'a> {
        let mut s = TlsSettings::server(c);
        if !c.tls_client_cert_file.is_empty() {
            s.cert_file = &c.tls_client_cert_file;
            s.key_file = &c.tls_client_key_file;
        }
        s
    }
}

/// CONFIG SET of a `tls-*` directive: builds the acceptor from the
/// configuration now in force (re-reading the files, so a renewed
/// certificate at the same path is picked up) and puts it in service for
/// connections accepted from then on; those already open keep theirs.
/// Without `tls-port` there is nothing to reload. On error nothing changes.
pub fn reload(shared: &crate::state::Shared) -> Result<(), String> {
    let c = shared.config.read();
    if c.tls_port == 0 {
        return Ok(());
    }
    let acceptor = acceptor(&TlsSettings::server(&c))?;
    drop(c);
    *shared.tls_acceptor.write() = Some(acceptor);
    tracing::info!("TLS settings reloaded");
    Ok(())
}

/// Builds the acceptor, or says which file or setting is wrong.
pub fn acceptor(s: &TlsSettings<'_>) -> Result<TlsAcceptor, String> {
    if s.cert_file.is_empty() || s.key_file.is_empty() {
        return Err("tls-port needs tls-cert-file and tls-key-file".into());
    }
    let (certs, key) = cert_and_key(s)?;
    let provider = Arc::new(crate::tls_suites::provider(s.ciphers, s.ciphersuites)?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&protocol_versions(s.protocols)?)
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = if s.auth_clients == ClientAuth::None {
        builder.with_no_client_auth()
    } else {
        if s.ca_cert_file.is_empty() && s.ca_cert_dir.is_empty() {
            return Err(
                "tls-auth-clients yes or optional needs tls-ca-cert-file or tls-ca-cert-dir (or set tls-auth-clients no)"
                    .into(),
            );
        }
        let roots = Arc::new(roots(s)?);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
        let verifier = if s.auth_clients == ClientAuth::Optional {
            verifier.allow_unauthenticated()
        } else {
            verifier
        };
        let verifier = verifier
            .build()
            .map_err(|e| format!("tls-ca-cert-file / tls-ca-cert-dir: {e}"))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls-cert-file / tls-key-file: {e}"))?;
    config.ignore_client_order = s.prefer_server_ciphers;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// `tls-cert-file`'s chain and `tls-key-file`'s key.
/// The versions `tls-protocols` names, of those rustls implements: TLS
/// 1.0 and 1.1, which Redis still accepts, are left out, and a list of
/// nothing else is an error rather than a server nobody can reach.
fn protocol_versions(
    protocols: &str,
) -> Result<Vec<&'static tokio_rustls::rustls::SupportedProtocolVersion>, String> {
    use tokio_rustls::rustls::version::{TLS12, TLS13};
    if protocols.trim().is_empty() {
        return Ok(vec![&TLS12, &TLS13]);
    }
    let mut out = Vec::new();
    for p in protocols.split_whitespace() {
        match p.to_ascii_lowercase().as_str() {
            "tlsv1.2" => out.push(&TLS12),
            "tlsv1.3" => out.push(&TLS13),
            _ => {}
        }
    }
    if out.is_empty() {
        return Err(format!(
            "tls-protocols '{protocols}': durakv speaks only TLSv1.2 and TLSv1.3"
        ));
    }
    Ok(out)
}

fn cert_and_key(
    s: &TlsSettings<'_>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(s.cert_file)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| format!("cannot read tls-cert-file {}: {e}", s.cert_file))?;
    if certs.is_empty() {
        return Err(format!(
            "tls-cert-file {} holds no certificate",
            s.cert_file
        ));
    }
    let key = PrivateKeyDer::from_pem_file(s.key_file)
        .map_err(|e| format!("cannot read tls-key-file {}: {e}", s.key_file))?;
    Ok((certs, key))
}

/// The CA certificates of `tls-ca-cert-file` and `tls-ca-cert-dir`.
fn roots(s: &TlsSettings<'_>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if !s.ca_cert_file.is_empty() {
        let file = s.ca_cert_file;
        let cas = CertificateDer::pem_file_iter(file)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read tls-ca-cert-file {file}: {e}"))?;
        for ca in cas {
            roots
                .add(ca)
                .map_err(|e| format!("tls-ca-cert-file {file}: {e}"))?;
        }
        if roots.is_empty() {
            return Err(format!("tls-ca-cert-file {file} holds no certificate"));
        }
    }
    if !s.ca_cert_dir.is_empty() {
        let dir = s.ca_cert_dir;
        let added = dir_roots(dir, &mut roots)
            .map_err(|e| format!("cannot read tls-ca-cert-dir {dir}: {e}"))?;
        if added == 0 {
            return Err(format!(
                "tls-ca-cert-dir {dir} holds no certificate in a PEM file"
            ));
        }
    }
    Ok(roots)
}

/// Adds the certificates of every PEM file in `dir` (OpenSSL's `CApath`,
/// such as `/etc/ssl/certs`, where its hash-named links repeat the files);
/// how many were added. A file that is not a PEM certificate (a README, a
/// key, a revocation list) or one rustls cannot use is passed over, as
/// OpenSSL passes over what it does not look up, so one odd file does not
/// stop the server.
fn dir_roots(dir: &str, roots: &mut RootCertStore) -> std::io::Result<usize> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let mut added = 0;
    for path in paths {
        let Ok(certs) = CertificateDer::pem_file_iter(&path) else {
            continue;
        };
        for cert in certs.flatten() {
            match roots.add(cert) {
                Ok(()) => added += 1,
                Err(e) => tracing::warn!(
                    "tls-ca-cert-dir: {} has a certificate that cannot be used: {e}",
                    path.display()
                ),
            }
        }
    }
    Ok(added)
}

/// The outgoing side, a replica's link to its primary with
/// `tls-replication`: the primary must present a certificate the CA
/// signed; this server presents the pair in `s` (`tls-client-cert-file`,
/// or `tls-cert-file` when that is not set, as in Redis).
pub fn connector(s: &TlsSettings<'_>) -> Result<TlsConnector, String> {
    if s.ca_cert_file.is_empty() && s.ca_cert_dir.is_empty() {
        return Err(
            "tls-replication needs tls-ca-cert-file or tls-ca-cert-dir to check the primary".into(),
        );
    }
    let provider = Arc::new(crate::tls_suites::provider(s.ciphers, s.ciphersuites)?);
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&protocol_versions(s.protocols)?)
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots(s)?);
    let config = if s.cert_file.is_empty() || s.key_file.is_empty() {
        builder.with_no_client_auth()
    } else {
        let (certs, key) = cert_and_key(s)?;
        builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("tls-cert-file / tls-key-file: {e}"))?
    };
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The name a primary's certificate must carry: its host or address.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("TLS: bad host name {host}: {e}"))
}

/// A byte stream the server talks over: plain TCP, or TLS (clients on
/// `tls-port`, a replica's link with `tls-replication`).
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// The byte stream a client connection runs over.
pub trait ClientStream: Stream {
    /// Writes what the socket takes now, without waiting, dropping it from
    /// the front of `out`; the rest goes through an awaited write.
    fn write_now(&mut self, out: &mut BytesMut) -> io::Result<()>;

    /// The socket, if bytes written to it directly reach the client as
    /// they are (`crate::parked`): not under TLS.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// Reads onto the spare room of `buf`, as `read_buf` does, with the
    /// time the kernel received the data if the stream knows it
    /// (`crate::arrival`).
    fn poll_read_stamped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<(usize, Option<u64>)>> {
        use std::future::Future;
        use tokio::io::AsyncReadExt;
        std::pin::pin!(self.read_buf(buf))
            .poll(cx)
            .map_ok(|n| (n, None))
    }
}

/// Writes what a plain socket takes now (`try_write`), as
/// [`ClientStream::write_now`] says.
fn write_what_it_takes(
    mut try_write: impl FnMut(&[u8]) -> io::Result<usize>,
    out: &mut BytesMut,
) -> io::Result<()> {
    while !out.is_empty() {
        match try_write(out) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => out.advance(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl ClientStream for TcpStream {
    fn write_now(&mut self, out: &mut BytesMut) -> io::Result<()> {
        write_what_it_takes(|b| self.try_write(b), out)
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(self))
    }

    fn poll_read_stamped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<(usize, Option<u64>)>> {
        use std::os::fd::AsRawFd;
        let fd = self.as_raw_fd();
        let room = buf.capacity() - buf.len();
        loop {
            std::task::ready!(self.poll_read_ready(cx))?;
            let mut got = None;
            let r = self.try_io(tokio::io::Interest::READABLE, || {
                let read = crate::arrival::recv_stamped(fd, buf)?;
                got = Some(read);
                // A short read drained the socket. Told to tokio as "would
                // block", after keeping the data, it forgets the readiness
                // seen before the read, as its own reads do, and the next
                // poll waits instead of making a read that finds nothing.
                if read.0 > 0 && read.0 < room {
                    Err(io::ErrorKind::WouldBlock.into())
                } else {
                    Ok(())
                }
            });
            if let Some(read) = got {
                return Poll::Ready(Ok(read));
            }
            // No read made (tokio saw no readiness) or one that would
            // block: wait for readiness again.
            if let Err(e) = r {
                if e.kind() != io::ErrorKind::WouldBlock {
                    return Poll::Ready(Err(e));
                }
            }
        }
    }
}

impl ClientStream for tokio::net::UnixStream {
    fn write_now(&mut self, out: &mut BytesMut) -> io::Result<()> {
        write_what_it_takes(|b| self.try_write(b), out)
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(self))
    }
}

impl ClientStream for tokio_rustls::server::TlsStream<TcpStream> {
    fn write_now(&mut self, _out: &mut BytesMut) -> io::Result<()> {
        // Encryption happens inside the awaited write.
        Ok(())
    }
}
