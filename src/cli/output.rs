//! How the client prints what the sidecar returns: kubectl-style tables, JSON and YAML.
//!
//! JSON and YAML documents:
//! - `get`: the object itself, as the sidecar stores it (after its filter and transform, and
//!   `--fields`), with `apiVersion` and `kind`.
//! - `list`: a Kubernetes `List`:
//!   `{"apiVersion":"v1","kind":"List","items":[...],"metadata":{"resourceVersion":"E:R"}}`.
//!   `resourceVersion` is the resume token `EPOCH:REVISION` the whole list is consistent at,
//!   the exact argument `watch --since` takes to follow on from the list without a gap. It
//!   is a string, like every Kubernetes resourceVersion: the epoch is a random 64-bit number
//!   that JSON tools which read numbers as doubles (jq, JavaScript) would round.
//! - `watch`: one event per line (JSON) or per `---` document (YAML):
//!   `{"type":"ADDED","revision":R,"resourceVersion":"E:R","object":{...}}`; SYNCED and
//!   BOOKMARK events have no `object`. Resume after an event with `--since E:R`.
//! - `status`: the StatusResponse with camelCase keys; counts are numbers, the epoch a
//!   string (see above).

use std::collections::BTreeMap;

use informerd::proto::{EventType, Object, ResourceStatus, StatusResponse, WatchEvent};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::{json, Value};

use super::{
    humanize::{human_bytes, human_duration},
    CliError,
};

/// `-o`: how to print.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns with upper-case headers.
    #[default]
    Table,
    /// JSON (watch: one event per line).
    Json,
    /// YAML (watch: one document per event, separated by `---`).
    Yaml,
}

/// A decoded cached object.
pub struct Decoded<'a> {
    pub meta: &'a Object,
    pub json: Value,
}

/// Decodes an object's JSON.
pub fn decode(object: &Object) -> Result<Decoded<'_>, CliError> {
    let json = serde_json::from_slice(&object.json[..]).map_err(|source| CliError::Decode {
        what: format!("object {}", display_name(&object.namespace, &object.name)),
        source,
    })?;
    Ok(Decoded { meta: object, json })
}

fn display_name(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// The resume token `EPOCH:REVISION`, as `watch --since` takes it.
pub fn token(epoch: u64, revision: u64) -> String {
    format!("{epoch}:{revision}")
}

/// A JSON or YAML document, ending with a newline. `pretty`: indented JSON, else one line.
pub fn document(value: &impl Serialize, format: Format, pretty: bool) -> Result<String, CliError> {
    match format {
        Format::Json | Format::Table => {
            let mut text = if pretty {
                serde_json::to_string_pretty(value)
            } else {
                serde_json::to_string(value)
            }
            .map_err(|source| CliError::Decode {
                what: "output".into(),
                source,
            })?;
            text.push('\n');
            Ok(text)
        }
        Format::Yaml => serde_yaml::to_string(value).map_err(CliError::Yaml),
    }
}

/// Quotes the resume token of a YAML document: serde_yaml writes `123:45` bare, which YAML
/// 1.1 parsers (PyYAML, for one) read as a base-60 integer.
pub fn quote_token(yaml: String, epoch: u64, revision: u64) -> String {
    let bare = format!("resourceVersion: {}\n", token(epoch, revision));
    let quoted = format!("resourceVersion: '{}'\n", token(epoch, revision));
    yaml.replacen(&bare, &quoted, 1)
}

/// The `List` document of a list; see the module documentation.
pub fn list_document(items: Vec<Value>, epoch: u64, revision: u64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": items,
        "metadata": {"resourceVersion": token(epoch, revision)},
    })
}

/// One watch event as a document; see the module documentation. A struct, so that the type
/// comes first (a `Value` sorts its keys).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventDocument {
    #[serde(rename = "type")]
    kind: &'static str,
    revision: u64,
    resource_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<Value>,
}

impl EventDocument {
    pub fn new(event: &WatchEvent, object: Option<Value>) -> EventDocument {
        EventDocument {
            kind: event_name(event.r#type),
            revision: event.revision,
            resource_version: token(event.epoch, event.revision),
            object,
        }
    }
}

/// The name of an event type, as the proto spells it.
pub fn event_name(t: i32) -> &'static str {
    match EventType::try_from(t) {
        Ok(EventType::Added) => "ADDED",
        Ok(EventType::Modified) => "MODIFIED",
        Ok(EventType::Deleted) => "DELETED",
        Ok(EventType::Bookmark) => "BOOKMARK",
        Ok(EventType::Synced) => "SYNCED",
        Ok(EventType::Unspecified) | Err(_) => "UNKNOWN",
    }
}

/// Columns aligned kubectl-style: three spaces between columns, the last one unpadded.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: Vec<&'static str>) -> Table {
        Table {
            headers,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            out.push_str(&line(row, &widths));
        }
        out
    }
}

/// One row padded to `widths`.
fn line(row: &[String], widths: &[usize]) -> String {
    let mut out = String::new();
    let last = row.len().saturating_sub(1);
    for (i, cell) in row.iter().enumerate() {
        out.push_str(cell);
        if i < last {
            let width = widths.get(i).copied().unwrap_or(0);
            let pad = width.saturating_sub(cell.chars().count()) + 3;
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

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

/// Watch events as table lines: the header once, then one line per event. Columns are as wide
/// as the widest cell seen so far (the events to come are unknown), like `kubectl get -w`.
pub struct WatchTable {
    namespace: bool,
    labels: bool,
    widths: Vec<usize>,
    header_done: bool,
}

impl WatchTable {
    pub fn new(namespace: bool, labels: bool) -> WatchTable {
        WatchTable {
            namespace,
            labels,
            widths: Vec::new(),
            header_done: false,
        }
    }

    fn headers(&self) -> Vec<String> {
        let mut h = vec!["EVENT", "REVISION"];
        if self.namespace {
            h.push("NAMESPACE");
        }
        h.extend(["NAME", "STATUS", "AGE"]);
        if self.labels {
            h.push("LABELS");
        }
        h.into_iter().map(String::from).collect()
    }

    /// The header line: printed once the watch is established, before any event.
    pub fn header(&mut self) -> String {
        if self.header_done {
            return String::new();
        }
        self.header_done = true;
        let header = self.headers();
        // Room for typical names from the start, so that most lines align.
        self.widths = header
            .iter()
            .map(|h| match h.as_str() {
                "EVENT" => 8,
                "NAMESPACE" | "NAME" => 20,
                "STATUS" => 11,
                "AGE" => 5,
                _ => h.len(),
            })
            .collect();
        line(&header, &self.widths)
    }

    /// The text to print for one event (the header first, if not printed yet).
    pub fn event(&mut self, event: &WatchEvent, object: Option<&Decoded<'_>>) -> String {
        let mut out = self.header();
        let mut row = vec![
            event_name(event.r#type).to_string(),
            event.revision.to_string(),
        ];
        match object {
            Some(o) => {
                if self.namespace {
                    row.push(o.meta.namespace.clone());
                }
                row.push(o.meta.name.clone());
                row.push(phase(&o.json).unwrap_or("").to_string());
                row.push(age(&o.json, Timestamp::now()));
                if self.labels {
                    row.push(labels(o.meta));
                }
            }
            None => {
                // SYNCED, BOOKMARK: no object; the token to resume from, in place of the
                // object's columns (and without widening them).
                row.push(format!(
                    "(resume with --since {})",
                    token(event.epoch, event.revision)
                ));
                out.push_str(&line(&row, &self.widths));
                return out;
            }
        }
        for (w, cell) in self.widths.iter_mut().zip(&row) {
            *w = (*w).max(cell.chars().count());
        }
        out.push_str(&line(&row, &self.widths));
        out
    }
}

/// `status.phase`, or `Terminating` once the object is being deleted (as kubectl shows pods).
fn phase(object: &Value) -> Option<&str> {
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

fn age(object: &Value, now: Timestamp) -> String {
    match created(object) {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

fn labels(object: &Object) -> String {
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

/// The status as tables: a summary line, the resources, then their scopes.
pub fn status_table(status: &StatusResponse) -> String {
    let mut out = format!(
        "VERSION: {}   SYNCED: {}   ALLOCATED: {}   RESIDENT: {}\n\n",
        status.version,
        status.synced,
        human_bytes(status.allocated_bytes),
        human_bytes(status.resident_bytes)
    );
    let mut resources = Table::new(vec![
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
    let mut scopes = Table::new(vec![
        "RESOURCE",
        "SCOPE",
        "STATE",
        "LISTED",
        "CHANGES",
        "RELISTS",
        "FILTER-ERRORS",
        "LAST-ERROR",
    ]);
    for r in &status.resources {
        resources.push(vec![
            r.name.clone(),
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
        for s in &r.scopes {
            scopes.push(vec![
                r.name.clone(),
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
    out.push_str(&resources.render());
    if !scopes.is_empty() {
        out.push('\n');
        out.push_str(&scopes.render());
    }
    out
}

/// The status as a document; see the module documentation.
pub fn status_document(status: &StatusResponse) -> Value {
    json!({
        "version": status.version,
        "synced": status.synced,
        "allocatedBytes": status.allocated_bytes,
        "residentBytes": status.resident_bytes,
        "resources": status.resources.iter().map(resource_document).collect::<Vec<_>>(),
    })
}

fn resource_document(r: &ResourceStatus) -> Value {
    json!({
        "name": r.name,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(vec!["NAME", "REVISION"]);
        t.push(vec!["a-long-name".into(), "7".into()]);
        t.push(vec!["b".into(), "12".into()]);
        assert_eq!(
            t.render(),
            "NAME          REVISION\na-long-name   7\nb             12\n"
        );
    }

    #[test]
    fn yaml_quotes_the_resume_token() {
        let list = list_document(vec![], 12036890116437781076, 3);
        let yaml = quote_token(
            document(&list, Format::Yaml, true).unwrap(),
            12036890116437781076,
            3,
        );
        assert!(
            yaml.contains("resourceVersion: '12036890116437781076:3'\n"),
            "{yaml}"
        );
        let back: Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(
            back["metadata"]["resourceVersion"],
            "12036890116437781076:3"
        );
    }
}
