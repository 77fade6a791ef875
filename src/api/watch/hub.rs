//! The hub of one resource: follows its store and broadcasts each change, decoded once, to every
//! watcher of the resource. The broadcast ring only saves decoding work: a watcher the ring
//! overflows, or told of a gap in the hub itself, reads what it missed from the change log.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::proto;
use crate::store::{Change, ChangeKind, Store};

/// Changes the hub keeps for watchers that have not taken them yet (shared by all watchers).
pub const HUB_CAPACITY: usize = 4096;

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
        }
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
                            if sender.receiver_count() > 0 {
                                let _ = sender
                                    .send(Broadcast::Change(Arc::new(Event::from_change(change))));
                            }
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
