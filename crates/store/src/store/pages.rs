//! A snapshot read a page at a time: what a watch's initial state and a key queue's resync take
//! of a whole resource, without a copy of every object held at once.
//!
//! [`Store::list`] copies every object it lists before the first is used: a handle, the
//! blob, the key and the resourceVersion, over 300 bytes a pod of the controller profile. That
//! is right for the Lists a controller makes (a few objects, sorted), not for the initial
//! state of an informer of every pod: with a few such clients starting at once, their
//! snapshots were most of informerd's peak (the NVSentinel profile, issue 32: peak RSS twice
//! the steady one at 28,000 pods, heaptrack naming `Store::list` under the watchers' and the
//! key queues' initial states; at 1.4 million pods, about 450 MB per snapshot).
//!
//! A [`Pages`] holds the set of slots occupied at its revision R, compressed (a roaring
//! bitmap: a bit a slot where they are dense, two bytes a slot where they are sparse). A page is
//! copied when it is read, under the read lock: an object whose slot still holds a state of
//! revision ≤ R is that state; one changed or deleted since is the state that the change log's
//! first entry after R for its slot replaced (a slot's first change after R is one of the
//! object that was there at R, since the slot was occupied then). Objects added after R are
//! not in it. So every page is as of R, as one copy of the whole store would have been.
//!
//! Decision: when the log no longer reaches back to R (more changes since R than it keeps,
//! `log_max_events`), the next page is [`StoreError::Expired`], as a resume from R would be.
//! A watcher then ends before SYNCED and its client starts over (`api/watch/watcher.rs`); a
//! key queue takes its keys again. An initial state is read at thousands of objects a second
//! and the log keeps 10,000 changes by default, so this takes a resource changing faster than
//! a whole initial state can be read, over and over.
//!
//! A key queue's resync reads its pages as its keys are sent, for as long as that takes, so it
//! may outlive the log's reach: [`Pages::resume`] reads the slots not yet read again at the
//! store's newer revision (see its comment for why that loses nothing).
//!
//! Decision: the slots are a roaring bitmap, not a list of `u32`. A list was 4 bytes an
//! object, 8 with the room its growth left: the four pages of 140,000 pods that two informers
//! and two key queues of every pod hold while they start were 4.4 MB, the largest part of
//! informerd's peak over its steady memory that grew with the cluster (the NVSentinel profile
//! at 10,000 nodes, heaptrack, issue 32). A store reuses the slots it frees, so its slots are
//! about as many as its objects and those of a whole resource are dense: about 24 KB for those
//! 140,000 (8 KB for each 65,536 slots of which more than 4,096 are occupied); a namespace's,
//! among others', are at most 2 bytes each.
//!
//! Decision: the objects come in slot order, not sorted by key as [`Store::list`]'s: an
//! initial state is a set (a watch's client keys it, a queue dedups it), and sorting would
//! need every key at once, which is what this avoids.

use std::collections::HashSet;
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::codec;
use super::log::LogEntry;
use super::object::Namespaces;
use super::reader::namespace_filter;
use super::state::Shared;
use super::{Blob, ChangeKind, Store, StoreError, StoredObject};

/// The objects of a store (or of one namespace) at one revision, read a page at a time.
pub struct Pages {
    shared: Arc<Shared>,
    revision: u64,
    /// Which objects it reads.
    source: Source,
    /// The slots occupied at `revision`.
    slots: RoaringBitmap,
    /// How many of `slots` have been read: those below `next`.
    read: usize,
    /// The first slot not yet read (past the last read).
    next: u32,
}

/// Which objects a [`Pages`] reads.
#[derive(Clone)]
enum Source {
    /// Those of a namespace (`None`: every object).
    Namespace(Option<String>),
    /// Those an index (by position) has under a value.
    Index(usize, String),
}

impl Store {
    /// Every object, or those in one namespace, at the current revision, to be read a page at
    /// a time ([`Pages::next_page`]); see the module's comment for what that saves and costs.
    pub fn pages(&self, namespace: Option<&str>) -> Pages {
        Pages::read(
            &self.shared,
            Source::Namespace(namespace.map(str::to_string)),
            0,
        )
    }

    /// [`Store::pages`] of the objects whose `index` values include `value` (what
    /// [`Store::list_by_index`] copies at once).
    ///
    /// Decision: an index's objects are paged too. A lookup can be large: an informer of one
    /// DaemonSet's pods by its label is one pod per node, and two such informers of 10,000
    /// pods copied 3 MB each while they started (the NVSentinel profile, issue 32).
    pub fn pages_by_index(&self, index: &str, value: &str) -> Result<Pages, StoreError> {
        let i = self.shared.indexers.position(index)?;
        Ok(Pages::read(
            &self.shared,
            Source::Index(i, value.to_string()),
            0,
        ))
    }
}

impl Pages {
    /// The slots from `first` on that `source` has now, in slot order.
    fn read(shared: &Arc<Shared>, source: Source, first: u32) -> Pages {
        let st = shared.read();
        // The bitmap orders the slots, whatever order they come in (an index keeps its own).
        let slots: RoaringBitmap = match &source {
            Source::Namespace(namespace) => match namespace_filter(&st.atoms, namespace.as_deref())
            {
                Some(ns) => st
                    .slots
                    .occupied_slots(ns)
                    .filter(|&s| s >= first)
                    .collect(),
                None => RoaringBitmap::new(),
            },
            Source::Index(i, value) => st.indexes[*i]
                .slots(value)
                .filter(|&s| s >= first)
                .collect(),
        };
        let revision = st.revision;
        drop(st);
        Pages {
            shared: shared.clone(),
            revision,
            source,
            slots,
            read: 0,
            next: first,
        }
    }

    /// What is left to read, at the store's current revision R' instead of R: the objects in
    /// the slots after the last one read. For a reader that also takes every change after R
    /// (a key queue marks them from the watch hub), the two together lose nothing: an object
    /// of a slot already read, or of a later one, that changed, came or went after R is one of
    /// those changes; one that did not is read as it was at R, whichever pages it is in.
    ///
    /// Decision: this is what a key queue does when its resync's next page is Expired, instead
    /// of sending every key once more; a watcher's initial state cannot (its client expects
    /// one revision) and ends instead.
    pub fn resume(&self) -> Pages {
        Pages::read(&self.shared, self.source.clone(), self.next)
    }

    /// How many objects are still to be read.
    pub fn remaining(&self) -> usize {
        self.len() - self.read
    }

    /// The revision every object read from it is at.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// How many objects it holds, read or not.
    pub fn len(&self) -> usize {
        // A bitmap counts its values per container of 65,536 slots: a few additions.
        self.slots.len() as usize
    }

    /// The bytes its set of slots holds (about; what it would take serialized).
    #[cfg(test)]
    pub(crate) fn slots_bytes(&self) -> usize {
        self.slots.serialized_size()
    }

    /// Whether it holds no object.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The next at most `max` objects (none once all have been read), each as it was at
    /// [`Pages::revision`]; [`StoreError::Expired`] when the change log no longer holds what
    /// some of them were then.
    pub fn next_page(&mut self, max: usize) -> Result<Vec<StoredObject>, StoreError> {
        let page: Vec<u32> = self.slots.range(self.next..).take(max.max(1)).collect();
        let sh = &self.shared;
        let st = sh.read();
        let mut namespaces = Namespaces::default();
        let mut out = Vec::with_capacity(page.len());
        let mut changed = HashSet::new();
        for &slot in &page {
            match st.slots.get(slot) {
                Some(blob) if codec::parse_header(blob).revision <= self.revision => {
                    let blob = Blob::from(blob);
                    out.push(StoredObject::from_blob(
                        sh,
                        &st,
                        blob,
                        None,
                        &mut namespaces,
                    ));
                }
                _ => {
                    changed.insert(slot);
                }
            }
        }
        if !changed.is_empty() {
            for (_, entry) in st.log.since(self.revision, st.revision)? {
                if !changed.remove(&entry.slot) {
                    continue;
                }
                let state = state_before(entry)
                    .expect(
                        "a slot occupied at a revision changes first by a modification or deletion",
                    )
                    .clone();
                out.push(StoredObject::from_blob(
                    sh,
                    &st,
                    state,
                    None,
                    &mut namespaces,
                ));
                if changed.is_empty() {
                    break;
                }
            }
            debug_assert!(changed.is_empty(), "every changed slot has a logged change");
        }
        drop(st);
        if let Some(&last) = page.last() {
            self.read += page.len();
            self.next = last + 1;
        }
        Ok(out)
    }
}

/// The state an entry's change replaced: a modification's previous state, a deletion's last
/// state before it (the one it replaced, when it was sealed with its own resourceVersion).
fn state_before(entry: &LogEntry) -> Option<&Blob> {
    match entry.kind {
        ChangeKind::Added => None,
        ChangeKind::Modified => entry.previous(),
        ChangeKind::Deleted => entry.previous().or(entry.object()),
    }
}
