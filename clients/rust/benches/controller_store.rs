//! What a kube-rs controller's reflector store holds for the same pods, by what feeds it:
//! kube-rs's own watcher (whole objects, managedFields included), informerd's watcher (what the
//! sidecar serves: here, without managedFields) and informerd's watcher with a field mask (only
//! the labels a reconciler reads). Prints one table: the controller process's allocated bytes
//! (jemalloc) above its baseline, per pod, and the sidecar's own allocated bytes.
//!
//! Settings: `BENCH_PODS` (default 2000) pods in `BENCH_NAMESPACES` (default 4) namespaces
//! `kubers-bench-*`, topped up with the project's seeder; the control plane is testkit's
//! (`INFORMERD_CLUSTER_DIR` picks one). With `BENCH_ALL_NAMESPACES=1` nothing is seeded: every
//! pod of the cluster is watched (one cluster-wide watch each), e.g. the 10,000 pods `make
//! bench-adapters` left in its private control plane, so that both benchmarks measure the same pods.
//! Run: `cargo bench -p informerd-client --bench controller_store`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use futures::{Stream, StreamExt};
use informerd_client::proto::StatusRequest;
use informerd_testkit::{ControlPlane, Resource, Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
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

/// Feeds a reflector from each stream until every one is ready; returns the stores (kept
/// alive by the caller while it measures) and the tasks that drive them.
async fn reflect<S>(streams: Vec<S>) -> (Vec<Store<Pod>>, Vec<tokio::task::JoinHandle<()>>)
where
    S: Stream<Item = watcher::Result<watcher::Event<Pod>>> + Send + 'static,
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

/// Bytes per pod the stores fed by `streams` hold, above the allocation before they started.
async fn measure<S>(name: &str, pods: usize, streams: impl FnOnce() -> Vec<S>)
where
    S: Stream<Item = watcher::Result<watcher::Event<Pod>>> + Send + 'static,
{
    let before = allocated();
    let (stores, tasks) = reflect(streams()).await;
    // Let the streams' buffers of the initial state drain before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held: usize = stores.iter().map(|s| s.state().len()).sum();
    let bytes = allocated() as i64 - before as i64;
    println!(
        "| {name} | {held} | {} | {} |",
        bytes,
        bytes / held.max(1) as i64
    );
    assert_eq!(held, pods, "{name}: the stores hold every seeded pod");
    // Free everything before the next system is measured: the tasks end when awaited.
    for task in tasks {
        task.abort();
        let _ = task.await;
    }
    drop(stores);
    tokio::time::sleep(Duration::from_secs(1)).await;
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
    let own = if names.is_empty() {
        "kube-rs watcher (cluster-wide)"
    } else {
        "kube-rs watcher (one per namespace)"
    };
    measure(own, pods, || {
        if names.is_empty() {
            let api = kube::Api::<Pod>::all(kube.clone());
            return vec![watcher::watcher(api, watcher::Config::default()).boxed()];
        }
        names
            .iter()
            .map(|ns| {
                let api = kube::Api::<Pod>::namespaced(kube.clone(), ns);
                watcher::watcher(api, watcher::Config::default()).boxed()
            })
            .collect()
    })
    .await;
    measure("informerd watcher", pods, || {
        let api = informerd_client::Api::<Pod>::all(cache.clone(), "pods");
        vec![informerd_client::watcher(api, watcher::Config::default()).boxed()]
    })
    .await;
    measure("informerd watcher, fields [metadata.labels]", pods, || {
        let api =
            informerd_client::Api::<Pod>::all(cache.clone(), "pods").fields(["metadata.labels"]);
        vec![informerd_client::watcher(api, watcher::Config::default()).boxed()]
    })
    .await;
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
    Ok(())
}
