//! A reconnect storm, small (issue 35): 50 clients, half Watch and half WatchKeys, each
//! holding its own view of 200 pods, all reconnect at once after a cold restart of the sidecar,
//! a warm restart from its snapshot, and a cut of every connection, while writes continue on
//! the apiserver. After each storm every client's view must equal the apiserver's pods, the
//! sidecar must still run, and the clients must have resumed as the API promises: a cold
//! restart (another epoch) makes every client start again from nothing; a warm restart lets
//! every Watch client resume with its token, and every client once none has keys in flight; a
//! cut lets every client resume with its token.
//!
//! `benches/storm.rs` is the large form (300 clients, 10,000 pods and more, timed); both use
//! the same clients (`benches/storm/client.rs`).

#[path = "../benches/storm/client.rs"]
mod client;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use client::{Control, Kind, Progress, Spec, View};
use informerd_testkit::{create_pods, pod, wait_synced, Fixture, Resource, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const PODS: usize = 200;
const CLIENTS: usize = 50;
/// Only so that a broken run ends: every wait ends as soon as its condition holds.
const DEADLINE: Duration = Duration::from_secs(180);

/// What happens to the clients' connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Storm {
    /// SIGTERM, the snapshot removed, start again: another epoch.
    Cold,
    /// SIGTERM (a snapshot is written), start again from it: the same epoch.
    Warm,
    /// A warm restart with no writes going on and every client caught up: every client,
    /// WatchKeys too, resumes with its token.
    WarmIdle,
    /// Every client's connection dropped; the sidecar keeps running.
    Cut,
}

/// Writes to the namespace's pods, one after the other, until stopped: relabels, and a pod
/// created and another deleted every tenth write, so that the clients have changes, additions
/// and deletions to catch up with.
struct Writer {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<anyhow::Result<u64>>,
}

impl Writer {
    fn start(kube: kube::Client, ns: String, round: usize) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let pods: Api<Pod> = Api::namespaced(kube.clone(), &ns);
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let i = n as usize;
                let patch = json!({"metadata": {"labels": {"storm": format!("{round}-{n}")}}});
                let name = format!("p{}", i % PODS);
                pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                if n.is_multiple_of(10) {
                    let extra = format!("extra-{round}-{n}");
                    pod(&extra).label("app", "storm").apply(&kube, &ns).await?;
                    if n > 0 {
                        let old = format!("extra-{round}-{}", n - 10);
                        pods.delete(&old, &DeleteParams::default().grace_period(0))
                            .await?;
                    }
                }
                n += 1;
                // A pace, not a synchronisation: the shared control plane serves other tests.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(n)
        });
        Writer { stop, task }
    }

    /// Stops it; the number of writes it made.
    async fn stop(self) -> anyhow::Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await?
    }
}

/// The apiserver's pods of the namespace.
async fn truth(pods: &Api<Pod>, ns: &str) -> anyhow::Result<View> {
    let list = pods.list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|p| {
            let m = p.metadata;
            (
                format!("{ns}/{}", m.name.unwrap_or_default()),
                m.resource_version.unwrap_or_default(),
            )
        })
        .collect())
}

/// Waits until every client's view equals the apiserver's pods (no writes run).
async fn wait_all_current(
    pods: &Api<Pod>,
    ns: &str,
    clients: &[(Kind, Arc<Mutex<Progress>>)],
    what: &str,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let want = truth(pods, ns).await?;
        let behind: Vec<(usize, String)> = clients
            .iter()
            .enumerate()
            .filter_map(|(i, (_, p))| {
                let p = p.lock().unwrap();
                (p.view != want).then(|| (i, p.last_end.clone()))
            })
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < DEADLINE,
            "{what}: {} clients of {CLIENTS} never equalled the apiserver's {} pods; \
             (client, why its last session ended): {behind:?}",
            behind.len(),
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls `check` until it holds.
async fn wait_until(what: &str, check: impl Fn() -> bool) -> anyhow::Result<()> {
    let started = Instant::now();
    while !check() {
        anyhow::ensure!(started.elapsed() < DEADLINE, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Each client's (sessions, relists) now.
fn counts(clients: &[(Kind, Arc<Mutex<Progress>>)]) -> Vec<(u64, u64)> {
    clients
        .iter()
        .map(|(_, p)| {
            let p = p.lock().unwrap();
            (p.sessions, p.relists)
        })
        .collect()
}

/// Whether the process runs (and is not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s[s.rfind(')')? + 2..].chars().next()? != 'Z'))
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_clients_reconnecting_at_once_all_end_equal_to_the_apiserver() -> anyhow::Result<()> {
    let mut fixture = Fixture::new("storm").await?;
    let ns = fixture.ns().to_owned();
    let kube = fixture.kube().clone();
    let pods = fixture.pods();
    create_pods(&kube, &ns, PODS, &[("app", "storm")], false).await?;
    let dir: PathBuf = std::env::temp_dir().join(format!("informerd-storm-{ns}"));
    let _ = std::fs::remove_dir_all(&dir);
    let config = SidecarConfig::new()
        .snapshot(&dir, |s| s)
        .resource(Resource::pods().namespaces([ns.as_str()]));
    let socket = fixture
        .start_sidecar(BIN.as_ref(), &config)?
        .socket()
        .display()
        .to_string();
    wait_synced(&mut fixture.cache().await?).await?;

    let (control, signals) = Control::new();
    let clients: Vec<(Kind, Arc<Mutex<Progress>>)> = (0..CLIENTS)
        .map(|i| {
            let kind = if i % 2 == 0 { Kind::Watch } else { Kind::Keys };
            let spec = Spec {
                kind,
                socket: socket.clone(),
                namespace: ns.clone(),
                // Half the WatchKeys clients read each key's object from the key, half by a Get.
                get_each: i % 4 == 3,
            };
            (kind, client::spawn(spec, signals.clone()))
        })
        .collect();
    wait_all_current(&pods, &ns, &clients, "the first sync").await?;

    let storms = [Storm::Cold, Storm::Warm, Storm::Cut, Storm::WarmIdle];
    for (round, storm) in storms.into_iter().enumerate() {
        // A client resumes from a token: wait until each holds one (a WatchKeys stream gets
        // its first once the keys of its resync are acknowledged).
        wait_until(&format!("{storm:?}: every client holds a token"), || {
            clients.iter().all(|(_, p)| p.lock().unwrap().resumable)
        })
        .await?;
        if storm == Storm::WarmIdle {
            // Caught up: every client's token is at the sidecar's revision (WatchKeys: every
            // key acknowledged).
            let status = wait_synced(&mut fixture.cache().await?).await?;
            let revision = status.resources[0].revision;
            wait_until(
                "every client's token reaches the sidecar's revision",
                || {
                    let behind = |p: &Mutex<Progress>| p.lock().unwrap().token_revision < revision;
                    !clients.iter().any(|(_, p)| behind(p))
                },
            )
            .await?;
        }
        let before = counts(&clients);
        let writer =
            (storm != Storm::WarmIdle).then(|| Writer::start(kube.clone(), ns.clone(), round));
        control.close_gate();
        match storm {
            Storm::Cold | Storm::Warm | Storm::WarmIdle => {
                let sidecar = fixture.sidecar_mut();
                let exit = sidecar.terminate()?;
                anyhow::ensure!(exit.success(), "{storm:?}: informerd exited with {exit}");
                if storm == Storm::Cold {
                    std::fs::remove_file(informerd::snapshot::path(&dir, "pods"))?;
                }
                sidecar.restart()?;
            }
            Storm::Cut => control.cut(),
        }
        control.open_gate();
        // Writes go on while the clients reconnect; they stop once every client has a new
        // session, so that there is a last state to reach.
        wait_until(&format!("{storm:?}: every client reconnects"), || {
            let now = counts(&clients);
            now.iter().zip(&before).all(|(now, was)| now.0 > was.0)
        })
        .await?;
        if let Some(writer) = writer {
            let writes = writer.stop().await?;
            anyhow::ensure!(writes > 0, "{storm:?}: no write was made during the storm");
        }
        wait_all_current(&pods, &ns, &clients, &format!("{storm:?}")).await?;

        let pid = fixture.sidecar().pid().expect("the sidecar runs");
        assert!(
            alive(pid),
            "{storm:?}: the sidecar died: {}",
            fixture.sidecar().log()
        );
        wait_synced(&mut fixture.cache().await?).await?;
        let after = counts(&clients);
        for (i, ((kind, p), (was, now))) in
            clients.iter().zip(before.iter().zip(&after)).enumerate()
        {
            let relisted = now.1 > was.1;
            let why = p.lock().unwrap().last_end.clone();
            match (storm, kind) {
                // Another epoch: every token is refused, every client starts from nothing.
                (Storm::Cold, _) => {
                    assert!(relisted, "{storm:?}: client {i} ({kind:?}) did not relist")
                }
                // Decision: a WatchKeys token only moves past keys the client has acknowledged,
                // and keys are in flight while writes go on: at SIGTERM it trails the revision
                // the snapshot holds, whose change log starts empty, so after a warm restart
                // such a stream resyncs (it converges, as checked above). Watch tokens reach
                // the snapshot's revision (the watches' last words at shutdown).
                (Storm::Warm, Kind::Keys) => {}
                (Storm::Warm | Storm::Cut | Storm::WarmIdle, _) => assert!(
                    !relisted,
                    "{storm:?}: client {i} ({kind:?}) relisted instead of resuming with its \
                     token; its last session ended with: {why}"
                ),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_client_counts_how_far_its_view_is_from_the_target() {
    let mut p = Progress::default();
    let target = View::from([("a".to_owned(), "1".to_owned())]);
    p.set_target(Arc::new(target));
    assert!(p.current_at.is_none());
    p.set("a".into(), "2".into());
    assert!(p.current_at.is_none());
    p.set("a".into(), "1".into());
    assert!(p.current_at.is_some());
    p.set("b".into(), "1".into());
    assert!(p.current_at.is_none());
    p.remove("b");
    assert!(p.current_at.is_some());
}
