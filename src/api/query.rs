//! The filters of List and Watch requests (namespace, label selector, field selector, index
//! lookup) and the field mask, validated once per request and then matched on stored objects.

use bytes::Bytes;
use serde_json::Value;
use tonic::Status;

use super::reason::invalid;
use super::Resource;
use crate::filter::{FieldOp, FieldSelector, LabelSelector};
use crate::proto;
use crate::store::StoredObject;
use crate::transform::Transform;

/// The filter fields of a List or Watch request.
pub struct QueryRequest<'a> {
    pub namespace: &'a str,
    pub label_selector: &'a str,
    pub field_selector: &'a str,
    pub index: Option<&'a proto::IndexLookup>,
    pub fields: &'a [String],
}

/// List and Watch requests carry the same filter fields, under the same names.
macro_rules! query_request_from {
    ($($request:ty),*) => {$(
        impl<'a> From<&'a $request> for QueryRequest<'a> {
            fn from(r: &'a $request) -> Self {
                QueryRequest {
                    namespace: &r.namespace,
                    label_selector: &r.label_selector,
                    field_selector: &r.field_selector,
                    index: r.index.as_ref(),
                    fields: &r.fields,
                }
            }
        }
    )*};
}

query_request_from!(proto::ListRequest, proto::WatchRequest);

/// Which objects a request wants, and which of their fields.
pub struct Query {
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    /// An index of the resource (by position) and the value looked up: the explicit `index`
    /// of the request, or an `=` requirement of its field selector on an indexed path.
    index: Option<(usize, String)>,
    mask: Mask,
}

/// The fields a client asked for.
#[derive(Clone)]
pub struct Mask(Option<Transform>);

impl Mask {
    /// `fields[i]` paths; none: the whole object.
    pub fn parse(fields: &[String]) -> Result<Mask, Status> {
        if fields.is_empty() {
            return Ok(Mask(None));
        }
        Transform::new::<&str>(&[], &fields.iter().map(String::as_str).collect::<Vec<_>>())
            .map(|t| Mask(Some(t)))
            .map_err(|e| {
                let (_, index) = e.location();
                invalid(&format!("fields[{index}]"), e.detail())
            })
    }

    pub fn is_whole(&self) -> bool {
        self.0.is_none()
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
        match (&self.0, resource_version) {
            (None, None) => proto::Object {
                json: to_bytes(object),
                ..identity(object, revision, None)
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
        let rendered = identity(&object, revision, resource_version);
        if let Some(t) = &self.0 {
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

/// The proto object's identity fields and labels, read from the whole object (whatever the
/// mask keeps); `json` is left empty.
fn identity(object: &Value, revision: u64, resource_version: Option<&str>) -> proto::Object {
    let meta = object.get("metadata");
    let text = |field: &str| {
        meta.and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let labels = meta
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

impl Query {
    pub fn new(resource: &Resource, req: QueryRequest<'_>) -> Result<Query, Status> {
        let namespace = (!req.namespace.is_empty()).then(|| req.namespace.to_string());
        if namespace.is_some() && !resource.namespaced() {
            return Err(invalid(
                "namespace",
                format!(
                    "{} is cluster-scoped; leave namespace empty",
                    resource.name()
                ),
            ));
        }
        let labels =
            LabelSelector::parse(req.label_selector).map_err(|e| invalid("label_selector", e))?;
        let fields =
            FieldSelector::parse(req.field_selector).map_err(|e| invalid("field_selector", e))?;
        let mut index = None;
        for r in fields.requirements() {
            if r.field == "metadata.name" || r.field == "metadata.namespace" {
                continue;
            }
            let Some(i) = resource
                .indexes()
                .iter()
                .position(|ix| ix.expr.as_path().is_some_and(|p| p.as_str() == r.field))
            else {
                return Err(invalid(
                    "field_selector",
                    format!(
                        "field label not supported: {}; the selectable fields of {} are {}",
                        r.field,
                        resource.name(),
                        resource.selectable_fields().join(", ")
                    ),
                ));
            };
            if index.is_none() && r.op == FieldOp::Equals {
                index = Some((i, r.value.clone()));
            }
        }
        if let Some(lookup) = req.index {
            let Some(i) = resource
                .indexes()
                .iter()
                .position(|ix| ix.name == lookup.name)
            else {
                let known: Vec<&str> = resource.indexes().iter().map(|i| i.name.as_str()).collect();
                return Err(invalid(
                    "index.name",
                    format!(
                        "{} has no index {:?}; its indexes are: {}",
                        resource.name(),
                        lookup.name,
                        if known.is_empty() {
                            "none (add `indexes:` to the configuration)".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            };
            index = Some((i, lookup.value.clone()));
        }
        Ok(Query {
            namespace,
            labels,
            fields,
            index,
            mask: Mask::parse(req.fields)?,
        })
    }

    pub fn mask(&self) -> &Mask {
        &self.mask
    }

    /// Whether the object is one the request wants.
    pub fn matches(&self, resource: &Resource, object: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            let object_ns = object
                .get("metadata")
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str);
            if object_ns != Some(ns.as_str()) {
                return false;
            }
        }
        if let Some((i, value)) = &self.index {
            if !resource.indexes()[*i].expr.values(object).contains(value) {
                return false;
            }
        }
        self.labels.matches_object(object) && self.fields.matches(object)
    }

    /// The candidates (a superset of the matches, all at one revision): by index when the
    /// request names one, otherwise by namespace.
    pub fn candidates(&self, resource: &Resource) -> (u64, Vec<StoredObject>) {
        let store = resource.store();
        match &self.index {
            Some((i, value)) => store
                .list_by_index(&resource.indexes()[*i].name, value)
                .expect("the index was found in the configuration"),
            None => store.list(self.namespace.as_deref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
