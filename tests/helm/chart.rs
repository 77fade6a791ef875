//! What the chart's tests share: helm (built by the Makefile), rendering the chart with values,
//! the objects it renders, informerd run on what it renders, and the apiserver's server-side
//! dry run of them.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use informerd_testkit::{documents, made_tool, repo_root, unique_prefix, Kubectl};
use serde_yaml::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_informerd");
pub const CHART: &str = "deploy/helm/informerd";

/// helm, built by `make` when missing or older than its module (unless `$INFORMERD_HELM`).
pub fn helm_bin() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| made_tool("INFORMERD_HELM", ".cache/bin/helm"))
        .clone()
}

/// A directory of this test's own, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(base: &str) -> TempDir {
        let dir = std::env::temp_dir().join(unique_prefix(base));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Writes `text` to `name` in the directory; its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `helm ARGS` in the repository: its output, or its errors.
pub fn helm(args: &[&str]) -> Result<String, String> {
    // Helm's cache and configuration (repositories, the dependency cache) in the repository's
    // git-ignored .cache, not the user's.
    let home = repo_root().join(".cache/helm-home");
    let out = Command::new(helm_bin())
        .args(args)
        .current_dir(repo_root())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("run helm");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `helm template RELEASE CHART --namespace NS --values VALUES`: the objects, or helm's errors.
pub fn template(chart: &Path, release: &str, ns: &str, values: &str) -> Result<Vec<Value>, String> {
    let dir = TempDir::new("helm-values");
    let file = dir.write("values.yaml", values);
    let rendered = helm(&[
        "template",
        release,
        chart.to_str().unwrap(),
        "--namespace",
        ns,
        "--values",
        file.to_str().unwrap(),
    ])?;
    Ok(documents(&rendered)
        .into_iter()
        .filter(|d| !d.is_null())
        .collect())
}

pub fn chart() -> PathBuf {
    repo_root().join(CHART)
}

/// The rendered object of `kind` (the first), or a panic listing what was rendered.
pub fn object<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} among {:?}", kinds(objects)))
}

pub fn kinds(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or("?"),
                o["metadata"]["name"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

/// The configuration in the rendered ConfigMap.
pub fn rendered_config(objects: &[Value]) -> String {
    object(objects, "ConfigMap")["data"]["informerd.yaml"]
        .as_str()
        .expect("informerd.yaml in the ConfigMap")
        .to_string()
}

/// Runs informerd (`ARGS`, with `NODE_NAME` set for node configurations): output or errors.
pub fn informerd(args: &[&str]) -> Result<String, String> {
    let out = Command::new(BIN)
        .args(args)
        .env("NODE_NAME", "any")
        .output()
        .expect("run informerd");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `informerd check-config` accepts the configuration the chart rendered.
pub fn assert_config_is_valid(objects: &[Value]) {
    let dir = TempDir::new("helm-config");
    let file = dir.write("informerd.yaml", &rendered_config(objects));
    if let Err(e) = informerd(&["check-config", file.to_str().unwrap()]) {
        panic!("informerd check-config refuses the rendered configuration: {e}");
    }
}

/// What the apiserver answers to a server-side dry run of `objects`, by `Kind/namespace/name`.
pub fn dry_run(kubectl: &Kubectl, objects: &[Value]) -> BTreeMap<String, Value> {
    let stream: String = objects
        .iter()
        .map(|o| format!("---\n{}", serde_yaml::to_string(o).unwrap()))
        .collect();
    let out = kubectl.run(
        &["apply", "--dry-run=server", "-o", "yaml", "-f", "-"],
        &stream,
    );
    let answer: Value = serde_yaml::from_str(&out).expect("kubectl's YAML");
    let items = match answer["kind"].as_str() {
        Some("List") => answer["items"].as_sequence().cloned().unwrap_or_default(),
        _ => vec![answer],
    };
    let accepted: BTreeMap<String, Value> = items.into_iter().map(|o| (key(&o), o)).collect();
    for o in objects {
        assert!(
            accepted.contains_key(&key(o)),
            "{} is not in the apiserver's answer: {:?}",
            key(o),
            accepted.keys()
        );
    }
    accepted
}

pub fn key(o: &Value) -> String {
    format!(
        "{}/{}/{}",
        o["kind"].as_str().unwrap_or_default(),
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The pod spec of the workload `kind` in the apiserver's answer.
pub fn pod_spec<'a>(accepted: &'a BTreeMap<String, Value>, kind: &str) -> &'a Value {
    let (_, workload) = accepted
        .iter()
        .find(|(k, _)| k.starts_with(&format!("{kind}/")))
        .unwrap_or_else(|| panic!("no {kind} in {:?}", accepted.keys()));
    &workload["spec"]["template"]["spec"]
}
