//! What the kube-rs adapter's tests share: a namespace of the real control plane, the real
//! sidecar caching it, and waiting for the two to agree.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use informerd_testkit::{
    delete_namespace, unique_namespace, wait_default_service_account, ControlPlane, Sidecar,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

/// The sidecar binary: `INFORMERD_BIN` (as the Go and Python client tests take it), else the
/// `informerd` that `cargo test --workspace` built beside this test.
pub fn informerd_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("INFORMERD_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("the test's own path");
    // target/debug/deps/<test> → target/debug/informerd
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("informerd"))
        .expect("the test runs from cargo's target directory");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --bin informerd` (or set INFORMERD_BIN)",
        bin.display()
    );
    bin
}

/// A namespace, and a sidecar caching its pods and config maps.
pub struct Fixture {
    pub kube: Client,
    pub ns: String,
    pub sidecar: Sidecar,
}

impl Fixture {
    pub async fn new(base: &str) -> anyhow::Result<Fixture> {
        let cluster = ControlPlane::get();
        let kube = cluster.client().await?;
        let ns = unique_namespace(&kube, base).await?;
        wait_default_service_account(&kube, &ns).await?;
        let resources = format!(
            "- name: pods\n  apiVersion: v1\n  kind: Pod\n  namespaces: [{ns}]\n  transform:\n    drop: [metadata.managedFields]\n\
             - name: configmaps\n  apiVersion: v1\n  kind: ConfigMap\n  namespaces: [{ns}]\n"
        );
        let sidecar = Sidecar::start(&informerd_bin(), cluster, &resources)?;
        Ok(Fixture { kube, ns, sidecar })
    }

    pub async fn cache(
        &self,
    ) -> anyhow::Result<informerd_client::proto::cache_client::CacheClient<tonic::transport::Channel>>
    {
        Ok(informerd_client::connect(&self.sidecar.socket().display().to_string()).await?)
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.kube.clone(), &self.ns)
    }

    pub async fn cleanup(self) {
        let _ = delete_namespace(&self.kube, &self.ns).await;
    }
}

/// Creates or updates a pod with these labels (server-side apply); returns its resourceVersion.
pub async fn apply_pod(
    kube: &Client,
    ns: &str,
    name: &str,
    labels: &BTreeMap<&str, &str>,
) -> anyhow::Result<String> {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]}
    });
    let pod = Api::<Pod>::namespaced(kube.clone(), ns)
        .patch(
            name,
            &PatchParams::apply("kubers-test").force(),
            &Patch::Apply(pod),
        )
        .await?;
    Ok(pod.resource_version().unwrap_or_default())
}

/// Creates or updates a config map with these labels (server-side apply).
pub async fn apply_config_map(
    kube: &Client,
    ns: &str,
    name: &str,
    labels: &BTreeMap<&str, &str>,
) -> anyhow::Result<()> {
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
    });
    Api::<ConfigMap>::namespaced(kube.clone(), ns)
        .patch(
            name,
            &PatchParams::apply("kubers-test").force(),
            &Patch::Apply(cm),
        )
        .await?;
    Ok(())
}

pub async fn delete_pod(kube: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    // No grace period: no kubelet runs the pods, so a graceful deletion would never end.
    Api::<Pod>::namespaced(kube.clone(), ns)
        .delete(name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
}

/// name → resourceVersion of the pods the apiserver has in `ns`.
pub async fn apiserver_pods(kube: &Client, ns: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let list = Api::<Pod>::namespaced(kube.clone(), ns)
        .list(&ListParams::default())
        .await?;
    Ok(versions(list.items.iter()))
}

/// name → resourceVersion.
pub fn versions<'a, K: ResourceExt + 'a>(
    objects: impl Iterator<Item = &'a K>,
) -> BTreeMap<String, String> {
    objects
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect()
}

/// Waits until `check` holds, for up to `seconds`; panics with `what` otherwise.
pub async fn eventually<F, Fut>(seconds: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not within {seconds} s: {what}");
}

pub fn labels<'a>(pairs: &[(&'a str, &'a str)]) -> BTreeMap<&'a str, &'a str> {
    pairs.iter().copied().collect()
}
