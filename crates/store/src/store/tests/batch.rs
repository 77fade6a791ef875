//! `JsonBatch`: several objects written into one buffer read exactly as each written alone,
//! whatever they share: constants copied from an earlier object's text are the ones that
//! depend on nothing but their atom.

use serde_json::{json, Value};

use super::*;

/// Each object's text alone, one after the other.
fn alone(objects: &[StoredObject]) -> Vec<u8> {
    let mut out = Vec::new();
    for o in objects {
        o.write_json(&mut out);
    }
    out
}

fn batched(objects: &[StoredObject]) -> (Vec<u8>, JsonBatch) {
    let mut batch = JsonBatch::new();
    for o in objects {
        batch.write(o);
    }
    (batch.take(), batch)
}

/// Pods of two ReplicaSets of one Deployment, `web`, and of a second Deployment, `api`, in
/// turn: one labels template for all, whose app name and `pod-template-hash` are taken from
/// each pod's name; one kubectl annotation (a large string) and one set of condition types.
fn deployment_pods() -> Vec<Value> {
    let applied = serde_json::to_string(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"annotations": {}, "labels": {"app.kubernetes.io/name": "web"},
                     "name": "web", "namespace": "shop"},
        "spec": {"template": {"metadata": {"labels": {"app.kubernetes.io/name": "web"}},
                              "spec": {"containers": [{"image": "acme/web:1.2.3",
                                                       "name": "web"}]}}}
    }))
    .unwrap();
    let mut pods = Vec::new();
    for (i, (app, hash, suffix)) in [
        ("web", "7d9f8c6b5", "x2k4p"),
        ("api", "7d9f8c6b5", "x2k4p"),
        ("web", "5c8d7f9b4", "bcd42"),
        ("api", "6b5f8c9d7", "q8z7m"),
        ("web", "7d9f8c6b5", "q8z7m"),
        ("web", "5c8d7f9b4", "zz9k1"),
    ]
    .into_iter()
    .enumerate()
    {
        pods.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("{app}-{hash}-{suffix}"), "namespace": "shop",
                "generateName": format!("{app}-{hash}-"),
                "uid": format!("00000000-0000-4000-8000-{i:012x}"),
                "resourceVersion": (i + 1).to_string(),
                "labels": {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop",
                           "app.kubernetes.io/component": "frontend", "pod-template-hash": hash},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied,
                                "team.example.com/owner": "storefront-team@example.com"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                     "name": format!("{app}-{hash}"), "controller": true,
                                     "uid": "3b392317-9e6d-4eae-8883-5e5363906623"}],
            },
            "spec": {"nodeName": format!("node-{i}")},
            "status": {"phase": "Running", "podIP": format!("10.0.0.{i}"),
                       "conditions": [
                           {"type": "Ready", "status": "True",
                            "lastTransitionTime": format!("2026-01-01T00:00:0{i}Z")},
                           {"type": "PodScheduled", "status": "True",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }));
    }
    pods
}

fn stored(pods: Vec<Value>) -> Vec<StoredObject> {
    let store = Writer::new(StoreOptions::default());
    for p in pods {
        store.apply(p).expect("apply");
    }
    let (_, mut objects) = store.list(None);
    objects.sort_by_key(StoredObject::revision);
    objects
}

#[test]
fn a_batch_writes_each_object_as_it_is_written_alone() {
    let objects = stored(deployment_pods());
    let (text, batch) = batched(&objects);
    assert_eq!(
        String::from_utf8_lossy(&text),
        String::from_utf8_lossy(&alone(&objects))
    );
    // And its text parses back into the pods, each its own hash and name.
    let mut rest = &text[..];
    for o in &objects {
        let mut de = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
        let v = de.next().expect("one more object").expect("valid JSON");
        rest = &rest[de.byte_offset()..];
        assert_eq!(v, o.to_json_value());
    }
    assert!(rest.is_empty());
    assert!(batch.is_empty(), "taken");
}

/// Objects of two stores in one batch: each store gave the same atom ids to different text (the
/// same shapes, other strings), and an object of one is never written with the other's.
#[test]
fn objects_of_two_stores_are_written_as_alone() {
    let first = stored(deployment_pods());
    let renamed = serde_json::to_string(&deployment_pods())
        .unwrap()
        .replace("shop", "mall")
        .replace("storefront", "checkout")
        .replace("acme/web", "acme/api");
    let second = stored(serde_json::from_str(&renamed).unwrap());
    let mixed: Vec<StoredObject> = first
        .iter()
        .zip(&second)
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    let (text, _) = batched(&mixed);
    assert_eq!(
        String::from_utf8_lossy(&text),
        String::from_utf8_lossy(&alone(&mixed))
    );
}

/// The shared constants are copied, not written again: the large annotation is in the text
/// once per pod but was remembered after the first.
#[test]
fn a_batch_remembers_the_shared_constants_it_wrote() {
    let objects = stored(deployment_pods());
    let mut batch = JsonBatch::new();
    batch.write(&objects[0]);
    assert!(
        batch.remembered() >= 2,
        "the annotations and the large string (and more) are remembered: {}",
        batch.remembered()
    );
    let after_one = batch.remembered();
    batch.write(&objects[1]);
    assert_eq!(
        batch.remembered(),
        after_one,
        "nothing new to remember for a sibling"
    );
    batch.take();
    assert_eq!(batch.remembered(), 0, "forgotten with the text");
}

/// A selection written between whole objects (a List with a field mask writes with
/// `write_with`) leaves the remembered ranges right; one that cuts the text forgets them.
#[test]
fn what_is_written_beside_whole_objects_keeps_them_right() {
    let objects = stored(deployment_pods());
    let mut batch = JsonBatch::new();
    let mut want = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        if i % 2 == 1 {
            batch.write_with(|out| out.extend_from_slice(b"{\"masked\":true}"));
            want.extend_from_slice(b"{\"masked\":true}");
        }
        batch.write(o);
        o.write_json(&mut want);
    }
    assert_eq!(batch.take(), want);

    let mut batch = JsonBatch::new();
    batch.write(&objects[0]);
    batch.write_with(|out| out.clear());
    assert_eq!(batch.remembered(), 0, "a cut forgets every range");
    batch.write(&objects[1]);
    assert_eq!(batch.take(), alone(&objects[1..2]));
}

/// Real pods of the shared fixtures, whole and through the controller profile, all in one
/// batch and twice over: the same text as each alone.
#[test]
fn fixture_pods_batched_read_as_alone() {
    let mut pods = Vec::new();
    for (i, (_, pod)) in fixture_pods().into_iter().enumerate() {
        for (j, p) in [pod.clone(), controller_profile(&pod)]
            .into_iter()
            .enumerate()
        {
            let mut p = p;
            p["metadata"]["name"] = format!("pod-{i}-{j}").into();
            pods.push(p);
        }
    }
    let objects = stored(pods);
    let twice: Vec<StoredObject> = objects.iter().chain(&objects).cloned().collect();
    assert_eq!(batched(&twice).0, alone(&twice));
}

/// Random documents (strings made of their names, numbers, nested lists and objects), each
/// holding some of a few shared random values, under names that the values are made of:
/// batched, the text of each alone.
#[test]
fn random_documents_batched_read_as_alone() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::codec::random_value;

    let mut rng = StdRng::seed_from_u64(11);
    let mut remembered = 0;
    for round in 0..40 {
        let names: Vec<String> = (0..8).map(|i| format!("app-{}-x4b{i}z", i % 3)).collect();
        let shared: Vec<Value> = (0..4)
            .map(|k| random_value(&mut rng, 1, &names[k]))
            .collect();
        let mut docs = Vec::new();
        for name in &names {
            let mut doc = serde_json::Map::new();
            doc.insert(
                "metadata".into(),
                json!({"name": name, "namespace": "ns", "resourceVersion": round.to_string()}),
            );
            for (k, v) in shared.iter().enumerate() {
                if rng.random_bool(0.7) {
                    doc.insert(format!("shared{k}"), v.clone());
                }
            }
            doc.insert("own".into(), random_value(&mut rng, 1, name));
            docs.push(Value::Object(doc));
        }
        let objects = stored(docs);
        let mut batch = JsonBatch::new();
        for o in &objects {
            batch.write(o);
        }
        remembered += batch.remembered();
        assert_eq!(
            String::from_utf8_lossy(&batch.take()),
            String::from_utf8_lossy(&alone(&objects)),
            "round {round}"
        );
    }
    assert!(
        remembered >= 10,
        "shared values were copied: {remembered} remembered"
    );
}
