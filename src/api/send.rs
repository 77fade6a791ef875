//! "Send, or give up after a stall": how every server stream (the chunks of a List, the events
//! of a Watch) pushes into its bounded buffer. A client that reads keeps the buffer from staying
//! full; one that stops reading is let go after [`STALL_TIMEOUT`], so that it costs the sidecar
//! a bounded amount (its buffer, and what the stream holds, for a bounded time). Shutdown and a
//! client that has gone end the send too. Each caller says what giving up means for it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::watch as signal;
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

use super::authz::Revoked;
use super::buffer;
use super::Resource;

/// How long a stream's buffer may stay full before the stream is ended with `FellBehind`.
///
/// Decision: 5 s. Far longer than a reading client takes to drain 1024 events (milliseconds),
/// short enough that a stalled one does not hold its snapshot or replay for long.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a send gave up.
pub enum GaveUp {
    /// The buffer stayed full for [`STALL_TIMEOUT`]: the client does not read.
    Stalled,
    /// The receiving end is gone: the client left.
    Closed,
    /// `stop` fired: the API is shutting down.
    Stopped,
}

/// Sends `item`, waiting while the buffer is full for up to [`STALL_TIMEOUT`]; gives up
/// earlier when the client has gone or `stop` fires.
pub async fn send_or_give_up<T>(
    tx: &mpsc::Sender<T>,
    item: T,
    stop: signal::Receiver<bool>,
) -> Result<(), GaveUp> {
    let sent = async {
        let sent = tx.send_timeout(item, STALL_TIMEOUT).await;
        Ok(sent.map_err(buffer::NotSent::from)?)
    };
    unless_stopped(sent, stop).await
}

/// [`send_or_give_up`] into a buffer bounded by bytes too (a watcher's, `api/buffer.rs`).
pub async fn send_buffered_or_give_up<T: prost::Message>(
    tx: &buffer::Sender<T>,
    item: T,
    stop: signal::Receiver<bool>,
) -> Result<(), GaveUp> {
    unless_stopped(
        async { Ok(tx.send_timeout(item, STALL_TIMEOUT).await?) },
        stop,
    )
    .await
}

impl From<buffer::NotSent> for GaveUp {
    fn from(not_sent: buffer::NotSent) -> Self {
        match not_sent {
            buffer::NotSent::Full => GaveUp::Stalled,
            buffer::NotSent::Closed => GaveUp::Closed,
        }
    }
}

/// `sent`, unless `stop` fires first.
async fn unless_stopped(
    sent: impl Future<Output = Result<(), GaveUp>>,
    mut stop: signal::Receiver<bool>,
) -> Result<(), GaveUp> {
    tokio::select! {
        sent = sent => sent,
        _ = stop.changed() => Err(GaveUp::Stopped),
    }
}

/// A response stream fed by a task: what the task sends into `rx`'s channel, then the status it
/// ends with.
pub type TaskStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Spawns the task of a stream (a Watch, a WatchKeys), counted in `resource`'s watchers while
/// it runs and by how it ended; returns the stream of what it sends into `rx`'s buffer, then
/// its ending status (`None`: the client left, nobody reads). `revoked` ends the task early
/// with its status (a re-check of the client's access that refused it), counted under that
/// status's reason. A task that ends otherwise (a panic) must not look like a clean end to a
/// client still reading: that stream ends with `INTERNAL` and `unexpected`, which says how to
/// go on.
pub fn spawn_stream<T: Send + 'static>(
    resource: Arc<Resource>,
    rx: impl Stream<Item = T> + Send + 'static,
    task: impl Future<Output = Option<Status>> + Send + 'static,
    revoked: Revoked,
    unexpected: &'static str,
) -> TaskStream<T> {
    let (end_tx, end_rx) = oneshot::channel::<Status>();
    tokio::spawn(async move {
        let _counted = resource.watching();
        let end = tokio::select! {
            end = task => end,
            refused = revoked => Some(refused),
        };
        resource.count_ended(end.as_ref());
        if let Some(status) = end {
            let _ = end_tx.send(status);
        }
    });
    let items = rx.map(Ok);
    let end = futures::stream::once(end_rx)
        .map(move |r| Err(r.unwrap_or_else(|_| Status::internal(unexpected))));
    Box::pin(items.chain(end))
}
