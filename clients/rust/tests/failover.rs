//! A client moving between two replicas (issue 32): two sidecars of the same configuration
//! serve the same answers; a client reaching them through one address (a TCP proxy standing in
//! for a Service) whose replica is killed is moved to the other one, and its watcher
//! ([`Api::delta_resume`]) resumes there by delta: the stream carries the changes made while it
//! was cut off (an `Apply` of the changed and created pods, a `Delete` of the deleted one), not
//! a new `Init` cycle of every pod.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;

use common::{apply_pod, delete_pod, delta_changes, informerd_bin, labels};
use futures::TryStreamExt;
use informerd_client::{watcher, Api};
use informerd_testkit::{
    create_pods, free_port, wait_synced, FaultProxy, Fixture, Resource, Sidecar, SidecarConfig,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::watcher::{Config, Event};
use kube::ResourceExt;

const PODS: usize = 20;

/// A replica: a sidecar caching the namespace's pods, listening on a loopback port too.
fn replica(fx: &Fixture) -> anyhow::Result<(Sidecar, std::net::SocketAddr)> {
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let config = SidecarConfig::new()
        .resource(Resource::pods().namespaces([fx.ns()]))
        .server(|s| s.listen(addr));
    Ok((
        Sidecar::start(&informerd_bin(), fx.cluster(), &config)?,
        addr,
    ))
}

/// The namespace's pods at a TCP address.
async fn pods_at(addr: std::net::SocketAddr, ns: &str) -> anyhow::Result<Api<Pod>> {
    let cache = informerd_client::connect(&format!("http://{addr}")).await?;
    Ok(Api::namespaced(cache, "pods", ns))
}

/// Every pod a replica lists, name → resourceVersion.
async fn listed(api: &Api<Pod>) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|p| (p.name_any(), p.resource_version().unwrap_or_default()))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_clients_replica_moves_it_to_the_other_with_a_delta_resume() -> anyhow::Result<()>
{
    let fx = Fixture::new("kubers-failover").await?;
    create_pods(fx.kube(), fx.ns(), PODS, &[("app", "failover")], false).await?;
    let ns = fx.ns().to_owned();
    let (mut a, a_addr) = replica(&fx)?;
    let (b, b_addr) = replica(&fx)?;
    for sidecar in [&a, &b] {
        wait_synced(&mut informerd_testkit::connect(sidecar).await?).await?;
    }
    let (on_a, on_b) = (pods_at(a_addr, &ns).await?, pods_at(b_addr, &ns).await?);
    let same = listed(&on_a).await?;
    assert_eq!(same.len(), PODS);
    assert_eq!(
        listed(&on_b).await?,
        same,
        "the two replicas serve the same answers"
    );

    // The client reaches the replicas through one address, now A's.
    let service = FaultProxy::to(a_addr)?;
    let pods = pods_at(service.addr(), &ns).await?.delta_resume();
    let mut events = pin!(watcher(pods, Config::default()));
    let mut initial = 0;
    loop {
        match events.try_next().await? {
            Some(Event::InitApply(_)) => initial += 1,
            Some(Event::InitDone) => break,
            _ => {}
        }
    }
    assert_eq!(initial, PODS);

    // A dies while the client's connection hangs (no byte passes the Service), and the pods
    // change meanwhile; then the Service's endpoint becomes B.
    service.stall();
    a.kill();
    delete_pod(fx.kube(), fx.ns(), "p0").await?;
    apply_pod(fx.kube(), fx.ns(), "new", &labels(&[])).await?;
    let relabelled = kube::Api::<Pod>::namespaced(fx.kube().clone(), fx.ns())
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"v": "2"}}})),
        )
        .await?;
    let last = relabelled.resource_version().unwrap_or_default();
    on_b.get_at_least("p1", &last).await?;
    service.retarget(b_addr);
    service.resume();

    let after = delta_changes(&mut events, 3).await?;
    assert_eq!(
        after,
        BTreeSet::from([
            "apply new".to_string(),
            "apply p1".to_string(),
            "delete p0".to_string()
        ]),
        "the changes only, of {PODS} pods"
    );
    Ok(())
}
