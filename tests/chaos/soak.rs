//! The soak (`make soak DURATION=30m`, ignored by `cargo test`): the chaos suite's rig under
//! steady churn for a long time, a fault from the mixable kinds every cycle, and with the churn
//! stopped after each cycle the same divergence check as the chaos phases. Every 5 s it samples
//! informerd's RSS, jemalloc's allocated bytes, the objects cached and the watchers open; at the
//! end it writes them with the checks to SOAK_RESULTS (JSON) and the same path with `.svg` (a
//! plot), and prints the memory slope after warm-up (least squares, MiB per hour). A check
//! whose control plane does not answer is reported as such, retried, or skipped, never counted
//! as a divergence (check.rs); soak.json says when and why.
//!
//! SOAK_DURATION (`30m`, `1h`, `600s` or seconds; default 10m), SOAK_CYCLE_SECONDS (churn per cycle, default 50), SOAK_PODS
//! (default 500), CHAOS_SUBSCRIBERS (default 100) and CHAOS_SEED (which faults) set it.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rand::Rng;
use serde_json::json;

use crate::{
    check::{check, Check, Outcome},
    env_number,
    faults::{inject, Fault},
    plot::{slope, svg, Line},
    rig::Rig,
    truth::converge,
};

/// One sample of informerd's metrics.
#[derive(Debug, Clone, Copy)]
struct Sample {
    seconds: f64,
    rss: f64,
    allocated: f64,
    objects: f64,
    watchers: f64,
}

const MIB: f64 = 1048576.0;

/// How long a check waits for an unavailable control plane to answer again before it is
/// skipped (check.rs).
const RECOVER_SECONDS: u64 = 300;

/// The faults the soak injects. Decision: none that restarts informerd (SIGKILL, or the cut
/// list at its start-up), since a restart gives memory back and would hide a leak that the
/// slope is there to show; the chaos suite covers restarts.
const SOAK_FAULTS: [Fault; 4] = [
    Fault::CutAll,
    Fault::Stall,
    Fault::CompactKillApiserver,
    Fault::SwitchApiservers,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the soak runs for minutes: make soak DURATION=30m"]
async fn soak() -> anyhow::Result<()> {
    let duration = soak_duration()?;
    let cycle = env_number("SOAK_CYCLE_SECONDS", 50) as u32;
    let pods = env_number("SOAK_PODS", 500) as usize;
    let (mut rig, mut rng, seed) = Rig::synced("soak", pods).await?;
    eprintln!("soak: {duration:?}");
    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sampler = tokio::spawn(sample_every(
        rig.metrics_port,
        started,
        samples.clone(),
        Duration::from_secs(5),
    ));
    let mut checks = Vec::new();
    let cp = rig.plane.control_plane().clone();
    while started.elapsed() < duration {
        let churn = {
            let cp = cp.clone();
            let prefix = rig.prefix.clone();
            let n = rig.namespaces.len();
            tokio::task::spawn_blocking(move || cp.churn(&prefix, n, 20, cycle))
        };
        tokio::time::sleep(Duration::from_secs(u64::from(cycle) / 2)).await;
        let fault = SOAK_FAULTS[rng.random_range(0..SOAK_FAULTS.len())];
        let injected = inject(fault, &mut rig, &mut rng).await;
        let churned = churn.await?;
        // A fault or churn that failed because the control plane does not answer is not
        // informerd's failure: the check below reports it. The seeder also gives up on a
        // connection its apiserver dropped while dying (as in the chaos phases). Any other
        // failure stops the soak.
        let churned = churned.map_err(anyhow::Error::from);
        for (what, result) in [
            ("the fault", injected.map(drop)),
            ("the churn", churned.map(drop)),
        ] {
            let Err(error) = result else { continue };
            match cp.availability().await {
                Err(why) => eprintln!("soak: {fault:?}: {what} failed: {error:#} ({why})"),
                Ok(()) if what == "the churn" && fault.kills_apiserver() => {
                    eprintln!("soak: {fault:?}: the churn stopped early: {error:#}");
                }
                Ok(()) => return Err(error.context(format!("{fault:?}: {what}"))),
            }
        }
        let check = check(
            format!("{fault:?}"),
            started,
            Duration::from_secs(RECOVER_SECONDS),
            async || converge(&rig).await,
            async || cp.availability().await,
        )
        .await;
        eprintln!(
            "soak {:.0} s: {} then {}",
            check.seconds,
            check.fault,
            check.line()
        );
        checks.push(check);
    }
    sampler.abort();
    let samples = samples.lock().unwrap().clone();
    let report = report(&samples, &checks, seed, duration);
    rig.finish().await;
    let diverged: Vec<_> = checks
        .iter()
        .filter(|c| c.agreed() == Some(false))
        .collect();
    assert!(
        diverged.is_empty(),
        "{} of {} checks diverged: {:?}",
        diverged.len(),
        checks.len(),
        diverged.iter().map(|c| c.line()).collect::<Vec<_>>()
    );
    report
}

/// SOAK_DURATION: `90s`, `30m`, `2h` or a number of seconds; 10 minutes when unset.
fn soak_duration() -> anyhow::Result<Duration> {
    let text = std::env::var("SOAK_DURATION").unwrap_or_else(|_| "10m".into());
    let (number, unit) = text.split_at(text.trim_end_matches(['s', 'm', 'h']).len());
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if scale > 0 && n > 0 => Ok(Duration::from_secs(n * scale)),
        _ => anyhow::bail!("SOAK_DURATION={text}: give a duration such as 600s, 30m or 2h"),
    }
}

/// Samples informerd's metrics every `every` until aborted (a failed scrape, during a restart
/// of informerd, is skipped).
async fn sample_every(port: u16, started: Instant, into: Arc<Mutex<Vec<Sample>>>, every: Duration) {
    loop {
        if let Ok(m) = informerd_testkit::scrape_metrics(port).await {
            into.lock().unwrap().push(Sample {
                seconds: started.elapsed().as_secs_f64(),
                rss: m.sum("informerd_memory_resident_bytes", &[]),
                allocated: m.sum("informerd_memory_allocated_bytes", &[]),
                objects: m.sum("informerd_cache_objects", &[]),
                watchers: m.sum("informerd_watchers", &[]),
            });
        }
        tokio::time::sleep(every).await;
    }
}

/// Prints the slopes after warm-up (the first fifth of the run) and writes the JSON and SVG
/// when SOAK_RESULTS is set.
fn report(
    samples: &[Sample],
    checks: &[Check],
    seed: u64,
    duration: Duration,
) -> anyhow::Result<()> {
    let warm = duration.as_secs_f64() / 5.0;
    let after: Vec<&Sample> = samples.iter().filter(|s| s.seconds >= warm).collect();
    let per_hour = |f: fn(&Sample) -> f64| {
        let points: Vec<(f64, f64)> = after.iter().map(|s| (s.seconds, f(s) / MIB)).collect();
        slope(&points) * 3600.0
    };
    let (rss_slope, allocated_slope) = (per_hour(|s| s.rss), per_hour(|s| s.allocated));
    let mut times: Vec<f64> = checks
        .iter()
        .filter_map(|c| match c.outcome {
            Outcome::Agreed(t) => Some(t.as_secs_f64()),
            _ => None,
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let summary = format!(
        "soak: {} samples, {} checks ({} diverged, {} skipped as the control plane was unavailable), reconverge p50 {:.1} s max {:.1} s; memory slope after {:.0} s of warm-up: RSS {rss_slope:+.2} MiB/h, allocated {allocated_slope:+.2} MiB/h",
        samples.len(),
        checks.len(),
        checks.iter().filter(|c| c.agreed() == Some(false)).count(),
        checks.iter().filter(|c| c.agreed().is_none()).count(),
        times.get(times.len().saturating_sub(1) / 2).copied().unwrap_or_default(),
        times.last().copied().unwrap_or_default(),
        warm
    );
    eprintln!("{summary}");
    let Some(path) = std::env::var_os("SOAK_RESULTS") else {
        return Ok(());
    };
    let path = std::path::PathBuf::from(path);
    let doc = json!({
        "summary": summary,
        "seed": seed,
        "seconds": duration.as_secs(),
        "warm_up_seconds": warm,
        "slope_mib_per_hour": {"rss": rss_slope, "allocated": allocated_slope},
        "samples": samples.iter().map(|s| json!({
            "seconds": s.seconds, "rss_bytes": s.rss, "allocated_bytes": s.allocated,
            "objects": s.objects, "watchers": s.watchers,
        })).collect::<Vec<_>>(),
        "checks": checks.iter().map(Check::json).collect::<Vec<_>>(),
    });
    std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
    let series = |name, color, f: fn(&Sample) -> f64| Line {
        name,
        color,
        points: samples.iter().map(|s| (s.seconds, f(s))).collect(),
    };
    let picture = svg(
        &format!(
            "informerd soak: {} min, a fault per cycle (seed {seed})",
            duration.as_secs() / 60
        ),
        &[
            (
                "MiB",
                vec![
                    series("RSS", "#1f77b4", |s| s.rss / MIB),
                    series("jemalloc allocated", "#ff7f0e", |s| s.allocated / MIB),
                ],
            ),
            (
                "count",
                vec![
                    series("objects", "#2ca02c", |s| s.objects),
                    series("watchers", "#9467bd", |s| s.watchers),
                ],
            ),
        ],
        &checks
            .iter()
            .map(|c| (c.seconds, c.agreed()))
            .collect::<Vec<_>>(),
    );
    std::fs::write(path.with_extension("svg"), picture)?;
    Ok(())
}
