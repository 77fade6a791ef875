//! The gRPC API (`proto/informerd/v1/cache.proto`): Get, List, Watch and Status over the caches
//! of the fleet, with gRPC health checking and server reflection, on a Unix socket and
//! optionally on TCP. This file holds [`Api`] (the service over a fleet, and how it is served
//! and stopped) and [`ApiError`]; the children, in the order a request meets them:
//!
//! - `server`: the listeners (Unix socket, TCP with keepalive and TLS) and graceful shutdown;
//!   its children: `tls`, the TCP listener's TLS, reloaded when its files change; `health`,
//!   health checking that follows readiness, and reflection; `handover`, a socket another
//!   process serves; `request_size`, `maxRequestSize`.
//! - `authz`: per-client authorization (`server.authorization: kubernetes`).
//! - `service`: the RPCs. `reason`: statuses with the `informerd-reason` trailer. `list`: the
//!   List stream, in chunks.
//! - `resource`: one served resource (its cache, indexes, watch hub, counters). `resources`:
//!   every served resource by name, the configuration's and the on-demand ones (one lookup).
//!   `ensure`: the Ensure RPC, which starts on-demand caches, and the reaper that stops them.
//! - `query`: the filters of a request, validated once, matched per object. `mask`: the
//!   fields a request asks for, and how objects are rendered. `initial`: what an initial
//!   state or a key queue's resync reads, a page at a time.
//! - `watch`: one hub per resource broadcasts decoded changes; each watcher filters, applies
//!   transitions and predicates, and has a bounded buffer.
//! - `keys`: WatchKeys, a coalescing key queue per stream, fed by the watch hub.
//! - `metrics`: the API's collectors and RPC counters, registered into the `metrics` leaf.
//! - `send`: how a stream sends into its bounded buffer, and gives up on a client that stalls.
//! - `limits`: the slots of Watch and List calls (`limits.maxWatchers`,
//!   `maxConcurrentLists`) and the `maxMemory` guard.
//!
//! Where it listens (decided in `config`): a Unix socket always; TCP on loopback, or on any
//! address with TLS. Health: the overall service ("") and `informerd.v1.Cache` are SERVING once
//! every scope has synced (readiness), NOT_SERVING before.
//!
//! What it must NOT do: change a cache. The API only READS the stores: it holds
//! `store::Store` (through the fleet's caches), never a `Writer`.

mod authz;
mod buffer;
mod clusters;
mod ensure;
mod initial;
mod keys;
mod limits;
mod list;
mod mask;
pub mod metrics;
mod query;
pub mod reason;
mod resource;
mod resources;
mod send;
pub(crate) mod server;
mod service;
mod watch;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;
use tokio::sync::watch as signal;
use tonic::service::Routes;

use crate::config::{Config, ServerConfig};
use crate::fleet::Fleet;
use crate::proto;
pub use keys::KeyCountsSnapshot;
pub use reason::{Reason, REASON_TRAILER};
pub use resource::{Resource, WatchCounts, CLIENT_CLOSED};
pub use resources::{OnDemandReport, STOPPED_IDLE, STOPPED_MAX_OBJECTS};
pub use watch::{DEFAULT_BOOKMARK_INTERVAL, WATCHER_BUFFER};

/// What can stop the API from serving.
#[derive(Debug, Error)]
pub enum ApiError {
    /// The Unix socket (`server.socket`) cannot be created or is in use.
    #[error("server.socket {path}: {message}")]
    Socket {
        /// The configured socket path.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
    /// The TCP address (`server.listen`) cannot be bound.
    #[error("server.listen {addr}: {source}")]
    Listen {
        /// The configured address.
        addr: std::net::SocketAddr,
        /// Why binding failed (in use, not an address of this host, ...).
        #[source]
        source: std::io::Error,
    },
    /// The certificate, key or client CA files of `server.tls` cannot be read or used.
    #[error("server.tls: {0}")]
    Tls(String),
    /// The protocol descriptors for server reflection do not load (a broken build).
    #[error(
        "server reflection: the compiled-in protocol descriptors do not load ({0}); \
         rebuild informerd"
    )]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The gRPC server stopped with an error.
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
    /// Every served resource (`resources`): the configuration's, and the on-demand ones.
    resources: Arc<resources::Resources>,
    /// Starts on-demand caches (`onDemand`, see `ensure`); `None` when off.
    on_demand: Option<Arc<crate::fleet::OnDemand>>,
    stop: signal::Sender<bool>,
    limits: limits::Limits,
    max_request_size: u64,
    keys: keys::Catalog,
    /// Per-client authorization (`server.authorization`); `None` when off.
    authz: Option<Arc<authz::Authorizer>>,
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
                    .resource_in(&cache.cluster, &cache.name)
                    .map(|r| r.indexes.clone())
                    .unwrap_or_default();
                Arc::new(Resource::start(cache.clone(), indexes, stopped.clone()))
            })
            .collect();
        let resources = Arc::new(resources::Resources::new(resources));
        Api {
            inner: Arc::new(Inner {
                fleet,
                resources,
                on_demand: None,
                stop,
                limits: limits::Limits::new(&config.limits),
                max_request_size: config.limits.max_request_size,
                keys: keys::Catalog::new(config),
                authz: None,
            }),
        }
    }

    fn resources(&self) -> Vec<Arc<Resource>> {
        self.inner.resources.all()
    }

    /// What the watchers of each resource did so far, by resource name (`cluster/name` for a
    /// remote cluster's): for metrics.
    pub fn watch_counts(&self) -> Vec<(String, WatchCounts)> {
        self.resources()
            .iter()
            .map(|r| {
                (
                    crate::fleet::qualified(r.cluster(), r.name()),
                    r.watch_counts(),
                )
            })
            .collect()
    }

    /// What the WatchKeys streams of each resource did so far, by resource name (as
    /// [`Api::watch_counts`] names them): for metrics.
    pub fn key_counts(&self) -> Vec<(String, KeyCountsSnapshot)> {
        self.resources()
            .iter()
            .map(|r| {
                let name = crate::fleet::qualified(r.cluster(), r.name());
                (name, r.key_counts().snapshot())
            })
            .collect()
    }

    /// `limits.maxMemory` in effect, if any: for metrics.
    pub fn max_memory(&self) -> Option<u64> {
        self.inner.limits.max_memory()
    }

    /// Calls refused for a limit so far, by the limit's configuration key: for metrics.
    pub fn limit_refusals(&self) -> [(&'static str, u64); 3] {
        self.inner.limits.refusals()
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

    /// Health and reflection beside the Cache service, the readiness task, the listeners, and
    /// graceful shutdown; then the socket file is removed. A socket another process serves is
    /// waited for (`handover`: a DaemonSet's surge rollout).
    async fn serve_until(
        &self,
        server: &ServerConfig,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ApiError> {
        let shutdown = futures::FutureExt::shared(shutdown);
        let timeout = server.socket_handover_timeout;
        if !server::handover::wait_until_free(&server.socket, timeout, shutdown.clone()).await? {
            return Ok(()); // SIGTERM while another process served the socket
        }
        let size = usize::try_from(self.inner.max_request_size).unwrap_or(usize::MAX);
        let cache =
            proto::cache_server::CacheServer::new(self.clone()).max_decoding_message_size(size);
        let cache = server::request_size::RequestSize::new(cache, self.inner.max_request_size);
        let (routes, health) = server::health::add_health(Routes::new(cache)).await;
        let routes = server::health::add_reflection(routes)?;
        let readiness = server::health::follow_readiness(
            health,
            self.inner.fleet.synced(),
            self.inner.stop.subscribe(),
        );
        let serving = server::listen(server, routes, &self.inner.stop).await?;
        let ours = server::handover::identity(&server.socket);
        let result = server::until_shutdown(serving, shutdown, || self.stop()).await;
        readiness.abort();
        server::handover::remove_if_ours(&server.socket, ours);
        result.map_err(ApiError::from)
    }
}
