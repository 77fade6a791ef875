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
    pub(super) values: HashMap<Box<str>, Slots, RandomState>,
}

/// The slots under one value.
///
/// Decision: most values of a label index are shared by a few objects (a ReplicaSet's
/// `pod-template-hash`, an app's `instance`): a set of its own each, with its own hasher and
/// table, cost about 100 bytes per value beyond the slots. A sorted vector holds up to
/// [`FEW`] slots (4 bytes each, binary search), and a value shared by more switches to a set,
/// so that adding and removing stay cheap under a namespace-wide `app=web`.
pub(super) enum Slots {
    Few(Vec<u32>),
    // Boxed: a set inline would make every value's entry 64 bytes instead of 24.
    #[allow(clippy::box_collection)]
    Many(Box<HashSet<u32, RandomState>>),
}

/// The most slots a value keeps in a sorted vector.
const FEW: usize = 32;

impl Slots {
    fn insert(&mut self, slot: u32) {
        match self {
            Slots::Few(few) => {
                if let Err(at) = few.binary_search(&slot) {
                    if few.len() < FEW {
                        few.insert(at, slot);
                    } else {
                        let mut many =
                            HashSet::with_capacity_and_hasher(FEW * 2, RandomState::new());
                        many.extend(few.iter().copied());
                        many.insert(slot);
                        *self = Slots::Many(Box::new(many));
                    }
                }
            }
            Slots::Many(many) => {
                many.insert(slot);
            }
        }
    }

    /// Removes `slot`; whether none is left.
    fn remove(&mut self, slot: u32) -> bool {
        match self {
            Slots::Few(few) => {
                if let Ok(at) = few.binary_search(&slot) {
                    few.remove(at);
                    if few.capacity() > few.len() * 2 {
                        few.shrink_to_fit();
                    }
                }
                few.is_empty()
            }
            Slots::Many(many) => {
                many.remove(&slot);
                if many.len() <= FEW / 2 {
                    let mut few: Vec<u32> = many.iter().copied().collect();
                    few.sort_unstable();
                    *self = Slots::Few(few);
                } else if many.capacity() > 16 && many.len() * 4 < many.capacity() {
                    many.shrink_to(many.len() * 2);
                }
                false
            }
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Slots::Few(few) => Box::new(few.iter().copied()),
            Slots::Many(many) => Box::new(many.iter().copied()),
        }
    }
}

impl IndexData {
    fn insert(&mut self, value: &str, slot: u32) {
        match self.values.get_mut(value) {
            Some(slots) => slots.insert(slot),
            None => {
                self.values.insert(value.into(), Slots::Few(vec![slot]));
            }
        }
    }

    fn remove(&mut self, value: &str, slot: u32) {
        if let Some(slots) = self.values.get_mut(value) {
            if slots.remove(slot) {
                self.values.remove(value);
            }
        }
    }

    /// The slots of the objects under `value`.
    pub(super) fn slots(&self, value: &str) -> impl Iterator<Item = u32> + '_ {
        self.values.get(value).into_iter().flat_map(Slots::iter)
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
