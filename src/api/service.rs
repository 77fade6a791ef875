//! The `informerd.v1.Cache` service: Get, List, Watch and Status.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use prost::Message;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::{Request, Response, Status};

use super::query::{Mask, Query, QueryRequest};
use super::reason::{self, invalid, Reason};
use super::send::{send_or_give_up, GaveUp, STALL_TIMEOUT};
use super::watch::{self, WatchSpec};
use super::{Api, Resource};
use crate::proto::{self, cache_server::Cache};
use crate::store::ObjectKey;

/// How long Get waits for `min_resource_version`, and calls wait for sync, without a deadline.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// List chunks hold about this many bytes of object JSON (gRPC's default message limit is
/// 4 MiB).
pub const CHUNK_BYTES: usize = 1 << 20;

type ListStream = Pin<Box<dyn Stream<Item = Result<proto::ListResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Cache for Api {
    async fn get(
        &self,
        request: Request<proto::GetRequest>,
    ) -> Result<Response<proto::GetResponse>, Status> {
        let until = Instant::now() + reason::deadline(request.metadata(), DEFAULT_WAIT);
        let req = request.into_inner();
        let resource = self.resource(&req.resource)?;
        if req.name.is_empty() {
            return Err(invalid("name", "is required"));
        }
        let namespace = namespace_of(&resource, &req.namespace, true)?;
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
                None if req.min_resource_version.is_empty() => {
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
        let until = Instant::now() + reason::deadline(request.metadata(), DEFAULT_WAIT);
        let req = request.into_inner();
        let resource = self.resource(&req.resource)?;
        let query = Query::new(&resource, QueryRequest::from(&req))?;
        if req.wait_for_sync {
            resource.wait_synced(until).await?;
        }
        let synced = resource.is_synced();
        let epoch = resource.store().epoch();
        let (revision, candidates) = query.candidates(&resource);
        let chunk_size = req.chunk_size as usize;
        let (tx, rx) = mpsc::channel(2);
        let stop = resource.stopped();
        tokio::spawn(async move {
            let mut chunk = Vec::new();
            let mut bytes = 0;
            // A client that stops reading is let go after STALL_TIMEOUT, releasing the
            // snapshot (which keeps replaced objects alive); shutdown ends the list too.
            let send = |message: proto::ListResponse| {
                let tx = tx.clone();
                let stop = stop.clone();
                async move {
                    match send_or_give_up(&tx, Ok(message), stop).await {
                        Ok(()) => true,
                        Err(GaveUp::Stalled) => {
                            let _ = tx.try_send(Err(Reason::FellBehind.status(format!(
                                "the list was not read for {} s; list again",
                                STALL_TIMEOUT.as_secs()
                            ))));
                            false
                        }
                        Err(GaveUp::Closed | GaveUp::Stopped) => false,
                    }
                }
            };
            for stored in candidates {
                tokio::task::consume_budget().await;
                // Decoded one at a time and dropped: a list never holds decoded objects.
                let object = stored.to_json_value();
                if !query.matches(&resource, &object) {
                    continue;
                }
                let rendered = query.mask().render_owned(object, stored.revision(), None);
                bytes += rendered.encoded_len();
                chunk.push(rendered);
                // Whichever limit comes first: gRPC clients refuse messages over 4 MiB by
                // default, whatever chunk_size asks for.
                if bytes >= CHUNK_BYTES || (chunk_size > 0 && chunk.len() >= chunk_size) {
                    let message = proto::ListResponse {
                        objects: std::mem::take(&mut chunk),
                        ..Default::default()
                    };
                    bytes = 0;
                    if !send(message).await {
                        return;
                    }
                }
            }
            send(proto::ListResponse {
                objects: chunk,
                last: true,
                epoch,
                revision,
                synced,
            })
            .await;
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    type WatchStream = watch::WatchStream;

    async fn watch(
        &self,
        request: Request<proto::WatchRequest>,
    ) -> Result<Response<watch::WatchStream>, Status> {
        let until = Instant::now() + reason::deadline(request.metadata(), DEFAULT_WAIT);
        let req = request.into_inner();
        let resource = self.resource(&req.resource)?;
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

/// The namespace of a request for one object: required for namespaced resources, refused for
/// cluster-scoped ones.
fn namespace_of<'a>(
    resource: &Resource,
    namespace: &'a str,
    required: bool,
) -> Result<Option<&'a str>, Status> {
    match (resource.namespaced(), namespace.is_empty()) {
        (true, true) if required => Err(invalid(
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
        (_, true) => Ok(None),
        (_, false) => Ok(Some(namespace)),
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
