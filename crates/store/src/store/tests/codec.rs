//! The encoding round-trips exactly (fixture pods, edge cases, random documents) and releases
//! every atom once nothing holds an object any more.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::*;
use crate::store::packed;
use crate::vocab::tape::Tape;

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

/// `value` onto `tape` with every object's members pushed in reverse order, as a decoder
/// meets them in an order of the apiserver's (Go's field order): the tape sorts them.
fn push_reversed(tape: &mut Tape, value: &Value) {
    match value {
        Value::Array(a) => {
            let open = tape.open_array();
            a.iter().for_each(|v| push_reversed(tape, v));
            tape.close_array(open, a.len());
        }
        Value::Object(m) => {
            let open = tape.open_object();
            for (k, v) in m.iter().rev() {
                tape.push_key(k);
                push_reversed(tape, v);
            }
            tape.close_object(open);
        }
        Value::Null => tape.push_null(),
        Value::Bool(b) => tape.push_bool(*b),
        Value::String(s) => tape.push_str(s),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => tape.push_u64(u),
            (None, Some(i), _) => tape.push_i64(i),
            (None, None, f) => tape.push_f64(f.unwrap_or_default()),
        },
    }
}

#[test]
fn a_tape_encodes_to_the_bytes_of_its_json() {
    for (file, pod) in fixture_pods() {
        for object in [pod.clone(), controller_profile(&pod)] {
            let mut tape = Tape::new();
            push_reversed(&mut tape, &object);
            assert_eq!(tape.to_value(), object, "{file}");
            // Two fresh stores give atoms the same ids in the same order.
            let from_tape = Writer::new(StoreOptions::default())
                .apply_tape_within(&tape, u64::MAX)
                .unwrap()
                .unwrap();
            let from_json = Writer::new(StoreOptions::default())
                .apply(object.clone())
                .unwrap()
                .unwrap();
            assert_eq!(from_tape.object.0.blob, from_json.object.0.blob, "{file}");
            assert_eq!(from_tape.object.to_json_value(), object, "{file}");
        }
    }
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

pub(super) fn random_value(rng: &mut StdRng, depth: usize, name: &str) -> Value {
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
        // Each pass over the names is newer than the last (the store keeps the newer of two
        // resourceVersions), with random versions within a pass.
        let rv = i / 150 * 5 + rng.random_range(0..5);
        object["metadata"] =
            json!({"name": name, "namespace": ns, "resourceVersion": rv.to_string()});
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

/// Strings made of the object's name (a StatefulSet pod's `data-NAME` claim, `NAME.svc`, the
/// generateName prefix) round-trip exactly, and as constants relative to the name they let
/// the objects of one owner share their templates: a second pod costs no new atom.
#[test]
fn strings_made_of_the_name_round_trip_and_are_shared_across_names() {
    let sts_pod = |name: &str, rv: &str| {
        json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
                            "generateName": "not-a-prefix-"},
               "spec": {"hostname": name, "subdomain": "search-nats-headless",
                        "volumes": [{"name": "data", "persistentVolumeClaim":
                                     {"claimName": format!("data-{name}")}}],
                        "env": [format!("{name}.search-nats-headless"), format!("x{name}y"),
                                format!("日本{name}語"),
                                // The name's first bytes before it, and at the end alone.
                                format!("sea{name}"), format!("sea{name}{}", &name[..4])]}})
    };
    let store = Writer::new(StoreOptions::default());
    assert_round_trip(&store, &sts_pod("search-nats-0", "1"));
    let atoms = store.stats().interned_strings;
    assert_round_trip(&store, &sts_pod("search-nats-1", "2"));
    assert_eq!(
        store.stats().interned_strings,
        atoms,
        "nothing new for a sibling"
    );

    let generated = |name: &str, prefix: &str| {
        json!({"metadata": {"name": name, "namespace": "ns", "generateName": prefix},
               "spec": {"claim": format!("data-{name}")}})
    };
    let store = Writer::new(StoreOptions::default());
    assert_round_trip(&store, &generated("web-5d8f9c-4fpns", "web-5d8f9c-"));
    let atoms = store.stats().interned_strings;
    assert_round_trip(&store, &generated("web-5d8f9c-x7k2q", "web-5d8f9c-"));
    assert_eq!(
        store.stats().interned_strings,
        atoms,
        "nothing new for a sibling"
    );
    // Not the name's own prefix, or a name that is not generated: ordinary strings.
    assert_round_trip(&store, &generated("web-5d8f9c-x7k2r", "web-5d8f9"));
    assert_round_trip(&store, &generated("web-0", "web-"));
    assert_round_trip(&store, &generated("short", "data-short"));
    // The name twice: the first is the name, the rest an ordinary string.
    let twice = "search-nats-0search-nats-0";
    assert_round_trip(&store, &generated("search-nats-0", twice));
}

/// The owner's name (the object's name up to a dash) and a StatefulSet pod's ordinal are
/// constants relative to the name: a StatefulSet's pods share one labels template whatever
/// their `pod-index`.
#[test]
fn owner_names_and_ordinals_are_relative_to_the_name() {
    let sts_pod = |ordinal: &str| {
        let name = format!("search-nats-{ordinal}");
        json!({"metadata": {"name": name, "namespace": "ns",
                            "labels": {"apps.kubernetes.io/pod-index": ordinal,
                                       "app.kubernetes.io/instance": "search-nats",
                                       "statefulset.kubernetes.io/pod-name": name},
                            "ownerReferences": [{"kind": "StatefulSet", "name": "search-nats",
                                                 "uid": "3b392317-9e6d-4eae-8883-5e5363906623"}]}})
    };
    let store = Writer::new(StoreOptions::default());
    assert_round_trip(&store, &sts_pod("0"));
    let atoms = store.stats().interned_strings;
    for ordinal in ["1", "12", "0012"] {
        assert_round_trip(&store, &sts_pod(ordinal));
        assert_eq!(
            store.stats().interned_strings,
            atoms,
            "a new atom for pod {ordinal}"
        );
    }
}

/// The Jobs of one CronJob share their pods' labels and owner reference templates, whatever
/// their `job-name` and uid.
#[test]
fn the_jobs_of_a_cronjob_share_their_templates() {
    let job_pod = |job: &str, suffix: &str, uid: &str| {
        json!({"metadata": {"name": format!("{job}-{suffix}"), "namespace": "ns",
                            "generateName": format!("{job}-"),
                            "labels": {"job-name": job, "batch.kubernetes.io/job-name": job,
                                       "controller-uid": uid, "app": "orders-export"},
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                                 "name": job, "uid": uid, "controller": true}]}})
    };
    let store = Writer::new(StoreOptions::default());
    assert_round_trip(
        &store,
        &job_pod(
            "orders-export-29075927",
            "5trxf",
            "1ab23bf6-1e23-4ee2-a4bf-012474e78245",
        ),
    );
    let atoms = store.stats().interned_strings;
    assert_round_trip(
        &store,
        &job_pod(
            "orders-export-29075928",
            "k2x4q",
            "9cb23bf6-1e23-4ee2-a4bf-012474e78245",
        ),
    );
    assert_eq!(
        store.stats().interned_strings,
        atoms,
        "a new atom for a second Job (its labels or its owner reference)"
    );
}

/// A ReplicaSet's pods: the owner's name and the pod template hash are the name's.
#[test]
fn a_deployments_pods_share_their_templates() {
    let rs_pod = |hash: &str, suffix: &str| {
        json!({"metadata": {"name": format!("web-api-{hash}-{suffix}"), "namespace": "ns",
                            "generateName": format!("web-api-{hash}-"),
                            "labels": {"app": "web-api", "pod-template-hash": hash},
                            "ownerReferences": [{"kind": "ReplicaSet",
                                                 "name": format!("web-api-{hash}")}]}})
    };
    let store = Writer::new(StoreOptions::default());
    assert_round_trip(&store, &rs_pod("7d9f8c6b5", "x2k4p"));
    let atoms = store.stats().interned_strings;
    // Another pod of the ReplicaSet, and of the next ReplicaSet of its Deployment: new
    // generateName prefixes, nothing else.
    assert_round_trip(&store, &rs_pod("7d9f8c6b5", "bcd42"));
    assert_eq!(store.stats().interned_strings, atoms);
    assert_round_trip(&store, &rs_pod("5c8d7f9b4", "x2k4p"));
    assert_eq!(
        store.stats().interned_strings,
        atoms + 1,
        "only the new prefix"
    );
}

/// A bare digest (Helm's `checksum/config`, the same for every pod of an owner) is kept once
/// in the template of the pods' annotations, not in every pod; a container's ID, its pod's
/// own, stays in the pod.
#[test]
fn an_owners_configuration_checksum_is_kept_once() {
    let digest = "5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592";
    let rs_pod = |suffix: &str, annotations: Value| {
        json!({"metadata": {"name": format!("web-7d9f8c6b5-{suffix}"), "namespace": "ns",
                            "annotations": annotations},
               "status": {"containerStatuses": [{"containerID": format!("containerd://{digest}")}]}})
    };
    let encoded = |pods: &[Value]| {
        let store = Writer::new(StoreOptions::default());
        for p in pods {
            assert_round_trip(&store, p);
        }
        store.stats().encoded_bytes
    };
    let with = encoded(&[rs_pod("x2k4p", json!({"checksum/config": digest}))]);
    let without = encoded(&[rs_pod("x2k4p", json!({"prometheus.io/scrape": "true"}))]);
    assert!(
        with < without + 8,
        "{with} bytes with the checksum, {without} without"
    );
    let container_id = encoded(&[json!({"metadata": {"name": "a", "namespace": "ns"},
        "status": {"containerStatuses": [{"containerID": format!("containerd://{digest}")}]}})]);
    let no_container_id = encoded(&[json!({"metadata": {"name": "a", "namespace": "ns"},
        "status": {"containerStatuses": [{"containerID": "none"}]}})]);
    assert!(
        container_id >= no_container_id + 32,
        "a container's ID is the pod's own"
    );
}

/// Strings that are not at a dash, not the whole name, not an ordinal or a hash: ordinary
/// strings, read back exactly.
#[test]
fn strings_almost_relative_to_the_name_round_trip() {
    let store = Writer::new(StoreOptions::default());
    let odd = json!({"metadata": {"name": "web-0-x", "namespace": "ns",
                                  "labels": {"a": "we", "b": "web-0-x-", "c": "x", "d": "0",
                                             "e": "web-", "f": "web-0", "g": "-"}}});
    assert_round_trip(&store, &odd);
    let generated = json!({"metadata": {"name": "web-x2k4p", "namespace": "ns",
                                        "labels": {"a": "web", "b": "", "c": "x2k4p"}}});
    assert_round_trip(&store, &generated);
    let hashless = json!({"metadata": {"name": "-x2k4p", "namespace": "ns",
                                       "labels": {"a": "", "b": "-"}}});
    assert_round_trip(&store, &hashless);
    let dash = json!({"metadata": {"name": "web-", "namespace": "ns",
                                   "labels": {"a": "web", "b": ""}}});
    assert_round_trip(&store, &dash);
}

/// A large annotation (kubectl's last-applied-configuration) is kept compressed, read back
/// exactly, through a path too (the label pre-check and indexes read single fields), shared by
/// the objects that carry it, and freed with the last of them.
#[test]
fn large_strings_are_kept_compressed_shared_and_freed() {
    let applied = serde_json::to_string(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"annotations": {}, "labels": {"app.kubernetes.io/name": "web"},
                     "name": "web", "namespace": "shop"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app.kubernetes.io/name": "web"}},
                 "template": {"metadata": {"labels": {"app.kubernetes.io/name": "web"}},
                              "spec": {"containers": [{"image": "acme/web:1.2.3", "name": "web",
                                                       "ports": [{"containerPort": 8080}]}]}}}
    }))
    .unwrap();
    assert!(applied.len() >= packed::MIN_LEN);
    let store = Writer::new(StoreOptions {
        log_max_events: 0,
        ..StoreOptions::default()
    });
    for (i, name) in ["web-a", "web-b"].into_iter().enumerate() {
        let mut p = pod("shop", name, "node-1", i as u64 + 1);
        p["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": applied});
        assert_round_trip(&store, &p);
        let got = store.get(&key("shop", name)).unwrap();
        let path = [
            "metadata",
            "annotations",
            "kubectl.kubernetes.io/last-applied-configuration",
        ];
        assert_eq!(got.decode_at(&path), Some(Value::String(applied.clone())));
    }
    let packed = store.atom_breakdown().packed_strings;
    assert_eq!((packed.atoms, packed.referenced_once), (1, 1), "{packed:?}");
    assert!(packed.bytes < applied.len(), "{packed:?}");
    store.delete(&key("shop", "web-a"));
    store.delete(&key("shop", "web-b"));
    store.reclaim();
    assert_eq!(store.atom_breakdown().packed_strings.atoms, 0);
}
