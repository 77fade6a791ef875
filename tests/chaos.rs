//! The chaos suite: informerd reaches the real apiserver through a fault-injecting proxy while
//! the seeder churns pods and a few subscribers (one of them stalled) watch through the Rust
//! client; each phase injects one fault, then, with the churn stopped, waits (bounded) until
//! the apiserver's list == informerd's List == every subscriber's folded stream, by name and
//! resourceVersion, and checks that revisions only grew within an epoch on every subscriber.
//!
//! `cargo test --test chaos` (and so `make test`) runs one round of every fault; `make chaos`
//! runs more: CHAOS_ROUNDS (default 1), CHAOS_CHURN_SECONDS (default 6) and CHAOS_PODS
//! (default 200) set the size; CHAOS_CONVERGE_SECONDS (default 180) bounds the wait for
//! agreement after each phase; with CHAOS_RESULTS=FILE the table is also written there (`make
//! chaos` writes benches/results/chaos.md). A table of faults, events, divergences and times to reconverge
//! is printed at the end.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use informerd::{
    client,
    proto::{
        watch_request::Start, EventType, ListRequest, ResumeToken, StatusRequest, WatchRequest,
    },
};
use informerd_testkit::{delete_namespace, ControlPlane, FaultProxy, Sidecar};
use k8s_openapi::api::core::v1::Pod;
use kube::{api::ListParams, Api, Client};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const TIER: &str = "informerd.io/tier";
const SUBSCRIBERS: usize = 4;
const NAMESPACES: usize = 2;

/// (namespace/name) -> resourceVersion.
type State = BTreeMap<String, String>;

#[derive(Debug, Clone, Copy)]
enum Fault {
    CutAll,
    Stall,
    CutMidList,
    Compaction,
    KillInformerd,
}

const FAULTS: [Fault; 5] = [
    Fault::CutAll,
    Fault::Stall,
    Fault::CutMidList,
    Fault::Compaction,
    Fault::KillInformerd,
];

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one subscriber has seen: its folded state, per epoch, and its checks.
#[derive(Debug, Default)]
struct Seen {
    epoch: u64,
    /// The last resume point (SYNCED or a change), for `since`.
    revision: u64,
    /// True once the initial state of the current watch is complete.
    synced: bool,
    state: State,
    events: u64,
    /// Revisions that did not grow within an epoch: must stay empty.
    disorder: Vec<String>,
    /// Watches refused with `EpochChanged` (informerd restarted).
    epoch_changes: u64,
}

struct Subscriber {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

/// Watches `pods` for ever: from the initial state, resuming after errors, relisting (a new
/// watch with the initial state) on `Expired` or `EpochChanged`. A stalled subscriber stops
/// reading while `stall` is set.
fn subscribe(socket: String, stall: Option<Arc<AtomicBool>>) -> Subscriber {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let _ = watch_once(&socket, &shared, stall.as_deref()).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    Subscriber { seen, task }
}

/// One Watch call, until its stream ends or fails; the error says how the next one starts.
async fn watch_once(
    socket: &str,
    seen: &Mutex<Seen>,
    stall: Option<&AtomicBool>,
) -> anyhow::Result<()> {
    let start = {
        let s = seen.lock().unwrap();
        if s.synced {
            Start::Since(ResumeToken {
                epoch: s.epoch,
                revision: s.revision,
            })
        } else {
            Start::SendInitialState(true)
        }
    };
    let mut cache = client::connect(socket).await?;
    let request = WatchRequest {
        resource: "pods".into(),
        start: Some(start),
        ..Default::default()
    };
    let mut stream = match cache.watch(request).await {
        Ok(s) => s.into_inner(),
        Err(status) => return Err(relist_if_told(seen, status)),
    };
    if seen.lock().unwrap().synced {
        // A resume: the state folds on.
    } else {
        seen.lock().unwrap().state.clear();
    }
    loop {
        while stall.is_some_and(|s| s.load(Ordering::SeqCst)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        match stream.message().await {
            Ok(Some(event)) => fold(&mut seen.lock().unwrap(), &event),
            Ok(None) => return Ok(()),
            Err(status) => return Err(relist_if_told(seen, status)),
        }
    }
}

/// On `Expired` or `EpochChanged` the next watch starts from the initial state.
fn relist_if_told(seen: &Mutex<Seen>, status: tonic::Status) -> anyhow::Error {
    let reason = client::Reason::of(&status);
    if matches!(
        reason,
        Some(client::Reason::Expired | client::Reason::EpochChanged)
    ) {
        let mut seen = seen.lock().unwrap();
        seen.synced = false;
        seen.epoch_changes += u64::from(reason == Some(client::Reason::EpochChanged));
    }
    anyhow::anyhow!("watch: {status}")
}

fn fold(s: &mut Seen, event: &informerd::proto::WatchEvent) {
    s.events += 1;
    let kind = EventType::try_from(event.r#type).unwrap_or(EventType::Unspecified);
    if event.epoch != s.epoch {
        s.epoch = event.epoch;
        s.revision = 0;
    }
    let resume_point = s.synced || kind == EventType::Synced;
    if resume_point {
        // A change has a revision of its own; a BOOKMARK, or the SYNCED of a new watch's
        // initial state (0 while informerd has stored nothing yet), may repeat the last one.
        let grows = event.revision > s.revision
            || (matches!(kind, EventType::Bookmark | EventType::Synced)
                && event.revision == s.revision);
        if !grows {
            s.disorder.push(format!(
                "{kind:?} at revision {} after {}",
                event.revision, s.revision
            ));
        }
        s.revision = event.revision;
    }
    match (kind, &event.object) {
        (EventType::Synced, _) => s.synced = true,
        (EventType::Added | EventType::Modified, Some(o)) => {
            s.state.insert(
                format!("{}/{}", o.namespace, o.name),
                o.resource_version.clone(),
            );
        }
        (EventType::Deleted, Some(o)) => {
            s.state.remove(&format!("{}/{}", o.namespace, o.name));
        }
        _ => {}
    }
}

async fn apiserver_state(client: &Client, namespaces: &[String]) -> anyhow::Result<State> {
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

async fn informerd_state(socket: &str) -> anyhow::Result<State> {
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

/// The relists of every scope since informerd started (after 410 Gone, or a list cut).
async fn relists(socket: &str) -> anyhow::Result<u64> {
    let mut cache = client::connect(socket).await?;
    let status = cache.status(StatusRequest::default()).await?.into_inner();
    Ok(status
        .resources
        .iter()
        .flat_map(|r| &r.scopes)
        .map(|s| s.relists)
        .sum())
}

/// Waits until the apiserver, informerd and every subscriber agree; returns the time it took,
/// or the differences left at the deadline.
async fn converge(
    client: &Client,
    namespaces: &[String],
    socket: &str,
    subscribers: &[Subscriber],
) -> Result<Duration, Vec<String>> {
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
                for (i, s) in subscribers.iter().enumerate() {
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

fn diff(want: &State, have: &State) -> String {
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

/// Injects one fault while the churn runs; returns how many faults it counted.
async fn inject(fault: Fault, proxy: &FaultProxy, sidecar: &mut Sidecar, cp: &ControlPlane) -> u64 {
    match fault {
        Fault::CutAll => proxy.cut_all().max(1),
        Fault::Stall => {
            proxy.stall();
            tokio::time::sleep(Duration::from_secs(3)).await;
            proxy.resume();
            1
        }
        Fault::CutMidList => {
            // informerd lists at start-up: restart it with the cut armed, and wait until the
            // cut has fired (the list is cut, informerd lists again).
            let before = proxy.cuts_mid_stream();
            proxy.cut_after(16 << 10);
            tokio::task::block_in_place(|| sidecar.restart()).expect("restart informerd");
            let deadline = Instant::now() + Duration::from_secs(60);
            while proxy.cuts_mid_stream() == before && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            proxy.disarm();
            assert!(
                proxy.cuts_mid_stream() > before,
                "no response of 16 KiB went through the proxy within 60 s of informerd's start"
            );
            1
        }
        Fault::Compaction => {
            cp.compact_etcd().await.expect("compact etcd");
            // Resumes of the cut watches now start from a compacted revision.
            proxy.cut_all();
            1
        }
        Fault::KillInformerd => {
            tokio::task::block_in_place(|| sidecar.restart()).expect("restart informerd");
            1
        }
    }
}

#[derive(Default)]
struct Row {
    faults: u64,
    phases: u64,
    times: Vec<Duration>,
    divergences: u64,
    relists: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn informerd_tells_the_truth_under_faults() -> anyhow::Result<()> {
    let rounds = env_number("CHAOS_ROUNDS", 1);
    let churn_seconds = env_number("CHAOS_CHURN_SECONDS", 6) as u32;
    let pods = env_number("CHAOS_PODS", 200) as usize;
    let cp = ControlPlane::get();
    let client = cp.client().await?;
    let prefix = format!("chaos{:x}", std::process::id());
    let namespaces: Vec<String> = (0..NAMESPACES).map(|i| format!("{prefix}-{i}")).collect();
    cp.seed(&prefix, pods, NAMESPACES)?;

    let proxy = FaultProxy::start(cp).await?;
    let resources = format!(
        "- name: pods\n  apiVersion: v1\n  kind: Pod\n  namespaces: {namespaces:?}\n  filter: 'object.metadata.labels[\"{TIER}\"] == \"keep\"'\n"
    );
    let mut sidecar = Sidecar::start(BIN.as_ref(), proxy.control_plane(), &resources)?;
    let socket = sidecar.socket().to_string_lossy().into_owned();
    let stall = Arc::new(AtomicBool::new(false));
    let subscribers: Vec<Subscriber> = (0..SUBSCRIBERS)
        .map(|i| subscribe(socket.clone(), (i == 0).then(|| stall.clone())))
        .collect();
    converge(&client, &namespaces, &socket, &subscribers)
        .await
        .map_err(|d| anyhow::anyhow!("no agreement before any fault: {d:#?}"))?;

    let mut table: BTreeMap<String, Row> = BTreeMap::new();
    let mut failures = Vec::new();
    let churned = Arc::new(AtomicU64::new(0));
    for round in 0..rounds {
        for fault in FAULTS {
            let churn = {
                let (cp, prefix, churned) = (cp.clone(), prefix.clone(), churned.clone());
                tokio::task::spawn_blocking(move || {
                    let summary = cp.churn(&prefix, NAMESPACES, 30, churn_seconds);
                    churned.fetch_add(1, Ordering::SeqCst);
                    summary
                })
            };
            stall.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            let relists_before = relists(&socket).await?;
            let injected = inject(fault, &proxy, &mut sidecar, cp).await;
            let summary = churn.await??;
            stall.store(false, Ordering::SeqCst);
            eprintln!("round {round} {fault:?}: {}", summary.trim());
            let row = table.entry(format!("{fault:?}")).or_default();
            row.faults += injected;
            row.phases += 1;
            match converge(&client, &namespaces, &socket, &subscribers).await {
                Ok(t) => row.times.push(t),
                Err(d) => {
                    row.divergences += d.len() as u64;
                    let log = sidecar.log();
                    let tail: Vec<&str> = log.lines().rev().take(40).collect();
                    failures.push(format!(
                        "round {round} {fault:?}: {d:#?}\nlog tail: {tail:#?}"
                    ));
                }
            }
            // A restart starts the count again.
            let after = relists(&socket).await?;
            row.relists += after.checked_sub(relists_before).unwrap_or(after);
        }
    }
    let events: u64 = subscribers
        .iter()
        .map(|s| s.seen.lock().unwrap().events)
        .sum();
    print_table(&table, events);
    let disorder: Vec<String> = subscribers
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            let seen = s.seen.lock().unwrap();
            seen.disorder
                .iter()
                .map(move |d| format!("subscriber {i}: {d}"))
                .collect::<Vec<_>>()
        })
        .collect();
    let restarts = 2 * rounds;
    for (i, s) in subscribers.iter().enumerate() {
        let changes = s.seen.lock().unwrap().epoch_changes;
        assert!(
            changes >= restarts,
            "subscriber {i} was told EpochChanged {changes} times for {restarts} restarts of informerd"
        );
        s.task.abort();
    }
    assert!(
        proxy.connections_reset() > 0,
        "the proxy reset no connection: informerd did not go through it"
    );
    drop(sidecar);
    for ns in &namespaces {
        let _ = delete_namespace(&client, ns).await;
    }
    assert!(failures.is_empty(), "divergences: {failures:#?}");
    assert!(disorder.is_empty(), "revisions out of order: {disorder:#?}");
    assert!(events > 0, "the subscribers saw no event");
    Ok(())
}

/// Prints the table (and writes it to CHAOS_RESULTS when set).
fn print_table(table: &BTreeMap<String, Row>, events: u64) {
    let mut out = String::from(
        "| fault | injected | phases | informerd relists | divergences | reconverge p50 | reconverge max |\n|---|---|---|---|---|---|---|\n",
    );
    for (fault, row) in table {
        let mut times = row.times.clone();
        times.sort();
        let p50 = times
            .get(times.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or_default();
        let max = times.last().copied().unwrap_or_default();
        out += &format!(
            "| {fault} | {} | {} | {} | {} | {:.1} s | {:.1} s |\n",
            row.faults,
            row.phases,
            row.relists,
            row.divergences,
            p50.as_secs_f64(),
            max.as_secs_f64()
        );
    }
    out += &format!("\nevents checked (all subscribers): {events}\n");
    eprintln!("\n{out}");
    if let Some(path) = std::env::var_os("CHAOS_RESULTS") {
        if let Err(e) = std::fs::write(&path, &out) {
            eprintln!(
                "cannot write {}: {e}",
                std::path::Path::new(&path).display()
            );
        }
    }
}
