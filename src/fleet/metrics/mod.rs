//! The fleet's metrics and readiness, registered into `metrics` (which imports no component):
//! what the caches hold and what their streams did, read from the fleet at each scrape: the
//! stores' statistics per resource, and the status board of every scope (the same figures as
//! the Status RPC, plus the ones only metrics show: events received, filter drops, relists by
//! reason, the time since the last event); the remote clusters' connections (`clusters`); and
//! `/readyz`'s answer.

mod clusters;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::fleet::{Fleet, RelistReason, ScopeState, ScopeStatus};
use crate::metrics::{
    counters, family, gauges, in_bytes, in_seconds, Descriptor, Readiness, Registry,
};
use crate::store::StoreStats;

/// Registers the fleet's collectors into `registry`.
pub fn register(fleet: &Arc<Fleet>, registry: &mut Registry) {
    registry.register_collector(Box::new(clusters::ClusterCollector::new(fleet.clone())));
    registry.register_collector(Box::new(FleetCollector::new(fleet.clone())));
}

impl Readiness for Fleet {
    /// Whether every resource is synced, and the verbose body: a line per resource.
    fn readyz(&self) -> (bool, String) {
        readiness(self)
    }
}

fn readiness(fleet: &Fleet) -> (bool, String) {
    let mut body = String::new();
    let mut ready = true;
    for cache in fleet.caches().iter().filter(|c| c.gates_readiness()) {
        if cache.is_synced() {
            body.push_str(&format!("[+]{} ok\n", cache.name));
        } else {
            ready = false;
            let pending = cache.not_synced().join("; ");
            body.push_str(&format!("[-]{} not synced: {pending}\n", cache.name));
        }
    }
    body.push_str(if ready {
        "readyz check passed\n"
    } else {
        "readyz check failed\n"
    });
    (ready, body)
}

/// Every scope state, in the order `informerd_scope_state` lists them.
const STATES: [ScopeState; 5] = [
    ScopeState::Listing,
    ScopeState::Synced,
    ScopeState::Forbidden,
    ScopeState::Failing,
    ScopeState::SyncedFromSnapshot,
];

const OBJECTS: Descriptor = family("cache_objects", "Objects the cache holds");
const BYTES: Descriptor = in_bytes(
    "cache_encoded",
    "Bytes of the cached objects, encoded as the store keeps them",
);
const INTERNED: Descriptor = in_bytes(
    "cache_interned",
    "Bytes of the strings and structure the cache's objects share",
);
const LOG_ENTRIES: Descriptor = family("change_log_entries", "Changes the change log holds");
const LOG_BYTES: Descriptor = in_bytes("change_log", "Bytes the change log alone keeps alive");
const LOG_AGE: Descriptor = in_seconds(
    "change_log_oldest_age",
    "Age of the change log's oldest change: how far back a watch can resume (0 when empty)",
);
const SYNCED: Descriptor = family(
    "resource_synced",
    "1 when every scope of the resource has completed its initial list",
);
const STATE: Descriptor = family(
    "scope_state",
    "1 for the state each scope is in (Listing, Synced, Forbidden, Failing, SyncedFromSnapshot), 0 for the others",
);
const LISTED: Descriptor = family(
    "scope_listed_objects",
    "Objects received by the scope's lists, before the filter",
);
const RECEIVED: Descriptor = family(
    "scope_events_received",
    "Object events received from the apiserver (listed and watched), before the filter",
);
const STORED: Descriptor = family("scope_events_stored", "Changes the scope made to the cache");
const DROPPED: Descriptor = family(
    "scope_objects_filtered_out",
    "Objects the filter did not keep, each time one arrived (evaluation errors included)",
);
const FILTER_ERRORS: Descriptor = family(
    "scope_filter_errors",
    "Objects on which the filter failed to evaluate (counted as not kept)",
);
const SKIPPED: Descriptor = family(
    "scope_objects_skipped",
    "Objects not kept because of a limit, each time one arrived, by reason: too_large (over \
     limits.maxObjectSize)",
);
const RELISTS: Descriptor = family(
    "scope_relists",
    "Lists after the first, by reason: expired (410 Gone), forbidden (after a 403), reconnect",
);
const SCOPE_RV: Descriptor = family(
    "scope_resource_version",
    "The resourceVersion the scope's list and watch have reached (its list's, then each event's and bookmark's), as a number; absent before its first list ends",
);
const RESOURCE_RV: Descriptor = family(
    "cache_resource_version",
    "The resourceVersion every scope of the resource has reached (the lowest of informerd_scope_resource_version): the cache has applied every change up to it; absent while a scope has none",
);
const STALENESS: Descriptor = in_seconds(
    "scope_last_event_age",
    "Time since the last object event from the apiserver (since the scope started, before one)",
);

/// Reads the fleet at each scrape.
#[derive(Clone)]
struct FleetCollector {
    fleet: Arc<Fleet>,
}

impl fmt::Debug for FleetCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetCollector").finish_non_exhaustive()
    }
}

impl FleetCollector {
    fn new(fleet: Arc<Fleet>) -> Self {
        FleetCollector { fleet }
    }
}

/// One resource at the moment of the scrape.
pub(super) struct ResourceSample {
    pub name: String,
    pub stats: StoreStats,
    pub synced: bool,
    pub scopes: BTreeMap<String, ScopeStatus>,
}

impl Collector for FleetCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let samples: Vec<ResourceSample> = self
            .fleet
            .caches()
            .iter()
            .map(|c| ResourceSample {
                name: crate::fleet::qualified(&c.cluster, &c.name),
                stats: c.store.stats(),
                synced: c.is_synced(),
                scopes: c.scopes(),
            })
            .collect();
        encode_resources(&mut encoder, &samples, Instant::now())
    }
}

/// Writes every family of `samples`, with ages as of `now`.
pub(super) fn encode_resources(
    e: &mut DescriptorEncoder,
    samples: &[ResourceSample],
    now: Instant,
) -> fmt::Result {
    let per_resource = |f: fn(&ResourceSample) -> u64| {
        samples
            .iter()
            .map(move |r| ([("resource", r.name.as_str())], f(r)))
    };
    gauges(e, &OBJECTS, per_resource(|r| r.stats.objects as u64))?;
    gauges(e, &BYTES, per_resource(|r| r.stats.encoded_bytes as u64))?;
    gauges(
        e,
        &INTERNED,
        per_resource(|r| r.stats.interned_bytes as u64),
    )?;
    gauges(
        e,
        &LOG_ENTRIES,
        per_resource(|r| r.stats.log_entries as u64),
    )?;
    gauges(e, &LOG_BYTES, per_resource(|r| r.stats.log_bytes as u64))?;
    gauges(
        e,
        &LOG_AGE,
        per_resource(|r| r.stats.log_oldest_age.as_secs()),
    )?;
    gauges(e, &SYNCED, per_resource(|r| u64::from(r.synced)))?;
    encode_resource_versions(e, samples)?;

    let scopes = || {
        samples.iter().flat_map(|r| {
            r.scopes
                .iter()
                .map(move |(scope, s)| (r.name.as_str(), scope.as_str(), s))
        })
    };
    let per_scope = |f: fn(&ScopeStatus) -> u64| {
        scopes().map(move |(resource, scope, s)| ([("resource", resource), ("scope", scope)], f(s)))
    };
    let states = scopes().flat_map(|(resource, scope, s)| {
        STATES.iter().map(move |state| {
            let name = state_name(*state);
            let labels = [("resource", resource), ("scope", scope), ("state", name)];
            (labels, u64::from(s.state == *state))
        })
    });
    gauges(e, &STATE, states)?;
    counters(e, &LISTED, per_scope(|s| s.listed))?;
    counters(e, &RECEIVED, per_scope(|s| s.received))?;
    counters(e, &STORED, per_scope(|s| s.changes))?;
    counters(e, &DROPPED, per_scope(|s| s.filtered_out))?;
    counters(e, &FILTER_ERRORS, per_scope(|s| s.filter_errors))?;
    let skipped = scopes().map(|(resource, scope, s)| {
        let labels = [
            ("resource", resource),
            ("scope", scope),
            ("reason", "too_large"),
        ];
        (labels, s.too_large)
    });
    counters(e, &SKIPPED, skipped)?;
    let relists = scopes().flat_map(|(resource, scope, s)| {
        RelistReason::ALL.iter().map(move |reason| {
            let labels = [
                ("resource", resource),
                ("scope", scope),
                ("reason", reason.as_str()),
            ];
            (labels, s.relists_for(*reason))
        })
    });
    counters(e, &RELISTS, relists)?;
    let staleness = scopes().map(|(resource, scope, s)| {
        let age = now.saturating_duration_since(s.last_event).as_secs_f64();
        ([("resource", resource), ("scope", scope)], age)
    });
    gauges(e, &STALENESS, staleness)
}

/// The resourceVersions each scope, and every scope of each resource, have reached.
fn encode_resource_versions(e: &mut DescriptorEncoder, samples: &[ResourceSample]) -> fmt::Result {
    // Decision: resourceVersions are etcd revisions, which Kubernetes now lets clients compare
    // as numbers (KEP-5504); a controller compares its write's with these to know the cache
    // has seen it (KEP-5647's "ConsistencyStore").
    let lowest = samples.iter().filter_map(|r| {
        let each: Option<Vec<u64>> = r.scopes.values().map(reached).collect();
        let low = each?.into_iter().min()?;
        Some(([("resource", r.name.as_str())], low))
    });
    gauges(e, &RESOURCE_RV, lowest)?;
    let scopes = samples.iter().flat_map(|r| {
        r.scopes.iter().filter_map(|(scope, s)| {
            Some((
                [("resource", r.name.as_str()), ("scope", scope.as_str())],
                reached(s)?,
            ))
        })
    });
    gauges(e, &SCOPE_RV, scopes)
}

/// The resourceVersion a scope has reached, as a number.
fn reached(s: &ScopeStatus) -> Option<u64> {
    s.resource_version.as_deref()?.parse().ok()
}

/// A state as the Status RPC spells it.
fn state_name(state: ScopeState) -> &'static str {
    match state {
        ScopeState::Listing => "Listing",
        ScopeState::Synced => "Synced",
        ScopeState::Forbidden => "Forbidden",
        ScopeState::Failing => "Failing",
        ScopeState::SyncedFromSnapshot => "SyncedFromSnapshot",
    }
}
