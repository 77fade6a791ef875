//! What the kube-rs adapter's tests share: a namespace of the real control plane, the real
//! sidecar caching it, and waiting for the two to agree.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use informerd_testkit::{
    self as testkit, pod, wait_default_service_account, Resource, SidecarConfig,
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

/// A namespace, and a sidecar caching its pods and config maps; the namespace is deleted on
/// drop (testkit's fixture, with this crate's configuration).
pub struct Fixture(testkit::Fixture);

impl std::ops::Deref for Fixture {
    type Target = testkit::Fixture;
    fn deref(&self) -> &testkit::Fixture {
        &self.0
    }
}

impl std::ops::DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut testkit::Fixture {
        &mut self.0
    }
}

impl Fixture {
    pub async fn new(base: &str) -> anyhow::Result<Fixture> {
        Self::with(base, |config| config).await
    }

    /// [`Fixture::new`] with the sidecar's configuration edited by `edit` (e.g. a snapshot
    /// directory for warm restarts).
    pub async fn with(
        base: &str,
        edit: impl FnOnce(SidecarConfig) -> SidecarConfig,
    ) -> anyhow::Result<Fixture> {
        let mut fx = testkit::Fixture::new(base).await?;
        wait_default_service_account(fx.kube(), fx.ns()).await?;
        let config = SidecarConfig::new()
            .resource(
                Resource::pods()
                    .namespaces([fx.ns()])
                    .drop(["metadata.managedFields"]),
            )
            .resource(Resource::configmaps().namespaces([fx.ns()]));
        fx.start_sidecar(&informerd_bin(), &edit(config))?;
        Ok(Fixture(fx))
    }
}

/// Creates or updates a pod with these labels (server-side apply); returns its resourceVersion.
pub async fn apply_pod(
    kube: &Client,
    ns: &str,
    name: &str,
    labels: &BTreeMap<&str, &str>,
) -> anyhow::Result<String> {
    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, *v)).collect();
    let pod = pod(name)
        .labels(&labels)
        .node_name("node-1")
        .apply(kube, ns)
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

/// pod name → (parent, team), as the apiserver has them: what the comparison controllers
/// (`controller.rs`, `light_controller.rs`) end with.
pub async fn outcome(
    kube: &Client,
    ns: &str,
) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let pods = Api::<Pod>::namespaced(kube.clone(), ns)
        .list(&ListParams::default())
        .await?;
    Ok(pods
        .items
        .iter()
        .map(|p| {
            let label = |k: &str| p.labels().get(k).cloned().unwrap_or_default();
            (p.name_any(), (label("parent"), label("team")))
        })
        .collect())
}

/// Waits (up to 90 s) until every pod of `ns` carries its parent's final team, as the
/// comparison controllers' churn leaves them (c0's team "x", c1's "y"); `what` names the run.
pub async fn every_pod_gets_its_parents_team(kube: &Client, ns: &str, what: &str) {
    let parents: BTreeMap<&str, &str> = [("c0", "x"), ("c1", "y")].into();
    eventually(
        90,
        &format!("{what}: every pod has its parent's team"),
        || async {
            outcome(kube, ns).await.is_ok_and(|pods| {
                pods.values()
                    .all(|(parent, team)| parents.get(parent.as_str()) == Some(&team.as_str()))
            })
        },
    )
    .await;
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

/// The next `n` changes of a watcher after a delta resume, as `apply NAME` and `delete NAME`;
/// panics on a new `Init` cycle (a full relist) or anything else.
pub async fn delta_changes<S>(
    events: &mut std::pin::Pin<&mut S>,
    n: usize,
) -> anyhow::Result<std::collections::BTreeSet<String>>
where
    S: futures::Stream<
        Item = Result<kube::runtime::watcher::Event<Pod>, kube::runtime::watcher::Error>,
    >,
{
    use futures::TryStreamExt;
    use kube::runtime::watcher::Event;
    let mut changes = std::collections::BTreeSet::new();
    while changes.len() < n {
        match events.try_next().await? {
            Some(Event::Apply(p)) => changes.insert(format!("apply {}", p.name_any())),
            Some(Event::Delete(p)) => changes.insert(format!("delete {}", p.name_any())),
            Some(Event::Init) => panic!("a new Init cycle: the watcher relisted every object"),
            other => panic!("after the resume: {other:?}"),
        };
    }
    Ok(changes)
}
