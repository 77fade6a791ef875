//! The current objects: a table of slots holding their blobs, found by key through a
//! SwissTable of slot numbers hashed by namespace and name. The key is read back from the
//! blob's header, so the table keeps no key of its own: a slot costs its blob pointer and
//! one table entry.

use ahash::RandomState;
use hashbrown::HashTable;

use super::atoms::{AtomId, Atoms};
use super::codec::{self, Name};
use super::Blob;

pub(super) struct Slots {
    /// Current objects, encoded; `None` for free slots.
    pub(super) blobs: Vec<Option<Blob>>,
    free: Vec<u32>,
    /// Slot numbers, hashed by namespace and name.
    keys: HashTable<u32>,
    hasher: RandomState,
    /// Encoded bytes of the current objects.
    encoded_bytes: usize,
}

fn key_hash(hasher: &RandomState, namespace: Option<&[u8]>, name: &[u8]) -> u64 {
    hasher.hash_one((namespace, name))
}

/// Hash of the key of the object in `slot`.
fn slot_hash(hasher: &RandomState, atoms: &Atoms, blobs: &[Option<Blob>], slot: u32) -> u64 {
    let blob = blobs[slot as usize]
        .as_deref()
        .expect("indexed slots are occupied");
    let h = codec::parse_header(blob);
    let ns = h.namespace.map(|a| atoms.payload(a));
    match h.name {
        Name::Inline(name) => key_hash(hasher, ns, name.as_bytes()),
        Name::Generated { .. } => key_hash(hasher, ns, h.name.to_string(atoms).as_bytes()),
    }
}

impl Slots {
    pub(super) fn new() -> Self {
        Self {
            blobs: Vec::new(),
            free: Vec::new(),
            keys: HashTable::new(),
            hasher: RandomState::new(),
            encoded_bytes: 0,
        }
    }

    /// Number of current objects.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    pub(super) fn encoded_bytes(&self) -> usize {
        self.encoded_bytes
    }

    /// The hash of a key, for [`Slots::find_hashed`], [`Slots::insert`] and [`Slots::remove`].
    pub(super) fn hash(&self, namespace: Option<&str>, name: &str) -> u64 {
        key_hash(&self.hasher, namespace.map(str::as_bytes), name.as_bytes())
    }

    /// The slot of the object with this key.
    pub(super) fn find(&self, atoms: &Atoms, namespace: Option<&str>, name: &str) -> Option<u32> {
        self.find_hashed(atoms, self.hash(namespace, name), namespace, name)
    }

    /// [`Slots::find`], with the key's hash already known.
    pub(super) fn find_hashed(
        &self,
        atoms: &Atoms,
        hash: u64,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<u32> {
        self.keys
            .find(hash, |&slot| self.slot_is(atoms, slot, namespace, name))
            .copied()
    }

    fn slot_is(&self, atoms: &Atoms, slot: u32, namespace: Option<&str>, name: &str) -> bool {
        let blob = self.blobs[slot as usize]
            .as_deref()
            .expect("indexed slots are occupied");
        blob_is(atoms, blob, namespace, name)
    }

    /// The object in `slot` (`None` for a free slot).
    pub(super) fn get(&self, slot: u32) -> Option<&Blob> {
        self.blobs[slot as usize].as_ref()
    }

    /// Stores a new object, whose key hashes to `hash`; returns its slot.
    pub(super) fn insert(&mut self, atoms: &Atoms, hash: u64, blob: Blob) -> u32 {
        self.encoded_bytes += blob.len();
        let slot = match self.free.pop() {
            Some(slot) => {
                self.blobs[slot as usize] = Some(blob);
                slot
            }
            None => {
                if self.blobs.len() == self.blobs.capacity() {
                    // Grow by a quarter, not double: slots are a large share of the memory.
                    self.blobs.reserve_exact((self.blobs.len() / 4).max(16));
                }
                self.blobs.push(Some(blob));
                u32::try_from(self.blobs.len() - 1).expect("fewer than 2^32 objects")
            }
        };
        self.keys.insert_unique(hash, slot, |&s| {
            slot_hash(&self.hasher, atoms, &self.blobs, s)
        });
        slot
    }

    /// Replaces the object in an occupied slot (same key); returns the replaced one.
    pub(super) fn replace(&mut self, slot: u32, blob: Blob) -> Blob {
        self.encoded_bytes += blob.len();
        let replaced = self.blobs[slot as usize]
            .replace(blob)
            .expect("found slots are occupied");
        self.encoded_bytes -= replaced.len();
        replaced
    }

    /// Removes the object in `slot`, whose key hashes to `hash`; returns it.
    pub(super) fn remove(&mut self, atoms: &Atoms, hash: u64, slot: u32) -> Blob {
        if let Ok(entry) = self.keys.find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
        let blob = self.blobs[slot as usize]
            .take()
            .expect("removed slots are occupied");
        self.encoded_bytes -= blob.len();
        self.free.push(slot);
        if self.keys.is_empty() {
            self.blobs = Vec::new();
            self.free = Vec::new();
            self.keys = HashTable::new();
        } else if self.keys.capacity() > 64 && self.keys.len() * 4 < self.keys.capacity() {
            let len = self.keys.len();
            self.keys
                .shrink_to(len * 2, |&s| slot_hash(&self.hasher, atoms, &self.blobs, s));
        }
        blob
    }

    /// The current objects, or those in namespace `ns` (given as its atom).
    pub(super) fn occupied(&self, ns: Option<AtomId>) -> impl Iterator<Item = &Blob> + '_ {
        self.blobs
            .iter()
            .flatten()
            .filter(move |blob| ns.is_none() || codec::parse_header(blob).namespace == ns)
    }
}

/// Whether `blob` is the object `namespace`/`name`.
pub(super) fn blob_is(atoms: &Atoms, blob: &[u8], namespace: Option<&str>, name: &str) -> bool {
    let h = codec::parse_header(blob);
    let ns_matches = match (h.namespace, namespace) {
        (None, None) => true,
        (Some(a), Some(ns)) => atoms.payload(a) == ns.as_bytes(),
        _ => false,
    };
    ns_matches && h.name.eq_str(atoms, name)
}
