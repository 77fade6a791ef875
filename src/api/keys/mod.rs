//! WatchKeys: a level-triggered work queue of keys per stream, as a controller's workqueue is,
//! kept by the sidecar so that the controllers beside it do not each build one. The contract
//! (coalescing, debounce, in flight until acknowledged, resync, resume) is documented in the
//! proto, above `WatchKeysRequest`.
//!
//! - `spec`: a subscription, validated. `owner`: owner mapping through ownerReferences.
//! - `queue`: the keys pending or in flight, with debounce and the resume mark (pure).
//! - `consumer`: the task of one stream: hub → queue → client, acks → queue.
//! - `counts`: what the streams of a resource do, for metrics.
//!
//! Decision: the queue is fed from the resource's watch hub, like a Watch, but never waits on
//! the client: a slow consumer costs one entry per key (bounded by the objects), never the
//! events, so it is never ended with `FellBehind`. Where the hub's ring overflows, the missed
//! changes are read from the change log; when the log no longer holds them, a resync (every key
//! once, between RESYNC_START and RESYNC_END) replaces them: never a silent gap.
//!
//! What it must NOT do: keep anything per change for a stream (only per key), or send a key
//! again while it is in flight.

mod consumer;
mod counts;
mod owner;
mod queue;
mod spec;

use std::collections::{HashMap, VecDeque};

use tokio::sync::mpsc;
use tonic::{Request, Response, Status, Streaming};

use super::authz::Rpc;
use super::reason::{self, invalid};
use super::send::spawn_stream;
use super::service::DEFAULT_WAIT;
use super::Api;
use crate::config::Config;
use crate::proto::{self, watch_keys_request};
use crate::transform::Transform;
use consumer::Consumer;
use queue::Queue;
use spec::KeysSpec;

pub use counts::{KeyCounts, KeyCountsSnapshot};

/// The response stream of one WatchKeys call.
/// Decision: a WatchKeys stream holds a `limits.maxWatchers` slot like a Watch, since it costs
/// the sidecar as much (a hub subscription and a task).
pub type KeyStream = super::limits::Holding<proto::KeyEvent>;

/// Events buffered per stream, between the queue and the connection.
///
/// Decision: 64. Keys wait in the queue (coalescing), not in a buffer: a small buffer keeps
/// what a client has not read yet few, so that changes to them still merge.
pub const KEY_BUFFER: usize = 64;

/// What WatchKeys needs of the configuration: each resource's kind and transform.
pub struct Catalog {
    /// By (cluster, name).
    resources: HashMap<(String, String), (String, Transform)>,
}

impl Catalog {
    pub fn new(config: &Config) -> Catalog {
        Catalog {
            resources: config
                .resources
                .iter()
                .map(|r| {
                    let key = (r.cluster.clone(), r.name.clone());
                    (key, (r.kind.clone(), r.transform.clone()))
                })
                .collect(),
        }
    }
}

/// The WatchKeys call: reads the subscription (the first message), validates it, and starts the
/// stream's task.
pub async fn watch_keys(
    api: &Api,
    request: Request<Streaming<proto::WatchKeysRequest>>,
) -> Result<Response<KeyStream>, Status> {
    let caller = api.caller(request.metadata()).await?;
    let until = tokio::time::Instant::now() + reason::deadline(request.metadata(), DEFAULT_WAIT);
    let mut inbound = request.into_inner();
    let subscription = match inbound.message().await? {
        Some(proto::WatchKeysRequest {
            request: Some(watch_keys_request::Request::Subscribe(s)),
        }) => s,
        _ => {
            return Err(invalid(
                "subscribe",
                "the first message of a WatchKeys stream must subscribe (resource, filters, \
                 debounce, owner); acknowledgements come after",
            ))
        }
    };
    let resource = api.resource(&subscription.cluster, &subscription.resource)?;
    let key = (
        resource.cluster().to_string(),
        subscription.resource.clone(),
    );
    let (kind, transform) = api
        .inner
        .keys
        .resources
        .get(&key)
        .map(|(k, t)| (k.as_str(), t))
        // Decision: WatchKeys needs the resource's kind and transform from the configuration
        // (owner mapping checks what the transform keeps); an on-demand cache has none yet.
        .ok_or_else(|| {
            invalid(
                "subscribe.resource",
                format!(
                    "{} is an on-demand cache: WatchKeys serves the resources of the \
                     configuration only; list it under resources, or use Watch",
                    subscription.resource
                ),
            )
        })?;
    let spec = KeysSpec::new(&resource, (kind, transform), &subscription)?;
    // Keys name objects: a WatchKeys stream is authorized, and re-checked, as a Watch is.
    let namespace = (!subscription.namespace.is_empty()).then_some(subscription.namespace.as_str());
    let check = api
        .authorize(caller.as_ref(), Rpc::Watch, &resource, namespace, "")
        .await?;
    if subscription.wait_for_sync {
        resource.wait_synced(until).await?;
    }
    let slot = api.inner.limits.admit_watch()?;
    let hub = resource.hub().subscribe();
    let (tx, rx) = mpsc::channel(KEY_BUFFER);
    let gauge = counts::StreamGauge::open(resource.key_counts().clone());
    let mut consumer = Consumer {
        gauge,
        queue: Queue::new(spec.timing),
        resource,
        spec,
        tx,
        position: 0,
        control: VecDeque::new(),
        last_token: None,
        resync_reader: None,
    };
    let resource = consumer.resource.clone();
    let task = async move {
        consumer.start().await;
        consumer.run(hub, inbound).await.err().flatten()
    };
    let stream = spawn_stream(
        resource,
        tokio_stream::wrappers::ReceiverStream::new(rx),
        task,
        api.revoked(caller, check),
        "WatchKeys ended unexpectedly (see the sidecar's log); subscribe again with since = \
         the token of the last event you received",
    );
    let stream = super::limits::holding(stream, slot);
    Ok(Response::new(stream))
}
