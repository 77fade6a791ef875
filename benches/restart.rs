//! Warm against cold restart: how long informerd takes from its start to serving synced, and
//! what it asks of the apiserver meanwhile, when it starts from nothing and when it starts
//! from the snapshot it wrote at SIGTERM.
//!
//! `make bench-restart` (a private control plane of its own, stopped at the end; never seed
//! large counts on a shared one). Settings, all optional: `BENCH_PODS` (default 5000),
//! `BENCH_NAMESPACES` (default 4), `BENCH_PREFIX` (default `restart`); pods are seeded with the
//! project's seeder into `PREFIX-0..` when fewer are there. The sidecar caches them with the
//! controller profile. `BENCH_INFORMERD` measures another informerd binary than this build's
//! (an older release, to compare with).
//!
//! Measured (printed, and written to `benches/results/restart.md`; never asserted):
//! - seconds from spawning `informerd serve` to the first `Status` that says synced (polled
//!   every 50 ms): for the warm start this includes loading the snapshot;
//! - the apiserver's LIST requests for pods during that time, from its own
//!   `apiserver_request_total{verb="LIST",resource="pods"}` on `/metrics`;
//! - the objects informerd's scopes listed (Status `listed`): informerd's initial lists are
//!   streaming lists, which the apiserver counts as WATCH requests, so this is what says
//!   how much a start transferred;
//! - the SIGTERM that wrote the snapshot: seconds to exit, and the snapshot's size.
//!
//! Checked (the run fails otherwise): a client that watched before the SIGTERM resumes with its
//! token after the warm start and receives exactly the events of the apiserver's own watch
//! over the time informerd was down, among them every change the bench made meanwhile
//! (`restart/probe.rs`).

mod common;
#[path = "restart/probe.rs"]
mod probe;

use std::{
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use common::{cluster, env_or, results, sidecar};
use informerd::transform::{CONTROLLER_DROP, CONTROLLER_KEEP};
use informerd_client::connect;
use informerd_testkit::{ControlPlane, Sidecar, SidecarConfig};

const BIN: &str = env!("CARGO_BIN_EXE_informerd");

/// One start: how long, and what it asked of the apiserver.
struct Start {
    seconds: f64,
    list_requests: f64,
    listed: u64,
}

fn main() -> ExitCode {
    common::main_on_runtime("restart", bench())
}

async fn bench() -> anyhow::Result<()> {
    let pods: usize = env_or("BENCH_PODS", 5000)?;
    let ns_count: usize = env_or("BENCH_NAMESPACES", 4)?;
    let prefix: String = env_or("BENCH_PREFIX", "restart".to_string())?;
    let cp = ControlPlane::get();
    let client = cp.client().await?;
    let namespaces = cluster::namespaces(&prefix, ns_count);
    let present = cluster::count_pods(&client, &namespaces).await?;
    if present < pods {
        eprintln!("seeding {pods} pods into {prefix}-0..{ns_count} ({present} present)");
        eprintln!("{}", cp.seed(&prefix, pods, ns_count)?);
    }
    let held = cluster::count_pods(&client, &namespaces).await?;

    let dir = std::env::temp_dir().join(format!("informerd-bench-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = SidecarConfig::new()
        .snapshot(&dir, |s| s)
        .resource(cluster::pods_resource(
            &namespaces,
            CONTROLLER_KEEP,
            CONTROLLER_DROP,
        ));

    let before = list_requests(&client).await?;
    let started = Instant::now();
    let bin: String = env_or("BENCH_INFORMERD", BIN.to_owned())?;
    let mut sc = Sidecar::start(Path::new(&bin), cp, &config)?;
    let cold = measure(&sc, &client, started, before).await?;
    let socket = sc.socket().display().to_string();
    // (The connection closes before the SIGTERM: an open one would hold the shutdown.)
    let probe = probe::before(&client, &mut connect(&socket).await?, &namespaces[0])
        .await
        .inspect_err(|_| common::print_log_tail(&sc))?;

    let stopping = Instant::now();
    let exit = sc.terminate()?;
    anyhow::ensure!(exit.success(), "informerd exited with {exit}");
    let stop_seconds = stopping.elapsed().as_secs_f64();
    let snapshot_bytes = std::fs::metadata(informerd::snapshot::path(&dir, "pods"))?.len();
    let (made, rv_after) = probe::change(&client, &probe).await?;

    let before = list_requests(&client).await?;
    let started = Instant::now();
    sc.restart()?;
    let warm = measure(&sc, &client, started, before).await?;
    let mut api = connect(&socket).await?;
    let changes = probe::after(&client, &mut api, probe, made, &rv_after, &namespaces).await?;
    drop(api);
    probe::clean(&client, &namespaces[0]).await?;
    let log = sc.plain_log();
    let written_ms = logged_ms(&log, "snapshot written");
    let loaded_ms = logged_ms(&log, "restored the cache from its snapshot");
    common::print_log_tail(&sc);
    drop(sc);
    let _ = std::fs::remove_dir_all(&dir);

    let report = [
        format!("# Warm restart ({} build, {held} pods in {ns_count} namespaces, controller profile)", common::profile()),
        String::new(),
        "`make bench-restart BENCH_PODS=N` on a private control plane; `benches/restart.rs` says what is measured.".into(),
        String::new(),
        "| start | seconds to synced | LIST requests (pods) | objects listed |".into(),
        "| --- | ---: | ---: | ---: |".into(),
        row("cold (no snapshot)", &cold),
        row("warm (snapshot from SIGTERM)", &warm),
        String::new(),
        format!("SIGTERM to exit, snapshot written: {stop_seconds:.2} s; snapshot: {snapshot_bytes} bytes ({} per pod).", snapshot_bytes / held.max(1) as u64),
        format!("informerd's log: snapshot written in {written_ms} ms, loaded (read, checked, restored) in {loaded_ms} ms."),
        format!("informerd: {}.", if bin == BIN { "this build" } else { bin.as_str() }),
        String::new(),
        resumed_text(&changes),
    ]
    .join("\n")
        + "\n";
    print!("{report}");
    std::fs::write(results::dir()?.join("restart.md"), &report)?;
    anyhow::ensure!(
        resumed_exactly(&changes),
        "the resumed watch did not deliver exactly the changes made while informerd was down: \
         made {:?}, informerd delivered {:?}, the apiserver's watch {:?}",
        changes.made,
        changes.informerd,
        changes.apiserver
    );
    Ok(())
}

/// Whether the resumed watch delivered exactly the apiserver's events over the span, among them
/// every change the bench made. (The apiserver has more events than changes made: a deleted
/// pod is first MODIFIED with its deletionTimestamp.)
fn resumed_exactly(c: &probe::Changes) -> bool {
    c.informerd == c.apiserver && c.made.iter().all(|m| c.apiserver.contains(m))
}

/// What the client watching across the restart got, in a sentence.
fn resumed_text(c: &probe::Changes) -> String {
    let verdict = if resumed_exactly(c) {
        "exactly those"
    } else {
        "NOT those (the run fails)"
    };
    format!(
        "A client watching before the SIGTERM resumed with its token after the warm start. \
         While informerd was down, {} changes were made ({}); the apiserver's own watch over \
         that span gave {} events in the bench's namespaces, and the resumed watch delivered \
         {verdict} ({} events).",
        c.made.len(),
        c.made.join(", "),
        c.apiserver.len(),
        c.informerd.len()
    )
}

/// The `elapsed_ms` of the last log line that says `what` ("?" when there is none).
fn logged_ms(log: &str, what: &str) -> String {
    log.lines()
        .rfind(|l| l.contains(what))
        .and_then(|l| l.split("elapsed_ms=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("?")
        .to_owned()
}

fn row(what: &str, s: &Start) -> String {
    format!(
        "| {what} | {:.2} | {} | {} |",
        s.seconds, s.list_requests, s.listed
    )
}

/// Waits until the sidecar is synced; what the start took since `started`.
async fn measure(
    sc: &Sidecar,
    client: &kube::Client,
    started: Instant,
    lists_before: f64,
) -> anyhow::Result<Start> {
    let mut api = informerd_client::connect(&sc.socket().display().to_string()).await?;
    loop {
        let status = sidecar::status(&mut api, "pods").await?;
        if status.synced {
            let seconds = started.elapsed().as_secs_f64();
            let listed = status
                .resources
                .iter()
                .flat_map(|r| &r.scopes)
                .map(|s| s.listed)
                .sum();
            let list_requests = list_requests(client).await? - lists_before;
            return Ok(Start {
                seconds,
                list_requests,
                listed,
            });
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "not synced after 30 min"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The apiserver's count of LIST requests for pods, from its own metrics.
async fn list_requests(client: &kube::Client) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains("verb=\"LIST\"") && l.contains("resource=\"pods\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}
