//! The `informerd.v1.Cache` service: Get, List, Watch and Status.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tonic::{Request, Response, Status};

use super::list::{self, ListStream};
use super::mask::Mask;
use super::query::{Query, QueryRequest};
use super::reason::{self, invalid, Reason};
use super::watch::{self, WatchSpec};
use super::{Api, Resource};
use crate::proto::{self, cache_server::Cache};
use crate::store::ObjectKey;

/// How long Get waits for `min_resource_version`, and calls wait for sync, without a deadline.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

#[tonic::async_trait]
impl Cache for Api {
    async fn get(
        &self,
        request: Request<proto::GetRequest>,
    ) -> Result<Response<proto::GetResponse>, Status> {
        let (until, req, resource) = self.open(request, |r| &r.resource)?;
        if req.name.is_empty() {
            return Err(invalid("name", "is required"));
        }
        let namespace = namespace_of(&resource, &req.namespace)?;
        let mask = Mask::parse(&req.fields)?;
        if req.wait_for_sync {
            resource.wait_synced(until).await?;
        }
        let key = ObjectKey::new(namespace, &req.name);
        let store = resource.store();
        let mut revisions = store.subscribe();
        loop {
            let revision = *revisions.borrow_and_update();
            let found = store.get(&key);
            let have = found.as_ref().map(|o| o.resource_version().to_string());
            match found {
                Some(stored)
                    if req.min_resource_version.is_empty()
                        || resource_version_at_least(
                            stored.resource_version(),
                            &req.min_resource_version,
                        ) =>
                {
                    let object = mask.render_owned(stored.to_json_value(), stored.revision(), None);
                    // The object may have changed after `revision` was read; it is then the
                    // state at its own revision (the latest: it was just read).
                    let revision = revision.max(stored.revision());
                    return Ok(Response::new(proto::GetResponse {
                        object: Some(object),
                        epoch: store.epoch(),
                        revision,
                    }));
                }
                // Deleted (or out of the filter) at the version asked for or later: that
                // version of the object never comes.
                None if req.min_resource_version.is_empty()
                    || store.deleted_at(&key).is_some_and(|rv| {
                        resource_version_at_least(&rv, &req.min_resource_version)
                    }) =>
                {
                    return Err(Reason::NotFound.status(format!(
                        "{} {key} is not in the cache: it does not exist, or the configuration's \
                         filter or selectors leave it out",
                        resource.name()
                    )))
                }
                _ => {}
            }
            let changed = tokio::time::timeout_at(until, revisions.changed()).await;
            match changed {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return Err(watch::shutting_down()),
                Err(_) => {
                    return Err(Reason::NotCaughtUp.status(format!(
                        "{} {key}: the cache has {} and was waiting for resourceVersion {} or \
                         later; retry with a longer deadline (if the object is deleted or \
                         filtered out, that version never comes)",
                        resource.name(),
                        have.map(|rv| format!("resourceVersion {rv}"))
                            .unwrap_or_else(|| "no such object".into()),
                        req.min_resource_version
                    )))
                }
            }
        }
    }

    type ListStream = ListStream;

    async fn list(
        &self,
        request: Request<proto::ListRequest>,
    ) -> Result<Response<ListStream>, Status> {
        let (until, req, resource) = self.open(request, |r| &r.resource)?;
        let query = Query::new(&resource, QueryRequest::from(&req))?;
        if req.wait_for_sync {
            resource.wait_synced(until).await?;
        }
        let chunk_size = req.chunk_size as usize;
        Ok(Response::new(list::stream(resource, query, chunk_size)))
    }

    type WatchStream = watch::WatchStream;

    async fn watch(
        &self,
        request: Request<proto::WatchRequest>,
    ) -> Result<Response<watch::WatchStream>, Status> {
        let (until, req, resource) = self.open(request, |r| &r.resource)?;
        let spec = WatchSpec::new(&resource, &req)?;
        if req.wait_for_sync {
            resource.wait_synced(until).await?;
        }
        Ok(Response::new(watch::start(resource, spec)?))
    }

    async fn status(
        &self,
        request: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::StatusResponse>, Status> {
        let req = request.into_inner();
        let resources: Vec<_> = if req.resource.is_empty() {
            self.resources().to_vec()
        } else {
            vec![self.resource(&req.resource)?]
        };
        let resources: Vec<proto::ResourceStatus> = resources.iter().map(|r| r.status()).collect();
        let memory = crate::vocab::memory::Memory::now();
        let (allocated_bytes, resident_bytes) = (memory.allocated, memory.resident);
        Ok(Response::new(proto::StatusResponse {
            version: env!("CARGO_PKG_VERSION").to_string(),
            synced: resources.iter().all(|r| r.synced),
            resources,
            allocated_bytes,
            resident_bytes,
        }))
    }
}

impl Api {
    /// What a call on one resource starts with: its deadline for waits (from the client's, or
    /// [`DEFAULT_WAIT`]), its request, and the resource the request names (`resource(req)`).
    fn open<R>(
        &self,
        request: Request<R>,
        resource: impl FnOnce(&R) -> &str,
    ) -> Result<(Instant, R, Arc<Resource>), Status> {
        let until = Instant::now() + reason::deadline(request.metadata(), DEFAULT_WAIT);
        let req = request.into_inner();
        let resource = self.resource(resource(&req))?;
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

/// Whether the cache's resourceVersion is `want` or later. resourceVersions are opaque in the
/// API, but the apiserver's (etcd's) are increasing integers, and its own watch cache compares
/// them as such; a resourceVersion that is not a number must match exactly.
fn resource_version_at_least(have: &str, want: &str) -> bool {
    match (have.parse::<u64>(), want.parse::<u64>()) {
        (Ok(have), Ok(want)) => have >= want,
        _ => have == want,
    }
}

#[cfg(test)]
mod tests {
    use super::resource_version_at_least;

    #[test]
    fn resource_versions_compare_as_numbers() {
        assert!(resource_version_at_least("120", "99"));
        assert!(resource_version_at_least("120", "120"));
        assert!(!resource_version_at_least("99", "120"));
        assert!(resource_version_at_least("abc", "abc"));
        assert!(!resource_version_at_least("abc", "abd"));
    }
}
