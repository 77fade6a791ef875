//! The plain-HTTP/1.1 port of `server.metrics`: `/livez` (200 while the process serves),
//! `/readyz` (200 once every scope of every resource has synced, the signal gRPC health
//! follows; 503 before, naming what has not synced) and `/metrics` (the registry, in the
//! OpenMetrics text format).
//!
//! Decision: `/readyz` always answers in the apiserver's verbose style (`[+]pods ok`,
//! `[-]deployments not synced: team-a: Forbidden (...)`, then `readyz check passed|failed`):
//! the kubelet reads only the status, and a person who curls it learns what is missing.
//!
//! Decision: `/metrics` is always OpenMetrics text (`application/openmetrics-text;
//! version=1.0.0`), the only text format the Prometheus client writes; Prometheus asks for it
//! first, and its parser reads it whatever it asked for.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// The content type of `/metrics`.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the metrics port cannot be bound: what failed, and what to do about it. The caller,
/// which knows where the address was configured, puts the field and line in front.
#[derive(Debug, thiserror::Error)]
#[error("{}", bind_failure(.addr, .source))]
pub struct BindError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why binding failed.
    pub source: std::io::Error,
}

/// Whether the sidecar is ready, for `/readyz`: the component that knows (the fleet)
/// answers, so that this module imports none.
pub trait Readiness: Send + Sync {
    /// Whether it is ready, and the verbose body: a `[+]name ok` or `[-]name ...` line per
    /// part, then `readyz check passed|failed`.
    fn readyz(&self) -> (bool, String);
}

/// Binds the metrics port at `addr`. Called before anything else starts, so that a port that is
/// taken stops start-up at once.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| BindError { addr, source })
}

/// What a failed bind means, and what to do about it.
fn bind_failure(addr: &SocketAddr, e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let hint = match e.kind() {
        ErrorKind::AddrInUse => {
            "another process listens on this port: stop it, or choose another port"
        }
        ErrorKind::AddrNotAvailable => {
            "the address is not one of this host's: use 0.0.0.0 (every interface) or one of \
             the host's addresses"
        }
        ErrorKind::PermissionDenied => {
            "binding this port needs a privilege the process lacks: choose a port above 1023"
        }
        _ => "choose another address",
    };
    format!("cannot listen on {addr} for /livez, /readyz and /metrics: {e}; {hint}")
}

/// What the endpoints read.
struct Endpoints {
    registry: Registry,
    readiness: Arc<dyn Readiness>,
}

/// Serves the endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, registry: Registry, readiness: Arc<dyn Readiness>) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving /livez, /readyz and /metrics");
    }
    let endpoints = Arc::new(Endpoints {
        registry,
        readiness,
    });
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most likely: wait rather than spin.
                tracing::warn!(error = %e, "metrics port: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = endpoints.answer(&request);
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

impl Endpoints {
    fn answer(&self, request: &Request<Incoming>) -> Response<Full<Bytes>> {
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            return text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
        }
        match request.uri().path() {
            "/livez" => text(StatusCode::OK, "ok\n".into()),
            "/readyz" => {
                let (ready, body) = self.readiness.readyz();
                let status = if ready {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                text(status, body)
            }
            "/metrics" => respond(StatusCode::OK, OPENMETRICS, super::render(&self.registry)),
            _ => text(
                StatusCode::NOT_FOUND,
                "not found: this port serves /livez, /readyz and /metrics\n".into(),
            ),
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    respond(status, "text/plain; charset=utf-8", body)
}

fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}
