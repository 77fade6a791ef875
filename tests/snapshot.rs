//! Warm restarts against the real control plane, through the real binary: a restart after
//! SIGTERM serves the snapshot and resumes its watch without listing, and a client resumes
//! with its token and gets exactly what changed meanwhile; a 410 Gone on resume relists and
//! emits DELETED for what vanished; corrupt, truncated, foreign and too-old snapshots are
//! refused and the cache lists; SIGKILL in the middle of a snapshot write leaves the previous
//! snapshot usable.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use futures::TryStreamExt;
use informerd::{
    client,
    proto::{
        cache_client::CacheClient, watch_request::Start, EventType, ListRequest, ResumeToken,
        ScopeStatus, StatusRequest, WatchRequest,
    },
};
use informerd_testkit::{
    delete_namespace, unique_namespace, ControlPlane, PrivateControlPlane, Sidecar,
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    Api, Client,
};
use serde_json::json;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const DEADLINE: Duration = Duration::from_secs(120);
const PODS: usize = 12;

/// namespace/name → resourceVersion.
type State = BTreeMap<String, String>;

/// A namespace of its own with `PODS` pods, and a sidecar caching its pods with snapshots in a
/// directory of its own; on the shared control plane, or on a private one a test may restart.
struct Setup {
    private: Option<PrivateControlPlane>,
    client: Client,
    ns: String,
    dir: PathBuf,
    sidecar: Sidecar,
}

fn resources(ns: &str, extra: &str) -> String {
    format!("- name: pods\n  apiVersion: v1\n  kind: Pod\n  namespaces: [{ns}]\n{extra}")
}

fn snapshot_yaml(dir: &Path, rest: &str) -> String {
    format!("snapshot:\n  directory: {}\n{rest}", dir.display())
}

fn snapshot_file(dir: &Path) -> PathBuf {
    informerd::snapshot::path(dir, "pods")
}

impl Setup {
    async fn new(base: &str) -> anyhow::Result<Setup> {
        Self::on(None, base).await
    }

    async fn on(private: Option<PrivateControlPlane>, base: &str) -> anyhow::Result<Setup> {
        let cp = plane(private.as_ref());
        let client = cp.client().await?;
        let ns = unique_namespace(&client, base).await?;
        for i in 0..PODS {
            create_pod(&client, &ns, &format!("p{i}")).await?;
        }
        let dir = std::env::temp_dir().join(format!("informerd-snapshots-{ns}"));
        let _ = std::fs::remove_dir_all(&dir);
        let sidecar = start(cp, &dir, "  interval: 2s\n", &ns, "")?;
        let setup = Setup {
            private,
            client,
            ns,
            dir,
            sidecar,
        };
        setup.wait_synced().await?;
        Ok(setup)
    }

    fn cp(&self) -> &ControlPlane {
        plane(self.private.as_ref())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn cache(&self) -> anyhow::Result<CacheClient<Channel>> {
        Ok(client::connect(&self.sidecar.socket().display().to_string()).await?)
    }

    /// The pods scope's status, once every scope is synced (the watch resumed or listed).
    async fn wait_synced(&self) -> anyhow::Result<ScopeStatus> {
        let started = Instant::now();
        loop {
            let status = self
                .cache()
                .await?
                .status(StatusRequest::default())
                .await?
                .into_inner();
            if status.synced {
                return Ok(status.resources[0].scopes[0].clone());
            }
            anyhow::ensure!(
                started.elapsed() < DEADLINE,
                "not synced: {status:?}\n{}",
                plain_log(&self.sidecar)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What the apiserver holds in the namespace.
    async fn truth(&self) -> anyhow::Result<State> {
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
    async fn listed(&self) -> anyhow::Result<(State, u64, u64)> {
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
    async fn converge(&self) -> anyhow::Result<State> {
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
    fn terminate(&mut self) -> anyhow::Result<()> {
        let clean = |log: &str| {
            let written = |l: &&str| l.contains("snapshot written") && l.contains("clean=true");
            log.lines().filter(written).count()
        };
        let before = clean(&plain_log(&self.sidecar));
        let status = self.sidecar.terminate()?;
        let log = plain_log(&self.sidecar);
        anyhow::ensure!(status.success(), "exit {status}: {log}");
        anyhow::ensure!(
            clean(&log) == before + 1,
            "no clean snapshot at SIGTERM: {log}"
        );
        Ok(())
    }

    async fn cleanup(self) {
        let _ = delete_namespace(&self.client, &self.ns).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The private control plane, or else the shared one.
fn plane(private: Option<&PrivateControlPlane>) -> &ControlPlane {
    match private {
        Some(p) => p.control_plane(),
        None => ControlPlane::get(),
    }
}

/// A sidecar caching `ns`'s pods with snapshots in `dir`.
fn start(
    cp: &ControlPlane,
    dir: &Path,
    snapshot: &str,
    ns: &str,
    extra: &str,
) -> anyhow::Result<Sidecar> {
    Ok(Sidecar::start_with(
        Path::new(BIN),
        cp,
        &snapshot_yaml(dir, snapshot),
        &resources(ns, extra),
    )?)
}

async fn create_pod(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "snap"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))?;
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await?;
    Ok(())
}

/// Deletes a pod at once (no kubelet confirms deletions here).
async fn delete_pod(pods: &Api<Pod>, name: &str) -> anyhow::Result<()> {
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
}

/// A client's watch from the initial state: its token at SYNCED.
async fn token(setup: &Setup) -> anyhow::Result<ResumeToken> {
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
async fn resume(
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
async fn apiserver_changes(
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

/// The changes made while informerd is down: two pods created, one relabelled, two deleted.
async fn change_while_down(setup: &Setup) -> anyhow::Result<Vec<String>> {
    let pods = setup.pods();
    create_pod(&setup.client, &setup.ns, "new-a").await?;
    create_pod(&setup.client, &setup.ns, "new-b").await?;
    let patch = json!({"metadata": {"labels": {"app": "relabelled"}}});
    pods.patch("p0", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    delete_pod(&pods, "p1").await?;
    delete_pod(&pods, "p2").await?;
    Ok(vec![
        "ADDED new-a".into(),
        "ADDED new-b".into(),
        "DELETED p1".into(),
        "DELETED p2".into(),
        "MODIFIED p0".into(),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_sigterm_resumes_without_a_list_and_clients_keep_their_tokens(
) -> anyhow::Result<()> {
    let mut setup = Setup::new("snap-warm").await?;
    let before = setup.converge().await?;
    let at = setup.pods().list(&ListParams::default()).await?.metadata;
    let at = at.resource_version.unwrap_or_default();
    let token = token(&setup).await?;
    let (_, epoch, revision) = setup.listed().await?;
    assert_eq!((token.epoch, token.revision), (epoch, revision));
    setup.terminate()?;
    assert!(snapshot_file(&setup.dir).exists());
    let made = change_while_down(&setup).await?;

    setup.sidecar.restart()?;
    // Served at once, from the snapshot, in the same epoch.
    let (_, served_epoch, served_revision) = setup.listed().await?;
    assert_eq!(served_epoch, epoch, "the epoch is kept");
    assert!(served_revision >= revision);
    let scope = setup.wait_synced().await?;
    assert_eq!(scope.state, "Synced");
    assert_eq!(scope.listed, 0, "no list after a warm restart: {scope:?}");
    assert_eq!(scope.relists, 0, "{scope:?}");
    let log = plain_log(&setup.sidecar);
    assert!(
        log.contains("restored the cache from its snapshot"),
        "{log}"
    );
    assert!(log.contains("watch resumed from the snapshot"), "{log}");

    let truth = setup.converge().await?;
    let changes = resume(&setup, token, before.clone(), &truth).await?;
    // The apiserver's own account: with the deletions' own MODIFIED events, if it sent any.
    let expected = apiserver_changes(&setup, &at, before, &truth).await?;
    assert!(made.iter().all(|c| expected.contains(c)), "{expected:?}");
    assert_eq!(
        changes, expected,
        "exactly the changes made while informerd was down"
    );
    setup.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_410_on_resume_relists_and_emits_deleted_for_what_vanished() -> anyhow::Result<()> {
    // Decision: a control plane of the test's own, whose kube-apiserver is restarted while
    // informerd is down, after etcd has moved on and compacted: its new watch cache begins
    // after the snapshot's resourceVersion, so the resume gets 410 Gone for certain, as after
    // a control-plane upgrade during a rollout. The shared apiserver cannot be relied on for
    // it: a watch cache that has dropped no event since it started (a young cluster, as in
    // CI) reaches back to the cluster's first resourceVersions, and answers such a resume
    // with the changes instead.
    let private = tokio::task::block_in_place(PrivateControlPlane::start)?;
    let mut setup = Setup::on(Some(private), "snap-gone").await?;
    let before = setup.converge().await?;
    let token = token(&setup).await?;
    setup.terminate()?;
    let expected = change_while_down(&setup).await?;
    let private = setup.private.as_ref().expect("a private control plane");
    let compact = async || private.control_plane().advance_and_compact_etcd().await;
    private
        .kill_and_restart_apiserver(async || compact().await.map(drop))
        .await?;

    setup.sidecar.restart()?;
    let scope = setup.wait_synced().await?;
    let log = plain_log(&setup.sidecar);
    assert!(
        scope.relists >= 1,
        "a relist, after 410 Gone: {scope:?}\n{log}"
    );
    let truth = setup.converge().await?;
    assert_eq!(scope.listed, truth.len() as u64, "{scope:?}");
    assert!(log.contains("too old resource version"), "{log}");
    // Kept epoch: the client resumes, and the relist's comparison with the snapshot gives it
    // DELETED for what vanished, and only the real changes.
    let changes = resume(&setup, token, before, &truth).await?;
    assert_eq!(changes, expected);
    setup.cleanup().await;
    Ok(())
}

/// Restarts informerd on `sidecar`'s snapshot damaged by `damage`, and checks that it is
/// refused for `why` and the cache lists everything from the apiserver.
async fn refused(
    setup: &mut Setup,
    good: &[u8],
    damage: impl FnOnce(&mut Vec<u8>),
    why: &str,
    count: &mut usize,
) -> anyhow::Result<()> {
    let mut bytes = good.to_vec();
    damage(&mut bytes);
    std::fs::write(snapshot_file(&setup.dir), bytes)?;
    setup.sidecar.restart()?;
    let scope = setup.wait_synced().await?;
    let log = plain_log(&setup.sidecar);
    let ignored: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("snapshot ignored"))
        .collect();
    assert_eq!(ignored.len(), *count + 1, "{why}: {log}");
    assert!(ignored[*count].contains(why), "{why}: {log}");
    *count += 1;
    assert_eq!(
        scope.listed, PODS as u64,
        "listed from the apiserver: {scope:?}"
    );
    setup.converge().await?;
    setup.terminate()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_truncated_foreign_and_old_snapshots_are_refused_and_the_cache_lists(
) -> anyhow::Result<()> {
    let mut setup = Setup::new("snap-bad").await?;
    setup.converge().await?;
    setup.terminate()?;
    let good = std::fs::read(snapshot_file(&setup.dir))?;

    let flip = |b: &mut Vec<u8>| {
        let i = b.len() / 2;
        b[i] ^= 1;
    };
    let n = &mut 0;
    refused(&mut setup, &good, flip, "corrupt: checksum", n).await?;
    let third = |b: &mut Vec<u8>| b.truncate(b.len() / 3);
    refused(&mut setup, &good, third, "corrupt: checksum", n).await?;
    refused(&mut setup, &good, |b| b.truncate(20), "truncated", n).await?;
    refused(&mut setup, &good, |b| b[19] = 7, "format version 7", n).await?;

    // Another configuration (a label selector), then too old for maxAge.
    std::fs::write(snapshot_file(&setup.dir), &good)?;
    let mut other = start(
        setup.cp(),
        &setup.dir,
        "",
        &setup.ns,
        "  labelSelector: app=snap\n",
    )?;
    let log = wait_log(&other, "snapshot ignored")?;
    assert!(log.contains("taken with another configuration"), "{log}");
    other.kill();
    std::fs::write(snapshot_file(&setup.dir), &good)?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut old = start(setup.cp(), &setup.dir, "  maxAge: 1s\n", &setup.ns, "")?;
    let log = wait_log(&old, "snapshot ignored")?;
    assert!(log.contains("more than snapshot.maxAge"), "{log}");
    old.kill();

    // And the good one is resumed from.
    std::fs::write(snapshot_file(&setup.dir), &good)?;
    setup.sidecar.restart()?;
    let scope = setup.wait_synced().await?;
    assert_eq!(scope.listed, 0, "{scope:?}");
    setup.cleanup().await;
    Ok(())
}

/// The sidecar's log without its colours.
fn plain_log(sidecar: &Sidecar) -> String {
    let log = sidecar.log();
    let mut out = String::with_capacity(log.len());
    let mut rest = log.as_str();
    while let Some(i) = rest.find('\x1b') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        rest = rest.find('m').map_or("", |m| &rest[m + 1..]);
    }
    out.push_str(rest);
    out
}

/// Waits until the sidecar's log has `line`; returns the log.
fn wait_log(sidecar: &Sidecar, line: &str) -> anyhow::Result<String> {
    let started = Instant::now();
    loop {
        let log = plain_log(sidecar);
        if log.contains(line) {
            return Ok(log);
        }
        anyhow::ensure!(started.elapsed() < DEADLINE, "no {line:?} in {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_snapshot_write_leaves_the_previous_snapshot_usable() -> anyhow::Result<()>
{
    let mut setup = Setup::new("snap-kill").await?;
    setup.converge().await?;
    setup.terminate()?;
    let previous = std::fs::read(snapshot_file(&setup.dir))?;

    // The next start pauses its periodic write (every 2 s) before the rename; killed there.
    setup.sidecar.set_env(informerd::snapshot::PAUSE_ENV, "600");
    setup.sidecar.restart()?;
    wait_log(&setup.sidecar, "pausing before the rename")?;
    create_pod(&setup.client, &setup.ns, "after-the-kill").await?;
    setup.sidecar.kill();
    let mut temp = snapshot_file(&setup.dir);
    temp.set_extension("snapshot.tmp");
    assert!(temp.exists(), "the write was under way");

    // The previous snapshot (set aside when it was resumed from, being a clean one) is what
    // the next start restores; it resumes its watch from it, under a new epoch.
    let mut resumed = snapshot_file(&setup.dir);
    resumed.set_extension("snapshot.resumed");
    assert_eq!(std::fs::read(&resumed)?, previous);
    setup.sidecar.restart()?;
    let scope = setup.wait_synced().await?;
    let log = plain_log(&setup.sidecar);
    let restored: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("restored the cache from its snapshot"))
        .collect();
    assert_eq!(restored.len(), 2, "{log}");
    assert!(restored[1].contains(&format!("objects={PODS}")), "{log}");
    assert!(restored[1].contains("clean=false"), "{log}");
    assert_eq!(scope.listed, 0, "resumed, not listed: {scope:?}");
    let truth = setup.converge().await?;
    assert!(truth.contains_key(&format!("{}/after-the-kill", setup.ns)));
    setup.cleanup().await;
    Ok(())
}
