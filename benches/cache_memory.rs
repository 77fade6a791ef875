//! Bytes held per pod, and the start-up peak against the steady state, for the "controller"
//! profile (metadata without managedFields, ownerReferences, spec.nodeName, status.phase,
//! conditions and podIP) over pods seeded in the local control plane.
//!
//! `cargo bench --bench cache_memory` (pods: `INFORMERD_BENCH_PODS`, default 100000). It seeds
//! the pods first if the cluster does not have them yet (namespaces `bench-0..19`). Figures are
//! printed, never asserted: the targets are at most 300 bytes per pod and a ratio under 1.3.

mod common;

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use common::cluster::{count_pods, namespaces, pods_resource};
use common::env_or;
use informerd::vocab::memory::{allocated_bytes, proc_status_bytes};
use informerd::{
    config,
    fleet::Fleet,
    transform::{CONTROLLER_DROP, CONTROLLER_KEEP},
};
use informerd_testkit::{ControlPlane, SidecarConfig};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const NAMESPACES: usize = 20;
const PREFIX: &str = "bench";

/// A field of this process's `/proc/self/status` in whole MiB.
fn status_mib(field: &str) -> u64 {
    proc_status_bytes(field).unwrap_or(0) >> 20
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pods: usize = env_or("INFORMERD_BENCH_PODS", 100_000)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cp = ControlPlane::get();
    let namespaces = namespaces(PREFIX, NAMESPACES);

    let present = rt.block_on(async { count_pods(&cp.client().await?, &namespaces).await })?;
    if present < pods {
        eprintln!("seeding {pods} pods into {NAMESPACES} namespaces ({present} present)");
        eprintln!("{}", cp.seed(PREFIX, pods, NAMESPACES)?.trim());
    }

    // The change log's length is a setting (default 100000); its entries share the objects'
    // bytes but each has a small fixed cost, so the figure is printed for the length used.
    let log_events: usize = env_or("INFORMERD_BENCH_LOG_EVENTS", config::DEFAULT_MAX_EVENTS)?;
    let cfg = config::parse(
        "bench.yaml",
        &SidecarConfig::new()
            .change_log_max_events(log_events as u64)
            .resource(pods_resource(&namespaces, CONTROLLER_KEEP, CONTROLLER_DROP))
            .to_yaml(),
    )?;

    rt.block_on(async {
        let client = cp.client().await?;
        let baseline = allocated_bytes();
        let peak = Arc::new(AtomicU64::new(baseline));
        let done = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peak, done) = (peak.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    peak.fetch_max(allocated_bytes(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        let started = Instant::now();
        let fleet = Fleet::start(client, &cfg).await?;
        if !fleet.wait_synced(Duration::from_secs(1800)).await {
            return Err("the cache did not sync within 30 minutes".into());
        }
        let sync_secs = started.elapsed().as_secs_f64();
        done.store(true, Ordering::Relaxed);
        sampler.join().expect("sampler");
        // Let the streams settle (buffers of the last events freed) before the steady figure.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let steady = allocated_bytes();
        let store = &fleet.cache("pods").expect("cache").store.clone();
        let held = store.len();
        let steady_delta = steady.saturating_sub(baseline);
        let peak_delta = peak.load(Ordering::Relaxed).max(steady).saturating_sub(baseline);
        let stats = store.stats();
        println!("cache controller-profile {held} pods, change log of {log_events} events");
        println!("cache controller-profile {held} pods synced in {sync_secs:.1}s ({:.0} pods/s)", held as f64 / sync_secs);
        println!(
            "cache controller-profile {held} pods: {:.0} bytes/pod held (jemalloc allocated, whole process above its pre-start baseline)",
            steady_delta as f64 / held.max(1) as f64
        );
        println!(
            "cache controller-profile {held} pods: store encoded {:.0} bytes/pod, {} interned strings ({} bytes)",
            stats.encoded_bytes as f64 / held.max(1) as f64,
            stats.interned_strings,
            stats.interned_bytes
        );
        println!(
            "cache controller-profile {held} pods: peak/steady {:.2} (peak {:.1} MiB, steady {:.1} MiB above baseline); RSS {} MiB, peak RSS {} MiB",
            peak_delta as f64 / steady_delta.max(1) as f64,
            peak_delta as f64 / 1048576.0,
            steady_delta as f64 / 1048576.0,
            status_mib("VmRSS"),
            status_mib("VmHWM")
        );
        // What the cache itself holds: stop the streams (their connections, buffers and tasks
        // are a fixed cost, whatever the pod count) and measure what remains.
        let store = store.clone();
        fleet.shutdown();
        drop(fleet);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let cache_only = allocated_bytes().saturating_sub(baseline);
        println!(
            "cache controller-profile {held} pods: {:.0} bytes/pod held by the cache alone (store, index, change log); streams and runtime {:.1} MiB",
            cache_only as f64 / held.max(1) as f64,
            steady_delta.saturating_sub(cache_only) as f64 / 1048576.0
        );
        drop(store);
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
