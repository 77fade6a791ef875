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

use crate::config::Config;
use crate::config::ConfigError;
use crate::fleet::Fleet;

/// The content type of `/metrics`.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the metrics port does not serve.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// `server.metrics` cannot be bound: `FILE:LINE:COLUMN: server.metrics: ...`.
    #[error(transparent)]
    Bind(#[from] ConfigError),
}

/// Binds `server.metrics` of `config`, if it is set. Called before anything else starts, so
/// that a port that is taken stops start-up at once, pointing at the field.
pub async fn bind(config: &Config) -> Result<Option<TcpListener>, MetricsError> {
    let Some(addr) = config.server.metrics else {
        return Ok(None);
    };
    match TcpListener::bind(addr).await {
        Ok(listener) => Ok(Some(listener)),
        Err(e) => Err(config
            .error_at_path("server.metrics", &bind_failure(addr, &e))
            .into()),
    }
}

/// What a failed bind means, and what to do about it.
fn bind_failure(addr: SocketAddr, e: &std::io::Error) -> String {
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
    fleet: Arc<Fleet>,
}

/// Serves the endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, registry: Registry, fleet: Arc<Fleet>) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving /livez, /readyz and /metrics");
    }
    let endpoints = Arc::new(Endpoints { registry, fleet });
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
                let (ready, body) = readiness(&self.fleet);
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

/// Whether every resource is synced, and the verbose body: a line per resource.
fn readiness(fleet: &Fleet) -> (bool, String) {
    let mut body = String::new();
    let mut ready = true;
    for cache in fleet.caches().iter().filter(|c| c.gates_readiness()) {
        if cache.is_synced() {
            body.push_str(&format!("[+]{} ok\n", cache.name));
        } else {
            ready = false;
            let pending = cache.not_synced().join("; ");
            body.push_str(&format!("[-]{} not synced: {pending}\n", cache.name));
        }
    }
    body.push_str(if ready {
        "readyz check passed\n"
    } else {
        "readyz check failed\n"
    });
    (ready, body)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_port_stops_start_up_pointing_at_the_field() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = taken.local_addr().expect("bound");
        let text = format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n  metrics: {addr}\nresources:\n- apiVersion: v1\n  kind: Pod\n"
        );
        let config = crate::config::parse("informerd.yaml", &text).expect("valid");
        let err = bind(&config)
            .await
            .expect_err("the port is taken")
            .to_string();
        assert!(
            err.starts_with(&format!(
                "informerd.yaml:4:12: server.metrics: cannot listen on {addr}"
            )),
            "{err}"
        );
        assert!(
            err.contains("another process listens on this port: stop it, or choose another port"),
            "{err}"
        );
        drop(taken);
        let listener = bind(&config)
            .await
            .expect("free again")
            .expect("configured");
        assert_eq!(listener.local_addr().expect("bound"), addr);
    }
}
