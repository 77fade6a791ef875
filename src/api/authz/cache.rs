//! A bounded cache of decisions (token reviews, access reviews) with a lifetime per entry, as the
//! apiserver's webhook authenticator and authorizer keep: least recently used entries leave
//! first, and concurrent requests for the same key wait for one review instead of each sending
//! their own.
//!
//! Decision: a `Mutex<lru::LruCache>` held only to find or insert a slot (never across an
//! await); the review itself runs in the slot's `OnceCell`, so a slow apiserver blocks only the
//! callers of that key. A review that fails (the apiserver unreachable) is not cached: the next
//! caller tries again.

use std::future::Future;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lru::LruCache;
use tokio::sync::OnceCell;

/// A decided value and until when it may be reused.
#[derive(Debug)]
struct Decided<V> {
    value: V,
    at: Instant,
    expires: Instant,
}

type Slot<V> = Arc<OnceCell<Decided<V>>>;

/// Decisions by key, at most `capacity` of them.
pub struct Decisions<K: Hash + Eq, V> {
    entries: Mutex<LruCache<K, Slot<V>>>,
}

/// A value, and whether it came from the cache (`true`) or from a review made for this call.
pub type Looked<V> = (V, bool);

impl<K: Hash + Eq + Clone, V: Clone> Decisions<K, V> {
    pub fn new(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Decisions {
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// The decision for `key`: a cached one that has not expired and, with `max_age`, was made
    /// at most that long ago (or one being made now); otherwise what `review` decides, which
    /// returns the value and how long it may be reused.
    pub async fn get_or_review<E, F, Fut>(
        &self,
        key: &K,
        max_age: Option<Duration>,
        review: F,
    ) -> Result<Looked<V>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(V, Duration), E>>,
    {
        let slot = self.slot(key, max_age);
        let mut reviewed = false;
        let decided = slot
            .get_or_try_init(|| {
                reviewed = true;
                async move {
                    let (value, ttl) = review().await?;
                    let at = Instant::now();
                    Ok(Decided {
                        value,
                        at,
                        expires: at + ttl,
                    })
                }
            })
            .await?;
        Ok((decided.value.clone(), !reviewed))
    }

    /// The slot of `key`: the cached one if it may still be used, else a new empty one.
    fn slot(&self, key: &K, max_age: Option<Duration>) -> Slot<V> {
        let now = Instant::now();
        let mut entries = self.entries.lock().expect("decision cache poisoned");
        if let Some(slot) = entries.get(key) {
            let usable = match slot.get() {
                // Being reviewed now: join that review.
                None => true,
                Some(d) => d.expires > now && max_age.is_none_or(|age| now - d.at <= age),
            };
            if usable {
                return slot.clone();
            }
        }
        let slot = Slot::default();
        entries.put(key.clone(), slot.clone());
        slot
    }

    /// How many keys are held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.lock().expect("decision cache poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    async fn look(
        cache: &Decisions<&'static str, u32>,
        key: &'static str,
        max_age: Option<Duration>,
        ttl: Duration,
        reviews: &AtomicUsize,
    ) -> (u32, bool) {
        cache
            .get_or_review(&key, max_age, || async {
                let n = reviews.fetch_add(1, Ordering::SeqCst) as u32;
                Ok::<_, Infallible>((n, ttl))
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_decision_is_reused_until_it_expires() {
        let cache = Decisions::new(10);
        let reviews = AtomicUsize::new(0);
        let long = Duration::from_secs(600);
        assert_eq!(look(&cache, "a", None, long, &reviews).await, (0, false));
        assert_eq!(look(&cache, "a", None, long, &reviews).await, (0, true));
        // An expired decision is made again.
        assert_eq!(
            look(&cache, "b", None, Duration::ZERO, &reviews).await,
            (1, false)
        );
        assert_eq!(look(&cache, "b", None, long, &reviews).await, (2, false));
        // A re-check does not take a decision older than its max age.
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            look(&cache, "a", Some(Duration::from_millis(1)), long, &reviews).await,
            (3, false)
        );
        assert_eq!(look(&cache, "a", None, long, &reviews).await, (3, true));
    }

    #[tokio::test]
    async fn the_least_recently_used_key_leaves_first() {
        let cache = Decisions::new(2);
        let reviews = AtomicUsize::new(0);
        let long = Duration::from_secs(600);
        look(&cache, "a", None, long, &reviews).await;
        look(&cache, "b", None, long, &reviews).await;
        look(&cache, "a", None, long, &reviews).await;
        look(&cache, "c", None, long, &reviews).await;
        assert_eq!(cache.len(), 2);
        assert!(
            look(&cache, "a", None, long, &reviews).await.1,
            "a was used last"
        );
        assert!(
            !look(&cache, "b", None, long, &reviews).await.1,
            "b was evicted"
        );
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_review_and_failures_are_not_kept() {
        let cache: Arc<Decisions<&str, u32>> = Arc::new(Decisions::new(10));
        let reviews = Arc::new(AtomicUsize::new(0));
        let calls = (0..8).map(|_| {
            let (cache, reviews) = (cache.clone(), reviews.clone());
            tokio::spawn(async move {
                cache
                    .get_or_review(&"k", None, || async move {
                        reviews.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok::<_, Infallible>((7, Duration::from_secs(60)))
                    })
                    .await
                    .unwrap()
                    .0
            })
        });
        for call in futures::future::join_all(calls).await {
            assert_eq!(call.unwrap(), 7);
        }
        assert_eq!(reviews.load(Ordering::SeqCst), 1);
        let failed = cache
            .get_or_review(&"f", None, || async { Err::<(u32, Duration), _>("down") })
            .await;
        assert_eq!(failed, Err("down"));
        let retried = cache
            .get_or_review(&"f", None, || async {
                Ok::<_, &str>((1, Duration::from_secs(60)))
            })
            .await;
        assert_eq!(retried, Ok((1, false)));
    }
}
