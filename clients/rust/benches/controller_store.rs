//! What a kube-rs controller's reflector store holds for the same pods, by what feeds it:
//! kube-rs's own watcher (whole objects, managedFields included), informerd's watcher (what the
//! sidecar serves: here, without managedFields), informerd's watcher with a field mask (only
//! the labels a reconciler reads); then stores of `PartialObjectMeta<Pod>`: kube-rs's metadata
//! watch, informerd's `metadata_watcher` with the whole metadata, its default mask and the
//! identity only; and a whole `Controller` on the light path (identity-only store), once every
//! pod has been reconciled, with kube-rs's default concurrency (no bound) and 16. Prints one table: the controller process's allocated bytes
//! (jemalloc) above its baseline, per pod, and the sidecar's own allocated bytes.
//!
//! Settings: `BENCH_PODS` (default 2000) pods in `BENCH_NAMESPACES` (default 4) namespaces
//! `kubers-bench-*`, topped up with the project's seeder; the control plane is testkit's
//! (`INFORMERD_CLUSTER_DIR` picks one). With `BENCH_ALL_NAMESPACES=1` nothing is seeded: every
//! pod of the cluster is watched (one cluster-wide watch each), e.g. the 10,000 pods `make
//! bench-adapters` left in its private control plane, so that both benchmarks measure the same pods.
//! With `BENCH_JSON=FILE`, the rows are also written to FILE as `{"pods": N,
//! "sidecar_allocated_bytes": N, "rows": [{"feed": "...", "bytes": N, "bytes_per_pod": N}]}`.
//! Run: `cargo bench -p informerd-client --bench controller_store`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use informerd_client::proto::StatusRequest;
use informerd_testkit::{ControlPlane, Resource, Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use serde::de::DeserializeOwned;
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn allocated() -> u64 {
    epoch::advance().expect("jemalloc epoch");
    stats::allocated::read().expect("jemalloc stats") as u64
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

type Events<K> = watcher::Result<watcher::Event<K>>;

/// One row of the table (and of `BENCH_JSON`).
struct Row {
    feed: String,
    bytes: i64,
    bytes_per_pod: i64,
}

/// Feeds a reflector from each stream until every one is ready; returns the stores (kept
/// alive by the caller while it measures) and the tasks that drive them.
async fn reflect<K, S>(streams: Vec<S>) -> (Vec<Store<K>>, Vec<tokio::task::JoinHandle<()>>)
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
{
    let mut stores = Vec::new();
    let mut tasks = Vec::new();
    for stream in streams {
        let (reader, writer) = reflector::store();
        let driven = stream
            .default_backoff()
            .reflect(writer)
            .for_each(|_| async {});
        tasks.push(tokio::spawn(driven));
        stores.push(reader);
    }
    for store in &stores {
        store
            .wait_until_ready()
            .await
            .expect("the reflector is fed");
    }
    (stores, tasks)
}

/// The row of `bytes` allocated for `held` objects (`pods` expected), printed.
fn row(name: &str, pods: usize, held: usize, bytes: i64) -> Row {
    let per_pod = bytes / held.max(1) as i64;
    println!("| {name} | {held} | {bytes} | {per_pod} |");
    assert_eq!(held, pods, "{name}: the stores hold every seeded pod");
    Row {
        feed: name.to_string(),
        bytes,
        bytes_per_pod: per_pod,
    }
}

/// Bytes per pod the stores fed by `streams` hold, above the allocation before they started.
async fn measure<K, S>(name: &str, pods: usize, streams: impl FnOnce() -> Vec<S>) -> Row
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
{
    let before = allocated();
    let (stores, tasks) = reflect(streams()).await;
    // Let the streams' buffers of the initial state drain before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held: usize = stores.iter().map(|s| s.state().len()).sum();
    let row = row(name, pods, held, allocated() as i64 - before as i64);
    // Free everything before the next system is measured: the tasks end when awaited.
    for task in tasks {
        task.abort();
        let _ = task.await;
    }
    drop(stores);
    tokio::time::sleep(Duration::from_secs(1)).await;
    row
}

/// What the light path's `Controller` holds: `Controller::for_stream` over informerd's
/// metadata watcher (its store of `PartialObjectMeta<Pod>`, the scheduler, the runner), once
/// every pod has been reconciled once, with at most `concurrency` reconciles at a time (0: no
/// bound, kube-rs's default). The reconciler reads nothing: a real one reads whole objects
/// through the sidecar (`ReadThrough`) and drops them.
async fn measure_controller(
    name: &str,
    pods: usize,
    api: informerd_client::Api<Pod>,
    concurrency: u16,
) -> Row {
    let before = allocated();
    let (reader, writer) = reflector::store();
    let stream = informerd_client::metadata_watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let reconciled = Arc::new(AtomicUsize::new(0));
    let controller = Controller::for_stream(stream, reader.clone())
        .with_config(controller::Config::default().concurrency(concurrency))
        .run(
            |_: Arc<PartialObjectMeta<Pod>>, seen: Arc<AtomicUsize>| async move {
                seen.fetch_add(1, Ordering::Relaxed);
                Ok::<_, std::convert::Infallible>(Action::await_change())
            },
            |_, _, _| Action::await_change(),
            reconciled.clone(),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    // Decision: until the store holds `pods` pods and as many reconciles ran, for 5 minutes
    // at most: on a cluster whose pods others change meanwhile the counts need not meet, and
    // the benchmark says so instead of hanging. Not `reader.wait_until_ready()`: kube-rs's
    // Controller waits on the same store, and its readiness wakes one waiter only (a oneshot
    // receiver shared by the clones: the last poll's waker wins), so one of them would hang.
    let all_reconciled = async {
        while reader.len() < pods || reconciled.load(Ordering::Relaxed) < reader.len() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(300), all_reconciled)
        .await
        .is_err()
    {
        panic!(
            "{name}: {} reconciles in 5 minutes, for {} pods in the store ({pods} listed): \
             are pods of the cluster changing meanwhile?",
            reconciled.load(Ordering::Relaxed),
            reader.len()
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let row = row(
        name,
        pods,
        reader.state().len(),
        allocated() as i64 - before as i64,
    );
    task.abort();
    let _ = task.await;
    drop(reader);
    tokio::time::sleep(Duration::from_secs(1)).await;
    row
}

/// kube-rs's own watchers of the pods, read as `K` (`Pod`, or `PartialObjectMeta<Pod>`, which
/// kube 5 watches with metadata-only requests): one cluster-wide, or one per namespace of
/// `names`.
fn own<K>(kube: &kube::Client, names: &[String]) -> Vec<BoxStream<'static, Events<K>>>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let watch = |api: kube::Api<K>| watcher::watcher(api, watcher::Config::default()).boxed();
    if names.is_empty() {
        return vec![watch(kube::Api::all(kube.clone()))];
    }
    names
        .iter()
        .map(|ns| watch(kube::Api::namespaced(kube.clone(), ns)))
        .collect()
}

/// Writes the rows as JSON to the file `BENCH_JSON` names, when it is set.
fn write_json(pods: usize, sidecar: u64, rows: &[Row]) -> anyhow::Result<()> {
    let Some(path) = std::env::var_os("BENCH_JSON") else {
        return Ok(());
    };
    let rows: Vec<_> = rows
        .iter()
        .map(|r| serde_json::json!({"feed": r.feed, "bytes": r.bytes, "bytes_per_pod": r.bytes_per_pod}))
        .collect();
    let doc = serde_json::json!({"pods": pods, "sidecar_allocated_bytes": sidecar, "rows": rows});
    std::fs::write(&path, serde_json::to_vec_pretty(&doc)?)?;
    Ok(())
}

type Cache = informerd_client::proto::cache_client::CacheClient<tonic::transport::Channel>;

/// The stores of typed pods: kube-rs's watcher, informerd's, informerd's with a label mask.
async fn typed_rows(kube: &kube::Client, cache: &Cache, names: &[String], pods: usize) -> Vec<Row> {
    let scope = scope(names);
    let all = || informerd_client::Api::<Pod>::all(cache.clone(), "pods");
    vec![
        measure(&format!("kube-rs watcher ({scope})"), pods, || {
            own::<Pod>(kube, names)
        })
        .await,
        measure("informerd watcher", pods, || {
            vec![informerd_client::watcher(all(), watcher::Config::default()).boxed()]
        })
        .await,
        measure("informerd watcher, fields [metadata.labels]", pods, || {
            let api = all().fields(["metadata.labels"]);
            vec![informerd_client::watcher(api, watcher::Config::default()).boxed()]
        })
        .await,
    ]
}

/// The stores of `PartialObjectMeta<Pod>` (kube-rs's metadata watch; informerd's
/// `metadata_watcher` with the whole metadata, its default mask, the identity only, the keys
/// only), and the Controller of the light path (over the keys only).
async fn metadata_rows(
    kube: &kube::Client,
    cache: &Cache,
    names: &[String],
    pods: usize,
) -> Vec<Row> {
    let scope = scope(names);
    let all = || informerd_client::Api::<Pod>::all(cache.clone(), "pods");
    let metadata =
        |api| vec![informerd_client::metadata_watcher(api, watcher::Config::default()).boxed()];
    vec![
        measure(&format!("kube-rs metadata_watcher ({scope})"), pods, || {
            own::<PartialObjectMeta<Pod>>(kube, names)
        })
        .await,
        measure(
            "informerd metadata_watcher, fields [metadata]",
            pods,
            || metadata(all().fields(["metadata"])),
        )
        .await,
        measure("informerd metadata_watcher", pods, || metadata(all())).await,
        measure(
            "informerd metadata_watcher, fields IDENTITY_ONLY",
            pods,
            || metadata(all().fields(informerd_client::IDENTITY_ONLY)),
        )
        .await,
        measure("informerd metadata_watcher, keys_only()", pods, || {
            metadata(all().keys_only())
        })
        .await,
        // Decision: both kube-rs's default (no bound: one reconcile per pod at once on start,
        // whose bookkeeping stays at that capacity) and a bound, which the light path wants
        // anyway (each reconcile reads through the sidecar).
        measure_controller(
            "Controller over informerd metadata_watcher, keys_only()",
            pods,
            all().keys_only(),
            0,
        )
        .await,
        measure_controller(
            "Controller over informerd metadata_watcher, keys_only(), concurrency 16",
            pods,
            all().keys_only(),
            16,
        )
        .await,
    ]
}

fn scope(names: &[String]) -> &'static str {
    if names.is_empty() {
        "cluster-wide"
    } else {
        "one per namespace"
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cluster = ControlPlane::get();
    let kube = cluster.client().await?;
    // Decision: all namespaces, or the seeded ones: an empty list means one cluster-wide watch
    // (kube-rs's `Api::all`, informerd's resource without `namespaces:`).
    let (pods, names) = if setting("BENCH_ALL_NAMESPACES", 0) == 1 {
        let all = kube::Api::<Pod>::all(kube.clone())
            .list_metadata(&kube::api::ListParams::default())
            .await?;
        (all.items.len(), Vec::new())
    } else {
        let pods = setting("BENCH_PODS", 2000);
        let namespaces = setting("BENCH_NAMESPACES", 4);
        cluster.seed("kubers-bench", pods, namespaces)?;
        let names: Vec<String> = (0..namespaces)
            .map(|i| format!("kubers-bench-{i}"))
            .collect();
        (pods, names)
    };
    let mut resource = Resource::pods().drop(["metadata.managedFields"]);
    if !names.is_empty() {
        resource = resource.namespaces(&names);
    }
    let config = SidecarConfig::new().resource(resource);
    let sidecar = Sidecar::start(&common::informerd_bin(), cluster, &config)?;
    let cache = informerd_client::connect(&sidecar.socket().display().to_string()).await?;

    println!("| store fed by | pods | bytes | bytes/pod |\n| --- | ---: | ---: | ---: |");
    let mut rows = typed_rows(&kube, &cache, &names, pods).await;
    rows.extend(metadata_rows(&kube, &cache, &names, pods).await);
    let status = cache
        .clone()
        .status(StatusRequest::default())
        .await?
        .into_inner();
    println!(
        "\nthe sidecar (shared by every controller): {} bytes allocated, {} per pod",
        status.allocated_bytes,
        status.allocated_bytes / pods.max(1) as u64
    );
    write_json(pods, status.allocated_bytes, &rows)
}
