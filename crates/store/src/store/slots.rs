//! The current objects: a table of slots holding where their blobs are in an arena, found by
//! key through a SwissTable of slot numbers hashed by namespace and name. The key is read back
//! from the blob's header, so the table keeps no key of its own: a slot costs its 4-byte
//! location, one table entry and its blob's bytes with a length before them.
//!
//! Decision: blobs live in an arena (`arena`), not in a reference-counted allocation each
//! shared with the change log and readers. That allocation cost a 16-byte slot, an 8-byte
//! count and the allocator's rounding, about 30 bytes per object; in the arena a blob costs
//! its bytes, one byte of length and 4 of location. What leaves the arena (a replaced or
//! deleted state, which the change log keeps) and what a reader reads are copies of the bytes
//! ([`Blob`]s); the atoms a copy names stay alive for readers through the store's pins (see
//! `retired`).

use ahash::RandomState;

use super::arena::{Arena, At, NOWHERE};
use super::atoms::{AtomId, Atoms};
use super::codec::{self, Name};
use super::ids::IdTable;
use super::paged::Paged;
use super::Blob;

/// Compaction moves the blobs of the chunks with at least a sixteenth of their bytes freed
/// once freed bytes are more than an eighth of the live ones.
///
/// Decision: tighter than the atoms' (a quarter and a half): every update of an object frees
/// its previous blob, so under steady updates the freed room is a standing share of the
/// store. At these shares it stays between 6% and 12% of the blobs' bytes, and the copying
/// costs at most 15 bytes per byte freed: about a microsecond per update of a 100-byte
/// blob, a tenth of what encoding it costs.
const COMPACT_SHARE: usize = 16;
const COMPACT_AT: usize = 8;

pub(super) struct Slots {
    /// Where each slot's blob is in `arena`: its length (a varint), then its bytes;
    /// [`NOWHERE`] for a free slot.
    at: Paged<At>,
    arena: Arena,
    free: Vec<u32>,
    /// Slot numbers, hashed by namespace and name.
    keys: IdTable,
    hasher: RandomState,
    /// Encoded bytes of the current objects.
    encoded_bytes: usize,
    /// The arena's bytes holding them (lengths included).
    live_bytes: usize,
}

fn key_hash(hasher: &RandomState, namespace: Option<&[u8]>, name: &[u8]) -> u64 {
    hasher.hash_one((namespace, name))
}

/// Hash of the key of the object in `slot`.
fn slot_hash(hasher: &RandomState, atoms: &Atoms, arena: &Arena, at: &Paged<At>, slot: u32) -> u64 {
    let loc = at[slot as usize];
    assert_ne!(loc, NOWHERE, "indexed slots are occupied");
    let h = codec::parse_header(arena.sized(loc).0);
    let ns = h.namespace.map(|a| atoms.payload(a));
    match h.name {
        Name::Inline(name) => key_hash(hasher, ns, name.as_bytes()),
        Name::Generated { .. } => key_hash(hasher, ns, h.name.to_string(atoms).as_bytes()),
    }
}

impl Slots {
    pub(super) fn new() -> Self {
        Self {
            at: Paged::new(),
            arena: Arena::default(),
            free: Vec::new(),
            keys: IdTable::new(),
            hasher: RandomState::new(),
            encoded_bytes: 0,
            live_bytes: 0,
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
        self.keys.find(hash, |slot| {
            let blob = self.get(slot).expect("indexed slots are occupied");
            blob_is(atoms, blob, namespace, name)
        })
    }

    /// The object in `slot` (`None` for a free slot).
    pub(super) fn get(&self, slot: u32) -> Option<&[u8]> {
        let slot = slot as usize;
        if slot >= self.at.len() || self.at[slot] == NOWHERE {
            return None;
        }
        Some(self.arena.sized(self.at[slot]).0)
    }

    /// Copies `blob` into the arena; returns where.
    fn put(&mut self, blob: &[u8]) -> At {
        let at = self.arena.store_sized(&[blob], self.live_bytes);
        self.encoded_bytes += blob.len();
        self.live_bytes += self.arena.sized(at).1;
        at
    }

    /// Frees the blob of `slot` in the arena; returns a copy of it.
    fn take(&mut self, slot: u32) -> Blob {
        let at = std::mem::replace(&mut self.at[slot as usize], NOWHERE);
        assert_ne!(at, NOWHERE, "taken slots are occupied");
        let (blob, len) = self.arena.sized(at);
        let copy = Blob::from(blob);
        self.encoded_bytes -= copy.len();
        self.live_bytes -= len;
        self.arena.free(at, len);
        copy
    }

    /// Stores a new object, whose key hashes to `hash`; returns its slot.
    pub(super) fn insert(&mut self, atoms: &Atoms, hash: u64, blob: &[u8]) -> u32 {
        let at = self.put(blob);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.at[slot as usize] = at;
                slot
            }
            None => {
                self.at.push(at);
                u32::try_from(self.at.len() - 1).expect("fewer than 2^32 objects")
            }
        };
        self.keys.insert_unique(hash, slot, |s| {
            slot_hash(&self.hasher, atoms, &self.arena, &self.at, s)
        });
        slot
    }

    /// Replaces the object in an occupied slot (same key); returns a copy of the replaced one.
    pub(super) fn replace(&mut self, slot: u32, blob: &[u8]) -> Blob {
        let replaced = self.take(slot);
        self.at[slot as usize] = self.put(blob);
        self.compact_if_sparse();
        replaced
    }

    /// Removes the object in `slot`, whose key hashes to `hash`; returns a copy of it.
    pub(super) fn remove(&mut self, atoms: &Atoms, hash: u64, slot: u32) -> Blob {
        self.keys.remove(hash, slot, |s| {
            slot_hash(&self.hasher, atoms, &self.arena, &self.at, s)
        });
        let blob = self.take(slot);
        self.free.push(slot);
        if self.keys.len() == 0 {
            *self = Self {
                hasher: self.hasher.clone(),
                ..Self::new()
            };
        }
        self.compact_if_sparse();
        blob
    }

    /// Compacts the arena when freed bytes are too large a share (see [`COMPACT_AT`]).
    fn compact_if_sparse(&mut self) {
        if self.arena.dead() * COMPACT_AT <= self.live_bytes {
            return;
        }
        let compaction = self.arena.begin_compaction(COMPACT_SHARE);
        for i in 0..self.at.len() {
            let at = self.at[i];
            if at == NOWHERE {
                continue;
            }
            let len = self.arena.sized(at).1;
            if let Some(moved) = self.arena.relocate(&compaction, at, len, self.live_bytes) {
                self.at[i] = moved;
            }
        }
        self.arena.end_compaction(compaction);
    }

    /// The current objects, or those in namespace `ns` (given as its atom).
    pub(super) fn occupied(&self, ns: Option<AtomId>) -> impl Iterator<Item = &[u8]> + '_ {
        self.occupied_in(ns).map(|(_, blob)| blob)
    }

    /// The occupied slots, or those holding an object of namespace `ns`.
    pub(super) fn occupied_slots(&self, ns: Option<AtomId>) -> impl Iterator<Item = u32> + '_ {
        self.occupied_in(ns).map(|(slot, _)| slot)
    }

    fn occupied_in(&self, ns: Option<AtomId>) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.at
            .iter()
            .zip(0u32..)
            .filter(|&(&at, _)| at != NOWHERE)
            .map(|(&at, slot)| (slot, self.arena.sized(at).0))
            .filter(move |(_, blob)| ns.is_none() || codec::parse_header(blob).namespace == ns)
    }

    /// What the slots hold besides the blobs' own bytes: locations, free list, key table, and
    /// the arena's lengths, freed room and unused room.
    pub(super) fn structure_bytes(&self) -> usize {
        self.at.allocated_bytes()
            + self.free.capacity() * size_of::<u32>()
            + self.keys.allocation_size()
            + self.arena.overhead(self.live_bytes)
            + (self.live_bytes - self.encoded_bytes)
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
