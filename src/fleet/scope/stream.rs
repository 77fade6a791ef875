//! A scope's watch stream, in both list modes, which can start from a resourceVersion (a warm
//! restart from a snapshot) and says which resourceVersion it has reached.
//!
//! Decision: our own stream rather than kube-rs's `watcher`. The watcher always starts with a
//! list and never tells which resourceVersion it has reached (the list's, the bookmarks'), and
//! a snapshot needs both: the bookmark resourceVersion is what lets a quiet namespace resume
//! after a restart instead of relisting (its newest object may be older than the apiserver's
//! watch cache reaches). The states and their errors are kube-rs's (same `watcher::Event`s and
//! `watcher::Error`s, so the scope's machine and backoff do not change): a streaming list
//! (`sendInitialEvents`) up to the initial-events-end bookmark, or a paginated list
//! ([`super::pages`]) up to its last page, then the watch from the list's resourceVersion,
//! resumed from the last resourceVersion reached when it ends, and a new list (in the same
//! mode) on 410 Gone.

use std::time::Instant;

use futures::{Stream, StreamExt};
use kube::{
    api::{WatchEvent, WatchParams},
    runtime::watcher,
    Api, Resource as _,
};

use super::{
    super::object::Projected,
    lines::{self, Events},
    pages::{self, Pages},
    quiet::{QuietWindow, TICK},
    state::Lists,
};

/// The annotation of the bookmark that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// What the stream hands the scope.
// Decision: unboxed, as kube-rs's own watcher events are: nearly every item is an `Event`, and
// boxing it would allocate once more per object.
#[allow(clippy::large_enum_variant)]
pub(super) enum Step {
    /// A watcher event, as kube-rs's watcher gives it.
    Event(watcher::Event<Projected>),
    /// The initial events ended at this resourceVersion (the list's): ingest `InitDone`,
    /// then the scope has reached it.
    InitDone(String),
    /// The apiserver says the stream has reached this resourceVersion (a bookmark).
    Reached(String),
    /// The watch from the snapshot's resourceVersion was accepted: the scope mirrors the
    /// apiserver again once it has applied what follows.
    Resumed,
}

pub(super) enum State {
    /// Start a list, in the stream's mode.
    Empty,
    /// Receiving a streaming list's initial events.
    InitialWatch(Events),
    /// Receiving a paginated list's pages.
    Pages(Pages),
    /// Watch from a resourceVersion; `confirm` while it is the snapshot's, or after a watch
    /// that could not start (its error set the scope's state: the confirmation sets it back).
    Resume {
        rv: String,
        confirm: bool,
    },
    /// A watch resumed from a snapshot's resourceVersion, until its first event (or
    /// the quiet window of `quiet` without one) confirms it.
    Confirming {
        rv: String,
        events: Events,
    },
    Watching {
        rv: String,
        events: Events,
    },
}

/// What a scope's stream asks the apiserver for: its objects, which, and how it lists them.
pub(super) struct Source {
    pub api: Api<Projected>,
    /// The watch's selectors, timeout and bookmarks (the lists' selectors too).
    pub params: WatchParams,
    /// The apiserver's `shardSelector` of the lists and watches, if any.
    pub shard: Option<String>,
    pub lists: Lists,
}

/// The stream of a scope: from `resume` (a snapshot's resourceVersion), or a list in the
/// source's mode.
pub(super) fn scope_stream(
    source: Source,
    resume: Option<String>,
) -> impl Stream<Item = Result<Step, watcher::Error>> + Send {
    let state = match resume {
        Some(rv) => State::Resume { rv, confirm: true },
        None => State::Empty,
    };
    futures::stream::unfold((source, state), |(source, mut state)| async move {
        loop {
            let (item, next) = step(&source, state).await;
            state = next;
            if let Some(item) = item {
                return Some((item, (source, state)));
            }
        }
    })
}

/// What one transition yields, if anything, and the state it leaves.
pub(super) type Next = (Option<Result<Step, watcher::Error>>, State);

/// One transition; `None` when it yields nothing (a bookmark mid-list, a reconnect).
async fn step(source: &Source, state: State) -> Next {
    let Source {
        api,
        params,
        shard,
        lists,
    } = source;
    let shard = shard.as_deref();
    match state {
        State::Empty if *lists == Lists::Paginated => (
            Some(Ok(Step::Event(watcher::Event::Init))),
            State::Pages(Pages::first()),
        ),
        State::Pages(list) => pages::next(api, params, shard, list).await,
        State::Empty => {
            let initial = WatchParams {
                send_initial_events: true,
                ..params.clone()
            };
            // Decision: resourceVersion "" (a consistent read: the apiserver's watch cache
            // first catches up with etcd), as client-go's reflector asks, not kube-rs's "0"
            // (any state the watch cache holds). With "0" an object written just before the
            // list could be missing from the initial events and arrive after SYNCED as a new
            // ADDED: "synced" would not mean "holds what was written before it started".
            match lines::watch(api, &initial, shard, "").await {
                Ok(events) => (
                    Some(Ok(Step::Event(watcher::Event::Init))),
                    State::InitialWatch(events.boxed()),
                ),
                Err(e) => (Some(Err(watcher::Error::WatchStartFailed(e))), State::Empty),
            }
        }
        State::InitialWatch(events) => initial_events(events).await,
        State::Resume { rv, confirm } => match lines::watch(api, params, shard, &rv).await {
            Ok(events) if confirm => (
                None,
                State::Confirming {
                    rv,
                    events: events.boxed(),
                },
            ),
            Ok(events) => (
                None,
                State::Watching {
                    rv,
                    events: events.boxed(),
                },
            ),
            Err(e) => {
                // 410 Gone as the answer itself (rather than as the first event): list again.
                let next = if matches!(&e, kube::Error::Api(s) if s.code == 410) {
                    State::Empty
                } else {
                    // Decision: confirmed once it starts again. The error (Forbidden while a
                    // RoleBinding is missing, say) marked the scope; a resumed watch that then
                    // sees no change would otherwise leave it marked, and unready, for ever.
                    State::Resume { rv, confirm: true }
                };
                (Some(Err(watcher::Error::WatchStartFailed(e))), next)
            }
        },
        State::Confirming { rv, events } => confirm(rv, events).await,
        State::Watching { rv, events } => watching(rv, events).await,
    }
}

/// The next of a streaming list's initial events.
async fn initial_events(mut events: Events) -> Next {
    match events.next().await {
        Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => (
            Some(Ok(Step::Event(watcher::Event::InitApply(o)))),
            State::InitialWatch(events),
        ),
        // Kubernetes sends none during the initial events.
        Some(Ok(WatchEvent::Deleted(_))) => (None, State::InitialWatch(events)),
        Some(Ok(WatchEvent::Bookmark(bm))) => {
            if bm.metadata.annotations.contains_key(INITIAL_EVENTS_END) {
                let rv = bm.metadata.resource_version;
                let step = Step::InitDone(rv.clone());
                (Some(Ok(step)), State::Watching { rv, events })
            } else {
                (None, State::InitialWatch(events))
            }
        }
        Some(Ok(WatchEvent::Error(status))) => watch_error(status, State::InitialWatch(events)),
        Some(Err(e)) => (
            Some(Err(watcher::Error::WatchFailed(e))),
            State::InitialWatch(events),
        ),
        // As kube-rs does: the list starts again (the scope's machine paginates then).
        None => (None, State::Empty),
    }
}

/// Waits for the first sign that a watch from a snapshot's resourceVersion was accepted: its
/// first event, or a quiet window (see `quiet`).
async fn confirm(rv: String, mut events: Events) -> Next {
    let mut window = QuietWindow::default();
    let first = loop {
        let started = Instant::now();
        match tokio::time::timeout(TICK, events.next()).await {
            Ok(first) => break first,
            Err(_) if window.tick(started.elapsed()) => {
                // Quiet: accepted, and nothing changed meanwhile.
                return (Some(Ok(Step::Resumed)), State::Watching { rv, events });
            }
            Err(_) => {}
        }
    };
    match first {
        Some(Ok(WatchEvent::Error(status))) => {
            watch_error(status, State::Confirming { rv, events })
        }
        Some(Err(e)) => (
            Some(Err(watcher::Error::WatchFailed(e))),
            State::Resume { rv, confirm: true },
        ),
        None => (None, State::Resume { rv, confirm: true }),
        // Anything else confirms the watch; the event itself is handled as the watch's.
        Some(Ok(event)) => {
            let pending = futures::stream::once(async move { Ok(event) });
            let events = pending.chain(events).boxed();
            (Some(Ok(Step::Resumed)), State::Watching { rv, events })
        }
    }
}

/// The next event of a watch.
async fn watching(rv: String, mut events: Events) -> Next {
    match events.next().await {
        Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
            object_event(o, events, watcher::Event::Apply)
        }
        Some(Ok(WatchEvent::Deleted(o))) => object_event(o, events, watcher::Event::Delete),
        Some(Ok(WatchEvent::Bookmark(bm))) => {
            let rv = bm.metadata.resource_version;
            let step = Step::Reached(rv.clone());
            (Some(Ok(step)), State::Watching { rv, events })
        }
        Some(Ok(WatchEvent::Error(status))) => watch_error(status, State::Watching { rv, events }),
        Some(Err(e)) => (
            Some(Err(watcher::Error::WatchFailed(e))),
            State::Watching { rv, events },
        ),
        None => (None, State::Resume { rv, confirm: false }),
    }
}

/// An object's event while watching: the stream has reached its resourceVersion.
fn object_event(
    object: Projected,
    events: Events,
    event: fn(Projected) -> watcher::Event<Projected>,
) -> Next {
    match object
        .meta()
        .resource_version
        .clone()
        .filter(|v| !v.is_empty())
    {
        Some(reached) => (
            Some(Ok(Step::Event(event(object)))),
            State::Watching {
                rv: reached,
                events,
            },
        ),
        None => (Some(Err(watcher::Error::NoResourceVersion)), State::Empty),
    }
}

/// An error event of a watch: 410 Gone lists again; others go on with the same stream, as
/// kube-rs's watcher does.
fn watch_error(status: Box<kube::core::Status>, same: State) -> Next {
    let next = if status.code == 410 {
        State::Empty
    } else {
        same
    };
    (Some(Err(watcher::Error::WatchError(status))), next)
}
