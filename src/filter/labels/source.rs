//! Where a selector reads labels from: label maps and the `metadata.labels` of JSON objects.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use serde_json::Value;

/// Something labels can be read from.
pub trait Labels {
    /// The value of label `key`, if present.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// The `metadata.labels` of an object as JSON; non-string values count as absent.
impl Labels for serde_json::Map<String, Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

impl<T: Labels + ?Sized> Labels for &T {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }
}

impl<T: Labels> Labels for Option<T> {
    fn label(&self, key: &str) -> Option<&str> {
        self.as_ref().and_then(|l| l.label(key))
    }
}
