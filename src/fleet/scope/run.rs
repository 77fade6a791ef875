//! The task of one scope: drives kube-rs's watcher, hands its events to the ingest and what
//! came of them to the [`ScopeMachine`], and carries out the machine's answer (the permit, the
//! status, a restart with paginated lists) and the progress log.

use std::time::Instant;

use futures::StreamExt;
use kube::{
    runtime::{watcher, WatchStreamExt},
    Api,
};
use tokio::{sync::OwnedSemaphorePermit, task::JoinHandle};

use super::{
    super::{
        ingest::{Progress, ScopeIngest},
        object::{with_transform, Projected},
    },
    errors::ScopeError,
    progress::ProgressLog,
    state::{Actions, Input, Lists, ScopeMachine},
    StreamSpec, ALL_NAMESPACES,
};

/// Page size when the apiserver does not offer streaming lists: small, so that the start-up
/// peak stays close to the steady state.
const PAGE_SIZE: u32 = 100;

/// Starts the stream of one scope: a namespace, or the whole cluster with `None`.
pub(in crate::fleet) fn spawn(spec: StreamSpec, namespace: Option<String>) -> JoinHandle<()> {
    let label = namespace
        .clone()
        .unwrap_or_else(|| ALL_NAMESPACES.to_string());
    spec.status.update(&label, |_| {});
    tokio::spawn(run_scope(spec, namespace, label))
}

async fn run_scope(spec: StreamSpec, namespace: Option<String>, label: String) {
    let api: Api<Projected> = match &namespace {
        Some(ns) => Api::namespaced_with(spec.client.clone(), ns, &spec.api_resource),
        None => Api::all_with(spec.client.clone(), &spec.api_resource),
    };
    // Held until the machine releases it; see INITIAL_LISTS.
    let permit = spec.initial_lists.clone().acquire_owned().await.ok();
    let mut scope = Scope {
        ingest: ScopeIngest::new(spec.pipeline.clone(), namespace.clone()),
        spec,
        namespace,
        label,
        machine: ScopeMachine::default(),
        permit,
    };
    loop {
        let config = scope.watcher_config();
        let stream = watcher(api.clone(), config).default_backoff().boxed();
        let stream = with_transform(stream, scope.spec.pipeline.decoding().cloned());
        futures::pin_mut!(stream);
        let mut log = ProgressLog::new(Instant::now());
        let mut paginate = false;
        while let Some(item) = stream.next().await {
            paginate = match item {
                Ok(event) => scope.on_event(event, &mut log),
                Err(err) => scope.on_error(err),
            };
            if paginate {
                break;
            }
        }
        if !paginate {
            return;
        }
    }
}

/// One scope's stream: what it feeds, and where it stands.
struct Scope {
    spec: StreamSpec,
    /// `None` for the cluster-wide stream.
    namespace: Option<String>,
    /// The scope's name in status.
    label: String,
    ingest: ScopeIngest,
    machine: ScopeMachine,
    permit: Option<OwnedSemaphorePermit>,
}

impl Scope {
    /// The watcher the machine's list mode asks for, with the resource's selectors.
    fn watcher_config(&self) -> watcher::Config {
        let mut wc = watcher::Config::default();
        if let Some(l) = &self.spec.label_selector {
            wc = wc.labels(l);
        }
        if let Some(f) = &self.spec.field_selector {
            wc = wc.fields(f);
        }
        match self.machine.lists() {
            Lists::Streaming => wc.streaming_lists(),
            Lists::Paginated => wc.page_size(PAGE_SIZE),
        }
    }

    /// Ingests one event; true when the watcher must restart with paginated lists.
    fn on_event(&mut self, event: watcher::Event<Projected>, log: &mut ProgressLog) -> bool {
        let progress = self.ingest.handle(event);
        let Actions {
            release_permit,
            paginate,
            status,
        } = self.machine.step(Input::Progress(progress));
        let counters = self.ingest.counters;
        self.release_permit(release_permit);
        self.spec.status.update(&self.label, |s| {
            if counters.received > s.received {
                s.last_event = Instant::now();
            }
            s.received = counters.received;
            s.changes = counters.changes;
            s.filtered_out = counters.filtered_out;
            s.filter_errors = counters.filter_errors;
            s.too_large = counters.too_large;
            status.apply(s);
        });
        self.log_progress(progress, log);
        if paginate {
            tracing::warn!(resource = %self.spec.api_resource.plural, scope = %self.label,
                "the streaming list did not complete; using paginated lists");
        }
        paginate
    }

    /// Reports one error of the watcher (which retries it with backoff); true when the watcher
    /// must restart with paginated lists.
    fn on_error(&mut self, err: watcher::Error) -> bool {
        let error = ScopeError::new(&self.spec.api_resource, self.namespace.as_deref(), err);
        let message = error.to_string();
        let actions = self.machine.step(Input::Error(error));
        if actions.paginate {
            tracing::warn!(resource = %self.spec.api_resource.plural, scope = %self.label,
                error = %message, "the apiserver refuses streaming lists; using paginated lists");
            return true;
        }
        self.release_permit(actions.release_permit);
        tracing::warn!(resource = %self.spec.api_resource.plural, scope = %self.label, %message,
            "watch error; retrying with backoff");
        self.spec
            .status
            .update(&self.label, |s| actions.status.apply(s));
        false
    }

    /// The resource's line while its initial sync runs; the scope's own after that.
    fn log_progress(&self, progress: Progress, log: &mut ProgressLog) {
        let now = Instant::now();
        let resource = &self.spec.progress;
        let scope_line = log.observe(progress, now);
        if let Some(line) = resource.observe(progress, self.spec.status.is_synced(), now) {
            resource.write(line, &self.spec);
        } else if let Some(line) = scope_line.filter(|_| resource.is_done()) {
            log.write(line, &self.spec, &self.label);
        }
    }

    fn release_permit(&mut self, release: bool) {
        if release {
            drop(self.permit.take());
        }
    }
}
