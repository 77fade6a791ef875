//! The cache of one resource: compact, revisioned, indexed, with a change log to resume from.
//!
//! Objects arrive filtered and transformed, as JSON. [`Writer::apply`] upserts one by
//! `metadata.namespace`/`metadata.name`: each real change gets the next store revision and an
//! entry in a bounded change log ([`Store::changes_since`]); re-applying an identical object
//! changes nothing. Readers get [`StoredObject`] handles, decoded on demand.
//!
//! Memory per object is what this module is about. Objects are kept encoded (see `codec`):
//! everything objects have in common (keys, label sets, owner references, condition shapes...)
//! lives once in reference-counted atoms, and each object keeps only what is its own, in compact
//! binary forms — typically 60-100 bytes for a pod of the "controller" profile. The change log
//! keeps only the states the current objects no longer are, and an atom is freed as soon as
//! nothing, reader included, can name it any more.
//!
//! The parts, in the order a write goes through them: `writer` (apply and delete, as steps),
//! `codec` (the encoding, over `atoms` and `scalar`), `slots` (the current objects, found by
//! key), `index` (secondary indexes), `log` (the change log), `retired` (what readers still
//! hold), all behind the lock of `state`; atoms and slots keep their bytes in an `arena` and
//! find them through `ids` tables; `reader` is the read-only [`Store`], `pages` its snapshots
//! read a page at a time, and `object` the values it hands out. This file holds only the
//! public vocabulary: the options, the error and the re-exports. It must not hold logic of its
//! own, nor let the api write: the api gets the read-only [`Store`], the fleet the [`Writer`].

mod arena;
mod atoms;
mod batch;
mod breakdown;
mod codec;
mod ids;
mod index;
mod layout;
mod log;
mod object;
mod packed;
mod paged;
mod pages;
mod reader;
mod retired;
mod scalar;
mod short;
mod slots;
mod snapshot;
mod state;
#[cfg(test)]
mod tests;
mod version;
mod writer;

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

pub use batch::JsonBatch;
pub use breakdown::{AtomBreakdown, AtomKindStats};
pub(crate) use codec::Selection;
pub use object::{Change, ChangeKind, ObjectKey, StoredObject};
pub use pages::Pages;
pub use reader::{Store, StoreStats};
pub use snapshot::{layout, Restore, RestoreError, StoreImage};
pub use version::{at_least, is_older, newer};
pub use writer::Writer;

/// The default bound of the change log, in events. The log exists to resume watches after a
/// short disconnect (a client that falls further behind relists, as with the apiserver's own
/// watch cache); every entry costs about 110 bytes of its own even though it shares the
/// object's bytes, so 100,000 entries would cost more than the 100,000 pods they describe
/// (measured with informerd's `cargo bench --bench cache_memory`). 10,000 events cover 100
/// seconds of churn at 100 changes per second.
pub const DEFAULT_MAX_EVENTS: usize = 10_000;
/// The default bound of the change log, in bytes (64Mi).
pub const DEFAULT_MAX_BYTES: usize = 64 << 20;

/// An encoded object outside the slots' arena: a state only the change log holds, or a
/// reader's copy. (`triomphe`'s `Arc` has no weak count: 8 bytes less than `std`'s.)
type Blob = triomphe::Arc<[u8]>;

/// Computes the values under which an object is found in a secondary index.
///
/// Called for new objects before the store is locked, and for replaced or deleted ones while
/// it is locked for writing: it must not call back into the store.
pub trait Indexer: Send + Sync {
    /// The index values of `object` (none: the object is not in this index).
    fn values(&self, object: &Value) -> Vec<String>;
}

impl<F> Indexer for F
where
    F: Fn(&Value) -> Vec<String> + Send + Sync,
{
    fn values(&self, object: &Value) -> Vec<String> {
        self(object)
    }
}

/// How a [`Store`] is set up.
#[derive(Clone)]
pub struct StoreOptions {
    /// The change log keeps at most this many changes.
    pub log_max_events: usize,
    /// ... and at most about this many bytes: the log's own entries plus the encoded objects
    /// that only the log still holds (replaced or deleted states).
    pub log_max_bytes: usize,
    /// Secondary indexes, by name.
    pub indexes: Vec<(String, Arc<dyn Indexer>)>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            // Decision: one place for the change log's defaults, here beside what they bound;
            // the config re-exports them, as `changeLog`'s defaults, where an operator reads them.
            log_max_events: DEFAULT_MAX_EVENTS,
            log_max_bytes: DEFAULT_MAX_BYTES,
            indexes: Vec::new(),
        }
    }
}

impl StoreOptions {
    /// Adds a secondary index.
    pub fn with_index(mut self, name: impl Into<String>, indexer: impl Indexer + 'static) -> Self {
        self.indexes.push((name.into(), Arc::new(indexer)));
        self
    }
}

impl fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreOptions")
            .field("log_max_events", &self.log_max_events)
            .field("log_max_bytes", &self.log_max_bytes)
            .field(
                "indexes",
                &self.indexes.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Why the store refused an object or a read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// What was applied is not a JSON object.
    #[error("the object is not a JSON object; the store keeps Kubernetes objects")]
    NotAnObject,
    /// The object has no name.
    #[error("the object has no metadata.name (a non-empty string); every stored object needs one")]
    MissingName,
    /// The object's namespace is not a string.
    #[error("metadata.namespace of object {name:?} is not a string")]
    InvalidNamespace {
        /// The object's name.
        name: String,
    },
    /// The object nests deeper than the encoding allows.
    #[error(
        "object {key} nests more than {max} levels deep; drop the deep fields with a transform"
    )]
    TooDeep {
        /// The object's namespace/name.
        key: String,
        /// The deepest nesting stored.
        max: usize,
    },
    /// The object's encoded size is over the limit it was applied with
    /// (`limits.maxObjectSize`).
    #[error(
        "object {key} is {size} bytes encoded, larger than limits.maxObjectSize ({max}); raise \
         the limit, or drop its large fields with a transform"
    )]
    TooLarge {
        /// The object's namespace/name.
        key: String,
        /// Its encoded size: its encoding plus every string and shape it references.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// A read from a revision the change log no longer holds.
    #[error(
        "revision {requested} is no longer in the change log (it reaches back to revision \
         {oldest_available}); relist and watch from the list's revision"
    )]
    Expired {
        /// The revision asked for.
        requested: u64,
        /// The oldest revision the log can still give.
        oldest_available: u64,
    },
    /// A read from a revision this store has not reached (a token of another store).
    #[error(
        "revision {requested} is ahead of this cache (at revision {current}); the token comes \
         from another cache instance: relist"
    )]
    FutureRevision {
        /// The revision asked for.
        requested: u64,
        /// The store's revision.
        current: u64,
    },
    /// A lookup in an index that is not configured.
    #[error("there is no index named {name:?}; the configured indexes are: {known}")]
    UnknownIndex {
        /// The index asked for.
        name: String,
        /// The configured indexes, comma-separated.
        known: String,
    },
}
