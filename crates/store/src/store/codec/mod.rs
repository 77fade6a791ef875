//! The compact encoding of one stored object: the format, and the way in to its parts.
//!
//! What it must not do: know about the store around it. It turns one object into bytes and
//! back, with the atoms it is given; slots, revisions, the change log and indexes are the
//! store's.
//!
//! An encoded object ("blob") is a header and a body:
//!
//! * header (`header`): store revision, namespace (string atom), name (inline, or generateName
//!   prefix atom plus the packed 5-character random suffix; inline for a CronJob's Job, whose
//!   prefix no other object shares) and upstream resourceVersion.
//! * body (`encode`, `decode`): the JSON tree split into *templates* and *holes*. Every JSON
//!   object becomes a template atom — its keys (string atoms) and, for each key, either a
//!   constant value or a hole — and the body holds only the values of the holes, depth first.
//!   Constants are null, booleans, numbers, ordinary strings, strings equal to the object's
//!   name, namespace or resourceVersion, strings made of the name and a fixed prefix or suffix
//!   (`data-NAME`, a StatefulSet pod's claim), the name's generateName prefix, the name up to
//!   one of its dashes (the owner's name: `job-name`, an owner reference's `name`), the
//!   ordinal that ends a StatefulSet pod's name (`apps.kubernetes.io/pod-index`) or the hash
//!   before a ReplicaSet pod's random suffix (`pod-template-hash`), and nested containers
//!   without holes (template or constant-array atoms): labels, owner references (but a Job's
//!   uid, a hole), condition types and the like are kept once for every object that has the
//!   same ones. An array with holes gets a template too (per element: a constant, a hole, or
//!   an object of a given template), so a list of conditions costs only its timestamps. Holes
//!   are what makes an object unique, each in a compact form: UUIDs (16 bytes), timestamps
//!   (seconds as a varint delta from the previous timestamp of the object), decimal counters,
//!   IPv4 addresses, generated names (prefix atom + 3 bytes), container IDs (32 bytes; a bare
//!   digest, an owner's configuration checksum, is a constant).
//!
//! A value is one tag byte and a payload (varints are LEB128, see `varint`); for a hole, the
//! tag is in the template and only the payload in the body (the body's root keeps its tag).
//! References to atoms are counted (`refs`): whatever holds bytes naming an atom (a blob, a
//! template, an array) holds one reference on it, released through [`release_blob`] /
//! [`release_body`].
//!
//! This module holds the vocabulary the parts share (the value tags, [`Identity`]); it does
//! not know about slots, the change log or locking: it turns JSON into bytes and back.

mod decode;
mod encode;
mod escape;
mod header;
mod json;
mod path;
mod refs;
mod varint;

pub(crate) use decode::{decode_blob, decode_body};
pub(crate) use encode::{encode_body, encode_body_sized};
pub(crate) use header::{encode_header, parse_header, Name};
pub(crate) use json::{write_json, Selection, Whole, Written};
pub(crate) use path::decode_path;
pub(crate) use refs::{exclusive_bytes, release_blob, release_body, retain_blob};
pub(crate) use varint::{get_varint, put_varint};

// Value tags. Constants (allowed in templates and constant arrays, and in the body):
const T_NULL: u8 = 0;
const T_FALSE: u8 = 1;
const T_TRUE: u8 = 2;
const T_U64: u8 = 3; // varint
const T_NEG: u8 = 4; // varint of !i (i < 0)
const T_F64: u8 = 5; // 8 bytes LE
const T_STR: u8 = 6; // varint length + UTF-8
const T_ATOM_STR: u8 = 7; // string atom id
const T_UUID: u8 = 8; // 16 bytes
const T_OBJ: u8 = 9; // template atom id; in the body, the values of its holes follow
const T_ARR_CONST: u8 = 10; // constant-array atom id
const T_ARR_EMPTY: u8 = 11;
const T_KEY_NAME: u8 = 12; // the object's name
const T_KEY_NS: u8 = 13; // the object's namespace
const T_KEY_RV: u8 = 14; // the object's resourceVersion
                         // Body only:
const T_ARR: u8 = 15; // array template atom id, then the values of its holes
const T_UINT_STR: u8 = 16; // varint
const T_TS: u8 = 17; // zigzag varint delta seconds
const T_TS_FRAC: u8 = 18; // zigzag varint delta seconds, digit count, varint fraction
const T_IPV4: u8 = 19; // 4 bytes
const T_IPV4_CIDR: u8 = 20; // 4 bytes + prefix length
const T_GEN_NAME: u8 = 21; // prefix atom id + packed suffix
const T_HEX64: u8 = 22; // varint (0: no prefix, else prefix atom id + 1) + 32 bytes; a constant when bare
                        // Constants relative to the object's name (in templates too, like T_KEY_NAME):
const T_KEY_NAME_AFFIX: u8 = 23; // a string constant, the name, a string constant
const T_KEY_GEN_PREFIX: u8 = 24; // the name without its generated 5-character suffix
                                 // Constant, anywhere:
const T_ARR_OBJ1: u8 = 25; // template atom id: an array of one constant object (owner references)
                           // Constants relative to the object's name, like T_KEY_NAME:
const T_KEY_NAME_HEAD: u8 = 26; // varint n: the name's first n bytes, followed in it by a '-'
const T_KEY_NAME_ORDINAL: u8 = 27; // the digits after the name's last '-' (a StatefulSet's ordinal)
const T_KEY_NAME_HASH: u8 = 28; // the part of a generateName prefix between its last two '-'
/// Unsigned integers 0..=63 in the tag itself.
const T_SMALL: u8 = 0x80;
const SMALL_MAX: u64 = 63;
/// In a template: an object of the given template id, whose holes are in the body.
const OBJ_HOLE: u8 = 0xFE;
/// In a template, followed by the value's tag: the value's payload is in the body.
///
/// Decision: the tag lives in the template, shared by every object of that template, not
/// before each payload in every body: about ten bytes less per pod (a uid, timestamps, an IP,
/// the labels' and owner references' template ids), for one more byte per hole in a template.
const HOLE: u8 = 0xFF;

/// Objects nested deeper than this are refused (encoding and decoding recurse).
pub(crate) const MAX_DEPTH: usize = 256;

#[inline]
fn utf8(b: &[u8]) -> &str {
    std::str::from_utf8(b).expect("encoded strings are UTF-8")
}

/// Identity of an object: its key and upstream resourceVersion, kept in the header and
/// referenced from the body.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Identity<'a> {
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub resource_version: Option<&'a str>,
}
