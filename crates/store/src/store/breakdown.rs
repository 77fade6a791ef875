//! Where a store's bytes go: its interned atoms by kind, and how many of them only one
//! holder references (a value no other object shares pays the interning overhead for
//! nothing). Read by `informerd bench`; it changes nothing in the store.

use serde::Serialize;

use super::atoms::{Atoms, KIND_ARRAY, KIND_ARRAY_TEMPLATE, KIND_STR, KIND_STR_LZ4, KIND_TEMPLATE};
use super::packed;
use super::reader::Store;

/// Atoms of one kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AtomKindStats {
    /// Live atoms of this kind.
    pub atoms: usize,
    /// Their payload bytes (kind byte included, allocator overhead not).
    pub bytes: usize,
    /// Of those, the atoms exactly one holder (an object, a template) references.
    pub referenced_once: usize,
    /// ... and their bytes.
    pub referenced_once_bytes: usize,
}

/// The atoms of a store, by kind, with a few strings referenced once (what makes objects
/// unique and is still interned).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AtomBreakdown {
    /// Strings: keys, label values, names...
    pub strings: AtomKindStats,
    /// Large strings kept compressed (bytes: compressed).
    pub packed_strings: AtomKindStats,
    /// What those strings hold uncompressed.
    pub packed_strings_unpacked_bytes: usize,
    /// Object templates (keys and constant values of one JSON object shape).
    pub templates: AtomKindStats,
    /// Arrays whose elements are all constants.
    pub constant_arrays: AtomKindStats,
    /// Templates of arrays with holes.
    pub array_templates: AtomKindStats,
    /// Up to [`SAMPLE`] strings referenced once, in atom order.
    pub strings_referenced_once: Vec<String>,
    /// The atom table's own bytes besides the atoms': entries, hash table, and room in the
    /// arena's chunks not holding a live atom (freed, or not used yet).
    pub table_bytes: usize,
}

/// How many strings referenced once the breakdown shows.
pub const SAMPLE: usize = 20;

pub(super) fn breakdown(atoms: &Atoms) -> AtomBreakdown {
    let mut b = AtomBreakdown {
        table_bytes: atoms.structure_bytes(),
        ..AtomBreakdown::default()
    };
    for (id, kind, bytes, refs) in atoms.iter() {
        if kind == KIND_STR_LZ4 {
            b.packed_strings_unpacked_bytes += packed::unpacked_len(atoms.payload(id));
        }
        let stats = match kind {
            KIND_STR => &mut b.strings,
            KIND_STR_LZ4 => &mut b.packed_strings,
            KIND_TEMPLATE => &mut b.templates,
            KIND_ARRAY => &mut b.constant_arrays,
            KIND_ARRAY_TEMPLATE => &mut b.array_templates,
            _ => continue,
        };
        stats.atoms += 1;
        stats.bytes += bytes;
        if refs == 1 {
            stats.referenced_once += 1;
            stats.referenced_once_bytes += bytes;
            if kind == KIND_STR && b.strings_referenced_once.len() < SAMPLE {
                b.strings_referenced_once.push(atoms.str(id).to_string());
            }
        }
    }
    b
}

impl Store {
    /// The store's interned atoms by kind (see [`AtomBreakdown`]); walks every atom, under
    /// the read lock: for benchmarks and diagnostics, not for every scrape.
    pub fn atom_breakdown(&self) -> AtomBreakdown {
        breakdown(&self.shared.read().atoms)
    }
}
