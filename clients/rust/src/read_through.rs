//! [`ReadThrough`]: the reads a reconciler makes of a kube-rs reflector `Store` (`get`,
//! `state`, `wait_until_ready`), answered by the sidecar at each call instead of from a copy
//! of every object in the controller's process. With [`crate::metadata_watcher`] feeding the
//! `Controller`, a controller then holds a few hundred bytes per object (their metadata), not
//! a typed copy of each.
//!
//! Decision: the methods are `async` and return a `Result`, unlike kube-rs's `Store`, whose
//! reads are of local memory: each is a call over the socket (a Get or a List of the sidecar's
//! cache, which is what a reflector store is too: moments behind the apiserver). Their names
//! and answers are the `Store`'s otherwise (`Option<Arc<K>>`, `Vec<Arc<K>>`), so that a
//! reconciler switches by adding `.await?`.

use std::fmt;
use std::sync::Arc;

use kube::api::ListParams;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::Resource;
use serde::de::DeserializeOwned;

use crate::proto::Reason;
use crate::{Api, Error};

/// A reflector `Store`'s reads of one resource of the sidecar (see the module documentation),
/// through an [`Api`] handle, whose namespace, field mask, cluster and token apply.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::runtime::reflector::ObjectRef;
///
/// let cache = informerd_client::connect("/run/informerd/informerd.sock").await?;
/// let pods = informerd_client::ReadThrough::new(informerd_client::Api::<Pod>::all(cache, "pods"));
/// pods.wait_until_ready().await?;
/// let pod = pods.get(&ObjectRef::<Pod>::new("web-0").within("default")).await?;
/// # let _ = pod;
/// # Ok(()) }
/// ```
pub struct ReadThrough<K> {
    api: Api<K>,
}

impl<K> Clone for ReadThrough<K> {
    fn clone(&self) -> Self {
        ReadThrough {
            api: self.api.clone(),
        }
    }
}

impl<K> fmt::Debug for ReadThrough<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadThrough")
            .field("api", &self.api)
            .finish()
    }
}

/// The keys a [`ReadThrough<K>`] takes: an `ObjectRef` of `K`, or of `PartialObjectMeta<K>`
/// (what a `Controller` over [`crate::metadata_watcher`] hands its reconciler), so that the
/// whole object of a metadata-only one is `get(&ObjectRef::from_obj(&*meta))`.
pub trait RefersTo<K> {}

impl<K: Resource> RefersTo<K> for K {}

impl<K: Resource> RefersTo<K> for PartialObjectMeta<K> {}

impl<K> ReadThrough<K>
where
    K: Resource + DeserializeOwned + Clone,
{
    /// Reads through `api`.
    pub fn new(api: Api<K>) -> Self {
        ReadThrough { api }
    }

    /// The handle it reads through.
    pub fn api(&self) -> &Api<K> {
        &self.api
    }

    /// The object `key` names, `None` when the sidecar holds none (or the key's namespace is
    /// not the handle's, as a namespaced reflector's store has no object of another). Waits
    /// until the sidecar has synced, as every read does.
    pub async fn get<R>(&self, key: &ObjectRef<R>) -> Result<Option<Arc<K>>, Error>
    where
        R: RefersTo<K> + kube::runtime::reflector::Lookup + ?Sized,
    {
        let scope = self.api.namespace();
        let namespace = match key.namespace.as_deref() {
            Some(ns) if !scope.is_empty() && ns != scope => return Ok(None),
            Some(ns) => ns,
            None => scope,
        };
        match self.api.get_in(namespace, &key.name, "").await {
            Ok(object) => Ok(Some(Arc::new(object))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every object the handle reads (one List, at one revision of the cache).
    pub async fn state(&self) -> Result<Vec<Arc<K>>, Error> {
        self.state_matching(&ListParams::default()).await
    }

    /// The objects that match `params`' selectors (kube-rs's `state_filter_selector`, with the
    /// selection made by the sidecar: only the matches cross the socket). See [`Api::list`]
    /// for the selectors it takes.
    pub async fn state_matching(&self, params: &ListParams) -> Result<Vec<Arc<K>>, Error> {
        let list = self.api.list(params).await?;
        Ok(list.items.into_iter().map(Arc::new).collect())
    }

    /// Returns once the sidecar's cache of the resource has synced (its initial lists are
    /// in), as a reflector `Store` is ready after its first `InitDone`.
    ///
    /// Decision: one List of at most one object, which the sidecar holds until it has synced
    /// (up to the call's deadline, then `NotSynced`: asked again a second later, since a
    /// cluster the sidecar cannot reach is `NotSynced` at once), rather than polling its
    /// Status. Other errors are returned.
    pub async fn wait_until_ready(&self) -> Result<(), Error> {
        loop {
            match self.api.list(&ListParams::default().limit(1)).await {
                Ok(_) => return Ok(()),
                Err(e) if e.reason() == Some(Reason::NotSynced) => {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
