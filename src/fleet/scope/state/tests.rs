//! Every transition of [`ScopeMachine`], without a cluster.

use super::*;
use crate::fleet::scope::errors::tests::{pods, refused};

fn progress(machine: &mut ScopeMachine, p: Progress) -> Actions {
    machine.step(Input::Progress(p))
}

/// An error of the watcher: the apiserver answered `code` with `message`.
fn error(machine: &mut ScopeMachine, code: u16, message: &str) -> Actions {
    let err = ScopeError::new(&pods(), Some("a"), refused(code, message));
    machine.step(Input::Error(err))
}

fn status(status: StatusChange) -> Actions {
    Actions {
        status,
        ..Actions::default()
    }
}

/// Actions that give back the initial-list permit and change the status.
fn releasing(change: StatusChange) -> Actions {
    Actions {
        release_permit: true,
        ..status(change)
    }
}

/// A machine whose first list has completed.
fn synced() -> ScopeMachine {
    let mut m = ScopeMachine::default();
    progress(&mut m, Progress::ListStarted);
    progress(&mut m, Progress::Synced);
    assert_eq!(m.phase, Phase::Synced);
    m
}

/// What an error leaves in the status, with the message the error itself gives.
fn recorded(state: ScopeState, code: u16, message: &str) -> StatusChange {
    StatusChange::Error {
        state,
        message: ScopeError::new(&pods(), Some("a"), refused(code, message)).to_string(),
    }
}

#[test]
fn a_first_list_that_completes_is_synced_and_releases_the_permit() {
    let mut m = ScopeMachine::default();
    assert_eq!((m.phase, m.lists()), (Phase::Starting, Lists::Streaming));
    assert_eq!(
        progress(&mut m, Progress::ListStarted),
        status(StatusChange::Listing { relist: None })
    );
    assert_eq!(m.phase, Phase::FirstList);
    assert_eq!(
        progress(&mut m, Progress::Listed),
        status(StatusChange::Listed)
    );
    assert_eq!(
        progress(&mut m, Progress::Synced),
        releasing(StatusChange::Serving)
    );
    assert_eq!((m.phase, m.lists()), (Phase::Synced, Lists::Streaming));
}

#[test]
fn a_streaming_list_that_restarts_before_completing_releases_the_permit_and_paginates() {
    let mut m = ScopeMachine::default();
    progress(&mut m, Progress::ListStarted);
    progress(&mut m, Progress::Listed);
    assert_eq!(
        progress(&mut m, Progress::ListStarted),
        Actions {
            release_permit: true,
            paginate: true,
            status: StatusChange::Listing {
                relist: Some(RelistReason::Reconnect)
            },
        }
    );
    assert_eq!((m.phase, m.lists()), (Phase::FirstList, Lists::Paginated));
    // The paginated watcher's list: a relist, and nothing more to give up or change.
    assert_eq!(
        progress(&mut m, Progress::ListStarted),
        status(StatusChange::Listing {
            relist: Some(RelistReason::Reconnect)
        })
    );
    assert_eq!(
        progress(&mut m, Progress::Synced),
        status(StatusChange::Serving)
    );
}

#[test]
fn a_first_list_that_fails_and_starts_again_paginates() {
    let mut m = ScopeMachine::default();
    progress(&mut m, Progress::ListStarted);
    assert_eq!(
        error(&mut m, 500, "etcd timeout"),
        releasing(recorded(ScopeState::Failing, 500, "etcd timeout"))
    );
    assert_eq!(
        progress(&mut m, Progress::ListStarted),
        Actions {
            release_permit: false,
            paginate: true,
            status: StatusChange::Listing {
                relist: Some(RelistReason::Reconnect)
            },
        }
    );
}

#[test]
fn an_apiserver_that_refuses_streaming_lists_gets_paginated_ones_and_the_permit_is_kept() {
    for code in [400, 422] {
        let mut m = ScopeMachine::default();
        assert_eq!(
            error(&mut m, code, "sendInitialEvents is not supported"),
            Actions {
                release_permit: false,
                paginate: true,
                status: StatusChange::None,
            }
        );
        assert_eq!((m.phase, m.lists()), (Phase::Starting, Lists::Paginated));
        // Paginated lists refused the same way are an error like any other.
        assert_eq!(
            error(&mut m, code, "sendInitialEvents is not supported"),
            releasing(recorded(
                ScopeState::Failing,
                code,
                "sendInitialEvents is not supported"
            ))
        );
    }
}

#[test]
fn a_refusal_after_the_sync_is_an_error_not_a_fall_back() {
    let mut m = synced();
    let refusal = "resourceVersionMatch: unsupported";
    assert_eq!(
        error(&mut m, 422, refusal),
        status(recorded(ScopeState::Synced, 422, refusal))
    );
    assert_eq!(m.lists(), Lists::Streaming);
}

#[test]
fn a_resumed_scope_whose_relist_is_refused_streaming_falls_back_to_pages() {
    // Resumed from a snapshot, then 410 Gone: its first list in this process finds an
    // apiserver without streaming lists.
    let mut m = ScopeMachine::resumed();
    error(&mut m, 410, "too old resource version");
    assert_eq!(
        error(&mut m, 422, "sendInitialEvents is forbidden for watch"),
        Actions {
            release_permit: false,
            paginate: true,
            status: StatusChange::None,
        }
    );
    assert_eq!((m.phase, m.lists()), (Phase::Synced, Lists::Paginated));
    assert_eq!(
        progress(&mut m, Progress::ListStarted),
        status(StatusChange::Listing {
            relist: Some(RelistReason::Expired)
        })
    );
}

#[test]
fn a_403_is_forbidden_and_releases_the_permit() {
    let mut m = ScopeMachine::default();
    assert_eq!(
        error(&mut m, 403, "pods is forbidden"),
        releasing(recorded(ScopeState::Forbidden, 403, "pods is forbidden"))
    );
    assert_eq!((m.phase, m.lists()), (Phase::Starting, Lists::Streaming));
    // Granted later: the list runs and completes; the permit is not released twice.
    progress(&mut m, Progress::ListStarted);
    assert_eq!(
        progress(&mut m, Progress::Synced),
        status(StatusChange::Serving)
    );
}

#[test]
fn a_403_after_the_sync_is_forbidden() {
    let mut m = synced();
    assert_eq!(
        error(&mut m, 403, "revoked"),
        status(recorded(ScopeState::Forbidden, 403, "revoked"))
    );
}

#[test]
fn a_connection_error_after_the_sync_stays_synced_with_the_error_recorded() {
    let mut m = synced();
    assert_eq!(
        error(&mut m, 500, "connection reset"),
        status(recorded(ScopeState::Synced, 500, "connection reset"))
    );
    // The watch resumed without a list: serving, the error cleared.
    assert_eq!(
        progress(&mut m, Progress::Watched),
        status(StatusChange::Serving)
    );
}

#[test]
fn a_watch_event_before_the_sync_changes_nothing() {
    let mut m = ScopeMachine::default();
    progress(&mut m, Progress::ListStarted);
    assert_eq!(progress(&mut m, Progress::Watched), Actions::default());
}

#[test]
fn a_relist_after_410_gone_is_counted_as_expired_and_the_next_as_a_reconnect() {
    let mut m = synced();
    error(&mut m, 410, "too old resource version");
    assert_eq!(
        progress(&mut m, Progress::ListStarted),
        status(StatusChange::Listing {
            relist: Some(RelistReason::Expired)
        })
    );
    progress(&mut m, Progress::Synced);
    assert_eq!(
        progress(&mut m, Progress::ListStarted),
        status(StatusChange::Listing {
            relist: Some(RelistReason::Reconnect)
        }),
        "the reason is used once"
    );
}

#[test]
fn a_relist_is_counted_only_after_the_first_list() {
    let mut m = synced();
    assert_eq!(
        progress(&mut m, Progress::ListStarted),
        status(StatusChange::Listing {
            relist: Some(RelistReason::Reconnect)
        })
    );
    assert_eq!(m.phase, Phase::Synced);
    assert_eq!(
        progress(&mut m, Progress::Synced),
        status(StatusChange::Serving),
        "the permit was released by the first list"
    );
}

#[test]
fn status_changes_write_state_counters_and_error() {
    let mut s = ScopeStatus::default();
    StatusChange::Listing { relist: None }.apply(&mut s);
    StatusChange::Listed.apply(&mut s);
    assert_eq!((s.state, s.listed, s.relists), (ScopeState::Listing, 1, 0));
    StatusChange::Error {
        state: ScopeState::Forbidden,
        message: "grant it".into(),
    }
    .apply(&mut s);
    assert_eq!(s.state, ScopeState::Forbidden);
    assert_eq!(s.last_error.as_deref(), Some("grant it"));
    StatusChange::Listing {
        relist: Some(RelistReason::Forbidden),
    }
    .apply(&mut s);
    assert_eq!(s.relists, 1);
    assert_eq!(s.relists_for(RelistReason::Forbidden), 1);
    assert_eq!(s.relists_for(RelistReason::Expired), 0);
    assert_eq!(
        s.last_error.as_deref(),
        Some("grant it"),
        "kept while listing"
    );
    StatusChange::Serving.apply(&mut s);
    assert_eq!(
        (s.state, s.last_error.as_deref()),
        (ScopeState::Synced, None)
    );
    let before = s.clone();
    StatusChange::None.apply(&mut s);
    assert_eq!(s, before);
}
