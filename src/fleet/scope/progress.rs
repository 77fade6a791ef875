//! The progress lines of the lists. During a resource's initial sync, one line every few
//! seconds for the whole resource (objects listed so far, scopes synced of total, rate), and
//! one line when every scope has synced, with the time taken: with tens of namespaces, lines
//! per scope would bury what an operator waits for. After that, a scope that lists again (a
//! relist, or a namespace that starts matching a selector) logs its own lines.
//!
//! Decision: the resource's lines count from the fleet's start, and only once: a relist after
//! the sync is the scope's event, not the resource's.

use std::sync::Mutex;
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

/// The initial sync of one resource, shared by all of its scopes.
#[derive(Debug)]
pub struct ResourceProgress {
    clock: Mutex<Clock>,
}

/// When a sync started, when its progress was last logged, and whether it is over.
#[derive(Debug, Clone, Copy)]
struct Clock {
    started: Instant,
    last_log: Instant,
    done: bool,
}

impl Clock {
    fn new(now: Instant) -> Self {
        Clock {
            started: now,
            last_log: now,
            done: false,
        }
    }

    /// Whether a list that is still running should log at `now`; if so, counts it as logged.
    fn due(&mut self, now: Instant) -> bool {
        let due = now.duration_since(self.last_log) >= EVERY;
        if due {
            self.last_log = now;
        }
        due
    }
}

impl ResourceProgress {
    pub fn new(now: Instant) -> Self {
        ResourceProgress {
            clock: Mutex::new(Clock::new(now)),
        }
    }

    /// Which line of the resource, if any, a step of one of its scopes calls for at `now`;
    /// `all_synced` says whether every scope of the resource is synced after the step.
    pub fn observe(&self, progress: Progress, all_synced: bool, now: Instant) -> Option<Line> {
        let mut clock = self.clock.lock().expect("progress poisoned");
        match progress {
            _ if clock.done => None,
            Progress::Synced if all_synced => {
                clock.done = true;
                Some(Line::Synced)
            }
            Progress::Listed if clock.due(now) => Some(Line::InProgress),
            _ => None,
        }
    }

    /// Whether the resource's initial sync is over: from then on, scopes log their own lists.
    pub fn is_done(&self) -> bool {
        self.clock.lock().expect("progress poisoned").done
    }

    /// Logs `line` for the resource of `spec`, with what its scopes have listed so far.
    pub fn write(&self, line: Line, spec: &StreamSpec) {
        let started = self.clock.lock().expect("progress poisoned").started;
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        let scopes = spec.status.snapshot();
        let listed: u64 = scopes.values().map(|s| s.listed).sum();
        let synced = scopes
            .values()
            .filter(|s| s.state == super::ScopeState::Synced)
            .count();
        let scopes = format!("{synced}/{}", scopes.len());
        let resource = &spec.api_resource.plural;
        let store_objects = spec.pipeline.store.len();
        match line {
            Line::Synced => {
                tracing::info!(%resource, listed, store_objects, scopes,
                    seconds = format!("{secs:.1}"), "resource synced");
            }
            Line::InProgress => {
                tracing::info!(%resource, listed, store_objects, scopes,
                    per_second = format!("{:.0}", listed as f64 / secs),
                    "initial sync in progress");
            }
        }
    }
}

/// When the current list of one scope started, and when its progress was last logged.
pub struct ProgressLog {
    clock: Clock,
}

impl ProgressLog {
    pub fn new(now: Instant) -> Self {
        ProgressLog {
            clock: Clock::new(now),
        }
    }

    /// Which line, if any, this step of the lists calls for at `now`.
    pub fn observe(&mut self, progress: Progress, now: Instant) -> Option<Line> {
        match progress {
            Progress::ListStarted => {
                self.clock = Clock::new(now);
                None
            }
            Progress::Listed if self.clock.due(now) => Some(Line::InProgress),
            Progress::Synced => Some(Line::Synced),
            Progress::Listed | Progress::Watched => None,
        }
    }

    /// Logs `line` for the scope `label`, with its status's count of listed objects.
    pub fn write(&self, line: Line, spec: &StreamSpec, label: &str) {
        let listed = spec.status.get(label).map(|s| s.listed).unwrap_or(0);
        let secs = self.clock.started.elapsed().as_secs_f64().max(1e-3);
        let store_objects = spec.pipeline.store.len();
        match line {
            Line::Synced => {
                tracing::info!(resource = %spec.api_resource.plural, scope = %label, listed,
                    store_objects, seconds = format!("{secs:.1}"), "scope synced");
            }
            Line::InProgress => {
                tracing::info!(resource = %spec.api_resource.plural, scope = %label, listed,
                    store_objects, per_second = format!("{:.0}", listed as f64 / secs),
                    "list in progress");
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
        assert_eq!(log.clock.started, relist);
    }

    #[test]
    fn a_resource_logs_for_all_its_scopes_every_few_seconds_and_once_when_all_are_synced() {
        let t0 = Instant::now();
        let resource = ResourceProgress::new(t0);
        // Two scopes listing at once: one line per period for both.
        assert_eq!(
            resource.observe(Progress::Listed, false, t0 + EVERY / 2),
            None
        );
        assert_eq!(
            resource.observe(Progress::Listed, false, t0 + EVERY),
            Some(Line::InProgress)
        );
        assert_eq!(resource.observe(Progress::Listed, false, t0 + EVERY), None);
        // The first scope synced, the other has not: no line yet.
        assert_eq!(resource.observe(Progress::Synced, false, t0 + EVERY), None);
        assert!(!resource.is_done());
        assert_eq!(
            resource.observe(Progress::Synced, true, t0 + EVERY * 2),
            Some(Line::Synced)
        );
        assert!(resource.is_done());
        // A relist afterwards is the scope's to log.
        assert_eq!(
            resource.observe(Progress::Listed, false, t0 + EVERY * 9),
            None
        );
        assert_eq!(
            resource.observe(Progress::Synced, true, t0 + EVERY * 9),
            None
        );
    }
}
