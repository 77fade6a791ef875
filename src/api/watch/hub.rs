//! The hub of one resource: follows its store and broadcasts each change, decoded once, to every
//! watcher of the resource. The broadcast ring only saves decoding work: a watcher the ring
//! overflows, or told of a gap in the hub itself, reads what it missed from the change log.
//!
//! The ring is bounded by bytes too ([`HUB_MAX_BYTES`]): a change is kept in it until every
//! watcher has taken it, so a watcher whose client reads slowly makes the ring hold up to
//! [`HUB_CAPACITY`] decoded objects, which for large objects (ConfigMaps of 1 MiB) is GiBs.
//! Past the bound, the hub broadcasts a gap instead of the decoded change, and each watcher
//! reads the change from the log itself, one at a time, into its own bounded buffer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::proto;
use crate::store::{Change, ChangeKind, Store};

/// Changes the hub keeps for watchers that have not taken them yet (shared by all watchers).
pub const HUB_CAPACITY: usize = 4096;

/// The decoded changes the ring holds at most, in bytes (estimated, [`value_bytes`]).
///
/// Decision: 16 MiB. Watchers that keep up take each change at once, so the ring holds next to
/// nothing; this bounds what a slow one makes it hold, while a burst of thousands of typical
/// objects (a pod decodes to about 10 KB) still goes through the ring, decoded once.
pub const HUB_MAX_BYTES: usize = 16 << 20;

/// One change, decoded once for every watcher.
pub struct Event {
    pub revision: u64,
    pub kind: ChangeKind,
    /// The new state (the last one for DELETED).
    pub object: Value,
    /// The state before a MODIFIED.
    pub previous: Option<Value>,
    /// The revision of the change that made `previous`.
    pub previous_revision: u64,
    /// The object rendered whole, built by the first watcher that needs it.
    pub whole: OnceLock<proto::Object>,
    /// Counted in the ring's bytes while it lives (the ring's events only).
    held: Option<Held>,
}

impl Event {
    pub fn from_change(change: Change) -> Event {
        Event {
            revision: change.revision,
            kind: change.kind,
            object: change.object.to_json_value(),
            previous_revision: change.previous.as_ref().map_or(0, |p| p.revision()),
            previous: change.previous.map(|p| p.to_json_value()),
            whole: OnceLock::new(),
            held: None,
        }
    }

    /// [`Event::from_change`], its bytes counted in `ring` until it is dropped (once every
    /// watcher has taken it).
    fn counted(change: Change, ring: &Arc<AtomicUsize>) -> Event {
        let mut event = Event::from_change(change);
        // Twice the decoded bytes: the whole rendering a watcher may add (about the JSON's size).
        let bytes =
            2 * (value_bytes(&event.object) + event.previous.as_ref().map_or(0, value_bytes));
        ring.fetch_add(bytes, Ordering::Relaxed);
        event.held = Some(Held {
            bytes,
            ring: ring.clone(),
        });
        event
    }
}

/// An event's share of the ring's bytes, given back when the event is dropped.
struct Held {
    bytes: usize,
    ring: Arc<AtomicUsize>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.ring.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// About the heap bytes of a decoded JSON value: its strings, and a node's worth for each value
/// and map entry.
fn value_bytes(value: &Value) -> usize {
    const NODE: usize = size_of::<Value>();
    NODE + match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(value_bytes).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.len() + NODE + value_bytes(v))
            .sum(),
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

/// What the hub broadcasts.
#[derive(Clone)]
pub enum Broadcast {
    Change(Arc<Event>),
    /// The hub itself fell behind the change log: watchers read the store from where they are.
    Gap,
}

/// Follows one store and broadcasts its changes.
pub struct Hub {
    tx: broadcast::Sender<Broadcast>,
}

impl Hub {
    /// Starts the hub's task; it ends when the store's revision channel closes or `stop` fires.
    pub fn start(store: Arc<Store>, mut stop: tokio::sync::watch::Receiver<bool>) -> Hub {
        let (tx, _) = broadcast::channel(HUB_CAPACITY);
        let sender = tx.clone();
        let ring = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            let mut revisions = store.subscribe();
            let mut last = *revisions.borrow_and_update();
            loop {
                tokio::select! {
                    changed = revisions.changed() => if changed.is_err() { return },
                    _ = stop.changed() => return,
                }
                match store.changes_since(last) {
                    Ok(changes) => {
                        for change in changes {
                            tokio::task::consume_budget().await;
                            last = change.revision;
                            // Nobody to tell: skip the decoding. A watcher that subscribes
                            // later reads the store first, up to a revision at least this one.
                            if sender.receiver_count() == 0 {
                                continue;
                            }
                            // Over its bytes, the ring holds a gap: each watcher reads the
                            // change from the log (see the module's documentation).
                            let message = if ring.load(Ordering::Relaxed) > HUB_MAX_BYTES {
                                Broadcast::Gap
                            } else {
                                Broadcast::Change(Arc::new(Event::counted(change, &ring)))
                            };
                            let _ = sender.send(message);
                        }
                    }
                    Err(_) => {
                        last = store.revision();
                        let _ = sender.send(Broadcast::Gap);
                    }
                }
            }
        });
        Hub { tx }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Broadcast> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::store::{StoreOptions, Writer};

    /// A ConfigMap of `bytes` bytes of data, different for each `i`.
    fn config_map(i: usize, bytes: usize) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{i}"), "namespace": "ns",
                         "uid": format!("uid-{i}"), "resourceVersion": format!("{}", i + 1)},
            "data": {"payload": format!("{i}{}", "x".repeat(bytes))}
        })
    }

    #[tokio::test]
    async fn past_its_bytes_the_ring_holds_gaps_until_the_slow_watcher_has_read() {
        let store = Writer::new(StoreOptions::default());
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let hub = Hub::start(Arc::new(store.as_reader()), stopped);
        // A watcher; once the hub follows the store (a first change reaches it), it does not
        // read while 40 changes of 1 MiB come.
        let mut slow = hub.subscribe();
        // The hub's task subscribes to the store when it first runs (this test's runtime has
        // one thread: it runs now, up to its first wait).
        tokio::task::yield_now().await;
        store.apply(config_map(0, 1)).expect("apply");
        let first = tokio::time::timeout(Duration::from_secs(60), slow.recv()).await;
        assert!(matches!(first, Ok(Ok(Broadcast::Change(_)))));
        for i in 1..=40 {
            store.apply(config_map(i, 1 << 20)).expect("apply");
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while slow.len() < 40 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the hub took {} of the 40 changes",
                slow.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut kinds = Vec::new();
        for _ in 0..40 {
            kinds.push(matches!(
                slow.recv().await.expect("a message"),
                Broadcast::Change(_)
            ));
        }
        let changes = kinds.iter().filter(|c| **c).count();
        // Each decoded MiB counts twice (its rendering to come): 8 fit in 16 MiB.
        assert!((1..=9).contains(&changes), "{changes} decoded changes held");
        assert!(
            kinds[..changes].iter().all(|c| *c),
            "gaps only past the bound"
        );
        // Read, the ring lets go of them: the next change is decoded again.
        store.apply(config_map(41, 1 << 20)).expect("apply");
        let next = tokio::time::timeout(Duration::from_secs(60), slow.recv()).await;
        assert!(matches!(next, Ok(Ok(Broadcast::Change(_)))));
    }
}
