//! Writing a body straight to JSON text, through a selection (a transform's `keep` and `drop`
//! trees, or a request's field mask): the bytes `serde_json::to_vec` gives of the decoded object
//! after the transform is applied to it, without building the object.
//!
//! Why: a `List` or a `Get` rendered each object by decoding it into a `serde_json::Value` (a
//! map node and a `String` per field), projecting that onto the field mask and serializing it
//! again; issue 34 measured about 26 µs of the sidecar's CPU per whole pod listed. Here the
//! templates give the keys and the constants, the body the holes, and both go straight into
//! the output: the only allocations are the output's own and a few formatted scalars.
//!
//! Byte for byte the old output, because clients may compare what `List`, `Get` and `Watch`
//! send (and tests do): members in serde_json's order (see `JsonWriter::object`), strings and
//! numbers through serde_json's own serializer. The selection follows the rules of
//! `transform::decode` (keep first, then drop).

mod written;

use written::Named;
pub(crate) use written::Written;

use super::decode::Decoder;
use super::escape::write_escaped;
use super::path::skip_const_payload;
use super::varint::{get_id, get_varint, unzigzag};
use super::{
    Identity, HOLE, OBJ_HOLE, SMALL_MAX, T_ARR, T_ARR_CONST, T_ARR_EMPTY, T_ARR_OBJ1, T_ATOM_STR,
    T_GEN_NAME, T_IPV4, T_IPV4_CIDR, T_KEY_NAME, T_KEY_NS, T_KEY_RV, T_OBJ, T_SMALL, T_STR, T_TS,
    T_TS_FRAC, T_UINT_STR, T_UUID,
};
use crate::store::atoms::{AtomId, Atoms, KIND_STR, KIND_STR_LZ4};
use crate::store::packed;
use crate::store::scalar::{
    format_ipv4, format_uuid, unpack_suffix, write_timestamp, Timestamp, PACKED_SUFFIX_LEN,
};

/// What to write of a value, as a tree of field names (a transform's compiled paths).
pub(crate) trait Selection {
    /// The path ends here: the whole value is selected.
    fn is_whole(&self) -> bool;
    /// What is selected in the field `key` of an object (`None`: nothing).
    fn field(&self, key: &str) -> Option<&Self>;
    /// What is selected in every element of a list (`[*]`; `None`: nothing).
    fn elements(&self) -> Option<&Self>;
}

/// The selection of nothing in particular, for writing whole objects.
pub(crate) enum Whole {}

impl Selection for Whole {
    fn is_whole(&self) -> bool {
        match *self {}
    }
    fn field(&self, _: &str) -> Option<&Self> {
        match *self {}
    }
    fn elements(&self) -> Option<&Self> {
        match *self {}
    }
}

/// Appends the JSON text of a body whose identity is known to `out`: the values `keep`
/// projects the object on (`None`: all of it; see `transform`), less those `drop` names.
/// `written`, for a whole object only, says where `out` already holds the shared constants
/// of the objects written to it before, and learns this object's.
pub(crate) fn write_json<S: Selection>(
    atoms: &Atoms,
    body: &[u8],
    id: &Identity<'_>,
    keep: Option<&S>,
    drop: Option<&S>,
    out: &mut Vec<u8>,
    written: Option<&mut Written>,
) {
    let written = written.filter(|_| keep.is_none() && drop.is_none());
    let mut w = JsonWriter {
        d: Decoder::new(atoms, body, id),
        out,
        written,
        named: Named::default(),
    };
    let tag = body[0];
    w.d.p = 1;
    // The root stays whatever the projection says of it (`Transform::apply` cannot remove it).
    w.hole(tag, keep.filter(|k| !k.is_whole()), drop, false);
}

/// The fate of a value under a node: `None`, not selected; `Some(None)`, all of it;
/// `Some(Some(n))`, what `n` selects.
fn select<'n, S: Selection>(
    node: Option<&'n S>,
    child: impl FnOnce(&'n S) -> Option<&'n S>,
) -> Option<Option<&'n S>> {
    match node {
        None => Some(None),
        Some(node) => match child(node) {
            None => None,
            Some(c) if c.is_whole() => Some(None),
            Some(c) => Some(Some(c)),
        },
    }
}

/// What becomes of a list's elements.
enum Elements<'n, S> {
    /// The list is written empty; whether it survives in its parent.
    Emptied(bool),
    /// Each element is written under these keep and drop nodes; whether the list survives.
    Each(Option<&'n S>, Option<&'n S>, bool),
}

/// The rules of `transform::decode`'s `array`: a field's list the keep path does not enter is
/// removed, an element's is kept as is; a drop of `[*]` empties it.
fn elements<'n, S: Selection>(
    keep: Option<&'n S>,
    drop: Option<&'n S>,
    element: bool,
) -> Elements<'n, S> {
    let survives = keep.is_none_or(|n| n.elements().is_some());
    let keep = match select(keep, S::elements) {
        Some(keep) => keep,
        None if element => None,
        None => return Elements::Emptied(false),
    };
    match drop.map(S::elements) {
        Some(Some(any)) if any.is_whole() => Elements::Emptied(survives),
        Some(any) => Elements::Each(keep, any, survives),
        None => Elements::Each(keep, None, survives),
    }
}

struct JsonWriter<'a, 'i, 'o> {
    d: Decoder<'a, 'i>,
    out: &'o mut Vec<u8>,
    /// The constants already in `out` (whole objects only).
    written: Option<&'o mut Written>,
    /// What of the object's identity (its name, namespace or resourceVersion) the constants
    /// written since this was last cleared are made of.
    named: Named,
}

impl<'a> JsonWriter<'a, '_, '_> {
    /// Writes the value of a hole whose template gives `tag` (its payload at the cursor);
    /// returns whether it survives in its parent (a scalar does not where the keep path goes
    /// on below it: the parent then removes it).
    fn hole<S: Selection>(
        &mut self,
        tag: u8,
        keep: Option<&S>,
        drop: Option<&S>,
        element: bool,
    ) -> bool {
        let s = self.d.s;
        match tag {
            T_OBJ => {
                let tid = get_id(s, &mut self.d.p);
                let key = self.written.is_some().then_some((T_OBJ, tid));
                self.write_shared(key, self.d.p, |w| {
                    w.object(tid, keep, drop);
                    true
                });
                return true;
            }
            T_ARR => {
                // The array's template id, then the values of its holes.
                let mut holes = self.d.p;
                let key = self
                    .written
                    .is_some()
                    .then(|| (T_ARR, get_id(s, &mut holes)));
                return self
                    .write_shared(key, holes, |w| w.hole_array(keep, drop, element))
                    .unwrap_or_else(|| {
                        self.d.p = holes;
                        true
                    });
            }
            T_UINT_STR => {
                let v = get_varint(s, &mut self.d.p);
                self.out.push(b'"');
                self.number(&v);
                self.out.push(b'"');
            }
            T_TS | T_TS_FRAC => {
                let secs = self
                    .d
                    .last_ts
                    .wrapping_add(unzigzag(get_varint(s, &mut self.d.p)));
                self.d.last_ts = secs;
                let frac = (tag == T_TS_FRAC).then(|| {
                    let digits = s[self.d.p];
                    self.d.p += 1;
                    (digits, get_varint(s, &mut self.d.p) as u32)
                });
                self.out.push(b'"');
                write_timestamp(Timestamp { secs, frac }, self.out);
                self.out.push(b'"');
            }
            T_IPV4 => {
                self.d.p += 4;
                self.plain(&format_ipv4(&s[self.d.p - 4..self.d.p], None));
            }
            T_IPV4_CIDR => {
                self.d.p += 5;
                let p = self.d.p;
                self.plain(&format_ipv4(&s[p - 5..p - 1], Some(s[p - 1])));
            }
            T_GEN_NAME => {
                let prefix = self.d.atoms.str(get_id(s, &mut self.d.p));
                let suffix = unpack_suffix(&s[self.d.p..self.d.p + PACKED_SUFFIX_LEN]);
                self.d.p += PACKED_SUFFIX_LEN;
                self.string(prefix);
                self.out.pop();
                self.out.extend_from_slice(&suffix);
                self.out.push(b'"');
            }
            _ => {
                let mut p = self.d.p;
                let survives = self.const_payload(tag, s, &mut p, keep, drop, element);
                self.d.p = p;
                return survives;
            }
        }
        keep.is_none()
    }

    /// Writes the object of template `tid` (its holes at the cursor, if any).
    ///
    /// Decision: members in the template's order, which is serde_json's (its maps, built
    /// without `preserve_order`, write their keys in order): every template is encoded from a
    /// `Value` or a tape, and both hold an object's keys sorted and once (the debug build
    /// checks).
    fn object<S: Selection>(&mut self, tid: AtomId, keep: Option<&S>, drop: Option<&S>) {
        let t = self.d.atoms.payload(tid);
        let mut q = 0;
        let n = get_varint(t, &mut q);
        self.out.push(b'{');
        let mut first = true;
        let mut last: Option<&str> = None;
        for _ in 0..n {
            let key_id = get_id(t, &mut q);
            // Decision: a whole object's keys are written from their bytes; only a selection
            // needs them as `str` (the check of each key's UTF-8 was a tenth of a List's
            // rendering, issue 34).
            let selected = if keep.is_none() && drop.is_none() {
                Some((None, None))
            } else {
                let key = self.d.atoms.str(key_id);
                debug_assert!(last.is_none_or(|l| l < key), "{last:?} before {key:?}");
                last = Some(key);
                select(keep, |n| n.field(key)).and_then(|keep| {
                    match drop.and_then(|n| n.field(key)) {
                        Some(d) if d.is_whole() => None,
                        drop => Some((keep, drop)),
                    }
                })
            };
            let Some((keep, drop)) = selected else {
                self.d.skip_entry(t, &mut q);
                continue;
            };
            let mark = self.out.len();
            if !first {
                self.out.push(b',');
            }
            write_escaped(self.out, self.d.atoms.payload(key_id));
            self.out.push(b':');
            let survives = match t[q] {
                HOLE => {
                    q += 2;
                    self.hole(t[q - 1], keep, drop, false)
                }
                OBJ_HOLE => {
                    q += 1;
                    let inner = get_id(t, &mut q);
                    self.object(inner, keep, drop);
                    true
                }
                _ => self.constant(t, &mut q, keep, drop, false),
            };
            if survives {
                first = false;
            } else {
                self.out.truncate(mark);
            }
        }
        self.out.push(b'}');
    }

    /// Writes a list whose template's id is at the cursor.
    fn hole_array<S: Selection>(
        &mut self,
        keep: Option<&S>,
        drop: Option<&S>,
        element: bool,
    ) -> bool {
        let (keep, drop, survives) = match elements(keep, drop, element) {
            Elements::Emptied(survives) => {
                self.d.skip_hole(T_ARR);
                self.out.extend_from_slice(b"[]");
                return survives;
            }
            Elements::Each(keep, drop, survives) => (keep, drop, survives),
        };
        let t = self.d.atoms.payload(get_id(self.d.s, &mut self.d.p));
        let mut q = 0;
        let n = get_varint(t, &mut q);
        self.out.push(b'[');
        for i in 0..n {
            if i > 0 {
                self.out.push(b',');
            }
            match t[q] {
                HOLE => {
                    q += 2;
                    self.hole(t[q - 1], keep, drop, true);
                }
                OBJ_HOLE => {
                    q += 1;
                    let tid = get_id(t, &mut q);
                    self.object(tid, keep, drop);
                }
                _ => {
                    self.constant(t, &mut q, keep, drop, true);
                }
            }
        }
        self.out.push(b']');
        survives
    }

    /// Writes the constant at `buf[*q]` (in a template, an array or the body).
    fn constant<S: Selection>(
        &mut self,
        buf: &'a [u8],
        q: &mut usize,
        keep: Option<&S>,
        drop: Option<&S>,
        element: bool,
    ) -> bool {
        let tag = buf[*q];
        *q += 1;
        self.const_payload(tag, buf, q, keep, drop, element)
    }

    /// Writes the constant of tag `tag` whose payload is at `buf[*q]`: copied from where `out`
    /// holds it already if it is a shared constant written before (see [`Written`]).
    fn const_payload<S: Selection>(
        &mut self,
        tag: u8,
        buf: &'a [u8],
        q: &mut usize,
        keep: Option<&S>,
        drop: Option<&S>,
        element: bool,
    ) -> bool {
        let key = self.shared_key(tag, buf, *q);
        let written = self.write_shared(key, self.d.p, |w| {
            w.write_const(tag, buf, q, keep, drop, element)
        });
        written.unwrap_or_else(|| {
            skip_const_payload(tag, buf, q);
            true
        })
    }

    /// Writes the constant of tag `tag` whose payload is at `buf[*q]`.
    fn write_const<S: Selection>(
        &mut self,
        tag: u8,
        buf: &'a [u8],
        q: &mut usize,
        keep: Option<&S>,
        drop: Option<&S>,
        element: bool,
    ) -> bool {
        let atoms = self.d.atoms;
        match tag {
            T_OBJ => {
                let tid = get_id(buf, q);
                self.object(tid, keep, drop);
                return true;
            }
            T_ARR_CONST | T_ARR_OBJ1 | T_ARR_EMPTY => {
                return self.const_array(tag, buf, q, keep, drop, element)
            }
            T_STR => {
                let len = get_varint(buf, q) as usize;
                *q += len;
                write_escaped(self.out, &buf[*q - len..*q]);
            }
            T_ATOM_STR => {
                let id = get_id(buf, q);
                match atoms.kind(id) {
                    KIND_STR_LZ4 => {
                        write_escaped(self.out, &packed::unpack_bytes(atoms.payload(id)))
                    }
                    // Interned as UTF-8: written from its bytes, not checked again.
                    kind => {
                        debug_assert_eq!(kind, KIND_STR);
                        write_escaped(self.out, atoms.payload(id))
                    }
                }
            }
            T_UUID => {
                *q += 16;
                self.plain(&format_uuid(&buf[*q - 16..*q]));
            }
            T_KEY_NAME => {
                self.named.own = true;
                self.string(self.d.id.name);
            }
            T_KEY_NS => {
                self.named.namespace = true;
                self.string(self.d.id.namespace.unwrap_or_default());
            }
            T_KEY_RV => {
                self.named.own = true;
                self.string(self.d.id.resource_version.unwrap_or_default());
            }
            t if (T_SMALL..=T_SMALL + SMALL_MAX as u8).contains(&t) => {
                self.number(&u64::from(t - T_SMALL));
            }
            // The rarer scalars (numbers, digests, names made of the object's name): decoded
            // as the decoder does, then serialized.
            _ => {
                self.named.join(self.named_by(tag, buf, *q));
                let value = self.d.const_payload(tag, buf, q);
                self.number(&value);
            }
        }
        keep.is_none()
    }

    /// Writes a constant list: of constants (`T_ARR_CONST`, its atom's id at `buf[*q]`), of
    /// one constant object (`T_ARR_OBJ1`, its template's id) or empty.
    fn const_array<S: Selection>(
        &mut self,
        tag: u8,
        buf: &'a [u8],
        q: &mut usize,
        keep: Option<&S>,
        drop: Option<&S>,
        element: bool,
    ) -> bool {
        let (keep, drop, survives) = match elements(keep, drop, element) {
            Elements::Emptied(survives) => {
                skip_const_payload(tag, buf, q);
                self.out.extend_from_slice(b"[]");
                return survives;
            }
            Elements::Each(keep, drop, survives) => (keep, drop, survives),
        };
        self.out.push(b'[');
        match tag {
            T_ARR_OBJ1 => {
                let tid = get_id(buf, q);
                self.object(tid, keep, drop);
            }
            T_ARR_CONST => {
                let a = self.d.atoms.payload(get_id(buf, q));
                let mut p = 0;
                let n = get_varint(a, &mut p);
                for i in 0..n {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.constant(a, &mut p, keep, drop, true);
                }
            }
            _ => {}
        }
        self.out.push(b']');
        survives
    }

    /// Writes a string as serde_json does (quoted, escaped).
    fn string(&mut self, s: &str) {
        write_escaped(self.out, s.as_bytes());
    }

    /// Writes a string that needs no escape (a formatted timestamp, address or UUID).
    fn plain(&mut self, s: &str) {
        self.out.push(b'"');
        self.out.extend_from_slice(s.as_bytes());
        self.out.push(b'"');
    }

    /// Writes a number (or any scalar value) as serde_json does.
    fn number<T: serde::Serialize + ?Sized>(&mut self, v: &T) {
        serde_json::to_writer(&mut *self.out, v).expect("writing to a Vec cannot fail");
    }
}
