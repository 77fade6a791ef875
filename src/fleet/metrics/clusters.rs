//! Whether each cluster's apiserver answers, read from the fleet's probes at each scrape:
//! `informerd_cluster_reachable{cluster}` (1 or 0), the default cluster as `default`.
//!
//! Decision: the resources of a remote cluster keep the other families' `resource` label,
//! with the value `cluster/name` (the default cluster's stay `name`): two clusters may cache
//! resources of the same name, and one more label on every family would change every
//! existing series for a case most sidecars never have.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::{family, gauges, Descriptor};
use crate::config::ClusterConfig;
use crate::fleet::{ClusterState, Fleet};

const REACHABLE: Descriptor = family(
    "cluster_reachable",
    "1 while the cluster's apiserver answers the sidecar's probe of /version, 0 otherwise \
     (its caches then serve what they hold)",
);

/// Reads the fleet's clusters at each scrape.
#[derive(Clone)]
pub struct ClusterCollector {
    fleet: Arc<Fleet>,
}

impl fmt::Debug for ClusterCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterCollector").finish_non_exhaustive()
    }
}

impl ClusterCollector {
    pub fn new(fleet: Arc<Fleet>) -> Self {
        ClusterCollector { fleet }
    }
}

impl Collector for ClusterCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        encode_clusters(&mut encoder, &self.fleet.clusters())
    }
}

/// Writes the clusters' family.
pub(super) fn encode_clusters(e: &mut DescriptorEncoder, clusters: &[ClusterState]) -> fmt::Result {
    let samples = clusters.iter().map(|c| {
        let name = ClusterConfig::display(&c.name);
        ([("cluster", name)], u64::from(c.reachable))
    });
    gauges(e, &REACHABLE, samples)
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    struct Sample(Vec<ClusterState>);

    impl fmt::Debug for Sample {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Sample")
        }
    }

    impl Collector for Sample {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            encode_clusters(&mut encoder, &self.0)
        }
    }

    #[test]
    fn each_cluster_is_one_series_and_the_default_is_named_default() {
        let state = |name: &str, reachable| ClusterState {
            name: name.to_string(),
            reachable,
            message: String::new(),
            since: SystemTime::now(),
        };
        let text =
            crate::metrics::render_collector(Sample(vec![state("", true), state("east", false)]));
        assert!(
            text.contains("# TYPE informerd_cluster_reachable gauge"),
            "{text}"
        );
        assert!(
            text.contains("informerd_cluster_reachable{cluster=\"default\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("informerd_cluster_reachable{cluster=\"east\"} 0\n"),
            "{text}"
        );
    }
}
