//! A `namespaceSelector`: the stream of Namespaces matching the selector, which starts a scope
//! stream for each namespace that matches (or is created) and stops it, removing its objects,
//! when the namespace stops matching (or is deleted).

use ahash::{AHashMap, AHashSet};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    discovery::ApiResource,
    runtime::{watcher, WatchStreamExt},
    Api,
};
use tokio::task::JoinHandle;

use super::{errors::ScopeError, run::spawn, status::ScopeState, StreamSpec, NAMESPACE_SELECTOR};

/// Watches the Namespaces that match `selector` and keeps one stream per matching namespace.
pub(in crate::fleet) async fn run_namespace_selector(spec: StreamSpec, selector: String) {
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
                let error = ScopeError::new(&ApiResource::erase::<Namespace>(&()), None, err);
                let (state, message) = (error.state(), error.to_string());
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
                if !spec.resume.is_empty() {
                    forget_unmatched(&spec, &seen);
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

/// Removes the objects of namespaces that no longer match: after a warm restart, the snapshot
/// may hold namespaces that stopped matching (or were deleted) while informerd was down, which
/// have no stream to stop.
fn forget_unmatched(spec: &StreamSpec, seen: &AHashSet<String>) {
    let store = &spec.pipeline.store;
    let mut removed = 0;
    for key in store.keys(None) {
        if key.namespace().is_some_and(|ns| !seen.contains(ns)) && store.delete(&key).is_some() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(resource = %spec.api_resource.plural, removed,
            "objects of namespaces that stopped matching the selector while informerd was down removed");
    }
}

/// A stream's task, aborted when its handle is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
