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
//!
//! This module owns the vocabulary every format shares (the `-o` choice, a decoded object, the
//! resume token, an event's name); the documents, tables and status each have a file. It only
//! renders: it does not call the sidecar, and it does not choose what a command prints.

mod document;
mod objects;
mod status;
mod table;
mod watch_table;

use informerd::proto::{EventType, Object};
use serde_json::Value;

use super::CliError;

pub use document::{document, list_document, quote_token, EventDocument};
pub use objects::object_table;
pub use status::{status_document, status_table};
pub use watch_table::WatchTable;

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
