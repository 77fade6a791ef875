//! On-demand caches of remote clusters (`Ensure` with `cluster`), on real control planes: the
//! shared one is informerd's own cluster, a private one (its own etcd and kube-apiserver) the
//! remote `second`. The same kind ensured in each is two caches, read by cluster with objects
//! that differ; `onDemand.maxCaches` counts them together; Status and metrics carry each
//! cache's cluster; both stop once idle (each a test of its own, on two clusters of its own). With the second's apiserver killed, an `Ensure` on it
//! is UNAVAILABLE naming it (not a wait to the deadline), and Status stays `synced` (a remote
//! outage does not make the sidecar unready for its own cluster's clients).

use informerd::proto::{EnsureRequest, EnsureResponse, StatusResponse};
use informerd_client::{self as client, proto::Reason};
use informerd_testkit::{free_port, scrape_metrics, OnDemand, Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use tonic::Code;

mod clusters_support;

use clusters_support::{
    cached_value, list_names, status, wait_status, Cache, TwoClusters, PATIENCE,
};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// Ensures the ConfigMaps of `namespace` in `cluster`, with a deadline of [`PATIENCE`].
async fn ensure(
    api: &mut Cache,
    cluster: &str,
    namespace: &str,
) -> Result<EnsureResponse, tonic::Status> {
    let mut request = tonic::Request::new(EnsureRequest {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespaces: vec![namespace.into()],
        cluster: cluster.into(),
        ..EnsureRequest::default()
    });
    request.set_timeout(PATIENCE);
    api.ensure(request).await.map(tonic::Response::into_inner)
}

/// The two clusters (`ns` in each), and informerd allowing ConfigMaps on demand (at most two
/// caches, stopped after 3 s idle) in its own cluster and the remote `second`, metrics on a
/// port of its own.
struct Served {
    clusters: TwoClusters,
    port: u16,
    sidecar: Sidecar,
    api: Cache,
    /// The on-demand resource of the ConfigMaps of `ns`.
    name: String,
}

async fn served(base: &str) -> Served {
    let clusters = TwoClusters::start(base).await;
    let port = free_port();
    let config = SidecarConfig::new()
        .cluster("second", clusters.second.control_plane().kubeconfig())
        .on_demand(
            OnDemand::new()
                .allow("", &["ConfigMap"])
                .max_caches(2)
                .idle_timeout("3s"),
        )
        .server(|s| s.metrics_port(port));
    let sidecar = Sidecar::start(std::path::Path::new(BIN), clusters.first, &config)
        .expect("informerd starts");
    let api = client::connect(&format!("unix://{}", sidecar.socket().display()))
        .await
        .expect("connect");
    let name = format!("configmaps/{}", clusters.ns);
    Served {
        clusters,
        port,
        sidecar,
        api,
        name,
    }
}

/// Ensures the ConfigMaps of `ns` in the second cluster and in the default one: two caches.
async fn ensure_both(api: &mut Cache, ns: &str) -> (EnsureResponse, EnsureResponse) {
    let remote = ensure(api, "second", ns).await.expect("Ensure in second");
    let own = ensure(api, "", ns)
        .await
        .expect("Ensure in the default cluster");
    (remote, own)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_kind_ensured_in_each_cluster_is_two_caches_read_by_cluster() {
    let Served {
        clusters,
        mut api,
        name,
        sidecar: _sidecar,
        ..
    } = served("od-remote-read").await;
    let ns = &clusters.ns;

    // The same kind in each cluster: two caches of the same name, each started.
    let (remote, own) = ensure_both(&mut api, ns).await;
    assert_eq!(
        (remote.resource.as_str(), remote.started),
        (name.as_str(), true)
    );
    assert_eq!((own.resource.as_str(), own.started), (name.as_str(), true));
    let again = ensure(&mut api, "second", ns).await.expect("joined");
    assert!(!again.started, "{again:?}");

    // Read by cluster: objects that differ.
    assert_eq!(
        cached_value(&mut api, ("second", &name), ns, "settings").await,
        "second"
    );
    assert_eq!(
        cached_value(&mut api, ("", &name), ns, "settings").await,
        "first"
    );
    assert_eq!(
        list_names(&mut api, ("second", &name), ns)
            .await
            .expect("List second"),
        ["only-second", "settings"]
    );
    assert_eq!(
        list_names(&mut api, ("default", &name), ns)
            .await
            .expect("List default"),
        ["settings"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_caches_counts_the_caches_of_every_cluster() {
    let Served {
        clusters,
        mut api,
        sidecar: _sidecar,
        ..
    } = served("od-remote-max").await;
    ensure_both(&mut api, &clusters.ns).await;
    // maxCaches (2) counts both clusters: a third cache, in either, is refused.
    let full = ensure(&mut api, "second", "kube-system")
        .await
        .expect_err("maxCaches is 2");
    assert_eq!(full.code(), Code::PermissionDenied, "{full:?}");
    assert!(full.message().contains("onDemand.maxCaches"), "{full:?}");
    assert!(
        full.message().contains("second/configmaps/kube-system"),
        "{full:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_on_an_unknown_cluster_is_not_found_naming_the_configured_ones() {
    let Served {
        clusters,
        mut api,
        sidecar: _sidecar,
        ..
    } = served("od-remote-unknown").await;
    let unknown = ensure(&mut api, "third", &clusters.ns)
        .await
        .expect_err("no such cluster");
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    assert!(unknown.message().contains("default, second"), "{unknown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_metrics_carry_each_caches_cluster() {
    let Served {
        clusters,
        port,
        mut api,
        name,
        sidecar: _sidecar,
        ..
    } = served("od-remote-status").await;
    ensure_both(&mut api, &clusters.ns).await;
    let s = status(&mut api).await;
    let mut clusters: Vec<&str> = s.on_demand.iter().map(|c| c.cluster.as_str()).collect();
    clusters.sort_unstable();
    assert_eq!(clusters, ["default", "second"], "{s:?}");
    let remote_entry = s
        .on_demand
        .iter()
        .find(|c| c.cluster == "second")
        .expect("second's");
    assert_eq!(
        remote_entry.objects, 3,
        "two ConfigMaps and kube-root-ca.crt: {s:?}"
    );
    let metrics = scrape_metrics(port).await.expect("metrics");
    assert_eq!(metrics.sum("informerd_on_demand_caches", &[]), 2.0);
    for cluster in ["default", "second"] {
        let series = metrics.0.iter().find(|m| {
            m.name == "informerd_on_demand_idle_seconds"
                && m.labels.get("cluster").map(String::as_str) == Some(cluster)
                && m.labels.get("resource") == Some(&name)
        });
        assert!(series.is_some(), "no idle series of {cluster}: {metrics:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caches_of_every_cluster_stop_once_idle() {
    let Served {
        clusters,
        mut api,
        name,
        sidecar: _sidecar,
        ..
    } = served("od-remote-idle").await;
    let ns = &clusters.ns;
    ensure_both(&mut api, ns).await;
    // No client for idleTimeout: both stopped, each alone.
    let stopped = wait_status(&mut api, "stopped", |s| s.on_demand.is_empty()).await;
    assert_eq!(stopped.on_demand_stops.get("Idle"), Some(&2), "{stopped:?}");
    let gone = list_names(&mut api, ("second", &name), ns)
        .await
        .expect_err("a stopped cache is not served");
    assert_eq!(gone.code(), Code::NotFound, "{gone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_on_an_unreachable_cluster_is_refused_at_once_and_works_again_after_its_restart() {
    let Served {
        clusters,
        mut api,
        name,
        sidecar: _sidecar,
        ..
    } = served("od-remote-lost").await;
    let TwoClusters {
        second,
        ns,
        owner: _owner,
        ..
    } = clusters;
    // The second cluster's apiserver goes away: Ensure on it is refused at once, naming it;
    // the sidecar stays synced and serves its own cluster on demand.
    second
        .kill_and_restart_apiserver(async || {
            let lost = |s: &StatusResponse| {
                s.clusters
                    .iter()
                    .any(|c| c.name == "second" && !c.reachable)
            };
            let s = wait_status(&mut api, "second unreachable", lost).await;
            assert!(
                s.synced,
                "a remote outage does not make the sidecar unsynced: {s:?}"
            );
            let refused = ensure(&mut api, "second", &ns)
                .await
                .expect_err("the second cluster is down");
            assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
            assert_eq!(Reason::of(&refused), Some(Reason::NotSynced), "{refused:?}");
            assert!(refused.message().contains("cluster second"), "{refused:?}");
            let own = ensure(&mut api, "", &ns)
                .await
                .expect("the default cluster serves");
            assert!(own.started, "{own:?}");
            Ok(())
        })
        .await
        .expect("kill and restart the second apiserver");

    // Back: Ensure on it works again, without a restart of informerd.
    wait_status(&mut api, "second reachable", |s| {
        s.clusters.iter().any(|c| c.name == "second" && c.reachable)
    })
    .await;
    let back = ensure(&mut api, "second", &ns)
        .await
        .expect("Ensure after the restart");
    assert_eq!(back.resource, name);
    assert_eq!(
        cached_value(&mut api, ("second", &name), &ns, "settings").await,
        "second"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_rust_client_name_the_cluster() {
    let Served {
        clusters,
        sidecar,
        api,
        name,
        ..
    } = served("od-remote-clients").await;
    let ns = clusters.ns.clone();
    // The CLI (--cluster) and the Rust client (ensure_in, Api::watch_keys) name the cluster too.
    let cli = std::process::Command::new(BIN)
        .args([
            "ensure",
            "v1",
            "ConfigMap",
            "-n",
            &ns,
            "--cluster",
            "second",
        ])
        .args(["--timeout", "2m", "--socket"])
        .arg(sidecar.socket())
        .output()
        .expect("informerd ensure");
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(
        cli.status.success(),
        "informerd ensure --cluster second: {stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&cli.stdout).trim(),
        name,
        "{stderr}"
    );
    let configmaps: client::Api<ConfigMap> =
        client::ensure_in(api.clone(), "second", &[&ns], &ns, PATIENCE)
            .await
            .expect("ensure_in second");
    let only = configmaps
        .get("only-second")
        .await
        .expect("read from second");
    assert_eq!(
        only.data
            .unwrap_or_default()
            .get("cluster")
            .map(String::as_str),
        Some("second")
    );
    let unknown = client::Api::<ConfigMap>::namespaced(api.clone(), &name, &ns)
        .cluster("nowhere")
        .watch_keys(informerd::proto::KeysSubscription::default())
        .await
        .expect_err("no cluster nowhere");
    match unknown {
        client::Error::Status { status, .. } => {
            assert_eq!(status.code(), Code::NotFound, "{status:?}");
        }
        other => panic!("WatchKeys on an unknown cluster: {other}"),
    }
}
