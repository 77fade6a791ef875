//! WatchKeys against Watch for a level-triggered consumer: for a churn of N label updates over P
//! pods, the events a plain Watch delivers against the keys WatchKeys delivers, and the CPU
//! each consumer spends. Both follow the same churn at once, each on an OS thread of its own
//! with its own single-threaded runtime and connection, so that the thread's CPU time (user +
//! system, from `/proc/thread-self/stat`: the counters `getrusage(RUSAGE_THREAD)` reads) is all
//! of that consumer's work: receiving and decoding, and what it does per delivery.
//!
//! - Watch consumer: decodes each event's object (what an event handler does with it).
//! - WatchKeys consumer: per key, a Get of the object (decoded), then the ack: the reconcile
//!   loop's read of the current state. Debounce `KEYS_DEBOUNCE_MS`.
//!
//! Each ends when it has seen the sidecar's revision after the last write: the Watch by an
//! event at or past it, WatchKeys by a resume token at or past it (every change up to it sent
//! and acknowledged). Settings: `KEYS_PODS` (200), `KEYS_UPDATES` (4000), `KEYS_RATE` writes
//! per second (200), `KEYS_DEBOUNCE_MS` (500). Writes `benches/results/watch_keys.md`.
//!
//! ```sh
//! cargo bench --bench watch_keys
//! ```

mod common;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use common::writes::{revision_after, write_labels, Churn, Written};
use common::{env_or, main_in_namespace, process, InNamespace};
use futures::{stream, StreamExt, TryStreamExt};
use informerd::proto::{GetRequest, KeyEventType, KeysSubscription, WatchRequest};
use informerd_client as client;
use informerd_client::keys::watch_keys;
use informerd_testkit::{Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");

/// Linux reports thread CPU in /proc in USER_HZ ticks, 100 per second on every architecture.
const TICK_MS: f64 = 10.0;

struct Settings {
    pods: usize,
    updates: u64,
    rate: f64,
    debounce_ms: u32,
}

fn settings() -> anyhow::Result<Settings> {
    Ok(Settings {
        pods: env_or("KEYS_PODS", 200)?,
        updates: env_or("KEYS_UPDATES", 4000)?,
        rate: env_or("KEYS_RATE", 200.0)?,
        debounce_ms: env_or("KEYS_DEBOUNCE_MS", 500)?,
    })
}

/// What one consumer received and spent.
#[derive(Debug, Default)]
struct Consumed {
    deliveries: u64,
    cpu_ms: f64,
}

fn main() -> ExitCode {
    main_in_namespace(
        "watch_keys",
        "bench-keys",
        "a consumer did not reach the last write",
        settings,
        bench,
    )
}

async fn bench(at: &InNamespace<'_>, s: &Settings) -> anyhow::Result<bool> {
    let names: Arc<Vec<String>> = Arc::new((0..s.pods).map(|i| format!("k{i}")).collect());
    stream::iter(names.iter().cloned())
        .map(|name| async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}
            }))?;
            at.pods.create(&PostParams::default(), &pod).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    let config = SidecarConfig::new().resource(common::cluster::pods_resource(
        &[at.ns.to_string()],
        &[],
        &["metadata.managedFields"],
    ));
    let sidecar = Sidecar::start(BIN.as_ref(), at.cluster, &config)?;
    let socket = sidecar.socket().display().to_string();
    let mut api = client::connect(&socket).await?;
    while !common::sidecar::status(&mut api, "pods").await?.synced {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // 0 until the sidecar's revision after the last write is known.
    let target = Arc::new(AtomicU64::new(0));
    let watch = consumer(
        "watch",
        watch_consumer(socket.clone(), at.ns.to_string(), target.clone()),
    );
    let keys = consumer(
        "keys",
        keys_consumer(socket, at.ns.to_string(), s.debounce_ms, target.clone()),
    );
    // Let both subscribe (and WatchKeys finish its resync) before the churn.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let churn = Churn {
        writes: s.updates,
        rate: s.rate,
        in_flight: 32,
        base: 1,
    };
    let start = Instant::now();
    let writes = write_labels(at.pods, &names, churn, start).await;
    let written = Written::of(&writes, start.elapsed().as_secs_f64());
    let (revision, _) = revision_after(&mut api, ("pods", at.ns), &names, &writes).await?;
    target.store(revision, Ordering::SeqCst);
    let watch = tokio::task::spawn_blocking(move || watch.join()).await?;
    let keys = tokio::task::spawn_blocking(move || keys.join()).await?;
    let (Ok(watch), Ok(keys)) = (watch, keys) else {
        common::print_log_tail(&sidecar);
        anyhow::bail!("a consumer thread panicked");
    };
    let (watch, keys) = (watch?, keys?);
    let report = report(s, &written, &watch, &keys);
    println!("{report}");
    let path = common::results::dir()?.join("watch_keys.md");
    std::fs::write(&path, report + "\n").with_context(|| format!("write {}", path.display()))?;
    println!("written to benches/results/watch_keys.md");
    Ok(true)
}

/// Runs `work` on an OS thread of its own, on a single-threaded runtime, and measures the
/// thread's CPU time.
fn consumer(
    name: &str,
    work: impl std::future::Future<Output = anyhow::Result<u64>> + Send + 'static,
) -> std::thread::JoinHandle<anyhow::Result<Consumed>> {
    std::thread::Builder::new()
        .name(format!("consumer-{name}"))
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let before =
                process::cpu_ticks("thread-self").context("read /proc/thread-self/stat")?;
            let deliveries = rt.block_on(work)?;
            let after = process::cpu_ticks("thread-self").context("read /proc/thread-self/stat")?;
            Ok(Consumed {
                deliveries,
                cpu_ms: (after - before) as f64 * TICK_MS,
            })
        })
        .expect("spawn a consumer thread")
}

/// Reached once the target is known and `at` is at or past it.
fn reached(target: &AtomicU64, at: u64) -> bool {
    let t = target.load(Ordering::SeqCst);
    t > 0 && at >= t
}

/// A plain Watch from now: decodes every event's object; ends at the target revision.
async fn watch_consumer(socket: String, ns: String, target: Arc<AtomicU64>) -> anyhow::Result<u64> {
    let mut api = client::connect(&socket).await?;
    let mut events = api
        .watch(WatchRequest {
            resource: "pods".into(),
            namespace: ns,
            bookmark_interval_seconds: 1,
            ..Default::default()
        })
        .await?
        .into_inner();
    let mut deliveries = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(300), events.message())
            .await
            .context("the Watch went quiet for 300 s")??
            .context("the Watch ended")?;
        if let Some(object) = &event.object {
            let decoded: Value = serde_json::from_slice(&object.json)?;
            std::hint::black_box(decoded);
            deliveries += 1;
        }
        if reached(&target, event.revision) {
            return Ok(deliveries);
        }
    }
}

/// WatchKeys with a debounce: per key, a Get of the object (decoded) and the ack; ends when
/// the resume token reaches the target revision.
async fn keys_consumer(
    socket: String,
    ns: String,
    debounce_ms: u32,
    target: Arc<AtomicU64>,
) -> anyhow::Result<u64> {
    let mut api = client::connect(&socket).await?;
    let sub = KeysSubscription {
        resource: "pods".into(),
        namespace: ns.clone(),
        debounce_millis: debounce_ms,
        ..Default::default()
    };
    let (mut events, acker) = watch_keys(&mut api.clone(), sub).await?;
    let mut deliveries = 0;
    let mut resynced = false;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(300), events.message())
            .await
            .context("WatchKeys went quiet for 300 s")??
            .context("WatchKeys ended")?;
        match event.r#type() {
            KeyEventType::ResyncEnd => resynced = true,
            KeyEventType::Key => {
                let key = event.key.clone().unwrap_or_default();
                let got = api
                    .get(GetRequest {
                        resource: "pods".into(),
                        namespace: key.namespace,
                        name: key.name,
                        ..Default::default()
                    })
                    .await;
                if let Ok(got) = got {
                    let object = got.into_inner().object.unwrap_or_default();
                    let decoded: Value = serde_json::from_slice(&object.json)?;
                    std::hint::black_box(decoded);
                }
                acker.ack_event(&event);
                // The resync's keys are the start, not the churn's.
                if resynced {
                    deliveries += 1;
                }
            }
            _ => {}
        }
        if event.token.is_some_and(|t| reached(&target, t.revision)) {
            return Ok(deliveries);
        }
    }
}

fn report(s: &Settings, written: &Written, watch: &Consumed, keys: &Consumed) -> String {
    let row = |what: &str, c: &Consumed| {
        format!(
            "| {what} | {} | {:.1} | {:.0} | {:.1} |",
            c.deliveries,
            c.deliveries as f64 / s.pods as f64,
            c.cpu_ms,
            c.cpu_ms * 1000.0 / written.ok.max(1) as f64,
        )
    };
    [
        "# WatchKeys against Watch".to_string(),
        String::new(),
        format!(
            "{} label updates ({}) over {} pods at {:.0} writes/s; WatchKeys with a debounce of \
             {} ms; {} build, {} CPUs. Consumer CPU: the consumer thread's user + system time \
             (10 ms ticks), receiving included.",
            s.updates,
            written.cell(),
            s.pods,
            written.achieved_rate,
            s.debounce_ms,
            common::profile(),
            common::cpus(),
        ),
        String::new(),
        "| consumer | deliveries | per pod | consumer CPU (ms) | CPU per update (µs) |".into(),
        "| --- | ---: | ---: | ---: | ---: |".into(),
        row("Watch (decode each event)", watch),
        row("WatchKeys (Get + ack per key)", keys),
    ]
    .join("\n")
}
