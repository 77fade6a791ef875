//! Secondary indexes: the configured [`Indexer`]s, which compute an object's values outside
//! the lock, and per index the slots of the objects under each value, kept under it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ahash::RandomState;
use serde_json::Value;

use super::{Indexer, StoreError};

/// The configured indexes, by name, in the order their values are computed and kept.
pub(super) struct Indexers(Vec<(String, Arc<dyn Indexer>)>);

impl Indexers {
    pub(super) fn new(indexers: Vec<(String, Arc<dyn Indexer>)>) -> Self {
        Self(indexers)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The values of `object` in every index.
    pub(super) fn values(&self, object: &Value) -> Vec<Vec<String>> {
        self.0.iter().map(|(_, ix)| ix.values(object)).collect()
    }

    /// The position of the index named `name`.
    pub(super) fn position(&self, name: &str) -> Result<usize, StoreError> {
        self.0
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| StoreError::UnknownIndex {
                name: name.to_owned(),
                known: self
                    .0
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// One index: the slots of the objects under each value.
#[derive(Default)]
pub(super) struct IndexData {
    pub(super) values: HashMap<Box<str>, HashSet<u32, RandomState>, RandomState>,
}

impl IndexData {
    fn insert(&mut self, value: &str, slot: u32) {
        match self.values.get_mut(value) {
            Some(set) => {
                set.insert(slot);
            }
            None => {
                let mut set = HashSet::with_capacity_and_hasher(1, RandomState::new());
                set.insert(slot);
                self.values.insert(value.into(), set);
            }
        }
    }

    fn remove(&mut self, value: &str, slot: u32) {
        if let Some(set) = self.values.get_mut(value) {
            set.remove(&slot);
            if set.is_empty() {
                self.values.remove(value);
            } else if set.capacity() > 16 && set.len() * 4 < set.capacity() {
                set.shrink_to(set.len() * 2);
            }
        }
    }

    /// The slots of the objects under `value`.
    pub(super) fn slots(&self, value: &str) -> impl Iterator<Item = u32> + '_ {
        self.values.get(value).into_iter().flatten().copied()
    }
}

/// Moves `slot` from its `old` values to its `new` ones (per index, as [`Indexers::values`]
/// gives them; an empty list for an object that was or is no longer there).
pub(super) fn reindex(
    indexes: &mut [IndexData],
    slot: u32,
    old: &[Vec<String>],
    new: &[Vec<String>],
) {
    for (i, index) in indexes.iter_mut().enumerate() {
        let old = old.get(i).map_or(&[][..], Vec::as_slice);
        let new = new.get(i).map_or(&[][..], Vec::as_slice);
        for v in old.iter().filter(|v| !new.contains(v)) {
            index.remove(v, slot);
        }
        for v in new.iter().filter(|v| !old.contains(v)) {
            index.insert(v, slot);
        }
    }
}
