//! Values from the environment: `${NODE_NAME}` in any string value of the configuration is
//! replaced by that environment variable's value, so that one ConfigMap serves every node of a
//! DaemonSet (`fieldSelector: spec.nodeName=${NODE_NAME}`, NODE_NAME from the downward API).
//!
//! The rules, for every scalar value of the file (keys are left as written):
//! - `${NAME}` is replaced; NAME is a C identifier (letters, digits, `_`; not a digit first), as
//!   a shell or Kubernetes' `env` allows.
//! - `$${` is a literal `${` (`$${NAME}` gives `${NAME}`), as `$$(` is in Kubernetes' own
//!   `$(VAR)` expansion. Any other `$` is left as it is, so CEL, regular expressions and labels
//!   that contain `$` need no escaping.
//! - A `${` that does not start `${NAME}` (no name, a bad name, no `}`) is an error: what was
//!   meant cannot be guessed, and a typo must not end up in a selector.
//! - An unset variable is an error `FILE:LINE:COLUMN: field.path: environment variable NAME is
//!   not set`, at the column of its `${`.
//!
//! Decision: a variable set to the empty string is an error as well. An empty value never helps
//!   and silently changes what a selector means: `spec.nodeName=${NODE_NAME}` with an empty
//!   NODE_NAME selects the pods of no node (the unscheduled ones) instead of failing.
//! Decision: the value replaces text inside one scalar, after YAML has parsed it, so a value can
//!   never add fields or structure. An unquoted scalar is typed after the replacement, as the
//!   `envsubst`-style expansion of Prometheus, Loki or Grafana Agent configurations would type it
//!   (`maxEvents: ${MAX_EVENTS}` is a number); a quoted one stays a string.

use std::borrow::Cow;
use std::ffi::OsString;

use granit_parser::Span;
use thiserror::Error;

use super::yaml::{Pos, YamlError};

/// Where variables' values come from: [`process`] in the program, a table in tests.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The process's environment.
pub fn process(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// What is wrong with one `${...}` reference.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum EnvError {
    /// The variable is not set.
    #[error("environment variable {0} is not set")]
    Unset(String),
    /// The variable is set to "".
    #[error("environment variable {0} is empty; set it to a value (an empty value would change what this field means)")]
    Empty(String),
    /// The value is not UTF-8.
    #[error("environment variable {0} is not valid UTF-8")]
    NotUnicode(String),
    /// `${` without a name and `}`.
    #[error("'${{' starts an environment variable reference, written ${{NAME}} (letters, digits and _); write $${{ for a literal '${{'")]
    Malformed,
}

/// A problem and the byte offset of its `${` in the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// Where its `${` starts, in bytes.
    pub offset: usize,
    /// What is wrong.
    pub error: EnvError,
}

/// A `$${` or a `${` in a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item<'t> {
    /// `$${`, a literal `${`.
    Escape,
    /// `${NAME}`, or `None` for a `${` that is not followed by a name and `}`.
    Reference(Option<&'t str>),
}

impl Item<'_> {
    /// The bytes it takes in the text.
    fn len(self) -> usize {
        match self {
            Item::Escape => 3,
            Item::Reference(None) => 2,
            Item::Reference(Some(name)) => name.len() + 3,
        }
    }
}

/// The escapes and references of `text`, with their offsets, left to right.
fn items(text: &str) -> Vec<(usize, Item<'_>)> {
    let mut items = Vec::new();
    let mut rest = 0;
    while let Some(found) = text[rest..].find('$') {
        let at = rest + found;
        let after = &text[at + 1..];
        let item = if after.starts_with("${") {
            Item::Escape
        } else if let Some(reference) = after.strip_prefix('{') {
            let name = reference.split_once('}').map(|(name, _)| name);
            Item::Reference(name.filter(|n| is_name(n)))
        } else {
            rest = at + 1;
            continue;
        };
        items.push((at, item));
        rest = at + item.len();
    }
    items
}

/// `text` with every `${NAME}` replaced and every `$${` made `${`, or every problem found.
pub fn expand<'t>(text: &'t str, lookup: Lookup<'_>) -> Result<Cow<'t, str>, Vec<Located>> {
    let items = items(text);
    if items.is_empty() {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut errors = Vec::new();
    let mut rest = 0;
    for (offset, item) in items {
        out.push_str(&text[rest..offset]);
        rest = offset + item.len();
        let replaced = match item {
            Item::Escape => Ok("${".to_string()),
            Item::Reference(None) => Err(EnvError::Malformed),
            Item::Reference(Some(name)) => value(name, lookup),
        };
        match replaced {
            Ok(text) => out.push_str(&text),
            Err(error) => errors.push(Located { offset, error }),
        }
    }
    out.push_str(&text[rest..]);
    if errors.is_empty() {
        Ok(Cow::Owned(out))
    } else {
        Err(errors)
    }
}

/// Whether `name` is a C identifier.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn value(name: &str, lookup: Lookup<'_>) -> Result<String, EnvError> {
    match lookup(name) {
        None => Err(EnvError::Unset(name.to_string())),
        Some(v) if v.is_empty() => Err(EnvError::Empty(name.to_string())),
        Some(v) => v
            .into_string()
            .map_err(|_| EnvError::NotUnicode(name.to_string())),
    }
}

/// Expands the scalar values of one YAML document, collecting the problems with their places.
#[derive(Default)]
pub struct Expander<'a> {
    /// The document, to find where a reference is written.
    source: &'a str,
    /// `None`: values are left as written.
    lookup: Option<Lookup<'a>>,
    /// The problems found so far.
    errors: Vec<YamlError>,
}

impl<'a> Expander<'a> {
    /// Expands the values of `source` with `lookup`.
    pub fn new(source: &'a str, lookup: Lookup<'a>) -> Expander<'a> {
        Expander {
            source,
            lookup: Some(lookup),
            errors: Vec::new(),
        }
    }

    /// The scalar `value` of the field `path`, written at `span`, expanded; on a problem, it is
    /// recorded and the value is returned as written.
    pub fn expand<'v>(&mut self, path: &str, value: Cow<'v, str>, span: &Span) -> Cow<'v, str> {
        let Some(lookup) = self.lookup else {
            return value;
        };
        let errors = match expand(&value, lookup) {
            Ok(Cow::Borrowed(_)) => return value,
            Ok(Cow::Owned(expanded)) => return Cow::Owned(expanded),
            Err(errors) => errors,
        };
        for Located { offset, error } in errors {
            let pos = self.place(&value, offset, span);
            self.errors.push(YamlError {
                pos,
                path: path.to_string(),
                message: error.to_string(),
            });
        }
        value
    }

    /// The problems found, if any.
    pub fn finish(&mut self) -> Result<(), Vec<YamlError>> {
        match std::mem::take(&mut self.errors) {
            errors if errors.is_empty() => Ok(()),
            errors => Err(errors),
        }
    }

    /// Where the reference at byte `offset` of the scalar's `value` is written in the file:
    /// the n-th time it is read is found as the n-th time it is written in the scalar's source
    /// text. An escape in a quoted scalar can hide it: then where the scalar starts.
    fn place(&self, value: &str, offset: usize, span: &Span) -> Pos {
        let read = items(value);
        let Some(&(_, item)) = read.iter().find(|(at, _)| *at == offset) else {
            return start_of(span);
        };
        let nth = read
            .iter()
            .filter(|(at, i)| *at < offset && *i == item)
            .count();
        let written = span
            .start
            .byte_offset()
            .zip(span.end.byte_offset())
            .and_then(|(from, to)| self.source.get(from..to.max(from)));
        let Some(written) = written else {
            return start_of(span);
        };
        let found = items(written)
            .into_iter()
            .filter(|(_, i)| *i == item)
            .nth(nth);
        match found {
            Some((at, _)) => position(span, written, at),
            None => start_of(span),
        }
    }
}

/// Where `span` starts.
fn start_of(span: &Span) -> Pos {
    Pos {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

/// The position of byte `at` of `written`, the source text of `span`.
fn position(span: &Span, written: &str, at: usize) -> Pos {
    let start = start_of(span);
    let before = &written[..at];
    match before.rfind('\n') {
        None => Pos {
            line: start.line,
            column: start.column + before.chars().count(),
        },
        Some(newline) => Pos {
            line: start.line + before.matches('\n').count(),
            column: before[newline + 1..].chars().count() + 1,
        },
    }
}

#[cfg(test)]
mod tests;
