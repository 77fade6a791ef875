//! Transforms: `drop` and `keep` paths applied to every object before it is stored.
//!
//! # Paths
//!
//! Dotted fields (`spec.nodeName`), map keys in brackets with double quotes
//! (`metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`), and `[*]` for
//! every element of a list, or every value of a map (`spec.containers[*].env`: every container's
//! `env`). A path never steps into a list implicitly: `spec.containers.env` matches nothing, since
//! `containers` is a list. List indexes (`[0]`) are not supported. Bad syntax is an error that
//! names the column; see [`path`] for the grammar.
//!
//! # Semantics
//!
//! - `drop` removes the fields it names, wherever they exist; missing fields are fine. Maps and
//!   lists that a drop leaves empty stay (an empty `annotations: {}` is harmless and keeps the
//!   transform a pure function of the paths).
//! - `keep` is an allow-list projection: only the listed paths, and everything below them,
//!   survive. Objects on the way to a kept path are kept with only the kept fields in them, even
//!   when none is there (`keep: [status.phase]` leaves `status: {}` on a pod without a phase:
//!   this keeps a projection of a projection unchanged); a scalar or a list found where the path
//!   goes on into an object is removed. A list under `[*]` keeps all its elements in place
//!   (positions matter), each projected: an object element with none of the kept fields becomes
//!   `{}`, a scalar element stays as is.
//! - The identity fields are always kept and cannot be dropped: `apiVersion`, `kind`,
//!   `metadata.name`, `metadata.namespace`, `metadata.uid`, `metadata.resourceVersion` and
//!   `metadata.generation`. `generation` is there because Kubernetes controllers rely on it
//!   (`GenerationChangedPredicate`, `status.observedGeneration`), and it costs a few bytes. Labels
//!   are not forced: a label selector evaluated on the cache sees only what the transform keeps.
//! - With both, `keep` applies first, then `drop` (`keep: [metadata]`, `drop:
//!   [metadata.managedFields]`).
//! - Both are idempotent: applying a transform to its own output changes nothing.
//!
//! # Cost
//!
//! Paths are compiled once into a tree; [`Transform::apply`] walks the object once, visiting only
//! the fields the tree names (a `drop` touches nothing else; a `keep` visits the keys of the
//! objects it projects). [`Transform::seed`] applies the same transform while decoding, so that
//! the fields a transform removes are never materialised.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize as _;
use serde_json::{Map, Value};
use thiserror::Error;

use crate::vocab::path::{FieldPath, PathError, Segment};

/// The fields that every stored object keeps, whatever the transform says.
pub const IDENTITY_FIELDS: &[&[&str]] = &[
    &["apiVersion"],
    &["kind"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "uid"],
    &["metadata", "resourceVersion"],
    &["metadata", "generation"],
];

/// The `keep` paths of the "controller" profile used in the benchmarks: what a typical
/// pod-watching controller reads. Use with [`CONTROLLER_DROP`], or [`Transform::controller`].
pub const CONTROLLER_KEEP: &[&str] = &[
    "metadata",
    "spec.nodeName",
    "status.phase",
    "status.conditions",
    "status.podIP",
];

/// The `drop` paths of the "controller" profile: [`CONTROLLER_KEEP`] keeps all of `metadata`
/// but its `managedFields`.
pub const CONTROLLER_DROP: &[&str] = &["metadata.managedFields"];

/// An error in the transform paths.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TransformError {
    /// A path does not follow the syntax.
    #[error("{list}[{index}]: {source}")]
    Path {
        /// `drop` or `keep`.
        list: &'static str,
        /// The position of the path in its list.
        index: usize,
        /// What is wrong.
        source: PathError,
    },
    /// A drop path would remove an identity field.
    #[error("drop[{index}]: '{path}' would remove the identity field {field}, which every stored object keeps")]
    DropsIdentity {
        /// The position of the path in `drop`.
        index: usize,
        /// The path as written.
        path: String,
        /// The identity field it would remove, dotted.
        field: String,
    },
}

impl TransformError {
    /// `("drop" | "keep", index)`: which path of the configuration is wrong.
    pub fn location(&self) -> (&'static str, usize) {
        match self {
            TransformError::Path { list, index, .. } => (list, *index),
            TransformError::DropsIdentity { index, .. } => ("drop", *index),
        }
    }

    /// The message without the location prefix.
    pub fn detail(&self) -> String {
        match self {
            TransformError::Path { source, .. } => source.to_string(),
            TransformError::DropsIdentity { path, field, .. } => format!(
                "'{path}' would remove the identity field {field}, which every stored object keeps"
            ),
        }
    }
}

/// A compiled transform; cheap to clone and shareable between threads.
#[derive(Clone)]
pub struct Transform {
    inner: Arc<Inner>,
}

struct Inner {
    keep: Option<Node>,
    drop: Option<Node>,
    keep_paths: Vec<FieldPath>,
    drop_paths: Vec<FieldPath>,
}

impl fmt::Debug for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keep: Vec<&str> = self.inner.keep_paths.iter().map(|p| p.as_str()).collect();
        let drop: Vec<&str> = self.inner.drop_paths.iter().map(|p| p.as_str()).collect();
        f.debug_struct("Transform")
            .field("keep", &keep)
            .field("drop", &drop)
            .finish()
    }
}

impl Default for Transform {
    /// The identity transform.
    fn default() -> Self {
        Transform::identity()
    }
}

impl Transform {
    /// Compiles `drop` and `keep` paths; an empty `keep` keeps everything.
    pub fn new<S: AsRef<str>>(drop: &[S], keep: &[S]) -> Result<Transform, TransformError> {
        let parse = |list: &'static str, paths: &[S]| -> Result<Vec<FieldPath>, TransformError> {
            paths
                .iter()
                .enumerate()
                .map(|(index, p)| {
                    FieldPath::parse(p.as_ref()).map_err(|source| TransformError::Path {
                        list,
                        index,
                        source,
                    })
                })
                .collect()
        };
        let drop_paths = parse("drop", drop)?;
        let keep_paths = parse("keep", keep)?;
        for (index, path) in drop_paths.iter().enumerate() {
            if let Some(field) = IDENTITY_FIELDS.iter().find(|f| covers(path, f)) {
                return Err(TransformError::DropsIdentity {
                    index,
                    path: path.to_string(),
                    field: field.join("."),
                });
            }
        }
        let keep = (!keep_paths.is_empty()).then(|| {
            let identity = IDENTITY_FIELDS
                .iter()
                .map(|f| FieldPath::from_fields(f.iter().copied()));
            Node::compile(keep_paths.iter().cloned().chain(identity))
        });
        let drop = (!drop_paths.is_empty()).then(|| Node::compile(drop_paths.iter().cloned()));
        Ok(Transform {
            inner: Arc::new(Inner {
                keep,
                drop,
                keep_paths,
                drop_paths,
            }),
        })
    }

    /// The transform that changes nothing.
    pub fn identity() -> Transform {
        Transform::new::<&str>(&[], &[]).expect("no paths")
    }

    /// The "controller" profile of the benchmarks: keep [`CONTROLLER_KEEP`], then drop
    /// [`CONTROLLER_DROP`].
    ///
    /// ```
    /// use informerd::transform::Transform;
    /// use serde_json::json;
    ///
    /// let mut pod = json!({
    ///     "apiVersion": "v1", "kind": "Pod",
    ///     "metadata": {"name": "p", "namespace": "default", "managedFields": [{"manager": "kubectl"}]},
    ///     "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx"}]},
    ///     "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": []},
    /// });
    /// Transform::controller().apply(&mut pod);
    /// assert_eq!(pod, json!({
    ///     "apiVersion": "v1", "kind": "Pod",
    ///     "metadata": {"name": "p", "namespace": "default"},
    ///     "spec": {"nodeName": "node-1"},
    ///     "status": {"phase": "Running", "podIP": "10.0.0.7"},
    /// }));
    /// ```
    pub fn controller() -> Transform {
        Transform::new(CONTROLLER_DROP, CONTROLLER_KEEP).expect("the controller profile is valid")
    }

    /// Whether this transform changes nothing.
    pub fn is_identity(&self) -> bool {
        self.inner.keep.is_none() && self.inner.drop.is_none()
    }

    /// The `keep` paths as configured (without the identity fields).
    pub fn keep_paths(&self) -> &[FieldPath] {
        &self.inner.keep_paths
    }

    /// The `drop` paths as configured.
    pub fn drop_paths(&self) -> &[FieldPath] {
        &self.inner.drop_paths
    }

    /// Applies the transform in place: keep, then drop. Idempotent.
    pub fn apply(&self, object: &mut Value) {
        if let Some(keep) = &self.inner.keep {
            if !keep.terminal {
                keep_in(object, keep);
            }
        }
        if let Some(drop) = &self.inner.drop {
            drop_in(object, drop);
        }
    }

    /// A [`DeserializeSeed`] that decodes one object with the transform already applied: the
    /// fields that the transform removes are skipped by the decoder and never allocated. The
    /// result equals decoding the whole object and then calling [`Transform::apply`].
    ///
    /// ```
    /// use informerd::transform::Transform;
    /// use serde::de::DeserializeSeed;
    ///
    /// let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":[{}]},
    ///               "spec":{"nodeName":"n","containers":[{"name":"c"}]}}"#;
    /// let mut de = serde_json::Deserializer::from_str(text);
    /// let pod = Transform::controller().seed().deserialize(&mut de).unwrap();
    /// assert_eq!(pod["spec"], serde_json::json!({"nodeName": "n"}));
    /// assert!(pod["metadata"].get("managedFields").is_none());
    /// ```
    pub fn seed(&self) -> TransformSeed<'_> {
        TransformSeed {
            keep: self.inner.keep.as_ref(),
            drop: self.inner.drop.as_ref(),
        }
    }
}

/// Whether removing `path` removes the field `field` (the path names it or one of its parents).
fn covers(path: &FieldPath, field: &[&str]) -> bool {
    path.segments().len() <= field.len()
        && path
            .segments()
            .iter()
            .zip(field)
            .all(|(segment, name)| match segment {
                Segment::Any => true,
                Segment::Field(f) => f == name,
            })
}

/// A compiled set of paths. `terminal`: the path ends here (keep or drop the whole value).
/// Children of a terminal node are pruned. After [`Node::normalize`], every named child also
/// includes what the `[*]` child selects, so that a lookup is `field(k).or(any)`.
#[derive(Clone, Debug, Default)]
struct Node {
    terminal: bool,
    fields: Vec<(Box<str>, Node)>,
    any: Option<Box<Node>>,
}

impl Node {
    fn compile(paths: impl IntoIterator<Item = FieldPath>) -> Node {
        let mut root = Node::default();
        for path in paths {
            let mut node = &mut root;
            for segment in path.segments() {
                if node.terminal {
                    break;
                }
                node = match segment {
                    Segment::Any => node.any.get_or_insert_with(Default::default),
                    Segment::Field(name) => {
                        let at = match node.fields.iter().position(|(k, _)| **k == **name) {
                            Some(at) => at,
                            None => {
                                node.fields.push((name.as_str().into(), Node::default()));
                                node.fields.len() - 1
                            }
                        };
                        &mut node.fields[at].1
                    }
                };
            }
            node.terminal = true;
        }
        root.normalize();
        root
    }

    fn normalize(&mut self) {
        if self.terminal {
            self.fields.clear();
            self.any = None;
            return;
        }
        if let Some(any) = &mut self.any {
            any.normalize();
        }
        let any = self.any.as_deref();
        for (_, child) in &mut self.fields {
            if let Some(any) = any {
                child.merge(any);
            }
            child.normalize();
        }
    }

    fn merge(&mut self, other: &Node) {
        self.terminal |= other.terminal;
        if self.terminal {
            return;
        }
        for (name, theirs) in &other.fields {
            match self.fields.iter_mut().find(|(k, _)| k == name) {
                Some((_, mine)) => mine.merge(theirs),
                None => self.fields.push((name.clone(), theirs.clone())),
            }
        }
        if let Some(theirs) = &other.any {
            match &mut self.any {
                Some(mine) => mine.merge(theirs),
                None => self.any = Some(theirs.clone()),
            }
        }
    }

    #[inline]
    fn child(&self, key: &str) -> Option<&Node> {
        self.fields
            .iter()
            .find(|(k, _)| **k == *key)
            .map(|(_, n)| n)
            .or(self.any.as_deref())
    }
}

/// Projects `value` on `node`; returns whether it survives in its parent object (see the module
/// documentation: objects do, scalars and lists where the path goes on do not).
fn keep_in(value: &mut Value, node: &Node) -> bool {
    if node.terminal {
        return true;
    }
    match value {
        Value::Object(map) => {
            map.retain(|k, v| node.child(k).is_some_and(|n| keep_in(v, n)));
            true
        }
        Value::Array(items) => match node.any.as_deref() {
            Some(any) => {
                if !any.terminal {
                    for item in items.iter_mut() {
                        keep_element(item, any);
                    }
                }
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// Projects a list element, which stays in place whatever is left of it: an object is projected
/// (possibly to `{}`), a list is projected where the path has a `[*]` for it, anything else is
/// kept as is.
fn keep_element(item: &mut Value, node: &Node) {
    match item {
        Value::Object(_) => {
            keep_in(item, node);
        }
        Value::Array(_) if node.any.is_some() => {
            keep_in(item, node);
        }
        _ => {}
    }
}

/// Removes from `value` what `node` names.
fn drop_in(value: &mut Value, node: &Node) {
    match value {
        Value::Object(map) => {
            if node.any.is_some() {
                map.retain(|k, v| match node.child(k) {
                    Some(n) if n.terminal => false,
                    Some(n) => {
                        drop_in(v, n);
                        true
                    }
                    None => true,
                });
            } else {
                for (k, n) in &node.fields {
                    if n.terminal {
                        map.remove(&**k);
                    } else if let Some(v) = map.get_mut(&**k) {
                        drop_in(v, n);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(any) = &node.any {
                if any.terminal {
                    items.clear();
                } else {
                    for item in items.iter_mut() {
                        drop_in(item, any);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Decodes one object with a transform applied; see [`Transform::seed`].
#[derive(Clone, Copy, Debug)]
pub struct TransformSeed<'a> {
    keep: Option<&'a Node>,
    drop: Option<&'a Node>,
}

impl<'de> DeserializeSeed<'de> for TransformSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        let keep = self.keep.filter(|n| !n.terminal);
        let decode = Decode {
            keep,
            drop: self.drop,
            element: false,
        };
        Ok(decode.deserialize(deserializer)?.0)
    }
}

/// Decodes a value under a keep node (`None`: keep it whole) and a drop node (`None`: drop
/// nothing below), into the value and whether it survives the projection in its parent, with
/// exactly the rules of `keep_in`, `keep_element` and `drop_in` (keep first, then drop: a field
/// that both select is kept by the projection and then dropped, so it is simply skipped).
#[derive(Clone, Copy)]
struct Decode<'a> {
    keep: Option<&'a Node>,
    drop: Option<&'a Node>,
    /// A list element rather than the value of a field.
    element: bool,
}

/// A child's fate under a node: `None`, not selected; `Some(None)`, all of it; `Some(Some(n))`,
/// what `n` selects.
type Selection<'a> = Option<Option<&'a Node>>;

fn select(node: Option<&Node>, child: impl FnOnce(&Node) -> Option<&Node>) -> Selection<'_> {
    match node {
        None => Some(None),
        Some(node) => match child(node) {
            None => None,
            Some(c) if c.terminal => Some(None),
            Some(c) => Some(Some(c)),
        },
    }
}

impl<'de> DeserializeSeed<'de> for Decode<'_> {
    type Value = (Value, bool);

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(Value, bool), D::Error> {
        if self.keep.is_none() && self.drop.is_none() {
            return Ok((Value::deserialize(d)?, true));
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Decode<'_> {
    type Value = (Value, bool);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(Value, bool), E> {
        Ok((Value::Bool(v), self.keep.is_none()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<(Value, bool), E> {
        Ok((Value::from(v), self.keep.is_none()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<(Value, bool), E> {
        Ok((Value::from(v), self.keep.is_none()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<(Value, bool), E> {
        let v = serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number);
        Ok((v, self.keep.is_none()))
    }
    fn visit_str<E>(self, v: &str) -> Result<(Value, bool), E> {
        Ok((Value::String(v.to_owned()), self.keep.is_none()))
    }
    fn visit_string<E>(self, v: String) -> Result<(Value, bool), E> {
        Ok((Value::String(v), self.keep.is_none()))
    }
    fn visit_none<E>(self) -> Result<(Value, bool), E> {
        Ok((Value::Null, self.keep.is_none()))
    }
    fn visit_unit<E>(self) -> Result<(Value, bool), E> {
        Ok((Value::Null, self.keep.is_none()))
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(Value, bool), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(Value, bool), A::Error> {
        let survives = self.keep.is_none_or(|n| n.any.is_some());
        let keep = match select(self.keep, |n| n.any.as_deref()) {
            Some(keep) => keep,
            // A list element that the path cannot project is kept as is.
            None if self.element => None,
            // A field's list that the path does not enter is removed by the parent.
            None => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                return Ok((Value::Array(Vec::new()), false));
            }
        };
        let drop = match self.drop.map(|n| n.any.as_deref()) {
            Some(Some(any)) if any.terminal => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                return Ok((Value::Array(Vec::new()), survives));
            }
            Some(any) => any,
            None => None,
        };
        let element = Decode {
            keep,
            drop,
            element: true,
        };
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some((item, _)) = seq.next_element_seed(element)? {
            items.push(item);
        }
        Ok((Value::Array(items), survives))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(Value, bool), A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let Some(keep) = select(self.keep, |n| n.child(&key)) else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let drop = match self.drop.and_then(|n| n.child(&key)) {
                Some(n) if n.terminal => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                drop => drop,
            };
            let decode = Decode {
                keep,
                drop,
                element: false,
            };
            let (value, survives) = map.next_value_seed(decode)?;
            if survives {
                out.insert(key.into_owned(), value);
            }
        }
        Ok((Value::Object(out), true))
    }
}

/// A map key, borrowed from the input where it can be: the keys a transform skips are never
/// allocated.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

#[cfg(test)]
pub(crate) mod test_fixtures;
#[cfg(test)]
mod tests;
