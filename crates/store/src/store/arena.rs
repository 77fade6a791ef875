//! Bytes packed into a few large chunks instead of an allocation each: the interned atoms
//! (`atoms`) and the current objects' blobs (`slots`) live in arenas.
//!
//! Decision: an allocation per small value costs its pointer (16 bytes for a boxed slice), the
//! allocator's size-class rounding (about 8 bytes on average for values of 50 to 200 bytes)
//! and, for a shared one, its reference count: for a controller pod's 80-byte blob, a third of
//! what it holds. In an arena a value costs its bytes and a 4-byte location. Freed bytes stay in
//! their chunk until the owner compacts (see [`Arena::begin_compaction`]): it decides how many
//! freed bytes it tolerates, and moves the live values out of the chunks with the most freed
//! room, rewriting their locations itself, since only it knows who holds them.

use super::codec::{get_varint, put_varint};

/// Where a value lives: its chunk's index (high bits) and its offset in it (low
/// [`OFFSET_BITS`]).
pub(super) type At = u32;

/// Never a value's location (the last chunk index is never used): marks a free place in a
/// table of locations.
pub(super) const NOWHERE: At = u32::MAX;

/// The largest chunk values are packed into; a larger value gets a chunk of its own size.
/// Decision: 64 KiB, so that an offset in a chunk fits the low 16 bits of a location and the
/// chunk's index the high 16: 65,535 chunks, at least 4 GiB, far above what a store holds (a few
/// hundred bytes per object), for 4 bytes less per value than a 64-bit location.
const MAX_CHUNK: usize = 1 << OFFSET_BITS;
const OFFSET_BITS: u32 = 16;
/// The first chunk's size: a store of a few objects stays small.
const MIN_CHUNK: usize = 512;

#[derive(Default)]
struct Chunk {
    /// Never grown past its capacity, so that values never move while it is in use.
    bytes: Vec<u8>,
    /// Bytes of freed values still in it.
    dead: usize,
}

/// Chunks of packed values (see the module's comment).
#[derive(Default)]
pub(super) struct Arena {
    chunks: Vec<Chunk>,
    /// Indexes of chunks given back, to reuse.
    free_chunks: Vec<u32>,
    /// The chunk new values go to.
    tail: Option<u32>,
    /// Bytes of freed values still in chunks.
    dead: usize,
    /// Capacity of all chunks.
    capacity: usize,
}

/// The chunks a compaction empties (see [`Arena::begin_compaction`]).
pub(super) struct Compaction(Vec<bool>);

fn chunk_of(at: At) -> usize {
    (at >> OFFSET_BITS) as usize
}

fn offset_of(at: At) -> usize {
    (at & ((1 << OFFSET_BITS) - 1)) as usize
}

impl Arena {
    /// The `len` bytes at `at`.
    pub(super) fn get(&self, at: At, len: usize) -> &[u8] {
        let start = offset_of(at);
        &self.chunks[chunk_of(at)].bytes[start..start + len]
    }

    /// The bytes from `at` to the end of its chunk: for values that say their own length.
    #[inline]
    fn from(&self, at: At) -> &[u8] {
        &self.chunks[chunk_of(at)].bytes[offset_of(at)..]
    }

    /// Copies `parts` (concatenated) into the arena; returns their location. `live_bytes`
    /// (what the owner holds) sizes a new chunk: a quarter of it, within bounds.
    pub(super) fn store(&mut self, parts: &[&[u8]], live_bytes: usize) -> At {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        // A chunk of one large value (offset 0) takes no other: offsets stay below MAX_CHUNK.
        let fits =
            |c: &Chunk| c.bytes.capacity() - c.bytes.len() >= len && c.bytes.len() < MAX_CHUNK;
        let chunk = match self.tail {
            Some(t) if fits(&self.chunks[t as usize]) => t,
            _ => {
                self.leave_tail();
                let size = (live_bytes / 4).clamp(MIN_CHUNK, MAX_CHUNK).max(len);
                let t = self.new_chunk(size);
                self.tail = Some(t);
                t
            }
        };
        let bytes = &mut self.chunks[chunk as usize].bytes;
        let offset = bytes.len();
        for p in parts {
            bytes.extend_from_slice(p);
        }
        debug_assert!(offset < MAX_CHUNK);
        chunk << OFFSET_BITS | offset as u32
    }

    fn new_chunk(&mut self, size: usize) -> u32 {
        self.capacity += size;
        let chunk = Chunk {
            bytes: Vec::with_capacity(size),
            dead: 0,
        };
        match self.free_chunks.pop() {
            Some(i) => {
                self.chunks[i as usize] = chunk;
                i
            }
            None => {
                self.chunks.push(chunk);
                let i = self.chunks.len() - 1;
                assert!(
                    i < (1 << (32 - OFFSET_BITS)) - 1,
                    "fewer than 65,535 arena chunks"
                );
                i as u32
            }
        }
    }

    /// Marks the `len` bytes at `at` freed; a chunk left with no live value is given back at
    /// once.
    pub(super) fn free(&mut self, at: At, len: usize) {
        let i = chunk_of(at);
        let chunk = &mut self.chunks[i];
        chunk.dead += len;
        self.dead += len;
        if chunk.dead == chunk.bytes.len() {
            self.dead -= chunk.dead;
            // The tail is kept for the next values, unless it was made for one large value.
            if self.tail == Some(i as u32) && chunk.bytes.capacity() <= MAX_CHUNK {
                chunk.bytes.clear();
                chunk.dead = 0;
            } else {
                if self.tail == Some(i as u32) {
                    self.tail = None;
                }
                self.capacity -= chunk.bytes.capacity();
                *chunk = Chunk::default();
                self.free_chunks.push(i as u32);
            }
        }
    }

    /// Copies `parts` (concatenated, at most two) into the arena after their length (a
    /// varint, one byte below 128), so that the location alone finds them again
    /// ([`Arena::sized`]); returns it.
    pub(super) fn store_sized(&mut self, parts: &[&[u8]], live_bytes: usize) -> At {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut prefix = Vec::with_capacity(5);
        put_varint(&mut prefix, len as u64);
        match parts {
            [a] => self.store(&[&prefix, a], live_bytes),
            [a, b] => self.store(&[&prefix, a, b], live_bytes),
            _ => self.store(&[&prefix, &parts.concat()], live_bytes),
        }
    }

    /// What [`Arena::store_sized`] stored at `at`, and the bytes it takes with its length.
    #[inline]
    pub(super) fn sized(&self, at: At) -> (&[u8], usize) {
        let bytes = self.from(at);
        let mut p = 0;
        let len = get_varint(bytes, &mut p) as usize;
        (&bytes[p..p + len], p + len)
    }

    /// New values go to a new chunk from now on; the tail, if it holds nothing (its values
    /// all freed), is given back rather than left behind unused.
    fn leave_tail(&mut self) {
        if let Some(t) = self.tail.take() {
            let chunk = &mut self.chunks[t as usize];
            if chunk.bytes.is_empty() {
                self.capacity -= chunk.bytes.capacity();
                *chunk = Chunk::default();
                self.free_chunks.push(t);
            }
        }
    }

    /// Bytes of freed values still in chunks.
    pub(super) fn dead(&self) -> usize {
        self.dead
    }

    /// What the arena holds besides live values: its chunk table, and room in chunks that is
    /// not a live value (freed, or not used yet).
    pub(super) fn overhead(&self, live_bytes: usize) -> usize {
        self.chunks.capacity() * size_of::<Chunk>()
            + self.free_chunks.capacity() * size_of::<u32>()
            + self.capacity.saturating_sub(live_bytes)
    }

    /// Starts a compaction of the chunks with at least `1/share` of their bytes freed: from
    /// now on new values go to new chunks. The owner then [`Arena::relocate`]s every value it
    /// holds and ends with [`Arena::end_compaction`].
    ///
    /// Afterwards at most `1/share` of the arena's used bytes are freed ones; the copying
    /// costs at most `share - 1` bytes per byte freed.
    pub(super) fn begin_compaction(&mut self, share: usize) -> Compaction {
        self.leave_tail();
        Compaction(
            self.chunks
                .iter()
                .map(|c| !c.bytes.is_empty() && c.dead * share >= c.bytes.len())
                .collect(),
        )
    }

    /// Moves the `len` bytes at `at` to a new chunk when `at` is in a chunk the compaction
    /// empties; returns their new location.
    pub(super) fn relocate(
        &mut self,
        compaction: &Compaction,
        at: At,
        len: usize,
        live_bytes: usize,
    ) -> Option<At> {
        if !compaction.0.get(chunk_of(at)).copied().unwrap_or(false) {
            return None;
        }
        let bytes = self.get(at, len).to_vec();
        Some(self.store(&[&bytes], live_bytes))
    }

    /// Gives back the chunks the compaction emptied.
    pub(super) fn end_compaction(&mut self, compaction: Compaction) {
        for (i, sparse) in compaction.0.into_iter().enumerate() {
            if sparse {
                let chunk = std::mem::take(&mut self.chunks[i]);
                self.dead -= chunk.dead;
                self.capacity -= chunk.bytes.capacity();
                self.free_chunks.push(i as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compaction_keeps_every_live_value_and_gives_back_the_freed_room() {
        let mut arena = Arena::default();
        let values: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| i.to_string().repeat(1 + i as usize % 7).into_bytes())
            .collect();
        let mut live: Vec<(At, usize, usize)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (arena.store(&[v], 4096), v.len(), i))
            .collect();
        // Free two values in three.
        let mut kept = Vec::new();
        for (n, (at, len, i)) in live.drain(..).enumerate() {
            if n % 3 == 0 {
                kept.push((at, len, i));
            } else {
                arena.free(at, len);
            }
        }
        let dead = arena.dead();
        assert!(dead > 0);
        let c = arena.begin_compaction(4);
        for (at, len, _) in &mut kept {
            if let Some(moved) = arena.relocate(&c, *at, *len, 4096) {
                *at = moved;
            }
        }
        arena.end_compaction(c);
        assert!(
            arena.dead() < dead,
            "{} freed bytes left of {dead}",
            arena.dead()
        );
        for (at, len, i) in kept {
            assert_eq!(arena.get(at, len), &values[i][..]);
        }
    }

    #[test]
    fn a_chunk_whose_values_are_all_freed_is_given_back() {
        let mut arena = Arena::default();
        let first: Vec<At> = (0..100).map(|_| arena.store(&[&[7; 100]], 0)).collect();
        let second = arena.store(&[&[8; 100]], 0);
        let capacity = arena.capacity;
        for at in first.iter().take(3) {
            arena.free(*at, 100);
        }
        assert_eq!(
            arena.capacity, capacity,
            "the first chunk still holds values"
        );
        for at in &first[3..] {
            arena.free(*at, 100);
        }
        assert!(arena.capacity < capacity);
        assert_eq!(arena.get(second, 100), &[8; 100]);
    }

    #[test]
    fn sized_values_are_found_by_their_location_alone() {
        let mut arena = Arena::default();
        let lens = [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000];
        let at: Vec<At> = lens
            .iter()
            .map(|&n| arena.store_sized(&[b"k", &vec![n as u8; n]], 0))
            .collect();
        for (&n, &at) in lens.iter().zip(&at) {
            let (bytes, span) = arena.sized(at);
            assert_eq!(bytes.len(), n + 1);
            assert_eq!(bytes[0], b'k');
            assert!(bytes[1..].iter().all(|&b| b == n as u8));
            assert!(span > bytes.len(), "the length comes before the bytes");
        }
    }

    /// An emptied tail is not lost when new values must go elsewhere (a compaction, a value
    /// too large for it): round after round of filling, freeing and compacting, the arena
    /// does not grow.
    #[test]
    fn emptied_chunks_are_given_back_round_after_round() {
        let mut arena = Arena::default();
        for _ in 0..50 {
            let values: Vec<At> = (0..605).map(|_| arena.store(&[&[1; 100]], 0)).collect();
            let mut kept = Vec::new();
            for (n, at) in values.into_iter().enumerate() {
                if n % 2 == 0 && n < 600 {
                    kept.push(at);
                } else {
                    arena.free(at, 100);
                }
            }
            let c = arena.begin_compaction(4);
            for at in &mut kept {
                if let Some(moved) = arena.relocate(&c, *at, 100, 0) {
                    *at = moved;
                }
            }
            arena.end_compaction(c);
            for at in kept {
                arena.free(at, 100);
            }
            // A value larger than a chunk, freed at once.
            let big = arena.store(&[&vec![2; 3 * MAX_CHUNK]], 0);
            arena.free(big, 3 * MAX_CHUNK);
        }
        assert!(
            arena.capacity <= MAX_CHUNK,
            "{} bytes of chunks hold nothing",
            arena.capacity
        );
        assert!(arena.chunks.len() < 200, "{} chunks", arena.chunks.len());
    }
}
