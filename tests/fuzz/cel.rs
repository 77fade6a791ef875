//! CEL: the configuration's filters and index expressions, and the watch requests' change
//! predicates. Input: any text, expressions built from the grammar (fields of `object` and
//! `oldObject`, literals, operators, macros, the extension functions), and deep nesting;
//! compiled expressions are evaluated on arbitrary objects. Properties: compiling never panics
//! and fails with `CEL does not compile: ...` or a wrong-type error naming the sample object;
//! evaluation answers a bool (or, for a filter, an evaluation error), whatever the object.

use informerd::filter::{ChangePredicate, Filter, FilterError, StringsExpr};
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::corpus;
use crate::json;

/// CEL built from the grammar: selections on `object`/`oldObject`, literals, operators, calls.
fn expression() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(vec![
            "object",
            "object.metadata",
            "object.metadata.name",
            "object.metadata.labels",
            "object.metadata.labels[\"app\"]",
            "object.spec",
            "object.spec.nodeName",
            "object.status.phase",
            "object.metadata.ownerReferences",
            "oldObject.spec",
            "oldObject.metadata.labels",
            "null",
            "true",
            "[]",
            "{}",
            "1.5",
            "-1",
            "0u",
            "b\"\\xff\"",
            "\"\\u00e9\"",
            "9223372036854775807",
            "18446744073709551615u",
        ])
        .prop_map(str::to_string),
        "\"[a-z]{0,6}\"",
        any::<i64>().prop_map(|i| i.to_string()),
    ];
    leaf.prop_recursive(5, 48, 4, |inner| {
        let op = prop::sample::select(vec![
            "==", "!=", "<", ">=", "+", "-", "*", "/", "%", "&&", "||", "in", ".",
        ]);
        let call = prop::sample::select(vec![
            "size",
            "has",
            "string",
            "int",
            "uint",
            "double",
            "type",
            "dyn",
            "duration",
            "timestamp",
        ]);
        let method = prop::sample::select(vec![
            "exists(o, o == 1)",
            "all(o, o.kind == \"x\")",
            "map(o, o)",
            "filter(o, true)",
            "exists_one(k, k != \"\")",
            "startsWith(\"a\")",
            "contains(\"\")",
            "size()",
            "matches(\"(a+)+$\")",
            "split(\",\")",
            "lowerAscii()",
            "join(\"\")",
            "sort()",
            "flatten()",
            "indexOf(\"a\")",
            "substring(-1)",
            "replace(\"\", \"x\")",
        ]);
        prop_oneof![
            (inner.clone(), op, inner.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (call, inner.clone()).prop_map(|(f, a)| format!("{f}({a})")),
            (inner.clone(), method).prop_map(|(a, m)| format!("{a}.{m}")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| format!("{c} ? {a} : {b}")),
            inner.clone().prop_map(|a| format!("!{a}")),
            (inner.clone(), inner).prop_map(|(a, k)| format!("{a}[{k}]")),
        ]
    })
}

/// Compiles `text` as a filter, a change predicate and an index expression, and evaluates
/// whatever compiles on `object` (and on `old` as the predicate's previous state).
pub fn check(text: &str, object: &Value, old: &Value) {
    match Filter::compile(text) {
        Ok(filter) => {
            if let Err(e) = filter.matches(object) {
                assert!(matches!(e, FilterError::Evaluation(_)), "{text}: {e:?}");
            }
        }
        Err(e) => assert_refusal(text, &e),
    }
    match ChangePredicate::compile(text) {
        Ok(predicate) => {
            predicate.matches(object, old);
        }
        Err(e) => assert_refusal(text, &e),
    }
    match StringsExpr::cel(text) {
        Ok(expr) => {
            if let Ok(values) = expr.try_values(object) {
                assert_eq!(expr.values(object), values);
            }
        }
        Err(e) => assert_refusal(text, &e),
    }
}

fn assert_refusal(text: &str, error: &FilterError) {
    match error {
        FilterError::Compile(message) => assert!(!message.is_empty(), "{text}"),
        FilterError::NotBool { got, .. } | FilterError::NotStrings { got, .. } => {
            assert!(!got.is_empty(), "{text}");
        }
        FilterError::Evaluation(message) => assert!(!message.is_empty(), "{text}"),
        other => panic!("{text}: unexpected {other:?}"),
    }
}

proptest! {
    #![proptest_config(corpus::config("proptest-regressions/fuzz/cel.txt"))]

    #[test]
    fn expressions_compile_or_say_why(
        text in prop_oneof![expression(), "\\PC{0,40}"],
        object in json::object(), old in json::object(),
    ) {
        check(&text, &object, &old);
    }

    #[test]
    fn expressions_evaluate_on_any_value(
        text in expression(), object in json::value(), old in json::value(),
    ) {
        check(&text, &object, &old);
    }
}

#[test]
fn corpus_replays() {
    let object = json!({"metadata": {"name": "p", "labels": {"app": "web"}},
                        "spec": {"nodeName": "n"}, "status": {"phase": "Running"}});
    corpus::replay("cel", |bytes| {
        check(&String::from_utf8_lossy(bytes), &object, &object)
    });
}

/// Each way of nesting, `depth` levels deep.
fn nested(depth: usize) -> [String; 5] {
    [
        format!("{}true{}", "(".repeat(depth), ")".repeat(depth)),
        format!("{}true", "!".repeat(depth)),
        format!("size({}1{}) == 1", "[".repeat(depth), "]".repeat(depth)),
        format!("{}true", "true ? true : ".repeat(depth)),
        format!("has(object{})", ".a".repeat(depth)),
    ]
}

#[test]
fn deep_expressions_compile_or_are_refused() {
    // Run on this test thread's 2 MiB stack, as on a Tokio worker.
    for depth in [8, 16, 40, 100, 1_000, 10_000] {
        for text in nested(depth) {
            check(&text, &json!({"a": {"a": {}}}), &json!({}));
        }
    }
    for text in nested(16) {
        Filter::compile(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
    // Not the `!` chain: the parser folds `!!` away, so 10000 of them are `true`.
    for text in nested(10_000).into_iter().filter(|t| !t.starts_with('!')) {
        let error = Filter::compile(&text).map(|_| ()).unwrap_err().to_string();
        assert!(
            error.contains("levels deep") || error.contains("Recursion limit"),
            "{error}"
        );
    }
}
