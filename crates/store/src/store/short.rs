//! Short strings' atoms found again without hashing: an object's keys and its short constants
//! (`Running`, `True`, an image name) are the same few hundred strings in every object, and each
//! was hashed and looked up in the atom table for every object.
//!
//! Decision: a direct-mapped cache, one slot per string, holding the string itself as four
//! words and its atom's id. A string of at most [`MAX_LEN`] bytes is read as four (partly
//! overlapping) words which, with its length, say exactly which string it is, so a hit is four
//! comparisons: no hash of the whole string, no probe of the table, no visit to the arena where
//! the atom's bytes are. The atom table stays the truth; a miss, or a slot some other string
//! took, costs one lookup there as before. A slot is cleared when its atom is freed
//! ([`Short::forget`]), so a slot never names a dead or reused id. Under callgrind
//! (`examples/ingest_profile.rs`), a lookup that hits fell from about 200 instructions to 80,
//! and the atom lookups of storing 4,000 events from 79 to 45 million. [`SLOTS`] slots of 40
//! bytes, 20 KB per store, taken when its first short string comes.

use super::atoms::AtomId;

/// The longest string the cache holds.
pub(super) const MAX_LEN: usize = 32;

/// Slots of the cache: a pod's keys and common constants are about two hundred strings.
const SLOTS: usize = 512;

/// A string of at most [`MAX_LEN`] bytes as four words and its length: two strings of the
/// same length have the same words exactly when they are equal.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct Words {
    w: [u64; 4],
    len: u32,
}

impl Words {
    /// `None` for a string longer than [`MAX_LEN`].
    #[inline]
    fn of(s: &[u8]) -> Option<Words> {
        let len = s.len();
        let word = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
        let w = match len {
            // Bytes 0..16 and len-16..len cover the string.
            16..=MAX_LEN => [word(0), word(8), word(len - 16), word(len - 8)],
            8..=15 => [word(0), word(len - 8), 0, 0],
            4..=7 => {
                let half = |at: usize| {
                    u64::from(u32::from_le_bytes(
                        s[at..at + 4].try_into().expect("4 bytes"),
                    ))
                };
                [half(0) | half(len - 4) << 32, 0, 0, 0]
            }
            1..=3 => {
                let (a, b, c) = (s[0], s[len / 2], s[len - 1]);
                [
                    u64::from(a) | u64::from(b) << 8 | u64::from(c) << 16,
                    0,
                    0,
                    0,
                ]
            }
            0 => [0; 4],
            _ => return None,
        };
        Some(Words { w, len: len as u32 })
    }

    #[inline]
    fn slot(&self) -> usize {
        let mixed = (self.w[0] ^ self.w[1].rotate_left(23) ^ self.w[3].rotate_left(41))
            .wrapping_add(u64::from(self.len))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (mixed >> 55) as usize % SLOTS
    }
}

#[derive(Clone, Copy)]
struct Slot {
    words: Words,
    /// [`EMPTY`] when the slot holds nothing.
    id: AtomId,
}

const EMPTY: AtomId = AtomId::MAX;

/// See the module's documentation.
#[derive(Default)]
pub(super) struct Short {
    slots: Vec<Slot>,
}

/// A string's place in the cache, found once for a lookup and the [`Short::put`] after it.
pub(super) struct Key {
    words: Words,
    slot: usize,
}

impl Key {
    /// `None` for a string the cache does not hold (longer than [`MAX_LEN`]).
    #[inline]
    pub(super) fn of(s: &[u8]) -> Option<Key> {
        let words = Words::of(s)?;
        Some(Key {
            slot: words.slot(),
            words,
        })
    }
}

impl Short {
    /// The live atom of the string `key`, if the cache holds it.
    #[inline]
    pub(super) fn get(&self, key: &Key) -> Option<AtomId> {
        let slot = self.slots.get(key.slot)?;
        (slot.id != EMPTY && slot.words == key.words).then_some(slot.id)
    }

    /// Remembers that the string `key` is the live atom `id`, in place of what its slot held.
    pub(super) fn put(&mut self, key: &Key, id: AtomId) {
        if self.slots.is_empty() {
            self.slots = vec![
                Slot {
                    words: Words::default(),
                    id: EMPTY,
                };
                SLOTS
            ];
        }
        self.slots[key.slot] = Slot {
            words: key.words,
            id,
        };
    }

    /// Forgets the atom `id`, being freed, if its string `s` is in the cache.
    pub(super) fn forget(&mut self, s: &[u8], id: AtomId) {
        if let Some(key) = Key::of(s) {
            if let Some(slot) = self.slots.get_mut(key.slot) {
                if slot.id == id {
                    slot.id = EMPTY;
                }
            }
        }
    }

    pub(super) fn allocation_size(&self) -> usize {
        self.slots.capacity() * size_of::<Slot>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length up to [`MAX_LEN`], and strings that differ in one byte anywhere.
    #[test]
    fn words_tell_every_short_string_apart() {
        let base: Vec<u8> = (0..MAX_LEN as u8).map(|b| b'a' + b % 26).collect();
        let mut seen = std::collections::HashSet::new();
        let mut all = Vec::new();
        for len in 0..=MAX_LEN {
            let s = base[..len].to_vec();
            all.push(s.clone());
            for at in 0..len {
                let mut t = s.clone();
                t[at] = b'#';
                all.push(t);
            }
        }
        for s in &all {
            let w = Words::of(s).expect("short");
            assert!(seen.insert((w.w, w.len)), "{:?} has another's words", s);
        }
        assert!(Words::of(&[b'x'; MAX_LEN + 1]).is_none());
    }

    #[test]
    fn a_forgotten_atom_is_not_found_and_a_slot_holds_the_last_string() {
        let mut short = Short::default();
        let key = Key::of(b"metadata").unwrap();
        assert_eq!(short.get(&key), None);
        short.put(&key, 7);
        assert_eq!(short.get(&key), Some(7));
        assert_eq!(short.get(&Key::of(b"metadatb").unwrap()), None);
        // Another id's string in the slot is not forgotten for this id.
        short.forget(b"metadata", 8);
        assert_eq!(short.get(&key), Some(7));
        short.forget(b"metadata", 7);
        assert_eq!(short.get(&key), None);
    }
}
