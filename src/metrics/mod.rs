//! Prometheus metrics and the probes of the kubelet, on one plain-HTTP port
//! (`server.metrics`): `/livez`, `/readyz` and `/metrics`.
//!
//! What is measured is read, at each scrape, from what the sidecar already keeps: the fleet's
//! status board and store statistics (`fleet`), the API's watcher counts (`serving`) and
//! WatchKeys queues (`keys`), the
//! allocator and the kernel (`process`). Only the RPC counters are kept here (`rpc`, a tower
//! layer on the gRPC server), because nothing else counts calls. `http` serves it all.
//!
//! Names follow Prometheus conventions: the `informerd_` prefix, base units in the name
//! (`_bytes`, `_seconds`), `_total` on counters. Labels are bounded: `resource` (the config's
//! names; `cluster/name` for a remote cluster's), `cluster`, `scope` (a namespace of the config or of the namespaceSelector's matches, `*`, or
//! `namespaceSelector`, as the Status RPC shows them), `state`, `reason`, `type`, and the
//! RPCs' `service`, `method` and `code`. Never an object, never a client.
//!
//! What it must NOT do: keep a second copy of what the fleet or the API count (collectors read
//! theirs at scrape time), or serve anything of the cache: the port is plain HTTP, on any
//! address.

mod authz;
mod clusters;
mod fleet;
mod http;
mod keys;
mod on_demand;
mod process;
mod rpc;
mod serving;

use std::fmt;
use std::sync::Arc;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::api::Api;
use crate::fleet::Fleet;

pub use self::http::{bind, serve, MetricsError};
pub use authz::{AuthzCheck, AUTHZ};
pub use rpc::{RpcMetricsLayer, RPC};

/// The prefix of every metric.
pub const PREFIX: &str = "informerd";

/// The registry of every metric of a sidecar serving `fleet` through `api`.
pub fn registry(fleet: Arc<Fleet>, api: Api) -> Registry {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(clusters::ClusterCollector::new(fleet.clone())));
    registry.register_collector(Box::new(fleet::FleetCollector::new(fleet)));
    registry.register_collector(Box::new(serving::ServingCollector::new(api.clone())));
    registry.register_collector(Box::new(keys::KeysCollector::new(api.clone())));
    registry.register_collector(Box::new(on_demand::OnDemandCollector::new(api.clone())));
    registry.register_collector(Box::new(process::ProcessCollector));
    RPC.register(&mut registry);
    AUTHZ.register(&mut registry);
    registry
}

/// The exposition of `registry`: OpenMetrics text, what the Prometheus client writes.
pub fn render(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)
        .expect("writing to a String does not fail");
    text
}

/// The name, help and unit of a family written at scrape time.
struct Descriptor {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
}

const fn family(name: &'static str, help: &'static str) -> Descriptor {
    Descriptor {
        name,
        help,
        unit: None,
    }
}

const fn in_bytes(name: &'static str, help: &'static str) -> Descriptor {
    Descriptor {
        name,
        help,
        unit: Some(Unit::Bytes),
    }
}

const fn in_seconds(name: &'static str, help: &'static str) -> Descriptor {
    Descriptor {
        name,
        help,
        unit: Some(Unit::Seconds),
    }
}

/// Writes a family of `metric_type`: one sample per label set.
fn write_family<L, M>(
    encoder: &mut DescriptorEncoder,
    d: &Descriptor,
    metric_type: MetricType,
    samples: impl IntoIterator<Item = (L, M)>,
) -> fmt::Result
where
    L: EncodeLabelSet,
    M: EncodeMetric,
{
    let mut metric = encoder.encode_descriptor(d.name, d.help, d.unit.as_ref(), metric_type)?;
    for (labels, value) in samples {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Writes a gauge family: one sample per label set.
fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    d: &Descriptor,
    samples: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let samples = samples.into_iter().map(|(l, v)| (l, ConstGauge::new(v)));
    write_family(encoder, d, MetricType::Gauge, samples)
}

/// Writes a gauge without labels.
fn gauge(
    encoder: &mut DescriptorEncoder,
    d: &Descriptor,
    value: impl EncodeGaugeValue,
) -> fmt::Result {
    let metric = encoder.encode_descriptor(d.name, d.help, d.unit.as_ref(), MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// Writes a counter family: one sample per label set (`d.name` without `_total`).
fn counters<L: EncodeLabelSet, V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    d: &Descriptor,
    samples: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let samples = samples.into_iter().map(|(l, v)| (l, ConstCounter::new(v)));
    write_family(encoder, d, MetricType::Counter, samples)
}

#[cfg(test)]
mod tests;
