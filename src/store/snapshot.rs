//! A store's contents taken out and put back, for warm restarts (the file itself is
//! `crate::snapshot`'s): every current object with the revision of its last change, the
//! store's revision and its epoch. Restored, the store answers reads and resumes watch tokens
//! as the one it was taken from did at that revision.
//!
//! Decision: objects leave as their JSON, not as the codec's blobs. A blob refers to interned
//! atoms by ids that only mean something inside one process (and the codec's layout is still
//! being made leaner), so a snapshot of blobs would need the atom table too and would break
//! with every codec change; JSON is re-encoded on load (a few µs per object), and the store
//! built from it is exactly what applying the same objects builds.
//!
//! Decision: the change log is not kept. A restored store's log starts empty at the
//! snapshot's revision: a client whose token is that revision (every watcher that was caught up
//! when informerd stopped) resumes without a gap; an older token gets `Expired` and relists
//! from informerd, as after a log overflow.

use std::sync::Arc;

use serde_json::Value;

use super::codec;
use super::index::reindex;
use super::reader::Store;
use super::state::Shared;
use super::writer::{blob, storable};
use super::{ObjectKey, StoreError, StoreOptions, StoredObject, Writer};

/// What a store held at one revision: the input of a snapshot, and what a restore rebuilds.
pub struct StoreImage {
    /// The store's epoch.
    pub epoch: u64,
    /// The revision of its last change.
    pub revision: u64,
    /// Every object, sorted by key; each carries the revision of its own last change.
    pub objects: Vec<StoredObject>,
}

/// Why a restore refused what it was given (a snapshot that does not hold together).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// An object the store cannot keep.
    #[error("object {index}: {source}")]
    Object {
        /// Its position in the snapshot.
        index: usize,
        /// Why.
        source: StoreError,
    },
    /// Two objects with one key.
    #[error("object {key} appears twice")]
    Duplicate {
        /// The key.
        key: String,
    },
    /// An object changed after the store's own revision.
    #[error("object {key} has revision {object}, after the store's revision {store}")]
    AheadOfStore {
        /// The key.
        key: String,
        /// The object's revision.
        object: u64,
        /// The store's.
        store: u64,
    },
}

impl Store {
    /// Everything the store holds now, consistent at one revision.
    pub fn image(&self) -> StoreImage {
        let (revision, objects) = self.list(None);
        StoreImage {
            epoch: self.epoch(),
            revision,
            objects,
        }
    }
}

impl Writer {
    /// A store holding `objects` (each with the revision of its last change) at `revision`,
    /// with epoch `epoch`: what [`Store::image`] of the store it restores gave. Its change log
    /// is empty; the next change gets revision `revision + 1`.
    pub fn restore(
        opts: StoreOptions,
        epoch: u64,
        revision: u64,
        objects: impl IntoIterator<Item = (u64, Value)>,
    ) -> Result<Writer, RestoreError> {
        let shared = Arc::new(Shared::with_epoch(opts, epoch));
        {
            let mut guard = shared.write();
            let st = &mut *guard;
            for (index, (object_revision, object)) in objects.into_iter().enumerate() {
                let (root, id) =
                    storable(&object).map_err(|source| RestoreError::Object { index, source })?;
                let key = || ObjectKey::new(id.namespace, id.name).to_string();
                if object_revision > revision {
                    return Err(RestoreError::AheadOfStore {
                        key: key(),
                        object: object_revision,
                        store: revision,
                    });
                }
                let hash = st.slots.hash(id.namespace, id.name);
                if st
                    .slots
                    .find_hashed(&st.atoms, hash, id.namespace, id.name)
                    .is_some()
                {
                    return Err(RestoreError::Duplicate { key: key() });
                }
                let values = shared.indexers.values(&object);
                let body = codec::encode_body(&mut st.atoms, &id, root);
                let sealed = blob(&mut st.atoms, object_revision, &id, &body);
                let slot = st.slots.insert(&st.atoms, hash, sealed);
                reindex(&mut st.indexes, slot, &[], &values);
            }
            st.revision = revision;
        }
        shared.revisions.send_replace(revision);
        Ok(Writer {
            store: Store { shared },
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::store::tests::{controller_profile, fixture_pods, key, node_index, pod};

    /// What a reader can see of a store: every object with its revision and resourceVersion.
    fn contents(store: &Store) -> Vec<(String, u64, String, Value)> {
        store
            .list(None)
            .1
            .into_iter()
            .map(|o| {
                let rv = o.resource_version().to_owned();
                (o.key().to_string(), o.revision(), rv, o.to_json_value())
            })
            .collect()
    }

    /// The image as it travels: through JSON bytes, as the snapshot file holds it.
    fn through_bytes(image: &StoreImage) -> Vec<(u64, Value)> {
        image
            .objects
            .iter()
            .map(|o| {
                let bytes = o.to_json_bytes();
                (o.revision(), serde_json::from_slice(&bytes).expect("JSON"))
            })
            .collect()
    }

    #[test]
    fn a_restored_store_equals_the_one_it_was_taken_from() {
        let store = Writer::new(node_index());
        for (_, p) in fixture_pods() {
            store.apply(p.clone()).expect("apply full");
            let mut lean = controller_profile(&p);
            lean["metadata"]["namespace"] = json!("lean");
            store.apply(lean).expect("apply lean");
        }
        store.apply(pod("a", "x", "node-1", 1)).expect("add");
        store.apply(pod("a", "x", "node-2", 2)).expect("modify");
        store.apply(pod("a", "y", "node-2", 3)).expect("add");
        store.delete(&key("a", "y")).expect("delete");
        let image = store.image();

        let restored = Writer::restore(
            node_index(),
            image.epoch,
            image.revision,
            through_bytes(&image),
        )
        .expect("restore");
        assert_eq!(restored.epoch(), store.epoch());
        assert_eq!(restored.revision(), store.revision());
        assert_eq!(contents(&restored), contents(&store));
        // (Encoded sizes may differ by a few bytes: atom ids are numbered in another order.)
        assert_eq!(restored.stats().objects, store.stats().objects);
        let by_node = |s: &Store| contents_of(s.list_by_index("node", "node-2").expect("index"));
        assert_eq!(by_node(&restored), by_node(&store));
        assert_eq!(*restored.subscribe().borrow(), store.revision());

        // Watch tokens: the snapshot's revision resumes, an older one relists, and the next
        // change follows on.
        let at = store.revision();
        assert!(restored.changes_since(at).expect("resume").is_empty());
        assert!(matches!(
            restored.changes_since(at - 1),
            Err(StoreError::Expired { .. })
        ));
        let change = restored
            .apply(pod("a", "z", "node-1", 4))
            .expect("apply")
            .expect("a change");
        assert_eq!(change.revision, at + 1);
        let next = restored.changes_since(at).expect("resume");
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].key, key("a", "z"));
        // Objects from the snapshot are replaced and deleted like any other.
        let x = restored.delete(&key("a", "x")).expect("stored");
        assert_eq!(x.object.to_json_value(), pod("a", "x", "node-2", 2));
    }

    fn contents_of((_, items): (u64, Vec<StoredObject>)) -> Vec<String> {
        items.iter().map(|o| o.key().to_string()).collect()
    }

    #[test]
    fn a_restore_refuses_what_does_not_hold_together() {
        let twice = vec![(1, pod("a", "x", "n", 1)), (2, pod("a", "x", "n", 2))];
        assert!(matches!(
            Writer::restore(StoreOptions::default(), 7, 2, twice),
            Err(RestoreError::Duplicate { .. })
        ));
        let ahead = vec![(5, pod("a", "x", "n", 1))];
        assert!(matches!(
            Writer::restore(StoreOptions::default(), 7, 2, ahead),
            Err(RestoreError::AheadOfStore { .. })
        ));
        let nameless = vec![(1, json!({"metadata": {}}))];
        assert!(matches!(
            Writer::restore(StoreOptions::default(), 7, 2, nameless),
            Err(RestoreError::Object { index: 0, .. })
        ));
    }
}
