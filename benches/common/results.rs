//! The results folder, `benches/results/`: where the benchmarks write their figures.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

/// `benches/results/`, made when missing.
pub fn dir() -> anyhow::Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/results");
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}

/// Writes `value` to `benches/results/{file}` as pretty JSON ending in a newline; returns the
/// file as the messages name it (`benches/results/{file}`).
pub fn write_json(file: &str, value: &impl Serialize) -> anyhow::Result<String> {
    let path = dir()?.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("write {}", path.display()))?;
    Ok(format!("benches/results/{file}"))
}
