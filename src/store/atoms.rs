//! Reference-counted interning of the byte strings objects share: strings (keys, label values,
//! owner names...) and encoded structure (object and array templates, constant arrays).
//!
//! Every atom is `kind byte + payload` in one allocation, found again by content through a
//! SwissTable of ids. An atom lives while something references it and is freed, and its id
//! reused, when the last reference goes.

use ahash::RandomState;
use hashbrown::HashTable;

pub(crate) type AtomId = u32;

/// A UTF-8 string.
pub(crate) const KIND_STR: u8 = b's';
/// An object template (see `codec`).
pub(crate) const KIND_TEMPLATE: u8 = b't';
/// An array whose elements are all constant (see `codec`).
pub(crate) const KIND_ARRAY: u8 = b'a';
/// The template of an array with holes (see `codec`).
pub(crate) const KIND_ARRAY_TEMPLATE: u8 = b'r';

#[derive(Default)]
struct Entry {
    /// kind byte, then payload; empty while the id is free.
    bytes: Box<[u8]>,
    refs: u32,
}

pub(crate) struct Atoms {
    entries: Vec<Entry>,
    free: Vec<AtomId>,
    table: HashTable<AtomId>,
    hasher: RandomState,
    live: usize,
    live_bytes: usize,
}

fn hash_of(hasher: &RandomState, kind: u8, payload: &[u8]) -> u64 {
    hasher.hash_one((kind, payload))
}

fn hash_entry(hasher: &RandomState, bytes: &[u8]) -> u64 {
    hash_of(hasher, bytes[0], &bytes[1..])
}

impl Atoms {
    pub(crate) fn new() -> Self {
        Self {
            entries: Vec::new(),
            free: Vec::new(),
            table: HashTable::new(),
            hasher: RandomState::new(),
            live: 0,
            live_bytes: 0,
        }
    }

    /// Takes one reference on the atom `kind + payload`, creating it if needed. Returns its id
    /// and whether it was created.
    pub(crate) fn acquire(&mut self, kind: u8, payload: &[u8]) -> (AtomId, bool) {
        let Self {
            entries,
            free,
            table,
            hasher,
            ..
        } = self;
        let hash = hash_of(hasher, kind, payload);
        if let Some(&id) = table.find(hash, |&id| {
            let b = &entries[id as usize].bytes;
            b[0] == kind && b[1..] == *payload
        }) {
            entries[id as usize].refs += 1;
            return (id, false);
        }
        let mut bytes = Vec::with_capacity(payload.len() + 1);
        bytes.push(kind);
        bytes.extend_from_slice(payload);
        let entry = Entry {
            bytes: bytes.into_boxed_slice(),
            refs: 1,
        };
        let id = match free.pop() {
            Some(id) => {
                entries[id as usize] = entry;
                id
            }
            None => {
                let id = AtomId::try_from(entries.len()).expect("fewer than 2^32 atoms");
                entries.push(entry);
                id
            }
        };
        table.insert_unique(hash, id, |&id| {
            hash_entry(hasher, &entries[id as usize].bytes)
        });
        self.live += 1;
        self.live_bytes += payload.len() + 1;
        (id, true)
    }

    /// The id of an existing atom, without taking a reference.
    pub(crate) fn lookup(&self, kind: u8, payload: &[u8]) -> Option<AtomId> {
        let hash = hash_of(&self.hasher, kind, payload);
        self.table
            .find(hash, |&id| {
                let b = &self.entries[id as usize].bytes;
                b[0] == kind && b[1..] == *payload
            })
            .copied()
    }

    pub(crate) fn kind(&self, id: AtomId) -> u8 {
        self.entries[id as usize].bytes[0]
    }

    pub(crate) fn payload(&self, id: AtomId) -> &[u8] {
        &self.entries[id as usize].bytes[1..]
    }

    /// References currently held on the atom.
    pub(crate) fn refs(&self, id: AtomId) -> u32 {
        self.entries[id as usize].refs
    }

    pub(crate) fn str(&self, id: AtomId) -> &str {
        debug_assert_eq!(self.kind(id), KIND_STR);
        std::str::from_utf8(self.payload(id)).expect("string atoms hold UTF-8")
    }

    /// Drops one reference. When it was the last, the atom is freed and its bytes (kind byte
    /// first) returned, so that the caller can release what they reference in turn.
    pub(crate) fn release(&mut self, id: AtomId) -> Option<Box<[u8]>> {
        let entry = &mut self.entries[id as usize];
        debug_assert!(
            entry.refs > 0,
            "atom {id} released more often than acquired"
        );
        entry.refs -= 1;
        if entry.refs > 0 {
            return None;
        }
        let bytes = std::mem::take(&mut entry.bytes);
        let hash = hash_entry(&self.hasher, &bytes);
        if let Ok(found) = self.table.find_entry(hash, |&x| x == id) {
            found.remove();
        }
        self.live -= 1;
        self.live_bytes -= bytes.len();
        if self.live == 0 {
            self.entries = Vec::new();
            self.free = Vec::new();
            self.table = HashTable::new();
        } else {
            self.free.push(id);
            let cap = self.table.capacity();
            if cap > 64 && self.table.len() * 4 < cap {
                let Self {
                    entries,
                    table,
                    hasher,
                    ..
                } = self;
                let len = table.len();
                table.shrink_to(len * 2, |&id| {
                    hash_entry(hasher, &entries[id as usize].bytes)
                });
            }
        }
        Some(bytes)
    }

    /// Every live atom: id, kind, bytes (kind byte included) and references held.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (AtomId, u8, usize, u32)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.bytes.is_empty())
            .map(|(id, e)| (id as AtomId, e.bytes[0], e.bytes.len(), e.refs))
    }

    /// Number of live atoms.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Bytes held by live atoms (payloads plus kind bytes, without allocator overhead).
    pub(crate) fn bytes(&self) -> usize {
        self.live_bytes
    }
}
