//! A sidecar restart, as kube-rs's own example controllers meet it over the adapter (issue 35):
//! a `pod_reflector` loop (`try_next().await?`, which ends on the first `Err` item) and a
//! two-stream `Controller` (whose backoff, shared by its streams, grows with every `Err`) go on
//! through a graceful stop, a crash and a warm restart, and hold, and reconcile, what the
//! apiserver holds once the sidecar is back. The sidecar's absence and its new epoch are no
//! errors to them: the watcher reconnects quietly and relists with a new `Init` cycle.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::{
    apiserver_pods, apply_config_map, apply_pod, delete_pod, eventually, labels, versions, Fixture,
};
use futures::{StreamExt, TryStreamExt};
use informerd_client::{watcher, Api};
use informerd_testkit::wait_synced;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::Config;
use kube::runtime::WatchStreamExt;
use kube::ResourceExt;
use tokio::task::JoinHandle;

/// How the sidecar goes down and comes back, on the same socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restart {
    /// SIGTERM, and started without a snapshot: a new epoch (every token `EpochChanged`).
    Cold,
    /// SIGTERM, and started from the snapshot it wrote on shutdown: the same epoch.
    Warm,
    /// SIGKILL: started from its last periodic snapshot, with a new epoch (a crash).
    Crash,
}

/// Stops the sidecar as `how` says and waits until it has exited; for a cold restart, removes
/// its snapshots.
fn stop(fx: &mut Fixture, how: Restart, snapshots: &Path) -> anyhow::Result<()> {
    match how {
        Restart::Crash => fx.sidecar_mut().kill(),
        Restart::Cold | Restart::Warm => {
            fx.sidecar_mut().terminate()?;
        }
    }
    if how == Restart::Cold {
        std::fs::remove_dir_all(snapshots)?;
        std::fs::create_dir_all(snapshots)?;
    }
    Ok(())
}

/// Starts the sidecar again and waits until it has synced; returns the epoch of its pods.
async fn start(fx: &mut Fixture) -> anyhow::Result<u64> {
    fx.sidecar_mut().restart()?;
    epoch(fx).await
}

/// The epoch of the sidecar's pods, once it has synced.
async fn epoch(fx: &Fixture) -> anyhow::Result<u64> {
    let status = wait_synced(&mut fx.cache().await?).await?;
    let pods = status.resources.iter().find(|r| r.name == "pods");
    Ok(pods.expect("the sidecar caches pods").epoch)
}

/// A directory for the sidecar's snapshots, removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The loop of kube-rs's `pod_reflector` example over informerd's watcher: it ends with the
/// first `Err` item, as `?` makes it.
fn pod_reflector(pods: Api<Pod>) -> (Store<Pod>, JoinHandle<Result<(), watcher::Error>>) {
    let (reader, writer) = reflector::store();
    let stream = watcher(pods, Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(async move {
        let mut stream = pin!(stream);
        while let Some(pod) = stream.try_next().await? {
            let _ = pod.name_any();
        }
        Ok(())
    });
    (reader, task)
}

/// Panics with the loop's end when it ended.
async fn assert_running<T: std::fmt::Debug>(task: &mut JoinHandle<T>, what: &str) {
    if task.is_finished() {
        panic!("{what} ended: {:?}", task.await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_reflector_loop_goes_on_through_sidecar_restarts() -> anyhow::Result<()> {
    let snapshots = TempDir(
        std::env::temp_dir().join(format!("kubers-restart-snapshots-{}", std::process::id())),
    );
    std::fs::create_dir_all(&snapshots.0)?;
    let mut fx = Fixture::with("kubers-restart", |config| {
        config.snapshot(&snapshots.0, |s| s.max_age("10m"))
    })
    .await?;
    for name in ["a", "b", "c", "d"] {
        apply_pod(fx.kube(), fx.ns(), name, &labels(&[("v", "1")])).await?;
    }
    let pods: Api<Pod> = Api::namespaced(fx.cache().await?, "pods", fx.ns());
    let (store, mut task) = pod_reflector(pods);
    store.wait_until_ready().await?;

    let rounds = [
        (Restart::Cold, "a"),
        (Restart::Warm, "b"),
        (Restart::Crash, "c"),
    ];
    for (round, (how, gone)) in rounds.into_iter().enumerate() {
        let before = epoch(&fx).await?;
        stop(&mut fx, how, &snapshots.0)?;
        // While the sidecar is down: a deletion, an addition and an update that only a
        // resumed watch (warm) or a relist (a new epoch) can tell the reflector.
        delete_pod(fx.kube(), fx.ns(), gone).await?;
        apply_pod(fx.kube(), fx.ns(), &format!("new-{round}"), &labels(&[])).await?;
        let v = format!("r{round}");
        apply_pod(fx.kube(), fx.ns(), "d", &labels(&[("v", &v)])).await?;
        let after = start(&mut fx).await?;
        eprintln!("{how:?} restart: epoch {before} -> {after}");
        if how == Restart::Warm {
            assert_eq!(after, before, "a warm restart keeps the epoch");
        } else {
            assert_ne!(after, before, "{how:?}: a new epoch");
        }

        let truth = apiserver_pods(fx.kube(), fx.ns()).await?;
        eventually(
            60,
            &format!("{how:?}: the store holds the apiserver's pods"),
            || {
                let held = versions(store.state().iter().map(AsRef::as_ref));
                // An ended loop never catches up: assert_running says why it ended.
                let ended = task.is_finished();
                let truth = truth.clone();
                async move { held == truth || ended }
            },
        )
        .await;
        assert_running(&mut task, &format!("{how:?}: the pod_reflector loop")).await;
    }
    task.abort();
    Ok(())
}

/// The reconciler's record: each config map it reconciled, and when.
type Reconciled = Arc<Mutex<Vec<(String, Instant)>>>;

#[derive(Debug, thiserror::Error)]
#[error("never")]
enum Never {}

/// A `Controller` of config maps that also watches pods (a pod's `parent` label names its
/// config map): two streams over informerd's watcher, as kube-rs writes them. `errors` counts
/// the `Err` items of both streams, each of which would grow the Controller's backoff.
async fn start_controller(
    fx: &Fixture,
    reconciled: Reconciled,
    errors: Arc<AtomicUsize>,
) -> anyhow::Result<JoinHandle<()>> {
    let cache = fx.cache().await?;
    let pods = Api::<Pod>::namespaced(cache.clone(), "pods", fx.ns()).fields(["metadata.labels"]);
    let parents = Api::<ConfigMap>::namespaced(cache, "configmaps", fx.ns());
    let (cm_reader, cm_writer) = reflector::store::<ConfigMap>();
    let (_, pod_writer) = reflector::store::<Pod>();
    let pods = watcher(pods, Config::default())
        .inspect(counting(errors.clone()))
        .default_backoff()
        .reflect(pod_writer)
        .applied_objects();
    let parents = watcher(parents, Config::default())
        .inspect(counting(errors))
        .default_backoff()
        .reflect(cm_writer)
        .applied_objects();
    let ns = fx.ns().to_owned();
    let controller = Controller::for_stream(parents, cm_reader)
        .watches_stream(pods, move |pod: Pod| {
            pod.labels()
                .get("parent")
                .map(|p| ObjectRef::<ConfigMap>::new(p).within(&ns))
        })
        .run(
            |cm: Arc<ConfigMap>, reconciled: Arc<Reconciled>| async move {
                let entry = (cm.name_any(), Instant::now());
                reconciled.lock().unwrap().push(entry);
                Ok::<_, Never>(Action::await_change())
            },
            |_, _: &Never, _| Action::await_change(),
            Arc::new(reconciled),
        )
        .for_each(|_| async {});
    Ok(tokio::spawn(controller))
}

/// Counts the `Err` items of a watcher in `errors`.
fn counting<T>(errors: Arc<AtomicUsize>) -> impl FnMut(&watcher::Result<T>) {
    move |item| {
        if item.is_err() {
            errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// When each config map was first reconciled, and how many times.
fn record(reconciled: &Reconciled) -> BTreeMap<String, (Instant, usize)> {
    let mut first = BTreeMap::new();
    for (name, at) in reconciled.lock().unwrap().iter() {
        first
            .entry(name.clone())
            .and_modify(|(_, n)| *n += 1)
            .or_insert((*at, 1));
    }
    first
}

/// How many times `name` was reconciled.
fn times(reconciled: &Reconciled, name: &str) -> usize {
    record(reconciled).get(name).map_or(0, |(_, n)| *n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_stream_controller_reconciles_again_once_the_sidecar_is_back() -> anyhow::Result<()> {
    let mut fx = Fixture::new("kubers-restart-ctl").await?;
    apply_config_map(fx.kube(), fx.ns(), "c0", &labels(&[])).await?;
    apply_pod(fx.kube(), fx.ns(), "p0", &labels(&[("parent", "c0")])).await?;
    let reconciled = Reconciled::default();
    let errors = Arc::new(AtomicUsize::new(0));
    let mut controller = start_controller(&fx, reconciled.clone(), errors.clone()).await?;
    eventually(60, "c0 is reconciled", || {
        let n = times(&reconciled, "c0");
        async move { n > 0 }
    })
    .await;

    // A graceful stop (SIGTERM); while the sidecar is down a config map comes, which only the
    // relist of the new epoch can tell the controller.
    let before = epoch(&fx).await?;
    fx.sidecar_mut().terminate()?;
    apply_config_map(fx.kube(), fx.ns(), "c-down", &labels(&[])).await?;
    let after = start(&mut fx).await?;
    assert_ne!(after, before, "a restart without a snapshot is a new epoch");
    let ready = Instant::now();

    // A config map created after the restart, then a pod naming it: each stream's change
    // reconciles it.
    apply_config_map(fx.kube(), fx.ns(), "c1", &labels(&[])).await?;
    eventually(90, "c-down and c1 are reconciled after the restart", || {
        let record = record(&reconciled);
        async move { record.contains_key("c-down") && record.contains_key("c1") }
    })
    .await;
    let c1 = times(&reconciled, "c1");
    apply_pod(fx.kube(), fx.ns(), "p1", &labels(&[("parent", "c1")])).await?;
    eventually(60, "p1 (the pod stream) reconciles c1 again", || {
        let n = times(&reconciled, "c1");
        async move { n > c1 }
    })
    .await;
    let record = record(&reconciled);
    for name in ["c-down", "c1"] {
        let seconds = record[name].0.duration_since(ready).as_secs_f64();
        eprintln!("{name}: reconciled {seconds:.2} s after the sidecar was ready again");
    }
    assert_running(&mut controller, "the controller").await;
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "no Err item grew the Controller's backoff"
    );
    controller.abort();
    Ok(())
}
