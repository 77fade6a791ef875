//! Prometheus metrics and the probes of the kubelet, on one plain-HTTP port
//! (`server.metrics`): `/livez`, `/readyz` and `/metrics`.
//!
//! Decision: this module is a leaf, as kubert and linkerd2-proxy keep theirs: it imports no
//! component. Components register their collectors into a [`Registry`] made here and write
//! their families with the helpers below; what is measured is read, at each scrape, from what
//! each component already keeps: the fleet's status board and store statistics
//! (`fleet::metrics`), the API's watchers, WatchKeys queues, on-demand caches, RPC counters and
//! authorization decisions (`api::metrics`, `api::authz`). The process's own figures (the
//! allocator and the kernel) are here (`process`); `http` serves it all, and asks the
//! [`Readiness`] it is given whether the sidecar is ready.
//!
//! Names follow Prometheus conventions: the `informerd_` prefix, base units in the name
//! (`_bytes`, `_seconds`), `_total` on counters. Labels are bounded: `resource` (the config's
//! names; `cluster/name` for a remote cluster's), `cluster`, `scope` (a namespace of the config
//! or of the namespaceSelector's matches, `*`, or `namespaceSelector`, as the Status RPC shows
//! them), `state`, `reason`, `type`, and the RPCs' `service`, `method` and `code`. Never an
//! object, never a client.
//!
//! What it must NOT do: keep a second copy of what the components count (collectors read
//! theirs at scrape time), or serve anything of the cache: the port is plain HTTP, on any
//! address.

mod http;
mod process;

use std::fmt;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
pub use prometheus_client::registry::Registry;
use prometheus_client::registry::Unit;

pub use self::http::{bind, serve, BindError, Readiness, OPENMETRICS};

/// The prefix of every metric.
pub const PREFIX: &str = "informerd";

/// A registry of the process's metrics, with the prefix every metric has; the components
/// register their collectors and families into it.
pub fn registry() -> Registry {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(process::ProcessCollector));
    registry
}

/// The exposition of one collector alone, as a scrape would show it: for the components' tests
/// of their families.
#[cfg(test)]
pub(crate) fn render_collector(collector: impl prometheus_client::collector::Collector) -> String {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(collector));
    render(&registry)
}

/// The exposition of `registry`: OpenMetrics text, what the Prometheus client writes.
pub fn render(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)
        .expect("writing to a String does not fail");
    text
}

/// The name, help and unit of a family written at scrape time (by a collector).
#[derive(Debug)]
pub struct Descriptor {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
}

/// A family without a unit.
pub const fn family(name: &'static str, help: &'static str) -> Descriptor {
    Descriptor {
        name,
        help,
        unit: None,
    }
}

/// A family in bytes (`_bytes` is added to its name).
pub const fn in_bytes(name: &'static str, help: &'static str) -> Descriptor {
    Descriptor {
        name,
        help,
        unit: Some(Unit::Bytes),
    }
}

/// A family in seconds (`_seconds` is added to its name).
pub const fn in_seconds(name: &'static str, help: &'static str) -> Descriptor {
    Descriptor {
        name,
        help,
        unit: Some(Unit::Seconds),
    }
}

/// A metric a component updates as things happen (a `Family` of counters or histograms),
/// registered so that the exposition lists it (`# HELP`, `# TYPE`) before its first sample.
///
/// Decision: the Prometheus client leaves a registered family out of the exposition while it
/// has no sample, so a family created on first use (the RPCs by code, the authorization
/// reviews that failed) would be missing from `/metrics` until then: the rules and dashboard
/// of deploy/monitoring that name it could not be checked against a fresh sidecar, and look
/// like they name a metric informerd lacks. Written by a collector, as the scrape-time
/// families are, its descriptor is always there.
#[derive(Debug)]
pub struct Listed<M> {
    descriptor: Descriptor,
    metric: M,
}

impl<M> Listed<M> {
    /// `metric` (a clone sharing the component's samples), described by `descriptor`.
    pub fn new(descriptor: Descriptor, metric: M) -> Self {
        Listed { descriptor, metric }
    }
}

impl<M> prometheus_client::collector::Collector for Listed<M>
where
    M: EncodeMetric + fmt::Debug + Send + Sync + 'static,
{
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let d = &self.descriptor;
        let metric_type = self.metric.metric_type();
        let metric = encoder.encode_descriptor(d.name, d.help, d.unit.as_ref(), metric_type)?;
        self.metric.encode(metric)
    }
}

/// Writes a family of `metric_type`: one sample per label set.
pub fn write_family<L, M>(
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
pub fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    d: &Descriptor,
    samples: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let samples = samples.into_iter().map(|(l, v)| (l, ConstGauge::new(v)));
    write_family(encoder, d, MetricType::Gauge, samples)
}

/// Writes a gauge without labels.
pub fn gauge(
    encoder: &mut DescriptorEncoder,
    d: &Descriptor,
    value: impl EncodeGaugeValue,
) -> fmt::Result {
    let metric = encoder.encode_descriptor(d.name, d.help, d.unit.as_ref(), MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

/// Writes a counter family: one sample per label set (`d.name` without `_total`).
pub fn counters<L: EncodeLabelSet, V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    d: &Descriptor,
    samples: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let samples = samples.into_iter().map(|(l, v)| (l, ConstCounter::new(v)));
    write_family(encoder, d, MetricType::Counter, samples)
}

#[cfg(test)]
mod tests;
