//! The snapshot file without a cluster: written and restored equal to the store, and every way
//! a file can be wrong refused for the right reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::format::{self, Header};
use super::{file, fingerprint, load, SnapshotError};
use crate::config::{ResourceConfig, SnapshotConfig};
use crate::store::{StoreOptions, Writer};

fn resource() -> ResourceConfig {
    let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  namespaces: [a]\n";
    crate::config::parse("f.yaml", text)
        .expect("valid")
        .resources[0]
        .clone()
}

fn settings(dir: &Path) -> SnapshotConfig {
    SnapshotConfig {
        directory: dir.to_path_buf(),
        interval: Duration::from_secs(300),
        max_age: Duration::from_secs(3600),
    }
}

/// A directory of the test's own, removed when the test ends.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("informerd-snap-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

fn pod(name: &str, rv: u64) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "a", "resourceVersion": rv.to_string()},
           "spec": {"nodeName": "n"}})
}

/// A store with a few changes, written as `resource()`'s snapshot in `dir`; returns the store.
fn write_snapshot(dir: &Path, clean: bool, age: Duration) -> Writer {
    write_snapshot_in(dir, clean, age, crate::store::layout())
}

/// [`write_snapshot`], as a build whose store encodes in `layout` would write it.
fn write_snapshot_in(dir: &Path, clean: bool, age: Duration, layout: &str) -> Writer {
    let store = Writer::new(StoreOptions::default());
    for i in 0..20 {
        store.apply(pod(&format!("p{i}"), 100 + i)).expect("apply");
    }
    store.apply(pod("p3", 200)).expect("modify");
    store.delete(&crate::store::ObjectKey::new(Some("a"), "p4"));
    let image = store.image();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() - age;
    let header = Header {
        resource: "pod".into(),
        config: fingerprint::of_resource(&resource()),
        cluster: "cluster-1".into(),
        written_at_ms: now.as_millis() as u64,
        clean,
        epoch: image.epoch,
        revision: image.revision,
        layout: layout.to_owned(),
        atoms: image.atom_count() as u64,
        objects: image.object_count() as u64,
        scopes: BTreeMap::from([("a".to_owned(), "200".to_owned())]),
    };
    let path = file::path(dir, "pod");
    file::write_atomically(&path, |out| format::write(out, &header, &image)).expect("write");
    store
}

fn restore(dir: &Path, cluster: &str) -> Option<crate::fleet::Warm> {
    load::restore(
        &settings(dir),
        cluster,
        &resource(),
        StoreOptions::default(),
    )
}

/// Why the file in `dir` does not open as a snapshot.
fn format_error(dir: &Path) -> SnapshotError {
    let path = file::path(dir, "pod");
    let input = std::fs::File::open(&path).expect("the file is there");
    match format::Reader::open(input) {
        Ok(_) => panic!("{} opens", path.display()),
        Err(e) => e,
    }
}

fn contents(store: &crate::store::Store) -> Vec<(String, u64, serde_json::Value)> {
    let (_, items) = store.list(None);
    items
        .iter()
        .map(|o| (o.key().to_string(), o.revision(), o.to_json_value()))
        .collect()
}

#[test]
fn a_clean_snapshot_restores_the_store_with_its_epoch_once() {
    let dir = temp_dir("clean");
    let store = write_snapshot(&dir, true, Duration::ZERO);
    let warm = restore(&dir, "cluster-1").expect("restored");
    assert_eq!(
        warm.store.epoch(),
        store.epoch(),
        "clients keep their tokens"
    );
    assert_eq!(warm.store.revision(), store.revision());
    assert_eq!(contents(&warm.store), contents(&store));
    assert_eq!(warm.scopes, BTreeMap::from([("a".into(), "200".into())]));
    // Resumed once: a second start (after a crash of the first) restores the objects but not
    // the epoch, whose later revisions the crashed process may have handed out.
    assert!(!file::path(&dir, "pod").exists(), "set aside");
    let again = restore(&dir, "cluster-1").expect("restored again");
    assert_ne!(again.store.epoch(), store.epoch());
    assert_eq!(contents(&again.store), contents(&store));
    // A new snapshot supersedes the set-aside one.
    write_snapshot(&dir, false, Duration::ZERO);
    assert!(!file::resumed_path(&file::path(&dir, "pod")).exists());
}

#[test]
fn a_periodic_snapshot_restores_the_objects_under_a_new_epoch() {
    let dir = temp_dir("periodic");
    let store = write_snapshot(&dir, false, Duration::ZERO);
    let warm = restore(&dir, "cluster-1").expect("restored");
    assert_ne!(warm.store.epoch(), store.epoch());
    assert_eq!(warm.store.revision(), store.revision());
    assert_eq!(contents(&warm.store), contents(&store));
    assert!(file::path(&dir, "pod").exists(), "kept for the next start");
}

#[test]
fn foreign_old_and_missing_snapshots_are_refused() {
    let dir = temp_dir("refused");
    assert!(restore(&dir, "cluster-1").is_none(), "none yet");
    write_snapshot(&dir, true, Duration::ZERO);
    assert!(restore(&dir, "cluster-2").is_none(), "another cluster");
    assert!(
        file::path(&dir, "pod").exists(),
        "a refused snapshot is not consumed"
    );
    write_snapshot(&dir, true, Duration::from_secs(7200));
    assert!(restore(&dir, "cluster-1").is_none(), "older than maxAge");
    write_snapshot_in(&dir, true, Duration::ZERO, "0-00000000");
    assert!(
        restore(&dir, "cluster-1").is_none(),
        "written by a build that encodes another way"
    );
    let other = {
        let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  namespaces: [a]\n  labelSelector: app=x\n";
        crate::config::parse("f.yaml", text)
            .expect("valid")
            .resources[0]
            .clone()
    };
    write_snapshot(&dir, true, Duration::ZERO);
    assert!(
        load::restore(
            &settings(&dir),
            "cluster-1",
            &other,
            StoreOptions::default()
        )
        .is_none(),
        "another configuration"
    );
    assert!(
        restore(&dir, "cluster-1").is_some(),
        "and it is good for its own"
    );
}

#[test]
fn damaged_files_are_refused_for_what_is_wrong_with_them() {
    let dir = temp_dir("damaged");
    write_snapshot(&dir, false, Duration::ZERO);
    let path = file::path(&dir, "pod");
    let good = std::fs::read(&path).expect("read");

    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x20;
    std::fs::write(&path, &flipped).unwrap();
    assert!(matches!(format_error(&dir), SnapshotError::Checksum { .. }));
    assert!(restore(&dir, "cluster-1").is_none());

    std::fs::write(&path, &good[..good.len() - 100]).unwrap();
    assert!(matches!(format_error(&dir), SnapshotError::Checksum { .. }));
    std::fs::write(&path, &good[..10]).unwrap();
    assert!(matches!(format_error(&dir), SnapshotError::Truncated));
    assert!(restore(&dir, "cluster-1").is_none());

    let mut version = good.clone();
    version[format::MAGIC.len()] = 9;
    std::fs::write(&path, &version).unwrap();
    assert!(matches!(
        format_error(&dir),
        SnapshotError::UnknownVersion { found: 9, .. }
    ));
    std::fs::write(&path, b"{\"not\": \"a snapshot\"}").unwrap();
    assert!(matches!(format_error(&dir), SnapshotError::NotASnapshot));
    assert!(restore(&dir, "cluster-1").is_none());

    std::fs::write(&path, &good).unwrap();
    assert!(restore(&dir, "cluster-1").is_some(), "the good file loads");
}
