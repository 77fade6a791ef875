//! The task of one WatchKeys stream: marks the keys of each change of the hub (or of the change
//! log where the hub's ring did not keep up, or of the store in a resync) in the stream's
//! queue, takes the client's acknowledgements, and sends ready keys as the client reads them.
//!
//! It never waits on the client while changes come: the queue absorbs them (one entry per
//! key), and a key is sent only when the response buffer has room.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tonic::{Status, Streaming};

use super::counts::StreamGauge;
use super::queue::{Delivery, KeyId, Queue};
use super::spec::KeysSpec;
use crate::api::initial::Initial;
use crate::api::reason::invalid;
use crate::api::watch::{shutting_down, Broadcast, Event};
use crate::api::Resource;
use crate::proto::{self, watch_keys_request, KeyEventType};
use crate::store::{ChangeKind, ObjectKey, StoreError, StoredObject};

/// How often a PROGRESS event may say that the resume token moved.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// How a stream ends: with a status for the client, or quietly (`None`: the client left).
pub type End = Option<Status>;

pub struct Consumer {
    pub resource: Arc<Resource>,
    pub spec: KeysSpec,
    pub queue: Queue,
    pub tx: mpsc::Sender<proto::KeyEvent>,
    /// Every change up to this revision has been marked.
    pub position: u64,
    /// Events to send before any key (RESYNC_START, RESYNC_END).
    pub control: VecDeque<KeyEventType>,
    /// The token the last event carried.
    pub last_token: Option<u64>,
    /// This stream's share of the resource's WatchKeys gauges.
    pub gauge: StreamGauge,
    /// The candidates of the resync under way not read yet (`None`: every one read, or no
    /// resync).
    pub resync_reader: Option<Initial>,
}

impl Consumer {
    /// Reads where the stream starts (the changes after its token, or the view for a resync);
    /// the hub is subscribed to before, so that no later change is missed.
    pub async fn start(&mut self) {
        if let Some(since) = self.spec.since {
            if let Ok(changes) = self.resource.store().changes_since(since) {
                self.position = since;
                for change in changes {
                    tokio::task::consume_budget().await;
                    self.handle(&Event::from_change(change));
                }
                return;
            }
        }
        tracing::debug!(
            resource = %self.resource.name(),
            since = ?self.spec.since,
            "WatchKeys: a new stream resyncs (no token, or one the change log no longer reaches)"
        );
        self.resync().await;
    }

    /// Every key of the view, once more: the resync starts here, its keys are read as they
    /// are sent ([`Consumer::read_resync`]).
    ///
    /// Decision: no snapshot permit (`SNAPSHOTS`). A resync reads a page when its queue runs
    /// low, at the pace its client reads keys, so it holds neither a copy of the view nor the
    /// CPU for long; a permit held that long would keep watchers' initial states waiting.
    async fn resync(&mut self) {
        let (revision, reader) = Initial::read(&self.spec.watch.query, &self.resource);
        self.position = self.position.max(revision);
        self.resource.key_counts().resynced();
        self.control.push_back(KeyEventType::ResyncStart);
        self.queue.begin_resync(Instant::now());
        self.resync_reader = Some(reader);
        self.read_resync().await;
    }

    /// Adds the keys of the resync's next pages to the queue while it wants more; once every
    /// page is read, ends the resync's keys.
    ///
    /// Decision: a page that is Expired (the change log no longer reaches the resync's
    /// revision) is read again, with the pages after it, at the store's current revision
    /// ([`Initial::resume`]): with the changes since, which the stream marks from the hub,
    /// that is the whole view, and no key already sent is sent again.
    async fn read_resync(&mut self) {
        while self.queue.wants_resync_keys() {
            let Some(reader) = &mut self.resync_reader else {
                return;
            };
            let page = match reader.next_page() {
                Ok(page) => page,
                Err(error) => {
                    tracing::debug!(
                        resource = %self.resource.name(),
                        %error,
                        "WatchKeys: a resync's next page is past the change log; reading the \
                         rest of the view at the current revision"
                    );
                    reader.resume();
                    self.resource.key_counts().resync_resumed();
                    continue;
                }
            };
            if page.is_empty() {
                self.resync_reader = None;
                self.queue.end_resync_keys();
                // Every key was sent before its last page was read, or the view has none: no
                // key's delivery is left to say that the resync ended.
                if self.queue.resync_done() {
                    self.control.push_back(KeyEventType::ResyncEnd);
                }
                return;
            }
            let mut keys = Vec::with_capacity(page.len());
            for stored in page {
                tokio::task::consume_budget().await;
                self.push_keys(&stored, &mut keys);
            }
            self.queue.add_resync_keys(keys);
        }
    }

    /// Keys pending: the queue's, and, for a resync under way, one per candidate it has still
    /// to read (an upper bound when the view filters them).
    fn pending(&self) -> usize {
        self.queue.pending() + self.resync_reader.as_ref().map_or(0, Initial::remaining)
    }

    /// The keys `stored` stands for in this view (none when the view does not want it): its
    /// own, or its owners'.
    fn push_keys(&self, stored: &StoredObject, keys: &mut Vec<(KeyId, u64)>) {
        let query = &self.spec.watch.query;
        let Some(object) = query.decode_if_matches(&self.resource, stored) else {
            return;
        };
        if self.spec.owners.is_none() {
            // The stored key's strings, shared rather than copied.
            let key = stored.key().clone();
            keys.push((KeyId { owner: false, key }, stored.revision()));
            return;
        }
        for id in self.ids(&object) {
            keys.push((id, stored.revision()));
        }
    }

    /// The stream: follows the hub, takes acks, sends keys, until the client leaves or the API
    /// stops.
    pub async fn run(
        &mut self,
        mut hub: broadcast::Receiver<Broadcast>,
        mut inbound: Streaming<proto::WatchKeysRequest>,
    ) -> Result<(), End> {
        let mut stop = self.resource.stopped();
        let mut progress = tokio::time::interval(PROGRESS_INTERVAL);
        progress.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut inbound_open = true;
        let tx = self.tx.clone();
        loop {
            if self.queue.wants_resync_keys() {
                self.read_resync().await;
            }
            let next = self.queue.next_ready_at();
            let sendable = !self.control.is_empty() || next.is_some_and(|at| at <= Instant::now());
            let wake = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                received = hub.recv() => match received {
                    Ok(Broadcast::Change(event)) => {
                        if event.revision > self.position {
                            self.catch_up_to(event.revision - 1).await;
                            self.handle(&event);
                        }
                    }
                    Ok(Broadcast::Gap) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        let revision = self.resource.store().revision();
                        self.catch_up_to(revision).await;
                    }
                    Err(broadcast::error::RecvError::Closed) => return Err(Some(shutting_down())),
                },
                message = inbound.next(), if inbound_open => {
                    inbound_open = self.on_inbound(message, &mut inbound)?;
                }
                permit = tx.reserve(), if sendable => {
                    let Ok(permit) = permit else { return Err(None) };
                    if let Some(event) = self.next_event() {
                        permit.send(event);
                    }
                }
                () = tokio::time::sleep_until(wake), if !sendable => {}
                _ = progress.tick() => {
                    let token = self.queue.mark_revision(self.position);
                    if token.is_some() && token != self.last_token {
                        if let Ok(permit) = tx.try_reserve() {
                            permit.send(self.event(KeyEventType::Progress, None));
                        }
                    }
                }
                () = tx.closed() => return Err(None),
                _ = stop.changed() => return Err(self.last_words().await),
            }
            let queued = self.pending() + self.queue.in_flight();
            self.gauge.report(queued, self.queue.bytes());
        }
    }

    /// Takes `message` and every request the client has sent since, in this turn; false once
    /// the client has closed its side (no more acks; keys may still be sent).
    ///
    /// Decision: all of them at once, not one per turn of the loop. A client that acks key by
    /// key sends a small DATA frame per ack, and h2 ends the whole connection (GOAWAY
    /// `ENHANCE_YOUR_CALM`, "too_many_data_frames") once about 2,000 of them wait unread: the
    /// NVSentinel profile's two Go key queues lost their connection that way four times
    /// during a first resync of 140,000 keys, and each started over with no token, sending
    /// every key again (issue 32).
    fn on_inbound(
        &mut self,
        mut message: Option<Result<proto::WatchKeysRequest, Status>>,
        inbound: &mut Streaming<proto::WatchKeysRequest>,
    ) -> Result<bool, End> {
        loop {
            match message {
                Some(Ok(request)) => self.on_request(request)?,
                None => return Ok(false),
                Some(Err(_)) => return Err(None),
            }
            match inbound.next().now_or_never() {
                Some(next) => message = next,
                None => return Ok(true),
            }
        }
    }

    /// At shutdown, once the ingest has stopped (`cli/serve.rs`): the changes not yet marked,
    /// then, if the buffer has room, a PROGRESS with the token they leave. A stream whose keys
    /// are all acknowledged so gets the store's last revision, the one the snapshot written at
    /// exit holds, and resumes after a warm restart instead of resyncing: its last PROGRESS
    /// may otherwise be up to a second old, behind the restored change log.
    async fn last_words(&mut self) -> End {
        let last = self.resource.store().revision();
        self.catch_up_to(last).await;
        if self.queue.mark_revision(self.position).is_some() {
            if let Ok(permit) = self.tx.clone().try_reserve() {
                permit.send(self.event(KeyEventType::Progress, None));
            }
        }
        Some(shutting_down())
    }

    /// The next event to send: a control event, else a ready key (then RESYNC_END if that
    /// key completed a resync).
    fn next_event(&mut self) -> Option<proto::KeyEvent> {
        if let Some(kind) = self.control.pop_front() {
            return Some(self.event(kind, None));
        }
        let delivery = self.queue.take_ready(Instant::now())?;
        if self.queue.resync_done() {
            self.control.push_back(KeyEventType::ResyncEnd);
        }
        self.resource.key_counts().sent();
        Some(self.event(KeyEventType::Key, Some(delivery)))
    }

    fn event(&mut self, kind: KeyEventType, delivery: Option<Delivery>) -> proto::KeyEvent {
        let token = self.queue.mark_revision(self.position);
        self.last_token = token;
        let (key, revision, deleted, object) = match delivery {
            Some(d) => (
                Some(self.key_of(&d.id)),
                d.revision,
                d.deleted,
                self.object_of(&d),
            ),
            None => (None, 0, false, None),
        };
        proto::KeyEvent {
            r#type: kind as i32,
            key,
            revision,
            deleted,
            token: token.map(|revision| proto::ResumeToken {
                epoch: self.resource.store().epoch(),
                revision,
            }),
            pending: self.pending() as u64,
            in_flight: self.queue.in_flight() as u64,
            queue_bytes: self.queue.bytes() as u64,
            object,
        }
    }

    /// With `send_objects`: the object of a delivered key as the store holds it now, rendered
    /// as a Get renders it. None for a deletion, an owner's key (another resource), or an
    /// object gone from the store since (its deletion is marked when the hub brings it).
    fn object_of(&self, delivery: &Delivery) -> Option<proto::Object> {
        let mask = self.spec.objects.as_ref()?;
        if delivery.deleted || delivery.id.owner {
            return None;
        }
        let stored = self.resource.store().get(&delivery.id.key)?;
        Some(mask.render_stored(&stored))
    }

    fn key_of(&self, id: &KeyId) -> proto::Key {
        let owner_kind = self.spec.owners.as_ref().map(|o| o.kind());
        proto::Key {
            kind: match (id.owner, owner_kind) {
                (true, Some(kind)) => kind.to_string(),
                _ => self.spec.kind.clone(),
            },
            namespace: id.key.namespace().unwrap_or_default().to_string(),
            name: id.key.name().to_string(),
        }
    }

    /// A message after the subscription: acknowledgements.
    fn on_request(&mut self, request: proto::WatchKeysRequest) -> Result<(), End> {
        match request.request {
            Some(watch_keys_request::Request::Ack(acks)) => {
                for (i, ack) in acks.acks.iter().enumerate() {
                    let id = self.id_of(ack.key.as_ref()).map_err(|field_message| {
                        Some(invalid(
                            &format!("ack.acks[{i}].{}", field_message.0),
                            field_message.1,
                        ))
                    })?;
                    self.queue.ack(&id, ack.revision);
                }
                Ok(())
            }
            Some(watch_keys_request::Request::Subscribe(_)) => Err(Some(invalid(
                "subscribe",
                "only the first message of a stream subscribes; later messages acknowledge \
                 keys (ack): open a new stream to subscribe again",
            ))),
            None => Err(Some(invalid(
                "request",
                "is empty: send ack with the keys to acknowledge",
            ))),
        }
    }

    /// The queue's key for an acknowledged key; or the field at fault and what is wrong.
    fn id_of(&self, key: Option<&proto::Key>) -> Result<KeyId, (&'static str, String)> {
        let key = key.ok_or(("key", "is required: the key as it was sent".to_string()))?;
        if key.name.is_empty() {
            return Err(("key.name", "is required".to_string()));
        }
        let owner = match &self.spec.owners {
            Some(owners) if key.kind == owners.kind() && key.kind != self.spec.kind => true,
            _ if key.kind.is_empty() || key.kind == self.spec.kind => false,
            _ => {
                return Err((
                    "key.kind",
                    format!("{:?} is not a kind this stream sends keys of", key.kind),
                ))
            }
        };
        let namespace = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
        Ok(KeyId {
            owner,
            key: ObjectKey::new(namespace, &key.name),
        })
    }

    /// Marks, from the change log, what the hub did not deliver up to `revision`; a resync when
    /// the log no longer holds it.
    async fn catch_up_to(&mut self, revision: u64) {
        if self.position >= revision {
            return;
        }
        match self.resource.store().changes_since(self.position) {
            Ok(changes) => {
                for change in changes.into_iter().take_while(|c| c.revision <= revision) {
                    tokio::task::consume_budget().await;
                    self.handle(&Event::from_change(change));
                }
            }
            Err(e @ (StoreError::Expired { .. } | StoreError::FutureRevision { .. })) => {
                tracing::debug!(
                    resource = %self.resource.name(),
                    position = self.position,
                    error = %e,
                    "WatchKeys: the change log no longer reaches the stream's position; resyncing"
                );
                self.resync().await;
            }
            Err(other) => {
                tracing::warn!(error = %other, "WatchKeys: reading the change log failed; resyncing");
                self.resync().await;
            }
        }
    }

    /// Marks the keys a change concerns, as a Watch with the same filters would see it.
    fn handle(&mut self, event: &Event) {
        self.position = event.revision;
        let query = &self.spec.watch.query;
        let now = event.kind != ChangeKind::Deleted && query.matches(&self.resource, &event.object);
        let before = match (event.kind, &event.previous) {
            (ChangeKind::Added, _) => false,
            (ChangeKind::Modified, Some(previous)) => query.matches(&self.resource, previous),
            (ChangeKind::Modified, None) => now,
            (ChangeKind::Deleted, _) => query.matches(&self.resource, &event.object),
        };
        let previous = event.previous.as_ref().unwrap_or(&event.object);
        let states: &[&Value] = match (before, now) {
            (false, false) => return,
            (false, true) => &[&event.object],
            (true, true) if !self.spec.watch.wants_update(&event.object, previous) => return,
            (true, _) => &[previous, &event.object],
        };
        let at = Instant::now();
        let mut ids = Vec::new();
        for state in states {
            for id in self.ids(state) {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        self.resource.key_counts().changed(ids.len());
        for id in ids {
            let deleted = !id.owner && !now;
            self.queue.mark(&id, event.revision, deleted, at);
        }
    }

    /// The keys an object state names: its own, its owner's, or both.
    fn ids(&self, object: &Value) -> Vec<KeyId> {
        let key = object_key(object);
        let Some(owners) = &self.spec.owners else {
            return key
                .into_iter()
                .map(|key| KeyId { owner: false, key })
                .collect();
        };
        let mut ids = Vec::with_capacity(2);
        if let (Some(key), Some(owner)) = (&key, owners.owner_of(object)) {
            ids.push(KeyId {
                owner: true,
                key: ObjectKey::new(key.namespace(), owner),
            });
        }
        if owners.and_self {
            ids.extend(key.map(|key| KeyId { owner: false, key }));
        }
        ids
    }
}

fn object_key(object: &Value) -> Option<ObjectKey> {
    let meta = object.get("metadata")?;
    let name = meta.get("name")?.as_str()?;
    Some(ObjectKey::new(
        meta.get("namespace").and_then(Value::as_str),
        name,
    ))
}
