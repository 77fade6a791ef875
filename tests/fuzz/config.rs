//! The configuration file: any text, valid configurations mutated (bytes cut, inserted,
//! lines swapped, a field's value replaced by arbitrary YAML), deep nesting and alias bombs.
//! Properties: `config::parse` never panics, and every error is `FILE:LINE:COLUMN: ...`, a
//! position inside the file.

use informerd::config;
use proptest::prelude::*;

use crate::corpus;
use crate::json;

const FILE: &str = "fuzz.yaml";

/// A valid configuration exercising most fields, to mutate.
const VALID: &str = include_str!("../fuzz-corpus/config/valid-informerd.yaml");

/// Parses `bytes` (lossily as UTF-8, as a file read as text would fail on the rest) and checks
/// the answer: a configuration, or errors that each point into the file.
pub fn check(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let Err(error) = config::parse(FILE, &text) else {
        return;
    };
    let lines = text.lines().count().max(1) + 1;
    assert!(
        !error.diagnostics().is_empty(),
        "an error with no diagnostic: {error}"
    );
    for diagnostic in error.to_string().lines() {
        let rest = diagnostic
            .strip_prefix("fuzz.yaml:")
            .unwrap_or_else(|| panic!("not FILE:LINE:COLUMN: {diagnostic}"));
        let mut parts = rest.splitn(3, ':');
        let line: usize = parts.next().and_then(|l| l.parse().ok()).expect(diagnostic);
        let column: usize = parts.next().and_then(|c| c.parse().ok()).expect(diagnostic);
        assert!(
            (1..=lines).contains(&line),
            "line {line} outside the file: {diagnostic}"
        );
        assert!(column >= 1, "{diagnostic}");
        let message = parts.next().expect(diagnostic).trim();
        assert!(!message.is_empty(), "an empty message: {diagnostic}");
    }
}

/// One mutation of `text`: a byte range removed, bytes inserted, two lines swapped, or a line's
/// value replaced by `yaml`.
fn mutate(text: &str, how: u8, a: usize, b: usize, bytes: &[u8], yaml: &str) -> Vec<u8> {
    let raw = text.as_bytes();
    let (a, b) = (a % (raw.len() + 1), b % (raw.len() + 1));
    let (lo, hi) = (a.min(b), a.max(b));
    match how % 4 {
        0 => [&raw[..lo], &raw[hi..]].concat(),
        1 => [&raw[..lo], bytes, &raw[lo..]].concat(),
        2 => {
            let mut lines: Vec<&str> = text.lines().collect();
            let n = lines.len();
            lines.swap(a % n, b % n);
            lines.join("\n").into_bytes()
        }
        _ => {
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let n = lines.len();
            let line = &mut lines[a % n];
            if let Some(colon) = line.find(": ") {
                line.truncate(colon + 2);
                line.push_str(yaml);
            }
            lines.join("\n").into_bytes()
        }
    }
}

proptest! {
    #![proptest_config(corpus::config("proptest-regressions/fuzz/config.txt"))]

    #[test]
    fn any_text_parses_or_names_a_position(text in "(\\PC|\n|\t| ){0,200}") {
        check(text.as_bytes());
    }

    #[test]
    fn yaml_of_any_shape_parses_or_names_a_position(value in json::value()) {
        // JSON is YAML: every shape, under the top level and as a whole document.
        check(value.to_string().as_bytes());
        check(format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nresources: {value}\n").as_bytes());
    }

    #[test]
    fn mutated_configs_parse_or_name_a_position(
        how in any::<u8>(), a in any::<usize>(), b in any::<usize>(),
        bytes in prop::collection::vec(any::<u8>(), 1..16), value in json::value(),
    ) {
        check(&mutate(VALID, how, a, b, &bytes, &value.to_string()));
    }
}

#[test]
fn corpus_replays() {
    corpus::replay("config", check);
}

#[test]
fn the_valid_corpus_configs_parse() {
    config::parse(FILE, VALID).expect("the example configuration is valid");
}
