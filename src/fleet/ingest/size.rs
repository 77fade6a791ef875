//! The largest object a scope keeps (`limits.maxObjectSize`): a larger one is skipped,
//! counted (`too_large`, the metric `informerd_scope_objects_skipped_total{reason="too_large"}`)
//! and logged with its namespace/name and size; the scope goes on serving the others.
//!
//! Decision: the size is the object's encoded size in the store, measured by the store's
//! encoder while it encodes the object (`Writer::apply_within`), not by a walk of its own: the
//! object's own encoding plus every string, key and shape it references, each counted in full
//! at every use, shared or not. It is what the object costs to keep, independent of what else
//! the store holds, and close to its JSON after the transform for the large objects the limit
//! is for (a large object is large because of its strings, counted byte for byte; quotes,
//! commas and repeated keys are not counted). An object made of many small typed values
//! (timestamps, UUIDs, IPs: a few bytes each encoded) can be several times larger as JSON
//! than its encoded size, so the default's promise that a kept object fits a client's 4 MiB
//! message holds for objects large by their strings, which is what large objects are in
//! practice (ConfigMaps, annotations, CRDs' specs). The bytes as received are not seen (objects are
//! decoded straight from the stream, and the apiserver bounds them itself: etcd refuses
//! writes over 1.5 MiB by default). A field the transform drops is never allocated, so it
//! costs nothing to keep out.
//!
//! Decision: when an older version of the object is stored, it is removed (DELETED, at the
//! resourceVersion of the refused update), as for an object that leaves the filter: serving
//! the old version as if it were current would be a lie a client cannot detect, while a
//! DELETED is what a controller already handles. It comes back (ADDED) once a later version
//! fits.

use crate::config::LimitsConfig;
use crate::fleet::ingest::ScopeIngest;
use crate::fleet::pipeline::Pipeline;
use crate::store::ObjectKey;

impl Pipeline {
    /// This pipeline with the process's `limits` (the size of objects it keeps).
    pub fn with_limits(mut self, limits: &LimitsConfig) -> Pipeline {
        self.max_object_size = limits.max_object_size;
        self
    }
}

impl ScopeIngest {
    /// Counts and logs an object the store refused for its size (`size`: its encoded size).
    pub(super) fn too_large(&mut self, key: &ObjectKey, size: u64) {
        self.counters.too_large += 1;
        tracing::warn!(object = %key, size, limit = self.pipeline.max_object_size,
            "object larger than limits.maxObjectSize; not kept (raise the limit, or drop \
             its large fields with a transform)");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::runtime::watcher::Event;
    use serde_json::json;

    use crate::config::LimitsConfig;
    use crate::fleet::{Pipeline, Projected, ScopeIngest};
    use crate::store::{ChangeKind, StoreError, StoreOptions, Writer};
    use crate::transform::Transform;

    fn config_map(name: &str, rv: &str, data: usize) -> Projected {
        Projected::from_value(json!({
            "metadata": {"namespace": "a", "name": name, "uid": name, "resourceVersion": rv},
            "data": {"k": "x".repeat(data)}
        }))
    }

    /// An object over the limit is skipped and counted while the others are kept; a stored
    /// older version is removed (DELETED at the refused update's resourceVersion), and the
    /// object comes back once a later version fits.
    #[test]
    fn an_object_over_the_limit_is_skipped_and_its_stale_version_removed() {
        let limits = LimitsConfig {
            max_object_size: 1000,
            ..LimitsConfig::default()
        };
        let pipeline = Pipeline {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            filter: None,
            shard: None,
            transform: Transform::identity(),
            store: Arc::new(Writer::new(StoreOptions::default())),
            max_object_size: 0,
            secret_data: crate::fleet::secret_data::SecretData::NotSecrets,
        }
        .with_limits(&limits);
        let store = pipeline.store.as_reader();
        let mut scope = ScopeIngest::new(pipeline, Some("a".into()));
        scope.handle(Event::Init);
        scope.handle(Event::InitApply(config_map("small", "1", 10)));
        scope.handle(Event::InitApply(config_map("big", "2", 2000)));
        scope.handle(Event::InitApply(config_map("grows", "3", 10)));
        scope.handle(Event::InitDone);
        assert_eq!(scope.counters.too_large, 1);
        let names = |store: &crate::store::Store| {
            let (_, objects) = store.list(None);
            let mut names: Vec<String> = objects.iter().map(|o| o.key().to_string()).collect();
            names.sort();
            names
        };
        assert_eq!(names(&store), ["a/grows", "a/small"]);

        let before = store.revision();
        scope.handle(Event::Apply(config_map("grows", "4", 2000)));
        assert_eq!(scope.counters.too_large, 2);
        assert_eq!(names(&store), ["a/small"]);
        let deleted = store.changes_since(before).unwrap();
        assert_eq!(deleted.len(), 1);
        assert_eq!(deleted[0].kind, ChangeKind::Deleted);
        assert_eq!(store.deleted_at(&deleted[0].key).as_deref(), Some("4"));

        scope.handle(Event::Apply(config_map("grows", "5", 10)));
        assert_eq!(names(&store), ["a/grows", "a/small"]);
    }

    /// The limit is on the encoded size: an object's strings count byte for byte, whatever
    /// the store already holds; the same object fits or not whatever came before it.
    #[test]
    fn the_encoded_size_is_measured_and_does_not_depend_on_what_is_stored() {
        let store = Writer::new(StoreOptions::default());
        let object = |name: &str, data: &str| json!({"metadata": {"namespace": "a", "name": name}, "data": {"k": data}});
        let payload = "x".repeat(5000);
        let refused = store
            .apply_within(object("one", &payload), 4999)
            .unwrap_err();
        let StoreError::TooLarge { key, size, max } = refused else {
            panic!("{refused:?}")
        };
        assert_eq!((key.as_str(), max), ("a/one", 4999));
        assert!((5000..5100).contains(&size), "{size}");
        assert_eq!(store.as_reader().stats().objects, 0);
        assert_eq!(
            store.as_reader().stats().interned_strings,
            0,
            "nothing left"
        );

        let fits = size;
        assert!(store.apply_within(object("one", &payload), fits).is_ok());
        // A second object with the same (now shared) string is as large.
        let again = store.apply_within(object("two", &payload), fits - 1);
        assert!(matches!(again, Err(StoreError::TooLarge { size, .. }) if size == fits));
        assert_eq!(store.as_reader().stats().objects, 1);
    }
}
