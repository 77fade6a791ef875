//! Running the streams of one resource: one per namespace scope (or one cluster-wide), and,
//! for a `namespaceSelector`, the stream of matching Namespaces that starts and stops them.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use ahash::{AHashMap, AHashSet};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
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

/// Where a scope stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeState {
    /// Listing (initially, or again after 410 Gone or a reconnect).
    Listing,
    /// The list completed; the store mirrors the apiserver for this scope.
    Synced,
    /// The apiserver answered 403; retried with backoff.
    Forbidden,
    /// Another error (the resource vanished, the apiserver is unreachable); retried with backoff.
    Failing,
}

/// What a scope reports: state, counts and the last error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeStatus {
    pub state: ScopeState,
    /// Objects received by the lists (all of them, before the filter).
    pub listed: u64,
    /// Changes this scope made to the store.
    pub changes: u64,
    /// Objects on which the filter failed to evaluate (treated as not matching).
    pub filter_errors: u64,
    /// Lists after the first one.
    pub relists: u64,
    pub last_error: Option<String>,
}

impl Default for ScopeStatus {
    fn default() -> Self {
        ScopeStatus {
            state: ScopeState::Listing,
            listed: 0,
            changes: 0,
            filter_errors: 0,
            relists: 0,
            last_error: None,
        }
    }
}

/// The status of every scope of one resource, and whether all of them are synced (published on
/// a `watch` channel when it changes: see [`super::synced`]).
#[derive(Clone)]
pub(super) struct StatusBoard {
    scopes: Arc<Mutex<BTreeMap<String, ScopeStatus>>>,
    synced: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for StatusBoard {
    fn default() -> Self {
        StatusBoard {
            scopes: Arc::default(),
            synced: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }
}

impl StatusBoard {
    pub fn snapshot(&self) -> BTreeMap<String, ScopeStatus> {
        self.scopes.lock().expect("status poisoned").clone()
    }

    /// Whether every scope has completed its initial list, as last published.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Follows [`StatusBoard::is_synced`].
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<bool> {
        self.synced.subscribe()
    }

    fn update(&self, scope: &str, f: impl FnOnce(&mut ScopeStatus)) {
        let mut map = self.scopes.lock().expect("status poisoned");
        let entry = map.entry(scope.to_string());
        let added = matches!(entry, std::collections::btree_map::Entry::Vacant(_));
        let status = entry.or_default();
        let before = status.state;
        f(status);
        // Only a change of state (or of the set of scopes) can change "synced": the per-object
        // counters do not pay for the check.
        if added || status.state != before {
            self.publish(&map);
        }
    }

    fn remove(&self, scope: &str) {
        let mut map = self.scopes.lock().expect("status poisoned");
        if map.remove(scope).is_some() {
            self.publish(&map);
        }
    }

    /// Sends whether every scope is synced; called with the map locked, so that two updates
    /// cannot publish out of order.
    fn publish(&self, map: &BTreeMap<String, ScopeStatus>) {
        let synced = !map.is_empty() && map.values().all(|s| s.state == ScopeState::Synced);
        self.synced
            .send_if_modified(|old| std::mem::replace(old, synced) != synced);
    }
}

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
                    let code = status_code(&err);
                    if streaming && !synced_once && refuses_streaming_lists(&err) {
                        tracing::warn!(resource = %spec.api_resource.plural, scope = %label, error = %err,
                            "the apiserver refuses streaming lists; using paginated lists");
                        fall_back = true;
                        break;
                    }
                    // A failing scope must not hold up the others' initial lists.
                    drop(permit.take());
                    let (mut state, message) =
                        describe(&spec.api_resource, namespace.as_deref(), code, &err);
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

/// Whether the apiserver rejected the streaming list request itself (an apiserver without the
/// WatchList feature answers `sendInitialEvents` with 400/422), as opposed to any other 4xx.
fn refuses_streaming_lists(err: &watcher::Error) -> bool {
    match err {
        watcher::Error::WatchStartFailed(kube::Error::Api(s)) => {
            matches!(s.code, 400 | 422)
                && (s.message.contains("sendInitialEvents")
                    || s.message.contains("resourceVersionMatch"))
        }
        _ => false,
    }
}

fn log_progress(spec: &StreamSpec, label: &str, started: Instant, done: bool) {
    let listed = spec
        .status
        .snapshot()
        .get(label)
        .map(|s| s.listed)
        .unwrap_or(0);
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

fn status_code(err: &watcher::Error) -> Option<u16> {
    match err {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

/// The state and a message that says what to do about it.
fn describe(
    ar: &ApiResource,
    namespace: Option<&str>,
    code: Option<u16>,
    err: &watcher::Error,
) -> (ScopeState, String) {
    let group = if ar.group.is_empty() {
        "\"\" (core)"
    } else {
        &ar.group
    };
    match code {
        Some(403) => {
            let whom = match namespace {
                Some(ns) => format!("a Role and RoleBinding in namespace {ns}"),
                None => "a ClusterRole and ClusterRoleBinding".to_string(),
            };
            (
                ScopeState::Forbidden,
                format!(
                    "forbidden: grant list and watch on {} (apiGroup {group}) through {whom}: {err}",
                    ar.plural
                ),
            )
        }
        Some(404) => (
            ScopeState::Failing,
            format!(
                "{} {} is no longer served by the apiserver: {err}",
                ar.api_version, ar.kind
            ),
        ),
        _ => (ScopeState::Failing, err.to_string()),
    }
}

/// Watches the Namespaces that match `selector` and keeps one stream per matching namespace.
pub(super) async fn run_namespace_selector(spec: StreamSpec, selector: String) {
    let label = NAMESPACE_SELECTOR;
    spec.status.update(label, |_| {});
    let api: Api<Namespace> = Api::all(spec.client.clone());
    let wc = watcher::Config::default().labels(&selector);
    let stream = watcher(api, wc).default_backoff();
    futures::pin_mut!(stream);
    // Dropping the map (the selector task aborted by Fleet::shutdown) aborts every stream.
    let mut scopes: AHashMap<String, AbortOnDrop> = AHashMap::new();
    let mut listing: Option<AHashSet<String>> = None;
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(e) => e,
            Err(err) => {
                let (state, message) = describe(
                    &ApiResource::erase::<Namespace>(&()),
                    None,
                    status_code(&err),
                    &err,
                );
                tracing::warn!(resource = %spec.api_resource.plural, %message, "namespace selector not serving; retrying with backoff");
                spec.status.update(label, |s| {
                    s.state = state;
                    s.last_error = Some(message);
                });
                continue;
            }
        };
        match event {
            watcher::Event::Init => listing = Some(AHashSet::new()),
            watcher::Event::InitApply(ns) | watcher::Event::Apply(ns) => {
                let Some(name) = ns.metadata.name else {
                    continue;
                };
                if let Some(seen) = listing.as_mut() {
                    seen.insert(name.clone());
                }
                scopes.entry(name.clone()).or_insert_with(|| {
                    tracing::info!(resource = %spec.api_resource.plural, namespace = %name, "namespace matches the selector; starting its stream");
                    AbortOnDrop(spawn(spec.clone(), Some(name)))
                });
            }
            watcher::Event::InitDone => {
                let seen = listing.take().unwrap_or_default();
                let gone: Vec<String> = scopes
                    .keys()
                    .filter(|n| !seen.contains(*n))
                    .cloned()
                    .collect();
                for name in gone {
                    stop(&spec, &mut scopes, &name).await;
                }
                spec.status.update(label, |s| {
                    s.state = ScopeState::Synced;
                    s.last_error = None;
                });
            }
            watcher::Event::Delete(ns) => {
                if let Some(name) = ns.metadata.name {
                    stop(&spec, &mut scopes, &name).await;
                }
            }
        }
    }
}

/// Stops a namespace's stream and removes its objects: each becomes DELETED for subscribers.
async fn stop(spec: &StreamSpec, scopes: &mut AHashMap<String, AbortOnDrop>, namespace: &str) {
    let Some(mut task) = scopes.remove(namespace) else {
        return;
    };
    task.0.abort();
    let _ = (&mut task.0).await;
    let store = &spec.pipeline.store;
    let keys = store.keys(Some(namespace));
    let removed = keys.len();
    for key in keys {
        store.delete(&key);
    }
    spec.status.remove(namespace);
    tracing::info!(resource = %spec.api_resource.plural, namespace, removed,
        "namespace no longer matches the selector; stream stopped and its objects removed");
}

/// A stream's task, aborted when its handle is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
