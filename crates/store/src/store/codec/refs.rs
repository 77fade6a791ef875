//! Reference counting of the atoms a blob names: walking a body, a template or a constant
//! array for the atoms it references, releasing them (recursively, as atoms free), and
//! estimating what a blob alone keeps in memory (for the change log's byte budget).

use super::header::{parse_header, Name};
use super::varint::{get_id, get_varint};
use super::{
    HOLE, OBJ_HOLE, SMALL_MAX, T_ARR, T_ARR_CONST, T_ARR_EMPTY, T_ARR_OBJ1, T_ATOM_STR, T_F64,
    T_FALSE, T_GEN_NAME, T_HEX64, T_IPV4, T_IPV4_CIDR, T_KEY_GEN_PREFIX, T_KEY_NAME,
    T_KEY_NAME_AFFIX, T_KEY_NAME_HASH, T_KEY_NAME_HEAD, T_KEY_NAME_ORDINAL, T_KEY_NS, T_KEY_RV,
    T_NEG, T_NULL, T_OBJ, T_SMALL, T_STR, T_TRUE, T_TS, T_TS_FRAC, T_U64, T_UINT_STR, T_UUID,
};
use crate::store::atoms::{names_atoms, AtomId, Atoms, KIND_TEMPLATE};
use crate::store::scalar::PACKED_SUFFIX_LEN;

/// Skips the constant at `buf[*p]`, passing the atoms it names to `on_ref`.
fn const_refs(buf: &[u8], p: &mut usize, on_ref: &mut impl FnMut(AtomId)) {
    let tag = buf[*p];
    *p += 1;
    const_payload_refs(tag, buf, p, on_ref);
}

/// Skips the payload of a constant of tag `tag`, passing the atoms it names to `on_ref`.
fn const_payload_refs(tag: u8, buf: &[u8], p: &mut usize, on_ref: &mut impl FnMut(AtomId)) {
    match tag {
        T_NULL | T_FALSE | T_TRUE | T_ARR_EMPTY | T_KEY_NAME | T_KEY_NS | T_KEY_RV
        | T_KEY_GEN_PREFIX | T_KEY_NAME_ORDINAL | T_KEY_NAME_HASH => {}
        T_KEY_NAME_AFFIX => {
            const_refs(buf, p, on_ref);
            const_refs(buf, p, on_ref);
        }
        T_U64 | T_NEG | T_KEY_NAME_HEAD => {
            get_varint(buf, p);
        }
        T_F64 => *p += 8,
        T_STR => {
            let len = get_varint(buf, p) as usize;
            *p += len;
        }
        T_UUID => *p += 16,
        T_HEX64 => {
            let v = get_varint(buf, p);
            if v > 0 {
                on_ref((v - 1) as AtomId);
            }
            *p += 32;
        }
        T_ATOM_STR | T_OBJ | T_ARR_CONST | T_ARR_OBJ1 => on_ref(get_id(buf, p)),
        t if (T_SMALL..=T_SMALL + SMALL_MAX as u8).contains(&t) => {}
        t => unreachable!("tag {t} is not a constant"),
    }
}

/// The atoms the constant `c` (its tag first) references.
pub(super) fn const_ids(c: &[u8], on_ref: &mut impl FnMut(AtomId)) {
    const_refs(c, &mut 0, on_ref);
}

/// The atoms a template or constant-array payload references.
pub(super) fn atom_children(kind: u8, payload: &[u8], ids: &mut Vec<AtomId>) {
    let mut p = 0;
    let n = get_varint(payload, &mut p);
    for _ in 0..n {
        if kind == KIND_TEMPLATE {
            ids.push(get_id(payload, &mut p));
        }
        match payload[p] {
            HOLE => p += 2,
            OBJ_HOLE => {
                p += 1;
                ids.push(get_id(payload, &mut p));
            }
            _ => const_refs(payload, &mut p, &mut |id| ids.push(id)),
        }
    }
}

/// Skips the body value at `s[*p]`, its tag first (the root of a body), passing the atoms it
/// names to `on_ref`.
fn body_refs(atoms: &Atoms, s: &[u8], p: &mut usize, on_ref: &mut impl FnMut(AtomId)) {
    let tag = s[*p];
    *p += 1;
    hole_refs(atoms, tag, s, p, on_ref);
}

/// Skips the value of a hole of tag `tag`, whose payload is at `s[*p]`, passing the atoms it
/// names to `on_ref`.
fn hole_refs(atoms: &Atoms, tag: u8, s: &[u8], p: &mut usize, on_ref: &mut impl FnMut(AtomId)) {
    match tag {
        T_OBJ => {
            let tid = get_id(s, p);
            on_ref(tid);
            object_hole_refs(atoms, tid, s, p, on_ref);
        }
        T_ARR => {
            let id = get_id(s, p);
            on_ref(id);
            let t = atoms.payload(id);
            let mut q = 0;
            let n = get_varint(t, &mut q);
            for _ in 0..n {
                match t[q] {
                    HOLE => {
                        q += 2;
                        hole_refs(atoms, t[q - 1], s, p, on_ref);
                    }
                    OBJ_HOLE => {
                        q += 1;
                        let tid = get_id(t, &mut q);
                        object_hole_refs(atoms, tid, s, p, on_ref);
                    }
                    // The template holds the references of its constants.
                    _ => const_refs(t, &mut q, &mut |_| {}),
                }
            }
        }
        T_UINT_STR | T_TS => {
            get_varint(s, p);
        }
        T_TS_FRAC => {
            get_varint(s, p);
            *p += 1;
            get_varint(s, p);
        }
        T_IPV4 => *p += 4,
        T_IPV4_CIDR => *p += 5,
        T_GEN_NAME => {
            on_ref(get_id(s, p));
            *p += PACKED_SUFFIX_LEN;
        }
        _ => const_payload_refs(tag, s, p, on_ref),
    }
}

/// Skips the hole values of an object of template `tid`, passing the atoms they name to
/// `on_ref`.
fn object_hole_refs(
    atoms: &Atoms,
    tid: AtomId,
    s: &[u8],
    p: &mut usize,
    on_ref: &mut impl FnMut(AtomId),
) {
    let t = atoms.payload(tid);
    let mut q = 0;
    let n = get_varint(t, &mut q);
    for _ in 0..n {
        get_varint(t, &mut q);
        if t[q] == HOLE {
            q += 2;
            hole_refs(atoms, t[q - 1], s, p, on_ref);
        } else {
            const_refs(t, &mut q, &mut |_| {});
        }
    }
}

/// Drops one reference on each atom, freeing (recursively) those that are no longer used.
pub(super) fn release_all(atoms: &mut Atoms, mut ids: Vec<AtomId>) {
    while let Some(id) = ids.pop() {
        atoms.release(id, |kind, payload| {
            if names_atoms(kind) {
                atom_children(kind, payload, &mut ids);
            }
        });
    }
}

/// Releases the references held by a body that was encoded but not kept.
pub(crate) fn release_body(atoms: &mut Atoms, body: &[u8]) {
    let mut ids = Vec::new();
    let mut p = 0;
    body_refs(atoms, body, &mut p, &mut |id| ids.push(id));
    debug_assert_eq!(p, body.len());
    release_all(atoms, ids);
}

/// Passes the atoms a stored blob references (header and body) to `on_ref`, once per
/// reference.
fn each_blob_ref(atoms: &Atoms, blob: &[u8], on_ref: &mut impl FnMut(AtomId)) {
    let h = parse_header(blob);
    h.namespace.into_iter().for_each(&mut *on_ref);
    if let Name::Generated { prefix, .. } = h.name {
        on_ref(prefix);
    }
    let mut p = h.body_start;
    body_refs(atoms, blob, &mut p, on_ref);
    debug_assert_eq!(p, blob.len());
}

/// The atoms a stored blob references (header and body), once per reference.
fn blob_refs(atoms: &Atoms, blob: &[u8]) -> Vec<AtomId> {
    let mut ids = Vec::with_capacity(64);
    each_blob_ref(atoms, blob, &mut |id| ids.push(id));
    ids
}

/// Releases every reference held by a stored blob.
pub(crate) fn release_blob(atoms: &mut Atoms, blob: &[u8]) {
    let ids = blob_refs(atoms, blob);
    release_all(atoms, ids);
}

/// Takes the references a restored blob holds (see `store::snapshot`): on each atom it names
/// and, for an atom named for the first time, on those the atom names in turn. An error names
/// an atom the restore did not put back.
pub(crate) fn retain_blob(atoms: &mut Atoms, blob: &[u8]) -> Result<(), String> {
    let mut ids = blob_refs(atoms, blob);
    while let Some(id) = ids.pop() {
        match atoms.retain(id) {
            None => {
                return Err(format!(
                    "it names atom {id}, which the snapshot does not hold"
                ))
            }
            Some(true) if names_atoms(atoms.kind(id)) => {
                atom_children(atoms.kind(id), atoms.payload(id), &mut ids);
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Rough bookkeeping cost of one atom besides its bytes (entry, table slot, allocation).
const ATOM_OVERHEAD: usize = 40;

/// About how many bytes stay in memory only because of this blob: the blob itself and the
/// atoms nothing else references.
pub(crate) fn exclusive_bytes(atoms: &Atoms, blob: &[u8]) -> usize {
    // Decision: the blob's references are looked at as they are found, not gathered first:
    // nearly all are shared with the version that replaced it, and gathering them was a fifth
    // of the estimate (callgrind, `examples/ingest_profile.rs`). Only the atoms this blob alone
    // holds are followed to the atoms they name in turn.
    let mut total = blob.len();
    let mut alone = Vec::new();
    each_blob_ref(atoms, blob, &mut |id| {
        if atoms.refs(id) == 1 {
            alone.push(id);
        }
    });
    let mut children = Vec::new();
    while let Some(id) = alone.pop() {
        let payload = atoms.payload(id);
        total += payload.len() + ATOM_OVERHEAD;
        let kind = atoms.kind(id);
        if names_atoms(kind) {
            atom_children(kind, payload, &mut children);
            alone.extend(children.drain(..).filter(|&c| atoms.refs(c) == 1));
        }
    }
    total
}
