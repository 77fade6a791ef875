//! Objects as table rows: which generic columns (NAMESPACE, NAME, STATUS, REVISION, AGE,
//! LABELS) a get or list shows, and the cells read from each object.

use std::collections::BTreeMap;

use informerd::proto::Object;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::{table::Table, Decoded};
use crate::cli::humanize::human_duration;

/// Which of the generic object columns to show.
#[derive(Debug, Clone, Copy)]
pub struct Columns {
    pub namespace: bool,
    pub status: bool,
    pub age: bool,
    pub labels: bool,
}

impl Columns {
    /// NAMESPACE when asked for and some object has one; STATUS and AGE when some object has
    /// `status.phase` or `metadata.creationTimestamp` (a transform or `--fields` may drop
    /// them).
    pub fn for_objects(objects: &[Decoded<'_>], namespace: bool, labels: bool) -> Columns {
        Columns {
            namespace: namespace && objects.iter().any(|o| !o.meta.namespace.is_empty()),
            status: objects.iter().any(|o| phase(&o.json).is_some()),
            age: objects.iter().any(|o| created(&o.json).is_some()),
            labels,
        }
    }

    pub fn headers(&self) -> Vec<&'static str> {
        let mut h = Vec::new();
        if self.namespace {
            h.push("NAMESPACE");
        }
        h.push("NAME");
        if self.status {
            h.push("STATUS");
        }
        h.push("REVISION");
        if self.age {
            h.push("AGE");
        }
        if self.labels {
            h.push("LABELS");
        }
        h
    }

    pub fn row(&self, object: &Decoded<'_>, now: Timestamp) -> Vec<String> {
        let mut r = Vec::new();
        if self.namespace {
            r.push(object.meta.namespace.clone());
        }
        r.push(object.meta.name.clone());
        if self.status {
            r.push(phase(&object.json).unwrap_or("<none>").to_string());
        }
        r.push(object.meta.revision.to_string());
        if self.age {
            r.push(age(&object.json, now));
        }
        if self.labels {
            r.push(labels(object.meta));
        }
        r
    }
}

/// The objects of a get or list as a table.
pub fn object_table(objects: &[Decoded<'_>], namespace: bool, show_labels: bool) -> String {
    let columns = Columns::for_objects(objects, namespace, show_labels);
    let now = Timestamp::now();
    let mut table = Table::new(columns.headers());
    for o in objects {
        table.push(columns.row(o, now));
    }
    table.render()
}

/// `status.phase`, or `Terminating` once the object is being deleted (as kubectl shows pods).
pub(super) fn phase(object: &Value) -> Option<&str> {
    let phase = object.pointer("/status/phase").and_then(Value::as_str)?;
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        Some("Terminating")
    } else {
        Some(phase)
    }
}

fn created(object: &Value) -> Option<Timestamp> {
    object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok())
}

pub(super) fn age(object: &Value, now: Timestamp) -> String {
    match created(object) {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

pub(super) fn labels(object: &Object) -> String {
    if object.labels.is_empty() {
        return "<none>".into();
    }
    let sorted: BTreeMap<_, _> = object.labels.iter().collect();
    sorted
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
