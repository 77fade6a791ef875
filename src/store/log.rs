//! The change log: the latest changes, oldest first, bounded by count and by the memory only
//! it keeps alive, so that a watcher can resume from a revision instead of relisting.
//!
//! Entries share the encoded objects with the current state: a Modified entry is the last
//! holder of the state it replaced, a Deleted one of the object's last state. When an entry
//! leaves the log, those blobs are handed back to be retired (see `retired`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::atoms::Atoms;
use super::codec;
use super::{Blob, ChangeKind, StoreError};

pub(super) struct LogEntry {
    pub(super) kind: ChangeKind,
    /// Memory this entry alone keeps alive, as counted against `log_max_bytes`.
    bytes: u32,
    /// When it was logged, in whole seconds since the log was made (see [`Log::oldest_age`]).
    ///
    /// Decision: seconds in a `u32` rather than an `Instant` (8 bytes more per entry, the
    /// entry being ~110 bytes in all): the age of the log is read by people and alerts,
    /// for whom a second is fine.
    at: u32,
    /// The new state (last state for Deleted). For Added/Modified it is also held by the
    /// object's slot, or by the log entry of the object's next change.
    pub(super) object: Blob,
    /// The replaced state (Modified, and Deleted with its own resourceVersion): the log entry
    /// is its last holder.
    pub(super) previous: Option<Blob>,
}

impl LogEntry {
    pub(super) fn new(
        atoms: &Atoms,
        kind: ChangeKind,
        object: Blob,
        previous: Option<Blob>,
    ) -> Self {
        // The state only the log keeps: the replaced one, and the last one of a deleted object
        // (the new state of an ADDED/MODIFIED change is the current object's). A Deleted entry
        // has a replaced state when the deletion was sealed with its own resourceVersion.
        let replaced = previous
            .as_ref()
            .map_or(0, |p| codec::exclusive_bytes(atoms, p));
        let deleted = if kind == ChangeKind::Deleted {
            codec::exclusive_bytes(atoms, &object)
        } else {
            0
        };
        let own = replaced + deleted;
        let bytes = size_of::<Self>() + own;
        Self {
            kind,
            bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
            at: 0,
            object,
            previous,
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
            if oldest.kind == ChangeKind::Deleted {
                retire(oldest.object);
            }
            // Otherwise the object is still held by its slot or by a newer entry.
            if let Some(previous) = oldest.previous {
                retire(previous);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> LogEntry {
        LogEntry {
            kind: ChangeKind::Added,
            bytes: 0,
            at: 0,
            object: Blob::from(Vec::new()),
            previous: None,
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
}
