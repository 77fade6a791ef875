//! The generator's rules for each kind of scope, and its refusals.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::*;
use crate::config;

fn grantee() -> Grantee {
    Grantee {
        service_account: "controller".into(),
        namespace: "ops".into(),
        name: "informerd-shop".into(),
    }
}

fn rbac(resources: &str) -> Result<Rbac, RbacError> {
    let text = format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n{resources}");
    let cfg = config::parse("informerd.yaml", &text).expect("a valid configuration");
    generate(&cfg, &grantee(), &Kinds::Builtin)
}

fn rule(group: &str, resources: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: vec!["list".into(), "watch".into()],
        ..Default::default()
    }
}

#[test]
fn listed_namespaces_get_a_role_and_binding_each_with_list_and_watch_only() {
    let rbac = rbac(
        "- {apiVersion: v1, kind: Pod, namespaces: [b, a]}\n\
         - {apiVersion: apps/v1, kind: Deployment, namespaces: [a]}\n\
         - {name: eps, apiVersion: v1, kind: Endpoints, namespaces: [a]}\n",
    )
    .unwrap();
    assert_eq!(
        rbac.cluster, None,
        "no cluster-wide rule for listed namespaces"
    );
    let by_ns: Vec<_> = rbac
        .namespaces
        .iter()
        .map(|(r, _)| r.metadata.namespace.clone().unwrap())
        .collect();
    assert_eq!(by_ns, ["a", "b"]);
    let (role_a, binding_a) = &rbac.namespaces[0];
    assert_eq!(
        role_a.rules.as_deref().unwrap(),
        [
            rule("", &["endpoints", "pods"]),
            rule("apps", &["deployments"])
        ]
    );
    assert_eq!(
        rbac.namespaces[1].0.rules.as_deref().unwrap(),
        [rule("", &["pods"])]
    );
    assert_eq!(role_a.metadata.name.as_deref(), Some("informerd-shop"));
    assert_eq!(binding_a.metadata.namespace.as_deref(), Some("a"));
    assert_eq!(binding_a.role_ref.kind, "Role");
    assert_eq!(binding_a.role_ref.name, "informerd-shop");
    let subject = &binding_a.subjects.as_deref().unwrap()[0];
    assert_eq!(
        (
            subject.kind.as_str(),
            subject.name.as_str(),
            subject.namespace.as_deref()
        ),
        ("ServiceAccount", "controller", Some("ops"))
    );
}

#[test]
fn all_namespaces_and_cluster_scoped_kinds_need_a_cluster_role() {
    let rbac = rbac(
        "- {apiVersion: v1, kind: Pod}\n\
         - {apiVersion: v1, kind: Node}\n\
         - {apiVersion: v1, kind: ConfigMap, namespaces: [a]}\n",
    )
    .unwrap();
    let (role, binding) = rbac.cluster.unwrap();
    assert_eq!(role.rules.unwrap(), [rule("", &["nodes", "pods"])]);
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(binding.subjects.unwrap()[0].name, "controller");
    assert_eq!(rbac.namespaces.len(), 1);
    assert_eq!(
        rbac.namespaces[0].0.rules.as_deref().unwrap(),
        [rule("", &["configmaps"])]
    );
}

#[test]
fn a_namespace_selector_also_lists_and_watches_namespaces() {
    let rbac = rbac(
        "- apiVersion: batch/v1\n  kind: Job\n  namespaceSelector: {matchLabels: {team: shop}}\n",
    )
    .unwrap();
    let (role, _) = rbac.cluster.unwrap();
    assert_eq!(
        role.rules.unwrap(),
        [rule("", &["namespaces"]), rule("batch", &["jobs"])]
    );
    assert!(rbac.namespaces.is_empty());
}

#[test]
fn a_kind_that_is_not_built_in_is_an_error_at_its_kind_never_a_guess() {
    let err = rbac("- apiVersion: example.com/v1\n  kind: Widget\n  namespaces: [a]\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("informerd.yaml:5:9: resources[0].kind: "),
        "{err}"
    );
    assert!(
        err.contains("example.com/v1 Widget is not a built-in Kubernetes kind"),
        "{err}"
    );
    assert!(
        err.contains("run informerd rbac with --kubeconfig"),
        "{err}"
    );
}

#[test]
fn discovered_kinds_name_their_plural_and_scope() {
    let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n\
                - {apiVersion: example.com/v1, kind: Widget, namespaces: [a]}\n\
                - {apiVersion: example.com/v1, kind: Gizmo}\n";
    let cfg = config::parse("informerd.yaml", text).unwrap();
    let kinds = Kinds::Discovered(vec![
        Ok(Kind {
            group: "example.com".into(),
            plural: "widgetries".into(),
            namespaced: true,
        }),
        Ok(Kind {
            group: "example.com".into(),
            plural: "gizmos".into(),
            namespaced: false,
        }),
    ]);
    let rbac = generate(&cfg, &grantee(), &kinds).unwrap();
    let (cluster, _) = rbac.cluster.unwrap();
    assert_eq!(cluster.rules.unwrap(), [rule("example.com", &["gizmos"])]);
    assert_eq!(
        rbac.namespaces[0].0.rules.as_deref().unwrap(),
        [rule("example.com", &["widgetries"])]
    );
    let missing = Kinds::Discovered(vec![Err("404".into()), Err("404".into())]);
    let err = generate(&cfg, &grantee(), &missing)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("informerd.yaml:4:"),
        "FILE:LINE:COLUMN of the first resource: {err}"
    );
    assert!(
        err.contains("example.com/v1 Widget is not served by the cluster (404)"),
        "{err}"
    );
}

#[test]
fn a_cluster_scoped_kind_with_namespaces_is_an_error_at_the_field() {
    let err = rbac("- apiVersion: v1\n  kind: Node\n  namespaces: [a]\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("informerd.yaml:6:15: resources[0].namespaces: Node is cluster-scoped: remove namespaces"),
        "{err}"
    );
}

#[test]
fn yaml_is_a_stream_of_the_objects_with_the_header_as_comments() {
    let rbac =
        rbac("- {apiVersion: v1, kind: Pod, namespaces: [a]}\n- {apiVersion: v1, kind: Node}\n")
            .unwrap();
    let text = rbac.to_yaml("generated\nby a test").unwrap();
    assert!(
        text.starts_with("# generated\n# by a test\napiVersion: rbac.authorization.k8s.io/v1\n")
    );
    let kinds: Vec<String> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| {
            let v = <serde_yaml::Value as serde::Deserialize>::deserialize(doc).unwrap();
            v["kind"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    );
    assert!(!text.contains("get"), "no verb but list and watch: {text}");
}

fn rbac_on_demand(on_demand: &str) -> Result<Rbac, RbacError> {
    let text = format!(
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources: []\nonDemand:\n{on_demand}"
    );
    let cfg = config::parse("informerd.yaml", &text).expect("a valid configuration");
    generate(&cfg, &grantee(), &Kinds::Builtin)
}

#[test]
fn on_demand_allow_is_granted_list_and_watch() {
    // Every namespace: one ClusterRole with each allowed kind, and `*` for a whole group.
    let rbac = rbac_on_demand(
        "  allow:\n  - {group: apps, kinds: [Deployment, StatefulSet]}\n  \
         - {group: kustomize.toolkit.fluxcd.io}\n",
    )
    .unwrap();
    let (role, _) = rbac.cluster.expect("a ClusterRole");
    assert_eq!(
        role.rules.unwrap(),
        [
            rule("apps", &["deployments", "statefulsets"]),
            rule("kustomize.toolkit.fluxcd.io", &["*"]),
        ]
    );
    assert!(rbac.namespaces.is_empty());

    // onDemand.namespaces: a Role in each; a cluster-scoped kind stays cluster-wide.
    let rbac = rbac_on_demand(
        "  allow:\n  - {group: \"\", kinds: [ConfigMap, Node]}\n  namespaces: [b, a]\n",
    )
    .unwrap();
    let (role, _) = rbac.cluster.expect("a ClusterRole for nodes");
    assert_eq!(role.rules.unwrap(), [rule("", &["nodes"])]);
    let names: Vec<_> = rbac
        .namespaces
        .iter()
        .map(|(role, _)| role.metadata.namespace.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    for (role, _) in &rbac.namespaces {
        assert_eq!(role.rules.clone().unwrap(), [rule("", &["configmaps"])]);
    }

    // A kind that is not built in: an error at its place, no guessed rule.
    let err = rbac_on_demand("  allow:\n  - {group: example.com, kinds: [Widget]}\n").unwrap_err();
    assert!(
        err.to_string().contains("onDemand.allow[0].kinds[0]"),
        "{err}"
    );
}
