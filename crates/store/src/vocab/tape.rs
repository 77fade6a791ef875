//! A JSON document in two flat buffers, the form the transform decodes into and the store
//! encodes from (through [`Tree`], `vocab::tree`).
//!
//! Why: decoding a watch event into `serde_json::Value` allocated a map node or a string for
//! every kept field, and dropping it freed them again, only for the store to turn the tree into
//! its own encoding at once: building and dropping those values was about a fifth of
//! informerd's ingest pass (`perf record -e cpu-clock` over `cargo bench --bench ingest`). A tape is one vector of fixed-size nodes and one string
//! holding every key and string value, each grown to the size of an object and reused in
//! place, so decoding allocates a few times per object instead of a few hundred.
//!
//! A tape keeps the semantics of `serde_json::Value` (without `preserve_order`): an object's
//! members are in key order (byte order), a repeated key keeps its last value, numbers are
//! unsigned, negative or floating-point as serde_json classifies them. [`Tape::to_value`] and
//! [`Tape::from_value`] convert exactly, so the store encodes a tape and the equal `Value` to
//! the same bytes.

use serde_json::{Number, Value};

use super::tree::{Num, Tree};

mod pool;
mod view;
pub use view::{Elements, Members, TapeRef};

/// One node of a tape. Containers count the nodes of their subtree, not positions, so a
/// subtree can be moved (an object's members sorted) without rewriting it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    U64(u64),
    /// Negative integers only (serde_json's classification).
    I64(i64),
    F64(f64),
    /// A string in the tape's text: byte offset and length.
    Str {
        at: u32,
        len: u32,
    },
    /// `len` elements; `size` nodes follow this one in its subtree.
    Arr {
        len: u32,
        size: u32,
    },
    /// Members, each a key (`Str`) and its value's subtree, in the order they were decoded;
    /// `size` nodes follow this one in its subtree. `len` members are read: those in key order
    /// without repeated keys, or, when `order` is not [`IN_PLACE`], the `len` members whose
    /// key nodes' positions are at `order` in [`Tape::order`] (sorted, the last of repeated
    /// keys only).
    Obj {
        len: u32,
        size: u32,
        order: u32,
    },
}

/// Members of the open objects that [`Tape::reserve`] makes room for in [`Tape::keys`]
/// (more grow it): a pod's largest kept object has about twenty.
const KEYS_RESERVED: usize = 32;

/// `Node::Obj::order` of an object whose members are in key order as decoded.
const IN_PLACE: u32 = u32::MAX;

impl Node {
    /// Nodes in the subtree this node starts, itself included.
    fn extent(self) -> usize {
        match self {
            Node::Arr { size, .. } | Node::Obj { size, .. } => 1 + size as usize,
            _ => 1,
        }
    }
}

/// A JSON document: see the module's documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct Tape {
    nodes: Vec<Node>,
    text: String,
    /// For objects whose members were not decoded in key order: the positions of their
    /// members' key nodes in key order.
    ///
    /// Decision: members are left where they were decoded and read through this table, not
    /// moved. The apiserver writes a struct's fields in Go's declaration order, so nearly
    /// every object of a pod arrives unsorted; moving each object's subtree into order copied
    /// the tape again for every level of nesting, and was slower than the `Value` it replaced.
    order: Vec<u32>,
    /// The key prefixes and key nodes of the members of the objects open now, innermost
    /// last: each object's members are there when it closes, in decoded order.
    ///
    /// Decision: a key's prefix is taken as the key is pushed ([`Tape::push_key`]), from
    /// the string in hand, and an object's members are found here when it closes rather than
    /// by walking its nodes: the walk and the prefixes' loads were two thirds of closing an
    /// object, a tenth of decoding a pod (callgrind, `examples/ingest_profile.rs`).
    keys: Vec<(u64, u32)>,
    /// Containers open now.
    open: u32,
    /// The most containers any node is nested in (the root: 0), for [`Tree::too_deep`].
    max_depth: u32,
    /// Whether `max_depth` is that of the document as read: not when a repeated key hid a
    /// member (its nodes stay, unread, and may be the deepest), then a walk decides.
    depth_exact: bool,
}

/// Where a tape ended at some point ([`Tape::mark`]), to cut it back there.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    nodes: usize,
    text: usize,
    keys: usize,
    order: usize,
    max_depth: u32,
    depth_exact: bool,
}

/// A container opened on a tape and not yet closed.
#[derive(Debug)]
#[must_use = "a container must be closed"]
pub struct Open {
    /// The container's node.
    at: usize,
    /// Where its members start in [`Tape::keys`] (an object's).
    keys: usize,
}

impl Default for Tape {
    fn default() -> Tape {
        Tape {
            nodes: Vec::new(),
            text: String::new(),
            order: Vec::new(),
            keys: Vec::new(),
            open: 0,
            max_depth: 0,
            depth_exact: true,
        }
    }
}

impl Tape {
    /// An empty tape (no document yet).
    pub fn new() -> Tape {
        Tape::default()
    }

    /// Nodes and bytes of text the tape holds, to [`Tape::reserve`] as much for the next.
    pub fn sizes(&self) -> (usize, usize) {
        (self.nodes.len(), self.text.len())
    }

    /// Bytes the tape's vectors hold room for (nodes, text, key order and keys).
    pub fn capacity_bytes(&self) -> usize {
        self.nodes.capacity() * size_of::<Node>()
            + self.text.capacity()
            + self.order.capacity() * size_of::<u32>()
            + self.keys.capacity() * size_of::<(u64, u32)>()
    }

    /// Makes room for `nodes` more nodes and `text` more bytes of text, and for the key order
    /// of the objects they may hold (a member takes two nodes at least).
    pub fn reserve(&mut self, nodes: usize, text: usize) {
        self.nodes.reserve(nodes);
        self.text.reserve(text);
        self.order.reserve(nodes / 2);
        self.keys.reserve(KEYS_RESERVED);
    }

    /// Empties the tape, keeping its allocations.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.text.clear();
        self.order.clear();
        self.keys.clear();
        self.open = 0;
        self.max_depth = 0;
        self.depth_exact = true;
    }

    /// The current end, to [`Tape::truncate`] back to.
    pub fn mark(&self) -> Mark {
        Mark {
            nodes: self.nodes.len(),
            text: self.text.len(),
            keys: self.keys.len(),
            order: self.order.len(),
            max_depth: self.max_depth,
            depth_exact: self.depth_exact,
        }
    }

    /// Removes everything pushed since `mark` (a value and its subtree, or a member, whose
    /// objects, if any, are closed).
    pub fn truncate(&mut self, mark: Mark) {
        self.nodes.truncate(mark.nodes);
        self.text.truncate(mark.text);
        self.keys.truncate(mark.keys);
        self.order.truncate(mark.order);
        self.max_depth = mark.max_depth;
        self.depth_exact = mark.depth_exact;
    }

    fn push(&mut self, node: Node) {
        self.max_depth = self.max_depth.max(self.open);
        self.nodes.push(node);
    }

    /// A null.
    pub fn push_null(&mut self) {
        self.push(Node::Null);
    }

    /// A boolean.
    pub fn push_bool(&mut self, v: bool) {
        self.push(Node::Bool(v));
    }

    /// A non-negative integer.
    pub fn push_u64(&mut self, v: u64) {
        self.push(Node::U64(v));
    }

    /// An integer: non-negative ones are stored as serde_json stores them, unsigned.
    pub fn push_i64(&mut self, v: i64) {
        self.push(match u64::try_from(v) {
            Ok(u) => Node::U64(u),
            Err(_) => Node::I64(v),
        });
    }

    /// A float; one JSON cannot hold (NaN, infinite) becomes null, as in `serde_json::Value`.
    pub fn push_f64(&mut self, v: f64) {
        self.push(match Number::from_f64(v) {
            Some(_) => Node::F64(v),
            None => Node::Null,
        });
    }

    /// An object's key, pushed before the member's value.
    pub fn push_key(&mut self, key: &str) {
        let at = offset(self.nodes.len());
        self.keys.push((prefix_of(key.as_bytes()), at));
        self.push_str(key);
    }

    /// A string (not a key: see [`Tape::push_key`]).
    pub fn push_str(&mut self, s: &str) {
        let at = self.text.len();
        self.text.push_str(s);
        // Checked whole, so that `str_at` cannot overflow adding the two.
        offset(at + s.len());
        self.push(Node::Str {
            at: offset(at),
            len: offset(s.len()),
        });
    }

    /// Opens an array; its elements follow, then [`Tape::close_array`].
    pub fn open_array(&mut self) -> Open {
        self.push(Node::Arr { len: 0, size: 0 });
        self.open += 1;
        Open {
            at: self.nodes.len() - 1,
            keys: self.keys.len(),
        }
    }

    /// Closes the array `open`, whose `len` elements follow it.
    pub fn close_array(&mut self, open: Open, len: usize) {
        let size = offset(self.nodes.len() - open.at - 1);
        self.open -= 1;
        self.nodes[open.at] = Node::Arr {
            len: offset(len),
            size,
        };
    }

    /// Opens an object; its members follow (each a key, [`Tape::push_key`], then its value),
    /// then [`Tape::close_object`].
    pub fn open_object(&mut self) -> Open {
        self.push(Node::Obj {
            len: 0,
            size: 0,
            order: IN_PLACE,
        });
        self.open += 1;
        Open {
            at: self.nodes.len() - 1,
            keys: self.keys.len(),
        }
    }

    /// Closes the object `open`, whose members follow it: they are read in key order, and of
    /// repeated keys the last only (as `serde_json::Map` inserts them).
    pub fn close_object(&mut self, open: Open) {
        let size = offset(self.nodes.len() - open.at - 1);
        self.open -= 1;
        let mut keys = std::mem::take(&mut self.keys);
        let members = &mut keys[open.keys..];
        debug_assert_eq!(
            members.len(),
            self.walk_keys(open.at).count(),
            "every key of the object was pushed with push_key"
        );
        let sorted = members
            .windows(2)
            .all(|pair| self.key_order(pair[0], pair[1]).is_lt());
        let (len, order) = if sorted {
            (members.len(), IN_PLACE)
        } else {
            // Stable: of equal keys, the last decoded stays last, and is the one kept.
            members.sort_by(|&a, &b| self.key_order(a, b));
            let first = self.order.len();
            let mut previous = None;
            for &(prefix, at) in &*members {
                // Equal keys are adjacent once sorted; their prefixes are compared first.
                let repeated = previous.is_some_and(|(p, last)| {
                    p == prefix && self.str_at(last as usize) == self.str_at(at as usize)
                });
                previous = Some((prefix, at));
                if repeated {
                    // The hidden member's nodes stay, unread: its depth counts only when its
                    // value is a container (a scalar is as deep as the member that hides it).
                    // `set_root_strings` hides a watch event's own kind and apiVersion.
                    let hidden = self.order.pop().expect("a member to hide") as usize;
                    if matches!(self.nodes[hidden + 1], Node::Arr { .. } | Node::Obj { .. }) {
                        self.depth_exact = false;
                    }
                }
                self.order.push(at);
            }
            (self.order.len() - first, offset(first))
        };
        keys.truncate(open.keys);
        self.keys = keys;
        self.nodes[open.at] = Node::Obj {
            len: offset(len),
            size,
            order,
        };
    }

    /// The key nodes of the members of the object at `at`, the last one pushed, walked
    /// (hidden members included).
    fn walk_keys(&self, at: usize) -> impl Iterator<Item = usize> + '_ {
        let within = |key: usize| (key < self.nodes.len()).then_some(key);
        std::iter::successors(within(at + 1), move |&key| {
            within(key + 1 + self.nodes[key + 1].extent())
        })
    }

    /// The order of two keys (prefix, node), in byte order of the keys.
    ///
    /// Decision: sorted by their first eight bytes first, the whole keys compared only when
    /// those are equal: a pod has a dozen unsorted objects (Go writes a struct's fields in
    /// declaration order), and comparing their keys as strings was a tenth of decoding one.
    #[inline]
    fn key_order(&self, a: (u64, u32), b: (u64, u32)) -> std::cmp::Ordering {
        a.0.cmp(&b.0)
            .then_with(|| self.str_at(a.1 as usize).cmp(self.str_at(b.1 as usize)))
    }

    /// Sets string members of the root object (replacing members of the same keys), as
    /// `serde_json::Map::insert` would. Nothing happens when the root is not an object.
    pub fn set_root_strings(&mut self, members: &[(&str, &str)]) {
        let Some(&Node::Obj { order, .. }) = self.nodes.first() else {
            return;
        };
        // Decision: members that already hold these strings (a watch event's apiVersion and
        // kind, nearly always) are left as they are: hiding them behind equal ones cost a
        // walk and a sort of the root's members for every event.
        if members.iter().all(|(k, v)| {
            self.root()
                .and_then(|root| root.get(k))
                .and_then(TapeRef::as_str)
                == Some(v)
        }) {
            return;
        }
        if order != IN_PLACE {
            // The root's order is the last one pushed (objects close innermost first).
            self.order.truncate(order as usize);
        }
        // Reopened: its members, hidden ones too, are found again by walking its nodes.
        self.open += 1;
        let root = Open { at: 0, keys: 0 };
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        keys.extend(
            self.walk_keys(0)
                .map(|at| (prefix_of(self.str_at(at).as_bytes()), offset(at))),
        );
        self.keys = keys;
        for (key, value) in members {
            self.push_key(key);
            self.push_str(value);
        }
        self.close_object(root);
    }

    fn str_at(&self, at: usize) -> &str {
        match self.nodes[at] {
            Node::Str { at, len } => &self.text[at as usize..(at + len) as usize],
            _ => "",
        }
    }

    /// The document's root; `None` for an empty tape.
    pub fn root(&self) -> Option<TapeRef<'_>> {
        (!self.nodes.is_empty()).then_some(TapeRef { tape: self, at: 0 })
    }

    /// The document as a `serde_json::Value` (null for an empty tape).
    pub fn to_value(&self) -> Value {
        self.root().map_or(Value::Null, TapeRef::to_value)
    }

    /// `value` as a tape.
    pub fn from_value(value: &Value) -> Tape {
        let mut tape = Tape::new();
        tape.push_value(value);
        tape
    }

    fn push_value(&mut self, value: &Value) {
        match value {
            Value::Null => self.push_null(),
            Value::Bool(b) => self.push_bool(*b),
            Value::Number(n) => self.push(match Num::of(n) {
                Num::U64(u) => Node::U64(u),
                Num::I64(i) => Node::I64(i),
                Num::F64(f) => Node::F64(f),
            }),
            Value::String(s) => self.push_str(s),
            Value::Array(a) => {
                let open = self.open_array();
                for v in a {
                    self.push_value(v);
                }
                self.close_array(open, a.len());
            }
            Value::Object(m) => {
                let open = self.open_object();
                for (k, v) in m {
                    self.push_key(k);
                    self.push_value(v);
                }
                self.close_object(open);
            }
        }
    }
}

/// The first eight bytes of `key`, big-endian and zero-padded: keys whose prefixes differ are
/// in the order of their prefixes. Read in at most three loads, without a copy.
#[inline]
fn prefix_of(key: &[u8]) -> u64 {
    let len = key.len();
    let be32 = |at: usize| u64::from(u32::from_be_bytes(key[at..at + 4].try_into().expect("4")));
    match len {
        8.. => u64::from_be_bytes(key[..8].try_into().expect("eight bytes")),
        // The two loads overlap where len < 8, on the same bytes.
        4..=7 => be32(0) << 32 | be32(len - 4) << (8 * (8 - len)),
        1..=3 => {
            let byte = |at: usize| u64::from(key[at]) << (56 - 8 * at);
            byte(0) | byte(len / 2) | byte(len - 1)
        }
        0 => 0,
    }
}

/// Tapes are limited to 4 GiB of text and 4 G nodes, far above any object the store accepts.
fn offset(n: usize) -> u32 {
    u32::try_from(n).expect("a tape holds less than 4 GiB")
}

#[cfg(test)]
mod tests;
