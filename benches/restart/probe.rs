//! A client watching across the restart: its token from before the SIGTERM, the changes made
//! while informerd is down, and what its watch resumed with that token delivers after the warm
//! start, against the apiserver's own watch over the same span (issue 17: "a client that was
//! watching resumes with its token and receives exactly the changes made while informerd was
//! down (checked against the apiserver)").
//!
//! The probe's pods are bare pods of its own in the first namespace (the seeded pods have
//! owners, and an owner's controller could answer a deletion with a pod of its own); the
//! apiserver's account covers every pod of the bench's namespaces, so a change nobody made
//! shows up as a difference too.

use futures::TryStreamExt;
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, ListRequest, ResumeToken,
    WatchRequest,
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    Api, Client,
};
use serde_json::json;
use tonic::transport::Channel;

const NAME: &str = "restart-probe";

/// The client's side, from before the stop.
pub struct Probe {
    ns: String,
    token: ResumeToken,
    /// The apiserver's resourceVersion of the probe's last change before the stop.
    rv_before: String,
}

/// What changed across the restart, as `TYPE namespace/name`, sorted.
pub struct Changes {
    pub made: Vec<String>,
    pub informerd: Vec<String>,
    pub apiserver: Vec<String>,
}

fn pods(client: &Client, ns: &str) -> Api<Pod> {
    Api::namespaced(client.clone(), ns)
}

/// Creates the bare pod `name` in `ns`; its resourceVersion.
async fn create(client: &Client, ns: &str, name: &str) -> anyhow::Result<String> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": NAME}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))?;
    let made = pods(client, ns)
        .create(&PostParams::default(), &pod)
        .await?;
    Ok(made.metadata.resource_version.unwrap_or_default())
}

/// Deletes `name` at once (no kubelet confirms deletions here).
async fn delete(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    pods(client, ns)
        .delete(name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
}

/// Removes what an earlier run left (a run that failed between its steps).
pub async fn clean(client: &Client, ns: &str) -> anyhow::Result<()> {
    let lp = ListParams::default().labels(&format!("app={NAME}"));
    for pod in pods(client, ns).list(&lp).await? {
        delete(client, ns, &pod.metadata.name.unwrap_or_default()).await?;
    }
    Ok(())
}

/// Before the stop: three pods of the probe in `ns`, and a client's token once informerd has
/// them (a `List` of one object at their resourceVersion carries the revision to watch from).
pub async fn before(
    client: &Client,
    api: &mut CacheClient<Channel>,
    ns: &str,
) -> anyhow::Result<Probe> {
    clean(client, ns).await?;
    let mut rv_before = String::new();
    for i in 0..3 {
        rv_before = create(client, ns, &format!("{NAME}-{i}")).await?;
    }
    let token = token_at(api, ns, &rv_before).await?;
    Ok(Probe {
        ns: ns.to_owned(),
        token,
        rv_before,
    })
}

/// The token of informerd's cache once the namespace has seen `rv`.
async fn token_at(
    api: &mut CacheClient<Channel>,
    ns: &str,
    rv: &str,
) -> anyhow::Result<ResumeToken> {
    let request = ListRequest {
        resource: "pods".into(),
        namespace: ns.into(),
        min_resource_version: rv.into(),
        limit: 1,
        ..Default::default()
    };
    let mut stream = api.list(request).await?.into_inner();
    while let Some(chunk) = stream.message().await? {
        if chunk.last {
            return Ok(ResumeToken {
                epoch: chunk.epoch,
                revision: chunk.revision,
            });
        }
    }
    anyhow::bail!("the List of {ns} ended without its last chunk")
}

/// While informerd is down: two pods deleted, two created, one relabelled. Returns what was
/// made and the resourceVersion of the last change.
pub async fn change(client: &Client, probe: &Probe) -> anyhow::Result<(Vec<String>, String)> {
    let ns = &probe.ns;
    delete(client, ns, &format!("{NAME}-1")).await?;
    delete(client, ns, &format!("{NAME}-2")).await?;
    create(client, ns, &format!("{NAME}-3")).await?;
    let patch = json!({"metadata": {"labels": {"relabelled": "yes"}}});
    pods(client, ns)
        .patch(
            &format!("{NAME}-0"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    // Last, a change the cache holds an object at (it never holds one at a deletion's).
    let rv_after = create(client, ns, &format!("{NAME}-4")).await?;
    let mut made: Vec<String> = [
        ("ADDED", 3),
        ("ADDED", 4),
        ("MODIFIED", 0),
        ("DELETED", 1),
        ("DELETED", 2),
    ]
    .iter()
    .map(|(kind, i)| format!("{kind} {ns}/{NAME}-{i}"))
    .collect();
    made.sort();
    Ok((made, rv_after))
}

/// After the warm start: the changes the client's resumed watch delivers up to the revision
/// at which informerd has seen `rv_after`, and the apiserver's own account of the changes to
/// the pods of `namespaces` from the probe's last change before the stop to `rv_after`.
pub async fn after(
    client: &Client,
    api: &mut CacheClient<Channel>,
    probe: Probe,
    made: Vec<String>,
    rv_after: &str,
    namespaces: &[String],
) -> anyhow::Result<Changes> {
    let until = token_at(api, &probe.ns, rv_after).await?.revision;
    let request = WatchRequest {
        resource: "pods".into(),
        start: Some(Start::Since(probe.token)),
        ..Default::default()
    };
    let mut stream = api.watch(request).await?.into_inner();
    let mut informerd = Vec::new();
    let mut reached = probe.token.revision;
    while reached < until {
        let Some(event) = stream.message().await? else {
            anyhow::bail!("the resumed watch ended at revision {reached} of {until}");
        };
        reached = reached.max(event.revision);
        if let Some(o) = event.object {
            let kind = EventType::try_from(event.r#type)?;
            informerd.push(format!("{} {}/{}", kind.as_str_name(), o.namespace, o.name));
        }
    }
    informerd.sort();

    let all: Api<Pod> = Api::all(client.clone());
    let stream = all.watch(&WatchParams::default(), &probe.rv_before).await?;
    futures::pin_mut!(stream);
    let mut apiserver = Vec::new();
    let after: u64 = rv_after.parse()?;
    loop {
        let (kind, pod) = match stream.try_next().await? {
            Some(WatchEvent::Added(p)) => ("ADDED", p),
            Some(WatchEvent::Modified(p)) => ("MODIFIED", p),
            Some(WatchEvent::Deleted(p)) => ("DELETED", p),
            Some(WatchEvent::Bookmark(_)) => continue,
            Some(WatchEvent::Error(e)) => anyhow::bail!("the apiserver's watch: {e:?}"),
            None => anyhow::bail!("the apiserver's watch ended before {rv_after}"),
        };
        let rv: u64 = pod
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or("0")
            .parse()?;
        let ns = pod.metadata.namespace.unwrap_or_default();
        if namespaces.contains(&ns) {
            let name = pod.metadata.name.unwrap_or_default();
            apiserver.push(format!("{kind} {ns}/{name}"));
        }
        if rv >= after {
            break;
        }
    }
    apiserver.sort();
    Ok(Changes {
        made,
        informerd,
        apiserver,
    })
}
