//! Applying a transform while writing a stored object as JSON text (a request's field mask on
//! `List` and `Get`): the store writes straight from its encoding what the transform's trees
//! select, so that the fields a mask leaves out are skipped, never decoded.
//!
//! The result is byte for byte `serde_json::to_vec` of the decoded object after
//! [`Transform::apply`] (tested in `tests`).

use super::tree::Node;
use super::Transform;
use crate::store::{Selection, StoredObject};

impl Selection for Node {
    fn is_whole(&self) -> bool {
        self.terminal
    }

    fn field(&self, key: &str) -> Option<&Self> {
        self.child(key)
    }

    fn elements(&self) -> Option<&Self> {
        self.any.as_deref()
    }
}

impl Transform {
    /// `object` as JSON text with the transform applied, appended to `out`: the bytes of
    /// `serde_json::to_vec` of `object.to_json_value()` after [`Transform::apply`], without
    /// decoding the object.
    pub fn write_json(&self, object: &StoredObject, out: &mut Vec<u8>) {
        object.write_json_selected(self.inner.keep.as_ref(), self.inner.drop.as_ref(), out);
    }
}
