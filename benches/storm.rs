//! Reconnect storms (issue 35): hundreds of clients reconnecting at once must not take the
//! sidecar down nor stall it, and the cache, not the apiserver, should serve them. 300 clients
//! (half Watch with the initial state, half WatchKeys with a Get of each key, as a controller
//! reads it; `storm/client.rs`) each hold their own view of the seeded pods; then, one after
//! the other:
//!
//! - `initial`: the 300 clients start at once against a synced sidecar;
//! - `cold`: SIGTERM, the snapshot removed, start again: another epoch, so the sidecar lists
//!   from the apiserver and every client starts again from nothing;
//! - `warm`: SIGTERM, start again from the snapshot written at exit: the same epoch, the
//!   sidecar resumes its watch of the apiserver and the clients resume with their tokens;
//! - `cut`: every client's connection dropped at once (a network cut between the clients and
//!   the sidecar), the sidecar running on: every client resumes with its token.
//!
//! While the clients are away (and the sidecar is down, for a restart) `STORM_WRITES` writes
//! change the pods (relabels, and a tenth as many pods created and deleted), so that every
//! client has something to catch up with; then every client reconnects in the same instant.
//!
//! `make bench-storm` (a private control plane of its own, stopped at the end). Settings, all
//! optional: `STORM_OBJECTS` (pods, default 10000), `STORM_NAMESPACES` (default 4),
//! `STORM_CLIENTS` (default 300), `STORM_WRITES` (default 300), `STORM_KINDS` (default
//! `initial,cold,warm,cut`), `STORM_PREFIX` (default `storm`; pods are seeded into
//! `PREFIX-0..` when fewer are there), `STORM_SEED` (`apply`, the default: `seed pods` through
//! the apiserver, about 5 minutes per 10,000 pods here; `etcd`: written straight into etcd, a
//! few thousand a second, what `STORM_SEED=etcd make bench-storm` uses for 100,000, on a
//! control plane without the garbage collector, since such pods' owners are not written),
//! `STORM_KEY_READS` (`objects`, the default: a WatchKeys client reads each key from the object
//! it carries, `send_objects`; `get`: by a Get of each key), `BENCH_INFORMERD` (another
//! informerd binary), `STORM_OUT` (base name of the result files, default `storm`).
//!
//! Measured, per storm (printed, and written to `benches/results/storm.md` and `.json`; never
//! asserted), from the instant the clients may reconnect (for a restart: the sidecar's spawn)
//! until every client's view equals the apiserver's pods:
//! - the sidecar's peak resident memory (VmRSS sampled every 100 ms; for a restart also its
//!   VmHWM, which covers the whole new process) and CPU seconds (utime + stime);
//! - the time until each client is current again: p50, p99 and the last, across clients;
//! - the clients that had to start again from nothing (Watch initial state, WatchKeys resync);
//! - the apiserver's pod requests meanwhile, from its own `/metrics`: LIST
//!   (`apiserver_request_total`), and WATCH requests opened (those that ended, counted by
//!   `apiserver_request_total` when they end, plus the change in `apiserver_longrunning_requests`,
//!   the ones open): informerd's initial lists are streaming lists, which the apiserver counts
//!   as WATCH. The bench's own writes (PATCH, CREATE, DELETE) are not counted.
//!
//! Checked (the run fails otherwise): every client becomes current, and the sidecar runs at the
//! end of each storm.

#[path = "storm/client.rs"]
mod client;
mod common;

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use client::{Control, Kind, Progress, Spec, View};
use common::{cluster, env_or, process, results, sidecar, stats::Stats};
use futures::{StreamExt, TryStreamExt};
use informerd::transform::{CONTROLLER_DROP, CONTROLLER_KEEP};
use informerd::vocab::memory::status_bytes;
use informerd_testkit::{pod, ControlPlane, Sidecar, SidecarConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_informerd");
/// Only so that a broken run ends.
const DEADLINE: Duration = Duration::from_secs(1800);

fn main() -> ExitCode {
    common::main_on_runtime("storm", bench())
}

/// One storm's figures.
#[derive(Serialize)]
struct Row {
    storm: String,
    peak_rss_mib: f64,
    /// VmHWM of a process started by the storm (its whole life); None for the others.
    hwm_mib: Option<f64>,
    cpu_seconds: f64,
    current_p50_s: f64,
    current_p99_s: f64,
    current_last_s: f64,
    watch_last_s: f64,
    keys_last_s: f64,
    clients_started_over: usize,
    apiserver_lists: f64,
    apiserver_watches_opened: f64,
    sidecar_objects_listed: u64,
}

#[derive(Serialize)]
struct Report {
    /// The command that produced it.
    command: String,
    /// How the WatchKeys clients read each key.
    key_reads: &'static str,
    objects: usize,
    namespaces: usize,
    clients: usize,
    writes_per_storm: usize,
    profile: &'static str,
    cpus: usize,
    storms: Vec<Row>,
}

struct Settings {
    objects: usize,
    namespaces: usize,
    clients: usize,
    writes: usize,
    kinds: Vec<String>,
    prefix: String,
    /// `STORM_SEED=etcd`: missing pods are written straight into etcd.
    seed_etcd: bool,
    /// `STORM_KEY_READS=get`: WatchKeys clients Get each key.
    key_reads_get: bool,
    /// `STORM_OUT`: base name of the result files in `benches/results/`.
    out: String,
}

fn settings() -> anyhow::Result<Settings> {
    let kinds: String = env_or("STORM_KINDS", "initial,cold,warm,cut".to_owned())?;
    let kinds: Vec<String> = kinds.split(',').map(|k| k.trim().to_owned()).collect();
    for k in &kinds {
        anyhow::ensure!(
            ["initial", "cold", "warm", "cut"].contains(&k.as_str()),
            "STORM_KINDS: unknown storm {k:?} (initial, cold, warm, cut)"
        );
    }
    Ok(Settings {
        objects: env_or("STORM_OBJECTS", 10_000)?,
        namespaces: env_or("STORM_NAMESPACES", 4)?,
        clients: env_or("STORM_CLIENTS", 300)?,
        writes: env_or("STORM_WRITES", 300)?,
        kinds,
        prefix: env_or("STORM_PREFIX", "storm".to_owned())?,
        seed_etcd: one_of("STORM_SEED", ["apply", "etcd"])? == "etcd",
        key_reads_get: one_of("STORM_KEY_READS", ["objects", "get"])? == "get",
        out: env_or("STORM_OUT", "storm".to_owned())?,
    })
}

/// The value of `name`, one of `values` (the first when unset).
fn one_of<const N: usize>(name: &str, values: [&'static str; N]) -> anyhow::Result<&'static str> {
    let given: String = env_or(name, values[0].to_owned())?;
    values
        .into_iter()
        .find(|v| *v == given)
        .ok_or_else(|| anyhow::anyhow!("{name}: {given:?} is not one of {values:?}"))
}

/// What a storm works on: the apiserver, the sidecar, the clients.
struct Rig {
    kube: kube::Client,
    namespaces: Vec<String>,
    sidecar: Sidecar,
    snapshot: std::path::PathBuf,
    control: Control,
    clients: Vec<(Kind, Arc<Mutex<Progress>>)>,
    /// The apiserver's pods as the bench's writes left them.
    truth: View,
    /// Pods the bench created, to delete in the next storm.
    created: Vec<String>,
    writes: usize,
}

async fn bench() -> anyhow::Result<()> {
    let s = settings()?;
    let cp = ControlPlane::get();
    let kube = cp.client().await?;
    let namespaces = cluster::namespaces(&s.prefix, s.namespaces);
    let present = cluster::count_pods(&kube, &namespaces).await?;
    if present < s.objects {
        eprintln!(
            "seeding {} pods into {}-0..{} ({present} present)",
            s.objects, s.prefix, s.namespaces
        );
        if s.seed_etcd {
            eprintln!(
                "{}",
                cluster::seed_etcd(cp, &s.prefix, s.objects, s.namespaces)?
            );
        } else {
            eprintln!("{}", cp.seed(&s.prefix, s.objects, s.namespaces)?);
        }
    }
    let snapshot =
        std::env::temp_dir().join(format!("informerd-bench-storm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&snapshot);
    let config = SidecarConfig::new()
        .snapshot(&snapshot, |s| s)
        .resource(cluster::pods_resource(
            &namespaces,
            CONTROLLER_KEEP,
            CONTROLLER_DROP,
        ));
    let bin: String = env_or("BENCH_INFORMERD", BIN.to_owned())?;
    let sc = Sidecar::start(Path::new(&bin), cp, &config)?;
    wait_synced(&sc).await?;
    let truth = apiserver_pods(&kube, &namespaces).await?;
    let held = truth.len();
    eprintln!("sidecar synced: {held} pods; {} clients", s.clients);
    let (control, signals) = Control::new();
    control.close_gate();
    let socket = sc.socket().display().to_string();
    let clients = (0..s.clients)
        .map(|i| {
            let kind = if i % 2 == 0 { Kind::Watch } else { Kind::Keys };
            let spec = Spec {
                kind,
                socket: socket.clone(),
                namespace: String::new(),
                get_each: s.key_reads_get,
            };
            (kind, client::spawn(spec, signals.clone()))
        })
        .collect();
    let mut rig = Rig {
        kube,
        namespaces,
        sidecar: sc,
        snapshot,
        control,
        clients,
        truth,
        created: Vec::new(),
        writes: s.writes,
    };
    let mut rows = Vec::new();
    if !s.kinds.iter().any(|k| k == "initial") {
        // The clients must hold their views before any other storm.
        storm(&mut rig, "initial").await?;
    }
    for kind in &s.kinds {
        let row = storm(&mut rig, kind)
            .await
            .inspect_err(|_| common::print_log_tail(&rig.sidecar))?;
        eprintln!(
            "{kind}: every client current after {:.2} s",
            row.current_last_s
        );
        rows.push(row);
    }
    let seed = if s.seed_etcd { " STORM_SEED=etcd" } else { "" };
    let reads = if s.key_reads_get {
        " STORM_KEY_READS=get"
    } else {
        ""
    };
    let out = if s.out == "storm" {
        String::new()
    } else {
        format!(" STORM_OUT={}", s.out)
    };
    let report = Report {
        command: format!(
            "STORM_OBJECTS={}{seed}{reads}{out} make bench-storm",
            s.objects
        ),
        key_reads: if s.key_reads_get {
            "with a Get of each key"
        } else {
            "reading each key from the object it carries (send_objects)"
        },
        objects: held,
        namespaces: s.namespaces,
        clients: s.clients,
        writes_per_storm: s.writes,
        profile: common::profile(),
        cpus: common::cpus(),
        storms: rows,
    };
    let text = markdown(&report);
    print!("{text}");
    std::fs::write(results::dir()?.join(format!("{}.md", s.out)), &text)?;
    results::write_json(&format!("{}.json", s.out), &report)?;
    let _ = std::fs::remove_dir_all(&rig.snapshot);
    Ok(())
}

/// One storm: the clients away, the writes, every client back at once; its figures.
async fn storm(rig: &mut Rig, kind: &str) -> anyhow::Result<Row> {
    if kind != "initial" {
        wait_until("every client holds a resume token", || {
            rig.clients.iter().all(|(_, p)| p.lock().unwrap().resumable)
        })
        .await?;
    }
    let before_relists = relists(&rig.clients);
    let listed_before = listed(&rig.sidecar).await?;
    let api_before = ApiCounts::read(&rig.kube).await?;
    rig.control.close_gate();
    match kind {
        "cold" | "warm" => {
            let exit = rig.sidecar.terminate()?;
            anyhow::ensure!(exit.success(), "informerd exited with {exit}");
            if kind == "cold" {
                std::fs::remove_file(informerd::snapshot::path(&rig.snapshot, "pods"))?;
            }
        }
        "cut" => rig.control.cut(),
        _ => {}
    }
    if kind != "initial" {
        write(rig).await?;
    }
    let target = Arc::new(rig.truth.clone());
    for (_, p) in &rig.clients {
        p.lock().unwrap().set_target(target.clone());
    }
    let restart = matches!(kind, "cold" | "warm");
    let started = Instant::now();
    if restart {
        rig.sidecar.restart()?;
    }
    let pid = rig.sidecar.pid().expect("the sidecar runs");
    let ticks_before = if restart {
        0
    } else {
        process::cpu_ticks(pid).unwrap_or(0)
    };
    let sampler = Sampler::start(pid);
    rig.control.open_gate();
    wait_until("every client is current", || {
        rig.clients
            .iter()
            .all(|(_, p)| p.lock().unwrap().current_at.is_some())
    })
    .await?;
    let peak_rss = sampler.stop().await;
    let cpu = process::cpu_ticks(pid).unwrap_or(0) - ticks_before;
    anyhow::ensure!(!process::exited(pid), "{kind}: the sidecar died");
    let api_after = ApiCounts::read(&rig.kube).await?;
    // A restarted sidecar counts from zero.
    let listed = listed(&rig.sidecar).await? - if restart { 0 } else { listed_before };
    let after_relists = relists(&rig.clients);
    // Milliseconds until each client (of `which` kind, or all) was current.
    let millis = |which: Option<Kind>| -> Stats {
        Stats::of(
            rig.clients
                .iter()
                .filter(|(k, _)| which.is_none_or(|w| w == *k))
                .map(|(_, p)| {
                    let at = p.lock().unwrap().current_at.expect("current");
                    at.saturating_duration_since(started).as_millis() as i64
                })
                .collect(),
        )
    };
    let all = millis(None);
    let s = |ms: i64| ms as f64 / 1000.0;
    Ok(Row {
        storm: kind.to_owned(),
        peak_rss_mib: mib(peak_rss),
        hwm_mib: restart.then(|| mib(status_bytes(pid, "VmHWM").unwrap_or(0))),
        cpu_seconds: cpu as f64 / process::clock_ticks() as f64,
        current_p50_s: s(all.p50),
        current_p99_s: s(all.p99),
        current_last_s: s(all.max),
        watch_last_s: s(millis(Some(Kind::Watch)).max),
        keys_last_s: s(millis(Some(Kind::Keys)).max),
        clients_started_over: before_relists
            .iter()
            .zip(&after_relists)
            .filter(|(b, a)| a > b)
            .count(),
        apiserver_lists: api_after.lists - api_before.lists,
        apiserver_watches_opened: (api_after.watches_ended - api_before.watches_ended)
            + (api_after.watches_open - api_before.watches_open),
        sidecar_objects_listed: listed,
    })
}

/// `rig.writes` writes while the clients are away: relabels of distinct pods, and a tenth as
/// many pods created (those of the previous storm deleted); `rig.truth` follows them.
async fn write(rig: &mut Rig) -> anyhow::Result<()> {
    let round = round_label();
    let ns = rig.namespaces[0].clone();
    let names: Vec<String> = rig
        .truth
        .keys()
        .filter(|k| !k.contains("/storm-x-"))
        .take(rig.writes)
        .cloned()
        .collect();
    let kube = rig.kube.clone();
    let patched: Vec<(String, String)> = futures::stream::iter(names)
        .map(|key| {
            let kube = kube.clone();
            async move {
                let (ns, name) = key.split_once('/').expect("namespace/name");
                let pods: Api<Pod> = Api::namespaced(kube, ns);
                let patch = json!({"metadata": {"labels": {"storm": round.to_string()}}});
                let pod = pods
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                anyhow::Ok((key, pod.metadata.resource_version.unwrap_or_default()))
            }
        })
        .buffer_unordered(16)
        .try_collect()
        .await?;
    rig.truth.extend(patched);
    let pods: Api<Pod> = Api::namespaced(rig.kube.clone(), &ns);
    for name in std::mem::take(&mut rig.created) {
        pods.delete(&name, &DeleteParams::default().grace_period(0))
            .await?;
        rig.truth.remove(&format!("{ns}/{name}"));
    }
    for i in 0..(rig.writes / 10).max(1) {
        let name = format!("storm-x-{round}-{i}");
        let made = pod(&name)
            .label("app", "storm")
            .apply(&rig.kube, &ns)
            .await?;
        let rv = made.metadata.resource_version.unwrap_or_default();
        rig.truth.insert(format!("{ns}/{name}"), rv);
        rig.created.push(name);
    }
    Ok(())
}

/// The label value of one storm's writes, different in each run and storm (a patch that
/// changes nothing makes no event).
fn round_label() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// The apiserver's pods of the namespaces: `namespace/name` → resourceVersion.
async fn apiserver_pods(kube: &kube::Client, namespaces: &[String]) -> anyhow::Result<View> {
    let mut view = View::new();
    for ns in namespaces {
        let pods: Api<Pod> = Api::namespaced(kube.clone(), ns);
        for p in pods.list_metadata(&ListParams::default()).await?.items {
            let m = p.metadata;
            let name = m.name.unwrap_or_default();
            view.insert(
                format!("{ns}/{name}"),
                m.resource_version.unwrap_or_default(),
            );
        }
    }
    Ok(view)
}

/// The apiserver's pod requests so far, from its `/metrics`.
struct ApiCounts {
    lists: f64,
    watches_ended: f64,
    watches_open: f64,
}

impl ApiCounts {
    async fn read(kube: &kube::Client) -> anyhow::Result<ApiCounts> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = kube.request_text(request).await?;
        let sum = |metric: &str, verb: &str| -> f64 {
            text.lines()
                .filter(|l| l.starts_with(metric))
                .filter(|l| l.contains(&format!("verb=\"{verb}\"")))
                .filter(|l| l.contains("resource=\"pods\"") && l.contains("subresource=\"\""))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        Ok(ApiCounts {
            lists: sum("apiserver_request_total{", "LIST"),
            watches_ended: sum("apiserver_request_total{", "WATCH"),
            watches_open: sum("apiserver_longrunning_requests{", "WATCH"),
        })
    }
}

/// The objects the sidecar's scopes have listed from the apiserver since the process started.
async fn listed(sc: &Sidecar) -> anyhow::Result<u64> {
    let mut api = informerd_client::connect(&sc.socket().display().to_string()).await?;
    let status = sidecar::status(&mut api, "pods").await?;
    Ok(status
        .resources
        .iter()
        .flat_map(|r| &r.scopes)
        .map(|s| s.listed)
        .sum())
}

async fn wait_synced(sc: &Sidecar) -> anyhow::Result<()> {
    let mut api = informerd_client::connect(&sc.socket().display().to_string()).await?;
    let started = Instant::now();
    while !sidecar::status(&mut api, "pods").await?.synced {
        anyhow::ensure!(started.elapsed() < DEADLINE, "the sidecar never synced");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Each client's count of starts from nothing.
fn relists(clients: &[(Kind, Arc<Mutex<Progress>>)]) -> Vec<u64> {
    clients
        .iter()
        .map(|(_, p)| p.lock().unwrap().relists)
        .collect()
}

async fn wait_until(what: &str, check: impl Fn() -> bool) -> anyhow::Result<()> {
    let started = Instant::now();
    while !check() {
        anyhow::ensure!(started.elapsed() < DEADLINE, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Samples a process's VmRSS every 100 ms until stopped; the largest.
struct Sampler {
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        use std::sync::atomic::Ordering;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(status_bytes(pid, "VmRSS").unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak.max(status_bytes(pid, "VmRSS").unwrap_or(0))
        });
        Sampler { stop, task }
    }

    async fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap_or(0)
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn markdown(r: &Report) -> String {
    let mut lines = vec![
        format!(
            "# Reconnect storms ({} build, {} pods in {} namespaces, {} clients, {} CPUs)",
            r.profile, r.objects, r.namespaces, r.clients, r.cpus
        ),
        String::new(),
        format!(
            "`{}` on a private control plane; \
             `benches/storm.rs` says what is measured. Half the clients Watch (initial state, \
             then resume by token), half use WatchKeys {}; {} writes \
             (relabels, a tenth as many pods created and deleted) are made while the clients \
             are away. Times run from the instant the clients may reconnect (for a restart, \
             the sidecar's spawn) until each client's view equals the apiserver's pods.",
            r.command, r.key_reads, r.writes_per_storm
        ),
        String::new(),
        "| storm | sidecar peak RSS (MiB) | sidecar CPU (s) | current p50 (s) | p99 (s) | last (s) | last Watch / WatchKeys (s) | clients that started over | apiserver LIST | apiserver WATCH opened | objects the sidecar listed |".into(),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |".into(),
    ];
    for s in &r.storms {
        let hwm = s
            .hwm_mib
            .map_or(String::new(), |h| format!(" (VmHWM {h:.0})"));
        lines.push(format!(
            "| {} | {:.0}{hwm} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} | {} | {} | {} | {} |",
            s.storm,
            s.peak_rss_mib,
            s.cpu_seconds,
            s.current_p50_s,
            s.current_p99_s,
            s.current_last_s,
            s.watch_last_s,
            s.keys_last_s,
            s.clients_started_over,
            s.apiserver_lists,
            s.apiserver_watches_opened,
            s.sidecar_objects_listed,
        ));
    }
    lines.push(String::new());
    lines.push(
        "A cold restart has a new epoch: the sidecar lists from the apiserver (one streaming \
         list per namespace, counted as WATCH) and every client starts over from the cache. \
         A warm restart keeps the epoch and the clients' tokens; the sidecar resumes its \
         watches from the snapshot (one WATCH per namespace), or lists when the apiserver \
         answers 410 Gone (the last column says which); a WatchKeys stream whose keys were in \
         flight at SIGTERM resyncs. A cut asks nothing of the apiserver."
            .into(),
    );
    lines.join("\n") + "\n"
}
