//! The sidecar's configuration file (`informerd.yaml`) as typed values that tests and
//! benchmarks build, so that none of them pastes YAML together: each says what it configures,
//! and serde renders it the one way the sidecar reads it.
//!
//! ```ignore
//! let config = SidecarConfig::new()
//!     .resource(Resource::pods().namespaces([ns]).drop(["metadata.managedFields"])
//!         .index(Index::path("node", "spec.nodeName")))
//!     .server(|s| s.metrics_port(port));
//! let sidecar = Sidecar::start(bin, cluster, &config)?;
//! ```
//!
//! Decision: only the fields the sidecar's `RawConfig` has, with its camelCase names, each left
//! out when unset so that the sidecar's own default applies. Tests that are about the YAML text
//! itself (a bad configuration, the fuzz corpus, the config tests) keep writing text: this
//! renders only valid shapes. The sidecar's config module is not reused: this crate must not
//! depend on `informerd` (it is that crate's dev-dependency).

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};
use serde_yaml::Value;

mod resource;
pub use resource::{Index, Resource, Transform};

/// A whole `informerd.yaml`: `server`, `resources`, and the optional sections.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarConfig {
    api_version: &'static str,
    kind: &'static str,
    server: Server,
    #[serde(skip_serializing_if = "Option::is_none")]
    change_log: Option<ChangeLog>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<Limits>,
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot: Option<Snapshot>,
    /// Always written, `[]` when empty (a configuration of on-demand caches only). Values, so
    /// that an entry read from a file (deploy/'s) is written as it was.
    resources: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_demand: Option<OnDemand>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    clusters: Vec<Cluster>,
}

impl Default for SidecarConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl SidecarConfig {
    /// No resources, the default server (a [`crate::Sidecar`] sets its socket).
    pub fn new() -> SidecarConfig {
        SidecarConfig {
            api_version: "informerd.io/v1alpha1",
            kind: "Config",
            server: Server::default(),
            change_log: None,
            limits: None,
            snapshot: None,
            resources: Vec::new(),
            on_demand: None,
            clusters: Vec::new(),
        }
    }

    /// Adds an entry to `resources`.
    pub fn resource(mut self, resource: Resource) -> Self {
        let value = serde_yaml::to_value(resource).expect("a resource renders as YAML");
        self.resources.push(value);
        self
    }

    /// Adds an entry to `resources` as it stands in another configuration (the deployed one
    /// of deploy/, whose text is what a test checks).
    pub fn resource_yaml(mut self, resource: Value) -> Self {
        self.resources.push(resource);
        self
    }

    /// Edits the `server` section.
    pub fn server(mut self, edit: impl FnOnce(Server) -> Server) -> Self {
        self.server = edit(self.server);
        self
    }

    /// Edits the `limits` section.
    pub fn limits(mut self, edit: impl FnOnce(Limits) -> Limits) -> Self {
        self.limits = Some(edit(self.limits.unwrap_or_default()));
        self
    }

    /// `changeLog.maxEvents`.
    pub fn change_log_max_events(mut self, max_events: u64) -> Self {
        self.change_log
            .get_or_insert_with(ChangeLog::default)
            .max_events = Some(max_events);
        self
    }

    /// `changeLog.maxBytes`, a quantity (`8Mi`).
    pub fn change_log_max_bytes(mut self, max_bytes: &str) -> Self {
        self.change_log
            .get_or_insert_with(ChangeLog::default)
            .max_bytes = Some(max_bytes.to_string());
        self
    }

    /// `snapshot`: warm-restart snapshots in `directory`, the rest of the section edited by
    /// `edit`.
    pub fn snapshot(
        mut self,
        directory: impl AsRef<Path>,
        edit: impl FnOnce(Snapshot) -> Snapshot,
    ) -> Self {
        self.snapshot = Some(edit(Snapshot {
            directory: directory.as_ref().to_path_buf(),
            interval: None,
            max_age: None,
        }));
        self
    }

    /// The `onDemand` section.
    pub fn on_demand(mut self, on_demand: OnDemand) -> Self {
        self.on_demand = Some(on_demand);
        self
    }

    /// Adds an entry to `clusters`: a remote cluster by name and kubeconfig.
    pub fn cluster(mut self, name: impl Into<String>, kubeconfig: impl AsRef<Path>) -> Self {
        self.clusters.push(Cluster {
            name: name.into(),
            kubeconfig: kubeconfig.as_ref().to_path_buf(),
        });
        self
    }

    /// `server.socket` (a [`crate::Sidecar`] sets its own).
    pub fn socket(mut self, socket: impl AsRef<Path>) -> Self {
        self.server.socket = Some(socket.as_ref().to_path_buf());
        self
    }

    /// The YAML the sidecar reads.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).expect("a configuration renders as YAML")
    }
}

/// The `server` section.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Server {
    #[serde(skip_serializing_if = "Option::is_none")]
    socket: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    socket_mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tls: Option<Tls>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    authorization: Option<Authorization>,
    #[serde(skip_serializing_if = "Option::is_none")]
    socket_handover_timeout: Option<String>,
}

impl Server {
    /// `socketMode`, octal as the file says it (`"0600"`).
    pub fn socket_mode(mut self, mode: &str) -> Self {
        self.socket_mode = Some(mode.to_string());
        self
    }

    /// `listen`: a TCP address (`127.0.0.1:PORT`) served beside the socket.
    pub fn listen(mut self, addr: impl Display) -> Self {
        self.listen = Some(addr.to_string());
        self
    }

    /// `tls` of the TCP listener: its certificate and key, and the CA of the client
    /// certificates it requires when `client_ca` is given.
    pub fn tls(
        mut self,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
        client_ca: Option<&Path>,
    ) -> Self {
        self.tls = Some(Tls {
            cert_file: cert.as_ref().to_path_buf(),
            key_file: key.as_ref().to_path_buf(),
            client_ca_file: client_ca.map(Path::to_path_buf),
        });
        self
    }

    /// `metrics`: the address of `/metrics` and the probes.
    pub fn metrics(mut self, addr: impl Display) -> Self {
        self.metrics = Some(addr.to_string());
        self
    }

    /// `metrics` on `127.0.0.1:port`.
    pub fn metrics_port(self, port: u16) -> Self {
        self.metrics(format!("127.0.0.1:{port}"))
    }

    /// `authorization`.
    pub fn authorization(mut self, authorization: Authorization) -> Self {
        self.authorization = Some(authorization);
        self
    }

    /// `socketHandoverTimeout` (`2s`): how long a new process waits for the socket's holder.
    pub fn socket_handover_timeout(mut self, timeout: &str) -> Self {
        self.socket_handover_timeout = Some(timeout.to_string());
        self
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct Tls {
    cert_file: PathBuf,
    key_file: PathBuf,
    #[serde(rename = "clientCAFile", skip_serializing_if = "Option::is_none")]
    client_ca_file: Option<PathBuf>,
}

/// `server.authorization`: `kubernetes` alone (the shorthand), or with settings.
#[derive(Debug, Clone)]
pub struct Authorization {
    settings: BTreeMap<&'static str, String>,
}

impl Authorization {
    /// `authorization: kubernetes`, every setting at its default.
    pub fn kubernetes() -> Authorization {
        Authorization {
            settings: BTreeMap::new(),
        }
    }

    /// `deniedTTL`: how long a denial is cached (`1s`).
    pub fn denied_ttl(mut self, ttl: &str) -> Self {
        self.settings.insert("deniedTTL", ttl.to_string());
        self
    }

    /// `recheckInterval`: how often open streams are authorized again.
    pub fn recheck_interval(mut self, interval: &str) -> Self {
        self.settings
            .insert("recheckInterval", interval.to_string());
        self
    }
}

impl Serialize for Authorization {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.settings.is_empty() {
            return s.serialize_str("kubernetes");
        }
        let mut map: BTreeMap<&str, &str> = BTreeMap::from([("mode", "kubernetes")]);
        map.extend(self.settings.iter().map(|(k, v)| (*k, v.as_str())));
        map.serialize(s)
    }
}

/// The `limits` section; sizes are Kubernetes quantities (`"1Ki"`) or bytes.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_object_size: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_watchers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_concurrent_lists: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_request_size: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_memory: Option<Value>,
}

impl Limits {
    /// `maxObjectSize`.
    pub fn max_object_size(mut self, size: impl Into<Value>) -> Self {
        self.max_object_size = Some(size.into());
        self
    }

    /// `maxWatchers`.
    pub fn max_watchers(mut self, n: u64) -> Self {
        self.max_watchers = Some(n);
        self
    }

    /// `maxConcurrentLists`.
    pub fn max_concurrent_lists(mut self, n: u64) -> Self {
        self.max_concurrent_lists = Some(n);
        self
    }

    /// `maxRequestSize`.
    pub fn max_request_size(mut self, size: impl Into<Value>) -> Self {
        self.max_request_size = Some(size.into());
        self
    }

    /// `maxMemory`.
    pub fn max_memory(mut self, size: impl Into<Value>) -> Self {
        self.max_memory = Some(size.into());
        self
    }
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct ChangeLog {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_events: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_bytes: Option<String>,
}

/// The `snapshot` section (see [`SidecarConfig::snapshot`]).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    directory: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_age: Option<String>,
}

impl Snapshot {
    /// `interval` (`2s`): how often a snapshot is taken.
    pub fn interval(mut self, interval: &str) -> Self {
        self.interval = Some(interval.to_string());
        self
    }

    /// `maxAge` (`1s`): an older snapshot is ignored at start.
    pub fn max_age(mut self, max_age: &str) -> Self {
        self.max_age = Some(max_age.to_string());
        self
    }
}

#[derive(Debug, Clone, Serialize)]
struct Cluster {
    name: String,
    kubeconfig: PathBuf,
}

/// The `onDemand` section: kinds a client may ask to have cached, and the bounds on them.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OnDemand {
    allow: Vec<Allow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespaces: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter: Option<String>,
    #[serde(skip_serializing_if = "Transform::is_empty")]
    transform: Transform,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_caches: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_objects: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    idle_timeout: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
struct Allow {
    group: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    kinds: Option<Vec<String>>,
}

impl OnDemand {
    /// Nothing allowed yet.
    pub fn new() -> OnDemand {
        OnDemand::default()
    }

    /// Allows `kinds` of the API group `group` (`""` for the core group).
    pub fn allow(mut self, group: &str, kinds: &[&str]) -> Self {
        self.allow.push(Allow {
            group: group.to_string(),
            kinds: Some(kinds.iter().map(|k| k.to_string()).collect()),
        });
        self
    }

    /// `namespaces`: where on-demand caches may be.
    pub fn namespaces<S: Into<String>>(mut self, namespaces: impl IntoIterator<Item = S>) -> Self {
        self.namespaces = Some(namespaces.into_iter().map(Into::into).collect());
        self
    }

    /// `filter` of every on-demand cache.
    pub fn filter(mut self, cel: &str) -> Self {
        self.filter = Some(cel.to_string());
        self
    }

    /// `transform` of every on-demand cache.
    pub fn transform(mut self, transform: Transform) -> Self {
        self.transform = transform;
        self
    }

    /// `maxCaches`.
    pub fn max_caches(mut self, n: u64) -> Self {
        self.max_caches = Some(n);
        self
    }

    /// `maxObjects`.
    pub fn max_objects(mut self, n: u64) -> Self {
        self.max_objects = Some(n);
        self
    }

    /// `idleTimeout` (`2s`).
    pub fn idle_timeout(mut self, timeout: &str) -> Self {
        self.idle_timeout = Some(timeout.to_string());
        self
    }
}

#[cfg(test)]
mod tests;
