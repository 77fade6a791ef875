//! The serving benchmark's pods: how many go in each namespace, on which fake node, under which
//! Deployment-style app, what each looks like, and how they are written. A file of its own so
//! that `serving.rs` holds the calls it measures and the report.
//!
//! Layout. Pod `i` is in namespace `i / PODS_PER_NAMESPACE` (so 1,000 pods are one namespace
//! of 1,000, and 50,000 are ten of 5,000), of app `svc-{i / PODS_PER_APP}` (a Deployment of
//! `PODS_PER_APP` replicas, whose label selector picks them out of their namespace), bound to
//! node `i % nodes`, `PODS_PER_NODE` per node.

use anyhow::Context;
use informerd_testkit::Apply;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::{json, Value};

use crate::common::watch::SEQ_LABEL;

/// Pods bound to each fake node: what one node's `List` by index returns.
pub const PODS_PER_NODE: usize = 30;
/// Pods of each app: what a `List` by the app's label selector returns.
pub const PODS_PER_APP: usize = 5;
/// Pods of each namespace at most: the namespace a `List` by selector picks its few from.
pub const PODS_PER_NAMESPACE: usize = 5000;
/// The label whose value names a pod's app, and the selector's.
pub const APP_LABEL: &str = "app.kubernetes.io/instance";
/// Writes in flight while creating pods: the apiserver's latency, not its CPU, bounds a few.
const CREATE_CONCURRENCY: usize = 64;
/// The field managers of the pods' spec and status.
const MANAGER: &str = "informerd-bench";
const STATUS_MANAGER: &str = "informerd-bench-kubelet";

/// Where the pods are: their names, by index, and the namespaces they fill in order.
pub struct Layout {
    pub names: Vec<String>,
    pub namespaces: Vec<String>,
    pub nodes: usize,
}

impl Layout {
    /// `pods` pods over `namespaces` (at least `namespaces_for(pods)` of them; the rest stay
    /// empty).
    pub fn new(pods: usize, namespaces: &[String]) -> Layout {
        Layout {
            names: pod_names(pods),
            namespaces: namespaces[..namespaces_for(pods)].to_vec(),
            nodes: pods.div_ceil(PODS_PER_NODE),
        }
    }

    pub fn pods(&self) -> usize {
        self.names.len()
    }

    /// The namespace of pod `i`.
    pub fn namespace_of(&self, i: usize) -> &str {
        &self.namespaces[i / PODS_PER_NAMESPACE]
    }

    /// The indexes of the pods of namespace `k`.
    pub fn range(&self, k: usize) -> std::ops::Range<usize> {
        let start = k * PODS_PER_NAMESPACE;
        start..(start + PODS_PER_NAMESPACE).min(self.pods())
    }

    /// The names of the pods of namespace `k`.
    pub fn names_in(&self, k: usize) -> &[String] {
        &self.names[self.range(k)]
    }

    /// Pods per node, by node number.
    pub fn per_node(&self) -> Vec<usize> {
        let mut per_node = vec![0; self.nodes];
        for i in 0..self.pods() {
            per_node[node_of(i, self.nodes)] += 1;
        }
        per_node
    }

    pub fn apps(&self) -> usize {
        self.pods().div_ceil(PODS_PER_APP)
    }

    /// The namespace of app `a`, its label selector, and its pods' count.
    pub fn app(&self, a: usize) -> (&str, String, usize) {
        let first = a * PODS_PER_APP;
        let count = PODS_PER_APP.min(self.pods() - first);
        (
            self.namespace_of(first),
            format!("{APP_LABEL}={}", app_name(a)),
            count,
        )
    }
}

/// Namespaces `pods` pods fill.
pub fn namespaces_for(pods: usize) -> usize {
    pods.div_ceil(PODS_PER_NAMESPACE).max(1)
}

/// The pods' names, by index: Deployment-style, `svc-{app}-{template hash}-{i}`.
fn pod_names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let app = i / PODS_PER_APP;
            format!("{}-{}-{i:05}", app_name(app), template_hash(app))
        })
        .collect()
}

pub fn app_name(app: usize) -> String {
    format!("svc-{app}")
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

pub fn node_name(k: usize) -> String {
    format!("node-{k}")
}

/// The node of pod `i`.
fn node_of(i: usize, nodes: usize) -> usize {
    i % nodes
}

fn pod_manifest(i: usize, name: &str, nodes: usize) -> Value {
    let app = app_name(i / PODS_PER_APP);
    let hash = template_hash(i / PODS_PER_APP);
    let labels = json!({
        "app.kubernetes.io/component": "backend",
        APP_LABEL: app,
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

/// The labels of each pod: what each adds to the label index.
pub fn labels_per_pod() -> usize {
    pod_manifest(0, "pod", 1)["metadata"]["labels"]
        .as_object()
        .map_or(0, |l| l.len())
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
/// would write it), namespace by namespace, `CREATE_CONCURRENCY` at a time.
pub async fn create_pods(client: &kube::Client, layout: &Layout) -> anyhow::Result<()> {
    let apply = Apply::new()
        .manager(MANAGER)
        .concurrency(CREATE_CONCURRENCY);
    let status = apply.clone().manager(STATUS_MANAGER).status();
    for (k, ns) in layout.namespaces.iter().enumerate() {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let range = layout.range(k);
        let each = |f: fn(usize, &str, usize) -> Value| {
            range
                .clone()
                .map(move |i| f(i, &layout.names[i], layout.nodes))
        };
        apply
            .pods(&pods, each(pod_manifest))
            .await
            .with_context(|| format!("apply the pods of {ns}"))?;
        status
            .pods(&pods, each(pod_status))
            .await
            .with_context(|| format!("apply the status of the pods of {ns}"))?;
    }
    Ok(())
}
