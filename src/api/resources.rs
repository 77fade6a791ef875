//! The resources the API serves, by the name clients use: the configuration's, fixed at
//! start-up, and the on-demand ones, added by `Ensure` and removed once idle (or too large).
//!
//! Every call that names a resource finds it through ONE function, [`Resources::lookup`], which
//! also counts as a client of an on-demand cache: a cache named by no call and watched by
//! nobody for `onDemand.idleTimeout` is stopped by [`Resources::reap`].
//!
//! Decision: a name of the configuration shadows an on-demand one (they cannot meet in
//! practice: configured names are DNS labels, on-demand names of named groups have a dot;
//! `ensure` refuses a core-group cache whose name a configured resource has).
//!
//! Decision: on-demand caches are kept by (cluster, name): the same kind ensured in two
//! clusters is two caches, each with its own store, idle time and stop; `onDemand.maxCaches`
//! counts them all, whatever their cluster.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch as signal;
use tokio::time::Instant;

use super::Resource;
use crate::fleet::Running;
use crate::proto;

/// Why an on-demand cache stopped: the `reason` of metrics and Status.
pub const STOPPED_IDLE: &str = "Idle";
/// It held more objects than `onDemand.maxObjects`.
pub const STOPPED_MAX_OBJECTS: &str = "MaxObjects";

/// Every served resource.
pub(super) struct Resources {
    fixed: Vec<Arc<Resource>>,
    /// By (cluster, name); the default cluster is `""`.
    on_demand: Mutex<BTreeMap<(String, String), Entry>>,
    starts: AtomicU64,
    stops: Mutex<BTreeMap<&'static str, u64>>,
    /// The last [`REMEMBERED_STOPS`] caches stopped, and why: a call naming one is told why it
    /// is gone, not only that it is.
    stopped: Mutex<std::collections::VecDeque<((String, String), &'static str)>>,
}

/// How many stopped caches the table remembers (a few hundred bytes each).
const REMEMBERED_STOPS: usize = 64;

/// One on-demand cache: what serves it, what fills it, and when a client last used it.
pub(super) struct Entry {
    resource: Arc<Resource>,
    namespaces: Vec<String>,
    last_used: Mutex<Instant>,
    /// Ends the resource's watch hub (and its watches) when the entry goes.
    stop: signal::Sender<bool>,
    /// Its streams; they stop when it is dropped.
    _running: Running,
}

impl Entry {
    /// An on-demand cache served by `resource` (whose hub ends with `stop`), filled by
    /// `running`.
    pub(super) fn new(
        resource: Arc<Resource>,
        namespaces: Vec<String>,
        stop: signal::Sender<bool>,
        running: Running,
    ) -> Entry {
        Entry {
            resource,
            namespaces,
            last_used: Mutex::new(Instant::now()),
            stop,
            _running: running,
        }
    }

    fn touch(&self) {
        *self.last_used.lock().expect("last_used poisoned") = Instant::now();
    }

    fn idle(&self) -> Duration {
        self.last_used.lock().expect("last_used poisoned").elapsed()
    }

    /// Watch calls (and WatchKeys streams) open on it.
    fn clients(&self) -> u64 {
        self.resource.watch_counts().watchers
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// What the on-demand caches are doing: for Status and metrics.
#[derive(Clone, Debug, Default)]
pub struct OnDemandReport {
    /// The caches running now.
    pub caches: Vec<proto::OnDemandStatus>,
    /// Caches started since start-up.
    pub starts: u64,
    /// Caches stopped since start-up, by reason ([`STOPPED_IDLE`], [`STOPPED_MAX_OBJECTS`]).
    pub stops: BTreeMap<&'static str, u64>,
}

/// How an insert went.
pub(super) enum Inserted {
    /// The entry was added: its resource.
    Started(Arc<Resource>),
    /// Another call added one under that name first: it, and the entry given, dropped.
    Joined(Arc<Resource>),
    /// `max` caches run already: the entry was dropped.
    Full(usize),
}

impl Resources {
    pub(super) fn new(fixed: Vec<Arc<Resource>>) -> Resources {
        Resources {
            fixed,
            on_demand: Mutex::default(),
            starts: AtomicU64::new(0),
            stops: Mutex::default(),
            stopped: Mutex::default(),
        }
    }

    /// The resource clients call `name` in `cluster` (empty: the default cluster); an
    /// on-demand one counts this as a use.
    pub(super) fn lookup(&self, cluster: &str, name: &str) -> Option<Arc<Resource>> {
        if let Some(r) = self
            .fixed
            .iter()
            .find(|r| r.name() == name && r.cluster() == cluster)
        {
            return Some(r.clone());
        }
        let map = self.on_demand.lock().expect("resources poisoned");
        let entry = map.get(&(cluster.to_string(), name.to_string()))?;
        entry.touch();
        Some(entry.resource.clone())
    }

    /// Whether `name` is a resource of the configuration in `cluster`.
    pub(super) fn is_configured(&self, cluster: &str, name: &str) -> bool {
        self.fixed
            .iter()
            .any(|r| r.name() == name && r.cluster() == cluster)
    }

    /// Every resource: the configuration's in its order, then the on-demand ones by cluster
    /// and name.
    pub(super) fn all(&self) -> Vec<Arc<Resource>> {
        let map = self.on_demand.lock().expect("resources poisoned");
        self.fixed
            .iter()
            .cloned()
            .chain(map.values().map(|e| e.resource.clone()))
            .collect()
    }

    /// How many on-demand caches run, in every cluster.
    pub(super) fn on_demand_count(&self) -> usize {
        self.on_demand.lock().expect("resources poisoned").len()
    }

    /// Adds `entry` as `name` of `cluster`, unless one is there already (joined) or `max` run
    /// (full).
    pub(super) fn insert(
        &self,
        (cluster, name): (&str, &str),
        entry: Entry,
        max: usize,
    ) -> Inserted {
        let mut map = self.on_demand.lock().expect("resources poisoned");
        let key = (cluster.to_string(), name.to_string());
        if let Some(existing) = map.get(&key) {
            existing.touch();
            return Inserted::Joined(existing.resource.clone());
        }
        if map.len() >= max {
            return Inserted::Full(map.len());
        }
        let resource = entry.resource.clone();
        self.stopped
            .lock()
            .expect("stopped poisoned")
            .retain(|(k, _)| *k != key);
        map.insert(key, entry);
        self.starts.fetch_add(1, Ordering::Relaxed);
        Inserted::Started(resource)
    }

    /// Stops the on-demand caches with no client for `idle_timeout` and those holding more
    /// than `max_objects`; returns their names (`cluster/name` for a remote cluster's) and why.
    /// A cache with a Watch open counts as used now.
    pub(super) fn reap(
        &self,
        idle_timeout: Duration,
        max_objects: usize,
    ) -> Vec<(String, &'static str)> {
        let mut removed = Vec::new();
        // Dropping an entry only aborts its tasks and signals its hub: cheap under the lock.
        self.on_demand
            .lock()
            .expect("resources poisoned")
            .retain(|(cluster, name), entry| {
                if entry.clients() > 0 {
                    entry.touch();
                }
                let why = if entry.resource.store().len() > max_objects {
                    STOPPED_MAX_OBJECTS
                } else if entry.idle() >= idle_timeout {
                    STOPPED_IDLE
                } else {
                    return true;
                };
                removed.push(((cluster.clone(), name.clone()), why));
                false
            });
        let mut stops = self.stops.lock().expect("stops poisoned");
        let mut stopped = self.stopped.lock().expect("stopped poisoned");
        for (key, why) in &removed {
            *stops.entry(why).or_default() += 1;
            stopped.push_back((key.clone(), why));
            if stopped.len() > REMEMBERED_STOPS {
                stopped.pop_front();
            }
        }
        removed
            .into_iter()
            .map(|((cluster, name), why)| (crate::fleet::qualified(&cluster, &name), why))
            .collect()
    }

    /// Why the on-demand cache `name` of `cluster` was stopped, if it was lately (and has not
    /// been started again).
    pub(super) fn stopped_because(&self, cluster: &str, name: &str) -> Option<&'static str> {
        let stopped = self.stopped.lock().expect("stopped poisoned");
        stopped
            .iter()
            .rev()
            .find(|((c, n), _)| c == cluster && n == name)
            .map(|(_, why)| *why)
    }

    /// Stops every on-demand cache (the API stops).
    pub(super) fn clear(&self) {
        let taken = std::mem::take(&mut *self.on_demand.lock().expect("resources poisoned"));
        drop(taken);
    }

    /// The on-demand caches and their counters.
    pub(super) fn report(&self) -> OnDemandReport {
        let map = self.on_demand.lock().expect("resources poisoned");
        let caches = map
            .iter()
            .map(|((cluster, name), entry)| {
                let status = entry.resource.status();
                let clients = entry.clients();
                proto::OnDemandStatus {
                    resource: name.clone(),
                    api_version: status.api_version,
                    kind: status.kind,
                    namespaces: entry.namespaces.clone(),
                    clients,
                    idle_seconds: if clients > 0 {
                        0.0
                    } else {
                        entry.idle().as_secs_f64()
                    },
                    objects: status.objects,
                    synced: status.synced,
                    cluster: crate::config::ClusterConfig::display(cluster).to_string(),
                }
            })
            .collect();
        OnDemandReport {
            caches,
            starts: self.starts.load(Ordering::Relaxed),
            stops: self.stops.lock().expect("stops poisoned").clone(),
        }
    }
}
