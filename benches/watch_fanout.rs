//! Watch fan-out during churn (issue 4): W watchers on one resource, each on its own connection,
//! and one watcher that never reads. The W must receive every event exactly once and in order;
//! the one that never reads must be ended (`RESOURCE_EXHAUSTED`/`FellBehind`) and the sidecar's
//! memory must stay bounded.
//!
//! `cargo bench --bench watch_fanout` runs the real binary (the release build under
//! `cargo bench`) against the local control plane, in a namespace of its own with
//! `FANOUT_PODS` pods (default 200). It merge-patches a label carrying a sequence number onto
//! the pods, round-robin, at `FANOUT_RATE` writes/s (default 200) for `FANOUT_SECONDS`
//! (default 30), at most `FANOUT_CONCURRENCY` (default 16) in flight, while `FANOUT_WATCHERS`
//! (default 100) watchers follow from the same List token and a plain kube-rs watch on the
//! apiserver follows the same namespace as the baseline.
//!
//! Latency of a delivery = when the watcher received the MODIFIED event − when the benchmark
//! sent that write (same process clock, so it includes the client's own scheduling on a shared
//! machine). "Added by informerd" compares each delivery with the baseline's receipt of the same
//! write. Memory is sampled every second through `Status` (jemalloc's allocated bytes and the
//! RSS) and /proc/<pid>/status.
//!
//! Prints a Markdown report and writes the same figures to `benches/results/watch_fanout.json`.
//! Latencies and memory are printed, never asserted; the run fails (exit 1) only when a watcher
//! missed, duplicated or reordered an event, or a resumed watch does not continue where it left.

mod common;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use common::cluster::pods_resource;
use common::sidecar::{list_namespace, status};
use common::stats::{micros, ms, round, Stats};
use common::watch::{
    discrepancies, join_followers, spawn_followers, wait_watchers, Delivery, End, SEQ_LABEL,
};
use common::writes::{revision_after, write_labels, writes_in, Churn, Write, Written};
use common::{cpus, env_or, join_sections, print_log_tail, profile, results, InNamespace};
use futures::StreamExt;
use informerd::api::WATCHER_BUFFER;
use informerd::proto::{
    cache_client::CacheClient, watch_request::Start, EventType, ResumeToken, WatchEvent,
    WatchRequest,
};
use informerd::vocab::memory::status_bytes;
use informerd_client as client;
use informerd_testkit::{create_pods, Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchParams};
use serde_json::{json, Value};
use tokio::sync::watch;
use tonic::transport::Channel;
use tonic::{Code, Streaming};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
const RESOURCE: &str = "pods";
/// How long the watchers may take to reach the last write once churn has ended.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(180);
/// How long to wait for the next message of the never-reading watcher when draining it.
const STALLED_IDLE: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
struct Settings {
    pods: usize,
    watchers: usize,
    rate: f64,
    seconds: f64,
    concurrency: usize,
}

impl Settings {
    fn from_env() -> anyhow::Result<Settings> {
        let s = Settings {
            pods: env_or("FANOUT_PODS", 200)?,
            watchers: env_or("FANOUT_WATCHERS", 100)?,
            rate: env_or("FANOUT_RATE", 200.0)?,
            seconds: env_or("FANOUT_SECONDS", 30.0)?,
            concurrency: env_or("FANOUT_CONCURRENCY", 16)?,
        };
        if s.pods == 0 || s.watchers == 0 || s.concurrency == 0 {
            bail!("FANOUT_PODS, FANOUT_WATCHERS and FANOUT_CONCURRENCY must be at least 1");
        }
        if !(s.rate > 0.0 && s.seconds > 0.0) {
            bail!("FANOUT_RATE and FANOUT_SECONDS must be positive");
        }
        Ok(s)
    }

    fn churn(&self) -> Churn {
        Churn {
            writes: writes_in(self.rate, self.seconds),
            rate: self.rate,
            in_flight: self.concurrency,
            base: 0,
        }
    }
}

fn main() -> ExitCode {
    common::main_in_namespace(
        "watch_fanout",
        "fanout",
        "missed, repeated or reordered events, or a resume that did not continue",
        Settings::from_env,
        bench,
    )
}

// ---------------------------------------------------------------------------------------------
// Memory samples

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    /// Before any watcher.
    Setup = 0,
    /// Watchers open, no writes yet.
    Idle = 1,
    Churn = 2,
    /// Writes done; waiting for the watchers to reach the last one.
    Drain = 3,
    After = 4,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Setup,
            1 => Phase::Idle,
            2 => Phase::Churn,
            3 => Phase::Drain,
            _ => Phase::After,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Idle => "idle",
            Phase::Churn => "churn",
            Phase::Drain => "drain",
            Phase::After => "after",
        }
    }
}

#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    phase: Phase,
    allocated: u64,
    resident: u64,
    vmrss: u64,
    watchers: u64,
    dropped: u64,
    revision: u64,
    log_entries: u64,
    log_bytes: u64,
}

impl Sample {
    /// Seconds since the churn began (negative before).
    fn t(&self, churn_start: Instant) -> f64 {
        micros(self.at, churn_start) as f64 / 1e6
    }

    fn json(&self, churn_start: Instant) -> Value {
        json!({
            "t_s": (self.t(churn_start) * 10.0).round() / 10.0,
            "phase": self.phase.name(),
            "allocated_bytes": self.allocated,
            "resident_bytes": self.resident,
            "vmrss_bytes": self.vmrss,
            "watchers": self.watchers,
            "dropped_watches": self.dropped,
            "revision": self.revision,
            "log_entries": self.log_entries,
            "log_bytes": self.log_bytes,
        })
    }

    fn memory_json(&self) -> Value {
        json!({
            "allocated_bytes": self.allocated,
            "resident_bytes": self.resident,
            "vmrss_bytes": self.vmrss,
        })
    }
}

async fn sample(
    api: &mut CacheClient<Channel>,
    pid: Option<u32>,
    phase: Phase,
) -> anyhow::Result<Sample> {
    let s = status(api, RESOURCE).await?;
    let at = Instant::now();
    let r = s
        .resources
        .iter()
        .find(|r| r.name == RESOURCE)
        .ok_or_else(|| anyhow!("Status has no resource {RESOURCE}"))?;
    Ok(Sample {
        at,
        phase,
        allocated: s.allocated_bytes,
        resident: s.resident_bytes,
        vmrss: pid.and_then(|pid| status_bytes(pid, "VmRSS")).unwrap_or(0),
        watchers: r.watchers,
        dropped: r.dropped_watches,
        revision: r.revision,
        log_entries: r.log_entries,
        log_bytes: r.log_bytes,
    })
}

/// Samples of the sidecar's memory every second, taken by a task of its own on a connection of
/// its own, each with the phase the benchmark is in.
struct Sampler {
    phase: Arc<AtomicU8>,
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling, in the phase [`Phase::Idle`].
    async fn start(socket: &str, pid: Option<u32>) -> anyhow::Result<Sampler> {
        let phase = Arc::new(AtomicU8::new(Phase::Idle as u8));
        let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
        let (stop, mut stopped) = watch::channel(false);
        let task = {
            let (phase, samples) = (phase.clone(), samples.clone());
            let mut api = client::connect(socket).await?;
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = stopped.changed() => return,
                    }
                    let p = Phase::from_u8(phase.load(Ordering::Relaxed));
                    match sample(&mut api, pid, p).await {
                        Ok(x) => samples.lock().expect("samples").push(x),
                        Err(e) => eprintln!("watch_fanout: memory sample failed: {e:#}"),
                    }
                }
            })
        };
        Ok(Sampler {
            phase,
            samples,
            stop,
            task,
        })
    }

    /// The phase the next samples are taken in.
    fn enter(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// Stops sampling; returns the samples taken.
    async fn stop(self) -> anyhow::Result<Vec<Sample>> {
        self.stop.send_replace(true);
        self.task.await.context("the sampler panicked")?;
        let samples = self.samples.lock().expect("samples").clone();
        Ok(samples)
    }
}

// ---------------------------------------------------------------------------------------------
// Watchers

struct Baseline {
    /// Receipt of each MODIFIED event, as (seq, rv, at).
    deliveries: Vec<(Option<u64>, u64, Instant)>,
    other_events: usize,
    error: Option<String>,
}

/// A plain watch on the apiserver, from `rv`, re-issued when the apiserver closes it, until it
/// has seen the target resourceVersion.
async fn baseline(pods: Api<Pod>, mut rv: String, mut target: watch::Receiver<u64>) -> Baseline {
    use kube::api::WatchEvent as K;
    let mut out = Baseline {
        deliveries: Vec::new(),
        other_events: 0,
        error: None,
    };
    let mut last = 0u64;
    'watch: loop {
        let mut stream = match pods.watch(&WatchParams::default().timeout(290), &rv).await {
            Ok(s) => s.boxed(),
            Err(e) => {
                out.error = Some(format!("watch: {e}"));
                break;
            }
        };
        loop {
            if last >= *target.borrow() {
                break 'watch;
            }
            tokio::select! {
                item = stream.next() => match item {
                    None => continue 'watch,
                    Some(Ok(K::Modified(p))) => {
                        let at = Instant::now();
                        rv = p.metadata.resource_version.clone().unwrap_or_default();
                        last = rv.parse().unwrap_or(last);
                        let seq = p
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(SEQ_LABEL))
                            .and_then(|v| v.parse().ok());
                        out.deliveries.push((seq, last, at));
                    }
                    Some(Ok(K::Added(p) | K::Deleted(p))) => {
                        rv = p.metadata.resource_version.clone().unwrap_or_default();
                        last = rv.parse().unwrap_or(last);
                        out.other_events += 1;
                    }
                    Some(Ok(K::Bookmark(b))) => rv = b.metadata.resource_version,
                    Some(Ok(K::Error(s))) => {
                        out.error = Some(format!("watch error: {s}"));
                        break 'watch;
                    }
                    Some(Err(e)) => {
                        out.error = Some(format!("watch stream: {e}"));
                        break 'watch;
                    }
                },
                changed = target.changed() => if changed.is_err() {
                    out.error = Some("did not reach the last write in time".into());
                    break 'watch;
                },
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The pods

fn pod_name(i: usize) -> String {
    format!("p{i}")
}

// ---------------------------------------------------------------------------------------------
// Checks and statistics

/// What one watcher received against what it should have.
#[derive(Debug, Default)]
struct Check {
    events: usize,
    modified: usize,
    other_kinds: usize,
    /// MODIFIED events for a change that is not one of the benchmark's writes.
    unlabelled: usize,
    missing_revisions: u64,
    repeated_or_backward: u64,
    writes_missing: usize,
    writes_duplicated: usize,
    /// Events whose resourceVersion is not the one the write got, or goes backwards.
    rv_wrong: usize,
    problems: Vec<String>,
}

impl Check {
    fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

fn check_watcher(
    deliveries: &[Delivery],
    end: &End,
    start: u64,
    target: u64,
    writes: &[Write],
) -> Check {
    let last = deliveries.last().map_or(start, |d| d.revision);
    let mut c = Check {
        events: deliveries.len(),
        problems: end
            .problem(target, last, DRAIN_TIMEOUT)
            .into_iter()
            .collect(),
        ..Default::default()
    };
    let mut expected = start + 1;
    let mut first_revision_problem = None;
    let mut seen = vec![0u32; writes.len()];
    let mut last_rv = 0;
    for d in deliveries {
        if d.revision == expected {
            expected += 1;
        } else if d.revision < expected {
            c.repeated_or_backward += 1;
            first_revision_problem.get_or_insert(format!(
                "revision {} after {}",
                d.revision,
                expected - 1
            ));
        } else {
            c.missing_revisions += d.revision - expected;
            first_revision_problem
                .get_or_insert(format!("revisions {expected}..{} missing", d.revision - 1));
            expected = d.revision + 1;
        }
        if d.kind == EventType::Modified as i32 {
            c.modified += 1;
        } else {
            c.other_kinds += 1;
        }
        if d.rv != 0 {
            if d.rv <= last_rv {
                c.rv_wrong += 1;
            }
            last_rv = d.rv;
        }
        match d.seq.and_then(|s| writes.get(s as usize).map(|w| (s, w))) {
            Some((s, w)) if d.kind == EventType::Modified as i32 => {
                // A label can also be carried by a later change of another kind: only the
                // MODIFIED event with the write's own resourceVersion is the write.
                match &w.rv {
                    Ok(rv) if *rv == d.rv => seen[s as usize] += 1,
                    Ok(_) => c.unlabelled += 1,
                    Err(_) => {}
                }
            }
            _ if d.kind == EventType::Modified as i32 => c.unlabelled += 1,
            _ => {}
        }
    }
    if expected <= target && matches!(end, End::Reached) {
        c.missing_revisions += target + 1 - expected;
    }
    for (w, n) in writes.iter().zip(&seen) {
        if w.rv.is_ok() {
            match n {
                0 => c.writes_missing += 1,
                1 => {}
                _ => c.writes_duplicated += 1,
            }
        }
    }
    if let Some(p) = first_revision_problem {
        c.problems.push(format!(
            "{} revisions missing, {} repeated or backwards (first: {p})",
            c.missing_revisions, c.repeated_or_backward
        ));
    } else if c.missing_revisions > 0 && matches!(end, End::Reached) {
        c.problems
            .push(format!("{} revisions missing", c.missing_revisions));
    }
    if c.writes_missing > 0 || c.writes_duplicated > 0 {
        c.problems.push(format!(
            "writes: {} never delivered, {} delivered more than once",
            c.writes_missing, c.writes_duplicated
        ));
    }
    if c.rv_wrong > 0 {
        c.problems.push(format!(
            "{} events with a resourceVersion not above the previous one",
            c.rv_wrong
        ));
    }
    c
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1 << 20) as f64)
}

// ---------------------------------------------------------------------------------------------
// The benchmark

struct StalledOutcome {
    /// Whether it was ended with RESOURCE_EXHAUSTED / FellBehind.
    fell_behind: bool,
    /// How its stream ended, as read.
    end: String,
    received: u64,
    last_revision: u64,
    /// Its events were start+1, start+2, ... (a resumable prefix).
    contiguous: bool,
    /// A watch `since` its last event began at the next revision.
    resumed_at: Option<u64>,
}

/// Reads the never-reading watcher at last: the events it had buffered, then how it ended. One
/// that was never ended stops being read once it reaches `target` (bookmarks keep an open watch
/// busy, so they do not count as progress).
async fn drain_stalled(
    mut stream: Streaming<WatchEvent>,
    start: u64,
    target: u64,
) -> StalledOutcome {
    let mut out = StalledOutcome {
        fell_behind: false,
        end: String::new(),
        received: 0,
        last_revision: start,
        contiguous: true,
        resumed_at: None,
    };
    let mut deadline = tokio::time::Instant::now() + STALLED_IDLE;
    loop {
        if out.last_revision >= target {
            out.end = format!("still open, and served every event up to revision {target}");
            break;
        }
        match tokio::time::timeout_at(deadline, stream.message()).await {
            Err(_) => {
                out.end = format!(
                    "still open: no event for {} s after {} events",
                    STALLED_IDLE.as_secs(),
                    out.received
                );
                break;
            }
            Ok(Ok(Some(e))) => {
                if e.r#type == EventType::Bookmark as i32 {
                    continue;
                }
                if e.revision != out.last_revision + 1 {
                    out.contiguous = false;
                }
                out.last_revision = e.revision;
                out.received += 1;
                deadline = tokio::time::Instant::now() + STALLED_IDLE;
            }
            Ok(Ok(None)) => {
                out.end = "closed without a status".into();
                break;
            }
            Ok(Err(s)) => {
                let reason = client::reason(&s).unwrap_or("-").to_string();
                out.fell_behind = s.code() == Code::ResourceExhausted
                    && client::Reason::of(&s) == Some(client::Reason::FellBehind);
                out.end = format!("{:?} / informerd-reason: {reason}", s.code());
                break;
            }
        }
    }
    out
}

/// What one run measured.
struct Measured {
    version: String,
    /// The revision of the List token every watcher started from.
    start: u64,
    /// The sidecar's revision once it held the last write.
    target: u64,
    writes: Vec<Write>,
    churn_start: Instant,
    churn_end: Instant,
    /// When every watcher had reached `target` (or the benchmark gave up).
    drained: Instant,
    watchers: Vec<(Vec<Delivery>, End)>,
    baseline: Baseline,
    stalled: StalledOutcome,
    before: Sample,
    idle: Sample,
    after: Sample,
    closed: Sample,
    samples: Vec<Sample>,
    dropped_watches: u64,
    relists: u64,
}

async fn bench(at: &InNamespace<'_>, s: &Settings) -> anyhow::Result<bool> {
    let (pods, ns) = (at.pods, at.ns);
    // No nodeName: nothing schedules or garbage-collects these pods, so the benchmark's writes
    // are the only changes. (Named `p{i}`, as `pod_name` says.)
    create_pods(
        &at.cluster.client().await?,
        at.ns,
        s.pods,
        &[("app", "fanout"), (SEQ_LABEL, "none")],
        false,
    )
    .await
    .context("create pods")?;
    eprintln!("watch_fanout: {} pods in namespace {ns}", s.pods);

    let config = SidecarConfig::new().resource(pods_resource(
        &[ns.into()],
        &[],
        &["metadata.managedFields"],
    ));
    let sidecar = Sidecar::start(BIN.as_ref(), at.cluster, &config)?;
    let measured = measure(&sidecar, pods, ns, s)
        .await
        .inspect_err(|_| print_log_tail(&sidecar))?;
    let report = Report::new(&measured);
    println!("{}", report.markdown(s, &measured));
    if !report.ok {
        print_log_tail(&sidecar);
    }
    let written = results::write_json("watch_fanout.json", &report.json(s, &measured))?;
    eprintln!("watch_fanout: wrote {written}");
    Ok(report.ok)
}

/// Waits (120 s at most) for the sidecar to sync, then lists the namespace, which must hold
/// `pods`: the sidecar's version, and the List's token, which every watcher starts from.
async fn synced_token(
    api: &mut CacheClient<Channel>,
    ns: &str,
    pods: usize,
) -> anyhow::Result<(String, ResumeToken)> {
    let synced = async {
        loop {
            if let Ok(st) = status(api, RESOURCE).await {
                if st.synced {
                    return st;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let version = tokio::time::timeout(Duration::from_secs(120), synced)
        .await
        .map_err(|_| anyhow!("the sidecar did not sync within 120 s"))?
        .version;
    let chunks = list_namespace(api, RESOURCE, ns).await?;
    let listed: usize = chunks.iter().map(|c| c.objects.len()).sum();
    let last = chunks.last().ok_or_else(|| anyhow!("an empty List"))?;
    if listed != pods {
        bail!("the sidecar lists {listed} pods, the namespace has {pods}");
    }
    let token = ResumeToken {
        epoch: last.epoch,
        revision: last.revision,
    };
    Ok((version, token))
}

/// The revision of the first event (bookmarks aside) of a new watch, waiting 30 s at most.
async fn first_revision(
    api: &mut CacheClient<Channel>,
    request: WatchRequest,
) -> anyhow::Result<Option<u64>> {
    let mut resumed = api.watch(request).await?.into_inner();
    let first = async {
        loop {
            match resumed.message().await {
                Ok(Some(e)) if e.r#type == EventType::Bookmark as i32 => continue,
                Ok(Some(e)) => return Some(e.revision),
                _ => return None,
            }
        }
    };
    Ok(tokio::time::timeout(Duration::from_secs(30), first)
        .await
        .ok()
        .flatten())
}

async fn measure(
    sidecar: &Sidecar,
    pods: &Api<Pod>,
    ns: &str,
    s: &Settings,
) -> anyhow::Result<Measured> {
    let socket = sidecar.socket().display().to_string();
    let pid = sidecar.pid();
    let mut api = client::connect(&socket).await?;
    let (version, token) = synced_token(&mut api, ns, s.pods).await?;
    let start = token.revision;
    let kube_rv = pods
        .list_metadata(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();

    // Memory before any watcher, then a sample every second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = sample(&mut api, pid, Phase::Setup).await?;
    let sampler = Sampler::start(&socket, pid).await?;

    let watch_req = |since: ResumeToken| WatchRequest {
        resource: RESOURCE.into(),
        namespace: ns.into(),
        start: Some(Start::Since(since)),
        ..Default::default()
    };
    // The watcher that never reads, on its own connection.
    let mut stalled_api = client::connect(&socket).await?;
    let stalled = stalled_api.watch(watch_req(token)).await?.into_inner();

    let (target_tx, target_rx) = watch::channel(u64::MAX);
    let churn = s.churn();
    let readers = spawn_followers(
        &socket,
        s.watchers,
        &watch_req(token),
        &target_rx,
        churn.writes,
    )
    .await?;
    let (base_target_tx, base_target_rx) = watch::channel(u64::MAX);
    let base = tokio::spawn(baseline(pods.clone(), kube_rv, base_target_rx));

    // Every watch open on the server (the readers and the one that never reads) before the
    // first write.
    wait_watchers(&mut api, RESOURCE, s.watchers as u64 + 1).await?;
    // Give the baseline watch a moment to be established at the apiserver.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = sample(&mut api, pid, Phase::Idle).await?;

    eprintln!(
        "watch_fanout: {} watchers + 1 that never reads open; {} writes at {}/s",
        s.watchers, churn.writes, churn.rate
    );
    let names = Arc::new((0..s.pods).map(pod_name).collect::<Vec<_>>());
    let churn_start = Instant::now();
    sampler.enter(Phase::Churn);
    let writes = write_labels(pods, &names, churn, churn_start).await;
    let churn_end = Instant::now();
    sampler.enter(Phase::Drain);

    let (target, last_rv) = revision_after(&mut api, (RESOURCE, ns), &names, &writes).await?;
    target_tx.send_replace(target);
    base_target_tx.send_replace(last_rv);

    let (followed, drained) = join_followers(readers, target_tx, DRAIN_TIMEOUT).await?;
    let baseline = tokio::time::timeout(Duration::from_secs(60), base)
        .await
        .map_err(|_| anyhow!("the baseline watch did not reach the last write within 60 s"))?
        .context("the baseline task panicked")?;
    sampler.enter(Phase::After);

    // Memory after churn with every reader still open; then the watcher that never read.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = sample(&mut api, pid, Phase::After).await?;
    let mut stalled = drain_stalled(stalled, start, target).await;
    if stalled.fell_behind {
        let since = ResumeToken {
            epoch: token.epoch,
            revision: stalled.last_revision,
        };
        stalled.resumed_at = first_revision(&mut api, watch_req(since)).await?;
    }
    drop(stalled_api);
    // Close every reader, then the memory once more.
    let mut watchers = Vec::with_capacity(followed.len());
    for (f, api) in followed {
        drop((f.stream, api));
        watchers.push((f.deliveries, f.end));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let closed = sample(&mut api, pid, Phase::After).await?;
    let samples = sampler.stop().await?;
    let final_status = status(&mut api, RESOURCE).await?;
    let resource = final_status
        .resources
        .first()
        .ok_or_else(|| anyhow!("Status has no resource"))?;
    Ok(Measured {
        version,
        start,
        target,
        writes,
        churn_start,
        churn_end,
        drained,
        watchers,
        baseline,
        stalled,
        before,
        idle,
        after,
        closed,
        samples,
        dropped_watches: resource.dropped_watches,
        relists: resource.scopes.iter().map(|sc| sc.relists).sum(),
    })
}

// ---------------------------------------------------------------------------------------------
// The report

/// The figures of a run.
struct Report {
    ok: bool,
    written: Written,
    churn_secs: f64,
    changes: u64,
    checks: Vec<Check>,
    events_min: usize,
    events_max: usize,
    delivered: usize,
    events_per_sec: f64,
    drain_ms: f64,
    baseline: Stats,
    informerd: Stats,
    added: Stats,
    per_watcher_p99: Stats,
    per_watcher_p99_min: i64,
    baseline_missing: usize,
    peak: [u64; 3],
    dropped_at: Option<f64>,
}

impl Report {
    fn new(m: &Measured) -> Report {
        let checks: Vec<Check> = m
            .watchers
            .iter()
            .map(|(d, e)| check_watcher(d, e, m.start, m.target, &m.writes))
            .collect();
        // What the never-reading watcher got must be a resumable prefix, and resume must work.
        let stalled_ok = m.stalled.contiguous
            && (!m.stalled.fell_behind
                || m.stalled.resumed_at == Some(m.stalled.last_revision + 1));
        let ok = checks.iter().all(Check::ok) && stalled_ok;

        // The baseline's receipt of each write.
        let mut base_at: Vec<Option<Instant>> = vec![None; m.writes.len()];
        for (seq, rv, at) in &m.baseline.deliveries {
            if let Some(w) = seq.and_then(|q| m.writes.get(q as usize)) {
                if w.rv.as_ref().ok() == Some(rv) {
                    base_at[w.seq as usize] = Some(*at);
                }
            }
        }
        let baseline_missing = m
            .writes
            .iter()
            .filter(|w| w.rv.is_ok() && base_at[w.seq as usize].is_none())
            .count();

        let mut informerd = Vec::new();
        let mut added = Vec::new();
        let mut per_watcher_p99 = Vec::new();
        let mut last_receipt = m.churn_start;
        let mut delivered = 0usize;
        for (ds, _) in &m.watchers {
            let mut mine = Vec::with_capacity(ds.len());
            for d in ds {
                delivered += 1;
                last_receipt = last_receipt.max(d.at);
                let Some(w) = d.seq.and_then(|q| m.writes.get(q as usize)) else {
                    continue;
                };
                if d.kind != EventType::Modified as i32 || w.rv.as_ref().ok() != Some(&d.rv) {
                    continue;
                }
                let l = micros(d.at, w.sent);
                informerd.push(l);
                mine.push(l);
                if let Some(b) = base_at[w.seq as usize] {
                    added.push(micros(d.at, b));
                }
            }
            per_watcher_p99.push(Stats::of(mine).p99);
        }
        let events: Vec<usize> = checks.iter().map(|c| c.events).collect();
        let during: Vec<&Sample> = m
            .samples
            .iter()
            .filter(|x| matches!(x.phase, Phase::Churn | Phase::Drain))
            .chain([&m.after])
            .collect();
        let peak = |f: fn(&Sample) -> u64| during.iter().map(|x| f(x)).max().unwrap_or(0);
        let churn_secs = (m.churn_end - m.churn_start).as_secs_f64();
        Report {
            ok,
            written: Written::of(&m.writes, churn_secs),
            churn_secs,
            changes: m.target.saturating_sub(m.start),
            events_min: events.iter().copied().min().unwrap_or(0),
            events_max: events.iter().copied().max().unwrap_or(0),
            checks,
            delivered,
            events_per_sec: delivered as f64
                / (last_receipt - m.churn_start).as_secs_f64().max(1e-9),
            drain_ms: (m.drained - m.churn_end).as_secs_f64() * 1000.0,
            baseline: Stats::of(
                m.writes
                    .iter()
                    .filter_map(|w| base_at[w.seq as usize].map(|b| micros(b, w.sent)))
                    .collect(),
            ),
            informerd: Stats::of(informerd),
            added: Stats::of(added),
            per_watcher_p99_min: per_watcher_p99.iter().copied().min().unwrap_or(0),
            per_watcher_p99: Stats::of(per_watcher_p99),
            baseline_missing,
            peak: [
                peak(|x| x.allocated),
                peak(|x| x.resident),
                peak(|x| x.vmrss),
            ],
            dropped_at: m
                .samples
                .iter()
                .find(|x| x.dropped > 0)
                .map(|x| x.t(m.churn_start)),
        }
    }

    fn good(&self) -> usize {
        self.checks.iter().filter(|c| c.ok()).count()
    }

    /// The report: deliveries and their latency, the sidecar's memory, then notes.
    fn markdown(&self, s: &Settings, m: &Measured) -> String {
        join_sections([
            self.delivery_markdown(s, m),
            self.memory_markdown(m),
            self.notes_markdown(m),
        ])
    }

    fn delivery_markdown(&self, s: &Settings, m: &Measured) -> Vec<String> {
        let mut out = Vec::<String>::new();
        out.push(format!(
            "### Watch fan-out: {} watchers + 1 that never reads, {} pods, {} writes/s for {} s",
            s.watchers, s.pods, s.rate, s.seconds
        ));
        out.push(String::new());
        out.push(format!(
            "informerd {} ({} build, `cargo bench --bench watch_fanout`); pods of one namespace, \
             `transform: {{drop: [metadata.managedFields]}}`; each watcher on its own connection, \
             all `since` one List token; writes: merge patch of the label `{SEQ_LABEL}`, \
             round-robin over the pods, at most {} in flight; {} CPUs shared with the control \
             plane.",
            m.version,
            profile(),
            s.concurrency,
            cpus()
        ));
        out.push(String::new());
        out.push(
            "| writes | achieved rate | sidecar changes | events per watcher | every event once, \
             in order | delivered | last watcher done after the last write |"
                .into(),
        );
        out.push("|---:|---:|---:|---:|:--|---:|---:|".into());
        out.push(format!(
            "| {} | {:.1}/s | {} | {} | {} ({}/{} watchers) | {:.0} events/s | {:.0} ms |",
            self.written.cell(),
            self.written.achieved_rate,
            self.changes,
            if self.events_min == self.events_max {
                self.events_min.to_string()
            } else {
                format!("{}–{}", self.events_min, self.events_max)
            },
            if self.good() == self.checks.len() {
                "yes"
            } else {
                "**NO**"
            },
            self.good(),
            self.checks.len(),
            self.events_per_sec,
            self.drain_ms
        ));
        out.push(String::new());
        out.extend(Stats::header("latency from the write's send (ms)"));
        out.push(self.written.ack.row("write acknowledged by the apiserver"));
        out.push(
            self.baseline
                .row("kube-rs watch on the apiserver (baseline)"),
        );
        out.push(self.informerd.row(&format!(
            "informerd, {} watchers (every delivery)",
            s.watchers
        )));
        out.push(
            self.added
                .row("added by informerd (delivery − baseline's receipt of the same write)"),
        );
        out.push(String::new());
        out.push(format!(
            "Per-watcher p99: {}–{} ms (median watcher {} ms).",
            ms(self.per_watcher_p99_min),
            ms(self.per_watcher_p99.max),
            ms(self.per_watcher_p99.p50)
        ));
        out
    }

    /// The sidecar's memory at each step of the run, and its peak during churn.
    fn memory_markdown(&self, m: &Measured) -> Vec<String> {
        let mut out = Vec::<String>::new();
        out.push(
            "| sidecar memory (MiB) | before watchers | watchers open, idle | peak during churn \
             | after churn | watchers closed |"
                .into(),
        );
        out.push("|:--|---:|---:|---:|---:|---:|".into());
        type Field = fn(&Sample) -> u64;
        let rows: [(&str, Field); 3] = [
            ("allocated (jemalloc, Status)", |x| x.allocated),
            ("resident (Status)", |x| x.resident),
            ("VmRSS (/proc)", |x| x.vmrss),
        ];
        for ((label, f), peak) in rows.into_iter().zip(self.peak) {
            out.push(format!(
                "| {label} | {} | {} | {} | {} | {} |",
                mib(f(&m.before)),
                mib(f(&m.idle)),
                mib(peak),
                mib(f(&m.after)),
                mib(f(&m.closed))
            ));
        }
        out
    }

    /// The change log, the never-reading watcher, and what went wrong if anything did.
    fn notes_markdown(&self, m: &Measured) -> Vec<String> {
        let mut out = Vec::<String>::new();
        out.push(format!(
            "Change log after churn: {} entries, {} MiB.",
            m.after.log_entries,
            mib(m.after.log_bytes)
        ));
        let st = &m.stalled;
        out.push(format!(
            "Never-reading watcher: {}; dropped_watches = {}{}; it had received {} events ({}); \
             {}. Watches open after churn: {}.",
            if st.fell_behind {
                "ended with RESOURCE_EXHAUSTED, informerd-reason: FellBehind".to_string()
            } else {
                format!(
                    "**not ended with FellBehind** ({}; it is ended once more than its buffer \
                     of {WATCHER_BUFFER} events plus what its connection's HTTP/2 window holds \
                     is waiting)",
                    st.end
                )
            },
            m.dropped_watches,
            match self.dropped_at {
                Some(t) => format!(" (first seen {t:.0} s into churn)"),
                None => String::new(),
            },
            st.received,
            if st.contiguous {
                "in order, none missing"
            } else {
                "**with gaps or reordering**"
            },
            match st.resumed_at {
                Some(r) if r == st.last_revision + 1 => format!(
                    "a watch since its last revision {} resumed at {r}",
                    st.last_revision
                ),
                Some(r) => format!(
                    "**a watch since its last revision {} resumed at {r}**",
                    st.last_revision
                ),
                None if st.fell_behind => "**a watch since its last revision got nothing**".into(),
                None => "no resume tried".into(),
            },
            m.after.watchers
        ));
        if self.baseline_missing > 0 || m.baseline.error.is_some() || m.baseline.other_events > 0 {
            out.push(format!(
                "Baseline: {} writes not seen{}{}.",
                self.baseline_missing,
                m.baseline
                    .error
                    .as_ref()
                    .map(|e| format!(", ended: {e}"))
                    .unwrap_or_default(),
                if m.baseline.other_events > 0 {
                    format!(", {} ADDED/DELETED events", m.baseline.other_events)
                } else {
                    String::new()
                }
            ));
        }
        if m.relists > 0 || self.changes != self.written.ok as u64 {
            out.push(format!(
                "Note: the sidecar made {} changes for {} successful writes; {} relists.",
                self.changes, self.written.ok, m.relists
            ));
        }
        if let Some(e) = &self.written.first_error {
            out.push(format!(
                "Failed writes: {} (first: {e}).",
                self.written.failed
            ));
        }
        let bad: Vec<(usize, String)> = self
            .checks
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.ok())
            .map(|(i, c)| (i, format!("{} events; {}", c.events, c.problems.join("; "))))
            .collect();
        out.extend(discrepancies(
            &format!(
                "**DISCREPANCIES** in {} of {} watchers (expected revisions {}..={}, {} writes \
                 each):",
                bad.len(),
                self.checks.len(),
                m.start + 1,
                m.target,
                self.written.ok
            ),
            &bad,
        ));
        out
    }

    fn json(&self, s: &Settings, m: &Measured) -> Value {
        json!({
            "benchmark": "watch_fanout",
            "ok": self.ok,
            "informerd_version": m.version,
            "profile": profile(),
            "config": {
                "pods": s.pods,
                "watchers": s.watchers,
                "never_reading_watchers": 1,
                "target_rate_per_s": s.rate,
                "seconds": s.seconds,
                "concurrency": s.concurrency,
                "transform": {"drop": ["metadata.managedFields"]},
                "cpus": cpus(),
            },
            "writes": {
                "succeeded": self.written.ok,
                "failed": self.written.failed,
                "achieved_rate_per_s": round(self.written.achieved_rate, 1),
                "churn_seconds": round(self.churn_secs, 2),
            },
            "delivery": {
                "start_revision": m.start,
                "target_revision": m.target,
                "sidecar_changes": self.changes,
                "relists": m.relists,
                "watchers": self.checks.len(),
                "watchers_correct": self.good(),
                "events_per_watcher_min": self.events_min,
                "events_per_watcher_max": self.events_max,
                "events_delivered": self.delivered,
                "events_per_s": self.events_per_sec.round(),
                "last_watcher_done_after_last_write_ms": self.drain_ms.round(),
                "discrepancies": self
                    .checks
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| !c.ok())
                    .map(|(i, c)| json!({"watcher": i, "events": c.events, "problems": c.problems}))
                    .collect::<Vec<_>>(),
            },
            "latency": {
                "write_ack": self.written.ack.json(),
                "baseline_kube_watch": self.baseline.json(),
                "informerd_watchers": self.informerd.json(),
                "added_by_informerd": self.added.json(),
                "per_watcher_p99_ms": {
                    "min": round(self.per_watcher_p99_min as f64 / 1000.0, 2),
                    "median": round(self.per_watcher_p99.p50 as f64 / 1000.0, 2),
                    "max": round(self.per_watcher_p99.max as f64 / 1000.0, 2),
                },
                "baseline_writes_not_seen": self.baseline_missing,
                "baseline_error": m.baseline.error,
            },
            "memory": {
                "before_watchers": m.before.memory_json(),
                "watchers_open_idle": m.idle.memory_json(),
                "peak_during_churn": {
                    "allocated_bytes": self.peak[0],
                    "resident_bytes": self.peak[1],
                    "vmrss_bytes": self.peak[2],
                },
                "after_churn": m.after.memory_json(),
                "after_watchers_closed": m.closed.memory_json(),
                "change_log_after_churn": {
                    "entries": m.after.log_entries,
                    "bytes": m.after.log_bytes,
                },
                "samples": m.samples.iter().map(|x| x.json(m.churn_start)).collect::<Vec<_>>(),
            },
            "never_reading_watcher": {
                "fell_behind": m.stalled.fell_behind,
                "end": m.stalled.end,
                "dropped_watches": m.dropped_watches,
                "dropped_seen_at_s": self.dropped_at.map(|t| round(t, 1)),
                "events_received": m.stalled.received,
                "last_revision": m.stalled.last_revision,
                "in_order": m.stalled.contiguous,
                "resumed_at_revision": m.stalled.resumed_at,
            },
            "watchers_open_after_churn": m.after.watchers,
        })
    }
}
