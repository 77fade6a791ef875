//! Tests of the store, through its public face (`Writer`, `Store`), grouped by the part they
//! exercise most; the fixtures and helpers they share are here.

mod atoms;
mod batch;
mod codec;
mod index;
mod log;
mod pages;
mod path;
mod reader;
mod writer;

use serde_json::{json, Value};

use super::*;

pub(super) fn fixture_pods() -> Vec<(String, Value)> {
    crate::fixtures::pods()
        .into_iter()
        .map(|p| (p.file, p.object))
        .collect()
}

/// The "controller" profile of the memory benchmark, as the product's transform makes it.
pub(super) fn controller_profile(pod: &Value) -> Value {
    let mut out = pod.clone();
    crate::transform::Transform::controller().apply(&mut out);
    out
}

pub(super) fn pod(ns: &str, name: &str, node: &str, rv: u64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": format!("00000000-0000-4000-8000-{:012x}", rv),
            "resourceVersion": rv.to_string(),
            "labels": {"app": "web"},
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running"},
    })
}

pub(super) fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(Some(ns), name)
}

pub(super) fn node_index() -> StoreOptions {
    StoreOptions::default().with_index("node", |o: &Value| {
        o["spec"]["nodeName"]
            .as_str()
            .map(|n| vec![n.to_owned()])
            .unwrap_or_default()
    })
}

fn assert_round_trip(store: &Writer, object: &Value) {
    let ns = object["metadata"]["namespace"]
        .as_str()
        .filter(|s| !s.is_empty());
    let name = object["metadata"]["name"].as_str().unwrap();
    store.apply(object.clone()).expect("apply");
    let got = store.get(&ObjectKey::new(ns, name)).expect("stored");
    assert_eq!(got.to_json_value(), *object, "round trip of {ns:?}/{name}");
    let want = serde_json::to_vec(object).unwrap();
    let mut written = b"before".to_vec();
    got.write_json(&mut written);
    assert_eq!(
        String::from_utf8_lossy(&written[6..]),
        String::from_utf8_lossy(&want),
        "{ns:?}/{name} written straight from the encoding"
    );
    assert_eq!(got.to_json_bytes(), want);
}
