//! The watch fleet: one watch stream per (resource, namespace scope), each with its own
//! initial list and relist, feeding filter → transform → store; after a warm restart
//! ([`Fleet::start_warm`]) each scope resumes its watch from a snapshot instead of listing.
//!
//! - `namespaces: [a, b]` runs one stream per namespace; a forbidden (403) namespace is
//!   reported in status and retried with backoff while the others serve.
//! - `namespaceSelector` watches Namespace objects with that label selector (server-side); a
//!   namespace that starts matching, or is created, gets a stream; one that stops matching, or
//!   is deleted, has its stream stopped and its objects removed (DELETED), so nothing of it
//!   stays in memory.
//! - neither: one cluster-wide stream.
//!
//! Initial lists use streaming lists (`sendInitialEvents`, on by default since Kubernetes
//! 1.34): objects arrive one at a time, so no page of full objects is ever held. A server that
//! refuses them gets paginated lists with small pages instead.
//!
//! This file is the fleet's face: discovery at start-up, the caches it serves and their status.
//! It must not run a stream itself: `scope/` runs them, `ingest` applies their events.

mod client;
pub mod clusters;
pub mod decode;
mod ingest;
pub mod metrics;
mod object;
mod on_demand;
mod pipeline;
mod scope;
pub mod secret_data;
mod start;
mod synced;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use kube::{
    discovery::{ApiCapabilities, ApiResource, Scope as ResourceScope},
    Client,
};
use tokio::task::JoinHandle;

pub use client::{client, READ_BUFFER};
pub use clusters::{qualified, ClusterState};
pub use ingest::{Applied, Progress, ScopeIngest};
pub use object::{with_transform, Decoded, Decoding, Projected};
pub use on_demand::{OnDemand, OnDemandError, Prepared, Resolved, Running, Target};
pub use pipeline::Pipeline;
pub use scope::{RelistReason, ScopeState, ScopeStatus};
pub use synced::SyncedWatch;

use crate::{
    config::{Config, ConfigError, ResourceConfig, Scope},
    store::{Store, StoreOptions, Writer},
};

/// A cache restored from a snapshot: its store, and the resourceVersion each scope (by its
/// label in status) resumes its watch from.
pub struct Warm {
    /// The store, as the snapshot held it.
    pub store: Writer,
    /// Scope label → resourceVersion.
    pub scopes: BTreeMap<String, String>,
}

/// How many scopes run their initial list at once. Each list in flight holds connection and
/// decoding buffers; with tens of namespaces syncing together those buffers, not the cache,
/// set the start-up peak. Ingest is CPU-bound, so a few at a time sync as fast as all at once.
const INITIAL_LISTS: usize = 2;

/// Errors that stop the fleet from starting.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The configuration names something the cluster does not have (or forbids discovering);
    /// rendered as `FILE:LINE:COLUMN: field: message`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The Kubernetes client could not be built from the kubeconfig.
    #[error("building the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// A cached resource: its store and the status of each of its scopes.
pub struct ResourceCache {
    /// The name clients use (`resources[].name` in the config).
    pub name: String,
    /// Its cluster: a name of `clusters`, or empty for the default cluster.
    pub cluster: String,
    /// The resource as discovery resolved it, and whether it is namespaced; unset while a
    /// remote cluster has not answered discovery.
    resolved: std::sync::OnceLock<(ApiResource, bool)>,
    /// What the configuration says of it, until discovery answers.
    fallback: ApiResource,
    /// The cache, read-only: the fleet alone writes to it.
    pub store: Arc<Store>,
    status: scope::StatusBoard,
}

impl ResourceCache {
    /// The resource as discovery resolved it (group, version, kind, plural); until a remote
    /// cluster answers discovery, as the configuration names it (the plural guessed).
    pub fn api_resource(&self) -> &ApiResource {
        self.resolved.get().map_or(&self.fallback, |(ar, _)| ar)
    }

    /// Whether its objects live in namespaces. Decision: until a remote cluster answers
    /// discovery, a kind is taken as namespaced (most are): requests with a namespace are
    /// accepted and find the empty cache.
    pub fn namespaced(&self) -> bool {
        self.resolved
            .get()
            .is_none_or(|(_, namespaced)| *namespaced)
    }

    /// Whether readiness waits for it. Decision: only the default cluster's caches gate
    /// `/readyz` and gRPC health: a remote cluster's outage is not this pod's to fix, and an
    /// unready sidecar would take its controllers out of service for all clusters. A remote
    /// cache's sync shows in Status (and requests may `wait_for_sync` on it).
    pub fn gates_readiness(&self) -> bool {
        self.cluster.is_empty()
    }

    /// The status of every scope, by scope label: a namespace name, `*` for the cluster-wide
    /// stream, or `namespaceSelector` for the stream of matching namespaces itself.
    pub fn scopes(&self) -> BTreeMap<String, ScopeStatus> {
        self.status.snapshot()
    }

    /// Whether every scope has completed its initial list.
    pub fn is_synced(&self) -> bool {
        self.status.is_synced()
    }

    /// The scopes that are not synced, each as `scope: State` with its last error if any
    /// (`team-a: Forbidden (forbidden: grant list and watch ...)`): what requests that wait
    /// for the sync and `/readyz` tell their callers.
    pub fn not_synced(&self) -> Vec<String> {
        self.scopes()
            .into_iter()
            .filter(|(_, s)| s.state != ScopeState::Synced)
            .map(|(scope, s)| match s.last_error {
                Some(e) => format!("{scope}: {:?} ({e})", s.state),
                None => format!("{scope}: {:?}", s.state),
            })
            .collect()
    }

    /// Follows [`ResourceCache::is_synced`]: awaited by requests that wait for the sync.
    pub fn synced(&self) -> tokio::sync::watch::Receiver<bool> {
        self.status.subscribe()
    }
}

/// All caches of one configuration, with their streams running.
pub struct Fleet {
    caches: Vec<Arc<ResourceCache>>,
    clusters: Vec<Arc<clusters::Cluster>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Fleet {
    /// Resolves every resource through discovery, then starts its streams. An unknown kind
    /// (or a resource that cannot be cached with the configured scope) stops start-up with an
    /// error that points at the config file; nothing starts half-configured.
    pub async fn start(client: Client, config: &Config) -> Result<Fleet, FleetError> {
        Self::start_warm(client, config, |_, _| None).await
    }

    /// Like [`Fleet::start`], with the caches `warm` restores (from a snapshot): it is asked
    /// for each resource of the default cluster, with the options its store must have, and
    /// each scope of a restored cache resumes its watch from the resourceVersion given instead
    /// of listing. A resource of a remote cluster starts empty and unsynced, and its streams
    /// start once its cluster has answered discovery (see `start`).
    pub async fn start_warm(
        client: Client,
        config: &Config,
        mut warm: impl FnMut(&ResourceConfig, StoreOptions) -> Option<Warm>,
    ) -> Result<Fleet, FleetError> {
        let clusters = clusters::connect(client, config).await?;
        let mut resolved = Vec::with_capacity(config.resources.len());
        for (i, rc) in config.resources.iter().enumerate() {
            let cluster = clusters
                .iter()
                .find(|c| c.name == rc.cluster)
                .expect("validation checked the resource's cluster");
            // A remote cluster is resolved in the background (see `start`), with a deadline
            // per attempt: one that accepts connections and never answers must not hold up
            // start-up.
            let found = match rc.cluster.is_empty() {
                true => Some(resolve(&cluster.client, config, i, rc).await?),
                false => None,
            };
            resolved.push((i, rc, cluster.clone(), found));
        }

        let initial_lists = Arc::new(tokio::sync::Semaphore::new(INITIAL_LISTS));
        let mut caches = Vec::with_capacity(resolved.len());
        let mut tasks: Vec<_> = clusters
            .iter()
            .map(|c| tokio::spawn(c.clone().probe()))
            .collect();
        for (i, rc, cluster, found) in resolved {
            let options = Pipeline::store_options(&config.change_log, rc);
            let restored = rc
                .cluster
                .is_empty()
                .then(|| warm(rc, options.clone()))
                .flatten();
            let (store, resume) = match restored {
                Some(w) => (w.store, w.scopes),
                None => (Writer::new(options), BTreeMap::new()),
            };
            let pipeline = Pipeline::with_store(rc, store).with_limits(&config.limits);
            let cache = Arc::new(ResourceCache {
                name: rc.name.clone(),
                cluster: rc.cluster.clone(),
                resolved: std::sync::OnceLock::new(),
                fallback: start::fallback_api_resource(rc),
                store: Arc::new(pipeline.store.as_reader()),
                status: scope::StatusBoard::default(),
            });
            let start = start::Starter {
                rc: rc.clone(),
                cluster,
                cache: cache.clone(),
                pipeline,
                initial_lists: initial_lists.clone(),
                resume: Arc::new(resume),
            };
            match found {
                Some((ar, caps)) => tasks.extend(start.start(ar, caps)),
                None => tasks.push(tokio::spawn(start.run_when_resolved(config.clone(), i))),
            }
            caches.push(cache);
        }
        Ok(Fleet {
            caches,
            clusters,
            tasks: Mutex::new(tasks),
        })
    }

    /// The cache configured under `name` in the default cluster.
    pub fn cache(&self, name: &str) -> Option<&Arc<ResourceCache>> {
        self.cache_in("", name)
    }

    /// The cache configured under `name` in `cluster` (empty: the default cluster).
    pub fn cache_in(&self, cluster: &str, name: &str) -> Option<&Arc<ResourceCache>> {
        self.caches
            .iter()
            .find(|c| c.name == name && c.cluster == cluster)
    }

    /// The reachability of every cluster, the default one first.
    pub fn clusters(&self) -> Vec<ClusterState> {
        self.clusters.iter().map(|c| c.state()).collect()
    }

    /// Cluster `name` (empty: the default cluster): its client, reachability and heals.
    pub fn cluster(&self, name: &str) -> Option<Arc<clusters::Cluster>> {
        self.clusters.iter().find(|c| c.name == name).cloned()
    }

    /// Every cache, in config order.
    pub fn caches(&self) -> &[Arc<ResourceCache>] {
        &self.caches
    }

    /// Whether every scope of every resource that gates readiness (see
    /// [`ResourceCache::gates_readiness`]) has completed its initial list.
    pub fn is_synced(&self) -> bool {
        self.caches
            .iter()
            .filter(|c| c.gates_readiness())
            .all(|c| c.is_synced())
    }

    /// Follows [`Fleet::is_synced`]: for readiness.
    pub fn synced(&self) -> SyncedWatch {
        let gating = self.caches.iter().filter(|c| c.gates_readiness());
        SyncedWatch::new(gating.map(|c| c.synced()).collect())
    }

    /// Waits until [`Fleet::is_synced`]; returns false if `timeout` passes first.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.synced().wait_synced())
            .await
            .is_ok()
    }

    /// Stops every stream and waits until they have stopped: nothing writes to the caches
    /// after it returns (a final snapshot relies on that). The streams of a namespaceSelector's
    /// namespaces are stopped with it, without waiting.
    pub async fn stop(&self) {
        let tasks: Vec<_> = self
            .tasks
            .lock()
            .expect("fleet task list poisoned")
            .drain(..)
            .collect();
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
    }

    /// Stops every stream.
    pub fn shutdown(&self) {
        for t in self
            .tasks
            .lock()
            .expect("fleet task list poisoned")
            .drain(..)
        {
            t.abort();
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn resolve(
    client: &Client,
    config: &Config,
    index: usize,
    rc: &ResourceConfig,
) -> Result<(ApiResource, ApiCapabilities), FleetError> {
    let gvk = kube::api::GroupVersionKind::gvk(&rc.group, &rc.version, &rc.kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.map_err(|e| {
        config.error_at(
            index,
            "kind",
            &format!(
                "{} {} is not served by the cluster ({e}); check apiVersion and kind, or install its CustomResourceDefinition",
                rc.api_version, rc.kind
            ),
        )
    })?;
    if caps.scope == ResourceScope::Cluster && !matches!(rc.scope, Scope::AllNamespaces) {
        let field = match rc.scope {
            Scope::Namespaces(_) => "namespaces",
            _ => "namespaceSelector",
        };
        return Err(config
            .error_at(
                index,
                field,
                &format!("{} is cluster-scoped: remove {field}", rc.kind),
            )
            .into());
    }
    Ok((ar, caps))
}
