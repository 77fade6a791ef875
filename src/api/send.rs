//! "Send, or give up after a stall": how every server stream (the chunks of a List, the events
//! of a Watch) pushes into its bounded buffer. A client that reads keeps the buffer from staying
//! full; one that stops reading is let go after [`STALL_TIMEOUT`], so that it costs the sidecar
//! a bounded amount (its buffer, and what the stream holds, for a bounded time). Shutdown and a
//! client that has gone end the send too. Each caller says what giving up means for it.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::sync::watch as signal;

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
    mut stop: signal::Receiver<bool>,
) -> Result<(), GaveUp> {
    tokio::select! {
        sent = tx.send_timeout(item, STALL_TIMEOUT) => match sent {
            Ok(()) => Ok(()),
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => Err(GaveUp::Stalled),
            Err(mpsc::error::SendTimeoutError::Closed(_)) => Err(GaveUp::Closed),
        },
        _ = stop.changed() => Err(GaveUp::Stopped),
    }
}
