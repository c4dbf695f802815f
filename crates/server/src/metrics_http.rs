//! The Prometheus endpoint: `GET /metrics` on `metrics-bind`:`metrics-port`
//! (off unless the port is set), answered with INFO EVERYTHING as metrics
//! ([`crate::metrics_export`]), read at each scrape.
//!
//! It has no authentication, as Prometheus endpoints usually have none:
//! it binds to loopback by default, and it tells nothing INFO does not.

use crate::state::Shared;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Scrapes served at once; a connection past them is closed at once, so
/// a flood of them cannot pile up INFO work on the event loops.
const MAX_CONNECTIONS: usize = 16;
/// A client must send its request headers within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Binds the endpoint if `metrics-port` is set; the task serving it.
pub async fn start(shared: &Arc<Shared>) -> std::io::Result<Option<tokio::task::JoinHandle<()>>> {
    let (bind, port) = {
        let c = shared.config.read();
        (c.metrics_bind.clone(), c.metrics_port)
    };
    if port == 0 {
        return Ok(None);
    }
    let listener = TcpListener::bind((bind.as_str(), port))
        .await
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("metrics endpoint {bind}:{port}: {e}"))
        })?;
    let bound = listener.local_addr()?;
    tracing::info!("Serving Prometheus metrics on http://{bound}/metrics");
    Ok(Some(tokio::spawn(accept_loop(shared.clone(), listener))))
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
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
        let shared = shared.clone();
        tokio::spawn(async move {
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
        });
    }
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
