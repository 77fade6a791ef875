//! Reading a tape: a value inside it ([`TapeRef`]), its elements and members, and the
//! [`Tree`] view the store encodes from.

use serde_json::{Map, Number, Value};

use super::{Node, IN_PLACE};
use crate::vocab::tape::Tape;
use crate::vocab::tree::{nested_deeper, Num, Tree, View};

/// A value inside a tape.
#[derive(Clone, Copy, Debug)]
pub struct TapeRef<'a> {
    pub(super) tape: &'a Tape,
    pub(super) at: usize,
}

impl<'a> TapeRef<'a> {
    #[inline]
    fn node(self) -> Node {
        self.tape.nodes[self.at]
    }

    /// This value as a `serde_json::Value`.
    pub fn to_value(self) -> Value {
        match self.view() {
            View::Null => Value::Null,
            View::Bool(b) => Value::Bool(b),
            View::Num(Num::U64(u)) => Value::from(u),
            View::Num(Num::I64(i)) => Value::from(i),
            View::Num(Num::F64(f)) => Number::from_f64(f).map_or(Value::Null, Value::Number),
            View::Str(s) => Value::String(s.to_owned()),
            View::Array(_, elements) => Value::Array(elements.map(TapeRef::to_value).collect()),
            View::Object(_, members) => Value::Object(
                members
                    .map(|(k, v)| (k.to_owned(), v.to_value()))
                    .collect::<Map<_, _>>(),
            ),
        }
    }
}

/// The elements of an array in a tape.
pub struct Elements<'a> {
    tape: &'a Tape,
    at: usize,
    left: u32,
}

impl<'a> Iterator for Elements<'a> {
    type Item = TapeRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<TapeRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let item = TapeRef {
            tape: self.tape,
            at: self.at,
        };
        self.at += item.node().extent();
        Some(item)
    }
}

/// The members of an object in a tape, in key order.
pub struct Members<'a> {
    tape: &'a Tape,
    /// The next member's key node, when read in place.
    at: usize,
    /// The positions of the key nodes, when read through the order table.
    order: &'a [u32],
    left: u32,
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, TapeRef<'a>);

    #[inline]
    fn next(&mut self) -> Option<(&'a str, TapeRef<'a>)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let key = match self.order.split_first() {
            Some((&at, rest)) => {
                self.order = rest;
                at as usize
            }
            None => self.at,
        };
        let value = TapeRef {
            tape: self.tape,
            at: key + 1,
        };
        self.at = key + 1 + value.node().extent();
        Some((self.tape.str_at(key), value))
    }
}

impl<'a> Tree<'a> for TapeRef<'a> {
    type Elements = Elements<'a>;
    type Members = Members<'a>;

    #[inline]
    fn view(self) -> View<'a, Self> {
        match self.node() {
            Node::Null => View::Null,
            Node::Bool(b) => View::Bool(b),
            Node::U64(u) => View::Num(Num::U64(u)),
            Node::I64(i) => View::Num(Num::I64(i)),
            Node::F64(f) => View::Num(Num::F64(f)),
            Node::Str { .. } => View::Str(self.tape.str_at(self.at)),
            Node::Arr { len, .. } => View::Array(
                len as usize,
                Elements {
                    tape: self.tape,
                    at: self.at + 1,
                    left: len,
                },
            ),
            Node::Obj { len, order, .. } => View::Object(
                len as usize,
                Members {
                    tape: self.tape,
                    at: self.at + 1,
                    order: match order {
                        IN_PLACE => &[],
                        at => &self.tape.order[at as usize..at as usize + len as usize],
                    },
                    left: len,
                },
            ),
        }
    }

    fn with_value<R>(self, f: impl FnOnce(&Value) -> R) -> R {
        f(&self.to_value())
    }

    /// For the root, the depth the tape recorded while it was built: no walk.
    fn too_deep(self, max: usize) -> bool {
        if self.at == 0 && self.tape.depth_exact {
            return self.tape.max_depth as usize > max;
        }
        nested_deeper(self, max)
    }
}
