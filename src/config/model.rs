//! The validated configuration the rest of the program uses, and the defaults of what the file
//! may leave out. Every value here has passed validation: selectors, CEL and transforms are
//! compiled, names are unique, and the defaults are filled in.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::filter::{Filter, LabelSelector, StringsExpr};
use crate::transform::Transform;

use super::diagnostic::{ConfigError, Source};

/// The `apiVersion` of the configuration file.
pub const API_VERSION: &str = "informerd.io/v1alpha1";
/// The `kind` of the configuration file.
pub const KIND: &str = "Config";
/// The default Unix socket of the gRPC API.
pub const DEFAULT_SOCKET: &str = "/run/informerd/informerd.sock";
/// The default permissions of the socket file: read and write for its owner and group, nothing
/// for others. Connecting to a Unix socket needs write permission on it, so this lets the
/// controllers that share the sidecar's user or group (a pod's `fsGroup`) connect, and nobody
/// else on the node, whatever the process's umask.
pub const DEFAULT_SOCKET_MODE: u32 = 0o660;
/// How long informerd waits, by default, for another process serving its socket to stop
/// before it fails naming that process (see `api/server/handover.rs`): 10 minutes, a Deployment's
/// default `progressDeadlineSeconds`. A surge rollout's overlap is the new pod's cache sync
/// plus the seconds the DaemonSet controller and the old pod take to stop it.
pub const DEFAULT_SOCKET_HANDOVER_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(600);
/// The change log's default bounds (`changeLog.maxEvents`, `maxBytes`): the store's own, where
/// its entries' cost is measured.
pub use crate::store::{DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENTS};

/// The `server` section: where the gRPC API listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The Unix domain socket (default [`DEFAULT_SOCKET`]).
    pub socket: PathBuf,
    /// The permission bits of the socket file (`socketMode`, default [`DEFAULT_SOCKET_MODE`]).
    pub socket_mode: u32,
    /// An optional TCP address: loopback, or any address when `tls` is set.
    pub listen: Option<SocketAddr>,
    /// TLS for the TCP address.
    pub tls: Option<TlsConfig>,
    /// `metrics`: the plain-HTTP address of `/livez`, `/readyz` and `/metrics`; off when unset.
    pub metrics: Option<SocketAddr>,
    /// `authorization`: whether each client's own RBAC is checked (off by default).
    pub authorization: AuthorizationConfig,
    /// `socketHandoverTimeout`: how long to wait for another process serving the socket to
    /// stop (default [`DEFAULT_SOCKET_HANDOVER_TIMEOUT`]).
    pub socket_handover_timeout: std::time::Duration,
}

pub use super::validate::authorization::{AuthorizationConfig, AuthorizationMode};
pub use super::validate::clusters::{ClusterConfig, DEFAULT_CLUSTER};

/// `server.tls`: the server's certificate and key (PEM), and optionally the CA that client
/// certificates must be signed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// `certFile`: the server's certificate chain.
    pub cert_file: PathBuf,
    /// `keyFile`: its private key.
    pub key_file: PathBuf,
    /// `clientCAFile`: when set, clients must present a certificate signed by it.
    pub client_ca_file: Option<PathBuf>,
}

/// The `changeLog` section: bounds of the store's log of recent changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeLogConfig {
    /// At most this many events (default [`DEFAULT_MAX_EVENTS`]).
    pub max_events: usize,
    /// At most this many bytes (default [`DEFAULT_MAX_BYTES`]).
    pub max_bytes: usize,
}

/// Which namespaces a resource is watched in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One cluster-wide stream (also the only scope of cluster-scoped kinds).
    AllNamespaces,
    /// One stream per listed namespace.
    Namespaces(Vec<String>),
    /// One stream per Namespace that matches the selector, started and stopped as they come
    /// and go.
    Selector(LabelSelector),
}

/// A secondary index of a resource.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// The name clients use.
    pub name: String,
    /// What the keys are.
    pub expr: StringsExpr,
}

/// One cached resource, validated and compiled.
#[derive(Clone, Debug)]
pub struct ResourceConfig {
    /// The name clients use: `name`, or the lowercase kind.
    pub name: String,
    /// `v1` or `group/version`, as written.
    pub api_version: String,
    /// The API group; empty for the core group.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `Pod`.
    pub kind: String,
    /// Which namespaces.
    pub scope: Scope,
    /// The server-side label selector (validated, as written).
    pub label_selector: Option<String>,
    /// The server-side field selector (validated, as written).
    pub field_selector: Option<String>,
    /// The shard of the apiserver's objects cached (the apiserver's `shardSelector`, KEP-5866;
    /// validated, as written): asked of the apiserver and checked on every object received.
    pub shard_selector: Option<String>,
    /// The CEL filter an object must pass to be stored.
    pub filter: Option<Filter>,
    /// What is kept of each object (the identity transform if none is configured).
    pub transform: Transform,
    /// Secondary indexes.
    pub indexes: Vec<IndexConfig>,
    /// Whether caching Secrets was opted into.
    pub allow_secrets: bool,
    /// The cluster it is cached from: a name of `clusters`, or empty for the default cluster.
    pub cluster: String,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the gRPC API listens.
    pub server: ServerConfig,
    /// Bounds of the change log.
    pub change_log: ChangeLogConfig,
    /// What the process accepts before it refuses (`limits`).
    pub limits: super::limits::LimitsConfig,
    /// Warm restarts: where and how often the caches are saved (off when `None`).
    pub snapshot: Option<crate::config::SnapshotConfig>,
    /// The cached resources, in file order.
    pub resources: Vec<ResourceConfig>,
    /// Caches clients may ask for at run time (`onDemand`; off when `None`).
    pub on_demand: Option<crate::config::OnDemandConfig>,
    /// The remote clusters (`clusters`), in file order; the default cluster is not listed.
    pub clusters: Vec<ClusterConfig>,
    pub(super) source: Arc<Source>,
}

impl Config {
    /// An error about field `field` (e.g. `kind`, `namespaces`, `indexes[0].cel`) of resource
    /// `resource_index`, pointing into the file: `FILE:LINE:COL: resources[i].field: message`.
    pub fn error_at(&self, resource_index: usize, field: &str, message: &str) -> ConfigError {
        self.error_at_path(&resource_path(resource_index, field), message)
    }

    /// An error about any field of the file, by its path (e.g. `server.listen`).
    pub fn error_at_path(&self, path: &str, message: &str) -> ConfigError {
        self.source.diagnostic(path, message, false).into_error()
    }

    /// The file name the configuration was read from.
    pub fn file(&self) -> &str {
        &self.source.file
    }

    /// The resource clients call `name` in the default cluster.
    pub fn resource(&self, name: &str) -> Option<&ResourceConfig> {
        self.resource_in("", name)
    }

    /// The resource clients call `name` in `cluster` (empty: the default cluster).
    pub fn resource_in(&self, cluster: &str, name: &str) -> Option<&ResourceConfig> {
        self.resources
            .iter()
            .find(|r| r.name == name && r.cluster == cluster)
    }
}

/// The path of field `field` of resource `index`: `resources[index].field`.
pub(super) fn resource_path(index: usize, field: &str) -> String {
    format!("resources[{index}].{field}")
}
