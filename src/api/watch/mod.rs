//! Watches: one hub per resource decodes each change once and broadcasts it; each watcher
//! applies its own filters (transitions included), predicates and field mask, and sends into a
//! bounded buffer of its own.
//!
//! Delivery, exactly:
//! - A watcher subscribes to the hub *before* it reads the store (the initial state, or the
//!   change log from its resume revision, up to the store's revision `S` at that read). Every
//!   change after `S` is broadcast after that read, so it reaches the watcher; changes up to
//!   `S` that also arrive from the hub are skipped by revision.
//! - When the broadcast ring overflows for a watcher (it lags by more than [`HUB_CAPACITY`](hub::HUB_CAPACITY)
//!   changes), the watcher reads what it missed from the store's change log instead: the ring
//!   only saves decoding work, the log is the source of truth.
//! - Each watcher has a buffer of [`WATCHER_BUFFER`] events and 8 MiB of them, 1 MiB until
//!   SYNCED (`api/buffer.rs`: rendered large objects must not add up to an OOM kill, and an
//!   initial state is rendered as the client reads it, not ahead). A client that reads keeps it from
//!   staying full; a watcher whose buffer stays full for [`STALL_TIMEOUT`](crate::api::send::STALL_TIMEOUT) is ended with
//!   `RESOURCE_EXHAUSTED`/`FellBehind` after the events already buffered, and resumes from the
//!   revision of the last event it received. So a burst (a large initial state, a replay, a
//!   relist upstream) never ends a watcher that reads, and one that stops reading costs the
//!   others nothing and the sidecar a bounded amount: its buffer, for a bounded time.
//!
//! - `hub`: one per resource, follows the store and broadcasts decoded changes.
//! - `spec`: a Watch request, validated.
//! - `watcher`: the task of one watch, and its response stream.
//!
//! What it must NOT do: keep anything unbounded for a watcher (the ring is shared and fixed,
//! each buffer is bounded), or let one watcher wait on another.

mod held;
mod hub;
mod spec;
mod watcher;

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use tonic::Status;

use super::reason::Reason;
use crate::proto;
pub use hub::{Broadcast, Event, Hub};
pub use spec::WatchSpec;
pub use watcher::start;

/// Events buffered per watcher.
///
/// Decision: 1024. A controller that handles events in a loop keeps the buffer near empty;
/// one that stalls gets a status it can act on (resume) instead of the sidecar holding an
/// unbounded backlog for it. At ~1 KiB per event, about 1 MiB per stalled watcher at most, plus
/// what HTTP/2 flow control lets the connection hold.
pub const WATCHER_BUFFER: usize = 1024;
/// Bookmarks when the request does not ask for an interval.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(10);

/// The response stream of one watch.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<proto::WatchEvent, Status>> + Send>>;

/// The status that ends calls when the API stops (`UNAVAILABLE`/`ShuttingDown`).
pub fn shutting_down() -> Status {
    Reason::ShuttingDown.status(
        "informerd is shutting down: reconnect and watch with since = the (epoch, revision) of \
         the last event you received",
    )
}
