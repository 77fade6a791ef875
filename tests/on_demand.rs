//! On-demand caches (`onDemand`, the `Ensure` RPC) on the real control plane: a client ensures
//! a CustomResourceDefinition's kind the configuration does not list; the cache syncs and
//! serves (List holds the custom resources, a Watch sees a new one); once no client has used
//! it for `idleTimeout` it is stopped (Status and `/metrics` say so) and the process's
//! allocated memory falls back; a kind outside `onDemand.allow` is refused with
//! PERMISSION_DENIED naming the bound, and so is a cache over `onDemand.maxCaches`. Ensure
//! is called through the raw API, the Rust client and the CLI. Each behaviour is a test of its
//! own, with a namespace, CRDs and sidecar of its own.

use std::time::Duration;

use futures::TryStreamExt;
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EnsureRequest, EnsureResponse, EventType,
    ListRequest, StatusRequest, StatusResponse, WatchRequest,
};
use informerd_client::{self as client, proto::Reason};
use informerd_testkit::{
    free_port, scrape_metrics, unique_prefix, Fixture, OnDemand, SidecarConfig, Transform,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// Custom resources created before the cache is ensured.
const OBJECTS: usize = 200;
/// Bytes of unique data in each (so that they weigh on the cache, not only on its indexes).
const PAYLOAD: usize = 16 * 1024;
/// How long waits for the sidecar may take: generous bounds, never a measure.
const PATIENCE: Duration = Duration::from_secs(120);

/// A namespaced CRD of `kind` in `group`, served as v1.
/// The fixture deletes it on drop.
async fn create_crd(fixture: &mut Fixture, group: &str, kind: &str) -> anyhow::Result<ApiResource> {
    let plural = format!("{}s", kind.to_lowercase());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "properties": {"data": {"type": "string"}}}}}}}]
        }
    }))?;
    Api::<CustomResourceDefinition>::all(fixture.kube().clone())
        .create(&PostParams::default(), &crd)
        .await?;
    fixture.delete_on_drop::<CustomResourceDefinition>(&format!("{plural}.{group}"));
    let api_version = format!("{group}/v1");
    wait_served(fixture.kube(), &api_version, &plural).await?;
    Ok(ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version,
        kind: kind.into(),
        plural,
    })
}

/// Waits until discovery of `api_version` lists `plural`: a CRD's kind is served a moment
/// after the CRD is created, and the sidecar resolves kinds through the same discovery.
async fn wait_served(client: &kube::Client, api_version: &str, plural: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Ok(list) = client.list_api_group_resources(api_version).await {
            if list.resources.iter().any(|r| r.name == plural) {
                return Ok(());
            }
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{api_version} {plural} is not in discovery after {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates (server-side apply) custom resource `name` with `PAYLOAD` bytes of data unique to it;
/// retries while its CRD is not yet established.
async fn apply(api: &Api<DynamicObject>, ar: &ApiResource, name: &str) -> anyhow::Result<()> {
    let data: String = (0..PAYLOAD / 16)
        .map(|i| format!("{:016x}", fxhash(name, i)))
        .collect();
    let object = json!({"apiVersion": ar.api_version, "kind": ar.kind,
                        "metadata": {"name": name}, "spec": {"data": data}});
    let params = PatchParams::apply("informerd-test").force();
    for attempt in 0.. {
        match api.patch(name, &params, &Patch::Apply(&object)).await {
            Ok(_) => return Ok(()),
            Err(_) if attempt < 300 => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => return Err(e.into()),
        }
    }
    unreachable!()
}

/// Distinct bits for object `name`, word `i`.
fn fxhash(name: &str, i: usize) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (name, i).hash(&mut h);
    h.finish()
}

/// Ensures `kind` of `api_version` in `namespaces` with the Rust client; the name to read it by.
async fn ensure(
    api: &CacheClient<Channel>,
    api_version: &str,
    kind: &str,
    namespaces: &[&str],
) -> Result<String, tonic::Status> {
    client::ensure_resource(api.clone(), api_version, kind, namespaces, PATIENCE)
        .await
        .map_err(|e| match e {
            client::Error::Status { status, .. } => *status,
            other => panic!("Ensure: {other}"),
        })
}

/// The raw call, for what the Rust client leaves out (whether it started the cache); waits for
/// the sync as long as the sidecar's default (30s).
async fn ensure_raw(
    api: &mut CacheClient<Channel>,
    api_version: &str,
    namespace: &str,
) -> anyhow::Result<EnsureResponse> {
    let request = EnsureRequest {
        api_version: api_version.into(),
        kind: "Widget".into(),
        namespaces: vec![namespace.into()],
        ..Default::default()
    };
    Ok(api.ensure(request).await?.into_inner())
}

async fn status(api: &mut CacheClient<Channel>) -> anyhow::Result<StatusResponse> {
    Ok(api.status(StatusRequest::default()).await?.into_inner())
}

/// `informerd_memory_allocated_bytes` from `/metrics`.
async fn allocated(port: u16) -> anyhow::Result<f64> {
    Ok(scrape_metrics(port)
        .await?
        .sum("informerd_memory_allocated_bytes", &[]))
}

/// Asserts `status` is PERMISSION_DENIED with the Forbidden reason, naming `bound`.
fn assert_refused_by(status: &tonic::Status, bound: &str) {
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert_eq!(Reason::of(status), Some(Reason::Forbidden), "{status:?}");
    assert!(status.message().contains(bound), "{status:?}");
}

/// A namespace with `objects` Widgets (two CRDs of a group of its own, Widget and Gizmo), and
/// informerd allowing both kinds on demand (at most one cache, stopped after 2 s idle,
/// managedFields dropped), metrics on a port of its own. The namespace and CRDs are deleted on
/// drop.
struct Setup {
    fixture: Fixture,
    port: u16,
    api: CacheClient<Channel>,
    widgets: Api<DynamicObject>,
    widgets_ar: ApiResource,
    /// The Widgets' apiVersion.
    api_version: String,
    /// The on-demand resource of the Widgets of the namespace.
    name: String,
    ns: String,
}

impl Setup {
    async fn new(base: &str, objects: usize) -> anyhow::Result<Setup> {
        let mut fixture = Fixture::new(base).await?;
        let client = fixture.kube().clone();
        let group = format!("{}.ondemand.informerd.io", unique_prefix("od"));
        let widgets_ar = create_crd(&mut fixture, &group, "Widget").await?;
        create_crd(&mut fixture, &group, "Gizmo").await?;
        let ns = fixture.ns().to_owned();
        let widgets: Api<DynamicObject> = Api::namespaced_with(client, &ns, &widgets_ar);
        for i in 0..objects {
            apply(&widgets, &widgets_ar, &format!("w{i}")).await?;
        }
        let port = free_port();
        let config = SidecarConfig::new()
            .on_demand(
                OnDemand::new()
                    .allow(&group, &["Widget", "Gizmo"])
                    .max_caches(1)
                    .idle_timeout("2s")
                    .transform(Transform::default().drop(["metadata.managedFields"])),
            )
            .server(|s| s.metrics_port(port));
        fixture.start_sidecar(std::path::Path::new(BIN), &config)?;
        let api = fixture.cache().await?;
        let api_version = widgets_ar.api_version.clone();
        let name = format!("widgets.{group}/{ns}");
        Ok(Setup {
            fixture,
            port,
            api,
            widgets,
            widgets_ar,
            api_version,
            name,
            ns,
        })
    }

    /// Waits until no on-demand cache is left; the Status then.
    async fn wait_stopped(&mut self) -> anyhow::Result<StatusResponse> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let now = status(&mut self.api).await?;
            if now.on_demand.is_empty() {
                return Ok(now);
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never stopped: {now:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test]
async fn ensure_starts_a_cache_of_a_kind_the_configuration_does_not_list_and_joins_it_after(
) -> anyhow::Result<()> {
    let Setup {
        mut api,
        api_version,
        name,
        ns,
        fixture: _fixture,
        ..
    } = Setup::new("ondemand-start", 1).await?;
    // Ensure: started, synced, named after the resource and its namespace.
    let ensured = ensure_raw(&mut api, &api_version, &ns).await?;
    assert_eq!(ensured.resource, name);
    assert!(ensured.started);
    let joined = ensure_raw(&mut api, &api_version, &ns).await?;
    assert_eq!(
        (joined.resource.as_str(), joined.started),
        (name.as_str(), false)
    );
    Ok(())
}

#[tokio::test]
async fn an_ensured_cache_lists_every_object_transformed_and_shows_in_status_and_metrics(
) -> anyhow::Result<()> {
    let Setup {
        port,
        mut api,
        api_version,
        name,
        ns,
        fixture: _fixture,
        ..
    } = Setup::new("ondemand-serve", OBJECTS).await?;
    ensure_raw(&mut api, &api_version, &ns).await?;
    // It serves: List holds every custom resource, transformed.
    let chunks: Vec<_> = api
        .list(ListRequest {
            resource: name.clone(),
            namespace: ns.clone(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .try_collect()
        .await?;
    let listed: Vec<_> = chunks.iter().flat_map(|c| &c.objects).collect();
    assert_eq!(listed.len(), OBJECTS);
    let first: serde_json::Value = serde_json::from_slice(&listed[0].json)?;
    assert!(first["metadata"].get("managedFields").is_none(), "{first}");
    assert_eq!(first["spec"]["data"].as_str().map(str::len), Some(PAYLOAD));

    // Status and metrics show it, with its objects; the memory it holds is measured.
    let held = status(&mut api).await?;
    let entry = held
        .on_demand
        .iter()
        .find(|c| c.resource == name)
        .unwrap_or_else(|| panic!("{name} not in Status: {held:?}"));
    assert_eq!(entry.objects as usize, OBJECTS);
    assert_eq!(entry.namespaces, vec![ns.clone()]);
    let metrics = scrape_metrics(port).await?;
    assert_eq!(metrics.sum("informerd_on_demand_caches", &[]), 1.0);
    assert_eq!(metrics.sum("informerd_on_demand_starts_total", &[]), 1.0);
    Ok(())
}

#[tokio::test]
async fn a_watch_sees_new_objects_and_keeps_the_cache_past_its_idle_timeout() -> anyhow::Result<()>
{
    let Setup {
        mut api,
        widgets,
        widgets_ar,
        api_version,
        name,
        ns,
        fixture: _fixture,
        ..
    } = Setup::new("ondemand-watch", 1).await?;
    ensure_raw(&mut api, &api_version, &ns).await?;
    // A Watch sees a new custom resource, and keeps the cache while it is open.
    let mut watch = api
        .watch(WatchRequest {
            resource: name.clone(),
            namespace: ns.clone(),
            start: Some(Start::SendInitialState(false)),
            ..Default::default()
        })
        .await?
        .into_inner();
    apply(&widgets, &widgets_ar, "w-new").await?;
    tokio::time::sleep(Duration::from_secs(3)).await; // past idleTimeout, watched
    let added = loop {
        let event = tokio::time::timeout(PATIENCE, watch.message())
            .await??
            .expect("the watch ends only when the cache stops");
        if event.r#type == EventType::Added as i32 {
            break event.object.expect("ADDED carries the object");
        }
    };
    assert_eq!(added.name, "w-new");
    let watched = status(&mut api).await?;
    let entry = watched.on_demand.iter().find(|c| c.resource == name);
    assert_eq!(entry.map(|c| c.clients), Some(1), "{watched:?}");
    Ok(())
}

#[tokio::test]
async fn an_idle_cache_is_stopped_and_the_next_ensure_starts_it_again() -> anyhow::Result<()> {
    let mut setup = Setup::new("ondemand-idle", 1).await?;
    let (port, api_version, name, ns) = (
        setup.port,
        setup.api_version.clone(),
        setup.name.clone(),
        setup.ns.clone(),
    );
    ensure_raw(&mut setup.api, &api_version, &ns).await?;
    // No client for idleTimeout: stopped, in Status and metrics.
    let stopped = setup.wait_stopped().await?;
    let mut api = setup.api.clone();
    assert_eq!(stopped.on_demand_stops.get("Idle"), Some(&1), "{stopped:?}");
    assert!(stopped.resources.iter().all(|r| r.name != name));
    let metrics = scrape_metrics(port).await?;
    assert_eq!(metrics.sum("informerd_on_demand_caches", &[]), 0.0);
    assert_eq!(
        metrics.sum("informerd_on_demand_stops_total", &[("reason", "Idle")]),
        1.0
    );
    let gone = api
        .list(ListRequest {
            resource: name.clone(),
            namespace: ns.clone(),
            ..Default::default()
        })
        .await
        .expect_err("a stopped cache is not served");
    assert_eq!(gone.code(), tonic::Code::NotFound, "{gone:?}");

    // Widgets again: a new start (through the CLI, which prints the name to read it by).
    let cli = std::process::Command::new(BIN)
        .args([
            "ensure",
            &api_version,
            "Widget",
            "-n",
            &ns,
            "--timeout",
            "2m",
            "--socket",
        ])
        .arg(setup.fixture.sidecar().socket())
        .output()?;
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(cli.status.success(), "informerd ensure: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&cli.stdout).trim(),
        name,
        "{stderr}"
    );
    let metrics = scrape_metrics(port).await?;
    assert_eq!(metrics.sum("informerd_on_demand_starts_total", &[]), 2.0);
    Ok(())
}

#[tokio::test]
async fn a_stopped_cache_releases_its_memory() -> anyhow::Result<()> {
    let mut setup = Setup::new("ondemand-memory", OBJECTS).await?;
    let (port, api_version, name, ns) = (
        setup.port,
        setup.api_version.clone(),
        setup.name.clone(),
        setup.ns.clone(),
    );
    ensure_raw(&mut setup.api, &api_version, &ns).await?;
    // The memory it holds is measured.
    let held = status(&mut setup.api).await?;
    let encoded = held
        .resources
        .iter()
        .find(|r| r.name == name)
        .map_or(0, |r| r.encoded_bytes + r.interned_bytes);
    let allocated_held = allocated(port).await?;
    setup.wait_stopped().await?;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    // Its memory is released: allocated bytes fall below what they were while it held the
    // objects, by at least half of the size of the objects (encoded and interned) (waited for, not timed).
    let margin = encoded as f64 / 2.0;
    assert!(margin > (OBJECTS * PAYLOAD / 4) as f64, "encoded {encoded}");
    let mut after = allocated(port).await?;
    while after > allocated_held - margin && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = allocated(port).await?;
    }
    println!(
        "allocated bytes: {allocated_held} while holding {OBJECTS} objects ({encoded} encoded \
         bytes), {after} after the stop"
    );
    assert!(
        after <= allocated_held - margin,
        "allocated {after} after the stop, {allocated_held} before (margin {margin})"
    );

    Ok(())
}

#[tokio::test]
async fn a_kind_outside_on_demand_allow_is_refused() -> anyhow::Result<()> {
    let Setup {
        api,
        ns,
        fixture: _fixture,
        ..
    } = Setup::new("ondemand-allow", 0).await?;
    // Outside the bounds: a kind onDemand.allow does not list.
    let refused = ensure(&api, "v1", "ConfigMap", &[&ns])
        .await
        .expect_err("ConfigMaps are outside the bounds");
    assert_refused_by(&refused, "onDemand.allow");

    Ok(())
}

#[tokio::test]
async fn a_cache_over_on_demand_max_caches_is_refused() -> anyhow::Result<()> {
    let Setup {
        mut api,
        api_version,
        ns,
        fixture: _fixture,
        ..
    } = Setup::new("ondemand-max", 0).await?;
    // maxCaches: 1. Widgets, then Gizmos is one too many.
    ensure_raw(&mut api, &api_version, &ns).await?;
    let full = ensure(&api, &api_version, "Gizmo", &[&ns])
        .await
        .expect_err("maxCaches is 1");
    assert_refused_by(&full, "onDemand.maxCaches");
    Ok(())
}
