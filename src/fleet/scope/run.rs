//! The task of one scope: drives its stream (`stream`), hands its events to the ingest and
//! what came of them to the [`ScopeMachine`], and carries out the machine's answer (the permit,
//! the status, a restart with paginated lists) and the progress log.

use std::time::Instant;

use futures::StreamExt;
use kube::{api::WatchParams, runtime::watcher, Api, Resource as _};
use tokio::{sync::OwnedSemaphorePermit, task::JoinHandle};

use super::{
    super::{
        ingest::{Progress, ScopeIngest},
        object::{with_transform, Projected},
    },
    errors::ScopeError,
    progress::ProgressLog,
    retry::retry,
    state::{Actions, Input, ScopeMachine, StatusChange},
    status::ScopeState,
    stream::{scope_stream, Source, Step},
    StreamSpec, ALL_NAMESPACES,
};

/// Starts the stream of one scope: a namespace, or the whole cluster with `None`.
pub(in crate::fleet) fn spawn(spec: StreamSpec, namespace: Option<String>) -> JoinHandle<()> {
    let label = namespace
        .clone()
        .unwrap_or_else(|| ALL_NAMESPACES.to_string());
    let resume = spec.resume.get(&label).cloned();
    spec.status.update(&label, |s| {
        if resume.is_some() {
            s.state = ScopeState::SyncedFromSnapshot;
            s.resource_version.clone_from(&resume);
        }
    });
    tokio::spawn(run_scope(spec, namespace, label, resume))
}

async fn run_scope(
    spec: StreamSpec,
    namespace: Option<String>,
    label: String,
    mut resume: Option<String>,
) {
    let api: Api<Projected> = match &namespace {
        Some(ns) => Api::namespaced_with(spec.client.clone(), ns, &spec.api_resource),
        None => Api::all_with(spec.client.clone(), &spec.api_resource),
    };
    // Held until the machine releases it; see INITIAL_LISTS. A resumed scope does not list.
    let permit = match resume {
        Some(_) => None,
        None => spec.initial_lists.clone().acquire_owned().await.ok(),
    };
    let machine = match resume {
        Some(_) => ScopeMachine::resumed(),
        None => ScopeMachine::default(),
    };
    let mut scope = Scope {
        ingest: ScopeIngest::new(spec.pipeline.clone(), namespace.clone()),
        spec,
        namespace,
        label,
        machine,
        permit,
        reached: resume.clone(),
        resuming: resume.is_some(),
    };
    loop {
        // Decision: every scope starts in streaming mode, a resumed one too: the snapshot does
        // not record the mode (the apiserver may have changed across the restart), and a
        // resumed scope only watches, which every apiserver serves. When it needs a list (410
        // Gone), an apiserver that refuses streaming lists makes the machine switch to pages,
        // as on a cold start (`Lists::Paginated` then lists again, and resumes from that list).
        let source = Source {
            api: api.clone(),
            params: scope.watch_params(),
            shard: scope.spec.shard_selector.clone(),
            lists: scope.machine.lists(),
        };
        let stream = scope_stream(source, resume.take()).boxed();
        let stream = with_transform(
            retry(stream, scope.spec.healed.clone()).boxed(),
            scope.spec.pipeline.decoding().cloned(),
        );
        futures::pin_mut!(stream);
        let mut log = ProgressLog::new(Instant::now());
        let mut paginate = false;
        while let Some(item) = stream.next().await {
            paginate = match item {
                Ok(step) => scope.on_step(step, &mut log),
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
    /// The resourceVersion the stream has reached, as its status shows it (see
    /// [`Scope::on_step`]).
    reached: Option<String>,
    /// Started from a snapshot, and the watch has not been confirmed yet.
    resuming: bool,
}

impl Scope {
    /// The watch, with the resource's selectors (the pages' too) and kube-rs's watcher's
    /// defaults (bookmarks, a 290 s server-side timeout).
    fn watch_params(&self) -> WatchParams {
        let mut wp = WatchParams::default().timeout(290);
        if let Some(l) = &self.spec.label_selector {
            wp = wp.labels(l);
        }
        if let Some(f) = &self.spec.field_selector {
            wp = wp.fields(f);
        }
        wp
    }

    /// Handles one step of the stream, and follows the resourceVersion it has reached: the
    /// list's at its end, then each event's and bookmark's. Only what was applied counts, so
    /// that a snapshot never resumes past an event its store does not hold. True when the
    /// watcher must restart with paginated lists.
    fn on_step(&mut self, step: Step, log: &mut ProgressLog) -> bool {
        let (event, reached) = match step {
            Step::Event(event) => {
                let rv = match &event {
                    watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                        o.meta().resource_version.clone()
                    }
                    _ => None,
                };
                if matches!(event, watcher::Event::Init) {
                    self.resuming = false;
                    if self.reached.take().is_some() {
                        self.spec
                            .status
                            .update(&self.label, |s| s.resource_version = None);
                    }
                }
                // A watch event moves the position once it is known (from the list's end or
                // the snapshot); a list's objects do not, its end does.
                (Some(event), rv.filter(|_| self.reached.is_some()))
            }
            Step::InitDone(rv) => (Some(watcher::Event::InitDone), Some(rv)),
            Step::Reached(rv) => (None, self.reached.as_ref().map(|_| rv)),
            Step::Resumed => {
                let how = if self.resuming {
                    "watch resumed from the snapshot"
                } else {
                    "watch resumed after an error"
                };
                self.resuming = false;
                tracing::info!(resource = %self.spec.api_resource.plural, scope = %self.label, "{how}");
                self.spec
                    .status
                    .update(&self.label, |s| StatusChange::Serving.apply(s));
                (None, None)
            }
        };
        let paginate = event.is_some_and(|e| self.on_event(e, log));
        if let Some(rv) = reached.filter(|rv| self.reached.as_ref() != Some(rv)) {
            self.spec
                .status
                .update(&self.label, |s| s.resource_version = Some(rv.clone()));
            self.reached = Some(rv);
        }
        paginate
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
        let mut actions = self.machine.step(Input::Error(error));
        if let StatusChange::Error { state, .. } = &mut actions.status {
            // Not confirmed yet: still what the snapshot held, not a synced scope.
            if self.resuming && *state == ScopeState::Synced {
                *state = ScopeState::SyncedFromSnapshot;
            }
        }
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
