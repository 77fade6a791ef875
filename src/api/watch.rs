//! Watches: one hub per resource decodes each change once and broadcasts it; each watcher
//! applies its own filters (transitions included), predicates and field mask, and sends into a
//! bounded buffer of its own.
//!
//! Delivery, exactly:
//! - A watcher subscribes to the hub *before* it reads the store (the initial state, or the
//!   change log from its resume revision, up to the store's revision `S` at that read). Every
//!   change after `S` is broadcast after that read, so it reaches the watcher; changes up to
//!   `S` that also arrive from the hub are skipped by revision.
//! - When the broadcast ring overflows for a watcher (it lags by more than [`HUB_CAPACITY`]
//!   changes), the watcher reads what it missed from the store's change log instead: the ring
//!   only saves decoding work, the log is the source of truth.
//! - Each watcher has a buffer of [`WATCHER_BUFFER`] events. A client that reads keeps it from
//!   staying full; a watcher whose buffer stays full for [`STALL_TIMEOUT`] is ended with
//!   `RESOURCE_EXHAUSTED`/`FellBehind` after the events already buffered, and resumes from the
//!   revision of the last event it received. So a burst (a large initial state, a replay, a
//!   relist upstream) never ends a watcher that reads, and one that stops reading costs the
//!   others nothing and the sidecar a bounded amount: its buffer, for a bounded time.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use tonic::Status;

use super::query::Query;
use super::reason::{self, invalid, Reason};
use super::send::{send_or_give_up, GaveUp, STALL_TIMEOUT};
use super::Resource;
use crate::filter::ChangePredicate;
use crate::proto::{self, EventType, Predicate};
use crate::store::{Change, ChangeKind, Store};

/// Changes the hub keeps for watchers that have not taken them yet (shared by all watchers).
pub const HUB_CAPACITY: usize = 4096;
/// Events buffered per watcher.
///
/// Decision: 1024. A controller that handles events in a loop keeps the buffer near empty;
/// one that stalls gets a status it can act on (resume) instead of the sidecar holding an
/// unbounded backlog for it. At ~1 KiB per event, about 1 MiB per stalled watcher at most, plus
/// what HTTP/2 flow control lets the connection hold.
pub const WATCHER_BUFFER: usize = 1024;
/// Bookmarks when the request does not ask for an interval.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(10);

/// One change, decoded once for every watcher.
pub struct Event {
    revision: u64,
    kind: ChangeKind,
    /// The new state (the last one for DELETED).
    object: Value,
    /// The state before a MODIFIED.
    previous: Option<Value>,
    /// The object rendered whole, built by the first watcher that needs it.
    whole: OnceLock<proto::Object>,
}

impl Event {
    fn from_change(change: Change) -> Event {
        Event {
            revision: change.revision,
            kind: change.kind,
            object: change.object.to_json_value(),
            previous: change.previous.map(|p| p.to_json_value()),
            whole: OnceLock::new(),
        }
    }
}

/// What the hub broadcasts.
#[derive(Clone)]
enum Broadcast {
    Change(Arc<Event>),
    /// The hub itself fell behind the change log: watchers read the store from where they are.
    Gap,
}

/// Follows one store and broadcasts its changes.
pub struct Hub {
    tx: broadcast::Sender<Broadcast>,
}

impl Hub {
    /// Starts the hub's task; it ends when the store's revision channel closes or `stop` fires.
    pub fn start(store: Arc<Store>, mut stop: tokio::sync::watch::Receiver<bool>) -> Hub {
        let (tx, _) = broadcast::channel(HUB_CAPACITY);
        let sender = tx.clone();
        tokio::spawn(async move {
            let mut revisions = store.subscribe();
            let mut last = *revisions.borrow_and_update();
            loop {
                tokio::select! {
                    changed = revisions.changed() => if changed.is_err() { return },
                    _ = stop.changed() => return,
                }
                match store.changes_since(last) {
                    Ok(changes) => {
                        for change in changes {
                            tokio::task::consume_budget().await;
                            last = change.revision;
                            // Nobody to tell: skip the decoding. A watcher that subscribes
                            // later reads the store first, up to a revision at least this one.
                            if sender.receiver_count() > 0 {
                                let _ = sender
                                    .send(Broadcast::Change(Arc::new(Event::from_change(change))));
                            }
                        }
                    }
                    Err(_) => {
                        last = store.revision();
                        let _ = sender.send(Broadcast::Gap);
                    }
                }
            }
        });
        Hub { tx }
    }

    fn subscribe(&self) -> broadcast::Receiver<Broadcast> {
        self.tx.subscribe()
    }
}

/// A validated watch request.
pub struct WatchSpec {
    pub query: Query,
    pub start: Start,
    predicates: Vec<Predicate>,
    predicate_cel: Option<ChangePredicate>,
    pub bookmark_interval: Duration,
}

pub enum Start {
    /// Follow from the current revision.
    Now,
    /// The current state, SYNCED, then follow.
    InitialState,
    /// Replay after this revision (the epoch was checked).
    Since(u64),
}

impl WatchSpec {
    pub fn new(resource: &Resource, req: &proto::WatchRequest) -> Result<WatchSpec, Status> {
        let query = Query::new(resource, req.into())?;
        let epoch = resource.store().epoch();
        let start = match &req.start {
            None | Some(proto::watch_request::Start::SendInitialState(false)) => Start::Now,
            Some(proto::watch_request::Start::SendInitialState(true)) => Start::InitialState,
            Some(proto::watch_request::Start::Since(token)) if token.epoch != epoch => {
                return Err(Reason::EpochChanged.status(format!(
                    "the resume token is from epoch {}, but {} is at epoch {epoch} (the sidecar \
                     restarted): relist, then watch from the list's revision",
                    token.epoch,
                    resource.name()
                )))
            }
            Some(proto::watch_request::Start::Since(token)) => Start::Since(token.revision),
        };
        let mut predicates = Vec::new();
        for (i, p) in req.predicates.iter().enumerate() {
            match Predicate::try_from(*p) {
                Ok(Predicate::Unspecified) | Err(_) => {
                    return Err(invalid(
                        &format!("predicates[{i}]"),
                        format!(
                            "{p} is not a predicate; use GENERATION_CHANGED, LABELS_CHANGED or \
                             ANNOTATIONS_CHANGED"
                        ),
                    ))
                }
                Ok(p) => predicates.push(p),
            }
        }
        let predicate_cel = match req.predicate_cel.trim() {
            "" => None,
            text => Some(ChangePredicate::compile(text).map_err(|e| invalid("predicate_cel", e))?),
        };
        let bookmark_interval = match req.bookmark_interval_seconds {
            0 => DEFAULT_BOOKMARK_INTERVAL,
            s => Duration::from_secs(u64::from(s)),
        };
        Ok(WatchSpec {
            query,
            start,
            predicates,
            predicate_cel,
            bookmark_interval,
        })
    }

    /// Whether a subscriber cares about an update that stays in its view.
    fn wants_update(&self, new: &Value, old: &Value) -> bool {
        if self.predicates.is_empty() && self.predicate_cel.is_none() {
            return true;
        }
        let meta = |v: &'_ Value, f: &str| v.get("metadata").and_then(|m| m.get(f)).cloned();
        self.predicates.iter().any(|p| {
            let field = match p {
                Predicate::GenerationChanged => "generation",
                Predicate::LabelsChanged => "labels",
                Predicate::AnnotationsChanged => "annotations",
                Predicate::Unspecified => return false,
            };
            meta(new, field) != meta(old, field)
        }) || self
            .predicate_cel
            .as_ref()
            .is_some_and(|p| p.matches(new, old))
    }
}

/// The response stream of one watch.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<proto::WatchEvent, Status>> + Send>>;

/// Starts a watcher; the stream ends when it is ended (with a status) or the client goes away.
pub fn start(resource: Arc<Resource>, spec: WatchSpec) -> Result<WatchStream, Status> {
    let hub_rx = resource.hub().subscribe();
    let (tx, rx) = mpsc::channel(WATCHER_BUFFER);
    let (end_tx, end_rx) = oneshot::channel::<Status>();
    let synced = !matches!(spec.start, Start::InitialState);
    let mut watcher = Watcher {
        epoch: resource.store().epoch(),
        resource,
        spec,
        tx,
        position: 0,
        synced,
    };
    // Fail fast on a token the log cannot serve, as the call's own status.
    let replay = match watcher.spec.start {
        Start::Since(revision) => Some(
            watcher
                .resource
                .store()
                .changes_since(revision)
                .map_err(|e| reason::from_store(&e))?,
        ),
        _ => None,
    };
    tokio::spawn(async move {
        let _counted = watcher.resource.watching();
        let end = watcher.run(hub_rx, replay).await.err().flatten();
        if let Some(status) = end {
            if status.code() == Reason::FellBehind.code() {
                watcher.resource.count_dropped();
            }
            let _ = end_tx.send(status);
        }
    });
    let events = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok);
    // The task ends every stream with a status, except when the client has gone; a task that
    // ended otherwise (a panic) must not look like a clean end to a client still reading.
    let end = futures::stream::once(end_rx).map(|r| {
        Err(r.unwrap_or_else(|_| {
            Status::internal(
                "the watch ended unexpectedly (see the sidecar's log); watch again with since = \
                 the (epoch, revision) of the last event you received",
            )
        }))
    });
    Ok(Box::pin(events.chain(end)))
}

struct Watcher {
    resource: Arc<Resource>,
    spec: WatchSpec,
    epoch: u64,
    tx: mpsc::Sender<proto::WatchEvent>,
    /// Every change up to this revision has been handled.
    position: u64,
    /// Past the initial state: events are resume points.
    synced: bool,
}

/// How a watcher ends: with a status for the client, or quietly (`None`: the client left).
type End = Option<Status>;

impl Watcher {
    async fn run(
        &mut self,
        mut hub: broadcast::Receiver<Broadcast>,
        replay: Option<Vec<Change>>,
    ) -> Result<(), End> {
        let store = self.resource.store().clone();
        match self.spec.start {
            Start::Now => self.position = store.revision(),
            Start::Since(revision) => {
                self.position = revision;
                for change in replay.unwrap_or_default() {
                    self.handle(&Event::from_change(change)).await?;
                }
            }
            Start::InitialState => {
                let (revision, candidates) = self.spec.query.candidates(&self.resource);
                for stored in candidates {
                    // Decoding many objects: let the runtime's other tasks run.
                    tokio::task::consume_budget().await;
                    let object = stored.to_json_value();
                    if !self.spec.query.matches(&self.resource, &object) {
                        continue;
                    }
                    let rendered = self
                        .spec
                        .query
                        .mask()
                        .render(&object, stored.revision(), None);
                    self.send(EventType::Added, stored.revision(), Some(rendered))
                        .await?;
                }
                self.position = revision;
                self.send(EventType::Synced, revision, None).await?;
                self.synced = true;
            }
        }
        let mut stop = self.resource.stopped();
        let mut bookmarks = tokio::time::interval(self.spec.bookmark_interval);
        bookmarks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        bookmarks.reset();
        loop {
            tokio::select! {
                received = hub.recv() => match received {
                    Ok(Broadcast::Change(event)) => {
                        if event.revision > self.position {
                            self.catch_up_to(event.revision - 1).await?;
                            self.handle(&event).await?;
                        }
                    }
                    Ok(Broadcast::Gap) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.catch_up_to(store.revision()).await?;
                    }
                    Err(broadcast::error::RecvError::Closed) => return Err(Some(shutting_down())),
                },
                _ = bookmarks.tick() => {
                    // A bookmark is a courtesy: skipped when the buffer is full.
                    let _ = self.tx.try_send(self.event(EventType::Bookmark, self.position, None));
                }
                _ = self.tx.closed() => return Err(None),
                _ = stop.changed() => return Err(Some(shutting_down())),
            }
        }
    }

    /// Handles, from the change log, what the hub did not deliver up to `revision`.
    async fn catch_up_to(&mut self, revision: u64) -> Result<(), End> {
        if self.position >= revision {
            return Ok(());
        }
        let changes = self
            .resource
            .store()
            .changes_since(self.position)
            .map_err(|e| Some(reason::from_store(&e)))?;
        for change in changes.into_iter().take_while(|c| c.revision <= revision) {
            self.handle(&Event::from_change(change)).await?;
            tokio::task::consume_budget().await;
        }
        Ok(())
    }

    /// Sends what this change means for this watcher, if anything.
    async fn handle(&mut self, event: &Event) -> Result<(), End> {
        self.position = event.revision;
        let query = &self.spec.query;
        let now = event.kind != ChangeKind::Deleted && query.matches(&self.resource, &event.object);
        let before = match (event.kind, &event.previous) {
            (ChangeKind::Added, _) => false,
            (ChangeKind::Modified, Some(previous)) => query.matches(&self.resource, previous),
            (ChangeKind::Modified, None) => now,
            (ChangeKind::Deleted, _) => query.matches(&self.resource, &event.object),
        };
        let (kind, object) = match (before, now) {
            (false, false) => return Ok(()),
            (false, true) => (EventType::Added, self.render(event)),
            (true, true) => {
                let previous = event.previous.as_ref().unwrap_or(&event.object);
                if !self.spec.wants_update(&event.object, previous) {
                    return Ok(());
                }
                (EventType::Modified, self.render(event))
            }
            (true, false) => match (event.kind, &event.previous) {
                // Left the view: its last state in the view, at this change's version.
                (ChangeKind::Modified, Some(previous)) => {
                    let rv = event
                        .object
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let mask = self.spec.query.mask();
                    (
                        EventType::Deleted,
                        mask.render(previous, event.revision, Some(rv.as_deref().unwrap_or(""))),
                    )
                }
                _ => (EventType::Deleted, self.render(event)),
            },
        };
        self.send(kind, event.revision, Some(object)).await
    }

    /// The event's object as this watcher asked for it; rendered once for every watcher that
    /// wants it whole.
    fn render(&self, event: &Event) -> proto::Object {
        let mask = self.spec.query.mask();
        if mask.is_whole() {
            return event
                .whole
                .get_or_init(|| mask.render(&event.object, event.revision, None))
                .clone();
        }
        mask.render(&event.object, event.revision, None)
    }

    fn event(
        &self,
        kind: EventType,
        revision: u64,
        object: Option<proto::Object>,
    ) -> proto::WatchEvent {
        proto::WatchEvent {
            r#type: kind as i32,
            epoch: self.epoch,
            revision,
            object,
        }
    }

    /// Waits while the buffer is full, up to [`STALL_TIMEOUT`]; then the watcher is ended.
    async fn send(
        &mut self,
        kind: EventType,
        revision: u64,
        object: Option<proto::Object>,
    ) -> Result<(), End> {
        let event = self.event(kind, revision, object);
        send_or_give_up(&self.tx, event, self.resource.stopped())
            .await
            .map_err(|gave_up| match gave_up {
                GaveUp::Stalled => Some(self.fell_behind()),
                GaveUp::Closed => None,
                GaveUp::Stopped => Some(shutting_down()),
            })
    }

    fn fell_behind(&self) -> Status {
        let next = if self.synced {
            "watch again with since = the (epoch, revision) of the last event you received"
        } else {
            "it had not reached SYNCED, so watch again with send_initial_state"
        };
        Reason::FellBehind.status(format!(
            "this watch fell behind: its {WATCHER_BUFFER} buffered events were not read for \
             {} s (at revision {}); {next}",
            STALL_TIMEOUT.as_secs(),
            self.position
        ))
    }
}

pub fn shutting_down() -> Status {
    Reason::ShuttingDown.status(
        "informerd is shutting down: reconnect and watch with since = the (epoch, revision) of \
         the last event you received",
    )
}
