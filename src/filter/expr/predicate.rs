//! The [`ChangePredicate`]: a CEL expression over `object` and `oldObject` that decides whether
//! a watcher cares about an update.

use std::sync::Arc;

use serde_json::Value;

use super::compile::Compiled;
use super::samples::check_bool;
use super::OLD_OBJECT;
use crate::filter::FilterError;

/// A CEL expression over `object` and `oldObject` that evaluates to a bool: whether a watcher
/// cares about an update (a watch's `predicate_cel`), e.g. `object.spec != oldObject.spec`.
///
/// Compiled and checked like a [`Filter`]. An evaluation error counts as "cares": a watcher
/// never misses an update because its predicate could not be evaluated.
///
/// ```
/// use informerd::filter::ChangePredicate;
/// use serde_json::json;
///
/// let p = ChangePredicate::compile("object.spec != oldObject.spec")?;
/// assert!(!p.matches(&json!({"spec": {"a": 1}}), &json!({"spec": {"a": 1}})));
/// assert!(p.matches(&json!({"spec": {"a": 2}}), &json!({"spec": {"a": 1}})));
/// assert!(ChangePredicate::compile("newObject.spec").is_err());
/// # Ok::<(), informerd::filter::FilterError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ChangePredicate {
    inner: Arc<Compiled>,
}

impl ChangePredicate {
    /// Compiles `expression`; it must evaluate to a bool on sample objects.
    pub fn compile(expression: &str) -> Result<ChangePredicate, FilterError> {
        let compiled = Compiled::compile_with(expression, &[OLD_OBJECT])?;
        check_bool(|object| compiled.evaluate_with(object, &[(OLD_OBJECT, object)]))?;
        Ok(ChangePredicate {
            inner: Arc::new(compiled),
        })
    }

    /// Whether the update from `old` to `new` passes; true when evaluation fails.
    pub fn matches(&self, new: &Value, old: &Value) -> bool {
        !matches!(
            self.inner.evaluate_with(new, &[(OLD_OBJECT, old)]),
            Ok(cel::Value::Bool(false))
        )
    }
}
