//! Putting a snapshot file in place crash-safely: written to a temporary file beside it,
//! fsynced, renamed over the old one, and the directory fsynced. A crash at any moment
//! leaves either the old snapshot or the new one, whole, under the snapshot's name (and at
//! worst a stray temporary file, which the next write replaces).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A test hook: when set to a number of seconds, a write pauses that long between writing
/// (and fsyncing) the temporary file and renaming it, after logging that it does, so that a
/// test can kill informerd in the middle of a snapshot. Never set in production.
pub const PAUSE_ENV: &str = "INFORMERD_TEST_SNAPSHOT_PAUSE_SECONDS";

/// The snapshot file of `resource` in `directory`.
pub fn path(directory: &Path, resource: &str) -> PathBuf {
    directory.join(format!("{resource}.snapshot"))
}

/// Where a clean snapshot goes once it has been resumed from (see `mod.rs`: its epoch may not
/// be resumed twice).
pub fn resumed_path(path: &Path) -> PathBuf {
    path.with_extension("snapshot.resumed")
}

fn temp_path(path: &Path) -> PathBuf {
    path.with_extension("snapshot.tmp")
}

/// Writes `path` through `fill` crash-safely; returns what `fill` returned.
pub fn write_atomically<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<&File>) -> io::Result<T>,
) -> io::Result<T> {
    let directory = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(directory)?;
    let temp = temp_path(path);
    let file = File::create(&temp)?;
    let mut out = BufWriter::with_capacity(1 << 20, &file);
    let result = fill(&mut out)?;
    out.flush()?;
    drop(out);
    file.sync_all()?;
    drop(file);
    pause_for_tests(path);
    fs::rename(&temp, path)?;
    File::open(directory)?.sync_all()?;
    // A resumed clean snapshot is superseded by this one.
    let _ = fs::remove_file(resumed_path(path));
    Ok(result)
}

/// Moves a clean snapshot aside once it has been loaded (see [`resumed_path`]).
pub fn set_aside(path: &Path) -> io::Result<()> {
    fs::rename(path, resumed_path(path))?;
    let directory = path.parent().unwrap_or(Path::new("."));
    File::open(directory)?.sync_all()
}

fn pause_for_tests(path: &Path) {
    let Some(seconds) = std::env::var(PAUSE_ENV)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return;
    };
    tracing::warn!(path = %path.display(), seconds,
        "snapshot written to its temporary file; pausing before the rename ({PAUSE_ENV})");
    std::thread::sleep(Duration::from_secs(seconds));
}
