//! The pods a benchmark finds in the control plane: the seeder's numbered namespaces, how
//! many pods they hold, and the sidecar's `resources:` entry that caches them.

use anyhow::Context;
use informerd_testkit::{ControlPlane, Resource};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

/// `{prefix}-0` .. `{prefix}-{n - 1}`: the namespaces the seeder (`seed pods --prefix`) fills.
pub fn namespaces(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Pods in the namespaces, counted without listing them: one item and the count of the rest
/// (a benchmark must not hold the pods it measures).
pub async fn count_pods(client: &kube::Client, namespaces: &[String]) -> anyhow::Result<usize> {
    let mut n = 0;
    for ns in namespaces {
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let page = api
            .list_metadata(&ListParams::default().limit(1))
            .await
            .with_context(|| format!("count the pods of {ns}"))?;
        n += page.items.len() + page.metadata.remaining_item_count.unwrap_or(0) as usize;
    }
    Ok(n)
}

/// The `resources:` entry `pods` of a sidecar configuration: the Pods of `namespaces`, with
/// the transform's `keep` and `drop` paths. A benchmark adds what else the entry needs
/// (an index).
pub fn pods_resource(namespaces: &[String], keep: &[&str], drop: &[&str]) -> Resource {
    Resource::pods()
        .namespaces(namespaces)
        .keep(keep.iter().copied())
        .drop(drop.iter().copied())
}

/// `seed pods --etcd`: `pods` pods in `{prefix}-0..{namespaces}` written straight into the
/// apiserver's etcd (minutes faster than through the apiserver at 100,000); the seeder's
/// summary line. Their owners are not written: run such a control plane without the garbage
/// collector (`cluster up --controllers`, as `make bench-large` does).
pub fn seed_etcd(
    cp: &ControlPlane,
    prefix: &str,
    pods: usize,
    namespaces: usize,
) -> anyhow::Result<String> {
    let out = std::process::Command::new(cp.bin("seed"))
        .args(["pods", "--kubeconfig"])
        .arg(cp.kubeconfig())
        .args(["--prefix", prefix, "--pods", &pods.to_string()])
        .args(["--namespaces", &namespaces.to_string(), "--etcd"])
        .arg(cp.etcd_url()?)
        .stderr(std::process::Stdio::inherit())
        .output()?;
    anyhow::ensure!(out.status.success(), "seed pods --etcd: {}", out.status);
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
