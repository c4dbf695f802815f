//! TLS on `tls-port` against the real binary: a rustls client and, where
//! installed, redis-cli; client certificates required, optional or not
//! asked for; plaintext and certificate-less clients turned away while the
//! server keeps serving; settings that cannot load stop the start-up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use durakv_protocol::Frame;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls::{self, pki_types};

/// A CA, a server certificate for localhost / 127.0.0.1 and a client
/// certificate, written as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    client: rcgen::Certificate,
    client_key: KeyPair,
    /// A client certificate from a CA the server does not trust.
    stranger: rcgen::Certificate,
    stranger_key: KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let (ca, ca_key) = make_ca("durakv test CA");
        let (other_ca, other_key) = make_ca("someone else's CA");
        let server_key = KeyPair::generate().unwrap();
        let mut sp = CertificateParams::new(vec!["localhost".into()]).unwrap();
        // An address SAN (not a DNS name "127.0.0.1"): a replica checks the
        // primary it reaches by address.
        sp.subject_alt_names
            .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
        sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = sp.signed_by(&server_key, &ca, &ca_key).unwrap();
        let (client, client_key) = leaf("client", &ca, &ca_key);
        let (stranger, stranger_key) = leaf("stranger", &other_ca, &other_key);
        let p = dir.path();
        std::fs::write(p.join("ca.crt"), ca.pem()).unwrap();
        std::fs::write(p.join("server.crt"), server.pem()).unwrap();
        std::fs::write(p.join("server.key"), server_key.serialize_pem()).unwrap();
        std::fs::write(p.join("client.crt"), client.pem()).unwrap();
        std::fs::write(p.join("client.key"), client_key.serialize_pem()).unwrap();
        Pki {
            dir,
            ca,
            client,
            client_key,
            stranger,
            stranger_key,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `--tls-*` flags for a server on `tls_port`.
    fn flags(&self, tls_port: u16, auth: &str) -> Vec<String> {
        let s = |p: PathBuf| p.to_str().unwrap().to_string();
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            s(self.path("server.crt")),
            "--tls-key-file".into(),
            s(self.path("server.key")),
            "--tls-ca-cert-file".into(),
            s(self.path("ca.crt")),
            "--tls-auth-clients".into(),
            auth.into(),
        ]
    }
}

fn make_ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    (p.self_signed(&key).unwrap(), key)
}

fn leaf(name: &str, ca: &rcgen::Certificate, ca_key: &KeyPair) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    (p.signed_by(&key, ca, ca_key).unwrap(), key)
}

fn start(pki: &Pki, auth: &str) -> (Server, u16) {
    Server::start_with_free_port(|tls_port| pki.flags(tls_port, auth))
}

/// A RESP connection over TLS, presenting `cert` if given.
struct TlsConn {
    s: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    buf: bytes::BytesMut,
}

impl TlsConn {
    fn open(pki: &Pki, port: u16, cert: Option<(&rcgen::Certificate, &KeyPair)>) -> TlsConn {
        TlsConn::trusting(&pki.ca, port, cert)
    }

    /// A connection that accepts only a server certificate signed by `ca`;
    /// the handshake happens at the first exchange.
    fn trusting(
        ca: &rcgen::Certificate,
        port: u16,
        cert: Option<(&rcgen::Certificate, &KeyPair)>,
    ) -> TlsConn {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match cert {
            Some((c, k)) => {
                let key = pki_types::PrivatePkcs8KeyDer::from(k.serialize_der());
                builder
                    .with_client_auth_cert(vec![c.der().clone()], key.into())
                    .unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        let name = pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        TlsConn {
            s: rustls::StreamOwned::new(conn, sock),
            buf: bytes::BytesMut::new(),
        }
    }

    fn send(&mut self, args: &[&[u8]]) -> std::io::Result<()> {
        self.s.write_all(&req(args))?;
        self.s.flush()
    }

    /// The next reply; Err when the server ended the connection instead.
    fn frame(&mut self) -> std::io::Result<Frame> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(f) = durakv_protocol::reply::parse_reply(&mut self.buf).unwrap() {
                return Ok(f);
            }
            let n = self.s.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn call(&mut self, args: &[&str]) -> std::io::Result<Frame> {
        let a: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&a)?;
        self.frame()
    }
}

#[test]
fn tls_port_serves_clients_with_certificates_from_the_ca_beside_the_plain_port() {
    let pki = Pki::new();
    let (srv, tls_port) = start(&pki, "yes");
    let mut t = TlsConn::open(&pki, tls_port, Some((&pki.client, &pki.client_key)));
    assert_eq!(
        t.call(&["SET", "k", "over tls"]).unwrap(),
        Frame::Simple("OK".into())
    );
    assert_eq!(
        t.call(&["GET", "k"]).unwrap(),
        Frame::Bulk("over tls".into())
    );
    // One keyspace: the plain port sees it.
    let mut c = srv.conn();
    let v: String = q(&mut c, &["GET", "k"]);
    assert_eq!(v, "over tls");
    let port: Vec<String> = q(&mut c, &["CONFIG", "GET", "tls-port"]);
    assert_eq!(port, ["tls-port".to_string(), tls_port.to_string()]);

    // Large replies and pipelines cross the encryption whole and in order.
    let big = "v".repeat(256 * 1024);
    let mut batch = Vec::new();
    for i in 0..20 {
        batch.extend(req(&[b"SET", format!("big{i}").as_bytes(), big.as_bytes()]));
    }
    for i in 0..20 {
        batch.extend(req(&[b"GET", format!("big{i}").as_bytes()]));
    }
    t.s.write_all(&batch).unwrap();
    t.s.flush().unwrap();
    for _ in 0..20 {
        assert_eq!(t.frame().unwrap(), Frame::Simple("OK".into()));
    }
    for _ in 0..20 {
        assert_eq!(t.frame().unwrap(), Frame::Bulk(big.clone().into()));
    }
}

#[test]
fn a_replica_follows_its_primary_over_tls() {
    let pki = Pki::new();
    let (primary, tls_port) = start(&pki, "yes");
    let mut p = primary.conn();
    for i in 0..500 {
        let _: () = q(&mut p, &["SET", &format!("before{i}"), &"x".repeat(i)]);
    }
    // The replica checks the primary against the CA and presents its
    // client certificate (the server one is for server use only); it has
    // no TLS listener of its own.
    let replicaof = format!("127.0.0.1 {tls_port}");
    let flags = pki.flags(tls_port, "yes");
    let (client_cert, client_key) = (pki.path("client.crt"), pki.path("client.key"));
    let mut args: Vec<&str> = flags[2..8].iter().map(String::as_str).collect();
    args.extend(["--tls-client-cert-file", client_cert.to_str().unwrap()]);
    args.extend(["--tls-client-key-file", client_key.to_str().unwrap()]);
    args.extend(["--tls-replication", "yes", "--replicaof", &replicaof]);
    let mut replica = Server::start(&args);
    let mut r = replica.conn();
    eventually("the full sync over TLS", || {
        try_q::<i64>(&mut r, &["DBSIZE"]).ok() == Some(500)
    });
    let v: String = q(&mut r, &["GET", "before499"]);
    assert_eq!(v.len(), 499);
    // The stream follows over the same link.
    let _: () = q(&mut p, &["SET", "after", "streamed"]);
    eventually("a streamed write", || {
        try_q::<Option<String>>(&mut r, &["GET", "after"]).ok() == Some(Some("streamed".into()))
    });
    let info: String = q(&mut p, &["INFO", "replication"]);
    assert!(info.contains("connected_slaves:1"), "{info}");
    // Restarted, it connects again over TLS and catches up.
    replica.restart();
    let _: () = q(&mut p, &["SET", "after-restart", "yes"]);
    let mut r = replica.conn();
    eventually("the resync after a restart", || {
        try_q::<Option<String>>(&mut r, &["GET", "after-restart"]).ok() == Some(Some("yes".into()))
    });
    assert_eq!(q::<i64>(&mut r, &["DBSIZE"]), 502);

    // A replica with a TLS listener of its own announces that port, as
    // Redis does under tls-replication: Sentinel reaches it there over
    // TLS (the one above has none and announces its plain port).
    let own_tls = free_port();
    let mut args = pki.flags(own_tls, "yes");
    args.extend([
        "--tls-client-cert-file".to_string(),
        client_cert.to_str().unwrap().to_string(),
        "--tls-client-key-file".to_string(),
        client_key.to_str().unwrap().to_string(),
        "--tls-replication".to_string(),
        "yes".to_string(),
        "--replicaof".to_string(),
        replicaof.clone(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _second = Server::start(&args);
    eventually("the second replica listed at its TLS port", || {
        let info: String = q(&mut p, &["INFO", "replication"]);
        info.contains(&format!(",port={own_tls},"))
            && info.contains(&format!(",port={},", replica.port))
    });
}

#[test]
fn a_replica_refuses_a_primary_its_ca_did_not_sign() {
    let pki = Pki::new();
    let other = Pki::new();
    let (_primary, tls_port) = start(&pki, "no");
    // Its CA is another one: the primary's certificate does not check out.
    let replicaof = format!("127.0.0.1 {tls_port}");
    let flags = other.flags(tls_port, "yes");
    let mut args: Vec<&str> = flags[2..8].iter().map(String::as_str).collect();
    args.extend(["--tls-replication", "yes", "--replicaof", &replicaof]);
    let replica = Server::start(&args);
    let mut r = replica.conn();
    std::thread::sleep(Duration::from_millis(1500));
    let info: String = q(&mut r, &["INFO", "replication"]);
    assert!(info.contains("master_link_status:down"), "{info}");
    assert_eq!(q::<i64>(&mut r, &["DBSIZE"]), 0);
}

#[test]
fn clients_without_a_trusted_certificate_and_plaintext_are_turned_away() {
    let pki = Pki::new();
    let (srv, tls_port) = start(&pki, "yes");
    // No certificate: the server ends the handshake, nothing is served.
    let mut t = TlsConn::open(&pki, tls_port, None);
    assert!(
        t.call(&["PING"]).is_err(),
        "served without a client certificate"
    );
    // A certificate from another CA: the same.
    let mut t = TlsConn::open(&pki, tls_port, Some((&pki.stranger, &pki.stranger_key)));
    assert!(
        t.call(&["PING"]).is_err(),
        "served a client the CA did not sign"
    );
    // Plaintext on the TLS port: closed, never answered.
    let mut raw = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let _ = raw.read_to_end(&mut got);
    assert!(
        !got.starts_with(b"+PONG"),
        "plaintext was answered: {got:?}"
    );
    // A client that stalls in the handshake holds up nobody.
    let _stalled = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
    let mut t = TlsConn::open(&pki, tls_port, Some((&pki.client, &pki.client_key)));
    assert_eq!(t.call(&["PING"]).unwrap(), Frame::Simple("PONG".into()));
    let mut c = srv.conn();
    let _: String = q(&mut c, &["PING"]);
}

/// `tls-ca-cert-dir` as Redis takes it (OpenSSL's CApath, such as
/// /etc/ssl/certs): the CAs of the PEM files in it are trusted, files that
/// are not certificates and hash-named links are passed over, and a
/// directory with no certificate stops the start-up.
#[test]
fn a_ca_directory_is_trusted_as_a_ca_file_is() {
    let pki = Pki::new();
    let cas = tempfile::tempdir().unwrap();
    let (other_ca, _) = make_ca("an unrelated CA");
    std::fs::write(cas.path().join("other.pem"), other_ca.pem()).unwrap();
    std::fs::copy(pki.path("ca.crt"), cas.path().join("ours.pem")).unwrap();
    std::os::unix::fs::symlink(cas.path().join("ours.pem"), cas.path().join("9d66eef0.0")).unwrap();
    std::fs::write(cas.path().join("README"), "not a certificate\n").unwrap();
    std::fs::copy(pki.path("server.key"), cas.path().join("a.key")).unwrap();
    std::fs::create_dir(cas.path().join("sub")).unwrap();
    let tls_port = free_port();
    let mut flags = pki.flags(tls_port, "yes");
    // The same flags with the file swapped for the directory.
    let at = flags
        .iter()
        .position(|f| f == "--tls-ca-cert-file")
        .unwrap();
    flags[at] = "--tls-ca-cert-dir".into();
    flags[at + 1] = cas.path().to_str().unwrap().into();
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let srv = Server::start(&args);
    let mut t = TlsConn::open(&pki, tls_port, Some((&pki.client, &pki.client_key)));
    assert_eq!(t.call(&["PING"]).unwrap(), Frame::Simple("PONG".into()));
    let mut t = TlsConn::open(&pki, tls_port, Some((&pki.stranger, &pki.stranger_key)));
    assert!(t.call(&["PING"]).is_err(), "served a client no CA signed");
    let mut c = srv.conn();
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "tls-ca-cert-dir"]);
    assert_eq!(v[1], cas.path().to_str().unwrap());
    // A directory without a certificate cannot take its place.
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("README"), "nothing here\n").unwrap();
    let e = err(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "tls-ca-cert-dir",
            empty.path().to_str().unwrap(),
        ],
    );
    assert!(e.contains("holds no certificate"), "{e}");
    let mut t = TlsConn::open(&pki, tls_port, Some((&pki.client, &pki.client_key)));
    assert_eq!(t.call(&["PING"]).unwrap(), Frame::Simple("PONG".into()));
    flags[at + 1] = empty.path().to_str().unwrap().into();
    let dir = tempfile::tempdir().unwrap();
    match try_spawn(dir.path(), &flags) {
        Ok((mut child, _)) => {
            let _ = child.kill();
            panic!("started with a CA directory holding no certificate");
        }
        Err(e) => assert!(e.contains("holds no certificate"), "{e}"),
    }
}

/// A PING over TLS from a client offering only `suites` (all of rustls's
/// when empty); the suite the server chose, or the failed handshake.
fn negotiate(
    pki: &Pki,
    port: u16,
    suites: &[rustls::CipherSuite],
) -> std::io::Result<rustls::CipherSuite> {
    let mut provider = rustls::crypto::ring::default_provider();
    if !suites.is_empty() {
        provider
            .cipher_suites
            .retain(|s| suites.contains(&s.suite()));
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.der().clone()).unwrap();
    let key = pki_types::PrivatePkcs8KeyDer::from(pki.client_key.serialize_der());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![pki.client.der().clone()], key.into())
        .unwrap();
    let name = pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut t = TlsConn {
        s: rustls::StreamOwned::new(conn, sock),
        buf: bytes::BytesMut::new(),
    };
    assert_eq!(t.call(&["PING"])?, Frame::Simple("PONG".into()));
    Ok(t.s.conn.negotiated_cipher_suite().unwrap().suite())
}

/// `tls-ciphersuites`, `tls-ciphers` and `tls-prefer-server-ciphers` narrow
/// and order what the server offers; a list naming nothing it offers stops
/// the start-up, and CONFIG SET of one is refused with the old one kept.
#[test]
fn cipher_lists_narrow_what_is_offered() {
    use rustls::CipherSuite as S;
    let pki = Pki::new();
    let tls_port = free_port();
    let mut flags = pki.flags(tls_port, "yes");
    flags.extend(
        [
            "--tls-ciphersuites",
            "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_CCM_SHA256",
            "--tls-ciphers",
            "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = flags.iter().map(String::as_str).collect();
    let srv = Server::start(&args);
    assert_eq!(
        negotiate(&pki, tls_port, &[]).unwrap(),
        S::TLS13_CHACHA20_POLY1305_SHA256
    );
    assert!(
        negotiate(&pki, tls_port, &[S::TLS13_AES_256_GCM_SHA384]).is_err(),
        "a TLS 1.3 suite the list leaves out was accepted"
    );
    let mut c = srv.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "tls-protocols", "TLSv1.2"]);
    assert!(
        negotiate(
            &pki,
            tls_port,
            &[S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]
        )
        .is_err(),
        "a TLS 1.2 suite the list leaves out was accepted"
    );
    // The client's order (AES first) wins unless the server's is preferred.
    let both = [
        S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    assert_eq!(negotiate(&pki, tls_port, &both).unwrap(), both[0]);
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "tls-ciphers",
            "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384",
            "tls-prefer-server-ciphers",
            "yes",
        ],
    );
    assert_eq!(negotiate(&pki, tls_port, &both).unwrap(), both[1]);
    let e = err(&mut c, &["CONFIG", "SET", "tls-ciphers", "AES256-SHA256"]);
    assert!(e.contains("names no suite durakv offers"), "{e}");
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "tls-ciphers"]);
    assert_eq!(
        v[1],
        "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384"
    );
    assert_eq!(negotiate(&pki, tls_port, &both).unwrap(), both[1]);
    flags.extend(["--tls-ciphersuites", "TLS_AES_128_CCM_8_SHA256"].map(String::from));
    let dir = tempfile::tempdir().unwrap();
    match try_spawn(dir.path(), &flags) {
        Ok((mut child, _)) => {
            let _ = child.kill();
            panic!("started with a TLS 1.3 list naming no suite it offers");
        }
        Err(e) => assert!(e.contains("tls-ciphersuites"), "{e}"),
    }
}

#[test]
fn tls_auth_clients_optional_and_no() {
    let pki = Pki::new();
    let (_srv, tls_port) = start(&pki, "optional");
    let mut t = TlsConn::open(&pki, tls_port, None);
    assert_eq!(t.call(&["PING"]).unwrap(), Frame::Simple("PONG".into()));
    let mut t = TlsConn::open(&pki, tls_port, Some((&pki.client, &pki.client_key)));
    assert_eq!(t.call(&["PING"]).unwrap(), Frame::Simple("PONG".into()));
    // Optional still checks a certificate that is sent.
    let mut t = TlsConn::open(&pki, tls_port, Some((&pki.stranger, &pki.stranger_key)));
    assert!(t.call(&["PING"]).is_err());

    let (_srv, tls_port) = start(&pki, "no");
    let mut t = TlsConn::open(&pki, tls_port, None);
    assert_eq!(t.call(&["PING"]).unwrap(), Frame::Simple("PONG".into()));
}

#[test]
fn redis_cli_talks_tls() {
    let has_tls = Command::new("redis-cli")
        .arg("--help")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).contains("--tls")
                || String::from_utf8_lossy(&o.stderr).contains("--tls")
        })
        .unwrap_or(false);
    if !has_tls {
        eprintln!("redis-cli with TLS not installed: skipped");
        return;
    }
    let pki = Pki::new();
    let (_srv, tls_port) = start(&pki, "yes");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &tls_port.to_string(), "--tls"])
        .args(["--cacert", &s(&pki.path("ca.crt"))])
        .args(["--cert", &s(&pki.path("client.crt"))])
        .args(["--key", &s(&pki.path("client.key"))])
        .args(["INCRBY", "counter", "41"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "41", "{out:?}");
}

#[test]
fn tls_settings_that_cannot_load_stop_the_start_up() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let tls_port = free_port().to_string();
    let s = |p: PathBuf| p.to_str().unwrap().to_string();
    // tls-port, then the certificate and key files given (if any), then
    // the rest.
    let args = |cert: Option<&str>, key: Option<&str>, rest: &[&str]| {
        let mut a = vec!["--tls-port".to_string(), tls_port.clone()];
        if let Some(c) = cert {
            a.extend(["--tls-cert-file".to_string(), s(pki.path(c))]);
        }
        if let Some(k) = key {
            a.extend(["--tls-key-file".to_string(), s(pki.path(k))]);
        }
        a.extend(rest.iter().map(|r| r.to_string()));
        a
    };
    let cases = [
        (
            args(None, None, &[]),
            "tls-port needs tls-cert-file and tls-key-file",
        ),
        (
            args(Some("server.crt"), Some("missing.key"), &[]),
            "cannot read tls-key-file",
        ),
        (
            args(Some("server.crt"), Some("server.key"), &[]),
            "needs tls-ca-cert-file",
        ),
        (
            args(
                Some("server.crt"),
                Some("client.key"),
                &["--tls-auth-clients", "no"],
            ),
            "tls-cert-file / tls-key-file",
        ),
    ];
    for (args, why) in cases {
        match try_spawn(dir.path(), &args) {
            Ok((mut child, _)) => {
                let _ = child.kill();
                panic!("started with {args:?}");
            }
            Err(e) => assert!(e.contains(why), "{args:?}: {e}"),
        }
    }
}

/// A renewed certificate goes into service with CONFIG SET, even to the
/// same path, for connections accepted from then on; open ones keep
/// theirs. A setting that does not load is refused and changes nothing.
#[test]
fn config_set_puts_a_renewed_certificate_in_service() {
    let pki = Pki::new();
    let (srv, tls_port) = start(&pki, "no");
    let mut before = TlsConn::open(&pki, tls_port, None);
    assert_eq!(
        before.call(&["PING"]).unwrap(),
        Frame::Simple("PONG".into())
    );

    // The renewal comes from another CA, so a client can tell which
    // certificate it was shown; it is written over the same files.
    let (new_ca, new_ca_key) = make_ca("renewal CA");
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["localhost".into()]).unwrap();
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let renewed = p.signed_by(&key, &new_ca, &new_ca_key).unwrap();
    std::fs::write(pki.path("server.crt"), renewed.pem()).unwrap();
    std::fs::write(pki.path("server.key"), key.serialize_pem()).unwrap();
    // Not yet in service: nothing was reloaded.
    let mut old = TlsConn::trusting(&pki.ca, tls_port, None);
    assert_eq!(old.call(&["PING"]).unwrap(), Frame::Simple("PONG".into()));

    let mut c = srv.conn();
    let cert = pki.path("server.crt");
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "tls-cert-file", cert.to_str().unwrap()],
    );
    let mut renewed_conn = TlsConn::trusting(&new_ca, tls_port, None);
    assert_eq!(
        renewed_conn.call(&["PING"]).unwrap(),
        Frame::Simple("PONG".into())
    );
    assert!(
        TlsConn::trusting(&pki.ca, tls_port, None)
            .call(&["PING"])
            .is_err(),
        "a new connection is still shown the old certificate"
    );
    // Connections opened before the reload go on.
    assert_eq!(
        before.call(&["PING"]).unwrap(),
        Frame::Simple("PONG".into())
    );

    // A key that does not exist is refused; the renewed settings stay.
    let e = err(
        &mut c,
        &["CONFIG", "SET", "tls-key-file", "/nonexistent/server.key"],
    );
    assert!(
        e.starts_with("ERR CONFIG SET failed - Unable to update TLS configuration: "),
        "{e}"
    );
    let key_file: Vec<String> = q(&mut c, &["CONFIG", "GET", "tls-key-file"]);
    assert_eq!(key_file[1], pki.path("server.key").to_str().unwrap());
    let mut after = TlsConn::trusting(&new_ca, tls_port, None);
    assert_eq!(after.call(&["PING"]).unwrap(), Frame::Simple("PONG".into()));
    // Client certificates can be required from now on, too.
    let ca = pki.path("ca.crt");
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "tls-ca-cert-file",
            ca.to_str().unwrap(),
            "tls-auth-clients",
            "yes",
        ],
    );
    assert!(TlsConn::trusting(&new_ca, tls_port, None)
        .call(&["PING"])
        .is_err());
    let mut with_cert = TlsConn::trusting(&new_ca, tls_port, Some((&pki.client, &pki.client_key)));
    assert_eq!(
        with_cert.call(&["PING"]).unwrap(),
        Frame::Simple("PONG".into())
    );
}
