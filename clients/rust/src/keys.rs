//! WatchKeys for Rust: a stream of [`KeyEvent`]s (keys to look at, and the resync markers) and
//! an [`Acker`] that acknowledges them on the same gRPC stream, so that the sidecar sends a key
//! again when it changes after the acknowledgement. The queue's contract is in the proto, above
//! `WatchKeysRequest`.
//!
//! ```no_run
//! # async fn run(mut cache: informerd_client::proto::cache_client::CacheClient<tonic::transport::Channel>) -> Result<(), tonic::Status> {
//! use futures::TryStreamExt;
//! use informerd_client::keys::watch_keys;
//! use informerd_client::proto::{KeyEventType, KeysSubscription};
//!
//! let subscription = KeysSubscription {
//!     resource: "pods".into(),
//!     debounce_millis: 500,
//!     ..Default::default()
//! };
//! let (mut keys, acker) = watch_keys(&mut cache, subscription).await?;
//! while let Some(event) = keys.try_next().await? {
//!     if event.r#type() == KeyEventType::Key {
//!         // reconcile event.key, then:
//!         acker.ack_event(&event);
//!     }
//! }
//! # Ok(()) }
//! ```

use futures::channel::mpsc;
use futures::StreamExt;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

use crate::proto::{
    cache_client::CacheClient, watch_keys_request, Key, KeyAck, KeyAcks, KeyEvent,
    KeysSubscription, WatchKeysRequest,
};

/// Acknowledges keys on their WatchKeys stream; cheap to clone, usable from any task.
#[derive(Clone, Debug)]
pub struct Acker {
    tx: mpsc::UnboundedSender<WatchKeysRequest>,
}

impl Acker {
    /// Acknowledges `key` as sent with `revision`: the sidecar may send it again when it
    /// changes. False when the stream has ended (subscribe again: unacknowledged keys come
    /// again).
    pub fn ack(&self, key: Key, revision: u64) -> bool {
        self.ack_all([(key, revision)])
    }

    /// Acknowledges the key of a KEY event.
    pub fn ack_event(&self, event: &KeyEvent) -> bool {
        match &event.key {
            Some(key) => self.ack(key.clone(), event.revision),
            None => true,
        }
    }

    /// Acknowledges several keys in one message.
    pub fn ack_all(&self, keys: impl IntoIterator<Item = (Key, u64)>) -> bool {
        let acks = keys
            .into_iter()
            .map(|(key, revision)| KeyAck {
                key: Some(key),
                revision,
            })
            .collect();
        self.tx
            .unbounded_send(WatchKeysRequest {
                request: Some(watch_keys_request::Request::Ack(KeyAcks { acks })),
            })
            .is_ok()
    }
}

/// Subscribes: the events of the stream, and the acker of its keys. A refused subscription
/// (`INVALID_ARGUMENT` naming the field, `NOT_FOUND` resource or cluster) is the error. The
/// subscription names the resource, and its `cluster` (empty: the sidecar's own); or use
/// [`crate::Api::watch_keys`], which takes them (and the token) from an `Api` handle.
pub async fn watch_keys(
    cache: &mut CacheClient<Channel>,
    subscription: KeysSubscription,
) -> Result<(Streaming<KeyEvent>, Acker), Status> {
    subscribe(cache, subscription, None).await
}

/// [`watch_keys`], with `token` (if any) on the request.
pub(crate) async fn subscribe(
    cache: &mut CacheClient<Channel>,
    subscription: KeysSubscription,
    token: Option<&crate::Token>,
) -> Result<(Streaming<KeyEvent>, Acker), Status> {
    let (tx, rx) = mpsc::unbounded();
    let first = WatchKeysRequest {
        request: Some(watch_keys_request::Request::Subscribe(subscription)),
    };
    let requests = futures::stream::iter([first]).chain(rx);
    let mut request = tonic::Request::new(requests);
    if let Some(token) = token {
        request = token.authorize(request)?;
    }
    let events = cache.watch_keys(request).await?.into_inner();
    Ok((events, Acker { tx }))
}
