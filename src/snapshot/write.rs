//! Taking snapshots: every `interval` while informerd runs, and once more at shutdown after
//! the streams have stopped (a "clean" one, whose epoch the next start keeps).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;

use crate::config::{Config, SnapshotConfig};
use crate::fleet::{Fleet, ResourceCache};

use super::format::{self, Header};
use super::{file, fingerprint, SnapshotError};

/// Writes the snapshots of a fleet's caches.
pub struct Snapshotter {
    settings: SnapshotConfig,
    cluster: String,
    /// Each cache, with the fingerprint of its configuration.
    caches: Vec<(Arc<ResourceCache>, String)>,
    /// One write at a time: the periodic one may still run (on a blocking thread) when the
    /// shutdown's starts.
    writing: Arc<Mutex<()>>,
}

impl Snapshotter {
    /// The snapshots of `fleet`'s caches, as `config` configures them, for the cluster whose
    /// fingerprint is `cluster`.
    pub fn new(settings: SnapshotConfig, cluster: String, config: &Config, fleet: &Fleet) -> Self {
        let caches = fleet
            .caches()
            .iter()
            // Remote clusters' caches start cold: a snapshot is of the default cluster.
            .filter(|c| c.cluster.is_empty())
            .filter_map(|c| {
                let rc = config.resource(&c.name)?;
                Some((c.clone(), fingerprint::of_resource(rc)))
            })
            .collect();
        Snapshotter {
            settings,
            cluster,
            caches,
            writing: Arc::default(),
        }
    }

    /// Writes a snapshot every `interval` until aborted.
    pub fn spawn_periodic(self: &Arc<Self>) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(this.settings.interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                this.write_all(false).await;
            }
        })
    }

    /// Writes every cache's snapshot, logging each result. `clean`: the streams have stopped,
    /// nothing changes the caches any more (at shutdown).
    pub async fn write_all(&self, clean: bool) {
        for (cache, config) in &self.caches {
            let job = Job {
                settings: self.settings.clone(),
                cluster: self.cluster.clone(),
                config: config.clone(),
                cache: cache.clone(),
                clean,
            };
            let writing = self.writing.clone();
            let started = Instant::now();
            let result = tokio::task::spawn_blocking(move || {
                let _one_at_a_time = writing.lock().unwrap_or_else(PoisonError::into_inner);
                job.run()
            })
            .await;
            let path = file::path(&self.settings.directory, &cache.name);
            match result {
                Ok(Ok((objects, bytes))) => tracing::info!(resource = %cache.name,
                    path = %path.display(), objects, bytes, clean,
                    elapsed_ms = started.elapsed().as_millis() as u64, "snapshot written"),
                Ok(Err(e)) => tracing::warn!(resource = %cache.name, path = %path.display(),
                    error = %e, "snapshot not written; the previous one stays"),
                Err(e) => tracing::warn!(resource = %cache.name, error = %e,
                    "snapshot not written; the previous one stays"),
            }
        }
    }
}

/// One cache's snapshot, written on a blocking thread.
struct Job {
    settings: SnapshotConfig,
    cluster: String,
    config: String,
    cache: Arc<ResourceCache>,
    clean: bool,
}

impl Job {
    /// Writes the file; returns the objects and bytes written.
    fn run(self) -> Result<(u64, u64), SnapshotError> {
        // The scopes' resourceVersions first, then the objects: the store then holds at least
        // everything up to each resourceVersion, and what the resumed watch replays on top of
        // it changes nothing or moves objects forward (see `store::version`).
        let scopes = self
            .cache
            .scopes()
            .into_iter()
            .filter_map(|(label, s)| Some((label, s.resource_version?)))
            .collect();
        let image = self.cache.store.image();
        let written_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let header = Header {
            resource: self.cache.name.clone(),
            config: self.config,
            cluster: self.cluster,
            written_at_ms,
            clean: self.clean,
            epoch: image.epoch,
            revision: image.revision,
            layout: crate::store::layout().to_owned(),
            atoms: image.atom_count() as u64,
            objects: image.object_count() as u64,
            scopes,
        };
        let path = file::path(&self.settings.directory, &self.cache.name);
        let bytes = file::write_atomically(&path, |out| format::write(out, &header, &image))?;
        Ok((header.objects, bytes))
    }
}
