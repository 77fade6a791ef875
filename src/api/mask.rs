//! The field mask of a request (`fields`), and how an object is rendered for a client: the
//! identity and labels of the proto object come from the whole object, the JSON keeps only the
//! requested fields.

use bytes::Bytes;
use serde_json::Value;
use tonic::Status;

use super::reason::invalid;
use crate::proto;
use crate::store::{JsonBatch, StoredObject};
use crate::transform::Transform;

/// The fields a client asked for, and whether it wants the proto object's `labels` map.
#[derive(Clone)]
pub struct Mask {
    fields: Option<Transform>,
    labels: bool,
}

impl Mask {
    /// `fields[i]` paths; none: the whole object. With the `labels` map.
    pub fn parse(fields: &[String]) -> Result<Mask, Status> {
        if fields.is_empty() {
            return Ok(Mask::whole());
        }
        let fields = Some(
            Transform::new::<&str>(&[], &fields.iter().map(String::as_str).collect::<Vec<_>>())
                .map_err(|e| {
                    let (_, index) = e.location();
                    invalid(&format!("fields[{index}]"), e.detail())
                })?,
        );
        Ok(Mask {
            fields,
            labels: true,
        })
    }

    /// The whole object, with the `labels` map.
    pub fn whole() -> Mask {
        Mask {
            fields: None,
            labels: true,
        }
    }

    /// The request's `omit_labels`: the proto objects' `labels` maps left empty (the labels
    /// stay in the JSON as the fields say).
    pub fn omit_labels(mut self, omit: bool) -> Mask {
        self.labels = !omit;
        self
    }

    /// Whether the JSON is the whole object.
    pub fn is_whole(&self) -> bool {
        self.fields.is_none()
    }

    /// Whether the proto objects carry the `labels` map.
    pub fn has_labels(&self) -> bool {
        self.labels
    }

    /// The proto object of a stored object, as [`Mask::render_owned`] renders it decoded: its
    /// JSON written straight from the store's encoding through the mask, its identity from the
    /// store's key and the object's `metadata.uid` and `labels`, each decoded alone (issue 34:
    /// building the whole object as a `Value` to render it took most of a `List`'s time).
    pub fn render_stored(&self, stored: &StoredObject) -> proto::Object {
        let mut json = Vec::new();
        match &self.fields {
            Some(t) => t.write_json(stored, &mut json),
            None => stored.write_json(&mut json),
        }
        proto::Object {
            json: Bytes::from(json),
            ..self.stored_identity(stored)
        }
    }

    /// [`Mask::render_stored`] with the JSON appended to `json` instead: the object's `json`
    /// is left empty, for the caller to fill with its part of the buffer.
    ///
    /// Decision: a List renders its chunk's objects into one buffer, which it cuts into their
    /// `json` once the chunk is full (`api/list.rs`). A buffer per object grew from nothing by
    /// doubling, a dozen reallocations and copies for a 2 KB pod; jemalloc's `rallocx` alone
    /// was 4% of the sidecar's time on Lists by label selector, beside the copies (perf, 8
    /// callers, issue 34). The buffer is a [`JsonBatch`], which writes the constants the
    /// objects share (an app's pods their annotations) once and copies them after that.
    pub fn render_stored_into(&self, stored: &StoredObject, json: &mut JsonBatch) -> proto::Object {
        match &self.fields {
            Some(t) => json.write_with(|out| t.write_json(stored, out)),
            None => json.write(stored),
        }
        self.stored_identity(stored)
    }

    /// The proto object of a stored object without its JSON: its identity from the store's
    /// key and the object's `metadata.uid` and `labels`, each decoded alone.
    fn stored_identity(&self, stored: &StoredObject) -> proto::Object {
        let key = stored.key();
        let uid = match stored.decode_at(&["metadata", "uid"]) {
            Some(Value::String(uid)) => uid,
            _ => String::new(),
        };
        let labels = match self
            .labels
            .then(|| stored.decode_at(&["metadata", "labels"]))
        {
            Some(Some(Value::Object(labels))) => labels
                .into_iter()
                .filter_map(|(k, v)| match v {
                    Value::String(v) => Some((k, v)),
                    _ => None,
                })
                .collect(),
            _ => Default::default(),
        };
        proto::Object {
            namespace: key.namespace().unwrap_or_default().to_string(),
            name: key.name().to_string(),
            uid,
            resource_version: stored.resource_version().to_string(),
            labels,
            revision: stored.revision(),
            json: Bytes::new(),
        }
    }

    /// The proto object: identity from the stored object, JSON of the requested fields.
    /// `resource_version` replaces the object's own (for objects that leave a watch's view:
    /// their last state at the revision of the change that removed them).
    pub fn render(
        &self,
        object: &Value,
        revision: u64,
        resource_version: Option<&str>,
    ) -> proto::Object {
        match (&self.fields, resource_version) {
            (None, None) => proto::Object {
                json: to_bytes(object),
                ..identity(object, revision, None, self.labels)
            },
            _ => self.render_owned(object.clone(), revision, resource_version),
        }
    }

    /// [`Mask::render`] of an object the caller no longer needs: the mask applies in place,
    /// without copying the object first (a masked `List` decodes each object for itself).
    pub fn render_owned(
        &self,
        mut object: Value,
        revision: u64,
        resource_version: Option<&str>,
    ) -> proto::Object {
        let rendered = identity(&object, revision, resource_version, self.labels);
        if let Some(t) = &self.fields {
            t.apply(&mut object);
        }
        if let (Some(rv), Some(meta)) = (resource_version, object.get_mut("metadata")) {
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("resourceVersion".into(), Value::String(rv.into()));
            }
        }
        proto::Object {
            json: to_bytes(&object),
            ..rendered
        }
    }
}

/// The proto object's identity fields and (with `labels`) labels, read from the whole object
/// (whatever the mask keeps); `json` is left empty.
fn identity(
    object: &Value,
    revision: u64,
    resource_version: Option<&str>,
    labels: bool,
) -> proto::Object {
    let meta = object.get("metadata");
    let text = |field: &str| {
        meta.and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let labels = meta
        .filter(|_| labels)
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    proto::Object {
        namespace: text("namespace"),
        name: text("name"),
        uid: text("uid"),
        resource_version: resource_version
            .map(str::to_string)
            .unwrap_or_else(|| text("resourceVersion")),
        labels,
        revision,
        json: Bytes::new(),
    }
}

fn to_bytes(value: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("a JSON value always serializes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreOptions, Writer};
    use informerd_store::fixtures::{all_pods, name};
    use serde_json::json;

    #[test]
    fn a_mask_keeps_its_fields_and_the_identity_comes_from_the_whole_object() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "labels": {"app": "web"}},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let mask = Mask::parse(&["status.phase".to_string()]).expect("mask");
        for rv in [None, Some("9")] {
            let borrowed = mask.render(&pod, 3, rv);
            assert_eq!(borrowed, mask.render_owned(pod.clone(), 3, rv));
            assert_eq!(
                (
                    borrowed.name.as_str(),
                    borrowed.namespace.as_str(),
                    borrowed.uid.as_str()
                ),
                ("p", "ns", "u")
            );
            assert_eq!(borrowed.resource_version, rv.unwrap_or("7"));
            assert_eq!(borrowed.labels.get("app").map(String::as_str), Some("web"));
            assert_eq!(borrowed.revision, 3);
            let json: Value = serde_json::from_slice(&borrowed.json).expect("JSON");
            assert_eq!(
                json,
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p", "namespace": "ns", "uid": "u",
                                    "resourceVersion": rv.unwrap_or("7")},
                       "status": {"phase": "Running"}})
            );
        }
        let whole = Mask::parse(&[]).expect("no mask");
        let json: Value = serde_json::from_slice(&whole.render(&pod, 3, None).json).expect("JSON");
        assert_eq!(json, pod);
    }

    /// A stored object renders exactly as its decoded value does (JSON bytes, identity,
    /// labels), whole and through masks, for every fixture pod and the controller profile of it
    /// (what a store of the benchmarks' configuration holds).
    #[test]
    fn a_stored_object_renders_as_its_decoded_value() {
        let masks = [
            vec![],
            vec!["status.phase".to_string()],
            vec![
                "metadata.labels".to_string(),
                "spec.containers[*].name".to_string(),
            ],
            vec![
                "spec.nodeName".to_string(),
                "status.conditions[*].type".to_string(),
            ],
            vec![
                "metadata.labels[\"app\"]".to_string(),
                "nothing.here".to_string(),
            ],
        ];
        let masks: Vec<Mask> = masks
            .iter()
            .map(|m| Mask::parse(m).expect("mask"))
            .collect();
        let controller = Transform::controller();
        let mut rendered = 0;
        for pod in all_pods() {
            let mut projected = pod.clone();
            controller.apply(&mut projected);
            for object in [pod.clone(), projected] {
                let store = Writer::new(StoreOptions::default());
                let change = store.apply(object).expect("apply").expect("stored");
                let stored = store.list(None).1.pop().expect("listed");
                for mask in &masks {
                    let want = mask.render_owned(stored.to_json_value(), change.revision, None);
                    let got = mask.render_stored(&stored);
                    assert_eq!(
                        String::from_utf8_lossy(&got.json),
                        String::from_utf8_lossy(&want.json),
                        "{}",
                        name(&pod)
                    );
                    assert_eq!(got, want, "{}", name(&pod));
                    rendered += 1;
                }
            }
        }
        assert!(rendered > 100, "only {rendered} renderings");
    }

    #[test]
    fn omitting_labels_leaves_the_map_empty_and_the_json_as_it_was() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "labels": {"app": "web"}}});
        let store = Writer::new(StoreOptions::default());
        store.apply(pod.clone()).expect("apply");
        let stored = store.list(None).1.pop().expect("listed");
        for fields in [vec![], vec!["metadata.labels".to_string()]] {
            let with = Mask::parse(&fields).expect("mask");
            let without = with.clone().omit_labels(true);
            assert!(with.has_labels() && !without.has_labels());
            let (a, b) = (with.render_stored(&stored), without.render_stored(&stored));
            assert_eq!(a.labels.get("app").map(String::as_str), Some("web"));
            assert!(b.labels.is_empty(), "{fields:?}");
            assert_eq!(
                proto::Object {
                    labels: a.labels.clone(),
                    ..b.clone()
                },
                a
            );
            for rv in [None, Some("9")] {
                let (a, b) = (with.render(&pod, 1, rv), without.render(&pod, 1, rv));
                assert!(b.labels.is_empty() && !a.labels.is_empty());
                assert_eq!(a.json, b.json, "the labels stay in the JSON");
            }
        }
    }
}
