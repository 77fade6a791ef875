//! Tests of `bench`: reading dumps (kinds, order, errors that say where) and measuring them
//! (what each step leaves out, namespaceSelector, objects of other kinds).

use informerd::config::{self, Config, ResourceConfig};
use serde_json::{json, Value};

use super::{
    dump::{parse_dump, Dump},
    measure::measure,
    report::Report,
    table::table,
    BenchError,
};

fn pod(ns: &str, name: &str, owner: &str) -> Value {
    json!({
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                     "resourceVersion": "1", "labels": {"app": name},
                     "ownerReferences": [{"kind": owner, "name": "o", "uid": "u"}]},
        "spec": {"nodeName": "node-1"},
        "status": {"phase": "Running"}
    })
}

fn typed(mut v: Value) -> Value {
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Pod");
    v
}

fn parse(text: &str) -> Result<Dump, BenchError> {
    parse_dump("dump.json", text)
}

/// `apiVersion kind namespace/name` of each object, `-` for a missing apiVersion or kind.
fn types(dump: &Dump) -> Vec<String> {
    dump.items
        .iter()
        .map(|i| {
            let or_dash = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
            format!("{} {} {}", or_dash(&i.api_version), or_dash(&i.kind), i.key)
        })
        .collect()
}

#[test]
fn a_pod_list_gives_its_items_the_kind_it_names() {
    let text = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {},
                      "items": [pod("a", "x", "DaemonSet"), pod("b", "y", "Job")]})
    .to_string();
    let dump = parse(&text).unwrap();
    assert_eq!(types(&dump), ["v1 Pod a/x", "v1 Pod b/y"]);
    assert_eq!(
        dump.items[0].json_bytes,
        pod("a", "x", "DaemonSet").to_string().len()
    );
}

#[test]
fn a_kubectl_list_keeps_each_items_own_kind() {
    let mut deployment = typed(pod("a", "d", "X"));
    deployment["apiVersion"] = json!("apps/v1");
    deployment["kind"] = json!("Deployment");
    let text = serde_json::to_string_pretty(&json!({"apiVersion": "v1", "kind": "List",
        "items": [typed(pod("a", "x", "DaemonSet")), deployment, pod("a", "bare", "X")]}))
    .unwrap();
    let dump = parse(&text).unwrap();
    assert_eq!(
        types(&dump),
        ["v1 Pod a/x", "apps/v1 Deployment a/d", "- - a/bare"]
    );
    // Compact JSON, whatever the indentation of the input.
    assert_eq!(
        dump.items[0].json_bytes,
        typed(pod("a", "x", "DaemonSet")).to_string().len()
    );
}

#[test]
fn single_objects_and_json_lines_are_read_in_order() {
    let one = typed(pod("a", "x", "DaemonSet")).to_string();
    assert_eq!(types(&parse(&one).unwrap()).len(), 1);
    let lines = format!(
        "{one}\n{}\n\n{}\n",
        typed(pod("a", "y", "Job")),
        json!({"kind": "PodList", "apiVersion": "v1", "items": [pod("b", "z", "Job")]})
    );
    let dump = parse(&lines).unwrap();
    assert_eq!(types(&dump), ["v1 Pod a/x", "v1 Pod a/y", "v1 Pod b/z"]);
    assert!(
        parse(r#"{"kind": "PodList", "apiVersion": "v1", "items": null}"#)
            .unwrap()
            .items
            .is_empty()
    );
}

#[test]
fn errors_say_where() {
    let err = |text: &str| parse(text).unwrap_err().to_string();
    assert_eq!(
        err("{\"kind\": \"List\",\n \"items\": [}"),
        "dump.json:2:12: expected value"
    );
    assert_eq!(
        err(&format!(
            "{}\n{{\"kind\": \"PodList\", \"items\": [{{\"metadata\": {{}}}}]}}",
            typed(pod("a", "x", "Job"))
        )),
        "dump.json:2: items[0]: no metadata.name; every object of the input needs one"
    );
    assert_eq!(
        err(r#"{"type": "ADDED", "object": {}}"#),
        "dump.json:1: this is a watch event, not an object: give the objects, as `kubectl \
         get pods -A -o json` prints them"
    );
    assert_eq!(
        err("[1]"),
        "dump.json:1: expected a Kubernetes List or object (a JSON object), found a list"
    );
    assert_eq!(
        err(r#"{"items": [3]}"#),
        "dump.json:1: items[0]: expected an object, found a number"
    );
    // (Objects are read field by field: an array is not taken for an object's fields.)
    assert_eq!(
        err(r#"{"items": [["Pod"]]}"#),
        "dump.json:1: items[0]: expected an object, found a list"
    );
    assert!(parse(r#"{"kind": "PodList", "items": null}"#)
        .expect("a list with no items")
        .items
        .is_empty());
    assert!(err(r#"{"metadata": {"name": "x", "labels": {"a": 1}}}"#)
        .starts_with("dump.json:1: not a Kubernetes object: "));
    assert_eq!(
        err(" \n "),
        "dump.json: the input is empty; expected a List as `kubectl get pods -A -o json` prints it"
    );
}

fn config(resource: &str) -> Config {
    config::parse(
        "c.yaml",
        &format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n{resource}"),
    )
    .unwrap()
}

fn run_on(cfg: &Config, items: Vec<Value>) -> Report {
    let text = json!({"kind": "PodList", "apiVersion": "v1", "items": items}).to_string();
    let dump = parse(&text).unwrap();
    let resources: Vec<&ResourceConfig> = cfg.resources.iter().collect();
    measure(cfg, &resources, &dump, "dump.json")
}

#[test]
fn scope_selectors_and_filter_each_count_what_they_leave_out() {
    let cfg = config(
        "- apiVersion: v1\n  kind: Pod\n  namespaces: [a, b]\n  labelSelector: app!=l\n  \
         fieldSelector: metadata.name!=f\n  filter: 'object.metadata.ownerReferences.exists(o, o.kind == \"DaemonSet\")'\n  \
         transform:\n    keep: [metadata.name]\n",
    );
    let mut no_owner = pod("b", "e", "X");
    no_owner["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    let report = run_on(
        &cfg,
        vec![
            pod("a", "x", "DaemonSet"),
            pod("b", "y", "DaemonSet"),
            pod("c", "z", "DaemonSet"), // out of scope
            pod("a", "l", "DaemonSet"), // label selector
            pod("a", "f", "DaemonSet"), // field selector
            pod("a", "j", "Job"),       // filter
            no_owner,                   // filter: CEL error
            pod("a", "x", "DaemonSet"), // the same again
        ],
    );
    let r = &report.resources[0];
    assert_eq!(r.objects_read, 8);
    assert_eq!(r.left_out_by_namespace_scope, 1);
    assert_eq!(r.left_out_by_label_selector, Some(1));
    assert_eq!(r.left_out_by_field_selector, Some(1));
    assert_eq!(r.left_out_by_filter, Some(2));
    assert_eq!(r.filter_errors, 1);
    assert_eq!(r.same_name_as_an_earlier_object, 1);
    assert_eq!(r.objects_kept, 2);
    assert_eq!(r.scope, "namespaces a, b");
    let full = pod("a", "x", "DaemonSet").to_string().len();
    assert_eq!(r.per_object.full_json_bytes_kept, Some(full));
    assert!(r.per_object.transformed_json_bytes.unwrap() < full);
    assert!(r.store_encoded_bytes > 0 && r.store_interned_bytes > 0);
    assert!(report.notes[0].contains("evaluated here"));
    let text = table(&report);
    assert!(text.contains("objects kept"), "{text}");
}

#[test]
fn a_namespace_selector_counts_every_namespace_and_says_so() {
    let cfg =
        config("- apiVersion: v1\n  kind: Pod\n  namespaceSelector:\n    matchLabels: {team: x}\n");
    let report = run_on(&cfg, vec![pod("a", "x", "Job"), pod("b", "y", "Job")]);
    assert_eq!(report.resources[0].objects_kept, 2);
    assert_eq!(report.resources[0].left_out_by_filter, None);
    assert!(report.notes[0].contains("namespaceSelector (team=x)"));
    assert!(report.notes[0].contains("every namespace was counted as matching"));
}

#[test]
fn objects_of_other_kinds_are_left_to_other_resources() {
    let cfg = config("- apiVersion: apps/v1\n  kind: Deployment\n");
    let report = run_on(&cfg, vec![pod("a", "x", "Job")]);
    assert_eq!(report.resources[0].objects_read, 0);
    assert_eq!(report.objects_not_configured, 1);
}
