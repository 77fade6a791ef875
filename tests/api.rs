//! The gRPC API as a client meets it: the real binary (`informerd serve`) on a Unix socket,
//! caching pods of the real control plane, called with the generated tonic client.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{stream, StreamExt, TryStreamExt};
use informerd::proto::{
    self, cache_client::CacheClient, watch_request::Start, EventType, GetRequest, IndexLookup,
    ListRequest, Predicate, ResumeToken, StatusRequest, WatchEvent, WatchRequest,
};
use informerd_client as client;
use informerd_testkit::{
    self as testkit, pod, wait_default_service_account, wait_synced, Index, Resource, SidecarConfig,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, WatchEvent as KubeEvent, WatchParams};
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::{Code, Streaming};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");

/// A namespace with pods, and a sidecar caching them (index `node` on spec.nodeName, `owners`
/// by CEL, and the label index); the namespace is deleted on drop.
struct Fixture {
    base: testkit::Fixture,
    api: CacheClient<Channel>,
}

impl std::ops::Deref for Fixture {
    type Target = testkit::Fixture;
    fn deref(&self) -> &testkit::Fixture {
        &self.base
    }
}

impl Fixture {
    /// `pods` pods `p0..` (label `app` a or b, node n0..n2), and a sidecar whose configuration
    /// `config` may add to.
    async fn new(
        base: &str,
        pods: usize,
        config: impl FnOnce(SidecarConfig) -> SidecarConfig,
    ) -> anyhow::Result<Fixture> {
        Self::filtered(base, pods, config, "").await
    }

    /// [`Fixture::new`], with the CEL `filter` on pods when not empty.
    async fn filtered(
        base: &str,
        pods: usize,
        config: impl FnOnce(SidecarConfig) -> SidecarConfig,
        filter: &str,
    ) -> anyhow::Result<Fixture> {
        let mut base = testkit::Fixture::new(base).await?;
        wait_default_service_account(base.kube(), base.ns()).await?;
        for i in 0..pods {
            pod(&format!("p{i}"))
                .label("app", if i % 2 == 0 { "a" } else { "b" })
                .node_name(&format!("n{}", i % 3))
                .apply(base.kube(), base.ns())
                .await?;
        }
        let mut resource = Resource::pods()
            .namespaces([base.ns()])
            .drop(["metadata.managedFields"])
            .index(Index::path("node", "spec.nodeName"))
            .index(Index::cel(
                "owners",
                "object.metadata.ownerReferences.map(o, o.uid)",
            ))
            .index(Index::labels("labels"));
        if !filter.is_empty() {
            resource = resource.filter(filter);
        }
        let config = config(SidecarConfig::new().resource(resource));
        base.start_sidecar(BIN.as_ref(), &config)?;
        let mut api = base.cache().await?;
        wait_synced(&mut api).await?;
        Ok(Fixture { base, api })
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.kube().clone(), self.ns())
    }

    /// Merge-patches a pod's labels; returns the new resourceVersion.
    async fn label(&self, name: &str, labels: Value) -> anyhow::Result<String> {
        let pod = self
            .pods()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await?;
        Ok(pod.metadata.resource_version.unwrap_or_default())
    }

    /// Waits until the cache holds `name` at `resource_version` or later (lists are served
    /// from the cache, which may not have seen a write that just returned).
    async fn caught_up(&mut self, name: &str, resource_version: String) -> anyhow::Result<()> {
        let req = GetRequest {
            resource: "pods".into(),
            namespace: self.ns().to_owned(),
            name: name.into(),
            min_resource_version: resource_version,
            ..Default::default()
        };
        self.api.get(req).await?;
        Ok(())
    }

    async fn list(
        &mut self,
        req: ListRequest,
    ) -> Result<(Vec<proto::ListResponse>, BTreeMap<String, String>), tonic::Status> {
        let chunks: Vec<_> = self.api.list(req).await?.into_inner().try_collect().await?;
        let objects = chunks
            .iter()
            .flat_map(|c| &c.objects)
            .map(|o| (o.name.clone(), o.resource_version.clone()))
            .collect();
        Ok((chunks, objects))
    }

    fn list_req(&self) -> ListRequest {
        ListRequest {
            resource: "pods".into(),
            namespace: self.ns().to_owned(),
            ..Default::default()
        }
    }

    fn watch_req(&self, start: Option<Start>) -> WatchRequest {
        WatchRequest {
            resource: "pods".into(),
            namespace: self.ns().to_owned(),
            start,
            ..Default::default()
        }
    }
}

fn reason(status: &tonic::Status) -> &str {
    client::reason(status).unwrap_or("")
}

/// The next event that is not a bookmark.
async fn next(stream: &mut Streaming<WatchEvent>) -> WatchEvent {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.message())
            .await
            .expect("an event within a minute")
            .expect("the watch goes on")
            .expect("the watch is open");
        if event.r#type != EventType::Bookmark as i32 {
            return event;
        }
    }
}

fn kind(e: &WatchEvent) -> EventType {
    EventType::try_from(e.r#type).expect("a known event type")
}

fn name(e: &WatchEvent) -> &str {
    e.object.as_ref().map(|o| o.name.as_str()).unwrap_or("")
}

#[tokio::test]
async fn the_socket_lets_only_its_owner_and_group_connect() -> anyhow::Result<()> {
    let f = Fixture::new("api-list", 0, |c| c).await?;
    assert_eq!(
        socket_mode(&f),
        0o660,
        "by default only the owner and group may connect, whatever the umask"
    );
    Ok(())
}

#[tokio::test]
async fn list_streams_chunks_at_one_revision() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-list", 12, |c| c).await?;
    let want: BTreeMap<String, String> = f
        .pods()
        .list(&Default::default())
        .await?
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap(),
                p.metadata.resource_version.unwrap(),
            )
        })
        .collect();

    let (chunks, all) = f
        .list(ListRequest {
            chunk_size: 5,
            ..f.list_req()
        })
        .await?;
    assert_eq!(all, want, "the list is exactly the apiserver's pods");
    assert_eq!(chunks.len(), 3, "12 objects in chunks of 5");
    assert!(chunks[..2].iter().all(|c| !c.last && c.revision == 0));
    let last = chunks.last().unwrap();
    assert!(last.last && last.synced && last.revision > 0 && last.epoch != 0);

    Ok(())
}

#[tokio::test]
async fn list_filters_by_label_selector_field_selector_and_index() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-list", 12, |c| c).await?;
    let (_, app_a) = f
        .list(ListRequest {
            label_selector: "app=a".into(),
            ..f.list_req()
        })
        .await?;
    assert_eq!(
        app_a.keys().collect::<Vec<_>>(),
        ["p0", "p10", "p2", "p4", "p6", "p8"]
    );
    let (_, on_n1) = f
        .list(ListRequest {
            field_selector: "spec.nodeName=n1".into(),
            ..f.list_req()
        })
        .await?;
    assert_eq!(on_n1.keys().collect::<Vec<_>>(), ["p1", "p10", "p4", "p7"]);
    let (_, by_index) = f
        .list(ListRequest {
            index: Some(IndexLookup {
                name: "node".into(),
                value: "n1".into(),
            }),
            label_selector: "app!=a".into(),
            ..f.list_req()
        })
        .await?;
    assert_eq!(by_index.keys().collect::<Vec<_>>(), ["p1", "p7"]);

    // Through the label index (a namespace and an equality), and without it (every namespace,
    // a set of two values): the same answers, also after a relabel moves p0.
    let relabeled = f.label("p0", json!({"app": "b"})).await?;
    f.caught_up("p0", relabeled).await?;
    let ns = f.ns().to_owned();
    for (namespace, selector, want) in [
        (ns.as_str(), "app=a", &["p10", "p2", "p4", "p6", "p8"][..]),
        (
            ns.as_str(),
            "app in (b)",
            &["p0", "p1", "p11", "p3", "p5", "p7", "p9"][..],
        ),
        (
            ns.as_str(),
            "app=b,app!=a",
            &["p0", "p1", "p11", "p3", "p5", "p7", "p9"][..],
        ),
        ("", "app in (a,c)", &["p10", "p2", "p4", "p6", "p8"][..]),
        (ns.as_str(), "app=c", &[][..]),
    ] {
        let req = ListRequest {
            namespace: namespace.to_owned(),
            label_selector: selector.into(),
            ..f.list_req()
        };
        let (_, got) = f.list(req).await?;
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want,
            "{selector} in {namespace:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn list_returns_only_the_requested_fields_and_the_identity() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-list", 12, |c| c).await?;
    let (chunks, _) = f
        .list(ListRequest {
            fields: vec!["spec.nodeName".into()],
            ..f.list_req()
        })
        .await?;
    let object: Value = serde_json::from_slice(&chunks[0].objects[0].json)?;
    assert!(object["spec"]["nodeName"].is_string(), "{object}");
    assert!(
        object["spec"].get("containers").is_none(),
        "only the requested fields: {object}"
    );
    assert_eq!(
        object["metadata"]["name"],
        chunks[0].objects[0].name.as_str(),
        "identity is kept"
    );
    assert_eq!(object["kind"], "Pod");

    Ok(())
}

/// `omit_labels`: the labels map is empty, the labels stay in the JSON; a watcher that omits
/// them beside one that does not (the two share one rendering of each change) each get theirs.
#[tokio::test]
async fn omit_labels_leaves_the_map_empty_and_the_json_whole() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-omit", 2, |c| c).await?;
    let labels_in = |o: &proto::Object| -> Value {
        let json: Value = serde_json::from_slice(&o.json).expect("JSON");
        json["metadata"]["labels"].clone()
    };
    let get = |omit_labels| GetRequest {
        resource: "pods".into(),
        namespace: f.ns().to_owned(),
        name: "p0".into(),
        omit_labels,
        ..Default::default()
    };
    let (with, without) = (get(false), get(true));
    let with = f.api.get(with).await?.into_inner().object.unwrap();
    let without = f.api.get(without).await?.into_inner().object.unwrap();
    assert_eq!(with.labels.get("app").map(String::as_str), Some("a"));
    assert!(without.labels.is_empty(), "{:?}", without.labels);
    assert_eq!(
        (labels_in(&without), &without.json),
        (json!({"app": "a"}), &with.json)
    );

    let (chunks, _) = f
        .list(ListRequest {
            label_selector: "app=a".into(),
            omit_labels: true,
            ..f.list_req()
        })
        .await?;
    let listed: Vec<&proto::Object> = chunks.iter().flat_map(|c| &c.objects).collect();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].labels.is_empty());
    assert_eq!(labels_in(listed[0]), json!({"app": "a"}));

    let mut watches = Vec::new();
    for omit_labels in [false, true] {
        let req = WatchRequest {
            omit_labels,
            ..f.watch_req(Some(Start::SendInitialState(true)))
        };
        let mut stream = f.api.watch(req).await?.into_inner();
        while kind(&next(&mut stream).await) != EventType::Synced {}
        watches.push(stream);
    }
    f.label("p0", json!({"round": "1"})).await?;
    let mut modified = Vec::new();
    for stream in &mut watches {
        let event = next(stream).await;
        assert_eq!((kind(&event), name(&event)), (EventType::Modified, "p0"));
        modified.push(event.object.unwrap());
    }
    assert_eq!(
        modified[0].labels.get("round").map(String::as_str),
        Some("1")
    );
    assert!(modified[1].labels.is_empty(), "{:?}", modified[1].labels);
    assert_eq!(modified[0].json, modified[1].json);
    assert_eq!(labels_in(&modified[1]), json!({"app": "a", "round": "1"}));
    Ok(())
}

#[tokio::test]
async fn a_bad_list_request_names_its_field_and_an_unknown_resource_the_served_ones(
) -> anyhow::Result<()> {
    let mut f = Fixture::new("api-list", 12, |c| c).await?;
    for (req, field) in [
        (
            ListRequest {
                label_selector: "app in (a".into(),
                ..f.list_req()
            },
            "label_selector",
        ),
        (
            ListRequest {
                field_selector: "spec.hostname=x".into(),
                ..f.list_req()
            },
            "field_selector",
        ),
        (
            ListRequest {
                index: Some(IndexLookup {
                    name: "zone".into(),
                    value: "z".into(),
                }),
                ..f.list_req()
            },
            "index.name",
        ),
        (
            ListRequest {
                fields: vec!["spec..x".into()],
                ..f.list_req()
            },
            "fields[0]",
        ),
    ] {
        let err = f.list(req).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(
            err.message().starts_with(field),
            "names {field}: {}",
            err.message()
        );
        assert_eq!(reason(&err), "Invalid");
    }
    let err = f
        .list(ListRequest {
            resource: "widgets".into(),
            ..f.list_req()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(
        err.message().contains("this sidecar serves: pods"),
        "{}",
        err.message()
    );
    Ok(())
}

#[tokio::test]
async fn get_reads_your_writes_with_min_resource_version() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-get", 2, |c| c).await?;
    let ns = f.ns().to_owned();
    let get = |name: &str, min_rv: &str| GetRequest {
        resource: "pods".into(),
        namespace: ns.clone(),
        name: name.into(),
        min_resource_version: min_rv.into(),
        ..Default::default()
    };
    for round in 0..5 {
        let written = f.label("p0", json!({"round": round.to_string()})).await?;
        let got = f.api.get(get("p0", &written)).await?.into_inner();
        let object = got.object.expect("an object");
        assert_eq!(
            object.resource_version, written,
            "round {round}: the version just written"
        );
        assert_eq!(
            object.labels.get("round").map(String::as_str),
            Some(round.to_string().as_str())
        );
    }
    let err = f.api.get(get("nope", "")).await.unwrap_err();
    assert_eq!((err.code(), reason(&err)), (Code::NotFound, "NotFound"));
    // The trailer the server sends parses to the generated enum.
    assert_eq!(client::Reason::of(&err), Some(client::Reason::NotFound));

    let future: u64 = f.label("p1", json!({"x": "1"})).await?.parse()?;
    let mut req = tonic::Request::new(get("p1", &(future + 1_000_000).to_string()));
    // The server answers a tenth before the deadline; 2 s leaves it 200 ms of margin over the
    // transport's own timeout, enough on a loaded machine (300 ms left 30 ms, and lost the race).
    req.set_timeout(Duration::from_secs(2));
    let err = f.api.get(req).await.unwrap_err();
    assert_eq!(
        (err.code(), reason(&err)),
        (Code::DeadlineExceeded, "NotCaughtUp"),
        "{err:?}"
    );
    let err = f
        .api
        .get(GetRequest {
            namespace: String::new(),
            ..get("p0", "")
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    Ok(())
}

/// The next DELETED of `pod` (other events are skipped).
async fn next_deleted(stream: &mut Streaming<WatchEvent>, pod: &str) -> proto::Object {
    loop {
        let e = next(stream).await;
        if (kind(&e), name(&e)) == (EventType::Deleted, pod) {
            return e.object.expect("a DELETED has an object");
        }
    }
}

#[tokio::test]
async fn deleted_carries_the_resource_version_of_the_deletion_or_the_relabel() -> anyhow::Result<()>
{
    let filter = r#"object.metadata.labels["app"] != "gone""#;
    let mut f = Fixture::filtered("api-delrv", 2, |c| c, filter).await?;
    let updated = f.label("p0", json!({"round": "1"})).await?;
    f.caught_up("p0", updated.clone()).await?;
    let mut ours = f.api.watch(f.watch_req(None)).await?.into_inner();
    // The apiserver's own watch, beside ours.
    let mut theirs = f
        .pods()
        .watch(&WatchParams::default(), &updated)
        .await?
        .boxed();
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    f.pods().delete("p0", &now).await?;
    let deleted = next_deleted(&mut ours, "p0").await;
    let upstream = loop {
        let event = tokio::time::timeout(Duration::from_secs(60), theirs.try_next())
            .await
            .expect("the apiserver's DELETED within a minute")?
            .expect("the apiserver's watch goes on");
        if let KubeEvent::Deleted(pod) = event {
            assert_eq!(pod.metadata.name.as_deref(), Some("p0"));
            break pod.metadata.resource_version.expect("a resourceVersion");
        }
    };
    assert_eq!(deleted.resource_version, upstream, "the deletion's version");
    assert!(upstream.parse::<u64>()? > updated.parse::<u64>()?);
    let json: Value = serde_json::from_slice(&deleted.json)?;
    assert_eq!(json["metadata"]["resourceVersion"], upstream.as_str());

    // p1 leaves the configuration's filter: DELETED at the relabel's version.
    let relabeled = f.label("p1", json!({"app": "gone"})).await?;
    let left = next_deleted(&mut ours, "p1").await;
    assert_eq!(left.resource_version, relabeled, "the relabel's version");

    // Reading either at the version that removed it answers NotFound at once, rather than
    // waiting for a version that never comes.
    for (pod, version) in [("p0", upstream), ("p1", relabeled)] {
        let mut req = tonic::Request::new(GetRequest {
            resource: "pods".into(),
            namespace: f.ns().to_owned(),
            name: pod.into(),
            min_resource_version: version,
            ..Default::default()
        });
        req.set_timeout(Duration::from_secs(120));
        let err = f.api.get(req).await.unwrap_err();
        assert_eq!(
            (err.code(), reason(&err)),
            (Code::NotFound, "NotFound"),
            "{pod}: {err:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn watch_gives_transitions_per_selector_and_honours_predicates() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-watch", 4, |c| c).await?;
    let mut selected = f
        .api
        .watch(WatchRequest {
            label_selector: "app=a".into(),
            ..f.watch_req(Some(Start::SendInitialState(true)))
        })
        .await?
        .into_inner();
    let mut initial = vec![];
    loop {
        let e = next(&mut selected).await;
        if kind(&e) == EventType::Synced {
            break;
        }
        assert_eq!(kind(&e), EventType::Added);
        initial.push(name(&e).to_string());
    }
    initial.sort();
    assert_eq!(initial, ["p0", "p2"]);
    let mut labels_only = f
        .api
        .watch(WatchRequest {
            predicates: vec![Predicate::LabelsChanged as i32],
            ..f.watch_req(None)
        })
        .await?
        .into_inner();
    let mut spec_cel = f
        .api
        .watch(WatchRequest {
            predicate_cel: "object.spec != oldObject.spec".into(),
            ..f.watch_req(None)
        })
        .await?
        .into_inner();

    // p0 leaves the selector, then comes back.
    let left = f.label("p0", json!({"app": "b"})).await?;
    let e = next(&mut selected).await;
    assert_eq!((kind(&e), name(&e)), (EventType::Deleted, "p0"));
    assert_eq!(
        e.object.as_ref().unwrap().resource_version,
        left,
        "at the version that removed it"
    );
    f.label("p0", json!({"app": "a"})).await?;
    let e = next(&mut selected).await;
    assert_eq!((kind(&e), name(&e)), (EventType::Added, "p0"));

    // A status-only update: not for a labels predicate, nor for the CEL one.
    f.pods()
        .patch_status(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await?;
    // A spec update: the CEL predicate wants it.
    let spec = f
        .pods()
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": 600}})),
        )
        .await?;
    let e = next(&mut spec_cel).await;
    assert_eq!((kind(&e), name(&e)), (EventType::Modified, "p1"));
    assert_eq!(
        e.object.unwrap().resource_version,
        spec.metadata.resource_version.unwrap(),
        "the status update was skipped"
    );
    // The labels watch saw p0's two label changes, then nothing of p1 until its labels change.
    let relabel = f.label("p1", json!({"tier": "x"})).await?;
    let mut seen = vec![];
    for _ in 0..3 {
        seen.push(next(&mut labels_only).await);
    }
    let seen: Vec<_> = seen
        .iter()
        .map(|e| {
            (
                kind(e),
                name(e).to_string(),
                e.object.as_ref().unwrap().resource_version.clone(),
            )
        })
        .collect();
    assert_eq!(seen[0].1, "p0");
    assert_eq!(seen[1].1, "p0");
    assert_eq!(
        seen[2],
        (EventType::Modified, "p1".into(), relabel),
        "status and spec updates skipped"
    );

    let err = f
        .api
        .watch(WatchRequest {
            predicate_cel: "object.spec +".into(),
            ..f.watch_req(None)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("predicate_cel"),
        "{}",
        err.message()
    );
    Ok(())
}

#[tokio::test]
async fn resuming_replays_exactly_what_was_missed() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-resume", 3, |c| c.change_log_max_events(40)).await?;
    let (chunks, _) = f.list(f.list_req()).await?;
    let last = chunks.last().unwrap();
    let token = ResumeToken {
        epoch: last.epoch,
        revision: last.revision,
    };
    // A watch that stays connected is the reference.
    let mut reference = f
        .api
        .watch(f.watch_req(Some(Start::Since(token))))
        .await?
        .into_inner();
    let mut missed = vec![];
    for i in 0..6 {
        missed.push(
            f.label(&format!("p{}", i % 3), json!({"i": i.to_string()}))
                .await?,
        );
    }
    let mut want = vec![];
    for _ in 0..6 {
        let e = next(&mut reference).await;
        want.push((
            e.revision,
            name(&e).to_string(),
            e.object.unwrap().resource_version,
        ));
    }
    assert_eq!(want.iter().map(|w| w.2.clone()).collect::<Vec<_>>(), missed);
    let mut resumed = f
        .api
        .watch(f.watch_req(Some(Start::Since(token))))
        .await?
        .into_inner();
    let mut got = vec![];
    for _ in 0..6 {
        let e = next(&mut resumed).await;
        got.push((
            e.revision,
            name(&e).to_string(),
            e.object.unwrap().resource_version,
        ));
    }
    assert_eq!(
        got, want,
        "the same events, in the same order, with the same revisions"
    );
    // From the middle: the rest only.
    let mid = ResumeToken {
        epoch: token.epoch,
        revision: want[2].0,
    };
    let mut from_mid = f
        .api
        .watch(f.watch_req(Some(Start::Since(mid))))
        .await?
        .into_inner();
    assert_eq!(next(&mut from_mid).await.revision, want[3].0);

    // Another epoch: the sidecar restarted; relist.
    let other = ResumeToken {
        epoch: token.epoch ^ 1,
        revision: token.revision,
    };
    let err = f
        .api
        .watch(f.watch_req(Some(Start::Since(other))))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), reason(&err)),
        (Code::OutOfRange, "EpochChanged")
    );
    assert!(err.message().contains("relist"), "{}", err.message());
    // Older than the log (40 events): relist.
    let mut rv = String::new();
    for i in 0..45 {
        rv = f.label("p0", json!({"j": i.to_string()})).await?;
    }
    f.caught_up("p0", rv).await?;
    let newest = f.list(f.list_req()).await?.0.last().unwrap().revision;
    assert!(newest >= token.revision + 45);
    let err = f
        .api
        .watch(f.watch_req(Some(Start::Since(token))))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), reason(&err)),
        (Code::OutOfRange, "Expired"),
        "{err:?}"
    );
    Ok(())
}

/// 100 watchers that read and one that never does, during churn: the 100 get every event in
/// order, the one that never reads is ended with FellBehind, and the others never notice.
#[tokio::test]
async fn a_watcher_that_never_reads_is_ended_and_the_others_get_everything() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-fanout", 20, |c| c).await?;
    let start = f.list(f.list_req()).await?.0.last().unwrap().revision;
    let epoch = f.list(f.list_req()).await?.0.last().unwrap().epoch;
    let token = ResumeToken {
        epoch,
        revision: start,
    };
    let mut stalled = f
        .api
        .watch(f.watch_req(Some(Start::Since(token))))
        .await?
        .into_inner();
    let mut readers = vec![];
    for _ in 0..100 {
        let mut api = client::connect(&f.sidecar().socket().display().to_string()).await?;
        let req = f.watch_req(Some(Start::Since(token)));
        readers.push(tokio::spawn(async move {
            let mut s = api.watch(req).await?.into_inner();
            let mut seen = vec![];
            while let Some(e) = s.message().await? {
                if e.r#type == EventType::Modified as i32 {
                    seen.push(e.revision);
                    if seen.len() == CHANGES {
                        break;
                    }
                }
            }
            Ok::<_, tonic::Status>(seen)
        }));
    }
    // More than the stalled watcher's buffer plus what HTTP/2 lets its connection hold (the
    // client's 2 MiB stream window, the server's send buffer).
    const CHANGES: usize = 5000;
    let pods = f.pods();
    stream::iter(0..CHANGES)
        .map(|i| {
            let pods = pods.clone();
            async move {
                pods.patch(
                    &format!("p{}", i % 20),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {"i": i.to_string()}}})),
                )
                .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    let want: Vec<u64> = (start + 1..=start + CHANGES as u64).collect();
    for r in readers {
        assert_eq!(r.await??, want, "every change, in order");
    }
    // Its buffer has been full since the churn filled it: it is ended within STALL_TIMEOUT.
    let mut status = f.api.status(StatusRequest::default()).await?.into_inner();
    for _ in 0..1200 {
        if status.resources[0].dropped_watches > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = f.api.status(StatusRequest::default()).await?.into_inner();
    }
    assert_eq!(
        status.resources[0].dropped_watches, 1,
        "the watcher that never read was ended"
    );
    println!(
        "sidecar after {CHANGES} changes to 101 watchers: {} MiB allocated, {} MiB resident",
        status.allocated_bytes >> 20,
        status.resident_bytes >> 20
    );
    // It gets what was buffered, then the status, and can resume from there.
    let mut received = 0u64;
    let mut last = start;
    let err = loop {
        match stalled.message().await {
            Ok(Some(e)) => {
                received += 1;
                last = e.revision;
            }
            Ok(None) => panic!("ended without a status"),
            Err(status) => break status,
        }
    };
    assert_eq!(
        (err.code(), reason(&err)),
        (Code::ResourceExhausted, "FellBehind"),
        "{err:?}"
    );
    assert!(
        received < CHANGES as u64,
        "it was ended, not served everything ({received})"
    );
    let mut resumed = f
        .api
        .watch(f.watch_req(Some(Start::Since(ResumeToken {
            epoch,
            revision: last,
        }))))
        .await?
        .into_inner();
    assert_eq!(
        next(&mut resumed).await.revision,
        last + 1,
        "resumes right after what it received"
    );
    Ok(())
}

#[tokio::test]
async fn grpcurl_lists_the_services_and_calls_status() -> anyhow::Result<()> {
    // A socket mode from the config (the default is checked by list_streams_chunks_...).
    let f = Fixture::new("api-grpcurl", 1, |c| c.server(|s| s.socket_mode("0600"))).await?;
    assert_eq!(
        socket_mode(&f),
        0o600,
        "server.socketMode is applied to the socket"
    );
    let repo = informerd_testkit::repo_root();
    let made = std::process::Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&repo)
        .arg(".cache/bin/grpcurl")
        .status()?;
    assert!(made.success(), "make .cache/bin/grpcurl");
    let grpcurl = |args: &[&str]| -> anyhow::Result<String> {
        let out = std::process::Command::new(repo.join(".cache/bin/grpcurl"))
            .arg("-plaintext")
            .args(args)
            .output()?;
        assert!(
            out.status.success(),
            "grpcurl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    };
    // grpcurl 1.9.2-1.9.3 mishandle `-unix PATH`; a `unix://` target works in every version.
    let socket = format!("unix://{}", f.sidecar().socket().display());
    let services = grpcurl(&[&socket, "list"])?;
    for s in [
        "informerd.v1.Cache",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(services.lines().any(|l| l == s), "{s} in {services}");
    }
    let status: Value = serde_json::from_str(&grpcurl(&[
        "-d",
        "{}",
        &socket,
        "informerd.v1.Cache/Status",
    ])?)?;
    assert_eq!(status["synced"], true, "{status}");
    assert_eq!(status["resources"][0]["name"], "pods");
    assert_eq!(
        status["resources"][0]["objects"], "1",
        "uint64 is a JSON string"
    );
    // Readiness follows the sync state (checked a few times a second).
    let mut health = Value::Null;
    for _ in 0..100 {
        health = serde_json::from_str(&grpcurl(&[
            "-d",
            "{\"service\": \"informerd.v1.Cache\"}",
            &socket,
            "grpc.health.v1.Health/Check",
        ])?)?;
        if health["status"] == "SERVING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(health["status"], "SERVING", "ready once synced");
    Ok(())
}

/// TCP beyond loopback is served only with TLS (the config refuses it otherwise); a client
/// that trusts the certificate gets the API, a plaintext one does not.
#[tokio::test]
async fn tcp_beyond_loopback_is_served_with_tls() -> anyhow::Result<()> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])?;
    let dir = std::env::temp_dir().join(format!("informerd-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (cert_file, key_file) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_file, cert.cert.pem())?;
    std::fs::write(&key_file, cert.signing_key.serialize_pem())?;
    let port = informerd_testkit::free_port();
    // Held to the end: its drop stops the sidecar and deletes the namespace.
    let _f = Fixture::new("api-tls", 1, |c| {
        c.server(|s| {
            s.listen(format!("0.0.0.0:{port}"))
                .tls(&cert_file, &key_file, None)
        })
    })
    .await?;
    let options = client::ConnectOptions {
        ca_file: Some(cert_file.clone()),
        ..Default::default()
    };
    let mut tls = client::connect_with(&format!("https://127.0.0.1:{port}"), &options).await?;
    let status = tls.status(StatusRequest::default()).await?.into_inner();
    assert_eq!(status.resources[0].objects, 1);
    let plaintext = async {
        client::connect(&format!("http://127.0.0.1:{port}"))
            .await?
            .status(StatusRequest::default())
            .await?;
        anyhow::Ok(())
    };
    assert!(
        plaintext.await.is_err(),
        "plaintext is refused on the TLS port"
    );
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// SIGTERM (what the kubelet sends) ends open watches with UNAVAILABLE/ShuttingDown, which
/// clients answer by resuming, and removes the socket.
#[tokio::test]
async fn sigterm_ends_watches_with_a_status_to_resume_on() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-term", 1, |c| c).await?;
    let mut watch = f.api.watch(f.watch_req(None)).await?.into_inner();
    let pid = f.sidecar().pid().expect("running").to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()?
        .success());
    let err = loop {
        match watch.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the watch ended without a status"),
            Err(status) => break status,
        }
    };
    assert_eq!(
        (err.code(), reason(&err)),
        (Code::Unavailable, "ShuttingDown"),
        "{err:?}"
    );
    for _ in 0..600 {
        if !f.sidecar().socket().exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !f.sidecar().socket().exists(),
        "the socket is removed on the way out"
    );
    Ok(())
}

/// Bookmarks come at the interval the watch asks for and carry the revision it has reached,
/// even when none of the changes pass its filters.
#[tokio::test]
async fn bookmarks_carry_the_revision_the_watch_has_reached() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-bookmark", 2, |c| c).await?;
    let mut watch = f
        .api
        .watch(WatchRequest {
            label_selector: "app=none".into(),
            bookmark_interval_seconds: 1,
            ..f.watch_req(None)
        })
        .await?
        .into_inner();
    let rv = f.label("p0", json!({"x": "1"})).await?;
    f.caught_up("p0", rv).await?;
    let reached = f.list(f.list_req()).await?.0.last().unwrap().revision;
    loop {
        let e = tokio::time::timeout(Duration::from_secs(60), watch.message())
            .await?
            .expect("the watch goes on")
            .expect("open");
        assert_eq!(kind(&e), EventType::Bookmark, "nothing passes app=none");
        assert!(e.object.is_none());
        if e.revision == reached {
            break;
        }
        assert!(e.revision < reached);
    }
    Ok(())
}

/// The permission bits of the sidecar's socket file.
fn socket_mode(f: &Fixture) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(f.sidecar().socket()).expect("the socket exists");
    meta.permissions().mode() & 0o777
}

#[tokio::test]
async fn status_names_each_index_and_what_it_indexes() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-status-ix", 0, |c| c).await?;
    let status = f
        .api
        .status(StatusRequest {
            resource: "pods".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let indexes: Vec<(String, String)> = status.resources[0]
        .indexes
        .iter()
        .map(|i| (i.name.clone(), i.indexes.clone()))
        .collect();
    assert_eq!(
        indexes,
        [
            ("node".to_string(), "spec.nodeName".to_string()),
            ("owners".to_string(), "cel".to_string()),
            ("labels".to_string(), "labels".to_string())
        ]
    );
    Ok(())
}

#[tokio::test]
async fn list_reads_your_writes_with_min_resource_version() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-list-rv", 3, |c| c).await?;
    let with_min = |f: &Fixture, min_rv: &str| ListRequest {
        min_resource_version: min_rv.into(),
        label_selector: "round".into(),
        ..f.list_req()
    };
    for round in 0..5 {
        // A different pod each round: the list must hold this write, whichever object it was.
        let name = format!("p{}", round % 3);
        let written = f.label(&name, json!({"round": round.to_string()})).await?;
        let (_, objects) = f.list(with_min(&f, &written)).await?;
        assert_eq!(
            objects.get(&name),
            Some(&written),
            "round {round}: the list holds the version just written: {objects:?}"
        );
    }
    let future: u64 = f.label("p1", json!({"x": "1"})).await?.parse()?;
    let mut req = tonic::Request::new(with_min(&f, &(future + 1_000_000).to_string()));
    // As in the Get test: 2 s leaves the server's early answer a margin over the transport's.
    req.set_timeout(Duration::from_secs(2));
    let err = f.api.list(req).await.unwrap_err();
    assert_eq!(
        (err.code(), reason(&err)),
        (Code::DeadlineExceeded, "NotCaughtUp"),
        "{err:?}"
    );
    let err = f.list(with_min(&f, "latest")).await.unwrap_err();
    assert_eq!(
        (err.code(), reason(&err)),
        (Code::InvalidArgument, "Invalid")
    );
    assert!(
        err.message().starts_with("min_resource_version: "),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn list_limit_returns_the_first_matches_in_list_order() -> anyhow::Result<()> {
    let mut f = Fixture::new("api-list-limit", 6, |c| c).await?;
    let names = |chunks: &[proto::ListResponse]| -> Vec<String> {
        chunks
            .iter()
            .flat_map(|c| &c.objects)
            .map(|o| o.name.clone())
            .collect()
    };
    let (all, _) = f.list(f.list_req()).await?;
    let all = names(&all);
    assert_eq!(all.len(), 6);
    let (chunks, _) = f
        .list(ListRequest {
            limit: 4,
            chunk_size: 3,
            ..f.list_req()
        })
        .await?;
    assert_eq!(names(&chunks), all[..4], "the first 4, across chunks");
    assert!(chunks.last().is_some_and(|c| c.last && c.revision > 0));
    // The limit counts matches, not candidates: pods p1, p3, p5 have app=b.
    let (chunks, _) = f
        .list(ListRequest {
            limit: 2,
            label_selector: "app=b".into(),
            ..f.list_req()
        })
        .await?;
    let matching: Vec<String> = all
        .iter()
        .filter(|n| ["p1", "p3", "p5"].contains(&n.as_str()))
        .take(2)
        .cloned()
        .collect();
    assert_eq!(names(&chunks), matching);
    let (chunks, _) = f
        .list(ListRequest {
            limit: 100,
            ..f.list_req()
        })
        .await?;
    assert_eq!(
        names(&chunks),
        all,
        "a limit above the count lists everything"
    );
    let err = f
        .list(ListRequest {
            limit: -1,
            ..f.list_req()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), reason(&err)),
        (Code::InvalidArgument, "Invalid")
    );
    assert!(err.message().starts_with("limit: "), "{err:?}");
    Ok(())
}

#[tokio::test]
async fn a_watch_with_send_previous_gets_the_old_side_of_each_update_masked_as_the_new(
) -> anyhow::Result<()> {
    let mut f = Fixture::new("api-previous", 1, |c| c).await?;
    let first = f.label("p0", json!({"round": "1"})).await?;
    f.caught_up("p0", first.clone()).await?;
    let req = WatchRequest {
        send_previous: true,
        fields: vec!["metadata.labels".into()],
        ..f.watch_req(None)
    };
    let mut previous_on = f.api.watch(req).await?.into_inner();
    let mut previous_off = f.api.watch(f.watch_req(None)).await?.into_inner();
    let second = f.label("p0", json!({"round": "2"})).await?;
    let modified = loop {
        let e = next(&mut previous_on).await;
        if kind(&e) == EventType::Modified {
            break e;
        }
    };
    let object = modified.object.expect("a MODIFIED has an object");
    let old = modified
        .previous
        .expect("send_previous: a MODIFIED has the previous object");
    assert_eq!(
        (
            object.resource_version.as_str(),
            old.resource_version.as_str()
        ),
        (second.as_str(), first.as_str())
    );
    let old_json: Value = serde_json::from_slice(&old.json)?;
    assert_eq!(old_json["metadata"]["labels"]["round"], "1", "{old_json}");
    assert!(
        old_json.get("spec").is_none(),
        "the field mask applies to the old side too: {old_json}"
    );
    assert!(
        old.revision < modified.revision,
        "the old side's revision is its own change's"
    );
    let plain = loop {
        let e = next(&mut previous_off).await;
        if kind(&e) == EventType::Modified {
            break e;
        }
    };
    assert!(
        plain.previous.is_none(),
        "without send_previous, no old side travels"
    );
    Ok(())
}
