//! Generators of JSON: arbitrary values, strings shaped like the ones the store's codec encodes
//! specially (UUIDs, timestamps, counters, addresses, generated names, digests), and
//! Kubernetes-shaped objects; and builders of pathological input (deep nesting).

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use serde_json::{json, Map, Number, Value};

/// Strings near the codec's special forms, and any text.
pub fn string() -> BoxedStrategy<String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,12}",
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[0-9A-Fa-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{11,13}",
        "[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9](\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})?",
        "[+-]?[0-9]{1,22}",
        "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}(/[0-9]{1,2})?",
        "[a-z]{1,8}-[a-z0-9]{5}",
        "(sha256:)?[0-9a-f]{62,66}",
        "\\PC{0,24}",
        any::<String>(),
    ]
    .boxed()
}

/// Any JSON scalar.
pub fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        string().prop_map(Value::String),
    ]
    .boxed()
}

/// Any JSON value, a few levels deep.
pub fn value() -> BoxedStrategy<Value> {
    scalar()
        .prop_recursive(6, 96, 8, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..8).prop_map(Value::Array),
                btree_map(key(), inner, 0..8).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}

/// Keys: the ones objects have, and any.
pub fn key() -> BoxedStrategy<String> {
    prop_oneof![
        prop::sample::select(vec![
            "metadata",
            "name",
            "namespace",
            "labels",
            "annotations",
            "spec",
            "status",
            "containers",
            "conditions",
            "type",
            "kind",
            "uid",
            "resourceVersion",
        ])
        .prop_map(str::to_string),
        string(),
    ]
    .boxed()
}

/// A Kubernetes-shaped object: identity metadata (sometimes missing or mistyped), labels, and
/// arbitrary spec and status.
pub fn object() -> BoxedStrategy<Value> {
    let name = prop_oneof![
        3 => "[a-z][a-z0-9-]{0,20}".prop_map(Value::String),
        1 => string().prop_map(Value::String),
        1 => scalar(),
    ];
    let namespace = prop::option::of(prop_oneof![
        4 => "[a-z][a-z0-9-]{0,12}".prop_map(Value::String),
        1 => scalar(),
    ]);
    let labels = btree_map(string(), string(), 0..4);
    (
        name,
        namespace,
        prop::option::of("[0-9]{1,12}"),
        labels,
        value(),
        value(),
    )
        .prop_map(|(name, namespace, rv, labels, spec, status)| {
            let mut metadata = Map::new();
            metadata.insert("name".into(), name);
            if let Some(ns) = namespace {
                metadata.insert("namespace".into(), ns);
            }
            if let Some(rv) = rv {
                metadata.insert("resourceVersion".into(), Value::String(rv));
            }
            metadata.insert("labels".into(), json!(labels));
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                   "spec": spec, "status": status})
        })
        .boxed()
}

/// `depth` arrays and objects nested in each other, built without recursion.
pub fn nested(depth: usize) -> Value {
    let mut value = Value::Null;
    for level in 0..depth {
        value = if level % 2 == 0 {
            Value::Array(vec![value])
        } else {
            // Not `json!`: its interpolation serializes the value, recursively.
            Value::Object(Map::from_iter([("a".to_string(), value)]))
        };
    }
    value
}

/// Drops a value without recursion: serde_json's `Drop` recurses, and a test that builds a
/// nesting deeper than any parser admits must not overflow the stack freeing it.
pub fn drop_flat(value: Value) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// JSON text nested `depth` levels deep (`{"a":[{"a":[...`), as an apiserver could send it.
pub fn nested_text(depth: usize) -> String {
    let mut text = String::with_capacity(depth * 6);
    for level in 0..depth {
        text.push_str(if level % 2 == 0 { "{\"a\":" } else { "[" });
    }
    text.push_str("null");
    for level in (0..depth).rev() {
        text.push(if level % 2 == 0 { '}' } else { ']' });
    }
    text
}
