//! For the tests that apply `deploy/`: kubectl as a user runs it (the one the Makefile builds
//! from the control plane's own release, `make .cache/bin/kubectl`; `$INFORMERD_KUBECTL` names
//! another), as the control plane's admin, in the repository; the documents of what it
//! renders; and the informerd configuration those manifests deployed.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, Volume, VolumeMount};
use kube::{Api, Client};

use crate::{repo_root, ControlPlane, Result};

/// The kubectl the Makefile builds, against the control plane as its admin.
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// Builds kubectl if needed (unless `$INFORMERD_KUBECTL` names one).
    pub fn new(cp: &ControlPlane) -> Kubectl {
        let bin = match std::env::var_os("INFORMERD_KUBECTL") {
            Some(path) => PathBuf::from(path),
            None => {
                let made = Command::new("make")
                    .args(["-s", "-C"])
                    .arg(repo_root())
                    .arg(".cache/bin/kubectl")
                    .status()
                    .expect("run make");
                assert!(made.success(), "make .cache/bin/kubectl failed");
                cp.bin("kubectl")
            }
        };
        Kubectl {
            bin,
            kubeconfig: cp.kubeconfig().to_path_buf(),
        }
    }

    /// Runs `kubectl ARGS` in the repository with `stdin`; its output, or a panic with its errors.
    pub fn run(&self, args: &[&str], stdin: &str) -> String {
        use std::io::Write;
        let mut child = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .current_dir(repo_root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kubectl");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// The YAML documents of `manifests` (what `kubectl kustomize` prints).
pub fn documents(manifests: &str) -> Vec<serde_yaml::Value> {
    serde_yaml::Deserializer::from_str(manifests)
        .map(|d| <serde_yaml::Value as serde::Deserialize>::deserialize(d).unwrap())
        .collect()
}

/// A name prefix of this run's own (`{base}-{pid}-{nanos}`), so that runs on a shared control
/// plane never collide.
pub fn unique_prefix(base: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{base}-{}-{nanos:x}", std::process::id())
}

/// The `informerd.yaml` of the ConfigMap in `manifests`, as the apiserver holds it in `ns`.
pub async fn deployed_config(
    client: &Client,
    ns: &str,
    manifests: &str,
) -> Result<serde_yaml::Value> {
    let docs = documents(manifests);
    let name = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .and_then(|d| d["metadata"]["name"].as_str())
        .expect("a ConfigMap in the manifests");
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(name)
        .await?;
    let text = cm.data.unwrap_or_default().remove("informerd.yaml");
    Ok(serde_yaml::from_str(&text.expect("informerd.yaml in the ConfigMap")).expect("YAML"))
}

/// What `informerd rbac` (the binary `bin`) prints for the configuration `config` (relative to
/// the repository) and the ServiceAccount `service_account` in `namespace`, its objects named
/// `name`, with `env` set for the configuration's `${VARS}`; panics with its stderr if it fails.
/// The deploy tests compare it with a base's committed rbac.yaml.
pub fn informerd_rbac(
    bin: &Path,
    config: &str,
    (service_account, namespace, name): (&str, &str, &str),
    env: &[(&str, &str)],
) -> String {
    let out = std::process::Command::new(bin)
        .args(["rbac", "--service-account", service_account])
        .args([
            "--service-account-namespace",
            namespace,
            "--name",
            name,
            "--config",
        ])
        .arg(repo_root().join(config))
        .envs(env.iter().copied())
        .output()
        .expect("informerd rbac runs");
    assert!(
        out.status.success(),
        "informerd rbac --config {config}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The mount of `container` at `path` in a deployed manifest's pod, and the pod's volume it
/// mounts: what the deploy tests check a socket or certificate directory against.
pub fn volume_at<'p>(
    pod: &'p PodSpec,
    container: &'p Container,
    path: &str,
) -> Option<(&'p VolumeMount, &'p Volume)> {
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == path)?;
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)?;
    Some((mount, volume))
}
