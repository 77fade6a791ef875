//! WatchKeys as a controller meets it: the real binary (`informerd serve`) caching pods of the
//! real control plane, consumed with the Rust client's `watch_keys` and its acker.
//!
//! - churn over 1,000 pods while the consumer sleeps: each changed key comes once per quiet
//!   period (at most twice: once before the sleep, once after its ack), the queue stays bounded
//!   by the pods, and the last Get after the last key equals the apiserver's object;
//! - owner mapping: a real ReplicaSet gets its key once per burst of changes to its pods;
//! - resume with a token gives the keys changed since; a restarted sidecar (another epoch)
//!   gives a resync, not a gap;
//! - with `send_objects`, each key carries what a Get returns (masked by `fields`), a deletion
//!   and an owner's key carry none;
//! - a resync of an empty view ends at once; one that outlives the change log reads the rest
//!   of its view at a newer revision and sends no key twice;
//! - bad subscriptions are INVALID_ARGUMENT naming the field.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::{stream, StreamExt, TryStreamExt};
use informerd::proto::{
    cache_client::CacheClient, GetRequest, KeyEvent, KeyEventType, KeysSubscription, ListRequest,
    OwnerMapping, OwnerMode, ResumeToken,
};
use informerd_client::keys::{watch_keys, Acker};
use informerd_testkit::{
    self as testkit, create_pods, free_port, scrape_metrics, wait_default_service_account,
    wait_synced, Resource, Samples, SidecarConfig, Transform,
};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Code, Streaming};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");

/// A namespace and a sidecar caching its pods (with `transform`); the namespace is deleted on
/// drop.
struct Fixture {
    base: testkit::Fixture,
    api: CacheClient<Channel>,
    /// The sidecar's `server.metrics` port.
    metrics: u16,
}

impl std::ops::Deref for Fixture {
    type Target = testkit::Fixture;
    fn deref(&self) -> &testkit::Fixture {
        &self.base
    }
}

impl Fixture {
    async fn new(base: &str, transform: Transform) -> anyhow::Result<Fixture> {
        Fixture::with_config(base, transform, |c| c).await
    }

    /// [`Fixture::new`], with `edit` applied to the sidecar's configuration.
    async fn with_config(
        base: &str,
        transform: Transform,
        edit: impl FnOnce(SidecarConfig) -> SidecarConfig,
    ) -> anyhow::Result<Fixture> {
        let mut base = testkit::Fixture::new(base).await?;
        wait_default_service_account(base.kube(), base.ns()).await?;
        let metrics = free_port();
        let config = SidecarConfig::new()
            .resource(
                Resource::pods()
                    .namespaces([base.ns()])
                    .transform(transform),
            )
            .server(|s| s.metrics_port(metrics));
        base.start_sidecar(BIN.as_ref(), &edit(config))?;
        let mut api = base.cache().await?;
        wait_synced(&mut api).await?;
        Ok(Fixture { base, api, metrics })
    }

    /// The sidecar's WatchKeys figures for its pods: streams, changes marked, keys sent,
    /// resyncs, keys pending or in flight, queue bytes.
    async fn key_metrics(&self) -> anyhow::Result<[f64; 6]> {
        let m: Samples = scrape_metrics(self.metrics).await?;
        let pods = [("resource", "pods")];
        Ok([
            "informerd_watch_keys_streams",
            "informerd_watch_keys_changes_total",
            "informerd_watch_keys_sent_total",
            "informerd_watch_keys_resyncs_total",
            "informerd_watch_keys_pending",
            "informerd_watch_keys_queue_bytes",
        ]
        .map(|name| m.sum(name, &pods)))
    }

    /// Waits, up to a minute, until `check` holds of [`Fixture::key_metrics`]; returns them.
    async fn key_metrics_until(
        &self,
        what: &str,
        check: impl Fn(&[f64; 6]) -> bool,
    ) -> anyhow::Result<[f64; 6]> {
        let mut last = self.key_metrics().await?;
        for _ in 0..600 {
            if check(&last) {
                return Ok(last);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            last = self.key_metrics().await?;
        }
        anyhow::bail!("the WatchKeys metrics did not show {what} in 60 s: {last:?}")
    }

    /// A client whose connection takes at most `window` bytes of a stream before it reads:
    /// the sidecar can send no more than that, plus what its own buffers hold, ahead of it.
    async fn client_with_window(&self, window: u32) -> anyhow::Result<CacheClient<Channel>> {
        let socket = self.sidecar().socket().to_path_buf();
        let channel = Endpoint::from_static("http://informerd")
            .initial_stream_window_size(window)
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let socket = socket.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(socket).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            }))
            .await?;
        Ok(CacheClient::new(channel))
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.kube().clone(), self.ns())
    }

    fn subscription(&self) -> KeysSubscription {
        KeysSubscription {
            resource: "pods".into(),
            namespace: self.ns().to_owned(),
            ..Default::default()
        }
    }

    /// Creates `count` pods `p0..` (16 at a time).
    async fn create_pods(&self, count: usize) -> anyhow::Result<()> {
        create_pods(self.kube(), self.ns(), count, &[("app", "keys")], false).await?;
        Ok(())
    }

    /// Sets label `round` of each named pod (32 at a time).
    async fn touch(&self, names: &[String], round: usize) -> anyhow::Result<()> {
        let pods = self.pods();
        stream::iter(names.iter().cloned())
            .map(|name| {
                let pods = pods.clone();
                async move {
                    let patch = json!({"metadata": {"labels": {"round": round.to_string()}}});
                    pods.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                        .await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(32)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// The apiserver's pods, by name: their labels and resourceVersion.
    async fn apiserver_state(&self) -> anyhow::Result<BTreeMap<String, (Value, String)>> {
        let list = self.pods().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .map(|p| {
                let labels = serde_json::to_value(p.metadata.labels.clone()).unwrap();
                (
                    p.metadata.name.clone().unwrap(),
                    (labels, p.metadata.resource_version.clone().unwrap()),
                )
            })
            .collect())
    }

    /// What a Get from the sidecar says of a pod: labels and resourceVersion, or None.
    async fn get(&mut self, name: &str) -> anyhow::Result<Option<(Value, String)>> {
        let got = self
            .api
            .get(GetRequest {
                resource: "pods".into(),
                namespace: self.ns().to_owned(),
                name: name.into(),
                ..Default::default()
            })
            .await;
        match got {
            Ok(r) => {
                let object = r.into_inner().object.unwrap();
                let json: Value = serde_json::from_slice(&object.json)?;
                let labels = json["metadata"]["labels"].clone();
                Ok(Some((labels, object.resource_version)))
            }
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(s.into()),
        }
    }

    /// Waits until the sidecar's pods are the apiserver's (same resourceVersions).
    async fn wait_caught_up(&mut self) -> anyhow::Result<()> {
        for _ in 0..600 {
            let want: BTreeMap<String, String> = self
                .apiserver_state()
                .await?
                .into_iter()
                .map(|(n, (_, rv))| (n, rv))
                .collect();
            let chunks: Vec<_> = self
                .api
                .list(ListRequest {
                    resource: "pods".into(),
                    namespace: self.ns().to_owned(),
                    ..Default::default()
                })
                .await?
                .into_inner()
                .try_collect()
                .await?;
            let have: BTreeMap<String, String> = chunks
                .into_iter()
                .flat_map(|c| c.objects)
                .map(|o| (o.name, o.resource_version))
                .collect();
            if have == want {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::bail!("the sidecar did not catch up with the apiserver in 120 s")
    }
}

fn drop_managed_fields() -> Transform {
    Transform::default().drop(["metadata.managedFields"])
}

/// The next event, or None when none comes for `quiet`.
async fn next(events: &mut Streaming<KeyEvent>, quiet: Duration) -> Option<KeyEvent> {
    match tokio::time::timeout(quiet, events.message()).await {
        Ok(Ok(Some(event))) => Some(event),
        Ok(Ok(None)) => panic!("the stream ended"),
        Ok(Err(status)) => panic!("the stream failed: {status}"),
        Err(_) => None,
    }
}

/// Reads a resync (RESYNC_START, keys, RESYNC_END), acknowledging each key: the names sent.
async fn read_resync(events: &mut Streaming<KeyEvent>, acker: &Acker) -> Vec<String> {
    let mut names = Vec::new();
    let mut started = false;
    loop {
        let event = next(events, Duration::from_secs(60))
            .await
            .expect("a resync within 60 s");
        match event.r#type() {
            KeyEventType::ResyncStart => started = true,
            KeyEventType::ResyncEnd => {
                assert!(started, "RESYNC_END without RESYNC_START");
                return names;
            }
            KeyEventType::Key => {
                assert!(started, "a key before RESYNC_START: {event:?}");
                names.push(event.key.as_ref().unwrap().name.clone());
                assert!(acker.ack_event(&event));
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn churn_sends_each_changed_key_once_per_quiet_period_and_the_last_get_is_the_apiservers(
) -> anyhow::Result<()> {
    const PODS: usize = 1_000;
    const ROUNDS: usize = 10;
    let mut fx = Fixture::new("keys-churn", drop_managed_fields()).await?;
    fx.create_pods(PODS).await?;
    fx.wait_caught_up().await?;
    let mut sub = fx.subscription();
    sub.debounce_millis = 300;
    let (mut events, acker) = watch_keys(&mut fx.api.clone(), sub).await?;
    let resynced: BTreeSet<String> = read_resync(&mut events, &acker).await.into_iter().collect();
    assert_eq!(resynced.len(), PODS, "every pod's key once in the resync");

    // The consumer sleeps (reads nothing) while each pod changes ROUNDS times.
    let names: Vec<String> = (0..PODS).map(|i| format!("p{i}")).collect();
    for round in 0..ROUNDS {
        fx.touch(&names, round).await?;
    }
    fx.wait_caught_up().await?;
    let want = fx.apiserver_state().await?;
    // The operator's view of the sleeping consumer: one entry per pod, however many changes
    // (every change marked, unless the change log did not reach back and a resync replaced
    // the marks).
    let (pods, changes) = (PODS as f64, (PODS * ROUNDS) as f64);
    let [streams, marked, _, resyncs, pending, bytes] = fx
        .key_metrics_until("every change marked", |m| {
            (m[1] == changes || m[3] > 1.0) && m[4] == pods
        })
        .await?;
    println!(
        "metrics while the consumer sleeps: {streams} stream, {marked} changes marked, \
         {pending} keys pending or in flight in {bytes} bytes, {resyncs} resync"
    );
    assert_eq!(streams, 1.0);

    // It wakes: reads keys, Gets each, acknowledges; until quiet and every last Get matches.
    let mut deliveries: BTreeMap<String, usize> = BTreeMap::new();
    let mut last_get: BTreeMap<String, Option<(Value, String)>> = BTreeMap::new();
    let (mut max_queued, mut max_bytes) = (0, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        match next(&mut events, Duration::from_secs(3)).await {
            Some(event) if event.r#type() == KeyEventType::Key => {
                max_queued = max_queued.max(event.pending + event.in_flight);
                max_bytes = max_bytes.max(event.queue_bytes);
                let name = event.key.as_ref().unwrap().name.clone();
                *deliveries.entry(name.clone()).or_default() += 1;
                last_get.insert(name.clone(), fx.get(&name).await?);
                assert!(acker.ack_event(&event));
            }
            Some(_) => {}
            None => {
                let matches = want
                    .iter()
                    .all(|(name, state)| last_get.get(name) == Some(&Some(state.clone())));
                if matches {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "after 180 s, some pods' last Get differs from the apiserver"
                );
            }
        }
    }
    let events_made = PODS * ROUNDS;
    let keys_sent: usize = deliveries.values().sum();
    println!(
        "{events_made} updates over {PODS} pods: {keys_sent} keys sent; the queue held at most \
         {max_queued} keys in {max_bytes} bytes ({:.0} bytes per pod)",
        max_bytes as f64 / PODS as f64
    );
    assert_eq!(deliveries.len(), PODS, "every changed key was sent");
    for (name, n) in &deliveries {
        assert!(
            *n <= 2,
            "{name} sent {n} times for one quiet period (once before the sleep, once after its ack at most)"
        );
    }
    assert!(
        max_queued <= PODS as u64,
        "the queue is bounded by the pods, not the {events_made} events: {max_queued} keys"
    );
    // Every key sent, the resync's included, was received and acknowledged: nothing is left.
    let sent_total = (PODS + keys_sent) as f64;
    fx.key_metrics_until("every key sent and acknowledged", |m| {
        m[2] == sent_total && m[4] == 0.0
    })
    .await?;
    drop(events);
    drop(acker);
    fx.key_metrics_until("the stream closed", |m| m[0] == 0.0 && m[5] == 0.0)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_mapping_sends_the_replicasets_key_once_per_burst_of_its_pods() -> anyhow::Result<()>
{
    let mut fx = Fixture::new("keys-owner", drop_managed_fields()).await?;
    // Decision: the project's kube-controller-manager runs the garbage collector but not the
    // ReplicaSet controller (tools/cmd/cluster), so the test writes the pods as that controller
    // does: a real ReplicaSet, and pods whose controller owner reference names it (uid and
    // all, so the garbage collector honours it). One more pod has no owner.
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    }))?;
    let rs = Api::<ReplicaSet>::namespaced(fx.kube().clone(), fx.ns())
        .create(&PostParams::default(), &rs)
        .await?;
    let owner = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
        "uid": rs.metadata.uid.clone().unwrap(), "controller": true, "blockOwnerDeletion": true,
    });
    let names: Vec<String> = ["web-a", "web-b", "web-c", "loner"]
        .map(String::from)
        .to_vec();
    for name in &names {
        let owners = if name == "loner" {
            json!([])
        } else {
            json!([owner])
        };
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "web"}, "ownerReferences": owners},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        }))?;
        fx.pods().create(&PostParams::default(), &pod).await?;
    }
    fx.wait_caught_up().await?;

    let mut sub = fx.subscription();
    sub.debounce_millis = 2_000;
    // An owner's key is another resource's: it carries no object even when asked.
    sub.send_objects = true;
    sub.owner = Some(OwnerMapping {
        kind: "ReplicaSet".into(),
        api_version: "apps/v1".into(),
        mode: OwnerMode::OwnerOnly as i32,
    });
    let (mut events, acker) = watch_keys(&mut fx.api.clone(), sub).await?;
    assert_eq!(
        read_resync(&mut events, &acker).await,
        vec!["web"],
        "three owned pods, one owner; the loner has none"
    );

    for burst in 0..2 {
        fx.touch(&names, burst).await?;
        let mut keys = Vec::new();
        // The key comes after 2 s of quiet; then nothing more for this burst.
        while let Some(event) = next(&mut events, Duration::from_secs(8)).await {
            if event.r#type() == KeyEventType::Key {
                let key = event.key.clone().unwrap();
                assert_eq!(event.object, None, "an owner's key carries no object");
                keys.push((key.kind, key.namespace, key.name, event.deleted));
                assert!(acker.ack_event(&event));
            }
        }
        assert_eq!(
            keys,
            vec![(
                "ReplicaSet".to_string(),
                fx.ns().to_owned(),
                "web".to_string(),
                false
            )],
            "burst {burst}: the owner's key, once"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_sends_the_keys_changed_since_and_a_restart_resyncs() -> anyhow::Result<()> {
    let mut fx = Fixture::new("keys-resume", drop_managed_fields()).await?;
    fx.create_pods(5).await?;
    fx.wait_caught_up().await?;
    let (mut events, acker) = watch_keys(&mut fx.api.clone(), fx.subscription()).await?;
    assert_eq!(read_resync(&mut events, &acker).await.len(), 5);
    // Once the acks are in, a PROGRESS carries the token.
    let token = wait_token(&mut events).await;
    drop(events);

    // Changed while disconnected: resuming sends exactly that key, with no resync.
    fx.touch(&["p1".to_string()], 1).await?;
    fx.wait_caught_up().await?;
    let mut sub = fx.subscription();
    sub.since = Some(token);
    let (mut events, acker) = watch_keys(&mut fx.api.clone(), sub.clone()).await?;
    let mut got = Vec::new();
    while let Some(event) = next(&mut events, Duration::from_secs(3)).await {
        assert_ne!(
            event.r#type(),
            KeyEventType::ResyncStart,
            "a token of this epoch resumes"
        );
        if event.r#type() == KeyEventType::Key {
            got.push(event.key.clone().unwrap().name);
            acker.ack_event(&event);
        }
    }
    assert_eq!(got, vec!["p1"]);
    drop(events);

    // A restart while a pod is deleted and another changes: the old token resyncs.
    fx.base.sidecar_mut().kill();
    fx.pods()
        .delete("p2", &kube::api::DeleteParams::default().grace_period(0))
        .await?;
    fx.touch(&["p3".to_string()], 2).await?;
    fx.base.sidecar_mut().restart()?;
    fx.api = fx.cache().await?;
    wait_synced(&mut fx.api).await?;
    fx.wait_caught_up().await?;
    let (mut events, acker) = watch_keys(&mut fx.api.clone(), sub).await?;
    let resynced: BTreeSet<String> = read_resync(&mut events, &acker).await.into_iter().collect();
    let want: BTreeSet<String> = fx.apiserver_state().await?.into_keys().collect();
    assert_eq!(resynced, want, "every key once, p2 gone");
    assert!(!resynced.contains("p2"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_of_an_empty_view_ends_at_once() -> anyhow::Result<()> {
    let fx = Fixture::new("keys-empty", drop_managed_fields()).await?;
    let (mut events, acker) = watch_keys(&mut fx.api.clone(), fx.subscription()).await?;
    assert_eq!(read_resync(&mut events, &acker).await, Vec::<String>::new());
    Ok(())
}

/// A resync is read a page at a time as its keys are sent. This one's consumer does not read
/// while the pods it has not reached change more often than the change log keeps: its next
/// page is then past the log, and the resync reads the rest of the view at the newer revision
/// (`Pages::resume`) instead of starting over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_that_outlives_the_change_log_sends_every_key_and_none_twice() -> anyhow::Result<()>
{
    // Decision: sizes from what the sidecar reads ahead of a consumer that does not read: a
    // window of entries and up to a window and a page of keys waiting (`RESYNC_WINDOW`,
    // `initial.rs`: 2,304), and the keys sent: those the 1 KiB stream window takes, two of
    // tonic's 32 KiB chunks (one encoded, one waiting in HTTP/2 for the window) and the
    // stream's 64-event buffer, under 1,200 keys of about 60 bytes. So of 4,500 pods, created
    // in order 16 at a time, the last 300 are in pages not yet read, whatever the timing, and
    // 300 changes are past a log of 50.
    const PODS: usize = 4_500;
    const TOUCHED: usize = 300;
    let mut fx = Fixture::with_config("keys-outlive", drop_managed_fields(), |c| {
        c.change_log_max_events(50)
    })
    .await?;
    fx.create_pods(PODS).await?;
    fx.wait_caught_up().await?;
    let mut api = fx.client_with_window(1024).await?;
    let (mut events, acker) = watch_keys(&mut api, fx.subscription()).await?;
    // The resync has its revision once it has sent a key.
    fx.key_metrics_until("a key sent", |m| m[2] >= 1.0).await?;
    let touched: Vec<String> = (PODS - TOUCHED..PODS).map(|i| format!("p{i}")).collect();
    fx.touch(&touched, 1).await?;
    fx.wait_caught_up().await?;

    let mut sent: BTreeMap<String, usize> = BTreeMap::new();
    for name in read_resync(&mut events, &acker).await {
        *sent.entry(name).or_default() += 1;
    }
    // Then the changes not merged into the resync, until quiet.
    while let Some(event) = next(&mut events, Duration::from_secs(3)).await {
        if event.r#type() == KeyEventType::Key {
            *sent.entry(event.key.clone().unwrap().name).or_default() += 1;
            assert!(acker.ack_event(&event));
        }
    }
    let [_, _, _, resyncs, _, _] = fx.key_metrics().await?;
    let m: Samples = scrape_metrics(fx.metrics).await?;
    let resumes = m.sum(
        "informerd_watch_keys_resync_resumes_total",
        &[("resource", "pods")],
    );
    println!(
        "{PODS} pods, {TOUCHED} changed during the resync: {resumes} resumes, {} keys sent",
        sent.values().sum::<usize>()
    );
    assert!(
        resumes >= 1.0,
        "the resync's later pages were past the change log"
    );
    assert_eq!(resyncs, 1.0, "one resync, never started over");
    assert_eq!(sent.len(), PODS, "every pod's key");
    for (name, n) in &sent {
        let limit = if touched.contains(name) { 2 } else { 1 };
        assert!(*n <= limit, "{name} sent {n} times");
    }
    Ok(())
}

/// The token of the next event that carries one.
async fn wait_token(events: &mut Streaming<KeyEvent>) -> ResumeToken {
    loop {
        let event = next(events, Duration::from_secs(10))
            .await
            .expect("a PROGRESS with the token within 10 s of the acks");
        if let Some(token) = event.token {
            return token;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_carry_the_object_a_get_returns_when_asked() -> anyhow::Result<()> {
    let mut fx = Fixture::new("keys-objects", drop_managed_fields()).await?;
    fx.create_pods(5).await?;
    fx.wait_caught_up().await?;
    let fields = vec!["metadata.labels".to_string()];
    let get = |api: CacheClient<Channel>, ns: String, name: String, fields: Vec<String>| async move {
        let request = GetRequest {
            resource: "pods".into(),
            namespace: ns,
            name,
            fields,
            ..Default::default()
        };
        anyhow::Ok(api.clone().get(request).await?.into_inner().object.unwrap())
    };

    // Without send_objects, keys alone.
    let (mut events, acker) = watch_keys(&mut fx.api.clone(), fx.subscription()).await?;
    let plain = loop {
        let event = next(&mut events, Duration::from_secs(60)).await.unwrap();
        if event.r#type() == KeyEventType::Key {
            acker.ack_event(&event);
            break event;
        }
    };
    assert_eq!(plain.object, None, "no object unless asked");
    drop(events);

    let mut sub = fx.subscription();
    sub.send_objects = true;
    sub.fields = fields.clone();
    let (mut events, acker) = watch_keys(&mut fx.api.clone(), sub).await?;
    // The resync: each key with the object a Get with the same fields returns.
    let mut resynced = 0;
    loop {
        let event = next(&mut events, Duration::from_secs(60)).await.unwrap();
        match event.r#type() {
            KeyEventType::ResyncEnd => break,
            KeyEventType::Key => {
                let key = event.key.clone().unwrap();
                let object = event.object.clone().expect("a key with its object");
                let want = get(fx.api.clone(), key.namespace, key.name, fields.clone()).await?;
                assert_eq!(object, want, "the key's object is what a Get returns");
                let json: Value = serde_json::from_slice(&object.json)?;
                assert_eq!(json["metadata"]["labels"]["app"], "keys");
                assert!(json.get("spec").is_none(), "masked by fields: {json}");
                acker.ack_event(&event);
                resynced += 1;
            }
            _ => {}
        }
    }
    assert_eq!(resynced, 5);

    // A change: the key comes with the changed object, at the apiserver's resourceVersion.
    fx.touch(&["p1".to_string()], 7).await?;
    let (labels, rv) = fx.apiserver_state().await?.remove("p1").unwrap();
    let event = loop {
        let event = next(&mut events, Duration::from_secs(60)).await.unwrap();
        if event.r#type() == KeyEventType::Key {
            acker.ack_event(&event);
            break event;
        }
    };
    assert_eq!(event.key.as_ref().unwrap().name, "p1");
    let object = event.object.expect("the changed object");
    assert_eq!(object.resource_version, rv);
    let json: Value = serde_json::from_slice(&object.json)?;
    assert_eq!(json["metadata"]["labels"], labels);

    // A deletion: the key, marked deleted, with no object (the apiserver may first set the
    // deletionTimestamp: that update's key comes with its object).
    fx.pods()
        .delete("p2", &kube::api::DeleteParams::default().grace_period(0))
        .await?;
    let event = loop {
        let event = next(&mut events, Duration::from_secs(60)).await.unwrap();
        if event.r#type() != KeyEventType::Key {
            continue;
        }
        assert_eq!(event.key.as_ref().unwrap().name, "p2");
        if event.deleted {
            break event;
        }
        acker.ack_event(&event);
    };
    assert_eq!(event.object, None, "a deletion carries no object");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_subscriptions_name_the_field() -> anyhow::Result<()> {
    let fx = Fixture::new(
        "keys-invalid",
        Transform::default().drop(["metadata.ownerReferences"]),
    )
    .await?;
    let cases = [
        (
            KeysSubscription {
                debounce_millis: 1_000,
                max_delay_millis: 10,
                ..fx.subscription()
            },
            "subscribe.max_delay_millis",
        ),
        (
            KeysSubscription {
                label_selector: "a in (".into(),
                ..fx.subscription()
            },
            "subscribe.label_selector",
        ),
        (
            KeysSubscription {
                owner: Some(OwnerMapping {
                    kind: "ReplicaSet".into(),
                    ..Default::default()
                }),
                ..fx.subscription()
            },
            "subscribe.owner: the transform of resource pods",
        ),
        (
            KeysSubscription {
                owner: Some(OwnerMapping::default()),
                ..fx.subscription()
            },
            "subscribe.owner.kind",
        ),
        (
            KeysSubscription {
                fields: vec!["metadata.labels".into()],
                ..fx.subscription()
            },
            "subscribe.fields: masks the objects that send_objects asks for",
        ),
        (
            KeysSubscription {
                omit_labels: true,
                ..fx.subscription()
            },
            "subscribe.omit_labels: applies to the objects that send_objects asks for",
        ),
        (
            KeysSubscription {
                send_objects: true,
                fields: vec!["metadata.labels".into(), "spec..x".into()],
                ..fx.subscription()
            },
            "subscribe.fields[1]",
        ),
    ];
    for (sub, field) in cases {
        let Err(status) = watch_keys(&mut fx.api.clone(), sub).await else {
            panic!("{field}: the subscription was accepted");
        };
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().starts_with(field),
            "{field}: {}",
            status.message()
        );
    }
    Ok(())
}
