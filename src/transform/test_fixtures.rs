//! The real pods of the project's shared fixtures, for unit tests.

use std::path::PathBuf;

use serde_json::Value;

/// The fixtures directory, beside the repository.
pub(crate) fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/pods")
}

fn read(name: &str) -> String {
    let path = dir().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()))
}

/// The pods of the kind cluster's kube-system namespace (a `PodList`).
pub(crate) fn kube_system_pods() -> Vec<Value> {
    let list: Value = serde_json::from_str(&read("kind-v1.36-kube-system-podlist.json")).unwrap();
    list["items"].as_array().unwrap().clone()
}

/// Every pod of the fixtures: the pod list, the single pods and the objects of the watch events.
pub(crate) fn all_pods() -> Vec<Value> {
    let mut pods = kube_system_pods();
    for name in [
        "k9s-pod.json",
        "k9s-pod-init.json",
        "k9s-pod-sidecar.json",
        "kubectl-neat-pod-raw.json",
    ] {
        pods.push(serde_json::from_str(&read(name)).unwrap());
    }
    pods.push(serde_yaml::from_str(&read("apiserver-fieldmanager-pod.yaml")).unwrap());
    for line in read("kind-v1.36-watch-pods.jsonl").lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        pods.push(event["object"].clone());
    }
    assert!(pods.len() > 10, "the fixtures hold more pods");
    pods
}

/// The name of a pod, for assertion messages.
pub(crate) fn name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or("?")
}
