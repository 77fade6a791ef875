//! Remote clusters (`clusters:`), on real control planes: the shared one is informerd's own
//! cluster, a private one (its own etcd and kube-apiserver) is the remote `second`. Resources
//! of the same name in each hold different objects, and a client reads and watches each by
//! cluster (each behaviour a test of its own, on two clusters of its own); killing the second's
//! apiserver marks it unreachable in Status and metrics while the
//! first keeps serving and the second's cache serves what it holds; after the restart it is
//! reachable again and a watch opened before the kill receives the changes made after it. A
//! second test starts informerd while a remote cluster does not answer (a stalled proxy): it
//! serves its own cluster, is ready, and picks the remote one up when it answers.

use futures::StreamExt;
use informerd::proto::{
    watch_request::Start, EventType, ListRequest, StatusResponse, WatchEvent, WatchRequest,
};
use informerd_client as client;
use informerd_testkit::{
    free_port, scrape_metrics, ControlPlane, FaultProxy, Fixture, Resource, Sidecar, SidecarConfig,
};
use tonic::Code;

mod clusters_support;

use clusters_support::{
    cached_value, cached_value_at, create_configmap, list_names, wait_reachable, wait_status,
    Cache, TwoClusters, PATIENCE,
};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// informerd with the configmaps of `namespace` in its own cluster and in the remote `cluster`
/// (reached through `kubeconfig`), metrics on `port`; and a client of it.
async fn serve(
    first: &ControlPlane,
    port: u16,
    namespace: &str,
    cluster: &str,
    kubeconfig: &std::path::Path,
) -> (Sidecar, Cache) {
    let config = SidecarConfig::new()
        .resource(configmaps(namespace, "default"))
        .resource(configmaps(namespace, cluster))
        .cluster(cluster, kubeconfig)
        .server(|s| s.metrics_port(port));
    let sidecar = Sidecar::start(std::path::Path::new(BIN), first, &config)
        .expect("informerd starts (also while a remote cluster does not answer)");
    let api = client::connect(&format!("unix://{}", sidecar.socket().display()))
        .await
        .expect("connect");
    (sidecar, api)
}

/// The next object event (ADDED, MODIFIED, DELETED) of `watch`, skipping bookmarks.
async fn next_change(watch: &mut tonic::Streaming<WatchEvent>) -> WatchEvent {
    loop {
        let event = tokio::time::timeout(PATIENCE, watch.next())
            .await
            .expect("an event within the deadline")
            .expect("the watch goes on")
            .expect("no error");
        if event.r#type() != EventType::Bookmark {
            return event;
        }
    }
}

/// The whole answer of `/readyz` (status line, headers, body).
async fn readyz(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the metrics port");
    stream
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    answer
}

fn configmaps(namespace: &str, cluster: &str) -> Resource {
    Resource::configmaps()
        .namespaces([namespace])
        .cluster(cluster)
}

/// The two clusters and informerd serving both, metrics on a port of its own.
struct Served {
    clusters: TwoClusters,
    port: u16,
    sidecar: Sidecar,
    api: Cache,
}

async fn served(base: &str) -> Served {
    let clusters = TwoClusters::start(base).await;
    let port = free_port();
    let (sidecar, api) = serve(
        clusters.first,
        port,
        &clusters.ns,
        "second",
        clusters.second.control_plane().kubeconfig(),
    )
    .await;
    Served {
        clusters,
        port,
        sidecar,
        api,
    }
}

/// A watch of the configmaps of `ns` in `cluster`, from its initial state.
fn watch_of(ns: &str, cluster: &str) -> WatchRequest {
    WatchRequest {
        resource: "configmaps".into(),
        cluster: cluster.into(),
        namespace: ns.into(),
        start: Some(Start::SendInitialState(true)),
        wait_for_sync: true,
        ..WatchRequest::default()
    }
}

/// Opens a watch of the second cluster and reads it to SYNCED: the stream, and the token
/// (epoch, revision) SYNCED carried.
async fn second_watch_synced(
    api: &mut Cache,
    ns: &str,
) -> (tonic::Streaming<WatchEvent>, (u64, u64)) {
    let mut watch = api
        .watch(watch_of(ns, "second"))
        .await
        .expect("Watch")
        .into_inner();
    loop {
        let event = next_change(&mut watch).await;
        if event.r#type() == EventType::Synced {
            return (watch, (event.epoch, event.revision));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cluster_is_read_by_name_and_an_unknown_one_is_refused() {
    let Served {
        clusters,
        mut api,
        sidecar: _sidecar,
        ..
    } = served("clusters-read").await;
    let ns = &clusters.ns;

    // Same resource name, one per cluster, different objects.
    assert_eq!(
        cached_value(&mut api, ("", "configmaps"), ns, "settings").await,
        "first"
    );
    assert_eq!(
        cached_value(&mut api, ("second", "configmaps"), ns, "settings").await,
        "second"
    );
    assert_eq!(
        list_names(&mut api, ("default", "configmaps"), ns)
            .await
            .expect("List"),
        ["settings"]
    );
    assert_eq!(
        list_names(&mut api, ("second", "configmaps"), ns)
            .await
            .expect("List"),
        ["only-second", "settings"]
    );

    // An unknown cluster is refused naming the configured ones.
    let unknown = api
        .list(ListRequest {
            resource: "configmaps".into(),
            cluster: "third".into(),
            ..ListRequest::default()
        })
        .await
        .expect_err("an unknown cluster");
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    assert!(unknown.message().contains("default, second"), "{unknown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_a_cluster_sees_its_own_changes_only() {
    let Served {
        clusters,
        mut api,
        sidecar: _sidecar,
        ..
    } = served("clusters-watch").await;
    let ns = &clusters.ns;
    let (mut second_watch, _) = second_watch_synced(&mut api, ns).await;
    create_configmap(&clusters.first_client, ns, "only-first", "first").await;
    create_configmap(&clusters.second_client, ns, "added-second", "second").await;
    let event = next_change(&mut second_watch).await;
    assert_eq!(event.r#type(), EventType::Added);
    assert_eq!(event.object.expect("object").name, "added-second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_token_of_one_clusters_cache_is_refused_by_anothers() {
    let Served {
        clusters,
        mut api,
        sidecar: _sidecar,
        ..
    } = served("clusters-token").await;
    let ns = &clusters.ns;
    let (_, (epoch, revision)) = second_watch_synced(&mut api, ns).await;
    let foreign = WatchRequest {
        start: Some(Start::Since(informerd::proto::ResumeToken {
            epoch,
            revision,
        })),
        ..watch_of(ns, "")
    };
    let refused = match api.watch(foreign).await {
        Err(status) => status,
        Ok(stream) => stream
            .into_inner()
            .next()
            .await
            .expect("an answer")
            .expect_err("a token of another cluster's cache"),
    };
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_cluster_is_reported_while_the_others_serve_and_recovers_with_its_watches() {
    let Served {
        clusters,
        port,
        sidecar: _sidecar,
        mut api,
    } = served("clusters-lost").await;
    let TwoClusters {
        first_client,
        second,
        second_client,
        ns,
        owner: _owner,
        ..
    } = clusters;
    // Opened before the kill; it must go on after the restart.
    let (mut second_watch, _) = second_watch_synced(&mut api, &ns).await;
    create_configmap(&second_client, &ns, "added-second", "second").await;
    let event = next_change(&mut second_watch).await;
    assert_eq!(event.object.expect("object").name, "added-second");

    // The second cluster's apiserver goes away: reported, while the first serves and the
    // second's cache serves what it holds.
    second
        .kill_and_restart_apiserver(async || {
            let s = wait_reachable(&mut api, "second", false).await;
            let default = s
                .clusters
                .iter()
                .find(|c| c.name == "default")
                .expect("default");
            assert!(default.reachable, "{s:?}");
            let lost = s
                .clusters
                .iter()
                .find(|c| c.name == "second")
                .expect("second");
            assert!(!lost.message.is_empty(), "says why: {lost:?}");
            let metrics = scrape_metrics(port).await.expect("metrics");
            assert_eq!(
                metrics.sum("informerd_cluster_reachable", &[("cluster", "second")]),
                0.0
            );
            assert_eq!(
                metrics.sum("informerd_cluster_reachable", &[("cluster", "default")]),
                1.0
            );
            let written = create_configmap(&first_client, &ns, "while-down", "first").await;
            let at = ("", "configmaps");
            assert_eq!(
                cached_value_at(&mut api, at, &ns, "while-down", &written).await,
                "first"
            );
            assert_eq!(
                list_names(&mut api, ("second", "configmaps"), &ns)
                    .await
                    .expect("List"),
                ["added-second", "only-second", "settings"]
            );
            Ok(())
        })
        .await
        .expect("kill and restart the second apiserver");

    // Back: reachable again, and the watch opened before the kill goes on.
    wait_reachable(&mut api, "second", true).await;
    let metrics = scrape_metrics(port).await.expect("metrics");
    assert_eq!(
        metrics.sum("informerd_cluster_reachable", &[("cluster", "second")]),
        1.0
    );
    create_configmap(&second_client, &ns, "after-restart", "second").await;
    let event = next_change(&mut second_watch).await;
    assert_eq!(event.r#type(), EventType::Added);
    assert_eq!(event.object.expect("object").name, "after-restart");
    assert_eq!(
        cached_value(&mut api, ("second", "configmaps"), &ns, "after-restart").await,
        "second"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_cluster_down_at_start_up_is_picked_up_when_it_answers() {
    let first = ControlPlane::get();
    let fixture = Fixture::on(first, "clusters-late").await.expect("ns");
    let ns = fixture.ns().to_owned();
    create_configmap(fixture.kube(), &ns, "settings", "first").await;
    // The "remote" cluster is the shared one behind a proxy that holds every byte.
    let proxy = FaultProxy::start(first).await.expect("proxy");
    proxy.stall();
    let port = free_port();
    let (sidecar, mut api) =
        serve(first, port, &ns, "late", proxy.control_plane().kubeconfig()).await;
    assert_eq!(
        cached_value(&mut api, ("", "configmaps"), &ns, "settings").await,
        "first"
    );
    let s = wait_reachable(&mut api, "late", false).await;
    let late = s
        .resources
        .iter()
        .find(|r| r.cluster == "late")
        .expect("late's resource");
    assert!(!late.synced, "{late:?}");
    let readyz = readyz(port).await;
    assert!(
        readyz.starts_with("HTTP/1.1 200"),
        "a remote cluster does not gate readiness: {readyz}"
    );

    proxy.resume();
    wait_reachable(&mut api, "late", true).await;
    let late_synced =
        |s: &StatusResponse| s.resources.iter().any(|r| r.cluster == "late" && r.synced);
    wait_status(&mut api, "late synced", late_synced).await;
    assert_eq!(
        cached_value(&mut api, ("late", "configmaps"), &ns, "settings").await,
        "first"
    );
    drop(sidecar);
}
