//! The read side of a store, [`Store`]: what the api and everything that serves reads hold.
//! Every read takes the lock for reading, copies out handles (never decoded JSON) and lets go
//! before sorting or decoding anything.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use super::atoms::{AtomId, Atoms, KIND_STR};
use super::codec;
use super::object::Namespaces;
use super::slots::blob_is;
use super::state::Shared;
use super::{Blob, Change, ChangeKind, ObjectKey, StoreError, StoreOptions, StoredObject};

/// The cache of one resource, read-only: the api and everything that serves reads hold this.
/// Thread-safe: reads run in parallel, writes (through the [`Writer`](super::Writer)) one at a
/// time. Cheap to clone: every clone reads the same store.
#[derive(Clone)]
pub struct Store {
    pub(super) shared: Arc<Shared>,
}

/// What a store holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Objects stored.
    pub objects: usize,
    /// Changes the log holds.
    pub log_entries: usize,
    /// Bytes the change log keeps alive (see [`StoreOptions::log_max_bytes`]).
    pub log_bytes: usize,
    /// How long ago the log's oldest change was made, to the second (zero when it is empty).
    pub log_oldest_age: std::time::Duration,
    /// Encoded bytes of the current objects.
    pub encoded_bytes: usize,
    /// What the table of current objects holds besides their encoded bytes: slot locations,
    /// the key table, the blobs' lengths and their arena's room not holding a blob.
    pub slots_bytes: usize,
    /// Interned atoms: strings and shared structure (templates, constant arrays).
    pub interned_strings: usize,
    /// Bytes of the interned atoms.
    pub interned_bytes: usize,
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

/// Which namespace a read is about, as its atom: `Some(None)` for all of them, `None` when
/// no stored object is in `namespace`.
pub(super) fn namespace_filter(atoms: &Atoms, namespace: Option<&str>) -> Option<Option<AtomId>> {
    match namespace {
        None => Some(None),
        Some(ns) => atoms.lookup(KIND_STR, ns.as_bytes()).map(Some),
    }
}

fn sort_by_key(items: &mut [StoredObject]) {
    items.sort_unstable_by(|a, b| a.key().cmp(b.key()));
}

impl Store {
    pub(super) fn new(opts: StoreOptions) -> Self {
        Self {
            shared: Arc::new(Shared::new(opts)),
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

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.shared.read().slots.len()
    }

    /// Whether no object is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The latest revision, updated after every change: for watchers, and for reads that wait
    /// until the store has caught up with a revision.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.revisions.subscribe()
    }

    /// The object stored under `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<StoredObject> {
        let st = self.shared.read();
        let slot = st.slots.find(&st.atoms, key.namespace(), key.name())?;
        let blob = Blob::from(st.slots.get(slot)?);
        let mut namespaces = Namespaces::default();
        Some(StoredObject::from_blob(
            &self.shared,
            &st,
            blob,
            None,
            &mut namespaces,
        ))
    }

    /// Whether any object is stored, or any in one namespace: [`Store::keys`]'s emptiness,
    /// without a key made.
    pub fn holds_any(&self, namespace: Option<&str>) -> bool {
        let st = self.shared.read();
        namespace_filter(&st.atoms, namespace)
            .is_some_and(|ns| st.slots.occupied_slots(ns).next().is_some())
    }

    /// Keys of all objects, or of those in one namespace.
    pub fn keys(&self, namespace: Option<&str>) -> Vec<ObjectKey> {
        let st = self.shared.read();
        let Some(ns) = namespace_filter(&st.atoms, namespace) else {
            return Vec::new();
        };
        let shared_ns: Option<Arc<str>> = namespace.map(Arc::from);
        let mut namespaces = Namespaces::default();
        st.slots
            .occupied(ns)
            .map(|blob| {
                let h = codec::parse_header(blob);
                let namespace = match &shared_ns {
                    Some(n) => Some(n.clone()),
                    None => h.namespace.map(|a| namespaces.get(&st.atoms, a)),
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
        let Some(ns) = namespace_filter(&st.atoms, namespace) else {
            return (revision, Vec::new());
        };
        let mut namespaces = Namespaces::default();
        let mut items: Vec<StoredObject> = st
            .slots
            .occupied(ns)
            .map(|blob| {
                StoredObject::from_blob(&self.shared, &st, Blob::from(blob), None, &mut namespaces)
            })
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
        let i = sh.indexers.position(index)?;
        let st = sh.read();
        let revision = st.revision;
        let mut namespaces = Namespaces::default();
        let mut items: Vec<StoredObject> = st.indexes[i]
            .slots(value)
            .filter_map(|s| st.slots.get(s))
            .map(|blob| StoredObject::from_blob(sh, &st, Blob::from(blob), None, &mut namespaces))
            .collect();
        drop(st);
        sort_by_key(&mut items);
        Ok((revision, items))
    }

    /// Exactly the changes after `revision`, oldest first, or [`StoreError::Expired`] when the
    /// log no longer reaches back that far.
    pub fn changes_since(&self, revision: u64) -> Result<Vec<Change>, StoreError> {
        let sh = &self.shared;
        let st = sh.read();
        let entries = st.log.states(&st.slots, revision, st.revision)?;
        let mut namespaces = Namespaces::default();
        Ok(entries
            .into_iter()
            .map(|(rev, e, state)| {
                let object = StoredObject::from_blob(sh, &st, state, Some(rev), &mut namespaces);
                // A Deleted entry's replaced state is the log's to retire, not a change's.
                let previous = e.previous().filter(|_| e.kind == ChangeKind::Modified);
                let previous = previous
                    .map(|p| StoredObject::from_blob(sh, &st, p.clone(), None, &mut namespaces));
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

    /// The resourceVersion at which `key` left the store (deleted upstream, or out of the
    /// filter), while the change log still holds that change; `None` when the store holds it,
    /// or knows nothing of it. A read that waits for a resourceVersion of a deleted object ends
    /// on it rather than waiting for a version that never comes.
    pub fn deleted_at(&self, key: &ObjectKey) -> Option<String> {
        let st = self.shared.read();
        let (ns, name) = (key.namespace(), key.name());
        if st.slots.find(&st.atoms, ns, name).is_some() {
            return None;
        }
        // Not in the store: its newest change, if the log still holds one, is its deletion,
        // the entry holding its last state.
        let last = st
            .log
            .newest(|e| e.object().is_some_and(|o| blob_is(&st.atoms, o, ns, name)))?;
        codec::parse_header(last.object()?).rv.to_string()
    }

    /// What the store holds now.
    pub fn stats(&self) -> StoreStats {
        let st = self.shared.read();
        StoreStats {
            objects: st.slots.len(),
            log_entries: st.log.len(),
            log_bytes: st.log.bytes(),
            log_oldest_age: st.log.oldest_age(),
            encoded_bytes: st.slots.encoded_bytes(),
            slots_bytes: st.slots.structure_bytes(),
            interned_strings: st.atoms.len(),
            interned_bytes: st.atoms.bytes(),
        }
    }
}
