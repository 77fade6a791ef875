//! Applying a transform while reading JSON text (the ingest hot path): the fields it removes are
//! skipped by the reader (`vocab::reader`) and never decoded, and those it keeps go onto a
//! [`Tape`]. Keys are compared with the transform's paths as they stand in the text.
//!
//! The rules are those of `keep_in`, `keep_element` and `drop_in` (`apply`): keep first, then
//! drop, so that a field both select is simply skipped. The result equals decoding the whole
//! object and then calling [`Transform::apply`] (tested in `tests`, and against serde_json by
//! the fuzz target `objects`).

use std::sync::atomic::Ordering;

use super::tree::Node;
use super::Transform;
use crate::vocab::reader::{Kind, ReadError, Reader, Scalar, RECURSION_LIMIT};
use crate::vocab::tape::Tape;

impl Transform {
    /// Decodes the JSON text of one object with the transform applied, onto `tape` (which is
    /// cleared first).
    ///
    /// ```
    /// use informerd_store::transform::Transform;
    /// use informerd_store::vocab::tape::Tape;
    ///
    /// let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":[{}]},
    ///               "spec":{"nodeName":"n","containers":[{"name":"c"}]}}"#;
    /// let mut tape = Tape::new();
    /// Transform::controller().decode(text, &mut tape).unwrap();
    /// let pod = tape.to_value();
    /// assert_eq!(pod["spec"], serde_json::json!({"nodeName": "n"}));
    /// assert!(pod["metadata"].get("managedFields").is_none());
    /// ```
    pub fn decode(&self, text: &str, tape: &mut Tape) -> Result<(), ReadError> {
        let mut reader = Reader::new(text);
        self.read(&mut reader, tape)?;
        reader.finish()
    }

    /// Reads one value from `reader` with the transform applied, onto `tape` (cleared first);
    /// the reader stands after it.
    pub fn read(&self, reader: &mut Reader<'_>, tape: &mut Tape) -> Result<(), ReadError> {
        tape.clear();
        // Decision: room for what the last object decoded with this transform took, plus an
        // eighth: the objects of a resource are alike, and growing a tape from empty took a
        // twentieth of decoding a pod in reallocations.
        let hint = self.inner.size_hint.load(Ordering::Relaxed);
        let (nodes, text) = ((hint >> 32) as usize, (hint & 0xFFFF_FFFF) as usize);
        tape.reserve(nodes + nodes / 8, text + text / 8);
        let keep = self.inner.keep.as_ref().filter(|n| !n.terminal);
        let mut d = Decoder {
            r: reader,
            tape,
            depth: 0,
        };
        d.value(keep, self.inner.drop.as_ref(), false)?;
        let (nodes, text) = tape.sizes();
        let hint = (nodes.min(u32::MAX as usize) as u64) << 32 | text.min(u32::MAX as usize) as u64;
        self.inner.size_hint.store(hint, Ordering::Relaxed);
        Ok(())
    }
}

struct Decoder<'r, 'a, 't> {
    r: &'r mut Reader<'a>,
    tape: &'t mut Tape,
    /// Containers open.
    depth: usize,
}

/// A child's fate under a node: `None`, not selected; `Some(None)`, all of it; `Some(Some(n))`,
/// what `n` selects.
type Selection<'n> = Option<Option<&'n Node>>;

fn select<'n>(
    node: Option<&'n Node>,
    child: impl FnOnce(&'n Node) -> Option<&'n Node>,
) -> Selection<'n> {
    match node {
        None => Some(None),
        Some(node) => match child(node) {
            None => None,
            Some(c) if c.terminal => Some(None),
            Some(c) => Some(Some(c)),
        },
    }
}

impl Decoder<'_, '_, '_> {
    /// Decodes a value under a keep node (`None`: keep it whole) and a drop node (`None`: drop
    /// nothing below) onto the tape, and says whether it survives the projection in its
    /// parent (when it does not, the parent cuts it off again). `element`: a list element
    /// rather than the value of a field.
    fn value(
        &mut self,
        keep: Option<&Node>,
        drop: Option<&Node>,
        element: bool,
    ) -> Result<bool, ReadError> {
        match self.r.kind()? {
            Kind::Object if keep.is_none() && drop.is_none() => self.whole().map(|()| true),
            Kind::Object => self.object(keep, drop),
            Kind::Array => self.array(keep, drop, element),
            kind => {
                self.scalar(kind)?;
                // A scalar survives unless the path goes on below it.
                Ok(keep.is_none())
            }
        }
    }

    /// A scalar of kind `kind`: a string is read straight from the text (without an escape,
    /// nearly always, it is not copied before the tape).
    fn scalar(&mut self, kind: Kind) -> Result<(), ReadError> {
        if kind == Kind::String {
            let s = self.r.string()?;
            self.tape.push_str(&s.decode(self.r)?);
            return Ok(());
        }
        match self.r.scalar()? {
            Scalar::Null => self.tape.push_null(),
            Scalar::Bool(b) => self.tape.push_bool(b),
            Scalar::U64(u) => self.tape.push_u64(u),
            Scalar::I64(i) => self.tape.push_i64(i),
            Scalar::F64(f) => self.tape.push_f64(f),
            Scalar::Str(s) => self.tape.push_str(&s),
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), ReadError> {
        self.depth += 1;
        if self.depth >= RECURSION_LIMIT {
            return Err(self.r.error("recursion limit exceeded"));
        }
        Ok(())
    }

    /// A value kept whole, nothing dropped below it.
    fn whole(&mut self) -> Result<(), ReadError> {
        match self.r.kind()? {
            Kind::Object => {
                self.enter()?;
                let mut members = self.r.object()?;
                let open = self.tape.open_object();
                while let Some(key) = members.next(self.r)? {
                    self.tape.push_key(&key.decode(self.r)?);
                    self.whole()?;
                }
                self.tape.close_object(open);
                self.depth -= 1;
            }
            Kind::Array => {
                self.enter()?;
                let mut elements = self.r.array()?;
                let open = self.tape.open_array();
                let mut len = 0;
                while elements.next(self.r)? {
                    self.whole()?;
                    len += 1;
                }
                self.tape.close_array(open, len);
                self.depth -= 1;
            }
            kind => self.scalar(kind)?,
        }
        Ok(())
    }

    fn object(&mut self, keep: Option<&Node>, drop: Option<&Node>) -> Result<bool, ReadError> {
        self.enter()?;
        let mut members = self.r.object()?;
        let open = self.tape.open_object();
        while let Some(key) = members.next(self.r)? {
            let key = key.decode(self.r)?;
            let Some(keep) = select(keep, |n| n.child(&key)) else {
                self.r.skip()?;
                continue;
            };
            let drop = match drop.and_then(|n| n.child(&key)) {
                Some(n) if n.terminal => {
                    self.r.skip()?;
                    continue;
                }
                drop => drop,
            };
            let mark = self.tape.mark();
            self.tape.push_key(&key);
            if !self.value(keep, drop, false)? {
                self.tape.truncate(mark);
            }
        }
        self.tape.close_object(open);
        self.depth -= 1;
        Ok(true)
    }

    /// A list none of whose elements is kept: skipped, and an empty list on the tape.
    fn emptied(&mut self) -> Result<(), ReadError> {
        self.r.skip()?;
        let open = self.tape.open_array();
        self.tape.close_array(open, 0);
        Ok(())
    }

    fn array(
        &mut self,
        keep: Option<&Node>,
        drop: Option<&Node>,
        element: bool,
    ) -> Result<bool, ReadError> {
        let survives = keep.is_none_or(|n| n.any.is_some());
        let keep = match select(keep, |n| n.any.as_deref()) {
            Some(keep) => keep,
            // A list element that the path cannot project is kept as is.
            None if element => None,
            // A field's list that the path does not enter is removed by the parent.
            None => return self.emptied().map(|()| false),
        };
        let drop = match drop.map(|n| n.any.as_deref()) {
            Some(Some(any)) if any.terminal => return self.emptied().map(|()| survives),
            Some(any) => any,
            None => None,
        };
        self.enter()?;
        let mut elements = self.r.array()?;
        let open = self.tape.open_array();
        let mut len = 0;
        while elements.next(self.r)? {
            self.value(keep, drop, true)?;
            len += 1;
        }
        self.tape.close_array(open, len);
        self.depth -= 1;
        Ok(survives)
    }
}
