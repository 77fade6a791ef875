//! One watch stream's events, through filter and transform, into the store.
//!
//! Every object, those of the initial list included, is filtered first and transformed second,
//! before anything is kept. An object that stops matching the filter is removed from the store
//! (subscribers see DELETED); one that starts matching is added.
//!
//! A (re)list is level-based: the objects a scope lists are compared with what that scope held,
//! and only real differences become changes. Unchanged objects produce nothing, objects that
//! vanished while the stream was down become DELETED, and other scopes are never touched.
//!
//! An object larger than `limits.maxObjectSize` is not kept (`size`): it is treated as one
//! that left the filter, and counted.
//!
//! A DELETED carries the resourceVersion of the change that removed the object, as the
//! apiserver's own watch does: the deletion's for a real deletion, the relabel's for an object
//! that leaves the filter. Decision: for an object that vanished while the stream was down,
//! the list's resourceVersion is what an apiserver's reflector-based cache knows; kube-runtime's
//! watcher does not hand it over, so the scope uses the newest resourceVersion among the
//! objects the list delivered (a lower bound of the list's), and never one older than the
//! object's own (see `store::version`).

use ahash::AHashSet;
use kube::{runtime::watcher, Resource as _};
use serde_json::Value;

use super::{
    object::{Decoded, Projected},
    pipeline::Pipeline,
    secret_data::SecretData,
};

use crate::store::{newer, ObjectKey, StoreError};

/// Counters a scope reports in its status.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// Object events received from the apiserver (listed, added, modified, deleted).
    pub received: u64,
    /// Changes made to the store.
    pub changes: u64,
    /// Objects the CEL filter or the shard selector did not keep (evaluation errors included),
    /// every time one arrives.
    pub filtered_out: u64,
    /// Filter evaluations that failed (each also counted in `filtered_out`).
    pub filter_errors: u64,
    /// Objects the store refused (see [`crate::store::StoreError`]).
    pub refused: u64,
    /// Objects larger than `limits.maxObjectSize`, not kept (see `size`), every time one
    /// arrives.
    pub too_large: u64,
}

/// The state of one scope's stream between events: which keys the current (re)list has seen.
pub struct ScopeIngest {
    pipeline: Pipeline,
    /// The namespace this scope covers; `None` for a cluster-wide stream.
    namespace: Option<String>,
    /// `Some` while an initial list or relist is in progress.
    listing: Option<Listing>,
    /// What this scope did so far.
    pub counters: Applied,
    /// Whether the warning of an object out of the shard was logged (see `in_shard`).
    warned_shard: bool,
}

/// What the list in progress has delivered so far.
struct Listing {
    /// The keys of the objects it listed that the store holds; `None` when the scope held
    /// nothing as the list began, so that nothing can have vanished.
    ///
    /// Decision: not kept for a scope's first list into an empty store. A key set of every
    /// object listed (its name's string and the set's slot, about 100 bytes an object) was
    /// informerd's largest allocation during the NVSentinel profile's sync (18 MiB at 150,000
    /// objects, on top of the 25 it keeps), all of it to delete nothing. A relist, or a list
    /// after a warm restart, still keeps it.
    seen: Option<AHashSet<ObjectKey>>,
    /// The newest resourceVersion among its objects (see the module's decision).
    newest: Option<String>,
}

impl Listing {
    /// A list that starts now; `track` when it must keep the keys it sees.
    fn new(track: bool) -> Self {
        Listing {
            seen: track.then(AHashSet::default),
            newest: None,
        }
    }
}

/// What happened to the scope on one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A list started (initial, or a relist after 410 Gone or a reconnect).
    ListStarted,
    /// One object of a list was handled.
    Listed,
    /// The list completed: the scope now mirrors the apiserver.
    Synced,
    /// A watch event after the list was handled.
    Watched,
}

impl ScopeIngest {
    /// The ingest of one scope: `namespace`, or the whole cluster with `None`.
    pub fn new(pipeline: Pipeline, namespace: Option<String>) -> Self {
        ScopeIngest {
            pipeline,
            namespace,
            listing: None,
            counters: Applied::default(),
            warned_shard: false,
        }
    }

    /// Handles one event of a kube-rs watcher.
    pub fn handle(&mut self, event: watcher::Event<Projected>) -> Progress {
        match event {
            watcher::Event::Init => {
                let held = self.pipeline.store.holds_any(self.namespace.as_deref());
                self.listing = Some(Listing::new(held));
                Progress::ListStarted
            }
            watcher::Event::InitApply(obj) => {
                self.counters.received += 1;
                let rv = obj.meta().resource_version.clone();
                let key = self.upsert(obj);
                if let Some(listing) = self.listing.as_mut() {
                    if newer(rv.as_deref(), listing.newest.as_deref()) == rv.as_deref() {
                        listing.newest = rv;
                    }
                    if let Some(seen) = listing.seen.as_mut() {
                        seen.extend(key);
                    }
                }
                Progress::Listed
            }
            watcher::Event::InitDone => {
                // Without a listing (no Init, which kube's watcher always sends first), every
                // object of the scope is one the list did not deliver.
                let listing = self.listing.take().unwrap_or_else(|| Listing::new(true));
                let (Some(seen), at) = (&listing.seen, listing.newest.as_deref()) else {
                    return Progress::Synced;
                };
                for key in self.pipeline.store.keys(self.namespace.as_deref()) {
                    if !seen.contains(&key) && self.pipeline.store.delete_at(&key, at).is_some() {
                        self.counters.changes += 1;
                    }
                }
                Progress::Synced
            }
            watcher::Event::Apply(obj) => {
                self.counters.received += 1;
                self.upsert(obj);
                Progress::Watched
            }
            watcher::Event::Delete(obj) => {
                self.counters.received += 1;
                if let Some(key) = key_of(&obj) {
                    let at = obj.meta().resource_version.as_deref();
                    if self.pipeline.store.delete_at(&key, at).is_some() {
                        self.counters.changes += 1;
                    }
                }
                Progress::Watched
            }
        }
    }

    /// Filters, transforms and stores one object; returns its key when the store holds it.
    fn upsert(&mut self, obj: Projected) -> Option<ObjectKey> {
        let key = key_of(&obj)?;
        let rv = obj.meta().resource_version.clone();
        if !self.in_shard(&obj) {
            self.counters.filtered_out += 1;
            return self.not_kept(key, rv.as_deref());
        }
        let transformed = obj.transformed;
        let stored = match obj.object {
            // Decoded with the transform applied and no filter to see it first (see
            // `Pipeline::decoding`): straight from the tape into the store.
            Decoded::Tape(mut tape)
                if self.pipeline.filter.is_none()
                    && !self.pipeline.secret_data.needs_whole_objects() =>
            {
                tape.set_root_strings(&[
                    ("apiVersion", &self.pipeline.api_version),
                    ("kind", &self.pipeline.kind),
                ]);
                let stored = self
                    .pipeline
                    .store
                    .apply_tape_within(&tape, self.pipeline.max_object_size);
                // Decoded into again by the next line (see `vocab::tape::pool`).
                tape.recycle();
                stored
            }
            object => {
                let mut value = object.into_json();
                self.set_type(&mut value);
                if !self.keep(&key, &value) {
                    self.counters.filtered_out += 1;
                    return self.not_kept(key, rv.as_deref());
                }
                let hash = self.pipeline.secret_data.take(&mut value);
                if !transformed {
                    self.pipeline.transform.apply(&mut value);
                }
                if let Some(hash) = hash {
                    SecretData::annotate(&mut value, hash);
                }
                self.pipeline
                    .store
                    .apply_within(value, self.pipeline.max_object_size)
            }
        };
        match stored {
            Ok(Some(_)) => self.counters.changes += 1,
            Ok(None) => {}
            Err(StoreError::TooLarge { size, .. }) => {
                self.too_large(&key, size);
                return self.not_kept(key, rv.as_deref());
            }
            Err(e) => {
                // Serving the previous version as if it were current would be a lie: drop it,
                // as a relist would.
                tracing::warn!(object = %key, error = %e, "object not stored");
                self.counters.refused += 1;
                return self.not_kept(key, rv.as_deref());
            }
        }
        Some(key)
    }

    /// List items carry no apiVersion/kind while watch events do: set both so the stored JSON
    /// does not depend on how the object arrived.
    fn set_type(&self, value: &mut Value) {
        if let Value::Object(map) = value {
            map.insert(
                "apiVersion".into(),
                Value::String(self.pipeline.api_version.clone()),
            );
            map.insert("kind".into(), Value::String(self.pipeline.kind.clone()));
        }
    }

    /// Whether the object is in the resource's shard (no shard: every object is).
    ///
    /// Decision: checked here although the list and watch ask the apiserver for the shard. An
    /// apiserver without the ShardedListAndWatch gate ignores the parameter it does not know and
    /// sends every object; checked here, the store holds exactly the shard either way, and the
    /// first object out of it says, once, that the apiserver sends more than it needs to.
    fn in_shard(&mut self, obj: &Projected) -> bool {
        let Some(shard) = &self.pipeline.shard else {
            return true;
        };
        let meta = obj.meta();
        if shard.contains_meta(meta.namespace.as_deref(), meta.uid.as_deref()) {
            return true;
        }
        if !self.warned_shard {
            self.warned_shard = true;
            tracing::warn!(kind = %self.pipeline.kind, namespace = ?self.namespace,
                "the apiserver sent an object out of the configured shardSelector: it does not \
                 apply shardSelector (turn on its ShardedListAndWatch feature gate); informerd \
                 drops the other shards' objects itself, after receiving them");
        }
        false
    }

    /// Whether the filter keeps `value` (no filter keeps everything).
    fn keep(&mut self, key: &ObjectKey, value: &Value) -> bool {
        let Some(filter) = &self.pipeline.filter else {
            return true;
        };
        match filter.matches(value) {
            Ok(m) => m,
            Err(e) => {
                // Kubernetes treats a CEL evaluation error as "does not match"; count it so
                // that a filter that errors on every object is visible in status.
                self.counters.filter_errors += 1;
                tracing::debug!(object = %key, error = %e, "filter evaluation error; object not kept");
                false
            }
        }
    }

    /// An object that is not kept (out of the filter, too large, refused by the store): the
    /// version stored, if any, is removed (DELETED at `resource_version`), unless it is newer
    /// (a lagging apiserver's old state does not take an object out of view). Returns the key
    /// when the store still holds the object.
    fn not_kept(&mut self, key: ObjectKey, resource_version: Option<&str>) -> Option<ObjectKey> {
        if self.stored_is_newer(&key, resource_version) {
            return Some(key);
        }
        if self
            .pipeline
            .store
            .delete_at(&key, resource_version)
            .is_some()
        {
            self.counters.changes += 1;
        }
        None
    }

    /// Whether the store holds a newer version of `key` than `resource_version`.
    fn stored_is_newer(&self, key: &ObjectKey, resource_version: Option<&str>) -> bool {
        self.pipeline.store.get(key).is_some_and(|stored| {
            crate::store::is_older(resource_version, Some(stored.resource_version()))
        })
    }
}

fn key_of(obj: &Projected) -> Option<ObjectKey> {
    let meta = obj.meta();
    Some(ObjectKey::new(
        meta.namespace.as_deref(),
        meta.name.as_deref()?,
    ))
}

mod size;

#[cfg(test)]
mod tests;
