//! How one resource's streams start: at once when discovery has resolved it, or, for a remote
//! cluster that did not answer at start-up, once it does (discovery retried with backoff, the
//! wait shown in Status as the scope [`DISCOVERY`]).
//!
//! It must not decide which scopes a resource has (that is the configuration's `Scope`) nor run
//! a stream (that is `scope/`).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::discovery::{ApiCapabilities, ApiResource, Scope as ResourceScope};
use tokio::task::JoinHandle;

use super::clusters::{resolve_in_background, Cluster};
use super::{resolve, scope, Pipeline, ResourceCache};
use crate::config::{ClusterConfig, Config, ResourceConfig, Scope};
use crate::fleet::ScopeState;

/// The status label of a resource waiting for its cluster's discovery: not a namespace name
/// (parentheses are not allowed in one), so it cannot collide with a scope.
pub const DISCOVERY: &str = "(discovery)";
/// How long one discovery of a remote resource may take.
const DISCOVERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What one resource's streams need, before discovery has answered.
pub(super) struct Starter {
    pub rc: ResourceConfig,
    pub cluster: Arc<Cluster>,
    pub cache: Arc<ResourceCache>,
    pub pipeline: Pipeline,
    pub initial_lists: Arc<tokio::sync::Semaphore>,
    pub resume: Arc<BTreeMap<String, String>>,
}

impl Starter {
    /// Starts the streams of the resource as discovery resolved it, and returns them.
    ///
    /// Decision: synchronous, so that a resource resolved at start-up has every scope on its
    /// status board (Listing, or SyncedFromSnapshot for a warm restart) when `Fleet::start`
    /// returns: Status and the tests read the scopes at once.
    pub fn start(self, ar: ApiResource, caps: ApiCapabilities) -> Vec<JoinHandle<()>> {
        let namespaced = caps.scope == ResourceScope::Namespaced;
        let _ = self.cache.resolved.set((ar.clone(), namespaced));
        let spec = scope::StreamSpec {
            client: self.cluster.client.clone(),
            healed: self.cluster.healed(),
            api_resource: ar,
            label_selector: self.rc.label_selector.clone(),
            field_selector: self.rc.field_selector.clone(),
            shard_selector: self.rc.shard_selector.clone(),
            pipeline: self.pipeline,
            status: self.cache.status.clone(),
            initial_lists: self.initial_lists,
            progress: Arc::new(scope::ResourceProgress::new(std::time::Instant::now())),
            resume: self.resume,
        };
        let tasks = spawn_streams(spec, &self.rc.scope);
        tracing::info!(cluster = ClusterConfig::display(&self.rc.cluster), resource = %self.rc.name,
            kind = %self.cache.api_resource().kind, "cache started");
        tasks
    }

    /// Starts the streams as [`Starter::start`] does, and runs until they end (never, unless
    /// aborted: aborting this task aborts them).
    async fn run(self, ar: ApiResource, caps: ApiCapabilities) {
        let mut tasks = AbortOnDrop(self.start(ar, caps));
        for i in 0..tasks.0.len() {
            let _ = (&mut tasks.0[i]).await;
        }
    }

    /// Resolves the resource (`resources[index]` of `config`) in the background, showing why
    /// it waits in Status, then runs as [`Starter::run`].
    pub async fn run_when_resolved(self, config: Config, index: usize) {
        let status = self.cache.status.clone();
        let pending = |e: &String| {
            status.update(DISCOVERY, |s| {
                s.state = ScopeState::Failing;
                s.last_error = Some(format!(
                    "cluster {} has not answered discovery yet ({e}); retrying with backoff",
                    ClusterConfig::display(&self.rc.cluster)
                ));
            });
        };
        let client = self.cluster.client.clone();
        let (ar, caps) = resolve_in_background(
            std::time::Duration::from_secs(1),
            || async {
                // A cluster that accepts connections but does not answer must not hold
                // discovery for ever.
                match tokio::time::timeout(
                    DISCOVERY_TIMEOUT,
                    resolve(&client, &config, index, &self.rc),
                )
                .await
                {
                    Ok(found) => found.map_err(|e| e.to_string()),
                    Err(_) => Err(format!("no answer within {}s", DISCOVERY_TIMEOUT.as_secs())),
                }
            },
            pending,
        )
        .await;
        status.remove(DISCOVERY);
        tracing::info!(cluster = ClusterConfig::display(&self.rc.cluster), resource = %self.rc.name,
            "remote resource resolved");
        self.run(ar, caps).await;
    }
}

/// Starts the streams of `spec` over `scope`: one per namespace, one cluster-wide, or the
/// namespaceSelector's. Static and on-demand caches start theirs here.
pub(super) fn spawn_streams(spec: scope::StreamSpec, scope: &Scope) -> Vec<JoinHandle<()>> {
    match scope {
        Scope::AllNamespaces => vec![scope::spawn(spec, None)],
        Scope::Namespaces(list) => list
            .iter()
            .map(|ns| scope::spawn(spec.clone(), Some(ns.clone())))
            .collect(),
        Scope::Selector(selector) => vec![tokio::spawn(scope::run_namespace_selector(
            spec,
            selector.to_string(),
        ))],
    }
}

/// Streams that stop when their owner does (a task aborted drops this).
struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The resource as the configuration names it, until discovery answers: the plural is
/// kube-rs's guess from the kind, shown only in Status meanwhile.
pub(super) fn fallback_api_resource(rc: &ResourceConfig) -> ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk(&rc.group, &rc.version, &rc.kind);
    ApiResource::from_gvk(&gvk)
}
