//! Large strings kept compressed: a string atom of a few hundred bytes or more (kubectl's
//! `last-applied-configuration`, a Helm chart's JSON, a long command line) is stored
//! LZ4-compressed as a `KIND_STR_LZ4` atom, and decompressed when an object is decoded.
//!
//! Decision: LZ4 (`lz4_flex`, its safe encoder and decoder, no `unsafe`) for its decoding
//! speed, a few GB/s, so that a List or Watch that sends such an object pays well under a
//! microsecond for it; zlib-style codecs compress more and decode several times slower. On the
//! realistic corpus's `last-applied-configuration` values it keeps 52% of the bytes
//! (`informerd bench`: "strings kept compressed" against "uncompressed"). A string is packed
//! from [`MIN_LEN`] bytes, and only when that saves at least a quarter: short or random strings
//! stay as they are.
//!
//! Decision: compressed against a fixed dictionary ([`DICTIONARY`], `packed.dict`): manifests of
//! the common workload kinds (Deployment, StatefulSet, DaemonSet, CronJob, Service) with the
//! fields and Kubernetes' recommended labels they usually carry, keys in the order kubectl
//! writes them, values mostly empty. A string of a few hundred bytes gives LZ4 too little of its
//! own to refer back to; the dictionary gives it the vocabulary. On the realistic corpus's
//! `last-applied-configuration` values the packed bytes fall from 52% to 27% of the strings
//! (`informerd bench`: "strings kept compressed" against "uncompressed"); the recorded k9s
//! pods' (`../shared/fixtures`), not worth packing alone, pack to under half
//! (`the_dictionary_packs_a_short_manifest`). The
//! dictionary is part of the encoding: changing it changes the store's layout
//! (`store::layout`), and old snapshots are refused.

use super::atoms::AtomId;

/// What every packed string is compressed against (see the module's decision).
const DICTIONARY: &[u8] = include_bytes!("packed.dict");

/// Strings shorter than this are never packed: the saving would not pay for the decoding.
pub(crate) const MIN_LEN: usize = 256;

/// `s` compressed, when that saves at least a quarter of its bytes.
pub(crate) fn pack(s: &str) -> Option<Vec<u8>> {
    if s.len() < MIN_LEN {
        return None;
    }
    let packed = lz4_flex::block::compress_prepend_size_with_dict(s.as_bytes(), DICTIONARY);
    (packed.len() * 4 <= s.len() * 3).then_some(packed)
}

/// The length of the string [`pack`] made `packed` from, without decompressing it (the size
/// `compress_prepend_size_with_dict` writes first, a little-endian `u32`).
pub(super) fn unpacked_len(packed: &[u8]) -> usize {
    let mut size = [0; 4];
    size.copy_from_slice(&packed[..4]);
    u32::from_le_bytes(size) as usize
}

/// Slots of [`Recent`].
const RECENT_SLOTS: usize = 256;

/// Which atom each large string (of [`MIN_LEN`] bytes or more) became lately, by the string's
/// hash: one slot per hash, the last string wins.
///
/// Decision: packing a string compresses it against the whole dictionary, whose 3.8 KB are
/// hashed again for every string: 40,000 instructions under callgrind, the most expensive
/// step of storing a pod that has kubectl's `last-applied-configuration`, which its owner's
/// other pods and its own next versions carry again. Its atom is found here instead, and checked
/// to be still that string (decompressing is cheap), so a stale or colliding slot only costs
/// the packing it would have cost anyway. 4 KB per store, taken when the first large string
/// comes.
#[derive(Default)]
pub(super) struct Recent {
    slots: Vec<Option<(u64, AtomId)>>,
}

impl Recent {
    fn slot(hash: u64) -> usize {
        (hash >> 56) as usize % RECENT_SLOTS
    }

    /// The atom last remembered for `hash`.
    pub(super) fn get(&self, hash: u64) -> Option<AtomId> {
        match self.slots.get(Self::slot(hash))? {
            Some((h, id)) if *h == hash => Some(*id),
            _ => None,
        }
    }

    pub(super) fn put(&mut self, hash: u64, id: AtomId) {
        if self.slots.is_empty() {
            self.slots = vec![None; RECENT_SLOTS];
        }
        self.slots[Self::slot(hash)] = Some((hash, id));
    }

    pub(super) fn allocation_size(&self) -> usize {
        self.slots.capacity() * size_of::<Option<(u64, AtomId)>>()
    }
}

/// The string [`pack`] made `packed` from.
pub(super) fn unpack(packed: &[u8]) -> String {
    String::from_utf8(unpack_bytes(packed)).expect("packed atoms hold UTF-8")
}

/// [`unpack`]'s bytes, not checked again: JSON text is written from them (they were UTF-8
/// when packed).
pub(super) fn unpack_bytes(packed: &[u8]) -> Vec<u8> {
    lz4_flex::block::decompress_size_prepended_with_dict(packed, DICTIONARY)
        .expect("packed atoms are written by pack, whole")
}

/// 300 bytes without repeats, which LZ4 cannot shorten: hex of a counter's hash-like sequence.
#[cfg(test)]
pub(crate) fn noise() -> String {
    (0u64..150)
        .map(|i| {
            format!(
                "{:02x}",
                (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_repetitive_string_is_packed_and_unpacked_exactly() {
        let s = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"web"}},"spec":{"template":{"metadata":{"labels":{"app":"web"}}}}}"#.repeat(4);
        let packed = pack(&s).expect("packed");
        assert!(packed.len() * 4 <= s.len() * 3);
        assert_eq!(unpacked_len(&packed), s.len());
        assert_eq!(unpack(&packed), s);
    }

    /// A manifest too short to compress on its own (kubectl's annotation on a recorded pod)
    /// is packed against the dictionary.
    #[test]
    fn the_dictionary_packs_a_short_manifest() {
        let fixture = crate::fixtures::all_pods()
            .into_iter()
            .find_map(|p| {
                let a = &p["metadata"]["annotations"]
                    ["kubectl.kubernetes.io/last-applied-configuration"];
                a.as_str().map(str::to_owned)
            })
            .expect("a fixture pod with kubectl's annotation");
        let alone = lz4_flex::compress_prepend_size(fixture.as_bytes());
        assert!(
            alone.len() * 4 > fixture.len() * 3,
            "alone, it would not be packed"
        );
        let packed = pack(&fixture).expect("packed against the dictionary");
        assert!(
            packed.len() * 2 < fixture.len(),
            "{} of {}",
            packed.len(),
            fixture.len()
        );
        assert_eq!(unpack(&packed), fixture);
    }

    #[test]
    fn short_or_incompressible_strings_stay_as_they_are() {
        assert_eq!(pack(&"a".repeat(MIN_LEN - 1)), None);
        assert_eq!(pack(&noise()), None);
    }
}
