//! The serving benchmark's memory figures: the sidecar's allocated bytes per cached pod, read
//! from its `/metrics` (`informerd_memory_allocated_bytes`, jemalloc's count) once it holds
//! every pod, with the label index (the sidecar whose calls are measured) and without it (a
//! second sidecar, started alone after the calls): the difference is what the label index
//! costs. A file of its own so that `serving.rs` holds the calls and their report.

use std::time::Duration;

use anyhow::anyhow;
use informerd::proto::cache_client::CacheClient;
use informerd_testkit::{connect, scrape_metrics, ControlPlane, Sidecar, SidecarConfig};
use serde_json::{json, Value};
use tonic::transport::Channel;

use crate::common::sidecar::status;

/// The gauge read.
pub const ALLOCATED: &str = "informerd_memory_allocated_bytes";
/// How long a sidecar may take to hold every pod.
pub const HOLD_TIMEOUT: Duration = Duration::from_secs(600);
/// Left between holding every pod and the reading, for what the initial list allocated
/// meanwhile (its pages, the objects decoded) to be freed.
const SETTLE: Duration = Duration::from_secs(2);

/// The memory figures of one run.
#[derive(Debug, Clone)]
pub struct Memory {
    pub pods: usize,
    /// Labels per pod: the label index's entries per pod.
    pub labels_per_pod: usize,
    /// Allocated bytes holding every pod, with the label index.
    pub with_index: u64,
    /// ... and without it (an error: the second sidecar's, which the report gives instead).
    pub without_index: Result<u64, String>,
}

impl Memory {
    fn per_pod(&self, bytes: u64) -> f64 {
        bytes as f64 / self.pods.max(1) as f64
    }

    /// Bytes per pod the label index adds.
    pub fn index_per_pod(&self) -> Option<f64> {
        self.without_index
            .as_ref()
            .ok()
            .map(|&w| (self.with_index as f64 - w as f64) / self.pods.max(1) as f64)
    }

    /// The report's paragraph.
    pub fn markdown(&self) -> String {
        let with = format!(
            "Sidecar memory once it holds the {} pods (`{ALLOCATED}`, before the calls): {:.1} \
             MiB allocated, {:.0} bytes per pod, with the label index",
            self.pods,
            self.with_index as f64 / (1 << 20) as f64,
            self.per_pod(self.with_index),
        );
        let without = match &self.without_index {
            Ok(without) => *without,
            Err(e) => return format!("{with}; the sidecar without it was not measured ({e})."),
        };
        let index = self.per_pod(self.with_index) - self.per_pod(without);
        format!(
            "{with}; without it (a second sidecar, same configuration) {:.1} MiB, {:.0} bytes \
             per pod: the label index costs {index:.0} bytes per pod ({:.1} per label, {} \
             labels per pod). The figures include the process's fixed allocations, which weigh \
             more per pod the fewer the pods.",
            without as f64 / (1 << 20) as f64,
            self.per_pod(without),
            index / self.labels_per_pod.max(1) as f64,
            self.labels_per_pod,
        )
    }

    pub fn json(&self) -> Value {
        let round1 = |x: f64| (x * 10.0).round() / 10.0;
        json!({
            "metric": ALLOCATED,
            "pods": self.pods,
            "labels_per_pod": self.labels_per_pod,
            "allocated_bytes_with_label_index": self.with_index,
            "allocated_bytes_per_pod_with_label_index": round1(self.per_pod(self.with_index)),
            "allocated_bytes_without_label_index": self.without_index.as_ref().ok(),
            "allocated_bytes_per_pod_without_label_index":
                self.without_index.as_ref().ok().map(|&w| round1(self.per_pod(w))),
            "error_without_label_index": self.without_index.as_ref().err(),
            "label_index_bytes_per_pod": self.index_per_pod().map(round1),
        })
    }
}

/// The allocated bytes of the sidecar whose `/metrics` is on `port`, after [`SETTLE`].
pub async fn allocated(port: u16) -> anyhow::Result<u64> {
    tokio::time::sleep(SETTLE).await;
    let samples = scrape_metrics(port).await?;
    if !samples.0.iter().any(|s| s.name == ALLOCATED) {
        return Err(anyhow!("no {ALLOCATED} in the sidecar's /metrics"));
    }
    Ok(samples.sum(ALLOCATED, &[]) as u64)
}

/// Waits until the sidecar has synced `resource` and holds `pods` objects of it.
pub async fn wait_holding(
    api: &mut CacheClient<Channel>,
    resource: &str,
    pods: usize,
) -> anyhow::Result<()> {
    let holding = async {
        loop {
            if let Ok(st) = status(api, resource).await {
                let objects = st.resources.first().map_or(0, |r| r.objects);
                if st.synced && objects == pods as u64 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(HOLD_TIMEOUT, holding)
        .await
        .map_err(|_| anyhow!("the sidecar did not hold the {pods} pods within {HOLD_TIMEOUT:?}"))
}

/// A sidecar of `config` (whose metrics are on `port`) started alone: its allocated bytes
/// once it holds the `pods` pods of `resource`; stopped after.
pub async fn allocated_alone(
    bin: &str,
    cluster: &ControlPlane,
    config: &SidecarConfig,
    (port, resource, pods): (u16, &str, usize),
) -> anyhow::Result<u64> {
    let sidecar = Sidecar::start(bin.as_ref(), cluster, config)?;
    let mut api = connect(&sidecar).await?;
    wait_holding(&mut api, resource, pods).await?;
    allocated(port).await
}
