//! The webhook's HTTPS server: `POST /inject` answers AdmissionReviews, `GET /healthz` says
//! the server is up (the Deployment's probes). TLS is the gRPC listener's code
//! (`crate::api::server::tls`): the certificate and key are read again when their files
//! change, as cert-manager rotates them in a mounted Secret, and a changed file that does not
//! load keeps the previous pair.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tonic::transport::server::TcpIncoming;

use super::{review, Sidecar};
use crate::api::server::tls::{self, Served};
use crate::config::TlsConfig;

/// The path the webhook configuration's `clientConfig` names.
pub const PATH: &str = "/inject";

/// The largest AdmissionReview read.
///
/// Decision: 3 MiB. A review holds the pod (at most the apiserver's request limit of a few
/// MiB, in practice a few KiB); a larger body is refused rather than buffered.
const MAX_BODY: usize = 3 << 20;

/// The apiserver's Go client negotiates HTTP/2 when offered, HTTP/1.1 otherwise.
const SERVED: Served = Served {
    alpn: &[b"h2", b"http/1.1"],
    name: "inject-webhook --cert-file/--key-file",
};

/// Why the webhook did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address cannot be bound.
    #[error("--listen {addr}: {source}; choose a free port on one of this host's addresses")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate or key does not load.
    #[error("{}", flags(.0))]
    Tls(tls::TlsError),
}

/// A TLS error named by the webhook's flags rather than `server.tls`'s fields.
fn flags(e: &tls::TlsError) -> String {
    let flag = |field: &str| match field {
        "certFile" => "--cert-file",
        "keyFile" => "--key-file",
        _ => "--cert-file/--key-file",
    };
    match e {
        tls::TlsError::File {
            field,
            path,
            message,
        } => format!("{} {}: {message}", flag(field), path.display()),
        tls::TlsError::Mismatch { cert, key } => format!(
            "--key-file {} is not the private key of the certificate in --cert-file {}: give \
             the key and the certificate of one pair",
            key.display(),
            cert.display()
        ),
        tls::TlsError::Library(_) => e.to_string(),
    }
}

/// Serves the webhook on `addr` with the certificate and key in `cert_file` and `key_file`
/// until the future is dropped; start-up errors are returned before anything is served.
pub async fn serve(
    addr: SocketAddr,
    cert_file: PathBuf,
    key_file: PathBuf,
    sidecar: Sidecar,
) -> Result<impl std::future::Future<Output = ()>, ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Listen { addr, source })?;
    let tls = TlsConfig {
        cert_file,
        key_file,
        client_ca_file: None,
    };
    let mut incoming =
        tls::incoming_for(SERVED, &tls, TcpIncoming::from(listener)).map_err(ServeError::Tls)?;
    tracing::info!(%addr, path = PATH, "serving the injection webhook");
    let sidecar = Arc::new(sidecar);
    Ok(async move {
        while let Some(stream) = incoming.next().await {
            let stream = match stream {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of file descriptors, most likely: wait rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let sidecar = sidecar.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let sidecar = sidecar.clone();
                    async move { Ok::<_, Infallible>(answer(request, &sidecar).await) }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// One HTTP request.
async fn answer(request: Request<Incoming>, sidecar: &Sidecar) -> Response<Full<Bytes>> {
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/healthz") => reply(StatusCode::OK, "text/plain", "ok\n".into()),
        (&Method::POST, PATH) => {
            match Limited::new(request.into_body(), MAX_BODY).collect().await {
                Ok(body) => {
                    let answer = review(&body.to_bytes(), sidecar);
                    reply(StatusCode::OK, "application/json", answer.into())
                }
                Err(e) => reply(
                    StatusCode::BAD_REQUEST,
                    "text/plain",
                    format!("reading the AdmissionReview (at most {MAX_BODY} bytes): {e}\n").into(),
                ),
            }
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            format!("POST {PATH} (an AdmissionReview) or GET /healthz\n").into(),
        ),
    }
}

fn reply(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}
