//! A JSON string written from its bytes, escaped exactly as serde_json escapes it: rendering a
//! List's objects straight from the store writes every string of every object, and going
//! through serde_json's serializer (with a UTF-8 check of each interned string first) took a
//! third of that time (issue 34). The store's strings were valid UTF-8 when they were encoded,
//! so their bytes are written as they are, with only the escapes JSON needs.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` to `out` as a quoted JSON string: `"` and `\\` escaped, control characters as
/// `\b \t \n \f \r` or `\u00XX`; everything else (non-ASCII included) as is, as serde_json
/// writes it.
pub(super) fn write_escaped(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut start = 0;
    while let Some(i) = next_escape(s, start) {
        out.extend_from_slice(&s[start..i]);
        let b = s[i];
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// Every byte of a word set to `b`.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// The position of the first byte at or after `from` that JSON needs escaped.
///
/// Decision: eight bytes at a time (a word's bytes compared at once, no `unsafe`). Nearly every
/// string needs no escape and is then checked at a word's cost per eight bytes; the one that
/// needs many (kubectl's `last-applied-configuration`, JSON in a string, a quote every few
/// bytes, the largest string most pods hold) jumps from quote to quote instead of testing each
/// byte three times (issue 34: escaping was a quarter of rendering a List's pods).
#[inline]
fn next_escape(s: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 8 <= s.len() {
        let mut word = [0; 8];
        word.copy_from_slice(&s[i..i + 8]);
        let w = u64::from_le_bytes(word);
        // A byte's high bit in `hits` is set where it is below 0x20, a quote or a backslash;
        // borrows run only upwards from a byte that matches, so the lowest set bit is exact.
        let quote = w ^ splat(b'"');
        let backslash = w ^ splat(b'\\');
        let hits = (w.wrapping_sub(splat(0x20))
            | quote.wrapping_sub(splat(1))
            | backslash.wrapping_sub(splat(1)))
            & !w
            & splat(0x80);
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    s[i..].iter().position(|&b| needs_escape(b)).map(|k| i + k)
}

/// Whether JSON needs `b` escaped in a string: `"`, `\\` and the control characters.
#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn escaped(s: &str) -> String {
        let mut out = Vec::new();
        write_escaped(&mut out, s.as_bytes());
        String::from_utf8(out).expect("escaping keeps UTF-8")
    }

    #[test]
    fn escapes_as_serde_json_does() {
        for s in [
            "",
            "plain",
            "a \"quoted\" \\ word",
            "{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n",
            "\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f}\u{7f}",
            "ünï/cødé ✓",
        ] {
            assert_eq!(escaped(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    /// The word-at-a-time scan finds an escape at every offset of a word, after a byte that
    /// looks like one to a careless bit trick (0x80 and above, 0x21, 0x5d), and in the tail.
    #[test]
    fn escapes_are_found_at_every_offset() {
        for len in 1..=20 {
            for at in 0..len {
                for b in [b'"', b'\\', 0u8, 0x1f, b'\n'] {
                    for filler in ['a', 'é', '!', ']'] {
                        let mut s: Vec<char> = std::iter::repeat_n(filler, len).collect();
                        s[at] = char::from(b);
                        let s: String = s.into_iter().collect();
                        assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn any_string_escapes_as_serde_json_does(s in any::<String>()) {
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }
    }
}
