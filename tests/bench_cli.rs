//! `informerd bench` on the real recorded pods of `../shared/fixtures`: it keeps exactly the
//! objects its configuration keeps (counted here independently), the transform makes them
//! smaller, and a bad configuration is refused with `FILE:LINE:COLUMN` and exit status 1.
//! No cluster is needed.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

fn informerd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_informerd"))
}

/// A directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("informerd-bench-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fixtures() -> PathBuf {
    informerd_testkit::fixtures::dir()
}

/// Every recorded pod of the fixtures, as `kubectl get pods -A -o json` lists them (each with
/// apiVersion and kind), in file order. The watch recording is left out: its objects are
/// pods of the recorded PodList.
fn fixture_pods() -> Vec<Value> {
    informerd_testkit::fixtures::pods()
        .into_iter()
        .filter(|p| !p.watched)
        .map(|p| {
            let mut pod = p.object;
            pod["apiVersion"] = json!("v1");
            pod["kind"] = json!("Pod");
            pod
        })
        .collect()
}

/// The pods a DaemonSet owns, counted by namespace/name (the last object of a name wins, as
/// in a cache).
fn daemonset_owned(pods: &[Value]) -> usize {
    let mut owned = BTreeMap::new();
    for pod in pods {
        let meta = &pod["metadata"];
        let key = (
            meta["namespace"].as_str().unwrap_or_default().to_string(),
            meta["name"].as_str().expect("name").to_string(),
        );
        let is_owned = meta["ownerReferences"]
            .as_array()
            .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "DaemonSet"));
        owned.insert(key, is_owned);
    }
    owned.values().filter(|o| **o).count()
}

/// DaemonSet-owned pods, "controller" profile.
const CONFIG: &str = r#"apiVersion: informerd.io/v1alpha1
kind: Config
resources:
- name: pods
  apiVersion: v1
  kind: Pod
  filter: 'object.metadata.ownerReferences.exists(o, o.kind == "DaemonSet")'
  transform:
    keep: [metadata, spec.nodeName, status.phase, status.conditions, status.podIP]
    drop: [metadata.managedFields]
  indexes:
  - name: node
    path: spec.nodeName
"#;

fn bench(config: &Path, input: &Path, extra: &[&str]) -> Output {
    informerd()
        .arg("bench")
        .arg("--config")
        .arg(config)
        .arg("--input")
        .arg(input)
        .args(extra)
        .output()
        .expect("run informerd bench")
}

fn json_report(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("-o json prints JSON")
}

#[test]
fn bench_keeps_what_the_config_keeps_of_the_recorded_pods() {
    let dir = TempDir::new("list");
    let pods = fixture_pods();
    let expected = daemonset_owned(&pods);
    assert!(expected >= 1, "the fixtures hold DaemonSet pods");
    let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                      "items": pods});
    let input = dir.write(
        "pods.json",
        &serde_json::to_string_pretty(&list).expect("JSON"),
    );
    let config = dir.write("bench.yaml", CONFIG);

    let report = json_report(&bench(&config, &input, &["-o", "json"]));
    assert_eq!(report["objectsRead"], pods.len());
    let r = &report["resources"][0];
    assert_eq!(r["name"], "pods");
    assert_eq!(r["objectsRead"], pods.len());
    assert_eq!(r["objectsKept"], expected, "{report:#}");
    let per = &r["perObject"];
    let full = per["fullJsonBytesKept"].as_u64().expect("full bytes");
    let transformed = per["transformedJsonBytes"].as_u64().expect("transformed");
    assert!(
        transformed < full,
        "the transform makes objects smaller: {report:#}"
    );
    assert!(per["storeEncodedBytes"].as_u64().expect("encoded") > 0);
    assert!(r["storeAllocatedBytes"].as_u64().expect("allocated") > 0);
    assert_eq!(r["storeChangeLogEntries"], expected);

    let out = bench(&config, &input, &[]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    let kept_line = table
        .lines()
        .find(|l| l.trim_start().starts_with("objects kept"))
        .unwrap_or_else(|| panic!("a line for objects kept: {table}"));
    assert!(
        kept_line
            .split_whitespace()
            .any(|w| w == expected.to_string()),
        "{kept_line}"
    );
    assert!(table.contains("store: allocated (jemalloc)"), "{table}");
}

#[test]
fn bench_reads_a_pod_list_whose_items_carry_no_kind() {
    let dir = TempDir::new("podlist");
    let path = fixtures().join("kind-v1.36-kube-system-podlist.json");
    let list: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("JSON");
    assert_eq!(list["kind"], "PodList");
    let items = list["items"].as_array().expect("items");
    assert!(items.iter().all(|i| i.get("kind").is_none()));
    let config = dir.write("bench.yaml", CONFIG);

    let report = json_report(&bench(&config, &path, &["-o", "json"]));
    let r = &report["resources"][0];
    assert_eq!(r["objectsRead"], items.len());
    assert_eq!(r["objectsKept"], daemonset_owned(items));
}

#[test]
fn bench_reads_json_lines_from_stdin() {
    let dir = TempDir::new("stdin");
    let pods = fixture_pods();
    let config = dir.write("bench.yaml", CONFIG);
    let mut child = informerd()
        .args(["bench", "-o", "json", "--input", "-", "--config"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run informerd bench");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for pod in &pods {
            writeln!(stdin, "{pod}").expect("write a line");
        }
    }
    let report = json_report(&child.wait_with_output().expect("wait"));
    assert_eq!(report["input"], "stdin");
    assert_eq!(report["resources"][0]["objectsRead"], pods.len());
    assert_eq!(
        report["resources"][0]["objectsKept"],
        daemonset_owned(&pods)
    );
}

#[test]
fn bench_refuses_a_bad_config_with_file_line_column() {
    let dir = TempDir::new("bad");
    let config = dir.write(
        "bad.yaml",
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  filter: 'object.metadata.name'\n",
    );
    let input = fixtures().join("kind-v1.36-kube-system-podlist.json");
    let out = bench(&config, &input, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!("{}:6:11: resources[0].filter:", config.display());
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bench_refuses_an_unknown_resource_and_an_input_it_cannot_read() {
    let dir = TempDir::new("refusals");
    let config = dir.write("bench.yaml", CONFIG);
    let input = fixtures().join("kind-v1.36-kube-system-podlist.json");

    let out = bench(&config, &input, &["--resource", "nodes"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--resource nodes"), "{stderr}");
    assert!(
        stderr.contains("pods"),
        "names the configured resources: {stderr}"
    );

    let broken = dir.write("broken.json", "{\"kind\": \"PodList\",\n \"items\": [}\n");
    let out = bench(&config, &broken, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:2:12:", broken.display())),
        "{stderr}"
    );
}
