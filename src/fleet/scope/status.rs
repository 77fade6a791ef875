//! What each scope of a resource reports (state, counts, last error), and the one place that
//! decides whether the resource is synced: every scope's status lives on a [`StatusBoard`],
//! which publishes "all synced" on a `watch` channel when it changes (see [`super::super::synced`]).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Instant,
};

/// Where a scope stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeState {
    /// Listing (initially, or again after 410 Gone or a reconnect).
    Listing,
    /// The list completed; the store mirrors the apiserver for this scope.
    Synced,
    /// The apiserver answered 403; retried with backoff.
    Forbidden,
    /// Another error (the resource vanished, the apiserver is unreachable); retried with backoff.
    Failing,
    /// Loaded from a snapshot at start-up and serving it, while the watch resumes from the
    /// snapshot's resourceVersion; Synced once the apiserver has accepted it (readiness waits
    /// for that), Listing if it answers 410 Gone.
    SyncedFromSnapshot,
}

/// Why a scope listed again after its first list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelistReason {
    /// 410 Gone: the resourceVersion the watch resumed from is older than etcd keeps.
    Expired,
    /// After a 403: RBAC refused the list or watch, and the retry lists.
    Forbidden,
    /// The stream ended or failed otherwise (a dropped connection, an apiserver restart).
    Reconnect,
}

impl RelistReason {
    /// Every reason, in the order of [`ScopeStatus::relists_by_reason`].
    pub const ALL: [RelistReason; 3] = [
        RelistReason::Expired,
        RelistReason::Forbidden,
        RelistReason::Reconnect,
    ];

    /// Its name in metrics: lowercase, as the apiserver's own reasons are.
    pub fn as_str(self) -> &'static str {
        match self {
            RelistReason::Expired => "expired",
            RelistReason::Forbidden => "forbidden",
            RelistReason::Reconnect => "reconnect",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What a scope reports: state, counts and the last error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeStatus {
    /// Where the scope stands.
    pub state: ScopeState,
    /// Objects received by the lists (all of them, before the filter).
    pub listed: u64,
    /// Changes this scope made to the store.
    pub changes: u64,
    /// Objects on which the filter failed to evaluate (treated as not matching).
    pub filter_errors: u64,
    /// Lists after the first one.
    pub relists: u64,
    /// `relists` by why, in the order of [`RelistReason::ALL`].
    pub relists_by_reason: [u64; RelistReason::ALL.len()],
    /// Object events received from the apiserver, listed and watched, before the filter.
    pub received: u64,
    /// Objects the filter did not keep, every time one arrived (evaluation errors included).
    pub filtered_out: u64,
    /// Objects larger than `limits.maxObjectSize`, not kept, every time one arrived.
    pub too_large: u64,
    /// When the last object event arrived from the apiserver; when the scope started, before
    /// the first one.
    pub last_event: Instant,
    /// The last error, with what to do about it; cleared when the scope syncs again.
    pub last_error: Option<String>,
    /// The resourceVersion the scope's stream has reached (its list's, its last event's or
    /// bookmark's), which a snapshot resumes from; `None` while unknown (listing, or
    /// paginated lists).
    pub resource_version: Option<String>,
}

impl ScopeStatus {
    /// Counts one relist for `reason`.
    pub fn count_relist(&mut self, reason: RelistReason) {
        self.relists += 1;
        self.relists_by_reason[reason.index()] += 1;
    }

    /// The relists counted for `reason`.
    pub fn relists_for(&self, reason: RelistReason) -> u64 {
        self.relists_by_reason[reason.index()]
    }
}

impl Default for ScopeStatus {
    fn default() -> Self {
        ScopeStatus {
            state: ScopeState::Listing,
            listed: 0,
            changes: 0,
            filter_errors: 0,
            relists: 0,
            relists_by_reason: [0; RelistReason::ALL.len()],
            received: 0,
            filtered_out: 0,
            too_large: 0,
            last_event: Instant::now(),
            last_error: None,
            resource_version: None,
        }
    }
}

/// The status of every scope of one resource, and whether all of them are synced (published on
/// a `watch` channel when it changes: see [`super::super::synced`]).
#[derive(Clone)]
pub(in crate::fleet) struct StatusBoard {
    scopes: Arc<Mutex<BTreeMap<String, ScopeStatus>>>,
    synced: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for StatusBoard {
    fn default() -> Self {
        StatusBoard {
            scopes: Arc::default(),
            synced: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }
}

impl StatusBoard {
    pub fn snapshot(&self) -> BTreeMap<String, ScopeStatus> {
        self.scopes.lock().expect("status poisoned").clone()
    }

    /// Whether every scope has completed its initial list, as last published.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Follows [`StatusBoard::is_synced`].
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<bool> {
        self.synced.subscribe()
    }

    /// The status of one scope, if it is on the board.
    pub(super) fn get(&self, scope: &str) -> Option<ScopeStatus> {
        self.scopes
            .lock()
            .expect("status poisoned")
            .get(scope)
            .cloned()
    }

    /// Changes one scope's status, adding the scope (as Listing) if it is not on the board.
    pub(in crate::fleet) fn update(&self, scope: &str, f: impl FnOnce(&mut ScopeStatus)) {
        let mut map = self.scopes.lock().expect("status poisoned");
        let entry = map.entry(scope.to_string());
        let added = matches!(entry, std::collections::btree_map::Entry::Vacant(_));
        let status = entry.or_default();
        let before = status.state;
        f(status);
        // Only a change of state (or of the set of scopes) can change "synced": the per-object
        // counters do not pay for the check.
        if added || status.state != before {
            self.publish(&map);
        }
    }

    /// Takes a scope off the board (its stream stopped).
    pub(in crate::fleet) fn remove(&self, scope: &str) {
        let mut map = self.scopes.lock().expect("status poisoned");
        if map.remove(scope).is_some() {
            self.publish(&map);
        }
    }

    /// Sends whether every scope is synced; called with the map locked, so that two updates
    /// cannot publish out of order.
    fn publish(&self, map: &BTreeMap<String, ScopeStatus>) {
        let synced = !map.is_empty() && map.values().all(|s| s.state == ScopeState::Synced);
        self.synced
            .send_if_modified(|old| std::mem::replace(old, synced) != synced);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synced(s: &mut ScopeStatus) {
        s.state = ScopeState::Synced;
    }

    #[test]
    fn a_resource_is_synced_while_every_scope_is_and_it_has_one() {
        let board = StatusBoard::default();
        let rx = board.subscribe();
        assert!(!board.is_synced(), "no scope yet");
        board.update("a", |_| {});
        board.update("a", synced);
        assert!(board.is_synced());
        assert!(rx.has_changed().expect("open"));
        board.update("b", |_| {});
        assert!(!board.is_synced(), "a new scope is Listing");
        board.update("b", synced);
        board.remove("b");
        assert!(board.is_synced());
        board.remove("a");
        assert!(!board.is_synced(), "no scope left");
        assert_eq!(board.snapshot(), BTreeMap::new());
    }

    #[test]
    fn counters_alone_publish_nothing() {
        let board = StatusBoard::default();
        board.update("a", synced);
        let mut rx = board.subscribe();
        rx.borrow_and_update();
        board.update("a", |s| s.listed += 1);
        assert!(!rx.has_changed().expect("open"));
        assert_eq!(board.get("a").map(|s| s.listed), Some(1));
    }
}
