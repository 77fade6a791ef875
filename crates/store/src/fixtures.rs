//! The real Pod objects recorded from clusters (`../shared/fixtures/pods`, beside the
//! repository), read one way for the unit tests, integration tests and benchmarks that check or
//! measure against them: this crate's, and those of crates that turn the `test-fixtures`
//! feature on (informerd's tests, testkit).

use std::path::PathBuf;

use serde_json::Value;

/// The fixtures' directory, beside the repository.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/pods")
}

fn read(name: &str) -> String {
    let path = dir().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()))
}

/// The pods of the kind cluster's kube-system namespace (a `PodList`).
pub fn kube_system_pods() -> Vec<Value> {
    let list: Value = serde_json::from_str(&read("kind-v1.36-kube-system-podlist.json")).unwrap();
    list["items"].as_array().unwrap().clone()
}

/// Every pod of the fixtures, as values: the pod list's items, the single pods and the
/// objects of the watch events ([`pods`] without where each came from).
pub fn all_pods() -> Vec<Value> {
    pods().into_iter().map(|p| p.object).collect()
}

/// The name of a pod, for assertion messages.
pub fn name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or("?")
}

/// One recorded pod.
#[derive(Debug, Clone)]
pub struct FixturePod {
    /// The file it was read from.
    pub file: String,
    /// Whether it is the object of a recorded watch event (`.jsonl`); those are pods of the
    /// recorded PodList, seen again.
    pub watched: bool,
    /// The pod.
    pub object: Value,
}

/// Every recorded pod, in file order: the items of a list, a single pod (JSON or YAML), the
/// objects of watch events (JSON lines). Panics naming the file when one cannot be read.
pub fn pods() -> Vec<FixturePod> {
    let dir = dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixture pods in {}: {e}", dir.display()))
        .map(|e| e.expect("fixture entry").path())
        .collect();
    files.sort();
    let mut pods = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
        let file = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let bad = |e: &dyn std::fmt::Display| panic!("fixture {}: {e}", path.display());
        let (watched, docs): (bool, Vec<Value>) = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => (
                false,
                vec![serde_json::from_str(&text).unwrap_or_else(|e| bad(&e))],
            ),
            Some("yaml" | "yml") => (
                false,
                vec![serde_yaml::from_str(&text).unwrap_or_else(|e| bad(&e))],
            ),
            Some("jsonl") => (
                true,
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| {
                        let event: Value = serde_json::from_str(l).unwrap_or_else(|e| bad(&e));
                        event["object"].clone()
                    })
                    .collect(),
            ),
            _ => continue,
        };
        for doc in docs {
            let objects = match doc.get("items").and_then(Value::as_array) {
                Some(items) => items.clone(),
                None => vec![doc],
            };
            pods.extend(objects.into_iter().map(|object| FixturePod {
                file: file.clone(),
                watched,
                object,
            }));
        }
    }
    assert!(
        pods.len() >= 10,
        "expected the fixture pods in {}, found {}",
        dir.display(),
        pods.len()
    );
    pods
}
