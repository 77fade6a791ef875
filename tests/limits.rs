//! The limits that protect the process (`limits:` of the configuration), against the real
//! control plane and the real binary: an object over `maxObjectSize` is skipped, counted and
//! logged while the others serve (and a stored older version is removed with a DELETED);
//! Watch and List calls beyond `maxWatchers` and `maxConcurrentLists` are refused with
//! `RESOURCE_EXHAUSTED` naming the limit, until a slot is given back; a request over
//! `maxRequestSize` is refused naming it; above `maxMemory` new Lists and Watches are refused
//! while Get and Status serve.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use http_body_util::BodyExt;
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, GetRequest, ListRequest, Reason,
    StatusRequest, WatchEvent, WatchRequest,
};
use informerd_testkit::{
    self as testkit, free_port, wait_root_ca_published, wait_synced, Limits, Resource,
    SidecarConfig,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Streaming};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// How long a bounded wait may take before a test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// A namespace of ConfigMaps and a sidecar caching them with `limits`, its metrics on a port;
/// the namespace is deleted on drop.
struct Fixture {
    base: testkit::Fixture,
    metrics: u16,
    api: CacheClient<Channel>,
}

impl std::ops::Deref for Fixture {
    type Target = testkit::Fixture;
    fn deref(&self) -> &testkit::Fixture {
        &self.base
    }
}

impl Fixture {
    /// `configmaps`: (name, bytes of data) created before the sidecar starts; `limits`: the
    /// `limits:` section.
    async fn new(
        base: &str,
        configmaps: &[(&str, usize)],
        limits: impl FnOnce(Limits) -> Limits,
    ) -> Fixture {
        let mut base = testkit::Fixture::new(base).await.expect("namespace");
        let fixture_api: Api<ConfigMap> = base.api();
        // The sidecar's first list must hold kube-root-ca.crt (the tests count it; under load it
        // was once published after the sync).
        wait_root_ca_published(base.kube(), base.ns())
            .await
            .expect("kube-root-ca.crt is published");
        for (name, size) in configmaps {
            fixture_api
                .create(&PostParams::default(), &config_map(name, *size))
                .await
                .expect("create configmap");
        }
        let metrics = free_port();
        let config = SidecarConfig::new()
            .resource(Resource::configmaps().namespaces([base.ns()]))
            .server(|s| s.metrics_port(metrics))
            .limits(limits);
        base.start_sidecar(BIN.as_ref(), &config)
            .expect("start the sidecar");
        // Status, which the limits never refuse (Lists and Watches they may).
        let mut api = base.cache().await.expect("connect");
        wait_synced(&mut api).await.expect("synced");
        Fixture { base, metrics, api }
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.kube().clone(), self.ns())
    }

    /// The names the sidecar lists.
    async fn names(&self) -> Vec<String> {
        let mut api = self.api.clone();
        let mut stream = api.list(self.list()).await.expect("list").into_inner();
        let mut names = Vec::new();
        while let Some(chunk) = stream.message().await.expect("list stream") {
            names.extend(chunk.objects.into_iter().map(|o| o.name));
        }
        names.sort();
        names
    }

    fn list(&self) -> ListRequest {
        ListRequest {
            resource: "configmaps".into(),
            namespace: self.ns().to_owned(),
            ..Default::default()
        }
    }

    fn watch(&self) -> WatchRequest {
        WatchRequest {
            resource: "configmaps".into(),
            namespace: self.ns().to_owned(),
            start: Some(Start::SendInitialState(true)),
            ..Default::default()
        }
    }

    /// `/metrics` as text.
    async fn metrics(&self) -> String {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Empty<bytes::Bytes>>();
        let uri = format!("http://127.0.0.1:{}/metrics", self.metrics);
        let response = client.get(uri.parse().unwrap()).await.expect("scrape");
        let body = response.into_body().collect().await.expect("body");
        String::from_utf8(body.to_bytes().to_vec()).expect("UTF-8")
    }

    /// The value of the sample whose line starts with `series` (name and labels).
    async fn sample(&self, series: &str) -> f64 {
        let text = self.metrics().await;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
    }
}

fn config_map(name: &str, size: usize) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": {"payload": "x".repeat(size)}
    }))
    .expect("a ConfigMap")
}

/// The next event that is not a bookmark.
async fn next(stream: &mut Streaming<WatchEvent>) -> WatchEvent {
    loop {
        let event = tokio::time::timeout(PATIENCE, stream.message())
            .await
            .expect("an event in time")
            .expect("the watch goes on")
            .expect("the watch is open");
        if event.r#type != EventType::Bookmark as i32 {
            return event;
        }
    }
}

/// Asserts `status` is `RESOURCE_EXHAUSTED` with the trailer `reason` (which tells a client it
/// is this limit, not `FellBehind`), and its message names `key`.
fn assert_exhausted(status: &tonic::Status, reason: Reason, key: &str) {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(Reason::of(status), Some(reason), "{status:?}");
    assert!(status.message().contains(key), "{status:?}");
}

/// Calls `call` until it succeeds, within [`PATIENCE`] (a slot is given back when the server
/// sees the call end, a moment after the client drops it).
async fn eventually<T, F, Fut>(mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match call().await {
            Ok(t) => return t,
            Err(e) if tokio::time::Instant::now() < deadline => {
                assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("still refused after {PATIENCE:?}: {e:?}"),
        }
    }
}

#[tokio::test]
async fn an_object_over_max_object_size_is_skipped_counted_and_logged_while_others_serve() {
    let f = Fixture::new("limits-size", &[("small", 100), ("big", 20_000)], |l| {
        l.max_object_size("8Ki")
    })
    .await;
    let names = f.names().await;
    assert!(names.contains(&"small".to_string()), "{names:?}");
    assert!(!names.contains(&"big".to_string()), "{names:?}");
    let mut api = f.api.clone();
    let get = |name: &str| GetRequest {
        resource: "configmaps".into(),
        namespace: f.ns().to_owned(),
        name: name.into(),
        ..Default::default()
    };
    let missing = api.get(get("big")).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
    let log = f.sidecar().plain_log();
    assert!(
        log.lines()
            .any(|l| l.contains("larger than limits.maxObjectSize")
                && l.contains(&format!("{}/big", f.ns()))
                && l.contains("limit=8192")),
        "{log}"
    );

    // A stored object that grows over the limit is removed, at the resourceVersion of the
    // update; one that shrinks under it comes in.
    let mut watch = api.watch(f.watch()).await.expect("watch").into_inner();
    while next(&mut watch).await.r#type != EventType::Synced as i32 {}
    let patch = |size: usize| Patch::Merge(json!({"data": {"payload": "y".repeat(size)}}));
    let grown = f
        .configmaps()
        .patch("small", &PatchParams::default(), &patch(20_000))
        .await
        .expect("grow small");
    let deleted = next(&mut watch).await;
    assert_eq!(deleted.r#type, EventType::Deleted as i32, "{deleted:?}");
    let object = deleted.object.expect("an object");
    assert_eq!(object.name, "small");
    assert_eq!(
        Some(object.resource_version.as_str()),
        grown.metadata.resource_version.as_deref()
    );
    f.configmaps()
        .patch("big", &PatchParams::default(), &patch(100))
        .await
        .expect("shrink big");
    let added = next(&mut watch).await;
    assert_eq!(added.r#type, EventType::Added as i32, "{added:?}");
    assert_eq!(added.object.expect("an object").name, "big");

    let series = format!(
        "informerd_scope_objects_skipped_total{{resource=\"configmaps\",scope=\"{}\",reason=\"too_large\"}}",
        f.ns()
    );
    // Every arrival counts: big at the list, small grown (a relist would count them again).
    let skipped = f.sample(&series).await;
    assert!(skipped >= 2.0, "{skipped}");
}

#[tokio::test]
async fn watches_beyond_max_watchers_are_refused_until_one_closes() {
    let f = Fixture::new("limits-watchers", &[("a", 10)], |l| l.max_watchers(2)).await;
    let mut api = f.api.clone();
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut w = api.watch(f.watch()).await.expect("watch").into_inner();
        while next(&mut w).await.r#type != EventType::Synced as i32 {}
        open.push(w);
    }
    let refused = api.watch(f.watch()).await.unwrap_err();
    assert_exhausted(&refused, Reason::TooManyWatchers, "limits.maxWatchers");
    assert!(
        refused.message().contains("2 Watch calls are open"),
        "{refused:?}"
    );
    assert!(
        f.names().await.contains(&"a".to_string()),
        "Lists are not limited by it"
    );
    drop(open.pop());
    let mut w = eventually(|| {
        let mut api = api.clone();
        let request = f.watch();
        async move { api.watch(request).await }
    })
    .await
    .into_inner();
    assert_eq!(next(&mut w).await.r#type, EventType::Added as i32);
    let series = "informerd_limit_refusals_total{limit=\"maxWatchers\"}";
    assert!(f.sample(series).await >= 1.0);
}

/// A channel whose HTTP/2 windows are small, so that a List it does not read stays open.
async fn small_window_channel(socket: &Path) -> CacheClient<Channel> {
    let socket = socket.to_path_buf();
    let channel = Endpoint::from_static("http://informerd")
        .initial_stream_window_size(Some(16 << 10))
        .initial_connection_window_size(Some(16 << 10))
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .expect("connect");
    CacheClient::new(channel)
}

#[tokio::test]
async fn lists_beyond_max_concurrent_lists_are_refused_while_one_is_held_unread() {
    // 2 MB of objects: more than the server's HTTP/2 send buffer and the client's window.
    let names: Vec<String> = (0..40).map(|i| format!("cm{i}")).collect();
    let configmaps: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 50_000)).collect();
    let f = Fixture::new("limits-lists", &configmaps, |l| l.max_concurrent_lists(1)).await;
    let mut slow = small_window_channel(f.sidecar().socket()).await;
    let held = slow
        .list(ListRequest {
            chunk_size: 1,
            ..f.list()
        })
        .await
        .expect("the first List starts");
    let mut api = f.api.clone();
    let refused = api.list(f.list()).await.unwrap_err();
    assert_exhausted(&refused, Reason::TooManyLists, "limits.maxConcurrentLists");
    // The held List is still refused others after the sidecar gave up on it (5 s unread):
    // its slot is the call's until the call ends.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_exhausted(
        &api.list(f.list()).await.unwrap_err(),
        Reason::TooManyLists,
        "maxConcurrentLists",
    );
    drop(held);
    let mut stream = eventually(|| {
        let mut api = api.clone();
        let request = f.list();
        async move { api.list(request).await }
    })
    .await
    .into_inner();
    let mut listed = 0;
    while let Some(chunk) = stream.message().await.expect("list stream") {
        listed += chunk.objects.len();
    }
    assert!(listed >= 40, "{listed}");
}

#[tokio::test]
async fn a_request_over_max_request_size_is_refused_naming_the_limit() {
    let f = Fixture::new("limits-request", &[("a", 10)], |l| {
        l.max_request_size("1Ki")
    })
    .await;
    let mut api = f.api.clone();
    let refused = api
        .list(ListRequest {
            label_selector: format!("app in ({})", vec!["x"; 1000].join(",")),
            ..f.list()
        })
        .await
        .unwrap_err();
    assert_exhausted(
        &refused,
        Reason::RequestTooLarge,
        "over limits.maxRequestSize (1024 bytes)",
    );
    assert_eq!(
        f.names().await.len(),
        2,
        "a small request serves (a, kube-root-ca.crt)"
    );
}

#[tokio::test]
async fn above_max_memory_new_lists_and_watches_are_refused_while_get_serves() {
    // One byte: the process is always above it.
    let f = Fixture::new("limits-memory", &[("a", 10)], |l| l.max_memory(1u64)).await;
    let mut api = f.api.clone();
    assert_exhausted(
        &api.list(f.list()).await.unwrap_err(),
        Reason::OverMemoryLimit,
        "above limits.maxMemory",
    );
    assert_exhausted(
        &api.watch(f.watch()).await.unwrap_err(),
        Reason::OverMemoryLimit,
        "limits.maxMemory",
    );
    let got = api
        .get(GetRequest {
            resource: "configmaps".into(),
            namespace: f.ns().to_owned(),
            name: "a".into(),
            ..Default::default()
        })
        .await
        .expect("Get serves")
        .into_inner();
    assert_eq!(got.object.expect("object").name, "a");
    let status = api.status(StatusRequest::default()).await.expect("status");
    assert!(status.get_ref().synced, "the cache goes on");
    let log = f.sidecar().log();
    assert!(
        log.contains("allocated memory is above limits.maxMemory"),
        "{log}"
    );
    let refusals: BTreeMap<&str, f64> = [("maxMemory", 2.0)].into();
    for (limit, at_least) in refusals {
        let series = format!("informerd_limit_refusals_total{{limit=\"{limit}\"}}");
        assert!(f.sample(&series).await >= at_least);
    }
}
