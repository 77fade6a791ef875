//! Decoding one field of a body (`metadata.labels`) without decoding the rest: the values
//! before it are skipped (no allocation), the walk stops at the field, and only the field's
//! value is built.
//!
//! Why: a List with a label selector must rule out every object of the namespace whose labels
//! do not match. Decoding each whole object to read its labels made a Deployment's
//! `List(InNamespace, MatchingLabelsSelector)` (one per reconcile of a controller-runtime
//! controller over crcache, issue 12) cost the decoding of the whole namespace.
//!
//! Decision: the walk follows the templates' keys in their stored order and compares keys as
//! strings; it knows nothing of which fields come first, so it is right for any path.

use serde_json::Value;

use super::decode::Decoder;
use super::varint::{get_id, get_varint, unzigzag};
use super::{
    Identity, HOLE, OBJ_HOLE, SMALL_MAX, T_ARR, T_ARR_CONST, T_ARR_EMPTY, T_ARR_OBJ1, T_ATOM_STR,
    T_F64, T_FALSE, T_GEN_NAME, T_HEX64, T_IPV4, T_IPV4_CIDR, T_KEY_GEN_PREFIX, T_KEY_NAME,
    T_KEY_NAME_AFFIX, T_KEY_NAME_HASH, T_KEY_NAME_HEAD, T_KEY_NAME_ORDINAL, T_KEY_NS, T_KEY_RV,
    T_NEG, T_NULL, T_OBJ, T_SMALL, T_STR, T_TRUE, T_TS, T_TS_FRAC, T_U64, T_UINT_STR, T_UUID,
};
use crate::store::atoms::{AtomId, Atoms};
use crate::store::scalar::PACKED_SUFFIX_LEN;

/// The value at `path` (object keys from the root) of a body whose identity is known; `None`
/// when a key is missing or a value on the way is not an object.
pub(crate) fn decode_path(
    atoms: &Atoms,
    body: &[u8],
    id: &Identity<'_>,
    path: &[&str],
) -> Option<Value> {
    let mut dec = Decoder::new(atoms, body, id);
    dec.find_in_body(path)
}

impl Decoder<'_, '_> {
    /// The value at `path` inside the body value at the cursor, its tag first (the root).
    fn find_in_body(&mut self, path: &[&str]) -> Option<Value> {
        let tag = self.s[self.p];
        self.p += 1;
        self.find_in_hole(tag, path)
    }

    /// The value at `path` inside the value of a hole of tag `tag`, whose payload is at the
    /// cursor.
    fn find_in_hole(&mut self, tag: u8, path: &[&str]) -> Option<Value> {
        let Some((first, rest)) = path.split_first() else {
            return Some(self.hole_value(tag));
        };
        match tag {
            T_OBJ => {
                let tid = get_id(self.s, &mut self.p);
                self.find_in_object(tid, first, rest)
            }
            // An array, a scalar, or a constant: decoded (constants hold no holes) and walked.
            _ => walk(self.hole_value(tag), path),
        }
    }

    /// The value at `first` then `rest` inside the object of template `tid`, whose holes start
    /// at the cursor.
    fn find_in_object(&mut self, tid: AtomId, first: &str, rest: &[&str]) -> Option<Value> {
        let atoms = self.atoms;
        let t = atoms.payload(tid);
        let mut q = 0;
        let n = get_varint(t, &mut q);
        for _ in 0..n {
            // Compared as bytes: the keys were UTF-8 when interned.
            let found = atoms.payload(get_id(t, &mut q)) == first.as_bytes();
            match t[q] {
                HOLE => {
                    let tag = t[q + 1];
                    q += 2;
                    if found {
                        return self.find_in_hole(tag, rest);
                    }
                    self.skip_hole(tag);
                }
                OBJ_HOLE => {
                    q += 1;
                    let inner = get_id(t, &mut q);
                    if found {
                        return match rest.split_first() {
                            None => Some(self.object(inner)),
                            Some((next, rest)) => self.find_in_object(inner, next, rest),
                        };
                    }
                    self.skip_object(inner);
                }
                _ if found => return walk(self.const_value(t, &mut q), rest),
                _ => skip_const(t, &mut q),
            }
        }
        None
    }

    /// Moves the cursor past the value of a hole of tag `tag`, keeping the timestamp base up
    /// to date.
    pub(super) fn skip_hole(&mut self, tag: u8) {
        let s = self.s;
        match tag {
            T_OBJ => {
                let tid = get_id(s, &mut self.p);
                self.skip_object(tid);
            }
            T_ARR => {
                let t = self.atoms.payload(get_id(s, &mut self.p));
                let mut q = 0;
                let n = get_varint(t, &mut q);
                for _ in 0..n {
                    self.skip_entry(t, &mut q);
                }
            }
            T_UINT_STR => {
                get_varint(s, &mut self.p);
            }
            T_TS | T_TS_FRAC => {
                let delta = unzigzag(get_varint(s, &mut self.p));
                self.last_ts = self.last_ts.wrapping_add(delta);
                if tag == T_TS_FRAC {
                    self.p += 1;
                    get_varint(s, &mut self.p);
                }
            }
            T_IPV4 => self.p += 4,
            T_IPV4_CIDR => self.p += 5,
            T_GEN_NAME => {
                get_id(s, &mut self.p);
                self.p += PACKED_SUFFIX_LEN;
            }
            _ => skip_const_payload(tag, s, &mut self.p),
        }
    }

    /// Moves the cursor past the holes of an object of template `tid`.
    pub(super) fn skip_object(&mut self, tid: AtomId) {
        let t = self.atoms.payload(tid);
        let mut q = 0;
        let n = get_varint(t, &mut q);
        for _ in 0..n {
            get_id(t, &mut q);
            self.skip_entry(t, &mut q);
        }
    }

    /// Moves past one entry of a template at `t[*q]` (a hole: its value at the cursor; an
    /// object hole: its holes at the cursor; a constant: in the template).
    pub(super) fn skip_entry(&mut self, t: &[u8], q: &mut usize) {
        match t[*q] {
            HOLE => {
                *q += 2;
                self.skip_hole(t[*q - 1]);
            }
            OBJ_HOLE => {
                *q += 1;
                let inner = get_id(t, q);
                self.skip_object(inner);
            }
            _ => skip_const(t, q),
        }
    }
}

/// Moves `p` past the constant at `buf[*p]` (in a template, an array or the body).
fn skip_const(buf: &[u8], p: &mut usize) {
    let tag = buf[*p];
    *p += 1;
    skip_const_payload(tag, buf, p);
}

/// Moves `p` past the payload of a constant of tag `tag`.
pub(super) fn skip_const_payload(tag: u8, buf: &[u8], p: &mut usize) {
    match tag {
        T_NULL | T_FALSE | T_TRUE | T_ARR_EMPTY | T_KEY_NAME | T_KEY_NS | T_KEY_RV
        | T_KEY_GEN_PREFIX | T_KEY_NAME_ORDINAL | T_KEY_NAME_HASH => {}
        T_U64 | T_NEG | T_ATOM_STR | T_OBJ | T_ARR_CONST | T_ARR_OBJ1 | T_KEY_NAME_HEAD => {
            get_varint(buf, p);
        }
        T_F64 => *p += 8,
        T_STR => {
            let len = get_varint(buf, p) as usize;
            *p += len;
        }
        T_UUID => *p += 16,
        T_HEX64 => {
            get_varint(buf, p);
            *p += 32;
        }
        T_KEY_NAME_AFFIX => {
            skip_const(buf, p);
            skip_const(buf, p);
        }
        t if (T_SMALL..=T_SMALL + SMALL_MAX as u8).contains(&t) => {}
        t => unreachable!("tag {t} is not a constant"),
    }
}

/// The value at `path` inside a decoded value.
fn walk(mut value: Value, path: &[&str]) -> Option<Value> {
    for key in path {
        value = match value {
            Value::Object(mut m) => m.remove(*key)?,
            _ => return None,
        };
    }
    Some(value)
}
