//! What lets the objects written to one buffer share the text of their shared constants: the
//! places of those already written ([`Written`]), and the part of [`JsonWriter`] that finds,
//! copies and remembers them.

use ahash::AHashMap;

use super::super::varint::{get_id, get_varint};
use super::super::{
    Identity, T_ARR_CONST, T_ARR_OBJ1, T_ATOM_STR, T_KEY_GEN_PREFIX, T_KEY_NAME_AFFIX,
    T_KEY_NAME_HASH, T_KEY_NAME_HEAD, T_KEY_NAME_ORDINAL, T_OBJ,
};
use super::JsonWriter;
use crate::store::atoms::{AtomId, KIND_STR_LZ4};
use crate::store::scalar::GEN_SUFFIX_LEN;

/// Where the shared constants of the objects already written to one output buffer are in it:
/// a whole constant object or list (a template or array atom without holes: labels,
/// annotations, owner references) or a large string (an LZ4 atom: kubectl's
/// `last-applied-configuration`), by its tag and atom, as the range of its JSON text.
///
/// Why: the objects of one List share their constants (an app's pods their labels and
/// annotations), which the store keeps once (atoms) but wrote again for every object: the
/// annotation of 1 KB, decompressed and escaped, was the largest part of writing a pod. The
/// second object copies the first one's text from the same buffer instead (issue 34: a List
/// by label selector within 2 times an empty call). Nothing is held but the ranges; the
/// ranges are valid only for the buffer they were written to, which may only grow meanwhile
/// (`store::JsonBatch` keeps the two together).
///
/// Decision: only what depends on nothing but its atoms and the part of the object's identity
/// siblings share is copied. A value with a hole of the body in it is written anew each time;
/// so is one made of the object's whole name, its ordinal or its resourceVersion. One made of
/// the namespace or of the name up to a dash (an app's pods' labels hold their Deployment's
/// name, `web` of `web-7d9f8c6b5-x2k4p`, and its `pod-template-hash`) is copied to the objects
/// whose namespace and name begin the same ([`Place::fits`]). Only under a whole object (no
/// selection), so that no range is ever cut by a selection that removes the member holding
/// it afterwards. Atom ids are stable while the objects are: the handles of one List hold the
/// store's pin, which keeps every atom they name (`retired`).
#[derive(Default)]
pub(crate) struct Written(AHashMap<(u8, AtomId), Place>);

/// Where a shared value's text is, and what of the identity of the object it was written for
/// it is made of.
struct Place {
    start: usize,
    end: usize,
    /// The namespace, if the text holds it.
    namespace: Option<Box<str>>,
    /// The first bytes of the name that the text holds (empty: none).
    head: Box<str>,
    /// The name's length, if the text holds the name up to its generated suffix.
    length: Option<usize>,
}

impl Place {
    /// Whether the text is the value's for the object `id` too.
    fn fits(&self, id: &Identity<'_>) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| id.namespace == Some(ns))
            && id.name.starts_with(&*self.head)
            && self.length.is_none_or(|len| id.name.len() == len)
    }
}

/// What of the object's identity the text written since a [`Mark`] is made of.
#[derive(Clone, Copy, Default)]
pub(super) struct Named {
    /// Something siblings do not share: the whole name, its ordinal, the resourceVersion.
    pub(super) own: bool,
    pub(super) namespace: bool,
    /// The name's first `head` bytes.
    head: usize,
    /// The name but its generated suffix (`GEN_SUFFIX_LEN` bytes): its length too.
    length: bool,
}

impl Named {
    pub(super) fn join(&mut self, other: Named) {
        self.own |= other.own;
        self.namespace |= other.namespace;
        self.head = self.head.max(other.head);
        self.length |= other.length;
    }

    /// The name but its generated suffix.
    fn generated_prefix(name: &str) -> Named {
        Named {
            head: name.len().saturating_sub(GEN_SUFFIX_LEN),
            length: true,
            ..Named::default()
        }
    }
}

impl Written {
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// Constants shorter than this are written again rather than remembered: a lookup costs about
/// what writing a few dozen bytes does.
const WRITTEN_MIN: usize = 64;

/// See [`JsonWriter::mark`].
struct Mark {
    start: usize,
    holes: usize,
    /// `JsonWriter::named` before the value.
    named: Named,
}

impl JsonWriter<'_, '_, '_> {
    /// Writes a value with `write`, unless it is the shared value `key` (`None`: not one to
    /// share, or no batch) and `out` holds its text already: then copies that text and returns
    /// `None`, for the caller to skip the value's payload. `holes` is where the values of its
    /// holes, if it has any, start in the body. A value written is remembered if it may be
    /// copied ([`JsonWriter::remember`]).
    pub(super) fn write_shared(
        &mut self,
        key: Option<(u8, AtomId)>,
        holes: usize,
        write: impl FnOnce(&mut Self) -> bool,
    ) -> Option<bool> {
        let Some(key) = key else {
            return Some(write(self));
        };
        if self.copy_written(key) {
            return None;
        }
        let mark = self.mark(holes);
        let survives = write(self);
        self.remember(key, mark);
        Some(survives)
    }

    /// Copies the text of the shared value `key` from where `out` holds it already, if it
    /// does (whole objects only: the value survives, see `hole`); whether it did.
    fn copy_written(&mut self, key: (u8, AtomId)) -> bool {
        let Some(place) = self.written.as_deref().and_then(|w| w.0.get(&key)) else {
            return false;
        };
        if !place.fits(self.d.id) {
            return false;
        }
        let (start, end) = (place.start, place.end);
        self.out.extend_from_within(start..end);
        true
    }

    /// Where a value's text starts, with `holes` where the values of its holes (if any) would
    /// start in the body: what [`JsonWriter::remember`] needs to know whether it had any.
    fn mark(&mut self, holes: usize) -> Mark {
        Mark {
            start: self.out.len(),
            holes,
            named: std::mem::take(&mut self.named),
        }
    }

    /// Remembers the text written since `mark` as the shared value `key`'s, if it depends on
    /// nothing but the value's atoms and what of the object's identity its siblings share: no
    /// hole of the body was read for it (a hole's payload is never empty unless its tag alone,
    /// in the template, is the value) and no constant of the object's own (its whole name)
    /// written; and if it is long enough to be worth it.
    fn remember(&mut self, key: (u8, AtomId), mark: Mark) {
        let (end, named, id) = (self.out.len(), self.named, self.d.id);
        if !named.own && self.d.p == mark.holes && end - mark.start >= WRITTEN_MIN {
            if let Some(w) = self.written.as_deref_mut() {
                let place = Place {
                    start: mark.start,
                    end,
                    namespace: named
                        .namespace
                        .then(|| id.namespace.unwrap_or_default().into()),
                    head: id.name[..named.head.min(id.name.len())].into(),
                    length: named.length.then_some(id.name.len()),
                };
                w.0.insert(key, place);
            }
        }
        self.named.join(mark.named);
    }

    /// What of the object's identity the rarer constant of tag `tag` (payload at `buf[q]`)
    /// is made of: the name up to a dash (`T_KEY_NAME_HEAD`, its length the payload), up to
    /// its generated suffix (a ReplicaSet pod's hash, its generateName), or all of it.
    pub(super) fn named_by(&self, tag: u8, buf: &[u8], q: usize) -> Named {
        let name = self.d.id.name;
        match tag {
            T_KEY_NAME_HEAD => Named {
                head: get_varint(buf, &mut { q }) as usize,
                ..Named::default()
            },
            T_KEY_GEN_PREFIX | T_KEY_NAME_HASH => Named::generated_prefix(name),
            T_KEY_NAME_AFFIX | T_KEY_NAME_ORDINAL => Named {
                own: true,
                ..Named::default()
            },
            _ => Named::default(),
        }
    }

    /// The key under which the constant at `buf[q]` (of tag `tag`) is remembered, if it is
    /// one to remember: a constant object or list, or a large string, of a whole object.
    pub(super) fn shared_key(&self, tag: u8, buf: &[u8], q: usize) -> Option<(u8, AtomId)> {
        self.written.as_ref()?;
        if !matches!(tag, T_OBJ | T_ARR_CONST | T_ARR_OBJ1 | T_ATOM_STR) {
            return None;
        }
        let id = get_id(buf, &mut { q });
        (tag != T_ATOM_STR || self.d.atoms.kind(id) == KIND_STR_LZ4).then_some((tag, id))
    }
}
