//! Field paths and masks: the transform's keep and drop paths, index paths, and the field
//! mask of List and Watch requests (`fields`, compiled as a keep-only transform). Input: any
//! text, text near the grammar, and generated paths over generated objects. Properties:
//! parsing never panics and errors name the column; a path written in its canonical form parses
//! back to the same segments; a transform applied twice changes nothing more (what the store
//! keeps is what a second pass would keep); decoding with a transform equals decoding whole and
//! then applying it.

use informerd::transform::{Transform, TransformError};
use informerd::vocab::path::{FieldPath, Segment};
use informerd::vocab::tape::Tape;
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::Value;

use crate::corpus;
use crate::json;

/// Text near the path grammar.
fn path_text() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        "\\.[a-z$_-]{0,8}",
        Just("[*]".to_string()),
        "\\[\"([^\"\\\\]|\\\\[\"\\\\])*\"\\]",
        "\\[[0-9*\"\\\\]{0,3}\\]?",
        "\\PC{1,2}",
    ];
    ("[a-z]{0,6}", vec(segment, 0..6)).prop_map(|(first, rest)| first + &rest.concat())
}

/// Paths that parse: fields from the keys objects have, and `[*]` (never first).
fn path() -> impl Strategy<Value = FieldPath> {
    let key = || json::key().prop_filter("a key is not empty", |k| !k.is_empty());
    let step = prop_oneof![4 => key().prop_map(Some), 1 => Just(None)];
    (key(), vec(step, 0..4)).prop_map(|(first, rest)| {
        let text: String = std::iter::once(Some(first))
            .chain(rest)
            .map(|step| match step {
                None => "[*]".to_string(),
                Some(name) => {
                    let quoted = name.replace('\\', "\\\\").replace('"', "\\\"");
                    format!("[\"{quoted}\"]")
                }
            })
            .collect();
        FieldPath::parse(&text).unwrap_or_else(|e| panic!("a generated path: {e}"))
    })
}

/// Parses `text` as a path: an error with a column inside the text, or a path that round trips
/// through its canonical form.
pub fn check(text: &str) {
    match FieldPath::parse(text) {
        Err(e) => {
            assert!(e.column >= 1 && e.column <= text.chars().count() + 1, "{e}");
            assert!(!e.message.is_empty());
        }
        Ok(path) => {
            assert_eq!(path.as_str(), text);
            assert!(!path.segments().is_empty(), "{text:?} parses to no segment");
            check_canonical(&path);
        }
    }
}

/// The canonical form (`from_fields` for paths of fields only) parses back to the same steps.
fn check_canonical(path: &FieldPath) {
    let fields: Option<Vec<String>> = path
        .segments()
        .iter()
        .map(|s| match s {
            Segment::Field(f) => Some(f.clone()),
            Segment::Any => None,
        })
        .collect();
    if let Some(fields) = fields {
        let canonical = FieldPath::from_fields(fields);
        let again = FieldPath::parse(canonical.as_str())
            .unwrap_or_else(|e| panic!("{path} written as {canonical}: {e}"));
        assert_eq!(
            again.segments(),
            path.segments(),
            "{path} written as {canonical}"
        );
    }
}

/// Builds a transform from generated paths, then checks it on `object`: applied twice it is
/// stable, and decoding with it equals decoding whole then applying.
fn check_transform(drop: &[FieldPath], keep: &[FieldPath], object: &Value) {
    let names = |paths: &[FieldPath]| paths.iter().map(|p| p.as_str().to_string()).collect();
    let (drop, keep): (Vec<String>, Vec<String>) = (names(drop), names(keep));
    let transform = match Transform::new(&drop, &keep) {
        Ok(t) => t,
        Err(e) => {
            assert_refusal(&e);
            return;
        }
    };
    let mut once = object.clone();
    transform.apply(&mut once);
    let mut twice = once.clone();
    transform.apply(&mut twice);
    assert_eq!(
        twice, once,
        "apply is idempotent: drop {drop:?} keep {keep:?}"
    );
    // Both from the text: serde_json's float parsing is not exact (no `float_roundtrip`), so
    // a float written and read again may differ from `object` in its last bit.
    let text = object.to_string();
    let mut expected: Value = serde_json::from_str(&text).expect("valid JSON decodes");
    transform.apply(&mut expected);
    let mut tape = Tape::new();
    transform
        .decode(&text, &mut tape)
        .expect("valid JSON decodes");
    let decoded = tape.to_value();
    assert_eq!(
        decoded, expected,
        "decoding with drop {drop:?} keep {keep:?}"
    );
}

fn assert_refusal(e: &TransformError) {
    let (list, index) = e.location();
    assert!(list == "drop" || list == "keep", "{e}");
    assert!(!e.detail().is_empty(), "{e} at {index}");
}

proptest! {
    #![proptest_config(corpus::config("proptest-regressions/fuzz/paths.txt"))]

    #[test]
    fn paths_parse_or_name_a_column(text in prop_oneof![path_text(), "\\PC{0,30}"]) {
        check(&text);
    }

    #[test]
    fn generated_paths_round_trip(path in path()) {
        check(path.as_str());
    }

    #[test]
    fn transforms_and_masks_are_stable_and_decode_alike(
        drop in vec(path(), 0..3), keep in vec(path(), 0..3), object in json::object(),
    ) {
        check_transform(&drop, &keep, &object);
        // A request's mask: keep only.
        check_transform(&[], &keep, &object);
    }

    #[test]
    fn transforms_of_any_text_build_or_name_the_path(
        drop in vec("\\PC{0,12}", 0..3), keep in vec(path_text(), 0..3),
    ) {
        if let Err(e) = Transform::new(&drop, &keep) {
            assert_refusal(&e);
        }
    }
}

#[test]
fn corpus_replays() {
    corpus::replay("field-path", |bytes| check(&String::from_utf8_lossy(bytes)));
}
