//! A scope's life as a state machine, stepped by one function: what each watcher event (as the
//! ingest saw it) or error means for the initial-list permit, for the list mode (streaming or
//! paginated), and for the scope's status. Pure: no I/O, no clock, no logging; `run.rs` feeds it
//! and carries out what it answers.

use super::{
    super::ingest::Progress,
    errors::ScopeError,
    status::{RelistReason, ScopeState, ScopeStatus},
};

/// How far the scope's lists have come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No list has started yet.
    Starting,
    /// The first list started and has not completed (it may have restarted or failed).
    FirstList,
    /// A list has completed: later lists are relists, and the cache serves through errors.
    Synced,
}

/// How the watcher runs its lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lists {
    /// Streaming lists (`sendInitialEvents`): objects arrive one at a time.
    Streaming,
    /// Paginated lists with small pages, for an apiserver whose streaming lists do not work.
    Paginated,
}

/// What the machine is fed.
#[derive(Debug)]
pub enum Input {
    /// What the ingest made of one watcher event.
    Progress(Progress),
    /// The watcher failed; it retries with backoff.
    Error(ScopeError),
}

/// What the driver must do after a step.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Actions {
    /// Give back the initial-list permit, so that other scopes may list.
    pub release_permit: bool,
    /// Stop this watcher and start one with [`Lists::Paginated`].
    pub paginate: bool,
    /// The change to this scope's status.
    pub status: StatusChange,
}

/// A change to a scope's status.
#[derive(Debug, Default, PartialEq, Eq)]
pub enum StatusChange {
    #[default]
    None,
    /// A list started: the scope is Listing, and counts a relist (with why) if it is not the
    /// first list.
    Listing { relist: Option<RelistReason> },
    /// One more object was listed.
    Listed,
    /// The scope mirrors the apiserver: Synced, without an error.
    Serving,
    /// An error: the state it leaves the scope in, and the message to show.
    Error { state: ScopeState, message: String },
}

impl StatusChange {
    /// Writes the change into a scope's status.
    pub fn apply(self, status: &mut ScopeStatus) {
        match self {
            StatusChange::None => {}
            StatusChange::Listing { relist } => {
                status.state = ScopeState::Listing;
                if let Some(reason) = relist {
                    status.count_relist(reason);
                }
            }
            StatusChange::Listed => status.listed += 1,
            StatusChange::Serving => {
                status.state = ScopeState::Synced;
                status.last_error = None;
            }
            StatusChange::Error { state, message } => {
                status.state = state;
                status.last_error = Some(message);
            }
        }
    }
}

/// One scope's phase, list mode, and whether it holds an initial-list permit.
#[derive(Debug)]
pub struct ScopeMachine {
    phase: Phase,
    lists: Lists,
    /// Held from the start until the first list completes, restarts or fails; see
    /// `INITIAL_LISTS` in the fleet.
    holds_permit: bool,
    /// Why the next list is a relist: what the last error since the last list said.
    relist_reason: Option<RelistReason>,
    /// A list has completed in this process (a scope resumed from a snapshot is synced
    /// without one, so its first list may still find streaming lists refused).
    listed: bool,
}

impl Default for ScopeMachine {
    /// A scope that holds its initial-list permit and has not listed yet.
    fn default() -> Self {
        ScopeMachine {
            phase: Phase::Starting,
            lists: Lists::Streaming,
            holds_permit: true,
            relist_reason: None,
            listed: false,
        }
    }
}

impl ScopeMachine {
    /// A scope that starts from a snapshot: as if synced, without a permit (it does not list).
    pub fn resumed() -> Self {
        ScopeMachine {
            phase: Phase::Synced,
            holds_permit: false,
            ..ScopeMachine::default()
        }
    }

    /// How the next watcher must list.
    pub fn lists(&self) -> Lists {
        self.lists
    }

    /// Moves the scope on by one input.
    pub fn step(&mut self, input: Input) -> Actions {
        let mut out = Actions::default();
        match (self.phase, input) {
            (Phase::Starting, Input::Progress(Progress::ListStarted)) => {
                self.phase = Phase::FirstList;
                out.status = StatusChange::Listing { relist: None };
            }
            (Phase::FirstList, Input::Progress(Progress::ListStarted)) => {
                // The first list restarted without completing (kube-rs restarts a streaming
                // list whose stream ends before the initial-events bookmark, without an
                // error): stop holding up other scopes, and use paginated lists, which
                // complete page by page.
                out.release_permit = self.release_permit();
                out.paginate = self.paginate();
                out.status = self.relisting();
            }
            (Phase::Synced, Input::Progress(Progress::ListStarted)) => {
                out.status = self.relisting();
            }
            (_, Input::Progress(Progress::Listed)) => out.status = StatusChange::Listed,
            (_, Input::Progress(Progress::Synced)) => {
                self.phase = Phase::Synced;
                self.listed = true;
                out.release_permit = self.release_permit();
                out.status = StatusChange::Serving;
            }
            // A watch event after an error: the watch resumed (kube-rs resumes from the last
            // resourceVersion without a new list).
            (Phase::Synced, Input::Progress(Progress::Watched)) => {
                out.status = StatusChange::Serving;
            }
            (_, Input::Progress(Progress::Watched)) => {}
            (_, Input::Error(error))
                if !self.listed
                    && self.lists == Lists::Streaming
                    && error.refuses_streaming_lists() =>
            {
                out.paginate = self.paginate();
            }
            (phase, Input::Error(error)) => {
                self.relist_reason = Some(error.relist_reason());
                // A failing scope must not hold up the others' initial lists.
                out.release_permit = self.release_permit();
                let mut state = error.state();
                if phase == Phase::Synced && state == ScopeState::Failing {
                    // A dropped connection after the sync: the watcher resumes from the last
                    // resourceVersion, and the cache keeps serving what it holds. Report the
                    // error, not a state the scope is not in.
                    state = ScopeState::Synced;
                }
                out.status = StatusChange::Error {
                    state,
                    message: error.to_string(),
                };
            }
        }
        out
    }

    /// A list after the first: why, by the last error since the last list (none: the stream
    /// ended without one, as a reconnect).
    fn relisting(&mut self) -> StatusChange {
        let reason = self.relist_reason.take().unwrap_or(RelistReason::Reconnect);
        StatusChange::Listing {
            relist: Some(reason),
        }
    }

    /// Gives up the permit; true if it was held.
    fn release_permit(&mut self) -> bool {
        std::mem::replace(&mut self.holds_permit, false)
    }

    /// Switches to paginated lists; true if the lists were streaming.
    fn paginate(&mut self) -> bool {
        std::mem::replace(&mut self.lists, Lists::Paginated) == Lists::Streaming
    }
}

#[cfg(test)]
mod tests;
