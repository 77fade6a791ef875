//! A store's contents taken out and put back, for warm restarts (the file itself is
//! `informerd::snapshot`'s): the interned atoms and every current object's blob, as the store
//! holds them, with the store's revision and epoch. Restored, the store answers reads and
//! resumes watch tokens as the one it was taken from did at that revision.
//!
//! Decision: objects leave as the codec's blobs and the atoms they name, not as JSON. The JSON
//! form (format 1) re-encoded every object on load: at 150,000 controller pods (release,
//! `make bench-restart`) loading took 3.3 s of a 4.5 s warm start and the file held 1,771 bytes
//! per pod; as blobs and atoms, 0.26 to 0.48 s of 1.3 to 1.6 s (two runs) and 172 bytes per
//! pod (0.29 s of 1.5 s and 129 bytes per pod with store layout 5:
//! `benches/results/restart.md`). They are copied back as they are: the load costs what
//! reading the bytes and rebuilding the hash tables cost. Atom ids only mean something together
//! with the atoms, so both travel together, under their own ids; the references each atom
//! holds are not written but counted again from the restored blobs (which also checks that
//! every atom a blob names is there), and atoms that only the change log held are dropped. A
//! blob layout is only readable by a build that encodes the same way: [`layout`] fingerprints
//! it, and a snapshot of another layout is refused (the cache lists, once, after such an
//! upgrade).
//!
//! Decision: a file that passes its checksum and has this build's layout is trusted as this
//! build wrote it, except for what the restore checks anyway (the atoms a blob names exist,
//! keys are unique, revisions are not ahead of the store): anyone who can write the snapshot
//! directory can write a well-formed snapshot of other objects too. A walk that stumbles on
//! bytes it cannot read is caught and refuses the snapshot rather than ending informerd.
//!
//! Decision: the change log is not kept. A restored store's log starts empty at the
//! snapshot's revision: a client whose token is that revision (every watcher that was caught up
//! when informerd stopped) resumes without a gap; an older token gets `Expired` and relists
//! from informerd, as after a log overflow.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::codec;
use super::index::reindex;
use super::reader::Store;
use super::state::Shared;
use super::{ObjectKey, StoreOptions, Writer};

pub use super::layout::layout;

/// What a store held at one revision: the input of a snapshot.
pub struct StoreImage {
    /// The store's epoch.
    pub epoch: u64,
    /// The revision of its last change.
    pub revision: u64,
    /// The live atoms, in id order, each as its id (u32 LE), length (u32 LE) and bytes.
    atoms: Vec<u8>,
    atom_count: usize,
    /// Every current object's blob (its header carries the revision of its last change), each
    /// as its length (u32 LE) and bytes.
    objects: Vec<u8>,
    object_count: usize,
}

impl StoreImage {
    /// The atoms, in id order: id and bytes, to be given back to [`Restore::atom`].
    pub fn atoms(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        let mut rest = &self.atoms[..];
        std::iter::from_fn(move || {
            let (id, tail) = rest.split_first_chunk::<4>()?;
            let (len, tail) = tail.split_first_chunk::<4>()?;
            let (bytes, tail) = tail.split_at(u32::from_le_bytes(*len) as usize);
            rest = tail;
            Some((u32::from_le_bytes(*id), bytes))
        })
    }

    /// How many atoms [`StoreImage::atoms`] gives.
    pub fn atom_count(&self) -> usize {
        self.atom_count
    }

    /// The objects, encoded, to be given back to [`Restore::object`].
    pub fn objects(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut rest = &self.objects[..];
        std::iter::from_fn(move || {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let (bytes, tail) = tail.split_at(u32::from_le_bytes(*len) as usize);
            rest = tail;
            Some(bytes)
        })
    }

    /// How many objects [`StoreImage::objects`] gives.
    pub fn object_count(&self) -> usize {
        self.object_count
    }
}

/// Why a restore refused what it was given (a snapshot that does not hold together).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// An atom or object that cannot be put back as it is.
    #[error("{0}")]
    Invalid(String),
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
    /// Everything the store holds now, consistent at one revision. The lock is held while the
    /// atoms' and the blobs' bytes are copied, not while they are written out.
    pub fn image(&self) -> StoreImage {
        let st = self.shared.read();
        let mut atoms = Vec::with_capacity(st.atoms.bytes() + 8 * st.atoms.len());
        let mut atom_count = 0;
        for (id, bytes) in st.atoms.iter_bytes() {
            atoms.extend_from_slice(&id.to_le_bytes());
            atoms.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            atoms.extend_from_slice(bytes);
            atom_count += 1;
        }
        let mut objects = Vec::with_capacity(st.slots.encoded_bytes() + 4 * st.slots.len());
        for blob in st.slots.occupied(None) {
            objects.extend_from_slice(&(blob.len() as u32).to_le_bytes());
            objects.extend_from_slice(blob);
        }
        StoreImage {
            epoch: self.shared.epoch,
            revision: st.revision,
            atoms,
            atom_count,
            objects,
            object_count: st.slots.len(),
        }
    }
}

/// A store being restored from an image: its atoms first, then its objects
/// ([`Writer::restore`]).
pub struct Restore {
    shared: Arc<Shared>,
    revision: u64,
    objects: usize,
}

impl Writer {
    /// Starts restoring a store at `revision` with epoch `epoch`, from what [`Store::image`]
    /// of the store it restores gave: every atom, then every object, then
    /// [`Restore::finish`]. Its change log is empty; the next change gets revision
    /// `revision + 1`.
    pub fn restore(opts: StoreOptions, epoch: u64, revision: u64) -> Restore {
        Restore {
            shared: Arc::new(Shared::with_epoch(opts, epoch)),
            revision,
            objects: 0,
        }
    }
}

impl Restore {
    /// Puts back one atom (ids in increasing order, before any object).
    pub fn atom(&mut self, id: u32, bytes: &[u8]) -> Result<(), RestoreError> {
        if self.objects > 0 {
            return Err(RestoreError::Invalid(format!(
                "atom {id} comes after the objects"
            )));
        }
        let mut st = self.shared.write();
        st.atoms
            .restore_at(id, bytes)
            .map_err(RestoreError::Invalid)
    }

    /// Puts back one object, as its blob.
    pub fn object(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        let index = self.objects;
        self.objects += 1;
        let shared = &self.shared;
        let mut guard = shared.write();
        let st = &mut *guard;
        let blob = bytes;
        let invalid = |why: String| RestoreError::Invalid(format!("object {index}: {why}"));
        let read = catch_unwind(AssertUnwindSafe(|| -> Result<_, String> {
            let h = codec::parse_header(blob);
            let key = ObjectKey::new(
                h.namespace.map(|a| st.atoms.str(a)),
                &h.name.to_string(&st.atoms),
            );
            codec::retain_blob(&mut st.atoms, blob)?;
            // Indexes are rebuilt from the objects (their configuration may have changed).
            let values = (!shared.indexers.is_empty())
                .then(|| shared.indexers.values(&codec::decode_blob(&st.atoms, blob)));
            Ok((h.revision, key, values))
        }));
        let (revision, key, values) = read
            .map_err(|_| invalid("its bytes cannot be read".to_owned()))?
            .map_err(invalid)?;
        if revision > self.revision {
            return Err(RestoreError::AheadOfStore {
                key: key.to_string(),
                object: revision,
                store: self.revision,
            });
        }
        let hash = st.slots.hash(key.namespace(), key.name());
        if st
            .slots
            .find_hashed(&st.atoms, hash, key.namespace(), key.name())
            .is_some()
        {
            return Err(RestoreError::Duplicate {
                key: key.to_string(),
            });
        }
        let slot = st.slots.insert(&st.atoms, hash, blob);
        if let Some(values) = values {
            reindex(&mut st.indexes, slot, &[], &values);
        }
        Ok(())
    }

    /// The restored store, once every atom and object is back.
    pub fn finish(self) -> Writer {
        {
            let mut st = self.shared.write();
            st.atoms.drop_unreferenced();
            st.revision = self.revision;
        }
        self.shared.revisions.send_replace(self.revision);
        Writer {
            store: Store {
                shared: self.shared,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::store::tests::{controller_profile, fixture_pods, key, node_index, pod};
    use crate::store::{StoreError, StoredObject};

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

    /// The image as it travels: copied out byte by byte, then restored.
    fn through_bytes(opts: StoreOptions, image: &StoreImage) -> Result<Writer, RestoreError> {
        let atoms: Vec<(u32, Vec<u8>)> = image.atoms().map(|(id, b)| (id, b.to_vec())).collect();
        let objects: Vec<Vec<u8>> = image.objects().map(<[u8]>::to_vec).collect();
        assert_eq!(
            (atoms.len(), objects.len()),
            (image.atom_count(), image.object_count())
        );
        let mut restore = Writer::restore(opts, image.epoch, image.revision);
        for (id, bytes) in &atoms {
            restore.atom(*id, bytes)?;
        }
        for blob in &objects {
            restore.object(blob)?;
        }
        Ok(restore.finish())
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

        let small_log = StoreOptions {
            log_max_events: 1,
            ..node_index()
        };
        let restored = through_bytes(small_log, &image).expect("restore");
        assert_eq!(restored.epoch(), store.epoch());
        assert_eq!(restored.revision(), store.revision());
        assert_eq!(contents(&restored), contents(&store));
        // The same encoding, byte for byte, and the atoms the current objects need: those of
        // a store that was given only them (the original also holds its change log's).
        let (before, after) = (store.stats(), restored.stats());
        assert_eq!(after.objects, before.objects);
        assert_eq!(after.encoded_bytes, before.encoded_bytes);
        let fresh = Writer::new(StoreOptions::default());
        for object in store.list(None).1 {
            fresh.apply(object.to_json_value()).expect("apply");
        }
        // (Counted, not sized: a template's bytes name atoms by ids numbered in another order.)
        assert_eq!(after.interned_strings, fresh.stats().interned_strings);
        assert!(before.interned_strings > after.interned_strings);
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
        // Objects from the snapshot are replaced and deleted like any other, and their atoms
        // are counted right: removing everything frees every atom.
        let x = restored.delete(&key("a", "x")).expect("stored");
        assert_eq!(x.object.to_json_value(), pod("a", "x", "node-2", 2));
        drop((change, next, x));
        for k in restored.keys(None) {
            restored.delete(&k).expect("stored");
        }
        // One more change pushes the last deletion out of the one-event log: what is left
        // interned is exactly what that object needs.
        restored.apply(pod("b", "q", "node-9", 9)).expect("add");
        restored.reclaim();
        let fresh = Writer::new(StoreOptions::default());
        fresh.apply(pod("b", "q", "node-9", 9)).expect("add");
        assert_eq!(
            restored.stats().interned_strings,
            fresh.stats().interned_strings
        );
    }

    #[test]
    fn atoms_only_the_change_log_held_are_not_restored() {
        let store = Writer::new(StoreOptions::default());
        let mut p = pod("a", "x", "node-1", 1);
        p["metadata"]["labels"]["only-before"] = json!("a value no other object has");
        store.apply(p).expect("add");
        store.apply(pod("a", "x", "node-1", 2)).expect("modify");
        let image = store.image();
        let restored = through_bytes(StoreOptions::default(), &image).expect("restore");
        assert!(
            restored.stats().interned_strings < store.stats().interned_strings,
            "the change log's past state kept its label in the store, not in the restored one"
        );
        let fresh = Writer::new(StoreOptions::default());
        fresh.apply(pod("a", "x", "node-1", 2)).expect("add");
        assert_eq!(
            restored.stats().interned_strings,
            fresh.stats().interned_strings
        );
        assert_eq!(contents(&restored)[0].3, pod("a", "x", "node-1", 2));
    }

    fn contents_of((_, items): (u64, Vec<StoredObject>)) -> Vec<String> {
        items.iter().map(|o| o.key().to_string()).collect()
    }

    #[test]
    fn a_restore_refuses_what_does_not_hold_together() {
        let store = Writer::new(StoreOptions::default());
        store.apply(pod("a", "x", "n", 1)).expect("add");
        store.apply(pod("a", "y", "n", 2)).expect("add");
        let image = store.image();
        let atoms: Vec<(u32, Vec<u8>)> = image.atoms().map(|(id, b)| (id, b.to_vec())).collect();
        let blob = image.objects().next().expect("an object").to_vec();
        let restore_with = |revision: u64, atoms: &[(u32, Vec<u8>)], blobs: &[&[u8]]| {
            let mut r = Writer::restore(StoreOptions::default(), 7, revision);
            for (id, bytes) in atoms {
                r.atom(*id, bytes)?;
            }
            for b in blobs {
                r.object(b)?;
            }
            Ok::<_, RestoreError>(r.finish())
        };

        let twice = restore_with(2, &atoms, &[&blob, &blob]);
        assert!(matches!(twice, Err(RestoreError::Duplicate { .. })));
        // Whichever object comes first, its revision is after a store at revision 0.
        assert!(matches!(
            restore_with(0, &atoms, &[&blob]),
            Err(RestoreError::AheadOfStore { .. })
        ));
        // Without its atoms, or with bytes that are no blob: refused, not a panic.
        assert!(matches!(
            restore_with(2, &[], &[&blob]),
            Err(RestoreError::Invalid(_))
        ));
        assert!(matches!(
            restore_with(2, &atoms, &[&[0xFF, 0xFF, 0xFF][..]]),
            Err(RestoreError::Invalid(_))
        ));
        // Atoms out of order, repeated, or of no kind the codec has.
        let (id, bytes) = atoms.last().expect("atoms").clone();
        let repeated = [atoms.clone(), vec![(id + 1, bytes.clone())]].concat();
        assert!(
            restore_with(2, &repeated, &[]).is_err(),
            "the same atom twice"
        );
        let backwards = [atoms.clone(), vec![(0, b"sother".to_vec())]].concat();
        assert!(restore_with(2, &backwards, &[]).is_err(), "ids going back");
        assert!(restore_with(2, &[(0, b"?what".to_vec())], &[]).is_err());
        assert!(restore_with(2, &[(0, Vec::new())], &[]).is_err());
        assert!(
            restore_with(2, &atoms, &[&blob]).is_ok(),
            "and the good parts restore"
        );
    }
}
