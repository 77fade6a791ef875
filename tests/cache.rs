//! The cache against the real control plane: what it holds equals what the apiserver lists
//! through the same filter and transform, before and after churn; namespace scopes come and go
//! with a namespaceSelector; a forbidden namespace is reported while the others serve; custom
//! resources are cached like Pods.

use std::{collections::BTreeMap, time::Duration};

use informerd::{
    config::{self, Config},
    fleet::{Fleet, ScopeState},
    store::ChangeKind,
};
use informerd_testkit::{ControlPlane, Fixture};
use k8s_openapi::{
    api::core::v1::{Namespace, Pod},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    api::{DynamicObject, ListParams, Patch, PatchParams, PostParams},
    discovery::ApiResource,
    Api, Client,
};
use serde_json::{json, Value};

const SYNC_TIMEOUT: Duration = Duration::from_secs(300);

type Objects = BTreeMap<String, Value>;

/// A config caching Pods under the name `pods`, with `rest` (YAML, indented by two) as the
/// resource's other fields.
fn pods_config(rest: &str) -> Config {
    parse(&format!(
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- name: pods\n  apiVersion: v1\n  kind: Pod\n{rest}"
    ))
}

fn parse(yaml: &str) -> Config {
    config::parse("test.yaml", yaml)
        .unwrap_or_else(|e| panic!("test config is invalid: {e}\n{yaml}"))
}

/// What the apiserver lists in `namespaces`, through the resource's filter and transform: what
/// the cache must hold. Keys are `namespace/name`.
async fn expected(
    client: &Client,
    cfg: &Config,
    ar: &ApiResource,
    namespaces: &[String],
) -> Objects {
    let rc = &cfg.resources[0];
    let mut out = Objects::new();
    for ns in namespaces {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
        for obj in api.list(&ListParams::default()).await.expect("list").items {
            let mut v = serde_json::to_value(&obj).expect("encode");
            v["apiVersion"] = json!(ar.api_version);
            v["kind"] = json!(ar.kind);
            if let Some(f) = &rc.filter {
                if !f.matches(&v).unwrap_or(false) {
                    continue;
                }
            }
            rc.transform.apply(&mut v);
            out.insert(format!("{ns}/{}", obj.metadata.name.unwrap_or_default()), v);
        }
    }
    out
}

fn held(fleet: &Fleet, name: &str) -> Objects {
    let store = &fleet.cache(name).expect("cache").store;
    store
        .list(None)
        .1
        .into_iter()
        .map(|o| {
            let v = o.to_json_value();
            let key = format!(
                "{}/{}",
                v["metadata"]["namespace"].as_str().unwrap_or_default(),
                v["metadata"]["name"].as_str().unwrap_or_default()
            );
            (key, v)
        })
        .collect()
}

/// Waits until the cache holds exactly what the apiserver lists (the watch may trail the last
/// write by a moment), then returns the differences, which must be none.
async fn converge(
    client: &Client,
    fleet: &Fleet,
    cfg: &Config,
    ar: &ApiResource,
    namespaces: &[String],
) -> Vec<String> {
    let mut diffs = Vec::new();
    for _ in 0..300 {
        let want = expected(client, cfg, ar, namespaces).await;
        let have = held(fleet, &cfg.resources[0].name);
        diffs = diff(&want, &have);
        if diffs.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    diffs
}

fn diff(want: &Objects, have: &Objects) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in want {
        match have.get(k) {
            None => out.push(format!("missing {k}")),
            Some(h) if h != v => out.push(format!("differs {k}: want {v} have {h}")),
            _ => {}
        }
    }
    for k in have.keys().filter(|k| !want.contains_key(*k)) {
        out.push(format!("extra {k}"));
    }
    out
}

fn pod_resource() -> ApiResource {
    ApiResource::erase::<Pod>(&())
}

fn unique_prefix(base: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{base}{:x}",
        (std::process::id() as u64) << 20 ^ nanos as u64
    )
}

#[tokio::test]
async fn keeps_exactly_the_daemonset_pods_without_stripped_fields() -> anyhow::Result<()> {
    let fx = Fixture::seeded(&unique_prefix("ds"), 400, 5).await?;
    let (client, namespaces) = (fx.kube().clone(), fx.namespaces().to_vec());

    let cfg = pods_config(&format!(
        r#"  namespaces: {namespaces:?}
  filter: 'object.metadata.ownerReferences.exists(o, o.kind == "DaemonSet")'
  transform:
    drop:
    - metadata.managedFields
    - metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]
"#
    ));
    let fleet = Fleet::start(client.clone(), &cfg).await?;
    assert!(
        fleet.wait_synced(SYNC_TIMEOUT).await,
        "not synced: {:?}",
        fleet.caches()[0].scopes()
    );

    let diffs = converge(&client, &fleet, &cfg, &pod_resource(), &namespaces).await;
    assert!(
        diffs.is_empty(),
        "cache differs from the apiserver: {diffs:#?}"
    );

    // The same, stated without the filter and transform code under test.
    let mut daemonset_pods = 0;
    let mut all_pods = 0;
    for ns in &namespaces {
        for p in Api::<Pod>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await?
            .items
        {
            all_pods += 1;
            if p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "DaemonSet")
            {
                daemonset_pods += 1;
            }
        }
    }
    let have = held(&fleet, "pods");
    assert!(
        daemonset_pods > 0 && daemonset_pods < all_pods,
        "seeded {daemonset_pods} of {all_pods}"
    );
    assert_eq!(have.len(), daemonset_pods);
    for (k, v) in &have {
        let owners = v["metadata"]["ownerReferences"].as_array().expect("owners");
        assert!(
            owners.iter().any(|o| o["kind"] == "DaemonSet"),
            "{k} is not DaemonSet-owned"
        );
        assert!(
            v["metadata"].get("managedFields").is_none(),
            "{k} kept managedFields"
        );
        assert!(
            v["metadata"]["annotations"]
                .get("kubectl.kubernetes.io/last-applied-configuration")
                .is_none(),
            "{k} kept the last-applied annotation"
        );
        assert!(
            v["spec"]["containers"].is_array(),
            "{k} lost fields the transform keeps"
        );
    }
    fleet.shutdown();
    Ok(())
}

#[tokio::test]
async fn after_churn_the_cache_equals_the_apiserver() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let prefix = unique_prefix("churn");
    let fx = Fixture::seeded(&prefix, 400, 4).await?;
    let (client, namespaces) = (fx.kube().clone(), fx.namespaces().to_vec());

    // The churn toggles informerd.io/tier between keep and drop: objects move in and out.
    let cfg = pods_config(&format!(
        r#"  namespaces: {namespaces:?}
  filter: 'object.metadata.labels["informerd.io/tier"] == "keep"'
  transform:
    keep: [metadata, spec.nodeName, status.phase, status.conditions, status.podIP]
    drop: [metadata.managedFields]
"#
    ));
    let fleet = Fleet::start(client.clone(), &cfg).await?;
    assert!(
        fleet.wait_synced(SYNC_TIMEOUT).await,
        "not synced: {:?}",
        fleet.caches()[0].scopes()
    );
    let store = fleet.cache("pods").expect("cache").store.clone();
    let synced_at = store.revision();

    let summary = cp.churn(&prefix, 4, 40, 15)?;
    eprintln!("{summary}");

    let diffs = converge(&client, &fleet, &cfg, &pod_resource(), &namespaces).await;
    assert!(
        diffs.is_empty(),
        "cache differs from the apiserver after churn: {diffs:#?}"
    );

    // The churn really moved objects in and out of the filter.
    let changes = store.changes_since(synced_at)?;
    for kind in [ChangeKind::Added, ChangeKind::Modified, ChangeKind::Deleted] {
        assert!(
            changes.iter().any(|c| c.kind == kind),
            "no {kind:?} change during churn"
        );
    }
    fleet.shutdown();
    Ok(())
}

/// Pods `p0..` (label `app: t`) in `ns`.
async fn create_pods(client: &Client, ns: &str, n: usize) -> anyhow::Result<()> {
    informerd_testkit::create_pods(client, ns, n, &[("app", "t")], true).await?;
    Ok(())
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting until {what}");
}

fn count_in(fleet: &Fleet, ns: &str) -> usize {
    fleet
        .cache("pods")
        .expect("cache")
        .store
        .keys(Some(ns))
        .len()
}

#[tokio::test]
async fn namespace_selector_adds_and_removes_namespaces_at_runtime() -> anyhow::Result<()> {
    let fx = Fixture::new("sel").await?;
    let (client, ns) = (fx.kube().clone(), fx.ns().to_string());
    create_pods(&client, &ns, 3).await?;
    let team = unique_prefix("team");

    let cfg = pods_config(&format!(
        r#"  namespaceSelector:
    matchLabels:
      informerd.io/team: {team}
"#
    ));
    let fleet = Fleet::start(client.clone(), &cfg).await?;
    assert!(fleet.wait_synced(SYNC_TIMEOUT).await);
    assert_eq!(
        count_in(&fleet, &ns),
        0,
        "an unlabelled namespace is not cached"
    );

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let label = |value: Value| json!({"metadata": {"labels": {"informerd.io/team": value}}});
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(label(json!(team))),
        )
        .await?;
    wait_until("the labelled namespace's pods are cached", || {
        count_in(&fleet, &ns) == 3
    })
    .await;
    assert!(fleet
        .cache("pods")
        .expect("cache")
        .scopes()
        .contains_key(&ns));

    let store = fleet.cache("pods").expect("cache").store.clone();
    let before = store.revision();
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(label(Value::Null)),
        )
        .await?;
    wait_until("the unlabelled namespace is dropped", || {
        count_in(&fleet, &ns) == 0
    })
    .await;
    let deleted: Vec<_> = store
        .changes_since(before)?
        .into_iter()
        .filter(|c| c.kind == ChangeKind::Deleted)
        .map(|c| c.key.to_string())
        .collect();
    assert_eq!(deleted.len(), 3, "one DELETED per pod: {deleted:?}");
    assert!(
        !fleet
            .cache("pods")
            .expect("cache")
            .scopes()
            .contains_key(&ns),
        "its stream still runs"
    );

    fleet.shutdown();
    Ok(())
}

#[tokio::test]
async fn a_forbidden_namespace_is_reported_while_the_others_serve() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let mut fx = Fixture::new("rbac-a").await?;
    let admin = fx.kube().clone();
    let allowed_a = fx.ns().to_string();
    let allowed_b = fx.add_namespace("rbac-b").await?;
    let denied = fx.add_namespace("rbac-denied").await?;
    for ns in [&allowed_a, &allowed_b, &denied] {
        create_pods(&admin, ns, 2).await?;
    }
    // Only namespaced Roles: list and watch pods in the two allowed namespaces.
    for ns in [&allowed_a, &allowed_b] {
        let role = serde_json::from_value(json!({
            "metadata": {"name": "informerd"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
        }))?;
        Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &role)
            .await?;
        let binding = serde_json::from_value(json!({
            "metadata": {"name": "informerd"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "informerd"},
            "subjects": [{"kind": "ServiceAccount", "name": "informerd", "namespace": allowed_a}]
        }))?;
        Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &binding)
            .await?;
    }
    let sa_client = cp.client_as(&allowed_a, "informerd").await?;

    let cfg = pods_config(&format!(
        r#"  namespaces: [{allowed_a}, {allowed_b}, {denied}]
"#
    ));
    let fleet = Fleet::start(sa_client, &cfg).await?;
    let cache = fleet.cache("pods").expect("cache").clone();
    wait_until(
        "allowed namespaces sync and the denied one is reported",
        || {
            let s = cache.scopes();
            s[&allowed_a].state == ScopeState::Synced
                && s[&allowed_b].state == ScopeState::Synced
                && s[&denied].state == ScopeState::Forbidden
        },
    )
    .await;
    let denied_status = &cache.scopes()[&denied];
    let message = denied_status.last_error.as_deref().unwrap_or_default();
    assert!(
        message.contains("forbidden") && message.contains(&denied),
        "{message}"
    );
    assert_eq!(count_in(&fleet, &allowed_a), 2);
    assert_eq!(count_in(&fleet, &allowed_b), 2);
    assert_eq!(count_in(&fleet, &denied), 0);
    assert!(!fleet.is_synced(), "a forbidden scope is not synced");

    fleet.shutdown();
    Ok(())
}

#[tokio::test]
async fn a_custom_resource_is_cached_like_pods() -> anyhow::Result<()> {
    let mut fx = Fixture::new("crd").await?;
    let client = fx.kube().clone();
    let group = format!("{}.test.informerd.io", unique_prefix("g"));
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {
                    "size": {"type": "integer"}, "colour": {"type": "string"}}}}
            }}}]
        }
    }))?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_name = format!("widgets.{group}");
    fx.delete_on_drop::<CustomResourceDefinition>(&crd_name);
    crds.create(&PostParams::default(), &crd).await?;
    let ar = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let ns = fx.ns().to_string();
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    // The CRD serves once it is Established.
    for i in 0.. {
        let w = json!({"apiVersion": ar.api_version, "kind": "Widget",
                       "metadata": {"name": "w0"}, "spec": {"size": 0, "colour": "red"}});
        match widgets
            .patch(
                "w0",
                &PatchParams::apply("informerd-test").force(),
                &Patch::Apply(w),
            )
            .await
        {
            Ok(_) => break,
            Err(e) if i < 300 => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => return Err(e.into()),
        }
    }
    for i in 1..6 {
        let w = json!({"apiVersion": ar.api_version, "kind": "Widget",
                       "metadata": {"name": format!("w{i}")}, "spec": {"size": i, "colour": "blue"}});
        widgets
            .patch(
                &format!("w{i}"),
                &PatchParams::apply("informerd-test").force(),
                &Patch::Apply(w),
            )
            .await?;
    }

    let cfg = parse(&format!(
        r#"
apiVersion: informerd.io/v1alpha1
kind: Config
resources:
- name: widgets
  apiVersion: {group}/v1
  kind: Widget
  namespaces: [{ns}]
  filter: 'object.spec.size >= 2'
  transform:
    drop: [metadata.managedFields]
"#
    ));
    let fleet = Fleet::start(client.clone(), &cfg).await?;
    assert!(fleet.wait_synced(SYNC_TIMEOUT).await);
    let diffs = converge(&client, &fleet, &cfg, &ar, std::slice::from_ref(&ns)).await;
    assert!(diffs.is_empty(), "{diffs:#?}");
    let have = held(&fleet, "widgets");
    assert_eq!(have.len(), 4, "widgets of size 2..=5: {:?}", have.keys());

    fleet.shutdown();
    Ok(())
}

#[tokio::test]
async fn an_unknown_kind_stops_start_up_with_the_config_line() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let client = cp.client().await?;
    let cfg = parse(
        r#"apiVersion: informerd.io/v1alpha1
kind: Config
resources:
- name: gadgets
  apiVersion: v1
  kind: Gadget
"#,
    );
    let err = match Fleet::start(client, &cfg).await {
        Ok(_) => panic!("an unknown kind must stop start-up"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.starts_with("test.yaml:6:9: resources[0].kind:"),
        "{err}"
    );
    Ok(())
}
