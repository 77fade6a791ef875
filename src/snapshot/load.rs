//! Loading a cache's snapshot at start-up: found, checked (format, checksum, fingerprints,
//! age), and restored into a store; or refused with the reason, and the cache lists.

use std::fs::File;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::{ResourceConfig, SnapshotConfig};
use crate::fleet::Warm;
use crate::store::{StoreOptions, Writer};

use super::file;
use super::fingerprint;
use super::format::{Header, Reader};
use super::SnapshotError;

/// The cache of `rc` as its snapshot in `settings.directory` held it, if there is one that
/// this configuration and cluster (`cluster`, see `fingerprint`) may resume from; otherwise
/// `None`, with a log line saying why.
pub fn restore(
    settings: &SnapshotConfig,
    cluster: &str,
    rc: &ResourceConfig,
    options: StoreOptions,
) -> Option<Warm> {
    let path = file::path(&settings.directory, &rc.name);
    let started = Instant::now();
    match load(settings, cluster, rc, options, &path) {
        Ok((warm, header)) => {
            tracing::info!(resource = %rc.name, path = %path.display(),
                objects = header.objects, scopes = warm.scopes.len(),
                age_seconds = age(&header).as_secs(), clean = header.clean,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "restored the cache from its snapshot; serving it while the watches resume");
            Some(warm)
        }
        Err(SnapshotError::Missing) => {
            tracing::info!(resource = %rc.name, path = %path.display(),
                "no snapshot; listing from the apiserver");
            None
        }
        Err(e) => {
            tracing::warn!(resource = %rc.name, path = %path.display(), reason = %e,
                "snapshot ignored; listing from the apiserver");
            None
        }
    }
}

fn load(
    settings: &SnapshotConfig,
    cluster: &str,
    rc: &ResourceConfig,
    options: StoreOptions,
    path: &Path,
) -> Result<(Warm, Header), SnapshotError> {
    // A clean snapshot already resumed from once is only good for an unclean resume.
    let (input, set_aside) = match File::open(path) {
        Ok(f) => (f, true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match File::open(file::resumed_path(path)) {
                Ok(f) => (f, false),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(SnapshotError::Missing)
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    let (mut header, mut reader) = Reader::open(input)?;
    check(settings, cluster, rc, &header)?;
    // Decision: the epoch is kept only after a clean shutdown. After a crash the previous
    // process may have handed out revisions past the snapshot's, which the restored store
    // would give again to other changes; a new epoch makes clients relist from informerd
    // (not from the apiserver) instead of resuming wrongly.
    header.clean &= set_aside;
    let epoch = if header.clean {
        header.epoch
    } else {
        rand::random()
    };
    let mut restore = Writer::restore(options, epoch, header.revision);
    let invalid = |e: crate::store::RestoreError| SnapshotError::Invalid(e.to_string());
    let mut buf = Vec::new();
    while let Some(id) = reader.next_atom(&mut buf)? {
        restore.atom(id, &buf).map_err(invalid)?;
    }
    while reader.next_object(&mut buf)? {
        restore.object(&buf).map_err(invalid)?;
    }
    let store = restore.finish();
    if store.len() as u64 != header.objects {
        return Err(SnapshotError::Invalid(format!(
            "{} objects restored of {}",
            store.len(),
            header.objects
        )));
    }
    if set_aside && header.clean {
        file::set_aside(path)?;
    }
    let scopes = std::mem::take(&mut header.scopes);
    Ok((Warm { store, scopes }, header))
}

/// Whether the snapshot belongs to this resource, configuration and cluster, and is recent.
fn check(
    settings: &SnapshotConfig,
    cluster: &str,
    rc: &ResourceConfig,
    header: &Header,
) -> Result<(), SnapshotError> {
    if header.resource != rc.name || header.config != fingerprint::of_resource(rc) {
        return Err(SnapshotError::Foreign {
            what: "with another configuration of this resource (kind, scope, selectors, \
                   filter or transform)",
        });
    }
    if header.layout != crate::store::layout() {
        return Err(SnapshotError::Foreign {
            what: "by a build of informerd that encodes objects another way",
        });
    }
    if header.cluster != cluster {
        return Err(SnapshotError::Foreign {
            what: "from another cluster (API server URL or CA)",
        });
    }
    let age = age(header);
    if age > settings.max_age {
        return Err(SnapshotError::TooOld {
            age,
            max_age: settings.max_age,
        });
    }
    Ok(())
}

/// How long ago the snapshot was written (zero if its time is ahead of ours).
fn age(header: &Header) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    now.saturating_sub(Duration::from_millis(header.written_at_ms))
}
