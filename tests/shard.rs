//! Shards of the cache (issue 32), against the real apiserver with its own `shardSelector`
//! (the control plane runs with the ShardedListAndWatch gate, `tools/cmd/cluster`):
//!
//! - a List with `shard_selector` returns exactly the pods the apiserver's list with the same
//!   `shardSelector` returns, for each half of the hash space; the halves are disjoint and
//!   together the whole namespace;
//! - a Watch with a shard sends that shard's initial state, then the ADDED of a new pod only
//!   to the shard that holds it;
//! - a selector that is not one is `INVALID_ARGUMENT` naming `shard_selector`;
//! - a resource configured with a `shardSelector` caches exactly the apiserver's shard, from its
//!   list and from its watch, receives nothing of the other shard (the apiserver applies it),
//!   and two sidecars with the two halves cache the whole namespace between them.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::TryStreamExt;
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, ListRequest, WatchEvent,
    WatchRequest,
};
use informerd_testkit::{
    connect, create_pods, free_port, pod, scrape_metrics, wait_synced, Fixture, Resource, Sidecar,
    SidecarConfig,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::core::ObjectList;
use tonic::transport::Channel;
use tonic::{Code, Streaming};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const PODS: usize = 40;
const HALF: &str = "0x8000000000000000";

/// The two halves of the uid hash space.
fn halves() -> [String; 2] {
    [
        format!("shardRange(object.metadata.uid, '0x0000000000000000', '{HALF}')"),
        format!("shardRange(object.metadata.uid, '{HALF}', '0x10000000000000000')"),
    ]
}

/// The names of the namespace's pods in the apiserver's shard.
async fn apiserver_shard(fx: &Fixture, selector: &str) -> anyhow::Result<BTreeSet<String>> {
    let query: String = selector
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c.to_string(),
            other => format!("%{:02X}", other as u32),
        })
        .collect();
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{}/pods?shardSelector={query}",
        fx.ns()
    ))
    .body(Vec::new())?;
    let list: ObjectList<Pod> = fx.kube().request(request).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect())
}

/// The names informerd lists for `selector` (empty: every pod).
async fn informerd_list(
    api: &mut CacheClient<Channel>,
    ns: &str,
    selector: &str,
) -> Result<BTreeSet<String>, tonic::Status> {
    informerd_list_at(api, ns, selector, "").await
}

/// [`informerd_list`] once the sidecar has seen `min_resource_version` ("": at once).
async fn informerd_list_at(
    api: &mut CacheClient<Channel>,
    ns: &str,
    selector: &str,
    min_resource_version: &str,
) -> Result<BTreeSet<String>, tonic::Status> {
    let chunks: Vec<_> = api
        .list(ListRequest {
            resource: "pods".into(),
            namespace: ns.into(),
            shard_selector: selector.into(),
            min_resource_version: min_resource_version.into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .try_collect()
        .await?;
    Ok(chunks
        .into_iter()
        .flat_map(|c| c.objects)
        .map(|o| o.name)
        .collect())
}

/// Waits until informerd holds exactly `want` (names) in the namespace.
async fn wait_holds(
    api: &mut CacheClient<Channel>,
    ns: &str,
    want: &BTreeSet<String>,
) -> anyhow::Result<()> {
    for _ in 0..600 {
        if &informerd_list(api, ns, "").await? == want {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!(
        "informerd did not come to hold the apiserver's {} pods",
        want.len()
    )
}

async fn watch(
    api: &mut CacheClient<Channel>,
    ns: &str,
    selector: &str,
) -> anyhow::Result<Streaming<WatchEvent>> {
    let request = WatchRequest {
        resource: "pods".into(),
        namespace: ns.into(),
        shard_selector: selector.into(),
        start: Some(Start::SendInitialState(true)),
        bookmark_interval_seconds: 1,
        ..Default::default()
    };
    Ok(api.watch(request).await?.into_inner())
}

/// The names of a watch's initial state, up to SYNCED.
async fn initial_state(events: &mut Streaming<WatchEvent>) -> anyhow::Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    while let Some(event) = events.message().await? {
        match event.r#type() {
            EventType::Synced => return Ok(names),
            EventType::Added => names.extend(event.object.map(|o| o.name)),
            _ => {}
        }
    }
    anyhow::bail!("the watch ended before SYNCED")
}

/// Reads events until one at `revision` or later; whether an ADDED of `name` came first.
async fn added_before(
    events: &mut Streaming<WatchEvent>,
    name: &str,
    revision: u64,
) -> anyhow::Result<bool> {
    let mut added = false;
    while let Some(event) = events.message().await? {
        if event.r#type() == EventType::Added {
            added |= event.object.as_ref().is_some_and(|o| o.name == name);
        }
        if event.revision >= revision {
            return Ok(added);
        }
    }
    anyhow::bail!("the watch ended before revision {revision}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_shard_is_the_apiservers_and_the_halves_make_the_whole() -> anyhow::Result<()> {
    let mut fx = Fixture::new("shard").await?;
    create_pods(fx.kube(), fx.ns(), PODS, &[("app", "shard")], false).await?;
    let config = SidecarConfig::new().resource(Resource::pods().namespaces([fx.ns()]));
    fx.start_sidecar(BIN.as_ref(), &config)?;
    let mut api = fx.cache().await?;
    wait_synced(&mut api).await?;
    let ns = fx.ns().to_owned();
    let all: BTreeSet<String> = (0..PODS).map(|i| format!("p{i}")).collect();
    wait_holds(&mut api, &ns, &all).await?;

    let mut union = BTreeSet::new();
    let mut watches = Vec::new();
    for selector in halves() {
        let want = apiserver_shard(&fx, &selector).await?;
        assert!(
            !want.is_empty() && want.len() < PODS,
            "{selector}: the apiserver's shard has {} of {PODS} pods",
            want.len()
        );
        let got = informerd_list(&mut api, &ns, &selector).await?;
        assert_eq!(
            got, want,
            "{selector}: informerd's shard is the apiserver's"
        );
        assert!(union.is_disjoint(&got), "the halves share no pod");
        union.extend(got);
        let mut events = watch(&mut api, &ns, &selector).await?;
        assert_eq!(
            initial_state(&mut events).await?,
            want,
            "{selector}: the watch's"
        );
        watches.push((selector, events));
    }
    assert_eq!(union, all, "the halves make the whole");

    // A new pod: ADDED only in the shard that holds it, as the apiserver says.
    let late = Api::<Pod>::namespaced(fx.kube().clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod("late").json())?,
        )
        .await?;
    // The revision at which the sidecar holds it: a List's last message says.
    let revision = {
        let chunks: Vec<_> = api
            .list(ListRequest {
                resource: "pods".into(),
                namespace: ns.clone(),
                min_resource_version: late.metadata.resource_version.clone().unwrap(),
                ..Default::default()
            })
            .await?
            .into_inner()
            .try_collect()
            .await?;
        chunks.last().map(|c| c.revision).unwrap_or_default()
    };
    for (selector, events) in &mut watches {
        let holds = apiserver_shard(&fx, selector).await?.contains("late");
        let added = added_before(events, "late", revision).await?;
        assert_eq!(
            added, holds,
            "{selector}: ADDED of the new pod iff its shard holds it"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_that_is_not_one_names_shard_selector() -> anyhow::Result<()> {
    let mut fx = Fixture::new("shard-bad").await?;
    let config = SidecarConfig::new().resource(Resource::pods().namespaces([fx.ns()]));
    fx.start_sidecar(BIN.as_ref(), &config)?;
    let mut api = fx.cache().await?;
    wait_synced(&mut api).await?;
    let ns = fx.ns().to_owned();
    for selector in [
        "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
        "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
        "object.metadata.uid == 'x'",
    ] {
        let status = informerd_list(&mut api, &ns, selector)
            .await
            .expect_err(selector);
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{selector}: {status:?}"
        );
        assert!(
            status.message().starts_with("shard_selector: "),
            "{selector}: {}",
            status.message()
        );
        let Err(status) = watch(&mut api, &ns, selector).await else {
            panic!("{selector}: the watch was accepted");
        };
        assert!(status.to_string().contains("shard_selector: "), "{status}");
    }
    Ok(())
}

/// A sidecar caching one half of the namespace's pods, with its metrics port.
fn half_sidecar(fx: &Fixture, selector: &str) -> anyhow::Result<(Sidecar, u16)> {
    let port = free_port();
    let config = SidecarConfig::new()
        .resource(
            Resource::pods()
                .namespaces([fx.ns()])
                .shard_selector(selector),
        )
        .server(|s| s.metrics_port(port));
    Ok((Sidecar::start(BIN.as_ref(), fx.cluster(), &config)?, port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_caches_exactly_its_shard_and_two_halves_cache_the_whole() -> anyhow::Result<()>
{
    let fx = Fixture::new("shard-cache").await?;
    create_pods(fx.kube(), fx.ns(), PODS, &[("app", "shard")], false).await?;
    let ns = fx.ns().to_owned();
    let mut sidecars = Vec::new();
    for selector in halves() {
        let (sidecar, port) = half_sidecar(&fx, &selector)?;
        let mut api = connect(&sidecar).await?;
        // Synced: it holds what its list returned, which came after every pod was created.
        wait_synced(&mut api).await?;
        sidecars.push((selector, sidecar, port, api));
    }

    // New pods, created until each half has gained one, so that each sidecar's watch (not
    // only its list) is seen to keep its shard; the last one of each half is waited for.
    let mut last_in = [None, None];
    let pods = Api::<Pod>::namespaced(fx.kube().clone(), &ns);
    let mut late = 0;
    while last_in.iter().any(Option::is_none) {
        anyhow::ensure!(
            late < 64,
            "64 new pods all fell in one half of the uid hash space"
        );
        let name = format!("late-{late}");
        late += 1;
        let created = pods
            .create(
                &PostParams::default(),
                &serde_json::from_value(pod(&name).json())?,
            )
            .await?;
        for (i, (selector, ..)) in sidecars.iter().enumerate() {
            if apiserver_shard(&fx, selector).await?.contains(&name) {
                last_in[i] = created.metadata.resource_version.clone();
            }
        }
    }

    let mut union = BTreeSet::new();
    for ((selector, _sidecar, port, api), rv) in sidecars.iter_mut().zip(&last_in) {
        let rv = rv.as_deref().expect("each half gained a pod");
        let got = informerd_list_at(api, &ns, "", rv).await?;
        let want = apiserver_shard(&fx, selector).await?;
        assert!(
            !want.is_empty() && want.len() < PODS + late,
            "{selector}: the apiserver's shard has {} of {} pods",
            want.len(),
            PODS + late
        );
        assert_eq!(
            got, want,
            "{selector}: the sidecar caches the apiserver's shard"
        );
        assert!(union.is_disjoint(&got), "the halves share no pod");
        union.extend(got);
        // The apiserver applied the selector: nothing of the other half reached the sidecar
        // (which would drop it, counting it here).
        let metrics = scrape_metrics(*port).await?;
        let dropped = metrics.sum(
            "informerd_scope_objects_filtered_out_total",
            &[("resource", "pods")],
        );
        assert_eq!(
            dropped, 0.0,
            "{selector}: objects of the other shard received"
        );
    }
    let all: BTreeSet<String> = pods
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(union, all, "the two halves cache the whole namespace");
    Ok(())
}
