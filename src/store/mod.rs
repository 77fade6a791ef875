//! The cache of one resource: compact, revisioned, indexed, with a change log to resume from.
//!
//! Objects arrive filtered and transformed, as JSON. [`Writer::apply`] upserts one by
//! `metadata.namespace`/`metadata.name`: each real change gets the next store revision and an
//! entry in a bounded change log ([`Store::changes_since`]); re-applying an identical object
//! changes nothing. Readers get [`StoredObject`] handles, decoded on demand.
//!
//! Memory per object is what this module is about. Objects are kept encoded (see `codec`):
//! everything objects have in common (keys, label sets, owner references, condition shapes...)
//! lives once in reference-counted atoms, and each object keeps only what is its own, in compact
//! binary forms — typically 60-100 bytes for a pod of the "controller" profile. The change log
//! shares the encoded objects with the current state, and an atom is freed as soon as nothing
//! references it any more.

mod atoms;
mod codec;
mod scalar;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ahash::RandomState;
use hashbrown::HashTable;
use serde_json::{Map, Value};
use tokio::sync::watch;

use atoms::{AtomId, Atoms, KIND_STR};
use codec::{Identity, Name};

/// An encoded object, shared by the current state, the change log and readers. (`triomphe`'s
/// `Arc` has no weak count: 8 bytes less per object than `std`'s.)
type Blob = triomphe::Arc<[u8]>;

/// Computes the values under which an object is found in a secondary index.
///
/// Called for new objects before the store is locked, and for replaced or deleted ones while
/// it is locked for writing: it must not call back into the store.
pub trait Indexer: Send + Sync {
    /// The index values of `object` (none: the object is not in this index).
    fn values(&self, object: &Value) -> Vec<String>;
}

impl<F> Indexer for F
where
    F: Fn(&Value) -> Vec<String> + Send + Sync,
{
    fn values(&self, object: &Value) -> Vec<String> {
        self(object)
    }
}

/// How a [`Store`] is set up.
#[derive(Clone)]
pub struct StoreOptions {
    /// The change log keeps at most this many changes.
    pub log_max_events: usize,
    /// ... and at most about this many bytes: the log's own entries plus the encoded objects
    /// that only the log still holds (replaced or deleted states).
    pub log_max_bytes: usize,
    /// Secondary indexes, by name.
    pub indexes: Vec<(String, Arc<dyn Indexer>)>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            // Decision: one place for the change log's defaults, the config's, which is where an
            // operator reads them.
            log_max_events: crate::config::DEFAULT_MAX_EVENTS,
            log_max_bytes: crate::config::DEFAULT_MAX_BYTES,
            indexes: Vec::new(),
        }
    }
}

impl StoreOptions {
    /// Adds a secondary index.
    pub fn with_index(mut self, name: impl Into<String>, indexer: impl Indexer + 'static) -> Self {
        self.indexes.push((name.into(), Arc::new(indexer)));
        self
    }
}

impl fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreOptions")
            .field("log_max_events", &self.log_max_events)
            .field("log_max_bytes", &self.log_max_bytes)
            .field(
                "indexes",
                &self.indexes.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Namespace and name of an object (`namespace` is `None` for cluster-scoped objects).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: Option<Arc<str>>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.map(Arc::from),
            name: Arc::from(name),
        }
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    Added,
    Modified,
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
    pub revision: u64,
    pub kind: ChangeKind,
    pub key: ObjectKey,
    /// The new state; for [`ChangeKind::Deleted`], the last known state.
    pub object: StoredObject,
    /// The state before a [`ChangeKind::Modified`] change.
    pub previous: Option<StoredObject>,
}

/// A stored object: its identity, and its JSON decoded on demand.
///
/// Cheap to clone. Holding one keeps that version of the object in memory, so hold it for the
/// duration of a request, not longer.
#[derive(Clone)]
pub struct StoredObject(Arc<Handle>);

struct Handle {
    shared: Arc<Shared>,
    blob: Blob,
    key: ObjectKey,
    revision: u64,
    resource_version: Option<Box<str>>,
    json: OnceLock<Value>,
}

impl StoredObject {
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
        let bytes = match self.0.json.get() {
            Some(v) => serde_json::to_vec(v),
            None => serde_json::to_vec(&self.decode()),
        };
        bytes.expect("a JSON value always serializes")
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
        let id = Identity {
            namespace: h.key.namespace(),
            name: h.key.name(),
            resource_version: h.resource_version.as_deref(),
        };
        codec::decode_body(&st.atoms, &h.blob[header.body_start..], &id)
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

/// What a store holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub objects: usize,
    pub log_entries: usize,
    /// Bytes the change log keeps alive (see [`StoreOptions::log_max_bytes`]).
    pub log_bytes: usize,
    /// Encoded bytes of the current objects.
    pub encoded_bytes: usize,
    /// Interned atoms: strings and shared structure (templates, constant arrays).
    pub interned_strings: usize,
    pub interned_bytes: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the object is not a JSON object; the store keeps Kubernetes objects")]
    NotAnObject,
    #[error("the object has no metadata.name (a non-empty string); every stored object needs one")]
    MissingName,
    #[error("metadata.namespace of object {name:?} is not a string")]
    InvalidNamespace { name: String },
    #[error(
        "object {key} nests more than {max} levels deep; drop the deep fields with a transform"
    )]
    TooDeep { key: String, max: usize },
    #[error(
        "revision {requested} is no longer in the change log (it reaches back to revision \
         {oldest_available}); relist and watch from the list's revision"
    )]
    Expired {
        requested: u64,
        oldest_available: u64,
    },
    #[error(
        "revision {requested} is ahead of this cache (at revision {current}); the token comes \
         from another cache instance: relist"
    )]
    FutureRevision { requested: u64, current: u64 },
    #[error("there is no index named {name:?}; the configured indexes are: {known}")]
    UnknownIndex { name: String, known: String },
}

/// The cache of one resource, read-only: the api and everything that serves reads hold this.
/// Thread-safe: reads run in parallel, writes (through the [`Writer`]) one at a time. Cheap to
/// clone: every clone reads the same store.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

struct Shared {
    state: RwLock<State>,
    epoch: u64,
    revisions: watch::Sender<u64>,
    indexers: Vec<(String, Arc<dyn Indexer>)>,
    log_max_events: usize,
    log_max_bytes: usize,
}

impl Shared {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn index_values(&self, object: &Value) -> Vec<Vec<String>> {
        self.indexers
            .iter()
            .map(|(_, ix)| ix.values(object))
            .collect()
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("epoch", &self.epoch())
            .field("revision", &self.revision())
            .field("stats", &self.stats())
            .finish()
    }
}

struct LogEntry {
    kind: ChangeKind,
    /// Memory this entry alone keeps alive, as counted against `log_max_bytes`.
    bytes: u32,
    /// The new state (last state for Deleted). For Added/Modified it is also held by the
    /// object's slot, or by the log entry of the object's next change.
    object: Blob,
    /// The replaced state (Modified): the log entry is its last holder.
    previous: Option<Blob>,
}

impl LogEntry {
    fn new(atoms: &Atoms, kind: ChangeKind, object: Blob, previous: Option<Blob>) -> Self {
        // The state only the log keeps: the replaced one, or the last one of a deleted object
        // (the new state of an ADDED/MODIFIED change is the current object's).
        let own = match (&previous, kind) {
            (Some(p), _) => codec::exclusive_bytes(atoms, p),
            (None, ChangeKind::Deleted) => codec::exclusive_bytes(atoms, &object),
            (None, _) => 0,
        };
        let bytes = std::mem::size_of::<Self>() + own;
        Self {
            kind,
            bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
            object,
            previous,
        }
    }
}

#[derive(Default)]
struct IndexData {
    values: HashMap<Box<str>, HashSet<u32, RandomState>, RandomState>,
}

impl IndexData {
    fn insert(&mut self, value: &str, slot: u32) {
        match self.values.get_mut(value) {
            Some(set) => {
                set.insert(slot);
            }
            None => {
                let mut set = HashSet::with_capacity_and_hasher(1, RandomState::new());
                set.insert(slot);
                self.values.insert(value.into(), set);
            }
        }
    }

    fn remove(&mut self, value: &str, slot: u32) {
        if let Some(set) = self.values.get_mut(value) {
            set.remove(&slot);
            if set.is_empty() {
                self.values.remove(value);
            } else if set.capacity() > 16 && set.len() * 4 < set.capacity() {
                set.shrink_to(set.len() * 2);
            }
        }
    }
}

/// Retired blobs are checked again once there are this many, or every `SWEEP_EVERY` writes.
const SWEEP_MIN: usize = 64;
const SWEEP_EVERY: u64 = 1024;

struct State {
    atoms: Atoms,
    /// Current objects, encoded; `None` for free slots.
    slots: Vec<Option<Blob>>,
    free_slots: Vec<u32>,
    /// Slot numbers, hashed by namespace and name.
    keys: HashTable<u32>,
    key_hasher: RandomState,
    objects: usize,
    encoded_bytes: usize,
    revision: u64,
    /// Changes `revision - log.len() + 1 ..= revision`, oldest first.
    log: VecDeque<LogEntry>,
    log_bytes: usize,
    indexes: Vec<IndexData>,
    /// Blobs the store no longer holds but readers still do: their atoms are released once
    /// the readers let go.
    retired: Vec<Blob>,
    sweep_at: usize,
    writes: u64,
}

fn key_hash(hasher: &RandomState, namespace: Option<&[u8]>, name: &[u8]) -> u64 {
    hasher.hash_one((namespace, name))
}

/// Hash of the key of the object in `slot`.
fn slot_hash(hasher: &RandomState, atoms: &Atoms, slots: &[Option<Blob>], slot: u32) -> u64 {
    let blob = slots[slot as usize]
        .as_deref()
        .expect("indexed slots are occupied");
    let h = codec::parse_header(blob);
    let ns = h.namespace.map(|a| atoms.payload(a));
    match h.name {
        Name::Inline(name) => key_hash(hasher, ns, name.as_bytes()),
        Name::Generated { .. } => key_hash(hasher, ns, h.name.to_string(atoms).as_bytes()),
    }
}

impl State {
    fn new(indexes: usize) -> Self {
        Self {
            atoms: Atoms::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            keys: HashTable::new(),
            key_hasher: RandomState::new(),
            objects: 0,
            encoded_bytes: 0,
            revision: 0,
            log: VecDeque::new(),
            log_bytes: 0,
            indexes: (0..indexes).map(|_| IndexData::default()).collect(),
            retired: Vec::new(),
            sweep_at: SWEEP_MIN,
            writes: 0,
        }
    }

    fn find(&self, namespace: Option<&str>, name: &str) -> Option<u32> {
        let hash = key_hash(
            &self.key_hasher,
            namespace.map(str::as_bytes),
            name.as_bytes(),
        );
        self.keys
            .find(hash, |&slot| self.slot_is(slot, namespace, name))
            .copied()
    }

    fn slot_is(&self, slot: u32, namespace: Option<&str>, name: &str) -> bool {
        let blob = self.slots[slot as usize]
            .as_deref()
            .expect("indexed slots are occupied");
        let h = codec::parse_header(blob);
        let ns_matches = match (h.namespace, namespace) {
            (None, None) => true,
            (Some(a), Some(ns)) => self.atoms.payload(a) == ns.as_bytes(),
            _ => false,
        };
        ns_matches && h.name.eq_str(&self.atoms, name)
    }

    fn insert_slot(&mut self, hash: u64, blob: Blob) -> u32 {
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(blob);
                slot
            }
            None => {
                if self.slots.len() == self.slots.capacity() {
                    // Grow by a quarter, not double: slots are a large share of the memory.
                    self.slots.reserve_exact((self.slots.len() / 4).max(16));
                }
                self.slots.push(Some(blob));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 objects")
            }
        };
        let Self {
            keys,
            key_hasher,
            atoms,
            slots,
            ..
        } = self;
        keys.insert_unique(hash, slot, |&s| slot_hash(key_hasher, atoms, slots, s));
        slot
    }

    fn remove_slot(&mut self, hash: u64, slot: u32) -> Blob {
        if let Ok(entry) = self.keys.find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
        let blob = self.slots[slot as usize]
            .take()
            .expect("removed slots are occupied");
        self.free_slots.push(slot);
        if self.keys.is_empty() {
            self.slots = Vec::new();
            self.free_slots = Vec::new();
            self.keys = HashTable::new();
        } else if self.keys.capacity() > 64 && self.keys.len() * 4 < self.keys.capacity() {
            let Self {
                keys,
                key_hasher,
                atoms,
                slots,
                ..
            } = self;
            let len = keys.len();
            keys.shrink_to(len * 2, |&s| slot_hash(key_hasher, atoms, slots, s));
        }
        blob
    }

    fn reindex(&mut self, slot: u32, old: &[Vec<String>], new: &[Vec<String>]) {
        for (i, index) in self.indexes.iter_mut().enumerate() {
            let old = old.get(i).map_or(&[][..], Vec::as_slice);
            let new = new.get(i).map_or(&[][..], Vec::as_slice);
            for v in old.iter().filter(|v| !new.contains(v)) {
                index.remove(v, slot);
            }
            for v in new.iter().filter(|v| !old.contains(v)) {
                index.insert(v, slot);
            }
        }
    }

    fn log_push(&mut self, entry: LogEntry, max_events: usize, max_bytes: usize) {
        self.log_bytes += entry.bytes as usize;
        self.log.push_back(entry);
        while self.log.len() > max_events || (self.log_bytes > max_bytes && !self.log.is_empty()) {
            let Some(oldest) = self.log.pop_front() else {
                break;
            };
            self.log_bytes -= oldest.bytes as usize;
            if oldest.kind == ChangeKind::Deleted {
                self.retire(oldest.object);
            }
            // Otherwise the object is still held by its slot or by a newer entry.
            if let Some(previous) = oldest.previous {
                self.retire(previous);
            }
        }
    }

    /// The store lets go of a blob: its atoms are released now, or once readers let go.
    fn retire(&mut self, blob: Blob) {
        if Blob::count(&blob) == 1 {
            codec::release_blob(&mut self.atoms, &blob);
        } else {
            self.retired.push(blob);
        }
    }

    fn sweep(&mut self) {
        for blob in std::mem::take(&mut self.retired) {
            self.retire(blob);
        }
        self.retired.shrink_to_fit();
        self.sweep_at = (self.retired.len() * 2).max(SWEEP_MIN);
    }

    fn after_write(&mut self) {
        self.writes += 1;
        if !self.retired.is_empty()
            && (self.retired.len() >= self.sweep_at || self.writes.is_multiple_of(SWEEP_EVERY))
        {
            self.sweep();
        }
    }

    fn handle(
        &self,
        shared: &Arc<Shared>,
        blob: Blob,
        revision: Option<u64>,
        namespaces: &mut HashMap<AtomId, Arc<str>>,
    ) -> StoredObject {
        let h = codec::parse_header(&blob);
        let namespace = h.namespace.map(|a| {
            namespaces
                .entry(a)
                .or_insert_with(|| Arc::from(self.atoms.str(a)))
                .clone()
        });
        let key = ObjectKey {
            namespace,
            name: Arc::from(h.name.to_string(&self.atoms)),
        };
        StoredObject(Arc::new(Handle {
            shared: shared.clone(),
            key,
            revision: revision.unwrap_or(h.revision),
            resource_version: h.rv.to_string().map(String::into_boxed_str),
            blob,
            json: OnceLock::new(),
        }))
    }

    fn namespace_filter(&self, namespace: Option<&str>) -> Option<Option<AtomId>> {
        match namespace {
            None => Some(None),
            Some(ns) => self.atoms.lookup(KIND_STR, ns.as_bytes()).map(Some),
        }
    }

    fn occupied(&self, ns: Option<AtomId>) -> impl Iterator<Item = &Blob> + '_ {
        self.slots
            .iter()
            .flatten()
            .filter(move |blob| ns.is_none() || codec::parse_header(blob).namespace == ns)
    }
}

/// Checks an object's identity.
fn identity(object: &Value) -> Result<(&Map<String, Value>, Identity<'_>), StoreError> {
    let root = object.as_object().ok_or(StoreError::NotAnObject)?;
    let meta = root
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or(StoreError::MissingName)?;
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or(StoreError::MissingName)?;
    let namespace = match meta.get("namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(ns)) if ns.is_empty() => None,
        Some(Value::String(ns)) => Some(ns.as_str()),
        Some(_) => {
            return Err(StoreError::InvalidNamespace {
                name: name.to_owned(),
            })
        }
    };
    let resource_version = meta.get("resourceVersion").and_then(Value::as_str);
    Ok((
        root,
        Identity {
            namespace,
            name,
            resource_version,
        },
    ))
}

fn sort_by_key(items: &mut [StoredObject]) {
    items.sort_unstable_by(|a, b| a.key().cmp(b.key()));
}

impl Store {
    fn new(opts: StoreOptions) -> Self {
        let (revisions, _) = watch::channel(0);
        let state = State::new(opts.indexes.len());
        Self {
            shared: Arc::new(Shared {
                state: RwLock::new(state),
                epoch: rand::random(),
                revisions,
                indexers: opts.indexes,
                log_max_events: opts.log_max_events,
                log_max_bytes: opts.log_max_bytes,
            }),
        }
    }

    /// Chosen at construction: revisions are only comparable within one epoch.
    pub fn epoch(&self) -> u64 {
        self.shared.epoch
    }

    /// The revision of the last change (0 before any).
    pub fn revision(&self) -> u64 {
        self.shared.read().revision
    }

    pub fn len(&self) -> usize {
        self.shared.read().objects
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The latest revision, updated after every change: for watchers, and for reads that wait
    /// until the store has caught up with a revision.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.revisions.subscribe()
    }

    pub fn get(&self, key: &ObjectKey) -> Option<StoredObject> {
        let st = self.shared.read();
        let slot = st.find(key.namespace(), key.name())?;
        let blob = st.slots[slot as usize].clone()?;
        Some(st.handle(&self.shared, blob, None, &mut HashMap::new()))
    }

    /// Keys of all objects, or of those in one namespace.
    pub fn keys(&self, namespace: Option<&str>) -> Vec<ObjectKey> {
        let st = self.shared.read();
        let Some(ns) = st.namespace_filter(namespace) else {
            return Vec::new();
        };
        let shared_ns: Option<Arc<str>> = namespace.map(Arc::from);
        let mut namespaces = HashMap::new();
        st.occupied(ns)
            .map(|blob| {
                let h = codec::parse_header(blob);
                let namespace = match &shared_ns {
                    Some(n) => Some(n.clone()),
                    None => h.namespace.map(|a| {
                        namespaces
                            .entry(a)
                            .or_insert_with(|| Arc::<str>::from(st.atoms.str(a)))
                            .clone()
                    }),
                };
                ObjectKey {
                    namespace,
                    name: Arc::from(h.name.to_string(&st.atoms)),
                }
            })
            .collect()
    }

    /// All objects, or those in one namespace, sorted by key, with the revision they are
    /// consistent at.
    pub fn list(&self, namespace: Option<&str>) -> (u64, Vec<StoredObject>) {
        let st = self.shared.read();
        let revision = st.revision;
        let Some(ns) = st.namespace_filter(namespace) else {
            return (revision, Vec::new());
        };
        let mut namespaces = HashMap::new();
        let mut items: Vec<StoredObject> = st
            .occupied(ns)
            .map(|blob| st.handle(&self.shared, blob.clone(), None, &mut namespaces))
            .collect();
        drop(st);
        sort_by_key(&mut items);
        (revision, items)
    }

    /// The objects whose `index` values include `value`, sorted by key, with the revision
    /// they are consistent at.
    pub fn list_by_index(
        &self,
        index: &str,
        value: &str,
    ) -> Result<(u64, Vec<StoredObject>), StoreError> {
        let sh = &self.shared;
        let Some(i) = sh.indexers.iter().position(|(n, _)| n == index) else {
            return Err(StoreError::UnknownIndex {
                name: index.to_owned(),
                known: sh
                    .indexers
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let st = sh.read();
        let revision = st.revision;
        let mut namespaces = HashMap::new();
        let mut items: Vec<StoredObject> = match st.indexes[i].values.get(value) {
            None => Vec::new(),
            Some(slots) => slots
                .iter()
                .filter_map(|&s| st.slots[s as usize].clone())
                .map(|blob| st.handle(sh, blob, None, &mut namespaces))
                .collect(),
        };
        drop(st);
        sort_by_key(&mut items);
        Ok((revision, items))
    }

    /// Exactly the changes after `revision`, oldest first, or [`StoreError::Expired`] when the
    /// log no longer reaches back that far.
    pub fn changes_since(&self, revision: u64) -> Result<Vec<Change>, StoreError> {
        let st = self.shared.read();
        if revision > st.revision {
            return Err(StoreError::FutureRevision {
                requested: revision,
                current: st.revision,
            });
        }
        let oldest = st.revision - st.log.len() as u64;
        if revision < oldest {
            return Err(StoreError::Expired {
                requested: revision,
                oldest_available: oldest,
            });
        }
        let mut namespaces = HashMap::new();
        let start = (revision - oldest) as usize;
        Ok(st
            .log
            .iter()
            .enumerate()
            .skip(start)
            .map(|(i, e)| {
                let rev = oldest + 1 + i as u64;
                let object = st.handle(&self.shared, e.object.clone(), Some(rev), &mut namespaces);
                let previous = e
                    .previous
                    .as_ref()
                    .map(|p| st.handle(&self.shared, p.clone(), None, &mut namespaces));
                Change {
                    revision: rev,
                    kind: e.kind,
                    key: object.key().clone(),
                    object,
                    previous,
                }
            })
            .collect())
    }

    pub fn stats(&self) -> StoreStats {
        let st = self.shared.read();
        StoreStats {
            objects: st.objects,
            log_entries: st.log.len(),
            log_bytes: st.log_bytes,
            encoded_bytes: st.encoded_bytes,
            interned_strings: st.atoms.len(),
            interned_bytes: st.atoms.bytes(),
        }
    }
}

/// The write half of a store: the fleet applies and deletes through it; everything else
/// holds the read-only [`Store`] it hands out ([`Writer::as_reader`]), as kube-rs's reflector
/// splits its `Writer` from its `Store`. Reads through a writer go to the same store (it
/// dereferences to it). Several scopes of one resource write to one store, so the fleet shares
/// a writer between them (`Arc<Writer>`); writes are serialised inside.
pub struct Writer {
    store: Store,
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
    /// Returns the change, or `None` when the stored object is already identical.
    pub fn apply(&self, object: Value) -> Result<Option<Change>, StoreError> {
        let sh = &self.store.shared;
        let (root, id) = identity(&object)?;
        if codec::too_deep(&object, codec::MAX_DEPTH) {
            return Err(StoreError::TooDeep {
                key: ObjectKey::new(id.namespace, id.name).to_string(),
                max: codec::MAX_DEPTH,
            });
        }
        let key = ObjectKey::new(id.namespace, id.name);
        let resource_version = id.resource_version.map(Box::from);
        let new_values = sh.index_values(&object);

        let mut guard = sh.write();
        let st = &mut *guard;
        let body = codec::encode_body(&mut st.atoms, &id, root);
        let hash = key_hash(
            &st.key_hasher,
            id.namespace.map(str::as_bytes),
            id.name.as_bytes(),
        );
        let existing = match st.find(id.namespace, id.name) {
            None => None,
            Some(slot) => {
                let old = st.slots[slot as usize]
                    .clone()
                    .expect("found slots are occupied");
                let h = codec::parse_header(&old);
                let same_rv = h.rv.matches(id.resource_version);
                if same_rv && old[h.body_start..] == body[..] {
                    codec::release_body(&mut st.atoms, &body);
                    return Ok(None);
                }
                // metadata.resourceVersion is part of every stored object: with another one the
                // two differ, and the old one is decoded only if the indexes need its values
                // (an update from a watch, the common case, skips it).
                let old_value = (same_rv || !sh.indexers.is_empty())
                    .then(|| codec::decode_blob(&st.atoms, &old));
                if same_rv && old_value.as_ref() == Some(&object) {
                    // Same JSON, encoded differently (e.g. another key order).
                    codec::release_body(&mut st.atoms, &body);
                    return Ok(None);
                }
                let (old_revision, old_rv) = (h.revision, h.rv.to_string().map(Box::from));
                Some((slot, old, old_revision, old_rv, old_value))
            }
        };

        st.revision += 1;
        let revision = st.revision;
        let mut bytes = Vec::with_capacity(body.len() + 24);
        codec::encode_header(&mut st.atoms, revision, &id, &mut bytes);
        bytes.extend_from_slice(&body);
        drop(body);
        let blob = Blob::from(&bytes[..]);
        st.encoded_bytes += blob.len();

        let (kind, previous) = match existing {
            None => {
                let slot = st.insert_slot(hash, blob.clone());
                st.objects += 1;
                st.reindex(slot, &[], &new_values);
                let entry = LogEntry::new(&st.atoms, ChangeKind::Added, blob.clone(), None);
                st.log_push(entry, sh.log_max_events, sh.log_max_bytes);
                (ChangeKind::Added, None)
            }
            Some((slot, old, old_revision, old_rv, old_value)) => {
                let replaced = st.slots[slot as usize]
                    .replace(blob.clone())
                    .expect("found slots are occupied");
                st.encoded_bytes -= replaced.len();
                let old_values = old_value
                    .as_ref()
                    .map(|v| sh.index_values(v))
                    .unwrap_or_default();
                st.reindex(slot, &old_values, &new_values);
                let entry = LogEntry::new(
                    &st.atoms,
                    ChangeKind::Modified,
                    blob.clone(),
                    Some(replaced),
                );
                st.log_push(entry, sh.log_max_events, sh.log_max_bytes);
                let previous = StoredObject(Arc::new(Handle {
                    shared: sh.clone(),
                    blob: old,
                    key: key.clone(),
                    revision: old_revision,
                    resource_version: old_rv,
                    json: old_value.map(OnceLock::from).unwrap_or_default(),
                }));
                (ChangeKind::Modified, Some(previous))
            }
        };
        sh.revisions.send_replace(revision);
        st.after_write();
        drop(guard);

        let object = StoredObject(Arc::new(Handle {
            shared: sh.clone(),
            blob,
            key: key.clone(),
            revision,
            resource_version,
            json: OnceLock::from(object),
        }));
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
        let sh = &self.store.shared;
        let ns = key.namespace();
        let mut guard = sh.write();
        let st = &mut *guard;
        let slot = st.find(ns, key.name())?;
        let hash = key_hash(&st.key_hasher, ns.map(str::as_bytes), key.name().as_bytes());
        let blob = st.remove_slot(hash, slot);
        st.objects -= 1;
        st.encoded_bytes -= blob.len();
        let old_value = codec::decode_blob(&st.atoms, &blob);
        let old_values = sh.index_values(&old_value);
        st.reindex(slot, &old_values, &[]);
        st.revision += 1;
        let revision = st.revision;
        let mut object = st.handle(sh, blob.clone(), Some(revision), &mut HashMap::new());
        if let Some(h) = Arc::get_mut(&mut object.0) {
            h.json = OnceLock::from(old_value);
        }
        let entry = LogEntry::new(&st.atoms, ChangeKind::Deleted, blob, None);
        st.log_push(entry, sh.log_max_events, sh.log_max_bytes);
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
