//! Which cluster a request names, and how the API answers about clusters: the lookup of a
//! resource by (cluster, name), the refusal of remote clusters under per-client authorization,
//! and the clusters' part of the Status RPC.
//!
//! Decision: resume tokens need nothing of their own here: each (cluster, resource) cache has
//! its own store, whose epoch is drawn at random, so a token of one is refused by another as a
//! token of another run is (`EpochChanged`: relist), never misread.
//!
//! Decision: with `server.authorization: kubernetes`, requests for a remote cluster's resources
//! are refused (PERMISSION_DENIED). The caller's token is reviewed by the default cluster, whose
//! users and RBAC say nothing about another cluster, and asking the remote cluster's
//! SubjectAccessReview about a user it never authenticated would grant by name alone. Serve
//! remote clusters with authorization off (the socket's permissions bound who connects), or
//! run a sidecar per trust domain.

use std::sync::Arc;

use tonic::Status;

use super::reason::{invalid, Reason};
use super::{Api, Resource};
use crate::config::ClusterConfig;
use crate::fleet::{clusters::Cluster, qualified, ClusterState};
use crate::proto;

impl Api {
    /// The resource `name` of `cluster` (empty or `default`: the default cluster); the one
    /// place a request's resource is looked up. Unknown: NOT_FOUND naming what is served.
    pub(super) fn resource(&self, cluster: &str, name: &str) -> Result<Arc<Resource>, Status> {
        let cluster = ClusterConfig::canonical(cluster);
        if name.is_empty() {
            return Err(invalid(
                "resource",
                format!("is required; this sidecar serves: {}", self.names()),
            ));
        }
        if !self
            .inner
            .fleet
            .clusters()
            .iter()
            .any(|c| c.name == cluster)
        {
            return Err(self.unknown_cluster(cluster));
        }
        self.inner.resources.lookup(cluster, name).ok_or_else(|| {
            let place = match cluster {
                "" => String::new(),
                remote => format!(" in cluster {remote}"),
            };
            if let Some(why) = self.inner.resources.stopped_because(cluster, name) {
                return Reason::NotFound.status(super::ensure::stopped_message(
                    &crate::fleet::qualified(cluster, name),
                    why,
                ));
            }
            Reason::NotFound.status(format!(
                "no resource named {name:?}{place} in the configuration; this sidecar \
                     serves: {}",
                self.names()
            ))
        })
    }

    /// Every served resource, `name` for the default cluster's and `cluster/name` for the
    /// others: what a refusal lists.
    pub(super) fn names(&self) -> String {
        self.resources()
            .iter()
            .map(|r| qualified(r.cluster(), r.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn cluster_names(&self) -> String {
        self.inner
            .fleet
            .clusters()
            .iter()
            .map(|c| ClusterConfig::display(&c.name).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The resources a Status request asks for: one (of `cluster`, default the default
    /// cluster), or every one of `cluster`, or every one of every cluster when both are empty.
    pub(super) fn status_resources(
        &self,
        cluster: &str,
        resource: &str,
    ) -> Result<Vec<Arc<Resource>>, Status> {
        if !resource.is_empty() {
            return Ok(vec![self.resource(cluster, resource)?]);
        }
        if cluster.is_empty() {
            return Ok(self.resources().to_vec());
        }
        let known = ClusterConfig::canonical(cluster);
        if !self.inner.fleet.clusters().iter().any(|c| c.name == known) {
            // The same refusal as for a resource of an unknown cluster.
            return self.resource(cluster, "-").map(|r| vec![r]);
        }
        Ok(self
            .resources()
            .iter()
            .filter(|r| r.cluster() == known)
            .cloned()
            .collect())
    }

    /// The cluster an `Ensure` names (canonical: `""` for the default one) and its client:
    /// NOT_FOUND when unknown, PERMISSION_DENIED when remote and `authorized` (the caller's
    /// authorization is checked, see the decision above), UNAVAILABLE (`NotSynced`) naming it
    /// when its last probe was not answered, so that the call fails at once rather than at
    /// its deadline.
    pub(super) fn ensure_cluster<'a>(
        &self,
        cluster: &'a str,
        authorized: bool,
    ) -> Result<(&'a str, Arc<Cluster>), Status> {
        let cluster = ClusterConfig::canonical(cluster);
        let Some(link) = self.inner.fleet.cluster(cluster) else {
            return Err(self.unknown_cluster(cluster));
        };
        let state = link.state();
        if authorized {
            refuse_remote(cluster, "an on-demand cache")?;
        }
        if !state.reachable {
            return Err(Reason::NotSynced.status(format!(
                "cluster {cluster} is unreachable ({}); its on-demand caches start once it \
                 answers: retry with backoff",
                state.message
            )));
        }
        Ok((cluster, link))
    }

    /// NOT_FOUND for a cluster the configuration does not name, listing those it does.
    fn unknown_cluster(&self, cluster: &str) -> Status {
        Reason::NotFound.status(format!(
            "no cluster named {cluster:?} in the configuration; this sidecar serves the \
             clusters: {} (empty: the default cluster)",
            self.cluster_names()
        ))
    }

    /// `StatusResponse.synced`: whether the resources `req` asks for have synced.
    ///
    /// Decision: asked for no cluster and no resource, it is readiness's answer (`/readyz`,
    /// gRPC health): the configuration's resources of the default cluster, so that a remote
    /// cluster down (or an on-demand cache syncing) does not make clients that wait for
    /// `synced` (Go's `WaitForSynced`, Python's `wait_for_sync`) wait for what they did not
    /// ask for. Asked for a cluster or a resource, it is theirs: every one listed has synced.
    pub(super) fn status_synced(
        &self,
        req: &proto::StatusRequest,
        listed: &[proto::ResourceStatus],
    ) -> bool {
        if req.cluster.is_empty() && req.resource.is_empty() {
            return self.inner.fleet.is_synced();
        }
        listed.iter().all(|r| r.synced)
    }

    /// The clusters' part of the Status RPC: every cluster, or the one named.
    pub(super) fn cluster_statuses(&self, cluster: &str) -> Vec<proto::ClusterStatus> {
        let known = ClusterConfig::canonical(cluster);
        self.inner
            .fleet
            .clusters()
            .into_iter()
            .filter(|c| cluster.is_empty() || c.name == known)
            .map(cluster_status)
            .collect()
    }
}

/// Refuses a remote cluster's resource to a caller whose authorization is checked (see the
/// decision above).
pub(super) fn refuse_remote_under_authorization(resource: &Resource) -> Result<(), Status> {
    refuse_remote(resource.cluster(), resource.name())
}

/// Refuses `what` (a resource's name, or the kind an `Ensure` asks for) of `cluster` to a
/// caller whose authorization is checked, unless `cluster` is the default one.
fn refuse_remote(cluster: &str, what: &str) -> Result<(), Status> {
    if cluster.is_empty() {
        return Ok(());
    }
    Err(Reason::Forbidden.status(format!(
        "{what} is cached from cluster {cluster}, and server.authorization is on: the default \
         cluster's RBAC cannot grant reads of another cluster, so informerd serves remote \
         clusters only with authorization off (ask the sidecar's operator)"
    )))
}

fn cluster_status(c: ClusterState) -> proto::ClusterStatus {
    let since = c
        .since
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    proto::ClusterStatus {
        name: ClusterConfig::display(&c.name).to_string(),
        reachable: c.reachable,
        message: c.message,
        since_seconds: since,
    }
}
