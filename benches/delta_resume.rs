//! Delta resume on a failover (issue 32): what a client receives when it moves to another
//! replica after a share of the objects changed, with a delta resume (`WatchRequest.held`)
//! against a full relist (`send_initial_state`), in objects and bytes; printed, written to
//! `benches/results/delta-resume.{md,json}`, never asserted (the goal, at most 5% of a full
//! relist at 100,000 objects with 1% changed, is printed beside the figures).
//!
//! `make bench-delta` starts a private control plane (stopped at the end) and runs it at
//! `DELTA_PODS` pods (default 100,000, written straight into etcd; `DELTA_SEED=apply` writes
//! them through the apiserver). Without make, `cargo bench --bench delta_resume` runs it on the
//! control plane of `INFORMERD_CLUSTER_DIR`. Settings: `DELTA_PODS`, `DELTA_NAMESPACES`
//! (default 10), `DELTA_CHANGED_PERCENT` (default 1), `DELTA_PREFIX` (default `delta`).
//!
//! The run: replica A (a sidecar caching the pods with the controller profile) serves a
//! client's initial state, which the client keeps as key → resourceVersion (what it holds);
//! then `DELTA_CHANGED_PERCENT` of the pods are relabelled through the apiserver; replica B (a
//! second sidecar, same configuration, its own epoch: the client's token means nothing there)
//! starts and syncs; the client resumes on B by delta, and, for the comparison, a second
//! client lists B in full. Bytes are the encoded size of the Watch events up to SYNCED (and,
//! for the delta, of the request's held entries). Correctness: the delta must send exactly the
//! relabelled pods, and the client's view after it must equal the full initial state's.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use common::{cluster, env_or, results};
use futures::{StreamExt, TryStreamExt};
use informerd::filter::fnv1a64;
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, HeldObjects, ListRequest,
    WatchRequest,
};
use informerd::transform::{CONTROLLER_DROP, CONTROLLER_KEEP};
use informerd_testkit::{connect, wait_synced, ControlPlane, Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use prost::Message;
use serde::Serialize;
use serde_json::json;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// Relabels in flight at once.
const WRITERS: usize = 16;

fn main() -> ExitCode {
    common::main_on_runtime("delta_resume", bench())
}

struct Settings {
    pods: usize,
    namespaces: usize,
    changed_percent: f64,
    prefix: String,
    seed_etcd: bool,
}

fn settings() -> anyhow::Result<Settings> {
    let seed: String = env_or("DELTA_SEED", "apply".to_owned())?;
    anyhow::ensure!(
        seed == "apply" || seed == "etcd",
        "DELTA_SEED={seed:?}: apply or etcd"
    );
    Ok(Settings {
        pods: env_or("DELTA_PODS", 10_000)?,
        namespaces: env_or("DELTA_NAMESPACES", 10)?,
        changed_percent: env_or("DELTA_CHANGED_PERCENT", 1.0)?,
        prefix: env_or("DELTA_PREFIX", "delta".to_owned())?,
        seed_etcd: seed == "etcd",
    })
}

/// What a watch sent up to SYNCED.
#[derive(Serialize, Default)]
struct Sent {
    objects: usize,
    bytes: usize,
    /// Held key hashes SYNCED listed as gone.
    gone: usize,
    seconds: f64,
}

#[derive(Serialize)]
struct Report {
    command: String,
    pods: usize,
    changed: usize,
    full_relist: Sent,
    delta: Sent,
    /// The delta request's `held.entries`, bytes.
    held_bytes: usize,
    objects_ratio: f64,
    bytes_ratio: f64,
    correct: bool,
}

/// Reads a watch to SYNCED; the objects it sent as key → resourceVersion.
async fn until_synced(
    api: &mut CacheClient<Channel>,
    request: WatchRequest,
) -> anyhow::Result<(BTreeMap<String, String>, Sent)> {
    let start = Instant::now();
    let mut events = api.watch(request).await?.into_inner();
    let (mut view, mut sent) = (BTreeMap::new(), Sent::default());
    while let Some(event) = events.message().await? {
        sent.bytes += event.encoded_len();
        match event.r#type() {
            EventType::Added => {
                let o = event.object.expect("ADDED carries its object");
                view.insert(format!("{}/{}", o.namespace, o.name), o.resource_version);
                sent.objects += 1;
            }
            EventType::Synced => {
                sent.gone = event.gone.len() / 8;
                sent.seconds = start.elapsed().as_secs_f64();
                return Ok((view, sent));
            }
            _ => {}
        }
    }
    anyhow::bail!("the watch ended before SYNCED")
}

fn watch(start: Start) -> WatchRequest {
    WatchRequest {
        resource: "pods".into(),
        start: Some(start),
        ..Default::default()
    }
}

fn held(view: &BTreeMap<String, String>) -> HeldObjects {
    let mut entries = Vec::with_capacity(view.len() * 16);
    for (key, rv) in view {
        entries.extend_from_slice(&fnv1a64(key.as_bytes()).to_le_bytes());
        entries.extend_from_slice(&fnv1a64(rv.as_bytes()).to_le_bytes());
    }
    HeldObjects { entries }
}

/// Relabels every `1 / share`-th pod of the view through the apiserver; their keys, and the
/// resourceVersion of the last write.
async fn relabel(
    kube: &kube::Client,
    view: &BTreeMap<String, String>,
    percent: f64,
) -> anyhow::Result<(Vec<String>, String)> {
    let every = (100.0 / percent).round().max(1.0) as usize;
    let keys: Vec<String> = view.keys().step_by(every).cloned().collect();
    let versions: Vec<u64> = futures::stream::iter(keys.clone())
        .map(|key| async move {
            let (ns, name) = key.split_once('/').expect("namespace/name");
            let pods: Api<Pod> = Api::namespaced(kube.clone(), ns);
            let patch = json!({"metadata": {"labels": {"delta-bench": "changed"}}});
            let pod = pods
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let rv = pod.metadata.resource_version.unwrap_or_default();
            anyhow::Ok(rv.parse::<u64>()?)
        })
        .buffer_unordered(WRITERS)
        .try_collect()
        .await?;
    let last = versions.into_iter().max().unwrap_or_default();
    Ok((keys, last.to_string()))
}

fn sidecar(cp: &ControlPlane, namespaces: &[String]) -> anyhow::Result<Sidecar> {
    let config = SidecarConfig::new().resource(cluster::pods_resource(
        namespaces,
        CONTROLLER_KEEP,
        CONTROLLER_DROP,
    ));
    Ok(Sidecar::start(Path::new(BIN), cp, &config)?)
}

async fn bench() -> anyhow::Result<()> {
    let s = settings()?;
    let cp = ControlPlane::get();
    let kube = cp.client().await?;
    let namespaces = cluster::namespaces(&s.prefix, s.namespaces);
    let present = cluster::count_pods(&kube, &namespaces).await?;
    if present < s.pods {
        eprintln!("seeding {} pods ({present} present)", s.pods);
        let summary = if s.seed_etcd {
            cluster::seed_etcd(cp, &s.prefix, s.pods, s.namespaces)?
        } else {
            cp.seed(&s.prefix, s.pods, s.namespaces)?
        };
        eprintln!("{summary}");
    }
    let a = sidecar(cp, &namespaces)?;
    let mut on_a = connect(&a).await?;
    wait_synced(&mut on_a).await?;
    let (holding, first) = until_synced(&mut on_a, watch(Start::SendInitialState(true))).await?;
    eprintln!(
        "replica A: the client holds {} pods ({} MiB sent)",
        holding.len(),
        first.bytes >> 20
    );
    let (changed, last) = relabel(&kube, &holding, s.changed_percent).await?;
    eprintln!("relabelled {} pods", changed.len());
    let b = sidecar(cp, &namespaces)?;
    let mut on_b = connect(&b).await?;
    wait_synced(&mut on_b).await?;
    // B holds every relabel (the newest one is in a namespace of the benchmark's).
    let _: Vec<_> = on_b
        .list(ListRequest {
            resource: "pods".into(),
            min_resource_version: last,
            limit: 1,
            ..Default::default()
        })
        .await?
        .into_inner()
        .try_collect()
        .await?;
    drop(a);
    let request = held(&holding);
    let held_bytes = request.entries.len();
    let (sent, delta) = until_synced(&mut on_b, watch(Start::Held(request))).await?;
    let (full_view, full) = until_synced(&mut on_b, watch(Start::SendInitialState(true))).await?;
    let mut view = holding.clone();
    view.extend(sent.clone());
    let mut sent_keys: Vec<&String> = sent.keys().collect();
    sent_keys.sort();
    let correct =
        view == full_view && sent_keys == changed.iter().collect::<Vec<_>>() && delta.gone == 0;
    let report = Report {
        command: format!(
            "DELTA_PODS={}{} make bench-delta",
            s.pods,
            if s.seed_etcd { "" } else { " DELTA_SEED=apply" }
        ),
        pods: full_view.len(),
        changed: changed.len(),
        objects_ratio: delta.objects as f64 / full.objects.max(1) as f64,
        bytes_ratio: (delta.bytes + held_bytes) as f64 / full.bytes.max(1) as f64,
        full_relist: full,
        delta,
        held_bytes,
        correct,
    };
    let md = markdown(&report);
    println!("{md}");
    let json_path = results::write_json("delta-resume.json", &report)?;
    std::fs::write(results::dir()?.join("delta-resume.md"), &md)?;
    eprintln!("wrote {json_path}");
    anyhow::ensure!(
        correct,
        "the delta resume did not send exactly the relabelled pods, or the view differs"
    );
    Ok(())
}

fn markdown(r: &Report) -> String {
    let mib = |b: usize| b as f64 / (1u64 << 20) as f64;
    format!(
        "# Delta resume on a failover\n\n`{}` (`benches/delta_resume.rs` says what is \
         measured).\n\nA client held {} pods from replica A; {} of them ({:.1}%) were \
         relabelled; it then resumed on replica B, which it had never watched.\n\n\
         | resume on replica B | objects sent | MiB sent | held entries sent, MiB | until SYNCED, s |\n\
         |:--|---:|---:|---:|---:|\n\
         | full relist (`send_initial_state`) | {} | {:.1} | | {:.2} |\n\
         | delta resume (`held`) | {} | {:.2} | {:.2} | {:.2} |\n\n\
         Delta against full relist: {:.2}% of the objects, {:.2}% of the bytes (held entries \
         included); goal at most 5%: {}. Exactly the relabelled pods sent, and the client's \
         view after the delta equal to a full initial state: {}.\n",
        r.command,
        r.pods,
        r.changed,
        100.0 * r.changed as f64 / r.pods.max(1) as f64,
        r.full_relist.objects,
        mib(r.full_relist.bytes),
        r.full_relist.seconds,
        r.delta.objects,
        mib(r.delta.bytes),
        mib(r.held_bytes),
        r.delta.seconds,
        100.0 * r.objects_ratio,
        100.0 * r.bytes_ratio,
        if r.bytes_ratio <= 0.05 { "met" } else { "**not met**" },
        if r.correct { "yes" } else { "**no**" },
    )
}
