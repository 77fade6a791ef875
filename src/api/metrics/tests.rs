//! The API's families, without a cluster: what a scrape shows for given counts.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::keys::encode_keys;
use super::serving::encode_watches;
use crate::api::{KeyCountsSnapshot, WatchCounts};

/// A collector of fixed figures, as the API would report them.
#[derive(Debug)]
struct Fixed;

impl Collector for Fixed {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let counts = WatchCounts {
            watchers: 2,
            sent: vec![("ADDED", 10), ("BOOKMARK", 1)],
            ended: vec![("FellBehind", 1), ("ClientClosed", 3)],
        };
        encode_watches(&mut encoder, &[("pods".to_string(), counts)])?;
        let keys = KeyCountsSnapshot {
            streams: 1,
            changes: 120,
            sent: 30,
            resyncs: 2,
            resumes: 1,
            pending: 7,
            bytes: 4096,
        };
        encode_keys(&mut encoder, &[("pods".to_string(), keys)])
    }
}

fn scrape() -> String {
    crate::metrics::render_collector(Fixed)
}

#[test]
fn watchers_are_exposed_per_resource_with_events_by_type_and_ends_by_reason() {
    let text = scrape();
    for line in [
        "informerd_watchers{resource=\"pods\"} 2",
        "informerd_watch_events_sent_total{resource=\"pods\",type=\"ADDED\"} 10",
        "informerd_watchers_ended_total{resource=\"pods\",reason=\"FellBehind\"} 1",
        "informerd_watchers_ended_total{resource=\"pods\",reason=\"ClientClosed\"} 3",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}

#[test]
fn watch_keys_queues_are_exposed_per_resource() {
    let text = scrape();
    for line in [
        "informerd_watch_keys_streams{resource=\"pods\"} 1",
        "informerd_watch_keys_changes_total{resource=\"pods\"} 120",
        "informerd_watch_keys_sent_total{resource=\"pods\"} 30",
        "informerd_watch_keys_resyncs_total{resource=\"pods\"} 2",
        "informerd_watch_keys_resync_resumes_total{resource=\"pods\"} 1",
        "informerd_watch_keys_pending{resource=\"pods\"} 7",
        "informerd_watch_keys_queue_bytes{resource=\"pods\"} 4096",
        "# UNIT informerd_watch_keys_queue_bytes bytes",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}
