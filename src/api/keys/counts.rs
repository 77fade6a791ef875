//! What the WatchKeys streams of one resource do, for metrics: streams open, changes marked,
//! keys sent, resyncs, and what the streams' queues hold now. An operator reads from them
//! whether the queues coalesce (changes marked against keys sent) and whether a consumer is
//! falling behind (keys pending, queue bytes), which the Watch counters cannot show.
//!
//! Decision: counters live per resource (like the Watch counters), never per stream or client,
//! so the metrics' labels stay bounded. A stream reports its queue's size as a difference from
//! what it reported last ([`StreamGauge`]), and takes it back when it ends.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// The WatchKeys counters of one resource.
#[derive(Debug, Default)]
pub struct KeyCounts {
    streams: AtomicI64,
    changes: AtomicU64,
    sent: AtomicU64,
    resyncs: AtomicU64,
    resumes: AtomicU64,
    pending: AtomicI64,
    bytes: AtomicI64,
}

/// A reading of [`KeyCounts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyCountsSnapshot {
    /// WatchKeys streams open now.
    pub streams: i64,
    /// Changes marked in the streams' queues: one per key a change concerns, per stream.
    pub changes: u64,
    /// Keys sent (KEY events).
    pub sent: u64,
    /// Resyncs started (every key once more: no token, a token too old or of another epoch,
    /// or a change log that no longer reached back).
    pub resyncs: u64,
    /// Resyncs that outlived the change log and read the rest of their view at a newer
    /// revision (`Pages::resume`).
    pub resumes: u64,
    /// Keys pending or in flight, over every open stream.
    pub pending: i64,
    /// The queues' estimated bytes, over every open stream.
    pub bytes: i64,
}

impl KeyCounts {
    pub fn snapshot(&self) -> KeyCountsSnapshot {
        KeyCountsSnapshot {
            streams: self.streams.load(Ordering::Relaxed),
            changes: self.changes.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            resyncs: self.resyncs.load(Ordering::Relaxed),
            resumes: self.resumes.load(Ordering::Relaxed),
            pending: self.pending.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    pub fn changed(&self, keys: usize) {
        self.changes.fetch_add(keys as u64, Ordering::Relaxed);
    }

    pub fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub fn resynced(&self) {
        self.resyncs.fetch_add(1, Ordering::Relaxed);
    }

    pub fn resync_resumed(&self) {
        self.resumes.fetch_add(1, Ordering::Relaxed);
    }
}

/// One stream's share of its resource's gauges: counted open from its creation, its queue's
/// last reported size added in; all taken back on drop.
#[derive(Debug)]
pub struct StreamGauge {
    counts: Arc<KeyCounts>,
    pending: i64,
    bytes: i64,
}

impl StreamGauge {
    pub fn open(counts: Arc<KeyCounts>) -> StreamGauge {
        counts.streams.fetch_add(1, Ordering::Relaxed);
        StreamGauge {
            counts,
            pending: 0,
            bytes: 0,
        }
    }

    /// Reports the stream's queue as holding `pending` keys (pending or in flight) in `bytes`.
    pub fn report(&mut self, pending: usize, bytes: usize) {
        let (pending, bytes) = (pending as i64, bytes as i64);
        let c = &self.counts;
        c.pending
            .fetch_add(pending - self.pending, Ordering::Relaxed);
        c.bytes.fetch_add(bytes - self.bytes, Ordering::Relaxed);
        (self.pending, self.bytes) = (pending, bytes);
    }
}

impl Drop for StreamGauge {
    fn drop(&mut self) {
        self.report(0, 0);
        self.counts.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_report_their_queues_and_take_them_back_when_they_end() {
        let counts = Arc::new(KeyCounts::default());
        let mut a = StreamGauge::open(counts.clone());
        let mut b = StreamGauge::open(counts.clone());
        a.report(10, 1000);
        b.report(5, 400);
        a.report(4, 600);
        let s = counts.snapshot();
        assert_eq!((s.streams, s.pending, s.bytes), (2, 9, 1000));
        drop(a);
        let s = counts.snapshot();
        assert_eq!((s.streams, s.pending, s.bytes), (1, 5, 400));
        drop(b);
        assert_eq!(counts.snapshot(), KeyCountsSnapshot::default());
    }

    #[test]
    fn counters_add_up() {
        let counts = KeyCounts::default();
        counts.changed(3);
        counts.changed(2);
        counts.sent();
        counts.resynced();
        let s = counts.snapshot();
        assert_eq!((s.changes, s.sent, s.resyncs), (5, 1, 1));
    }
}
