//! How long a scope waits after a watcher error before its stream tries again: the stream
//! combinator that replaces kube-rs's `default_backoff()` for the scopes.
//!
//! kube-rs's default (client-go's: 0.8 s doubling to 30 s, with up to as much again of jitter)
//! is one curve for every error, and its wait cannot be cut short. The chaos suite showed what
//! that costs once a fault has healed: a namespace deleted and recreated, or a RoleBinding
//! restored, is answered 403 for as long as it lasts, and the scope then tried again only up to
//! a minute after the grant was back; an apiserver down for half a minute left every scope
//! sleeping up to as long after it answered again. So two curves, and a wake-up:
//!
//! - Decision: refusals (403 Forbidden, 404 the resource not served) retry on a short curve,
//!   0.8 s doubling to [`REFUSED_MAX`] (with jitter, at most twice that): an apiserver answers
//!   them from its authorizer or its discovery, without touching storage, so asking every few
//!   seconds costs it little, and an operator who fixes RBAC sees the scope serve within
//!   seconds, as with `kubectl`.
//! - Any other error (the apiserver unreachable, overloaded, a connection dropped) keeps
//!   client-go's curve, which spares an apiserver in trouble; but the wait ends as soon as the
//!   cluster's probe sees the apiserver answer again ([`super::super::clusters`]'s `healed`),
//!   so that recovery is not paid for with the backoff an outage built up.
//!
//! As in kube-rs, every successful item resets both curves.

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::runtime::{
    utils::Backoff,
    watcher::{self, ExponentialBackoff},
};
use tokio::sync::watch;

use super::errors::status_code;

/// The longest wait after a refusal, before jitter.
pub(super) const REFUSED_MAX: Duration = Duration::from_secs(2);
/// The first wait after any error.
const FIRST: Duration = Duration::from_millis(800);
/// The longest wait after an error that is not a refusal, before jitter (client-go's).
const FAILED_MAX: Duration = Duration::from_secs(30);

/// `stream`, paused after each error as the module explains; `healed` changes when the
/// cluster answers again after it did not.
pub(super) fn retry<S, T>(
    stream: S,
    healed: watch::Receiver<u64>,
) -> impl Stream<Item = Result<T, watcher::Error>> + Send
where
    S: Stream<Item = Result<T, watcher::Error>> + Unpin + Send,
    T: Send,
{
    retry_with(stream, healed, Delays::default())
}

/// [`retry`] on the curves of `delays`.
fn retry_with<S, T>(
    stream: S,
    healed: watch::Receiver<u64>,
    delays: Delays,
) -> impl Stream<Item = Result<T, watcher::Error>> + Send
where
    S: Stream<Item = Result<T, watcher::Error>> + Unpin + Send,
    T: Send,
{
    let state = Retrying {
        stream,
        delays,
        pause: None,
        healed,
    };
    futures::stream::unfold(state, |mut s| async move {
        if let Some(pause) = s.pause.take() {
            s.wait(pause).await;
        }
        let item = s.stream.next().await?;
        match &item {
            Ok(_) => s.delays.reset(),
            Err(err) => {
                // Heals from before this error are not news: only one after it wakes.
                s.healed.borrow_and_update();
                s.pause = Some(s.delays.after(err));
            }
        }
        Some((item, s))
    })
}

struct Retrying<S> {
    stream: S,
    delays: Delays,
    /// The wait before the next item, after an error.
    pause: Option<Pause>,
    healed: watch::Receiver<u64>,
}

impl<S> Retrying<S> {
    async fn wait(&mut self, pause: Pause) {
        match pause {
            Pause::Refused(d) => tokio::time::sleep(d).await,
            Pause::Failed(d) => {
                tokio::select! {
                    () = tokio::time::sleep(d) => {}
                    changed = self.healed.changed() => {
                        if changed.is_err() {
                            // No probe any more (shutting down): the whole wait.
                            tokio::time::sleep(d).await;
                        }
                    }
                }
            }
        }
    }
}

/// A wait after an error, by the kind of error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pause {
    /// After a refusal: the whole wait.
    Refused(Duration),
    /// After another error: until the wait is over or the cluster answers again.
    Failed(Duration),
}

/// The two curves.
struct Delays {
    refused: ExponentialBackoff,
    failed: ExponentialBackoff,
}

impl Default for Delays {
    fn default() -> Self {
        Delays::new(FIRST, REFUSED_MAX, FAILED_MAX)
    }
}

impl Delays {
    /// Both curves from `first`, doubling up to their maximum, with jitter.
    fn new(first: Duration, refused_max: Duration, failed_max: Duration) -> Delays {
        let curve = |max| {
            backon::ExponentialBuilder::default()
                .with_min_delay(first)
                .with_max_delay(max)
                .with_factor(2.0)
                .with_jitter()
                .without_max_times()
                .into()
        };
        Delays {
            refused: curve(refused_max),
            failed: curve(failed_max),
        }
    }

    fn after(&mut self, err: &watcher::Error) -> Pause {
        match status_code(err) {
            Some(403 | 404) => Pause::Refused(self.refused.next().unwrap_or(REFUSED_MAX)),
            _ => Pause::Failed(self.failed.next().unwrap_or(FAILED_MAX)),
        }
    }

    fn reset(&mut self) {
        self.refused.reset();
        self.failed.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::scope::errors::tests::refused;

    fn dropped() -> watcher::Error {
        watcher::Error::WatchFailed(kube::Error::Service("connection reset".into()))
    }

    #[test]
    fn refusals_wait_at_most_twice_the_short_maximum_however_long_they_last() {
        let mut delays = Delays::default();
        for _ in 0..20 {
            match delays.after(&refused(403, "forbidden")) {
                Pause::Refused(d) => assert!(d <= REFUSED_MAX * 2, "{d:?}"),
                other => panic!("a 403 is a refusal: {other:?}"),
            }
        }
        assert!(matches!(
            delays.after(&refused(404, "not found")),
            Pause::Refused(_)
        ));
    }

    #[test]
    fn other_errors_back_off_to_client_gos_maximum_and_a_success_starts_over() {
        let mut delays = Delays::default();
        let mut last = Duration::ZERO;
        for _ in 0..20 {
            let Pause::Failed(d) = delays.after(&dropped()) else {
                panic!("a dropped connection is not a refusal");
            };
            last = d;
        }
        assert!(last >= FAILED_MAX && last <= FAILED_MAX * 2, "{last:?}");
        delays.reset();
        let Pause::Failed(d) = delays.after(&dropped()) else {
            panic!("a dropped connection is not a refusal");
        };
        assert!(d <= FIRST * 2, "{d:?}");
    }

    /// A bound on waits that must end much sooner: reached only when the code is wrong.
    const PATIENCE: Duration = Duration::from_secs(300);

    #[tokio::test]
    async fn a_failed_wait_ends_when_the_cluster_answers_again() {
        let (tx, rx) = watch::channel(0u64);
        // A wait of an hour after the error: only the heal can end it within PATIENCE.
        let hour = Duration::from_secs(3600);
        let items = vec![Err(dropped()), Ok(1u8)];
        let stream = retry_with(
            futures::stream::iter(items),
            rx,
            Delays::new(hour, hour, hour),
        );
        futures::pin_mut!(stream);
        assert!(stream.next().await.expect("an item").is_err());
        let next = async {
            tokio::task::yield_now().await;
            tx.send_modify(|n| *n += 1);
        };
        let (item, ()) = tokio::join!(tokio::time::timeout(PATIENCE, stream.next()), next);
        let item = item.expect("woken by the heal, not at the end of the hour's wait");
        assert_eq!(item.map(Result::ok), Some(Some(1)));
    }

    #[tokio::test]
    async fn a_heal_from_before_the_error_does_not_end_its_wait() {
        let (tx, rx) = watch::channel(0u64);
        tx.send_modify(|n| *n += 1);
        let first = Duration::from_millis(300);
        let items = vec![Err(dropped()), Ok(1u8)];
        let stream = retry_with(
            futures::stream::iter(items),
            rx,
            Delays::new(first, first, first),
        );
        futures::pin_mut!(stream);
        assert!(stream.next().await.expect("an item").is_err());
        let started = std::time::Instant::now();
        assert!(stream.next().await.expect("an item").is_ok());
        let waited = started.elapsed();
        assert!(waited >= first, "the whole wait: {waited:?}");
    }
}
