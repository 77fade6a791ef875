//! "Synced", published once and awaited: each resource's status board sends whether every one
//! of its scopes has completed its initial list on a `watch` channel whenever a scope's state
//! changes; readers (readiness, requests that wait for sync, the start-up log) await changes
//! instead of polling.

use futures::future::select_all;
use tokio::sync::watch;

/// Whether every resource of a fleet is synced, and a way to await changes of that.
pub struct SyncedWatch {
    resources: Vec<watch::Receiver<bool>>,
}

impl SyncedWatch {
    pub(super) fn new(resources: Vec<watch::Receiver<bool>>) -> Self {
        SyncedWatch { resources }
    }

    /// Whether every resource is synced now; marks the current values as seen.
    pub fn is_synced(&mut self) -> bool {
        // Every receiver's value is marked seen, so no short-circuit.
        let mut all = true;
        for rx in &mut self.resources {
            all &= *rx.borrow_and_update();
        }
        all
    }

    /// Waits until some resource's sync state changes, then returns whether all are synced.
    /// Pending forever once every status board is gone (the fleet dropped) or when there is no
    /// resource at all.
    pub async fn changed(&mut self) -> bool {
        if self.resources.is_empty() {
            return std::future::pending().await;
        }
        let (result, ..) =
            select_all(self.resources.iter_mut().map(|rx| Box::pin(rx.changed()))).await;
        if result.is_err() {
            return std::future::pending().await;
        }
        self.is_synced()
    }

    /// Returns once every resource is synced at the same moment.
    pub async fn wait_synced(&mut self) {
        if self.is_synced() {
            return;
        }
        while !self.changed().await {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn waits_until_every_resource_is_synced_at_once() {
        let (a, ra) = watch::channel(false);
        let (b, rb) = watch::channel(false);
        let mut synced = SyncedWatch::new(vec![ra, rb]);
        assert!(!synced.is_synced());
        a.send_replace(true);
        let waiting = tokio::spawn(async move {
            synced.wait_synced().await;
            synced
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one resource is still listing");
        b.send_replace(true);
        let mut synced = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("woken by the second resource")
            .expect("no panic");
        assert!(synced.is_synced());
        a.send_replace(false);
        assert!(
            !synced.changed().await,
            "a relist is a change back to not synced"
        );
    }
}
