//! One served resource as the API sees it: its cache (read only), what requests may select on,
//! its watch hub, the stop signal, and its watcher counters. The RPCs, queries and watchers
//! reach all of these through the methods here, never through the fields.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch as signal;
use tokio::time::Instant;
use tonic::Status;

use super::reason::Reason;
use super::watch::Hub;
use crate::config::IndexConfig;
use crate::fleet::{ResourceCache, ScopeState};
use crate::proto;
use crate::store::Store;

/// One served resource: its cache, what requests may select on, and its watchers.
pub struct Resource {
    cache: Arc<ResourceCache>,
    indexes: Vec<IndexConfig>,
    hub: Hub,
    watchers: AtomicU64,
    dropped: AtomicU64,
    stop: signal::Receiver<bool>,
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
            dropped: AtomicU64::new(0),
            stop,
        }
    }

    /// The name clients use (`resources[].name` in the config).
    pub(super) fn name(&self) -> &str {
        &self.cache.name
    }

    /// The resource's store, read only.
    pub(super) fn store(&self) -> &Arc<Store> {
        &self.cache.store
    }

    pub(super) fn namespaced(&self) -> bool {
        self.cache.namespaced
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

    /// Counts a watcher ended because it fell behind.
    pub(super) fn count_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Fields a field selector may use: the names, and the fields of `path` indexes.
    pub(super) fn selectable_fields(&self) -> Vec<String> {
        let mut fields = vec!["metadata.name".to_string()];
        if self.cache.namespaced {
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
            let pending: Vec<String> = self
                .cache
                .scopes()
                .into_iter()
                .filter(|(_, s)| s.state != ScopeState::Synced)
                .map(|(scope, s)| match s.last_error {
                    Some(e) => format!("{scope}: {:?} ({e})", s.state),
                    None => format!("{scope}: {:?}", s.state),
                })
                .collect();
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
        let ar = &cache.api_resource;
        proto::ResourceStatus {
            name: cache.name.clone(),
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
            namespaced: cache.namespaced,
            synced: cache.is_synced(),
            epoch: cache.store.epoch(),
            revision: cache.store.revision(),
            objects: stats.objects as u64,
            encoded_bytes: stats.encoded_bytes as u64,
            interned_bytes: stats.interned_bytes as u64,
            log_entries: stats.log_entries as u64,
            log_bytes: stats.log_bytes as u64,
            watchers: self.watchers.load(Ordering::Relaxed),
            dropped_watches: self.dropped.load(Ordering::Relaxed),
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
