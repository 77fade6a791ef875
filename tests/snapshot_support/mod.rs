//! What the warm-restart tests share (tests/snapshot.rs, tests/snapshot_pages.rs): a namespace
//! of pods cached by the real binary with snapshots, on the shared or a private control plane;
//! what informerd and the apiserver hold; a client's token, and the changes a resumed watch
//! gets, against the apiserver's own account of them.
// Each test crate uses some of it.
#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use futures::TryStreamExt;
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, ListRequest, ResumeToken,
    ScopeStatus, WatchRequest,
};
use informerd_client as client;
use informerd_testkit::{
    create_pods, pod, wait_synced, ControlPlane, Fixture, PrivateControlPlane, Resource, Sidecar,
    SidecarConfig, Snapshot,
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams},
    Api, Client,
};
use serde_json::json;
use tonic::transport::Channel;

pub const BIN: &str = env!("CARGO_BIN_EXE_informerd");
pub const DEADLINE: Duration = Duration::from_secs(120);
pub const PODS: usize = 12;

/// namespace/name → resourceVersion.
pub type State = BTreeMap<String, String>;

/// A namespace of its own with `PODS` pods, and a sidecar caching its pods with snapshots in a
/// directory of its own; on the shared control plane, or on a private one a test may restart.
pub struct Setup {
    /// Owns the namespace (deleted on drop, before a private control plane goes).
    pub fixture: Fixture,
    pub private: Option<PrivateControlPlane>,
    pub client: Client,
    pub ns: String,
    pub dir: PathBuf,
    pub sidecar: Sidecar,
}

pub fn snapshot_file(dir: &Path) -> PathBuf {
    informerd::snapshot::path(dir, "pods")
}

impl Setup {
    pub async fn new(base: &str) -> anyhow::Result<Setup> {
        Self::on(None, base, PODS).await
    }

    /// On `private`, or the shared control plane, with `pods` pods.
    pub async fn on(
        private: Option<PrivateControlPlane>,
        base: &str,
        pods: usize,
    ) -> anyhow::Result<Setup> {
        let cp = plane(private.as_ref());
        let fixture = Fixture::on(cp, base).await?;
        let client = fixture.kube().clone();
        let ns = fixture.ns().to_owned();
        // A young (or just restarted) control plane's serviceaccount controller may not have
        // made it yet, and pods are refused until it has (create_pods waits for it).
        create_pods(&client, &ns, pods, &[("app", "snap")], true).await?;
        let dir = std::env::temp_dir().join(format!("informerd-snapshots-{ns}"));
        let _ = std::fs::remove_dir_all(&dir);
        let sidecar = start(cp, &dir, |s| s.interval("2s"), &ns, |r| r)?;
        let setup = Setup {
            fixture,
            private,
            client,
            ns,
            dir,
            sidecar,
        };
        setup.wait_synced().await?;
        Ok(setup)
    }

    pub fn cp(&self) -> &ControlPlane {
        plane(self.private.as_ref())
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub async fn cache(&self) -> anyhow::Result<CacheClient<Channel>> {
        Ok(client::connect(&self.sidecar.socket().display().to_string()).await?)
    }

    /// The pods scope's status, once every scope is synced (the watch resumed or listed).
    pub async fn wait_synced(&self) -> anyhow::Result<ScopeStatus> {
        let status = wait_synced(&mut self.cache().await?)
            .await
            .map_err(|e| anyhow::anyhow!("{e}\n{}", self.sidecar.plain_log()))?;
        Ok(status.resources[0].scopes[0].clone())
    }

    /// What the apiserver holds in the namespace.
    pub async fn truth(&self) -> anyhow::Result<State> {
        let list = self.pods().list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .map(|p| {
                let m = p.metadata;
                let key = format!("{}/{}", self.ns, m.name.unwrap_or_default());
                (key, m.resource_version.unwrap_or_default())
            })
            .collect())
    }

    /// What informerd lists, with the epoch and revision of the list.
    pub async fn listed(&self) -> anyhow::Result<(State, u64, u64)> {
        let request = ListRequest {
            resource: "pods".into(),
            ..Default::default()
        };
        let mut stream = self.cache().await?.list(request).await?.into_inner();
        let mut state = State::new();
        while let Some(chunk) = stream.message().await? {
            for o in chunk.objects {
                state.insert(format!("{}/{}", o.namespace, o.name), o.resource_version);
            }
            if chunk.last {
                return Ok((state, chunk.epoch, chunk.revision));
            }
        }
        anyhow::bail!("the list ended without its last chunk")
    }

    /// Waits until informerd lists what the apiserver holds.
    pub async fn converge(&self) -> anyhow::Result<State> {
        let started = Instant::now();
        loop {
            let truth = self.truth().await?;
            let (listed, ..) = self.listed().await?;
            if listed == truth {
                return Ok(truth);
            }
            anyhow::ensure!(
                started.elapsed() < DEADLINE,
                "informerd lists {listed:?}, the apiserver {truth:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the sidecar with SIGTERM; it writes its snapshot before exiting.
    pub fn terminate(&mut self) -> anyhow::Result<()> {
        let clean = |log: &str| {
            let written = |l: &&str| l.contains("snapshot written") && l.contains("clean=true");
            log.lines().filter(written).count()
        };
        let before = clean(&self.sidecar.plain_log());
        let status = self.sidecar.terminate()?;
        let log = self.sidecar.plain_log();
        anyhow::ensure!(status.success(), "exit {status}: {log}");
        anyhow::ensure!(
            clean(&log) == before + 1,
            "no clean snapshot at SIGTERM: {log}"
        );
        Ok(())
    }

    /// The apiserver's resourceVersion now: where its own watch of what changes next starts.
    pub async fn apiserver_now(&self) -> anyhow::Result<String> {
        let at = self.pods().list(&ListParams::default()).await?.metadata;
        Ok(at.resource_version.unwrap_or_default())
    }

    /// Checks that the scope resumed its watch from the snapshot, without a list.
    pub async fn assert_resumed_without_a_list(&self) -> anyhow::Result<()> {
        let scope = self.wait_synced().await?;
        let log = self.sidecar.plain_log();
        assert_eq!(scope.state, "Synced");
        assert_eq!(
            scope.listed, 0,
            "no list after a warm restart: {scope:?}\n{log}"
        );
        assert_eq!(scope.relists, 0, "{scope:?}");
        assert!(log.contains("watch resumed from the snapshot"), "{log}");
        Ok(())
    }

    /// Once informerd holds what the apiserver does, checks that a client resuming with
    /// `token` from `before` gets exactly what the apiserver's own watch from `at` reports
    /// (with the deletions' own MODIFIED events, if it sent any), which includes `made`.
    pub async fn assert_exact_changes(
        &self,
        token: ResumeToken,
        before: State,
        at: &str,
        made: &[String],
    ) -> anyhow::Result<State> {
        let truth = self.converge().await?;
        let changes = resume(self, token, before.clone(), &truth).await?;
        let expected = apiserver_changes(self, at, before, &truth).await?;
        assert!(made.iter().all(|c| expected.contains(c)), "{expected:?}");
        assert_eq!(
            changes, expected,
            "exactly the changes made while informerd was down"
        );
        Ok(truth)
    }

    /// SIGTERM; the changes of `round` while informerd is down; then etcd moves on and is
    /// compacted and the private kube-apiserver restarted (as it runs), so that its new watch
    /// cache begins after the snapshot's resourceVersion; informerd starts again and its resume
    /// gets 410 Gone. Returns the changes made.
    pub async fn restart_into_a_410(&mut self, round: usize) -> anyhow::Result<Vec<String>> {
        self.terminate()?;
        let made = change_while_down(self, round).await?;
        let private = self.private.as_ref().expect("a private control plane");
        let compact = async || private.control_plane().advance_and_compact_etcd().await;
        private
            .kill_and_restart_apiserver(async || compact().await.map(drop))
            .await?;
        self.sidecar.restart()?;
        Ok(made)
    }

    /// After [`Setup::restart_into_a_410`]: checks that the scope relisted, and that a client
    /// resuming with `token` from `before` gets exactly `made`, DELETED for what vanished
    /// included (the relist's comparison with the snapshot). Returns the scope's status.
    pub async fn assert_relisted(
        &self,
        token: ResumeToken,
        before: State,
        made: &[String],
    ) -> anyhow::Result<ScopeStatus> {
        let scope = self.wait_synced().await?;
        let log = self.sidecar.plain_log();
        assert!(log.contains("too old resource version"), "{log}");
        assert!(
            scope.relists >= 1,
            "a relist after 410 Gone: {scope:?}\n{log}"
        );
        let truth = self.converge().await?;
        assert_eq!(scope.listed, truth.len() as u64, "{scope:?}");
        let changes = resume(self, token, before, &truth).await?;
        assert_eq!(
            changes, made,
            "the changes, DELETED for what vanished included"
        );
        Ok(scope)
    }
}

impl Drop for Setup {
    /// The sidecar stopped, its snapshots removed; the fixture deletes the namespace.
    fn drop(&mut self) {
        self.sidecar.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The private control plane, or else the shared one.
pub fn plane(private: Option<&PrivateControlPlane>) -> &ControlPlane {
    match private {
        Some(p) => p.control_plane(),
        None => ControlPlane::get(),
    }
}

/// A sidecar caching `ns`'s pods (`pods` edits the resource) with snapshots in `dir`
/// (`snapshot` edits the section).
pub fn start(
    cp: &ControlPlane,
    dir: &Path,
    snapshot: impl FnOnce(Snapshot) -> Snapshot,
    ns: &str,
    pods: impl FnOnce(Resource) -> Resource,
) -> anyhow::Result<Sidecar> {
    let config = SidecarConfig::new()
        .snapshot(dir, snapshot)
        .resource(pods(Resource::pods().namespaces([ns])));
    Ok(Sidecar::start(Path::new(BIN), cp, &config)?)
}

/// Creates pod `name` (label `app: snap`).
pub async fn create_pod(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    pod(name).label("app", "snap").apply(client, ns).await?;
    Ok(())
}

/// Deletes a pod at once (no kubelet confirms deletions here).
pub async fn delete_pod(pods: &Api<Pod>, name: &str) -> anyhow::Result<()> {
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
}

/// A client's watch from the initial state: its token at SYNCED.
pub async fn token(setup: &Setup) -> anyhow::Result<ResumeToken> {
    let request = WatchRequest {
        resource: "pods".into(),
        start: Some(Start::SendInitialState(true)),
        ..Default::default()
    };
    let mut stream = setup.cache().await?.watch(request).await?.into_inner();
    while let Some(event) = stream.message().await? {
        if event.r#type == EventType::Synced as i32 {
            return Ok(ResumeToken {
                epoch: event.epoch,
                revision: event.revision,
            });
        }
    }
    anyhow::bail!("the watch ended before SYNCED")
}

/// Resumes a watch with `token` and folds its changes into `state` until it equals `truth`;
/// returns the changes as `TYPE name`, sorted.
pub async fn resume(
    setup: &Setup,
    token: ResumeToken,
    mut state: State,
    truth: &State,
) -> anyhow::Result<Vec<String>> {
    let request = WatchRequest {
        resource: "pods".into(),
        start: Some(Start::Since(token)),
        ..Default::default()
    };
    let mut stream = setup.cache().await?.watch(request).await?.into_inner();
    let mut changes = Vec::new();
    while state != *truth {
        let event = tokio::time::timeout(DEADLINE, stream.message())
            .await
            .map_err(|_| anyhow::anyhow!("no event; folded {state:?}, want {truth:?}"))??
            .ok_or_else(|| anyhow::anyhow!("the watch ended"))?;
        let kind = EventType::try_from(event.r#type)?;
        let Some(o) = event.object else { continue };
        let key = format!("{}/{}", o.namespace, o.name);
        match kind {
            EventType::Added | EventType::Modified => {
                state.insert(key, o.resource_version);
            }
            EventType::Deleted => {
                state.remove(&key);
            }
            _ => continue,
        }
        changes.push(format!("{} {}", kind.as_str_name(), o.name));
    }
    changes.sort();
    Ok(changes)
}

/// What the apiserver's own watch from `rv` says changed in the namespace, folded into
/// `state` until it equals `truth`: `TYPE name`, sorted.
pub async fn apiserver_changes(
    setup: &Setup,
    rv: &str,
    mut state: State,
    truth: &State,
) -> anyhow::Result<Vec<String>> {
    let stream = setup.pods().watch(&WatchParams::default(), rv).await?;
    futures::pin_mut!(stream);
    let mut changes = Vec::new();
    while state != *truth {
        let event = tokio::time::timeout(DEADLINE, stream.try_next())
            .await
            .map_err(|_| anyhow::anyhow!("no event; folded {state:?}, want {truth:?}"))??
            .ok_or_else(|| anyhow::anyhow!("the apiserver's watch ended"))?;
        let (kind, pod) = match event {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            _ => continue,
        };
        let name = pod.metadata.name.unwrap_or_default();
        let key = format!("{}/{name}", setup.ns);
        if kind == "DELETED" {
            state.remove(&key);
        } else {
            state.insert(key, pod.metadata.resource_version.unwrap_or_default());
        }
        changes.push(format!("{kind} {name}"));
    }
    changes.sort();
    Ok(changes)
}

/// The changes made while informerd is down: two pods created, one relabelled, two deleted;
/// each `round` (0, 1, ...) changes other pods.
pub async fn change_while_down(setup: &Setup, round: usize) -> anyhow::Result<Vec<String>> {
    let pods = setup.pods();
    let [a, b] = ["a", "b"].map(|x| format!("new-{x}{round}"));
    let [relabelled, gone1, gone2] = [0, 1, 2].map(|i| format!("p{}", 3 * round + i));
    create_pod(&setup.client, &setup.ns, &a).await?;
    create_pod(&setup.client, &setup.ns, &b).await?;
    let patch = json!({"metadata": {"labels": {"app": "relabelled"}}});
    pods.patch(&relabelled, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    delete_pod(&pods, &gone1).await?;
    delete_pod(&pods, &gone2).await?;
    let mut made = vec![
        format!("ADDED {a}"),
        format!("ADDED {b}"),
        format!("DELETED {gone1}"),
        format!("DELETED {gone2}"),
        format!("MODIFIED {relabelled}"),
    ];
    made.sort();
    Ok(made)
}

/// Waits until the sidecar's log has `line`; returns the log.
pub fn wait_log(sidecar: &Sidecar, line: &str) -> anyhow::Result<String> {
    let started = Instant::now();
    loop {
        let log = sidecar.plain_log();
        if log.contains(line) {
            return Ok(log);
        }
        anyhow::ensure!(started.elapsed() < DEADLINE, "no {line:?} in {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
