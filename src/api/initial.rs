//! What a watch's initial state and a key queue's resync read: the candidates of a request at
//! one revision, a page at a time.
//!
//! Decision: a request that names an index (or that the label index answers) gets its
//! candidates copied at once, as a List does: they are few, and already found. Any other reads
//! its namespace, or the whole resource, through the store's [`Pages`]: 4 bytes per object
//! until a page is read, instead of a copy of every object for as long as the initial state
//! takes (issue 32: a few informers of every pod starting at once held most of informerd's
//! peak memory in those copies). See `store/pages.rs` for how a page stays as of the
//! snapshot's revision, and when it is Expired.

use crate::store::{Pages, StoreError, StoredObject};

use super::query::Query;
use super::Resource;

/// Objects a page holds: a page is copied under the store's read lock, so writers wait for
/// one page at most.
const PAGE: usize = 256;

/// A request's candidates at one revision.
pub enum Initial {
    /// An index lookup's candidates, not yet taken.
    Found(Vec<StoredObject>),
    /// A namespace, or every object, read a page at a time.
    Paged(Pages),
}

impl Initial {
    /// The candidates of `query` (a superset of its matches) at the store's current revision,
    /// with that revision.
    pub fn read(query: &Query, resource: &Resource) -> (u64, Initial) {
        if query.uses_index() {
            let (revision, found) = query.candidates(resource);
            return (revision, Initial::Found(found));
        }
        let pages = resource.store().pages(query.namespace());
        (pages.revision(), Initial::Paged(pages))
    }

    /// How many candidates are still to be given.
    pub fn remaining(&self) -> usize {
        match self {
            Initial::Found(found) => found.len(),
            Initial::Paged(pages) => pages.remaining(),
        }
    }

    /// After an Expired page: the candidates not yet given, at the store's current revision
    /// ([`Pages::resume`], for a reader that also takes every change since). An index lookup's
    /// candidates, already copied, never expire.
    pub fn resume(&mut self) {
        if let Initial::Paged(pages) = self {
            *pages = pages.resume();
        }
    }

    /// The next candidates, none once all have been given; Expired when the store's change
    /// log no longer reaches back to the revision (`store/pages.rs`).
    pub fn next_page(&mut self) -> Result<Vec<StoredObject>, StoreError> {
        match self {
            Initial::Found(found) => Ok(std::mem::take(found)),
            Initial::Paged(pages) => pages.next_page(PAGE),
        }
    }
}
