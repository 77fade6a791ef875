//! [`watcher()`]: kube-rs's watcher over the sidecar. It yields the same
//! [`kube::runtime::watcher::Event`]s with the same contract as `kube::runtime::watcher`, so that
//! `reflector`, `WatchStreamExt` and `Controller::for_stream` run on it unchanged.
//! [`metadata_watcher()`] is the same for each object's metadata only. The contract:
//!
//! - `Init`, one `InitApply` per object of the initial state, `InitDone`; then `Apply` for
//!   additions and updates and `Delete` for deletions;
//! - a broken stream yields an `Err` and resumes from the last (epoch, revision) handled,
//!   without a new `Init` (kube-rs resumes from the last resourceVersion);
//! - when the token cannot be used any more (the sidecar's `Expired` or `EpochChanged`, the
//!   analogue of the apiserver's `410 Gone`), it yields `Err(WatchError)` with code 410 and
//!   starts a new `Init`..`InitDone` cycle: a reflector then drops the objects that vanished
//!   meanwhile, exactly as after kube-rs's relist. A stream that breaks before `InitDone`
//!   starts a new cycle too.
//!
//! Like kube-rs's watcher it never ends and does not wait between attempts: every error is an
//! `Err` item, and the caller applies a backoff (`.default_backoff()`), as with kube-rs.

use futures::{stream::BoxStream, Stream, StreamExt};
use kube::core::{PartialObjectMeta, Status};
use kube::Resource;
use serde::de::DeserializeOwned;

pub use kube::runtime::watcher::{Config, Error, Event, Result};

use crate::api::{Api, Change, Start};
use crate::proto::{EventType, ResumeToken};

type Changes<K> = BoxStream<'static, std::result::Result<Change<K>, crate::Error>>;

/// Where the watcher is.
enum Phase<K> {
    /// About to start a new initial state.
    Empty,
    /// Delivering the initial state of this stream.
    Initial(Changes<K>),
    /// About to resume after the token.
    Resume(ResumeToken),
    /// Following changes after the token.
    Watching(Changes<K>, ResumeToken),
}

struct State<K> {
    api: Api<K>,
    config: Config,
    phase: Phase<K>,
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
    let state = State {
        api,
        config,
        phase: Phase::Empty,
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
    /// The next item; loops over the steps that yield nothing (bookmarks, a resumed stream).
    async fn step(&mut self) -> Result<Event<K>> {
        loop {
            let phase = std::mem::replace(&mut self.phase, Phase::Empty);
            let item = match phase {
                Phase::Empty => {
                    match Self::open(&self.api, &self.config, Start::InitialState).await {
                        Ok(changes) => {
                            self.phase = Phase::Initial(changes);
                            Ok(Some(Event::Init))
                        }
                        Err(e) => Err(e),
                    }
                }
                Phase::Resume(token) => {
                    match Self::open(&self.api, &self.config, Start::Since(token)).await {
                        Ok(changes) => {
                            self.phase = Phase::Watching(changes, token);
                            continue;
                        }
                        Err(e) => {
                            if !is_relist(&e) {
                                self.phase = Phase::Resume(token);
                            }
                            Err(e)
                        }
                    }
                }
                Phase::Initial(changes) => self.initial(changes).await,
                Phase::Watching(changes, token) => self.watching(changes, token).await,
            };
            if let Some(item) = item.transpose() {
                return item;
            }
        }
    }

    /// Opens a stream. Decision: borrows the handle and config only, not the state, whose
    /// stream (not `Sync`) must not be borrowed across the await of a `Send` future.
    async fn open(api: &Api<K>, config: &Config, start: Start) -> Result<Changes<K>> {
        match api.watch(config, start).await {
            Ok(changes) => Ok(changes.boxed()),
            Err(e) => Err(watch_error(e, Error::WatchStartFailed)),
        }
    }

    /// One event of the initial state: `InitApply`, or `InitDone` at `SYNCED`. Any end of the
    /// stream before `SYNCED` leaves the phase `Empty`: a new cycle.
    async fn initial(&mut self, mut changes: Changes<K>) -> Result<Option<Event<K>>> {
        let Some(change) = changes.next().await else {
            return Err(ended());
        };
        let change = match change {
            Ok(change) => change,
            Err(e @ crate::Error::Decode { .. }) => {
                self.phase = Phase::Initial(changes);
                return Err(watch_error(e, Error::WatchFailed));
            }
            Err(e) => return Err(watch_error(e, Error::WatchFailed)),
        };
        let event = match (change.kind, change.object) {
            (EventType::Synced, _) => {
                self.phase = Phase::Watching(changes, change.token);
                return Ok(Some(Event::InitDone));
            }
            (EventType::Added, Some(object)) => Some(Event::InitApply(object)),
            // Bookmarks, and anything the protocol does not send during an initial state.
            _ => None,
        };
        self.phase = Phase::Initial(changes);
        Ok(event)
    }

    /// One change after the initial state: `Apply`, `Delete`, or nothing for a bookmark.
    async fn watching(
        &mut self,
        mut changes: Changes<K>,
        token: ResumeToken,
    ) -> Result<Option<Event<K>>> {
        let change = match changes.next().await {
            Some(Ok(change)) => change,
            Some(Err(e @ crate::Error::Decode { .. })) => {
                // The event is lost to the caller, as an undecodable event is in kube-rs's
                // watcher; the next ones still come.
                self.phase = Phase::Watching(changes, token);
                return Err(watch_error(e, Error::WatchFailed));
            }
            Some(Err(e)) => {
                if !e.needs_relist() {
                    self.phase = Phase::Resume(token);
                }
                return Err(watch_error(e, Error::WatchFailed));
            }
            None => {
                self.phase = Phase::Resume(token);
                return Err(ended());
            }
        };
        if change.token.epoch != token.epoch {
            // Another run of the sidecar answered on a resumed stream: its revisions say
            // nothing about ours. Relist (the phase stays Empty).
            return Err(gone(&format!(
                "the watch delivered an event of epoch {} after a token of epoch {}",
                change.token.epoch, token.epoch
            )));
        }
        self.phase = Phase::Watching(changes, change.token);
        Ok(match (change.kind, change.object) {
            (EventType::Added | EventType::Modified, Some(object)) => Some(Event::Apply(object)),
            (EventType::Deleted, Some(object)) => Some(Event::Delete(object)),
            _ => None,
        })
    }
}

fn is_relist(error: &Error) -> bool {
    matches!(error, Error::WatchError(status) if status.code == 410)
}

/// An error of the sidecar as a kube-rs watcher error: a token that needs a relist is the
/// apiserver's `410 Gone` (`WatchError`), anything else `wrap`s the [`crate::Error`] as a kube
/// client's service error (callers can downcast it).
fn watch_error(error: crate::Error, wrap: fn(kube::Error) -> Error) -> Error {
    if error.needs_relist() {
        return gone(&error.to_string());
    }
    wrap(kube::Error::Service(Box::new(error)))
}

fn gone(message: &str) -> Error {
    Error::WatchError(Box::new(Status::failure(message, "Expired").with_code(410)))
}

fn ended() -> Error {
    Error::WatchFailed(kube::Error::Service(
        "informerd ended the watch stream without a status".into(),
    ))
}
