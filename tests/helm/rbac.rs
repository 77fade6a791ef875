//! The chart's RBAC against `informerd rbac`: for each configuration the chart renders, the
//! objects are those `informerd rbac` prints for it; the chart's table of kinds (kinds.yaml)
//! lists the kinds informerd's does, with their plurals and scopes; a kind it does not know is
//! refused, and rbac.kinds names a custom one.

use std::collections::BTreeMap;

use informerd_testkit::{documents, repo_root};
use serde_yaml::Value;

use crate::chart::{chart, informerd, key, object, rendered_config, template, TempDir};

/// The RBAC objects among `objects`, without their labels (the chart adds Helm's), by
/// `Kind/namespace/name`; every one is labelled `app.kubernetes.io/name: informerd`.
fn rbac_objects(objects: &[Value]) -> BTreeMap<String, Value> {
    objects
        .iter()
        .filter(|o| o["apiVersion"] == "rbac.authorization.k8s.io/v1")
        .map(|o| {
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/name"], "informerd",
                "{o:?}"
            );
            let mut o = o.clone();
            o["metadata"].as_mapping_mut().unwrap().remove("labels");
            (key(&o), o)
        })
        .collect()
}

/// What `informerd rbac` prints for the configuration the chart rendered into `objects`, with
/// the chart's subject and names, or its errors.
fn informerd_rbac(
    objects: &[Value],
    ns: &str,
    service_account: &str,
    name: &str,
) -> Result<Vec<Value>, String> {
    let dir = TempDir::new("helm-rbac");
    let file = dir.write("informerd.yaml", &rendered_config(objects));
    let printed = informerd(&[
        "rbac",
        "--config",
        file.to_str().unwrap(),
        "--service-account",
        service_account,
        "--service-account-namespace",
        ns,
        "--name",
        name,
    ])?;
    Ok(documents(&printed)
        .into_iter()
        .filter(|d| !d.is_null())
        .collect())
}

/// The chart's kinds.yaml: `Kind` or `Kind.group` → (plural, namespaced).
fn chart_kinds() -> BTreeMap<String, (String, bool)> {
    let text = std::fs::read_to_string(chart().join("kinds.yaml")).unwrap();
    let table: Value = serde_yaml::from_str(&text).unwrap();
    table["kinds"]
        .as_mapping()
        .expect("kinds: a mapping")
        .iter()
        .map(|(k, v)| {
            let plural = v["plural"].as_str().unwrap().to_string();
            (
                k.as_str().unwrap().to_string(),
                (plural, v["namespaced"].as_bool().unwrap()),
            )
        })
        .collect()
}

/// A configuration caching every kind of the chart's table (namespaced kinds in two
/// namespaces, Secrets allowed), so that a wrong plural or scope in the table shows.
fn every_kind_resources() -> String {
    let mut out = String::new();
    for (i, (key, (_, namespaced))) in chart_kinds().iter().enumerate() {
        let (kind, group) = key.split_once('.').unwrap_or((key, ""));
        let api_version = if group.is_empty() {
            "v1".to_string()
        } else {
            format!("{group}/v1")
        };
        let scope = if *namespaced {
            ", namespaces: [a, b]"
        } else {
            ""
        };
        let secrets = if key == "Secret" {
            ", allowSecrets: true"
        } else {
            ""
        };
        out += &format!(
            "  - {{name: r{i}, apiVersion: {api_version}, kind: {kind}{scope}{secrets}}}\n"
        );
    }
    out
}

#[test]
fn the_chart_rbac_is_what_informerd_rbac_prints_for_the_config_it_renders() {
    let sidecar_example =
        std::fs::read_to_string(repo_root().join("deploy/sidecar/informerd.yaml")).unwrap();
    let example: Value = serde_yaml::from_str(&sidecar_example).unwrap();
    let example_resources = serde_yaml::to_string(&example["resources"])
        .unwrap()
        .replace('\n', "\n    ");
    let cases = [
        ("the sidecar's default", String::new()),
        ("the node's default", "mode: node\n".to_string()),
        ("deploy/sidecar's configuration", format!("config:\n  resources:\n    {example_resources}\n")),
        (
            "every built-in kind, a selector, onDemand in namespaces, authorization as a mapping",
            format!(
                "config:\n  server:\n    authorization: {{audiences: [informerd, other]}}\n  resources:\n{}  \
                 - {{name: selected, apiVersion: apps/v1, kind: Deployment, namespaceSelector: {{matchLabels: {{team: a}}}}}}\n  \
                 onDemand:\n    namespaces: [b, c]\n    allow:\n    - {{group: apps, kinds: [StatefulSet, ControllerRevision]}}\n    \
                 - {{group: batch}}\n    - {{group: \"\", kinds: [Node, ConfigMap]}}\n",
                every_kind_resources()
            ),
        ),
        (
            "onDemand cluster-wide, authorization none, node mode's server defaults overridden",
            "mode: node\nconfig:\n  server: {authorization: none}\n  resources:\n  - {apiVersion: v1, kind: Pod, namespaces: [a]}\n  \
             onDemand:\n    allow:\n    - {group: networking.k8s.io, kinds: [Ingress]}\n    - {group: policy}\n"
                .to_string(),
        ),
    ];
    for (case, values) in cases {
        let ns = "team-a";
        let objects =
            template(&chart(), "rel", ns, &values).unwrap_or_else(|e| panic!("{case}: {e}"));
        let chart_rbac = rbac_objects(&objects);
        assert!(!chart_rbac.is_empty(), "{case}: no RBAC rendered");
        let printed = informerd_rbac(&objects, ns, "rel-informerd", "rel-informerd")
            .unwrap_or_else(|e| panic!("{case}: informerd rbac: {e}"));
        let printed: BTreeMap<String, Value> = printed.into_iter().map(|o| (key(&o), o)).collect();
        let printed = rbac_objects(&printed.into_values().collect::<Vec<_>>());
        assert_eq!(
            chart_rbac, printed,
            "{case}: the chart's RBAC (left) is not what `informerd rbac` prints (right) for the configuration it renders"
        );
    }
}

#[test]
fn a_kind_the_chart_does_not_know_is_refused_and_rbac_kinds_names_a_custom_one() {
    let widget =
        "config:\n  resources:\n  - {apiVersion: example.com/v1, kind: Widget, namespaces: [a]}\n";
    let err =
        template(&chart(), "rel", "team-a", widget).expect_err("an unknown kind renders no RBAC");
    assert!(
        err.contains(
            "config.resources[0].kind: Widget.example.com is not a built-in Kubernetes kind"
        ) && err.contains("add it to rbac.kinds"),
        "{err}"
    );
    let with_kind = format!("{widget}rbac:\n  kinds:\n    Widget.example.com: {{plural: widgetries, namespaced: true}}\n");
    let objects = template(&chart(), "rel", "team-a", &with_kind).unwrap();
    let role = object(&objects, "Role");
    assert_eq!(role["metadata"]["namespace"], "a");
    assert_eq!(role["rules"][0]["apiGroups"][0], "example.com");
    assert_eq!(role["rules"][0]["resources"][0], "widgetries");
    // A cluster-scoped kind in namespaces: both refuse, naming the field.
    let node = "config:\n  resources:\n  - {apiVersion: v1, kind: Node, namespaces: [a]}\n";
    let err =
        template(&chart(), "rel", "team-a", node).expect_err("a cluster-scoped kind in namespaces");
    assert!(
        err.contains("config.resources[0]: Node is cluster-scoped: remove namespaces"),
        "{err}"
    );
}

#[test]
fn the_chart_knows_every_kind_informerd_rbac_knows() {
    // The kinds of src/rbac/builtin.rs's table (`kinds![module::Kind, ...]`); the RBAC test
    // above checks each one's plural and scope against informerd rbac.
    let source = std::fs::read_to_string(repo_root().join("src/rbac/builtin.rs")).unwrap();
    let table = source
        .split("kinds![")
        .nth(1)
        .expect("builtin.rs: kinds![...]");
    let mut builtin: Vec<&str> = table[..table.find(']').unwrap()]
        .split(',')
        .filter_map(|entry| entry.trim().rsplit("::").next())
        .filter(|kind| !kind.is_empty())
        .collect();
    let kinds = chart_kinds();
    let mut chart: Vec<&str> = kinds.keys().map(|k| k.split('.').next().unwrap()).collect();
    builtin.sort_unstable();
    chart.sort_unstable();
    assert!(
        builtin.len() > 50,
        "read {} kinds from builtin.rs",
        builtin.len()
    );
    assert_eq!(chart, builtin, "deploy/helm/informerd/kinds.yaml (left) and src/rbac/builtin.rs (right) list different kinds");
    // The RBAC test gives every kind the table calls namespaced a namespace list, which
    // informerd refuses for a cluster-scoped kind; here each kind it calls cluster-scoped is
    // given one, which informerd must refuse.
    let dir = TempDir::new("helm-scope");
    for (key, _) in kinds.iter().filter(|(_, (_, namespaced))| !namespaced) {
        let (kind, group) = key.split_once('.').unwrap_or((key, ""));
        let api_version = if group.is_empty() {
            "v1".to_string()
        } else {
            format!("{group}/v1")
        };
        let config = format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- {{apiVersion: {api_version}, kind: {kind}, namespaces: [a]}}\n"
        );
        let file = dir.write("informerd.yaml", &config);
        let err = informerd(&["rbac", "--config", file.to_str().unwrap()]).expect_err(&format!(
            "kinds.yaml calls {key} cluster-scoped; informerd rbac grants it in a namespace"
        ));
        assert!(err.contains("is cluster-scoped"), "{key}: {err}");
    }
}
