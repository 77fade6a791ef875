//! The local control plane behaves like a real cluster: objects written through the apiserver
//! come back with the managedFields a real cluster records, RBAC is enforced for non-admin
//! identities, and kube-controller-manager finishes namespace deletion and collects garbage.

use std::time::Duration;

use informerd_testkit::{delete_namespace, unique_namespace, ControlPlane};
use k8s_openapi::api::{
    apps::v1::ReplicaSet,
    core::v1::{ConfigMap, Namespace, Pod},
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    api::{ListParams, PostParams},
    Api, Client,
};
use serde_json::json;

fn pod(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}
    })
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    // Generous: the controllers' resync is not ours to time; a hung wait fails with a message.
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn pods_written_with_server_side_apply_carry_managed_fields() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let client = cp.client().await?;
    let ns = unique_namespace(&client, "cp-pods").await?;
    informerd_testkit::wait_default_service_account(&client, &ns).await?;

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for i in 0..3 {
        informerd_testkit::apply_pod(&client, &ns, pod(&format!("web-{i}"))).await?;
    }

    let listed = pods.list(&ListParams::default()).await?;
    assert_eq!(listed.items.len(), 3);
    for p in &listed.items {
        let managers: Vec<_> = p
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|m| {
                (
                    m.manager.clone().unwrap_or_default(),
                    m.operation.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert!(
            managers.contains(&("informerd-test".into(), "Apply".into())),
            "pod {:?} has managedFields {managers:?}",
            p.metadata.name
        );
        // The apiserver's admission chain ran: the ServiceAccount token volume was injected.
        let volumes = p.spec.as_ref().and_then(|s| s.volumes.as_ref());
        assert!(
            volumes.is_some_and(|v| v.iter().any(|v| v.name.starts_with("kube-api-access-"))),
            "no projected token volume on {:?}",
            p.metadata.name
        );
    }
    delete_namespace(&client, &ns).await?;
    Ok(())
}

#[tokio::test]
async fn rbac_limits_a_service_account_to_what_a_role_grants() -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let admin = cp.client().await?;
    let allowed = unique_namespace(&admin, "cp-rbac-allowed").await?;
    let denied = unique_namespace(&admin, "cp-rbac-denied").await?;

    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "read-configmaps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    }))?;
    Api::<Role>::namespaced(admin.clone(), &allowed)
        .create(&PostParams::default(), &role)
        .await?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": allowed}]
    }))?;
    Api::<RoleBinding>::namespaced(admin.clone(), &allowed)
        .create(&PostParams::default(), &binding)
        .await?;

    let reader: Client = cp.client_as(&allowed, "reader").await?;
    // RBAC changes reach the authorizer through its informer: wait for the grant to apply.
    let in_allowed: Api<ConfigMap> = Api::namespaced(reader.clone(), &allowed);
    wait_until("the RoleBinding takes effect", || async {
        in_allowed.list(&ListParams::default()).await.is_ok()
    })
    .await;

    let in_denied: Api<ConfigMap> = Api::namespaced(reader.clone(), &denied);
    match in_denied.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("listing another namespace must be forbidden, got {other:?}"),
    }
    match Api::<ConfigMap>::all(reader)
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("a cluster-wide list must be forbidden, got {other:?}"),
    }
    delete_namespace(&admin, &allowed).await?;
    delete_namespace(&admin, &denied).await?;
    Ok(())
}

#[tokio::test]
async fn controller_manager_finishes_namespace_deletion_and_collects_garbage() -> anyhow::Result<()>
{
    let cp = ControlPlane::get();
    let client = cp.client().await?;
    let ns = unique_namespace(&client, "cp-gc").await?;

    // A ReplicaSet and a ConfigMap it owns: deleting the owner must delete the dependent.
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "owner"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "owner"}},
            "template": {"metadata": {"labels": {"app": "owner"}},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }
    }))?;
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &rs)
        .await?;
    let owned: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "owned", "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "owner",
            "uid": rs.metadata.uid.clone().unwrap_or_default()
        }]}
    }))?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    cms.create(&PostParams::default(), &owned).await?;
    Api::<ReplicaSet>::namespaced(client.clone(), &ns)
        .delete("owner", &Default::default())
        .await?;
    wait_until("the garbage collector deletes the dependent", || async {
        matches!(cms.get_opt("owned").await, Ok(None))
    })
    .await;

    delete_namespace(&client, &ns).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait_until("the namespace finishes terminating", || async {
        matches!(namespaces.get_opt(&ns).await, Ok(None))
    })
    .await;
    Ok(())
}

/// The release tools/go.mod builds the control plane from (`k8s.io/kubernetes vX.Y.Z`).
fn kubernetes_release() -> String {
    let go_mod = std::fs::read_to_string(informerd_testkit::repo_root().join("tools/go.mod"))
        .expect("tools/go.mod");
    go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes "))
        .map(|v| v.trim().to_string())
        .expect("tools/go.mod requires k8s.io/kubernetes")
}

#[tokio::test]
async fn the_apiserver_reports_the_release_it_was_built_from() -> anyhow::Result<()> {
    let client = ControlPlane::get().client().await?;
    let info = client.apiserver_version().await?;
    let release = kubernetes_release();
    assert_eq!(
        info.git_version, release,
        "/version is not the release tools/go.mod names: the binaries are stamped by the Makefile \
         (make control-plane), and a running control plane keeps the binary it started with \
         (make cluster-down, then make cluster)"
    );
    let minor = release.split('.').nth(1).unwrap_or_default();
    assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", minor));
    Ok(())
}
