//! Applying a transform while decoding (the ingest hot path): the fields it removes are skipped
//! by the decoder and never allocated, and those it keeps go onto a [`Tape`], not into
//! `serde_json::Value`s (see `vocab::tape` for why).

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::tree::Node;
use super::Transform;
use crate::vocab::tape::Tape;

impl Transform {
    /// A [`DeserializeSeed`] that decodes one object with the transform already applied, into
    /// a [`Tape`]: the fields that the transform removes are skipped by the decoder and never
    /// allocated. The result equals decoding the whole object and then calling
    /// [`Transform::apply`].
    ///
    /// ```
    /// use informerd::transform::Transform;
    /// use serde::de::DeserializeSeed;
    ///
    /// let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":[{}]},
    ///               "spec":{"nodeName":"n","containers":[{"name":"c"}]}}"#;
    /// let mut de = serde_json::Deserializer::from_str(text);
    /// let pod = Transform::controller().seed().deserialize(&mut de).unwrap().to_value();
    /// assert_eq!(pod["spec"], serde_json::json!({"nodeName": "n"}));
    /// assert!(pod["metadata"].get("managedFields").is_none());
    /// ```
    pub fn seed(&self) -> TransformSeed<'_> {
        TransformSeed {
            keep: self.inner.keep.as_ref(),
            drop: self.inner.drop.as_ref(),
        }
    }
}

/// Decodes one object with a transform applied; see [`Transform::seed`].
#[derive(Clone, Copy, Debug)]
pub struct TransformSeed<'a> {
    keep: Option<&'a Node>,
    drop: Option<&'a Node>,
}

impl<'de> DeserializeSeed<'de> for TransformSeed<'_> {
    type Value = Tape;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Tape, D::Error> {
        let mut tape = Tape::new();
        let decode = Decode {
            keep: self.keep.filter(|n| !n.terminal),
            drop: self.drop,
            element: false,
            tape: &mut tape,
        };
        decode.deserialize(deserializer)?;
        Ok(tape)
    }
}

/// Decodes a value under a keep node (`None`: keep it whole) and a drop node (`None`: drop
/// nothing below) onto the tape, and says whether it survives the projection in its parent
/// (when it does not, the parent cuts it off again), with exactly the rules of `keep_in`,
/// `keep_element` and `drop_in` (keep first, then drop: a field that both select is kept by
/// the projection and then dropped, so it is simply skipped).
struct Decode<'a, 't> {
    keep: Option<&'a Node>,
    drop: Option<&'a Node>,
    /// A list element rather than the value of a field.
    element: bool,
    tape: &'t mut Tape,
}

/// A child's fate under a node: `None`, not selected; `Some(None)`, all of it; `Some(Some(n))`,
/// what `n` selects.
type Selection<'a> = Option<Option<&'a Node>>;

fn select(node: Option<&Node>, child: impl FnOnce(&Node) -> Option<&Node>) -> Selection<'_> {
    match node {
        None => Some(None),
        Some(node) => match child(node) {
            None => None,
            Some(c) if c.terminal => Some(None),
            Some(c) => Some(Some(c)),
        },
    }
}

impl<'de> DeserializeSeed<'de> for Decode<'_, '_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl Decode<'_, '_> {
    /// A scalar was pushed: it survives unless the path goes on below it.
    fn scalar(self) -> bool {
        self.keep.is_none()
    }
}

impl<'de> Visitor<'de> for Decode<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<bool, E> {
        self.tape.push_bool(v);
        Ok(self.scalar())
    }
    fn visit_i64<E>(self, v: i64) -> Result<bool, E> {
        self.tape.push_i64(v);
        Ok(self.scalar())
    }
    fn visit_u64<E>(self, v: u64) -> Result<bool, E> {
        self.tape.push_u64(v);
        Ok(self.scalar())
    }
    fn visit_f64<E>(self, v: f64) -> Result<bool, E> {
        self.tape.push_f64(v);
        Ok(self.scalar())
    }
    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        self.tape.push_str(v);
        Ok(self.scalar())
    }
    fn visit_none<E>(self) -> Result<bool, E> {
        self.tape.push_null();
        Ok(self.scalar())
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        self.tape.push_null();
        Ok(self.scalar())
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let survives = self.keep.is_none_or(|n| n.any.is_some());
        let open = self.tape.open_array();
        let keep = match select(self.keep, |n| n.any.as_deref()) {
            Some(keep) => keep,
            // A list element that the path cannot project is kept as is.
            None if self.element => None,
            // A field's list that the path does not enter is removed by the parent.
            None => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                self.tape.close_array(open, 0);
                return Ok(false);
            }
        };
        let drop = match self.drop.map(|n| n.any.as_deref()) {
            Some(Some(any)) if any.terminal => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                self.tape.close_array(open, 0);
                return Ok(survives);
            }
            Some(any) => any,
            None => None,
        };
        let mut len = 0;
        loop {
            let element = Decode {
                keep,
                drop,
                element: true,
                tape: &mut *self.tape,
            };
            if seq.next_element_seed(element)?.is_none() {
                break;
            }
            len += 1;
        }
        self.tape.close_array(open, len);
        Ok(survives)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let open = self.tape.open_object();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let Some(keep) = select(self.keep, |n| n.child(&key)) else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let drop = match self.drop.and_then(|n| n.child(&key)) {
                Some(n) if n.terminal => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                drop => drop,
            };
            let mark = self.tape.mark();
            self.tape.push_str(&key);
            let decode = Decode {
                keep,
                drop,
                element: false,
                tape: &mut *self.tape,
            };
            if !map.next_value_seed(decode)? {
                self.tape.truncate(mark);
            }
        }
        self.tape.close_object(open);
        Ok(true)
    }
}

/// A map key, borrowed from the input where it can be: the keys a transform skips are never
/// allocated.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}
