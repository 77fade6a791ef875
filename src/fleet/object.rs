//! The object type the fleet's watchers decode: the transform applied while decoding.
//!
//! kube-rs's `watcher` decodes each list item and watch event into a type of our choosing
//! (`K: Resource + DeserializeOwned`), inside the stream's `poll`. Decoding into
//! `DynamicObject` and converting to JSON afterwards materialised every field of every pod,
//! managedFields included, only to drop most of them: decoding, converting and dropping took
//! nearly 80% of ingest time (`cargo bench --bench ingest`). [`Projected`] decodes straight
//! into what the store keeps, through [`Transform::read`], so that the fields a transform
//! removes are skipped by the parser and never allocated, and those it keeps go onto a tape
//! (`vocab::tape`) that the store encodes from, not into `serde_json::Value`s.
//!
//! The fleet's streams decode watch lines and list bodies with our own reader (`super::decode`),
//! not through serde. The transform reaches the decoding in a thread-local for the duration of
//! each `poll` ([`Decoding::enter`], [`with_transform`]): decoding is synchronous inside
//! `poll`, so no other task can run on the thread in between. Decoded outside such a scope, a
//! [`Projected`] holds the whole object.
//!
//! `Projected` is also `Deserialize`, for what still comes through serde (a watch line in
//! another shape than the apiserver's, kube-rs's own requests): there the whole object is
//! decoded and the transform applied after it, which gives the same result more slowly.
//!
//! A resource with a CEL filter decodes whole objects: the filter sees what the apiserver sent,
//! and the fleet applies the transform after it ([`super::Pipeline::decoding`]).

use std::{
    borrow::Cow,
    cell::RefCell,
    pin::Pin,
    task::{Context, Poll},
};

use futures::Stream;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    core::{DynamicResourceScope, Resource},
    discovery::ApiResource,
};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::transform::Transform;
use crate::vocab::tape::Tape;
use crate::vocab::tree::{Tree, View};

thread_local! {
    static TRANSFORM: RefCell<Option<Transform>> = const { RefCell::new(None) };
}

/// One object as the fleet keeps it: JSON with the transform applied, and the identity
/// metadata kube-rs's watcher reads (name, namespace, uid, resourceVersion).
#[derive(Clone, Debug)]
pub struct Projected {
    /// Decision: boxed. `ObjectMeta` is 360 bytes, most of them fields the fleet never sets,
    /// and an event is moved from the decoder through the stream to the store half a dozen
    /// times: copying them was more than the allocation costs.
    meta: Box<ObjectMeta>,
    /// Whether [`Projected::object`] has the transform applied (else it is whole).
    pub transformed: bool,
    /// The object as decoded.
    pub object: Decoded,
}

/// An object's JSON, as it was decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// Decoded whole (a filter must see it first), or built by hand.
    Json(Value),
    /// Decoded with the transform applied, onto a tape that the store encodes from (see
    /// `vocab::tape`).
    Tape(Tape),
}

impl Decoded {
    /// The object as a `serde_json::Value` (a tape is turned into one, in place).
    pub fn json_mut(&mut self) -> &mut Value {
        if let Decoded::Tape(tape) = self {
            *self = Decoded::Json(tape.to_value());
        }
        match self {
            Decoded::Json(v) => v,
            Decoded::Tape(_) => unreachable!("turned into JSON above"),
        }
    }

    /// The object as a `serde_json::Value`.
    pub fn into_json(self) -> Value {
        match self {
            Decoded::Json(v) => v,
            Decoded::Tape(tape) => tape.to_value(),
        }
    }
}

impl Projected {
    /// Wraps an object decoded with the transform applied.
    pub fn from_tape(tape: Tape) -> Projected {
        Projected {
            meta: Box::new(tape.root().map(identity).unwrap_or_default()),
            transformed: true,
            object: Decoded::Tape(tape),
        }
    }

    /// Wraps a JSON object (whole, untransformed).
    pub fn from_value(object: Value) -> Projected {
        Projected {
            meta: Box::new(identity(&object)),
            transformed: false,
            object: Decoded::Json(object),
        }
    }
}

/// The metadata fields the watcher and the fleet read; every transform keeps them.
fn identity<'t, T: Tree<'t>>(object: T) -> ObjectMeta {
    let mut meta = ObjectMeta::default();
    let Some(View::Object(_, members)) = object.get("metadata").map(T::view) else {
        return meta;
    };
    // One pass over metadata's members, not a lookup for each field.
    for (key, value) in members {
        let field = match key {
            "name" => &mut meta.name,
            "namespace" => &mut meta.namespace,
            "uid" => &mut meta.uid,
            "resourceVersion" => &mut meta.resource_version,
            _ => continue,
        };
        *field = value.as_str().map(str::to_string);
    }
    meta
}

impl<'de> Deserialize<'de> for Projected {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut value = Value::deserialize(deserializer)?;
        let transformed = decoding_transform(|t| t.map(|t| t.apply(&mut value)).is_some());
        Ok(Projected {
            meta: Box::new(identity(&value)),
            transformed,
            object: Decoded::Json(value),
        })
    }
}

/// Calls `f` with the transform of the decoding under way on this thread, if any.
pub(super) fn decoding_transform<R>(f: impl FnOnce(Option<&Transform>) -> R) -> R {
    TRANSFORM.with(|t| f(t.borrow().as_ref()))
}

impl Resource for Projected {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// While alive, [`Projected`] values decoded on this thread get `transform` applied.
pub struct Decoding {
    previous: Option<Transform>,
}

impl Decoding {
    /// `None` decodes whole objects.
    pub fn enter(transform: Option<&Transform>) -> Decoding {
        let previous = TRANSFORM.with(|t| t.replace(transform.cloned()));
        Decoding { previous }
    }
}

impl Drop for Decoding {
    fn drop(&mut self) {
        let previous = self.previous.take();
        TRANSFORM.with(|t| *t.borrow_mut() = previous);
    }
}

/// A stream whose items (kube-rs watcher events) decode their objects with `transform`.
pub fn with_transform<S: Stream + Unpin>(
    stream: S,
    transform: Option<Transform>,
) -> impl Stream<Item = S::Item> {
    WithTransform { stream, transform }
}

struct WithTransform<S> {
    stream: S,
    transform: Option<Transform>,
}

impl<S: Stream + Unpin> Stream for WithTransform<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        let _decoding = Decoding::enter(this.transform.as_ref());
        Pin::new(&mut this.stream).poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                            "managedFields": [{"manager": "kubectl"}]},
               "spec": {"nodeName": "n", "containers": [{"name": "c"}]}})
    }

    #[test]
    fn decodes_with_the_transform_of_its_scope_and_whole_outside_it() {
        let text = pod().to_string();
        let transform = Transform::controller();
        let projected: Projected = {
            let _decoding = Decoding::enter(Some(&transform));
            serde_json::from_str(&text).unwrap()
        };
        let mut expected = pod();
        transform.apply(&mut expected);
        assert_eq!(projected.object.clone().into_json(), expected);
        assert!(projected.transformed);
        assert_eq!(projected.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(projected.meta().namespace.as_deref(), Some("ns"));

        let whole: Projected = serde_json::from_str(&text).unwrap();
        assert_eq!(whole.object, Decoded::Json(pod()));
        assert!(!whole.transformed);
    }

    #[test]
    fn scopes_nest_and_restore_what_was_there() {
        let text = pod().to_string();
        let outer = Transform::controller();
        let _outer = Decoding::enter(Some(&outer));
        {
            let _inner = Decoding::enter(None);
            let whole: Projected = serde_json::from_str(&text).unwrap();
            assert!(!whole.transformed);
        }
        let projected: Projected = serde_json::from_str(&text).unwrap();
        assert!(projected.transformed);
    }
}
