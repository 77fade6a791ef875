//! The JSON text of several objects written one after the other into one buffer (a List's
//! chunk), with what makes that cheaper than writing each alone: a constant the objects share
//! (an app's pods their annotations) is written once and copied from the buffer after that
//! (`codec::Written`).
//!
//! Why a type of its own: the places `Written` remembers are ranges of one buffer, and are
//! right only while that buffer only grows. The batch holds the two together, so that no
//! caller can pair them wrongly; [`JsonBatch::take`] hands the buffer out and forgets them.

use std::sync::{Arc, Weak};

use super::codec::Written;
use super::state::Shared;
use super::StoredObject;

/// A buffer of JSON text that objects are appended to.
///
/// The places remembered are keyed by one store's atom ids: an object of another store than the
/// last one's makes the batch forget them (a List's candidates all come from one store, so a
/// List never does).
#[derive(Default)]
pub struct JsonBatch {
    out: Vec<u8>,
    written: Written,
    /// The store whose atom ids `written` is keyed by. Decision: a `Weak`, compared by address:
    /// it does not keep the store alive, and no other store can be given that address while it
    /// is held.
    store: Weak<Shared>,
}

impl JsonBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the whole object's JSON text (the bytes of [`StoredObject::write_json`]).
    pub fn write(&mut self, object: &StoredObject) {
        let store = object.store();
        if !std::ptr::eq(self.store.as_ptr(), Arc::as_ptr(store)) {
            self.written.clear();
            self.store = Arc::downgrade(store);
        }
        object.write_json_batched(&mut self.out, &mut self.written);
    }

    /// Appends whatever `write` writes (a selection of an object, `transform::Transform::
    /// write_json`); `write` may only append. What it writes is not remembered.
    pub fn write_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let len = self.out.len();
        write(&mut self.out);
        if self.out.len() < len {
            // Cut below what was written before: the ranges may name other bytes now.
            self.written.clear();
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing was written since the batch was made or taken.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Room for at least `additional` more bytes.
    pub fn reserve(&mut self, additional: usize) {
        self.out.reserve(additional);
    }

    /// How many shared constants the batch remembers the place of (its tests).
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        self.written.len()
    }

    /// The text written so far; the batch starts again empty.
    pub fn take(&mut self) -> Vec<u8> {
        self.written.clear();
        std::mem::take(&mut self.out)
    }
}
