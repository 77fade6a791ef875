//! `${VAR}` expansion: the rules of `env`, and what a user sees through the whole configuration.

use std::collections::HashMap;
use std::ffi::OsString;

use super::super::{parse_with_env, ConfigError, Scope};
use super::{expand, EnvError, Located};

/// A lookup over `vars`.
fn table(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let vars: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    move |name| vars.get(name).cloned()
}

fn expanded(text: &str, vars: &[(&str, &str)]) -> Result<String, Vec<Located>> {
    expand(text, &table(vars)).map(|v| v.into_owned())
}

#[test]
fn references_are_replaced_and_other_dollars_kept() {
    let vars = [("NODE_NAME", "node-7"), ("A", "x"), ("_b2", "y")];
    let cases = [
        ("spec.nodeName=${NODE_NAME}", "spec.nodeName=node-7"),
        ("${A}${_b2}-${A}", "xy-x"),
        ("no reference", "no reference"),
        ("", ""),
        // Only `${` is special: CEL, regular expressions and `$(VAR)` pass unchanged.
        ("a$b $ $$ $(A) ^x$ {A}", "a$b $ $$ $(A) ^x$ {A}"),
        // `$${` is a literal `${`, left to right.
        ("$${A}", "${A}"),
        ("$$${A}", "$${A}"),
        ("$${A}${A}", "${A}x"),
        ("$${", "${"),
    ];
    for (text, want) in cases {
        assert_eq!(expanded(text, &vars).as_deref(), Ok(want), "{text:?}");
    }
}

#[test]
fn unset_empty_and_malformed_references_are_errors_at_their_dollar() {
    let vars = [("EMPTY", ""), ("SET", "v")];
    let err = |text: &str| expanded(text, &vars).unwrap_err();
    assert_eq!(
        err("a=${NODE_NAME}"),
        [Located {
            offset: 2,
            error: EnvError::Unset("NODE_NAME".into())
        }]
    );
    assert_eq!(err("${EMPTY}")[0].error, EnvError::Empty("EMPTY".into()));
    for text in [
        "${",
        "${}",
        "${1A}",
        "${A-B}",
        "${A",
        "x ${ A}",
        "${A:-default}",
    ] {
        let errors = err(text);
        assert_eq!(errors.len(), 1, "{text:?}: {errors:?}");
        assert_eq!(errors[0].error, EnvError::Malformed, "{text:?}");
        assert_eq!(errors[0].offset, text.find("${").unwrap(), "{text:?}");
    }
    // Every problem of a value, each at its own `${`.
    let offsets: Vec<usize> = err("${X}/${SET}/${EMPTY}/${")
        .iter()
        .map(|e| e.offset)
        .collect();
    assert_eq!(offsets, [0, 12, 21]);
    assert_eq!(
        EnvError::Unset("NODE_NAME".into()).to_string(),
        "environment variable NODE_NAME is not set"
    );
}

#[cfg(unix)]
#[test]
fn a_value_that_is_not_utf8_is_an_error() {
    use std::os::unix::ffi::OsStringExt;
    let lookup = |_: &str| Some(OsString::from_vec(vec![0xff, 0xfe]));
    let errors = expand("${BAD}", &lookup).unwrap_err();
    assert_eq!(errors[0].error, EnvError::NotUnicode("BAD".into()));
}

const NODE: &str = r#"apiVersion: informerd.io/v1alpha1
kind: Config
server:
  socket: ${SOCKET_DIR}/$${x}.sock
changeLog:
  maxEvents: ${MAX_EVENTS}
resources:
- name: pods
  apiVersion: v1
  kind: Pod
  fieldSelector: spec.nodeName=${NODE_NAME}
  labelSelector: "node=${NODE_NAME}"
  filter: 'object.metadata.name.matches("^a$")'
"#;

#[test]
fn a_node_scoped_configuration_takes_its_node_from_the_environment() {
    let env = table(&[
        ("NODE_NAME", "node-3"),
        ("MAX_EVENTS", "500"),
        ("SOCKET_DIR", "/var/run/informerd"),
    ]);
    let config = parse_with_env("node.yaml", NODE, &env).unwrap();
    let pods = &config.resources[0];
    assert_eq!(pods.scope, Scope::AllNamespaces);
    assert_eq!(pods.field_selector.as_deref(), Some("spec.nodeName=node-3"));
    assert_eq!(pods.label_selector.as_deref(), Some("node=node-3"));
    // An unquoted value is typed after the replacement, as written out.
    assert_eq!(config.change_log.max_events, 500);
    assert_eq!(
        config.server.socket.to_str(),
        Some("/var/run/informerd/${x}.sock")
    );
}

fn diagnostics(text: &str, vars: &[(&str, &str)]) -> Vec<String> {
    match parse_with_env("node.yaml", text, &table(vars)) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(ConfigError::Invalid(d)) => d.iter().map(ToString::to_string).collect(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn every_unset_variable_is_reported_at_the_column_of_its_reference() {
    assert_eq!(
        diagnostics(NODE, &[("MAX_EVENTS", "1")]),
        [
            "node.yaml:4:11: server.socket: environment variable SOCKET_DIR is not set",
            "node.yaml:11:32: resources[0].fieldSelector: environment variable NODE_NAME is not set",
            "node.yaml:12:24: resources[0].labelSelector: environment variable NODE_NAME is not set",
        ]
    );
    // In a block scalar, on its own line; twice in one value, each where it is written.
    let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  filter: |\n    object.spec.nodeName == \"${N}\" ||\n      object.metadata.name == \"${N}\"\n";
    assert_eq!(
        diagnostics(text, &[]),
        [
            "node.yaml:7:30: resources[0].filter: environment variable N is not set",
            "node.yaml:8:32: resources[0].filter: environment variable N is not set",
        ]
    );
    // Columns count characters, after text that is not ASCII on earlier lines and its own.
    let text = "# größe\napiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  labelSelector: \"é=${X}\"\n";
    assert_eq!(
        diagnostics(text, &[]),
        ["node.yaml:7:21: resources[0].labelSelector: environment variable X is not set"]
    );
    // A malformed reference names the escape.
    let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  labelSelector: 'a=$${b},c=${d'\n";
    let errors = diagnostics(text, &[]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("node.yaml:6:29: resources[0].labelSelector: '${' starts an environment variable reference"),
        "{errors:?}"
    );
    assert!(errors[0].contains("write $${ for a literal"), "{errors:?}");
}

#[test]
fn values_can_never_add_structure_and_keys_are_left_as_written() {
    // A value that reads as YAML stays one string of its field.
    let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  labelSelector: ${SEL}\n";
    let errors = diagnostics(text, &[("SEL", "a=b\n  filter: 'false'")]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("node.yaml:6:18: resources[0].labelSelector: invalid label selector"),
        "{errors:?}"
    );
    // A quoted scalar stays a string, whatever its value reads as.
    let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  fieldSelector: \"spec.nodeName=${N}\"\n  labelSelector: '${N}'\n";
    let config = parse_with_env("node.yaml", text, &table(&[("N", "12")])).unwrap();
    assert_eq!(config.resources[0].label_selector.as_deref(), Some("12"));
    // Keys are not expanded.
    let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  ${KEY}: x\n";
    let errors = diagnostics(text, &[("KEY", "labelSelector")]);
    assert!(errors[0].contains("unknown field `${KEY}`"), "{errors:?}");
}

#[test]
fn aliases_copy_the_expanded_value() {
    let env = table(&[("NODE_NAME", "n1")]);
    let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  fieldSelector: &node spec.nodeName=${NODE_NAME}\n- name: other\n  apiVersion: v1\n  kind: Pod\n  fieldSelector: *node\n";
    let config = parse_with_env("node.yaml", text, &env).unwrap();
    for r in &config.resources {
        assert_eq!(r.field_selector.as_deref(), Some("spec.nodeName=n1"));
    }
}
