use serde_json::{json, Value};

use super::*;

/// Reads `text` as one scalar to its end.
fn scalar(text: &str) -> Result<Scalar<'_>, ReadError> {
    let mut r = Reader::new(text);
    let s = r.scalar()?;
    r.finish()?;
    Ok(s)
}

/// Where skipping the first value of `text` stops.
fn skip_end(text: &str) -> Result<usize, ReadError> {
    let mut r = Reader::new(text);
    r.skip()?;
    Ok(r.position())
}

#[test]
fn numbers_are_classified_as_serde_json_classifies_them() {
    for text in [
        "0",
        "7",
        "-0",
        "-7",
        "1.5",
        "-2.5e-3",
        "1E3",
        "18446744073709551615",
        "18446744073709551616",
        "9999999999999999999",
        "-9223372036854775808",
        "-9223372036854775809",
        "123456789012345678901234567890",
    ] {
        let expected: Value = serde_json::from_str(text).unwrap();
        let got = match scalar(text).unwrap() {
            Scalar::U64(u) => json!(u),
            Scalar::I64(i) => json!(i),
            Scalar::F64(f) => json!(f),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(got, expected, "{text}");
        // Same classification, not only the same value: -0 stays a float, as in serde_json.
        assert_eq!(got.is_u64(), expected.is_u64(), "{text}");
        assert_eq!(got.is_i64(), expected.is_i64(), "{text}");
    }
}

#[test]
fn strings_decode_their_escapes_as_serde_json_does() {
    for text in [
        r#""plain""#,
        r#""a\"b\\c\/d\b\f\n\r\t""#,
        r#""\u00e9\u4e2d""#,
        r#""\ud83d\ude00 surrogates""#,
        "\"ünïcödé 中文\"",
        r#""\u0000\u001f\u007F\uFFFF\uD83D\uDE00""#,
        r#""{\"kind\":\"Deployment\",\"spec\":{\"args\":[\"--a=\\\"b\\\"\"]}}\n""#,
        r#""\\""#,
        r#""ends in an escape\t""#,
    ] {
        let expected: String = serde_json::from_str(text).unwrap();
        match scalar(text).unwrap() {
            Scalar::Str(s) => assert_eq!(s, expected, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    // Escapes that are no character: refused as serde_json refuses them.
    for text in [
        r#""\ud800""#,
        r#""\ud800x""#,
        r#""\ud800\n""#,
        r#""\ud800\u0041""#,
        r#""\udc00""#,
        r#""a\udfff b""#,
    ] {
        let expected = serde_json::from_str::<String>(text);
        match (scalar(text), expected) {
            (Ok(Scalar::Str(s)), Ok(e)) => assert_eq!(s, e, "{text}"),
            (Err(_), Err(_)) => {}
            (got, expected) => panic!("{text}: {got:?} against serde_json's {expected:?}"),
        }
    }
    // Without an escape, the string is the text itself, not a copy.
    assert!(matches!(
        scalar(r#""plain""#).unwrap(),
        Scalar::Str(Cow::Borrowed("plain"))
    ));
}

#[test]
fn bad_scalars_are_refused_where_they_go_wrong() {
    for (text, what, column) in [
        (r#""abc"#, "EOF while parsing a string", 5),
        ("\"a\u{1}b\"", "control character", 3),
        (r#""a\qb""#, "invalid escape", 4),
        (r#""\u12x4""#, "invalid escape", 4),
        (r#""\ud800""#, "hex escape", 1),
        ("01", "trailing characters", 2),
        ("1.", "invalid number", 3),
        ("-", "invalid number", 2),
        ("1e", "invalid number", 3),
        ("1e400", "number out of range", 1),
        ("tru", "expected ident", 1),
        ("nul", "expected ident", 1),
        ("", "EOF while parsing", 1),
        ("@", "expected a value", 1),
        ("true false", "trailing characters", 6),
    ] {
        let e = scalar(text).unwrap_err();
        assert!(e.what.contains(what), "{text}: {e}");
        assert_eq!((e.line, e.column), (1, column), "{text}: {e}");
    }
}

#[test]
fn an_error_names_its_line_and_column() {
    let text = "{\n  \"a\": 1,\n  \"b\": tru\n}";
    let mut r = Reader::new(text);
    let mut members = r.object().unwrap();
    let mut error = None;
    while let Some(key) = members.next(&mut r).unwrap() {
        if key.plain() == Some("b") {
            error = r.scalar().err();
            break;
        }
        r.skip().unwrap();
    }
    let e = error.expect("tru is refused");
    assert_eq!((e.line, e.column), (3, 8), "{e}");
    assert_eq!(e.to_string(), "expected ident at line 3 column 8");
}

#[test]
fn members_and_elements_follow_the_grammar() {
    let read_all = |text: &str| -> Result<(), ReadError> {
        let mut r = Reader::new(text);
        let mut members = r.object()?;
        while let Some(_key) = members.next(&mut r)? {
            let mut elements = r.array()?;
            while elements.next(&mut r)? {
                r.scalar()?;
            }
        }
        r.finish()
    };
    read_all(r#"{"a":[1,2],"b":[]}"#).unwrap();
    read_all(" { \"a\" : [ 1 , 2 ] } ").unwrap();
    read_all("{}").unwrap();
    for bad in [
        r#"{"a":[1,2],}"#,
        r#"{"a":[1,]}"#,
        r#"{"a":[,1]}"#,
        r#"{"a" [1]}"#,
        r#"{a:[1]}"#,
        r#"{"a":[1] "b":[2]}"#,
        r#"{"a":[1 2]}"#,
        r#"{"a":[1]"#,
    ] {
        assert!(read_all(bad).is_err(), "{bad} accepted");
    }
}

#[test]
fn skipping_finds_the_end_of_every_kind_of_value() {
    for text in [
        r#""a string""#,
        "-12.5e3",
        "true",
        "null",
        "{}",
        "[]",
        r#"{"a":[1,{"b":"}]"}],"c":"\"{"}"#,
        r#"[["]"],{"\\":"\\\\"},"\\\""]"#,
    ] {
        assert_eq!(
            skip_end(&format!("{text} ,")).unwrap(),
            text.len(),
            "{text}"
        );
    }
}

#[test]
fn skipping_follows_strings_and_escapes_across_blocks() {
    // Every offset of a quote, an escaped quote, an escaped backslash and a bracket inside a
    // string relative to the 64- and 32-byte blocks the scan reads, and in the bytes after
    // the last block.
    for pad in 0..140 {
        for inner in [
            r#"\""#,
            r#"\\"#,
            r#"\\\""#,
            "}",
            "]",
            r#"\\\\"#,
            r#"\u005c"#,
        ] {
            let filler = "x".repeat(pad);
            let text = format!(
                r#"{{"{filler}":["{filler}{inner}{filler}",{{"k{inner}":"{inner}"}}],"z":"{inner}"}}"#
            );
            let value: Value = serde_json::from_str(&text).expect("valid JSON");
            assert!(value.is_object());
            assert_eq!(
                skip_end(&format!("{text}  ,1")).unwrap(),
                text.len(),
                "pad {pad}, {inner}: {text}"
            );
        }
    }
}

#[test]
fn skipping_refuses_what_does_not_end() {
    for text in [
        r#"{"a":"#,
        r#"{"a":"}"#,
        r#"[1,2"#,
        r#"{"a":"\"}"#,
        &format!(r#"{{"a":"{}"#, "y".repeat(100)),
        &format!(r#"[{}"#, "[".repeat(100)),
    ] {
        let e = skip_end(text).unwrap_err();
        assert!(e.what.contains("EOF"), "{text}: {e}");
    }
}

#[test]
fn skipping_a_recorded_pod_ends_where_serde_json_ends() {
    for pod in crate::fixtures::all_pods() {
        let text = serde_json::to_string(&pod).unwrap();
        assert_eq!(skip_end(&text).unwrap(), text.len());
        let pretty = serde_json::to_string_pretty(&pod).unwrap();
        assert_eq!(skip_end(&pretty).unwrap(), pretty.len());
    }
}
