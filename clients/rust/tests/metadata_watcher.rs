//! The light path of a kube-rs controller against the real sidecar and control plane:
//! `metadata_watcher` keeps kube-rs's watcher contract (Init..InitDone, Apply, Delete, a broken
//! stream resumed quietly without loss) while the sidecar sends only the masked metadata, and
//! `ReadThrough` answers a reflector `Store`'s reads (`get`, `state`, `wait_until_ready`) from
//! the sidecar.

mod common;

use std::path::{Path, PathBuf};

use common::{apply_config_map, apply_pod, delete_pod, labels, Fixture};
use futures::{Stream, StreamExt};
use informerd_client::{metadata_watcher, Api, ReadThrough, IDENTITY_ONLY};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::ListParams;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use kube::ResourceExt;
use serde_json::json;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

/// A Unix socket in front of the sidecar's whose open connections can be cut (as a broken
/// connection would), while new ones still get through.
struct Proxy {
    path: PathBuf,
    cut: watch::Sender<u32>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    fn start(upstream: &Path) -> anyhow::Result<Proxy> {
        let path = upstream.with_file_name("kubers-proxy.sock");
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let (cut, cuts) = watch::channel(0);
        let upstream = upstream.to_path_buf();
        let task = tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                // Only cuts after this connection opened close it: a clone has the version
                // the original last saw, which is none (without this, every connection after
                // the first cut was closed at once).
                let mut cuts = cuts.clone();
                cuts.mark_unchanged();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut up) = UnixStream::connect(&upstream).await else {
                        return;
                    };
                    // Either side closing, or a cut, drops both ends.
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Ok(Proxy { path, cut, task })
    }

    /// Closes every connection open now.
    fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    async fn connect(
        &self,
    ) -> anyhow::Result<informerd_client::proto::cache_client::CacheClient<tonic::transport::Channel>>
    {
        Ok(informerd_client::connect(&self.path.display().to_string()).await?)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A pod owned by the config map `owner` (uid `uid`), with a label and an annotation.
async fn apply_owned_pod(fx: &Fixture, name: &str, owner: &str, uid: &str) -> anyhow::Result<Pod> {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "web"},
            "annotations": {"note": "x".repeat(2000)},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid}],
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
    });
    Ok(informerd_testkit::apply_pod(fx.kube(), fx.ns(), pod).await?)
}

type Events =
    std::pin::Pin<Box<dyn Stream<Item = watcher::Result<Event<PartialObjectMeta<Pod>>>> + Send>>;

/// The next event: any `Err` fails the test (a broken stream is resumed quietly, and nothing
/// here is refused).
async fn next_event(stream: &mut Events) -> Event<PartialObjectMeta<Pod>> {
    match stream.next().await {
        Some(Ok(event)) => event,
        Some(Err(e)) => panic!("expected an event, got the error {e}"),
        None => panic!("the watcher never ends"),
    }
}

fn applied(event: Event<PartialObjectMeta<Pod>>) -> PartialObjectMeta<Pod> {
    match event {
        Event::Apply(meta) => meta,
        other => panic!("expected Apply, got {other:?}"),
    }
}

/// Reads events until `name`'s `Delete` (the apiserver first marks it deleted: an `Apply`).
async fn until_deleted(stream: &mut Events, name: &str) {
    loop {
        match next_event(stream).await {
            Event::Apply(meta) if meta.metadata.deletion_timestamp.is_some() => {
                assert_eq!(meta.name_any(), name);
            }
            Event::Delete(meta) => {
                assert_eq!(meta.name_any(), name);
                return;
            }
            other => panic!("expected Delete({name}), got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_metadata_watcher_keeps_the_watcher_contract_on_metadata_only() -> anyhow::Result<()> {
    let fx = Fixture::new("kubers-meta").await?;
    apply_config_map(fx.kube(), fx.ns(), "owner", &labels(&[])).await?;
    let owner = kube::Api::<ConfigMap>::namespaced(fx.kube().clone(), fx.ns())
        .get("owner")
        .await?;
    let uid = owner.uid().unwrap_or_default();
    let a = apply_owned_pod(&fx, "a", "owner", &uid).await?;
    let proxy = Proxy::start(fx.sidecar().socket())?;
    let pods = Api::<Pod>::namespaced(proxy.connect().await?, "pods", fx.ns());
    pods.get_at_least("a", &a.resource_version().unwrap_or_default())
        .await?;

    let mut stream: Events = Box::pin(metadata_watcher(pods, watcher::Config::default()));
    assert!(matches!(next_event(&mut stream).await, Event::Init));
    let meta = match next_event(&mut stream).await {
        Event::InitApply(meta) => meta,
        other => panic!("expected InitApply(a), got {other:?}"),
    };
    // The identity, and the default metadata mask's fields; not the annotations.
    assert_eq!(meta.name_any(), "a");
    assert_eq!(meta.namespace().as_deref(), Some(fx.ns()));
    assert_eq!(meta.uid(), a.uid());
    assert_eq!(meta.resource_version(), a.resource_version());
    assert_eq!(meta.labels().get("app").map(String::as_str), Some("web"));
    assert_eq!(meta.owner_references()[0].uid, uid);
    assert!(meta.metadata.annotations.is_none(), "{meta:?}");
    assert!(meta.metadata.creation_timestamp.is_none(), "{meta:?}");
    assert!(matches!(next_event(&mut stream).await, Event::InitDone));

    apply_pod(fx.kube(), fx.ns(), "b", &labels(&[("app", "db")])).await?;
    assert_eq!(applied(next_event(&mut stream).await).name_any(), "b");
    delete_pod(fx.kube(), fx.ns(), "a").await?;
    until_deleted(&mut stream, "a").await;

    // The connection breaks: the watcher resumes quietly (no `Err` item) after the last event
    // it delivered. What changed meanwhile comes, in order, and no new Init.
    proxy.cut();
    apply_pod(fx.kube(), fx.ns(), "c", &labels(&[("app", "web")])).await?;
    apply_pod(
        fx.kube(),
        fx.ns(),
        "b",
        &labels(&[("app", "db"), ("v", "2")]),
    )
    .await?;
    delete_pod(fx.kube(), fx.ns(), "c").await?;
    assert_eq!(applied(next_event(&mut stream).await).name_any(), "c");
    let b = applied(next_event(&mut stream).await);
    assert_eq!(b.name_any(), "b");
    assert_eq!(b.labels().get("v").map(String::as_str), Some("2"));
    until_deleted(&mut stream, "c").await;
    Ok(())
}

#[tokio::test]
async fn read_through_answers_a_stores_reads_from_the_sidecar() -> anyhow::Result<()> {
    let fx = Fixture::new("kubers-read").await?;
    apply_pod(fx.kube(), fx.ns(), "a", &labels(&[("app", "web")])).await?;
    let last = apply_pod(fx.kube(), fx.ns(), "b", &labels(&[("app", "db")])).await?;
    let api = Api::<Pod>::namespaced(fx.cache().await?, "pods", fx.ns());
    let pods = ReadThrough::new(api.clone());
    pods.wait_until_ready().await?;
    api.get_at_least("b", &last).await?;

    // By a key of the whole type, and of the metadata a light Controller holds.
    let a = pods
        .get(&ObjectRef::<Pod>::new("a").within(fx.ns()))
        .await?
        .expect("a");
    let spec = a.spec.as_ref().expect("the whole pod");
    assert_eq!(spec.node_name.as_deref(), Some("node-1"));
    assert_eq!(spec.containers.len(), 1);
    let light = api
        .clone()
        .metadata()
        .fields(IDENTITY_ONLY)
        .get("b")
        .await?;
    assert!(light.metadata.labels.is_none(), "identity only: {light:?}");
    let b = pods.get(&ObjectRef::from_obj(&light)).await?.expect("b");
    assert_eq!(b.labels().get("app").map(String::as_str), Some("db"));

    // Absent: no such object, or another namespace than the handle's.
    let none = ObjectRef::<Pod>::new("nope").within(fx.ns());
    assert!(pods.get(&none).await?.is_none());
    let elsewhere = ObjectRef::<Pod>::new("a").within("kube-system");
    assert!(pods.get(&elsewhere).await?.is_none());

    let mut names: Vec<_> = pods.state().await?.iter().map(|p| p.name_any()).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    let web = pods
        .state_matching(&ListParams::default().labels("app=web"))
        .await?;
    assert_eq!(web.len(), 1);
    assert_eq!(web[0].name_any(), "a");
    Ok(())
}
