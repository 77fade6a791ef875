//! The largest object a scope keeps (`limits.maxObjectSize`): a larger one is skipped,
//! counted (`too_large`, the metric `informerd_scope_objects_skipped_total{reason="too_large"}`)
//! and logged with its namespace/name and size; the scope goes on serving the others.
//!
//! Decision: the size is that of the object's JSON as the cache would keep it (after the
//! transform), which is what it would cost to hold and what every client would be sent; the
//! bytes as received are not seen (objects are decoded straight from the stream, and the
//! apiserver bounds them itself: etcd refuses writes over 1.5 MiB by default). A field the
//! transform drops is never allocated, so it costs nothing to keep out.
//!
//! Decision: when an older version of the object is stored, it is removed (DELETED, at the
//! resourceVersion of the refused update), as for an object that leaves the filter: serving
//! the old version as if it were current would be a lie a client cannot detect, while a
//! DELETED is what a controller already handles. It comes back (ADDED) once a later version
//! fits.

use std::io;

use serde_json::Value;

use crate::config::LimitsConfig;
use crate::fleet::pipeline::Pipeline;

impl Pipeline {
    /// This pipeline with the process's `limits` (the size of objects it keeps).
    pub fn with_limits(mut self, limits: &LimitsConfig) -> Pipeline {
        self.max_object_size = limits.max_object_size;
        self
    }

    /// `Some(size)` when `object`'s JSON is larger than the pipeline keeps.
    pub fn oversize(&self, object: &Value) -> Option<u64> {
        oversize(object, self.max_object_size)
    }
}

/// `Some(size in bytes)` when the JSON of `object` is longer than `max` bytes.
///
/// The common case (it fits) writes nothing and stops counting at `max`: the cost is one walk
/// of the object. Only an object over the limit is measured to its end, for the log.
pub fn oversize(object: &Value, max: u64) -> Option<u64> {
    let mut bounded = Counter { bytes: 0, max };
    if serde_json::to_writer(&mut bounded, object).is_ok() {
        return None;
    }
    let mut whole = Counter {
        bytes: 0,
        max: u64::MAX,
    };
    serde_json::to_writer(&mut whole, object).ok()?;
    Some(whole.bytes)
}

/// Counts what is written; refuses to go beyond `max`.
struct Counter {
    bytes: u64,
    max: u64,
}

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes = self.bytes.saturating_add(buf.len() as u64);
        if self.bytes > self.max {
            return Err(io::Error::other("over the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::oversize;
    use crate::config::LimitsConfig;
    use crate::fleet::{Pipeline, Projected, ScopeIngest};
    use crate::store::{ChangeKind, StoreOptions, Writer};
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
            transform: Transform::identity(),
            store: Arc::new(Writer::new(StoreOptions::default())),
            max_object_size: 0,
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

    #[test]
    fn measures_the_json_an_object_is_kept_as() {
        let object = json!({"metadata": {"name": "a"}, "data": {"k": "x".repeat(100)}});
        let len = object.to_string().len() as u64;
        assert_eq!(oversize(&object, len), None, "exactly the limit fits");
        assert_eq!(oversize(&object, len - 1), Some(len));
        assert_eq!(
            oversize(&object, 10),
            Some(len),
            "the whole size, for the log"
        );
    }
}
