//! The metadata-only side of [`Api`]: `Api::<PartialObjectMeta<K>>`, what the sidecar sends
//! for it ([`METADATA_FIELDS`]), and the smallest mask a `Controller`'s store can use
//! ([`IDENTITY_ONLY`]).

use std::marker::PhantomData;

use kube::core::PartialObjectMeta;
use kube::Resource;

use super::Api;

impl<K: Resource> Api<K> {
    /// The same handle reading each object's metadata only, as kube-rs's
    /// [`PartialObjectMeta`] (see [`crate::metadata_watcher`]): `Api::<PartialObjectMeta<K>>`
    /// made from this one. A handle without a field mask gets [`METADATA_FIELDS`]; one with a
    /// mask keeps it (`fields(["metadata"])` for the whole metadata, annotations included).
    #[must_use]
    pub fn metadata(self) -> Api<PartialObjectMeta<K>> {
        let fields = if self.fields.is_empty() {
            default_fields::<PartialObjectMeta<K>>()
        } else {
            self.fields
        };
        Api {
            cache: self.cache,
            resource: self.resource,
            namespace: self.namespace,
            fields,
            cluster: self.cluster,
            token: self.token,
            keys_only: self.keys_only,
            delta: self.delta,
            kind: PhantomData,
        }
    }
}

impl<K> Api<K> {
    /// The same handle, whose [`crate::watcher()`] relists by a delta resume: when its token is
    /// refused (`Expired`, `EpochChanged`: a sidecar restarted cold, or another replica), it
    /// sends what it has delivered (a hash of each object's key and resourceVersion) and yields
    /// `Apply` for the objects that changed or appeared and `Delete` (of the key alone) for those
    /// that are gone, instead of a new `Init`..`InitDone` of every object. The watcher then keeps
    /// each delivered object's key and two hashes (about 60 bytes an object).
    ///
    /// Decision: an option, off by default. A reflector after `Apply`/`Delete` holds what it
    /// would after a relist, but the watcher's own memory grows with the objects, and
    /// [`Api::keys_only`] handles are used precisely to keep a controller's memory small. A
    /// sidecar that refuses the request (one without delta resume: `Invalid`; held entries over
    /// its `limits.maxRequestSize`: `RequestTooLarge`) is asked for a full relist instead, and is
    /// not asked again.
    #[must_use]
    pub fn delta_resume(mut self) -> Self {
        self.delta = true;
        self
    }

    /// The same handle, each object it reads decoded as its namespace and name alone: no uid,
    /// resourceVersion, generation, apiVersion or kind, and nothing else the mask keeps. For the
    /// store of a `Controller` whose reconciler reads the object through the sidecar
    /// ([`crate::ReadThrough`]): kube-rs's `Controller` looks its objects up by namespace and
    /// name, and its store keeps each object's strings twice (in the object and in the map's
    /// key), so every identity string left out is saved twice per object (the
    /// `controller_store` benchmark prints what it saves). The field mask becomes
    /// [`IDENTITY_ONLY`], as nothing more is read.
    ///
    /// Decision: an option of the handle, not a type of its own: `Controller::for_stream` and
    /// `reflector` take any `kube::Resource`, and `PartialObjectMeta<K>` with an `ObjectMeta`
    /// of two fields is the smallest one kube-rs accepts.
    #[must_use]
    pub fn keys_only(mut self) -> Self {
        self.keys_only = true;
        self.fields = IDENTITY_ONLY.iter().map(|f| (*f).to_string()).collect();
        self
    }
}

/// The JSON a [`Api::keys_only`] handle decodes `object` from: its namespace and name, read
/// from the proto object's identity fields.
pub(super) fn keys_only_json(object: &crate::proto::Object) -> Vec<u8> {
    let mut metadata = serde_json::Map::new();
    metadata.insert("name".into(), object.name.clone().into());
    if !object.namespace.is_empty() {
        metadata.insert("namespace".into(), object.namespace.clone().into());
    }
    serde_json::to_vec(&serde_json::json!({ "metadata": metadata }))
        .expect("a JSON object of strings")
}

/// The field mask a new handle starts with: none (the whole object), except for a type that
/// kube-rs reads with metadata-only requests (`PartialObjectMeta<K>`, as kube 5's
/// `Api::<PartialObjectMeta<K>>` does), which gets [`METADATA_FIELDS`].
pub(super) fn default_fields<K: Resource>() -> Vec<String> {
    if K::metadata_api() {
        METADATA_FIELDS.iter().map(|f| (*f).to_string()).collect()
    } else {
        Vec::new()
    }
}

/// The field mask of `Api::<PartialObjectMeta<K>>` and [`Api::metadata`] when none is given: what `Controller` and a
/// reconciler of metadata read (labels for selectors and mappers, ownerReferences for
/// `owns_stream`, deletionTimestamp and finalizers for `kube::runtime::finalizer`); the
/// identity (apiVersion, kind, name, namespace, uid, resourceVersion, generation) always comes.
///
/// Decision: not the whole `metadata`. Its annotations can hold KBs per object
/// (`kubectl.kubernetes.io/last-applied-configuration`), which is what a metadata store is
/// meant not to keep; ask for an annotation by name (`metadata.annotations["key"]`) when the
/// controller reads it. `creationTimestamp`, `generateName` and the rest are left out too.
pub const METADATA_FIELDS: [&str; 4] = [
    "metadata.labels",
    "metadata.ownerReferences",
    "metadata.deletionTimestamp",
    "metadata.finalizers",
];

/// A field mask of the identity alone (apiVersion, kind, name, namespace, uid,
/// resourceVersion, generation), which the sidecar always sends: asking for one of them asks
/// for nothing more. For the store of a `Controller`'s own objects over
/// [`crate::metadata_watcher`]: the `Controller` needs only their keys, and the reconciler
/// reads the whole object through the sidecar ([`crate::ReadThrough`]).
///
/// Decision: the smallest store a kube-rs `Controller` can have (kube's `Store` keeps a
/// `PartialObjectMeta`'s whole `ObjectMeta` struct, a few hundred bytes, whatever it holds);
/// its labels alone cost about as much again (a `BTreeMap` node and two strings each), so
/// they are not in it unless asked for.
pub const IDENTITY_ONLY: [&str; 1] = ["metadata.name"];

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use tonic::transport::Endpoint;

    use super::*;
    use crate::proto::cache_client::CacheClient;

    #[tokio::test]
    async fn metadata_handles_ask_for_the_metadata_fields_unless_given_a_mask() {
        // Never connected: only the requests' masks are looked at.
        let cache = CacheClient::new(Endpoint::from_static("http://127.0.0.1:1").connect_lazy());
        let pods = || Api::<Pod>::all(cache.clone(), "pods");
        assert!(pods().fields.is_empty(), "a typed handle: the whole object");
        let meta = Api::<PartialObjectMeta<Pod>>::all(cache.clone(), "pods");
        assert_eq!(meta.fields, METADATA_FIELDS);
        assert_eq!(pods().metadata().fields, METADATA_FIELDS);
        assert_eq!(pods().fields(["metadata"]).metadata().fields, ["metadata"]);
        let light = pods().metadata().fields(IDENTITY_ONLY);
        assert_eq!(light.fields, ["metadata.name"]);
        let keys = pods().metadata().keys_only();
        assert_eq!(keys.fields, ["metadata.name"]);
        assert!(keys.clone().keys_only);
    }

    #[tokio::test]
    async fn keys_only_objects_hold_their_namespace_and_name_alone() {
        let cache = CacheClient::new(Endpoint::from_static("http://127.0.0.1:1").connect_lazy());
        let keys = Api::<Pod>::all(cache, "pods").metadata().keys_only();
        let object = crate::proto::Object {
            name: "web-0".into(),
            namespace: "shop".into(),
            uid: "5c3f0e52-0000-4000-8000-000000000001".into(),
            resource_version: "42".into(),
            json: br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"shop","uid":"5c3f0e52-0000-4000-8000-000000000001","resourceVersion":"42","generation":3}}"#.to_vec().into(),
            ..Default::default()
        };
        let decoded = keys.decode(&object).expect("decodes");
        assert_eq!(decoded.types, None);
        assert_eq!(
            decoded.metadata,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web-0".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            }
        );
        let cluster_scoped = crate::proto::Object {
            name: "node-1".into(),
            ..Default::default()
        };
        let node = keys.decode(&cluster_scoped).expect("decodes");
        assert_eq!(node.metadata.namespace, None);
    }
}
