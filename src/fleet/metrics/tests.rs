//! The fleet's families, without a cluster: what a scrape shows for given statuses.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::{encode_resources, ResourceSample};
use crate::fleet::{RelistReason, ScopeState, ScopeStatus};
use crate::store::StoreStats;

/// A collector of fixed figures, as the fleet would report them.
#[derive(Debug)]
struct Fixed {
    now: Instant,
}

impl Collector for Fixed {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let mut a = ScopeStatus {
            state: ScopeState::Synced,
            listed: 3,
            changes: 4,
            received: 7,
            filtered_out: 2,
            filter_errors: 1,
            last_event: self.now - Duration::from_secs(42),
            resource_version: Some("1234".into()),
            ..ScopeStatus::default()
        };
        a.count_relist(RelistReason::Expired);
        a.count_relist(RelistReason::Expired);
        a.count_relist(RelistReason::Forbidden);
        let b = ScopeStatus {
            state: ScopeState::Forbidden,
            last_event: self.now,
            resource_version: Some("999".into()),
            ..ScopeStatus::default()
        };
        let listing = ScopeStatus {
            state: ScopeState::Listing,
            last_event: self.now,
            ..ScopeStatus::default()
        };
        let pods = ResourceSample {
            name: "pods".into(),
            stats: StoreStats {
                objects: 5,
                encoded_bytes: 1000,
                log_entries: 9,
                log_oldest_age: Duration::from_secs(60),
                ..StoreStats::default()
            },
            synced: false,
            scopes: BTreeMap::from([("a".to_string(), a), ("b".to_string(), b)]),
        };
        let nodes = ResourceSample {
            name: "nodes".into(),
            stats: StoreStats::default(),
            synced: false,
            scopes: BTreeMap::from([("*".to_string(), listing)]),
        };
        encode_resources(&mut encoder, &[pods, nodes], self.now)
    }
}

fn scrape() -> String {
    crate::metrics::render_collector(Fixed {
        now: Instant::now(),
    })
}

/// The sample lines of `text` that start with `prefix`.
fn samples<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn stores_and_scopes_are_exposed_per_resource_and_scope() {
    let text = scrape();
    for line in [
        "informerd_cache_objects{resource=\"pods\"} 5",
        "informerd_cache_encoded_bytes{resource=\"pods\"} 1000",
        "informerd_change_log_entries{resource=\"pods\"} 9",
        "informerd_change_log_oldest_age_seconds{resource=\"pods\"} 60",
        "informerd_resource_synced{resource=\"pods\"} 0",
        "informerd_scope_events_received_total{resource=\"pods\",scope=\"a\"} 7",
        "informerd_scope_events_stored_total{resource=\"pods\",scope=\"a\"} 4",
        "informerd_scope_objects_filtered_out_total{resource=\"pods\",scope=\"a\"} 2",
        "informerd_scope_relists_total{resource=\"pods\",scope=\"a\",reason=\"expired\"} 2",
        "informerd_scope_relists_total{resource=\"pods\",scope=\"a\",reason=\"forbidden\"} 1",
        "informerd_scope_relists_total{resource=\"pods\",scope=\"a\",reason=\"reconnect\"} 0",
        "informerd_scope_state{resource=\"pods\",scope=\"b\",state=\"Forbidden\"} 1",
        "informerd_scope_state{resource=\"pods\",scope=\"b\",state=\"Synced\"} 0",
        "informerd_scope_resource_version{resource=\"pods\",scope=\"a\"} 1234",
        "informerd_scope_resource_version{resource=\"pods\",scope=\"b\"} 999",
        "informerd_cache_resource_version{resource=\"pods\"} 999",
        "# TYPE informerd_scope_events_stored counter",
        "# UNIT informerd_cache_encoded_bytes bytes",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    assert!(
        !text.contains("resource_version{resource=\"nodes\""),
        "a scope still listing has no resourceVersion, nor has its resource:\n{text}"
    );
    let states = samples(&text, "informerd_scope_state{resource=\"pods\"");
    assert_eq!(states.len(), 10, "five states for each of two scopes");
    assert_eq!(
        states.iter().filter(|l| l.ends_with(" 1")).count(),
        2,
        "one state each"
    );
    let staleness = samples(
        &text,
        "informerd_scope_last_event_age_seconds{resource=\"pods\",scope=\"a\"}",
    );
    let age: f64 = staleness[0].rsplit(' ').next().unwrap().parse().unwrap();
    assert!((42.0..43.0).contains(&age), "{age}");
    assert!(text.ends_with("# EOF\n"));
}
