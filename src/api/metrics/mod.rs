//! The API's metrics, registered into `metrics` (which imports no component): what the
//! watchers (`serving`), the WatchKeys queues (`keys`) and the on-demand caches (`on_demand`)
//! do, read from the API at each scrape; and the RPC counters (`rpc`, a tower layer on the gRPC
//! server), the only figures counted for metrics alone, as nothing else counts calls. The
//! authorization families are `authz`'s, beside the decisions they count.

mod keys;
mod on_demand;
mod rpc;
mod serving;
#[cfg(test)]
mod tests;

pub use rpc::{RpcMetricsLayer, RPC};

use super::authz::AUTHZ;
use super::Api;
use crate::metrics::Registry;

impl Api {
    /// Registers the API's collectors and families into `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(serving::ServingCollector::new(self.clone())));
        registry.register_collector(Box::new(keys::KeysCollector::new(self.clone())));
        registry.register_collector(Box::new(on_demand::OnDemandCollector::new(self.clone())));
        RPC.register(registry);
        AUTHZ.register(registry);
    }
}
