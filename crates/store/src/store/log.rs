//! The change log: the latest changes, oldest first, bounded by count and by the memory only
//! it keeps alive, so that a watcher can resume from a revision instead of relisting.
//!
//! An entry holds only the states nothing else holds: a Modified entry the state it replaced,
//! a Deleted one the object's last state. The new state of an Added or Modified change is the
//! replaced state of the object's next change, or, when there is none, the object in its
//! slot: [`Log::states`] finds it. When an entry leaves the log, the blobs it held are handed
//! back to be retired (see `retired`).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::atoms::Atoms;
use super::codec;
use super::slots::Slots;
use super::{Blob, ChangeKind, StoreError};

pub(super) struct LogEntry {
    pub(super) kind: ChangeKind,
    /// Memory this entry alone keeps alive, as counted against `log_max_bytes`.
    bytes: u32,
    /// When it was logged, in whole seconds since the log was made (see [`Log::oldest_age`]).
    ///
    /// Decision: seconds in a `u32` rather than an `Instant` (8 bytes more per entry): the age
    /// of the log is read by people and alerts, for whom a second is fine.
    at: u32,
    /// The object's slot (for a Deleted change, the slot it left).
    pub(super) slot: u32,
    /// The state only this entry holds: a Modified change's replaced state, a Deleted
    /// change's last stored state. `None` for Added.
    held: Option<Blob>,
    /// A Deletion sealed with its own resourceVersion: the last state sealed again, which is
    /// the change's (`held` is then the state it replaced).
    ///
    /// Decision: boxed, a thin pointer, since nearly every entry has none: an entry is 40
    /// bytes rather than 48 (80 KB of a full log of 10,000).
    sealed: Option<Box<Blob>>,
}

impl LogEntry {
    pub(super) fn new(
        atoms: &Atoms,
        kind: ChangeKind,
        slot: u32,
        object: Option<Blob>,
        previous: Option<Blob>,
    ) -> Self {
        debug_assert_eq!(object.is_some(), kind == ChangeKind::Deleted);
        // A Deleted entry has a replaced state when the deletion was sealed with its own
        // resourceVersion.
        let own: usize = [&object, &previous]
            .into_iter()
            .flatten()
            .map(|b| codec::exclusive_bytes(atoms, b))
            .sum();
        let bytes = size_of::<Self>() + own;
        let (held, sealed) = match (object, previous) {
            (Some(sealed), Some(replaced)) => (Some(replaced), Some(Box::new(sealed))),
            (object, previous) => (previous.or(object), None),
        };
        Self {
            kind,
            bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
            at: 0,
            slot,
            held,
            sealed,
        }
    }

    /// The last state of a deleted object; `None` for Added and Modified (see the module's
    /// comment).
    pub(super) fn object(&self) -> Option<&Blob> {
        match self.kind {
            ChangeKind::Deleted => self.sealed.as_deref().or(self.held.as_ref()),
            _ => None,
        }
    }

    /// The replaced state: of a Modified change, and of a Deleted one sealed with its own
    /// resourceVersion.
    pub(super) fn previous(&self) -> Option<&Blob> {
        match self.kind {
            ChangeKind::Modified => self.held.as_ref(),
            ChangeKind::Deleted => self.sealed.as_ref().and(self.held.as_ref()),
            ChangeKind::Added => None,
        }
    }

    /// The state before this change, for the object's previous entry: none before an
    /// addition.
    fn before(&self, state: &Blob) -> Option<Blob> {
        match self.kind {
            ChangeKind::Added => None,
            ChangeKind::Modified => self.previous().cloned(),
            ChangeKind::Deleted => Some(self.previous().unwrap_or(state).clone()),
        }
    }
}

pub(super) struct Log {
    /// Changes `revision - entries.len() + 1 ..= revision`, oldest first.
    entries: VecDeque<LogEntry>,
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
    /// The origin of the entries' `at`.
    made: Instant,
}

impl Log {
    pub(super) fn new(max_events: usize, max_bytes: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            bytes: 0,
            max_events,
            max_bytes,
            made: Instant::now(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes the log keeps alive.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Appends the entry of the latest change, then drops the oldest entries beyond the
    /// limits, handing `retire` the blobs they were the last to hold.
    pub(super) fn push(&mut self, mut entry: LogEntry, mut retire: impl FnMut(Blob)) {
        entry.at = u32::try_from(self.made.elapsed().as_secs()).unwrap_or(u32::MAX);
        self.bytes += entry.bytes as usize;
        self.reserve_one();
        self.entries.push_back(entry);
        while self.entries.len() > self.max_events
            || (self.bytes > self.max_bytes && !self.entries.is_empty())
        {
            let Some(oldest) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= oldest.bytes as usize;
            let sealed = oldest.sealed.map(|b| *b);
            for blob in [oldest.held, sealed].into_iter().flatten() {
                retire(blob);
            }
        }
    }

    /// Makes room for one more entry, growing by doubling but never past `max_events`.
    ///
    /// Decision: a full log of the default 10,000 events would otherwise sit in a ring of
    /// 16,384 entries (a power of two), 6,384 of them never used: about 300 KB per store.
    fn reserve_one(&mut self) {
        let (len, cap) = (self.entries.len(), self.entries.capacity());
        if len < cap {
            return;
        }
        let want = (cap * 2).max(4).min(self.max_events.max(len + 1));
        self.entries.reserve_exact(want - len);
    }

    /// How long ago the oldest entry was logged, to the second; zero when the log is empty.
    /// With `len`, how far back a watcher can resume.
    pub(super) fn oldest_age(&self) -> Duration {
        self.entries.front().map_or(Duration::ZERO, |oldest| {
            let now = self.made.elapsed().as_secs();
            Duration::from_secs(now.saturating_sub(u64::from(oldest.at)))
        })
    }

    /// The newest entry that `is` picks.
    pub(super) fn newest(&self, is: impl Fn(&LogEntry) -> bool) -> Option<&LogEntry> {
        self.entries.iter().rev().find(|e| is(e))
    }

    /// Exactly the entries after `revision`, oldest first, with their revisions (the store is
    /// at revision `current`), or why the log cannot give them.
    pub(super) fn since(
        &self,
        revision: u64,
        current: u64,
    ) -> Result<impl Iterator<Item = (u64, &LogEntry)> + '_, StoreError> {
        if revision > current {
            return Err(StoreError::FutureRevision {
                requested: revision,
                current,
            });
        }
        let oldest = current - self.entries.len() as u64;
        if revision < oldest {
            return Err(StoreError::Expired {
                requested: revision,
                oldest_available: oldest,
            });
        }
        let start = (revision - oldest) as usize;
        Ok(self
            .entries
            .iter()
            .enumerate()
            .skip(start)
            .map(move |(i, e)| (oldest + 1 + i as u64, e)))
    }

    /// The entries after `revision` ([`Log::since`]), each with the state its change made
    /// (for Deleted, the object's last state), oldest first.
    pub(super) fn states(
        &self,
        slots: &Slots,
        revision: u64,
        current: u64,
    ) -> Result<Vec<(u64, &LogEntry, Blob)>, StoreError> {
        let entries: Vec<(u64, &LogEntry)> = self.since(revision, current)?.collect();
        // Walked newest first: the state of an entry is the one before the object's next
        // change, or the object in its slot.
        let mut before: HashMap<u32, Blob> = HashMap::new();
        let mut out = Vec::with_capacity(entries.len());
        for (rev, e) in entries.into_iter().rev() {
            let state = match (e.object(), before.get(&e.slot)) {
                (Some(last), _) => last.clone(),
                (None, Some(next)) => next.clone(),
                (None, None) => Blob::from(
                    slots
                        .get(e.slot)
                        .expect("an object whose last change is logged is in its slot"),
                ),
            };
            match e.before(&state) {
                Some(b) => before.insert(e.slot, b),
                None => before.remove(&e.slot),
            };
            out.push((rev, e, state));
        }
        out.reverse();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> LogEntry {
        LogEntry {
            kind: ChangeKind::Added,
            bytes: 0,
            at: 0,
            slot: 0,
            held: None,
            sealed: None,
        }
    }

    /// Moves the log's origin back by `secs`: as if that much time had passed.
    fn wait(log: &mut Log, secs: u64) {
        log.made = log
            .made
            .checked_sub(Duration::from_secs(secs))
            .expect("the clock reaches back");
    }

    #[test]
    fn the_oldest_entry_is_as_old_as_the_time_since_it_was_logged() {
        let mut log = Log::new(2, usize::MAX);
        assert_eq!(log.oldest_age(), Duration::ZERO, "empty");
        wait(&mut log, 100);
        log.push(entry(), |_| {});
        wait(&mut log, 30);
        log.push(entry(), |_| {});
        assert_eq!(log.oldest_age(), Duration::from_secs(30));
        // The first entry leaves; the oldest is the second, logged just now.
        log.push(entry(), |_| {});
        assert_eq!(log.oldest_age(), Duration::ZERO);
    }

    /// A full log of the default 10,000 entries holds 400 KB of entries of its own, and
    /// nothing more for additions.
    #[test]
    fn an_entry_is_forty_bytes() {
        assert_eq!(size_of::<LogEntry>(), 40);
    }
}
