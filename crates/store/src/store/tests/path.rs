//! One field decoded alone (`StoredObject::decode_at`, what a List reads labels with) is
//! exactly that field of the whole object, for every path into fixture pods, their controller
//! profile and random documents, and `None` where the whole object has nothing.

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};

use super::codec::random_value;
use super::*;

/// Every path of object keys into `v` (the root's included).
fn object_paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    if let Value::Object(m) = v {
        for (k, child) in m {
            prefix.push(k.clone());
            object_paths(child, prefix, out);
            prefix.pop();
        }
    }
}

/// Stores `object` and checks `decode_at` on every path into it, and on paths that miss.
fn assert_every_path_decodes_alone(store: &Writer, object: &Value) {
    let ns = object["metadata"]["namespace"]
        .as_str()
        .filter(|s| !s.is_empty());
    let name = object["metadata"]["name"].as_str().unwrap();
    store.apply(object.clone()).expect("apply");
    let mut paths = Vec::new();
    object_paths(object, &mut Vec::new(), &mut paths);
    for path in &paths {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        // A fresh handle each time: a handle keeps the whole object once something decoded it.
        let stored = store.get(&ObjectKey::new(ns, name)).expect("stored");
        let want = path.iter().try_fold(object, |v, k| v.get(*k));
        assert_eq!(
            stored.decode_at(&path).as_ref(),
            want,
            "{ns:?}/{name} at {path:?}"
        );
        let mut missing = path.clone();
        missing.push("no-such-key");
        assert_eq!(
            stored.decode_at(&missing),
            None,
            "{ns:?}/{name} at {missing:?}"
        );
    }
}

#[test]
fn a_field_decoded_alone_is_the_field_of_the_whole_object() {
    let store = Writer::new(StoreOptions::default());
    for (_, p) in fixture_pods() {
        assert_every_path_decodes_alone(&store, &p);
        let other = Writer::new(StoreOptions::default());
        assert_every_path_decodes_alone(&other, &controller_profile(&p));
    }
    let mut rng = StdRng::seed_from_u64(12);
    for i in 0..300 {
        let name = format!("obj-{}", i % 50);
        let mut object = random_value(&mut rng, 0, &name);
        if !object.is_object() {
            object = json!({ "v": object });
        }
        let labels = random_value(&mut rng, 2, &name);
        object["metadata"] = json!({"name": name, "namespace": "ns", "resourceVersion": (i + 1).to_string(),
                                    "creationTimestamp": "2026-01-01T00:00:00Z", "labels": labels});
        assert_every_path_decodes_alone(&store, &object);
    }
}

#[test]
fn labels_decoded_alone_skip_timestamps_and_holes_before_them() {
    // Values before `labels` that the body holds (timestamps as deltas, UUIDs, generated
    // names, addresses, counters) must be skipped exactly for the labels to come out right.
    let store = Writer::new(StoreOptions::default());
    let object = json!({
        "apiVersion": "v1", "kind": "Pod",
        "a": ["2026-01-01T00:00:00Z", "10.0.0.1", "10.0.0.0/8", "123", 1.5, -3, "x4b2z"],
        "metadata": {
            "annotations": {"t": "2026-02-01T00:00:00.5Z", "h": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
            "creationTimestamp": "2026-03-01T00:00:00Z",
            "generateName": "web-7d4b9c8f6-",
            "name": "web-7d4b9c8f6-x4b2z", "namespace": "ns", "resourceVersion": "7",
            "uid": "f78db027-d69e-485e-9a9e-a6dc7493b6d7",
            "labels": {"app": "web", "when": "2026-04-01T00:00:00Z", "pod": "web-7d4b9c8f6-x4b2z"},
        },
    });
    assert_every_path_decodes_alone(&store, &object);
}
