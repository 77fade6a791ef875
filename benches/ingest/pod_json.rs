//! A k8s-pb `Pod` → the JSON the controller profile keeps, as the apiserver's JSON writes it,
//! for the ingest benchmark's protobuf pass (`protobuf.rs`). Fields tagged `omitempty` in Go
//! are left out when empty; Go's protobuf writes empty strings, so an empty string here is an
//! absent field. The benchmark checks the result equal to what informerd's JSON path stores.

use k8s_openapi::jiff::Timestamp;
use k8s_pb::{
    api::core::v1::{Pod, PodCondition},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time},
};
use serde_json::{Map, Value};

fn put_str(map: &mut Map<String, Value>, key: &str, value: Option<String>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        map.insert(key.into(), Value::String(v));
    }
}

fn put_int(map: &mut Map<String, Value>, key: &str, value: Option<i64>) {
    if let Some(v) = value.filter(|v| *v != 0) {
        map.insert(key.into(), v.into());
    }
}

/// A `metav1.Time`: RFC 3339 in seconds, as its JSON; the zero time (written by Go as an
/// empty message) is `null`, as in JSON.
fn time(t: Time) -> Value {
    match t.seconds.unwrap_or(0) {
        0 => Value::Null,
        s => Timestamp::from_second(s)
            .map(|ts| Value::String(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
            .unwrap_or(Value::Null),
    }
}

fn string_map(m: std::collections::BTreeMap<String, String>) -> Value {
    Value::Object(m.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

fn owner(o: OwnerReference) -> Value {
    let mut map = Map::new();
    for (key, v) in [
        ("apiVersion", o.api_version),
        ("kind", o.kind),
        ("name", o.name),
        ("uid", o.uid),
    ] {
        map.insert(key.into(), Value::String(v.unwrap_or_default()));
    }
    if let Some(c) = o.controller {
        map.insert("controller".into(), c.into());
    }
    if let Some(b) = o.block_owner_deletion {
        map.insert("blockOwnerDeletion".into(), b.into());
    }
    Value::Object(map)
}

fn metadata(m: ObjectMeta) -> Value {
    let mut map = Map::new();
    put_str(&mut map, "name", m.name);
    put_str(&mut map, "generateName", m.generate_name);
    put_str(&mut map, "namespace", m.namespace);
    put_str(&mut map, "selfLink", m.self_link);
    put_str(&mut map, "uid", m.uid);
    put_str(&mut map, "resourceVersion", m.resource_version);
    put_int(&mut map, "generation", m.generation);
    map.insert(
        "creationTimestamp".into(),
        m.creation_timestamp.map_or(Value::Null, time),
    );
    if let Some(t) = m.deletion_timestamp {
        map.insert("deletionTimestamp".into(), time(t));
    }
    if let Some(s) = m.deletion_grace_period_seconds {
        map.insert("deletionGracePeriodSeconds".into(), s.into());
    }
    if !m.labels.is_empty() {
        map.insert("labels".into(), string_map(m.labels));
    }
    if !m.annotations.is_empty() {
        map.insert("annotations".into(), string_map(m.annotations));
    }
    if !m.owner_references.is_empty() {
        let owners = m.owner_references.into_iter().map(owner).collect();
        map.insert("ownerReferences".into(), Value::Array(owners));
    }
    if !m.finalizers.is_empty() {
        let f = m.finalizers.into_iter().map(Value::String).collect();
        map.insert("finalizers".into(), Value::Array(f));
    }
    Value::Object(map)
}

fn condition(c: PodCondition) -> Value {
    let mut map = Map::new();
    map.insert("type".into(), Value::String(c.r#type.unwrap_or_default()));
    put_int(&mut map, "observedGeneration", c.observed_generation);
    map.insert("status".into(), Value::String(c.status.unwrap_or_default()));
    map.insert(
        "lastProbeTime".into(),
        c.last_probe_time.map_or(Value::Null, time),
    );
    map.insert(
        "lastTransitionTime".into(),
        c.last_transition_time.map_or(Value::Null, time),
    );
    put_str(&mut map, "reason", c.reason);
    put_str(&mut map, "message", c.message);
    Value::Object(map)
}

/// The fields of the controller profile (`CONTROLLER_KEEP` minus `CONTROLLER_DROP`).
pub fn controller_value(pod: Pod) -> Value {
    let mut obj = Map::new();
    if let Some(m) = pod.metadata {
        obj.insert("metadata".into(), metadata(m));
    }
    if let Some(spec) = pod.spec {
        let mut map = Map::new();
        put_str(&mut map, "nodeName", spec.node_name);
        obj.insert("spec".into(), Value::Object(map));
    }
    if let Some(status) = pod.status {
        let mut map = Map::new();
        put_str(&mut map, "phase", status.phase);
        if !status.conditions.is_empty() {
            let c = status.conditions.into_iter().map(condition).collect();
            map.insert("conditions".into(), Value::Array(c));
        }
        put_str(&mut map, "podIP", status.pod_ip);
        obj.insert("status".into(), Value::Object(map));
    }
    Value::Object(obj)
}
