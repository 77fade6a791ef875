//! Label and field selectors, as clients send them in List and Watch requests and operators
//! write them in the configuration: any text, text near the grammar, and structured label
//! selectors (`matchLabels`/`matchExpressions`). Properties: parsing never panics; an error
//! says where (a column) or which part; a parsed selector written back (`Display`) parses to
//! the same selector, which selects the same objects.

use informerd::filter::{FieldSelector, FilterError, LabelSelector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use serde_json::Value;

use crate::corpus;
use crate::json;

/// Text near the label selector grammar: keys (with prefixes), operators, sets, and noise.
fn label_text() -> impl Strategy<Value = String> {
    let key = "([a-z0-9.-]{1,12}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,8}|\\PC{1,4}";
    let value = "[A-Za-z0-9._-]{0,8}|\\PC{0,3}";
    let op = prop::sample::select(vec![
        "=", "==", "!=", " in ", " notin ", "<", ">", "", "!", "~", " in", "(",
    ]);
    let term = (any::<bool>(), key, op, vec(value, 0..4), any::<bool>()).prop_map(
        |(not, key, op, values, set)| {
            let values = if set || op.contains("in") {
                format!("({})", values.join(","))
            } else {
                values.concat()
            };
            format!("{}{key}{op}{values}", if not { "!" } else { "" })
        },
    );
    vec(term, 0..4).prop_map(|terms| terms.join(","))
}

/// Text near the field selector grammar: paths, operators, escaped values.
fn field_text() -> impl Strategy<Value = String> {
    let term = (
        "[a-zA-Z.]{0,16}|\\PC{0,6}",
        prop::sample::select(vec!["=", "==", "!=", "", "!", "==="]),
        "([A-Za-z0-9\\\\,=!]|\\PC){0,10}",
    )
        .prop_map(|(field, op, value)| format!("{field}{op}{value}"));
    vec(term, 0..4).prop_map(|terms| terms.join(","))
}

/// The check of a label selector's text: an error with a column, or a selector that survives
/// being written back.
pub fn check_labels(text: &str, object: &Value) {
    match LabelSelector::parse(text) {
        Err(FilterError::LabelSelector { field, message }) => {
            assert_eq!(field, None, "a string selector names no field");
            assert!(message.contains("column"), "no column: {message}");
        }
        Err(e) => panic!("a label selector fails with {e:?}"),
        Ok(selector) => {
            let written = selector.to_string();
            let again = LabelSelector::parse(&written)
                .unwrap_or_else(|e| panic!("{text:?} written back as {written:?}: {e}"));
            assert_eq!(again.to_string(), written, "{text:?}");
            assert_eq!(
                again.matches_object(object),
                selector.matches_object(object)
            );
        }
    }
}

/// The check of a field selector's text, as [`check_labels`].
pub fn check_fields(text: &str, object: &Value) {
    match FieldSelector::parse(text) {
        Err(FilterError::FieldSelector { message }) => {
            assert!(message.contains("column"), "no column: {message}");
        }
        Err(e) => panic!("a field selector fails with {e:?}"),
        Ok(selector) => {
            let written = selector.to_string();
            let again = FieldSelector::parse(&written)
                .unwrap_or_else(|e| panic!("{text:?} written back as {written:?}: {e}"));
            assert_eq!(again.to_string(), written, "{text:?}");
            assert_eq!(again.matches(object), selector.matches(object));
        }
    }
}

fn structured() -> impl Strategy<Value = meta::LabelSelector> {
    let expression = (
        "\\PC{0,12}",
        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist", "in", ""]),
        prop::option::of(vec("\\PC{0,8}", 0..3)),
    )
        .prop_map(|(key, operator, values)| meta::LabelSelectorRequirement {
            key,
            operator: operator.to_string(),
            values,
        });
    (
        prop::option::of(btree_map("\\PC{0,10}", "\\PC{0,10}", 0..3)),
        prop::option::of(vec(expression, 0..3)),
    )
        .prop_map(|(match_labels, match_expressions)| meta::LabelSelector {
            match_labels,
            match_expressions,
        })
}

proptest! {
    #![proptest_config(corpus::config("proptest-regressions/fuzz/selectors.txt"))]

    #[test]
    fn label_selectors_parse_or_name_a_column(
        text in prop_oneof![label_text(), "\\PC{0,40}"], object in json::object(),
    ) {
        check_labels(&text, &object);
    }

    #[test]
    fn field_selectors_parse_or_name_a_column(
        text in prop_oneof![field_text(), "\\PC{0,40}"], object in json::object(),
    ) {
        check_fields(&text, &object);
    }

    #[test]
    fn structured_label_selectors_convert_or_name_the_part(
        selector in structured(), object in json::object(),
    ) {
        match LabelSelector::from_k8s(&selector) {
            Err(FilterError::LabelSelector { field, message }) => {
                prop_assert!(field.is_some() && !message.is_empty(), "{field:?}: {message}");
            }
            Err(e) => prop_assert!(false, "a structured selector fails with {e:?}"),
            Ok(converted) => check_labels(&converted.to_string(), &object),
        }
    }
}

#[test]
fn label_selector_corpus_replays() {
    let object = serde_json::json!({"metadata": {"labels": {"app": "web", "tier": ""}}});
    corpus::replay("label-selector", |bytes| {
        check_labels(&String::from_utf8_lossy(bytes), &object);
    });
}

#[test]
fn field_selector_corpus_replays() {
    let object = serde_json::json!({"metadata": {"name": "a,b"}, "spec": {"nodeName": "n"}});
    corpus::replay("field-selector", |bytes| {
        check_fields(&String::from_utf8_lossy(bytes), &object);
    });
}
