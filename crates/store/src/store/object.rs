//! The values the store hands out: an object's key ([`ObjectKey`]), a stored version of it
//! ([`StoredObject`], decoded on demand) and one change ([`Change`], [`ChangeKind`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::atoms::{AtomId, Atoms};
use super::codec::{self, Identity};
use super::retired::Pin;
use super::state::{Shared, State};
use super::Blob;

/// Namespace and name of an object (`namespace` is `None` for cluster-scoped objects).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `metadata.namespace`; `None` for cluster-scoped objects.
    pub namespace: Option<Arc<str>>,
    /// `metadata.name`.
    pub name: Arc<str>,
}

impl ObjectKey {
    /// The key of `namespace`/`name`.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.map(Arc::from),
            name: Arc::from(name),
        }
    }

    /// `metadata.namespace`, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// The namespaces of the keys one read builds: one `Arc<str>` per namespace, shared by all
/// its keys, rather than one per object.
#[derive(Default)]
pub(super) struct Namespaces(HashMap<AtomId, Arc<str>>);

impl Namespaces {
    pub(super) fn get(&mut self, atoms: &Atoms, namespace: AtomId) -> Arc<str> {
        self.0
            .entry(namespace)
            .or_insert_with(|| Arc::from(atoms.str(namespace)))
            .clone()
    }
}

/// What a change did to its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// The object was not stored before.
    Added,
    /// The object replaced a different stored version.
    Modified,
    /// The object was removed.
    Deleted,
}

impl ChangeKind {
    /// The Kubernetes watch event type.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// One change of the store, as recorded in the change log.
#[derive(Clone, Debug)]
pub struct Change {
    /// The store revision this change got.
    pub revision: u64,
    /// What it did.
    pub kind: ChangeKind,
    /// Whose change it is.
    pub key: ObjectKey,
    /// The new state; for [`ChangeKind::Deleted`], the last known state.
    pub object: StoredObject,
    /// The state before a [`ChangeKind::Modified`] change.
    pub previous: Option<StoredObject>,
}

/// A stored object: its identity, and its JSON decoded on demand.
///
/// Cheap to clone. Holding one keeps that version of the object in memory, and the strings and
/// shapes the store lets go of meanwhile until it is dropped (see `retired`), so hold it for
/// the duration of a request, not longer.
#[derive(Clone)]
pub struct StoredObject(pub(super) Arc<Handle>);

/// What a [`StoredObject`] holds: one version of an object, and the store whose atoms decode it.
pub(super) struct Handle {
    pub(super) shared: Arc<Shared>,
    /// This version's bytes: a copy of the store's, or the change log's own.
    pub(super) blob: Blob,
    /// Keeps the atoms `blob` names alive while this handle lives (see `retired`).
    pub(super) _pin: Pin,
    pub(super) key: ObjectKey,
    /// The revision of the change that recorded this version.
    pub(super) revision: u64,
    pub(super) resource_version: Option<Box<str>>,
    /// The object decoded (set up front when the writer has it, so that it is never decoded).
    pub(super) json: OnceLock<Value>,
}

impl From<Handle> for StoredObject {
    fn from(handle: Handle) -> Self {
        StoredObject(Arc::new(handle))
    }
}

impl StoredObject {
    /// A handle on a stored blob, its identity read from the header. `revision` replaces the
    /// header's (the revision of the change that recorded it).
    pub(super) fn from_blob(
        shared: &Arc<Shared>,
        st: &State,
        blob: Blob,
        revision: Option<u64>,
        namespaces: &mut Namespaces,
    ) -> Self {
        let atoms = &st.atoms;
        let h = codec::parse_header(&blob);
        let key = ObjectKey {
            namespace: h.namespace.map(|a| namespaces.get(atoms, a)),
            name: Arc::from(h.name.to_string(atoms)),
        };
        Self::from(Handle {
            shared: shared.clone(),
            key,
            revision: revision.unwrap_or(h.revision),
            resource_version: h.rv.to_string().map(String::into_boxed_str),
            blob,
            _pin: st.retired.pin(),
            json: OnceLock::new(),
        })
    }

    /// Namespace and name.
    pub fn key(&self) -> &ObjectKey {
        &self.0.key
    }

    /// The store revision of this object's last change (for a deleted object, of its deletion).
    pub fn revision(&self) -> u64 {
        self.0.revision
    }

    /// The upstream `metadata.resourceVersion` ("" when the object had none).
    pub fn resource_version(&self) -> &str {
        self.0.resource_version.as_deref().unwrap_or_default()
    }

    /// The object, decoded on first use and kept with this handle.
    pub fn as_json(&self) -> &Value {
        self.0.json.get_or_init(|| self.decode())
    }

    /// The object as a fresh JSON value.
    pub fn to_json_value(&self) -> Value {
        match self.0.json.get() {
            Some(v) => v.clone(),
            None => self.decode(),
        }
    }

    /// The object serialized as JSON text.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        match self.0.json.get() {
            Some(v) => serde_json::to_vec(v).expect("a JSON value always serializes"),
            None => {
                let mut out = Vec::new();
                self.write_json(&mut out);
                out
            }
        }
    }

    /// The object as JSON text, appended to `out`: the bytes of `serde_json::to_vec` of
    /// [`StoredObject::to_json_value`], written straight from the encoding (no `Value` of it is
    /// built).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write_json_selected::<codec::Whole>(None, None, out);
    }

    /// [`StoredObject::write_json`] of what `keep` projects the object on (`None`: all of it),
    /// less what `drop` names (a transform's trees: see `transform::render`).
    pub(crate) fn write_json_selected<S: codec::Selection>(
        &self,
        keep: Option<&S>,
        drop: Option<&S>,
        out: &mut Vec<u8>,
    ) {
        self.write_json_with(keep, drop, out, None);
    }

    /// The state of the store this object belongs to (what `JsonBatch` tells stores apart by).
    pub(super) fn store(&self) -> &Arc<Shared> {
        &self.0.shared
    }

    /// [`StoredObject::write_json`] into a buffer that holds other objects of the same store,
    /// copying the shared constants `written` says it holds already (`JsonBatch`).
    pub(crate) fn write_json_batched(&self, out: &mut Vec<u8>, written: &mut codec::Written) {
        self.write_json_with::<codec::Whole>(None, None, out, Some(written));
    }

    fn write_json_with<S: codec::Selection>(
        &self,
        keep: Option<&S>,
        drop: Option<&S>,
        out: &mut Vec<u8>,
        written: Option<&mut codec::Written>,
    ) {
        let h = &self.0;
        let st = h.shared.read();
        let header = codec::parse_header(&h.blob);
        let body = &h.blob[header.body_start..];
        codec::write_json(&st.atoms, body, &self.identity(), keep, drop, out, written);
    }

    /// The value at `path` (object keys), decoded alone: the rest of the object is skipped,
    /// not decoded (a List reads the labels of every candidate this way).
    pub fn decode_at(&self, path: &[&str]) -> Option<Value> {
        if let Some(v) = self.0.json.get() {
            return path.iter().try_fold(v, |v, k| v.get(*k)).cloned();
        }
        let h = &self.0;
        let st = h.shared.read();
        let header = codec::parse_header(&h.blob);
        let body = &h.blob[header.body_start..];
        codec::decode_path(&st.atoms, body, &self.identity(), path)
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> Option<&Map<String, Value>> {
        self.as_json().get("metadata")?.get("labels")?.as_object()
    }

    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels()?.get(key)?.as_str()
    }

    fn decode(&self) -> Value {
        let h = &self.0;
        let st = h.shared.read();
        let header = codec::parse_header(&h.blob);
        codec::decode_body(&st.atoms, &h.blob[header.body_start..], &self.identity())
    }

    fn identity(&self) -> Identity<'_> {
        let h = &self.0;
        Identity {
            namespace: h.key.namespace(),
            name: h.key.name(),
            resource_version: h.resource_version.as_deref(),
        }
    }
}

impl fmt::Debug for StoredObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredObject")
            .field("key", &self.0.key)
            .field("revision", &self.0.revision)
            .field("resource_version", &self.resource_version())
            .field("encoded_bytes", &self.0.blob.len())
            .finish()
    }
}

impl PartialEq for StoredObject {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
            && self.0.revision == other.0.revision
            && self.as_json() == other.as_json()
    }
}
