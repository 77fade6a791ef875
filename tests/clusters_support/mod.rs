//! What the tests of remote clusters share (tests/clusters.rs, tests/on_demand_remote.rs):
//! ConfigMaps whose `cluster` value says where they were made, reading them back from the
//! sidecar by cluster, and waiting on its Status.
// Each test crate uses some of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use informerd::proto::{
    cache_client::CacheClient, GetRequest, ListRequest, StatusRequest, StatusResponse,
};
use informerd_testkit::{ControlPlane, Fixture, PrivateControlPlane};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;
use tonic::transport::Channel;

/// How long anything asynchronous may take on busy shared cores.
pub const PATIENCE: Duration = Duration::from_secs(120);

pub type Cache = CacheClient<Channel>;

/// The shared control plane (informerd's own cluster) and a private one (the remote), each
/// with namespace `ns` holding configmap `settings` (`cluster: first` or `second`); the second
/// also `only-second`. The shared cluster's namespace is deleted when `owner` is dropped (the
/// private cluster goes with `second`).
pub struct TwoClusters {
    pub owner: Fixture,
    pub first: &'static ControlPlane,
    pub first_client: Client,
    pub second: PrivateControlPlane,
    pub second_client: Client,
    pub ns: String,
}

impl TwoClusters {
    /// Starts the second control plane and makes the namespace (named after `base`) and
    /// configmaps in both.
    pub async fn start(base: &str) -> TwoClusters {
        let first = ControlPlane::get();
        let owner = Fixture::on(first, base).await.expect("ns");
        let first_client = owner.kube().clone();
        let ns = owner.ns().to_owned();
        let second = PrivateControlPlane::start().expect("a second control plane");
        let second_client = second.control_plane().client().await.expect("its client");
        create_namespace(&second_client, &ns).await;
        create_configmap(&first_client, &ns, "settings", "first").await;
        create_configmap(&second_client, &ns, "settings", "second").await;
        create_configmap(&second_client, &ns, "only-second", "second").await;
        TwoClusters {
            owner,
            first,
            first_client,
            second,
            second_client,
            ns,
        }
    }
}

/// Creates namespace `name` (in a cluster other than the shared one, where the fixture made
/// it).
pub async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the namespace");
}

/// Creates configmap `name` whose `cluster` value is `value`; returns its resourceVersion.
pub async fn create_configmap(client: &Client, namespace: &str, name: &str, value: &str) -> String {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("cluster".to_string(), value.to_string())])),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create the configmap")
        .metadata
        .resource_version
        .expect("a resourceVersion")
}

/// The `cluster` value of configmap `name` as the sidecar's cache `resource` of `cluster` has
/// it (waiting for the sync).
pub async fn cached_value(
    api: &mut Cache,
    target: (&str, &str),
    namespace: &str,
    name: &str,
) -> String {
    cached_value_at(api, target, namespace, name, "").await
}

/// [`cached_value`] once the cache has reached resourceVersion `min` (a write's own: read
/// your writes; empty for none).
pub async fn cached_value_at(
    api: &mut Cache,
    (cluster, resource): (&str, &str),
    namespace: &str,
    name: &str,
    min: &str,
) -> String {
    let response = api
        .get(GetRequest {
            resource: resource.into(),
            cluster: cluster.into(),
            namespace: namespace.into(),
            name: name.into(),
            min_resource_version: min.into(),
            wait_for_sync: true,
            ..GetRequest::default()
        })
        .await
        .unwrap_or_else(|e| panic!("Get {cluster}/{resource}/{namespace}/{name}: {e}"))
        .into_inner();
    let object: serde_json::Value =
        serde_json::from_slice(&response.object.expect("an object").json).expect("JSON");
    object["data"]["cluster"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The names of the configmaps (but kube-root-ca.crt) of `namespace` in the sidecar's cache
/// `resource` of `cluster`, sorted.
pub async fn list_names(
    api: &mut Cache,
    (cluster, resource): (&str, &str),
    namespace: &str,
) -> Result<Vec<String>, tonic::Status> {
    let mut chunks = api
        .list(ListRequest {
            resource: resource.into(),
            cluster: cluster.into(),
            namespace: namespace.into(),
            ..ListRequest::default()
        })
        .await?
        .into_inner();
    let mut names = Vec::new();
    while let Some(chunk) = chunks.next().await {
        names.extend(chunk?.objects.into_iter().map(|o| o.name));
    }
    names.retain(|n| n != "kube-root-ca.crt");
    names.sort();
    Ok(names)
}

pub async fn status(api: &mut Cache) -> StatusResponse {
    api.status(StatusRequest::default())
        .await
        .expect("Status")
        .into_inner()
}

/// Waits until `done` holds of the Status (and returns that Status).
pub async fn wait_status(
    api: &mut Cache,
    what: &str,
    done: impl Fn(&StatusResponse) -> bool,
) -> StatusResponse {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let s = status(api).await;
        if done(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {what}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits until Status says cluster `name` is `reachable` (and returns that Status).
pub async fn wait_reachable(api: &mut Cache, name: &str, reachable: bool) -> StatusResponse {
    let what = format!("cluster {name} reachable={reachable}");
    wait_status(api, &what, |s| {
        s.clusters
            .iter()
            .any(|c| c.name == name && c.reachable == reachable)
    })
    .await
}
