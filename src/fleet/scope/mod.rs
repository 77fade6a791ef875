//! Running the streams of one resource: one per namespace scope (or one cluster-wide), and,
//! for a `namespaceSelector`, the stream of matching Namespaces that starts and stops them.

mod errors;
mod selector;
mod status;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt;
use kube::{
    discovery::ApiResource,
    runtime::{watcher, WatchStreamExt},
    Api, Client,
};
use tokio::task::JoinHandle;

use super::{
    ingest::{Progress, ScopeIngest},
    object::{with_transform, Projected},
    pipeline::Pipeline,
};
use errors::ScopeError;

pub(super) use selector::run_namespace_selector;
pub(super) use status::StatusBoard;
pub use status::{ScopeState, ScopeStatus};

/// Everything needed to start a stream of one resource.
#[derive(Clone)]
pub(super) struct StreamSpec {
    pub client: Client,
    pub api_resource: ApiResource,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub pipeline: Pipeline,
    pub status: StatusBoard,
    /// Bounds how many scopes run their initial list at once (shared by the whole fleet).
    pub initial_lists: Arc<tokio::sync::Semaphore>,
}

/// The label of the cluster-wide scope in status.
pub const ALL_NAMESPACES: &str = "*";
/// The label of a selector's namespace stream in status.
pub const NAMESPACE_SELECTOR: &str = "namespaceSelector";

/// Starts the stream of one scope: a namespace, or the whole cluster with `None`.
pub(super) fn spawn(spec: StreamSpec, namespace: Option<String>) -> JoinHandle<()> {
    let label = namespace
        .clone()
        .unwrap_or_else(|| ALL_NAMESPACES.to_string());
    spec.status.update(&label, |_| {});
    tokio::spawn(run_scope(spec, namespace, label))
}

/// Page size when the apiserver does not offer streaming lists: small, so that the start-up
/// peak stays close to the steady state.
const PAGE_SIZE: u32 = 100;

async fn run_scope(spec: StreamSpec, namespace: Option<String>, label: String) {
    let api: Api<Projected> = match &namespace {
        Some(ns) => Api::namespaced_with(spec.client.clone(), ns, &spec.api_resource),
        None => Api::all_with(spec.client.clone(), &spec.api_resource),
    };
    let mut ingest = ScopeIngest::new(spec.pipeline.clone(), namespace.clone());
    let mut streaming = true;
    // Held until this scope's first list completes or fails; see INITIAL_LISTS.
    let mut permit = spec.initial_lists.clone().acquire_owned().await.ok();
    let mut lists = 0u64;
    let mut synced_once = false;
    loop {
        let mut wc = watcher::Config::default();
        if let Some(l) = &spec.label_selector {
            wc = wc.labels(l);
        }
        if let Some(f) = &spec.field_selector {
            wc = wc.fields(f);
        }
        wc = if streaming {
            wc.streaming_lists()
        } else {
            wc.page_size(PAGE_SIZE)
        };
        let stream = watcher(api.clone(), wc).default_backoff().boxed();
        let stream = with_transform(stream, spec.pipeline.decoding().cloned());
        futures::pin_mut!(stream);
        let mut started = Instant::now();
        let mut last_log = Instant::now();
        let mut fall_back = false;
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    let progress = ingest.handle(event);
                    let counters = ingest.counters;
                    if progress == Progress::ListStarted && lists > 0 && !synced_once {
                        // The first list restarted without completing (kube-rs restarts a
                        // streaming list whose stream ends before the initial-events bookmark,
                        // without an error): stop holding up other scopes, and use paginated
                        // lists, which complete page by page.
                        drop(permit.take());
                        fall_back = streaming;
                    }
                    spec.status.update(&label, |s| {
                        s.changes = counters.changes;
                        s.filter_errors = counters.filter_errors;
                        match progress {
                            Progress::ListStarted => {
                                s.state = ScopeState::Listing;
                                if lists > 0 {
                                    s.relists += 1;
                                }
                            }
                            Progress::Listed => s.listed += 1,
                            Progress::Synced => {
                                s.state = ScopeState::Synced;
                                s.last_error = None;
                            }
                            // A watch event after an error: the watch resumed (kube-rs resumes
                            // from the last resourceVersion without a new list).
                            Progress::Watched if synced_once => {
                                s.state = ScopeState::Synced;
                                s.last_error = None;
                            }
                            Progress::Watched => {}
                        }
                    });
                    match progress {
                        Progress::ListStarted => {
                            lists += 1;
                            started = Instant::now();
                            last_log = started;
                        }
                        Progress::Listed if last_log.elapsed() >= Duration::from_secs(5) => {
                            last_log = Instant::now();
                            log_progress(&spec, &label, started, false);
                        }
                        Progress::Synced => {
                            synced_once = true;
                            drop(permit.take());
                            log_progress(&spec, &label, started, true);
                        }
                        _ => {}
                    }
                    if fall_back {
                        tracing::warn!(resource = %spec.api_resource.plural, scope = %label,
                            "the streaming list did not complete; using paginated lists");
                        break;
                    }
                }
                Err(err) => {
                    let error = ScopeError::new(&spec.api_resource, namespace.as_deref(), err);
                    if streaming && !synced_once && error.refuses_streaming_lists() {
                        tracing::warn!(resource = %spec.api_resource.plural, scope = %label, %error,
                            "the apiserver refuses streaming lists; using paginated lists");
                        fall_back = true;
                        break;
                    }
                    // A failing scope must not hold up the others' initial lists.
                    drop(permit.take());
                    let (mut state, message) = (error.state(), error.to_string());
                    if synced_once && state == ScopeState::Failing {
                        // A dropped connection after the sync: the watcher resumes from the
                        // last resourceVersion, and the cache keeps serving what it holds.
                        // Report the error, not a state the scope is not in.
                        state = ScopeState::Synced;
                    }
                    tracing::warn!(resource = %spec.api_resource.plural, scope = %label, %message, "watch error; retrying with backoff");
                    spec.status.update(&label, |s| {
                        s.state = state;
                        s.last_error = Some(message);
                    });
                }
            }
        }
        if !fall_back {
            return;
        }
        streaming = false;
    }
}

fn log_progress(spec: &StreamSpec, label: &str, started: Instant, done: bool) {
    let listed = spec.status.get(label).map(|s| s.listed).unwrap_or(0);
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let store_objects = spec.pipeline.store.len();
    if done {
        tracing::info!(resource = %spec.api_resource.plural, scope = %label, listed, store_objects,
            seconds = format!("{secs:.1}"), "scope synced");
    } else {
        tracing::info!(resource = %spec.api_resource.plural, scope = %label, listed, store_objects,
            per_second = format!("{:.0}", listed as f64 / secs), "initial sync in progress");
    }
}
