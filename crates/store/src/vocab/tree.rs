//! [`Tree`], the read-only view of a JSON document that the store's encoder walks, so that it
//! reads a [`super::tape::Tape`] (the fleet's decoding) and a `serde_json::Value` (objects given
//! whole, filters' and indexes' input) alike and gives both the same bytes.

use serde_json::{Number, Value};

/// A number, as serde_json classifies it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    /// Non-negative integers.
    U64(u64),
    /// Negative integers.
    I64(i64),
    /// Everything else.
    F64(f64),
}

impl Num {
    pub(super) fn of(n: &Number) -> Num {
        if let Some(u) = n.as_u64() {
            Num::U64(u)
        } else if let Some(i) = n.as_i64() {
            Num::I64(i)
        } else {
            Num::F64(n.as_f64().unwrap_or(0.0))
        }
    }
}

/// A JSON value as the store's encoder reads it.
pub enum View<'a, T: Tree<'a>> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Num(Num),
    /// A string.
    Str(&'a str),
    /// The length, and the elements.
    Array(usize, T::Elements),
    /// The member count, and the members in key order.
    Object(usize, T::Members),
}

/// Read-only access to a JSON document, so that one encoder reads a [`Tape`] and a
/// `serde_json::Value` alike.
pub trait Tree<'a>: Copy + 'a {
    /// An array's elements.
    type Elements: Iterator<Item = Self>;
    /// An object's members, in key order.
    type Members: Iterator<Item = (&'a str, Self)>;

    /// What this value is.
    fn view(self) -> View<'a, Self>;

    /// The member `key` of an object (`None` for other values).
    fn get(self, key: &str) -> Option<Self> {
        match self.view() {
            View::Object(_, mut members) => members.find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string this value is, if it is one.
    fn as_str(self) -> Option<&'a str> {
        match self.view() {
            View::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Calls `f` with this value as a `serde_json::Value` (built for a tape, borrowed for a
    /// `Value`).
    fn with_value<R>(self, f: impl FnOnce(&Value) -> R) -> R;

    /// True when this value nests containers deeper than `max` (its members are at depth 1).
    fn too_deep(self, max: usize) -> bool {
        nested_deeper(self, max)
    }
}

/// [`Tree::too_deep`] by a walk of the whole value.
pub(super) fn nested_deeper<'a, T: Tree<'a>>(value: T, max: usize) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        if d > max {
            return true;
        }
        match v.view() {
            View::Array(_, elements) => stack.extend(elements.map(|c| (c, d + 1))),
            View::Object(_, members) => stack.extend(members.map(|(_, c)| (c, d + 1))),
            _ => {}
        }
    }
    false
}

fn member<'a>((k, v): (&'a String, &'a Value)) -> (&'a str, &'a Value) {
    (k.as_str(), v)
}

impl<'a> Tree<'a> for &'a Value {
    type Elements = std::slice::Iter<'a, Value>;
    type Members = std::iter::Map<
        serde_json::map::Iter<'a>,
        fn((&'a String, &'a Value)) -> (&'a str, &'a Value),
    >;

    fn view(self) -> View<'a, Self> {
        match self {
            Value::Null => View::Null,
            Value::Bool(b) => View::Bool(*b),
            Value::Number(n) => View::Num(Num::of(n)),
            Value::String(s) => View::Str(s),
            Value::Array(a) => View::Array(a.len(), a.iter()),
            Value::Object(m) => View::Object(m.len(), m.iter().map(member as fn(_) -> _)),
        }
    }

    fn get(self, key: &str) -> Option<Self> {
        self.as_object()?.get(key)
    }

    fn with_value<R>(self, f: impl FnOnce(&Value) -> R) -> R {
        f(self)
    }
}
