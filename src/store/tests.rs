use std::path::PathBuf;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::*;

fn fixture_pods() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/pods");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixture pods in {}: {e}", dir.display()))
        .map(|e| e.expect("fixture entry").path())
        .collect();
    files.sort();
    let mut pods = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("fixture text");
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let docs: Vec<Value> = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => vec![serde_json::from_str(&text).expect("fixture JSON")],
            Some("jsonl") => text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    serde_json::from_str::<Value>(l).expect("fixture JSON line")["object"].clone()
                })
                .collect(),
            Some("yaml") | Some("yml") => {
                vec![serde_yaml::from_str(&text).expect("fixture YAML")]
            }
            _ => continue,
        };
        for doc in docs {
            match doc.get("items").and_then(Value::as_array) {
                Some(items) => pods.extend(items.iter().map(|p| (file.clone(), p.clone()))),
                None => pods.push((file.clone(), doc)),
            }
        }
    }
    assert!(
        pods.len() >= 10,
        "expected the fixture pods, found {}",
        pods.len()
    );
    pods
}

/// The "controller" profile of the memory benchmark, as the product's transform makes it.
fn controller_profile(pod: &Value) -> Value {
    let mut out = pod.clone();
    crate::transform::Transform::controller().apply(&mut out);
    out
}

fn pod(ns: &str, name: &str, node: &str, rv: u64) -> Value {
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

fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(Some(ns), name)
}

fn node_index() -> StoreOptions {
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
    assert_eq!(got.to_json_bytes(), serde_json::to_vec(object).unwrap());
}

#[test]
fn fixture_pods_round_trip_exactly() {
    let store = Writer::new(StoreOptions::default());
    for (file, p) in fixture_pods() {
        assert_round_trip(&store, &p);
        let projected = controller_profile(&p);
        let other = Writer::new(StoreOptions::default());
        assert_round_trip(&other, &projected);
        // Still exact when read back through the change log.
        let changes = other.changes_since(0).unwrap();
        assert_eq!(changes[0].object.to_json_value(), projected, "{file}");
    }
    // Re-applying what is stored (the last version of each fixture pod) is a no-op.
    let revision = store.revision();
    for o in store.list(None).1 {
        assert!(store.apply(o.to_json_value()).unwrap().is_none());
    }
    assert_eq!(store.revision(), revision);
}

#[test]
fn edge_case_values_round_trip() {
    let big = "x".repeat(200_000);
    let name = "web-0";
    let object = json!({
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "12",
                     "labels": {"pod-name": name, "rv": "12", "ns": "ns", "": ""}},
        "numbers": [0, 1, 63, 64, 127, 128, u64::MAX, -1, -64, i64::MIN, 0.5, -0.0, 0.0,
                    1e300, -2.5e-300, 0.1, 3.0, 1.7976931348623157e308],
        "unicode": ["héllo", "日本語", "🦀 crab", "\u{0}\u{1f}\"\\", "é"],
        "empties": [{}, [], "", [[]], [{}], {"a": {}}],
        "nulls": [null, {"a": null}, [null, null]],
        "bools": [true, false],
        "big": big,
        "almost": ["2026-06-15T04:14:53+00:00", "2026-02-30T00:00:00Z", "F78DB027-D69E-485E-9A9E-A6DC7493B6D7",
                   "010.1.1.1", "0481", "1.2.3.4/33", "web-4fpn", "sha256:0123", "-4fpns", "web-0x"],
        "forms": ["2026-06-15T04:14:53Z", "1969-01-01T00:00:00.000001Z", "2026-06-15T04:14:53.5Z",
                  "f78db027-d69e-485e-9a9e-a6dc7493b6d7", "10.244.0.3", "10.0.0.0/8", "0",
                  "18446744073709551615", "coredns-589f44dc88-4fpns",
                  "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"],
        "ownerReferences": [{"uid": "f78db027-d69e-485e-9a9e-a6dc7493b6d7", "name": "web-4fpns",
                             "t": "2026-06-15T04:14:53Z", "n": "12", "self": name}],
        "nested": [[1, [2, ["2026-01-01T00:00:00Z", {"k": [name]}]]], {"x": [{"y": "z"}, {"y": "10.0.0.1"}]}],
        "same-keys": [{"a": 1}, {"a": 1}, {"a": "2026-01-01T00:00:00Z"}, {"a": "1999-01-01T00:00:00Z"}],
    });
    let store = Writer::new(StoreOptions::default());
    assert_round_trip(&store, &object);
    // Cluster-scoped, no resourceVersion.
    let cluster =
        json!({"kind": "Node", "metadata": {"name": "node-1", "labels": {"x": "node-1"}}});
    assert_round_trip(&store, &cluster);
    assert!(store.get(&ObjectKey::new(None, "node-1")).is_some());
    assert!(store.get(&key("", "node-1")).is_none());
}

fn random_string(rng: &mut StdRng, name: &str) -> String {
    match rng.random_range(0..12) {
        0 => name.to_owned(),
        1 => format!(
            "20{:02}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            rng.random_range(0..99),
            rng.random_range(1..13),
            rng.random_range(1..29),
            rng.random_range(0..24),
            rng.random_range(0..60),
            rng.random_range(0..60)
        ),
        2 => format!(
            "{:08x}-0000-4000-8000-{:012x}",
            rng.random::<u32>(),
            rng.random::<u32>()
        ),
        3 => rng.random::<u64>().to_string(),
        4 => format!(
            "10.{}.{}.{}",
            rng.random::<u8>(),
            rng.random::<u8>(),
            rng.random::<u8>()
        ),
        5 => format!("app-{}-", rng.random_range(0..5)) + "x4b2z",
        6 => ["a", "ab", "abc", "abcd", "Ready", "True"][rng.random_range(0..6)].to_owned(),
        7 => String::new(),
        8 => "ü€😀".repeat(rng.random_range(0..4)),
        _ => format!("s{}", rng.random_range(0..50)),
    }
}

fn random_value(rng: &mut StdRng, depth: usize, name: &str) -> Value {
    let pick = if depth > 4 {
        rng.random_range(0..6)
    } else {
        rng.random_range(0..9)
    };
    match pick {
        0 => Value::Null,
        1 => Value::Bool(rng.random()),
        2 => json!(rng.random_range(0..200u64)),
        3 => json!(rng.random::<i64>()),
        4 => json!(rng.random::<f64>() * 1e6 - 5e5),
        5 | 6 => Value::String(random_string(rng, name)),
        7 => Value::Array(
            (0..rng.random_range(0..5))
                .map(|_| random_value(rng, depth + 1, name))
                .collect(),
        ),
        _ => {
            let mut m = serde_json::Map::new();
            for _ in 0..rng.random_range(0..6) {
                let k = random_string(rng, name);
                m.insert(k, random_value(rng, depth + 1, name));
            }
            m.insert(
                ["ownerReferences", "a", "b"][rng.random_range(0..3)].to_owned(),
                random_value(rng, depth + 1, name),
            );
            Value::Object(m)
        }
    }
}

#[test]
fn random_documents_round_trip_and_release_everything() {
    let mut rng = StdRng::seed_from_u64(7);
    let store = Writer::new(StoreOptions {
        log_max_events: 16,
        ..StoreOptions::default()
    });
    let mut keys = Vec::new();
    for i in 0..600 {
        let name = format!("obj-{}", i % 150);
        let ns = format!("ns-{}", i % 3);
        let mut object = random_value(&mut rng, 0, &name);
        if !object.is_object() {
            object = json!({ "v": object });
        }
        object["metadata"] = json!({"name": name, "namespace": ns, "resourceVersion": rng.random_range(0..5).to_string()});
        assert_round_trip(&store, &object);
        keys.push(key(&ns, &name));
    }
    for k in &keys {
        store.delete(k);
    }
    // Push the deleted states out of the log.
    for i in 0..16 {
        let p = pod("other", &format!("p{i}"), "n", 1);
        store.apply(p).unwrap();
    }
    for i in 0..16 {
        store.delete(&key("other", &format!("p{i}")));
    }
    for i in 0..16 {
        store.apply(pod("last", "p", "n", i + 2)).unwrap();
    }
    store.delete(&key("last", "p"));
    let store2 = Writer::new(StoreOptions {
        log_max_events: 0,
        ..StoreOptions::default()
    });
    store2.apply(pod("last", "p", "n", 1)).unwrap();
    let floor = store2.stats();
    store.reclaim();
    let stats = store.stats();
    assert_eq!(stats.objects, 0);
    assert_eq!(stats.encoded_bytes, 0);
    // Only the last deleted pod's state remains, held by the log.
    assert!(
        stats.interned_strings <= floor.interned_strings,
        "{stats:?} vs one pod {floor:?}"
    );
}

#[test]
fn revisions_are_monotonic_and_unchanged_applies_are_no_ops() {
    let store = Writer::new(StoreOptions::default());
    assert_eq!(store.revision(), 0);
    let a = store.apply(pod("ns", "a", "n1", 10)).unwrap().unwrap();
    assert_eq!((a.revision, a.kind), (1, ChangeKind::Added));
    assert_eq!(a.object.revision(), 1);
    assert_eq!(a.object.resource_version(), "10");
    assert!(a.previous.is_none());
    let b = store.apply(pod("ns", "b", "n1", 11)).unwrap().unwrap();
    assert_eq!(b.revision, 2);
    // A relist of the same objects changes nothing.
    assert!(store.apply(pod("ns", "a", "n1", 10)).unwrap().is_none());
    assert!(store.apply(pod("ns", "b", "n1", 11)).unwrap().is_none());
    assert_eq!(store.revision(), 2);
    assert_eq!(store.changes_since(0).unwrap().len(), 2);
    let m = store.apply(pod("ns", "a", "n2", 12)).unwrap().unwrap();
    assert_eq!((m.revision, m.kind), (3, ChangeKind::Modified));
    assert_eq!(store.get(&key("ns", "a")).unwrap().revision(), 3);
    assert_eq!(store.get(&key("ns", "b")).unwrap().revision(), 2);
    assert_eq!(store.len(), 2);
    assert_ne!(Writer::new(StoreOptions::default()).epoch(), store.epoch());
}

#[test]
fn modified_carries_the_previous_state() {
    let store = Writer::new(StoreOptions::default());
    store.apply(pod("ns", "a", "n1", 10)).unwrap();
    let m = store.apply(pod("ns", "a", "n2", 11)).unwrap().unwrap();
    let prev = m.previous.as_ref().expect("previous");
    assert_eq!(prev.to_json_value(), pod("ns", "a", "n1", 10));
    assert_eq!(prev.revision(), 1);
    assert_eq!(prev.resource_version(), "10");
    assert_eq!(m.object.to_json_value(), pod("ns", "a", "n2", 11));
    assert_eq!(m.object.label("app"), Some("web"));
    // The same through the log.
    let logged = store.changes_since(1).unwrap();
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].kind, ChangeKind::Modified);
    assert_eq!(
        logged[0].previous.as_ref().unwrap().to_json_value(),
        pod("ns", "a", "n1", 10)
    );
    assert_eq!(logged[0].object.resource_version(), "11");
}

#[test]
fn delete_records_the_last_state() {
    let store = Writer::new(StoreOptions::default());
    store.apply(pod("ns", "a", "n1", 10)).unwrap();
    assert!(store.delete(&key("ns", "missing")).is_none());
    assert!(store.delete(&key("other", "a")).is_none());
    assert_eq!(store.revision(), 1);
    let d = store.delete(&key("ns", "a")).unwrap();
    assert_eq!((d.revision, d.kind), (2, ChangeKind::Deleted));
    assert_eq!(d.object.to_json_value(), pod("ns", "a", "n1", 10));
    assert_eq!(d.object.revision(), 2);
    assert!(store.get(&key("ns", "a")).is_none());
    assert!(store.delete(&key("ns", "a")).is_none());
    assert_eq!(store.len(), 0);
    let logged = store.changes_since(1).unwrap();
    assert_eq!(logged[0].kind, ChangeKind::Deleted);
    assert_eq!(logged[0].key, key("ns", "a"));
    assert_eq!(logged[0].object.to_json_value(), pod("ns", "a", "n1", 10));
    // Re-adding is an ADDED again.
    let a = store.apply(pod("ns", "a", "n1", 12)).unwrap().unwrap();
    assert_eq!((a.revision, a.kind), (3, ChangeKind::Added));
}

#[test]
fn changes_since_replays_exactly_and_expires_by_count() {
    let store = Writer::new(StoreOptions {
        log_max_events: 5,
        ..StoreOptions::default()
    });
    for i in 0..8u64 {
        store
            .apply(pod("ns", &format!("p{}", i % 3), "n", 100 + i))
            .unwrap();
    }
    store.delete(&key("ns", "p0"));
    assert_eq!(store.revision(), 9);
    for since in 4..=9 {
        let changes = store.changes_since(since).unwrap();
        let revs: Vec<u64> = changes.iter().map(|c| c.revision).collect();
        assert_eq!(revs, ((since + 1)..=9).collect::<Vec<_>>());
    }
    let last = store.changes_since(8).unwrap();
    assert_eq!(
        (last[0].kind, last[0].key.clone()),
        (ChangeKind::Deleted, key("ns", "p0"))
    );
    assert_eq!(
        store.changes_since(3).unwrap_err(),
        StoreError::Expired {
            requested: 3,
            oldest_available: 4
        }
    );
    assert_eq!(
        store.changes_since(10).unwrap_err(),
        StoreError::FutureRevision {
            requested: 10,
            current: 9
        }
    );
    assert_eq!(store.stats().log_entries, 5);
}

#[test]
fn changes_since_expires_by_bytes() {
    let big = |i: u64| {
        let mut p = pod("ns", "a", "n", i);
        p["spec"]["payload"] = json!(format!("{i}").repeat(2_000));
        p
    };
    let store = Writer::new(StoreOptions {
        log_max_events: 1_000,
        log_max_bytes: 5_000,
        ..StoreOptions::default()
    });
    for i in 1..=10u64 {
        store.apply(big(i)).unwrap();
    }
    let stats = store.stats();
    assert!(stats.log_bytes <= 5_000, "{stats:?}");
    assert!(
        stats.log_entries < 10 && stats.log_entries >= 1,
        "{stats:?}"
    );
    let oldest = 10 - stats.log_entries as u64;
    assert!(matches!(
        store.changes_since(0),
        Err(StoreError::Expired { requested: 0, oldest_available }) if oldest_available == oldest
    ));
    let replay = store.changes_since(oldest).unwrap();
    assert_eq!(replay.len(), stats.log_entries);
    for c in &replay {
        assert_eq!(c.object.to_json_value(), big(c.revision));
        assert_eq!(
            c.previous.as_ref().unwrap().to_json_value(),
            big(c.revision - 1)
        );
    }
}

#[test]
fn indexes_follow_updates_and_deletes() {
    let store = Writer::new(node_index());
    store.apply(pod("ns", "a", "n1", 1)).unwrap();
    store.apply(pod("ns", "b", "n1", 2)).unwrap();
    store.apply(pod("other", "a", "n2", 3)).unwrap();
    let names = |node: &str| -> Vec<String> {
        let (_, items) = store.list_by_index("node", node).unwrap();
        items.iter().map(|o| o.key().to_string()).collect()
    };
    assert_eq!(names("n1"), ["ns/a", "ns/b"]);
    assert_eq!(names("n2"), ["other/a"]);
    store.apply(pod("ns", "a", "n2", 4)).unwrap();
    assert_eq!(names("n1"), ["ns/b"]);
    assert_eq!(names("n2"), ["ns/a", "other/a"]);
    store.delete(&key("ns", "b"));
    assert!(names("n1").is_empty());
    let mut no_node = pod("ns", "a", "n2", 5);
    no_node["spec"] = json!({});
    store.apply(no_node).unwrap();
    assert_eq!(names("n2"), ["other/a"]);
    let (rev, _) = store.list_by_index("node", "n2").unwrap();
    assert_eq!(rev, store.revision());
    {
        let st = store.shared.read();
        assert_eq!(
            st.indexes[0].values.len(),
            1,
            "empty index values are dropped"
        );
    }
    assert!(matches!(
        store.list_by_index("zone", "a"),
        Err(StoreError::UnknownIndex { name, known }) if name == "zone" && known == "node"
    ));
}

#[test]
fn keys_and_lists_by_namespace() {
    let store = Writer::new(StoreOptions::default());
    for ns in ["a", "b"] {
        for i in 0..3 {
            store.apply(pod(ns, &format!("p{i}"), "n", 1)).unwrap();
        }
    }
    store
        .apply(json!({"kind": "Namespace", "metadata": {"name": "a"}}))
        .unwrap();
    let mut keys = store.keys(Some("a"));
    keys.sort();
    assert_eq!(keys, vec![key("a", "p0"), key("a", "p1"), key("a", "p2")]);
    assert_eq!(store.keys(None).len(), 7);
    assert!(store.keys(Some("zzz")).is_empty());
    let (rev, items) = store.list(Some("b"));
    assert_eq!(rev, 7);
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|o| o.key().namespace() == Some("b")));
    let (_, all) = store.list(None);
    assert_eq!(
        all[0].key(),
        &ObjectKey::new(None, "a"),
        "sorted, cluster-scoped first"
    );
    for k in store.keys(Some("a")) {
        store.delete(&k);
    }
    assert_eq!(store.keys(Some("a")).len(), 0);
    assert_eq!(store.len(), 4);
}

#[test]
fn memory_is_released_when_objects_go() {
    let store = Writer::new(StoreOptions {
        log_max_events: 0,
        ..node_index()
    });
    let empty = store.stats();
    assert_eq!(empty.interned_strings, 0);
    for (_, p) in fixture_pods() {
        store.apply(controller_profile(&p)).unwrap();
        store.apply(p).unwrap();
    }
    let reader = store.list(None).1;
    assert!(store.stats().interned_strings > 0);
    for k in store.keys(None) {
        store.delete(&k);
    }
    // Readers still hold their versions...
    assert!(store.stats().interned_strings > 0);
    assert!(reader[0].to_json_value().is_object());
    drop(reader);
    store.reclaim();
    // ... and once they let go, nothing of the objects stays.
    assert_eq!(store.stats(), empty);
    let st = store.shared.read();
    assert!(st.indexes[0].values.is_empty());
    assert_eq!(st.slots.blobs.capacity(), 0);
}

#[test]
fn rejects_objects_without_identity() {
    let store = Writer::new(StoreOptions::default());
    assert_eq!(
        store.apply(json!([1])).unwrap_err(),
        StoreError::NotAnObject
    );
    assert_eq!(
        store.apply(json!({"metadata": {}})).unwrap_err(),
        StoreError::MissingName
    );
    assert_eq!(
        store.apply(json!({"metadata": {"name": ""}})).unwrap_err(),
        StoreError::MissingName
    );
    assert!(matches!(
        store.apply(json!({"metadata": {"name": "a", "namespace": 1}})),
        Err(StoreError::InvalidNamespace { .. })
    ));
    let mut deep = json!(1);
    for _ in 0..300 {
        deep = json!([deep]);
    }
    assert!(matches!(
        store.apply(json!({"metadata": {"name": "a"}, "deep": deep})),
        Err(StoreError::TooDeep { .. })
    ));
    assert_eq!(store.revision(), 0);
    assert_eq!(store.stats().interned_strings, 0);
}

#[tokio::test]
async fn subscribers_see_new_revisions() {
    let store = Arc::new(Writer::new(StoreOptions::default()));
    let mut rx = store.subscribe();
    assert_eq!(*rx.borrow(), 0);
    let writer = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || {
            for i in 0..5 {
                store.apply(pod("ns", &format!("p{i}"), "n", 1)).unwrap();
            }
        })
    };
    while *rx.borrow_and_update() < 5 {
        rx.changed().await.unwrap();
    }
    writer.await.unwrap();
    assert_eq!(store.revision(), 5);
}

#[test]
fn concurrent_readers_and_writer() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
    assert_send_sync::<Writer>();
    assert_send_sync::<StoredObject>();
    assert_send_sync::<Change>();
    let store = Arc::new(Writer::new(node_index()));
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..2_000u64 {
                store
                    .apply(pod(
                        "ns",
                        &format!("p{}", i % 50),
                        &format!("n{}", i % 7),
                        i + 1,
                    ))
                    .unwrap();
                if i % 10 == 0 {
                    store.delete(&key("ns", &format!("p{}", (i / 10) % 50)));
                }
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..200 {
                    let (rev, items) = store.list(None);
                    assert!(rev <= store.revision());
                    for o in items.iter().take(5) {
                        let v = o.to_json_value();
                        assert_eq!(v["metadata"]["name"].as_str(), Some(o.key().name()));
                    }
                }
            });
        }
    });
    let (_, items) = store.list(None);
    for o in &items {
        assert_eq!(
            o.to_json_value()["metadata"]["resourceVersion"],
            o.resource_version()
        );
    }
}
