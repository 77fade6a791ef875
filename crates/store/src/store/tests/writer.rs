//! Revisions, no-op applies, Modified and Deleted changes, refused objects and the memory a
//! delete gives back.

use serde_json::json;

use super::*;

#[test]
fn revisions_are_monotonic_and_unchanged_applies_are_no_ops() {
    let store = Writer::new(StoreOptions::default());
    assert_eq!(store.revision(), 0);
    let a = store.apply(pod("ns", "a", "n1", 10)).unwrap().unwrap();
    assert_eq!((a.revision, a.kind), (1, ChangeKind::Added));
    assert_eq!(a.object.revision(), 1);
    assert_eq!(a.object.resource_version(), "10");
    assert!(a.previous.is_none());
    let b = store.apply(pod("ns", "b", "n1", 11)).unwrap().unwrap();
    assert_eq!(b.revision, 2);
    // A relist of the same objects changes nothing.
    assert!(store.apply(pod("ns", "a", "n1", 10)).unwrap().is_none());
    assert!(store.apply(pod("ns", "b", "n1", 11)).unwrap().is_none());
    assert_eq!(store.revision(), 2);
    assert_eq!(store.changes_since(0).unwrap().len(), 2);
    let m = store.apply(pod("ns", "a", "n2", 12)).unwrap().unwrap();
    assert_eq!((m.revision, m.kind), (3, ChangeKind::Modified));
    assert_eq!(store.get(&key("ns", "a")).unwrap().revision(), 3);
    assert_eq!(store.get(&key("ns", "b")).unwrap().revision(), 2);
    assert_eq!(store.len(), 2);
    assert_ne!(Writer::new(StoreOptions::default()).epoch(), store.epoch());
}

#[test]
fn modified_carries_the_previous_state() {
    let store = Writer::new(StoreOptions::default());
    store.apply(pod("ns", "a", "n1", 10)).unwrap();
    let m = store.apply(pod("ns", "a", "n2", 11)).unwrap().unwrap();
    let prev = m.previous.as_ref().expect("previous");
    assert_eq!(prev.to_json_value(), pod("ns", "a", "n1", 10));
    assert_eq!(prev.revision(), 1);
    assert_eq!(prev.resource_version(), "10");
    assert_eq!(m.object.to_json_value(), pod("ns", "a", "n2", 11));
    assert_eq!(m.object.label("app"), Some("web"));
    // The same through the log.
    let logged = store.changes_since(1).unwrap();
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].kind, ChangeKind::Modified);
    assert_eq!(
        logged[0].previous.as_ref().unwrap().to_json_value(),
        pod("ns", "a", "n1", 10)
    );
    assert_eq!(logged[0].object.resource_version(), "11");
}

#[test]
fn delete_records_the_last_state() {
    let store = Writer::new(StoreOptions::default());
    store.apply(pod("ns", "a", "n1", 10)).unwrap();
    assert!(store.delete(&key("ns", "missing")).is_none());
    assert!(store.delete(&key("other", "a")).is_none());
    assert_eq!(store.revision(), 1);
    let d = store.delete(&key("ns", "a")).unwrap();
    assert_eq!((d.revision, d.kind), (2, ChangeKind::Deleted));
    assert_eq!(d.object.to_json_value(), pod("ns", "a", "n1", 10));
    assert_eq!(d.object.revision(), 2);
    assert!(store.get(&key("ns", "a")).is_none());
    assert!(store.delete(&key("ns", "a")).is_none());
    assert_eq!(store.len(), 0);
    let logged = store.changes_since(1).unwrap();
    assert_eq!(logged[0].kind, ChangeKind::Deleted);
    assert_eq!(logged[0].key, key("ns", "a"));
    assert_eq!(logged[0].object.to_json_value(), pod("ns", "a", "n1", 10));
    // Re-adding is an ADDED again.
    let a = store.apply(pod("ns", "a", "n1", 12)).unwrap().unwrap();
    assert_eq!((a.revision, a.kind), (3, ChangeKind::Added));
}

#[test]
fn memory_is_released_when_objects_go() {
    let store = Writer::new(StoreOptions {
        log_max_events: 0,
        ..node_index()
    });
    let empty = store.stats();
    assert_eq!(empty.interned_strings, 0);
    for (_, p) in fixture_pods() {
        store.apply(controller_profile(&p)).unwrap();
        store.apply(p).unwrap();
    }
    let reader = store.list(None).1;
    assert!(store.stats().interned_strings > 0);
    for k in store.keys(None) {
        store.delete(&k);
    }
    // Readers still hold their versions...
    assert!(store.stats().interned_strings > 0);
    assert!(reader[0].to_json_value().is_object());
    drop(reader);
    store.reclaim();
    // ... and once they let go, nothing of the objects stays.
    assert_eq!(store.stats(), empty);
    let st = store.shared.read();
    assert!(st.indexes[0].values.is_empty());
    assert_eq!(st.slots.structure_bytes(), 0);
}

#[test]
fn a_deletion_carries_its_own_resource_version_and_releases_everything() {
    let store = Writer::new(StoreOptions::default());
    store.apply(pod("ns", "a", "n1", 10)).unwrap();
    let d = store.delete_at(&key("ns", "a"), Some("12")).unwrap();
    let mut expected = pod("ns", "a", "n1", 10);
    expected["metadata"]["resourceVersion"] = json!("12");
    assert_eq!(d.object.resource_version(), "12");
    assert_eq!(d.object.to_json_value(), expected);
    let logged = store.changes_since(1).unwrap();
    assert_eq!(logged[0].kind, ChangeKind::Deleted);
    assert_eq!(logged[0].object.resource_version(), "12");
    assert_eq!(logged[0].object.to_json_value(), expected);
    assert!(logged[0].previous.is_none());
    // Never older than the stored version; without one, the stored version.
    store.apply(pod("ns", "b", "n1", 20)).unwrap();
    let d = store.delete_at(&key("ns", "b"), Some("15")).unwrap();
    assert_eq!(d.object.resource_version(), "20");
    store.apply(pod("ns", "c", "n1", 30)).unwrap();
    let d = store.delete_at(&key("ns", "c"), None).unwrap();
    assert_eq!(d.object.resource_version(), "30");

    // The store remembers the deletion's version while the log holds it.
    assert_eq!(store.deleted_at(&key("ns", "a")).as_deref(), Some("12"));
    assert_eq!(store.deleted_at(&key("ns", "c")).as_deref(), Some("30"));
    assert_eq!(store.deleted_at(&key("ns", "nope")), None);
    store.apply(pod("ns", "a", "n1", 40)).unwrap();
    assert_eq!(store.deleted_at(&key("ns", "a")), None, "stored again");

    // Both the last state and the state sealed at the deletion are released.
    let store = Writer::new(StoreOptions {
        log_max_events: 0,
        ..node_index()
    });
    let empty = store.stats();
    for (_, p) in fixture_pods() {
        store.apply(p).unwrap();
    }
    for k in store.keys(None) {
        store.delete_at(&k, Some("99999999"));
    }
    store.reclaim();
    assert_eq!(store.stats(), empty);
}

#[test]
fn rejects_objects_without_identity() {
    let store = Writer::new(StoreOptions::default());
    assert_eq!(
        store.apply(json!([1])).unwrap_err(),
        StoreError::NotAnObject
    );
    assert_eq!(
        store.apply(json!({"metadata": {}})).unwrap_err(),
        StoreError::MissingName
    );
    assert_eq!(
        store.apply(json!({"metadata": {"name": ""}})).unwrap_err(),
        StoreError::MissingName
    );
    assert!(matches!(
        store.apply(json!({"metadata": {"name": "a", "namespace": 1}})),
        Err(StoreError::InvalidNamespace { .. })
    ));
    let mut deep = json!(1);
    for _ in 0..300 {
        deep = json!([deep]);
    }
    assert!(matches!(
        store.apply(json!({"metadata": {"name": "a"}, "deep": deep})),
        Err(StoreError::TooDeep { .. })
    ));
    assert_eq!(store.revision(), 0);
    assert_eq!(store.stats().interned_strings, 0);
}

/// A store whose change log keeps nothing: what it lets go of is retired at once.
fn store_keeping_no_log() -> Writer {
    Writer::new(StoreOptions {
        log_max_events: 0,
        ..StoreOptions::default()
    })
}

/// A pod with a label value of its own (an atom only it names).
fn labelled(name: &str, rv: u64, label: &str) -> Value {
    let mut p = pod("ns", name, "n1", rv);
    p["metadata"]["labels"] = json!({ "only-here": label });
    p
}

/// New atoms come and go, so that freed atom ids are taken again.
fn churn_atoms(store: &Writer) {
    for i in 0..200 {
        store
            .apply(labelled(&format!("b{i}"), 10 + i, &format!("v{i}")))
            .unwrap();
        store.delete(&key("ns", &format!("b{i}")));
    }
}

/// A handle read before its object changed decodes the version it was read at, even after
/// the store let that version go and other objects took the ids of the atoms it named.
#[test]
fn a_handle_outlives_the_version_it_was_read_at() {
    let store = store_keeping_no_log();
    store.apply(labelled("a", 1, "first")).unwrap();
    let read = store.get(&key("ns", "a")).unwrap();
    let listed = store.list(None).1;
    // The version read leaves the store (replaced, and the log keeps nothing)...
    store.apply(labelled("a", 2, "second")).unwrap();
    // ... and new atoms come and go meanwhile.
    churn_atoms(&store);
    store.reclaim();
    assert_eq!(read.to_json_value(), labelled("a", 1, "first"));
    assert_eq!(listed[0].to_json_value(), labelled("a", 1, "first"));
    assert_eq!(
        read.decode_at(&["metadata", "labels", "only-here"]),
        Some(json!("first"))
    );
    drop((read, listed));
    store.reclaim();
    let only = store.list(None).1;
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].to_json_value(), labelled("a", 2, "second"));
}

/// A modification's replaced state, handed back with the change, decodes as it was even when
/// the change log keeps nothing (the store lets that state go at once) and other objects then
/// take the ids of the atoms it named.
#[test]
fn a_changes_previous_state_outlives_a_log_that_keeps_nothing() {
    let store = store_keeping_no_log();
    store.apply(labelled("a", 1, "first")).unwrap();
    let change = store.apply(labelled("a", 2, "second")).unwrap().unwrap();
    churn_atoms(&store);
    store.reclaim();
    let previous = change
        .previous
        .expect("a modification has a previous state");
    assert_eq!(previous.to_json_value(), labelled("a", 1, "first"));
    assert_eq!(change.object.to_json_value(), labelled("a", 2, "second"));
}
