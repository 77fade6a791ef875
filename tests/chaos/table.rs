//! The table the suite prints (and `make chaos` writes to benches/results/chaos.md): per fault
//! kind, how many were injected, phases, relists (all, and after 410 Gone), divergences, the
//! time to reconverge and the memory after the phase against the post-sync baseline.

use std::{collections::BTreeMap, time::Duration};

#[derive(Default)]
pub struct Row {
    pub faults: u64,
    pub phases: u64,
    pub times: Vec<Duration>,
    pub divergences: u64,
    pub relists: u64,
    /// Relists after 410 Gone (`informerd_scope_relists_total{reason="expired"}`).
    pub expired: u64,
    /// The largest RSS after a phase of this kind, over the post-sync baseline.
    pub memory_ratio: f64,
}

/// Prints the table and `notes` (and writes them to CHAOS_RESULTS when set).
pub fn print_table(table: &BTreeMap<String, Row>, notes: &str) {
    let mut out = String::from(
        "| fault | injected | phases | informerd relists | of which 410 Gone | divergences | reconverge p50 | reconverge max | RSS after / baseline |\n|---|---|---|---|---|---|---|---|---|\n",
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
            "| {fault} | {} | {} | {} | {} | {} | {:.1} s | {:.1} s | {:.2} |\n",
            row.faults,
            row.phases,
            row.relists,
            row.expired,
            row.divergences,
            p50.as_secs_f64(),
            max.as_secs_f64(),
            row.memory_ratio,
        );
    }
    out += "\n";
    out += notes;
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
