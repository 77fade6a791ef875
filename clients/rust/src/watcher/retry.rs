//! What [`super::watcher()`] does when a stream ends: which ends it handles quietly (a sidecar
//! that shut down, restarted or is briefly absent; a token that needs a relist), which it
//! surfaces as an `Err` item (a request the sidecar refuses as it is), and the short backoff
//! of its quiet reconnects, bounded by [`QUIET_PERIOD`].
//!
//! Why: kube-rs's watcher re-watches quietly when the apiserver closes a watch, and kube-rs's
//! examples end on the first `Err` (`try_next()?`) while a `Controller`'s backoff, shared by
//! its streams, grows with every `Err` of any of them. A sidecar restart must look to them as
//! an apiserver closing its watches does: nothing, or a relist.

use std::time::{Duration, Instant};

use kube::runtime::watcher::Error;

use crate::proto::Reason;

/// How long the watcher reconnects quietly while the sidecar is unreachable or shutting down
/// before it yields `Err` items (one per failed attempt, each poll attempting again).
///
/// Decision: 30 s. A sidecar restart takes seconds (a cold start lists from the apiserver
/// first, and the watch waits for that inside the call, not here); a sidecar down for longer
/// is an outage the controller should see (logs, readiness), and kube's backoff takes over.
pub const QUIET_PERIOD: Duration = Duration::from_secs(30);

/// The first wait before reconnecting, doubled after each failed attempt up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(100);

/// The longest wait between quiet reconnects.
///
/// Decision: no jitter. The attempts go to one local sidecar (a socket beside the
/// controller), a handful of streams per process: their coinciding costs nothing, and a
/// restarted sidecar is found within 2 s of being back.
const MAX_DELAY: Duration = Duration::from_secs(2);

/// Why a stream (or the call opening it) ended, and what the watcher does about it.
pub(super) enum Fault {
    /// The token cannot be used (`Expired`, `EpochChanged`, an event of another epoch): start
    /// a new `Init`..`InitDone` cycle, yielding no error.
    Relist,
    /// The sidecar fell behind this consumer's pace (`FellBehind`): resume at once, quietly,
    /// as kube-rs's watcher does when the apiserver closes a slow watch.
    Resume,
    /// The sidecar shut down, restarted, or cannot be reached: reconnect quietly with a
    /// backoff, for up to [`QUIET_PERIOD`]; then this error is yielded.
    Reconnect(Error),
    /// The request itself is refused, or an object does not decode: yield the error at once.
    Surface(Error),
}

impl Fault {
    /// The fault of an error of the sidecar's, or of the connection to it. When it is
    /// yielded, the error `wrap`s it as a kube client's service error (callers can downcast
    /// it to [`crate::Error`]).
    pub(super) fn of(cause: crate::Error, wrap: fn(kube::Error) -> Error) -> Fault {
        let yielded = |cause: crate::Error| wrap(kube::Error::Service(Box::new(cause)));
        let crate::Error::Status { status, .. } = &cause else {
            // A `Decode` error (or a refused option): the sidecar is fine, the request is not.
            return Fault::Surface(yielded(cause));
        };
        match cause.reason() {
            Some(Reason::Expired | Reason::EpochChanged) => Fault::Relist,
            Some(Reason::FellBehind) => Fault::Resume,
            Some(Reason::ShuttingDown | Reason::NotSynced) => Fault::Reconnect(yielded(cause)),
            // Decision: the over-limit refusals (`TooManyWatchers`, `OverMemoryLimit`, ...)
            // are surfaced: they ask the caller to back off, and an `Err` item is what makes
            // kube's backoff (`.default_backoff()`, a Controller's) do so. Retrying them
            // quietly would keep the load on a sidecar that said it has too much.
            // Invalid, Forbidden, Unauthenticated, NotFound: the request is wrong as it is.
            Some(_) => Fault::Surface(yielded(cause)),
            None if unreachable(status) => Fault::Reconnect(yielded(cause)),
            None => Fault::Surface(yielded(cause)),
        }
    }

    /// A stream the sidecar ended without a status: it stopped (it ends every watch with
    /// `ShuttingDown` when it can).
    pub(super) fn ended(error: Error) -> Fault {
        Fault::Reconnect(error)
    }
}

/// Whether a status without an informerd reason says the sidecar could not be reached or the
/// connection broke: `UNAVAILABLE` (nothing listening, no socket, a refused stream), or an error
/// of the transport under the call (a connection reset mid-stream is `UNKNOWN` or `INTERNAL`
/// with the transport's error as its source).
fn unreachable(status: &tonic::Status) -> bool {
    use tonic::Code;
    match status.code() {
        Code::Unavailable => true,
        Code::Unknown | Code::Internal | Code::Cancelled | Code::Aborted => {
            crate::transport_failure(status).is_some()
        }
        _ => false,
    }
}

/// The watcher's quiet reconnects: since when they have failed, and the next wait.
#[derive(Debug, Default)]
pub(super) struct Outage {
    /// When the first failed attempt of this outage happened; `None`: no outage.
    since: Option<Instant>,
    /// The wait before the next attempt.
    delay: Duration,
}

impl Outage {
    /// The sidecar answered (a watch opened): the outage, if any, is over.
    pub(super) fn over(&mut self) {
        self.since = None;
        self.delay = Duration::ZERO;
    }

    /// An attempt failed with a [`Fault::Reconnect`]: the wait before the next attempt while
    /// within [`QUIET_PERIOD`], or `None` once the quiet period has passed (the error is then
    /// yielded, and the next poll attempts again at once: the caller's backoff paces it).
    pub(super) fn failed(&mut self) -> Option<Duration> {
        self.failed_at(Instant::now())
    }

    fn failed_at(&mut self, now: Instant) -> Option<Duration> {
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) >= QUIET_PERIOD {
            return None;
        }
        self.delay = if self.delay.is_zero() {
            FIRST_DELAY
        } else {
            (self.delay * 2).min(MAX_DELAY)
        };
        Some(self.delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, reason: Option<Reason>) -> crate::Error {
        let status = match reason {
            Some(reason) => reason.status("x"),
            None => tonic::Status::new(code, "x"),
        };
        crate::Error::Status {
            call: "Watch",
            resource: "pods".into(),
            status: Box::new(status),
        }
    }

    fn fault(cause: crate::Error) -> &'static str {
        match Fault::of(cause, Error::WatchFailed) {
            Fault::Relist => "relist",
            Fault::Resume => "resume",
            Fault::Reconnect(_) => "reconnect",
            Fault::Surface(_) => "surface",
        }
    }

    #[test]
    fn a_sidecar_away_is_reconnected_a_wrong_request_surfaced() {
        use tonic::Code;
        let reason = |r| fault(status(Code::Ok, Some(r)));
        assert_eq!(reason(Reason::ShuttingDown), "reconnect");
        assert_eq!(reason(Reason::NotSynced), "reconnect");
        assert_eq!(reason(Reason::Expired), "relist");
        assert_eq!(reason(Reason::EpochChanged), "relist");
        assert_eq!(reason(Reason::FellBehind), "resume");
        for r in [
            Reason::Invalid,
            Reason::NotFound,
            Reason::Forbidden,
            Reason::Unauthenticated,
            Reason::TooManyWatchers,
            Reason::OverMemoryLimit,
        ] {
            assert_eq!(reason(r), "surface", "{r:?}");
        }
        // The transport's own statuses carry no reason.
        assert_eq!(fault(status(Code::Unavailable, None)), "reconnect");
        assert_eq!(fault(status(Code::InvalidArgument, None)), "surface");
        assert_eq!(
            fault(status(Code::Unknown, None)),
            "surface",
            "not from the transport"
        );
    }

    #[test]
    fn reconnects_back_off_and_stay_quiet_for_the_quiet_period() {
        let mut outage = Outage::default();
        let mut now = Instant::now();
        let mut waits = Vec::new();
        while let Some(wait) = outage.failed_at(now) {
            waits.push(wait);
            now += wait;
        }
        assert_eq!(waits[..3], [FIRST_DELAY, FIRST_DELAY * 2, FIRST_DELAY * 4]);
        assert!(waits.iter().all(|w| *w <= MAX_DELAY), "{waits:?}");
        let quiet: Duration = waits.iter().sum();
        assert!(quiet >= QUIET_PERIOD && quiet < QUIET_PERIOD + MAX_DELAY);
        assert_eq!(
            outage.failed_at(now),
            None,
            "surfaced until the sidecar answers"
        );
        outage.over();
        assert_eq!(outage.failed_at(now), Some(FIRST_DELAY), "a new outage");
    }
}
