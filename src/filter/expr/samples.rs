//! The sample objects an expression is evaluated on at compile time, to refuse one whose result
//! has the wrong type (the cel crate has no type checker).

use std::sync::LazyLock;

use serde_json::Value;

use super::type_name;
use crate::filter::FilterError;

/// Sample objects evaluated at compile time: an empty object, and a pod with the usual fields.
/// See [`Filter::compile`].
fn samples() -> &'static [(&'static str, Value)] {
    static SAMPLES: LazyLock<Vec<(&'static str, Value)>> = LazyLock::new(|| {
        vec![
            ("an empty object", serde_json::json!({})),
            (
                "a sample pod",
                serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": "web-7d4b9c8f6-x2x7z",
                        "generateName": "web-7d4b9c8f6-",
                        "namespace": "default",
                        "uid": "0b6f9c62-4a5e-4f57-8a8e-2d1c9d2b1a01",
                        "resourceVersion": "1234",
                        "generation": 1,
                        "creationTimestamp": "2024-01-01T00:00:00Z",
                        "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6"},
                        "annotations": {"example.com/note": "x"},
                        "ownerReferences": [{
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": "web-7d4b9c8f6",
                            "uid": "5d1c7e8a-3b2f-4c6d-9e0a-1f2b3c4d5e6f",
                            "controller": true,
                            "blockOwnerDeletion": true
                        }],
                        "finalizers": ["example.com/cleanup"]
                    },
                    "spec": {
                        "nodeName": "node-1",
                        "serviceAccountName": "default",
                        "containers": [{
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "MODE", "value": "prod"}],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}
                        }],
                        "volumes": [{"name": "data", "emptyDir": {}}]
                    },
                    "status": {
                        "phase": "Running",
                        "podIP": "10.244.0.5",
                        "hostIP": "172.18.0.2",
                        "qosClass": "Burstable",
                        "startTime": "2024-01-01T00:00:01Z",
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [{
                            "name": "web", "ready": true, "restartCount": 0, "image": "nginx:1.27"
                        }]
                    }
                }),
            ),
        ]
    });
    &SAMPLES
}

/// Refuses an expression whose result on a sample object `check` refuses (evaluation errors are
/// for run time: they depend on the object).
pub(super) fn check_samples(
    evaluate: impl Fn(&Value) -> Result<cel::Value, FilterError>,
    check: impl Fn(cel::Value, &'static str) -> Result<(), FilterError>,
) -> Result<(), FilterError> {
    for (sample, object) in samples() {
        if let Ok(value) = evaluate(object) {
            check(value, sample)?;
        }
    }
    Ok(())
}

/// Refuses an expression that evaluates to something other than a bool on a sample object.
pub(super) fn check_bool(
    evaluate: impl Fn(&Value) -> Result<cel::Value, FilterError>,
) -> Result<(), FilterError> {
    check_samples(evaluate, |value, sample| match value {
        cel::Value::Bool(_) => Ok(()),
        other => Err(FilterError::NotBool {
            got: type_name(&other),
            sample,
        }),
    })
}
