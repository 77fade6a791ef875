//! The truth and what informerd says: the apiserver's list, informerd's List, and the wait
//! until they and every subscriber agree.

use std::time::{Duration, Instant};

use informerd::{
    client,
    proto::{ListRequest, ScopeStatus, StatusRequest},
};
use k8s_openapi::api::core::v1::Pod;
use kube::{api::ListParams, Api, Client};

use crate::{env_number, rig::Rig, TIER};

/// (namespace/name) -> resourceVersion.
pub type State = std::collections::BTreeMap<String, String>;

pub async fn apiserver_state(client: &Client, namespaces: &[String]) -> anyhow::Result<State> {
    let mut out = State::new();
    for ns in namespaces {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let list = pods
            .list(&ListParams::default().labels(&format!("{TIER}=keep")))
            .await?;
        for p in list.items {
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            out.insert(
                format!("{ns}/{}", p.metadata.name.unwrap_or_default()),
                p.metadata.resource_version.unwrap_or_default(),
            );
        }
    }
    Ok(out)
}

pub async fn informerd_state(socket: &str) -> anyhow::Result<State> {
    let mut cache = client::connect(socket).await?;
    let request = ListRequest {
        resource: "pods".into(),
        wait_for_sync: true,
        ..Default::default()
    };
    let mut stream = cache.list(request).await?.into_inner();
    let mut out = State::new();
    while let Some(chunk) = stream.message().await? {
        for o in chunk.objects {
            out.insert(format!("{}/{}", o.namespace, o.name), o.resource_version);
        }
    }
    Ok(out)
}

/// The status of every scope, by the Status RPC.
async fn scopes(socket: &str) -> anyhow::Result<Vec<ScopeStatus>> {
    let mut cache = client::connect(socket).await?;
    let status = cache.status(StatusRequest::default()).await?.into_inner();
    Ok(status
        .resources
        .into_iter()
        .flat_map(|r| r.scopes)
        .collect())
}

/// The relists of every scope since informerd started (after 410 Gone, or a list cut).
pub async fn relists(socket: &str) -> anyhow::Result<u64> {
    Ok(scopes(socket).await?.iter().map(|s| s.relists).sum())
}

/// Waits until the apiserver, informerd and every subscriber agree; returns the time it took,
/// or the differences left at the deadline.
pub async fn converge(rig: &Rig) -> Result<Duration, Vec<String>> {
    let (client, namespaces, socket) = (&rig.client, &rig.namespaces, &rig.socket);
    let started = Instant::now();
    loop {
        let mut diffs = Vec::new();
        match apiserver_state(client, namespaces).await {
            Ok(truth) => {
                match informerd_state(socket).await {
                    Ok(listed) if listed == truth => {}
                    Ok(listed) => diffs.push(format!("informerd List: {}", diff(&truth, &listed))),
                    Err(e) => diffs.push(format!("informerd List: {e}")),
                }
                for (i, s) in rig.subscribers.iter().enumerate() {
                    let seen = s.seen.lock().unwrap();
                    if !seen.synced || seen.state != truth {
                        diffs.push(format!("subscriber {i}: {}", diff(&truth, &seen.state)));
                    }
                }
            }
            Err(e) => diffs.push(format!("apiserver list: {e}")),
        }
        if diffs.is_empty() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(env_number("CHAOS_CONVERGE_SECONDS", 180)) {
            return Err(diffs);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub fn diff(want: &State, have: &State) -> String {
    let missing: Vec<_> = want
        .keys()
        .filter(|k| !have.contains_key(*k))
        .take(3)
        .collect();
    let extra: Vec<_> = have
        .keys()
        .filter(|k| !want.contains_key(*k))
        .take(3)
        .collect();
    let stale: Vec<_> = want
        .iter()
        .filter(|(k, v)| have.get(*k).is_some_and(|h| h != *v))
        .take(3)
        .collect();
    format!(
        "{} vs {} objects; missing {missing:?}, extra {extra:?}, other resourceVersion {stale:?}",
        want.len(),
        have.len()
    )
}

/// The state of every scope of `pods` (namespace -> Listing, Synced, Forbidden or Failing).
pub async fn scope_states(socket: &str) -> anyhow::Result<State> {
    Ok(scopes(socket)
        .await?
        .into_iter()
        .map(|s| (s.scope, s.state))
        .collect())
}
