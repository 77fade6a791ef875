//! How fast the store writes its objects as JSON: every `Get`, `List` and watch event a client
//! receives is rendered this way (`codec/json.rs`), and on a `List` by label selector rendering
//! is the largest part of the sidecar's time (perf, issue 34). Renders the shared fixtures'
//! real pods (managedFields dropped, as the controller profile does), whole, over and over, and
//! prints the time per object and the bytes written per second. Figures are printed, never
//! asserted; they are of one process on one core, with every object in the CPU's caches.
//!
//! Decision: one figure per run, not a statistic of many: on the project's shared two-core
//! machine one run gives 11 to 21 µs a pod for the same build, with nothing else of the project
//! running. Compare two builds by alternating many short runs (`RENDER_ROUNDS=600`) and
//! comparing their minimums and medians: that is how a faster escape of strings and UUIDs
//! written without a `String` were found to change nothing measurable (issue 34), and left out.
//!
//! Then the same pods as a List's chunk holds them: five copies of each pod under names of
//! their own (the pods of one app, which share their labels and annotations), written one
//! after the other into one buffer, each alone and through a `JsonBatch` (which copies the
//! constants the pods share from the first one's text).
//!
//! Run: `cargo bench -p informerd-store --features test-fixtures --bench render`
//! (`RENDER_ROUNDS`, default 2000: how many times every pod is rendered).

use std::time::Instant;

use informerd_store::store::{JsonBatch, ObjectKey, StoreOptions, StoredObject, Writer};
use serde_json::Value;

/// Pods per app in the batched figures: a List by an app's label selector.
const APP_PODS: usize = 5;

fn main() {
    let rounds: usize = std::env::var("RENDER_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let pods = stored(1);
    let (renders, bytes, seconds) = timed(rounds, pods.len(), || {
        let mut bytes = 0;
        for pod in &pods {
            // A buffer per object, as a Get and a watch event have.
            let mut out = Vec::new();
            pod.write_json(&mut out);
            bytes += out.len();
        }
        bytes
    });
    println!(
        "render: {} fixture pods, {renders} renders: {:.1} µs per pod, {:.0} bytes of JSON per \
         pod, {:.0} MB/s",
        pods.len(),
        seconds * 1e6 / renders as f64,
        bytes as f64 / renders as f64,
        bytes as f64 / seconds / 1e6,
    );
    let apps = stored(APP_PODS);
    for batched in [false, true] {
        let (renders, bytes, seconds) = timed(rounds, apps.len(), || {
            let mut bytes = 0;
            for app in apps.chunks(APP_PODS) {
                let mut batch = JsonBatch::new();
                for pod in app {
                    if batched {
                        batch.write(pod);
                    } else {
                        batch.write_with(|out| pod.write_json(out));
                    }
                }
                bytes += batch.take().len();
            }
            bytes
        });
        println!(
            "render: {APP_PODS} pods of an app in one buffer, {}: {:.1} µs per pod, {:.0} bytes \
             of JSON per pod",
            if batched {
                "through a JsonBatch"
            } else {
                "each alone"
            },
            seconds * 1e6 / renders as f64,
            bytes as f64 / renders as f64,
        );
    }
}

/// The fixture pods (managedFields dropped, as the controller profile does), `copies` of each
/// under names of their own, the copies of a pod next to each other.
fn stored(copies: usize) -> Vec<StoredObject> {
    let store = Writer::new(StoreOptions::default());
    let mut names = Vec::new();
    for (i, mut pod) in informerd_store::fixtures::all_pods()
        .into_iter()
        .enumerate()
    {
        let meta = pod["metadata"].as_object_mut().expect("a pod has metadata");
        meta.remove("managedFields");
        for k in 0..copies {
            // Names of their own: the fixtures come from several clusters, some with the same
            // names.
            let mut copy = pod.clone();
            let name = format!("pod-{i}-{k}");
            copy["metadata"]["name"] = Value::String(name.clone());
            names.push((copy["metadata"]["namespace"].clone(), name));
            store.apply(copy).expect("a fixture pod is stored");
        }
    }
    names
        .iter()
        .map(|(ns, name)| {
            store
                .get(&ObjectKey::new(ns.as_str(), name))
                .expect("every pod is stored")
        })
        .collect()
}

/// `rounds` times `render`, which renders `objects` and returns the bytes it wrote:
/// the renders, the bytes and the seconds.
fn timed(rounds: usize, objects: usize, mut render: impl FnMut() -> usize) -> (usize, usize, f64) {
    let mut bytes = 0;
    let started = Instant::now();
    for _ in 0..rounds {
        bytes += render();
    }
    (rounds * objects, bytes, started.elapsed().as_secs_f64())
}
