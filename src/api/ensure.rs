//! The `Ensure` RPC: a client asks for a cache of a kind the configuration does not list; it
//! is resolved through discovery, checked against the operator's bounds (`onDemand`) and the
//! caller's RBAC (as a List and Watch), started (or joined), and the call returns once it has
//! synced. The reaper stops on-demand caches that have had no client for
//! `onDemand.idleTimeout`, or that outgrew `onDemand.maxObjects`.
//!
//! Decision: refusals by a bound are `PERMISSION_DENIED`/`Forbidden`, as RBAC refusals are and
//! as Kubernetes refuses a request over a ResourceQuota (403): the message names the bound
//! (`onDemand.allow`, `onDemand.namespaces`, `onDemand.maxCaches`), which only the operator
//! can change. A sync that outlasts the call's deadline is `DEADLINE_EXCEEDED`/`NotCaughtUp`:
//! the cache keeps syncing, and the next call joins it.
//!
//! Decision: one cache per (cluster, resource, set of namespaces): clients asking for the same
//! kind in the same cluster and namespaces share it; the name says which namespaces it holds,
//! the request's `cluster` which cluster (as for every other call).
//!
//! Decision: the bounds of `onDemand` apply to every cluster alike (an `allow` entry does not
//! name clusters): what informerd may read in a remote cluster is bounded there, by the RBAC
//! of the kubeconfig's user, which that cluster's operator controls. An unreachable cluster is
//! refused at once (`UNAVAILABLE`/`NotSynced`, naming it) from its probe's last answer, and a
//! discovery that does not answer is bounded by the call's deadline.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch as signal;
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use super::authz::{Caller, Rpc};
use super::reason::{self, invalid, Reason};
use super::resources::{Entry, Inserted, OnDemandReport, Resources};
use super::service::DEFAULT_WAIT;
use super::{Api, Resource};
use crate::config::{ClusterConfig, Config, OnDemandConfig};
use crate::fleet::{OnDemand, OnDemandError, Resolved, Target};
use crate::proto;
use crate::vocab::names::dns1123_label;

impl Api {
    /// Serves `Ensure` within the bounds of `config`'s `onDemand` section, resolving and
    /// starting caches with `client`, and starts the reaper of idle caches (call from within
    /// a Tokio runtime, before serving). Without that section, `Ensure` is refused.
    #[must_use]
    pub fn with_on_demand(mut self, config: &Config) -> Api {
        let Some(on_demand) = OnDemand::new(config) else {
            return self;
        };
        spawn_reaper(
            self.inner.resources.clone(),
            on_demand.bounds().clone(),
            self.inner.stop.subscribe(),
        );
        let inner = Arc::get_mut(&mut self.inner).expect("on-demand is set before serving");
        inner.on_demand = Some(Arc::new(on_demand));
        self
    }

    /// The on-demand caches running, and how many started and stopped: for metrics.
    pub fn on_demand_report(&self) -> OnDemandReport {
        self.inner.resources.report()
    }
}

/// The `Ensure` RPC.
pub(super) async fn ensure(
    api: &Api,
    request: Request<proto::EnsureRequest>,
) -> Result<Response<proto::EnsureResponse>, Status> {
    let caller = api.caller(request.metadata()).await?;
    let until = Instant::now() + reason::deadline(request.metadata(), DEFAULT_WAIT);
    let req = request.into_inner();
    let Some(on_demand) = api.inner.on_demand.clone() else {
        return Err(Reason::Forbidden.status(
            "on-demand caches are off: the configuration has no onDemand section; ask the \
             operator to add one, or to list the resource under resources",
        ));
    };
    let (target, namespaces) = request_target(&req)?;
    let (cluster, link) = api.ensure_cluster(&req.cluster, caller.is_some())?;
    let discovered = tokio::time::timeout_at(
        until,
        on_demand.discover((cluster, &link.client), &req.api_version, target),
    );
    let resolved = discovered
        .await
        .map_err(|_| {
            Reason::NotSynced.status(format!(
                "cluster {} did not answer the discovery of {} before the call's deadline; \
                 retry with backoff (Status shows the cluster's reachability)",
                ClusterConfig::display(cluster),
                req.api_version
            ))
        })?
        .map_err(|e| match e {
            OnDemandError::ApiVersion(_) => invalid("api_version", e),
            OnDemandError::NotServed { .. } => Reason::NotFound.status(e.to_string()),
            OnDemandError::Unreachable { .. } => Reason::NotSynced.status(e.to_string()),
        })?;
    check_bounds(on_demand.bounds(), &resolved, &namespaces)?;
    let name = cache_name(&resolved, &namespaces);
    if api.inner.resources.is_configured(cluster, &name) {
        return Err(invalid(
            "kind",
            format!("{name} is a resource of the configuration: use it without Ensure"),
        ));
    }
    let asked = Asked {
        caller: caller.as_ref(),
        namespaces: &namespaces,
    };
    let (resource, started) = match api.inner.resources.lookup(cluster, &name) {
        Some(resource) => {
            asked.authorize(api, &resource).await?;
            (resource, false)
        }
        None => {
            let wanted = Wanted {
                link: &link,
                cluster,
                name: &name,
                resolved: &resolved,
            };
            start(api, &on_demand, wanted, asked).await?
        }
    };
    // Decision: a call waiting for the sync is a client of the cache (in Status's `clients`),
    // so that a sync longer than idleTimeout does not stop it under the call.
    let _waiting = resource.watching();
    resource.wait_synced(until).await.map_err(|_| {
        Reason::NotCaughtUp.status(format!(
            "{name} has not synced before the call's deadline ({}); it keeps syncing: call \
             Ensure again, with a longer deadline",
            pending(&resource)
        ))
    })?;
    Ok(Response::new(proto::EnsureResponse {
        resource: name,
        started,
    }))
}

/// What a call naming the on-demand cache `shown`, stopped for `why`, is told.
pub(super) fn stopped_message(shown: &str, why: &str) -> String {
    let what = if why == super::resources::STOPPED_MAX_OBJECTS {
        "it held more objects than onDemand.maxObjects allows; Ensure fewer namespaces, or \
         ask the operator to raise onDemand.maxObjects"
    } else {
        "no client used it for onDemand.idleTimeout; call Ensure again"
    };
    format!("{shown} was an on-demand cache, stopped ({why}): {what}")
}

/// The scopes of `resource` and their states, e.g. `team-a: Listing`.
fn pending(resource: &Resource) -> String {
    let scopes = resource.status().scopes;
    let states: Vec<String> = scopes
        .iter()
        .map(|s| format!("{}: {}", s.scope, s.state))
        .collect();
    states.join(", ")
}

/// What the request names (a kind or a resource), and its namespaces, sorted.
fn request_target(req: &proto::EnsureRequest) -> Result<(Target<'_>, Vec<String>), Status> {
    if req.api_version.is_empty() {
        return Err(invalid(
            "api_version",
            "is required: v1 or group/version, e.g. example.com/v1",
        ));
    }
    let target = match (req.kind.is_empty(), req.resource.is_empty()) {
        (false, true) => Target::Kind(&req.kind),
        (true, false) => Target::Plural(&req.resource),
        (true, true) => return Err(invalid("kind", "give the kind (or the resource)")),
        (false, false) => {
            return Err(invalid(
                "resource",
                "give the kind or the resource, not both",
            ))
        }
    };
    let mut namespaces = req.namespaces.clone();
    namespaces.sort();
    namespaces.dedup();
    for ns in &namespaces {
        dns1123_label(ns).map_err(|e| invalid("namespaces", format!("{ns:?}: {e}")))?;
    }
    Ok((target, namespaces))
}

/// Whether the operator's bounds allow a cache of `resolved` in `namespaces`.
fn check_bounds(
    bounds: &OnDemandConfig,
    resolved: &Resolved,
    namespaces: &[String],
) -> Result<(), Status> {
    let ar = &resolved.api_resource;
    bounds
        .allows_kind(&ar.group, &ar.kind)
        .map_err(|e| Reason::Forbidden.status(e))?;
    let ops = &resolved.capabilities.operations;
    if !(ops.contains(&"list".to_string()) && ops.contains(&"watch".to_string())) {
        return Err(invalid(
            "kind",
            format!("{} cannot be listed and watched, so not cached", ar.kind),
        ));
    }
    if !resolved.namespaced() {
        if !namespaces.is_empty() {
            return Err(invalid(
                "namespaces",
                format!("{} is cluster-scoped: leave namespaces empty", ar.kind),
            ));
        }
        return Ok(());
    }
    bounds
        .allows_namespaces(namespaces)
        .map_err(|e| Reason::Forbidden.status(e))
}

/// The name clients use: `PLURAL.GROUP` (`PLURAL` for the core group), with `/NS1+NS2` when
/// the cache holds some namespaces only.
fn cache_name(resolved: &Resolved, namespaces: &[String]) -> String {
    let ar = &resolved.api_resource;
    let base = if ar.group.is_empty() {
        ar.plural.clone()
    } else {
        format!("{}.{}", ar.plural, ar.group)
    };
    if namespaces.is_empty() {
        base
    } else {
        format!("{base}/{}", namespaces.join("+"))
    }
}

/// Who asks, for which namespaces (empty: every namespace).
#[derive(Clone, Copy)]
struct Asked<'a> {
    caller: Option<&'a Caller>,
    namespaces: &'a [String],
}

impl Asked<'_> {
    /// Authorizes the call as a List and Watch of `resource`, in each namespace asked for.
    async fn authorize(&self, api: &Api, resource: &Arc<Resource>) -> Result<(), Status> {
        if self.namespaces.is_empty() {
            api.authorize(self.caller, Rpc::Watch, resource, None, "")
                .await?;
        }
        for ns in self.namespaces {
            api.authorize(self.caller, Rpc::Watch, resource, Some(ns), "")
                .await?;
        }
        Ok(())
    }
}

/// The cache a call wants started: its cluster (and that cluster's client), name and kind.
struct Wanted<'a> {
    link: &'a crate::fleet::clusters::Cluster,
    cluster: &'a str,
    name: &'a str,
    resolved: &'a Resolved,
}

/// Starts the cache `wanted` (or joins it, when another call started it meanwhile); whether
/// this call started it.
async fn start(
    api: &Api,
    on_demand: &OnDemand,
    wanted: Wanted<'_>,
    asked: Asked<'_>,
) -> Result<(Arc<Resource>, bool), Status> {
    let Wanted {
        link,
        cluster,
        name,
        resolved,
    } = wanted;
    let max = on_demand.bounds().max_caches;
    let registry = &api.inner.resources;
    let shown = crate::fleet::qualified(cluster, name);
    let full = |running: usize| {
        Reason::Forbidden.status(format!(
            "{shown}: {running} on-demand caches run, the most onDemand.maxCaches ({max}) allows; \
             retry once one has stopped (after onDemand.idleTimeout without a client), or ask \
             the operator to raise it"
        ))
    };
    if registry.on_demand_count() >= max {
        return Err(full(registry.on_demand_count()));
    }
    // A new cache is the largest new work a client can ask for: refused above maxMemory, as
    // new Lists and Watches are (a cache already running is joined whatever the memory).
    api.inner.limits.admit_cache()?;
    let rc = on_demand.resource_config((cluster, name), resolved, asked.namespaces);
    let prepared = on_demand.prepare(link, rc, resolved);
    let (stop, stopped) = signal::channel(false);
    let resource = Arc::new(Resource::start(prepared.cache.clone(), Vec::new(), stopped));
    // Authorized before any stream starts: a refused caller costs the apiserver nothing.
    if let Err(refused) = asked.authorize(api, &resource).await {
        stop.send_replace(true);
        return Err(refused);
    }
    let entry = Entry::new(resource, asked.namespaces.to_vec(), stop, prepared.run());
    match registry.insert((cluster, name), entry, max) {
        Inserted::Started(resource) => Ok((resource, true)),
        Inserted::Joined(resource) => Ok((resource, false)),
        Inserted::Full(running) => Err(full(running)),
    }
}

/// Every so often (a quarter of `idleTimeout`, between 100ms and 5s), stops the idle and
/// oversized caches; stops them all when the API stops.
fn spawn_reaper(
    registry: Arc<Resources>,
    bounds: OnDemandConfig,
    mut stop: signal::Receiver<bool>,
) {
    let tick = (bounds.idle_timeout / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                () = tokio::time::sleep(tick) => {}
            }
            for (name, why) in registry.reap(bounds.idle_timeout, bounds.max_objects) {
                tracing::info!(resource = %name, reason = why, "on-demand cache stopped");
            }
        }
        registry.clear();
    });
}

#[cfg(test)]
mod tests {
    use kube::discovery::{ApiCapabilities, ApiResource, Scope};

    use super::*;
    use crate::config::parse;

    fn resolved(group: &str, kind: &str, plural: &str, scope: Scope) -> Resolved {
        let api_version = if group.is_empty() {
            "v1".to_string()
        } else {
            format!("{group}/v1")
        };
        Resolved {
            api_resource: ApiResource {
                group: group.into(),
                version: "v1".into(),
                api_version,
                kind: kind.into(),
                plural: plural.into(),
            },
            capabilities: ApiCapabilities {
                scope,
                subresources: Vec::new(),
                operations: vec!["list".into(), "watch".into()],
            },
        }
    }

    fn bounds(section: &str) -> OnDemandConfig {
        let text = format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nonDemand:\n{section}");
        parse("t.yaml", &text)
            .expect("valid")
            .on_demand
            .expect("set")
    }

    #[test]
    fn names_say_resource_group_and_namespaces() {
        let deployments = resolved("apps", "Deployment", "deployments", Scope::Namespaced);
        assert_eq!(cache_name(&deployments, &[]), "deployments.apps");
        let two = ["a".to_string(), "b".to_string()];
        assert_eq!(cache_name(&deployments, &two), "deployments.apps/a+b");
        let nodes = resolved("", "Node", "nodes", Scope::Cluster);
        assert_eq!(cache_name(&nodes, &[]), "nodes");
    }

    #[test]
    fn requests_name_one_target() {
        let request = |kind: &str, resource: &str, cluster: &str| proto::EnsureRequest {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            resource: resource.into(),
            namespaces: vec!["b".into(), "a".into(), "b".into()],
            cluster: cluster.into(),
        };
        let ok = request("Deployment", "", "east");
        let (target, namespaces) = request_target(&ok).expect("valid");
        assert!(matches!(target, Target::Kind("Deployment")));
        assert_eq!(namespaces, ["a", "b"]);
        for (bad, field) in [
            (request("Deployment", "deployments", ""), "resource"),
            (request("", "", ""), "kind"),
        ] {
            let refused = request_target(&bad).expect_err("refused");
            assert_eq!(refused.code(), tonic::Code::InvalidArgument);
            assert!(refused.message().starts_with(field), "{refused:?}");
        }
    }

    #[test]
    fn bounds_refuse_with_permission_denied_naming_the_bound() {
        let bounds = bounds("  allow: [{group: apps, kinds: [Deployment]}]\n  namespaces: [a]\n");
        let deployments = resolved("apps", "Deployment", "deployments", Scope::Namespaced);
        assert!(check_bounds(&bounds, &deployments, &["a".into()]).is_ok());
        let outside = check_bounds(&bounds, &deployments, &["b".into()]).unwrap_err();
        assert_eq!(outside.code(), tonic::Code::PermissionDenied);
        assert!(
            outside.message().contains("onDemand.namespaces"),
            "{outside:?}"
        );
        let jobs = resolved("batch", "Job", "jobs", Scope::Namespaced);
        let kind = check_bounds(&bounds, &jobs, &["a".into()]).unwrap_err();
        assert_eq!(Reason::of(&kind), Some(Reason::Forbidden));
        assert!(kind.message().contains("onDemand.allow"), "{kind:?}");
    }
}
