//! Blobs the store let go of (replaced or deleted states that left the change log) while
//! readers may still decode copies that name the same atoms: their atoms are released once no
//! reader that could hold such a copy is left, checked again from time to time rather than on
//! every write.
//!
//! Decision: readers are counted by *pins*, not per blob. A reader's handle copies the bytes
//! it reads (current objects live in the slots' arena, see `slots`), so the blob it was
//! copied from cannot tell whether a reader still needs its atoms. Every handle takes the
//! store's current pin (an `Arc`, cloned under the lock); a blob retired while handles hold
//! pins waits in the generation of the newest pin, and a generation is released once its pin
//! and every older one are held by no handle. A handle taken later cannot name the retired
//! blob's atoms through it: the blob had left the store. The cost: a handle kept for long
//! (a slow client's List) holds back the release of every blob retired meanwhile, not only of
//! its own; the atoms wait, they are not lost, and handles are meant for one request.

use std::collections::VecDeque;

use super::atoms::Atoms;
use super::codec;
use super::Blob;

/// What a handle holds so that the atoms its copy names outlive the blob it was copied from.
pub(super) type Pin = triomphe::Arc<()>;

/// Retired blobs are checked again once there are this many, or every `SWEEP_EVERY` writes.
const SWEEP_MIN: usize = 64;
const SWEEP_EVERY: u64 = 1024;

pub(super) struct Retired {
    /// The pin handles take now.
    pin: Pin,
    /// Blobs waiting for readers, oldest generation first: each with the pin that was
    /// current when it was retired.
    waiting: VecDeque<(Pin, Vec<Blob>)>,
    /// Blobs in `waiting`.
    count: usize,
    sweep_at: usize,
    writes: u64,
}

/// True when no handle holds `pin` (only the store does).
fn unheld(pin: &Pin) -> bool {
    Pin::count(pin) == 1
}

impl Retired {
    pub(super) fn new() -> Self {
        Self {
            pin: Pin::new(()),
            waiting: VecDeque::new(),
            count: 0,
            sweep_at: SWEEP_MIN,
            writes: 0,
        }
    }

    /// The pin a new handle takes (under the store's lock).
    pub(super) fn pin(&self) -> Pin {
        self.pin.clone()
    }

    /// The store lets go of a blob: its atoms are released now, or once readers let go.
    pub(super) fn retire(&mut self, atoms: &mut Atoms, blob: Blob) {
        if unheld(&self.pin) {
            match self.waiting.back_mut() {
                None => codec::release_blob(atoms, &blob),
                // Handles of older pins may name its atoms: it waits with the newest of them.
                Some((_, blobs)) => {
                    blobs.push(blob);
                    self.count += 1;
                }
            }
        } else {
            // Handles hold the current pin: it becomes a generation, new handles take a new one.
            let held = std::mem::replace(&mut self.pin, Pin::new(()));
            self.waiting.push_back((held, vec![blob]));
            self.count += 1;
        }
    }

    /// Releases the generations no reader holds any more, oldest first.
    pub(super) fn sweep(&mut self, atoms: &mut Atoms) {
        while self.waiting.front().is_some_and(|(pin, _)| unheld(pin)) {
            let (_, blobs) = self.waiting.pop_front().expect("checked");
            self.count -= blobs.len();
            for blob in blobs {
                codec::release_blob(atoms, &blob);
            }
        }
        self.waiting.shrink_to_fit();
        self.sweep_at = (self.count * 2).max(SWEEP_MIN);
    }

    /// Counts a write, sweeping when enough blobs or writes have gone by.
    pub(super) fn after_write(&mut self, atoms: &mut Atoms) {
        self.writes += 1;
        if self.count > 0
            && (self.count >= self.sweep_at || self.writes.is_multiple_of(SWEEP_EVERY))
        {
            self.sweep(atoms);
        }
    }
}
