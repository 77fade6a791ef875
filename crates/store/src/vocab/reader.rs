//! A JSON reader over a document's text for decoders that keep a little of what they read and
//! skip the rest: the transform's decoding of watch lines and list bodies (`transform::decode`).
//!
//! Why not serde_json: through serde, every key of every object the transform enters is
//! parsed into a `Cow` and handed to a visitor, every skipped value goes through
//! `IgnoredAny`'s visitor machinery, and the watch event's envelope is decoded by a derived
//! enum around the object. With the controller profile that was 14.8 µs of a pod's 9 KB watch
//! line, where reading the whole line through `IgnoredAny` took 8 (`cargo bench --bench
//! ingest`). Here a decoder pulls what it wants: keys are compared as they stand in the text,
//! strings are scanned eight bytes at a time, and a skipped container 32 bytes at a time
//! (`scan`): the whole line in a third of `IgnoredAny`'s time.
//!
//! What is read is checked as strictly as serde_json checks it: a value that a decoder reads
//! (and a document read whole) is refused here exactly when serde_json refuses it, and decodes
//! to what serde_json decodes (the fuzz target `objects` compares the two). An escaped string
//! and a number other than a plain integer are handed to serde_json itself to decode, so that
//! escapes, surrogates and float rounding cannot differ (both are rare in Kubernetes objects).
//! A skipped container is only followed to its end (see `Reader::container_end`). Errors name
//! the line and column, as serde_json's do.
//!
//! Decision: the text is a `&str`, already checked to be UTF-8 by whoever split it from the
//! HTTP body (as kube-rs's line codec does), so the strings handed out are slices of it and
//! need no second check.

use std::borrow::Cow;

use thiserror::Error;

use scan::specials;

/// A document the reader refused: what was wrong, and where (the fields of
/// [`ReadErrorDetails`], read through it).
///
/// Decision: boxed, one pointer. Every step of the reader and of the decoders over it returns
/// a `Result`; with the 40-byte details inline, each was written to memory and read back by
/// the caller, while a pointer, null for `Ok`, comes back in a register. Errors are rare.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ReadError(Box<ReadErrorDetails>);

impl std::ops::Deref for ReadError {
    type Target = ReadErrorDetails;

    fn deref(&self) -> &ReadErrorDetails {
        &self.0
    }
}

/// What [`ReadError`] says.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{what} at line {line} column {column}")]
pub struct ReadErrorDetails {
    /// What was expected or found.
    pub what: Cow<'static, str>,
    /// 1-based line of the offending byte.
    pub line: usize,
    /// 1-based column (in bytes) of the offending byte.
    pub column: usize,
}

/// The most containers a decoder may nest, as serde_json allows (skipping has no limit, as in
/// serde_json). Counted from the value a decoder starts at: an object read from a watch line may
/// nest one level deeper than kube-rs allows, whose count starts at the line's envelope (the
/// store refuses objects past `MAX_DEPTH`, 256, either way).
pub const RECURSION_LIMIT: usize = 128;

/// What the next value is, from its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `{`
    Object,
    /// `[`
    Array,
    /// `"`
    String,
    /// `-` or a digit.
    Number,
    /// `true`, `false` or `null`.
    Literal,
}

/// A scalar, read.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar<'a> {
    /// `null`
    Null,
    /// `true` or `false`
    Bool(bool),
    /// A non-negative integer (serde_json's classification: `PosInt`).
    U64(u64),
    /// A negative integer.
    I64(i64),
    /// Any other number.
    F64(f64),
    /// A string, its escapes decoded.
    Str(Cow<'a, str>),
}

/// A string as it stands in the text.
#[derive(Clone, Copy, Debug)]
pub struct Str<'a> {
    /// The text between its quotes (escapes not decoded).
    ///
    /// Decision: without the quotes, so that a string without escapes (nearly every one) is
    /// handed out as it is, not sliced again with the checks slicing does.
    inner: &'a str,
    /// Where its opening quote is.
    at: usize,
    escaped: bool,
}

impl<'a> Str<'a> {
    /// The text between the quotes, when there is no escape in it (then it is the string).
    pub fn plain(&self) -> Option<&'a str> {
        (!self.escaped).then_some(self.inner)
    }

    /// The string, its escapes decoded.
    ///
    /// Decision: inlined, with the decoding of escapes apart: a string without one (nearly
    /// every key and value) is then the text in hand, with no call and no `Result` written
    /// through memory (2.4% of the ingest pass's instructions under callgrind).
    #[inline]
    pub fn decode(&self, r: &Reader<'a>) -> Result<Cow<'a, str>, ReadError> {
        match self.plain() {
            Some(s) => Ok(Cow::Borrowed(s)),
            None => self.unescaped(r),
        }
    }

    /// [`Str::decode`] of a string with escapes.
    #[cold]
    fn unescaped(&self, r: &Reader<'a>) -> Result<Cow<'a, str>, ReadError> {
        if let Some(s) = unescape(self.inner) {
            return Ok(Cow::Owned(s));
        }
        // Rare (a lone surrogate): serde_json decides, and words the error.
        serde_json::from_str::<String>(&format!("\"{}\"", self.inner))
            .map(Cow::Owned)
            .map_err(|e| r.error_at(self.at, strip_position(e)))
    }
}

/// `inner` (a string's text between its quotes, its escapes already checked by
/// [`Reader::string`]) with its escapes decoded; `None` for an escape that is no character (a
/// lone surrogate), where serde_json then decides, and words its error.
///
/// Decision: our own, not serde_json's, for strings with escapes: a pod that carries
/// kubectl's `last-applied-configuration` has a kilobyte of JSON escaped in it, and serde_json
/// took 33,000 instructions to decode it (callgrind), against a copy between the escapes here.
/// What this returns equals serde_json's decoding (the fuzz target `objects` compares them).
fn unescape(inner: &str) -> Option<String> {
    let b = inner.as_bytes();
    let hex = |at: usize| -> Option<u32> {
        (b.get(at..at + 4)?.iter()).try_fold(0, |n, &d| Some(n << 4 | char::from(d).to_digit(16)?))
    };
    let mut out = String::with_capacity(b.len());
    let mut from = 0;
    while let Some(found) = memchr::memchr(b'\\', &b[from..]) {
        let at = from + found;
        // Backslashes and escapes are ASCII: `from` and `at` are character boundaries.
        out.push_str(&inner[from..at]);
        from = at + 2;
        let c = match *b.get(at + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = hex(at + 2)?;
                from = at + 6;
                match high {
                    0xD800..=0xDBFF => {
                        if b.get(from..from + 2) != Some(b"\\u") {
                            return None;
                        }
                        let low = hex(from + 2)?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return None;
                        }
                        from += 6;
                        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))?
                    }
                    code => char::from_u32(code)?,
                }
            }
            _ => return None,
        };
        out.push(c);
    }
    out.push_str(&inner[from..]);
    Some(out)
}

/// The members of an object being read; see [`Reader::object`].
#[derive(Debug)]
pub struct Members {
    first: bool,
}

/// The elements of an array being read; see [`Reader::array`].
#[derive(Debug)]
pub struct Elements {
    first: bool,
}

/// A cursor over one JSON text.
#[derive(Debug)]
pub struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

/// serde_json's message without its position (ours is added).
fn strip_position(e: serde_json::Error) -> Cow<'static, str> {
    let text = e.to_string();
    match text.find(" at line ") {
        Some(at) => Cow::Owned(text[..at].to_string()),
        None => Cow::Owned(text),
    }
}

impl<'a> Reader<'a> {
    /// A reader at the start of `text`.
    pub fn new(text: &'a str) -> Reader<'a> {
        Reader {
            text,
            bytes: text.as_bytes(),
            at: 0,
        }
    }

    /// Moves the reader to byte `at` of the text (where a value starts).
    pub fn seek(&mut self, at: usize) {
        self.at = at.min(self.bytes.len());
    }

    /// Reads the `}` that ends an object whose start was matched without the reader.
    pub fn end_object(&mut self) -> Result<(), ReadError> {
        self.eat(b'}', "`}`")
    }

    /// Reads a `null` if one is next, and says so.
    pub fn null(&mut self) -> Result<bool, ReadError> {
        if self.peek() == Some(b'n') {
            self.literal()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The next value, decoded by serde_json (a value wanted whole, or as a serde type): read
    /// once, by serde_json, and the reader moved past it. serde_json's error is placed where
    /// the value starts.
    pub fn deserialize<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, ReadError> {
        self.peek();
        let start = self.at;
        let mut values = serde_json::Deserializer::from_str(&self.text[start..]).into_iter::<T>();
        match values.next() {
            Some(Ok(value)) => {
                self.at = start + values.byte_offset();
                Ok(value)
            }
            Some(Err(e)) => Err(self.error_at(start, strip_position(e))),
            None => Err(self.unexpected("a value")),
        }
    }

    /// Where the reader is: the byte offset of what it reads next.
    pub fn position(&self) -> usize {
        self.at
    }

    /// An error at byte `at`.
    pub fn error_at(&self, at: usize, what: impl Into<Cow<'static, str>>) -> ReadError {
        let at = at.min(self.bytes.len());
        let before = &self.bytes[..at];
        let line = 1 + memchr::memchr_iter(b'\n', before).count();
        let column = at
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |nl| nl + 1)
            + 1;
        ReadError(Box::new(ReadErrorDetails {
            what: what.into(),
            line,
            column,
        }))
    }

    /// An error at the reader's position.
    pub fn error(&self, what: impl Into<Cow<'static, str>>) -> ReadError {
        self.error_at(self.at, what)
    }

    /// The next byte after whitespace, not consumed.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.bytes.get(self.at) {
            if !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                return Some(b);
            }
            self.at += 1;
        }
        None
    }

    #[inline]
    fn eat(&mut self, byte: u8, what: &'static str) -> Result<(), ReadError> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    /// "expected …", or the end of the text where a value should be.
    #[cold]
    fn unexpected(&self, what: &'static str) -> ReadError {
        if self.at >= self.bytes.len() {
            self.error(format!("EOF while parsing: expected {what}"))
        } else {
            self.error(format!("expected {what}"))
        }
    }

    /// Checks that only whitespace is left.
    pub fn finish(&mut self) -> Result<(), ReadError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("trailing characters")),
        }
    }

    /// What the next value is; an error if none starts here.
    #[inline]
    pub fn kind(&mut self) -> Result<Kind, ReadError> {
        match self.peek() {
            Some(b'{') => Ok(Kind::Object),
            Some(b'[') => Ok(Kind::Array),
            Some(b'"') => Ok(Kind::String),
            Some(b'-' | b'0'..=b'9') => Ok(Kind::Number),
            Some(b't' | b'f' | b'n') => Ok(Kind::Literal),
            _ => Err(self.unexpected("a value")),
        }
    }

    /// Starts reading an object: its members follow through [`Members::next`].
    #[inline]
    pub fn object(&mut self) -> Result<Members, ReadError> {
        self.eat(b'{', "`{`")?;
        Ok(Members { first: true })
    }

    /// Starts reading an array: its elements follow through [`Elements::next`].
    #[inline]
    pub fn array(&mut self) -> Result<Elements, ReadError> {
        self.eat(b'[', "`[`")?;
        Ok(Elements { first: true })
    }

    /// Reads a string.
    #[inline]
    pub fn string(&mut self) -> Result<Str<'a>, ReadError> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected("a string"));
        }
        let start = self.at;
        let escaped = self.string_end()?;
        Ok(Str {
            inner: &self.text[start + 1..self.at - 1],
            at: start,
            escaped,
        })
    }

    /// Moves past the string whose opening quote is at the reader's position; says whether it
    /// has an escape.
    #[inline]
    fn string_end(&mut self) -> Result<bool, ReadError> {
        let bytes = self.bytes;
        let mut at = self.at + 1;
        let mut escaped = false;
        loop {
            // Eight bytes at a time to the next quote, backslash or control character.
            while let Some(chunk) = bytes.get(at..at + 8) {
                let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
                let m = specials(x);
                if m != 0 {
                    at += (m.trailing_zeros() / 8) as usize;
                    break;
                }
                at += 8;
            }
            match bytes.get(at) {
                Some(b'"') => {
                    self.at = at + 1;
                    return Ok(escaped);
                }
                Some(b'\\') => {
                    escaped = true;
                    at = self.escape_end(at)?;
                }
                Some(&b) if b < 0x20 => {
                    return Err(self.error_at(
                        at,
                        "control character (\\u0000-\\u001F) found while parsing a string",
                    ))
                }
                Some(_) => at += 1,
                None => return Err(self.error_at(at, "EOF while parsing a string")),
            }
        }
    }

    /// The end of the escape whose backslash is at `at`, checked as serde_json checks it.
    fn escape_end(&self, at: usize) -> Result<usize, ReadError> {
        match self.bytes.get(at + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(at + 2),
            Some(b'u') => match self.bytes.get(at + 2..at + 6) {
                Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => Ok(at + 6),
                Some(_) => Err(self.error_at(at + 2, "invalid escape")),
                None => Err(self.error_at(self.bytes.len(), "EOF while parsing a string")),
            },
            Some(_) => Err(self.error_at(at + 1, "invalid escape")),
            None => Err(self.error_at(at + 1, "EOF while parsing a string")),
        }
    }

    /// The end of the number that starts at the reader's position, its grammar checked.
    fn number_end(&self) -> Result<usize, ReadError> {
        let b = self.bytes;
        let digits = |mut at: usize| {
            while b.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            at
        };
        let mut at = self.at;
        if b.get(at) == Some(&b'-') {
            at += 1;
        }
        match b.get(at) {
            Some(b'0') => at += 1,
            Some(b'1'..=b'9') => at = digits(at + 1),
            _ => return Err(self.error_at(at, "invalid number")),
        }
        if b.get(at) == Some(&b'.') {
            let end = digits(at + 1);
            if end == at + 1 {
                return Err(self.error_at(end, "invalid number"));
            }
            at = end;
        }
        if matches!(b.get(at), Some(b'e' | b'E')) {
            at += 1;
            if matches!(b.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            let end = digits(at);
            if end == at {
                return Err(self.error_at(end, "invalid number"));
            }
            at = end;
        }
        Ok(at)
    }

    /// Reads a scalar (a string, a number, `true`, `false` or `null`).
    pub fn scalar(&mut self) -> Result<Scalar<'a>, ReadError> {
        match self.kind()? {
            Kind::String => {
                let s = self.string()?;
                Ok(Scalar::Str(s.decode(self)?))
            }
            Kind::Number => self.number(),
            Kind::Literal => self.literal(),
            Kind::Object | Kind::Array => Err(self.unexpected("a scalar")),
        }
    }

    fn literal(&mut self) -> Result<Scalar<'a>, ReadError> {
        let rest = &self.bytes[self.at..];
        let (scalar, len) = if rest.starts_with(b"true") {
            (Scalar::Bool(true), 4)
        } else if rest.starts_with(b"false") {
            (Scalar::Bool(false), 5)
        } else if rest.starts_with(b"null") {
            (Scalar::Null, 4)
        } else {
            return Err(self.error("expected ident"));
        };
        self.at += len;
        Ok(scalar)
    }

    fn number(&mut self) -> Result<Scalar<'a>, ReadError> {
        let start = self.at;
        let end = self.number_end()?;
        let text = &self.text[start..end];
        self.at = end;
        // A plain non-negative integer of up to 19 digits fits a u64; anything else is
        // serde_json's to decode.
        if text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit()) {
            let n = text.bytes().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            return Ok(Scalar::U64(n));
        }
        let n: serde_json::Number =
            serde_json::from_str(text).map_err(|e| self.error_at(start, strip_position(e)))?;
        Ok(if let Some(u) = n.as_u64() {
            Scalar::U64(u)
        } else if let Some(i) = n.as_i64() {
            Scalar::I64(i)
        } else {
            Scalar::F64(n.as_f64().unwrap_or(f64::NAN))
        })
    }

    /// Skips one value, whatever it holds. A scalar's grammar is checked; a container is
    /// scanned for its end only (see [`Reader::container_end`]).
    pub fn skip(&mut self) -> Result<(), ReadError> {
        match self.kind()? {
            Kind::String => {
                self.string_end()?;
            }
            Kind::Number => self.at = self.number_end()?,
            Kind::Literal => {
                self.literal()?;
            }
            Kind::Object | Kind::Array => self.at = self.container_end()?,
        }
        Ok(())
    }

    /// A member's key and its colon.
    #[inline]
    fn key(&mut self) -> Result<Str<'a>, ReadError> {
        let key = self.string()?;
        self.eat(b':', "`:`")?;
        Ok(key)
    }
}

impl Reader<'_> {
    /// Between the items of a container closed by `close`: `false` past its end (consumed),
    /// else `true`, the comma before it consumed (none before the first item).
    #[inline]
    fn next_item(
        &mut self,
        first: &mut bool,
        close: u8,
        what: &'static str,
    ) -> Result<bool, ReadError> {
        match self.peek() {
            Some(b) if b == close => {
                self.at += 1;
                return Ok(false);
            }
            Some(b',') if !*first => self.at += 1,
            _ if !*first => return Err(self.unexpected(what)),
            _ => {}
        }
        *first = false;
        Ok(true)
    }
}

impl Members {
    /// The next member's key (the reader then stands at its value, which must be read or
    /// skipped), or `None` past the object's end.
    #[inline]
    pub fn next<'a>(&mut self, r: &mut Reader<'a>) -> Result<Option<Str<'a>>, ReadError> {
        if r.next_item(&mut self.first, b'}', "`,` or `}`")? {
            r.key().map(Some)
        } else {
            Ok(None)
        }
    }
}

impl Elements {
    /// Whether another element follows (the reader then stands at it, which must be read or
    /// skipped); `false` past the array's end.
    #[inline]
    pub fn next(&mut self, r: &mut Reader<'_>) -> Result<bool, ReadError> {
        r.next_item(&mut self.first, b']', "`,` or `]`")
    }
}

mod scan;
#[cfg(test)]
mod tests;
