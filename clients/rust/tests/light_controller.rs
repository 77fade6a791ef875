//! The light path of a kube-rs controller: `Controller::for_stream` over informerd's
//! `metadata_watcher` (a store of identities only), `owns_stream` over the metadata of the
//! owned pods, and a reconciler that reads whole objects through the sidecar (`ReadThrough`).
//! It ends with the same objects in the apiserver as the same controller over kube-rs's own
//! watchers and reflector stores, during the same writes.
//!
//! The controller copies the `team` label of a parent ConfigMap onto the pods it owns (their
//! ownerReferences name it; their `parent` label too, which the reconciler selects on).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{
    apply_config_map, delete_pod, every_pod_gets_its_parents_team, labels, outcome, Fixture,
};
use futures::StreamExt;
use informerd_client::{metadata_watcher, ReadThrough};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

/// Where the reconciler reads parents and pods.
#[expect(clippy::large_enum_variant, reason = "one per controller run")]
enum Reads {
    /// kube-rs's reflector stores, fed by its own watchers.
    Stores {
        parents: Store<ConfigMap>,
        pods: Store<Pod>,
    },
    /// The sidecar, at each read.
    Sidecar {
        parents: ReadThrough<ConfigMap>,
        pods: ReadThrough<Pod>,
    },
}

impl Reads {
    async fn parent(&self, key: &ObjectRef<ConfigMap>) -> anyhow::Result<Option<Arc<ConfigMap>>> {
        Ok(match self {
            Reads::Stores { parents, .. } => parents.get(key),
            Reads::Sidecar { parents, .. } => parents.get(key).await?,
        })
    }

    /// The pods whose `parent` label is `parent`.
    async fn children(&self, parent: &str) -> anyhow::Result<Vec<Arc<Pod>>> {
        Ok(match self {
            Reads::Stores { pods, .. } => {
                pods.state_filter(|p| p.labels().get("parent").is_some_and(|p| p == parent))
            }
            Reads::Sidecar { pods, .. } => {
                let selector = format!("parent={parent}");
                pods.state_matching(&ListParams::default().labels(&selector))
                    .await?
            }
        })
    }
}

struct Context {
    kube: Client,
    reads: Reads,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] anyhow::Error);

/// Reconciles the parent `object` names (its whole `ConfigMap`, or only its identity on the
/// light path: the reconciler reads the parent itself either way).
async fn reconcile<K: Resource>(
    object: Arc<K>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let ns = object.meta().namespace.clone().unwrap_or_default();
    let name = object.meta().name.clone().unwrap_or_default();
    let key = ObjectRef::<ConfigMap>::new(&name).within(&ns);
    let Some(parent) = ctx.reads.parent(&key).await? else {
        return Ok(Action::await_change());
    };
    let team = parent.labels().get("team").cloned().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.kube.clone(), &ns);
    for pod in ctx.reads.children(&name).await? {
        if pod.labels().get("team") == Some(&team) {
            continue;
        }
        let patch = json!({"metadata": {"labels": {"team": team}}});
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => {}
            // Deleted since it was read.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(anyhow::Error::from(e).into()),
        }
    }
    Ok(Action::await_change())
}

fn error_policy<K>(_: Arc<K>, _: &ReconcileError, _: Arc<Context>) -> Action {
    Action::requeue(Duration::from_millis(500))
}

#[derive(Clone, Copy, Debug)]
enum Source {
    KubeRs,
    Light,
}

/// The light Controller's own store.
type LightStore = Store<PartialObjectMeta<ConfigMap>>;

/// Starts the controller on `source`; the task runs until aborted. On the light path, also
/// the Controller's store.
async fn start_controller(
    fx: &Fixture,
    source: Source,
) -> anyhow::Result<(tokio::task::JoinHandle<()>, Option<LightStore>)> {
    let kube = fx.kube().clone();
    let task = match source {
        Source::KubeRs => {
            let (parent_reader, parent_writer) = reflector::store::<ConfigMap>();
            let (pod_reader, pod_writer) = reflector::store::<Pod>();
            let parents = watcher::watcher(fx.api::<ConfigMap>(), watcher::Config::default())
                .default_backoff()
                .reflect(parent_writer)
                .applied_objects();
            let pods = watcher::watcher(fx.pods(), watcher::Config::default())
                .default_backoff()
                .reflect(pod_writer)
                .applied_objects();
            let reads = Reads::Stores {
                parents: parent_reader.clone(),
                pods: pod_reader,
            };
            let ctx = Arc::new(Context { kube, reads });
            let controller = Controller::for_stream(parents, parent_reader)
                .owns_stream(pods)
                .run(reconcile, error_policy, ctx)
                .for_each(|_| async {});
            (tokio::spawn(controller), None)
        }
        Source::Light => {
            let cache = fx.cache().await?;
            let parents = informerd_client::Api::<ConfigMap>::namespaced(
                cache.clone(),
                "configmaps",
                fx.ns(),
            );
            let pods = informerd_client::Api::<Pod>::namespaced(cache, "pods", fx.ns());
            // The Controller's store: namespaces and names only. The owned pods' metadata
            // stream keeps nothing; its default mask brings the ownerReferences that
            // owns_stream maps.
            let (reader, writer) = reflector::store();
            let stream = metadata_watcher(parents.clone().keys_only(), watcher::Config::default())
                .default_backoff()
                .reflect(writer)
                .applied_objects();
            let owned = metadata_watcher(pods.clone(), watcher::Config::default())
                .default_backoff()
                .applied_objects();
            let reads = Reads::Sidecar {
                parents: ReadThrough::new(parents),
                pods: ReadThrough::new(pods),
            };
            let ctx = Arc::new(Context { kube, reads });
            let controller = Controller::for_stream(stream, reader.clone())
                .owns_stream(owned)
                .run(reconcile, error_policy, ctx)
                .for_each(|_| async {});
            (tokio::spawn(controller), Some(reader))
        }
    };
    Ok(task)
}

/// Creates or updates the pod `name`, owned by (and labelled with) the config map `parent`.
async fn apply_child(kube: &Client, ns: &str, name: &str, parent: &str) -> anyhow::Result<()> {
    let uid = Api::<ConfigMap>::namespaced(kube.clone(), ns)
        .get(parent)
        .await?
        .uid()
        .unwrap_or_default();
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"parent": parent},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": parent, "uid": uid}],
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
    });
    informerd_testkit::apply_pod(kube, ns, pod).await?;
    Ok(())
}

/// The same writes for both runs, while the controller runs.
async fn churn(kube: &Client, ns: &str) -> anyhow::Result<()> {
    apply_config_map(kube, ns, "c0", &labels(&[("team", "a")])).await?;
    apply_config_map(kube, ns, "c1", &labels(&[("team", "b")])).await?;
    for i in 0..6 {
        apply_child(kube, ns, &format!("p{i}"), &format!("c{}", i % 2)).await?;
    }
    apply_config_map(kube, ns, "c0", &labels(&[("team", "x")])).await?;
    for i in 6..8 {
        apply_child(kube, ns, &format!("p{i}"), "c1").await?;
    }
    delete_pod(kube, ns, "p1").await?;
    apply_config_map(kube, ns, "c1", &labels(&[("team", "y")])).await?;
    apply_child(kube, ns, "p8", "c0").await?;
    Ok(())
}

async fn run(source: Source) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let fx = Fixture::new(&format!(
        "kubers-light-{}",
        format!("{source:?}").to_lowercase()
    ))
    .await?;
    let (controller, light_store) = start_controller(&fx, source).await?;
    churn(fx.kube(), fx.ns()).await?;
    every_pod_gets_its_parents_team(fx.kube(), fx.ns(), &format!("{source:?}")).await;
    controller.abort();
    if let Some(store) = light_store {
        // The parents' events reached the Controller (their teams are on the pods): its store
        // holds them (and the namespace's root CA config map), by namespace and name alone
        // (`keys_only`).
        let mut held: Vec<_> = store.state().iter().map(|m| m.name_any()).collect();
        held.sort();
        assert_eq!(held, ["c0", "c1", "kube-root-ca.crt"]);
        for meta in store.state() {
            let keys = kube::core::ObjectMeta {
                name: meta.metadata.name.clone(),
                namespace: Some(fx.ns().to_string()),
                ..Default::default()
            };
            assert_eq!(meta.metadata, keys, "keys only: {meta:?}");
            assert_eq!(meta.types, None, "{meta:?}");
        }
    }
    outcome(fx.kube(), fx.ns()).await
}

#[tokio::test]
async fn a_controller_on_metadata_and_reads_through_the_sidecar_ends_as_on_kube_rs(
) -> anyhow::Result<()> {
    let own = run(Source::KubeRs).await?;
    let light = run(Source::Light).await?;
    assert_eq!(own.len(), 8, "{own:?}");
    assert_eq!(own, light);
    Ok(())
}
