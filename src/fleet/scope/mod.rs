//! The streams of one resource: one per namespace scope (or one cluster-wide), and, for a
//! `namespaceSelector`, the stream of matching Namespaces that starts and stops them.
//!
//! Each file holds one part of a scope's life: `state` decides (a pure state machine), `stream`
//! is the watch (streaming lists, or `pages` for paginated ones; resumable from a snapshot's
//! resourceVersion, confirmed by `quiet`), `run` drives it and carries out the decisions, `status`
//! publishes them, `errors`
//! explains failures, `retry` paces the retries after them, `progress` logs lists, `selector` follows a namespaceSelector. This file
//! only names what a stream needs; it must not hold stream logic itself.

mod errors;
mod lines;
mod pages;
mod progress;
mod quiet;
mod retry;
mod run;
mod selector;
mod state;
mod status;
mod stream;

use std::{collections::BTreeMap, sync::Arc};

use kube::{discovery::ApiResource, Client};

use super::pipeline::Pipeline;

pub(super) use progress::ResourceProgress;
pub(super) use run::spawn;
pub(super) use selector::run_namespace_selector;
pub(super) use status::StatusBoard;
pub use status::{RelistReason, ScopeState, ScopeStatus};

/// Everything needed to start a stream of one resource.
#[derive(Clone)]
pub(super) struct StreamSpec {
    pub client: Client,
    /// Changes when the client's cluster answers again after it did not
    /// ([`super::clusters::Cluster::healed`]): a scope waiting to retry then retries.
    pub healed: tokio::sync::watch::Receiver<u64>,
    pub api_resource: ApiResource,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// The apiserver's `shardSelector` of every list and watch (the pipeline checks it too).
    pub shard_selector: Option<String>,
    pub pipeline: Pipeline,
    pub status: StatusBoard,
    /// Bounds how many scopes run their initial list at once (shared by the whole fleet).
    pub initial_lists: Arc<tokio::sync::Semaphore>,
    /// The resource's initial sync, logged for all its scopes together.
    pub progress: Arc<ResourceProgress>,
    /// The resourceVersion each scope (by label) resumes from after a warm restart; empty on
    /// a cold start.
    pub resume: Arc<BTreeMap<String, String>>,
}

/// The label of the cluster-wide scope in status.
pub const ALL_NAMESPACES: &str = "*";
/// The label of a selector's namespace stream in status.
pub const NAMESPACE_SELECTOR: &str = "namespaceSelector";
