//! Reading the dump: the input file or standard input, parsed as one or more JSON documents,
//! each a Kubernetes list or one object, into the objects in the order given, each with the
//! apiVersion and kind it has or its list gives it.
//!
//! Decision: each object is kept as its JSON text and decoded again where it is used, not as a
//! decoded value. Decoded whole, a dump took eleven times its size (1.15 GB of RSS for the
//! 105 MB of 20,000 pods), so a dump of 500,000 pods did not fit in 24 GiB; as text, it takes
//! about twice its size (232 MB; 5.5 GB for 500,000 pods). Lists are read element by element
//! for the same reason.

use std::io::Read as _;

use informerd::store::ObjectKey;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

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
    /// The object as given, as JSON text.
    pub json: Box<RawValue>,
    /// Its compact JSON, in bytes.
    pub json_bytes: usize,
}

impl Item {
    /// The object, decoded.
    pub fn object(&self) -> Value {
        decode(&self.json)
    }

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
    let mut documents = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
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

/// The fields of a document that say what it is; the rest is read element by element.
/// (A field that is there is `Some`, even when it is `null`: `"items": null` is an empty list.)
#[derive(Deserialize)]
struct Document<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    items: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    kind: Option<Value>,
    #[serde(rename = "apiVersion", default)]
    api_version: Option<Value>,
    #[serde(rename = "type", borrow, default, deserialize_with = "present")]
    watch_type: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    object: Option<&'a RawValue>,
}

/// A field that is there, whatever its value.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Appends the objects of one document; errors are (`items[i]: ` or empty, message).
fn read_document(document: &RawValue, items: &mut Vec<Item>) -> Result<(), (String, String)> {
    let Some(doc) = fields(document) else {
        let value = decode(document);
        return Err((
            String::new(),
            format!(
                "expected a Kubernetes List or object (a JSON object), found {}",
                json_type(&value)
            ),
        ));
    };
    let kind = str_field(doc.kind.as_ref());
    let api_version = str_field(doc.api_version.as_ref());
    if let Some(list) = doc.items {
        return read_list(kind, api_version, list, items);
    }
    if doc.watch_type.is_some() && doc.object.is_some() && doc.kind.is_none() {
        return Err((
            String::new(),
            "this is a watch event, not an object: give the objects, as `kubectl get pods -A \
             -o json` prints them"
                .into(),
        ));
    }
    items.push(
        item(document, &decode(document), api_version, kind).map_err(|m| (String::new(), m))?,
    );
    Ok(())
}

/// The fields of the document `json` that say what it is; `None` when it is not a JSON object.
/// (A derived `Deserialize` also reads a struct from an array: that is checked first.)
fn fields(json: &RawValue) -> Option<Document<'_>> {
    if !json.get().starts_with('{') {
        return None;
    }
    serde_json::from_str(json.get()).ok()
}

/// A field's text, when it is a string.
fn str_field(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_string)
}

/// A JSON text of the dump, decoded (it was read as JSON already).
fn decode(json: &RawValue) -> Value {
    serde_json::from_str(json.get()).expect("the dump was read as JSON")
}

/// Appends the `items` of a list document of kind `list_kind`, `list_version`.
fn read_list(
    list_kind: Option<String>,
    list_version: Option<String>,
    elements: &RawValue,
    items: &mut Vec<Item>,
) -> Result<(), (String, String)> {
    // `PodList` items are Pods of the list's apiVersion; a plain `List` says nothing.
    let inferred_kind = list_kind
        .as_deref()
        .and_then(|k| k.strip_suffix("List"))
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    let elements: Vec<&RawValue> =
        match serde_json::from_str::<Option<Vec<&RawValue>>>(elements.get()) {
            Ok(elements) => elements.unwrap_or_default(),
            Err(_) => {
                return Err((
                    "items: ".into(),
                    format!(
                        "expected a list of objects, found {}",
                        json_type(&decode(elements))
                    ),
                ))
            }
        };
    for (i, element) in elements.into_iter().enumerate() {
        // One element at a time is decoded; only its text is kept.
        let object = decode(element);
        if !object.is_object() {
            return Err((
                format!("items[{i}]: "),
                format!("expected an object, found {}", json_type(&object)),
            ));
        }
        let mut kind = str_field(object.get("kind"));
        let mut api_version = str_field(object.get("apiVersion"));
        if inferred_kind.is_some() && (kind.is_none() || kind == inferred_kind) {
            kind = kind.or_else(|| inferred_kind.clone());
            api_version = api_version.or_else(|| list_version.clone());
        }
        items.push(
            item(element, &object, api_version, kind).map_err(|m| (format!("items[{i}]: "), m))?,
        );
    }
    Ok(())
}

/// The item of the object `json` (decoded: `object`).
fn item(
    json: &RawValue,
    object: &Value,
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
    // The apiserver sends nothing that does not read as a Kubernetes object; a hand-made dump
    // might, and would measure something the sidecar never holds.
    kube::api::DynamicObject::deserialize(object)
        .map_err(|e| format!("not a Kubernetes object: {e}"))?;
    let json_bytes = serde_json::to_vec(object)
        .expect("a JSON value always serializes")
        .len();
    Ok(Item {
        api_version,
        kind,
        key,
        json: json.to_owned(),
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
