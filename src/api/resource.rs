//! One served resource as the API sees it: its cache (read only), what requests may select on,
//! its watch hub, the stop signal, and its watcher counters. The RPCs, queries and watchers
//! reach all of these through the methods here, never through the fields.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch as signal;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tonic::Status;

use super::keys::KeyCounts;
use super::reason::Reason;
use super::watch::Hub;
use crate::config::IndexConfig;
use crate::fleet::ResourceCache;
use crate::proto;
use crate::store::Store;

/// One served resource: its cache, what requests may select on, and its watchers.
pub struct Resource {
    cache: Arc<ResourceCache>,
    indexes: Vec<IndexConfig>,
    hub: Hub,
    watchers: AtomicU64,
    /// Watch events put in the watchers' buffers, by `EventType` number.
    sent: [AtomicU64; EVENT_TYPES],
    /// Watchers ended, by why (see [`Resource::count_ended`]).
    ended: Mutex<BTreeMap<&'static str, u64>>,
    /// What its WatchKeys streams do.
    keys: Arc<KeyCounts>,
    /// Permits to hold a snapshot of the store (see [`SNAPSHOTS`]).
    snapshots: Arc<Semaphore>,
    stop: signal::Receiver<bool>,
}

/// How many streams of a resource may hold a snapshot of its objects at once: a Watch sending
/// its initial state (from the snapshot until SYNCED), and a large List. The others wait
/// their turn.
///
/// Decision: 4. A snapshot held a copy of every object it listed (about 400 bytes a pod in
/// the controller profile), so a storm of clients starting over at once held one each: 300
/// clients over 100,000 pods passed 10 GiB within a minute (issue 35, `make bench-storm`).
/// Four bound that to four snapshots, and still keep two cores busy: the initial states are
/// CPU-bound, so running all of them at once made none finish sooner. A client that stops
/// reading gives its permit back within the stall timeout (`api/send.rs`). Since issue 32 an
/// initial state reads its snapshot a page at a time (`initial.rs`: 4 bytes an object, and
/// one page), and the permits stay for the CPU; a key queue's resync, read at its client's
/// pace, takes none (`keys/consumer.rs`).
pub const SNAPSHOTS: usize = 4;

/// How many `EventType`s the proto has (the numbers 0..EVENT_TYPES).
const EVENT_TYPES: usize = proto::EventType::Synced as usize + 1;

/// Why a watcher ended when the client left: not a status, so not a proto `Reason`.
pub const CLIENT_CLOSED: &str = "ClientClosed";

/// What a resource's watchers did: for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchCounts {
    /// Watchers open now.
    pub watchers: u64,
    /// Events sent, by type name (`ADDED`, ..., `BOOKMARK`, `SYNCED`).
    pub sent: Vec<(&'static str, u64)>,
    /// Watchers ended, by reason name (the proto's `Reason`, or [`CLIENT_CLOSED`]).
    pub ended: Vec<(&'static str, u64)>,
}

impl Resource {
    /// Serves `cache` with its configured `indexes`; starts the resource's watch hub, which
    /// ends with `stop` (call from within a Tokio runtime).
    pub(super) fn start(
        cache: Arc<ResourceCache>,
        indexes: Vec<IndexConfig>,
        stop: signal::Receiver<bool>,
    ) -> Resource {
        Resource {
            hub: Hub::start(cache.store.clone(), stop.clone()),
            cache,
            indexes,
            watchers: AtomicU64::new(0),
            sent: Default::default(),
            // Decision: FellBehind is counted from 0 at start, so that its series exists
            // before the first fall: `increase()` (the alert on watchers falling behind, in
            // deploy/monitoring) sees the first one, instead of the series' first sample.
            ended: Mutex::new(BTreeMap::from([(Reason::FellBehind.as_str_name(), 0)])),
            keys: Arc::default(),
            snapshots: Arc::new(Semaphore::new(SNAPSHOTS)),
            stop,
        }
    }

    /// A permit to take and hold a snapshot of the store ([`SNAPSHOTS`]); waits for one.
    pub(super) async fn snapshot_permit(&self) -> OwnedSemaphorePermit {
        self.snapshots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// The name clients use (`resources[].name` in the config).
    pub(super) fn name(&self) -> &str {
        &self.cache.name
    }

    /// Its cluster: a name of `clusters`, or empty for the default cluster.
    pub(super) fn cluster(&self) -> &str {
        &self.cache.cluster
    }

    /// The resource's store, read only.
    pub(super) fn store(&self) -> &Arc<Store> {
        &self.cache.store
    }

    /// The resource as discovery resolved it (group, plural: what RBAC names).
    pub(super) fn api_resource(&self) -> &kube::discovery::ApiResource {
        self.cache.api_resource()
    }

    pub(super) fn namespaced(&self) -> bool {
        self.cache.namespaced()
    }

    /// Whether every scope has completed its initial list.
    pub(super) fn is_synced(&self) -> bool {
        self.cache.is_synced()
    }

    /// The configured indexes, in configuration order (queries refer to them by position).
    pub(super) fn indexes(&self) -> &[IndexConfig] {
        &self.indexes
    }

    /// The hub that broadcasts the store's changes to the watchers.
    pub(super) fn hub(&self) -> &Hub {
        &self.hub
    }

    /// Fires (changes to `true`) when the API stops: watches and lists end.
    pub(super) fn stopped(&self) -> signal::Receiver<bool> {
        self.stop.clone()
    }

    /// Counts a watcher in `watchers` while the returned guard lives, however it ends.
    pub(super) fn watching(self: &Arc<Self>) -> Watching {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        Watching(self.clone())
    }

    /// Counts an event put in a watcher's buffer.
    pub(super) fn count_sent(&self, kind: proto::EventType) {
        if let Some(counter) = self.sent.get(kind as usize) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a watcher that ended with `end` (`None`: the client left). A status without
    /// a reason (an internal error) counts under its gRPC code.
    pub(super) fn count_ended(&self, end: Option<&Status>) {
        let reason = match end {
            None => CLIENT_CLOSED,
            Some(status) => match Reason::of(status) {
                Some(reason) => reason.as_str_name(),
                None => crate::proto::code_name(status.code()),
            },
        };
        *self
            .ended
            .lock()
            .expect("ended poisoned")
            .entry(reason)
            .or_default() += 1;
    }

    /// The counters of this resource's WatchKeys streams.
    pub fn key_counts(&self) -> &Arc<KeyCounts> {
        &self.keys
    }

    /// What the watchers of this resource did so far.
    pub fn watch_counts(&self) -> WatchCounts {
        let sent = self
            .sent
            .iter()
            .enumerate()
            .skip(1) // EVENT_TYPE_UNSPECIFIED, never sent
            .filter_map(|(n, count)| {
                let kind = proto::EventType::try_from(n as i32).ok()?;
                Some((kind.as_str_name(), count.load(Ordering::Relaxed)))
            })
            .collect();
        let ended = self.ended.lock().expect("ended poisoned");
        WatchCounts {
            watchers: self.watchers.load(Ordering::Relaxed),
            sent,
            ended: ended.iter().map(|(r, n)| (*r, *n)).collect(),
        }
    }

    /// Fields a field selector may use: the names, and the fields of `path` indexes.
    pub(super) fn selectable_fields(&self) -> Vec<String> {
        let mut fields = vec!["metadata.name".to_string()];
        if self.cache.namespaced() {
            fields.push("metadata.namespace".into());
        }
        fields.extend(
            self.indexes
                .iter()
                .filter_map(|i| i.expr.as_path())
                .map(|p| p.as_str().to_string()),
        );
        fields
    }

    /// Waits until every scope has synced, or fails with `UNAVAILABLE` at `until`.
    pub(super) async fn wait_synced(&self, until: Instant) -> Result<(), Status> {
        let mut synced = self.cache.synced();
        let waited = tokio::time::timeout_at(until, synced.wait_for(|s| *s)).await;
        if !matches!(waited, Ok(Ok(_))) {
            let pending = self.cache.not_synced();
            return Err(Reason::NotSynced.status(format!(
                "{} has not synced yet ({}); retry, or call without wait_for_sync to read \
                 what is cached",
                self.cache.name,
                pending.join("; ")
            )));
        }
        Ok(())
    }

    /// The resource's part of the Status RPC.
    pub(super) fn status(&self) -> proto::ResourceStatus {
        let cache = &self.cache;
        let stats = cache.store.stats();
        let ar = cache.api_resource();
        proto::ResourceStatus {
            name: cache.name.clone(),
            cluster: crate::config::ClusterConfig::display(&cache.cluster).to_string(),
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
            namespaced: cache.namespaced(),
            synced: cache.is_synced(),
            epoch: cache.store.epoch(),
            revision: cache.store.revision(),
            objects: stats.objects as u64,
            encoded_bytes: stats.encoded_bytes as u64,
            interned_bytes: stats.interned_bytes as u64,
            log_entries: stats.log_entries as u64,
            log_bytes: stats.log_bytes as u64,
            watchers: self.watchers.load(Ordering::Relaxed),
            dropped_watches: self
                .ended
                .lock()
                .expect("ended poisoned")
                .get(Reason::FellBehind.as_str_name())
                .copied()
                .unwrap_or(0),
            scopes: cache
                .scopes()
                .into_iter()
                .map(|(scope, s)| proto::ScopeStatus {
                    scope,
                    state: format!("{:?}", s.state),
                    listed: s.listed,
                    changes: s.changes,
                    filter_errors: s.filter_errors,
                    relists: s.relists,
                    last_error: s.last_error.unwrap_or_default(),
                })
                .collect(),
            indexes: self
                .indexes
                .iter()
                .map(|i| proto::IndexStatus {
                    name: i.name.clone(),
                    indexes: match i.expr.as_path() {
                        Some(p) => p.as_str(),
                        None if i.expr.is_labels() => "labels",
                        None => "cel",
                    }
                    .to_string(),
                })
                .collect(),
        }
    }

    /// Waits until `ready`, asked now and after every change of the store with the store's
    /// revision, gives a value (or an error, returned at once); at `until`, fails with what
    /// `timed_out` says, and with `ShuttingDown` when the API stops.
    pub(super) async fn wait_for_store<T>(
        &self,
        until: Instant,
        mut ready: impl FnMut(u64) -> Result<Option<T>, Status>,
        timed_out: impl FnOnce() -> Status,
    ) -> Result<T, Status> {
        let mut revisions = self.store().subscribe();
        loop {
            let revision = *revisions.borrow_and_update();
            if let Some(value) = ready(revision)? {
                return Ok(value);
            }
            match tokio::time::timeout_at(until, revisions.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return Err(super::watch::shutting_down()),
                Err(_) => return Err(timed_out()),
            }
        }
    }
}

/// A watcher counted in its resource's `watchers` (see [`Resource::watching`]).
pub(super) struct Watching(Arc<Resource>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}
