//! The NVSentinel profile (issue 32): one informerd serving a whole GPU cluster's components.
//! NVIDIA's NVSentinel publishes its figures at 100,000 nodes: about ten components, each with
//! private Node and Pod informer caches, hold 51 GB together; the working set is the nodes
//! (about 13 KB each) and 1.4 million pods, 14 DaemonSet pods per node. Here one informerd
//! caches them once and ten consumer processes (tools/cmd/consumer) read through it.
//!
//! `make bench-nvsentinel` starts a control plane of its own (etcd's backend quota raised, no
//! watch cache of pods and nodes in the apiserver, no garbage collector: the seeded pods' owners
//! are not written) and runs this with its defaults. The run:
//! 1. seeds `NVS_NODES` nodes (`seed nodes`) and `NVS_DAEMONSETS` DaemonSets with a pod on
//!    every node (`seed pods --daemonsets`), straight into etcd, unless they are there;
//! 2. starts informerd caching pods (the controller profile, an index `node` on
//!    `spec.nodeName`) and nodes (metadata, spec, conditions, addresses and allocatable; not
//!    the images), cluster-wide, and waits until both are synced (sync time, CPU);
//! 3. starts ten consumers, the central components' access patterns: three node informers,
//!    three that list the pods of a random node through the index and get the node, two key
//!    queues over all pods (a Get per later key), two informers of one DaemonSet's pods; waits
//!    until each has its initial state;
//! 4. for `NVS_HOLD_SECONDS` (default 60) updates `NVS_CHURN` nodes' status a second through
//!    the apiserver (the kubelets' heartbeats), which the node informers receive;
//! 5. reads informerd's and each consumer's memory (VmRSS at the end of the hold: steady;
//!    VmHWM: peak), stops the consumers (each prints what it did: calls, events, errors).
//!
//! Figures are printed and written to `benches/results/nvsentinel.{md,json}` (`NVS_OUT=-`:
//! printed only, as `make test`'s short form at 100 nodes does), beside the
//! goals (informerd ≤ 512 MiB, the ten consumers ≤ 2 GiB together, informerd's peak ≤ 1.1×
//! its steady RSS) and the published 51 GB; never asserted. The run fails if a consumer
//! reports an error (a wrong answer included) or does not become ready.

mod common;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use common::{env_or, process::cpu_ticks, process::exited, results};
use informerd::proto::{cache_client::CacheClient, StatusRequest, StatusResponse};
use informerd::transform::{CONTROLLER_DROP, CONTROLLER_KEEP};
use informerd::vocab::memory::status_bytes;
use informerd_testkit::{
    connect, free_port, scrape_metrics, ControlPlane, Index, Resource, Sidecar, SidecarConfig,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const MIB: f64 = (1u64 << 20) as f64;
/// What the published figures say ten components hold at 100,000 nodes.
const PUBLISHED_BYTES: f64 = 51e9;
/// The DaemonSets whose pods the two `daemonset` consumers follow: the first two the seeder
/// names (tools/cmd/seed/gen.go, nodeAgents).
const FOLLOWED_AGENTS: [&str; 2] = ["node-exporter", "fluent-bit"];

fn main() -> ExitCode {
    common::main_on_runtime("nvsentinel", bench())
}

struct Settings {
    nodes: usize,
    daemonsets: usize,
    namespaces: usize,
    hold: Duration,
    churn: usize,
    consumer: PathBuf,
    /// The results' file name without extension; `-`: print only.
    out: String,
}

fn settings() -> anyhow::Result<Settings> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    Ok(Settings {
        nodes: env_or("NVS_NODES", 100_000)?,
        daemonsets: env_or("NVS_DAEMONSETS", 14)?,
        namespaces: env_or("NVS_NAMESPACES", 3)?,
        hold: Duration::from_secs(env_or("NVS_HOLD_SECONDS", 60)?),
        churn: env_or("NVS_CHURN", 20)?,
        consumer: env_or("NVS_CONSUMER", repo.join(".cache/consumer"))?,
        out: env_or("NVS_OUT", "nvsentinel".to_owned())?,
    })
}

/// The ten consumers: (role, the extra flags of its command line).
fn consumers() -> Vec<(&'static str, Vec<String>)> {
    let mut v: Vec<(&'static str, Vec<String>)> = Vec::new();
    for _ in 0..3 {
        v.push(("nodes", vec![]));
    }
    for _ in 0..3 {
        v.push(("pods-by-node", vec![]));
    }
    for _ in 0..2 {
        v.push(("pod-keys", vec![]));
    }
    for agent in FOLLOWED_AGENTS {
        let selector = format!("app.kubernetes.io/name={agent}");
        v.push(("daemonset", vec!["--selector".into(), selector]));
    }
    v
}

#[derive(Serialize)]
struct Informerd {
    pods: u64,
    nodes: u64,
    sync_seconds: f64,
    cpu_seconds: f64,
    /// VmRSS once synced, before any consumer.
    synced_rss_bytes: u64,
    /// VmHWM once synced: the initial sync's peak, before any consumer.
    synced_peak_rss_bytes: u64,
    /// The most allocated bytes (jemalloc's count) of the sync, sampled every 200 ms, and once
    /// synced.
    sync_peak_allocated_bytes: u64,
    synced_allocated_bytes: u64,
    /// The most allocated bytes while the consumers start (until all are ready), then during
    /// the hold, sampled every 200 ms: where the peak over the steady memory is.
    start_peak_allocated_bytes: u64,
    /// The most the key queues held while the consumers start (their own estimate, the
    /// `informerd_watch_keys_queue_bytes` gauge): keys sent and not yet acknowledged are
    /// entries until their ack.
    start_peak_key_queue_bytes: u64,
    hold_peak_allocated_bytes: u64,
    /// VmRSS at the end of the hold, the consumers connected.
    steady_rss_bytes: u64,
    /// VmHWM over the whole run.
    peak_rss_bytes: u64,
    allocated_bytes: u64,
    /// The stores' encoded objects and shared strings, per resource.
    pods_store_bytes: u64,
    nodes_store_bytes: u64,
    /// The pod key queues' resyncs and keys sent over the run (`/metrics`): two queues, one
    /// resync each, send each pod's key twice; more says the queues started over.
    key_resyncs: u64,
    keys_sent: u64,
    /// Lines of the sidecar's log at WARN or ERROR.
    log_warnings: Vec<String>,
}

#[derive(Serialize)]
struct Consumer {
    role: String,
    ready_seconds: f64,
    objects: u64,
    steady_rss_bytes: u64,
    peak_rss_bytes: u64,
    report: serde_json::Value,
}

#[derive(Serialize)]
struct Report {
    command: String,
    started: String,
    nodes: usize,
    pods: usize,
    informerd: Informerd,
    consumers: Vec<Consumer>,
    consumers_steady_rss_bytes: u64,
    consumers_peak_rss_bytes: u64,
    node_updates: usize,
}

async fn bench() -> anyhow::Result<()> {
    let s = settings()?;
    anyhow::ensure!(
        s.consumer.exists(),
        "{} not found: build it with `make bench-nvsentinel` (or go build in tools/cmd/consumer), \
         or set NVS_CONSUMER",
        s.consumer.display()
    );
    let started = k8s_openapi::jiff::Timestamp::now().to_string();
    let cp = ControlPlane::get();
    let kube = cp.client().await?;
    seed(cp, &kube, &s).await?;

    let metrics_port = free_port();
    let sidecar = Sidecar::start(Path::new(BIN), cp, &config(metrics_port))?;
    let pid = sidecar.pid().context("the sidecar has no pid")?;
    let mut api = connect(&sidecar).await?;
    let t0 = Instant::now();
    let (status, sync_allocated) = wait_synced(&mut api, pid).await?;
    let sync_seconds = t0.elapsed().as_secs_f64();
    let cpu_seconds = cpu_ticks(pid).unwrap_or(0) as f64 / common::process::clock_ticks() as f64;
    let synced_rss = status_bytes(pid, "VmRSS").unwrap_or(0);
    let synced_peak_rss = status_bytes(pid, "VmHWM").unwrap_or(0);
    let objects = |name: &str| {
        let r = status.resources.iter().find(|r| r.name == name);
        r.map_or((0, 0), |r| (r.objects, r.encoded_bytes + r.interned_bytes))
    };
    let ((pods, pods_store), (nodes, nodes_store)) = (objects("pods"), objects("nodes"));
    eprintln!(
        "nvsentinel: informerd synced {pods} pods and {nodes} nodes in {sync_seconds:.1}s \
         (CPU {cpu_seconds:.1}s), RSS {:.1} MiB",
        synced_rss as f64 / MIB
    );

    let sampler = AllocatedSampler::start(api.clone(), metrics_port);
    let socket = sidecar.socket().to_path_buf();
    let mut running = Vec::new();
    for (role, extra) in consumers() {
        running.push(start_consumer(&s, &socket, role, &extra)?);
    }
    let mut ready = Vec::new();
    for c in &mut running {
        ready.push(c.wait_ready().await?);
    }
    let start_peak = sampler.stop().await;
    eprintln!("nvsentinel: ten consumers ready; holding {:?}", s.hold);
    let sampler = AllocatedSampler::start(api.clone(), metrics_port);
    let node_updates = churn(&kube, &s).await?;
    let hold_peak = sampler.stop().await;
    let steady_rss = status_bytes(pid, "VmRSS").unwrap_or(0);
    let peak_rss = status_bytes(pid, "VmHWM").unwrap_or(0);
    let allocated = api
        .status(StatusRequest::default())
        .await?
        .into_inner()
        .allocated_bytes;
    let metrics = scrape_metrics(metrics_port).await?;
    let pods_metric = |name: &str| metrics.sum(name, &[("resource", "pods")]) as u64;
    let key_resyncs = pods_metric("informerd_watch_keys_resyncs_total");
    let keys_sent = pods_metric("informerd_watch_keys_sent_total");
    // The whole log stays beside the build for whoever looks into a run (RUST_LOG is passed
    // on to the sidecar).
    let log = sidecar.plain_log();
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache");
    std::fs::create_dir_all(&cache)?;
    std::fs::write(cache.join("nvsentinel-informerd.log"), &log)?;
    let log_warnings = log
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .map(str::to_string)
        .collect();
    let mut out = Vec::new();
    for (c, (ready_seconds, objects)) in running.into_iter().zip(ready) {
        out.push(c.stop(ready_seconds, objects).await?);
    }
    drop(sidecar);

    let report = Report {
        command: command(&s),
        started,
        nodes: s.nodes,
        pods: s.nodes * s.daemonsets,
        informerd: Informerd {
            pods,
            nodes,
            sync_seconds,
            cpu_seconds,
            synced_rss_bytes: synced_rss,
            synced_peak_rss_bytes: synced_peak_rss,
            sync_peak_allocated_bytes: sync_allocated,
            synced_allocated_bytes: status.allocated_bytes,
            start_peak_allocated_bytes: start_peak.allocated,
            start_peak_key_queue_bytes: start_peak.key_queues,
            hold_peak_allocated_bytes: hold_peak.allocated,
            steady_rss_bytes: steady_rss,
            peak_rss_bytes: peak_rss,
            allocated_bytes: allocated,
            pods_store_bytes: pods_store,
            nodes_store_bytes: nodes_store,
            key_resyncs,
            keys_sent,
            log_warnings,
        },
        consumers_steady_rss_bytes: out.iter().map(|c| c.steady_rss_bytes).sum(),
        consumers_peak_rss_bytes: out.iter().map(|c| c.peak_rss_bytes).sum(),
        consumers: out,
        node_updates,
    };
    let md = markdown(&report);
    println!("{md}");
    if s.out != "-" {
        let json_path = results::write_json(&format!("{}.json", s.out), &report)?;
        std::fs::write(results::dir()?.join(format!("{}.md", s.out)), &md)?;
        eprintln!("wrote {json_path}");
    }
    let errors: u64 = report
        .consumers
        .iter()
        .map(|c| c.report["errors"].as_u64().unwrap_or(1))
        .sum();
    anyhow::ensure!(errors == 0, "the consumers reported {errors} errors");
    Ok(())
}

fn command(s: &Settings) -> String {
    let mut vars = Vec::new();
    if s.nodes != 100_000 {
        vars.push(format!("NVS_NODES={}", s.nodes));
    }
    if s.daemonsets != 14 {
        vars.push(format!("NVS_DAEMONSETS={}", s.daemonsets));
    }
    if s.hold != Duration::from_secs(60) {
        vars.push(format!("NVS_HOLD_SECONDS={}", s.hold.as_secs()));
    }
    if s.churn != 20 {
        vars.push(format!("NVS_CHURN={}", s.churn));
    }
    vars.push("make bench-nvsentinel".into());
    vars.join(" ")
}

/// The cache such a cluster's components need: pods with the controller profile and an index
/// of the node each is on; nodes without their images (most of a node's size) and
/// managedFields.
fn config(metrics_port: u16) -> SidecarConfig {
    let pods = Resource::new("pods", "v1", "Pod")
        .keep(CONTROLLER_KEEP.iter().copied())
        .drop(CONTROLLER_DROP.iter().copied())
        .index(Index::path("node", "spec.nodeName"));
    let nodes = Resource::new("nodes", "v1", "Node")
        .keep([
            "metadata",
            "spec",
            "status.conditions",
            "status.addresses",
            "status.allocatable",
        ])
        .drop(["metadata.managedFields"]);
    SidecarConfig::new()
        .server(|s| s.metrics_port(metrics_port))
        .resource(pods)
        .resource(nodes)
}

/// Seeds what is missing: the nodes, then the pods (both idempotent).
async fn seed(cp: &ControlPlane, kube: &kube::Client, s: &Settings) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(kube.clone());
    let have = count(&nodes).await?;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::all(kube.clone());
    let have_pods = count(&pods).await?;
    let want_pods = s.nodes * s.daemonsets;
    let etcd = cp.etcd_url()?;
    if have < s.nodes {
        eprintln!("nvsentinel: seeding {} nodes ({have} present)", s.nodes);
        run(std::process::Command::new(cp.bin("seed")).args([
            "nodes",
            "--nodes",
            &s.nodes.to_string(),
            "--etcd",
            &etcd,
        ]))?;
    }
    if have_pods < want_pods {
        eprintln!("nvsentinel: seeding {want_pods} pods ({have_pods} present)");
        run(std::process::Command::new(cp.bin("seed"))
            .args(["pods", "--kubeconfig"])
            .arg(cp.kubeconfig())
            .args(["--prefix", "nvs", "--daemonsets", &s.daemonsets.to_string()])
            .args(["--nodes", &s.nodes.to_string()])
            .args(["--namespaces", &s.namespaces.to_string(), "--etcd", &etcd]))?;
    }
    Ok(())
}

/// How many objects the apiserver has: one object's List and the count of the rest.
async fn count<K>(api: &Api<K>) -> anyhow::Result<usize>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list_metadata(&ListParams::default().limit(1)).await?;
    Ok(list.items.len() + list.metadata.remaining_item_count.unwrap_or(0) as usize)
}

fn run(cmd: &mut std::process::Command) -> anyhow::Result<()> {
    let out = cmd.stderr(Stdio::inherit()).output()?;
    anyhow::ensure!(out.status.success(), "{cmd:?}: {}", out.status);
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
    Ok(())
}

/// Samples the sidecar's allocated bytes (Status) and its key queues' estimated bytes
/// (`informerd_watch_keys_queue_bytes`) every 200 ms, keeping the most of each, until stopped.
struct AllocatedSampler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Sampled>,
}

/// The most of each figure an [`AllocatedSampler`] saw.
#[derive(Default, Clone, Copy)]
struct Sampled {
    allocated: u64,
    key_queues: u64,
}

impl AllocatedSampler {
    fn start(mut api: CacheClient<Channel>, metrics_port: u16) -> AllocatedSampler {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut most = Sampled::default();
            loop {
                if let Ok(status) = api.status(StatusRequest::default()).await {
                    most.allocated = most.allocated.max(status.into_inner().allocated_bytes);
                }
                if let Ok(m) = scrape_metrics(metrics_port).await {
                    let queues = m.sum("informerd_watch_keys_queue_bytes", &[]) as u64;
                    most.key_queues = most.key_queues.max(queues);
                }
                tokio::select! {
                    _ = &mut stopped => return most,
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        });
        AllocatedSampler { stop, task }
    }

    /// The most of each figure sampled.
    async fn stop(self) -> Sampled {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

/// Polls Status until every resource is synced (an hour at most: 1.4 million pods are listed
/// from etcd in pages); its status then, and the most allocated bytes its status reported on
/// the way (every 200 ms).
async fn wait_synced(
    api: &mut CacheClient<Channel>,
    pid: u32,
) -> anyhow::Result<(StatusResponse, u64)> {
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut allocated = 0;
    loop {
        let status = api.status(StatusRequest::default()).await?.into_inner();
        allocated = allocated.max(status.allocated_bytes);
        if status.synced {
            return Ok((status, allocated));
        }
        if exited(pid) {
            bail!("informerd exited before it synced");
        }
        if Instant::now() > deadline {
            bail!("informerd not synced after an hour");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Updates `s.churn` nodes' Ready condition a second for the hold, round-robin over the nodes,
/// as kubelets' status updates do; how many it made.
async fn churn(kube: &kube::Client, s: &Settings) -> anyhow::Result<usize> {
    let nodes: Api<Node> = Api::all(kube.clone());
    let start = Instant::now();
    let mut done = 0usize;
    while start.elapsed() < s.hold {
        if s.churn == 0 {
            tokio::time::sleep(s.hold).await;
            break;
        }
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let patch = json!({"status": {"conditions": [
            {"type": "Ready", "lastHeartbeatTime": now}]}});
        let name = format!("node-{}", (done * 7919) % s.nodes);
        nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .with_context(|| format!("updating the status of {name}"))?;
        done += 1;
        let due = Duration::from_secs_f64(done as f64 / s.churn as f64);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
    Ok(done)
}

struct Running {
    role: &'static str,
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    started: Instant,
}

fn start_consumer(
    s: &Settings,
    socket: &Path,
    role: &'static str,
    extra: &[String],
) -> anyhow::Result<Running> {
    let mut child = tokio::process::Command::new(&s.consumer)
        .arg("--socket")
        .arg(socket)
        .args(["--role", role, "--nodes", &s.nodes.to_string()])
        .args(["--pods-per-node", &s.daemonsets.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {}", s.consumer.display()))?;
    let stdout = child.stdout.take().context("the consumer's stdout")?;
    Ok(Running {
        role,
        child,
        stdout: BufReader::new(stdout).lines(),
        started: Instant::now(),
    })
}

impl Running {
    /// Waits for `ready role=R objects=N`: seconds since start, and N.
    async fn wait_ready(&mut self) -> anyhow::Result<(f64, u64)> {
        while let Some(line) = self.stdout.next_line().await? {
            if let Some(rest) = line.strip_prefix("ready ") {
                let objects = rest
                    .split_whitespace()
                    .find_map(|kv| kv.strip_prefix("objects="))
                    .and_then(|n| n.parse().ok())
                    .with_context(|| format!("consumer {}: {line:?}", self.role))?;
                let seconds = self.started.elapsed().as_secs_f64();
                eprintln!(
                    "nvsentinel: consumer {} ready in {seconds:.1}s ({objects} objects)",
                    self.role
                );
                return Ok((seconds, objects));
            }
        }
        bail!("consumer {} exited before it was ready", self.role)
    }

    /// Reads its memory, stops it (SIGTERM) and reads its JSON report.
    async fn stop(mut self, ready_seconds: f64, objects: u64) -> anyhow::Result<Consumer> {
        let pid = self.child.id().context("the consumer exited early")?;
        let steady = status_bytes(pid, "VmRSS").unwrap_or(0);
        let peak = status_bytes(pid, "VmHWM").unwrap_or(0);
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        anyhow::ensure!(killed.success(), "kill -TERM {pid}");
        let mut report = None;
        while let Some(line) = self.stdout.next_line().await? {
            if line.trim_start().starts_with('{') {
                report = Some(serde_json::from_str(&line).context("the consumer's JSON line")?);
            }
        }
        self.child.wait().await?;
        Ok(Consumer {
            role: self.role.into(),
            ready_seconds,
            objects,
            steady_rss_bytes: steady,
            peak_rss_bytes: peak,
            report: report.with_context(|| format!("consumer {} printed no report", self.role))?,
        })
    }
}

fn markdown(r: &Report) -> String {
    let i = &r.informerd;
    let mib = |b: u64| format!("{:.1}", b as f64 / MIB);
    let met = |ok: bool| if ok { "met" } else { "**not met**" };
    let peak_ratio = i.peak_rss_bytes as f64 / i.steady_rss_bytes.max(1) as f64;
    let total = i.peak_rss_bytes + r.consumers_peak_rss_bytes;
    let mut md = format!(
        "# The NVSentinel profile: one informerd for a GPU cluster's components\n\n\
         `{}` (`benches/nvsentinel.rs` says what is measured), started {}: {} nodes and {} \
         DaemonSet pods written into etcd; one informerd caching both cluster-wide; ten consumer \
         processes reading through it; {} node status updates through the apiserver during the \
         hold. 2 cores, 24 GiB shared with the control plane. Figures are measured, never \
         asserted.\n\n\
         | goal | measured | target | |\n| --- | ---: | ---: | --- |\n\
         | informerd, peak RSS | {} MiB | ≤ 512 MiB | {} |\n\
         | the ten consumers together, peak RSS | {} MiB | ≤ 2,048 MiB | {} |\n\
         | informerd, peak / steady RSS | {:.2} | ≤ 1.1 | {} |\n\n\
         Together {} MiB, against the 51 GB published for ten components with their own \
         caches ({:.0}× less).\n\n",
        r.command,
        r.started,
        r.nodes,
        r.pods,
        r.node_updates,
        mib(i.peak_rss_bytes),
        met(i.peak_rss_bytes <= 512 << 20),
        mib(r.consumers_peak_rss_bytes),
        met(r.consumers_peak_rss_bytes <= 2048 << 20),
        peak_ratio,
        met(peak_ratio <= 1.1),
        mib(total),
        PUBLISHED_BYTES / total.max(1) as f64,
    );
    md += &format!(
        "## informerd\n\n| pods | nodes | sync | CPU to sync | RSS synced (peak) | steady RSS \
         | peak RSS | allocated | pods' store | nodes' store |\n| ---: | ---: | ---: | ---: | ---: \
         | ---: | ---: | ---: | ---: | ---: |\n| {} | {} | {:.1} s | {:.1} s | {} MiB ({} MiB) | {} \
         MiB | {} MiB | {} MiB | {} MiB ({:.0} B/pod) | {} MiB ({:.0} B/node) |\n\n\
         RSS synced: VmRSS once synced, before any consumer (in brackets VmHWM then, the initial \
         sync's peak); steady: VmRSS at the end of the hold, the consumers connected; peak: \
         VmHWM over the run, the initial sync and the consumers' initial states included.\n\n\
         Allocated (jemalloc's count) during the sync: at most {} MiB (sampled every 200 ms), \
         {} MiB once synced; while the consumers start: at most {} MiB (of which the key \
         queues' entries, by their own estimate, at most {} MiB); during the hold: at most {} \
         MiB, {} MiB at its end.\n\n\
         The pod key queues: {} resyncs, {} keys sent ({:.2} per pod). The sidecar's log: {} \
         lines at WARN or ERROR{}.\n\n",
        i.pods,
        i.nodes,
        i.sync_seconds,
        i.cpu_seconds,
        mib(i.synced_rss_bytes),
        mib(i.synced_peak_rss_bytes),
        mib(i.steady_rss_bytes),
        mib(i.peak_rss_bytes),
        mib(i.allocated_bytes),
        mib(i.pods_store_bytes),
        i.pods_store_bytes as f64 / i.pods.max(1) as f64,
        mib(i.nodes_store_bytes),
        i.nodes_store_bytes as f64 / i.nodes.max(1) as f64,
        mib(i.sync_peak_allocated_bytes),
        mib(i.synced_allocated_bytes),
        mib(i.start_peak_allocated_bytes),
        mib(i.start_peak_key_queue_bytes),
        mib(i.hold_peak_allocated_bytes),
        mib(i.allocated_bytes),
        i.key_resyncs,
        i.keys_sent,
        i.keys_sent as f64 / i.pods.max(1) as f64,
        i.log_warnings.len(),
        i.log_warnings
            .first()
            .map(|l| format!(", the first: `{l}`"))
            .unwrap_or_default(),
    );
    md += "## The consumers\n\n| role | what it does | ready after | initial objects | steady \
           RSS | peak RSS | calls | events | errors |\n| --- | --- | ---: | ---: | ---: | ---: \
           | ---: | ---: | ---: |\n";
    for c in &r.consumers {
        let n = |k: &str| c.report[k].as_u64().map_or("?".into(), |v| v.to_string());
        md += &format!(
            "| {} | {} | {:.1} s | {} | {} MiB | {} MiB | {} | {} | {} |\n",
            c.role,
            role_text(&c.role),
            c.ready_seconds,
            c.objects,
            mib(c.steady_rss_bytes),
            mib(c.peak_rss_bytes),
            n("calls"),
            n("events"),
            n("errors"),
        );
    }
    md += &format!(
        "| all ten | | | | {} MiB | {} MiB | | | |\n",
        mib(r.consumers_steady_rss_bytes),
        mib(r.consumers_peak_rss_bytes)
    );
    md
}

fn role_text(role: &str) -> &'static str {
    match role {
        "nodes" => "an informer of all nodes",
        "pods-by-node" => "List of a random node's pods by the `node` index, Get of the node",
        "pod-keys" => "a key queue over all pods, a Get per later key",
        "daemonset" => "an informer of one DaemonSet's pods (label selector)",
        _ => "",
    }
}
