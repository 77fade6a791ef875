//! What one configured resource does to each object before storing it: its filter, its
//! transform, and the store it writes to. Built in one place ([`Pipeline::new`]) for the fleet,
//! `informerd bench` and the ingest benchmark alike, so that what is measured is what runs.

use std::sync::Arc;

use super::secret_data::SecretData;
use crate::{
    config::{ChangeLogConfig, ResourceConfig},
    filter::{Filter, Shard, StringsExpr},
    store::{Indexer, StoreOptions, Writer},
    transform::Transform,
};

/// What one resource does to each object before storing it; cloned into each of its scopes,
/// which all write to the same store.
#[derive(Clone)]
pub struct Pipeline {
    /// `apiVersion` of the objects (they arrive without it from some list responses).
    pub api_version: String,
    /// `kind` of the objects.
    pub kind: String,
    /// The config's CEL filter: what is not kept is never stored.
    pub filter: Option<Filter>,
    /// The config's `shardSelector`: an object out of the shard is never stored, whether or not
    /// the apiserver applied it (see `ingest`).
    pub shard: Option<Shard>,
    /// The config's drop/keep paths, applied before storing.
    pub transform: Transform,
    /// The store every scope of the resource writes to.
    pub store: Arc<Writer>,
    /// `limits.maxObjectSize`: larger objects are not kept (`ingest/size.rs`).
    pub max_object_size: u64,
    /// Secrets: their values withheld unless kept, their hash annotated (`secret_data`).
    pub secret_data: SecretData,
}

impl Pipeline {
    /// The pipeline of one configured resource, with an empty store: its indexes, and the
    /// change log bounds of the configuration.
    pub fn new(change_log: &ChangeLogConfig, rc: &ResourceConfig) -> Pipeline {
        Self::with_store(rc, Writer::new(Self::store_options(change_log, rc)))
    }

    /// The options of the resource's store: its indexes, and the change log bounds.
    pub fn store_options(change_log: &ChangeLogConfig, rc: &ResourceConfig) -> StoreOptions {
        let indexes = rc
            .indexes
            .iter()
            .map(|ix| {
                (
                    ix.name.clone(),
                    Arc::new(ExprIndexer(ix.expr.clone())) as Arc<dyn Indexer>,
                )
            })
            .collect();
        StoreOptions {
            log_max_events: change_log.max_events,
            log_max_bytes: change_log.max_bytes,
            indexes,
        }
    }

    /// The pipeline of one configured resource writing to `store` (made with
    /// [`Pipeline::store_options`]; a warm restart's holds what the snapshot held).
    pub fn with_store(rc: &ResourceConfig, store: Writer) -> Pipeline {
        Pipeline {
            api_version: rc.api_version.clone(),
            kind: rc.kind.clone(),
            filter: rc.filter.clone(),
            // Validated with the configuration: a selector that does not parse never gets here.
            shard: rc
                .shard_selector
                .as_deref()
                .and_then(|s| Shard::parse(s).ok()),
            transform: rc.transform.clone(),
            store: Arc::new(store),
            max_object_size: crate::config::DEFAULT_MAX_OBJECT_SIZE,
            secret_data: SecretData::of(rc),
        }
    }

    /// The transform to decode objects with ([`super::object`]): none when a filter must see
    /// whole objects first, when Secrets' values must be hashed first, or when there is
    /// nothing to remove.
    pub fn decoding(&self) -> Option<&Transform> {
        (self.filter.is_none()
            && !self.secret_data.needs_whole_objects()
            && !self.transform.is_identity())
        .then_some(&self.transform)
    }
}

/// A configured secondary index, as the store sees it.
struct ExprIndexer(StringsExpr);

impl Indexer for ExprIndexer {
    fn values(&self, object: &serde_json::Value) -> Vec<String> {
        self.0.values(object)
    }
}
