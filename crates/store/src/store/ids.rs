//! A hash table of `u32` ids whose keys live elsewhere (the atoms' bytes, the objects' blob
//! headers): the caller hashes a key, and says whether an id holds it. The atom table and the
//! slots' key table are both one.
//!
//! Decision: our own table rather than `hashbrown`'s `HashTable<u32>`. Both cost 5 bytes per
//! bucket (the id and a byte of hash), but hashbrown's bucket count is a power of two, filled
//! to 7/8 at most: its load swings between 44% and 88% as a store grows, a table that holds
//! 7.9 bytes per id on average and 11.4 just after it doubles (at 150,000 controller pods,
//! 1.3 MB per table instead of 1.0). This one has any bucket count, grows by half when filled
//! to 85% and so stays between 57% and 85% full, 7 bytes per id on average, with no cliff.
//! Linear probing over a separate array of hash bytes keeps probes cheap at that load: a
//! probe reads one byte, and a key is compared only when the byte matches (1 in 128 otherwise).
//! Removal leaves a tombstone; tombstones are cleared when the table is rebuilt, which happens
//! once live ids and tombstones fill it.

/// A free bucket.
const EMPTY: u8 = 0;
/// A bucket whose id was removed: probes go on past it.
const TOMBSTONE: u8 = 1;
/// The smallest table.
const MIN_BUCKETS: usize = 16;

pub(super) struct IdTable {
    /// Per bucket: [`EMPTY`], [`TOMBSTONE`], or `0x80` with 7 bits of the id's key's hash.
    tags: Box<[u8]>,
    ids: Box<[u32]>,
    len: usize,
    tombstones: usize,
}

fn tag_of(hash: u64) -> u8 {
    0x80 | (hash as u8 & 0x7f)
}

/// The bucket a hash starts probing at, of `n` (the hash's high bits scaled to `n`).
fn home(hash: u64, n: usize) -> usize {
    ((u128::from(hash) * n as u128) >> 64) as usize
}

impl IdTable {
    pub(super) fn new() -> Self {
        Self {
            tags: Box::new([]),
            ids: Box::new([]),
            len: 0,
            tombstones: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Bytes allocated for the buckets.
    pub(super) fn allocation_size(&self) -> usize {
        self.tags.len() * (1 + size_of::<u32>())
    }

    /// The bucket of the id whose key hashes to `hash` and for which `is` says yes: the
    /// buckets from the hash's home on, until a free one.
    ///
    /// Decision: a plain loop rather than a chain of iterator adapters: it runs for every
    /// string and template of every object stored (about 90 a pod), and the chain compiled to
    /// twice the instructions per probe.
    #[inline]
    fn bucket(&self, hash: u64, is: impl Fn(u32) -> bool) -> Option<usize> {
        let n = self.tags.len();
        if n == 0 {
            return None;
        }
        let tag = tag_of(hash);
        let mut i = home(hash, n);
        // At most every bucket once (the table always keeps free ones, see `insert_unique`).
        for _ in 0..n {
            let t = self.tags[i];
            if t == EMPTY {
                return None;
            }
            if t == tag && is(self.ids[i]) {
                return Some(i);
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        None
    }

    /// The id whose key hashes to `hash` and for which `is` says yes.
    #[inline]
    pub(super) fn find(&self, hash: u64, is: impl Fn(u32) -> bool) -> Option<u32> {
        self.bucket(hash, is).map(|i| self.ids[i])
    }

    /// Adds `id`, whose key hashes to `hash` and is not in the table yet. `rehash` gives the
    /// hash of any id in the table, for when the table is rebuilt.
    pub(super) fn insert_unique(&mut self, hash: u64, id: u32, rehash: impl Fn(u32) -> u64) {
        // Filled to 85% (tombstones count: probes go past them), rebuilt half as large again
        // as its live ids.
        if (self.len + self.tombstones + 1) * 20 > self.tags.len() * 17 {
            let buckets = ((self.len + 1) * 3 / 2).max(MIN_BUCKETS);
            self.rebuild(buckets, &rehash);
        }
        self.place(hash, id);
        self.len += 1;
    }

    /// Puts `id` in the first free bucket or tombstone of its probe.
    fn place(&mut self, hash: u64, id: u32) {
        let n = self.tags.len();
        let mut i = home(hash, n);
        while self.tags[i] > TOMBSTONE {
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        if self.tags[i] == TOMBSTONE {
            self.tombstones -= 1;
        }
        self.tags[i] = tag_of(hash);
        self.ids[i] = id;
    }

    /// Removes `id`, whose key hashes to `hash`; returns whether it was there. A table left
    /// less than a quarter full is rebuilt smaller.
    pub(super) fn remove(&mut self, hash: u64, id: u32, rehash: impl Fn(u32) -> u64) -> bool {
        let Some(i) = self.bucket(hash, |x| x == id) else {
            return false;
        };
        self.tags[i] = TOMBSTONE;
        self.len -= 1;
        self.tombstones += 1;
        if self.len == 0 {
            *self = Self::new();
        } else if self.tags.len() > 64 && self.len * 4 < self.tags.len() {
            self.rebuild((self.len * 3 / 2).max(MIN_BUCKETS), &rehash);
        }
        true
    }

    /// Moves every id into a table of `buckets` buckets, without tombstones.
    fn rebuild(&mut self, buckets: usize, rehash: &impl Fn(u32) -> u64) {
        let old = std::mem::replace(
            self,
            Self {
                tags: vec![EMPTY; buckets].into_boxed_slice(),
                ids: vec![0; buckets].into_boxed_slice(),
                len: 0,
                tombstones: 0,
            },
        );
        for (i, &t) in old.tags.iter().enumerate() {
            if t > TOMBSTONE {
                let id = old.ids[i];
                self.place(rehash(id), id);
            }
        }
        self.len = old.len;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use ahash::RandomState;

    use super::*;

    /// A table of ids whose keys are `keys[id]`, checked against a `HashSet` through random
    /// inserts and removals: every live id is found, no removed one is.
    #[test]
    fn finds_exactly_the_ids_it_holds_through_growth_removal_and_shrinking() {
        let hasher = RandomState::with_seeds(1, 2, 3, 4);
        let keys: Vec<String> = (0..20_000).map(|i| format!("key-{i}")).collect();
        let hash = |id: u32| hasher.hash_one(&keys[id as usize]);
        let mut table = IdTable::new();
        let mut live = HashSet::new();
        let mut state = 12345u64;
        for step in 0..200_000u32 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let id = (state >> 33) as u32 % keys.len() as u32;
            // Mostly inserts while growing, mostly removals after: the table shrinks again.
            let insert = (state >> 20) % 100 < if step < 120_000 { 70 } else { 20 };
            if insert && !live.contains(&id) {
                table.insert_unique(hash(id), id, hash);
                live.insert(id);
            } else if !insert {
                assert_eq!(table.remove(hash(id), id, hash), live.remove(&id));
            }
            assert_eq!(table.len(), live.len());
        }
        for id in 0..keys.len() as u32 {
            let found = table.find(hash(id), |x| keys[x as usize] == keys[id as usize]);
            assert_eq!(found.is_some(), live.contains(&id), "id {id}");
        }
        assert!(
            table.allocation_size() <= (live.len() * 2).max(64) * 5,
            "{} bytes for {} ids",
            table.allocation_size(),
            live.len()
        );
    }

    #[test]
    fn stays_between_a_half_and_seven_eighths_full_as_it_grows() {
        let hasher = RandomState::with_seeds(5, 6, 7, 8);
        let hash = |id: u32| hasher.hash_one(id);
        let mut table = IdTable::new();
        for id in 0..100_000u32 {
            table.insert_unique(hash(id), id, hash);
            if id > 1000 {
                let load = table.len() as f64 / table.tags.len() as f64;
                assert!((0.5..=0.875).contains(&load), "{load} at {id}");
            }
        }
    }
}
