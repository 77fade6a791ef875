//! One watcher: the task that sends a client what its watch asks for, first the replay or the
//! initial state, then each change of the hub (or of the change log, where the hub's ring did
//! not keep up) seen through its query and predicates, with bookmarks; and the stream that
//! carries those events and the status that ends them.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;
use tonic::Status;

use super::held::Held;
use super::hub::{Broadcast, Event};
use super::spec::{Start, WatchSpec};
use super::{shutting_down, WatchStream, WATCHER_BUFFER};
use crate::api::authz::Revoked;
use crate::api::buffer;
use crate::api::initial::Initial;
use crate::api::mask::Mask;
use crate::api::reason::{self, Reason};
use crate::api::send::{send_buffered_or_give_up, spawn_stream, GaveUp, STALL_TIMEOUT};
use crate::api::Resource;
use crate::proto::{self, EventType};
use crate::store::{Change, ChangeKind, StoreError, StoredObject};

/// Starts a watcher; the stream ends when it is ended (with a status), `revoked` fires, or the
/// client goes away.
pub fn start(
    resource: Arc<Resource>,
    spec: WatchSpec,
    revoked: Revoked,
) -> Result<WatchStream, Status> {
    let hub_rx = resource.hub().subscribe();
    let (tx, rx) = buffer::channel(WATCHER_BUFFER, buffer::BUFFER_BYTES);
    let synced = !matches!(spec.start, Start::InitialState | Start::Held(_));
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
    let resource = watcher.resource.clone();
    let task = async move { watcher.run(hub_rx, replay).await.err().flatten() };
    Ok(spawn_stream(
        resource,
        rx,
        task,
        revoked,
        "the watch ended unexpectedly (see the sidecar's log); watch again with since = the \
         (epoch, revision) of the last event you received",
    ))
}

struct Watcher {
    resource: Arc<Resource>,
    spec: WatchSpec,
    epoch: u64,
    tx: buffer::Sender<proto::WatchEvent>,
    /// Every change up to this revision has been handled.
    position: u64,
    /// Past the initial state: events are resume points.
    synced: bool,
}

/// How a watcher ends: with a status for the client, or quietly (`None`: the client left).
type End = Option<Status>;

impl Watcher {
    /// The watch: where it starts, then following the hub until the client leaves, the API
    /// stops, or the client stalls.
    async fn run(
        &mut self,
        hub: broadcast::Receiver<Broadcast>,
        replay: Option<Vec<Change>>,
    ) -> Result<(), End> {
        match std::mem::replace(&mut self.spec.start, Start::Now) {
            Start::Now => self.position = self.resource.store().revision(),
            Start::Since(revision) => {
                self.position = revision;
                for change in replay.unwrap_or_default() {
                    self.handle(&Event::from_change(change)).await?;
                }
            }
            Start::InitialState => self.send_initial_state(None).await?,
            Start::Held(held) => self.send_initial_state(Some(held)).await?,
        }
        self.follow(hub).await
    }

    /// Every matching object as ADDED, then SYNCED: from there on, events are resume points.
    /// With what the client holds (a delta resume), the objects it holds at their current
    /// resourceVersion are left out, and SYNCED says which of the held ones are gone.
    async fn send_initial_state(&mut self, mut held: Option<Held>) -> Result<(), End> {
        // Held until SYNCED is sent: the snapshot is what costs memory (`resource.rs`).
        let _permit = tokio::select! {
            permit = self.resource.snapshot_permit() => permit,
            _ = self.tx.closed() => return Err(None),
        };
        let (revision, mut initial) = Initial::read(&self.spec.query, &self.resource);
        // Rendered no further ahead of the client than `INITIAL_BYTES` (`buffer.rs`).
        self.tx.narrow(buffer::INITIAL_BYTES);
        loop {
            // Before SYNCED, the client starts over (`send_initial_state`), as after falling
            // behind: see `store/pages.rs` for when a page is Expired.
            let page = initial
                .next_page()
                .map_err(|e| Some(self.initial_expired(&e)))?;
            if page.is_empty() {
                break;
            }
            self.send_page(page, &mut held).await?;
        }
        self.position = revision;
        let mut synced = self.event(EventType::Synced, revision, None);
        synced.gone = held.map(Held::gone).unwrap_or_default();
        self.send_event(synced).await?;
        self.tx.widen();
        self.synced = true;
        Ok(())
    }

    /// Sends the matching objects of one page of the initial state as ADDED.
    async fn send_page(
        &mut self,
        page: Vec<StoredObject>,
        held: &mut Option<Held>,
    ) -> Result<(), End> {
        for stored in page {
            // Decoding many objects: let the runtime's other tasks run.
            tokio::task::consume_budget().await;
            // A held object out of this watch's view stays held: SYNCED then says it is gone.
            if let Some(held) = held.as_mut().filter(|_| self.spec.query.wants(&stored)) {
                if held.holds(stored.key(), stored.resource_version()) {
                    continue;
                }
            }
            let Some(object) = self.spec.query.decode_if_matches(&self.resource, &stored) else {
                continue;
            };
            let rendered = self
                .spec
                .query
                .mask()
                .render(&object, stored.revision(), None);
            self.send(EventType::Added, stored.revision(), Some(rendered))
                .await?;
        }
        Ok(())
    }

    /// The status that ends an initial state the store's change log no longer reaches back
    /// to.
    fn initial_expired(&self, error: &StoreError) -> Status {
        Reason::Expired.status(format!(
            "the initial state could not be read to its end: {error}; it had not reached \
             SYNCED, so watch again with send_initial_state"
        ))
    }

    /// Handles each change the hub broadcasts (and, where the hub's ring did not keep up, the
    /// change log's), with a bookmark every `bookmark_interval`.
    async fn follow(&mut self, mut hub: broadcast::Receiver<Broadcast>) -> Result<(), End> {
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
                        self.catch_up_to(self.resource.store().revision()).await?;
                    }
                    Err(broadcast::error::RecvError::Closed) => return Err(Some(shutting_down())),
                },
                _ = bookmarks.tick() => {
                    // A bookmark is a courtesy: skipped when the buffer is full.
                    if self.tx.try_send(self.event(EventType::Bookmark, self.position, None)).is_ok() {
                        self.resource.count_sent(EventType::Bookmark);
                    }
                }
                _ = self.tx.closed() => return Err(None),
                _ = stop.changed() => return Err(self.last_words().await),
            }
        }
    }

    /// At shutdown: every change the store still holds beyond this watcher's position, then a
    /// BOOKMARK at the store's last revision, sent only while the buffer has room (a client
    /// that does not read gets no more). The sidecar stops its ingest before its API (see
    /// `cli/serve.rs`), so that revision is the one the snapshot written at exit holds: a
    /// client that read to the end resumes after a warm restart with its token instead of
    /// getting `Expired` for the changes that came in between its last event and the snapshot.
    /// (Found by the reconnect storm, `tests/storm.rs`: with writes going on, every client
    /// relisted after each warm restart.)
    async fn last_words(&mut self) -> End {
        if self.synced {
            let last = self.resource.store().revision();
            if self.catch_up_to(last).await.is_ok() {
                let bookmark = self.event(EventType::Bookmark, self.position, None);
                if self.tx.try_send(bookmark).is_ok() {
                    self.resource.count_sent(EventType::Bookmark);
                }
            }
        }
        Some(shutting_down())
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
                let old = event
                    .previous
                    .as_ref()
                    .filter(|_| self.spec.send_previous)
                    .map(|p| {
                        self.spec
                            .query
                            .mask()
                            .render(p, event.previous_revision, None)
                    });
                let mut modified = self.event(
                    EventType::Modified,
                    event.revision,
                    Some(self.render(event)),
                );
                modified.previous = old;
                return self.send_event(modified).await;
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
            // The shared rendering has the labels map; a watcher that omits it copies the rest.
            let whole = event
                .whole
                .get_or_init(|| Mask::whole().render(&event.object, event.revision, None));
            return match mask.has_labels() {
                true => whole.clone(),
                false => proto::Object {
                    namespace: whole.namespace.clone(),
                    name: whole.name.clone(),
                    uid: whole.uid.clone(),
                    resource_version: whole.resource_version.clone(),
                    labels: Default::default(),
                    revision: whole.revision,
                    json: whole.json.clone(),
                },
            };
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
            previous: None,
            gone: Vec::new(),
        }
    }

    /// Waits while the buffer is full, up to [`STALL_TIMEOUT`]; then the watcher is ended.
    async fn send(
        &mut self,
        kind: EventType,
        revision: u64,
        object: Option<proto::Object>,
    ) -> Result<(), End> {
        self.send_event(self.event(kind, revision, object)).await
    }

    /// [`Watcher::send`] of a built event.
    async fn send_event(&mut self, event: proto::WatchEvent) -> Result<(), End> {
        let kind = event.r#type();
        // Stopping: never wait on the client, and never drop what is left for the stop
        // (`send_buffered_or_give_up` would, as soon as the stop has fired): see `last_words`.
        if *self.resource.stopped().borrow() {
            self.tx.try_send(event).map_err(|_| Some(shutting_down()))?;
            self.resource.count_sent(kind);
            return Ok(());
        }
        send_buffered_or_give_up(&self.tx, event, self.resource.stopped())
            .await
            .map_err(|gave_up| match gave_up {
                GaveUp::Stalled => Some(self.fell_behind()),
                GaveUp::Closed => None,
                GaveUp::Stopped => Some(shutting_down()),
            })?;
        self.resource.count_sent(kind);
        Ok(())
    }

    fn fell_behind(&self) -> Status {
        let next = if self.synced {
            "watch again with since = the (epoch, revision) of the last event you received"
        } else {
            "it had not reached SYNCED, so watch again with send_initial_state"
        };
        Reason::FellBehind.status(format!(
            "this watch fell behind: its buffered events (at most {WATCHER_BUFFER}, and 8 MiB) \
             were not read for \
             {} s (at revision {}); {next}",
            STALL_TIMEOUT.as_secs(),
            self.position
        ))
    }
}
