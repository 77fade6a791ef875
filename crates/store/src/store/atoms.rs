//! Reference-counted interning of the byte strings objects share: strings (keys, label values,
//! owner names...) and encoded structure (object and array templates, constant arrays).
//!
//! Every atom is `kind byte + payload`, found again by content through a SwissTable of ids.
//! An atom lives while something references it and is freed, and its id reused, when the last
//! reference goes.
//!
//! Decision: atoms live packed in an arena (`arena`), not in an allocation each. Most atoms
//! are small and many are referenced once (an owner's template), so an allocation per atom
//! cost its 16-byte `Box<[u8]>` pointer, the allocator's size-class rounding (about 10 bytes
//! on average) and an entry twice as wide as needed: a fifth of a realistic controller pod's
//! bytes. An entry is 8 bytes (location, references; the length is in the arena). Freed bytes stay in their
//! chunk until there are more of them than half the live bytes; then the chunks with at least
//! a quarter of their bytes freed are compacted (their live atoms copied to new chunks). Ids
//! never move, and the table finds atoms by content, so compaction only rewrites entries'
//! locations.

use ahash::RandomState;

use super::arena::{Arena, At, NOWHERE};
use super::ids::IdTable;
use super::packed::{self, Recent};
use super::paged::Paged;
use super::short::{self, Short};

pub(crate) type AtomId = u32;

/// A UTF-8 string.
pub(crate) const KIND_STR: u8 = b's';
/// A UTF-8 string, LZ4-compressed (see `packed`).
pub(crate) const KIND_STR_LZ4: u8 = b'z';
/// An object template (see `codec`).
pub(crate) const KIND_TEMPLATE: u8 = b't';
/// An array whose elements are all constant (see `codec`).
pub(crate) const KIND_ARRAY: u8 = b'a';
/// The template of an array with holes (see `codec`).
pub(crate) const KIND_ARRAY_TEMPLATE: u8 = b'r';

/// An atom's entry: 8 bytes, its length being in the arena before its bytes (one byte for
/// nearly every atom, against four here).
#[derive(Clone, Copy)]
struct Entry {
    /// Where its length, kind byte and payload are in the arena; [`NOWHERE`] while the id is
    /// free.
    at: At,
    refs: u32,
}

impl Default for Entry {
    fn default() -> Self {
        Self {
            at: NOWHERE,
            refs: 0,
        }
    }
}

impl Entry {
    fn is_live(self) -> bool {
        self.at != NOWHERE
    }
}

/// True for the kinds of atom whose payload names other atoms (templates and arrays).
pub(crate) fn names_atoms(kind: u8) -> bool {
    matches!(kind, KIND_TEMPLATE | KIND_ARRAY | KIND_ARRAY_TEMPLATE)
}

pub(crate) struct Atoms {
    entries: Paged<Entry>,
    free: Vec<AtomId>,
    table: IdTable,
    hasher: RandomState,
    arena: Arena,
    live: usize,
    live_bytes: usize,
    /// The atoms large strings became lately (see [`Recent`]).
    recent: Recent,
    /// The atoms of short strings, found without the table (see [`Short`]).
    short: Short,
}

fn hash_of(hasher: &RandomState, kind: u8, payload: &[u8]) -> u64 {
    hasher.hash_one((kind, payload))
}

fn hash_entry(hasher: &RandomState, bytes: &[u8]) -> u64 {
    hash_of(hasher, bytes[0], &bytes[1..])
}

/// The hash of an atom by id, for the table to move its ids when it grows or shrinks.
fn rehasher<'a>(
    hasher: &'a RandomState,
    arena: &'a Arena,
    entries: &'a Paged<Entry>,
) -> impl Fn(AtomId) -> u64 + 'a {
    move |id| hash_entry(hasher, entry_bytes(arena, entries[id as usize]))
}

fn entry_bytes(arena: &Arena, e: Entry) -> &[u8] {
    arena.sized(e.at).0
}

impl Atoms {
    pub(crate) fn new() -> Self {
        Self {
            entries: Paged::new(),
            free: Vec::new(),
            table: IdTable::new(),
            hasher: RandomState::new(),
            arena: Arena::default(),
            live: 0,
            live_bytes: 0,
            recent: Recent::default(),
            short: Short::default(),
        }
    }

    fn bytes_of(&self, id: AtomId) -> &[u8] {
        entry_bytes(&self.arena, self.entries[id as usize])
    }

    /// Takes one reference on the atom `kind + payload`, creating it if needed. Returns its id
    /// and whether it was created.
    pub(crate) fn acquire(&mut self, kind: u8, payload: &[u8]) -> (AtomId, bool) {
        let (id, created) = self.intern(kind, payload);
        self.entries[id as usize].refs += 1;
        (id, created)
    }

    /// The id of the atom `kind + payload`, created if needed, without taking a reference:
    /// the encoder looks atoms up this way and its holders take their references once they are
    /// known to be new (`codec::encode`). A created atom has no reference until then.
    pub(crate) fn intern(&mut self, kind: u8, payload: &[u8]) -> (AtomId, bool) {
        if kind == KIND_STR && payload.len() <= short::MAX_LEN {
            return self.intern_short(payload);
        }
        self.intern_in_table(kind, payload)
    }

    /// [`Atoms::intern`] of a short string, through the cache of short strings first.
    fn intern_short(&mut self, s: &[u8]) -> (AtomId, bool) {
        let key = short::Key::of(s).expect("a short string");
        if let Some(id) = self.short.get(&key) {
            return (id, false);
        }
        let (id, created) = self.intern_in_table(KIND_STR, s);
        self.short.put(&key, id);
        (id, created)
    }

    fn intern_in_table(&mut self, kind: u8, payload: &[u8]) -> (AtomId, bool) {
        let hash = hash_of(&self.hasher, kind, payload);
        if let Some(id) = self.table.find(hash, |id| {
            let b = entry_bytes(&self.arena, self.entries[id as usize]);
            b[0] == kind && b[1..] == *payload
        }) {
            return (id, false);
        }
        let entry = Entry {
            at: self.arena.store_sized(&[&[kind], payload], self.live_bytes),
            refs: 0,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.entries[id as usize] = entry;
                id
            }
            None => {
                let id = AtomId::try_from(self.entries.len()).expect("fewer than 2^32 atoms");
                self.entries.push(entry);
                id
            }
        };
        let rehash = rehasher(&self.hasher, &self.arena, &self.entries);
        self.table.insert_unique(hash, id, rehash);
        self.live += 1;
        self.live_bytes += payload.len() + 1;
        (id, true)
    }

    /// The string atom (packed or not) that the large string `s` became lately, if it is
    /// still that string (see [`Recent`]); else `s`'s hash, to [`Atoms::remember_large`] what
    /// it becomes.
    pub(crate) fn recent_large(&self, s: &str) -> Result<AtomId, u64> {
        let hash = self.hasher.hash_one(s);
        let Some(id) = self.recent.get(hash) else {
            return Err(hash);
        };
        let live = (id as usize) < self.entries.len() && self.entries[id as usize].is_live();
        let same = live && {
            let bytes = self.bytes_of(id);
            match bytes[0] {
                KIND_STR => bytes[1..] == *s.as_bytes(),
                KIND_STR_LZ4 => {
                    packed::unpacked_len(&bytes[1..]) == s.len() && packed::unpack(&bytes[1..]) == s
                }
                _ => false,
            }
        };
        if same {
            Ok(id)
        } else {
            Err(hash)
        }
    }

    /// Remembers that the large string of hash `hash` became the atom `id`.
    pub(crate) fn remember_large(&mut self, hash: u64, id: AtomId) {
        self.recent.put(hash, id);
    }

    /// Takes one more reference on a live atom.
    pub(crate) fn hold(&mut self, id: AtomId) {
        debug_assert!(self.entries[id as usize].is_live(), "atom {id} is not live");
        self.entries[id as usize].refs += 1;
    }

    /// The id of an existing atom, without taking a reference.
    pub(crate) fn lookup(&self, kind: u8, payload: &[u8]) -> Option<AtomId> {
        let hash = hash_of(&self.hasher, kind, payload);
        self.table.find(hash, |id| {
            let b = self.bytes_of(id);
            b[0] == kind && b[1..] == *payload
        })
    }

    pub(crate) fn kind(&self, id: AtomId) -> u8 {
        self.bytes_of(id)[0]
    }

    pub(crate) fn payload(&self, id: AtomId) -> &[u8] {
        &self.bytes_of(id)[1..]
    }

    /// References currently held on the atom.
    pub(crate) fn refs(&self, id: AtomId) -> u32 {
        self.entries[id as usize].refs
    }

    pub(crate) fn str(&self, id: AtomId) -> &str {
        debug_assert_eq!(self.kind(id), KIND_STR);
        std::str::from_utf8(self.payload(id)).expect("string atoms hold UTF-8")
    }

    /// Drops one reference. When it was the last, `freed` is given the atom's kind and
    /// payload (so that the caller can release what they reference in turn), the atom is
    /// freed and true returned.
    pub(crate) fn release(&mut self, id: AtomId, freed: impl FnOnce(u8, &[u8])) -> bool {
        let entry = &mut self.entries[id as usize];
        debug_assert!(
            entry.refs > 0,
            "atom {id} released more often than acquired"
        );
        entry.refs -= 1;
        if entry.refs > 0 {
            return false;
        }
        let bytes = self.bytes_of(id);
        freed(bytes[0], &bytes[1..]);
        self.free_entry(id);
        true
    }

    /// Frees the atom `id`, whatever its references, and gives its room back.
    fn free_entry(&mut self, id: AtomId) {
        let e = std::mem::take(&mut self.entries[id as usize]);
        let bytes = entry_bytes(&self.arena, e);
        if bytes[0] == KIND_STR {
            self.short.forget(&bytes[1..], id);
        }
        let hash = hash_entry(&self.hasher, bytes);
        let rehash = rehasher(&self.hasher, &self.arena, &self.entries);
        self.table.remove(hash, id, rehash);
        let (len, span) = {
            let (bytes, span) = self.arena.sized(e.at);
            (bytes.len(), span)
        };
        self.arena.free(e.at, span);
        self.live -= 1;
        self.live_bytes -= len;
        if self.live == 0 {
            self.entries = Paged::new();
            self.free = Vec::new();
            self.table = IdTable::new();
            self.arena = Arena::default();
            self.recent = Recent::default();
            self.short = Short::default();
            return;
        }
        self.free.push(id);
        if self.arena.dead() > self.live_bytes / 2 {
            self.compact();
        }
    }

    /// Copies the live atoms of the chunks with at least a quarter of their bytes freed into
    /// new chunks, and gives those chunks back. Afterwards at most a quarter of the arena's
    /// used bytes are freed ones, so the next compaction waits for a sixth of the live bytes
    /// to be freed: the copying costs O(1) per byte freed.
    fn compact(&mut self) {
        let compaction = self.arena.begin_compaction(4);
        for i in 0..self.entries.len() {
            let e = self.entries[i];
            if !e.is_live() {
                continue;
            }
            let span = self.arena.sized(e.at).1;
            let moved = self
                .arena
                .relocate(&compaction, e.at, span, self.live_bytes);
            if let Some(at) = moved {
                self.entries[i].at = at;
            }
        }
        self.arena.end_compaction(compaction);
    }

    /// Every live atom: id, kind, bytes (kind byte included) and references held.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (AtomId, u8, usize, u32)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_live())
            .map(|(id, e)| {
                let bytes = entry_bytes(&self.arena, *e);
                (id as AtomId, bytes[0], bytes.len(), e.refs)
            })
    }

    /// Every live atom's id and bytes (kind byte first), in id order: what a snapshot keeps.
    pub(crate) fn iter_bytes(&self) -> impl Iterator<Item = (AtomId, &[u8])> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_live())
            .map(|(id, e)| (id as AtomId, entry_bytes(&self.arena, *e)))
    }

    /// Puts back the atom `bytes` (kind byte first) under `id`, with no reference yet, as a
    /// snapshot held it (see `store::snapshot`). Ids come in increasing order; those skipped
    /// are free.
    pub(crate) fn restore_at(&mut self, id: AtomId, bytes: &[u8]) -> Result<(), String> {
        if (id as usize) < self.entries.len() {
            return Err(format!(
                "atom {id} comes after atom {}",
                self.entries.len() - 1
            ));
        }
        let (&kind, payload) = bytes
            .split_first()
            .ok_or_else(|| format!("atom {id} is empty"))?;
        if ![
            KIND_STR,
            KIND_STR_LZ4,
            KIND_TEMPLATE,
            KIND_ARRAY,
            KIND_ARRAY_TEMPLATE,
        ]
        .contains(&kind)
        {
            return Err(format!("atom {id} is of unknown kind {kind}"));
        }
        if self.lookup(kind, payload).is_some() {
            return Err(format!("atom {id} repeats another atom"));
        }
        while self.entries.len() < id as usize {
            self.free.push(self.entries.len() as AtomId);
            self.entries.push(Entry::default());
        }
        let at = self.arena.store_sized(&[bytes], self.live_bytes);
        self.entries.push(Entry { at, refs: 0 });
        let rehash = rehasher(&self.hasher, &self.arena, &self.entries);
        self.table
            .insert_unique(hash_entry(&self.hasher, bytes), id, rehash);
        self.live += 1;
        self.live_bytes += bytes.len();
        Ok(())
    }

    /// Takes a reference on a restored atom; whether it was the first (its own references are
    /// then to be taken too). `None`: there is no atom `id`.
    pub(crate) fn retain(&mut self, id: AtomId) -> Option<bool> {
        if id as usize >= self.entries.len() || !self.entries[id as usize].is_live() {
            return None;
        }
        let entry = &mut self.entries[id as usize];
        entry.refs += 1;
        Some(entry.refs == 1)
    }

    /// Frees every atom nothing references: what a restore put back for holders it did not
    /// restore (the change log's past states).
    pub(crate) fn drop_unreferenced(&mut self) {
        let unreferenced: Vec<AtomId> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_live() && e.refs == 0)
            .map(|(id, _)| id as AtomId)
            .collect();
        for id in unreferenced {
            self.free_entry(id);
        }
    }

    /// Number of live atoms.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Bytes held by live atoms (payloads plus kind bytes, without allocator overhead).
    pub(crate) fn bytes(&self) -> usize {
        self.live_bytes
    }

    /// What the atoms' bookkeeping holds besides their bytes: entries, the table, and the
    /// arena's chunks beyond the live bytes (freed atoms and room not yet used).
    pub(crate) fn structure_bytes(&self) -> usize {
        self.entries.allocated_bytes()
            + self.free.capacity() * size_of::<AtomId>()
            + self.table.allocation_size()
            + self.arena.overhead(self.live_bytes)
            + self.recent.allocation_size()
            + self.short.allocation_size()
    }
}
