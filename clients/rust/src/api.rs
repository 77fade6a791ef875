//! [`Api`]: Get, List and Watch of one resource of the sidecar in kube-rs's shapes, decoding the
//! objects into a k8s-openapi type or a [`kube::api::DynamicObject`]. Requests take kube-rs's
//! own [`ListParams`] and [`watcher::Config`]; an option a shared cache cannot honour is an
//! [`Error::Unsupported`] that names it, never a silently different answer.
//!
//! Reads are served from the sidecar's cache, as a client-go lister or a kube-rs reflector
//! `Store` serves them: they see a write of the caller's moments after the apiserver accepted
//! it. [`Api::get_at_least`] waits for a given resourceVersion (read your own writes).

use std::{fmt, marker::PhantomData};

use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{ListParams, ObjectList, TypeMeta, VersionMatch};
use kube::core::ListMeta;
use kube::runtime::watcher;
use kube::Resource;
use serde::de::DeserializeOwned;
use tonic::transport::Channel;

use crate::proto::{
    self, cache_client::CacheClient, watch_request, EventType, GetRequest, ListRequest,
    ResumeToken, WatchRequest,
};
use crate::{Error, Token};

mod metadata;

use metadata::{default_fields, keys_only_json};
pub use metadata::{IDENTITY_ONLY, METADATA_FIELDS};

/// One resource of the sidecar (its `resources[].name` in the sidecar's configuration, e.g.
/// `pods`), in one namespace or all, read as `K`.
///
/// Decision: the field mask belongs to the handle ([`Api::fields`]), not to each call, so that
/// a reflector's store and the Gets beside it see the same stripped objects.
pub struct Api<K> {
    cache: CacheClient<Channel>,
    resource: String,
    namespace: String,
    fields: Vec<String>,
    /// The sidecar's cluster name (`clusters[].name`); empty: the sidecar's own cluster.
    cluster: String,
    /// Sent with every call when the sidecar authorizes clients.
    token: Option<Token>,
    /// Decode each object as its namespace and name alone ([`Api::keys_only`]).
    keys_only: bool,
    /// [`crate::watcher()`] relists by a delta resume ([`Api::delta_resume`]).
    pub(crate) delta: bool,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Api {
            cache: self.cache.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            fields: self.fields.clone(),
            cluster: self.cluster.clone(),
            token: self.token.clone(),
            keys_only: self.keys_only,
            delta: self.delta,
            kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Api<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .field("fields", &self.fields)
            .field("cluster", &self.cluster)
            .field("type", &std::any::type_name::<K>())
            .finish()
    }
}

/// Where a [`Api::watch`] starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// From the current revision: only changes after now.
    Now,
    /// The current state as `ADDED` events, one `SYNCED` event, then the changes.
    InitialState,
    /// Exactly the changes after this token.
    Since(ResumeToken),
    /// A delta resume: the current state less what the client holds (objects it holds at
    /// their current resourceVersion are not sent), `SYNCED` with [`Change::gone`], then the
    /// changes. For a token the sidecar refuses (`Expired`, `EpochChanged`) or another replica.
    Held(crate::held::Held),
}

/// One event of [`Api::watch`].
#[derive(Debug, Clone)]
pub struct Change<K> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `SYNCED`.
    pub kind: EventType,
    /// The object, decoded; `None` for `BOOKMARK` and `SYNCED`.
    pub object: Option<K>,
    /// The event's (epoch, revision): resume from it after handling the event, except for the
    /// `ADDED` events of an initial state (see the proto).
    pub token: ResumeToken,
    /// On the `SYNCED` of a delta resume ([`Start::Held`]): the key hashes
    /// ([`crate::held::key_hash`]) of the held objects that are gone; remove them.
    pub gone: Vec<u64>,
    /// The object's `metadata.resourceVersion` as the sidecar sent it ("" without an object),
    /// also when `K` does not keep it ([`Api::keys_only`]).
    pub resource_version: String,
}

impl<K> Api<K>
where
    K: Resource + DeserializeOwned,
{
    /// Every namespace of `resource` (and the only choice for a cluster-scoped one).
    pub fn all(cache: CacheClient<Channel>, resource: &str) -> Self {
        Self::namespaced(cache, resource, "")
    }

    /// `resource` in `namespace`.
    pub fn namespaced(cache: CacheClient<Channel>, resource: &str, namespace: &str) -> Self {
        Api {
            cache,
            resource: resource.to_string(),
            namespace: namespace.to_string(),
            fields: default_fields::<K>(),
            cluster: String::new(),
            token: None,
            keys_only: false,
            delta: false,
            kind: PhantomData,
        }
    }

    /// Only these fields of each object (paths like `spec.nodeName` or
    /// `metadata.labels["app"]`; identity fields always come): the rest of `K` is left at its
    /// default, so a reconciler must not read a field it did not ask for. No paths: the whole
    /// object.
    #[must_use]
    pub fn fields<S: Into<String>>(mut self, paths: impl IntoIterator<Item = S>) -> Self {
        self.fields = paths.into_iter().map(Into::into).collect();
        self
    }

    /// Reads `resource` from the sidecar's remote cluster `cluster` (its `clusters[].name`)
    /// instead of the cluster the sidecar runs in. Each cluster's cache has its own revisions:
    /// a resume token of one is refused by another (`EpochChanged`).
    #[must_use]
    pub fn cluster(mut self, cluster: &str) -> Self {
        self.cluster = cluster.to_string();
        self
    }

    /// Sends `token` with every call (`server.authorization: kubernetes`).
    #[must_use]
    pub fn token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }

    /// `message` as a request, with the token if there is one.
    fn request<T>(&self, message: T) -> Result<tonic::Request<T>, tonic::Status> {
        let request = tonic::Request::new(message);
        match &self.token {
            Some(token) => token.authorize(request),
            None => Ok(request),
        }
    }

    /// WatchKeys on this handle's resource, namespace and cluster, with its token:
    /// `subscription`'s `resource`, `namespace` and `cluster` are set from the handle (see
    /// [`crate::keys::watch_keys`] for the stream and its acker).
    pub async fn watch_keys(
        &self,
        subscription: crate::proto::KeysSubscription,
    ) -> Result<(tonic::Streaming<crate::proto::KeyEvent>, crate::keys::Acker), Error> {
        let subscription = crate::proto::KeysSubscription {
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            cluster: self.cluster.clone(),
            ..subscription
        };
        crate::keys::subscribe(&mut self.cache.clone(), subscription, self.token.as_ref())
            .await
            .map_err(|s| self.status("WatchKeys", s))
    }

    /// The resource's name in the sidecar's configuration.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The handle's namespace; empty: every namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The object `name` (in the handle's namespace), once the cache has synced.
    pub async fn get(&self, name: &str) -> Result<K, Error> {
        self.get_at_least(name, "").await
    }

    /// Like [`Api::get`], `None` when there is no such object.
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, Error> {
        match self.get(name).await {
            Ok(object) => Ok(Some(object)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The object `name` at `resource_version` or later: what a write of the caller returned,
    /// read back from the cache once it has arrived (the sidecar waits up to 30 s, then fails
    /// with `NotCaughtUp`). An empty `resource_version` is [`Api::get`].
    pub async fn get_at_least(&self, name: &str, resource_version: &str) -> Result<K, Error> {
        self.get_in(&self.namespace, name, resource_version).await
    }

    /// [`Api::get_at_least`] in `namespace`, whatever the handle's (for [`crate::ReadThrough`]
    /// over every namespace, whose keys name theirs).
    pub(crate) async fn get_in(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<K, Error> {
        let request = GetRequest {
            resource: self.resource.clone(),
            cluster: self.cluster.clone(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            min_resource_version: resource_version.to_string(),
            fields: self.fields.clone(),
            wait_for_sync: true,
            // A typed read decodes the JSON alone (`Api::decode`).
            omit_labels: true,
        };
        let response = self
            .cache
            .clone()
            .get(self.request(request).map_err(|s| self.status("Get", s))?)
            .await
            .map_err(|s| self.status("Get", s))?
            .into_inner();
        let object = response.object.unwrap_or_default();
        self.decode(&object)
    }

    /// The objects that match `params`, all at one revision of the cache, once it has synced.
    /// Label and field selectors are the sidecar's (a field selector works on
    /// `metadata.name`, `metadata.namespace` and the fields it indexes with a `path` index;
    /// another is its `Invalid` error, naming the field). `limit` returns the first matches in
    /// the sidecar's order; when more remain, `metadata.continue_` is
    /// [`CONTINUE_NOT_SUPPORTED`], so that a loop paging as against the apiserver does not take
    /// the page for the whole list, and fails (as below) when it passes the token back.
    /// Refused, as [`Error::Unsupported`], because a shared cache cannot honour them:
    /// `continue_token` and a `resource_version` other than `"0"`.
    pub async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, Error>
    where
        K: Clone,
    {
        let request = ListRequest {
            cluster: self.cluster.clone(),
            ..list_request(&self.resource, &self.namespace, &self.fields, params)?
        };
        let chunks = self
            .cache
            .clone()
            .list(self.request(request).map_err(|s| self.status("List", s))?)
            .await
            .map_err(|s| self.status("List", s))?
            .into_inner();
        let mut objects: Vec<proto::Object> = chunks
            .map_ok(|chunk| futures::stream::iter(chunk.objects.into_iter().map(Ok)))
            .try_flatten()
            .try_collect()
            .await
            .map_err(|s| self.status("List", s))?;
        let mut metadata = ListMeta::default();
        if let Some(limit) = params.limit.filter(|&l| l > 0) {
            // The request asked for one more than the limit: whether it came says whether
            // more remain.
            if objects.len() > limit as usize {
                objects.truncate(limit as usize);
                metadata.continue_ = Some(CONTINUE_NOT_SUPPORTED.into());
            }
        }
        let items = objects
            .iter()
            .map(|o| self.decode(o))
            .collect::<Result<_, _>>()?;
        Ok(ObjectList {
            // Kubernetes' generic list: the sidecar's resources need not be known types.
            types: TypeMeta {
                api_version: "v1".into(),
                kind: "List".into(),
            },
            metadata,
            items,
        })
    }

    /// The changes of the objects that match `config`'s selectors, from `start`. The stream
    /// ends after an error status (an `Err` of [`Error::Status`]); an object that does not
    /// decode is an `Err` of [`Error::Decode`] and the stream goes on. [`crate::watcher()`]
    /// resumes and relists on top of it.
    pub async fn watch(
        &self,
        config: &watcher::Config,
        start: Start,
    ) -> Result<impl Stream<Item = Result<Change<K>, Error>> + Send + 'static, Error>
    where
        K: Send + 'static,
    {
        let request = self.watch_request(config, start)?;
        let events = self
            .cache
            .clone()
            .watch(self.request(request).map_err(|s| self.status("Watch", s))?)
            .await
            .map_err(|s| self.status("Watch", s))?
            .into_inner();
        let api = self.clone();
        Ok(events.map(move |event| {
            let event = event.map_err(|s| api.status("Watch", s))?;
            let token = ResumeToken {
                epoch: event.epoch,
                revision: event.revision,
            };
            let object = event.object.as_ref().map(|o| api.decode(o)).transpose()?;
            Ok(Change {
                kind: event.r#type(),
                object,
                token,
                gone: crate::held::gone(&event.gone),
                resource_version: event.object.map(|o| o.resource_version).unwrap_or_default(),
            })
        }))
    }

    fn watch_request(&self, config: &watcher::Config, start: Start) -> Result<WatchRequest, Error> {
        // Decision: kube-rs's list semantic, initial list strategy, page size, timeout and
        // bookmarks shape how kube-rs talks to the apiserver, not which events a watcher
        // delivers: each of them yields the same Init..InitDone, Apply/Delete here. The
        // initial state is the cache's at one revision, once every scope has synced, which is
        // what a client-go informer's first list gives too.
        let start = match start {
            Start::Now => None,
            Start::InitialState => Some(watch_request::Start::SendInitialState(true)),
            Start::Since(token) => Some(watch_request::Start::Since(token)),
            Start::Held(held) => Some(watch_request::Start::Held(held.into_proto())),
        };
        Ok(WatchRequest {
            resource: self.resource.clone(),
            cluster: self.cluster.clone(),
            namespace: self.namespace.clone(),
            label_selector: config.label_selector.clone().unwrap_or_default(),
            field_selector: config.field_selector.clone().unwrap_or_default(),
            fields: self.fields.clone(),
            start,
            wait_for_sync: true,
            omit_labels: true,
            ..WatchRequest::default()
        })
    }

    /// The object of a key alone (its namespace and name): what [`crate::watcher()`] yields
    /// as the `Delete` of a held object a delta resume says is gone.
    pub(crate) fn decode_key(&self, namespace: &str, name: &str) -> Result<K, Error> {
        let object = proto::Object {
            namespace: namespace.to_string(),
            name: name.to_string(),
            ..proto::Object::default()
        };
        self.with_keys_only().decode(&object)
    }

    fn with_keys_only(&self) -> Self {
        Api {
            keys_only: true,
            ..self.clone()
        }
    }

    fn decode(&self, object: &proto::Object) -> Result<K, Error> {
        let keys;
        let json = if self.keys_only {
            keys = keys_only_json(object);
            keys.as_slice()
        } else {
            &object.json[..]
        };
        serde_json::from_slice(json).map_err(|source| Error::Decode {
            resource: self.resource.clone(),
            key: if object.namespace.is_empty() {
                object.name.clone()
            } else {
                format!("{}/{}", object.namespace, object.name)
            },
            type_name: std::any::type_name::<K>(),
            source,
        })
    }

    fn status(&self, call: &'static str, status: tonic::Status) -> Error {
        Error::Status {
            call,
            resource: self.resource.clone(),
            status: Box::new(status),
        }
    }
}

/// The `continue_` of a list that `limit` cut short (the token controller-runtime's cache
/// gives too): informerd offers no continuation, and passing it back as `continue_token` is
/// refused with [`Error::Unsupported`].
pub const CONTINUE_NOT_SUPPORTED: &str = "continue-not-supported";

/// The `List` request for kube-rs's [`ListParams`] (see [`Api::list`]): `limit` asks for one
/// object more, so that [`Api::list`] knows whether more remain; `continue_token` is refused
/// because a List is one snapshot of the cache, not a paged read, and a chosen
/// `resource_version` because a cache serves its current state. `timeout` is for the apiserver
/// and not used.
fn list_request(
    resource: &str,
    namespace: &str,
    fields: &[String],
    params: &ListParams,
) -> Result<ListRequest, Error> {
    if params.continue_token.is_some() {
        return Err(Error::Unsupported {
            option: "ListParams.continue_token",
            fix: "informerd returns the matches of one List at one revision and offers no \
                  continuation; list without limit to read every match, or list from the \
                  apiserver to page",
        });
    }
    if params.version_match == Some(VersionMatch::Exact) {
        return Err(Error::Unsupported {
            option: "ListParams.version_match = Exact",
            fix: "a cache serves its current state, not a past one; list from the apiserver \
                  for an exact resourceVersion",
        });
    }
    if !matches!(params.resource_version.as_deref(), None | Some("" | "0")) {
        return Err(Error::Unsupported {
            option: "ListParams.resource_version",
            fix: "a cache serves its current state; leave resource_version unset (or \"0\"), \
                  and read a write of your own back with Api::get_at_least",
        });
    }
    Ok(ListRequest {
        resource: resource.to_string(),
        namespace: namespace.to_string(),
        label_selector: params.label_selector.clone().unwrap_or_default(),
        field_selector: params.field_selector.clone().unwrap_or_default(),
        fields: fields.to_vec(),
        wait_for_sync: true,
        omit_labels: true,
        // Decision: kube-rs's `Some(0)` is the apiserver's "no limit", as informerd's 0 is.
        limit: params
            .limit
            .map_or(0, |l| if l == 0 { 0 } else { i64::from(l) + 1 }),
        ..ListRequest::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(params: &ListParams) -> &'static str {
        match list_request("pods", "", &[], params) {
            Err(Error::Unsupported { option, .. }) => option,
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    #[test]
    fn list_options_a_cache_cannot_honour_are_named() {
        assert_eq!(
            refused(&ListParams::default().continue_token(CONTINUE_NOT_SUPPORTED)),
            "ListParams.continue_token"
        );
        assert_eq!(
            refused(
                &ListParams::default()
                    .at("123")
                    .matching(VersionMatch::Exact)
            ),
            "ListParams.version_match = Exact"
        );
        assert_eq!(
            refused(&ListParams::default().at("123")),
            "ListParams.resource_version"
        );
    }

    #[test]
    fn selectors_pass_through() {
        let params = ListParams::default()
            .labels("app=web")
            .fields("spec.nodeName=n1")
            .at("0");
        let request = list_request("pods", "ns", &["spec".into()], &params).unwrap();
        assert_eq!(request.label_selector, "app=web");
        assert_eq!(request.field_selector, "spec.nodeName=n1");
        assert_eq!(request.namespace, "ns");
        assert_eq!(request.fields, ["spec"]);
        assert!(request.wait_for_sync);
        assert_eq!(request.limit, 0, "no limit: every match");
    }

    #[test]
    fn limit_asks_for_one_more_to_know_whether_more_remain() {
        let limit = |params: ListParams| list_request("pods", "", &[], &params).unwrap().limit;
        assert_eq!(limit(ListParams::default().limit(10)), 11);
        assert_eq!(limit(ListParams::default().limit(0)), 0, "0: no limit");
        assert_eq!(
            limit(ListParams::default().limit(u32::MAX)),
            i64::from(u32::MAX) + 1
        );
    }
}
