//! Following watches of the sidecar: what each watcher received, and the sidecar's status.
//! Each benchmark checks the deliveries its own way (`check_watcher` in each).

use std::collections::HashMap;
use std::time::Instant;

use informerd::proto::{
    cache_client::CacheClient, EventType, StatusRequest, StatusResponse, WatchEvent,
};
use tokio::sync::watch;
use tonic::{transport::Channel, Streaming};

/// The label each benchmark write sets: the write's sequence number.
pub const SEQ_LABEL: &str = "bench-seq";

/// One received event (bookmarks are not kept).
#[derive(Debug, Clone, Copy)]
pub struct Delivery {
    pub revision: u64,
    /// The object's resourceVersion (0 when it is not a number).
    pub rv: u64,
    /// The value of [`SEQ_LABEL`], when it is a number.
    pub seq: Option<u64>,
    pub kind: i32,
    pub at: Instant,
}

#[derive(Debug)]
pub enum End {
    /// Reached the revision of the last write.
    Reached,
    /// The stream ended without a status.
    Closed,
    /// The stream ended with a status.
    Failed(tonic::Status),
    /// The benchmark stopped waiting (it dropped the target's sender).
    GaveUp,
}

pub struct Followed {
    pub deliveries: Vec<Delivery>,
    pub end: End,
    /// Kept open until the benchmark lets go of it (the sidecar counts open watches).
    pub stream: Streaming<WatchEvent>,
}

pub fn seq_of(labels: &HashMap<String, String>) -> Option<u64> {
    labels.get(SEQ_LABEL).and_then(|v| v.parse().ok())
}

/// Reads a watch until it reaches the target revision (sent once the writes are over).
pub async fn follow(
    mut stream: Streaming<WatchEvent>,
    mut target: watch::Receiver<u64>,
    capacity: usize,
) -> Followed {
    let mut deliveries = Vec::with_capacity(capacity);
    let mut last = 0;
    let end = loop {
        if last >= *target.borrow() {
            break End::Reached;
        }
        tokio::select! {
            m = stream.message() => match m {
                Ok(Some(e)) => {
                    let at = Instant::now();
                    if e.r#type == EventType::Bookmark as i32 {
                        continue;
                    }
                    let (rv, seq) = e
                        .object
                        .as_ref()
                        .map(|o| (o.resource_version.parse().unwrap_or(0), seq_of(&o.labels)))
                        .unwrap_or((0, None));
                    deliveries.push(Delivery { revision: e.revision, rv, seq, kind: e.r#type, at });
                    last = e.revision;
                }
                Ok(None) => break End::Closed,
                Err(s) => break End::Failed(s),
            },
            changed = target.changed() => if changed.is_err() { break End::GaveUp },
        }
    };
    Followed {
        deliveries,
        end,
        stream,
    }
}

/// The sidecar's status of one resource.
pub async fn status(
    api: &mut CacheClient<Channel>,
    resource: &str,
) -> anyhow::Result<StatusResponse> {
    Ok(api
        .status(StatusRequest {
            resource: resource.into(),
        })
        .await?
        .into_inner())
}
