//! The write half of a store, [`Writer`]: apply and delete, each a short sequence of steps
//! under the write lock (encode, compare with the stored state, seal the new state, put it in
//! its slot, reindex, log), and reclaiming what readers let go of.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::atoms::Atoms;
use super::codec::{self, Identity};
use super::index::reindex;
use super::log::LogEntry;
use super::object::Handle;
use super::reader::Store;
use super::state::{Shared, State};
use super::{Blob, Change, ChangeKind, ObjectKey, StoreError, StoreOptions, StoredObject};
use crate::vocab::tape::Tape;
use crate::vocab::tree::{Tree, View};

/// The write half of a store: the fleet applies and deletes through it; everything else
/// holds the read-only [`Store`] it hands out ([`Writer::as_reader`]), as kube-rs's reflector
/// splits its `Writer` from its `Store`. Reads through a writer go to the same store (it
/// dereferences to it). Several scopes of one resource write to one store, so the fleet shares
/// a writer between them (`Arc<Writer>`); writes are serialised inside.
pub struct Writer {
    pub(super) store: Store,
}

/// The stored state an applied object replaces.
struct Prior {
    slot: u32,
    revision: u64,
    resource_version: Option<Box<str>>,
    /// The stored object decoded, when comparing or reindexing needed it.
    json: Option<Value>,
}

/// Checks an object's identity.
fn identity<'t, T: Tree<'t>>(object: T) -> Result<Identity<'t>, StoreError> {
    if !matches!(object.view(), View::Object(..)) {
        return Err(StoreError::NotAnObject);
    }
    let meta = object
        .get("metadata")
        .filter(|m| matches!(m.view(), View::Object(..)))
        .ok_or(StoreError::MissingName)?;
    let name = meta
        .get("name")
        .and_then(T::as_str)
        .filter(|n| !n.is_empty())
        .ok_or(StoreError::MissingName)?;
    let namespace = match meta.get("namespace").map(T::view) {
        None | Some(View::Null) => None,
        Some(View::Str("")) => None,
        Some(View::Str(ns)) => Some(ns),
        Some(_) => {
            return Err(StoreError::InvalidNamespace {
                name: name.to_owned(),
            })
        }
    };
    let resource_version = meta.get("resourceVersion").and_then(T::as_str);
    Ok(Identity {
        namespace,
        name,
        resource_version,
    })
}

/// Checks that an object can be stored: its identity, and a depth the codec can recurse into.
pub(super) fn storable<'t, T: Tree<'t>>(object: T) -> Result<Identity<'t>, StoreError> {
    let id = identity(object)?;
    if object.too_deep(codec::MAX_DEPTH) {
        return Err(StoreError::TooDeep {
            key: ObjectKey::new(id.namespace, id.name).to_string(),
            max: codec::MAX_DEPTH,
        });
    }
    Ok(id)
}

/// Compares the object in `slot` with the one being applied (`body` encoded from `object`).
/// `None`: they are the same, nothing changes.
fn compare<'t, T: Tree<'t>>(
    st: &State,
    sh: &Shared,
    slot: u32,
    id: &Identity<'_>,
    body: &[u8],
    object: T,
) -> Option<Prior> {
    let old = st.slots.get(slot).expect("found slots are occupied");
    let h = codec::parse_header(old);
    if h.rv.is_newer_than(id.resource_version) {
        // Decision: a relist served by a lagging apiserver (a watch cache behind the one the
        // scope watched) never moves an object back to an older resourceVersion; see
        // `store::version` for why resourceVersions are compared as integers.
        return None;
    }
    let same_rv = h.rv.matches(id.resource_version);
    if same_rv && old[h.body_start..] == body[..] {
        return None;
    }
    // metadata.resourceVersion is part of every stored object: with another one the two
    // differ, and the old one is decoded only if the indexes need its values (an update from a
    // watch, the common case, skips it).
    let json = (same_rv || !sh.indexers.is_empty()).then(|| codec::decode_blob(&st.atoms, old));
    if same_rv
        && json
            .as_ref()
            .is_some_and(|old| object.with_value(|new| old == new))
    {
        // Same JSON, encoded differently (e.g. another key order).
        return None;
    }
    let (revision, resource_version) = (h.revision, h.rv.to_string().map(Box::from));
    Some(Prior {
        slot,
        revision,
        resource_version,
        json,
    })
}

/// Takes the next revision and makes the object's blob: its header, then `body`.
fn seal(st: &mut State, id: &Identity<'_>, body: Vec<u8>) -> (u64, Vec<u8>) {
    st.revision += 1;
    let revision = st.revision;
    (revision, blob(&mut st.atoms, revision, id, &body))
}

/// An object's blob: its header (identity and `revision`), then `body`.
pub(super) fn blob(atoms: &mut Atoms, revision: u64, id: &Identity<'_>, body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(body.len() + 24);
    codec::encode_header(atoms, revision, id, &mut bytes);
    bytes.extend_from_slice(body);
    bytes
}

/// Sets `value`'s `metadata.resourceVersion` to `rv` and seals it with the next revision.
fn reseal(st: &mut State, key: &ObjectKey, rv: &str, value: &mut Value) -> (u64, Vec<u8>) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_owned()));
    }
    let id = Identity {
        namespace: key.namespace(),
        name: key.name(),
        resource_version: Some(rv),
    };
    let empty = Value::Object(Map::new());
    let root = if value.is_object() { &*value } else { &empty };
    let body = codec::encode_body(&mut st.atoms, &id, root);
    seal(st, &id, body)
}

/// Stores a new object (key hash `hash`) and records its addition.
fn add(st: &mut State, hash: u64, blob: &[u8], values: &[Vec<String>]) {
    let slot = st.slots.insert(&st.atoms, hash, blob);
    reindex(&mut st.indexes, slot, &[], values);
    let entry = LogEntry::new(&st.atoms, ChangeKind::Added, slot, None, None);
    st.log_push(entry);
}

/// Replaces the stored state `prior` with `blob` and records the change; returns the
/// replaced state, for the change.
fn replace(
    st: &mut State,
    sh: &Arc<Shared>,
    prior: Prior,
    key: &ObjectKey,
    blob: &[u8],
    values: &[Vec<String>],
) -> StoredObject {
    let replaced = st.slots.replace(prior.slot, blob);
    let old_values = prior
        .json
        .as_ref()
        .map(|v| sh.indexers.values(v))
        .unwrap_or_default();
    reindex(&mut st.indexes, prior.slot, &old_values, values);
    let entry = LogEntry::new(
        &st.atoms,
        ChangeKind::Modified,
        prior.slot,
        None,
        Some(replaced.clone()),
    );
    // The handle takes its pin before the log may let the replaced state go (at once, when the
    // log keeps nothing or the entry is over its byte limit): the pin keeps its atoms alive.
    let previous = StoredObject::from(Handle {
        shared: sh.clone(),
        blob: replaced,
        _pin: st.retired.pin(),
        key: key.clone(),
        revision: prior.revision,
        resource_version: prior.resource_version,
        json: prior.json.map(OnceLock::from).unwrap_or_default(),
    });
    st.log_push(entry);
    previous
}

impl Writer {
    /// An empty store, with a fresh random epoch.
    pub fn new(opts: StoreOptions) -> Self {
        Writer {
            store: Store::new(opts),
        }
    }

    /// A read-only handle on the same store.
    pub fn as_reader(&self) -> Store {
        self.store.clone()
    }

    /// Inserts or replaces the object with this `metadata.namespace`/`metadata.name`.
    ///
    /// Returns the change, or `None` when the stored object is already identical, or newer
    /// (its resourceVersion is a greater integer: the object comes from a lagging apiserver).
    pub fn apply(&self, object: Value) -> Result<Option<Change>, StoreError> {
        self.apply_within(object, u64::MAX)
    }

    /// [`Writer::apply`], refusing an object whose encoded size (its encoding plus every
    /// string and shape it references, counted in full: see `codec::encode_body_sized`) is
    /// over `max_size` bytes, with [`StoreError::TooLarge`]; the stored version, if any, is
    /// left as it is. The size is measured while encoding, not by a walk of its own.
    pub fn apply_within(&self, object: Value, max_size: u64) -> Result<Option<Change>, StoreError> {
        let change = self.apply_tree(&object, max_size)?;
        if let Some(change) = &change {
            // Kept for readers of this change, who would otherwise decode it again.
            let _ = change.object.0.json.set(object);
        }
        Ok(change)
    }

    /// [`Writer::apply_within`] for an object decoded onto a [`Tape`] (the fleet's path: see
    /// `transform::seed`). The object is encoded from the tape; no `serde_json::Value` of it
    /// is built unless the store has indexes, or the stored version has the same
    /// resourceVersion but other bytes (then both are compared as JSON).
    pub fn apply_tape_within(
        &self,
        object: &Tape,
        max_size: u64,
    ) -> Result<Option<Change>, StoreError> {
        let root = object.root().ok_or(StoreError::NotAnObject)?;
        self.apply_tree(root, max_size)
    }

    fn apply_tree<'t, T: Tree<'t>>(
        &self,
        object: T,
        max_size: u64,
    ) -> Result<Option<Change>, StoreError> {
        let sh = &self.store.shared;
        let id = storable(object)?;
        let key = ObjectKey::new(id.namespace, id.name);
        let resource_version = id.resource_version.map(Box::from);
        let values = if sh.indexers.is_empty() {
            Vec::new()
        } else {
            object.with_value(|v| sh.indexers.values(v))
        };

        let mut guard = sh.write();
        let st = &mut *guard;
        let (body, size) = codec::encode_body_sized(&mut st.atoms, &id, object);
        if size > max_size {
            codec::release_body(&mut st.atoms, &body);
            return Err(StoreError::TooLarge {
                key: key.to_string(),
                size,
                max: max_size,
            });
        }
        let hash = st.slots.hash(id.namespace, id.name);
        let prior = match st.slots.find_hashed(&st.atoms, hash, id.namespace, id.name) {
            None => None,
            Some(slot) => match compare(st, sh, slot, &id, &body, object) {
                None => {
                    codec::release_body(&mut st.atoms, &body);
                    return Ok(None);
                }
                prior => prior,
            },
        };
        let (revision, blob) = seal(st, &id, body);
        let (kind, previous) = match prior {
            None => {
                add(st, hash, &blob, &values);
                (ChangeKind::Added, None)
            }
            Some(prior) => {
                let previous = replace(st, sh, prior, &key, &blob, &values);
                (ChangeKind::Modified, Some(previous))
            }
        };
        let pin = st.retired.pin();
        sh.revisions.send_replace(revision);
        st.after_write();
        drop(guard);

        let object = StoredObject::from(Handle {
            shared: sh.clone(),
            blob: Blob::from(blob),
            _pin: pin,
            key: key.clone(),
            revision,
            resource_version,
            json: OnceLock::new(),
        });
        Ok(Some(Change {
            revision,
            kind,
            key,
            object,
            previous,
        }))
    }

    /// Removes an object; the change carries its last state. `None` when it is not stored.
    pub fn delete(&self, key: &ObjectKey) -> Option<Change> {
        self.delete_at(key, None)
    }

    /// Removes an object that the apiserver deleted (or that left the view) at
    /// `resource_version`: the change carries its last state with that resourceVersion, as the
    /// apiserver's DELETED event does. `None` when it is not stored.
    ///
    /// Decision: the deletion never carries a resourceVersion older than the stored one (see
    /// `store::version`); with `None`, or an older one, it carries the stored one.
    pub fn delete_at(&self, key: &ObjectKey, resource_version: Option<&str>) -> Option<Change> {
        let sh = &self.store.shared;
        let (ns, name) = (key.namespace(), key.name());
        let mut guard = sh.write();
        let st = &mut *guard;
        let hash = st.slots.hash(ns, name);
        let slot = st.slots.find_hashed(&st.atoms, hash, ns, name)?;
        let blob = st.slots.remove(&st.atoms, hash, slot);
        let mut value = codec::decode_blob(&st.atoms, &blob);
        let old_values = sh.indexers.values(&value);
        reindex(&mut st.indexes, slot, &old_values, &[]);
        let stored = codec::parse_header(&blob).rv;
        let deleted_at = resource_version
            .filter(|rv| !stored.matches(Some(rv)) && !stored.is_newer_than(Some(rv)));
        let (revision, entry, resource_version) = match deleted_at {
            None => {
                st.revision += 1;
                let entry = LogEntry::new(
                    &st.atoms,
                    ChangeKind::Deleted,
                    slot,
                    Some(blob.clone()),
                    None,
                );
                (st.revision, entry, stored.to_string().map(Box::from))
            }
            Some(rv) => {
                // The last state, sealed again with the deletion's resourceVersion; the entry
                // holds the replaced blob as a Modified entry does, to retire it.
                let (revision, sealed) = reseal(st, key, rv, &mut value);
                let entry = LogEntry::new(
                    &st.atoms,
                    ChangeKind::Deleted,
                    slot,
                    Some(Blob::from(sealed)),
                    Some(blob),
                );
                (revision, entry, Some(Box::from(rv)))
            }
        };
        let object = StoredObject::from(Handle {
            shared: sh.clone(),
            blob: entry
                .object()
                .cloned()
                .expect("a Deleted entry holds the last state"),
            _pin: st.retired.pin(),
            key: key.clone(),
            revision,
            resource_version,
            json: OnceLock::from(value),
        });
        st.log_push(entry);
        sh.revisions.send_replace(revision);
        st.after_write();
        Some(Change {
            revision,
            kind: ChangeKind::Deleted,
            key: key.clone(),
            object,
            previous: None,
        })
    }

    /// Frees what the store let go of while readers still held it, for those readers that
    /// have finished. Writes do this on their own from time to time.
    pub fn reclaim(&self) {
        self.store.shared.write().sweep();
    }
}

impl std::ops::Deref for Writer {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}
