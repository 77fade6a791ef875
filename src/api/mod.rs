//! The gRPC API (`proto/informerd/v1/cache.proto`): Get, List, Watch and Status over the caches
//! of the fleet, with gRPC health checking and server reflection, on a Unix socket and
//! optionally on TCP.
//!
//! - `query`: the filters and field mask of a request, validated once, matched per object.
//! - `watch`: one hub per resource broadcasts decoded changes; each watcher filters, applies
//!   transitions and predicates, and has a bounded buffer.
//! - `service`: the RPCs. `reason`: statuses with the `informerd-reason` trailer.
//!
//! Where it listens (decided in `config`): a Unix socket always; TCP on loopback, or on any
//! address with TLS. Health: the overall service ("") and `informerd.v1.Cache` are SERVING once
//! every scope has synced (readiness), NOT_SERVING before.

mod query;
pub mod reason;
mod resource;
mod send;
mod service;
mod watch;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::sync::watch as signal;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::Status;

use crate::config::{Config, ServerConfig, TlsConfig};
use crate::fleet::Fleet;
use crate::proto;
pub use reason::{Reason, REASON_TRAILER};
pub use resource::Resource;
pub use watch::{DEFAULT_BOOKMARK_INTERVAL, WATCHER_BUFFER};

/// TCP and HTTP/2 keepalive interval on the TCP listener.
const KEEPALIVE: Duration = Duration::from_secs(30);
/// How long shutdown waits for connections to close after ending the watches.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What can stop the API from serving.
#[derive(Debug, Error)]
pub enum ApiError {
    #[error("server.socket {path}: {message}")]
    Socket { path: PathBuf, message: String },
    #[error("server.listen {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("server.tls: {0}")]
    Tls(String),
    #[error("the gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
}

/// The service over a fleet; cheap to clone.
#[derive(Clone)]
pub struct Api {
    inner: Arc<Inner>,
}

struct Inner {
    fleet: Arc<Fleet>,
    resources: Vec<Arc<Resource>>,
    stop: signal::Sender<bool>,
}

impl Api {
    /// The API over `fleet`, whose caches were started from `config`. Starts one hub task per
    /// resource: call from within a Tokio runtime.
    pub fn new(fleet: Arc<Fleet>, config: &Config) -> Api {
        let (stop, stopped) = signal::channel(false);
        let resources = fleet
            .caches()
            .iter()
            .map(|cache| {
                let indexes = config
                    .resources
                    .iter()
                    .find(|r| r.name == cache.name)
                    .map(|r| r.indexes.clone())
                    .unwrap_or_default();
                Arc::new(Resource::start(cache.clone(), indexes, stopped.clone()))
            })
            .collect();
        Api {
            inner: Arc::new(Inner {
                fleet,
                resources,
                stop,
            }),
        }
    }

    fn resources(&self) -> &[Arc<Resource>] {
        &self.inner.resources
    }

    fn resource(&self, name: &str) -> Result<Arc<Resource>, Status> {
        if name.is_empty() {
            return Err(reason::invalid(
                "resource",
                format!("is required; this sidecar serves: {}", self.names()),
            ));
        }
        self.resources()
            .iter()
            .find(|r| r.name() == name)
            .cloned()
            .ok_or_else(|| {
                Reason::NotFound.status(format!(
                    "no resource named {name:?} in the configuration; this sidecar serves: {}",
                    self.names()
                ))
            })
    }

    fn names(&self) -> String {
        self.resources()
            .iter()
            .map(|r| r.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Ends every watch with `UNAVAILABLE`/`ShuttingDown` and stops the hubs.
    pub fn stop(&self) {
        self.inner.stop.send_replace(true);
    }

    /// Serves on the Unix socket of `server`, and on its TCP address if any, until `shutdown`
    /// completes; then ends the watches and removes the socket.
    pub async fn serve(
        self,
        server: &ServerConfig,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ApiError> {
        let result = self.serve_until(server, shutdown).await;
        // Also on the error paths: the hubs stop, and so does the readiness task.
        self.stop();
        result
    }

    async fn serve_until(
        &self,
        server: &ServerConfig,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ApiError> {
        let (health, health_service) = tonic_health::server::health_reporter();
        // Not ready until the readiness task has seen every scope synced.
        for service in ["", "informerd.v1.Cache"] {
            health
                .set_service_status(service, tonic_health::ServingStatus::NotServing)
                .await;
        }
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| ApiError::Tls(format!("reflection: {e}")))?;
        let reflection_alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()
            .map_err(|e| ApiError::Tls(format!("reflection: {e}")))?;
        let routes =
            tonic::service::Routes::new(proto::cache_server::CacheServer::new(self.clone()))
                .add_service(health_service)
                .add_service(reflection)
                .add_service(reflection_alpha);

        let mut stopped = self.inner.stop.subscribe();
        let mut synced = self.inner.fleet.synced();
        let readiness = tokio::spawn(async move {
            let mut ready = synced.is_synced();
            loop {
                let status = if ready {
                    tonic_health::ServingStatus::Serving
                } else {
                    tonic_health::ServingStatus::NotServing
                };
                health.set_service_status("", status).await;
                health
                    .set_service_status("informerd.v1.Cache", status)
                    .await;
                tokio::select! {
                    now = synced.changed() => ready = now,
                    _ = stopped.changed() => {
                        // Shutting down: not ready any more.
                        for service in ["", "informerd.v1.Cache"] {
                            health
                                .set_service_status(service, tonic_health::ServingStatus::NotServing)
                                .await;
                        }
                        return;
                    }
                }
            }
        });

        let unix = bind_socket(&server.socket)?;
        let stop_signal = |mut rx: signal::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let uds = Server::builder()
            .add_routes(routes.clone())
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::UnixListenerStream::new(unix),
                stop_signal(self.inner.stop.subscribe()),
            );
        let tcp = match server.listen {
            None => None,
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| ApiError::Listen { addr, source })?;
                tracing::info!(addr = %listener.local_addr().unwrap_or(addr), tls = server.tls.is_some(), "serving on TCP");
                // Watch events are small and latency matters: no Nagle; keepalives find peers
                // that vanished without closing (their watchers would live on otherwise).
                let incoming = tonic::transport::server::TcpIncoming::from(listener)
                    .with_nodelay(Some(true))
                    .with_keepalive(Some(KEEPALIVE));
                let mut builder = Server::builder().http2_keepalive_interval(Some(KEEPALIVE));
                if let Some(tls) = &server.tls {
                    builder = builder
                        .tls_config(tls_config(tls)?)
                        .map_err(|e| ApiError::Tls(e.to_string()))?;
                }
                Some(builder.add_routes(routes).serve_with_incoming_shutdown(
                    incoming,
                    stop_signal(self.inner.stop.subscribe()),
                ))
            }
        };
        tracing::info!(socket = %server.socket.display(), "serving the gRPC API");
        let servers = async move {
            match tcp {
                None => uds.await,
                Some(tcp) => {
                    let (a, b) = tokio::join!(uds, tcp);
                    a.and(b)
                }
            }
        };
        // Graceful shutdown waits for every connection to close; a client that neither reads
        // nor closes must not keep the process up until SIGKILL.
        let stopper = async {
            shutdown.await;
            self.stop();
            tokio::time::sleep(SHUTDOWN_GRACE).await;
            tracing::warn!(grace = ?SHUTDOWN_GRACE, "connections still open after the grace period; closing them");
        };
        let result = tokio::select! {
            r = servers => r,
            () = stopper => Ok(()),
        };
        readiness.abort();
        let _ = std::fs::remove_file(&server.socket);
        result.map_err(ApiError::from)
    }
}

/// Binds the Unix socket: creates its directory, and replaces a stale socket file that no
/// process listens on; refuses to take over a socket another server is using.
fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener, ApiError> {
    let error = |message: String| ApiError::Socket {
        path: path.to_path_buf(),
        message,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| error(format!("cannot create {}: {e}", dir.display())))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(error(
                "the path exists and is not a socket; choose another path".into(),
            ));
        }
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(error(
                    "another process is serving on this socket; stop it or choose another path"
                        .into(),
                ))
            }
            // Nobody listens: a socket left by a process that died. Replace it.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path)
                    .map_err(|e| error(format!("cannot remove the stale socket: {e}")))?;
            }
            Err(e) => return Err(error(format!("cannot check the existing socket: {e}"))),
        }
    }
    tokio::net::UnixListener::bind(path).map_err(|e| error(e.to_string()))
}

fn tls_config(tls: &TlsConfig) -> Result<ServerTlsConfig, ApiError> {
    let read = |field: &str, path: &Path| {
        std::fs::read(path).map_err(|e| ApiError::Tls(format!("{field} {}: {e}", path.display())))
    };
    let identity = Identity::from_pem(
        read("certFile", &tls.cert_file)?,
        read("keyFile", &tls.key_file)?,
    );
    let mut config = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &tls.client_ca_file {
        config = config.client_ca_root(Certificate::from_pem(read("clientCAFile", ca)?));
    }
    Ok(config)
}
