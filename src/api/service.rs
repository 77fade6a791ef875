//! The `informerd.v1.Cache` service: Get, List, Watch and Status.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tonic::{Request, Response, Status};

use super::authz::Rpc;
use super::limits;
use super::list::{self, ListStream};
use super::mask::Mask;
use super::query::{Query, QueryRequest};
use super::reason::{self, invalid, Reason};
use super::watch::{self, WatchSpec};
use super::{Api, Resource};
use crate::proto::{self, cache_server::Cache};
use crate::store::{self, ObjectKey};

/// How long Get waits for `min_resource_version`, and calls wait for sync, without a deadline.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

#[tonic::async_trait]
impl Cache for Api {
    async fn get(
        &self,
        request: Request<proto::GetRequest>,
    ) -> Result<Response<proto::GetResponse>, Status> {
        let caller = self.caller(request.metadata()).await?;
        let (until, req, resource) = self.open(request, |r| (&r.cluster, &r.resource))?;
        if req.name.is_empty() {
            return Err(invalid("name", "is required"));
        }
        let namespace = namespace_of(&resource, &req.namespace)?;
        self.authorize(caller.as_ref(), Rpc::Get, &resource, namespace, &req.name)
            .await?;
        let mask = Mask::parse(&req.fields)?.omit_labels(req.omit_labels);
        if req.wait_for_sync {
            resource.wait_synced(until).await?;
        }
        let key = ObjectKey::new(namespace, &req.name);
        let store = resource.store();
        let want = &req.min_resource_version;
        let found = |revision: u64| match store.get(&key) {
            Some(stored) if want.is_empty() || store::at_least(stored.resource_version(), want) => {
                let object = mask.render_stored(&stored);
                // The object may have changed after `revision` was read; it is then the
                // state at its own revision (the latest: it was just read).
                let revision = revision.max(stored.revision());
                Ok(Some(proto::GetResponse {
                    object: Some(object),
                    epoch: store.epoch(),
                    revision,
                }))
            }
            // Deleted (or out of the filter) at the version asked for or later: that version
            // of the object never comes.
            None if want.is_empty()
                || store
                    .deleted_at(&key)
                    .is_some_and(|rv| store::at_least(&rv, want)) =>
            {
                Err(Reason::NotFound.status(format!(
                    "{} {key} is not in the cache: it does not exist, or the configuration's \
                 filter or selectors leave it out",
                    resource.name()
                )))
            }
            _ => Ok(None),
        };
        let timed_out = || {
            let have = store.get(&key).map(|o| o.resource_version().to_string());
            Reason::NotCaughtUp.status(format!(
                "{} {key}: the cache has {} and was waiting for resourceVersion {want} or \
                 later; retry with a longer deadline (if the object is deleted or \
                 filtered out, that version never comes)",
                resource.name(),
                have.map(|rv| format!("resourceVersion {rv}"))
                    .unwrap_or_else(|| "no such object".into()),
            ))
        };
        let response = resource.wait_for_store(until, found, timed_out).await?;
        Ok(Response::new(response))
    }

    type ListStream = ListStream;

    async fn list(
        &self,
        request: Request<proto::ListRequest>,
    ) -> Result<Response<ListStream>, Status> {
        let caller = self.caller(request.metadata()).await?;
        let (until, req, resource) = self.open(request, |r| (&r.cluster, &r.resource))?;
        let query = Query::new(&resource, QueryRequest::from(&req))?;
        self.authorize(caller.as_ref(), Rpc::List, &resource, query.namespace(), "")
            .await?;
        let limit = usize::try_from(req.limit).map_err(|_| {
            invalid(
                "limit",
                format!("must be 0 (every match) or more, not {}", req.limit),
            )
        })?;
        let min_resource_version = list_min_resource_version(&req.min_resource_version)?;
        let slot = self.inner.limits.admit_list()?;
        if req.wait_for_sync {
            resource.wait_synced(until).await?;
        }
        if let Some(want) = min_resource_version {
            wait_for_resource_version(&resource, query.namespace(), want, until).await?;
        }
        let chunk_size = req.chunk_size as usize;
        let stream = list::stream(resource, query, chunk_size, limit).await;
        Ok(Response::new(limits::holding(stream, slot)))
    }

    type WatchStream = watch::WatchStream;

    async fn watch(
        &self,
        request: Request<proto::WatchRequest>,
    ) -> Result<Response<watch::WatchStream>, Status> {
        let caller = self.caller(request.metadata()).await?;
        let (until, req, resource) = self.open(request, |r| (&r.cluster, &r.resource))?;
        let spec = WatchSpec::new(&resource, &req)?;
        let namespace = (!req.namespace.is_empty()).then_some(req.namespace.as_str());
        let check = (self.authorize(caller.as_ref(), Rpc::Watch, &resource, namespace, "")).await?;
        let slot = self.inner.limits.admit_watch()?;
        if req.wait_for_sync {
            resource.wait_synced(until).await?;
        }
        let stream = watch::start(resource, spec, self.revoked(caller, check))?;
        Ok(Response::new(limits::holding(stream, slot)))
    }

    type WatchKeysStream = super::keys::KeyStream;

    async fn watch_keys(
        &self,
        request: Request<tonic::Streaming<proto::WatchKeysRequest>>,
    ) -> Result<Response<super::keys::KeyStream>, Status> {
        super::keys::watch_keys(self, request).await
    }

    async fn status(
        &self,
        request: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::StatusResponse>, Status> {
        // Any authenticated client: Status shows names and counts, no object.
        self.caller(request.metadata()).await?;
        let req = request.into_inner();
        let resources = self.status_resources(&req.cluster, &req.resource)?;
        let resources: Vec<proto::ResourceStatus> = resources.iter().map(|r| r.status()).collect();
        let memory = crate::vocab::memory::Memory::now();
        let (allocated_bytes, resident_bytes) = (memory.allocated, memory.resident);
        let on_demand = self.on_demand_report();
        Ok(Response::new(proto::StatusResponse {
            version: env!("CARGO_PKG_VERSION").to_string(),
            synced: self.status_synced(&req, &resources),
            resources,
            allocated_bytes,
            resident_bytes,
            on_demand: on_demand.caches,
            on_demand_stops: on_demand
                .stops
                .into_iter()
                .map(|(r, n)| (r.into(), n))
                .collect(),
            clusters: self.cluster_statuses(&req.cluster),
        }))
    }

    async fn ensure(
        &self,
        request: Request<proto::EnsureRequest>,
    ) -> Result<Response<proto::EnsureResponse>, Status> {
        super::ensure::ensure(self, request).await
    }
}

impl Api {
    /// What a call on one resource starts with: its deadline for waits (from the client's, or
    /// [`DEFAULT_WAIT`]), its request, and the resource the request names (`resource(req)`:
    /// its cluster and name).
    fn open<R>(
        &self,
        request: Request<R>,
        resource: impl FnOnce(&R) -> (&String, &String),
    ) -> Result<(Instant, R, Arc<Resource>), Status> {
        let until = Instant::now() + reason::deadline(request.metadata(), DEFAULT_WAIT);
        let req = request.into_inner();
        let (cluster, name) = resource(&req);
        let resource = self.resource(cluster, name)?;
        Ok((until, req, resource))
    }
}

/// The namespace of a request for one object: required for namespaced resources, refused for
/// cluster-scoped ones.
fn namespace_of<'a>(resource: &Resource, namespace: &'a str) -> Result<Option<&'a str>, Status> {
    match (resource.namespaced(), namespace.is_empty()) {
        (true, true) => Err(invalid(
            "namespace",
            format!("{} are namespaced: give the namespace", resource.name()),
        )),
        (false, false) => Err(invalid(
            "namespace",
            format!(
                "{} are cluster-scoped: leave namespace empty",
                resource.name()
            ),
        )),
        (false, true) => Ok(None),
        (true, false) => Ok(Some(namespace)),
    }
}

/// The `min_resource_version` of a List: none, or a resourceVersion the API server returned
/// (a number: the cache compares it with the highest it holds).
fn list_min_resource_version(rv: &str) -> Result<Option<u64>, Status> {
    if rv.is_empty() {
        return Ok(None);
    }
    rv.parse().map(Some).map_err(|_| {
        invalid(
            "min_resource_version",
            format!(
                "{rv:?} is not a resourceVersion the API server returned (a decimal number); \
                 give the one of your write, or leave it empty"
            ),
        )
    })
}

/// Waits, up to `until`, until the cache of `namespace` (None: all of the resource) holds an
/// object at resourceVersion `want` or later.
///
/// Decision: "the cache has seen `want`" is read from the objects it holds, whose
/// resourceVersions come in order on each of the fleet's streams: once one object of a scope
/// is at `want`, every earlier change of that scope is in. A write the cache never holds (of
/// another resource, of a filtered-out object, a delete) does not count, as for Get.
async fn wait_for_resource_version(
    resource: &Resource,
    namespace: Option<&str>,
    want: u64,
    until: Instant,
) -> Result<(), Status> {
    let highest = || {
        let (_, objects) = resource.store().list(namespace);
        objects
            .iter()
            .filter_map(|o| o.resource_version().parse::<u64>().ok())
            .max()
    };
    let seen = |_| Ok((highest() >= Some(want)).then_some(()));
    let timed_out = || {
        Reason::NotCaughtUp.status(format!(
            "{} in {}: the cache's highest resourceVersion is {} and the list was waiting for \
             {want} or later; retry with a longer deadline (a resourceVersion of another \
             resource, or of an object deleted or filtered out, never comes)",
            resource.name(),
            namespace.map_or("all namespaces".to_string(), |ns| format!("namespace {ns}")),
            highest().map_or("none (no objects)".to_string(), |rv| rv.to_string()),
        ))
    };
    resource.wait_for_store(until, seen, timed_out).await
}
