//! A JSON string written from its bytes, escaped exactly as serde_json escapes it: rendering a
//! List's objects straight from the store writes every string of every object, and going
//! through serde_json's serializer (with a UTF-8 check of each interned string first) took a
//! third of that time (issue 34). The store's strings were valid UTF-8 when they were encoded,
//! so their bytes are written as they are, with only the escapes JSON needs.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` to `out` as a quoted JSON string: `"` and `\` escaped, control characters as
/// `\b \t \n \f \r` or `\u00XX`; everything else (non-ASCII included) as is, as serde_json
/// writes it.
pub(super) fn write_escaped(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    // Decision: a check of the whole string first, without an early exit, which the compiler
    // turns into vector instructions: nearly every string of an object (names, labels, images)
    // needs no escape, and is then copied in one go instead of being looked at byte by byte.
    if !s.iter().fold(false, |any, &b| any | needs_escape(b)) {
        out.extend_from_slice(s);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        out.extend_from_slice(&s[start..i]);
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

    proptest! {
        #[test]
        fn any_string_escapes_as_serde_json_does(s in any::<String>()) {
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }
    }
}
