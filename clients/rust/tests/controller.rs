//! A kube-rs controller written the usual way (`Controller::for_stream` with `watches_stream`,
//! reflector stores, server-side apply), run once on kube-rs's own watcher and once on
//! informerd's, during the same writes: both runs end with the same objects in the apiserver.
//!
//! The controller copies the `team` label of a parent ConfigMap onto the pods that name it in
//! their `parent` label.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{
    apply_config_map, apply_pod, delete_pod, every_pod_gets_its_parents_team, labels, outcome,
    Fixture,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};

/// What the reconciler reads and writes with.
struct Context {
    kube: Client,
    pods: Store<Pod>,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(parent: Arc<ConfigMap>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let ns = parent.namespace().unwrap_or_default();
    let team = parent.labels().get("team").cloned().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.kube.clone(), &ns);
    for pod in ctx.pods.state() {
        let theirs = pod.labels().get("parent") == Some(&parent.name_any());
        if theirs && pod.namespace() == Some(ns.clone()) && pod.labels().get("team") != Some(&team)
        {
            let patch = serde_json::json!({"metadata": {"labels": {"team": team}}});
            match api
                .patch(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
            {
                Ok(_) => {}
                // Deleted since the store saw it.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &ReconcileError, _: Arc<Context>) -> Action {
    Action::requeue(Duration::from_millis(500))
}

/// Which watcher feeds the controller's streams.
#[derive(Clone, Copy, Debug)]
enum Source {
    KubeRs,
    Informerd,
}

/// Starts the controller on `source`; the task runs until aborted.
async fn start_controller(
    fx: &Fixture,
    source: Source,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let (pod_reader, pod_writer) = reflector::store::<Pod>();
    let (cm_reader, cm_writer) = reflector::store::<ConfigMap>();
    let (pods, parents) = match source {
        Source::KubeRs => (
            watcher::watcher(fx.pods(), watcher::Config::default()).boxed(),
            watcher::watcher(
                Api::<ConfigMap>::namespaced(fx.kube().clone(), fx.ns()),
                watcher::Config::default(),
            )
            .boxed(),
        ),
        Source::Informerd => {
            let cache = fx.cache().await?;
            // The pod store holds only what the reconciler reads: labels (identity comes).
            let pods = informerd_client::Api::<Pod>::namespaced(cache.clone(), "pods", fx.ns())
                .fields(["metadata.labels"]);
            let parents = informerd_client::Api::namespaced(cache, "configmaps", fx.ns());
            (
                informerd_client::watcher(pods, watcher::Config::default()).boxed(),
                informerd_client::watcher(parents, watcher::Config::default()).boxed(),
            )
        }
    };
    // From here on the controller is the same for both sources.
    let pods = pods.default_backoff().reflect(pod_writer).applied_objects();
    let parents = parents
        .default_backoff()
        .reflect(cm_writer)
        .applied_objects();
    let ns = fx.ns().to_owned();
    let ctx = Arc::new(Context {
        kube: fx.kube().clone(),
        pods: pod_reader,
    });
    let controller = Controller::for_stream(parents, cm_reader)
        .watches_stream(pods, move |pod: Pod| {
            pod.labels()
                .get("parent")
                .map(|p| ObjectRef::<ConfigMap>::new(p).within(&ns))
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {});
    Ok(tokio::spawn(controller))
}

/// The same writes for both runs, while the controller runs.
async fn churn(kube: &Client, ns: &str) -> anyhow::Result<()> {
    apply_config_map(kube, ns, "c0", &labels(&[("team", "a")])).await?;
    apply_config_map(kube, ns, "c1", &labels(&[("team", "b")])).await?;
    for i in 0..6 {
        let parent = format!("c{}", i % 2);
        apply_pod(kube, ns, &format!("p{i}"), &labels(&[("parent", &parent)])).await?;
    }
    apply_config_map(kube, ns, "c0", &labels(&[("team", "x")])).await?;
    for i in 6..8 {
        apply_pod(kube, ns, &format!("p{i}"), &labels(&[("parent", "c1")])).await?;
    }
    delete_pod(kube, ns, "p1").await?;
    apply_config_map(kube, ns, "c1", &labels(&[("team", "y")])).await?;
    apply_pod(kube, ns, "p8", &labels(&[("parent", "c0")])).await?;
    Ok(())
}

async fn run(source: Source) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let fx = Fixture::new(&format!(
        "kubers-ctl-{}",
        format!("{source:?}").to_lowercase()
    ))
    .await?;
    let controller = start_controller(&fx, source).await?;
    churn(fx.kube(), fx.ns()).await?;
    every_pod_gets_its_parents_team(fx.kube(), fx.ns(), &format!("{source:?}")).await;
    controller.abort();
    let result = outcome(fx.kube(), fx.ns()).await?;
    Ok(result)
}

#[tokio::test]
async fn a_kube_rs_controller_ends_the_same_on_informerd_as_on_its_own_watcher(
) -> anyhow::Result<()> {
    let own = run(Source::KubeRs).await?;
    let informerd = run(Source::Informerd).await?;
    assert_eq!(own.len(), 8, "{own:?}");
    assert_eq!(own, informerd);
    Ok(())
}
