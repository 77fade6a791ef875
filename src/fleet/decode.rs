//! The apiserver's watch lines and list bodies, decoded with the scope's transform applied by
//! our own reader (`vocab::reader`, [`Transform::read`]), not through serde.
//!
//! Why: through serde, kube-rs's `WatchEvent<T>` envelope and `ObjectList<T>` (whose
//! flattened type fields make serde buffer the whole list first) cost as much as reading the
//! line again, and serde's visitors read every key and skipped value of a pod, while the
//! controller profile keeps a fifth of its bytes. `cargo bench --bench ingest` times this path
//! against kube-rs's.
//!
//! The events and errors are kube-rs's (`request_events`, `Api::list`), so the scope's stream
//! and machine do not change: a line that is not the apiserver's `{"type":…,"object":{…}}` of
//! an object (a bookmark, an error, members in another order), or that our reader refuses, is
//! decoded by serde_json exactly as kube-rs decodes it, a `Status` line becoming
//! `Error::Api`. The transform comes from the decoding scope ([`super::Decoding`]), as for
//! [`Projected`]'s `Deserialize`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::core::{ObjectList, Status, TypeMeta, WatchEvent};
use serde_json::Value;

use super::object::{decoding_transform, Projected};
use crate::vocab::reader::{ReadError, Reader};
use crate::vocab::tape::Tape;

/// Decodes one object's JSON as the fleet's streams do: with the decoding scope's transform
/// applied while reading, or whole outside a scope.
pub fn object(text: &str) -> Result<Projected, ReadError> {
    let mut r = Reader::new(text);
    let object = read_object(&mut r)?;
    r.finish()?;
    Ok(object)
}

fn read_object(r: &mut Reader<'_>) -> Result<Projected, ReadError> {
    decoding_transform(|t| match t {
        Some(t) => {
            let mut tape = Tape::pooled();
            t.read(r, &mut tape)?;
            Ok(Projected::from_tape(tape))
        }
        None => r.deserialize::<Value>().map(Projected::from_value),
    })
}

/// An object's event, made from its object.
type Event = fn(Projected) -> WatchEvent<Projected>;

/// What an object's event is, from the start of its line.
const EVENTS: [(&str, Event); 3] = [
    (r#"{"type":"ADDED","object":"#, WatchEvent::Added),
    (r#"{"type":"MODIFIED","object":"#, WatchEvent::Modified),
    (r#"{"type":"DELETED","object":"#, WatchEvent::Deleted),
];

/// Decodes one line of a watch response as kube-rs's `Client::request_events` does: `None`
/// for what it skips (an incomplete last line), a `Status` line as `Error::Api`.
pub fn watch_line(line: &str) -> Option<kube::Result<WatchEvent<Projected>>> {
    if let Some(event) = object_event(line) {
        return Some(Ok(event));
    }
    match serde_json::from_str::<WatchEvent<Projected>>(line) {
        Ok(event) => Some(Ok(event)),
        Err(e) if e.is_eof() => None,
        Err(e) => Some(Err(match serde_json::from_str::<Status>(line) {
            Ok(status) => kube::Error::Api(status.boxed()),
            Err(_) => kube::Error::SerdeError(e),
        })),
    }
}

/// The line as the apiserver writes an object's event; `None` for another shape, or one our
/// reader refuses (serde_json then says why, as in kube-rs).
fn object_event(line: &str) -> Option<WatchEvent<Projected>> {
    let (prefix, event) = EVENTS.iter().find(|(p, _)| line.starts_with(p))?;
    let mut r = Reader::new(line);
    r.seek(prefix.len());
    let object = read_object(&mut r).ok()?;
    r.end_object().ok()?;
    r.finish().ok()?;
    Some(event(object))
}

/// Decodes a list response's body as kube-rs's `Api::list` does, each item with the decoding
/// scope's transform applied.
pub fn list_body(text: &str) -> Result<ObjectList<Projected>, serde_json::Error> {
    read_list(text).or_else(|_| serde_json::from_str(text))
}

fn read_list(text: &str) -> Result<ObjectList<Projected>, ReadError> {
    let mut r = Reader::new(text);
    let mut list = ObjectList {
        // As kube-rs reads a list without them.
        types: TypeMeta {
            api_version: "v1".into(),
            kind: "List".into(),
        },
        metadata: ListMeta::default(),
        items: Vec::new(),
    };
    let (mut kind, mut api_version, mut items) = (None, None, false);
    let mut members = r.object()?;
    while let Some(key) = members.next(&mut r)? {
        match &*key.decode(&r)? {
            // A repeated `items` is refused, as serde refuses a repeated field.
            "items" if items => return Err(r.error("duplicate field `items`")),
            "items" => {
                items = true;
                if r.null()? {
                    continue;
                }
                let mut elements = r.array()?;
                while elements.next(&mut r)? {
                    list.items.push(read_object(&mut r)?);
                }
            }
            "metadata" => list.metadata = r.deserialize()?,
            "kind" => kind = Some(r.string()?.decode(&r)?.into_owned()),
            "apiVersion" => api_version = Some(r.string()?.decode(&r)?.into_owned()),
            _ => r.skip()?,
        }
    }
    // Both or neither, as kube-rs reads the flattened type fields.
    if let (Some(kind), Some(api_version)) = (kind, api_version) {
        list.types = TypeMeta { api_version, kind };
    }
    r.finish()?;
    Ok(list)
}

#[cfg(test)]
mod tests;
