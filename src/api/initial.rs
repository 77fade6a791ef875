//! What a watch's initial state and a key queue's resync read: the candidates of a request at
//! one revision, a page at a time.
//!
//! Decision: every request reads its candidates through the store's [`Pages`], an index
//! lookup's as well as a namespace's or the whole resource's: 4 bytes per object until a page
//! is read, instead of a copy of every object for as long as the initial state takes (issue
//! 32: a few informers of every pod starting at once held most of informerd's peak memory in
//! those copies, and an informer of one DaemonSet's pods by its label is one pod per node).
//! See `store/pages.rs` for how a page stays as of the snapshot's revision, and when it is
//! Expired. A List still copies its candidates at once (`list.rs`): it sorts them and renders
//! them straight away.

use crate::store::{Pages, StoreError, StoredObject};

use super::query::Query;
use super::Resource;

/// Objects a page holds: a page is copied under the store's read lock, so writers wait for
/// one page at most.
const PAGE: usize = 256;

/// A request's candidates at one revision.
pub struct Initial(Pages);

impl Initial {
    /// The candidates of `query` (a superset of its matches) at the store's current revision,
    /// with that revision.
    pub fn read(query: &Query, resource: &Resource) -> (u64, Initial) {
        let pages = query.pages(resource);
        (pages.revision(), Initial(pages))
    }

    /// How many candidates are still to be given.
    pub fn remaining(&self) -> usize {
        self.0.remaining()
    }

    /// After an Expired page: the candidates not yet given, at the store's current revision
    /// ([`Pages::resume`], for a reader that also takes every change since).
    pub fn resume(&mut self) {
        self.0 = self.0.resume();
    }

    /// The next candidates, none once all have been given; Expired when the store's change
    /// log no longer reaches back to the revision (`store/pages.rs`).
    pub fn next_page(&mut self) -> Result<Vec<StoredObject>, StoreError> {
        self.0.next_page(PAGE)
    }
}
