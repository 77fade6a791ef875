//! The bounds of on-demand caches beyond the kind (tests/on_demand.rs has those), on the real
//! control plane: a cache that outgrows `onDemand.maxObjects` is stopped (Status and metrics
//! say `MaxObjects`, and a call naming it is told why); with `server.authorization` on, Ensure
//! is authorized as a List and Watch of the kind in each namespace asked for (refused:
//! PERMISSION_DENIED naming the verb, resource and namespace), and a remote cluster is refused,
//! for Ensure as for the other calls.

use std::collections::BTreeMap;
use std::time::Duration;

use informerd::proto::{EnsureRequest, EnsureResponse, ListRequest, StatusRequest, StatusResponse};
use informerd_client::{self as client, connect_with_token, proto::Reason, ConnectOptions, Token};
use informerd_testkit::{
    free_port, grant_pod_readers, scrape_metrics, wait_default_service_account, Authorization,
    ControlPlane, Fixture, OnDemand, Resource, Sidecar, SidecarConfig,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use tonic::Code;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const PATIENCE: Duration = Duration::from_secs(120);

type Cache = informerd::proto::cache_client::CacheClient<tonic::transport::Channel>;

fn request(kind: &str, namespace: &str, cluster: &str) -> tonic::Request<EnsureRequest> {
    let mut request = tonic::Request::new(EnsureRequest {
        api_version: "v1".into(),
        kind: kind.into(),
        namespaces: vec![namespace.into()],
        cluster: cluster.into(),
        ..EnsureRequest::default()
    });
    request.set_timeout(PATIENCE);
    request
}

async fn status(api: &mut Cache) -> StatusResponse {
    api.status(StatusRequest::default())
        .await
        .expect("Status")
        .into_inner()
}

#[tokio::test]
async fn a_cache_over_max_objects_is_stopped_and_callers_are_told_why() {
    let cp = ControlPlane::get();
    let fixture = Fixture::new("od-max").await.expect("ns");
    let admin = fixture.kube().clone();
    let ns = fixture.ns().to_owned();
    for i in 0..3 {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("cm{i}")),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
            ..ConfigMap::default()
        };
        Api::<ConfigMap>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let port = free_port();
    let config = SidecarConfig::new()
        .on_demand(
            OnDemand::new()
                .allow("", &["ConfigMap"])
                .max_objects(2)
                .idle_timeout("1h"),
        )
        .server(|s| s.metrics_port(port));
    let sidecar = Sidecar::start(std::path::Path::new(BIN), cp, &config).expect("informerd starts");
    let mut api = client::connect(&sidecar.socket().display().to_string())
        .await
        .expect("connect");

    // Three ConfigMaps (and kube-root-ca.crt) against maxObjects 2: it syncs, then is stopped.
    let name = format!("configmaps/{ns}");
    if let Ok(ensured) = api.ensure(request("ConfigMap", &ns, "")).await {
        assert_eq!(ensured.into_inner().resource, name);
    }
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let stopped = loop {
        let s = status(&mut api).await;
        if s.on_demand_stops.get("MaxObjects") == Some(&1) {
            break s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never stopped: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(stopped.on_demand.is_empty(), "{stopped:?}");
    assert_eq!(stopped.on_demand_stops.get("Idle"), None, "{stopped:?}");
    let metrics = scrape_metrics(port).await.expect("metrics");
    assert_eq!(
        metrics.sum(
            "informerd_on_demand_stops_total",
            &[("reason", "MaxObjects")]
        ),
        1.0
    );
    let gone = api
        .list(ListRequest {
            resource: name.clone(),
            namespace: ns.clone(),
            ..ListRequest::default()
        })
        .await
        .expect_err("a stopped cache is not served");
    assert_eq!(gone.code(), Code::NotFound, "{gone:?}");
    assert!(gone.message().contains("MaxObjects"), "{gone:?}");
    assert!(gone.message().contains("onDemand.maxObjects"), "{gone:?}");

    drop(sidecar);
}

#[tokio::test]
async fn ensure_under_authorization_is_a_list_and_watch_of_the_caller_and_never_remote() {
    let cp = ControlPlane::get();
    let mut fixture = Fixture::new("od-authz-a").await.expect("ns a");
    let admin = fixture.kube().clone();
    let a = fixture.ns().to_owned();
    let b = fixture.add_namespace("od-authz-b").await.expect("ns b");
    wait_default_service_account(&admin, &a).await.expect("sa");
    grant_pod_readers(&admin, &a, "reader-a", &[("reader-a", &a)])
        .await
        .expect("grant");
    // The default cluster, and itself again as the remote `mirror` (its kubeconfig).
    let config = SidecarConfig::new()
        .resource(Resource::pods().namespaces([&a]).cluster("mirror"))
        .cluster("mirror", cp.kubeconfig())
        .on_demand(OnDemand::new().allow("", &["Pod"]))
        .server(|s| s.authorization(Authorization::kubernetes().denied_ttl("1s")));
    let sidecar = Sidecar::start(std::path::Path::new(BIN), cp, &config).expect("informerd starts");
    let token = cp
        .service_account_token(&a, "reader-a", &["informerd"], 3600)
        .await
        .expect("token");
    let socket = sidecar.socket().display().to_string();
    let mut api = connect_with_token(
        &socket,
        &ConnectOptions::default(),
        Token::new(&token).expect("token"),
    )
    .await
    .expect("connect");

    // Allowed once the apiserver's RBAC serves the new binding (as the apiserver says).
    let apiserver = cp
        .client_as(&a, "reader-a")
        .await
        .expect("client as reader-a");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while Api::<Pod>::namespaced(apiserver.clone(), &a)
        .list(&ListParams::default())
        .await
        .is_err()
    {
        assert!(tokio::time::Instant::now() < deadline, "RBAC never granted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ensured: EnsureResponse = loop {
        match api.ensure(request("Pod", &a, "")).await {
            Ok(r) => break r.into_inner(),
            Err(e) if tokio::time::Instant::now() < deadline => {
                assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("Ensure in {a}: {e:?}"),
        }
    };
    assert_eq!(ensured.resource, format!("pods/{a}"));

    // Another namespace: refused, naming what RBAC did not allow; nothing started.
    let refused = api
        .ensure(request("Pod", &b, ""))
        .await
        .expect_err("reader-a may not list pods in b");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert_eq!(Reason::of(&refused), Some(Reason::Forbidden), "{refused:?}");
    for word in ["pods", b.as_str()] {
        assert!(refused.message().contains(word), "{word}: {refused:?}");
    }
    assert!(
        ["list", "watch"]
            .iter()
            .any(|verb| refused.message().contains(verb)),
        "names the verb: {refused:?}"
    );

    // A remote cluster: refused, for Ensure and for a configured resource alike.
    let remote = api
        .ensure(request("Pod", &a, "mirror"))
        .await
        .expect_err("remote clusters are refused under authorization");
    assert_eq!(remote.code(), Code::PermissionDenied, "{remote:?}");
    assert!(remote.message().contains("cluster mirror"), "{remote:?}");
    let listed = api
        .list(ListRequest {
            resource: "pods".into(),
            cluster: "mirror".into(),
            namespace: a.clone(),
            ..ListRequest::default()
        })
        .await
        .expect_err("remote clusters are refused under authorization");
    assert_eq!(listed.code(), Code::PermissionDenied, "{listed:?}");
    assert!(listed.message().contains("cluster mirror"), "{listed:?}");

    drop(sidecar);
}
