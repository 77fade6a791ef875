//! A running Watch, authorized again every `recheckInterval`: it ends with the status of the
//! first re-check that refuses it (`PERMISSION_DENIED` when access was revoked,
//! `UNAUTHENTICATED` when the token no longer authenticates), after the events already sent.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::{future, stream, StreamExt};
use tonic::{Code, Status};

use super::{Authorizer, Caller, Check};
use crate::api::limits::Holding;

/// `watch` (a Watch's events or a WatchKeys stream's keys), ended when a re-check refuses it.
pub fn guard<T: Send + 'static>(
    authz: Arc<Authorizer>,
    caller: Caller,
    check: Check,
    watch: Holding<T>,
) -> Holding<T> {
    let refused: Arc<Mutex<Option<Status>>> = Arc::default();
    let slot = refused.clone();
    let revoked = async move {
        let status = until_refused(&authz, &caller, &check).await;
        *slot.lock().expect("refusal poisoned") = Some(status);
    };
    let end = stream::once(async move { refused.lock().expect("refusal poisoned").take() })
        .filter_map(future::ready)
        .map(Err);
    Box::pin(watch.take_until(revoked).chain(end))
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
