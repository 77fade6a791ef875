//! Helpers shared by the benchmarks that run the real sidecar (`watch_fanout`, `serving`):
//! settings from the environment, percentiles, and what a report says about the run.
//!
//! Each benchmark includes this file with `mod common;` and uses only part of it.
#![allow(dead_code)]

pub mod watch;

use std::process::ExitCode;
use std::time::Instant;

use informerd_testkit::{delete_namespace, unique_namespace, ControlPlane, Sidecar};
use serde_json::{json, Value};

/// A benchmark's `main`: reads its settings, runs `bench` in a namespace of its own (named
/// after `prefix`) on the local control plane, deletes the namespace, and exits non-zero when
/// `bench` fails or reports a failed correctness check (`Ok(false)`, described by `failed`).
/// `name` starts the messages.
pub fn main_in_namespace<S>(
    name: &str,
    prefix: &str,
    failed: &str,
    settings: fn() -> anyhow::Result<S>,
    bench: impl AsyncFnOnce(&ControlPlane, &kube::Client, &str, &S) -> anyhow::Result<bool>,
) -> ExitCode {
    let run = || -> anyhow::Result<bool> {
        let settings = settings()?;
        let cluster = ControlPlane::get();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let kube = cluster.client().await?;
            let ns = unique_namespace(&kube, prefix).await?;
            let outcome = bench(cluster, &kube, &ns, &settings).await;
            if let Err(e) = delete_namespace(&kube, &ns).await {
                eprintln!("warning: could not delete namespace {ns}: {e}");
            }
            outcome
        })
    };
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("{name}: FAILED: a correctness check failed ({failed}; see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The value of the environment variable `name`, or `default` when it is unset or blank.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|e| anyhow::anyhow!("{name}={v:?}: {e}")),
        _ => Ok(default),
    }
}

/// Percentiles of a sample (nearest rank). `row` and `json` read the values as microseconds;
/// other units are fine for `of` alone. Signed: "added" latencies can be negative.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub n: usize,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
}

impl Stats {
    pub fn of(mut v: Vec<i64>) -> Stats {
        if v.is_empty() {
            return Stats::default();
        }
        v.sort_unstable();
        let at = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Stats {
            n: v.len(),
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: v[v.len() - 1],
        }
    }

    /// A Markdown row in milliseconds: label, p50, p90, p99, max, n.
    pub fn row(&self, label: &str) -> String {
        format!(
            "| {label} | {} | {} | {} | {} | {} |",
            ms(self.p50),
            ms(self.p90),
            ms(self.p99),
            ms(self.max),
            self.n
        )
    }

    /// In milliseconds, two decimals.
    pub fn json(&self) -> Value {
        let ms = |us: i64| (us as f64 / 10.0).round() / 100.0;
        json!({
            "n": self.n,
            "p50_ms": ms(self.p50),
            "p90_ms": ms(self.p90),
            "p99_ms": ms(self.p99),
            "max_ms": ms(self.max),
        })
    }
}

/// Microseconds as milliseconds, one decimal.
pub fn ms(us: i64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

/// `later - earlier` in microseconds, negative when `later` is earlier.
pub fn micros(later: Instant, earlier: Instant) -> i64 {
    if later >= earlier {
        (later - earlier).as_micros() as i64
    } else {
        -((earlier - later).as_micros() as i64)
    }
}

/// The build profile of this benchmark (and so of the sidecar binary cargo built with it).
pub fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The last 20 lines of the sidecar's log, to standard error.
pub fn print_log_tail(sidecar: &Sidecar) {
    let log = sidecar.log();
    let lines: Vec<&str> = log.lines().collect();
    eprintln!("sidecar log (last lines):");
    for l in &lines[lines.len().saturating_sub(20)..] {
        eprintln!("  {l}");
    }
}
