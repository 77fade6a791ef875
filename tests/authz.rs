//! Per-client authorization (`server.authorization: kubernetes`) on the real control plane: a
//! sidecar caching pods of two namespaces (and Secrets of one) serves three ServiceAccounts
//! exactly what the apiserver serves them.
//!
//! - `reader-a` may get, list and watch pods in namespace A; `reader-ab` in A and B; `nobody`
//!   nothing. None may read Secrets.
//! - Each one's informerd calls carry its token for the audience `informerd`; what informerd
//!   answers is compared with what the apiserver answers the same ServiceAccount (its token for
//!   the apiserver's audience: an `informerd` token is, rightly, not accepted by the apiserver).
//!   No table of expected results: the apiserver is the oracle.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use informerd::proto::{
    watch_keys_request, watch_request::Start, EventType, GetRequest, KeysSubscription, ListRequest,
    StatusRequest, WatchEvent, WatchKeysRequest, WatchRequest,
};
use informerd_client::{
    self as client, connect_with_token, AuthorizedCache, ConnectOptions, Reason, Token,
};
use informerd_testkit::{
    self as testkit, forge_token, free_port, grant_pod_readers, pod, scrape_metrics,
    wait_default_service_account, Authorization, ControlPlane, Resource, SidecarConfig,
};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::Client;
use serde_json::json;
use tonic::{Code, Status, Streaming};

mod authz_support;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const AUDIENCE: &str = "informerd";
const SERVICE_ACCOUNTS: [&str; 3] = ["reader-a", "reader-ab", "nobody"];

/// Two namespaces with pods, a Secret, three ServiceAccounts and their Roles, and a sidecar
/// with authorization on (re-checking every second); the namespaces are deleted on drop.
struct Fixture {
    base: testkit::Fixture,
    cluster: &'static ControlPlane,
    admin: Client,
    a: String,
    b: String,
    /// The sidecar's /metrics port.
    metrics: u16,
}

impl Fixture {
    async fn new(name: &str) -> anyhow::Result<Fixture> {
        let cluster = ControlPlane::get();
        let mut base = testkit::Fixture::on(cluster, &format!("{name}-a")).await?;
        let admin = base.kube().clone();
        let a = base.ns().to_owned();
        let b = base.add_namespace(&format!("{name}-b")).await?;
        for ns in [&a, &b] {
            wait_default_service_account(&admin, ns).await?;
            for name in ["p0", "p1"] {
                pod(name).apply(&admin, ns).await?;
            }
        }
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("s0".into()),
                ..Default::default()
            },
            string_data: Some([("k".to_string(), "v".to_string())].into()),
            ..Default::default()
        };
        Api::<Secret>::namespaced(admin.clone(), &a)
            .create(&PostParams::default(), &secret)
            .await?;
        grant_pod_readers(&admin, &a, "reader-a", &[("reader-a", &a)]).await?;
        grant_pod_readers(&admin, &a, "reader-ab", &[("reader-ab", &a)]).await?;
        grant_pod_readers(&admin, &b, "reader-ab", &[("reader-ab", &a)]).await?;
        // A denial made before RBAC's caches saw a new binding must not stick: deniedTTL 1s.
        let metrics = free_port();
        let config = SidecarConfig::new()
            .resource(Resource::pods().namespaces([&a, &b]))
            .resource(Resource::secrets().namespaces([&a]))
            .server(|s| {
                s.metrics_port(metrics).authorization(
                    Authorization::kubernetes()
                        .denied_ttl("1s")
                        .recheck_interval("1s"),
                )
            });
        base.start_sidecar(BIN.as_ref(), &config)?;
        let fixture = Fixture {
            base,
            cluster,
            admin,
            a,
            b,
            metrics,
        };
        fixture.wait_ready().await?;
        Ok(fixture)
    }

    /// The ServiceAccount's token for informerd.
    async fn token(&self, sa: &str) -> anyhow::Result<String> {
        Ok(self
            .cluster
            .service_account_token(&self.a, sa, &[AUDIENCE], 3600)
            .await?)
    }

    /// A client of the apiserver acting as the ServiceAccount (a token for the apiserver).
    async fn apiserver_as(&self, sa: &str) -> anyhow::Result<Client> {
        Ok(self.cluster.client_as(&self.a, sa).await?)
    }

    /// A client of the sidecar sending `token`.
    async fn sidecar_with(&self, token: &str) -> anyhow::Result<AuthorizedCache> {
        let socket = self.base.sidecar().socket().display().to_string();
        Ok(connect_with_token(&socket, &ConnectOptions::default(), Token::new(token)?).await?)
    }

    /// Until the sidecar has synced and the apiserver's RBAC serves the new bindings.
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let mut cache = self.sidecar_with(&self.token("reader-ab").await?).await?;
        let apiserver = self.apiserver_as("reader-ab").await?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let synced = cache
                .status(StatusRequest::default())
                .await
                .is_ok_and(|s| s.get_ref().synced);
            let mut allowed = true;
            for ns in [&self.a, &self.b] {
                let pods: Api<Pod> = Api::namespaced(apiserver.clone(), ns);
                allowed &= pods.list(&ListParams::default()).await.is_ok();
            }
            if synced && allowed {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the sidecar did not sync, or RBAC did not grant"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// What a read gave: the names of the objects, or that it was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Objects(BTreeSet<String>),
    Forbidden,
}

/// The apiserver's answer: 403 is [`Outcome::Forbidden`]; any other error fails the test.
fn from_apiserver<T>(
    result: Result<T, kube::Error>,
    names: impl FnOnce(T) -> BTreeSet<String>,
) -> Outcome {
    match result {
        Ok(value) => Outcome::Objects(names(value)),
        Err(kube::Error::Api(s)) if s.code == 403 => Outcome::Forbidden,
        Err(e) => panic!("the apiserver failed: {e}"),
    }
}

/// The namespaces a cross-namespace refusal names as unreadable.
fn named_unreadable(message: &str) -> Vec<&str> {
    message
        .split_once("in namespace(s) ")
        .and_then(|(_, rest)| rest.split_once(" (of the"))
        .map(|(list, _)| list.split(", ").collect())
        .unwrap_or_default()
}

/// informerd's answer: `PERMISSION_DENIED`/`Forbidden` is [`Outcome::Forbidden`], with its
/// message; any other error fails the test.
fn from_sidecar(result: Result<BTreeSet<String>, Status>) -> (Outcome, String) {
    match result {
        Ok(names) => (Outcome::Objects(names), String::new()),
        Err(s) if s.code() == Code::PermissionDenied => {
            assert_eq!(Reason::of(&s), Some(Reason::Forbidden), "{s:?}");
            (Outcome::Forbidden, s.message().to_string())
        }
        Err(s) => panic!("informerd failed: {s:?}"),
    }
}

fn pod_names<K: kube::Resource + Clone>(list: kube::core::ObjectList<K>) -> BTreeSet<String> {
    list.items
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

async fn sidecar_list(
    cache: &mut AuthorizedCache,
    resource: &str,
    ns: &str,
) -> Result<BTreeSet<String>, Status> {
    let request = ListRequest {
        resource: resource.into(),
        namespace: ns.into(),
        ..Default::default()
    };
    authz_support::list_names(cache, request).await
}

/// The initial state of a Watch (its ADDED events up to SYNCED).
async fn sidecar_watch(
    cache: &mut AuthorizedCache,
    resource: &str,
    ns: &str,
) -> Result<BTreeSet<String>, Status> {
    let mut events = open_watch(cache, resource, ns).await?;
    let mut names = BTreeSet::new();
    loop {
        let event = next(&mut events).await?;
        match event.r#type() {
            EventType::Added => names.insert(event.object.unwrap_or_default().name),
            EventType::Synced => return Ok(names),
            other => panic!("unexpected {other:?} in an initial state"),
        };
    }
}

async fn open_watch(
    cache: &mut AuthorizedCache,
    resource: &str,
    ns: &str,
) -> Result<Streaming<WatchEvent>, Status> {
    let request = WatchRequest {
        resource: resource.into(),
        namespace: ns.into(),
        start: Some(Start::SendInitialState(true)),
        ..Default::default()
    };
    Ok(cache.watch(request).await?.into_inner())
}

/// Whether a WatchKeys stream on `resource` in `ns` opens (keys name objects, so it is
/// authorized as a Watch is): `Ok` when the sidecar accepts the subscription.
async fn open_watch_keys(
    cache: &mut AuthorizedCache,
    resource: &str,
    ns: &str,
) -> Result<(), Status> {
    cache
        .watch_keys(watch_keys_subscription(resource, ns))
        .await?;
    Ok(())
}

/// A WatchKeys request stream: the subscription, then open (no acknowledgements).
fn watch_keys_subscription(
    resource: &str,
    ns: &str,
) -> impl futures::Stream<Item = WatchKeysRequest> + Send + 'static {
    let subscribe = WatchKeysRequest {
        request: Some(watch_keys_request::Request::Subscribe(KeysSubscription {
            resource: resource.into(),
            namespace: ns.into(),
            ..Default::default()
        })),
    };
    futures::stream::iter([subscribe]).chain(futures::stream::pending())
}

/// The next event that is not a bookmark, or the status that ended the watch.
async fn next(events: &mut Streaming<WatchEvent>) -> Result<WatchEvent, Status> {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), events.message())
            .await
            .expect("an event or the end within a minute")?
            .expect("a watch ends with a status, not silently");
        if event.r#type() != EventType::Bookmark {
            return Ok(event);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_reads_exactly_what_the_apiserver_lets_it_read() -> anyhow::Result<()> {
    let f = Fixture::new("authz-reads").await?;
    for sa in SERVICE_ACCOUNTS {
        let apiserver = f.apiserver_as(sa).await?;
        let mut cache = f.sidecar_with(&f.token(sa).await?).await?;
        for ns in [f.a.as_str(), f.b.as_str(), ""] {
            let pods: Api<Pod> = if ns.is_empty() {
                Api::all(apiserver.clone())
            } else {
                Api::namespaced(apiserver.clone(), ns)
            };
            let where_ = format!("{sa} in namespace {ns:?}");
            // List.
            let want = from_apiserver(pods.list(&ListParams::default()).await, pod_names);
            let (got, message) = from_sidecar(sidecar_list(&mut cache, "pods", ns).await);
            assert_eq!(got, want, "List of pods by {where_}: {message}");
            if got == Outcome::Forbidden {
                assert!(
                    message.contains("cannot list resource \"pods\""),
                    "{where_}: {message}"
                );
                if ns.is_empty() {
                    // Across namespaces: refused as a whole, naming what it may not read.
                    for other in [&f.a, &f.b] {
                        let readable = from_apiserver(
                            Api::<Pod>::namespaced(apiserver.clone(), other)
                                .list(&ListParams::default())
                                .await,
                            pod_names,
                        ) != Outcome::Forbidden;
                        assert_eq!(
                            !named_unreadable(&message).contains(&other.as_str()),
                            readable,
                            "{where_}: {message}"
                        );
                    }
                } else {
                    assert!(
                        message.contains(&format!("in the namespace \"{ns}\"")),
                        "{message}"
                    );
                }
            }
            // Watch: its initial state is what a list shows; refused as a watch is.
            let want_watch = match pods.watch(&Default::default(), "0").await {
                Err(kube::Error::Api(s)) if s.code == 403 => Outcome::Forbidden,
                Err(e) => panic!("the apiserver's watch failed: {e}"),
                Ok(_) => want.clone(),
            };
            let (got, message) = from_sidecar(sidecar_watch(&mut cache, "pods", ns).await);
            assert_eq!(got, want_watch, "Watch of pods by {where_}: {message}");
            let keys = open_watch_keys(&mut cache, "pods", ns).await;
            assert_eq!(
                keys.as_ref().err().map(Status::code),
                (want_watch == Outcome::Forbidden).then_some(Code::PermissionDenied),
                "WatchKeys of pods by {where_}: {keys:?}"
            );
            // Get of one pod.
            if !ns.is_empty() {
                let want = from_apiserver(pods.get("p0").await, |p| {
                    BTreeSet::from([p.metadata.name.unwrap_or_default()])
                });
                let request = GetRequest {
                    resource: "pods".into(),
                    namespace: ns.into(),
                    name: "p0".into(),
                    ..Default::default()
                };
                let got = cache
                    .get(request)
                    .await
                    .map(|r| BTreeSet::from([r.into_inner().object.unwrap_or_default().name]));
                let (got, message) = from_sidecar(got);
                assert_eq!(got, want, "Get of pod p0 by {where_}: {message}");
                if got == Outcome::Forbidden {
                    assert!(
                        message.contains("cannot get resource \"pods\""),
                        "{message}"
                    );
                }
            }
        }
        // Secrets are cached (allowSecrets) but never served to a client that may not get them.
        let secrets: Api<Secret> = Api::namespaced(apiserver.clone(), &f.a);
        let want = from_apiserver(secrets.list(&ListParams::default()).await, pod_names);
        assert_eq!(want, Outcome::Forbidden, "the test grants no Secrets");
        let (got, message) = from_sidecar(sidecar_list(&mut cache, "secrets", &f.a).await);
        assert_eq!(got, want, "List of secrets by {sa}: {message}");
        let (got, _) = from_sidecar(sidecar_watch(&mut cache, "secrets", &f.a).await);
        assert_eq!(got, Outcome::Forbidden, "Watch of secrets by {sa}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_binding_ends_that_watch_and_no_other() -> anyhow::Result<()> {
    let f = Fixture::new("authz-revoke").await?;
    let mut revoked = f.sidecar_with(&f.token("reader-a").await?).await?;
    let mut kept = f.sidecar_with(&f.token("reader-ab").await?).await?;
    let mut revoked_events = open_watch(&mut revoked, "pods", &f.a).await?;
    let mut kept_events = open_watch(&mut kept, "pods", &f.a).await?;
    for events in [&mut revoked_events, &mut kept_events] {
        while next(events).await?.r#type() != EventType::Synced {}
    }
    Api::<RoleBinding>::namespaced(f.admin.clone(), &f.a)
        .delete("reader-a", &DeleteParams::default())
        .await?;
    // Within the re-check interval (1 s) after RBAC sees the deletion; generously bounded.
    let ended = loop {
        match next(&mut revoked_events).await {
            Ok(event) => assert_ne!(event.r#type(), EventType::Synced),
            Err(status) => break status,
        }
    };
    assert_eq!(ended.code(), Code::PermissionDenied, "{ended:?}");
    assert_eq!(Reason::of(&ended), Some(Reason::Forbidden));
    assert!(
        ended
            .message()
            .contains(&format!("in the namespace \"{}\"", f.a)),
        "{}",
        ended.message()
    );
    // Counted as ended by that refusal, not as a client that left (the other watch is open).
    // The task counts before it hands the status over, so the count is there already.
    let samples = scrape_metrics(f.metrics).await?;
    let ended_by = |reason| {
        let labels = [("resource", "pods"), ("reason", reason)];
        samples.sum("informerd_watchers_ended_total", &labels)
    };
    assert_eq!(
        ended_by("Forbidden"),
        1.0,
        "the revoked watch, by its reason"
    );
    assert_eq!(ended_by("ClientClosed"), 0.0, "no client left");
    // The other client's watch goes on: it sees a pod created after the revocation, and
    // every event it got since its SYNCED is in order, with no end in between.
    pod("after-revocation").apply(&f.admin, &f.a).await?;
    let event = loop {
        let event = next(&mut kept_events)
            .await
            .expect("the other watch goes on");
        if event
            .object
            .as_ref()
            .is_some_and(|o| o.name == "after-revocation")
        {
            break event;
        }
    };
    assert_eq!(event.r#type(), EventType::Added);
    // New calls of the revoked client are refused too.
    let (got, _) = from_sidecar(sidecar_list(&mut revoked, "pods", &f.a).await);
    assert_eq!(got, Outcome::Forbidden);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_are_refused_as_unauthenticated() -> anyhow::Result<()> {
    let f = Fixture::new("authz-tokens").await?;
    let good = f.token("reader-ab").await?;
    let expired = f.cluster.resign_token(&good, |claims| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        claims["iat"] = json!(now - 7200);
        claims["nbf"] = json!(now - 7200);
        claims["exp"] = json!(now - 3600);
    })?;
    // The same token signed again with the same key and nothing changed is accepted: what
    // makes `expired` fail is its expiry alone.
    let resigned = f.cluster.resign_token(&good, |_| {})?;
    let forged = forge_token(&good, |claims| {
        claims["sub"] = json!("system:serviceaccount:kube-system:default")
    });
    let other_audience = f
        .cluster
        .service_account_token(&f.a, "reader-ab", &["another-audience"], 3600)
        .await?;
    let apiserver_audience = f
        .cluster
        .service_account_token(&f.a, "reader-ab", &[], 3600)
        .await?;
    let mut accepted = f.sidecar_with(&resigned).await?;
    sidecar_list(&mut accepted, "pods", &f.a)
        .await
        .expect("a re-signed, valid token is accepted");
    let socket = f.base.sidecar().socket().display().to_string();
    for (what, token) in [
        ("expired", Some(expired)),
        ("forged", Some(forged)),
        ("for another audience", Some(other_audience)),
        ("for the apiserver's audience", Some(apiserver_audience)),
        ("missing", None),
    ] {
        let refused = match token {
            Some(token) => refused_calls(f.sidecar_with(&token).await?, &f.a).await,
            None => refused_calls(client::connect(&socket).await?, &f.a).await,
        };
        for (call, status) in refused {
            assert_eq!(
                status.code(),
                Code::Unauthenticated,
                "{call} with a token {what}: {status:?}"
            );
            assert_eq!(
                Reason::of(&status),
                Some(Reason::Unauthenticated),
                "{call}, {what}"
            );
        }
    }
    Ok(())
}

/// The status of each call (Status, Get, List, Watch) on `cache`, which must fail.
async fn refused_calls<T>(
    mut cache: informerd::proto::cache_client::CacheClient<T>,
    ns: &str,
) -> Vec<(&'static str, Status)>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let get = GetRequest {
        resource: "pods".into(),
        namespace: ns.into(),
        name: "p0".into(),
        ..Default::default()
    };
    let list = ListRequest {
        resource: "pods".into(),
        namespace: ns.into(),
        ..Default::default()
    };
    let watch = WatchRequest {
        resource: "pods".into(),
        namespace: ns.into(),
        ..Default::default()
    };
    vec![
        (
            "Status",
            cache
                .status(StatusRequest::default())
                .await
                .expect_err("Status is refused"),
        ),
        ("Get", cache.get(get).await.expect_err("Get is refused")),
        ("List", cache.list(list).await.expect_err("List is refused")),
        (
            "Watch",
            cache.watch(watch).await.expect_err("Watch is refused"),
        ),
        (
            "WatchKeys",
            cache
                .watch_keys(watch_keys_subscription("pods", ns))
                .await
                .expect_err("WatchKeys is refused"),
        ),
    ]
}
