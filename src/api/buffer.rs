//! A watch stream's buffer, bounded by events and by bytes: what the sidecar holds for a client
//! that reads more slowly than changes come.
//!
//! A watcher renders each event (its object's JSON) before it is read. Bounded by a count
//! alone (1024 events), a buffer of large objects (ConfigMaps of 1 MiB) could hold a GiB for
//! one slow client, which no `maxMemory` refusal can stop (the watch is already open). So each
//! buffer also has a budget of bytes: an event waits (within the stall timeout, as for a full buffer)
//! until the client has read enough of what is before it. An event larger than the whole budget
//! waits until the buffer is empty, and then goes alone.
//!
//! Decision: [`BUFFER_BYTES`] per watcher, 8 MiB: thousands of typical objects (a pod as
//! cached is 1 to 10 KB), so a reading client never waits on it, and the sidecar's worst case
//! stays `maxWatchers` × 8 MiB of rendered events, not × 1024 objects of any size.
//!
//! A watch's initial state narrows its buffer to [`INITIAL_BYTES`] until SYNCED
//! ([`Sender::narrow`], [`Sender::widen`]).
//!
//! Decision: the initial state is read from a snapshot as the client takes it, so rendering
//! far ahead of the client buys nothing, and the NVSentinel profile (issue 32) showed what it
//! costs: five informers starting at once, each of 10,000 nodes or pods, held up to 8 MiB
//! each of rendered objects the client had not read yet (informerd's RSS went from 81 to
//! 115 MiB while they started, and came back to 75). Changes after SYNCED come as they
//! happen, and a slow client must not lose them: the whole budget is theirs.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use prost::Message;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// The bytes of rendered events one watcher's buffer holds at most (see the module's Decision).
pub const BUFFER_BYTES: usize = 8 << 20;

/// The bytes a narrowed buffer holds at most: an initial state's (see the module's Decision).
/// 256 KiB: a page or more of typical objects rendered ahead. The initial state's rendering,
/// not the buffer, is what a client waits for; the connection's windows hold what is in
/// flight.
pub const INITIAL_BYTES: usize = 256 << 10;

/// Why a send did not go through.
#[derive(Debug, PartialEq, Eq)]
pub enum NotSent {
    /// No room (events or bytes) before the timeout, or at once for [`Sender::try_send`].
    Full,
    /// The receiving end is gone.
    Closed,
}

impl<T> From<mpsc::error::SendTimeoutError<T>> for NotSent {
    fn from(e: mpsc::error::SendTimeoutError<T>) -> Self {
        match e {
            mpsc::error::SendTimeoutError::Timeout(_) => NotSent::Full,
            mpsc::error::SendTimeoutError::Closed(_) => NotSent::Closed,
        }
    }
}

/// The sending side of a bounded buffer.
pub struct Sender<T> {
    tx: mpsc::Sender<(T, OwnedSemaphorePermit)>,
    bytes: Arc<Semaphore>,
    budget: usize,
    /// While narrowed, the permits set aside (the budget less the narrowed one), and the
    /// narrowed budget.
    narrowed: Option<(OwnedSemaphorePermit, usize)>,
}

/// The receiving side: the events, each giving its bytes back once taken.
pub type Receiver<T> = Pin<Box<dyn Stream<Item = T> + Send>>;

/// A buffer of at most `events` events and about `bytes` bytes of them.
pub fn channel<T: Send + 'static>(events: usize, bytes: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = mpsc::channel(events);
    let budget = bytes.clamp(1, Semaphore::MAX_PERMITS);
    let sender = Sender {
        tx,
        bytes: Arc::new(Semaphore::new(budget)),
        budget,
        narrowed: None,
    };
    // The permit is dropped as the event is handed on: its bytes are the stream's to send now.
    let receiver = tokio_stream::wrappers::ReceiverStream::new(rx).map(|(item, _bytes)| item);
    (sender, Box::pin(receiver))
}

impl<T: Message> Sender<T> {
    /// Sends `item`, waiting up to `timeout` for room.
    pub async fn send_timeout(&self, item: T, timeout: Duration) -> Result<(), NotSent> {
        let n = self.permits(&item);
        let sent = tokio::time::timeout(timeout, async {
            let bytes = self
                .bytes
                .clone()
                .acquire_many_owned(n)
                .await
                .expect("the semaphore is never closed");
            let slot = self.tx.reserve().await.map_err(|_| NotSent::Closed)?;
            slot.send((item, bytes));
            Ok(())
        });
        sent.await.unwrap_or(Err(NotSent::Full))
    }

    /// Sends `item` if there is room now.
    pub fn try_send(&self, item: T) -> Result<(), NotSent> {
        let n = self.permits(&item);
        let bytes = self
            .bytes
            .clone()
            .try_acquire_many_owned(n)
            .map_err(|_| NotSent::Full)?;
        self.tx.try_send((item, bytes)).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => NotSent::Full,
            mpsc::error::TrySendError::Closed(_) => NotSent::Closed,
        })
    }

    /// Narrows the buffer to `bytes` until [`Sender::widen`], by setting aside the rest of the
    /// budget. Only while the buffer is empty (at a watch's start); otherwise it stays as it is.
    pub fn narrow(&mut self, bytes: usize) {
        let bytes = bytes.clamp(1, self.budget);
        let aside = u32::try_from(self.budget - bytes).unwrap_or(u32::MAX);
        if self.narrowed.is_some() || aside == 0 {
            return;
        }
        if let Ok(permit) = self.bytes.clone().try_acquire_many_owned(aside) {
            self.narrowed = Some((permit, bytes));
        }
    }

    /// Gives the buffer its whole budget back.
    pub fn widen(&mut self) {
        self.narrowed = None;
    }

    /// Completes when the receiving end is gone.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }

    /// The bytes `item` takes of the budget; the whole (narrowed) budget at most.
    fn permits(&self, item: &T) -> u32 {
        let budget = self.narrowed.as_ref().map_or(self.budget, |(_, b)| *b);
        let n = item.encoded_len().clamp(1, budget);
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    fn event(bytes: usize) -> proto::WatchEvent {
        proto::WatchEvent {
            object: Some(proto::Object {
                json: vec![b'x'; bytes].into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn the_bytes_bound_the_buffer_until_the_client_reads() {
        let (tx, mut rx) = channel::<proto::WatchEvent>(1024, 1000);
        tx.try_send(event(600)).expect("room for the first");
        assert_eq!(
            tx.try_send(event(600)),
            Err(NotSent::Full),
            "over the bytes"
        );
        let waited = tx.send_timeout(event(600), Duration::from_millis(10)).await;
        assert_eq!(waited, Err(NotSent::Full), "nobody read");
        assert!(rx.next().await.is_some());
        tx.try_send(event(600)).expect("room once read");
        // Larger than the whole budget: alone, once the buffer is empty.
        let big = tokio::spawn(async move {
            tx.send_timeout(event(5000), Duration::from_secs(60))
                .await?;
            Ok::<_, NotSent>(tx)
        });
        assert_eq!(rx.next().await.map(|e| e.encoded_len() < 1000), Some(true));
        let tx = big.await.unwrap().expect("the big event went through");
        assert_eq!(rx.next().await.map(|e| e.encoded_len() > 5000), Some(true));
        drop(rx);
        assert_eq!(tx.try_send(event(1)), Err(NotSent::Closed));
    }

    #[tokio::test]
    async fn a_narrowed_buffer_holds_less_until_widened() {
        let (mut tx, mut rx) = channel::<proto::WatchEvent>(1024, 10_000);
        tx.narrow(1000);
        tx.try_send(event(600)).expect("room for the first");
        assert_eq!(
            tx.try_send(event(600)),
            Err(NotSent::Full),
            "over the narrowed bytes"
        );
        // Larger than the narrowed budget: alone, once the buffer is empty, not never.
        assert!(rx.next().await.is_some());
        tx.try_send(event(5000))
            .expect("a big event goes alone into an empty narrowed buffer");
        assert_eq!(tx.try_send(event(1)), Err(NotSent::Full));
        assert!(rx.next().await.is_some());
        tx.widen();
        for _ in 0..5 {
            tx.try_send(event(1500))
                .expect("the whole budget once widened");
        }
        // Narrowing a buffer that holds events would wait on them: it is left as it is.
        tx.widen();
        tx.narrow(1000);
        tx.try_send(event(600)).expect("not narrowed");
    }

    #[tokio::test]
    async fn the_event_count_still_bounds_small_events() {
        let (tx, _rx) = channel::<proto::WatchEvent>(2, 1 << 20);
        tx.try_send(event(1)).unwrap();
        tx.try_send(event(1)).unwrap();
        assert_eq!(tx.try_send(event(1)), Err(NotSent::Full));
    }
}
