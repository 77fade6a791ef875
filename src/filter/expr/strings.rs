//! The [`StringsExpr`]: the keys of a secondary index, from a field path or a CEL expression.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::compile::Compiled;
use super::samples::check_samples;
use super::type_name;
use crate::filter::FilterError;
use crate::vocab::path::{FieldPath, Segment};

#[derive(Debug)]
enum StringsKind {
    Path(FieldPath),
    Cel(Compiled),
    Labels,
}

/// An index key extractor: a field path or a CEL expression yielding a string or a list of
/// strings.
///
/// A path (the syntax of [`FieldPath`]) may fan out with `[*]`; at its end, strings are taken
/// as they are, numbers and booleans as their JSON text, and a list yields each of its scalar
/// elements; absent fields, nulls and objects yield nothing. Values are deduplicated, in order.
///
/// ```
/// use informerd::filter::StringsExpr;
/// use serde_json::json;
///
/// let pod = json!({"spec": {"nodeName": "node-1"},
///                  "metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b"}]}});
/// assert_eq!(StringsExpr::path("spec.nodeName")?.values(&pod), ["node-1"]);
/// assert_eq!(StringsExpr::path("metadata.ownerReferences[*].uid")?.values(&pod), ["a", "b"]);
/// assert_eq!(StringsExpr::cel("object.metadata.ownerReferences.map(o, o.uid)")?.values(&pod), ["a", "b"]);
/// assert!(StringsExpr::path("spec.hostname")?.values(&pod).is_empty());
/// # Ok::<(), informerd::filter::FilterError>(())
/// ```
#[derive(Clone, Debug)]
pub struct StringsExpr {
    inner: Arc<StringsKind>,
}

impl StringsExpr {
    /// A field path, e.g. `spec.nodeName`, `metadata.ownerReferences[*].uid`,
    /// `metadata.labels["app"]`.
    pub fn path(path: &str) -> Result<StringsExpr, FilterError> {
        let path = FieldPath::parse(path)?;
        Ok(StringsExpr {
            inner: Arc::new(StringsKind::Path(path)),
        })
    }

    /// A CEL expression over `object` that yields a string, a list of strings, or null (no
    /// key). As for [`Filter::compile`], an expression that yields something else on the
    /// sample objects is rejected.
    pub fn cel(expression: &str) -> Result<StringsExpr, FilterError> {
        let compiled = Compiled::compile(expression)?;
        check_samples(
            |object| compiled.evaluate(object),
            |value, sample| match strings_of(value) {
                Ok(_) => Ok(()),
                Err(got) => Err(FilterError::NotStrings { got, sample }),
            },
        )?;
        Ok(StringsExpr {
            inner: Arc::new(StringsKind::Cel(compiled)),
        })
    }

    /// The label index: a key `NAMESPACE/KEY=VALUE` for each label of the object (`KEY=VALUE`
    /// for a cluster-scoped one), which a List of a namespace by a label selector's equality
    /// looks up instead of visiting the namespace ([`StringsExpr::label_key`]).
    pub fn labels() -> StringsExpr {
        StringsExpr {
            inner: Arc::new(StringsKind::Labels),
        }
    }

    /// Whether this is the label index.
    pub fn is_labels(&self) -> bool {
        matches!(*self.inner, StringsKind::Labels)
    }

    /// The label index's key of label `key=value` in `namespace` (`None`: cluster-scoped).
    pub fn label_key(namespace: Option<&str>, key: &str, value: &str) -> String {
        match namespace {
            Some(ns) => format!("{ns}/{key}={value}"),
            None => format!("{key}={value}"),
        }
    }

    /// The keys of `object`: empty when the field is absent or the expression fails.
    pub fn values(&self, object: &Value) -> Vec<String> {
        self.try_values(object).unwrap_or_default()
    }

    /// The keys of `object`, or the error of the CEL expression.
    pub fn try_values(&self, object: &Value) -> Result<Vec<String>, FilterError> {
        match &*self.inner {
            StringsKind::Path(path) => {
                let mut out = Vec::new();
                collect(object, path.segments(), &mut out);
                dedup(&mut out);
                Ok(out)
            }
            StringsKind::Cel(compiled) => {
                let mut out = strings_of(compiled.evaluate(object)?).map_err(|got| {
                    FilterError::Evaluation(format!(
                        "the expression evaluated to {got}, not a string or a list of strings"
                    ))
                })?;
                dedup(&mut out);
                Ok(out)
            }
            StringsKind::Labels => {
                let meta = object.get("metadata");
                let ns = meta
                    .and_then(|m| m.get("namespace"))
                    .and_then(Value::as_str);
                let labels = meta
                    .and_then(|m| m.get("labels"))
                    .and_then(Value::as_object);
                Ok(labels
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some(Self::label_key(ns, k, v.as_str()?)))
                    .collect())
            }
        }
    }

    /// The path or expression as written.
    pub fn source(&self) -> &str {
        match &*self.inner {
            StringsKind::Path(path) => path.as_str(),
            StringsKind::Cel(compiled) => &compiled.source,
            StringsKind::Labels => "labels",
        }
    }

    /// The field path, when the keys are a field's values (not CEL).
    pub fn as_path(&self) -> Option<&FieldPath> {
        match &*self.inner {
            StringsKind::Path(path) => Some(path),
            StringsKind::Cel(_) | StringsKind::Labels => None,
        }
    }

    /// The fields of `object` the extractor reads, or `None` when it needs the whole object.
    pub fn field_paths(&self) -> Option<Vec<FieldPath>> {
        match &*self.inner {
            StringsKind::Path(path) => Some(vec![path.clone()]),
            StringsKind::Cel(compiled) => compiled.field_paths(),
            StringsKind::Labels => Some(
                ["metadata.namespace", "metadata.labels"]
                    .iter()
                    .map(|p| FieldPath::parse(p).expect("a valid path"))
                    .collect(),
            ),
        }
    }
}

impl fmt::Display for StringsExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.source())
    }
}

/// The strings of a CEL result, or the description of what it is instead.
fn strings_of(value: cel::Value) -> Result<Vec<String>, String> {
    match value {
        cel::Value::String(s) => Ok(vec![s.to_string()]),
        cel::Value::Null => Ok(Vec::new()),
        cel::Value::List(items) => items
            .iter()
            .map(|item| match item {
                cel::Value::String(s) => Ok(s.to_string()),
                other => Err(format!("a list with a {} element", type_name(other))),
            })
            .collect(),
        other => Err(format!("a {}", type_name(&other))),
    }
}

fn dedup(values: &mut Vec<String>) {
    if values.len() > 1 {
        let mut seen = ahash::AHashSet::with_capacity(values.len());
        values.retain(|v| seen.insert(v.clone()));
    }
}

/// Collects the keys under `segments` of `value`.
fn collect(value: &Value, segments: &[Segment], out: &mut Vec<String>) {
    let Some((first, rest)) = segments.split_first() else {
        match value {
            Value::Array(items) => {
                for item in items {
                    push_scalar(item, out);
                }
            }
            other => push_scalar(other, out),
        }
        return;
    };
    match (first, value) {
        (Segment::Field(name), Value::Object(map)) => {
            if let Some(v) = map.get(name) {
                collect(v, rest, out);
            }
        }
        (Segment::Any, Value::Array(items)) => {
            for item in items {
                collect(item, rest, out);
            }
        }
        (Segment::Any, Value::Object(map)) => {
            for item in map.values() {
                collect(item, rest, out);
            }
        }
        _ => {}
    }
}

fn push_scalar(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Bool(b) => out.push(b.to_string()),
        Value::Number(n) => out.push(n.to_string()),
        _ => {}
    }
}
