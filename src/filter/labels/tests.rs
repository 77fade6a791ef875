use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

use super::*;
use crate::filter::FilterError;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn parses_the_whole_string_syntax() {
    let s = LabelSelector::parse(
        "app=web, tier==front,env!=prod, zone in (a, b,c), team notin (x), ready, !canary, \
         replicas>2, weight<10, app.kubernetes.io/name=informerd, empty=",
    )
    .unwrap();
    assert_eq!(
        s.requirements(),
        &[
            Requirement::Equals("app".into(), "web".into()),
            Requirement::Equals("tier".into(), "front".into()),
            Requirement::NotEquals("env".into(), "prod".into()),
            Requirement::In("zone".into(), ["a", "b", "c"].map(String::from).into()),
            Requirement::NotIn("team".into(), ["x".to_string()].into()),
            Requirement::Exists("ready".into()),
            Requirement::DoesNotExist("canary".into()),
            Requirement::GreaterThan("replicas".into(), 2),
            Requirement::LessThan("weight".into(), 10),
            Requirement::Equals("app.kubernetes.io/name".into(), "informerd".into()),
            Requirement::Equals("empty".into(), "".into()),
        ]
    );
    assert_eq!(
        s.to_string(),
        "app=web,tier=front,env!=prod,zone in (a,b,c),team notin (x),ready,!canary,\
         replicas>2,weight<10,app.kubernetes.io/name=informerd,empty="
    );
    // The written form parses back to the same selector.
    assert_eq!(LabelSelector::parse(&s.to_string()).unwrap(), s);
    assert!(LabelSelector::parse("").unwrap().is_everything());
    assert!(LabelSelector::parse("  ").unwrap().is_everything());
}

#[test]
fn an_empty_value_set_is_the_empty_value_as_in_kubernetes() {
    // `labels.Parse` reads `()` as the set of the empty value, the set `(,)` gives too, and
    // writes that set as `()`: both parse, and the written form parses back to the same.
    let empty = LabelSelector::parse("app in ()").unwrap();
    assert_eq!(LabelSelector::parse("app in (,)").unwrap(), empty);
    assert_eq!(empty.to_string(), "app in ()");
    assert_eq!(LabelSelector::parse(&empty.to_string()).unwrap(), empty);
    assert!(empty.matches(&labels(&[("app", "")])));
    assert!(!empty.matches(&labels(&[("app", "web")])));
    assert!(!empty.matches(&labels(&[])));
    let not_empty = LabelSelector::parse("app notin ()").unwrap();
    assert!(not_empty.matches(&labels(&[("app", "web")])));
    assert!(!not_empty.matches(&labels(&[("app", "")])));
    assert!(not_empty.matches(&labels(&[])));
}

#[test]
fn matches_like_kubernetes() {
    let l = labels(&[("app", "web"), ("tier", "front"), ("replicas", "3")]);
    let cases = [
        ("", true),
        ("app=web", true),
        ("app==web", true),
        ("app=api", false),
        ("app!=api", true),
        ("missing!=x", true),
        ("app in (web,api)", true),
        ("app in (api)", false),
        ("missing in (x)", false),
        ("app notin (api)", true),
        ("missing notin (x)", true),
        ("app", true),
        ("missing", false),
        ("!missing", true),
        ("!app", false),
        ("replicas>2", true),
        ("replicas>3", false),
        ("replicas<4", true),
        ("app>1", false),
        ("missing<1", false),
        ("app=web,tier=back", false),
        ("app=web,tier=front", true),
    ];
    for (selector, expected) in cases {
        let s = LabelSelector::parse(selector).unwrap();
        assert_eq!(s.matches(&l), expected, "{selector}");
        let json = serde_json::json!({"metadata": {"labels": l}});
        assert_eq!(s.matches_object(&json), expected, "{selector} on JSON");
    }
    let none = serde_json::json!({"metadata": {}});
    assert!(LabelSelector::parse("!app").unwrap().matches_object(&none));
    assert!(!LabelSelector::parse("app").unwrap().matches_object(&none));
}

#[test]
fn errors_say_what_and_where() {
    let cases = [
        ("app=~web", "unknown operator '=~' at column 4"),
        ("app in web", "found 'web', expected '(' at column 8"),
        ("app in (a", "found the end, expected ',' or ')' at column 10"),
        ("app web", "found 'web', expected an operator (=, ==, !=, in, notin, <, >), ',' or the end at column 5"),
        ("a=b c", "found 'c', expected ',' or the end at column 5"),
        ("=b", "found '=', expected a label key at column 1"),
        ("a,,b", "found ',', expected a label key at column 3"),
        ("replicas>x", "'>' needs an integer value, found 'x' at column 10"),
        ("-app=x", "invalid label key '-app': name part must consist of alphanumeric characters"),
        ("app=-x", "invalid label value '-x': a valid label must be an empty string"),
        ("!a=b", "found '=', expected ',' or the end after !a at column 3"),
    ];
    for (selector, message) in cases {
        let err = LabelSelector::parse(selector).unwrap_err();
        let FilterError::LabelSelector {
            field: None,
            message: got,
        } = &err
        else {
            panic!("{selector}: {err:?}");
        };
        assert!(got.starts_with(message), "{selector}: {got}");
    }
}

#[test]
fn from_k8s_validates_and_matches() {
    let selector = meta::LabelSelector {
        match_labels: Some(BTreeMap::from([("team".to_string(), "x".to_string())])),
        match_expressions: Some(vec![
            LabelSelectorRequirement {
                key: "env".into(),
                operator: "In".into(),
                values: Some(vec!["prod".into(), "staging".into()]),
            },
            LabelSelectorRequirement {
                key: "legacy".into(),
                operator: "DoesNotExist".into(),
                values: None,
            },
        ]),
    };
    let s = LabelSelector::from_k8s(&selector).unwrap();
    assert_eq!(s.to_string(), "team=x,env in (prod,staging),!legacy");
    assert!(s.matches(&labels(&[("team", "x"), ("env", "prod")])));
    assert!(!s.matches(&labels(&[("team", "x"), ("env", "dev")])));
    assert!(!s.matches(&labels(&[("team", "x"), ("env", "prod"), ("legacy", "")])));
    assert!(LabelSelector::from_k8s(&Default::default())
        .unwrap()
        .is_everything());

    let bad = |operator: &str, values: Option<Vec<String>>| meta::LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "k".into(),
            operator: operator.into(),
            values,
        }]),
    };
    let field = |s: meta::LabelSelector| match LabelSelector::from_k8s(&s).unwrap_err() {
        FilterError::LabelSelector { field, message } => (field.unwrap(), message),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(bad("Matches", None)),
        (
            "matchExpressions[0].operator".to_string(),
            "unknown operator 'Matches', expected one of In, NotIn, Exists, DoesNotExist"
                .to_string()
        )
    );
    assert_eq!(field(bad("In", None)).0, "matchExpressions[0].values");
    assert_eq!(
        field(bad("Exists", Some(vec!["a".into()]))).0,
        "matchExpressions[0].values"
    );
    assert_eq!(
        field(bad("In", Some(vec!["a b".into()]))).0,
        "matchExpressions[0].values[0]"
    );
}
