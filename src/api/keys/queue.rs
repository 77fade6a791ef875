//! The key queue of one WatchKeys stream: one entry per key that is pending (changed, not yet
//! sent) or in flight (sent, not acknowledged), whatever the number of changes, with the
//! debounce that decides when a pending key is ready, and the low-water mark that makes the
//! resume token. Pure: time comes in as arguments, so tests drive it without a clock.
//!
//! A resync's keys become entries [`RESYNC_WINDOW`] at a time, as earlier ones are sent: the
//! next ones wait as a plain list of keys, which its reader (`consumer.rs`) tops up from the
//! store a page at a time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::store::ObjectKey;

/// A key of the queue: an object of the resource, or an owner (another kind) named by them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId {
    /// The owner mapping's kind rather than the resource's.
    pub owner: bool,
    pub key: ObjectKey,
}

/// A key sent: now in flight until acknowledged with `revision`.
#[derive(Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: KeyId,
    pub revision: u64,
    pub deleted: bool,
}

/// How many keys of a resync are entries (pending, not sent yet) at once.
///
/// Decision: 1024. An entry costs about 300 bytes (its map slot, its place in the ready heap,
/// its key's strings) against about 100 for a key waiting in the list (its slot and its name's
/// string). With every key an entry, 150 streams resyncing 100,000 keys would hold about
/// 4.5 GB (an estimate from those sizes). A window of 1024 keeps the stream's buffer (64
/// events) fed many times over.
pub const RESYNC_WINDOW: usize = 1024;

/// When a pending key is ready: quiet for `debounce`, or `max_delay` after its first change.
#[derive(Clone, Copy, Debug)]
pub struct Debounce {
    pub debounce: Duration,
    pub max_delay: Duration,
}

/// The changes of a key not yet sent.
struct Pending {
    first: Instant,
    last: Instant,
    /// The revision of the first of them (0: marked by a resync).
    since: u64,
}

struct Entry {
    /// The last change's revision, and whether it removed the object from the view.
    revision: u64,
    deleted: bool,
    pending: Option<Pending>,
    /// The revision it was sent with, until acknowledged.
    in_flight: Option<u64>,
    /// The first revision not acknowledged (0: from a resync), counted in `Queue::unacked`.
    since: u64,
    /// Part of the resync under way and not sent yet.
    resync: bool,
    /// Has an item in `Queue::ready`.
    scheduled: bool,
}

/// The queue of one stream.
pub struct Queue {
    timing: Debounce,
    entries: HashMap<KeyId, Entry>,
    /// Pending keys by the earliest time they may be ready (checked again when popped: a
    /// change since may have moved it later). At most one item per entry.
    ready: BinaryHeap<Reverse<(Instant, KeyId)>>,
    /// How many entries have each `since`: the smallest is the low-water mark.
    unacked: BTreeMap<u64, usize>,
    /// Entries of the resync under way not sent yet; `None`: no resync under way.
    resync_left: Option<usize>,
    /// Keys of the resync under way not yet entries (see [`RESYNC_WINDOW`]), with their
    /// revisions.
    resync_rest: VecDeque<(KeyId, u64)>,
    /// More keys of the resync under way are to come ([`Queue::add_resync_keys`]).
    resync_open: bool,
    /// When the resync under way began: its keys count as changed then.
    resync_at: Option<Instant>,
    in_flight: usize,
    /// Bytes of the keys' strings, for [`Queue::bytes`].
    key_bytes: usize,
}

impl Queue {
    pub fn new(timing: Debounce) -> Queue {
        Queue {
            timing,
            entries: HashMap::new(),
            ready: BinaryHeap::new(),
            unacked: BTreeMap::new(),
            resync_left: None,
            resync_rest: VecDeque::new(),
            resync_open: false,
            resync_at: None,
            in_flight: 0,
            key_bytes: 0,
        }
    }

    /// A change of `id` at `revision`.
    pub fn mark(&mut self, id: &KeyId, revision: u64, deleted: bool, now: Instant) {
        if !self.entries.contains_key(id) {
            self.key_bytes += key_bytes(id);
            add(&mut self.unacked, revision);
            self.entries.insert(
                id.clone(),
                Entry {
                    revision,
                    deleted,
                    pending: None,
                    in_flight: None,
                    since: revision,
                    resync: false,
                    scheduled: false,
                },
            );
        }
        let entry = self.entries.get_mut(id).expect("inserted above");
        if revision >= entry.revision {
            entry.revision = revision;
            entry.deleted = deleted;
        }
        match &mut entry.pending {
            // A resync's key made an entry late counts as changed when the resync began.
            Some(pending) => pending.last = pending.last.max(now),
            None => {
                entry.pending = Some(Pending {
                    first: now,
                    last: now,
                    since: revision,
                });
            }
        }
        if entry.in_flight.is_none() && !entry.scheduled {
            entry.scheduled = true;
            let at = self
                .timing
                .ready_at(entry.pending.as_ref().expect("set above"));
            self.ready.push(Reverse((at, id.clone())));
        }
    }

    /// Starts a resync of the view: each of its keys is sent once more, and the mark stays at 0
    /// until they are all acknowledged. Its keys come with [`Queue::add_resync_keys`] until
    /// [`Queue::end_resync_keys`], and become entries a window at a time ([`RESYNC_WINDOW`]).
    pub fn begin_resync(&mut self, now: Instant) {
        // The keys of an earlier resync not yet entries: this one's view replaces them.
        for (id, _) in std::mem::take(&mut self.resync_rest) {
            self.key_bytes -= key_bytes(&id);
        }
        self.resync_at.get_or_insert(now);
        self.resync_left.get_or_insert(0);
        self.resync_open = true;
    }

    /// More keys of the resync under way, with their last revisions.
    pub fn add_resync_keys(&mut self, keys: impl IntoIterator<Item = (KeyId, u64)>) {
        for (id, revision) in keys {
            self.key_bytes += key_bytes(&id);
            self.resync_rest.push_back((id, revision));
        }
        self.fill_resync_window();
    }

    /// The resync under way has all its keys.
    pub fn end_resync_keys(&mut self) {
        self.resync_open = false;
    }

    /// Whether the resync under way waits for more keys: it has fewer than a window waiting.
    ///
    /// Decision: its reader adds a page when fewer than [`RESYNC_WINDOW`] wait, so the window
    /// never runs dry while keys remain, and the queue holds at most a window and a page of
    /// keys that are not entries (issue 32: a resync of the view's every key held about 100
    /// bytes a key for as long as the client took to read them; 140,000 pods in two queues
    /// were most of informerd's peak in the NVSentinel profile).
    pub fn wants_resync_keys(&self) -> bool {
        self.resync_open && self.resync_rest.len() < RESYNC_WINDOW
    }

    /// Makes entries of the resync's waiting keys until [`RESYNC_WINDOW`] are unsent.
    fn fill_resync_window(&mut self) {
        let (Some(mut left), Some(at)) = (self.resync_left, self.resync_at) else {
            return;
        };
        while left < RESYNC_WINDOW {
            let Some((id, revision)) = self.resync_rest.pop_front() else {
                break;
            };
            self.key_bytes -= key_bytes(&id);
            self.mark(&id, revision, false, at);
            let entry = self.entries.get_mut(&id).expect("marked");
            if !entry.resync {
                entry.resync = true;
                left += 1;
            }
            entry.pending.as_mut().expect("marked").since = 0;
            if entry.since != 0 {
                remove(&mut self.unacked, entry.since);
                entry.since = 0;
                add(&mut self.unacked, 0);
            }
        }
        self.resync_left = Some(left);
    }

    /// Whether a resync has just been sent whole (true once per resync).
    pub fn resync_done(&mut self) -> bool {
        if self.resync_left == Some(0) && self.resync_rest.is_empty() && !self.resync_open {
            self.resync_left = None;
            self.resync_at = None;
            return true;
        }
        false
    }

    /// When the next pending key may be ready (after dropping stale items).
    pub fn next_ready_at(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, id))) = self.ready.peek() {
            let Some(entry) = self.entries.get_mut(id) else {
                self.ready.pop();
                continue;
            };
            match (&entry.pending, entry.in_flight) {
                (Some(pending), None) => {
                    let real = self.timing.ready_at(pending);
                    if real == *at {
                        return Some(real);
                    }
                    let id = id.clone();
                    self.ready.pop();
                    self.ready.push(Reverse((real, id)));
                }
                _ => {
                    entry.scheduled = false;
                    self.ready.pop();
                }
            }
        }
        None
    }

    /// Takes a key that is ready at `now`, putting it in flight.
    pub fn take_ready(&mut self, now: Instant) -> Option<Delivery> {
        if self.next_ready_at()? > now {
            return None;
        }
        let Reverse((_, id)) = self.ready.pop().expect("peeked");
        let entry = self.entries.get_mut(&id).expect("checked by next_ready_at");
        entry.scheduled = false;
        entry.pending = None;
        entry.in_flight = Some(entry.revision);
        self.in_flight += 1;
        let delivery = Delivery {
            revision: entry.revision,
            deleted: entry.deleted,
            id,
        };
        if entry.resync {
            entry.resync = false;
            if let Some(left) = &mut self.resync_left {
                *left -= 1;
            }
            self.fill_resync_window();
        }
        Some(delivery)
    }

    /// An acknowledgement: true when `id` was in flight with `revision` (otherwise it is stale
    /// or a repeat, and ignored). A key that changed meanwhile is pending again.
    pub fn ack(&mut self, id: &KeyId, revision: u64) -> bool {
        let Some(entry) = self.entries.get_mut(id) else {
            return false;
        };
        if entry.in_flight != Some(revision) {
            return false;
        }
        entry.in_flight = None;
        self.in_flight -= 1;
        remove(&mut self.unacked, entry.since);
        match &entry.pending {
            Some(pending) => {
                entry.since = pending.since;
                add(&mut self.unacked, entry.since);
                if !entry.scheduled {
                    entry.scheduled = true;
                    let at = self.timing.ready_at(pending);
                    self.ready.push(Reverse((at, id.clone())));
                }
            }
            None => {
                self.entries.remove(id);
                self.key_bytes -= key_bytes(id);
            }
        }
        true
    }

    /// The revision up to which every change was sent and acknowledged, given that every
    /// change up to `position` was marked; `None` while a resync is not acknowledged.
    pub fn mark_revision(&self, position: u64) -> Option<u64> {
        if self.resync_open || !self.resync_rest.is_empty() {
            return None;
        }
        match self.unacked.keys().next() {
            None => Some(position),
            Some(0) => None,
            Some(since) => Some(since - 1),
        }
    }

    /// Keys pending (not in flight), the resync's keys waiting in the queue included (not those
    /// its reader has yet to add).
    pub fn pending(&self) -> usize {
        self.entries.len() - self.in_flight + self.resync_rest.len()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// What the queue holds, estimated: its entries, heap items and key strings.
    pub fn bytes(&self) -> usize {
        let entry = std::mem::size_of::<(KeyId, Entry)>() + std::mem::size_of::<u64>();
        self.entries.capacity() * entry
            + self.ready.capacity() * std::mem::size_of::<Reverse<(Instant, KeyId)>>()
            + self.unacked.len() * 3 * std::mem::size_of::<u64>()
            + self.resync_rest.capacity() * std::mem::size_of::<(KeyId, u64)>()
            + self.key_bytes
    }
}

impl Debounce {
    fn ready_at(&self, pending: &Pending) -> Instant {
        (pending.last + self.debounce).min(pending.first + self.max_delay)
    }
}

/// The bytes of a key's strings.
fn key_bytes(id: &KeyId) -> usize {
    id.key.name.len() + id.key.namespace.as_ref().map_or(0, |n| n.len())
}

fn add(counts: &mut BTreeMap<u64, usize>, since: u64) {
    *counts.entry(since).or_default() += 1;
}

fn remove(counts: &mut BTreeMap<u64, usize>, since: u64) {
    if let Some(n) = counts.get_mut(&since) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&since);
        }
    }
}

#[cfg(test)]
mod tests;
