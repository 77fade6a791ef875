//! Where the API listens and how it stops listening: the Unix socket (always), TCP (when
//! `server.listen` is set; with TLS when `server.tls` is), and graceful shutdown with a grace
//! period. What is served on them is decided by the caller (the routes). The children serve the
//! transport too: `tls` (the TCP listener's TLS, reloaded when its files change), `health`
//! (health checking that follows readiness, and reflection), `handover` (waiting for a socket
//! another process serves) and `request_size` (`limits.maxRequestSize`).

pub(super) mod handover;
pub(super) mod health;
pub(super) mod request_size;
pub(crate) mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures::future::Either;
use tokio::sync::watch as signal;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;

use crate::api::metrics::RpcMetricsLayer;
use crate::api::ApiError;
use crate::config::{ServerConfig, TlsConfig};

/// TCP and HTTP/2 keepalive interval on the TCP listener.
const KEEPALIVE: Duration = Duration::from_secs(30);
/// How long shutdown waits for connections to close after ending the watches.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What serving on every listener comes to: it ends when they all have stopped.
type Serving = Result<(), tonic::transport::Error>;

/// Binds the listeners of `server` and returns the future that serves `routes` on them until
/// `stop` fires.
pub async fn listen(
    server: &ServerConfig,
    routes: Routes,
    stop: &signal::Sender<bool>,
) -> Result<impl Future<Output = Serving>, ApiError> {
    let unix = bind_socket(&server.socket, server.socket_mode)?;
    let uds = Server::builder()
        .layer(RpcMetricsLayer)
        .add_routes(routes.clone())
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::UnixListenerStream::new(unix),
            stopped(stop.subscribe()),
        );
    let tcp = match server.listen {
        None => None,
        Some(addr) => {
            let tls = server.tls.as_ref();
            Some(serve_tcp(addr, tls, routes, stopped(stop.subscribe())).await?)
        }
    };
    tracing::info!(socket = %server.socket.display(), "serving the gRPC API");
    Ok(async move {
        match tcp {
            None => uds.await,
            Some(tcp) => {
                let (a, b) = tokio::join!(uds, tcp);
                a.and(b)
            }
        }
    })
}

/// Resolves when `stop` fires.
async fn stopped(mut stop: signal::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Binds `addr` and returns the future that serves `routes` on it, with TLS when `tls` is set
/// (its files are reloaded when they change: see `tls`).
async fn serve_tcp(
    addr: SocketAddr,
    tls: Option<&TlsConfig>,
    routes: Routes,
    shutdown: impl Future<Output = ()>,
) -> Result<impl Future<Output = Serving>, ApiError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ApiError::Listen { addr, source })?;
    tracing::info!(addr = %listener.local_addr().unwrap_or(addr), tls = tls.is_some(), "serving on TCP");
    // Watch events are small and latency matters: no Nagle; keepalives find peers that
    // vanished without closing (their watchers would live on otherwise).
    let incoming = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(KEEPALIVE));
    let mut builder = Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE))
        .layer(RpcMetricsLayer);
    let router = builder.add_routes(routes);
    Ok(match tls {
        None => Either::Left(router.serve_with_incoming_shutdown(incoming, shutdown)),
        Some(tls) => {
            let incoming =
                tls::incoming(tls, incoming).map_err(|e| ApiError::Tls(e.to_string()))?;
            Either::Right(router.serve_with_incoming_shutdown(incoming, shutdown))
        }
    })
}

/// Runs `serving` until it ends, or until `shutdown` completes: then calls `stop` (which ends
/// the watches and, through the stop signal, the listeners) and gives open connections
/// [`SHUTDOWN_GRACE`] to close.
pub async fn until_shutdown(
    serving: impl Future<Output = Serving>,
    shutdown: impl Future<Output = ()>,
    stop: impl FnOnce(),
) -> Serving {
    // Graceful shutdown waits for every connection to close; a client that neither reads nor
    // closes must not keep the process up until SIGKILL.
    let stopper = async {
        shutdown.await;
        stop();
        tokio::time::sleep(SHUTDOWN_GRACE).await;
        tracing::warn!(grace = ?SHUTDOWN_GRACE, "connections still open after the grace period; closing them");
    };
    tokio::select! {
        r = serving => r,
        () = stopper => Ok(()),
    }
}

/// Binds the Unix socket: creates its directory, and replaces a stale socket file that no
/// process listens on; refuses to take over a socket another server is using. The socket file
/// gets `mode` (`server.socketMode`), whatever the umask.
fn bind_socket(path: &Path, mode: u32) -> Result<tokio::net::UnixListener, ApiError> {
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
    let listener = tokio::net::UnixListener::bind(path).map_err(|e| error(e.to_string()))?;
    // Decision: chmod right after bind. Until then the file has the umask's mode; nothing is
    // served yet (the server starts after this returns), so a client that connects in between
    // reaches a backlog that is closed with the listener if the chmod fails.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| {
        error(format!(
            "cannot set its mode to {mode:04o} (server.socketMode): {e}"
        ))
    })?;
    Ok(listener)
}
