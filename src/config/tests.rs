use std::path::PathBuf;

use super::*;
use informerd_store::fixtures::{all_pods, kube_system_pods, name};

const FULL: &str = r#"apiVersion: informerd.io/v1alpha1
kind: Config
server:
  socket: /run/informerd/informerd.sock
  listen: 127.0.0.1:7070
changeLog:
  maxEvents: 5000
  maxBytes: 16Mi
resources:
- name: pods
  apiVersion: v1
  kind: Pod
  namespaces: [kube-system, default]
  labelSelector: "app=foo,tier in (a,b)"
  fieldSelector: "spec.nodeName=node-1"
  filter: 'object.metadata.ownerReferences.exists(o, o.kind == "DaemonSet")'
  transform:
    drop:
    - metadata.managedFields
    - metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]
  indexes:
  - name: node
    path: spec.nodeName
  - name: owner
    cel: 'object.metadata.ownerReferences.map(o, o.uid)'
- apiVersion: apps/v1
  kind: Deployment
  namespaceSelector:
    matchLabels: {team: x}
    matchExpressions:
    - {key: env, operator: In, values: [prod]}
  transform:
    keep: [spec.replicas, status]
- name: secrets
  apiVersion: v1
  kind: Secret
  allowSecrets: true
"#;

/// The diagnostics of `text`, which must be refused.
fn errors(text: &str) -> Vec<String> {
    match parse("informerd.yaml", text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.diagnostics().iter().map(|d| d.to_string()).collect(),
    }
}

fn error(text: &str) -> String {
    let errors = errors(text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors.into_iter().next().unwrap()
}

/// A minimal valid file with `resource` as the only resource's extra fields.
fn with_resource(extra: &str) -> String {
    format!(
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n{extra}"
    )
}

#[test]
fn a_full_example_parses() {
    let config = parse("informerd.yaml", FULL).unwrap();
    assert_eq!(
        config.server,
        ServerConfig {
            socket: PathBuf::from("/run/informerd/informerd.sock"),
            socket_mode: DEFAULT_SOCKET_MODE,
            listen: Some("127.0.0.1:7070".parse().unwrap()),
            tls: None,
            metrics: None,
            authorization: Default::default(),
            socket_handover_timeout: crate::config::model::DEFAULT_SOCKET_HANDOVER_TIMEOUT,
        }
    );
    assert_eq!(
        config.change_log,
        ChangeLogConfig {
            max_events: 5000,
            max_bytes: 16 << 20
        }
    );
    assert_eq!(config.resources.len(), 3);
    let pods = &config.resources[0];
    assert_eq!(pods.name, "pods");
    assert_eq!(
        (
            pods.group.as_str(),
            pods.version.as_str(),
            pods.kind.as_str()
        ),
        ("", "v1", "Pod")
    );
    assert_eq!(
        pods.scope,
        Scope::Namespaces(vec!["kube-system".into(), "default".into()])
    );
    assert_eq!(
        pods.label_selector.as_deref(),
        Some("app=foo,tier in (a,b)")
    );
    assert_eq!(pods.field_selector.as_deref(), Some("spec.nodeName=node-1"));
    assert!(pods.filter.is_some());
    assert_eq!(pods.transform.drop_paths().len(), 2);
    let names: Vec<&str> = pods.indexes.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["node", "owner"]);
    assert!(!pods.allow_secrets);

    let deployments = &config.resources[1];
    assert_eq!(deployments.name, "deployment");
    assert_eq!(deployments.api_version, "apps/v1");
    assert_eq!(
        (deployments.group.as_str(), deployments.version.as_str()),
        ("apps", "v1")
    );
    match &deployments.scope {
        Scope::Selector(s) => assert_eq!(s.to_string(), "team=x,env in (prod)"),
        other => panic!("{other:?}"),
    }
    assert!(deployments.filter.is_none());
    assert_eq!(deployments.transform.keep_paths().len(), 2);
    assert!(config.resources[2].allow_secrets);
    assert_eq!(config.resource("secrets").unwrap().kind, "Secret");
}

#[test]
fn defaults() {
    let config = parse("c.yaml", &with_resource("")).unwrap();
    assert_eq!(config.server.socket, PathBuf::from(DEFAULT_SOCKET));
    assert_eq!(config.server.listen, None);
    assert_eq!(config.server.socket_mode, 0o660);
    assert_eq!(config.change_log.max_events, DEFAULT_MAX_EVENTS);
    assert_eq!(config.change_log.max_bytes, DEFAULT_MAX_BYTES);
    let r = &config.resources[0];
    assert_eq!(r.name, "pod");
    assert_eq!(r.scope, Scope::AllNamespaces);
    assert!(r.transform.is_identity());
    assert!(r.filter.is_none() && r.label_selector.is_none() && r.indexes.is_empty());
}

#[test]
fn the_example_config_parses_and_keeps_daemonset_pods() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/informerd.yaml");
    let config = load(&path).unwrap();
    let pods = &config.resources[0];
    assert_eq!(pods.kind, "Pod");
    assert!(pods.indexes.iter().any(|i| i.name == "node"));
    let filter = pods.filter.as_ref().unwrap();
    let mut kept = Vec::new();
    for pod in kube_system_pods() {
        if filter.matches(&pod).unwrap_or(false) {
            let mut stored = pod.clone();
            pods.transform.apply(&mut stored);
            assert!(stored["metadata"].get("managedFields").is_none());
            kept.push(name(&pod).to_string());
        }
    }
    kept.sort();
    assert_eq!(kept, ["kindnet-4pxt7", "kube-proxy-hsdvx"]);
    for pod in all_pods() {
        let mut stored = pod.clone();
        pods.transform.apply(&mut stored);
        let annotations = &stored["metadata"]["annotations"];
        assert!(annotations
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .is_none());
    }
}

#[test]
fn serde_errors_carry_line_column_and_path() {
    // An unknown field, at its key.
    let text = with_resource("  colour: blue\n");
    let e = error(&text);
    assert!(
        e.starts_with("informerd.yaml:6:3: resources[0].colour: unknown field `colour`, expected one of `name`, `apiVersion`"),
        "{e}"
    );
    // At the top level.
    let e = error("apiVersion: informerd.io/v1alpha1\nkind: Config\nresource: []\n");
    assert!(
        e.starts_with("informerd.yaml:3:1: resource: unknown field `resource`"),
        "{e}"
    );
    // A wrong type, at the value.
    let e = error(&with_resource("  namespaces: default\n"));
    assert_eq!(
        e,
        "informerd.yaml:6:15: resources[0].namespaces: invalid type: string \"default\", expected a sequence"
    );
    let e = error(&with_resource("  allowSecrets: yes\n"));
    assert_eq!(
        e,
        "informerd.yaml:6:17: resources[0].allowSecrets: invalid type: string \"yes\", expected a boolean"
    );
    let e = error(&with_resource(
        "  namespaceSelector:\n    matchLabels: {team: 1}\n",
    ));
    assert_eq!(
        e,
        "informerd.yaml:7:25: resources[0].namespaceSelector.matchLabels.team: invalid type: integer `1`, expected a string"
    );
    // A missing field, at the map that lacks it.
    let e = error("apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- kind: Pod\n");
    assert_eq!(
        e,
        "informerd.yaml:4:3: resources[0]: missing field `apiVersion`"
    );
    // YAML itself.
    let e = error("apiVersion: informerd.io/v1alpha1\nkind: Config\nresources: [\n");
    assert_eq!(e, "informerd.yaml:3:12: invalid YAML: unclosed bracket '['");
    let e = error(&with_resource("  kind: Pod\n"));
    assert_eq!(
        e,
        "informerd.yaml:6:3: resources[0].kind: duplicate key 'kind'"
    );
    assert_eq!(
        error(""),
        "informerd.yaml:1:1: the file is empty; expected apiVersion: informerd.io/v1alpha1, kind: Config and resources"
    );
    assert_eq!(
        error("- a\n"),
        "informerd.yaml:1:1: expected a map with apiVersion, kind and resources"
    );
}

/// One table of every field rule's message, longer than a function should be so that the
/// messages users read can be compared (and reworded) side by side.
#[test]
#[allow(clippy::too_many_lines)] // the table above says why
fn semantic_errors_carry_line_column_and_path() {
    let cases: Vec<(String, &str)> = vec![
        (
            with_resource("  filter: 'object.metadata.name =='\n"),
            "informerd.yaml:6:11: resources[0].filter: CEL does not compile: ",
        ),
        (
            with_resource("  filter: object.metadata.name\n"),
            "informerd.yaml:6:11: resources[0].filter: the CEL expression must evaluate to a bool, but it evaluates to a string on a sample pod",
        ),
        (
            with_resource("  labelSelector: 'app=~web'\n"),
            "informerd.yaml:6:18: resources[0].labelSelector: invalid label selector: unknown operator '=~' at column 4",
        ),
        (
            with_resource("  fieldSelector: spec.nodeName\n"),
            "informerd.yaml:6:18: resources[0].fieldSelector: invalid field selector: 'spec.nodeName' has no operator (=, ==, !=) at column 1",
        ),
        (
            with_resource("  shardSelector: \"shardRange(object.metadata.uid, '0x1', '0x2')\"\n"),
            "informerd.yaml:6:18: resources[0].shardSelector: hexStart must be a 0x-prefixed 16-digit hex value, got \"0x1\" (did you mean \"0x0000000000000001\"?)",
        ),
        (
            with_resource("  transform:\n    drop: [metadata.managedFields, 'spec..x']\n"),
            "informerd.yaml:7:36: resources[0].transform.drop[1]: invalid path 'spec..x': unexpected '.'",
        ),
        (
            with_resource("  transform:\n    drop: [metadata.name]\n"),
            "informerd.yaml:7:12: resources[0].transform.drop[0]: 'metadata.name' would remove the identity field metadata.name",
        ),
        (
            with_resource("  namespaces: [a]\n  namespaceSelector: {}\n"),
            "informerd.yaml:7:22: resources[0].namespaceSelector: set either namespaces or namespaceSelector, not both",
        ),
        (
            with_resource("  namespaces: [kube-system, Bad_Name]\n"),
            "informerd.yaml:6:29: resources[0].namespaces[1]: invalid namespace 'Bad_Name': a lowercase RFC 1123 label",
        ),
        (
            with_resource("  namespaces: []\n"),
            "informerd.yaml:6:15: resources[0].namespaces: the list is empty",
        ),
        (
            with_resource("  namespaceSelector:\n    matchExpressions:\n    - key: env\n      operator: Matches\n"),
            "informerd.yaml:9:17: resources[0].namespaceSelector.matchExpressions[0].operator: invalid label selector: unknown operator 'Matches'",
        ),
        (
            with_resource("  indexes:\n  - name: node\n"),
            "informerd.yaml:7:5: resources[0].indexes[0]: set path (a field path such as spec.nodeName), cel",
        ),
        (
            with_resource("  indexes:\n  - name: node\n    path: spec.nodeName\n    cel: object.spec.nodeName\n"),
            "informerd.yaml:7:5: resources[0].indexes[0]: set either path or cel, not both",
        ),
        (
            with_resource("  indexes:\n  - name: node\n    cel: size(object.spec)\n"),
            "informerd.yaml:8:10: resources[0].indexes[0].cel: the CEL expression must evaluate to a string or a list of strings",
        ),
        (
            with_resource("  indexes:\n  - name: node\n    path: spec.containers[0]\n"),
            "informerd.yaml:8:11: resources[0].indexes[0].path: invalid path 'spec.containers[0]': list indexes are not supported",
        ),
        (
            with_resource("  indexes:\n  - {name: labels, labels: true, path: a}\n"),
            "informerd.yaml:7:5: resources[0].indexes[0]: set one of path, cel or labels: true, not several",
        ),
        (
            with_resource("  indexes:\n  - {name: a, labels: true}\n  - {name: b, labels: true}\n"),
            "informerd.yaml:8:23: resources[0].indexes[1].labels: the resource already has a label index ('a'); one is enough",
        ),
        (
            with_resource("  indexes:\n  - {name: node, path: a}\n  - {name: node, path: b}\n"),
            "informerd.yaml:8:12: resources[0].indexes[1].name: duplicate index name 'node'",
        ),
        (
            with_resource("  name: Pods\n"),
            "informerd.yaml:6:9: resources[0].name: invalid name 'Pods': a lowercase RFC 1123 label",
        ),
        (
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Secret\n".to_string(),
            "informerd.yaml:5:9: resources[0].kind: caching Secrets needs an explicit opt-in: set `allowSecrets: true`",
        ),
        (
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: ''\n".to_string(),
            "informerd.yaml:5:9: resources[0].kind: kind is empty",
        ),
        (
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: apps/v1/x\n  kind: Deployment\n".to_string(),
            "informerd.yaml:4:15: resources[0].apiVersion: 'apps/v1/x' is not an apiVersion",
        ),
        (
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: core/v1\n  kind: Pod\n".to_string(),
            "informerd.yaml:4:15: resources[0].apiVersion: the core group is written without a group: apiVersion: v1",
        ),
        (
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nchangeLog:\n  maxBytes: 64MB\nresources:\n- apiVersion: v1\n  kind: Pod\n".to_string(),
            "informerd.yaml:4:13: changeLog.maxBytes: '64MB' has an unknown suffix 'MB'",
        ),
        (
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n  listen: 0.0.0.0:7070\nresources:\n- apiVersion: v1\n  kind: Pod\n".to_string(),
            "informerd.yaml:4:11: server.listen: 0.0.0.0:7070 is not a loopback address",
        ),
        (
            "apiVersion: informerd.io/v1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n".to_string(),
            "informerd.yaml:1:13: apiVersion: unsupported apiVersion 'informerd.io/v1', expected informerd.io/v1alpha1",
        ),
        (
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources: []\n".to_string(),
            "informerd.yaml:3:12: resources: no resources",
        ),
    ];
    for (text, expected) in cases {
        let e = error(&text);
        assert!(
            e.starts_with(expected),
            "\n got: {e}\nwant: {expected}...\n{text}"
        );
    }
}

#[test]
fn duplicate_names_and_several_errors() {
    let text = "apiVersion: informerd.io/v1alpha1
kind: Config
resources:
- apiVersion: v1
  kind: Pod
- apiVersion: v1
  kind: Pod
- name: nodes
  apiVersion: v1
  kind: Node
- name: nodes
  apiVersion: v1
  kind: Node
  filter: 'nope'
";
    assert_eq!(
        errors(text),
        [
            "informerd.yaml:6:3: resources[1]: duplicate name 'pod', also used by resources[0] (the default name, the lowercase kind); set `name` to tell them apart",
            "informerd.yaml:14:11: resources[3].filter: CEL does not compile: undeclared reference to 'nope' (the expression can use `object` only)",
        ]
    );
    let text = text.replace("  filter: 'nope'\n", "");
    assert_eq!(
        errors(&text),
        [
            "informerd.yaml:6:3: resources[1]: duplicate name 'pod', also used by resources[0] (the default name, the lowercase kind); set `name` to tell them apart",
            "informerd.yaml:11:9: resources[3].name: duplicate name 'nodes', also used by resources[2]",
        ]
    );
    // ConfigError's Display is one line per problem.
    let e = parse("informerd.yaml", "apiVersion: x\nkind: y\nresources: []\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "informerd.yaml:1:13: apiVersion: unsupported apiVersion 'x', expected informerd.io/v1alpha1\n\
         informerd.yaml:2:7: kind: unsupported kind 'y', expected Config\n\
         informerd.yaml:3:12: resources: no resources: list at least one resource to cache (apiVersion and kind)"
    );
}

#[test]
fn later_errors_point_into_the_file() {
    let config = parse("informerd.yaml", FULL).unwrap();
    let e = config.error_at(
        1,
        "kind",
        "no such kind in the cluster's discovery: apps/v1 Deployment",
    );
    assert_eq!(
        e.to_string(),
        "informerd.yaml:27:9: resources[1].kind: no such kind in the cluster's discovery: apps/v1 Deployment"
    );
    // A field that is not written falls back to its resource.
    let e = config.error_at(2, "namespaces", "Secret is cluster-scoped");
    assert_eq!(
        e.to_string(),
        "informerd.yaml:34:3: resources[2].namespaces: Secret is cluster-scoped"
    );
    let e = config.error_at_path("server.listen", "address in use");
    assert_eq!(
        e.to_string(),
        "informerd.yaml:5:11: server.listen: address in use"
    );
}

#[test]
fn load_names_the_file() {
    let e = load(Path::new("does/not/exist.yaml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("does/not/exist.yaml: cannot read the configuration: "),
        "{e}"
    );
}

#[test]
fn config_is_send_sync() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<Config>();
}

#[test]
fn a_non_loopback_address_needs_tls() {
    let text = |server: &str| {
        format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n{server}resources:\n- apiVersion: v1\n  kind: Pod\n")
    };
    let err = parse("t.yaml", &text("  listen: 0.0.0.0:7070\n"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("t.yaml:4:11: server.listen"), "{err}");
    assert!(err.contains("needs server.tls"), "{err}");

    let config = parse(
        "t.yaml",
        &text("  listen: 0.0.0.0:7070\n  tls:\n    certFile: c.pem\n    keyFile: k.pem\n"),
    )
    .unwrap();
    let tls = config.server.tls.expect("tls");
    assert_eq!(tls.cert_file, PathBuf::from("c.pem"));
    assert_eq!(tls.client_ca_file, None);

    let err = parse(
        "t.yaml",
        &text("  listen: 0.0.0.0:7070\n  tls:\n    certFile: c.pem\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("server.tls.keyFile: is required"), "{err}");

    let err = parse(
        "t.yaml",
        &text("  tls:\n    certFile: c.pem\n    keyFile: k.pem\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("server.tls: TLS applies to the TCP address"),
        "{err}"
    );
}

#[test]
fn the_socket_mode_is_octal_digits_in_a_string() {
    let server = |mode: &str| {
        format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n  socketMode: {mode}\nresources:\n- apiVersion: v1\n  kind: Pod\n"
        )
    };
    let config = parse("c.yaml", &server("\"0600\"")).unwrap();
    assert_eq!(config.server.socket_mode, 0o600);
    for bad in ["\"0669\"", "\"1777\"", "\"\"", "\"rw-rw----\""] {
        let err = parse("c.yaml", &server(bad)).unwrap_err().to_string();
        assert!(
            err.starts_with("c.yaml:4:15: server.socketMode: ")
                && err.contains("write octal permission bits as a quoted string"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn the_metrics_address_is_any_ip_and_port_without_tls() {
    let server = |metrics: &str| {
        format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n  metrics: {metrics}\nresources:\n- apiVersion: v1\n  kind: Pod\n"
        )
    };
    let config = parse("c.yaml", &server("0.0.0.0:9477")).unwrap();
    assert_eq!(config.server.metrics, Some("0.0.0.0:9477".parse().unwrap()));
    assert_eq!(
        parse("c.yaml", &with_resource("")).unwrap().server.metrics,
        None
    );
    for bad in ["\"9477\"", "localhost:9477", "\"\""] {
        let err = parse("c.yaml", &server(bad)).unwrap_err().to_string();
        assert!(
            err.starts_with("c.yaml:4:12: server.metrics: ") && err.contains("expected IP:PORT"),
            "{bad}: {err}"
        );
    }
    // A failure found later (the port is taken) points at the same place.
    let config = parse("c.yaml", &server("127.0.0.1:9477")).unwrap();
    assert_eq!(
        config.error_at_path("server.metrics", "in use").to_string(),
        "c.yaml:4:12: server.metrics: in use"
    );
}

#[test]
fn a_key_with_a_line_break_stays_on_its_diagnostic_line() {
    // A YAML complex key (`? …`) may hold a line break; the diagnostic names it escaped, so
    // that every diagnostic is one `FILE:LINE:COLUMN: …` line.
    let text = "? \"app\\nname\"\n: 1\n";
    let message = match parse("informerd.yaml", text) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.starts_with("informerd.yaml:1:"), "{message}");
    assert!(message.contains("app\\nname"), "{message}");
}
