//! deploy/service, service mode, as a platform team meets it: `kubectl kustomize
//! deploy/service | kubectl apply --server-side` succeeds on the real apiserver; the manifests
//! agree with each other and with the configuration (the Service reaches the port informerd
//! listens on, the certificate is mounted where `server.tls` reads it, two replicas that a
//! rollout or a drain never take both at once); the RBAC is what `informerd rbac` prints and
//! lets informerd do what service mode needs, as the apiserver itself answers; and two replicas
//! run with the deployed configuration and the deployed ServiceAccount's own token serve a
//! client over TLS, with the client's ServiceAccount token, the same answers, and only what that
//! ServiceAccount may read.
//!
//! The control plane has no kubelet here, so the replicas run as processes beside it (the real
//! node's tests run the Deployment itself). Decision: the replicas listen on loopback ports of
//! their own, with a certificate this test issues for 127.0.0.1, rather than the deployed
//! `0.0.0.0:7443` and Secret: the rest of the configuration (resources, transforms,
//! `authorization: kubernetes`) is the ConfigMap's as the apiserver holds it.
//!
//! Decision: each run renames the base's namespace and cluster-wide names (`informerd-service`)
//! to a prefix of its own, as tests/node.rs does, so that runs never collide on the shared
//! control plane.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use futures::TryStreamExt;
use informerd::proto::ListRequest;
use informerd_client::{connect_with_token, AuthorizedCache, ConnectOptions, Token};
use informerd_testkit::{
    deployed_config, documents, free_port, grant_pod_readers, informerd_rbac, repo_root,
    unique_prefix, volume_at, wait_default_service_account, wait_service_account_may,
    Authorization, Ca, ControlPlane, Fixture, Kubectl, Sidecar, SidecarConfig,
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Pod, Service},
    policy::v1::PodDisruptionBudget,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{
    api::{ListParams, PostParams},
    Api, Client,
};
use rcgen::ExtendedKeyUsagePurpose;
use tonic::Code;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// The base's namespace, and the name of its cluster-wide objects; renamed for each run.
const BASE: &str = "informerd-service";
/// The audience informerd accepts tokens for (`authorization: kubernetes`'s default).
const AUDIENCE: &str = "informerd";
/// Only to avoid hanging: every wait polls and ends as soon as its condition holds.
const PATIENCE: Duration = Duration::from_secs(180);

/// deploy/service/rbac.yaml is exactly what `informerd rbac` prints for
/// deploy/service/informerd.yaml and the base's ServiceAccount (`informerd` in
/// `informerd-service`, objects named `informerd-service`): list and watch of every configured
/// resource cluster-wide, and the TokenReview and SubjectAccessReview that per-client
/// authorization needs. The objects are compared, not the text (the file keeps its comments).
#[test]
fn the_service_rbac_is_what_informerd_rbac_prints_for_the_service_config() {
    let printed = informerd_rbac(
        BIN.as_ref(),
        "deploy/service/informerd.yaml",
        ("informerd", BASE, BASE),
        &[],
    );
    let committed = std::fs::read_to_string(repo_root().join("deploy/service/rbac.yaml")).unwrap();
    assert_eq!(
        documents(&committed),
        documents(&printed),
        "deploy/service/rbac.yaml differs from what `informerd rbac` prints for \
         deploy/service/informerd.yaml; replace its objects with:\n{printed}"
    );
}

#[tokio::test]
async fn the_service_base_applies_and_its_replicas_serve_each_client_what_it_may_read(
) -> anyhow::Result<()> {
    let cp = ControlPlane::get();
    let admin = cp.client().await?;
    let kubectl = Kubectl::new(cp);
    let prefix = unique_prefix("svc");
    let base = kubectl
        .run(&["kustomize", "deploy/service"], "")
        .replace(BASE, &prefix);
    kubectl.run(&["apply", "--server-side", "-f", "-"], &base);
    let applied = kubectl.run(&["get", "-f", "-", "-o", "name"], &base);
    for object in [
        "deployment.apps/informerd".to_string(),
        "service/informerd".into(),
        "poddisruptionbudget.policy/informerd".into(),
        "serviceaccount/informerd".into(),
        format!("clusterrole.rbac.authorization.k8s.io/{prefix}"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{prefix}"),
    ] {
        assert!(
            applied.lines().any(|l| l == object),
            "{object} in {applied}"
        );
    }

    let config = deployed_config(&admin, &prefix, &base).await?;
    let server = &config["server"];
    assert_eq!(
        server["authorization"], "kubernetes",
        "service mode serves many clients: each sees only what it may read"
    );
    the_manifests_agree(&admin, &prefix, server).await?;
    the_rbac_suffices(&admin, &prefix).await?;

    // A client's ServiceAccount may read the pods of its own namespace, not of another.
    let mut own = Fixture::new("svc-own").await?;
    let other = own.add_namespace("svc-other").await?;
    let ns = own.ns().to_string();
    for namespace in [&ns, &other] {
        wait_default_service_account(&admin, namespace).await?;
        for name in ["web-0", "web-1"] {
            let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
            Api::<Pod>::namespaced(admin.clone(), namespace)
                .create(&PostParams::default(), &serde_json::from_value(pod)?)
                .await?;
        }
    }
    grant_pod_readers(&admin, &ns, "reader", &[("reader", &ns)]).await?;
    let token = cp
        .service_account_token(&ns, "reader", &[AUDIENCE], 3600)
        .await?;

    // Two replicas as the Deployment runs them: the deployed configuration, informerd's own
    // ServiceAccount (its token is its only credential), TLS with per-client authorization.
    let as_informerd = cp.as_service_account(&prefix, "informerd").await?;
    let dir = std::env::temp_dir().join(unique_prefix("svc-tls"));
    std::fs::create_dir_all(&dir)?;
    let ca = Ca::new("informerd service CA");
    let (cert, key) = ca.issue(ExtendedKeyUsagePurpose::ServerAuth);
    let ca_file = dir.join("ca.crt");
    for (file, text) in [("tls.crt", &cert), ("tls.key", &key), ("ca.crt", &ca.pem())] {
        std::fs::write(dir.join(file), text)?;
    }
    let deployed = config["resources"]
        .as_sequence()
        .expect("the deployed resources")
        .iter()
        .cloned()
        .fold(SidecarConfig::new(), SidecarConfig::resource_yaml);
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let port = free_port();
        let config = deployed.clone().server(|s| {
            s.listen(format!("127.0.0.1:{port}"))
                .tls(dir.join("tls.crt"), dir.join("tls.key"), None)
                .authorization(Authorization::kubernetes())
        });
        let sidecar = Sidecar::start(BIN.as_ref(), &as_informerd, &config)?;
        replicas.push((format!("https://127.0.0.1:{port}"), sidecar));
    }

    let expected: BTreeMap<String, String> = Api::<Pod>::namespaced(admin.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|p| {
            let name = p.metadata.name.unwrap_or_default();
            (name, p.metadata.resource_version.unwrap_or_default())
        })
        .collect();
    let options = ConnectOptions {
        ca_file: Some(ca_file),
        ..Default::default()
    };
    let mut answers = Vec::new();
    for (address, sidecar) in &replicas {
        let mut cache = connect_with_token(address, &options, Token::new(&token)?).await?;
        // Until the replica has synced what the apiserver lists.
        let deadline = Instant::now() + PATIENCE;
        let answer = loop {
            let got = list(&mut cache, "pods", &ns).await;
            if got.as_ref().is_ok_and(|got| got == &expected) {
                break got?;
            }
            assert!(
                Instant::now() < deadline,
                "{address}: {got:?}, the apiserver lists {expected:?}; log: {}",
                sidecar.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        answers.push(answer);
        for (resource, namespace) in [("pods", other.as_str()), ("pods", ""), ("nodes", "")] {
            let denied = list(&mut cache, resource, namespace).await;
            assert_eq!(
                denied.as_ref().map_err(|s| s.code()),
                Err(Code::PermissionDenied),
                "{address}: the reader may not list {resource} in {namespace:?}: {denied:?}"
            );
        }
    }
    assert_eq!(answers[0], answers[1], "both replicas answer alike");
    drop(replicas);

    kubectl.run(&["delete", "--wait=false", "-f", "-"], &base);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The Deployment, Service and PodDisruptionBudget as the apiserver kept them, against the
/// deployed `server` section: the Service's target is the container port informerd listens on,
/// the certificate's Secret is mounted where `server.tls` reads it, two replicas of which a
/// rollout (a surge, none unavailable) or a drain (the budget) always leaves one serving.
async fn the_manifests_agree(
    admin: &Client,
    ns: &str,
    server: &serde_yaml::Value,
) -> anyhow::Result<()> {
    let deployment = Api::<Deployment>::namespaced(admin.clone(), ns)
        .get("informerd")
        .await?;
    let spec = deployment.spec.expect("spec");
    assert!(spec.replicas.unwrap_or(1) >= 2, "two replicas or more");
    let rolling = spec.strategy.and_then(|s| s.rolling_update);
    assert_eq!(
        rolling.map(|r| (r.max_surge, r.max_unavailable)),
        Some((Some(IntOrString::Int(1)), Some(IntOrString::Int(0)))),
        "maxSurge 1, maxUnavailable 0"
    );
    let labels = spec.template.metadata.and_then(|m| m.labels);
    let pod = spec.template.spec.expect("a pod template");
    let container = &pod.containers[0];

    let listen = server["listen"].as_str().expect("server.listen");
    let port: i32 = listen.rsplit_once(':').expect("HOST:PORT").1.parse()?;
    let grpc = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("grpc"))
        .expect("a container port named grpc");
    assert_eq!(grpc.container_port, port, "the port of server.listen");

    let service = Api::<Service>::namespaced(admin.clone(), ns)
        .get("informerd")
        .await?;
    let service = service.spec.expect("spec");
    assert_eq!(service.selector, labels, "the Service selects the replicas");
    let target = service.ports.iter().flatten().map(|p| &p.target_port);
    assert!(
        target
            .clone()
            .all(|t| t == &Some(IntOrString::String("grpc".into()))),
        "the Service targets the grpc port: {:?}",
        target.collect::<Vec<_>>()
    );

    // The Unix socket informerd always serves too, in a writable directory of the pod (the
    // root filesystem is read-only).
    let socket = server["socket"]
        .as_str()
        .unwrap_or(informerd::config::DEFAULT_SOCKET);
    let (socket_dir, _) = socket.rsplit_once('/').expect("a path");
    let (mount, volume) = volume_at(&pod, container, socket_dir)
        .unwrap_or_else(|| panic!("the socket {socket} is in a mounted volume"));
    assert!(
        volume.empty_dir.is_some() && mount.read_only != Some(true),
        "the socket's directory is a writable emptyDir: {volume:?}"
    );

    for file in ["certFile", "keyFile"] {
        let path = server["tls"][file].as_str().expect("server.tls");
        let (dir, _) = path.rsplit_once('/').expect("a path");
        let (_, volume) = volume_at(&pod, container, dir)
            .unwrap_or_else(|| panic!("server.tls.{file} {path} is in a mounted volume"));
        let secret = volume.secret.as_ref().and_then(|s| s.secret_name.clone());
        assert_eq!(secret.as_deref(), Some("informerd-tls"), "{file}");
    }

    let budget = Api::<PodDisruptionBudget>::namespaced(admin.clone(), ns)
        .get("informerd")
        .await?;
    let budget = budget.spec.expect("spec");
    assert_eq!(budget.min_available, Some(IntOrString::Int(1)));
    assert_eq!(
        budget.selector.and_then(|s| s.match_labels),
        labels,
        "the budget covers the replicas"
    );
    Ok(())
}

/// What the apiserver answers for informerd's ServiceAccount: list and watch of pods and nodes
/// in every namespace, and TokenReviews and SubjectAccessReviews. Polls: the authorizer follows
/// new bindings through its own informer.
async fn the_rbac_suffices(admin: &Client, ns: &str) -> anyhow::Result<()> {
    let read = |verb: &str, resource: &str| (verb.to_string(), String::new(), resource.into());
    let create = |group: &str, resource: &str| ("create".into(), group.into(), resource.into());
    let checks: [(String, String, String); 6] = [
        read("list", "pods"),
        read("watch", "pods"),
        read("list", "nodes"),
        read("watch", "nodes"),
        create("authentication.k8s.io", "tokenreviews"),
        create("authorization.k8s.io", "subjectaccessreviews"),
    ];
    for (verb, group, resource) in checks {
        wait_service_account_may(
            admin,
            (ns, "informerd"),
            (&verb, &group, &resource),
            PATIENCE,
        )
        .await?;
    }
    Ok(())
}

/// The names and resourceVersions of the `resource` objects informerd lists in `namespace`
/// (every namespace when empty), once synced, or the status that refused the List.
async fn list(
    cache: &mut AuthorizedCache,
    resource: &str,
    namespace: &str,
) -> Result<BTreeMap<String, String>, tonic::Status> {
    let request = ListRequest {
        resource: resource.into(),
        namespace: namespace.into(),
        wait_for_sync: true,
        ..Default::default()
    };
    let chunks: Vec<_> = cache
        .list(request)
        .await?
        .into_inner()
        .try_collect()
        .await?;
    Ok(chunks
        .into_iter()
        .flat_map(|c| c.objects)
        .map(|o| (o.name, o.resource_version))
        .collect())
}
