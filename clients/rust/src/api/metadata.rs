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
            kind: PhantomData,
        }
    }
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
    }
}
