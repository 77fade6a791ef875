//! What every handle on one store shares ([`Shared`]): the lock over its [`State`], and what
//! is fixed or signalled outside the lock (epoch, revision channel, indexers). The `State` is
//! what one write changes as a whole: atoms, slots, indexes, the change log, retired blobs.

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::watch;

use super::atoms::Atoms;
use super::index::{IndexData, Indexers};
use super::log::{Log, LogEntry};
use super::retired::Retired;
use super::slots::Slots;
use super::StoreOptions;

pub(super) struct Shared {
    state: RwLock<State>,
    pub(super) epoch: u64,
    pub(super) revisions: watch::Sender<u64>,
    pub(super) indexers: Indexers,
}

impl Shared {
    pub(super) fn new(opts: StoreOptions) -> Self {
        Self::with_epoch(opts, rand::random())
    }

    /// A store of the given epoch: a new one's is random, a restored one keeps its own.
    pub(super) fn with_epoch(opts: StoreOptions, epoch: u64) -> Self {
        let (revisions, _) = watch::channel(0);
        let state = State {
            atoms: Atoms::new(),
            slots: Slots::new(),
            revision: 0,
            log: Log::new(opts.log_max_events, opts.log_max_bytes),
            indexes: (0..opts.indexes.len())
                .map(|_| IndexData::default())
                .collect(),
            retired: Retired::new(),
        };
        Self {
            state: RwLock::new(state),
            epoch,
            revisions,
            indexers: Indexers::new(opts.indexes),
        }
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) struct State {
    pub(super) atoms: Atoms,
    pub(super) slots: Slots,
    /// The revision of the last change.
    pub(super) revision: u64,
    pub(super) log: Log,
    pub(super) indexes: Vec<IndexData>,
    pub(super) retired: Retired,
}

impl State {
    /// Records a change in the log; the blobs only the entries it drops held are retired.
    pub(super) fn log_push(&mut self, entry: LogEntry) {
        let Self {
            atoms,
            log,
            retired,
            ..
        } = self;
        log.push(entry, |blob| retired.retire(atoms, blob));
    }

    /// Ends a write: counts it, and sweeps the retired blobs from time to time.
    pub(super) fn after_write(&mut self) {
        self.retired.after_write(&mut self.atoms);
    }

    /// Releases what readers have let go of.
    pub(super) fn sweep(&mut self) {
        self.retired.sweep(&mut self.atoms);
    }
}
