//! When a watch resumed from a snapshot's resourceVersion counts as accepted although nothing
//! came on it: after a quiet window during which the process itself was running.
//!
//! The apiserver answers a resourceVersion it no longer reaches back to at once, with 410 Gone
//! as the watch's first event, written right after the response's headers. A window measured
//! by the clock alone can be fooled by a machine so loaded that the process gets no CPU for a
//! second: the answer then sits unread in the HTTP connection's task while the timer fires,
//! and the scope would claim to be synced on a watch that is about to fail.
//! Decision: the window is counted in short ticks, and a tick that ends late (the process was
//! starved through it) does not count, so a starved stretch never passes for quiet; the ticks
//! after it give the connection's task the time to deliver what waited.

use std::time::Duration;

/// The quiet a resumed watch needs before it counts as accepted. Decision: a second, well
/// above a loopback or in-cluster round trip.
pub(super) const RESUME_QUIET: Duration = Duration::from_secs(1);

/// One tick of the window.
pub(super) const TICK: Duration = Duration::from_millis(100);

/// A tick that took longer than this was not quiet time but a starved process.
const LATE: Duration = Duration::from_millis(200);

/// The quiet counted so far.
#[derive(Debug, Default)]
pub(super) struct QuietWindow {
    quiet: Duration,
}

impl QuietWindow {
    /// Counts one tick that passed without an event and took `took`; true once the window
    /// is complete.
    pub(super) fn tick(&mut self, took: Duration) -> bool {
        if took < LATE {
            self.quiet += TICK;
        }
        self.quiet >= RESUME_QUIET
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_ticks_on_time_complete_the_window() {
        let mut w = QuietWindow::default();
        for _ in 0..9 {
            assert!(!w.tick(TICK));
        }
        assert!(w.tick(TICK + Duration::from_millis(5)));
    }

    #[test]
    fn a_tick_the_process_was_starved_through_does_not_count() {
        let mut w = QuietWindow::default();
        assert!(!w.tick(Duration::from_millis(1500)));
        for _ in 0..9 {
            assert!(!w.tick(TICK));
        }
        assert!(w.tick(TICK));
    }
}
