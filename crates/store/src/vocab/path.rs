//! Field paths: `spec.nodeName`, `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`,
//! `spec.containers[*].env`.
//!
//! The grammar, shared by transforms and by index paths:
//!
//! ```text
//! path    = first { "." name | "[" ( "*" | string ) "]" }
//! first   = name | "[" string "]"
//! name    = 1*( ALPHA | DIGIT | "_" | "-" | "$" )
//! string  = '"' { any character but '"' and '\' | '\"' | '\\' } '"'
//! ```
//!
//! `[*]` stands for every element of a list (and every value of a map). Keys with other characters
//! (dots, slashes) are written in brackets with double quotes. List indexes (`[0]`) are not
//! supported: objects are matched by shape, not by position.

use std::fmt;

use thiserror::Error;

/// One step of a [`FieldPath`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A field of an object (a key of a map).
    Field(String),
    /// `[*]`: every element of a list, or every value of a map.
    Any,
}

/// A parsed field path; see the [module documentation](self) for the syntax.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldPath {
    text: String,
    segments: Vec<Segment>,
}

/// A field path that does not follow the syntax; `column` counts characters from 1.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("invalid path '{path}': {message} at column {column}")]
pub struct PathError {
    /// The path as written.
    pub path: String,
    /// Where the problem is, in characters from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl FieldPath {
    /// Parses `text`; the error names the column of the first problem.
    pub fn parse(text: &str) -> Result<FieldPath, PathError> {
        Parser::new(text).parse()
    }

    /// The steps of the path, outermost first.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Builds a path from plain field names (no wildcard), e.g. `["metadata", "name"]`.
    pub fn from_fields<I, S>(fields: I) -> FieldPath
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let segments: Vec<Segment> = fields
            .into_iter()
            .map(|f| Segment::Field(f.into()))
            .collect();
        let mut text = String::new();
        for (i, segment) in segments.iter().enumerate() {
            write_segment(&mut text, segment, i == 0);
        }
        FieldPath { text, segments }
    }
}

/// Appends one segment in the canonical syntax.
fn write_segment(out: &mut String, segment: &Segment, first: bool) {
    match segment {
        Segment::Any => out.push_str("[*]"),
        Segment::Field(name) if is_plain_name(name) => {
            if !first {
                out.push('.');
            }
            out.push_str(name);
        }
        Segment::Field(name) => {
            out.push_str("[\"");
            for c in name.chars() {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push_str("\"]");
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$'
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(is_name_char)
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for FieldPath {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldPath::parse(s)
    }
}

struct Parser<'a> {
    text: &'a str,
    chars: Vec<char>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            text,
            chars: text.chars().collect(),
            pos: 0,
        }
    }

    fn error(&self, column: usize, message: impl Into<String>) -> PathError {
        PathError {
            path: self.text.to_string(),
            column,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn parse(mut self) -> Result<FieldPath, PathError> {
        if self.chars.is_empty() {
            return Err(self.error(1, "the path is empty"));
        }
        let mut segments = Vec::new();
        // The first segment: a name or a bracket.
        match self.peek() {
            Some('[') => segments.push(self.bracket(true)?),
            _ => segments.push(Segment::Field(self.name()?)),
        }
        while let Some(c) = self.peek() {
            match c {
                '.' => {
                    self.pos += 1;
                    segments.push(Segment::Field(self.name()?));
                }
                '[' => segments.push(self.bracket(false)?),
                other => {
                    return Err(self.error(
                        self.pos + 1,
                        format!("unexpected '{other}', expected '.' or '['"),
                    ))
                }
            }
        }
        Ok(FieldPath {
            text: self.text.to_string(),
            segments,
        })
    }

    fn name(&mut self) -> Result<String, PathError> {
        let start = self.pos;
        while self.peek().is_some_and(is_name_char) {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(match self.peek() {
                None => self.error(self.pos + 1, "expected a field name after '.'"),
                Some(c) => self.error(
                    self.pos + 1,
                    format!(
                        "unexpected '{c}', expected a field name (write keys with other characters \
                         in brackets: [\"key\"])"
                    ),
                ),
            });
        }
        let name: String = self.chars[start..self.pos].iter().collect();
        if let Some(c) = self.peek() {
            if c != '.' && c != '[' {
                return Err(self.error(
                    self.pos + 1,
                    format!(
                        "unexpected '{c}' in field name '{name}' (write keys with other characters \
                         in brackets: [\"key\"])"
                    ),
                ));
            }
        }
        Ok(name)
    }

    /// Parses `[*]` or `["key"]`, starting at `[`.
    fn bracket(&mut self, first: bool) -> Result<Segment, PathError> {
        let open = self.pos;
        self.pos += 1;
        let segment = match self.peek() {
            Some('*') if !first => {
                self.pos += 1;
                Segment::Any
            }
            Some('*') => return Err(self.error(self.pos + 1, "a path cannot start with [*]")),
            Some('"') => Segment::Field(self.string()?),
            Some('\'') => {
                return Err(self.error(
                    self.pos + 1,
                    "keys in brackets are written with double quotes: [\"key\"]",
                ))
            }
            Some(c) if c.is_ascii_digit() => {
                return Err(self.error(
                    self.pos + 1,
                    "list indexes are not supported, use [*] for every element",
                ))
            }
            Some(c) => {
                return Err(self.error(
                    self.pos + 1,
                    format!("unexpected '{c}', expected * or a double-quoted key"),
                ))
            }
            None => {
                return Err(self.error(
                    open + 1,
                    "unterminated '[', expected * or a double-quoted key",
                ))
            }
        };
        match self.peek() {
            Some(']') => {
                self.pos += 1;
                Ok(segment)
            }
            Some(c) => Err(self.error(self.pos + 1, format!("unexpected '{c}', expected ']'"))),
            None => Err(self.error(self.pos + 1, "expected ']' at the end of the path")),
        }
    }

    /// Parses a double-quoted string, starting at the quote.
    fn string(&mut self) -> Result<String, PathError> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error(open + 1, "unterminated string")),
                Some('"') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(c @ ('"' | '\\')) => {
                            out.push(c);
                            self.pos += 1;
                        }
                        Some(c) => {
                            return Err(self.error(
                                self.pos,
                                format!("unknown escape '\\{c}', only \\\" and \\\\ are allowed"),
                            ))
                        }
                        None => return Err(self.error(open + 1, "unterminated string")),
                    }
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        if out.is_empty() {
            return Err(self.error(open + 1, "the key is empty"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(path: &FieldPath) -> Vec<String> {
        path.segments()
            .iter()
            .map(|s| match s {
                Segment::Field(f) => f.clone(),
                Segment::Any => "*".to_string(),
            })
            .collect()
    }

    #[test]
    fn parses_dotted_bracketed_and_wildcard_segments() {
        let p = FieldPath::parse(
            r#"metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]"#,
        )
        .unwrap();
        assert_eq!(
            fields(&p),
            [
                "metadata",
                "annotations",
                "kubectl.kubernetes.io/last-applied-configuration"
            ]
        );
        let p = FieldPath::parse("spec.containers[*].env").unwrap();
        assert_eq!(fields(&p), ["spec", "containers", "*", "env"]);
        let p = FieldPath::parse(r#"["a.b"].c["x\"y\\z"]"#).unwrap();
        assert_eq!(fields(&p), ["a.b", "c", "x\"y\\z"]);
        assert_eq!(p.to_string(), r#"["a.b"].c["x\"y\\z"]"#);
    }

    #[test]
    fn errors_name_the_column() {
        let cases = [
            ("", 1, "the path is empty"),
            ("spec..nodeName", 6, "unexpected '.'"),
            ("spec.", 6, "expected a field name"),
            ("metadata.labels.app/name", 20, "unexpected '/'"),
            ("spec.containers[0]", 17, "list indexes are not supported"),
            ("metadata.labels['app']", 17, "double quotes"),
            ("metadata.labels[\"app", 17, "unterminated string"),
            ("metadata.labels[\"app\"", 22, "expected ']'"),
            ("spec.containers[*", 18, "expected ']'"),
            ("[*].a", 2, "cannot start with [*]"),
            ("a[\"\"]", 3, "the key is empty"),
            ("spec containers", 5, "unexpected ' '"),
        ];
        for (path, column, message) in cases {
            let err = FieldPath::parse(path).unwrap_err();
            assert_eq!(err.column, column, "{path}: {err}");
            assert!(err.message.contains(message), "{path}: {err}");
        }
    }

    #[test]
    fn from_fields_writes_canonical_text() {
        let p = FieldPath::from_fields(["metadata", "labels", "app.kubernetes.io/name"]);
        assert_eq!(p.as_str(), r#"metadata.labels["app.kubernetes.io/name"]"#);
        assert_eq!(FieldPath::parse(p.as_str()).unwrap(), p);
    }
}
