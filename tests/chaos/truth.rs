//! The truth and what informerd says: the apiserver's list, informerd's List, and the wait
//! until they and every subscriber agree.

use std::time::{Duration, Instant};

use informerd::proto::{ListRequest, ScopeStatus, StatusRequest};
use informerd_client as client;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{ApiResource, DynamicObject, ListParams},
    Api, Client,
};
use serde_json::{json, Value};

use crate::{env_number, rig::Rig, TIER};

/// (namespace/name) -> what is compared of the object.
pub type State = std::collections::BTreeMap<String, Held>;

/// What is compared of one object: its resourceVersion, and a digest of the fields the
/// transform keeps that churn changes (labels, annotations, spec, status). Decision: the
/// suite's config has no transform, so informerd keeps all of them, and a cache that held the
/// right resourceVersion with other content (a store that decoded wrongly) is caught too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub resource_version: String,
    pub digest: u64,
}

impl Held {
    /// `object` (the whole JSON object, as the apiserver or informerd gives it).
    pub fn of(resource_version: &str, object: &Value) -> Held {
        use std::hash::{Hash, Hasher};
        let or_empty = |v: &Value| if v.is_null() { json!({}) } else { v.clone() };
        let compared = json!({
            "labels": or_empty(&object["metadata"]["labels"]),
            "annotations": or_empty(&object["metadata"]["annotations"]),
            "spec": object["spec"],
            "status": object["status"],
        });
        // serde_json's maps are sorted (no preserve_order), so equal content prints alike.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        compared.to_string().hash(&mut hasher);
        Held {
            resource_version: resource_version.to_string(),
            digest: hasher.finish(),
        }
    }

    /// An informerd object's, from its JSON.
    pub fn of_object(o: &informerd::proto::Object) -> Held {
        let json: Value = serde_json::from_slice(&o.json).unwrap_or(Value::Null);
        Held::of(&o.resource_version, &json)
    }
}

pub async fn apiserver_state(client: &Client, namespaces: &[String]) -> anyhow::Result<State> {
    let mut out = State::new();
    // Dynamic objects: every field as the apiserver sent it, none lost to a typed struct.
    let pod = ApiResource::erase::<Pod>(&());
    for ns in namespaces {
        let pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pod);
        let list = pods
            .list(&ListParams::default().labels(&format!("{TIER}=keep")))
            .await?;
        for p in list.items {
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let json = serde_json::to_value(&p)?;
            let rv = p.metadata.resource_version.unwrap_or_default();
            out.insert(
                format!("{ns}/{}", p.metadata.name.unwrap_or_default()),
                Held::of(&rv, &json),
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
            out.insert(format!("{}/{}", o.namespace, o.name), Held::of_object(&o));
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

/// Why the apiserver, informerd and every subscriber were not seen to agree by the deadline.
#[derive(Debug)]
pub enum Disagreement {
    /// What still differed (informerd's List failing counts: that is informerd's answer).
    Diverged(Vec<String>),
    /// The apiserver's list, the truth, failed at the last attempt: the control plane did not
    /// answer (`reason`, with what its etcd and apiserver say), since `since`; nothing was
    /// compared, so this is not a divergence of informerd.
    Unavailable { reason: String, since: Instant },
}

/// Waits until the apiserver, informerd and every subscriber agree; returns the time it took,
/// or what was left at the deadline (CHAOS_CONVERGE_SECONDS).
pub async fn converge(rig: &Rig) -> Result<Duration, Disagreement> {
    let deadline = Duration::from_secs(env_number("CHAOS_CONVERGE_SECONDS", 180));
    converge_within(rig, deadline).await
}

/// [`converge`], with the deadline given.
pub async fn converge_within(rig: &Rig, deadline: Duration) -> Result<Duration, Disagreement> {
    let (client, namespaces, socket) = (&rig.client, &rig.namespaces, &rig.socket);
    let started = Instant::now();
    let mut unavailable_since = None;
    // Where the time goes: when informerd's List and the subscribers were last seen behind.
    let mut behind = Behind::default();
    loop {
        let mut diffs = Vec::new();
        let listing = Instant::now();
        match apiserver_state(client, namespaces).await {
            Ok(truth) => {
                unavailable_since = None;
                behind.slowest_lists.0 = behind.slowest_lists.0.max(listing.elapsed());
                let listing = Instant::now();
                let listed = informerd_state(socket).await;
                behind.slowest_lists.1 = behind.slowest_lists.1.max(listing.elapsed());
                match listed {
                    Ok(listed) if listed == truth => {}
                    Ok(listed) => diffs.push(format!("informerd List: {}", diff(&truth, &listed))),
                    Err(e) => diffs.push(format!("informerd List: {e}")),
                }
                if !diffs.is_empty() {
                    behind.informerd = Some(started.elapsed());
                    behind.scopes = scope_states(socket).await.map_or_else(
                        |e| format!("Status failed: {e}"),
                        |states| format!("{states:?}"),
                    );
                    behind.what = diffs.join("; ");
                }
                for (i, s) in rig.subscribers.iter().enumerate() {
                    let seen = s.seen.lock().unwrap();
                    if !seen.synced || seen.state != truth {
                        diffs.push(format!("subscriber {i}: {}", diff(&truth, &seen.state)));
                        behind.subscriber = Some((i, started.elapsed(), seen.synced));
                    }
                }
            }
            Err(e) => {
                unavailable_since.get_or_insert_with(Instant::now);
                diffs.push(format!("the apiserver's list failed: {e}"));
            }
        }
        if diffs.is_empty() {
            eprintln!(
                "converged in {:.1} s: {behind}",
                started.elapsed().as_secs_f64()
            );
            return Ok(started.elapsed());
        }
        if started.elapsed() > deadline {
            return Err(match unavailable_since {
                Some(since) => {
                    let mut reason = diffs.join("; ");
                    if let Err(why) = rig.plane.control_plane().availability().await {
                        reason = format!("{reason}; {why}");
                    }
                    Disagreement::Unavailable { reason, since }
                }
                None => Disagreement::Diverged(diffs),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// When, since the wait began, informerd's List and the subscribers were last seen behind
/// the apiserver: the breakdown of a reconvergence time the table prints.
#[derive(Default)]
struct Behind {
    informerd: Option<Duration>,
    /// The last subscriber seen behind, when, and whether it was synced then (a relist).
    subscriber: Option<(usize, Duration, bool)>,
    /// The slowest list of the apiserver and of informerd (which waits for its sync).
    slowest_lists: (Duration, Duration),
    /// The states of informerd's scopes, and what differed, when its List was last behind.
    scopes: String,
    what: String,
}

impl std::fmt::Display for Behind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.informerd {
            Some(t) => write!(
                f,
                "informerd's List behind until {:.1} s (then its scopes {}; {})",
                t.as_secs_f64(),
                self.scopes,
                self.what
            )?,
            None => write!(f, "informerd's List current")?,
        }
        match self.subscriber {
            Some((i, t, synced)) => write!(
                f,
                ", subscribers behind until {:.1} s (the last: {i}, {})",
                t.as_secs_f64(),
                if synced {
                    "synced"
                } else {
                    "in its initial state"
                }
            ),
            None => write!(f, ", subscribers current"),
        }?;
        let (apiserver, informerd) = self.slowest_lists;
        write!(
            f,
            "; the slowest lists: the apiserver's {:.1} s, informerd's {:.1} s",
            apiserver.as_secs_f64(),
            informerd.as_secs_f64()
        )
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
    let other = |same_version: bool| -> Vec<String> {
        want.iter()
            .filter_map(|(k, w)| Some((k, w, have.get(k)?)))
            .filter(|(_, w, h)| {
                w != h && (w.resource_version == h.resource_version) == same_version
            })
            .take(3)
            .map(|(k, w, h)| format!("{k} {} (held {})", w.resource_version, h.resource_version))
            .collect()
    };
    format!(
        "{} vs {} objects; missing {missing:?}, extra {extra:?}, other resourceVersion {:?}, \
         same resourceVersion but other labels, annotations, spec or status {:?}",
        want.len(),
        have.len(),
        other(false),
        other(true)
    )
}

/// The state of every scope of `pods` (namespace -> Listing, Synced, Forbidden or Failing).
pub async fn scope_states(
    socket: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    Ok(scopes(socket)
        .await?
        .into_iter()
        .map(|s| (s.scope, s.state))
        .collect())
}
