//! The [`Filter`]: a CEL expression over `object` that decides whether an object is stored.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::compile::Compiled;
use super::samples::check_bool;
use super::type_name;
use crate::filter::FilterError;
use crate::vocab::path::FieldPath;

/// A compiled CEL expression over `object` that evaluates to a bool: the `filter` of a resource.
///
/// The cel crate has no type checker (Kubernetes type-checks CEL against the schema of the
/// kind), so [`Filter::compile`] rejects what it can without one: syntax errors, references to
/// variables other than `object`, and expressions that evaluate to something other than a bool
/// on sample objects (an empty object and a typical pod). An expression that only fails at run
/// time on some objects (`object.spec.nodeName == "a"` on a pod without a node: no such key)
/// compiles; [`Filter::matches`] returns the error, which callers count as "does not match".
/// Guard optional fields with `has()`, as in Kubernetes:
/// `has(object.spec.nodeName) && object.spec.nodeName == "node-1"`.
///
/// ```
/// use informerd::filter::Filter;
/// use serde_json::json;
///
/// let f = Filter::compile(r#"object.metadata.ownerReferences.exists(o, o.kind == "DaemonSet")"#)?;
/// let pod = json!({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": "kube-proxy"}]}});
/// assert!(f.matches(&pod)?);
/// assert!(f.matches(&json!({"metadata": {}})).is_err()); // no such key: ownerReferences
/// assert!(Filter::compile("object.metadata.name").is_err()); // a string, not a bool
/// # Ok::<(), informerd::filter::FilterError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Filter {
    pub(super) inner: Arc<Compiled>,
}

impl Filter {
    /// Compiles `expression`; see the type's documentation for what is checked.
    pub fn compile(expression: &str) -> Result<Filter, FilterError> {
        let compiled = Compiled::compile(expression)?;
        check_bool(|object| compiled.evaluate(object))?;
        Ok(Filter {
            inner: Arc::new(compiled),
        })
    }

    /// Evaluates the expression on `object`. Errors (a missing field, a type mismatch) are
    /// errors, as in Kubernetes; callers treat them as "does not match".
    pub fn matches(&self, object: &Value) -> Result<bool, FilterError> {
        match self.inner.evaluate(object)? {
            cel::Value::Bool(b) => Ok(b),
            other => Err(FilterError::Evaluation(format!(
                "the filter evaluated to a {}, not a bool",
                type_name(&other)
            ))),
        }
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// The fields of `object` the expression reads (each with everything below it), or `None`
    /// when it uses the object as a whole. A decoder can keep just these (with
    /// [`Transform`](crate::transform::Transform)) before filtering.
    pub fn field_paths(&self) -> Option<Vec<FieldPath>> {
        self.inner.field_paths()
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.source())
    }
}
