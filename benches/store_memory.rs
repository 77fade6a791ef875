//! Memory held per pod by `store::Store`, measured with jemalloc's own statistics, against a
//! plain `HashMap<String, serde_json::Value>` of the same objects.
//!
//! `cargo bench --bench store_memory` (pods: `INFORMERD_BENCH_PODS`, default 100000); the
//! figures also go to `benches/results/store_memory.json`.
//!
//! Pods are generated from the fixture pods (`shared/fixtures/pods`) the way a real cluster
//! varies them: 20 namespaces, 1000 nodes, a few hundred Deployments, StatefulSets and
//! DaemonSets plus one-pod Jobs, each pod with its own name, UID, resourceVersion, IPs,
//! timestamps and container IDs. Each profile projects them with plain serde_json code, then
//! they are applied one by one, so the generated input is never held: the figure is jemalloc's
//! `stats::allocated` after the inserts minus before, divided by the pod count. Figures are
//! printed, never asserted (targets: at most 300 bytes/pod for the controller profile).
//!
//! The controller profile is measured once more with the label index (`indexes: [{name:
//! labels, labels: true}]`, the product's own key extractor, `StringsExpr::labels`) beside the
//! index on spec.nodeName: the difference from the row without it is the label index's cost per
//! pod, also given per label (the generated pods carry 3 to 5 labels each).

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use common::env_or;
use informerd::filter::StringsExpr;
use informerd::store::{Indexer, StoreOptions, Writer};
use informerd::transform::Transform;
use informerd::vocab::memory::allocated_bytes;
use k8s_openapi::jiff::Timestamp;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const NAMESPACES: usize = 20;
const NODES: usize = 1000;
const DEPLOYMENTS: usize = 250;
const STATEFULSETS: usize = 20;
const DAEMONSETS: usize = 10;
/// Share of pods (per mille) that belong to their own Job.
const JOB_PODS_PER_MILLE: u32 = 20;
const LOG_MAX_EVENTS: usize = 10_000;
const LOG_MAX_BYTES: usize = 16 << 20;

// ---------------------------------------------------------------------------------------------
// Fixtures

fn fixture_pods() -> Vec<Value> {
    informerd_testkit::fixtures::pods()
        .into_iter()
        .map(|p| p.object)
        .collect()
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

/// Seconds since the epoch of a timestamp in whole seconds (`2026-01-01T00:00:00Z`, the form
/// of `metav1.Time`); `None` for anything else, fractions of a second included.
fn timestamp_secs(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 20 || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    Some(s.parse::<Timestamp>().ok()?.as_second())
}

/// `secs` since the epoch in the form [`timestamp_secs`] reads.
fn format_timestamp(secs: i64) -> String {
    Timestamp::from_second(secs)
        .expect("generated timestamps are in range")
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Generator

const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix(rng: &mut StdRng, n: usize) -> String {
    (0..n)
        .map(|_| SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())] as char)
        .collect()
}

/// A random-looking name suffix, different for every `i` below 27^5.
fn unique_suffix(i: usize) -> String {
    const SPACE: u64 = 27u64.pow(5);
    let mut n = (i as u64 * 7_368_787) % SPACE; // multiplier coprime with 27
    (0..5)
        .map(|_| {
            let c = SUFFIX_ALPHABET[(n % 27) as usize] as char;
            n /= 27;
            c
        })
        .collect()
}

fn random_uid(rng: &mut StdRng) -> String {
    let a: u128 = rng.random();
    let h = format!("{a:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

fn random_hex(rng: &mut StdRng, bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

/// A fixture pod used as the shape of a workload's pods.
struct Template {
    pod: Value,
    name: String,
    uid: String,
    node: Option<String>,
    pod_ip: Option<String>,
    host_ip: Option<String>,
    api_access_volume: Option<String>,
    created: i64,
}

impl Template {
    fn new(mut pod: Value) -> Self {
        if let Some(m) = pod["metadata"].as_object_mut() {
            m.remove("managedFields");
            m.remove("selfLink");
        }
        let name = str_at(&pod, &["metadata", "name"])
            .unwrap_or_default()
            .to_owned();
        let uid = str_at(&pod, &["metadata", "uid"])
            .unwrap_or_default()
            .to_owned();
        let node = str_at(&pod, &["spec", "nodeName"]).map(str::to_owned);
        let pod_ip = str_at(&pod, &["status", "podIP"]).map(str::to_owned);
        let host_ip = str_at(&pod, &["status", "hostIP"]).map(str::to_owned);
        let api_access_volume = pod["spec"]["volumes"].as_array().and_then(|vs| {
            vs.iter()
                .filter_map(|v| v["name"].as_str())
                .find(|n| n.starts_with("kube-api-access-") || n.starts_with("default-token-"))
                .map(str::to_owned)
        });
        let created = str_at(&pod, &["metadata", "creationTimestamp"])
            .and_then(timestamp_secs)
            .unwrap_or(1_780_000_000);
        Self {
            pod,
            name,
            uid,
            node,
            pod_ip,
            host_ip,
            api_access_volume,
            created,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // named after the owner kinds
enum WorkloadKind {
    ReplicaSet,
    StatefulSet,
    DaemonSet,
}

struct Workload {
    kind: WorkloadKind,
    namespace: usize,
    /// ReplicaSet name (Deployment name + pod-template-hash), StatefulSet or DaemonSet name.
    owner_name: String,
    owner_uid: String,
    labels: Map<String, Value>,
    template: usize,
}

struct Generator {
    rng: StdRng,
    namespaces: Vec<String>,
    nodes: Vec<String>,
    templates: Vec<Template>,
    workloads: Vec<Workload>,
    daemonsets: Vec<usize>,
    others: Vec<usize>,
    next_ordinal: Vec<usize>,
    resource_version: u64,
    now: i64,
    produced: usize,
}

impl Generator {
    fn new(fixtures: &[Value]) -> Self {
        let mut rng = StdRng::seed_from_u64(42);
        let templates: Vec<Template> = fixtures
            .iter()
            .filter(|p| p["kind"] == "Pod" && p["status"]["phase"] == "Running")
            .map(|p| Template::new(p.clone()))
            .collect();
        assert!(
            !templates.is_empty(),
            "no running fixture pod to use as a template"
        );
        let teams = [
            "payments",
            "checkout",
            "search",
            "catalog",
            "identity",
            "billing",
            "ledger",
            "notifications",
            "ingest",
            "analytics",
            "ml-serving",
            "frontend",
            "gateway",
            "monitoring",
            "logging",
            "kube-system",
            "cert-manager",
            "ingress-nginx",
            "storage",
            "batch",
        ];
        let namespaces: Vec<String> = teams
            .iter()
            .take(NAMESPACES)
            .map(|s| s.to_string())
            .collect();
        let nodes: Vec<String> = (0..NODES)
            .map(|i| {
                format!(
                    "ip-10-0-{}-{}.eu-west-1.compute.internal",
                    i / 250,
                    i % 250 + 4
                )
            })
            .collect();
        let words = [
            "api",
            "worker",
            "web",
            "cache",
            "db",
            "queue",
            "proxy",
            "sync",
            "indexer",
            "renderer",
            "auth",
            "scheduler",
            "collector",
            "exporter",
            "controller",
        ];
        let mut workloads = Vec::new();
        for i in 0..DAEMONSETS + STATEFULSETS + DEPLOYMENTS {
            let kind = if i < DAEMONSETS {
                WorkloadKind::DaemonSet
            } else if i < DAEMONSETS + STATEFULSETS {
                WorkloadKind::StatefulSet
            } else {
                WorkloadKind::ReplicaSet
            };
            let namespace = rng.random_range(0..namespaces.len());
            let base = format!("{}-{}-{i}", namespaces[namespace], words[i % words.len()]);
            let revision_hash = random_suffix(&mut rng, 10);
            let mut labels = Map::new();
            labels.insert("app.kubernetes.io/name".into(), json!(base));
            labels.insert(
                "app.kubernetes.io/part-of".into(),
                json!(namespaces[namespace]),
            );
            let owner_name = match kind {
                WorkloadKind::ReplicaSet => {
                    labels.insert("pod-template-hash".into(), json!(revision_hash));
                    format!("{base}-{revision_hash}")
                }
                WorkloadKind::StatefulSet => {
                    labels.insert(
                        "controller-revision-hash".into(),
                        json!(format!("{base}-{revision_hash}")),
                    );
                    base
                }
                WorkloadKind::DaemonSet => {
                    labels.insert("controller-revision-hash".into(), json!(revision_hash));
                    labels.insert("pod-template-generation".into(), json!("1"));
                    base
                }
            };
            workloads.push(Workload {
                kind,
                namespace,
                owner_name,
                owner_uid: random_uid(&mut rng),
                labels,
                template: rng.random_range(0..templates.len()),
            });
        }
        let daemonsets = (0..DAEMONSETS).collect();
        let others = (DAEMONSETS..workloads.len()).collect();
        let next_ordinal = vec![0; workloads.len()];
        Self {
            rng,
            namespaces,
            nodes,
            templates,
            workloads,
            daemonsets,
            others,
            next_ordinal,
            resource_version: 48_000_000,
            now: 1_781_500_000,
            produced: 0,
        }
    }

    /// The next pod, as the API server would return it (without managedFields).
    fn pod(&mut self) -> Value {
        let i = self.produced;
        self.produced += 1;
        let rng = &mut self.rng;
        self.resource_version += rng.random_range(1..40);
        let created = self.now - rng.random_range(60..30 * 86_400);
        let uid = random_uid(rng);

        // Owner: DaemonSet pods cover the nodes in turn; the rest mostly Deployments.
        let ds_pods = DAEMONSETS * NODES;
        let job = i >= ds_pods && rng.random_range(0..1000) < JOB_PODS_PER_MILLE;
        let (workload, node) = if i < ds_pods {
            (self.daemonsets[i % DAEMONSETS], i / DAEMONSETS)
        } else {
            (
                self.others[rng.random_range(0..self.others.len())],
                rng.random_range(0..NODES),
            )
        };
        let w = &self.workloads[workload];
        let t = &self.templates[if job { 0 } else { w.template }];
        let namespace = &self.namespaces[w.namespace];
        let mut labels = w.labels.clone();
        let (name, generate_name, owner) = if job {
            let job_name = format!("{namespace}-report-{}", 29_000_000 + i);
            let job_uid = random_uid(rng);
            labels = Map::new();
            for k in ["batch.kubernetes.io/controller-uid", "controller-uid"] {
                labels.insert(k.into(), json!(job_uid));
            }
            for k in ["batch.kubernetes.io/job-name", "job-name"] {
                labels.insert(k.into(), json!(job_name));
            }
            let generate = format!("{job_name}-");
            (
                format!("{generate}{}", unique_suffix(i)),
                Some(generate),
                json!({"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job_uid,
                       "controller": true, "blockOwnerDeletion": true}),
            )
        } else {
            let (api, kind) = match w.kind {
                WorkloadKind::ReplicaSet => ("apps/v1", "ReplicaSet"),
                WorkloadKind::StatefulSet => ("apps/v1", "StatefulSet"),
                WorkloadKind::DaemonSet => ("apps/v1", "DaemonSet"),
            };
            let owner = json!({"apiVersion": api, "kind": kind, "name": w.owner_name,
                               "uid": w.owner_uid, "controller": true, "blockOwnerDeletion": true});
            match w.kind {
                WorkloadKind::StatefulSet => {
                    let ordinal = self.next_ordinal[workload];
                    self.next_ordinal[workload] += 1;
                    let name = format!("{}-{ordinal}", w.owner_name);
                    labels.insert("statefulset.kubernetes.io/pod-name".into(), json!(name));
                    labels.insert(
                        "apps.kubernetes.io/pod-index".into(),
                        json!(ordinal.to_string()),
                    );
                    (name, None, owner)
                }
                _ => {
                    let generate = format!("{}-", w.owner_name);
                    (
                        format!("{generate}{}", unique_suffix(i)),
                        Some(generate),
                        owner,
                    )
                }
            }
        };
        let node_name = &self.nodes[node];
        let host_ip = format!("10.0.{}.{}", node / 250, node % 250 + 4);
        let pod_ip = format!(
            "10.{}.{}.{}",
            64 + node / 256,
            node % 256,
            rng.random_range(2..250)
        );

        let mut subst: HashMap<&str, String> = HashMap::new();
        subst.insert(&t.name, name.clone());
        subst.insert(&t.uid, uid);
        if let Some(n) = &t.node {
            subst.insert(n, node_name.clone());
        }
        if let Some(ip) = &t.pod_ip {
            subst.insert(ip, pod_ip);
        }
        if let Some(ip) = &t.host_ip {
            subst.insert(ip, host_ip);
        }
        if let Some(v) = &t.api_access_volume {
            subst.insert(v, format!("kube-api-access-{}", random_suffix(rng, 5)));
        }
        let mut pod = t.pod.clone();
        rewrite(&mut pod, &subst, created - t.created, rng);

        let meta = pod["metadata"].as_object_mut().expect("pods have metadata");
        meta.insert("namespace".into(), json!(namespace));
        meta.insert(
            "resourceVersion".into(),
            json!(self.resource_version.to_string()),
        );
        meta.insert("creationTimestamp".into(), json!(format_timestamp(created)));
        meta.insert("labels".into(), Value::Object(labels));
        meta.insert("ownerReferences".into(), json!([owner]));
        match generate_name {
            Some(g) => meta.insert("generateName".into(), json!(g)),
            None => meta.remove("generateName"),
        };
        pod
    }
}

/// Replaces the template's identity strings, shifts its timestamps to the new pod's creation
/// (plus a few seconds of jitter) and gives containers new IDs.
fn rewrite(v: &mut Value, subst: &HashMap<&str, String>, shift: i64, rng: &mut StdRng) {
    match v {
        Value::String(s) => {
            if let Some(new) = subst.get(s.as_str()) {
                *s = new.clone();
            } else if let Some(secs) = timestamp_secs(s) {
                *s = format_timestamp(secs + shift + rng.random_range(0..3));
            } else if let Some((scheme, id)) = s.split_once("://") {
                if id.len() == 64 && id.bytes().all(|c| c.is_ascii_hexdigit()) {
                    *s = format!("{scheme}://{}", random_hex(rng, 32));
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| rewrite(v, subst, shift, rng)),
        Value::Object(m) => m.values_mut().for_each(|v| rewrite(v, subst, shift, rng)),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Profiles

#[derive(Clone, Copy)]
enum Profile {
    Controller,
    MetadataOnly,
    Full,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Controller => "controller-profile",
            Profile::MetadataOnly => "metadata-only",
            Profile::Full => "full-without-managedFields",
        }
    }

    /// The profile as the product defines it: the same transforms a config would compile.
    fn transform(self) -> Transform {
        match self {
            Profile::Controller => Ok(Transform::controller()),
            Profile::MetadataOnly => Transform::new(&["metadata.managedFields"], &["metadata"]),
            Profile::Full => Transform::new(&["metadata.managedFields"], &[] as &[&str]),
        }
        .expect("valid profile")
    }
}

struct NodeIndex;

impl Indexer for NodeIndex {
    fn values(&self, object: &Value) -> Vec<String> {
        object["spec"]["nodeName"]
            .as_str()
            .map(|n| vec![n.to_owned()])
            .unwrap_or_default()
    }
}

/// The label index, as the sidecar builds it from `labels: true`.
struct LabelIndex(StringsExpr);

impl Indexer for LabelIndex {
    fn values(&self, object: &Value) -> Vec<String> {
        self.0.values(object)
    }
}

/// What one store held.
struct Held {
    /// Bytes per pod.
    per_pod: f64,
    /// Labels per pod (of the objects stored, after the transform).
    labels_per_pod: f64,
    detail: String,
}

/// The store's indexes: `node`, and the label index when `label_index`.
fn indexes(label_index: bool) -> Vec<(String, Arc<dyn Indexer>)> {
    let mut indexes = vec![("node".to_owned(), Arc::new(NodeIndex) as Arc<dyn Indexer>)];
    if label_index {
        let labels = Arc::new(LabelIndex(StringsExpr::labels())) as Arc<dyn Indexer>;
        indexes.push(("labels".to_owned(), labels));
    }
    indexes
}

fn measure_store(fixtures: &[Value], profile: Profile, label_index: bool, pods: usize) -> Held {
    let mut generator = Generator::new(fixtures);
    let options = StoreOptions {
        log_max_events: LOG_MAX_EVENTS,
        log_max_bytes: LOG_MAX_BYTES,
        indexes: indexes(label_index),
    };
    let transform = profile.transform();
    let before = allocated_bytes();
    let store = Writer::new(options);
    let start = Instant::now();
    let mut labels = 0;
    for _ in 0..pods {
        let mut object = generator.pod();
        transform.apply(&mut object);
        labels += object["metadata"]["labels"].as_object().map_or(0, Map::len);
        store.apply(object).expect("generated pods are valid");
    }
    let elapsed = start.elapsed();
    let held = allocated_bytes() - before;
    let s = store.stats();
    let detail = format!(
        "encoded {:.0} B/pod, {} atoms ({:.0} KiB), log {} entries, {:.2} µs/apply incl. generation",
        s.encoded_bytes as f64 / pods as f64,
        s.interned_strings,
        s.interned_bytes as f64 / 1024.0,
        s.log_entries,
        elapsed.as_secs_f64() * 1e6 / pods as f64,
    );
    assert_eq!(store.len(), pods, "generated pod keys are unique");
    drop(store);
    Held {
        per_pod: held as f64 / pods as f64,
        labels_per_pod: labels as f64 / pods as f64,
        detail,
    }
}

fn measure_value_map(fixtures: &[Value], profile: Profile, pods: usize) -> f64 {
    let mut generator = Generator::new(fixtures);
    let transform = profile.transform();
    let before = allocated_bytes();
    let mut map: HashMap<String, Value> = HashMap::new();
    for _ in 0..pods {
        let mut object = generator.pod();
        transform.apply(&mut object);
        let key = format!(
            "{}/{}",
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        map.insert(key, object);
    }
    let held = allocated_bytes() - before;
    drop(map);
    held as f64 / pods as f64
}

fn main() -> anyhow::Result<()> {
    let pods: usize = env_or("INFORMERD_BENCH_PODS", 100_000)?;
    let fixtures = fixture_pods();
    println!(
        "store memory: {pods} generated pods ({NAMESPACES} namespaces, {NODES} nodes, one index on \
         spec.nodeName, plus the label index where said, change log of {LOG_MAX_EVENTS} events / \
         {} MiB)",
        LOG_MAX_BYTES >> 20
    );
    let mut rows = vec![
        (Profile::Controller, false, pods),
        (Profile::Controller, true, pods),
        (Profile::MetadataOnly, false, pods),
        (Profile::Full, false, pods),
    ];
    if std::env::var_os("INFORMERD_BENCH_PODS").is_none() {
        rows.push((Profile::Controller, false, pods * 3 / 2));
    }
    // The controller profile's figure without the label index, at each pod count.
    let mut without_labels: HashMap<usize, f64> = HashMap::new();
    let mut results = Vec::new();
    for (profile, label_index, n) in rows {
        let held = measure_store(&fixtures, profile, label_index, n);
        let mut row = json!({
            "profile": profile.name(),
            "label_index": label_index,
            "pods": n,
            "bytes_per_pod": held.per_pod.round(),
            "labels_per_pod": (held.labels_per_pod * 10.0).round() / 10.0,
            "detail": held.detail,
        });
        if label_index {
            let index = without_labels.get(&n).map(|without| held.per_pod - without);
            row["label_index_bytes_per_pod"] = json!(index.map(f64::round));
            println!(
                "store {} + label index {n} pods: {:.0} bytes/pod; the label index {}",
                profile.name(),
                held.per_pod,
                match index {
                    Some(index) => format!(
                        "{index:.0} bytes/pod ({:.1} per label, {:.1} labels/pod)",
                        index / held.labels_per_pod.max(1.0),
                        held.labels_per_pod
                    ),
                    None => "not measured (no row without it)".to_string(),
                }
            );
        } else {
            if matches!(profile, Profile::Controller) {
                without_labels.insert(n, held.per_pod);
            }
            let baseline = measure_value_map(&fixtures, profile, n);
            row["value_map_bytes_per_pod"] = json!(baseline.round());
            println!(
                "store {} {n} pods: {:.0} bytes/pod (serde_json::Value map: {baseline:.0} bytes/pod)",
                profile.name(),
                held.per_pod
            );
        }
        println!("    {}", held.detail);
        results.push(row);
    }
    let written = common::results::write_json(
        "store_memory.json",
        &json!({
            "benchmark": "store_memory",
            "command": "cargo bench --bench store_memory",
            "profile": common::profile(),
            "pods": pods,
            "namespaces": NAMESPACES,
            "nodes": NODES,
            "change_log": {"max_events": LOG_MAX_EVENTS, "max_bytes": LOG_MAX_BYTES},
            "rows": results,
        }),
    )?;
    eprintln!("store memory: wrote {written}");
    Ok(())
}
