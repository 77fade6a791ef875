//! Caches started and stopped at run time (`onDemand`), and how any cache's streams start.
//!
//! The static caches of the configuration start once, with the fleet ([`super::Fleet::start`]);
//! an on-demand cache is resolved through discovery when a client asks for it
//! ([`OnDemand::discover`]), prepared (its store and status exist, nothing runs:
//! [`OnDemand::prepare`]), and run ([`Prepared::run`]). Dropping the [`Running`] cache stops its
//! streams; once the API's last reference to its store goes, its memory (store, change log) is
//! released.
//!
//! What it must NOT do: decide which caches may run, when they stop, or what they are called
//! to clients: the API's `ensure` and `registry` do, within the bounds of `onDemand`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::discovery::{ApiCapabilities, ApiResource, Scope as ResourceScope};
use kube::Client;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::{scope, Pipeline, ResourceCache, INITIAL_LISTS};
use crate::config::{Config, LimitsConfig, OnDemandConfig, ResourceConfig, Scope};
use crate::store::Writer;

/// What starts a cache's streams: the client, the limits each stream applies, and the
/// semaphore of the initial lists (see [`INITIAL_LISTS`]).
pub(super) struct Streams<'a> {
    pub client: &'a Client,
    /// The client's cluster's heals ([`super::clusters::Cluster::healed`]).
    pub healed: tokio::sync::watch::Receiver<u64>,
    pub limits: &'a LimitsConfig,
    pub initial_lists: &'a Arc<Semaphore>,
}

impl Streams<'_> {
    /// The cache of `rc` over `store`, and the spec its streams run with (none started yet);
    /// the scopes of `resume` resume their watch from the resourceVersion given.
    pub(super) fn prepare(
        &self,
        rc: &ResourceConfig,
        ar: ApiResource,
        caps: &ApiCapabilities,
        store: Writer,
        resume: BTreeMap<String, String>,
    ) -> (Arc<ResourceCache>, scope::StreamSpec) {
        let pipeline = Pipeline::with_store(rc, store).with_limits(self.limits);
        let cache = Arc::new(ResourceCache {
            name: rc.name.clone(),
            cluster: rc.cluster.clone(),
            resolved: std::sync::OnceLock::from((
                ar.clone(),
                caps.scope == ResourceScope::Namespaced,
            )),
            fallback: ar.clone(),
            store: Arc::new(pipeline.store.as_reader()),
            status: scope::StatusBoard::default(),
        });
        let spec = scope::StreamSpec {
            client: self.client.clone(),
            healed: self.healed.clone(),
            api_resource: ar,
            label_selector: rc.label_selector.clone(),
            field_selector: rc.field_selector.clone(),
            shard_selector: rc.shard_selector.clone(),
            pipeline,
            status: cache.status.clone(),
            initial_lists: self.initial_lists.clone(),
            progress: Arc::new(scope::ResourceProgress::new(std::time::Instant::now())),
            resume: Arc::new(resume),
        };
        (cache, spec)
    }
}

/// What a client names to ask for a cache: a kind, or a resource (its plural).
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// A kind, e.g. `Widget`.
    Kind(&'a str),
    /// A resource, e.g. `widgets`.
    Plural(&'a str),
}

/// Why a cache cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum OnDemandError {
    /// The apiVersion is not `v1` or `group/version`.
    #[error("apiVersion {0:?} is not an apiVersion; write v1 or group/version, e.g. apps/v1")]
    ApiVersion(String),
    /// The cluster did not answer discovery (down, or unreachable from here).
    #[error(
        "cluster {cluster} did not answer discovery of {api_version} {target} ({why}); its \
         caches start once it answers: retry with backoff (Status shows the cluster's \
         reachability)"
    )]
    Unreachable {
        /// The cluster, as Status shows it.
        cluster: String,
        /// As asked.
        api_version: String,
        /// The kind or resource asked for.
        target: String,
        /// What the client said.
        why: String,
    },
    /// Discovery does not know the kind or resource.
    #[error(
        "{api_version} {target} is not served by the cluster ({why}); check apiVersion and kind \
         (or resource), or install its CustomResourceDefinition"
    )]
    NotServed {
        /// As asked.
        api_version: String,
        /// The kind or resource asked for.
        target: String,
        /// What discovery said.
        why: String,
    },
}

/// A kind as discovery resolved it.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// Group, version, kind and plural.
    pub api_resource: ApiResource,
    /// What discovery says of it (namespaced or not, verbs).
    pub capabilities: ApiCapabilities,
}

impl Resolved {
    /// Whether its objects live in namespaces.
    pub fn namespaced(&self) -> bool {
        self.capabilities.scope == ResourceScope::Namespaced
    }
}

/// Starts caches on demand, in any cluster (each with its own client), with the limits and
/// bounds of the configuration.
pub struct OnDemand {
    limits: LimitsConfig,
    change_log: crate::config::ChangeLogConfig,
    bounds: OnDemandConfig,
    initial_lists: Arc<Semaphore>,
}

impl OnDemand {
    /// On-demand caches for `config`; `None` when its `onDemand` section is absent.
    pub fn new(config: &Config) -> Option<OnDemand> {
        Some(OnDemand {
            limits: config.limits,
            change_log: config.change_log,
            bounds: config.on_demand.clone()?,
            initial_lists: Arc::new(Semaphore::new(INITIAL_LISTS)),
        })
    }

    /// The operator's bounds (`onDemand`).
    pub fn bounds(&self) -> &OnDemandConfig {
        &self.bounds
    }

    /// Resolves `target` of `api_version` through the discovery of `client`, the client of
    /// `cluster` (empty: the default cluster).
    pub async fn discover(
        &self,
        (cluster, client): (&str, &Client),
        api_version: &str,
        target: Target<'_>,
    ) -> Result<Resolved, OnDemandError> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) if !g.is_empty() && !v.is_empty() => (g, v),
            None if !api_version.is_empty() => ("", api_version),
            _ => return Err(OnDemandError::ApiVersion(api_version.to_string())),
        };
        // Decision: an answer of the apiserver (an error status, or a group without the kind)
        // is about the kind; anything else (connection refused, a timeout) is about the cluster.
        let not_served = |what: &str, e: kube::Error| match e {
            kube::Error::Api(_) | kube::Error::Discovery(_) => OnDemandError::NotServed {
                api_version: api_version.to_string(),
                target: what.to_string(),
                why: e.to_string(),
            },
            other => OnDemandError::Unreachable {
                cluster: crate::config::ClusterConfig::display(cluster).to_string(),
                api_version: api_version.to_string(),
                target: what.to_string(),
                why: other.to_string(),
            },
        };
        let (api_resource, capabilities) = match target {
            Target::Kind(kind) => {
                let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
                kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(|e| not_served(kind, e))?
            }
            Target::Plural(plural) => {
                let gv = kube::core::GroupVersion::gv(group, version);
                let found = kube::discovery::pinned_group(client, &gv)
                    .await
                    .map_err(|e| not_served(plural, e))?;
                found
                    .versioned_resources(version)
                    .into_iter()
                    .find(|(ar, _)| ar.plural == plural)
                    .ok_or_else(|| OnDemandError::NotServed {
                        api_version: api_version.to_string(),
                        target: plural.to_string(),
                        why: "no such resource".into(),
                    })?
            }
        };
        Ok(Resolved {
            api_resource,
            capabilities,
        })
    }

    /// The configuration of the on-demand cache `name` of `resolved` in `cluster` (empty: the
    /// default cluster) and `namespaces` (empty: every namespace, or a cluster-scoped kind):
    /// the filter and transform of `onDemand`, no selectors, no indexes.
    pub fn resource_config(
        &self,
        (cluster, name): (&str, &str),
        resolved: &Resolved,
        namespaces: &[String],
    ) -> ResourceConfig {
        let ar = &resolved.api_resource;
        ResourceConfig {
            cluster: cluster.to_string(),
            name: name.to_string(),
            api_version: ar.api_version.clone(),
            group: ar.group.clone(),
            version: ar.version.clone(),
            kind: ar.kind.clone(),
            scope: if namespaces.is_empty() {
                Scope::AllNamespaces
            } else {
                Scope::Namespaces(namespaces.to_vec())
            },
            label_selector: None,
            field_selector: None,
            shard_selector: None,
            filter: self.bounds.filter.clone(),
            transform: self.bounds.transform.clone(),
            indexes: Vec::new(),
            allow_secrets: self.bounds.allow_secrets,
        }
    }

    /// The cache of `rc`, empty, its streams (with the client of `cluster`, `rc`'s) not
    /// started: the API may decide not to run it.
    pub fn prepare(
        &self,
        cluster: &super::clusters::Cluster,
        rc: ResourceConfig,
        resolved: &Resolved,
    ) -> Prepared {
        let streams = Streams {
            client: &cluster.client,
            healed: cluster.healed(),
            limits: &self.limits,
            initial_lists: &self.initial_lists,
        };
        let store = Writer::new(Pipeline::store_options(&self.change_log, &rc));
        let (cache, spec) = streams.prepare(
            &rc,
            resolved.api_resource.clone(),
            &resolved.capabilities,
            store,
            BTreeMap::new(),
        );
        Prepared { cache, spec, rc }
    }
}

/// An on-demand cache whose streams have not started.
pub struct Prepared {
    /// The cache (empty, not synced).
    pub cache: Arc<ResourceCache>,
    spec: scope::StreamSpec,
    rc: ResourceConfig,
}

impl Prepared {
    /// Starts its streams.
    pub fn run(self) -> Running {
        let tasks = super::start::spawn_streams(self.spec, &self.rc.scope);
        tracing::info!(cluster = crate::config::ClusterConfig::display(&self.rc.cluster),
            resource = %self.rc.name, kind = %self.rc.kind, "on-demand cache started");
        Running {
            cache: self.cache,
            tasks,
        }
    }
}

/// An on-demand cache with its streams running; dropping it stops them (and releases their
/// pipeline, whose writer holds the store's memory).
pub struct Running {
    /// The cache its streams fill.
    pub cache: Arc<ResourceCache>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        tracing::info!(cluster = crate::config::ClusterConfig::display(&self.cache.cluster),
            resource = %self.cache.name, "on-demand cache stopped");
    }
}
