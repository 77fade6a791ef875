//! Connecting to a running sidecar: used by controllers, the CLI client, tests and benchmarks.
//!
//! A target is one of:
//! - `unix:///run/informerd/informerd.sock`, `unix:relative.sock`, or a plain socket path
//!   (anything without a `scheme://`): the sidecar's Unix socket;
//! - `http://127.0.0.1:7070`: the sidecar's optional TCP listener (plaintext, loopback);
//! - `https://host:port`: the TCP listener with `server.tls`, or a TLS-terminating proxy;
//!   the server's certificate is verified against the platform's roots and
//!   [`ConnectOptions::ca_file`]; a client certificate is optional (mutual TLS).
//!
//! ```no_run
//! # async fn demo() -> Result<(), informerd_client::ClientError> {
//! use informerd_client::proto::StatusRequest;
//! let mut cache = informerd_client::connect("/run/informerd/informerd.sock").await?;
//! let status = cache.status(StatusRequest::default()).await;
//! # Ok(()) }
//! ```

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use hyper_util::rt::TokioIo;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity, Uri};

use crate::proto::cache_client::CacheClient;

/// The `informerd-reason` of an error status as the server sent it (`NotFound`, `Expired`, ...;
/// also a reason newer than this build), when it sent one; [`Reason::of`] reads it as a
/// [`Reason`].
pub use crate::proto::reason_trailer as reason;
/// The trailer that carries the machine-readable reason of an error status, and the reasons
/// (the enum of the proto).
pub use crate::proto::{code_name, Reason, REASON_TRAILER};

/// The largest message a client accepts: a `Get` of a large object, or a `List` chunk.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The target is not a socket path, `unix://`, `http://` or `https://` URL.
    #[error("invalid informerd address {target:?}: {reason}")]
    InvalidTarget {
        /// The target as given.
        target: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing is listening at the Unix socket.
    #[error(
        "cannot reach the sidecar at socket {}: {reason}; is `informerd serve` running with \
         this socket?",
        path.display()
    )]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// The connection error.
        reason: String,
    },
    /// Nothing is listening at the address.
    #[error(
        "cannot reach the sidecar at {address}: {reason}; is `informerd serve` running with \
         server.listen (or the proxy in front of it)?"
    )]
    Address {
        /// The address as given.
        address: String,
        /// The connection error.
        reason: String,
    },
    /// The TLS handshake failed: an untrusted certificate, a name mismatch, a refused client.
    #[error("the TLS handshake with {address} failed: {reason}")]
    Handshake {
        /// The address as given.
        address: String,
        /// The TLS error.
        reason: String,
    },
    /// A TLS option was given for a target that does not use TLS.
    #[error("{option} needs an https:// address, not {target:?}")]
    TlsWithoutHttps {
        /// The TLS option given.
        option: &'static str,
        /// The target, which is not `https://`.
        target: String,
    },
    /// A client certificate without its key, or the reverse.
    #[error("a client certificate needs both a certificate file and a key file")]
    HalfIdentity,
    /// A certificate or key file could not be read.
    #[error("cannot read the {what} {}: {source}", path.display())]
    ReadFile {
        /// Which file: "CA file", "client certificate", "client key".
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// A bearer token that cannot be sent: empty, or not valid in a header.
    #[error("the bearer token of {origin} cannot be used: {reason}")]
    InvalidToken {
        /// The token file, or "the token" for a fixed one.
        origin: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The TLS configuration was refused (e.g. a file that is not PEM).
    #[error("TLS configuration for {address}: {reason}")]
    Tls {
        /// The address as given.
        address: String,
        /// What the TLS library refused.
        reason: String,
    },
}

/// How to connect, beyond the target itself. Only `https://` targets use the TLS options.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// PEM file of the CA(s) that sign the server's certificate, trusted in addition to the
    /// platform's roots.
    pub ca_file: Option<PathBuf>,
    /// PEM file of a client certificate (mutual TLS); needs `client_key`.
    pub client_cert: Option<PathBuf>,
    /// PEM file of the client certificate's private key.
    pub client_key: Option<PathBuf>,
    /// The name to verify the server's certificate against, when it differs from the host.
    pub server_name: Option<String>,
    /// How long to wait for the connection (default 10 s).
    pub connect_timeout: Option<Duration>,
}

impl ConnectOptions {
    fn uses_tls(&self) -> Option<&'static str> {
        if self.ca_file.is_some() {
            Some("a CA file")
        } else if self.client_cert.is_some() || self.client_key.is_some() {
            Some("a client certificate")
        } else if self.server_name.is_some() {
            Some("a TLS server name")
        } else {
            None
        }
    }
}

/// Where a target points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Unix domain socket.
    Unix(PathBuf),
    /// `http://` or `https://`.
    Url {
        /// The URL.
        uri: Uri,
        /// Whether it is `https://`.
        tls: bool,
    },
}

impl Target {
    /// Parses `unix://PATH`, `unix:PATH`, `http://…`, `https://…` or a plain socket path.
    pub fn parse(target: &str) -> Result<Target, ClientError> {
        let invalid = |reason: &str| ClientError::InvalidTarget {
            target: target.to_string(),
            reason: reason.to_string(),
        };
        if target.is_empty() {
            return Err(invalid("it is empty"));
        }
        if let Some(rest) = target.strip_prefix("unix:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(invalid("the socket path is empty"));
            }
            return Ok(Target::Unix(PathBuf::from(path)));
        }
        let Some((scheme, _)) = target.split_once("://") else {
            return Ok(Target::Unix(PathBuf::from(target)));
        };
        let tls = match scheme {
            "http" => false,
            "https" => true,
            _ => {
                return Err(invalid(
                    "use unix://PATH, http://HOST:PORT or https://HOST:PORT",
                ))
            }
        };
        let uri: Uri = target.parse().map_err(|e| invalid(&format!("{e}")))?;
        if uri.host().is_none() {
            return Err(invalid("the URL has no host"));
        }
        Ok(Target::Url { uri, tls })
    }
}

/// Connects to the sidecar at `target` (see the module documentation) with default options.
pub async fn connect(target: &str) -> Result<CacheClient<Channel>, ClientError> {
    connect_with(target, &ConnectOptions::default()).await
}

/// Connects to the sidecar at `target` with `options`.
pub async fn connect_with(
    target: &str,
    options: &ConnectOptions,
) -> Result<CacheClient<Channel>, ClientError> {
    let channel = channel(target, options).await?;
    Ok(limits(CacheClient::new(channel)))
}

/// `client` with the message size limits of every connection.
pub(crate) fn limits<T>(client: CacheClient<T>) -> CacheClient<T>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    client
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// The connected channel, for clients of other services on the same socket (health,
/// reflection).
pub async fn channel(target: &str, options: &ConnectOptions) -> Result<Channel, ClientError> {
    let timeout = options.connect_timeout.unwrap_or(Duration::from_secs(10));
    match Target::parse(target)? {
        Target::Unix(path) => {
            if let Some(option) = options.uses_tls() {
                return Err(ClientError::TlsWithoutHttps {
                    option,
                    target: target.to_string(),
                });
            }
            connect_unix(&path, timeout).await
        }
        Target::Url { uri, tls } => {
            let address = uri.to_string();
            let address = address.trim_end_matches('/').to_string();
            if !tls {
                if let Some(option) = options.uses_tls() {
                    return Err(ClientError::TlsWithoutHttps {
                        option,
                        target: target.to_string(),
                    });
                }
            }
            let mut endpoint = Endpoint::from(uri).connect_timeout(timeout);
            if tls {
                let config = tls_config(options)?;
                endpoint = endpoint.tls_config(config).map_err(|e| ClientError::Tls {
                    address: address.clone(),
                    reason: error_chain(&e),
                })?;
            }
            endpoint.connect().await.map_err(|e| {
                let reason = error_chain(&e);
                let lower = reason.to_ascii_lowercase();
                if tls
                    && ["certificate", "tls", "handshake", "alert"]
                        .iter()
                        .any(|w| lower.contains(w))
                {
                    ClientError::Handshake { address, reason }
                } else {
                    ClientError::Address { address, reason }
                }
            })
        }
    }
}

async fn connect_unix(path: &Path, timeout: Duration) -> Result<Channel, ClientError> {
    let socket_error = |reason: String| ClientError::Socket {
        path: path.to_path_buf(),
        reason,
    };
    // Fail with the operating system's words (no such file, permission denied) rather than
    // the transport's.
    if let Err(e) = std::fs::metadata(path) {
        return Err(socket_error(e.to_string()));
    }
    let socket = path.to_path_buf();
    // The URI is required by the transport but unused: every connection goes to the socket.
    Endpoint::from_static("http://informerd")
        .connect_timeout(timeout)
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        }))
        .await
        .map_err(|e| socket_error(error_chain(&e)))
}

fn tls_config(options: &ConnectOptions) -> Result<ClientTlsConfig, ClientError> {
    let mut config = ClientTlsConfig::new().with_enabled_roots();
    if let Some(ca) = &options.ca_file {
        config = config.ca_certificate(Certificate::from_pem(read(ca, "CA file")?));
    }
    match (&options.client_cert, &options.client_key) {
        (Some(cert), Some(key)) => {
            config = config.identity(Identity::from_pem(
                read(cert, "client certificate")?,
                read(key, "client key")?,
            ));
        }
        (None, None) => {}
        _ => return Err(ClientError::HalfIdentity),
    }
    if let Some(name) = &options.server_name {
        config = config.domain_name(name.clone());
    }
    Ok(config)
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|source| ClientError::ReadFile {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// The error and its causes, most specific last, without repeats (the transport's errors wrap
/// one another with little to add, e.g. "transport error: ...: Connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// When `status` did not come from the sidecar but from the connection under the call (e.g. a
/// TLS server that refused the client's certificate, or a dropped connection): what went
/// wrong, with its causes.
pub fn transport_failure(status: &tonic::Status) -> Option<String> {
    if reason(status).is_some() {
        return None;
    }
    std::error::Error::source(status).map(error_chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        for (target, socket) in [
            ("/run/x.sock", "/run/x.sock"),
            ("unix:///run/x.sock", "/run/x.sock"),
            ("unix:x.sock", "x.sock"),
            ("x.sock", "x.sock"),
        ] {
            assert_eq!(
                Target::parse(target).unwrap(),
                Target::Unix(socket.into()),
                "{target}"
            );
        }
        assert!(matches!(
            Target::parse("http://127.0.0.1:7070").unwrap(),
            Target::Url { tls: false, .. }
        ));
        assert!(matches!(
            Target::parse("https://informerd.example:443").unwrap(),
            Target::Url { tls: true, .. }
        ));
        assert!(Target::parse("grpc://x:1").is_err());
        assert!(Target::parse("unix://").is_err());
        assert!(Target::parse("").is_err());
    }

    #[tokio::test]
    async fn a_missing_socket_names_the_path_and_the_fix() {
        let err = connect("/nonexistent/informerd.sock").await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nonexistent/informerd.sock"), "{text}");
        assert!(text.contains("informerd serve"), "{text}");
    }

    #[tokio::test]
    async fn tls_options_need_https() {
        let options = ConnectOptions {
            ca_file: Some("ca.pem".into()),
            ..Default::default()
        };
        let err = connect_with("http://127.0.0.1:1", &options)
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::TlsWithoutHttps { .. }), "{err}");
    }
}
