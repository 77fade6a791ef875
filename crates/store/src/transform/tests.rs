use crate::vocab::tape::Tape;
use serde_json::{json, Value};

use super::*;
use crate::fixtures::{all_pods, name};
use crate::store::{StoreOptions, Writer};

const LAST_APPLIED: &str =
    r#"metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]"#;

fn transform(drop: &[&str], keep: &[&str]) -> Transform {
    Transform::new(drop, keep).unwrap()
}

/// Applies `t` and checks idempotence and that decoding with it gives the same result.
/// `text` decoded with `t` applied, as JSON.
fn decoded(t: &Transform, text: &str) -> Value {
    let mut tape = Tape::new();
    t.decode(text, &mut tape).unwrap();
    tape.to_value()
}

fn check(t: &Transform, object: &Value) -> Value {
    let mut out = object.clone();
    t.apply(&mut out);
    let mut again = out.clone();
    t.apply(&mut again);
    assert_eq!(again, out, "not idempotent on {}", name(object));
    let text = serde_json::to_string(object).unwrap();
    let decoded = decoded(t, &text);
    assert_eq!(
        decoded,
        out,
        "decoding differs from apply on {}",
        name(object)
    );
    if let Some(written) = written(t, object) {
        assert_eq!(
            String::from_utf8_lossy(&written),
            serde_json::to_string(&out).unwrap(),
            "writing from the store differs from apply on {}",
            name(object)
        );
    }
    out
}

/// `object` stored, then written as JSON text through `t` straight from the store's encoding
/// (`render`); `None` for an object the store does not take (no name).
fn written(t: &Transform, object: &Value) -> Option<Vec<u8>> {
    object["metadata"]["name"].as_str()?;
    let store = Writer::new(StoreOptions::default());
    let change = store.apply(object.clone()).unwrap().unwrap();
    let mut out = Vec::new();
    t.write_json(&change.object, &mut out);
    // What the store hands a reader (a handle on its own copy of the bytes) writes the same.
    let stored = store.list(None).1.pop().unwrap();
    let mut again = Vec::new();
    t.write_json(&stored, &mut again);
    assert_eq!(again, out);
    Some(out)
}

#[test]
fn drop_removes_managed_fields_and_last_applied_on_fixtures() {
    let t = transform(&["metadata.managedFields", LAST_APPLIED], &[]);
    let pods = all_pods();
    assert!(pods
        .iter()
        .any(|p| p["metadata"].get("managedFields").is_some()));
    assert!(pods.iter().any(|p| p["metadata"]["annotations"]
        .get("kubectl.kubernetes.io/last-applied-configuration")
        .is_some()));
    for pod in &pods {
        let out = check(&t, pod);
        assert!(
            out["metadata"].get("managedFields").is_none(),
            "{}",
            name(pod)
        );
        if let Some(annotations) = out["metadata"].get("annotations") {
            assert!(annotations
                .get("kubectl.kubernetes.io/last-applied-configuration")
                .is_none());
            // The other annotations stay.
            let before = pod["metadata"]["annotations"].as_object().unwrap().len();
            let had = pod["metadata"]["annotations"]
                .get("kubectl.kubernetes.io/last-applied-configuration")
                .is_some() as usize;
            assert_eq!(annotations.as_object().unwrap().len(), before - had);
        }
        // Nothing else changes.
        let mut expected = pod.clone();
        let metadata = expected["metadata"].as_object_mut().unwrap();
        metadata.remove("managedFields");
        if let Some(Value::Object(a)) = metadata.get_mut("annotations") {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
        assert_eq!(out, expected);
    }
}

#[test]
fn controller_profile_on_fixtures() {
    let t = Transform::controller();
    for pod in all_pods() {
        let out = check(&t, &pod);
        let top: Vec<&String> = out.as_object().unwrap().keys().collect();
        for key in &top {
            assert!(
                ["apiVersion", "kind", "metadata", "spec", "status"].contains(&key.as_str()),
                "{key} kept on {}",
                name(&pod)
            );
        }
        let mut metadata = pod["metadata"].clone();
        metadata.as_object_mut().unwrap().remove("managedFields");
        assert_eq!(out["metadata"], metadata, "{}", name(&pod));
        match pod["spec"].get("nodeName") {
            Some(node) => assert_eq!(out["spec"], json!({ "nodeName": node })),
            None => assert_eq!(out["spec"], json!({})),
        }
        if let Some(status) = out.get("status") {
            for (key, value) in status.as_object().unwrap() {
                assert!(["phase", "conditions", "podIP"].contains(&key.as_str()));
                assert_eq!(&pod["status"][key], value);
            }
        }
        assert_eq!(out.get("kind"), pod.get("kind"));
        assert!(serde_json::to_vec(&out).unwrap().len() < serde_json::to_vec(&pod).unwrap().len());
    }
}

#[test]
fn keep_projection_keeps_identity_fields() {
    let t = transform(&[], &["spec.nodeName"]);
    for pod in all_pods() {
        let out = check(&t, &pod);
        for field in IDENTITY_FIELDS {
            let mut before = &pod;
            let mut after = &out;
            for key in *field {
                before = &before[*key];
                after = &after[*key];
            }
            assert_eq!(before, after, "{} of {}", field.join("."), name(&pod));
        }
        let metadata = out["metadata"].as_object().unwrap();
        assert!(metadata.keys().all(|k| {
            ["name", "namespace", "uid", "resourceVersion", "generation"].contains(&k.as_str())
        }));
        assert!(out["metadata"]["name"].is_string());
    }
}

#[test]
fn keep_with_wildcards_projects_list_elements_in_place() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {
            "containers": [
                {"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]},
                {"name": "b", "image": "y"},
                {"image": "z"},
                "not-an-object"
            ],
            "volumes": [{"name": "v"}],
            "nodeName": "n"
        },
        "status": {"containerStatuses": []}
    });
    let t = transform(
        &[],
        &[
            "spec.containers[*].name",
            "spec.containers[*].env",
            "status.phase",
        ],
    );
    // status has no phase: it stays, empty.
    let out = check(&t, &pod);
    assert_eq!(
        out,
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "env": [{"name": "E", "value": "1"}]},
                {"name": "b"},
                {},
                "not-an-object"
            ]},
            "status": {}
        })
    );
}

#[test]
fn keep_path_through_a_list_without_wildcard_selects_nothing() {
    let pod =
        json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}});
    let out = check(&transform(&[], &["spec.containers.name"]), &pod);
    assert_eq!(
        out,
        json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {}})
    );
    let out = check(
        &transform(&[], &["spec.containers.name", "metadata.name.x"]),
        &pod,
    );
    assert_eq!(
        out,
        json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {}})
    );
}

#[test]
fn keep_and_drop_of_map_keys_and_wildcards() {
    let pod = json!({
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x", "tier": "y"}, "annotations": {"a": "1"}},
        "spec": {"containers": [
            {"name": "a", "env": [{"name": "E"}], "resources": {"limits": {"cpu": "1"}}},
            {"name": "b", "env": []}
        ]}
    });
    // Keep one label; drop every container's env.
    let t = transform(
        &["spec.containers[*].env"],
        &[r#"metadata.labels["app"]"#, "spec"],
    );
    let out = check(&t, &pod);
    assert_eq!(
        out,
        json!({
            "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "x"}},
            "spec": {"containers": [
                {"name": "a", "resources": {"limits": {"cpu": "1"}}},
                {"name": "b"}
            ]}
        })
    );
    // A drop that empties a map leaves it.
    let out = check(&transform(&[r#"metadata.annotations["a"]"#], &[]), &pod);
    assert_eq!(out["metadata"]["annotations"], json!({}));
    // [*] on a map: every value.
    let out = check(&transform(&["metadata.labels[*]"], &[]), &pod);
    assert_eq!(out["metadata"]["labels"], json!({}));
    let out = check(&transform(&["spec.containers[*]"], &[]), &pod);
    assert_eq!(out["spec"]["containers"], json!([]));
    // A named key and [*] at the same level combine.
    let t = transform(
        &[],
        &[
            "spec.containers[*].name",
            "spec.containers[*].resources.limits",
        ],
    );
    let out = check(&t, &pod);
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name": "a", "resources": {"limits": {"cpu": "1"}}}, {"name": "b"}])
    );
}

#[test]
fn keep_then_drop() {
    // keep leaves status = {phase}; drop then removes phase; the empty status stays.
    let pod =
        json!({"kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running", "x": 1}});
    let out = check(&transform(&["status.phase"], &["status.phase"]), &pod);
    assert_eq!(
        out,
        json!({"kind": "Pod", "metadata": {"name": "p"}, "status": {}})
    );
    let pod = json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"c": [{"n": 1}], "d": 2}});
    let out = check(&transform(&["spec.c"], &["spec.c[*].n"]), &pod);
    assert_eq!(
        out,
        json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {}})
    );
}

#[test]
fn identity_fields_cannot_be_dropped() {
    for (path, field) in [
        ("metadata.name", "metadata.name"),
        ("metadata", "metadata.name"),
        ("metadata[*]", "metadata.name"),
        ("kind", "kind"),
        ("metadata.generation", "metadata.generation"),
    ] {
        let err = Transform::new(&["spec", path], &[]).unwrap_err();
        assert_eq!(
            err,
            TransformError::DropsIdentity {
                index: 1,
                path: path.to_string(),
                field: field.to_string()
            }
        );
        assert_eq!(err.location(), ("drop", 1));
    }
    // Below an identity field is not an identity field.
    Transform::new(&["metadata.labels", "metadata.name.x"], &[]).unwrap();
}

#[test]
fn bad_paths_name_the_list_index_and_column() {
    let err =
        Transform::new(&["metadata.managedFields"], &["spec.nodeName", "spec..x"]).unwrap_err();
    assert_eq!(err.location(), ("keep", 1));
    assert_eq!(
        err.to_string(),
        "keep[1]: invalid path 'spec..x': unexpected '.', expected a field name (write keys with \
         other characters in brackets: [\"key\"]) at column 6"
    );
}

#[test]
fn identity_transform_changes_nothing() {
    let t = Transform::identity();
    assert!(t.is_identity());
    for pod in all_pods() {
        assert_eq!(check(&t, &pod), pod);
    }
}

#[test]
fn transform_is_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<Transform>();
}

#[test]
fn a_key_serde_json_reserves_is_kept_as_written() {
    // Decision: an object whose key is serde_json's private raw-value marker is decoded as
    // written. serde_json's own `Value` (with the `raw_value` feature this crate enables) reads
    // such an object as the JSON text it holds, so the whole-object path (a scope with a filter,
    // or with nothing to remove) still does: a serde_json artifact that no apiserver object
    // has, left as it is there.
    let t = transform(&["metadata.managedFields"], &[]);
    let text = r#"{"metadata":{"name":"p","managedFields":[]},
                   "spec":{"$serde_json::private::RawValue":"5"}}"#;
    assert_eq!(
        decoded(&t, text),
        json!({"metadata": {"name": "p"}, "spec": {"$serde_json::private::RawValue": "5"}})
    );
}
