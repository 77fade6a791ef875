//! The header of a blob: the object's identity (namespace, name, upstream resourceVersion)
//! and the store revision of its last change, read without decoding the body — slot lookups,
//! key listings and handles only ever need this part.

use super::varint::{get_id, get_varint, put_varint};
use super::{utf8, Identity};
use crate::store::atoms::{AtomId, Atoms, KIND_STR};
use crate::store::scalar::{
    name_ordinal, pack_suffix, parse_uint_str, split_generated_name, unpack_suffix, GEN_SUFFIX_LEN,
    PACKED_SUFFIX_LEN,
};

/// Whether a generateName prefix is likely shared by several objects, and so worth an atom.
///
/// Decision: a prefix that ends in a number (`orders-export-29075927-`, a Job that a CronJob
/// created for one scheduled minute) names one Job, whose one pod would hold the atom alone:
/// its 20-odd bytes and its entry in the atom table cost more than the name written inline.
/// A ReplicaSet's or DaemonSet's prefix ends in its hash or its name, and is shared. Except
/// about 0.6% of ReplicaSets: their pod-template-hash is the hash's decimal digits encoded
/// one by one, and where those are all 0 to 5 the encoding is all digits (4 to 9); their pods'
/// names are written inline too, which costs their bytes, not their correctness.
fn shared_prefix(prefix: &str) -> bool {
    name_ordinal(prefix.strip_suffix('-').unwrap_or(prefix)).is_none()
}

const NAME_INLINE: u8 = 0;
const NAME_GENERATED: u8 = 1;
const RV_NONE: u8 = 0;
const RV_UINT: u8 = 1;
const RV_STR: u8 = 2;

pub(crate) fn encode_header(
    atoms: &mut Atoms,
    revision: u64,
    id: &Identity<'_>,
    out: &mut Vec<u8>,
) {
    put_varint(out, revision);
    match id.namespace {
        None => out.push(0),
        Some(ns) => {
            let (a, _) = atoms.acquire(KIND_STR, ns.as_bytes());
            put_varint(out, u64::from(a) + 1);
        }
    }
    match split_generated_name(id.name).filter(|(prefix, _)| shared_prefix(prefix)) {
        Some((prefix, suffix)) => {
            out.push(NAME_GENERATED);
            let (a, _) = atoms.acquire(KIND_STR, prefix.as_bytes());
            put_varint(out, u64::from(a));
            out.extend_from_slice(&pack_suffix(&suffix));
        }
        None => {
            out.push(NAME_INLINE);
            put_varint(out, id.name.len() as u64);
            out.extend_from_slice(id.name.as_bytes());
        }
    }
    match id.resource_version {
        None => out.push(RV_NONE),
        Some(rv) => match parse_uint_str(rv) {
            Some(n) => {
                out.push(RV_UINT);
                put_varint(out, n);
            }
            None => {
                out.push(RV_STR);
                put_varint(out, rv.len() as u64);
                out.extend_from_slice(rv.as_bytes());
            }
        },
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Name<'b> {
    Inline(&'b str),
    Generated {
        prefix: AtomId,
        suffix: [u8; GEN_SUFFIX_LEN],
    },
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Rv<'b> {
    None,
    Uint(u64),
    Str(&'b str),
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Header<'b> {
    pub revision: u64,
    pub namespace: Option<AtomId>,
    pub name: Name<'b>,
    pub rv: Rv<'b>,
    pub body_start: usize,
}

pub(crate) fn parse_header(blob: &[u8]) -> Header<'_> {
    let mut p = 0;
    let revision = get_varint(blob, &mut p);
    let namespace = match get_varint(blob, &mut p) {
        0 => None,
        n => Some((n - 1) as AtomId),
    };
    let kind = blob[p];
    p += 1;
    let name = if kind == NAME_GENERATED {
        let prefix = get_id(blob, &mut p);
        let suffix = unpack_suffix(&blob[p..p + PACKED_SUFFIX_LEN]);
        p += PACKED_SUFFIX_LEN;
        Name::Generated { prefix, suffix }
    } else {
        let len = get_varint(blob, &mut p) as usize;
        let s = utf8(&blob[p..p + len]);
        p += len;
        Name::Inline(s)
    };
    let kind = blob[p];
    p += 1;
    let rv = match kind {
        RV_UINT => Rv::Uint(get_varint(blob, &mut p)),
        RV_STR => {
            let len = get_varint(blob, &mut p) as usize;
            let s = utf8(&blob[p..p + len]);
            p += len;
            Rv::Str(s)
        }
        _ => Rv::None,
    };
    Header {
        revision,
        namespace,
        name,
        rv,
        body_start: p,
    }
}

impl Name<'_> {
    pub(crate) fn to_string(self, atoms: &Atoms) -> String {
        match self {
            Name::Inline(s) => s.to_owned(),
            Name::Generated { prefix, suffix } => {
                let prefix = atoms.str(prefix);
                let mut s = String::with_capacity(prefix.len() + suffix.len());
                s.push_str(prefix);
                s.push_str(utf8(&suffix));
                s
            }
        }
    }

    pub(crate) fn eq_str(self, atoms: &Atoms, name: &str) -> bool {
        match self {
            Name::Inline(s) => s == name,
            Name::Generated { prefix, suffix } => {
                let prefix = atoms.str(prefix);
                name.len() == prefix.len() + suffix.len()
                    && name.starts_with(prefix)
                    && name.as_bytes()[prefix.len()..] == suffix
            }
        }
    }
}

impl Rv<'_> {
    pub(crate) fn matches(self, rv: Option<&str>) -> bool {
        match (self, rv) {
            (Rv::None, None) => true,
            (Rv::Uint(n), Some(s)) => parse_uint_str(s) == Some(n),
            (Rv::Str(a), Some(b)) => a == b,
            _ => false,
        }
    }

    /// Whether this resourceVersion is known to be newer than `rv` (see `store::version`).
    pub(crate) fn is_newer_than(self, rv: Option<&str>) -> bool {
        match (self, rv.and_then(parse_uint_str)) {
            (Rv::Uint(stored), Some(other)) => other < stored,
            _ => false,
        }
    }

    pub(crate) fn to_string(self) -> Option<String> {
        match self {
            Rv::None => None,
            Rv::Uint(n) => Some(n.to_string()),
            Rv::Str(s) => Some(s.to_owned()),
        }
    }
}
