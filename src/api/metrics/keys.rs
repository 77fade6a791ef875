//! What the WatchKeys streams do, read from the API at each scrape, by resource: streams open,
//! changes marked in their queues against keys sent (their difference is what the queues
//! coalesced), resyncs and how many outlived the change log, and what the queues hold now (a consumer falling behind shows here,
//! since WatchKeys never ends a slow one).

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::api::{Api, KeyCountsSnapshot};
use crate::metrics::{counters, family, gauges, in_bytes, Descriptor};

const STREAMS: Descriptor = family("watch_keys_streams", "WatchKeys streams open now");
const CHANGES: Descriptor = family(
    "watch_keys_changes",
    "Changes marked in WatchKeys queues: one per key a change concerns, per stream; changes \
     to a key already pending merge into it, so this minus keys sent is what was coalesced",
);
const SENT: Descriptor = family(
    "watch_keys_sent",
    "Keys sent by WatchKeys streams (KEY events)",
);
const RESYNCS: Descriptor = family(
    "watch_keys_resyncs",
    "WatchKeys resyncs (every key once more): a stream without a usable resume token, or \
     whose changes the change log no longer held",
);
const RESUMES: Descriptor = family(
    "watch_keys_resync_resumes",
    "WatchKeys resyncs that outlived the change log and read the rest of their view at a \
     newer revision (no key sent twice); steady growth says changeLog.maxEvents is short for \
     how fast consumers read a resync",
);
const PENDING: Descriptor = family(
    "watch_keys_pending",
    "Keys pending or in flight (not acknowledged) in the WatchKeys queues now",
);
const QUEUE: Descriptor = in_bytes(
    "watch_keys_queue",
    "What the WatchKeys queues hold now, estimated (entries and key strings)",
);

/// Reads the API's WatchKeys counters at each scrape.
#[derive(Clone)]
pub struct KeysCollector {
    api: Api,
}

impl fmt::Debug for KeysCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeysCollector").finish_non_exhaustive()
    }
}

impl KeysCollector {
    pub fn new(api: Api) -> Self {
        KeysCollector { api }
    }
}

impl Collector for KeysCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        encode_keys(&mut encoder, &self.api.key_counts())
    }
}

/// Writes the families of `counts`, by resource name.
pub(super) fn encode_keys(
    e: &mut DescriptorEncoder,
    counts: &[(String, KeyCountsSnapshot)],
) -> fmt::Result {
    let each = |f: fn(&KeyCountsSnapshot) -> i64| {
        counts
            .iter()
            .map(move |(name, c)| ([("resource", name.as_str())], f(c)))
    };
    let total = |f: fn(&KeyCountsSnapshot) -> u64| {
        counts
            .iter()
            .map(move |(name, c)| ([("resource", name.as_str())], f(c)))
    };
    gauges(e, &STREAMS, each(|c| c.streams))?;
    counters(e, &CHANGES, total(|c| c.changes))?;
    counters(e, &SENT, total(|c| c.sent))?;
    counters(e, &RESYNCS, total(|c| c.resyncs))?;
    counters(e, &RESUMES, total(|c| c.resumes))?;
    gauges(e, &PENDING, each(|c| c.pending))?;
    gauges(e, &QUEUE, each(|c| c.bytes))
}
