//! `status` printed: the summary line and the resource and scope tables, or the document
//! (camelCase keys; the epoch a string, see the [module documentation](super)).

use informerd::proto::{ResourceStatus, StatusResponse};
use serde_json::{json, Value};

use super::table::Table;
use crate::cli::humanize::human_bytes;

/// The status as tables: a summary line, the resources, then their scopes.
pub fn status_table(status: &StatusResponse) -> String {
    let mut out = format!(
        "VERSION: {}   SYNCED: {}   ALLOCATED: {}   RESIDENT: {}\n\n",
        status.version,
        status.synced,
        human_bytes(status.allocated_bytes),
        human_bytes(status.resident_bytes)
    );
    out.push_str(&resources_table(&status.resources).render());
    if status.clusters.len() > 1 {
        out.push('\n');
        out.push_str(&clusters_table(&status.clusters).render());
    }
    let scopes = scopes_table(&status.resources);
    if !scopes.is_empty() {
        out.push('\n');
        out.push_str(&scopes.render());
    }
    out
}

/// A row per resource: what it caches and what that costs.
fn resources_table(resources: &[ResourceStatus]) -> Table {
    let mut table = Table::new(vec![
        "RESOURCE",
        "APIVERSION",
        "KIND",
        "SYNCED",
        "OBJECTS",
        "BYTES/OBJECT",
        "SHARED",
        "REVISION",
        "LOG",
        "WATCHERS",
        "DROPPED",
    ]);
    for r in resources {
        table.push(vec![
            resource_name(r),
            r.api_version.clone(),
            r.kind.clone(),
            r.synced.to_string(),
            r.objects.to_string(),
            r.encoded_bytes
                .checked_div(r.objects)
                .map_or_else(|| "-".into(), |b| b.to_string()),
            human_bytes(r.interned_bytes),
            r.revision.to_string(),
            format!("{} ({})", r.log_entries, human_bytes(r.log_bytes)),
            r.watchers.to_string(),
            r.dropped_watches.to_string(),
        ]);
    }
    table
}

/// A resource as the tables name it: `name` in the default cluster, `cluster/name` elsewhere.
fn resource_name(r: &ResourceStatus) -> String {
    match r.cluster.as_str() {
        "" | informerd::config::DEFAULT_CLUSTER => r.name.clone(),
        cluster => format!("{cluster}/{}", r.name),
    }
}

/// A row per cluster, when the sidecar has remote ones: whether its apiserver answers.
fn clusters_table(clusters: &[informerd::proto::ClusterStatus]) -> Table {
    let mut table = Table::new(vec!["CLUSTER", "REACHABLE", "MESSAGE"]);
    for c in clusters {
        let message = if c.message.is_empty() {
            "<none>"
        } else {
            &c.message
        };
        table.push(vec![
            c.name.clone(),
            c.reachable.to_string(),
            message.to_string(),
        ]);
    }
    table
}

/// A row per scope (namespace or cluster) of every resource: how its watch is doing.
fn scopes_table(resources: &[ResourceStatus]) -> Table {
    let mut table = Table::new(vec![
        "RESOURCE",
        "SCOPE",
        "STATE",
        "LISTED",
        "CHANGES",
        "RELISTS",
        "FILTER-ERRORS",
        "LAST-ERROR",
    ]);
    for r in resources {
        for s in &r.scopes {
            table.push(vec![
                resource_name(r),
                s.scope.clone(),
                s.state.clone(),
                s.listed.to_string(),
                s.changes.to_string(),
                s.relists.to_string(),
                s.filter_errors.to_string(),
                if s.last_error.is_empty() {
                    "<none>".into()
                } else {
                    s.last_error.clone()
                },
            ]);
        }
    }
    table
}

/// The status as a document; see the module documentation.
pub fn status_document(status: &StatusResponse) -> Value {
    json!({
        "version": status.version,
        "synced": status.synced,
        "allocatedBytes": status.allocated_bytes,
        "residentBytes": status.resident_bytes,
        "resources": status.resources.iter().map(resource_document).collect::<Vec<_>>(),
        "clusters": status.clusters.iter().map(|c| json!({
            "name": c.name,
            "reachable": c.reachable,
            "message": c.message,
            "sinceSeconds": c.since_seconds,
        })).collect::<Vec<_>>(),
    })
}

fn resource_document(r: &ResourceStatus) -> Value {
    json!({
        "name": r.name,
        "cluster": r.cluster,
        "apiVersion": r.api_version,
        "kind": r.kind,
        "namespaced": r.namespaced,
        "synced": r.synced,
        "epoch": r.epoch.to_string(),
        "revision": r.revision,
        "objects": r.objects,
        "encodedBytes": r.encoded_bytes,
        "internedBytes": r.interned_bytes,
        "logEntries": r.log_entries,
        "logBytes": r.log_bytes,
        "watchers": r.watchers,
        "droppedWatches": r.dropped_watches,
        "scopes": r.scopes.iter().map(|s| json!({
            "scope": s.scope,
            "state": s.state,
            "listed": s.listed,
            "changes": s.changes,
            "filterErrors": s.filter_errors,
            "relists": s.relists,
            "lastError": s.last_error,
        })).collect::<Vec<_>>(),
    })
}
