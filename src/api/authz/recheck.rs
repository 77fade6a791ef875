//! A running Watch or WatchKeys stream, authorized again every `recheckInterval`: its task
//! (`send::spawn_stream`) ends with the status of the first re-check that refuses it
//! (`PERMISSION_DENIED` when access was revoked, `UNAUTHENTICATED` when the token no longer
//! authenticates), after the events already sent, and is counted under that status's reason.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use tonic::{Code, Status};

use super::{Authorizer, Caller, Check};

/// Resolves to the status a stream's task ends with when a re-check refuses it.
pub type Revoked = Pin<Box<dyn Future<Output = Status> + Send>>;

/// The re-checks of `check` for `caller`, every interval, until one refuses.
pub fn revoked(authz: Arc<Authorizer>, caller: Caller, check: Check) -> Revoked {
    Box::pin(async move { until_refused(&authz, &caller, &check).await })
}

/// Re-checks every interval until a re-check refuses; returns its status.
///
/// Decision: a re-check that cannot be made (the apiserver does not answer) keeps the watch
/// for up to the allowed TTL after the last good one, as a cached decision would have; after
/// that the watch ends with `UNAVAILABLE`, and the client's retry is decided afresh.
async fn until_refused(authz: &Authorizer, caller: &Caller, check: &Check) -> Status {
    let interval = authz.config.recheck_interval;
    let mut last_good = Instant::now();
    loop {
        tokio::time::sleep(interval).await;
        match authz.recheck(caller, check).await {
            Ok(()) => last_good = Instant::now(),
            Err(status)
                if status.code() == Code::Unavailable
                    && last_good.elapsed() < authz.config.allowed_ttl =>
            {
                tracing::warn!(error = %status.message(), "could not re-check a watch; keeping it");
            }
            Err(status) => {
                tracing::info!(user = %caller.user.username, error = %status.message(), "watch ended by a re-check");
                return status;
            }
        }
    }
}
