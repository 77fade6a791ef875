//! The on-demand caches (`onDemand`, the `Ensure` RPC), read from the API at each scrape: how
//! many run, their clients and idle time, and how many started and stopped, by why.
//!
//! Decision: the per-cache families are labelled by `cluster` (`default`, or a name of
//! `clusters`) and `resource` (the on-demand cache's name, as clients use it with that
//! cluster); they stay bounded, as `onDemand.maxCaches` bounds the caches that run at once in
//! all clusters together.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::api::{Api, STOPPED_IDLE, STOPPED_MAX_OBJECTS};
use crate::metrics::{counters, family, gauge, gauges, in_seconds, Descriptor};

const CACHES: Descriptor = family("on_demand_caches", "On-demand caches running now");
const CLIENTS: Descriptor = family(
    "on_demand_clients",
    "Watch calls open on an on-demand cache now, by cluster and resource",
);
const IDLE: Descriptor = in_seconds(
    "on_demand_idle",
    "Time since a call last used an on-demand cache (0 while a Watch is open), by cluster and \
     resource; \
     it is stopped at onDemand.idleTimeout",
);
const STARTS: Descriptor = family("on_demand_starts", "On-demand caches started by Ensure");
const STOPS: Descriptor = family(
    "on_demand_stops",
    "On-demand caches stopped, by reason: Idle (no client for onDemand.idleTimeout), \
     MaxObjects (more objects than onDemand.maxObjects)",
);

/// Reads the API's on-demand caches at each scrape.
#[derive(Clone)]
pub struct OnDemandCollector {
    api: Api,
}

impl fmt::Debug for OnDemandCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnDemandCollector").finish_non_exhaustive()
    }
}

impl OnDemandCollector {
    pub fn new(api: Api) -> Self {
        OnDemandCollector { api }
    }
}

impl Collector for OnDemandCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let report = self.api.on_demand_report();
        gauge(&mut encoder, &CACHES, report.caches.len() as i64)?;
        let clients = report.caches.iter().map(|c| (labels(c), c.clients as i64));
        gauges(&mut encoder, &CLIENTS, clients)?;
        let idle = report.caches.iter().map(|c| (labels(c), c.idle_seconds));
        gauges(&mut encoder, &IDLE, idle)?;
        counters(
            &mut encoder,
            &STARTS,
            [(Vec::<(&str, &str)>::new(), report.starts)],
        )?;
        // Every reason, 0 included: a rate over the family works before the first stop.
        let stops = [STOPPED_IDLE, STOPPED_MAX_OBJECTS].map(|reason| {
            let n = report.stops.get(reason).copied().unwrap_or(0);
            ([("reason", reason)], n)
        });
        counters(&mut encoder, &STOPS, stops)
    }
}

/// The labels of one on-demand cache's series.
fn labels(c: &crate::proto::OnDemandStatus) -> [(&'static str, &str); 2] {
    [
        ("cluster", c.cluster.as_str()),
        ("resource", c.resource.as_str()),
    ]
}
