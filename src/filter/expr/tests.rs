use serde_json::json;

use super::compile::{self, Compiled, ENV};
use super::*;
use crate::filter::FilterError;
use crate::vocab::path::FieldPath;
use informerd_store::fixtures::{all_pods, kube_system_pods, name};

const DAEMONSET: &str = r#"object.metadata.ownerReferences.exists(o, o.kind == "DaemonSet")"#;

#[test]
fn daemonset_filter_keeps_exactly_the_daemonset_pods_of_kube_system() {
    let filter = Filter::compile(DAEMONSET).unwrap();
    let mut kept: Vec<&str> = Vec::new();
    let pods = kube_system_pods();
    for pod in &pods {
        if filter.matches(pod).unwrap() {
            kept.push(name(pod));
        }
    }
    kept.sort();
    assert_eq!(kept, ["kindnet-4pxt7", "kube-proxy-hsdvx"]);
    // coredns (owned by a ReplicaSet) and the static pods (owned by the Node) are out.
    for pod in &pods {
        if name(pod).starts_with("coredns") || name(pod).starts_with("etcd") {
            assert!(!filter.matches(pod).unwrap());
        }
    }
}

#[test]
fn missing_fields_are_errors_and_has_guards_them() {
    let filter = Filter::compile(DAEMONSET).unwrap();
    // k9s pods have no ownerReferences: no such key, an error, never a panic.
    let errors = all_pods()
        .iter()
        .filter(|p| p["metadata"].get("ownerReferences").is_none())
        .map(|p| filter.matches(p).unwrap_err())
        .collect::<Vec<_>>();
    assert!(!errors.is_empty());
    for e in errors {
        assert!(
            matches!(e, FilterError::Evaluation(ref m) if m.contains("ownerReferences")),
            "{e}"
        );
    }
    let guarded = Filter::compile(&format!(
        "has(object.metadata.ownerReferences) && {DAEMONSET}"
    ))
    .unwrap();
    for pod in all_pods() {
        let expected = pod["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| o.iter().any(|o| o["kind"] == "DaemonSet"));
        assert_eq!(guarded.matches(&pod).unwrap(), expected, "{}", name(&pod));
    }
}

#[test]
fn has_and_common_expressions() {
    let pod = json!({
        "metadata": {"name": "a", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}
    });
    let unscheduled = json!({"metadata": {"name": "b"}, "spec": {"containers": []}});
    // (on the pod, on the unscheduled pod) and the expressions that evaluate to it.
    let cases: [((bool, bool), &[&str]); 3] = [
        (
            (true, false),
            &[
                "has(object.spec.nodeName)",
                "has(object.metadata.labels) && object.metadata.labels['app'] == 'web'",
                "has(object.metadata.labels) && 'app' in object.metadata.labels",
                "size(object.spec.containers) > 0",
                "object.metadata.name.lowerAscii() == 'a'",
                "has(object.status) && object.status.phase in ['Running', 'Pending']",
                "object.?spec.?nodeName.orValue('') == 'node-1'",
            ],
        ),
        ((false, true), &["!has(object.spec.nodeName)"]),
        (
            (true, true),
            &[
                "object.spec.containers.all(c, c.image.startsWith('nginx'))",
                "object.metadata.name.matches('^[a-z]$')",
                "object.kind == 'Pod' || true",
                "[1, 2].exists(object, object == 2)",
            ],
        ),
    ];
    let cases = cases
        .iter()
        .flat_map(|&((p, u), exprs)| exprs.iter().map(move |&e| (e, p, u)));
    for (expr, on_pod, on_unscheduled) in cases {
        let f = Filter::compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert_eq!(f.matches(&pod).unwrap(), on_pod, "{expr} on pod");
        assert_eq!(
            f.matches(&unscheduled).unwrap(),
            on_unscheduled,
            "{expr} on unscheduled"
        );
    }
    // A missing key in a map is an error, as in Kubernetes.
    let f = Filter::compile("object.metadata.labels['app'] == 'web'").unwrap();
    assert!(f.matches(&unscheduled).is_err());
}

#[test]
fn compile_rejects_syntax_errors_undeclared_variables_and_non_bools() {
    let err = Filter::compile("object.metadata.name ==").unwrap_err();
    assert!(matches!(err, FilterError::Compile(_)), "{err:?}");
    assert!(
        err.to_string().starts_with("CEL does not compile: "),
        "{err}"
    );
    assert!(
        err.to_string().ends_with(" at column 24 of the expression"),
        "{err}"
    );

    let err = Filter::compile("pod.metadata.name == 'a'").unwrap_err();
    assert_eq!(
        err.to_string(),
        "CEL does not compile: undeclared reference to 'pod' (the expression can use `object` only)"
    );
    let err = Filter::compile("has(object.spec) && self.x").unwrap_err();
    assert!(err.to_string().contains("'self'"), "{err}");

    for (expr, got) in [
        ("object.metadata.name", "string"),
        ("'x'", "string"),
        ("1 + 2", "int"),
        ("object.spec.containers", "list"),
        ("object", "map"),
    ] {
        let err = Filter::compile(expr).unwrap_err();
        assert!(
            matches!(&err, FilterError::NotBool { got: g, .. } if g == got),
            "{expr}: {err:?}"
        );
    }
    assert_eq!(
        Filter::compile("object.metadata.name")
            .unwrap_err()
            .to_string(),
        "the CEL expression must evaluate to a bool, but it evaluates to a string on a sample pod"
    );
    // Type names and namespaces are not variables.
    Filter::compile("type(object.metadata.name) == string").unwrap();
    Filter::compile("base64.encode(b'x') == 'eA=='").unwrap();
    Filter::compile("math.greatest(1, 2) == 2").unwrap();
}

/// The fields `f` reads, as written.
fn paths(f: &Filter) -> Vec<String> {
    let paths = f.field_paths().unwrap();
    paths.iter().map(|p| p.to_string()).collect()
}

#[test]
fn only_the_fields_read_are_converted() {
    let f = Filter::compile(DAEMONSET).unwrap();
    assert_eq!(
        f.field_paths().unwrap(),
        [FieldPath::parse("metadata.ownerReferences").unwrap()]
    );
    let f = Filter::compile(
        "has(object.spec.nodeName) && object.metadata.labels['app.kubernetes.io/name'] == 'x' \
         && size(object.spec) > 0",
    )
    .unwrap();
    assert_eq!(
        paths(&f),
        ["spec", r#"metadata.labels["app.kubernetes.io/name"]"#]
    );
    assert!(Filter::compile("object == {}")
        .unwrap()
        .field_paths()
        .is_none());
    assert!(Filter::compile("true")
        .unwrap()
        .field_paths()
        .unwrap()
        .is_empty());
    // A variable bound by a comprehension shadows `object`.
    let f = Filter::compile("object.spec.containers.exists(object, object.name == 'c')").unwrap();
    assert_eq!(paths(&f), ["spec.containers"]);
}

#[test]
fn pruned_and_whole_conversion_agree_on_fixtures() {
    let exprs = [
        DAEMONSET,
        "has(object.spec.nodeName) && object.spec.nodeName.startsWith('v1.36')",
        "object.status.phase == 'Running' && object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
        "object.metadata.labels['k8s-app'] == 'kube-dns'",
        "has(object.metadata.annotations) && 'kubernetes.io/config.source' in object.metadata.annotations",
        "object.spec.containers.exists(c, has(c.ports))",
        "object.metadata.name.size() > 10",
    ];
    for expr in exprs {
        let f = Filter::compile(expr).unwrap();
        let whole = Compiled {
            source: expr.to_string(),
            program: ENV.compile(expr).unwrap(),
            access: None,
        };
        for pod in all_pods() {
            let pruned = f.inner.evaluate(&pod);
            let full = whole.evaluate(&pod);
            assert_eq!(pruned, full, "{expr} on {}", name(&pod));
        }
    }
}

#[test]
fn strings_expr_paths() {
    let pod = &kube_system_pods()[0];
    let by_path = |p: &str| StringsExpr::path(p).unwrap().values(pod);
    assert_eq!(by_path("spec.nodeName"), ["v1.36-control-plane"]);
    assert_eq!(
        by_path("metadata.ownerReferences[*].uid"),
        [pod["metadata"]["ownerReferences"][0]["uid"]
            .as_str()
            .unwrap()]
    );
    assert_eq!(by_path(r#"metadata.labels["k8s-app"]"#), ["kube-dns"]);
    assert_eq!(by_path("metadata.generation"), ["1"]);
    assert!(by_path("spec.nope").is_empty());
    assert!(by_path("metadata").is_empty());
    let names = by_path("spec.containers[*].name");
    assert_eq!(names, ["coredns"]);
    let obj = json!({"a": ["x", "y", "x", {"b": 1}], "m": {"k1": {"v": "1"}, "k2": {"v": "2"}}});
    assert_eq!(StringsExpr::path("a").unwrap().values(&obj), ["x", "y"]);
    assert_eq!(
        StringsExpr::path("m[*].v").unwrap().values(&obj),
        ["1", "2"]
    );
    assert!(StringsExpr::path("a..b").is_err());
}

#[test]
fn strings_expr_cel() {
    let owners = StringsExpr::cel("object.metadata.ownerReferences.map(o, o.uid)").unwrap();
    for pod in kube_system_pods() {
        let expected: Vec<String> = pod["metadata"]["ownerReferences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["uid"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(owners.values(&pod), expected);
    }
    let node = StringsExpr::cel("object.spec.nodeName").unwrap();
    assert_eq!(node.values(&kube_system_pods()[0]), ["v1.36-control-plane"]);
    assert!(node.values(&json!({"spec": {}})).is_empty());
    assert!(node.try_values(&json!({"spec": {}})).is_err());
    let null = StringsExpr::cel("has(object.spec.nodeName) ? object.spec.nodeName : null").unwrap();
    assert!(null.try_values(&json!({"spec": {}})).unwrap().is_empty());

    let err = StringsExpr::cel("size(object.metadata.name)").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the CEL expression must evaluate to a string or a list of strings, but it evaluates to \
         a int on a sample pod"
    );
    let err = StringsExpr::cel("[object.metadata.name, 1]").unwrap_err();
    assert!(matches!(err, FilterError::NotStrings { .. }), "{err:?}");
    assert!(StringsExpr::cel("nope").is_err());
}

#[test]
fn filters_are_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<Filter>();
    assert_send_sync::<StringsExpr>();
}

#[test]
fn nested_expressions_compile_on_a_worker_sized_stack() {
    // Found by fuzzing: 12 nested parentheses overflowed the 2 MiB stack of the thread that
    // compiled them (in a debug build), and 64 nested lists the one that evaluated them,
    // aborting the process; a Watch request's predicate_cel is compiled and evaluated on a
    // Tokio worker, whose stack is that size.
    let on_2_mib = |text: String| {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let filter = Filter::compile(&text).map_err(|e| e.to_string())?;
                let predicate = ChangePredicate::compile(&text).map_err(|e| e.to_string())?;
                let object = json!({"spec": null, "a": {"a": {}}});
                Ok::<_, String>((filter.matches(&object), predicate.matches(&object, &object)))
            })
            .unwrap()
            .join()
            .unwrap()
    };
    let deepest = compile::MAX_NESTING - 3;
    for text in [
        format!("{}object.spec == null{}", "(".repeat(90), ")".repeat(90)),
        format!("size({}1{}) == 1", "[".repeat(deepest), "]".repeat(deepest)),
        format!("{}true", "true ? true : ".repeat(deepest)),
        format!("has(object{})", ".a".repeat(deepest)),
    ] {
        let (filter, _) = on_2_mib(text.clone()).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(
            matches!(filter, Ok(_) | Err(FilterError::Evaluation(_))),
            "{text}: {filter:?}"
        );
    }
    let err = on_2_mib(format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000))).unwrap_err();
    assert!(err.contains("Recursion limit of 96 exceeded"), "{err}");
    let err = on_2_mib(format!("size({}1{}) == 1", "[".repeat(64), "]".repeat(64))).unwrap_err();
    assert!(
        err.contains("nests 67 levels deep, more than the 32 allowed"),
        "{err}"
    );
    let err = on_2_mib(format!("has(object{})", ".a".repeat(10_000))).unwrap_err();
    assert!(err.contains("levels deep"), "{err}");
}

/// An object with enough keys that two hash orders almost never agree by chance (10! orders).
fn ten_keys() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "spec": null, "status": null,
           "metadata": {"name": "a", "labels": {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}},
           "f": 1, "g": 2, "h": 3, "i": 4, "j": 5})
}

#[test]
fn expressions_that_iterate_a_map_give_one_object_one_value() {
    // CEL leaves the order of a map's keys unspecified; informerd fixes it per process, so an
    // index key or a change predicate never flaps on one object (see value.rs). Not covered:
    // a map that CEL itself copies, as into a list literal (`[object][0]`), gets a new order.
    let object = ten_keys();
    for text in [
        r#"object.map(k, k).join("")"#,
        r#"dyn(object).map(k, k).join("")"#,
        r#"(true ? object : {}).map(k, k).join("")"#,
        r#"object.metadata.labels.map(k, k + "=" + object.metadata.labels[k]).join(",")"#,
    ] {
        let expr = StringsExpr::cel(text).unwrap();
        let first = expr.values(&object);
        assert_eq!(first.len(), 1, "{text}");
        for _ in 0..20 {
            assert_eq!(expr.values(&object), first, "{text}");
        }
    }
    let predicate = ChangePredicate::compile("object.map(k, k) != oldObject.map(k, k)").unwrap();
    for _ in 0..20 {
        assert!(!predicate.matches(&object, &ten_keys()));
    }
}

#[test]
fn the_label_index_keys_each_label_by_namespace() {
    let pod = json!({"metadata": {"namespace": "web", "labels": {"app": "a", "tier": "db"}}});
    assert_eq!(
        StringsExpr::labels().values(&pod),
        ["web/app=a", "web/tier=db"]
    );
    let node = json!({"metadata": {"labels": {"zone": "z1"}}});
    assert_eq!(StringsExpr::labels().values(&node), ["zone=z1"]);
    assert!(StringsExpr::labels()
        .values(&json!({"metadata": {}}))
        .is_empty());
    assert_eq!(StringsExpr::label_key(Some("web"), "app", "a"), "web/app=a");
}
