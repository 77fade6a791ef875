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
//! Run: `cargo bench -p informerd-store --features test-fixtures --bench render`
//! (`RENDER_ROUNDS`, default 2000: how many times every pod is rendered).

use std::time::Instant;

use informerd_store::store::{StoreOptions, Writer};

fn main() {
    let rounds: usize = std::env::var("RENDER_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let store = Writer::new(StoreOptions::default());
    for (i, mut pod) in informerd_store::fixtures::all_pods()
        .into_iter()
        .enumerate()
    {
        let meta = pod["metadata"].as_object_mut().expect("a pod has metadata");
        meta.remove("managedFields");
        // Names of their own: the fixtures come from several clusters, some with the same names.
        meta.insert("name".into(), format!("pod-{i}").into());
        store.apply(pod).expect("a fixture pod is stored");
    }
    let (_, pods) = store.list(None);
    let mut bytes = 0;
    let started = Instant::now();
    for _ in 0..rounds {
        for pod in &pods {
            // A buffer per object, as a Get and a watch event have.
            let mut out = Vec::new();
            pod.write_json(&mut out);
            bytes += out.len();
        }
    }
    let elapsed = started.elapsed();
    let renders = (pods.len() * rounds) as f64;
    println!(
        "render: {} fixture pods, {} renders: {:.1} µs per pod, {:.0} bytes of JSON per pod, \
         {:.0} MB/s",
        pods.len(),
        renders,
        elapsed.as_secs_f64() * 1e6 / renders,
        bytes as f64 / renders,
        bytes as f64 / elapsed.as_secs_f64() / 1e6,
    );
}
