//! Applying a transform to a decoded value, in place: the projection of `keep`, then `drop`.

use serde_json::Value;

use super::tree::Node;
use super::Transform;

impl Transform {
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
