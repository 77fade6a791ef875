//! Helpers shared by the benchmarks that run the real sidecar (`watch_fanout`, `serving`):
//! settings from the environment, percentiles, and what a report says about the run.
//!
//! Each benchmark includes this file with `mod common;` and uses only part of it.
#![allow(dead_code)]

pub mod watch;

use std::time::Instant;

use informerd_testkit::Sidecar;
use serde_json::{json, Value};

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
