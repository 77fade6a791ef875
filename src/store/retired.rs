//! Blobs the store let go of (replaced or deleted states that left the change log) while
//! readers may still hold them: their atoms are released once the last reader lets go,
//! checked again from time to time rather than on every write.

use super::atoms::Atoms;
use super::codec;
use super::Blob;

/// Retired blobs are checked again once there are this many, or every `SWEEP_EVERY` writes.
const SWEEP_MIN: usize = 64;
const SWEEP_EVERY: u64 = 1024;

pub(super) struct Retired {
    /// Blobs the store no longer holds but readers still do.
    blobs: Vec<Blob>,
    sweep_at: usize,
    writes: u64,
}

impl Retired {
    pub(super) fn new() -> Self {
        Self {
            blobs: Vec::new(),
            sweep_at: SWEEP_MIN,
            writes: 0,
        }
    }

    /// The store lets go of a blob: its atoms are released now, or once readers let go.
    pub(super) fn retire(&mut self, atoms: &mut Atoms, blob: Blob) {
        if Blob::count(&blob) == 1 {
            codec::release_blob(atoms, &blob);
        } else {
            self.blobs.push(blob);
        }
    }

    /// Releases the retired blobs no reader holds any more.
    pub(super) fn sweep(&mut self, atoms: &mut Atoms) {
        for blob in std::mem::take(&mut self.blobs) {
            self.retire(atoms, blob);
        }
        self.blobs.shrink_to_fit();
        self.sweep_at = (self.blobs.len() * 2).max(SWEEP_MIN);
    }

    /// Counts a write, sweeping when enough blobs or writes have gone by.
    pub(super) fn after_write(&mut self, atoms: &mut Atoms) {
        self.writes += 1;
        if !self.blobs.is_empty()
            && (self.blobs.len() >= self.sweep_at || self.writes.is_multiple_of(SWEEP_EVERY))
        {
            self.sweep(atoms);
        }
    }
}
