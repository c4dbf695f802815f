//! The Prometheus endpoint: `GET /metrics` on `metrics-bind`:`metrics-port`
//! (off unless the port is set; CONFIG SET moves it), answered with INFO
//! EVERYTHING as metrics ([`crate::metrics_export`]), read at each scrape.
//!
//! It has no authentication, as Prometheus endpoints usually have none:
//! it binds to loopback by default, and it tells nothing INFO does not.

use crate::state::Shared;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Scrapes served at once; a connection past them is closed at once, so
/// a flood of them cannot pile up INFO work on the event loops.
const MAX_CONNECTIONS: usize = 16;
/// A client must send its request headers within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Where the endpoint listens: set at start-up and by CONFIG SET of
/// `metrics-port` or `metrics-bind`, served by [`run`].
#[derive(Default)]
pub struct Endpoint {
    /// The address bound now (None: off).
    bound: parking_lot::Mutex<Option<SocketAddr>>,
    /// A socket [`run`] is to serve from now on (Some(None): none), set
    /// under `bound`'s lock.
    next: parking_lot::Mutex<Option<Option<std::net::TcpListener>>>,
    changed: Notify,
}

impl Endpoint {
    /// Listens where the configuration says from now on, if that is not
    /// where it listens already. The old socket stays until the new one is
    /// bound, so a failure changes nothing.
    pub fn apply(&self, config: &crate::config::Config) -> std::io::Result<()> {
        let mut bound = self.bound.lock();
        let (bind, port) = (config.metrics_bind.as_str(), config.metrics_port);
        let wanted = match (port, bind.parse::<std::net::IpAddr>()) {
            (0, _) => None,
            (_, Ok(ip)) => Some(SocketAddr::new(ip, port)),
            (_, Err(e)) => return Err(std::io::Error::other(format!("{bind}: {e}"))),
        };
        if *bound == wanted {
            return Ok(());
        }
        let socket = match wanted {
            None => {
                tracing::info!("The Prometheus metrics endpoint is off");
                None
            }
            Some(at) => {
                let l = std::net::TcpListener::bind(at).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("metrics endpoint {at}: {e}"))
                })?;
                l.set_nonblocking(true)?;
                tracing::info!("Serving Prometheus metrics on http://{at}/metrics");
                Some(l)
            }
        };
        *self.next.lock() = Some(socket);
        *bound = wanted;
        // Stored if `run` is not waiting, so it cannot be missed.
        self.changed.notify_one();
        Ok(())
    }
}

/// Serves the endpoint wherever [`Endpoint::apply`] last put it, until
/// aborted at shutdown.
pub async fn run(shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut listener: Option<TcpListener> = None;
    loop {
        if let Some(next) = shared.metrics.next.lock().take() {
            // Dropping the old socket stops new connections to it; those
            // it accepted finish their requests.
            listener = next.and_then(|l| match TcpListener::from_std(l) {
                Ok(l) => Some(l),
                Err(e) => {
                    tracing::error!("metrics endpoint: cannot serve its socket: {e}");
                    None
                }
            });
        }
        let accepted = tokio::select! {
            _ = shared.metrics.changed.notified() => continue,
            r = accept(listener.as_ref()) => r,
        };
        let (stream, peer) = match accepted {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, say: the next accept may succeed.
                tracing::debug!("metrics endpoint: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("metrics endpoint: {peer} refused, {MAX_CONNECTIONS} connections open");
            continue;
        };
        tokio::spawn(serve_connection(shared.clone(), stream, peer, slot));
    }
}

async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    slot: OwnedSemaphorePermit,
) {
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(respond(&shared, &req)) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!("metrics endpoint: {peer}: {e}");
    }
    drop(slot);
}

fn respond<B>(shared: &Shared, req: &Request<B>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, ctype: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(ctype),
        );
        r
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET and HEAD\n".into(),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            CONTENT_TYPE,
            crate::metrics_export::render_all(shared),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "durakv serves its metrics at /metrics\n".into(),
        ),
    }
}
