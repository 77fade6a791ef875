//! Reading the dump: the input file or standard input, parsed as one or more JSON documents,
//! each a Kubernetes list or one object, into the objects in the order given, each with the
//! apiVersion and kind it has or its list gives it.

use std::io::Read as _;

use informerd::store::ObjectKey;
use serde::Deserialize as _;
use serde_json::{Map, Value};

use super::BenchError;

/// The input's name for messages (`stdin` for `-`) and its text.
pub fn read_input(path: &std::path::Path) -> Result<(String, String), BenchError> {
    let mut text = String::new();
    let input = if path.as_os_str() == "-" {
        let input = "stdin".to_string();
        std::io::stdin()
            .lock()
            .read_to_string(&mut text)
            .map_err(|source| BenchError::ReadInput {
                input: input.clone(),
                source,
            })?;
        input
    } else {
        let input = path.display().to_string();
        text = std::fs::read_to_string(path).map_err(|source| BenchError::ReadInput {
            input: input.clone(),
            source,
        })?;
        input
    };
    Ok((input, text))
}

/// One object of a dump.
#[derive(Debug)]
pub struct Item {
    /// The object's `apiVersion`, or its list's for items of a `PodList` (or any `XList`).
    pub api_version: Option<String>,
    /// The object's `kind`, or the one its list's kind names (`Pod` in a `PodList`).
    pub kind: Option<String>,
    pub key: ObjectKey,
    /// The object as given.
    pub object: Value,
    /// Its compact JSON, in bytes.
    pub json_bytes: usize,
}

impl Item {
    /// `apiVersion kind`, as the report counts the input's objects.
    pub fn type_name(&self) -> String {
        match (&self.api_version, &self.kind) {
            (Some(v), Some(k)) => format!("{v} {k}"),
            (None, Some(k)) => format!("{k} (no apiVersion)"),
            _ => "no apiVersion/kind".to_string(),
        }
    }
}

/// The objects of a dump, in the order given.
#[derive(Debug)]
pub struct Dump {
    pub items: Vec<Item>,
}

/// Reads every JSON document of `text`: each a list (`items`) or one object. `input` names the
/// input in errors.
pub fn parse_dump(input: &str, text: &str) -> Result<Dump, BenchError> {
    let mut items = Vec::new();
    let mut documents = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    loop {
        let start = documents.byte_offset();
        let skipped = text[start..]
            .find(|c: char| !c.is_ascii_whitespace())
            .unwrap_or(text.len() - start);
        let line = 1 + text[..start + skipped].matches('\n').count();
        let Some(document) = documents.next() else {
            break;
        };
        let document = document.map_err(|e| json_error(input, &e))?;
        read_document(document, &mut items).map_err(|(what, message)| BenchError::Dump {
            input: input.to_string(),
            line,
            what,
            message,
        })?;
    }
    if items.is_empty() && text.trim().is_empty() {
        return Err(BenchError::EmptyInput {
            input: input.to_string(),
        });
    }
    Ok(Dump { items })
}

/// Not JSON: where, and serde_json's message without its own ` at line L column C`.
fn json_error(input: &str, e: &serde_json::Error) -> BenchError {
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    BenchError::Json {
        input: input.to_string(),
        line: e.line(),
        column: e.column(),
        message: message
            .strip_suffix(&suffix)
            .unwrap_or(&message)
            .to_string(),
    }
}

/// Appends the objects of one document; errors are (`items[i]: ` or empty, message).
fn read_document(document: Value, items: &mut Vec<Item>) -> Result<(), (String, String)> {
    let Value::Object(mut map) = document else {
        return Err((
            String::new(),
            format!(
                "expected a Kubernetes List or object (a JSON object), found {}",
                json_type(&document)
            ),
        ));
    };
    if let Some(list) = map.remove("items") {
        return read_list(&map, list, items);
    }
    if map.contains_key("type") && map.contains_key("object") && !map.contains_key("kind") {
        return Err((
            String::new(),
            "this is a watch event, not an object: give the objects, as `kubectl get pods -A \
             -o json` prints them"
                .into(),
        ));
    }
    let kind = str_field(&map, "kind");
    let api_version = str_field(&map, "apiVersion");
    items.push(item(map, api_version, kind).map_err(|m| (String::new(), m))?);
    Ok(())
}

/// Appends the `items` of a list document (`list`: the rest of it).
fn read_list(
    list: &Map<String, Value>,
    elements: Value,
    items: &mut Vec<Item>,
) -> Result<(), (String, String)> {
    let list_kind = str_field(list, "kind");
    let list_version = str_field(list, "apiVersion");
    // `PodList` items are Pods of the list's apiVersion; a plain `List` says nothing.
    let inferred_kind = list_kind
        .as_deref()
        .and_then(|k| k.strip_suffix("List"))
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    let elements = match elements {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        other => {
            return Err((
                "items: ".into(),
                format!("expected a list of objects, found {}", json_type(&other)),
            ))
        }
    };
    for (i, element) in elements.into_iter().enumerate() {
        let Value::Object(object) = element else {
            return Err((
                format!("items[{i}]: "),
                format!("expected an object, found {}", json_type(&element)),
            ));
        };
        let mut kind = str_field(&object, "kind");
        let mut api_version = str_field(&object, "apiVersion");
        if inferred_kind.is_some() && (kind.is_none() || kind == inferred_kind) {
            kind = kind.or_else(|| inferred_kind.clone());
            api_version = api_version.or_else(|| list_version.clone());
        }
        items.push(item(object, api_version, kind).map_err(|m| (format!("items[{i}]: "), m))?);
    }
    Ok(())
}

/// A string field of a JSON object.
fn str_field(map: &Map<String, Value>, field: &str) -> Option<String> {
    map.get(field).and_then(Value::as_str).map(str::to_string)
}

fn item(
    object: Map<String, Value>,
    api_version: Option<String>,
    kind: Option<String>,
) -> Result<Item, String> {
    let meta = object.get("metadata").and_then(Value::as_object);
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("no metadata.name; every object of the input needs one")?;
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    let key = ObjectKey::new(namespace, name);
    let object = Value::Object(object);
    // The apiserver sends nothing that does not read as a Kubernetes object; a hand-made dump
    // might, and would measure something the sidecar never holds.
    kube::api::DynamicObject::deserialize(&object)
        .map_err(|e| format!("not a Kubernetes object: {e}"))?;
    let json_bytes = serde_json::to_vec(&object)
        .expect("a JSON value always serializes")
        .len();
    Ok(Item {
        api_version,
        kind,
        key,
        object,
        json_bytes,
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
