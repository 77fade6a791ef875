//! Serving: `Get` and `List` latency over the Unix socket under concurrent load, as a ratio to an
//! empty gRPC call on the same connection; and watch fan-out to 1, 10 and 100 subscribers.
//! Target (printed, never asserted): `Get` within 2 times an empty gRPC call.
//!
//! `cargo bench --bench serving` runs the real binary (the release build under `cargo bench`)
//! against the local control plane (`make cluster`). Settings, all optional:
//!
//! - `SERVING_PODS`: pods in the benchmark's namespace (default 1000);
//! - `SERVING_CONCURRENCY`: concurrent callers on the one connection (default 8; the run also
//!   measures 1 caller);
//! - `SERVING_SECONDS`: how long each kind of call is measured at each concurrency (default 10);
//! - `SERVING_WATCHERS`: the fan-outs, comma-separated (default `1,10,100`);
//! - `SERVING_WATCH_RATE`, `SERVING_WATCH_SECONDS`: the writes during each fan-out (default 100
//!   writes/s for 10 s).
//!
//! Setup. A fresh namespace of its own (deleted at the end), so that the run needs nothing but
//! a running control plane and measures the same objects every time: `SERVING_PODS` pods
//! written with server-side apply (16 at a time), shaped like the seeder's Deployment pods for
//! what the cache keeps of them (its labels, a `last-applied-configuration` annotation, a
//! Running status with five conditions and a podIP; no owner references, which would need real
//! owners to survive the garbage collector), bound to fake nodes, `PODS_PER_NODE` per node. The
//! sidecar caches them with the controller profile (`transform::CONTROLLER_KEEP` =
//! metadata, spec.nodeName, status.phase, status.conditions, status.podIP; `CONTROLLER_DROP` =
//! metadata.managedFields) and an index `node` on spec.nodeName.
//!
//! Calls. One connection (one tonic `Channel`, one HTTP/2 connection over the Unix socket)
//! shared by C callers (cloned clients), each calling back-to-back; latency is from the call to
//! its response (for `List`, its last message), measured in the benchmark's process:
//!
//! - empty: `grpc.health.v1.Health/Check` of the service `""`, served by tonic-health on the
//!   same listener: a read of a small map and a two-byte reply, the cheapest call the server
//!   has. (`Status` is not empty: it reads jemalloc's statistics and `/proc` on every call.)
//! - `Get` of a random pod (whole object);
//! - `List` of a random node's pods by the index `node`, all namespaces (`PODS_PER_NODE`);
//! - `List` of the whole namespace with the field mask `fields: [status.phase]`.
//!
//! Each kind runs `SERVING_SECONDS` in total at each concurrency, in `SLICES` slices that
//! alternate with the other kinds, so that a change in the machine's background load (the cores
//! are shared) affects every kind alike; each concurrency starts with a short unrecorded warm-up.
//! The sidecar's CPU time (utime + stime from /proc, in ticks of 10 ms) is read around each
//! slice, and so is the benchmark's own.
//!
//! Fan-out. For each W: W watchers, each on its own connection, from one resume token (the
//! resource's epoch and revision); merge patches of the label `bench-seq` (the write's sequence
//! number), round-robin over the pods, at the watch rate (at most 16 in flight). Latency of a
//! delivery = its receipt − the send of its write. Every watcher must receive every write
//! exactly once, as consecutive revisions, in order; otherwise the run fails (exit 1) after the
//! report. `benches/watch_fanout.rs` is the long run with 100 watchers and a kube-rs baseline.
//!
//! Prints a Markdown report and writes the figures to `benches/results/serving.json`.

mod common;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use common::cluster::pods_resource;
use common::process::cpu_ticks;
use common::sidecar::{list_namespace, status};
use common::stats::{micros, round, Stats};
use common::watch::{
    discrepancies, join_followers, spawn_followers, status_text, wait_watchers, Delivery, End,
    SEQ_LABEL,
};
use common::writes::{revision_after, write_labels, writes_in, Churn, Write, Written};
use common::{cpus, env_or, join_sections, print_log_tail, profile, results, InNamespace};
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, GetRequest, IndexLookup,
    ListRequest, ResumeToken, WatchRequest,
};
use informerd::transform::{CONTROLLER_DROP, CONTROLLER_KEEP};
use informerd_client::{self as client, ConnectOptions};
use informerd_testkit::{Apply, Index, Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use prost::Message as _;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::sync::watch;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const RESOURCE: &str = "pods";
const INDEX: &str = "node";
/// Pods bound to each fake node: what one node's `List` by index returns.
const PODS_PER_NODE: usize = 30;
/// Each kind's measuring time is split into this many slices, alternating with the other kinds.
const SLICES: u32 = 5;
/// Unrecorded calls of each kind before each concurrency level.
const WARMUP: Duration = Duration::from_millis(500);
/// Writes in flight while creating pods and during fan-out.
const WRITE_CONCURRENCY: usize = 16;
/// The field managers of the pods' spec and status.
const MANAGER: &str = "informerd-bench";
const STATUS_MANAGER: &str = "informerd-bench-kubelet";
/// How long the watchers may take to reach the last write once the writes have ended.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);
/// A call that takes longer counts as an error (a hung server must not hang the benchmark).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The target: `Get`'s p50 within this many times the empty call's.
const GET_TARGET: f64 = 2.0;
/// Kernel clock ticks per second of /proc/PID/stat (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

#[derive(Debug, Clone)]
struct Settings {
    pods: usize,
    concurrency: usize,
    seconds: f64,
    watchers: Vec<usize>,
    watch_rate: f64,
    watch_seconds: f64,
}

impl Settings {
    fn from_env() -> anyhow::Result<Settings> {
        let watchers: String = env_or("SERVING_WATCHERS", "1,10,100".to_string())?;
        let s = Settings {
            pods: env_or("SERVING_PODS", 1000)?,
            concurrency: env_or("SERVING_CONCURRENCY", 8)?,
            seconds: env_or("SERVING_SECONDS", 10.0)?,
            watchers: watchers
                .split(',')
                .filter(|w| !w.trim().is_empty())
                .map(|w| w.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|e| anyhow!("SERVING_WATCHERS={watchers:?}: {e}"))?,
            watch_rate: env_or("SERVING_WATCH_RATE", 100.0)?,
            watch_seconds: env_or("SERVING_WATCH_SECONDS", 10.0)?,
        };
        if s.pods == 0 || s.concurrency == 0 || s.watchers.contains(&0) {
            bail!("SERVING_PODS, SERVING_CONCURRENCY and SERVING_WATCHERS must be at least 1");
        }
        if !(s.seconds > 0.0 && s.watch_rate > 0.0 && s.watch_seconds > 0.0) {
            bail!("SERVING_SECONDS, SERVING_WATCH_RATE and SERVING_WATCH_SECONDS must be positive");
        }
        Ok(s)
    }

    /// The concurrency levels measured: 1 and `SERVING_CONCURRENCY`.
    fn levels(&self) -> Vec<usize> {
        let mut l = vec![1, self.concurrency];
        l.dedup();
        l
    }

    fn nodes(&self) -> usize {
        self.pods.div_ceil(PODS_PER_NODE)
    }

    /// The writes of the `run`-th fan-out; its labels carry values after the previous run's.
    fn churn(&self, run: usize) -> Churn {
        let writes = writes_in(self.watch_rate, self.watch_seconds);
        Churn {
            writes,
            rate: self.watch_rate,
            in_flight: WRITE_CONCURRENCY,
            base: run as u64 * writes,
        }
    }
}

fn main() -> ExitCode {
    common::main_in_namespace(
        "serving",
        "serving",
        "a call failed or returned the wrong objects, or a watcher missed, repeated or reordered events",
        Settings::from_env,
        bench,
    )
}

// ---------------------------------------------------------------------------------------------
// The pods

/// The pods' names, by index: Deployment-style, one app per 50 pods.
fn pod_names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let app = i / 50;
            format!("svc-{app}-{}-{i:05}", template_hash(app))
        })
        .collect()
}

fn template_hash(app: usize) -> String {
    // Ten characters from the alphabet Kubernetes uses for generated names.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = (app as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..10)
        .map(|_| {
            x ^= x >> 29;
            x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
            ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

fn node_name(k: usize) -> String {
    format!("node-{k}")
}

/// The node of pod `i`.
fn node_of(i: usize, nodes: usize) -> usize {
    i % nodes
}

fn pod_manifest(i: usize, name: &str, nodes: usize) -> Value {
    let app = format!("svc-{}", i / 50);
    let hash = template_hash(i / 50);
    let labels = json!({
        "app.kubernetes.io/component": "backend",
        "app.kubernetes.io/instance": app,
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/part-of": "serving-bench",
        "app.kubernetes.io/version": "4.27.5",
        "team": "bench",
    });
    let container = json!({
        "name": "app",
        "image": format!("acme/{app}:4.27.5"),
        "ports": [{"containerPort": 8080, "name": "http"}, {"containerPort": 9090, "name": "metrics"}],
        "resources": {"limits": {"cpu": "1", "memory": "64Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
    });
    // What `kubectl apply` of the Deployment leaves on it, and the Deployment on its pods.
    let last_applied = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"annotations": {}, "labels": labels, "name": app, "namespace": "serving"},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}},
    });
    let mut pod_labels = labels.clone();
    let l = pod_labels.as_object_mut().expect("an object");
    l.insert("pod-template-hash".into(), hash.into());
    l.insert("informerd.io/tier".into(), "keep".into());
    l.insert(SEQ_LABEL.into(), "none".into());
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": pod_labels,
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": format!("{last_applied}\n"),
            },
        },
        "spec": {
            "nodeName": node_name(node_of(i, nodes)),
            // No kubelet confirms deletions: without this the namespace would not go away.
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
        },
    })
}

fn pod_status(i: usize, name: &str, nodes: usize) -> Value {
    let at = |s: u32| format!("2026-01-01T00:00:{s:02}Z");
    let condition =
        |t: &str, s: u32| json!({"type": t, "status": "True", "lastTransitionTime": at(s)});
    let node = node_of(i, nodes);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "status": {
            "phase": "Running",
            "conditions": [
                condition("PodReadyToStartContainers", 2),
                condition("Initialized", 1),
                condition("Ready", 13),
                condition("ContainersReady", 13),
                condition("PodScheduled", 0),
            ],
            "hostIP": format!("10.128.{}.{}", node / 250, node % 250 + 1),
            "podIP": format!("10.64.{}.{}", i / 250, i % 250 + 1),
            "podIPs": [{"ip": format!("10.64.{}.{}", i / 250, i % 250 + 1)}],
            "startTime": at(0),
        },
    })
}

/// Applies every pod, then every pod's status through the status subresource (as a kubelet
/// would write it), a few at a time.
async fn create_pods(pods: &Api<Pod>, names: &[String], nodes: usize) -> anyhow::Result<()> {
    let apply = Apply::new().manager(MANAGER).concurrency(WRITE_CONCURRENCY);
    let manifests = names
        .iter()
        .enumerate()
        .map(|(i, name)| pod_manifest(i, name, nodes));
    apply
        .pods(pods, manifests)
        .await
        .context("apply the pods")?;
    let statuses = names
        .iter()
        .enumerate()
        .map(|(i, name)| pod_status(i, name, nodes));
    apply
        .manager(STATUS_MANAGER)
        .status()
        .pods(pods, statuses)
        .await
        .context("apply the pods' status")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Calls under load

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Empty,
    Get,
    ListNode,
    ListNamespace,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Empty, Kind::Get, Kind::ListNode, Kind::ListNamespace];

    fn key(self) -> &'static str {
        match self {
            Kind::Empty => "empty",
            Kind::Get => "get",
            Kind::ListNode => "list_node_index",
            Kind::ListNamespace => "list_namespace_masked",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Empty => "empty: Health/Check",
            Kind::Get => "`Get` a random pod",
            Kind::ListNode => "`List` one node's pods (index)",
            Kind::ListNamespace => "`List` the namespace, `fields: [status.phase]`",
        }
    }

    fn rpc(self) -> &'static str {
        match self {
            Kind::Empty => "grpc.health.v1.Health/Check",
            Kind::Get => "informerd.v1.Cache/Get",
            Kind::ListNode | Kind::ListNamespace => "informerd.v1.Cache/List",
        }
    }
}

/// What a caller needs; clones share the connection.
#[derive(Clone)]
struct Caller {
    api: CacheClient<Channel>,
    health: HealthClient<Channel>,
    ns: Arc<str>,
    names: Arc<Vec<String>>,
    /// Pods per node, by node number.
    per_node: Arc<Vec<usize>>,
}

impl Caller {
    /// One call; returns what it received: objects, bytes of object JSON, bytes of the
    /// encoded responses.
    async fn call(&mut self, kind: Kind, rng: &mut StdRng) -> Result<Received, String> {
        match kind {
            Kind::Empty => {
                let r = self
                    .health
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .map_err(|s| status_text(&s))?
                    .into_inner();
                if r.status != ServingStatus::Serving as i32 {
                    return Err(format!("health status {}", r.status));
                }
                Ok(Received {
                    wire: r.encoded_len(),
                    ..Default::default()
                })
            }
            Kind::Get => {
                let name = &self.names[rng.random_range(0..self.names.len())];
                let r = self
                    .api
                    .get(GetRequest {
                        resource: RESOURCE.into(),
                        namespace: self.ns.to_string(),
                        name: name.clone(),
                        ..Default::default()
                    })
                    .await
                    .map_err(|s| status_text(&s))?
                    .into_inner();
                let wire = r.encoded_len();
                match r.object {
                    Some(o) if &o.name == name => Ok(Received {
                        objects: 1,
                        json: o.json.len(),
                        wire,
                    }),
                    other => Err(format!("Get {name} returned {:?}", other.map(|o| o.name))),
                }
            }
            Kind::ListNode => {
                let k = rng.random_range(0..self.per_node.len());
                let req = ListRequest {
                    resource: RESOURCE.into(),
                    index: Some(IndexLookup {
                        name: INDEX.into(),
                        value: node_name(k),
                    }),
                    ..Default::default()
                };
                let got = self.list(req).await?;
                if got.objects != self.per_node[k] {
                    return Err(format!(
                        "List of {} returned {} pods, not {}",
                        node_name(k),
                        got.objects,
                        self.per_node[k]
                    ));
                }
                Ok(got)
            }
            Kind::ListNamespace => {
                let req = ListRequest {
                    resource: RESOURCE.into(),
                    namespace: self.ns.to_string(),
                    fields: vec!["status.phase".into()],
                    ..Default::default()
                };
                let got = self.list(req).await?;
                if got.objects != self.names.len() {
                    return Err(format!(
                        "List of the namespace returned {} pods, not {}",
                        got.objects,
                        self.names.len()
                    ));
                }
                Ok(got)
            }
        }
    }

    /// Reads a whole List.
    async fn list(&mut self, req: ListRequest) -> Result<Received, String> {
        let mut stream = self
            .api
            .list(req)
            .await
            .map_err(|s| status_text(&s))?
            .into_inner();
        let (mut got, mut last) = (Received::default(), false);
        while let Some(chunk) = stream.message().await.map_err(|s| status_text(&s))? {
            got.objects += chunk.objects.len();
            got.json += chunk.objects.iter().map(|o| o.json.len()).sum::<usize>();
            got.wire += chunk.encoded_len();
            last = chunk.last;
        }
        if !last {
            return Err("the List ended without its last chunk".into());
        }
        Ok(got)
    }
}

/// What one call received.
#[derive(Debug, Default, Clone, Copy)]
struct Received {
    objects: usize,
    /// Bytes of object JSON.
    json: usize,
    /// Bytes of the encoded response messages (JSON, identity, labels, framing fields).
    wire: usize,
}

/// What callers' calls of one kind received.
#[derive(Debug, Default)]
struct Calls {
    /// Latencies of the successful calls, in nanoseconds.
    latencies: Vec<i64>,
    errors: usize,
    first_error: Option<String>,
    objects: usize,
    bytes: usize,
    wire: usize,
}

impl Calls {
    /// One call's outcome.
    fn record(&mut self, outcome: Result<(Duration, Received), String>) {
        match outcome {
            Ok((elapsed, got)) => {
                self.latencies.push(elapsed.as_nanos() as i64);
                self.objects += got.objects;
                self.bytes += got.json;
                self.wire += got.wire;
            }
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    /// Another caller's calls, added to these.
    fn add(&mut self, other: Calls) {
        self.latencies.extend(other.latencies);
        self.errors += other.errors;
        self.objects += other.objects;
        self.bytes += other.bytes;
        self.wire += other.wire;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// What one kind of call measured at one concurrency, over all its slices.
#[derive(Debug, Default)]
struct Measured {
    calls: Calls,
    secs: f64,
    server_ticks: u64,
    client_ticks: u64,
}

/// utime + stime of a process (`self`: this one), in clock ticks; 0 when it cannot be read.
fn ticks(pid: &str) -> u64 {
    cpu_ticks(pid).unwrap_or(0)
}

/// `c` callers calling `kind` back-to-back for `duration`; adds what they measured to `into`
/// (`None`: a warm-up, not recorded).
async fn run_slice(
    caller: &Caller,
    kind: Kind,
    c: usize,
    duration: Duration,
    seed: u64,
    server_pid: &str,
    into: Option<&mut Measured>,
) {
    let (server0, client0) = (ticks(server_pid), ticks("self"));
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..c {
        let mut caller = caller.clone();
        let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1000) + t as u64);
        tasks.spawn(async move {
            let mut out = Calls::default();
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let r = tokio::time::timeout(CALL_TIMEOUT, caller.call(kind, &mut rng)).await;
                let elapsed = t0.elapsed();
                out.record(match r {
                    Ok(got) => got.map(|got| (elapsed, got)),
                    Err(_) => Err(format!("no answer within {CALL_TIMEOUT:?}")),
                });
            }
            out
        });
    }
    let outs = tasks.join_all().await;
    let secs = start.elapsed().as_secs_f64();
    let Some(m) = into else { return };
    m.secs += secs;
    m.server_ticks += ticks(server_pid).saturating_sub(server0);
    m.client_ticks += ticks("self").saturating_sub(client0);
    for o in outs {
        m.calls.add(o);
    }
}

/// Every kind at concurrency `c`: a warm-up, then `SLICES` rounds, each kind once per round
/// (the order rotating from round to round).
async fn measure_level(
    caller: &Caller,
    c: usize,
    s: &Settings,
    server_pid: &str,
) -> Vec<(Kind, Measured)> {
    for (i, kind) in Kind::ALL.into_iter().enumerate() {
        run_slice(caller, kind, c, WARMUP, 7 + i as u64, server_pid, None).await;
    }
    let slice = Duration::from_secs_f64(s.seconds / SLICES as f64);
    let mut out: Vec<(Kind, Measured)> = Kind::ALL
        .map(|k| (k, Measured::default()))
        .into_iter()
        .collect();
    for round in 0..SLICES as usize {
        for j in 0..out.len() {
            let i = (round + j) % out.len();
            let (kind, m) = &mut out[i];
            let seed = (c * 100 + round * 10 + i) as u64;
            run_slice(caller, *kind, c, slice, seed, server_pid, Some(m)).await;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Watch fan-out

/// The write a delivery is: the one its label names, with the resourceVersion it got.
fn write_of<'a>(d: &Delivery, base: u64, writes: &'a [Write]) -> Option<&'a Write> {
    let w = writes.get(usize::try_from(d.seq?.checked_sub(base)?).ok()?)?;
    (w.rv.as_ref().ok() == Some(&d.rv)).then_some(w)
}

/// What goes wrong with one watcher's deliveries: every successful write exactly once, as the
/// consecutive revisions `start+1..=target`, MODIFIED, with increasing resourceVersions.
fn check_watcher(
    deliveries: &[Delivery],
    end: &End,
    (start, target): (u64, u64),
    base: u64,
    writes: &[Write],
) -> Vec<String> {
    let last = deliveries.last().map_or(start, |d| d.revision);
    let mut problems: Vec<String> = end
        .problem(target, last, DRAIN_TIMEOUT)
        .into_iter()
        .collect();
    let mut expected = start + 1;
    let (mut out_of_order, mut not_modified, mut foreign, mut rv_back) = (0, 0, 0, 0);
    let mut first = None;
    let mut seen = vec![0u32; writes.len()];
    let mut last_rv = 0;
    for d in deliveries {
        if d.revision != expected {
            out_of_order += 1;
            first.get_or_insert(format!("revision {} where {expected} was due", d.revision));
        }
        expected = d.revision + 1;
        if d.kind != EventType::Modified as i32 {
            not_modified += 1;
        }
        if d.rv <= last_rv {
            rv_back += 1;
        }
        last_rv = d.rv;
        match write_of(d, base, writes) {
            Some(w) => seen[w.seq as usize] += 1,
            None => foreign += 1,
        }
    }
    if matches!(end, End::Reached) && expected != target + 1 {
        problems.push(format!(
            "ended at revision {} instead of {target}",
            expected - 1
        ));
    }
    if out_of_order > 0 {
        problems.push(format!(
            "{out_of_order} events out of sequence (first: {})",
            first.unwrap_or_default()
        ));
    }
    if not_modified > 0 {
        problems.push(format!("{not_modified} events that are not MODIFIED"));
    }
    if foreign > 0 {
        problems.push(format!("{foreign} events that are none of the writes"));
    }
    if rv_back > 0 {
        problems.push(format!(
            "{rv_back} events with a resourceVersion not above the previous one"
        ));
    }
    let missing = writes
        .iter()
        .zip(&seen)
        .filter(|(w, n)| w.rv.is_ok() && **n == 0)
        .count();
    let repeated = seen.iter().filter(|n| **n > 1).count();
    if missing > 0 || repeated > 0 {
        problems.push(format!(
            "writes: {missing} never delivered, {repeated} delivered more than once"
        ));
    }
    problems
}

/// One fan-out, measured.
struct Fanout {
    watchers: usize,
    written: Written,
    start: u64,
    target: u64,
    delivered: usize,
    events_per_sec: f64,
    drain_ms: f64,
    latency: Stats,
    /// Per watcher: its problems (empty: every write once, in order).
    problems: Vec<Vec<String>>,
}

impl Fanout {
    fn good(&self) -> usize {
        self.problems.iter().filter(|p| p.is_empty()).count()
    }

    fn ok(&self) -> bool {
        self.good() == self.watchers
    }
}

async fn fanout(
    socket: &str,
    ns: &str,
    api: &mut CacheClient<Channel>,
    pods: &Api<Pod>,
    names: &Arc<Vec<String>>,
    (w, churn): (usize, Churn),
) -> anyhow::Result<Fanout> {
    let st = status(api, RESOURCE).await?;
    let r = st
        .resources
        .first()
        .ok_or_else(|| anyhow!("Status has no resource"))?;
    let token = ResumeToken {
        epoch: r.epoch,
        revision: r.revision,
    };
    let start = token.revision;
    let (target_tx, target_rx) = watch::channel(u64::MAX);
    let request = WatchRequest {
        resource: RESOURCE.into(),
        start: Some(Start::Since(token)),
        ..Default::default()
    };
    let readers = spawn_followers(socket, w, &request, &target_rx, churn.writes).await?;
    wait_watchers(api, RESOURCE, w as u64).await?;

    let base = churn.base;
    let churn_start = Instant::now();
    let writes = write_labels(pods, names, churn, churn_start).await;
    let churn_end = Instant::now();
    let (target, _) = revision_after(api, (RESOURCE, ns), names, &writes).await?;
    target_tx.send_replace(target);

    let (joined, drained) = join_followers(readers, target_tx, DRAIN_TIMEOUT).await?;
    let followed: Vec<_> = joined
        .into_iter()
        .map(|(f, _connection)| (f.deliveries, f.end))
        .collect();
    wait_watchers(api, RESOURCE, 0).await?;

    let problems: Vec<Vec<String>> = followed
        .iter()
        .map(|(d, e)| check_watcher(d, e, (start, target), base, &writes))
        .collect();
    let mut latency = Vec::new();
    let mut delivered = 0;
    let mut last_receipt = churn_start;
    for (ds, _) in &followed {
        delivered += ds.len();
        for d in ds {
            last_receipt = last_receipt.max(d.at);
            if let Some(wr) = write_of(d, base, &writes) {
                latency.push(micros(d.at, wr.sent));
            }
        }
    }
    Ok(Fanout {
        watchers: w,
        written: Written::of(&writes, (churn_end - churn_start).as_secs_f64()),
        start,
        target,
        delivered,
        events_per_sec: delivered as f64 / (last_receipt - churn_start).as_secs_f64().max(1e-9),
        drain_ms: (drained - churn_end).as_secs_f64() * 1000.0,
        latency: Stats::of(latency),
        problems,
    })
}

// ---------------------------------------------------------------------------------------------
// The benchmark

/// What the run measured, for the report.
struct Run {
    version: String,
    nodes: usize,
    /// Mean bytes of a cached pod's JSON (a `List` of the namespace without a mask).
    object_bytes: f64,
    levels: Vec<(usize, Vec<(Kind, Measured)>)>,
    fanouts: Vec<Fanout>,
    load_before: String,
    load_after: String,
    allocated_bytes: u64,
    resident_bytes: u64,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn bench(at: &InNamespace<'_>, s: &Settings) -> anyhow::Result<bool> {
    let (pods, ns) = (at.pods, at.ns);
    let names = Arc::new(pod_names(s.pods));
    let t = Instant::now();
    create_pods(pods, &names, s.nodes())
        .await
        .context("create pods")?;
    eprintln!(
        "serving: {} pods on {} nodes in namespace {ns}, applied in {:.1} s",
        s.pods,
        s.nodes(),
        t.elapsed().as_secs_f64()
    );

    let config = SidecarConfig::new().resource(
        pods_resource(&[ns.into()], CONTROLLER_KEEP, CONTROLLER_DROP)
            .index(Index::path(INDEX, "spec.nodeName")),
    );
    let sidecar = Sidecar::start(BIN.as_ref(), at.cluster, &config)?;
    let run = measure(&sidecar, pods, ns, &names, s)
        .await
        .inspect_err(|_| print_log_tail(&sidecar))?;
    let ok = run.ok();
    println!("{}", run.markdown(s, ns));
    if !ok {
        print_log_tail(&sidecar);
    }
    let written = results::write_json("serving.json", &run.json(s))?;
    eprintln!("serving: wrote {written}");
    Ok(ok)
}

async fn measure(
    sidecar: &Sidecar,
    pods: &Api<Pod>,
    ns: &str,
    names: &Arc<Vec<String>>,
    s: &Settings,
) -> anyhow::Result<Run> {
    let socket = sidecar.socket().display().to_string();
    let server_pid = sidecar
        .pid()
        .ok_or_else(|| anyhow!("the sidecar is not running"))?
        .to_string();
    // The one connection every caller shares.
    let channel = client::channel(&socket, &ConnectOptions::default()).await?;
    let mut api = CacheClient::new(channel.clone()).max_decoding_message_size(64 << 20);
    let mut health = HealthClient::new(channel.clone());

    // Ready: synced, healthy, and holding every pod with its status.
    let ready = async {
        loop {
            let synced = status(&mut api, RESOURCE).await.is_ok_and(|st| st.synced);
            let serving = health
                .check(HealthCheckRequest::default())
                .await
                .is_ok_and(|r| r.get_ref().status == ServingStatus::Serving as i32);
            if synced && serving {
                let chunks = list_namespace(&mut api, RESOURCE, ns).await?;
                let objects: Vec<_> = chunks.iter().flat_map(|c| &c.objects).collect();
                let running = objects
                    .iter()
                    .filter(|o| {
                        serde_json::from_slice::<Value>(&o.json)
                            .is_ok_and(|v| v["status"]["phase"] == "Running")
                    })
                    .count();
                if running == s.pods && objects.len() == s.pods {
                    let bytes: usize = objects.iter().map(|o| o.json.len()).sum();
                    return Ok::<_, anyhow::Error>(bytes as f64 / objects.len() as f64);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let object_bytes = tokio::time::timeout(Duration::from_secs(120), ready)
        .await
        .map_err(|_| anyhow!("the sidecar did not hold every pod, Running, within 120 s"))??;
    let version = status(&mut api, RESOURCE).await?.version;

    let mut per_node = vec![0; s.nodes()];
    for i in 0..s.pods {
        per_node[node_of(i, s.nodes())] += 1;
    }
    let caller = Caller {
        api: api.clone(),
        health: health.clone(),
        ns: ns.into(),
        names: names.clone(),
        per_node: Arc::new(per_node),
    };
    let load_before = loadavg();
    let mut levels = Vec::new();
    for c in s.levels() {
        eprintln!(
            "serving: {c} caller(s) on one connection, {} s per kind",
            s.seconds
        );
        levels.push((c, measure_level(&caller, c, s, &server_pid).await));
    }
    drop(caller);
    let st = status(&mut api, RESOURCE).await?;

    let mut fanouts = Vec::new();
    for (run, &w) in s.watchers.iter().enumerate() {
        let churn = s.churn(run);
        eprintln!(
            "serving: fan-out to {w} watcher(s), {} writes at {}/s",
            churn.writes, churn.rate
        );
        fanouts.push(fanout(&socket, ns, &mut api, pods, names, (w, churn)).await?);
    }
    Ok(Run {
        version,
        nodes: s.nodes(),
        object_bytes,
        levels,
        fanouts,
        load_before,
        load_after: loadavg(),
        allocated_bytes: st.allocated_bytes,
        resident_bytes: st.resident_bytes,
    })
}

// ---------------------------------------------------------------------------------------------
// The report

/// The figures of one kind at one concurrency.
struct Row {
    calls: usize,
    calls_per_sec: f64,
    /// Nanoseconds.
    stats: Stats,
    objects_per_call: f64,
    bytes_per_call: f64,
    wire_per_call: f64,
    server_cpu_us: f64,
    client_cpu_us: f64,
}

impl Row {
    fn of(m: &Measured) -> Row {
        let calls = m.calls.latencies.len();
        let per_call = |x: f64| if calls == 0 { 0.0 } else { x / calls as f64 };
        Row {
            calls,
            calls_per_sec: calls as f64 / m.secs.max(1e-9),
            stats: Stats::of(m.calls.latencies.clone()),
            objects_per_call: per_call(m.calls.objects as f64),
            bytes_per_call: per_call(m.calls.bytes as f64),
            wire_per_call: per_call(m.calls.wire as f64),
            server_cpu_us: per_call(m.server_ticks as f64 / USER_HZ * 1e6),
            client_cpu_us: per_call(m.client_ticks as f64 / USER_HZ * 1e6),
        }
    }
}

/// Nanoseconds as microseconds: one decimal below 100 µs, none above.
fn us(ns: i64) -> String {
    let us = ns as f64 / 1000.0;
    if us < 100.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

fn ratio(a: i64, b: i64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl Run {
    fn ok(&self) -> bool {
        let calls_ok = self
            .levels
            .iter()
            .flat_map(|(_, kinds)| kinds)
            .all(|(_, m)| m.calls.errors == 0);
        calls_ok && self.fanouts.iter().all(Fanout::ok)
    }

    /// The figures of one kind of call at one concurrency.
    fn stats(kinds: &[(Kind, Measured)], kind: Kind) -> Stats {
        kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, m)| Stats::of(m.calls.latencies.clone()))
            .unwrap_or_default()
    }

    /// The empty call's figures at the same concurrency.
    fn empty(kinds: &[(Kind, Measured)]) -> Stats {
        Run::stats(kinds, Kind::Empty)
    }

    /// The target's figures at one concurrency: `Get`'s p50 and p99 ÷ the empty call's.
    fn get_over_empty(kinds: &[(Kind, Measured)]) -> (f64, f64) {
        let (get, empty) = (Run::stats(kinds, Kind::Get), Run::empty(kinds));
        (ratio(get.p50, empty.p50), ratio(get.p99, empty.p99))
    }

    /// The report: the calls under load, then the fan-outs.
    fn markdown(&self, s: &Settings, ns: &str) -> String {
        join_sections([self.calls_markdown(s, ns), self.fanouts_markdown(s)])
    }

    fn calls_markdown(&self, s: &Settings, ns: &str) -> Vec<String> {
        let mut out = Vec::<String>::new();
        out.push(format!(
            "### Serving: {} pods, `Get` and `List` over the Unix socket, 1 and {} callers on \
             one connection",
            s.pods, s.concurrency
        ));
        out.push(String::new());
        out.push(format!(
            "informerd {} ({} build, `cargo bench --bench serving`); one namespace ({ns}) of {} \
             pods on {} nodes, the controller profile (keep {}; drop {}; cached pods {:.0} \
             bytes of JSON on average), index `{INDEX}` on spec.nodeName; every caller on one \
             HTTP/2 connection, calling back-to-back; each kind {} s in {SLICES} slices \
             alternating with the others; {} CPUs shared with the control plane; load average \
             {} before, {} after.",
            self.version,
            profile(),
            s.pods,
            self.nodes,
            CONTROLLER_KEEP.join(", "),
            CONTROLLER_DROP.join(", "),
            self.object_bytes,
            s.seconds,
            cpus(),
            self.load_before,
            self.load_after,
        ));
        out.push(String::new());
        out.push(
            "| callers | call | calls/s | p50 µs | p90 µs | p99 µs | max µs | p50 ÷ empty | \
             p99 ÷ empty | objects/call | KiB/call | sidecar CPU µs/call | errors |"
                .into(),
        );
        out.push("|---:|:--|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into());
        for (c, kinds) in &self.levels {
            let empty = Run::empty(kinds);
            for (kind, m) in kinds {
                let r = Row::of(m);
                out.push(format!(
                    "| {c} | {} | {:.0} | {} | {} | {} | {} | {:.2} | {:.2} | {:.1} | {:.1} | {:.0} | {} |",
                    kind.label(),
                    r.calls_per_sec,
                    us(r.stats.p50),
                    us(r.stats.p90),
                    us(r.stats.p99),
                    us(r.stats.max),
                    ratio(r.stats.p50, empty.p50),
                    ratio(r.stats.p99, empty.p99),
                    r.objects_per_call,
                    r.wire_per_call / 1024.0,
                    r.server_cpu_us,
                    m.calls.errors,
                ));
            }
        }
        out.push(String::new());
        let target: Vec<String> = self
            .levels
            .iter()
            .map(|(c, kinds)| {
                let (p50, p99) = Run::get_over_empty(kinds);
                format!(
                    "{c} caller(s): p50 {p50:.2}× ({}), p99 {p99:.2}×",
                    if p50 <= GET_TARGET {
                        "met"
                    } else {
                        "**not met**"
                    },
                )
            })
            .collect();
        out.push(format!(
            "Target, `Get` within 2× an empty call (p50): {}.",
            target.join("; ")
        ));
        let per_object: Vec<String> = self
            .levels
            .iter()
            .map(|(c, kinds)| {
                let row = |kind: Kind| {
                    kinds
                        .iter()
                        .find(|(k, _)| *k == kind)
                        .map(|(_, m)| Row::of(m))
                };
                let per = |r: &Row, x: f64| x / r.objects_per_call.max(1.0);
                match (row(Kind::ListNode), row(Kind::ListNamespace)) {
                    (Some(n), Some(m)) => format!(
                        "{c} caller(s): {:.1} µs for whole objects (node), {:.1} µs masked \
                         (namespace, whose responses carry {:.0} bytes of JSON and {:.0} bytes \
                         in all per object)",
                        per(&n, n.server_cpu_us),
                        per(&m, m.server_cpu_us),
                        per(&m, m.bytes_per_call),
                        per(&m, m.wire_per_call)
                    ),
                    _ => String::new(),
                }
            })
            .collect();
        out.push(format!(
            "Sidecar CPU per listed object: {}.",
            per_object.join("; ")
        ));
        for (c, kinds) in &self.levels {
            for (kind, m) in kinds {
                if let Some(e) = &m.calls.first_error {
                    out.push(format!(
                        "**Errors** ({c} callers, {}): {} (first: {e}).",
                        kind.key(),
                        m.calls.errors
                    ));
                }
            }
        }
        out
    }

    fn fanouts_markdown(&self, s: &Settings) -> Vec<String> {
        let mut out = Vec::<String>::new();
        out.push(format!(
            "### Watch fan-out: {} writes/s for {} s, each watcher on its own connection",
            s.watch_rate, s.watch_seconds
        ));
        out.push(String::new());
        out.push(
            "| watchers | writes | achieved rate | events per watcher | every event once, in \
             order | delivered | last watcher done after the last write |"
                .into(),
        );
        out.push("|---:|---:|---:|---:|:--|---:|---:|".into());
        for f in &self.fanouts {
            out.push(format!(
                "| {} | {} | {:.1}/s | {} | {} ({}/{} watchers) | {:.0} events/s | {:.0} ms |",
                f.watchers,
                f.written.cell(),
                f.written.achieved_rate,
                f.target - f.start,
                if f.ok() { "yes" } else { "**NO**" },
                f.good(),
                f.watchers,
                f.events_per_sec,
                f.drain_ms
            ));
        }
        out.push(String::new());
        out.extend(Stats::header("latency from the write's send (ms)"));
        for f in &self.fanouts {
            out.push(f.written.ack.row(&format!(
                "write acknowledged by the apiserver (during {} watcher(s))",
                f.watchers
            )));
            out.push(f.latency.row(&format!(
                "informerd, each of {} watcher(s) (every delivery)",
                f.watchers
            )));
        }
        for f in &self.fanouts {
            if let Some(e) = &f.written.first_error {
                out.push(format!(
                    "Failed writes ({} watchers): {} (first: {e}).",
                    f.watchers, f.written.failed
                ));
            }
            let bad: Vec<(usize, String)> = f
                .problems
                .iter()
                .enumerate()
                .filter(|(_, p)| !p.is_empty())
                .map(|(i, p)| (i, p.join("; ")))
                .collect();
            out.extend(discrepancies(
                &format!(
                    "**DISCREPANCIES** with {} watchers, in {} of them (expected revisions \
                     {}..={}, {} writes each):",
                    f.watchers,
                    bad.len(),
                    f.start + 1,
                    f.target,
                    f.written.ok
                ),
                &bad,
            ));
        }
        out
    }

    fn json(&self, s: &Settings) -> Value {
        let us_json = |st: &Stats| {
            let us = |ns: i64| round(ns as f64 / 1000.0, 1);
            json!({
                "n": st.n,
                "p50_us": us(st.p50),
                "p90_us": us(st.p90),
                "p99_us": us(st.p99),
                "max_us": us(st.max),
            })
        };
        let levels: Vec<Value> = self
            .levels
            .iter()
            .map(|(c, kinds)| {
                let empty = Run::empty(kinds);
                json!({
                    "callers": c,
                    "calls": kinds.iter().map(|(kind, m)| {
                        let r = Row::of(m);
                        json!({
                            "call": kind.key(),
                            "rpc": kind.rpc(),
                            "calls": r.calls,
                            "seconds": round(m.secs, 2),
                            "calls_per_s": round(r.calls_per_sec, 0),
                            "latency": us_json(&r.stats),
                            "p50_ratio_to_empty": round(ratio(r.stats.p50, empty.p50), 2),
                            "p99_ratio_to_empty": round(ratio(r.stats.p99, empty.p99), 2),
                            "objects_per_call": round(r.objects_per_call, 1),
                            "json_bytes_per_call": round(r.bytes_per_call, 0),
                            "response_bytes_per_call": round(r.wire_per_call, 0),
                            "sidecar_cpu_us_per_call": round(r.server_cpu_us, 1),
                            "benchmark_cpu_us_per_call": round(r.client_cpu_us, 1),
                            "errors": m.calls.errors,
                            "first_error": m.calls.first_error,
                        })
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        let fanouts: Vec<Value> = self
            .fanouts
            .iter()
            .map(|f| {
                json!({
                    "watchers": f.watchers,
                    "writes_succeeded": f.written.ok,
                    "writes_failed": f.written.failed,
                    "first_write_error": f.written.first_error,
                    "achieved_rate_per_s": round(f.written.achieved_rate, 1),
                    "start_revision": f.start,
                    "target_revision": f.target,
                    "watchers_correct": f.good(),
                    "events_delivered": f.delivered,
                    "events_per_s": f.events_per_sec.round(),
                    "last_watcher_done_after_last_write_ms": f.drain_ms.round(),
                    "latency_write_ack": f.written.ack.json(),
                    "latency_delivery": f.latency.json(),
                    "discrepancies": f.problems.iter().enumerate()
                        .filter(|(_, p)| !p.is_empty())
                        .map(|(i, p)| json!({"watcher": i, "problems": p}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let target: Vec<Value> = self
            .levels
            .iter()
            .map(|(c, kinds)| {
                let (p50, _) = Run::get_over_empty(kinds);
                json!({
                    "callers": c,
                    "get_p50_ratio_to_empty": round(p50, 2),
                    "met": p50 <= GET_TARGET,
                })
            })
            .collect();
        json!({
            "benchmark": "serving",
            "ok": self.ok(),
            "informerd_version": self.version,
            "profile": profile(),
            "config": {
                "pods": s.pods,
                "nodes": self.nodes,
                "pods_per_node": PODS_PER_NODE,
                "transform": {"keep": CONTROLLER_KEEP, "drop": CONTROLLER_DROP},
                "index": {"name": INDEX, "path": "spec.nodeName"},
                "cached_object_json_bytes_mean": self.object_bytes.round(),
                "concurrency_levels": s.levels(),
                "seconds_per_kind": s.seconds,
                "slices": SLICES,
                "warmup_ms_per_kind": WARMUP.as_millis() as u64,
                "empty_call": Kind::Empty.rpc(),
                "watchers": s.watchers,
                "watch_rate_per_s": s.watch_rate,
                "watch_seconds": s.watch_seconds,
                "cpus": cpus(),
                "load_average_before": self.load_before,
                "load_average_after": self.load_after,
            },
            "target_get_within_2x_empty": target,
            "serving": levels,
            "sidecar_memory_after_load": {
                "allocated_bytes": self.allocated_bytes,
                "resident_bytes": self.resident_bytes,
            },
            "fanout": fanouts,
        })
    }
}
