//! Percentiles of a sample and the units the reports print them in.

use std::time::Instant;

use serde_json::{json, Value};

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
    /// The header of the tables of [`Stats::row`]s: what the rows are, then the columns.
    pub fn header(what: &str) -> [String; 2] {
        [
            format!("| {what} | p50 | p90 | p99 | max | n |"),
            "|:--|---:|---:|---:|---:|---:|".into(),
        ]
    }

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

/// `v` rounded to `digits` decimals, as the JSON results give their figures.
pub fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}
