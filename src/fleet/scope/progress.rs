//! The progress lines of a scope's lists: "initial sync in progress" at most every few seconds
//! while a list runs, and "scope synced" when it completes, with the objects listed so far.

use std::time::{Duration, Instant};

use super::{super::ingest::Progress, StreamSpec};

/// How often a running list logs its progress.
const EVERY: Duration = Duration::from_secs(5);

/// A line to log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// The list is still running.
    InProgress,
    /// The list completed.
    Synced,
}

/// When the current list started, and when its progress was last logged.
pub struct ProgressLog {
    started: Instant,
    last_log: Instant,
}

impl ProgressLog {
    pub fn new(now: Instant) -> Self {
        ProgressLog {
            started: now,
            last_log: now,
        }
    }

    /// Which line, if any, this step of the lists calls for at `now`.
    pub fn observe(&mut self, progress: Progress, now: Instant) -> Option<Line> {
        match progress {
            Progress::ListStarted => {
                *self = ProgressLog::new(now);
                None
            }
            Progress::Listed if now.duration_since(self.last_log) >= EVERY => {
                self.last_log = now;
                Some(Line::InProgress)
            }
            Progress::Synced => Some(Line::Synced),
            Progress::Listed | Progress::Watched => None,
        }
    }

    /// Logs `line` for the scope `label`, with its status's count of listed objects.
    pub fn write(&self, line: Line, spec: &StreamSpec, label: &str) {
        let listed = spec.status.get(label).map(|s| s.listed).unwrap_or(0);
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let store_objects = spec.pipeline.store.len();
        match line {
            Line::Synced => {
                tracing::info!(resource = %spec.api_resource.plural, scope = %label, listed,
                    store_objects, seconds = format!("{secs:.1}"), "scope synced");
            }
            Line::InProgress => {
                tracing::info!(resource = %spec.api_resource.plural, scope = %label, listed,
                    store_objects, per_second = format!("{:.0}", listed as f64 / secs),
                    "initial sync in progress");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_logs_its_progress_every_few_seconds_and_its_end() {
        let t0 = Instant::now();
        let mut log = ProgressLog::new(t0);
        assert_eq!(log.observe(Progress::ListStarted, t0), None);
        assert_eq!(log.observe(Progress::Listed, t0 + EVERY / 2), None);
        assert_eq!(
            log.observe(Progress::Listed, t0 + EVERY),
            Some(Line::InProgress)
        );
        assert_eq!(log.observe(Progress::Listed, t0 + EVERY * 3 / 2), None);
        assert_eq!(
            log.observe(Progress::Listed, t0 + EVERY * 2),
            Some(Line::InProgress)
        );
        assert_eq!(
            log.observe(Progress::Synced, t0 + EVERY * 2),
            Some(Line::Synced)
        );
        assert_eq!(log.observe(Progress::Watched, t0 + EVERY * 9), None);
    }

    #[test]
    fn a_new_list_starts_the_clock_again() {
        let t0 = Instant::now();
        let mut log = ProgressLog::new(t0);
        let relist = t0 + EVERY * 10;
        assert_eq!(log.observe(Progress::ListStarted, relist), None);
        assert_eq!(log.observe(Progress::Listed, relist + EVERY / 2), None);
        assert_eq!(log.started, relist);
    }
}
