//! Delta resume (issue 32), against the real apiserver: a client that holds a resource's objects
//! and cannot resume with its token (another replica, a sidecar restarted cold: another epoch;
//! a token older than the change log: `Expired`) sends what it holds (`WatchRequest.held`) and
//! receives only the objects that changed or were created, and in SYNCED the held objects that
//! are gone. The tests count what was sent.

use std::collections::{BTreeMap, BTreeSet};

use futures::TryStreamExt;
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, HeldObjects, ListRequest,
    ResumeToken, WatchEvent, WatchRequest,
};
use informerd_testkit::{
    connect, create_pods, pod, wait_synced, Fixture, Resource, Sidecar, SidecarConfig,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tonic::transport::Channel;
use tonic::{Code, Streaming};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const PODS: usize = 100;

/// FNV-1a, 64 bits, as every client computes it (written out here, not taken from informerd).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What the client holds: resourceVersion by name (one namespace).
type Holding = BTreeMap<String, String>;

/// `held.entries` of what the client holds in namespace `ns`.
fn held(ns: &str, holding: &Holding) -> HeldObjects {
    let mut entries = Vec::new();
    for (name, rv) in holding {
        entries.extend_from_slice(&fnv1a(format!("{ns}/{name}").as_bytes()).to_le_bytes());
        entries.extend_from_slice(&fnv1a(rv.as_bytes()).to_le_bytes());
    }
    HeldObjects { entries }
}

fn request(ns: &str, start: Start) -> WatchRequest {
    WatchRequest {
        resource: "pods".into(),
        namespace: ns.into(),
        start: Some(start),
        ..Default::default()
    }
}

/// The objects a watch sends up to SYNCED (name → resourceVersion), and SYNCED itself.
async fn until_synced(events: &mut Streaming<WatchEvent>) -> anyhow::Result<(Holding, WatchEvent)> {
    let mut sent = Holding::new();
    while let Some(event) = events.message().await? {
        match event.r#type() {
            EventType::Added => {
                let o = event.object.expect("ADDED carries its object");
                sent.insert(o.name, o.resource_version);
            }
            EventType::Synced => return Ok((sent, event)),
            other => anyhow::bail!("{other:?} before SYNCED"),
        }
    }
    anyhow::bail!("the watch ended before SYNCED")
}

/// Waits until the sidecar has seen `rv` (a List with min_resource_version).
async fn seen(api: &mut CacheClient<Channel>, ns: &str, rv: &str) -> anyhow::Result<()> {
    let _: Vec<_> = api
        .list(ListRequest {
            resource: "pods".into(),
            namespace: ns.into(),
            min_resource_version: rv.into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .try_collect()
        .await?;
    Ok(())
}

/// The changes made while the client could not resume: one pod relabelled, one deleted, one
/// created. Returns their names (changed, deleted, created) and the last write's
/// resourceVersion (the creation's).
async fn change_some(fx: &Fixture) -> anyhow::Result<(String, String, String, String)> {
    let pods: Api<Pod> = Api::namespaced(fx.kube().clone(), fx.ns());
    pods.patch(
        "p1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"changed": "yes"}}})),
    )
    .await?;
    pods.delete("p2", &DeleteParams::default()).await?;
    let created = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod("new").json())?,
        )
        .await?;
    let rv = created
        .metadata
        .resource_version
        .expect("a resourceVersion");
    Ok(("p1".into(), "p2".into(), "new".into(), rv))
}

fn gone_hashes(synced: &WatchEvent) -> BTreeSet<u64> {
    assert_eq!(synced.gone.len() % 8, 0, "gone is whole 8-byte hashes");
    synced
        .gone
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn config(fx: &Fixture) -> SidecarConfig {
    SidecarConfig::new().resource(Resource::pods().namespaces([fx.ns()]))
}

/// The client's initial state from `api`: what it holds, and SYNCED's resume token.
async fn hold(api: &mut CacheClient<Channel>, ns: &str) -> anyhow::Result<(Holding, ResumeToken)> {
    let mut watch = api
        .watch(request(ns, Start::SendInitialState(true)))
        .await?
        .into_inner();
    let (holding, synced) = until_synced(&mut watch).await?;
    assert_eq!(holding.len(), PODS);
    let token = ResumeToken {
        epoch: synced.epoch,
        revision: synced.revision,
    };
    Ok((holding, token))
}

/// After [`change_some`]: `api` refuses the client's token (`OUT_OF_RANGE`: this is when a client
/// resumes by delta), and a delta resume from what it holds sends the changed and the created
/// pods only, SYNCED names the deleted one as gone, and the client's view after the delta equals
/// a full initial state's.
async fn resumes_by_delta(
    api: &mut CacheClient<Channel>,
    ns: &str,
    (holding, token): (Holding, ResumeToken),
    (changed, deleted, created): (String, String, String),
) -> anyhow::Result<()> {
    let refused = api
        .watch(request(ns, Start::Since(token)))
        .await
        .expect_err("the token cannot be used");
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");

    let mut delta = api
        .watch(request(ns, Start::Held(held(ns, &holding))))
        .await?
        .into_inner();
    let (sent, synced) = until_synced(&mut delta).await?;
    assert_eq!(
        sent.keys().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from([changed.clone(), created]),
        "only the changed and the created pods are sent, of {PODS}"
    );
    assert_ne!(sent[&changed], holding[&changed], "at its new version");
    assert_eq!(
        gone_hashes(&synced),
        BTreeSet::from([fnv1a(format!("{ns}/{deleted}").as_bytes())]),
        "the deleted pod is gone"
    );
    let mut view = holding;
    view.remove(&deleted);
    view.extend(sent);
    let mut full = api
        .watch(request(ns, Start::SendInitialState(true)))
        .await?
        .into_inner();
    assert_eq!(until_synced(&mut full).await?.0, view);
    Ok(())
}

/// Another replica (a second sidecar, its own epoch): the client's token means nothing there,
/// and a delta resume sends the changed and created pods only, and the deleted one as gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_replica_sends_only_the_differences() -> anyhow::Result<()> {
    let mut fx = Fixture::new("delta-replica").await?;
    create_pods(fx.kube(), fx.ns(), PODS, &[("app", "delta")], false).await?;
    let ns = fx.ns().to_owned();
    fx.start_sidecar(BIN.as_ref(), &config(&fx))?;
    let mut first = fx.cache().await?;
    wait_synced(&mut first).await?;
    let held = hold(&mut first, &ns).await?;

    let (changed, deleted, created, last) = change_some(&fx).await?;
    let replica = Sidecar::start(BIN.as_ref(), fx.cluster(), &config(&fx))?;
    let mut second = connect(&replica).await?;
    wait_synced(&mut second).await?;
    seen(&mut second, &ns, &last).await?;
    resumes_by_delta(&mut second, &ns, held, (changed, deleted, created)).await
}

/// A token older than the change log (`Expired`, as after a long partition): the same sidecar
/// answers a delta resume with the differences only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_resumes_by_delta() -> anyhow::Result<()> {
    let mut fx = Fixture::new("delta-expired").await?;
    create_pods(fx.kube(), fx.ns(), PODS, &[("app", "delta")], false).await?;
    let ns = fx.ns().to_owned();
    // 2 events: the 3 changes below push the client's token out of the log.
    fx.start_sidecar(BIN.as_ref(), &config(&fx).change_log_max_events(2))?;
    let mut api = fx.cache().await?;
    wait_synced(&mut api).await?;
    let held = hold(&mut api, &ns).await?;

    let (changed, deleted, created, last) = change_some(&fx).await?;
    seen(&mut api, &ns, &last).await?;
    resumes_by_delta(&mut api, &ns, held, (changed, deleted, created)).await
}

/// A held set that is not whole entries is refused, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_entries_that_are_not_whole_name_the_field() -> anyhow::Result<()> {
    let mut fx = Fixture::new("delta-bad").await?;
    let ns = fx.ns().to_owned();
    fx.start_sidecar(BIN.as_ref(), &config(&fx))?;
    let mut api = fx.cache().await?;
    wait_synced(&mut api).await?;
    let status = api
        .watch(request(
            &ns,
            Start::Held(HeldObjects {
                entries: vec![0; 20],
            }),
        ))
        .await
        .expect_err("20 bytes");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().starts_with("held.entries: 20 bytes"),
        "{}",
        status.message()
    );
    Ok(())
}
