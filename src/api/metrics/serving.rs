//! What the API's watchers do, read from the API at each scrape: watchers open, events sent by
//! type, watchers ended by reason (the proto's `Reason` names, and `ClientClosed` for a client
//! that left).

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::api::{Api, WatchCounts};
use crate::metrics::{counters, family, gauge, gauges, in_bytes, Descriptor};

const WATCHERS: Descriptor = family("watchers", "Watch calls open now");
const SENT: Descriptor = family(
    "watch_events_sent",
    "Events put in the watchers' buffers, by type (ADDED, MODIFIED, DELETED, BOOKMARK, SYNCED)",
);
const REFUSED: Descriptor = family(
    "limit_refusals",
    "List, Watch and Ensure calls refused with RESOURCE_EXHAUSTED for a limit of the \
     configuration, by its key: maxWatchers, maxConcurrentLists, maxMemory",
);
const MAX_MEMORY: Descriptor = in_bytes(
    "limit_max_memory",
    "limits.maxMemory in effect: set in the configuration, or by default a share of the \
     container's memory limit; absent when off",
);
const ENDED: Descriptor = family(
    "watchers_ended",
    "Watch calls ended, by reason: the informerd-reason of the status (FellBehind, \
     ShuttingDown, Expired, ...), ClientClosed when the client left, or the status code",
);

/// Reads the API's watcher counts at each scrape.
#[derive(Clone)]
pub struct ServingCollector {
    api: Api,
}

impl fmt::Debug for ServingCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServingCollector").finish_non_exhaustive()
    }
}

impl ServingCollector {
    pub fn new(api: Api) -> Self {
        ServingCollector { api }
    }
}

impl Collector for ServingCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        encode_watches(&mut encoder, &self.api.watch_counts())?;
        let refused = self.api.limit_refusals();
        counters(
            &mut encoder,
            &REFUSED,
            refused.map(|(l, n)| ([("limit", l)], n)),
        )?;
        match self.api.max_memory() {
            Some(max) => gauge(&mut encoder, &MAX_MEMORY, max),
            None => Ok(()),
        }
    }
}

/// Writes the families of `counts`, by resource name.
pub(super) fn encode_watches(
    e: &mut DescriptorEncoder,
    counts: &[(String, WatchCounts)],
) -> fmt::Result {
    let watchers = counts
        .iter()
        .map(|(name, c)| ([("resource", name.as_str())], c.watchers));
    gauges(e, &WATCHERS, watchers)?;
    let sent = counts.iter().flat_map(|(name, c)| {
        c.sent
            .iter()
            .map(move |(kind, n)| ([("resource", name.as_str()), ("type", *kind)], *n))
    });
    counters(e, &SENT, sent)?;
    let ended = counts.iter().flat_map(|(name, c)| {
        c.ended
            .iter()
            .map(move |(reason, n)| ([("resource", name.as_str()), ("reason", *reason)], *n))
    });
    counters(e, &ENDED, ended)
}
