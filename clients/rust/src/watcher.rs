//! [`watcher()`]: kube-rs's watcher over the sidecar. It yields the same
//! [`kube::runtime::watcher::Event`]s with the same contract as `kube::runtime::watcher`, so that
//! `reflector`, `WatchStreamExt` and `Controller::for_stream` run on it unchanged.
//! [`metadata_watcher()`] is the same for each object's metadata only. The contract:
//!
//! - `Init`, one `InitApply` per object of the initial state, `InitDone`; then `Apply` for
//!   additions and updates and `Delete` for deletions;
//! - a stream that ends because the sidecar shut down (`ShuttingDown`), the connection broke,
//!   or the sidecar cannot be reached (no socket, nothing listening: `UNAVAILABLE`) is resumed
//!   quietly from the last (epoch, revision) handled, without an `Err` item and without a new
//!   `Init`, as kube-rs's watcher re-watches when the apiserver closes a watch. The watcher
//!   waits between attempts (100 ms doubling to 2 s); once the sidecar has stayed unreachable
//!   for [`QUIET_PERIOD`] (30 s), each failed attempt is an `Err` item and the next poll
//!   attempts again (the caller's backoff paces it), until a watch opens;
//! - when the token cannot be used any more (the sidecar's `Expired` or `EpochChanged`, the
//!   analogue of the apiserver's `410 Gone`: a sidecar restarted without its snapshot), it
//!   starts a new `Init`..`InitDone` cycle, without an `Err` item: a reflector then drops the
//!   objects that vanished meanwhile, exactly as after kube-rs's relist. A stream that breaks
//!   before `InitDone` starts a new cycle too. With [`Api::delta_resume`] it resumes by delta
//!   instead (`delta`): `Apply` of what changed or appeared, `Delete` of what is gone.
//!   `FellBehind` resumes at once, quietly;
//! - a request the sidecar refuses as it is (`Invalid`, `NotFound`, `Forbidden`,
//!   `Unauthenticated`), an over-limit refusal (`TooManyWatchers`, `OverMemoryLimit`, ...: a
//!   request to back off) and an object that does not decode are `Err` items at once.
//!
//! Like kube-rs's watcher it never ends; apply a backoff to its `Err` items
//! (`.default_backoff()`), as with kube-rs. `retry` decides which ends are quiet.

use std::collections::VecDeque;

use futures::{stream::BoxStream, Stream, StreamExt};
use kube::core::PartialObjectMeta;
use kube::Resource;
use serde::de::DeserializeOwned;

pub use kube::runtime::watcher::{Config, Error, Event, Result};

use crate::api::{Api, Change, Start};
use crate::proto::{EventType, ResumeToken};

mod delta;
mod retry;

use delta::Holdings;

pub use retry::QUIET_PERIOD;
use retry::{Fault, Outage};

type Changes<K> = BoxStream<'static, std::result::Result<Change<K>, crate::Error>>;

/// What one step of the watcher gives: an event, nothing (a bookmark, a resumed stream), or
/// the fault that ended the stream.
type Step<K> = std::result::Result<Option<Event<K>>, Fault>;

/// Where the watcher is.
enum Phase<K> {
    /// About to start a new initial state.
    Empty,
    /// Delivering the initial state of this stream.
    Initial(Changes<K>),
    /// Delivering a delta resume, up to its `SYNCED`.
    Delta(Changes<K>),
    /// About to resume after the token.
    Resume(ResumeToken),
    /// Following changes after the token.
    Watching(Changes<K>, ResumeToken),
}

struct State<K> {
    api: Api<K>,
    config: Config,
    phase: Phase<K>,
    /// The quiet reconnects since the sidecar was last reached.
    outage: Outage,
    /// What was delivered, with [`Api::delta_resume`] (and until a sidecar refuses a delta).
    holdings: Option<Holdings>,
    /// Events to yield before the next step (the `Delete`s of a delta resume's `SYNCED`).
    pending: VecDeque<Event<K>>,
    /// The resourceVersion of the object of the event being yielded, for the holdings (`K`
    /// may not keep it: [`Api::keys_only`]).
    last_version: Option<String>,
    /// The holdings are a whole view: the last `Init` reached its `InitDone`. A cycle cut short
    /// leaves a reflector waiting for an `InitDone`: only a new cycle gives it one.
    whole: bool,
}

/// The objects of `api` that match `config`'s selectors as kube-rs watcher events (see the
/// module documentation); `api`'s field mask applies to every object.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use futures::TryStreamExt;
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::runtime::{reflector, watcher::Config, WatchStreamExt};
///
/// let cache = informerd_client::connect("/run/informerd/informerd.sock").await?;
/// let pods = informerd_client::Api::<Pod>::all(cache, "pods").fields(["spec.nodeName"]);
/// let (reader, writer) = reflector::store();
/// let stream = informerd_client::watcher(pods, Config::default())
///     .default_backoff()
///     .reflect(writer)
///     .applied_objects();
/// # let _ = (reader, stream);
/// # Ok(()) }
/// ```
pub fn watcher<K>(api: Api<K>, config: Config) -> impl Stream<Item = Result<Event<K>>> + Send
where
    K: Resource + DeserializeOwned + Send + 'static,
{
    let holdings = api.delta.then(Holdings::default);
    let state = State {
        api,
        config,
        phase: Phase::Empty,
        outage: Outage::default(),
        holdings,
        pending: VecDeque::new(),
        last_version: None,
        whole: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        let item = state.step().await;
        Some((item, state))
    })
}

/// [`watcher()`] of each object's metadata only, as kube-rs's `metadata_watcher` gives it: the
/// same events and contract, of [`PartialObjectMeta<K>`]. The sidecar sends only the
/// metadata fields of [`Api::metadata`] (without a mask of `api`'s own: labels,
/// ownerReferences, deletionTimestamp, finalizers and the identity), so that a reflector
/// `Store<PartialObjectMeta<K>>`, `Controller::for_stream`, `owns_stream` and `watches_stream`
/// run on a few hundred bytes per object. Read a whole object when the reconciler needs it,
/// from the sidecar ([`crate::ReadThrough`]).
///
/// It is `watcher(api.metadata(), config)`; `watcher` of an `Api::<PartialObjectMeta<K>>` is
/// the same, as kube 5 recommends over its deprecated `metadata_watcher`.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::runtime::{reflector, watcher::Config, WatchStreamExt};
///
/// let cache = informerd_client::connect("/run/informerd/informerd.sock").await?;
/// let pods = informerd_client::Api::<Pod>::all(cache, "pods");
/// let (reader, writer) = reflector::store();
/// let stream = informerd_client::metadata_watcher(pods, Config::default())
///     .default_backoff()
///     .reflect(writer)
///     .applied_objects();
/// # let _ = (reader, stream);
/// # Ok(()) }
/// ```
pub fn metadata_watcher<K>(
    api: Api<K>,
    config: Config,
) -> impl Stream<Item = Result<Event<PartialObjectMeta<K>>>> + Send
where
    K: Resource + Send + 'static,
    PartialObjectMeta<K>: DeserializeOwned,
{
    watcher(api.metadata(), config)
}

impl<K> State<K>
where
    K: Resource + DeserializeOwned + Send + 'static,
{
    /// The next item; loops over the steps that yield nothing (bookmarks, a resumed stream, a
    /// relist, a quiet reconnect).
    async fn step(&mut self) -> Result<Event<K>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(self.remember(event));
            }
            let phase = std::mem::replace(&mut self.phase, Phase::Empty);
            let item = match phase {
                Phase::Empty
                    if self.whole && self.holdings.as_ref().is_some_and(|h| !h.is_empty()) =>
                {
                    self.open_delta().await
                }
                Phase::Empty => {
                    let start = Start::InitialState;
                    Self::open(&self.api, &self.config, start)
                        .await
                        .map(|changes| {
                            self.outage.over();
                            self.phase = Phase::Initial(changes);
                            if let Some(h) = self.holdings.as_mut() {
                                h.clear();
                            }
                            Some(Event::Init)
                        })
                }
                Phase::Delta(changes) => self.delta(changes).await,
                Phase::Resume(token) => {
                    let opened = Self::open(&self.api, &self.config, Start::Since(token)).await;
                    // Retried from the same token unless the fault is a relist.
                    self.phase = Phase::Resume(token);
                    opened.map(|changes| {
                        self.outage.over();
                        self.phase = Phase::Watching(changes, token);
                        None
                    })
                }
                Phase::Initial(changes) => self.initial(changes).await,
                Phase::Watching(changes, token) => self.watching(changes, token).await,
            };
            match item {
                Ok(Some(event)) => return Ok(self.remember(event)),
                Ok(None) | Err(Fault::Resume) => {}
                Err(Fault::Relist) => self.phase = Phase::Empty,
                Err(Fault::Surface(error)) => return Err(error),
                Err(Fault::Reconnect(error)) => match self.outage.failed() {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(error),
                },
            }
        }
    }

    /// Keeps what `event` delivers in the holdings (with [`Api::delta_resume`]).
    fn remember(&mut self, event: Event<K>) -> Event<K> {
        if let Some(h) = self.holdings.as_mut() {
            match &event {
                Event::InitApply(o) | Event::Apply(o) => {
                    let m = o.meta();
                    let rv = self.last_version.take().unwrap_or_default();
                    h.applied(
                        m.namespace.as_deref(),
                        m.name.as_deref().unwrap_or_default(),
                        &rv,
                    );
                }
                Event::Delete(o) => {
                    let m = o.meta();
                    h.deleted(
                        m.namespace.as_deref(),
                        m.name.as_deref().unwrap_or_default(),
                    );
                }
                Event::Init => self.whole = false,
                Event::InitDone => self.whole = true,
            }
        }
        event
    }

    /// Opens a delta resume from the holdings. A sidecar that refuses it as a request (one
    /// without delta resume: `Invalid`), or whose `limits.maxRequestSize` is below the held
    /// entries (16 bytes an object: `RequestTooLarge`), is not asked again: the holdings go,
    /// and the next step relists.
    async fn open_delta(&mut self) -> Step<K> {
        let held = self
            .holdings
            .as_ref()
            .map(Holdings::held)
            .unwrap_or_default();
        match self.api.watch(&self.config, Start::Held(held)).await {
            Ok(changes) => {
                self.outage.over();
                self.phase = Phase::Delta(changes.boxed());
                Ok(None)
            }
            Err(e)
                if matches!(
                    e.reason(),
                    Some(crate::proto::Reason::Invalid | crate::proto::Reason::RequestTooLarge)
                ) =>
            {
                self.holdings = None;
                Ok(None)
            }
            Err(e) => Err(Fault::of(e, Error::WatchStartFailed)),
        }
    }

    /// One event of a delta resume: `Apply` of an object that changed or appeared; at
    /// `SYNCED`, a `Delete` of each held object that is gone, then the watch goes on. Any end
    /// before `SYNCED` leaves the phase `Empty`: another delta resume.
    async fn delta(&mut self, mut changes: Changes<K>) -> Step<K> {
        let change = match changes.next().await {
            Some(Ok(change)) => change,
            Some(Err(e)) => return Err(Fault::of(e, Error::WatchFailed)),
            None => return Err(Fault::ended(ended())),
        };
        match (change.kind, change.object) {
            (EventType::Synced, _) => {
                let gone = self
                    .holdings
                    .as_mut()
                    .map(|h| h.take_gone(&change.gone))
                    .unwrap_or_default();
                for (namespace, name) in gone {
                    let object = self
                        .api
                        .decode_key(&namespace, &name)
                        .map_err(|e| Fault::of(e, Error::WatchFailed))?;
                    self.pending.push_back(Event::Delete(object));
                }
                self.phase = Phase::Watching(changes, change.token);
                Ok(None)
            }
            (EventType::Added, Some(object)) => {
                self.last_version = Some(change.resource_version);
                self.phase = Phase::Delta(changes);
                Ok(Some(Event::Apply(object)))
            }
            _ => {
                self.phase = Phase::Delta(changes);
                Ok(None)
            }
        }
    }

    /// Opens a stream; a stream opened ends an outage. Decision: borrows the handle and config
    /// only, not the state, whose stream (not `Sync`) must not be borrowed across the await of
    /// a `Send` future.
    async fn open(
        api: &Api<K>,
        config: &Config,
        start: Start,
    ) -> std::result::Result<Changes<K>, Fault> {
        match api.watch(config, start).await {
            Ok(changes) => Ok(changes.boxed()),
            Err(e) => Err(Fault::of(e, Error::WatchStartFailed)),
        }
    }

    /// One event of the initial state: `InitApply`, or `InitDone` at `SYNCED`. Any end of the
    /// stream before `SYNCED` leaves the phase `Empty`: a new cycle.
    async fn initial(&mut self, mut changes: Changes<K>) -> Step<K> {
        let change = match changes.next().await {
            Some(Ok(change)) => change,
            Some(Err(e @ crate::Error::Decode { .. })) => {
                self.phase = Phase::Initial(changes);
                return Err(Fault::of(e, Error::WatchFailed));
            }
            Some(Err(e)) => return Err(Fault::of(e, Error::WatchFailed)),
            None => return Err(Fault::ended(ended())),
        };
        let event = match (change.kind, change.object) {
            (EventType::Synced, _) => {
                self.phase = Phase::Watching(changes, change.token);
                return Ok(Some(Event::InitDone));
            }
            (EventType::Added, Some(object)) => {
                self.last_version = Some(change.resource_version);
                Some(Event::InitApply(object))
            }
            // Bookmarks, and anything the protocol does not send during an initial state.
            _ => None,
        };
        self.phase = Phase::Initial(changes);
        Ok(event)
    }

    /// One change after the initial state: `Apply`, `Delete`, or nothing for a bookmark.
    async fn watching(&mut self, mut changes: Changes<K>, token: ResumeToken) -> Step<K> {
        let change = match changes.next().await {
            Some(Ok(change)) => change,
            Some(Err(e @ crate::Error::Decode { .. })) => {
                // The event is lost to the caller, as an undecodable event is in kube-rs's
                // watcher; the next ones still come.
                self.phase = Phase::Watching(changes, token);
                return Err(Fault::of(e, Error::WatchFailed));
            }
            Some(Err(e)) => {
                self.phase = Phase::Resume(token);
                return Err(Fault::of(e, Error::WatchFailed));
            }
            None => {
                self.phase = Phase::Resume(token);
                return Err(Fault::ended(ended()));
            }
        };
        if change.token.epoch != token.epoch {
            // Another run of the sidecar answered on a resumed stream: its revisions say
            // nothing about ours.
            return Err(Fault::Relist);
        }
        self.phase = Phase::Watching(changes, change.token);
        Ok(match (change.kind, change.object) {
            (EventType::Added | EventType::Modified, Some(object)) => {
                self.last_version = Some(change.resource_version);
                Some(Event::Apply(object))
            }
            (EventType::Deleted, Some(object)) => Some(Event::Delete(object)),
            _ => None,
        })
    }
}

fn ended() -> Error {
    Error::WatchFailed(kube::Error::Service(
        "informerd ended the watch stream without a status".into(),
    ))
}
