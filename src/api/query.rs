//! The filters of List and Watch requests (namespace, label selector, field selector, index
//! lookup, shard) and their field mask, validated once per request and then matched on stored objects.

use serde_json::Value;
use tonic::Status;

use super::mask::Mask;
use super::reason::invalid;
use super::Resource;
use crate::filter::Shard;
use crate::filter::{FieldOp, FieldSelector, LabelSelector, Requirement, StringsExpr};
use crate::proto;
use crate::store::{Pages, StoredObject};

/// The filter fields of a List or Watch request.
pub struct QueryRequest<'a> {
    pub namespace: &'a str,
    pub label_selector: &'a str,
    pub field_selector: &'a str,
    pub index: Option<&'a proto::IndexLookup>,
    pub fields: &'a [String],
    pub shard_selector: &'a str,
    pub omit_labels: bool,
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
                    shard_selector: &r.shard_selector,
                    omit_labels: r.omit_labels,
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
    /// of the request, an `=` requirement of its field selector on an indexed path, or the
    /// label index's key of an equality of its label selector.
    index: Option<(usize, String)>,
    /// The lookup is the label index's, derived from the namespace and the label selector,
    /// which `matches` checks anyway: its keys need not be computed again per object.
    index_implied: bool,
    /// The label index's lookup is the whole request (one namespace, one label equality, no
    /// field selector): every candidate matches, and none is checked again.
    index_answers: bool,
    /// `shard_selector`: only the objects of this shard.
    shard: Option<Shard>,
    mask: Mask,
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
            index = Some((index_named(resource, lookup)?, lookup.value.clone()));
        }
        let index_implied = index.is_none();
        if index_implied {
            index = label_lookup(resource, namespace.as_deref(), &labels);
        }
        // Decision: the label index keys objects by namespace and one label, as of the
        // revision the candidates are read at, so a request that asks no more than that needs
        // no check per candidate (issue 34: a List of 5 pods should cost 5 objects' rendering).
        let shard = match req.shard_selector {
            "" => None,
            expression => Some(Shard::parse(expression).map_err(|e| invalid("shard_selector", e))?),
        };
        let index_answers = index_implied
            && index.is_some()
            && labels.requirements().len() == 1
            && fields.requirements().is_empty()
            && shard.is_none();
        Ok(Query {
            namespace,
            labels,
            fields,
            index,
            index_implied,
            index_answers,
            shard,
            mask: Mask::parse(req.fields)?.omit_labels(req.omit_labels),
        })
    }

    /// The namespace the request is limited to, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
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
        if let Some((i, value)) = self.index.as_ref().filter(|_| !self.index_implied) {
            if !resource.indexes()[*i].expr.values(object).contains(value) {
                return false;
            }
        }
        if self.shard.as_ref().is_some_and(|s| !s.contains(object)) {
            return false;
        }
        self.labels.matches_object(object) && self.fields.matches(object)
    }

    /// Whether a stored object is in the request's shard (if any), its field read alone.
    fn in_shard(&self, stored: &StoredObject) -> bool {
        let Some(shard) = &self.shard else {
            return true;
        };
        if shard.by_namespace() {
            return shard.contains_value(stored.key().namespace().unwrap_or_default());
        }
        match stored.decode_at(&["metadata", "uid"]) {
            Some(Value::String(uid)) => shard.contains_value(&uid),
            _ => shard.contains_value(""),
        }
    }

    /// The candidate decoded, if it matches: its labels are read first without decoding the
    /// rest of the object, so the candidates a label selector rules out are never decoded
    /// whole (issue 12: a controller's `List(InNamespace, MatchingLabelsSelector)` per
    /// reconcile); [`Query::matches`] then checks everything. For every pass over
    /// [`Query::candidates`]: List, a Watch's initial state, a WatchKeys resync.
    pub fn decode_if_matches(&self, resource: &Resource, stored: &StoredObject) -> Option<Value> {
        if self.index_answers {
            return Some(stored.to_json_value());
        }
        if !self.labels_match(stored) {
            return None;
        }
        let object = stored.to_json_value();
        self.matches(resource, &object).then_some(object)
    }

    /// Whether `stored`'s labels match the label selector, its labels decoded alone.
    fn labels_match(&self, stored: &StoredObject) -> bool {
        if self.labels.requirements().is_empty() {
            return true;
        }
        let labels = stored.decode_at(&["metadata", "labels"]);
        self.labels
            .matches(&labels.as_ref().and_then(Value::as_object))
    }

    /// Whether a candidate of [`Query::candidates`] is one the request wants, reading no more
    /// of it than the request's filters need: nothing when the label index answers the request,
    /// its namespace from its key, its labels decoded alone, and the whole object only for a
    /// field selector. The index the candidates came from is not checked again: the store
    /// keeps each object under the values of the index's expression, as of the revision the
    /// candidates were read at (issue 34: a `List` of 5 pods should cost 5 renderings).
    pub fn wants(&self, stored: &StoredObject) -> bool {
        if self.index_answers {
            return true;
        }
        if let Some(ns) = &self.namespace {
            if stored.key().namespace() != Some(ns.as_str()) {
                return false;
            }
        }
        if !self.labels_match(stored) || !self.in_shard(stored) {
            return false;
        }
        self.fields.requirements().is_empty() || self.fields.matches(&stored.to_json_value())
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

    /// [`Query::candidates`] to be read a page at a time, at the store's current revision
    /// (`store/pages.rs`): a watch's initial state and a key queue's resync.
    pub fn pages(&self, resource: &Resource) -> Pages {
        let store = resource.store();
        match &self.index {
            Some((i, value)) => store
                .pages_by_index(&resource.indexes()[*i].name, value)
                .expect("the index was found in the configuration"),
            None => store.pages(self.namespace.as_deref()),
        }
    }
}

/// The position of the index an explicit `index` lookup names.
fn index_named(resource: &Resource, lookup: &proto::IndexLookup) -> Result<usize, Status> {
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
    Ok(i)
}

/// The label index's lookup for a label selector, when the resource has a label index and the
/// selector an equality (or a set of one value) the index can answer: then the candidates are
/// the objects with that label, not every object of the namespace. Decision: the index keys a
/// label by namespace, so only a List of one namespace (or of a cluster-scoped resource) uses
/// it; one of every namespace visits them all, as before.
fn label_lookup(
    resource: &Resource,
    namespace: Option<&str>,
    labels: &LabelSelector,
) -> Option<(usize, String)> {
    let i = resource
        .indexes()
        .iter()
        .position(|ix| ix.expr.is_labels())?;
    if namespace.is_none() && resource.namespaced() {
        return None;
    }
    labels.requirements().iter().find_map(|r| {
        let (key, value) = match r {
            Requirement::Equals(k, v) => (k, v),
            Requirement::In(k, values) if values.len() == 1 => (k, values.first()?),
            _ => return None,
        };
        Some((i, StringsExpr::label_key(namespace, key, value)))
    })
}
