//! Serving: `Get` and `List` latency over the Unix socket under concurrent load, as a ratio to an
//! empty gRPC call on the same connection; and watch fan-out to 1, 10 and 100 subscribers.
//! Targets (printed, never asserted): `Get`, and a `List` by label selector of 5 pods of a
//! namespace of 5,000, within 2 times an empty gRPC call (p50).
//!
//! `cargo bench --bench serving` runs the real binary (the release build under `cargo bench`)
//! against the local control plane (`make cluster`). Settings, all optional:
//!
//! - `SERVING_PODS`: pods in the benchmark's namespaces (default 1000; 50000 for the figures
//!   of the selector's target);
//! - `SERVING_CONCURRENCY`: concurrent callers on the one connection (default 8; the run also
//!   measures 1 caller);
//! - `SERVING_SECONDS`: how long each kind of call is measured at each concurrency (default 10);
//! - `SERVING_WATCHERS`: the fan-outs, comma-separated (default `1,10,100`);
//! - `SERVING_WATCH_RATE`, `SERVING_WATCH_SECONDS`: the writes during each fan-out (default 100
//!   writes/s for 10 s);
//! - `SERVING_CALLS`: the kinds of call measured, comma-separated (default all: `get`,
//!   `get_typed`, `list_node_index`, `list_label_selector`, `list_label_selector_typed`,
//!   `list_label_selector_none`, `list_namespace_masked`; the empty call always), to profile
//!   the sidecar on one kind. The
//!   `_typed` calls are made as the typed clients make them, with `omit_labels` (they decode
//!   the JSON alone).
//!
//! Setup. Fresh namespaces of its own (deleted at the end), so that the run needs nothing but
//! a running control plane and measures the same objects every time: `SERVING_PODS` pods,
//! 5,000 per namespace (1,000 pods: one namespace of 1,000; 50,000: ten of 5,000), written
//! with server-side apply (64 at a time), shaped like a Deployment's pods for what the cache
//! keeps of them (nine labels, the app's `app.kubernetes.io/instance` shared by 5 pods; a
//! `last-applied-configuration` annotation; a Running status with five conditions and a podIP;
//! no owner references, which would need real owners to survive the garbage collector), bound
//! to fake nodes, `PODS_PER_NODE` per node (`serving/pods.rs`). The sidecar caches them with
//! the controller profile (`transform::CONTROLLER_KEEP` = metadata, spec.nodeName,
//! status.phase, status.conditions, status.podIP; `CONTROLLER_DROP` = metadata.managedFields),
//! an index `node` on spec.nodeName and the label index (`labels: true`).
//!
//! Memory. The sidecar's `informerd_memory_allocated_bytes` (its `/metrics`) once it holds
//! every pod, per pod; then a second sidecar, started alone after the calls, with the same
//! configuration but no label index, is read the same way: the difference is the label
//! index's cost (`serving/memory.rs`).
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
//! - `List` of a random app's pods by its label selector (`app.kubernetes.io/instance=svc-N`,
//!   5 pods of a namespace of up to 5,000), whole objects: the label index's lookup;
//! - `List` by a value of that label no pod has (`omit_labels`): the List call itself, one
//!   message without objects, beside the empty call;
//! - `List` of a random whole namespace with the field mask `fields: [status.phase]`.
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
//! report. The writes go to the first namespace's pods. `benches/watch_fanout.rs` is the long
//! run with 100 watchers and a kube-rs baseline.
//!
//! Prints a Markdown report and writes the figures to `benches/results/serving.json`.

mod common;
#[path = "serving/memory.rs"]
mod memory;
#[path = "serving/pods.rs"]
mod pods;

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
};
use common::writes::{revision_after, write_labels, writes_in, Churn, Write, Written};
use common::{cpus, env_or, join_sections, print_log_tail, profile, results, InNamespace};
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, GetRequest, IndexLookup,
    ListRequest, ResumeToken, WatchRequest,
};
use informerd::transform::{CONTROLLER_DROP, CONTROLLER_KEEP};
use informerd_client::{self as client, ConnectOptions};
use informerd_testkit::{free_port, Index, Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use memory::Memory;
use pods::{
    app_name, create_pods, namespaces_for, node_name, Layout, APP_LABEL, PODS_PER_APP,
    PODS_PER_NAMESPACE, PODS_PER_NODE,
};
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
/// The name of the label index.
const LABEL_INDEX: &str = "labels";
/// Each kind's measuring time is split into this many slices, alternating with the other kinds.
const SLICES: u32 = 5;
/// Unrecorded calls of each kind before each concurrency level.
const WARMUP: Duration = Duration::from_millis(500);
/// Writes in flight during fan-out.
const WRITE_CONCURRENCY: usize = 16;
/// How long the watchers may take to reach the last write once the writes have ended.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);
/// A call that takes longer counts as an error (a hung server must not hang the benchmark).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The targets: `Get`'s p50, and a `List` by label selector's, within this many times the
/// empty call's.
const TARGET: f64 = 2.0;
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
    /// The kinds of call measured, the empty call first.
    kinds: Vec<Kind>,
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
            kinds: Kind::parse(&env_or("SERVING_CALLS", String::new())?)?,
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

    fn namespaces(&self) -> usize {
        namespaces_for(self.pods)
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
    common::main_in_namespaces(
        "serving",
        "serving",
        "a call failed or returned the wrong objects, or a watcher missed, repeated or reordered events",
        Settings::from_env,
        Settings::namespaces,
        bench,
    )
}

// ---------------------------------------------------------------------------------------------
// Calls under load

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Empty,
    Get,
    /// A `Get` as the typed clients make it (`omit_labels`: they decode the JSON alone).
    GetTyped,
    ListNode,
    ListSelector,
    /// A `List` by selector as the typed clients make it (`omit_labels`).
    ListSelectorTyped,
    /// A `List` by a selector no pod matches, as the typed clients make it: what the List
    /// call itself costs beside an empty call, without objects.
    ListSelectorNone,
    ListNamespace,
}

impl Kind {
    const ALL: [Kind; 8] = [
        Kind::Empty,
        Kind::Get,
        Kind::GetTyped,
        Kind::ListNode,
        Kind::ListSelector,
        Kind::ListSelectorTyped,
        Kind::ListSelectorNone,
        Kind::ListNamespace,
    ];

    /// The kinds named in `keys` (comma-separated; blank: all), the empty call first.
    fn parse(keys: &str) -> anyhow::Result<Vec<Kind>> {
        if keys.trim().is_empty() {
            return Ok(Kind::ALL.to_vec());
        }
        let mut kinds = vec![Kind::Empty];
        for key in keys.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let Some(kind) = Kind::ALL.into_iter().find(|k| k.key() == key) else {
                let known: Vec<&str> = Kind::ALL.iter().map(|k| k.key()).collect();
                bail!(
                    "SERVING_CALLS: no call {key:?}; the calls are {}",
                    known.join(", ")
                );
            };
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        Ok(kinds)
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Empty => "empty",
            Kind::Get => "get",
            Kind::GetTyped => "get_typed",
            Kind::ListNode => "list_node_index",
            Kind::ListSelector => "list_label_selector",
            Kind::ListSelectorTyped => "list_label_selector_typed",
            Kind::ListSelectorNone => "list_label_selector_none",
            Kind::ListNamespace => "list_namespace_masked",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Empty => "empty: Health/Check",
            Kind::Get => "`Get` a random pod",
            Kind::GetTyped => "`Get` a random pod, as the typed clients (`omit_labels`)",
            Kind::ListNode => "`List` one node's pods (index)",
            Kind::ListSelector => "`List` one app's pods (label selector, label index)",
            Kind::ListSelectorTyped => {
                "`List` one app's pods, as the typed clients (`omit_labels`)"
            }
            Kind::ListSelectorNone => "`List` by a selector no pod matches (`omit_labels`)",
            Kind::ListNamespace => "`List` a namespace, `fields: [status.phase]`",
        }
    }

    fn rpc(self) -> &'static str {
        match self {
            Kind::Empty => "grpc.health.v1.Health/Check",
            Kind::Get | Kind::GetTyped => "informerd.v1.Cache/Get",
            Kind::ListNode
            | Kind::ListSelector
            | Kind::ListSelectorTyped
            | Kind::ListSelectorNone
            | Kind::ListNamespace => "informerd.v1.Cache/List",
        }
    }
}

/// What a caller needs; clones share the connection.
#[derive(Clone)]
struct Caller {
    api: CacheClient<Channel>,
    health: HealthClient<Channel>,
    layout: Arc<Layout>,
    /// Pods per node, by node number.
    per_node: Arc<Vec<usize>>,
}

impl Caller {
    /// One call; returns what it received: objects, bytes of object JSON, bytes of the
    /// encoded responses.
    async fn call(&mut self, kind: Kind, rng: &mut StdRng) -> Result<Received, String> {
        match kind {
            Kind::Empty => self.empty().await,
            Kind::Get | Kind::GetTyped => {
                let i = rng.random_range(0..self.layout.pods());
                self.get(i, kind == Kind::GetTyped).await
            }
            Kind::ListNode => {
                self.list_node(rng.random_range(0..self.per_node.len()))
                    .await
            }
            Kind::ListSelector | Kind::ListSelectorTyped => {
                let a = rng.random_range(0..self.layout.apps());
                self.list_selector(a, kind == Kind::ListSelectorTyped).await
            }
            Kind::ListSelectorNone => self.list_none().await,
            Kind::ListNamespace => {
                let k = rng.random_range(0..self.layout.namespaces.len());
                self.list_namespace(k).await
            }
        }
    }

    async fn empty(&mut self) -> Result<Received, String> {
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

    /// `Get` of pod `i` (without the labels map: `omit_labels`).
    async fn get(&mut self, i: usize, omit_labels: bool) -> Result<Received, String> {
        let name = &self.layout.names[i];
        let r = self
            .api
            .get(GetRequest {
                resource: RESOURCE.into(),
                namespace: self.layout.namespace_of(i).to_string(),
                name: name.clone(),
                omit_labels,
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
                others: 0,
            }),
            other => Err(format!("Get {name} returned {:?}", other.map(|o| o.name))),
        }
    }

    /// `List` of node `k`'s pods by the index.
    async fn list_node(&mut self, k: usize) -> Result<Received, String> {
        let req = ListRequest {
            resource: RESOURCE.into(),
            index: Some(IndexLookup {
                name: INDEX.into(),
                value: node_name(k),
            }),
            ..Default::default()
        };
        let got = self.list(req, |_| true).await?;
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

    /// `List` of app `a`'s pods by its label selector, in its namespace: exactly its pods
    /// (without the labels maps: `omit_labels`).
    async fn list_selector(&mut self, a: usize, omit_labels: bool) -> Result<Received, String> {
        let layout = self.layout.clone();
        let (ns, selector, count) = layout.app(a);
        let req = ListRequest {
            resource: RESOURCE.into(),
            namespace: ns.to_string(),
            label_selector: selector.clone(),
            omit_labels,
            ..Default::default()
        };
        let prefix = format!("{}-", app_name(a));
        let got = self.list(req, |name| name.starts_with(&prefix)).await?;
        if got.objects != count || got.others > 0 {
            return Err(format!(
                "List of {ns} by {selector} returned {} pods, {} of another app, not {count}",
                got.objects, got.others
            ));
        }
        Ok(got)
    }

    /// `List` of the first app's namespace by a value of the app label no pod has
    /// (`omit_labels`): the label index finds nothing, and the one message says so.
    async fn list_none(&mut self) -> Result<Received, String> {
        let layout = self.layout.clone();
        let (ns, _, _) = layout.app(0);
        let req = ListRequest {
            resource: RESOURCE.into(),
            namespace: ns.to_string(),
            label_selector: format!("{APP_LABEL}=none"),
            omit_labels: true,
            ..Default::default()
        };
        let got = self.list(req, |_| false).await?;
        if got.objects != 0 {
            return Err(format!(
                "List of {ns} by {APP_LABEL}=none returned {} pods, not 0",
                got.objects
            ));
        }
        Ok(got)
    }

    /// `List` of namespace `k`, masked.
    async fn list_namespace(&mut self, k: usize) -> Result<Received, String> {
        let req = ListRequest {
            resource: RESOURCE.into(),
            namespace: self.layout.namespaces[k].clone(),
            fields: vec!["status.phase".into()],
            ..Default::default()
        };
        let got = self.list(req, |_| true).await?;
        let expected = self.layout.range(k).len();
        if got.objects != expected {
            return Err(format!(
                "List of a namespace returned {} pods, not {expected}",
                got.objects,
            ));
        }
        Ok(got)
    }

    /// Reads a whole List; counts in `others` the objects whose name is not `wanted`.
    async fn list(
        &mut self,
        req: ListRequest,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Received, String> {
        let mut stream = self
            .api
            .list(req)
            .await
            .map_err(|s| status_text(&s))?
            .into_inner();
        let (mut got, mut last) = (Received::default(), false);
        while let Some(chunk) = stream.message().await.map_err(|s| status_text(&s))? {
            got.objects += chunk.objects.len();
            got.others += chunk.objects.iter().filter(|o| !wanted(&o.name)).count();
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
    /// Objects that are not what the call asked for.
    others: usize,
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
    for (i, &kind) in s.kinds.iter().enumerate() {
        run_slice(caller, kind, c, WARMUP, 7 + i as u64, server_pid, None).await;
    }
    let slice = Duration::from_secs_f64(s.seconds / SLICES as f64);
    let mut out: Vec<(Kind, Measured)> =
        s.kinds.iter().map(|&k| (k, Measured::default())).collect();
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
    namespaces: Vec<String>,
    /// Mean bytes of a cached pod's JSON (a `List` of the namespaces without a mask).
    object_bytes: f64,
    levels: Vec<(usize, Vec<(Kind, Measured)>)>,
    fanouts: Vec<Fanout>,
    load_before: String,
    load_after: String,
    memory: Memory,
    allocated_bytes: u64,
    resident_bytes: u64,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The sidecar's configuration: the pods of the layout's namespaces with the controller
/// profile, the index `node`, the label index when `label_index`; `/metrics` on `port`.
fn sidecar_config(layout: &Layout, label_index: bool, port: u16) -> SidecarConfig {
    let mut pods = pods_resource(&layout.namespaces, CONTROLLER_KEEP, CONTROLLER_DROP)
        .index(Index::path(INDEX, "spec.nodeName"));
    if label_index {
        pods = pods.index(Index::labels(LABEL_INDEX));
    }
    SidecarConfig::new()
        .resource(pods)
        .server(|s| s.metrics_port(port))
}

async fn bench(at: &InNamespace<'_>, s: &Settings) -> anyhow::Result<bool> {
    let layout = Arc::new(Layout::new(s.pods, at.namespaces));
    let t = Instant::now();
    create_pods(&at.pods.clone().into_client(), &layout)
        .await
        .context("create pods")?;
    eprintln!(
        "serving: {} pods on {} nodes in {} namespace(s) from {}, applied in {:.1} s",
        s.pods,
        layout.nodes,
        layout.namespaces.len(),
        at.ns,
        t.elapsed().as_secs_f64()
    );

    let port = free_port();
    let sidecar = Sidecar::start(
        BIN.as_ref(),
        at.cluster,
        &sidecar_config(&layout, true, port),
    )?;
    let mut run = measure(&sidecar, at, &layout, s, port)
        .await
        .inspect_err(|_| print_log_tail(&sidecar))?;
    let ok = run.ok();
    if !ok {
        print_log_tail(&sidecar);
    }
    drop(sidecar);
    eprintln!("serving: memory without the label index (a second sidecar)");
    let port = free_port();
    let config = sidecar_config(&layout, false, port);
    run.memory.without_index =
        memory::allocated_alone(BIN, at.cluster, &config, (port, RESOURCE, s.pods))
            .await
            .map_err(|e| format!("{e:#}"));
    println!("{}", run.markdown(s));
    let written = results::write_json("serving.json", &run.json(s))?;
    eprintln!("serving: wrote {written}");
    Ok(ok)
}

/// Waits until the sidecar is synced, healthy, and holds every pod with its status; the mean
/// bytes of a cached pod's JSON.
async fn wait_ready(
    api: &mut CacheClient<Channel>,
    health: &mut HealthClient<Channel>,
    layout: &Layout,
) -> anyhow::Result<f64> {
    memory::wait_holding(api, RESOURCE, layout.pods()).await?;
    let ready = async {
        loop {
            let serving = health
                .check(HealthCheckRequest::default())
                .await
                .is_ok_and(|r| r.get_ref().status == ServingStatus::Serving as i32);
            let (mut objects, mut running, mut bytes) = (0, 0, 0);
            for ns in &layout.namespaces {
                let chunks = list_namespace(api, RESOURCE, ns).await?;
                for o in chunks.iter().flat_map(|c| &c.objects) {
                    objects += 1;
                    bytes += o.json.len();
                    let phase = serde_json::from_slice::<Value>(&o.json)
                        .is_ok_and(|v| v["status"]["phase"] == "Running");
                    running += usize::from(phase);
                }
            }
            if serving && running == layout.pods() && objects == layout.pods() {
                return Ok::<_, anyhow::Error>(bytes as f64 / objects as f64);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    tokio::time::timeout(memory::HOLD_TIMEOUT, ready)
        .await
        .map_err(|_| anyhow!("the sidecar did not hold every pod, Running, in time"))?
}

async fn measure(
    sidecar: &Sidecar,
    at: &InNamespace<'_>,
    layout: &Arc<Layout>,
    s: &Settings,
    metrics: u16,
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
    let object_bytes = wait_ready(&mut api, &mut health, layout).await?;
    let memory = Memory {
        pods: layout.pods(),
        labels_per_pod: pods::labels_per_pod(),
        with_index: memory::allocated(metrics).await?,
        without_index: Err("not yet measured".into()),
    };
    let version = status(&mut api, RESOURCE).await?.version;

    let caller = Caller {
        api: api.clone(),
        health: health.clone(),
        layout: layout.clone(),
        per_node: Arc::new(layout.per_node()),
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
    let names = Arc::new(layout.names_in(0).to_vec());
    for (run, &w) in s.watchers.iter().enumerate() {
        let churn = s.churn(run);
        eprintln!(
            "serving: fan-out to {w} watcher(s), {} writes at {}/s",
            churn.writes, churn.rate
        );
        let f = fanout(&socket, at.ns, &mut api, at.pods, &names, (w, churn)).await?;
        fanouts.push(f);
    }
    Ok(Run {
        version,
        nodes: layout.nodes,
        namespaces: layout.namespaces.clone(),
        object_bytes,
        levels,
        fanouts,
        load_before,
        load_after: loadavg(),
        memory,
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

    /// A target's figures at one concurrency: `kind`'s p50 and p99 ÷ the empty call's.
    fn over_empty(kinds: &[(Kind, Measured)], kind: Kind) -> (f64, f64) {
        let (k, empty) = (Run::stats(kinds, kind), Run::empty(kinds));
        (ratio(k.p50, empty.p50), ratio(k.p99, empty.p99))
    }

    /// The report: the calls under load, then the fan-outs.
    fn markdown(&self, s: &Settings) -> String {
        join_sections([self.calls_markdown(s), self.fanouts_markdown(s)])
    }

    /// Where the pods are, for the report: `one namespace (NAME) of N pods` or `K namespaces
    /// of up to 5,000 pods (FIRST, ...)`.
    fn where_markdown(&self, s: &Settings) -> String {
        match self.namespaces.as_slice() {
            [ns] => format!("one namespace ({ns}) of {} pods", s.pods),
            namespaces => format!(
                "{} pods in {} namespaces of up to {PODS_PER_NAMESPACE} ({}, ...)",
                s.pods,
                namespaces.len(),
                namespaces[0]
            ),
        }
    }

    fn calls_markdown(&self, s: &Settings) -> Vec<String> {
        let mut out = Vec::<String>::new();
        out.push(format!(
            "### Serving: {} pods, `Get` and `List` over the Unix socket, 1 and {} callers on \
             one connection",
            s.pods, s.concurrency
        ));
        out.push(String::new());
        out.push(format!(
            "informerd {} ({} build, `cargo bench --bench serving`); {} on {} nodes, the \
             controller profile (keep {}; drop {}; cached pods {:.0} bytes of JSON on average), \
             index `{INDEX}` on spec.nodeName and the label index; apps of {PODS_PER_APP} pods \
             (the selector `{APP_LABEL}=svc-N`); every caller on one HTTP/2 connection, calling \
             back-to-back; each kind {} s in {SLICES} slices alternating with the others; {} \
             CPUs shared with the control plane; load average {} before, {} after.",
            self.version,
            profile(),
            self.where_markdown(s),
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
        out.extend(self.table_markdown());
        out.push(String::new());
        out.extend(self.target_markdown(Kind::Get, "`Get`"));
        out.extend(self.target_markdown(Kind::GetTyped, "`Get` as the typed clients make it"));
        let list = format!(
            "`List` by label selector ({PODS_PER_APP} pods of a namespace of {})",
            s.pods.min(PODS_PER_NAMESPACE)
        );
        out.extend(self.target_markdown(Kind::ListSelector, &list));
        out.extend(self.target_markdown(
            Kind::ListSelectorTyped,
            &format!("{list} as the typed clients make it (`omit_labels`)"),
        ));
        if self.measured(Kind::ListNode) && self.measured(Kind::ListNamespace) {
            out.push(self.per_object_markdown());
        }
        out.push(self.memory.markdown());
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

    /// The table of the calls: a row per kind and concurrency.
    fn table_markdown(&self) -> Vec<String> {
        let mut out = vec![
            "| callers | call | calls/s | p50 µs | p90 µs | p99 µs | max µs | p50 ÷ empty | \
             p99 ÷ empty | objects/call | KiB/call | sidecar CPU µs/call | errors |"
                .to_string(),
            "|---:|:--|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|".to_string(),
        ];
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
        out
    }

    /// Whether `kind` was measured.
    fn measured(&self, kind: Kind) -> bool {
        self.levels
            .iter()
            .any(|(_, kinds)| kinds.iter().any(|(k, _)| *k == kind))
    }

    /// The line of the target of `kind` (`what`), at each concurrency, if it was measured.
    fn target_markdown(&self, kind: Kind, what: &str) -> Option<String> {
        if !self.measured(kind) {
            return None;
        }
        let target: Vec<String> = self
            .levels
            .iter()
            .map(|(c, kinds)| {
                let (p50, p99) = Run::over_empty(kinds, kind);
                format!(
                    "{c} caller(s): p50 {p50:.2}× ({}), p99 {p99:.2}×",
                    if p50 <= TARGET { "met" } else { "**not met**" },
                )
            })
            .collect();
        Some(format!(
            "Target, {what} within {TARGET}× an empty call (p50): {}.",
            target.join("; ")
        ))
    }

    /// The line of the sidecar's CPU per listed object.
    fn per_object_markdown(&self) -> String {
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
        format!("Sidecar CPU per listed object: {}.", per_object.join("; "))
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
        json!({
            "benchmark": "serving",
            "ok": self.ok(),
            "informerd_version": self.version,
            "profile": profile(),
            "config": {
                "pods": s.pods,
                "namespaces": self.namespaces.len(),
                "pods_per_namespace_at_most": PODS_PER_NAMESPACE,
                "nodes": self.nodes,
                "pods_per_node": PODS_PER_NODE,
                "pods_per_app": PODS_PER_APP,
                "label_selector": format!("{APP_LABEL}=svc-N"),
                "transform": {"keep": CONTROLLER_KEEP, "drop": CONTROLLER_DROP},
                "index": {"name": INDEX, "path": "spec.nodeName"},
                "label_index": {"name": LABEL_INDEX, "labels": true},
                "cached_object_json_bytes_mean": self.object_bytes.round(),
                "concurrency_levels": s.levels(),
                "calls": s.kinds.iter().map(|k| k.key()).collect::<Vec<_>>(),
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
            "target_get_within_2x_empty": self.target_json(Kind::Get),
            "target_list_label_selector_within_2x_empty": self.target_json(Kind::ListSelector),
            "target_list_label_selector_typed_within_2x_empty":
                self.target_json(Kind::ListSelectorTyped),
            "serving": self.levels_json(),
            "sidecar_memory_holding_the_pods": self.memory.json(),
            "sidecar_memory_after_load": {
                "allocated_bytes": self.allocated_bytes,
                "resident_bytes": self.resident_bytes,
            },
            "fanout": self.fanouts_json(),
        })
    }

    /// A target's figures: `kind`'s p50 ÷ the empty call's, at each concurrency.
    fn target_json(&self, kind: Kind) -> Vec<Value> {
        if !self.measured(kind) {
            return Vec::new();
        }
        self.levels
            .iter()
            .map(|(c, kinds)| {
                let (p50, _) = Run::over_empty(kinds, kind);
                json!({
                    "callers": c,
                    "p50_ratio_to_empty": round(p50, 2),
                    "met": p50 <= TARGET,
                })
            })
            .collect()
    }

    fn levels_json(&self) -> Vec<Value> {
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
        self.levels
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
            .collect()
    }

    fn fanouts_json(&self) -> Vec<Value> {
        self.fanouts
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
            .collect()
    }
}
