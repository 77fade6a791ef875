//! The writes of the fan-out benchmarks: merge patches of the label [`SEQ_LABEL`] onto pods,
//! round-robin, at a steady rate; what they achieved; and the sidecar's revision once it holds
//! the last of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use informerd::proto::{cache_client::CacheClient, GetRequest};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::sync::Semaphore;
use tonic::transport::Channel;

use super::sidecar::status;
use super::stats::{micros, Stats};
use super::watch::SEQ_LABEL;

/// One write of a run.
pub struct Write {
    /// Its index in the run; the label carries `base + seq`.
    pub seq: u64,
    /// The pod it patched (an index into the names written to).
    pub pod: usize,
    pub sent: Instant,
    pub acked: Instant,
    /// The resourceVersion the apiserver returned, or why the write failed.
    pub rv: Result<u64, String>,
}

/// How a run writes.
#[derive(Debug, Clone, Copy)]
pub struct Churn {
    pub writes: u64,
    /// Writes per second.
    pub rate: f64,
    /// Writes in flight at most.
    pub in_flight: usize,
    /// The label's first value. Different in each run over the same pods: a patch that sets
    /// the value a pod already has changes nothing, and so makes no event.
    pub base: u64,
}

/// How many writes `seconds` at `rate` writes per second make (one at least).
pub fn writes_in(rate: f64, seconds: f64) -> u64 {
    (rate * seconds).round().max(1.0) as u64
}

/// Merge patches of [`SEQ_LABEL`] = `base + seq`, round-robin over the pods `names`, the n-th
/// sent at `start + n / rate` (or once a write in flight ends). Returns them in order.
pub async fn write_labels(
    pods: &Api<Pod>,
    names: &Arc<Vec<String>>,
    churn: Churn,
    start: Instant,
) -> Vec<Write> {
    let permits = Arc::new(Semaphore::new(churn.in_flight));
    let mut tasks = tokio::task::JoinSet::new();
    for seq in 0..churn.writes {
        tokio::time::sleep_until((start + Duration::from_secs_f64(seq as f64 / churn.rate)).into())
            .await;
        let permit = permits.clone().acquire_owned().await.expect("semaphore");
        let (pods, names) = (pods.clone(), names.clone());
        let pod = (seq % names.len() as u64) as usize;
        let value = (churn.base + seq).to_string();
        tasks.spawn(async move {
            let patch = json!({"metadata": {"labels": {SEQ_LABEL: value}}});
            let sent = Instant::now();
            let result = pods
                .patch(&names[pod], &PatchParams::default(), &Patch::Merge(patch))
                .await;
            let acked = Instant::now();
            drop(permit);
            let rv = result.map_err(|e| e.to_string()).and_then(|p| {
                let rv = p.metadata.resource_version.unwrap_or_default();
                rv.parse::<u64>()
                    .map_err(|_| format!("resourceVersion {rv:?} is not a number"))
            });
            Write {
                seq,
                pod,
                sent,
                acked,
                rv,
            }
        });
    }
    let mut writes: Vec<Write> = tasks.join_all().await;
    writes.sort_by_key(|w| w.seq);
    writes
}

/// The sidecar's revision of `resource` once it holds the last successful write (a `Get` with
/// that write's resourceVersion as its minimum waits for it), and that resourceVersion.
pub async fn revision_after(
    api: &mut CacheClient<Channel>,
    (resource, ns): (&str, &str),
    names: &[String],
    writes: &[Write],
) -> anyhow::Result<(u64, u64)> {
    let (rv, pod) = writes
        .iter()
        .filter_map(|w| w.rv.as_ref().ok().map(|rv| (*rv, w.pod)))
        .max()
        .ok_or_else(|| anyhow!("no write succeeded: {:?}", writes.first().map(|w| &w.rv)))?;
    let mut get = tonic::Request::new(GetRequest {
        resource: resource.into(),
        namespace: ns.into(),
        name: names[pod].clone(),
        min_resource_version: rv.to_string(),
        ..Default::default()
    });
    get.set_timeout(Duration::from_secs(120));
    api.get(get).await.context("Get of the last write")?;
    let target = status(api, resource)
        .await?
        .resources
        .first()
        .map_or(0, |r| r.revision);
    Ok((target, rv))
}

/// What a run's writes achieved.
pub struct Written {
    pub ok: usize,
    pub failed: usize,
    pub first_error: Option<String>,
    /// Writes per second over the churn.
    pub achieved_rate: f64,
    /// From the send of each successful write to the apiserver's answer.
    pub ack: Stats,
}

impl Written {
    /// The writes of a churn that lasted `secs`.
    pub fn of(writes: &[Write], secs: f64) -> Written {
        let ok: Vec<&Write> = writes.iter().filter(|w| w.rv.is_ok()).collect();
        Written {
            ok: ok.len(),
            failed: writes.len() - ok.len(),
            first_error: writes.iter().find_map(|w| w.rv.as_ref().err().cloned()),
            achieved_rate: writes.len() as f64 / secs.max(1e-9),
            ack: Stats::of(ok.iter().map(|w| micros(w.acked, w.sent)).collect()),
        }
    }

    /// The report's cell: the writes that succeeded, and those that failed if any
    /// (`1000 (+2 failed)`).
    pub fn cell(&self) -> String {
        if self.failed == 0 {
            self.ok.to_string()
        } else {
            format!("{} (+{} failed)", self.ok, self.failed)
        }
    }
}
