//! Reads the YAML of the configuration into JSON values, remembering where every field is.
//!
//! One span-aware parse (granit-parser's event stream) gives both the data, which serde then
//! deserializes with the path of any error, and a map from field paths (`resources[0].filter`)
//! to line and column, so that errors found after deserializing still point into the file.
//!
//! Scalars follow the YAML 1.2 core schema, as serde_yaml does: plain `null`, `~` and empty
//! values are null; `true`/`false` booleans; decimal, `0x` and `0o` integers; decimal floats,
//! `.inf` and `.nan`; anything quoted, and every other plain scalar, a string. Anchors and
//! aliases work; merge keys (`<<`) are not supported, and duplicate keys are an error.
//! `${VAR}` in a value is replaced by the environment variable's value (`env` has the rules).
//!
//! Decision: aliases copy their anchor's value, so a few lines of anchors of aliases (a "billion
//! laughs" document) would expand to gigabytes; the nodes that aliases copy are counted and
//! more than [`MAX_ALIASED_NODES`] in a file is an error (no configuration needs a fraction of
//! that; serde_yaml refuses such documents likewise).

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

use super::env::{Expander, Lookup};

/// The most nodes (scalars, maps, lists) that the aliases of one file may copy in all.
pub const MAX_ALIASED_NODES: usize = 100_000;

/// A position in the file: line and column, both counting from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    /// The line, from 1.
    pub line: usize,
    /// The column in characters, from 1.
    pub column: usize,
}

impl Pos {
    fn of(span: &Span) -> Pos {
        Pos {
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

/// Where a field is: its key (if it is a map entry) and its value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// Where the key is written (the value's position for a list element).
    pub key: Pos,
    /// Where the value starts.
    pub value: Pos,
}

/// Field path → position, for every node of the document. Paths are written as serde_path_to_error
/// writes them: `resources[0].namespaceSelector.matchLabels.team`; the root is `""`.
#[derive(Clone, Debug, Default)]
pub struct Positions(HashMap<String, Place>);

impl Positions {
    /// The position of `path`, or of its closest ancestor that has one.
    pub fn find(&self, path: &str) -> Option<Place> {
        let mut path = path;
        loop {
            if let Some(place) = self.0.get(path) {
                return Some(*place);
            }
            if path.is_empty() {
                return None;
            }
            path = match path.rfind(['.', '[']) {
                Some(at) => &path[..at],
                None => "",
            };
        }
    }
}

/// A YAML error: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    pub pos: Pos,
    pub path: String,
    pub message: String,
}

impl YamlError {
    /// An error of the document at `pos`, not of a field.
    fn at(pos: Pos, message: String) -> YamlError {
        YamlError {
            pos,
            path: String::new(),
            message,
        }
    }
}

enum Frame {
    Map {
        path: String,
        anchor: usize,
        map: Map<String, Value>,
        /// The key whose value comes next; `None` when a key comes next.
        key: Option<String>,
    },
    Seq {
        path: String,
        anchor: usize,
        items: Vec<Value>,
    },
}

#[derive(Default)]
struct Builder<'a> {
    /// How many documents have started.
    documents: usize,
    stack: Vec<Frame>,
    root: Option<Value>,
    /// Each anchor's value and its number of nodes.
    anchors: HashMap<usize, (Value, usize)>,
    /// The nodes copied by aliases so far.
    aliased: usize,
    positions: HashMap<String, Place>,
    /// Replaces `${VAR}` in scalar values.
    env: Expander<'a>,
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Builder<'_> {
    /// Whether the next node is a key of the innermost map.
    fn expecting_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    /// The path of the value that starts now, and records its position.
    fn start_value(&mut self, span: &Span) -> String {
        let pos = Pos::of(span);
        let path = match self.stack.last() {
            None => String::new(),
            Some(Frame::Map { path, key, .. }) => join(path, key.as_deref().unwrap_or_default()),
            Some(Frame::Seq { path, items, .. }) => format!("{path}[{}]", items.len()),
        };
        self.positions
            .entry(path.clone())
            .and_modify(|p| p.value = pos)
            .or_insert(Place {
                key: pos,
                value: pos,
            });
        path
    }

    /// Adds a key of the innermost map.
    fn key(&mut self, text: &str, span: &Span) -> Result<(), YamlError> {
        let pos = Pos::of(span);
        let Some(Frame::Map { path, map, key, .. }) = self.stack.last_mut() else {
            unreachable!("a key is only expected in a map");
        };
        let full = join(path, text);
        if map.contains_key(text) {
            return Err(YamlError {
                pos,
                path: full,
                message: format!("duplicate key '{text}'"),
            });
        }
        *key = Some(text.to_string());
        self.positions.insert(
            full,
            Place {
                key: pos,
                value: pos,
            },
        );
        Ok(())
    }

    /// Adds a complete value to the innermost container (or makes it the root).
    fn finish_value(&mut self, value: Value, anchor: usize) {
        if anchor != 0 {
            self.anchors.insert(anchor, (value.clone(), nodes(&value)));
        }
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Map { map, key, .. }) => {
                if let Some(k) = key.take() {
                    map.insert(k, value);
                }
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
        }
    }
}

impl Builder<'_> {
    /// Takes in one event of the parser.
    fn event(&mut self, event: Event<'_>, span: &Span) -> Result<(), YamlError> {
        match event {
            Event::DocumentStart(..) => self.document_start(span),
            Event::Scalar(value, style, anchor, tag) => {
                if self.expecting_key() {
                    return self.key(&value, span);
                }
                let tag = tag.as_ref().and_then(|t| t.core_suffix());
                let path = self.start_value(span);
                let value = self.env.expand(&path, value, span);
                let value = match (tag, style) {
                    (Some("str"), _) => Value::String(value.into_owned()),
                    (_, ScalarStyle::Plain) | (Some(_), _) => resolve_plain(&value),
                    _ => Value::String(value.into_owned()),
                };
                self.finish_value(value, anchor);
                Ok(())
            }
            Event::Alias(id) => {
                self.refuse_key(span, "aliases as keys")?;
                let (value, count) = self.anchors.get(&id).cloned().unwrap_or_default();
                self.aliased += count;
                if self.aliased > MAX_ALIASED_NODES {
                    return Err(YamlError::at(
                        Pos::of(span),
                        format!(
                            "the aliases of this file copy more than {MAX_ALIASED_NODES} values; \
                             write the values out instead of aliasing aliases"
                        ),
                    ));
                }
                self.start_value(span);
                self.finish_value(value, 0);
                Ok(())
            }
            Event::MappingStart(_, anchor, _) => {
                self.open(span, "maps as keys", |path| Frame::Map {
                    path,
                    anchor,
                    map: Map::new(),
                    key: None,
                })
            }
            Event::SequenceStart(_, anchor, _) => {
                self.open(span, "lists as keys", |path| Frame::Seq {
                    path,
                    anchor,
                    items: Vec::new(),
                })
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.close();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// One document per file.
    fn document_start(&mut self, span: &Span) -> Result<(), YamlError> {
        self.documents += 1;
        if self.documents > 1 {
            return Err(YamlError::at(
                Pos::of(span),
                "the file holds more than one YAML document; put everything in one".to_string(),
            ));
        }
        Ok(())
    }

    /// Only scalars are keys: a map, list or alias where a key is expected is `what`, refused.
    fn refuse_key(&self, span: &Span, what: &str) -> Result<(), YamlError> {
        if self.expecting_key() {
            return Err(YamlError::at(
                Pos::of(span),
                format!("{what} are not supported"),
            ));
        }
        Ok(())
    }

    /// Starts a map or a list, `frame` given its path; `what` names it as a refused key.
    fn open(
        &mut self,
        span: &Span,
        what: &str,
        frame: impl FnOnce(String) -> Frame,
    ) -> Result<(), YamlError> {
        self.refuse_key(span, what)?;
        let path = self.start_value(span);
        self.stack.push(frame(path));
        Ok(())
    }

    /// Ends the innermost map or list, which becomes a value of its parent.
    fn close(&mut self) {
        let (value, anchor) = match self.stack.pop() {
            Some(Frame::Map { map, anchor, .. }) => (Value::Object(map), anchor),
            Some(Frame::Seq { items, anchor, .. }) => (Value::Array(items), anchor),
            None => return,
        };
        self.finish_value(value, anchor);
    }
}

/// The number of nodes of `value` (itself included), counted without recursion.
fn nodes(value: &Value) -> usize {
    let mut count = 0;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        count += 1;
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => pending.extend(map.values()),
            _ => {}
        }
    }
    count
}

/// Resolves a plain scalar with the YAML 1.2 core schema.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let unsigned = text.trim_start_matches(['+', '-']);
    let sign_len = text.len() - unsigned.len();
    if sign_len <= 1 {
        if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(i) = text.parse::<i64>() {
                return Value::Number(i.into());
            }
            if let Ok(u) = text.trim_start_matches('+').parse::<u64>() {
                return Value::Number(u.into());
            }
        }
        if sign_len == 0 {
            let radix = |prefix: &str, radix: u32| {
                text.strip_prefix(prefix)
                    .filter(|digits| !digits.is_empty())
                    .and_then(|digits| u64::from_str_radix(digits, radix).ok())
            };
            if let Some(n) = radix("0x", 16).or_else(|| radix("0o", 8)) {
                return Value::Number(n.into());
            }
        }
        if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
            // JSON has no infinity: keep the text, which no numeric field accepts.
            return Value::String(text.to_string());
        }
        let is_float = {
            let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
                Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
                None => (unsigned, None),
            };
            let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
            let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
            (!int.is_empty() || !frac.is_empty())
                && digits(int)
                && digits(frac)
                && (mantissa.contains('.') || exponent.is_some())
                && exponent.is_none_or(|e| {
                    let e = e.strip_prefix(['+', '-']).unwrap_or(e);
                    !e.is_empty() && digits(e)
                })
        };
        if is_float {
            if let Some(n) = text.parse::<f64>().ok().and_then(Number::from_f64) {
                return Value::Number(n);
            }
        }
    }
    Value::String(text.to_string())
}

/// Parses `text` into a JSON value and the positions of its nodes, `${VAR}`s read from `env`.
/// A YAML error stops at the first; the environment's are all reported.
pub fn parse(text: &str, env: Lookup<'_>) -> Result<(Value, Positions), Vec<YamlError>> {
    let mut builder = Builder {
        env: Expander::new(text, env),
        ..Builder::default()
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            let pos = Pos {
                line: e.marker().line(),
                column: e.marker().col() + 1,
            };
            vec![YamlError::at(pos, format!("invalid YAML: {}", e.info()))]
        })?;
        builder.event(event, &span).map_err(|e| vec![e])?;
    }
    builder.env.finish()?;
    let root = builder.root.unwrap_or(Value::Null);
    Ok((root, Positions(builder.positions)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Parses without an environment: the first error.
    fn parse(text: &str) -> Result<(Value, Positions), YamlError> {
        super::parse(text, &|_| None).map_err(|mut errors| errors.remove(0))
    }

    #[test]
    fn values_and_positions() {
        let text = "\
a: 1
b:
  c: [x, 'y', \"2\"]
  d:
  - e: true
    f: ~
  - 0x10
g: &anchor {h: 1.5}
i: *anchor
j: 64Mi
";
        let (value, positions) = parse(text).unwrap();
        assert_eq!(
            value,
            json!({
                "a": 1,
                "b": {"c": ["x", "y", "2"], "d": [{"e": true, "f": null}, 16]},
                "g": {"h": 1.5},
                "i": {"h": 1.5},
                "j": "64Mi"
            })
        );
        let at = |path: &str| {
            let p = positions.find(path).unwrap();
            (p.key.line, p.key.column, p.value.line, p.value.column)
        };
        assert_eq!(at("a"), (1, 1, 1, 4));
        assert_eq!(at("b.c"), (3, 3, 3, 6));
        assert_eq!(at("b.c[1]"), (3, 10, 3, 10));
        assert_eq!(at("b.d[0].f"), (6, 5, 6, 8));
        assert_eq!(at("b.d[1]"), (7, 5, 7, 5));
        assert_eq!(at("g.h"), (8, 13, 8, 16));
        // Unknown paths fall back to their closest ancestor.
        assert_eq!(at("b.d[0].zz"), (5, 5, 5, 5));
        assert_eq!(at("i.h"), (9, 1, 9, 4));
        assert_eq!(at("nope"), (1, 1, 1, 1));
    }

    #[test]
    fn scalars_follow_the_core_schema() {
        let cases = [
            ("null", json!(null)),
            ("", json!(null)),
            ("True", json!(true)),
            ("yes", json!("yes")),
            ("-12", json!(-12)),
            ("+12", json!(12)),
            ("18446744073709551615", json!(18446744073709551615u64)),
            ("0o17", json!(15)),
            ("1.5", json!(1.5)),
            ("1e3", json!(1000.0)),
            ("-.5", json!(-0.5)),
            (".", json!(".")),
            ("1.2.3", json!("1.2.3")),
            ("64Mi", json!("64Mi")),
            ("127.0.0.1:7070", json!("127.0.0.1:7070")),
            ("v1", json!("v1")),
            ("--1", json!("--1")),
        ];
        for (text, expected) in cases {
            assert_eq!(resolve_plain(text), expected, "{text:?}");
        }
        let (value, _) = parse("a: !!str 12\nb: '12'\nc: |\n  x\n").unwrap();
        assert_eq!(value, json!({"a": "12", "b": "12", "c": "x\n"}));
    }

    #[test]
    fn aliases_of_aliases_are_bounded() {
        // Found by fuzzing: ten levels of ten aliases each expanded to 10^10 values (the memory
        // of the machine) before this limit.
        let mut text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n".to_string();
        for level in 1..10 {
            let aliases = vec![format!("*a{}", level - 1); 10].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{aliases}]\n"));
        }
        let err = parse(&text).unwrap_err();
        assert_eq!(err.pos.line, 5, "{err:?}");
        assert!(err.message.contains("more than 100000 values"), "{err:?}");
        // Aliases within the limit still work.
        let (value, _) = parse("a: &a [1, 2]\nb: [*a, *a]\n").unwrap();
        assert_eq!(value["b"], json!([[1, 2], [1, 2]]));
    }

    #[test]
    fn errors_have_positions() {
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(
            (err.pos.line, err.pos.column, err.path.as_str()),
            (2, 1, "a")
        );
        assert_eq!(err.message, "duplicate key 'a'");
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.message.starts_with("invalid YAML: "), "{}", err.message);
        let err = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert_eq!((err.pos.line, err.pos.column), (2, 1));
        assert!(err.message.contains("more than one YAML document"));
    }
}
