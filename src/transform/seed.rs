//! Applying a transform while decoding (the ingest hot path): the fields it removes are skipped
//! by the decoder and never allocated.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize as _;
use serde_json::{Map, Value};

use super::tree::Node;
use super::Transform;

impl Transform {
    /// A [`DeserializeSeed`] that decodes one object with the transform already applied: the
    /// fields that the transform removes are skipped by the decoder and never allocated. The
    /// result equals decoding the whole object and then calling [`Transform::apply`].
    ///
    /// ```
    /// use informerd::transform::Transform;
    /// use serde::de::DeserializeSeed;
    ///
    /// let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":[{}]},
    ///               "spec":{"nodeName":"n","containers":[{"name":"c"}]}}"#;
    /// let mut de = serde_json::Deserializer::from_str(text);
    /// let pod = Transform::controller().seed().deserialize(&mut de).unwrap();
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
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        let keep = self.keep.filter(|n| !n.terminal);
        let decode = Decode {
            keep,
            drop: self.drop,
            element: false,
        };
        Ok(decode.deserialize(deserializer)?.0)
    }
}

/// Decodes a value under a keep node (`None`: keep it whole) and a drop node (`None`: drop
/// nothing below), into the value and whether it survives the projection in its parent, with
/// exactly the rules of `keep_in`, `keep_element` and `drop_in` (keep first, then drop: a field
/// that both select is kept by the projection and then dropped, so it is simply skipped).
#[derive(Clone, Copy)]
struct Decode<'a> {
    keep: Option<&'a Node>,
    drop: Option<&'a Node>,
    /// A list element rather than the value of a field.
    element: bool,
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

impl<'de> DeserializeSeed<'de> for Decode<'_> {
    type Value = (Value, bool);

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(Value, bool), D::Error> {
        if self.keep.is_none() && self.drop.is_none() {
            return Ok((Value::deserialize(d)?, true));
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Decode<'_> {
    type Value = (Value, bool);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(Value, bool), E> {
        Ok((Value::Bool(v), self.keep.is_none()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<(Value, bool), E> {
        Ok((Value::from(v), self.keep.is_none()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<(Value, bool), E> {
        Ok((Value::from(v), self.keep.is_none()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<(Value, bool), E> {
        let v = serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number);
        Ok((v, self.keep.is_none()))
    }
    fn visit_str<E>(self, v: &str) -> Result<(Value, bool), E> {
        Ok((Value::String(v.to_owned()), self.keep.is_none()))
    }
    fn visit_string<E>(self, v: String) -> Result<(Value, bool), E> {
        Ok((Value::String(v), self.keep.is_none()))
    }
    fn visit_none<E>(self) -> Result<(Value, bool), E> {
        Ok((Value::Null, self.keep.is_none()))
    }
    fn visit_unit<E>(self) -> Result<(Value, bool), E> {
        Ok((Value::Null, self.keep.is_none()))
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(Value, bool), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(Value, bool), A::Error> {
        let survives = self.keep.is_none_or(|n| n.any.is_some());
        let keep = match select(self.keep, |n| n.any.as_deref()) {
            Some(keep) => keep,
            // A list element that the path cannot project is kept as is.
            None if self.element => None,
            // A field's list that the path does not enter is removed by the parent.
            None => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                return Ok((Value::Array(Vec::new()), false));
            }
        };
        let drop = match self.drop.map(|n| n.any.as_deref()) {
            Some(Some(any)) if any.terminal => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                return Ok((Value::Array(Vec::new()), survives));
            }
            Some(any) => any,
            None => None,
        };
        let element = Decode {
            keep,
            drop,
            element: true,
        };
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some((item, _)) = seq.next_element_seed(element)? {
            items.push(item);
        }
        Ok((Value::Array(items), survives))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(Value, bool), A::Error> {
        let mut out = Map::new();
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
            let decode = Decode {
                keep,
                drop,
                element: false,
            };
            let (value, survives) = map.next_value_seed(decode)?;
            if survives {
                out.insert(key.into_owned(), value);
            }
        }
        Ok((Value::Object(out), true))
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
