//! The `snapshot` section: warm restarts. Where each cache's snapshot file goes, how often it
//! is written (besides on SIGTERM), and how old a snapshot may be to be resumed from.
//!
//! Decision: the validated type lives here rather than in `model.rs` (which re-exports it
//! through `config`), so that this section stays in one file while others change the model.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::raw::RawSnapshot;

use super::Validator;

/// How often a snapshot is written when `interval` is left out.
pub const DEFAULT_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// How old a snapshot may be, when `maxAge` is left out, to be resumed from.
pub const DEFAULT_SNAPSHOT_MAX_AGE: Duration = Duration::from_secs(60 * 60);

/// `snapshot`: warm restarts from a snapshot of each cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// `directory`: where the snapshot files are written (created if missing).
    pub directory: PathBuf,
    /// `interval`: how often they are written, besides on SIGTERM.
    pub interval: Duration,
    /// `maxAge`: an older snapshot is ignored and the cache lists from the apiserver. A watch
    /// resumed from an old resourceVersion is answered 410 Gone anyway once etcd has compacted
    /// it (every 5 minutes by default), and a relist then costs as much as a cold start.
    pub max_age: Duration,
}

impl Validator {
    /// `snapshot`; `None` when it is invalid (the errors recorded).
    pub(super) fn snapshot(&mut self, raw: RawSnapshot) -> Option<SnapshotConfig> {
        let directory = match raw.directory {
            Some(d) if !d.trim().is_empty() => Some(PathBuf::from(d)),
            _ => {
                self.error(
                    "snapshot.directory",
                    "is required: the directory the snapshots are written to (e.g. an \
                     emptyDir or a persistent volume mounted at /var/lib/informerd)",
                );
                None
            }
        };
        let interval =
            self.duration_or("snapshot.interval", raw.interval, DEFAULT_SNAPSHOT_INTERVAL);
        let max_age = self.duration_or("snapshot.maxAge", raw.max_age, DEFAULT_SNAPSHOT_MAX_AGE);
        Some(SnapshotConfig {
            directory: directory?,
            interval: interval?,
            max_age: max_age?,
        })
    }

    /// `raw` as a duration of at least 1s, or `default` when left out.
    fn duration_or(
        &mut self,
        path: &str,
        raw: Option<String>,
        default: Duration,
    ) -> Option<Duration> {
        match raw {
            None => Some(default),
            Some(text) => self.duration(path, &text, Duration::from_secs(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    fn file(snapshot: &str) -> String {
        format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nsnapshot:\n{snapshot}resources:\n- apiVersion: v1\n  kind: Pod\n"
        )
    }

    fn errors(snapshot: &str) -> Vec<String> {
        match parse("informerd.yaml", &file(snapshot)) {
            Ok(_) => panic!("accepted:\n{snapshot}"),
            Err(e) => e.diagnostics().iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn snapshots_are_off_unless_configured_and_default_to_5m_and_1h() {
        let off = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n";
        assert_eq!(parse("f", off).expect("valid").snapshot, None);
        let on = parse("f", &file("  directory: /var/lib/informerd\n")).expect("valid");
        assert_eq!(
            on.snapshot,
            Some(SnapshotConfig {
                directory: PathBuf::from("/var/lib/informerd"),
                interval: Duration::from_secs(300),
                max_age: Duration::from_secs(3600),
            })
        );
        let set = file("  directory: d\n  interval: 30s\n  maxAge: 1h30m\n");
        let set = parse("f", &set).expect("valid").snapshot.expect("on");
        assert_eq!(set.interval, Duration::from_secs(30));
        assert_eq!(set.max_age, Duration::from_secs(5400));
    }

    #[test]
    fn bad_snapshot_fields_point_into_the_file() {
        assert_eq!(
            errors("  interval: 5m\n"),
            [
                "informerd.yaml:4:3: snapshot.directory: is required: the directory the snapshots \
              are written to (e.g. an emptyDir or a persistent volume mounted at \
              /var/lib/informerd)"
            ]
        );
        let bad = errors("  directory: d\n  interval: often\n  maxAge: 10ms\n");
        assert_eq!(bad.len(), 2, "{bad:#?}");
        assert!(
            bad[0]
                .starts_with("informerd.yaml:5:13: snapshot.interval: \"often\" is not a duration"),
            "{bad:#?}"
        );
        assert_eq!(
            bad[1],
            "informerd.yaml:6:11: snapshot.maxAge: \"10ms\" is too short: at least 1s"
        );
        let unknown = errors("  directory: d\n  every: 5m\n");
        assert!(unknown[0].contains("every"), "{unknown:#?}");
    }
}
