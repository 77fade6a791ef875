//! A tape against serde_json's `Value`: the same document, the same order, repeated keys,
//! numbers and depth.

use super::*;
use crate::vocab::tree::{nested_deeper, View};
use serde_json::json;

#[test]
fn round_trips_a_value_exactly() {
    let v = json!({"z": [1, -2, 2.5, null, true, "s", {}], "a": {"y": "", "b": [[]]},
                   "m": u64::MAX, "n": i64::MIN});
    let tape = Tape::from_value(&v);
    assert_eq!(tape.to_value(), v);
    assert_eq!(tape.root().unwrap().get("a").unwrap().to_value(), v["a"]);
}

#[test]
fn puts_members_in_key_order_and_keeps_the_last_of_a_repeated_key() {
    let mut tape = Tape::new();
    let open = tape.open_object();
    for (k, v) in [("kind", "Pod"), ("apiVersion", "v1"), ("kind", "Node")] {
        tape.push_key(k);
        tape.push_str(v);
    }
    tape.push_key("metadata");
    let meta = tape.open_object();
    tape.push_key("name");
    tape.push_str("p");
    tape.close_object(meta);
    tape.close_object(open);
    let keys: Vec<&str> = match tape.root().unwrap().view() {
        View::Object(3, members) => members.map(|(k, _)| k).collect(),
        _ => panic!("an object of three members"),
    };
    assert_eq!(keys, ["apiVersion", "kind", "metadata"]);
    assert_eq!(
        tape.to_value(),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "p"}})
    );
}

#[test]
fn sets_root_strings_as_a_map_insert_does() {
    let mut tape = Tape::from_value(&json!({"kind": "Old", "metadata": {"name": "p"}}));
    tape.set_root_strings(&[("apiVersion", "v1"), ("kind", "Pod")]);
    assert_eq!(
        tape.to_value(),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    );
    let mut scalar = Tape::from_value(&json!(3));
    scalar.set_root_strings(&[("kind", "Pod")]);
    assert_eq!(scalar.to_value(), json!(3));
}

#[test]
fn root_strings_already_set_leave_the_tape_as_it_is() {
    let event = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}});
    let mut tape = Tape::from_value(&event);
    let before = tape.clone();
    tape.set_root_strings(&[("apiVersion", "v1"), ("kind", "Pod")]);
    assert_eq!(tape, before);
    // One of them differing, both are set.
    tape.set_root_strings(&[("apiVersion", "v2"), ("kind", "Pod")]);
    assert_eq!(
        tape.to_value(),
        json!({"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "p"}})
    );
    // A member of that key that is no string is replaced.
    let mut tape = Tape::from_value(&json!({"kind": 1}));
    tape.set_root_strings(&[("kind", "Pod")]);
    assert_eq!(tape.to_value(), json!({"kind": "Pod"}));
}

#[test]
fn a_truncated_member_leaves_no_trace() {
    let mut tape = Tape::new();
    let open = tape.open_object();
    tape.push_key("a");
    tape.push_u64(1);
    let mark = tape.mark();
    tape.push_key("b");
    let inner = tape.open_array();
    tape.push_str("gone");
    tape.close_array(inner, 1);
    tape.truncate(mark);
    tape.close_object(open);
    assert_eq!(tape.to_value(), json!({"a": 1}));
    assert_eq!(tape.text, "a");
}

#[test]
fn records_its_depth_as_a_walk_finds_it() {
    let deep = json!({"a": [{"b": [1]}], "c": {"d": {}}});
    let tape = Tape::from_value(&deep);
    assert_eq!(tape.max_depth, 4);
    for max in 0..6 {
        let root = tape.root().unwrap();
        assert_eq!(root.too_deep(max), nested_deeper(root, max), "max {max}");
        assert_eq!(root.too_deep(max), nested_deeper(&deep, max), "max {max}");
    }
    // A member cut off takes its depth with it.
    let mut tape = Tape::new();
    let open = tape.open_object();
    let mark = tape.mark();
    tape.push_key("deep");
    let inner = tape.open_array();
    let innermost = tape.open_array();
    tape.close_array(innermost, 0);
    tape.close_array(inner, 1);
    assert_eq!(tape.max_depth, 2);
    tape.truncate(mark);
    tape.close_object(open);
    assert_eq!(tape.max_depth, 0);
}

#[test]
fn a_member_hidden_by_a_repeated_key_does_not_count_for_the_depth() {
    // `{"a": [[]], "a": 1}`: the deep member is not read, so the tape is one deep.
    let mut tape = Tape::new();
    let open = tape.open_object();
    tape.push_key("a");
    let outer = tape.open_array();
    let inner = tape.open_array();
    tape.close_array(inner, 0);
    tape.close_array(outer, 1);
    tape.push_key("a");
    tape.push_u64(1);
    tape.close_object(open);
    let root = tape.root().unwrap();
    assert_eq!(tape.to_value(), json!({"a": 1}));
    assert!(!root.too_deep(1));
    assert!(root.too_deep(0));
    // Likewise a root member replaced by `set_root_strings`.
    let mut tape = Tape::from_value(&json!({"kind": [[[]]], "b": 1}));
    assert!(tape.root().unwrap().too_deep(2));
    tape.set_root_strings(&[("kind", "Pod")]);
    assert!(!tape.root().unwrap().too_deep(1));
    // A scalar hidden (a list item's own kind) leaves the recorded depth exact: no walk.
    let mut tape = Tape::from_value(&json!({"kind": "Old", "b": {"c": 1}}));
    tape.set_root_strings(&[("kind", "Pod")]);
    assert!(tape.depth_exact);
    assert!(tape.root().unwrap().too_deep(1));
    assert!(!tape.root().unwrap().too_deep(2));
}

#[test]
fn classifies_numbers_as_serde_json_does() {
    let mut tape = Tape::new();
    let open = tape.open_array();
    tape.push_i64(5);
    tape.push_i64(-5);
    tape.push_f64(f64::NAN);
    tape.close_array(open, 3);
    assert_eq!(tape.to_value(), json!([5, -5, null]));
    assert_eq!(tape, Tape::from_value(&json!([5u64, -5, null])));
}

#[test]
fn orders_keys_that_share_their_first_eight_bytes_by_their_whole_text() {
    // Keys ordered by an eight-byte prefix first (read in overlapping loads): shorter keys, keys sharing the prefix, and a
    // NUL (which pads the prefix too) must still come out in byte order, the last of a
    // repeated key kept.
    let keys = [
        "lastTransitionTime",
        "lastProbeTime",
        "lastTran",
        "last",
        "a\u{0}b",
        "a",
        "a\u{0}",
        "lastTransitionTime",
        "",
        // Every length below eight, differing in each byte.
        "abcdefg",
        "abcdeff",
        "abcdefa",
        "abcde",
        "abcdf",
        "abce",
        "abd",
        "abc",
        "aac",
        "ab",
        "ba",
        "b",
    ];
    let mut tape = Tape::new();
    let open = tape.open_object();
    for (i, key) in keys.iter().enumerate() {
        tape.push_key(key);
        tape.push_u64(i as u64);
    }
    tape.close_object(open);
    let mut expected = serde_json::Map::new();
    for (i, key) in keys.iter().enumerate() {
        expected.insert(key.to_string(), json!(i));
    }
    let got = tape.to_value();
    assert_eq!(got, Value::Object(expected.clone()));
    let order: Vec<&String> = got.as_object().unwrap().keys().collect();
    let mut sorted: Vec<&String> = expected.keys().collect();
    sorted.sort();
    assert_eq!(order, sorted);
    assert_eq!(got["lastTransitionTime"], json!(7));
}

#[test]
fn a_keys_prefix_is_its_first_eight_bytes_zero_padded() {
    let text = b"abcdefghijk";
    for len in 0..=text.len() {
        let mut padded = [0u8; 8];
        let n = len.min(8);
        padded[..n].copy_from_slice(&text[..n]);
        assert_eq!(
            prefix_of(&text[..len]),
            u64::from_be_bytes(padded),
            "len {len}"
        );
    }
}
