//! Tests of the ingest steps: what each apiserver event does to a scope's store, including the
//! resourceVersions a DELETED carries and a lagging relist that must not move objects back.

use super::*;
use crate::{filter::Filter, transform::Transform};
use crate::{
    fleet::Decoding,
    store::{ChangeKind, Store, StoreOptions, Writer},
};
use serde_json::json;
use std::sync::Arc;

fn pod(ns: &str, name: &str, rv: &str, tier: &str) -> Projected {
    Projected::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                      "resourceVersion": rv, "labels": {"tier": tier}},
        "spec": {"nodeName": "node-1"}
    }))
}

fn pipeline(filter: Option<&str>) -> Pipeline {
    Pipeline {
        api_version: "v1".into(),
        kind: "Pod".into(),
        filter: filter.map(|f| Filter::compile(f).expect("filter")),
        shard: None,
        transform: Transform::identity(),
        store: Arc::new(Writer::new(StoreOptions::default())),
        max_object_size: crate::config::DEFAULT_MAX_OBJECT_SIZE,
        secret_data: crate::fleet::secret_data::SecretData::NotSecrets,
    }
}

fn list(scope: &mut ScopeIngest, objects: Vec<Projected>) {
    scope.handle(watcher::Event::Init);
    for o in objects {
        scope.handle(watcher::Event::InitApply(o));
    }
    assert_eq!(scope.handle(watcher::Event::InitDone), Progress::Synced);
}

fn changes(store: &Store, since: u64) -> Vec<(ChangeKind, String)> {
    store
        .changes_since(since)
        .expect("log")
        .into_iter()
        .map(|c| (c.kind, c.key.to_string()))
        .collect()
}

/// Pods x and y of namespace a, as first listed.
fn x_and_y() -> Vec<Projected> {
    vec![pod("a", "x", "1", "keep"), pod("a", "y", "2", "keep")]
}

/// A scope of namespace a that has listed [`x_and_y`], and the store's revision then.
fn synced_x_and_y() -> (Pipeline, ScopeIngest, u64) {
    let p = pipeline(None);
    let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
    list(&mut scope, x_and_y());
    let synced = p.store.revision();
    (p, scope, synced)
}

#[test]
fn a_relist_of_unchanged_objects_emits_no_event() {
    let (p, mut scope, synced) = synced_x_and_y();
    assert_eq!(synced, 2);
    // As after 410 Gone: the same objects, listed again.
    list(&mut scope, x_and_y());
    assert_eq!(p.store.revision(), synced);
    assert!(changes(&p.store, synced).is_empty());
}

#[test]
fn a_relist_emits_exactly_the_differences() {
    let (p, mut scope, synced) = synced_x_and_y();
    // While the stream was down: x changed, y was deleted, z was created.
    list(
        &mut scope,
        vec![pod("a", "x", "5", "other"), pod("a", "z", "6", "keep")],
    );
    let mut got = changes(&p.store, synced);
    got.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        got,
        vec![
            (ChangeKind::Modified, "a/x".to_string()),
            (ChangeKind::Deleted, "a/y".to_string()),
            (ChangeKind::Added, "a/z".to_string()),
        ]
    );
}

#[test]
fn a_relist_of_one_namespace_leaves_the_others_untouched() {
    let p = pipeline(None);
    let mut a = ScopeIngest::new(p.clone(), Some("a".into()));
    let mut b = ScopeIngest::new(p.clone(), Some("b".into()));
    list(&mut a, vec![pod("a", "x", "1", "keep")]);
    list(
        &mut b,
        vec![pod("b", "x", "2", "keep"), pod("b", "y", "3", "keep")],
    );
    let synced = p.store.revision();
    list(&mut a, vec![]);
    assert_eq!(
        changes(&p.store, synced),
        vec![(ChangeKind::Deleted, "a/x".to_string())]
    );
    assert_eq!(p.store.keys(Some("b")).len(), 2);
}

#[test]
fn objects_moving_out_of_and_into_the_filter_become_deleted_and_added() {
    let p = pipeline(Some(r#"object.metadata.labels["tier"] == "keep""#));
    let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
    list(
        &mut scope,
        vec![pod("a", "x", "1", "keep"), pod("a", "y", "2", "drop")],
    );
    assert_eq!(p.store.len(), 1, "only the matching object is stored");
    assert_eq!(scope.counters.filtered_out, 1);
    assert_eq!(scope.counters.received, 2);
    let synced = p.store.revision();
    scope.handle(watcher::Event::Apply(pod("a", "x", "3", "drop")));
    scope.handle(watcher::Event::Apply(pod("a", "y", "4", "keep")));
    // An update to an object that stays out of view changes nothing.
    scope.handle(watcher::Event::Apply(pod("a", "x", "5", "drop")));
    assert_eq!(
        changes(&p.store, synced),
        vec![
            (ChangeKind::Deleted, "a/x".to_string()),
            (ChangeKind::Added, "a/y".to_string())
        ]
    );
}

/// A resource caching one shard keeps exactly the objects in it, whether the apiserver sent
/// only those or (without its feature gate) every object, and its halves together keep all.
#[test]
fn a_shard_keeps_exactly_its_objects_and_two_halves_keep_all() {
    let halves = [
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    ];
    // Names that differ from their first byte, as uids do: FNV-1a spreads the last bytes of
    // a string little over the hash's high bits.
    let pods: Vec<String> = (0..200u32)
        .map(|i| format!("{:08x}-p{i}", i.wrapping_mul(2_654_435_761)))
        .collect();
    let mut kept = Vec::new();
    for half in halves {
        let shard = crate::filter::Shard::parse(half).expect("a valid shard");
        let mut p = pipeline(None);
        p.shard = Some(shard.clone());
        let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
        list(
            &mut scope,
            pods.iter().map(|n| pod("a", n, "1", "t")).collect(),
        );
        let mine: Vec<&String> = pods
            .iter()
            .filter(|n| shard.contains_meta(Some("a"), Some(&format!("uid-{n}"))))
            .collect();
        assert!(
            !mine.is_empty() && mine.len() < pods.len(),
            "the uids split"
        );
        assert_eq!(p.store.len(), mine.len(), "{half} keeps its shard only");
        assert_eq!(
            scope.counters.filtered_out as usize,
            pods.len() - mine.len()
        );
        for n in &mine {
            let key = crate::store::ObjectKey::new(Some("a"), n);
            assert!(p.store.as_reader().get(&key).is_some(), "{n} kept");
        }
        kept.extend(mine);
    }
    kept.sort();
    let mut all: Vec<&String> = pods.iter().collect();
    all.sort();
    assert_eq!(kept, all, "the halves together keep every object once");
}

/// The resourceVersions of the changes after `since`, with their kinds.
fn versions(store: &Store, since: u64) -> Vec<(ChangeKind, String)> {
    let changes = store.changes_since(since).expect("log");
    changes
        .into_iter()
        .map(|c| {
            let json = c.object.as_json()["metadata"]["resourceVersion"].clone();
            assert_eq!(json.as_str(), Some(c.object.resource_version()));
            (c.kind, c.object.resource_version().to_string())
        })
        .collect()
}

#[test]
fn a_deleted_carries_the_resource_version_of_the_change_that_removed_the_object() {
    let p = pipeline(Some(r#"object.metadata.labels["tier"] == "keep""#));
    let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
    list(
        &mut scope,
        vec![pod("a", "x", "1", "keep"), pod("a", "y", "2", "keep")],
    );
    let synced = p.store.revision();
    // A deletion, then a relabel out of the filter.
    scope.handle(watcher::Event::Delete(pod("a", "x", "7", "keep")));
    scope.handle(watcher::Event::Apply(pod("a", "y", "8", "drop")));
    assert_eq!(
        versions(&p.store, synced),
        vec![
            (ChangeKind::Deleted, "7".to_string()),
            (ChangeKind::Deleted, "8".to_string())
        ]
    );
}

#[test]
fn a_relist_deletes_at_the_newest_listed_version_and_never_before_the_objects_own() {
    let (p, mut scope, synced) = synced_x_and_y();
    // y vanished while the stream was down: the list (at 9 or later) has x at 9.
    list(&mut scope, vec![pod("a", "x", "9", "keep")]);
    assert_eq!(
        versions(&p.store, synced),
        vec![
            (ChangeKind::Modified, "9".to_string()),
            (ChangeKind::Deleted, "9".to_string())
        ]
    );
    // z, at 20, vanished; the only listed object is older than z.
    scope.handle(watcher::Event::Apply(pod("a", "z", "20", "keep")));
    let before = p.store.revision();
    list(&mut scope, vec![pod("a", "x", "9", "keep")]);
    assert_eq!(
        versions(&p.store, before),
        vec![(ChangeKind::Deleted, "20".to_string())]
    );
    // An empty list says nothing of its version: the last stored one stays.
    let before = p.store.revision();
    list(&mut scope, vec![]);
    assert_eq!(
        versions(&p.store, before),
        vec![(ChangeKind::Deleted, "9".to_string())]
    );
}

#[test]
fn a_lagging_relist_never_moves_an_object_back() {
    let p = pipeline(Some(r#"object.metadata.labels["tier"] == "keep""#));
    let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
    list(&mut scope, vec![pod("a", "x", "1", "keep")]);
    scope.handle(watcher::Event::Apply(pod("a", "x", "10", "keep")));
    let watched = p.store.revision();
    // A lagging apiserver lists x as it was at 5: once changed, once outside the filter.
    let mut older = pod("a", "x", "5", "keep");
    older.object.json_mut()["spec"]["nodeName"] = json!("node-2");
    list(&mut scope, vec![older]);
    list(&mut scope, vec![pod("a", "x", "5", "drop")]);
    assert!(changes(&p.store, watched).is_empty());
    let stored = p.store.get(&ObjectKey::new(Some("a"), "x")).expect("kept");
    assert_eq!(stored.resource_version(), "10");
    // The apiserver caught up: the newer state applies as usual.
    list(&mut scope, vec![pod("a", "x", "11", "drop")]);
    assert_eq!(
        versions(&p.store, watched),
        vec![(ChangeKind::Deleted, "11".to_string())]
    );
}

#[test]
fn an_update_the_store_refuses_removes_the_stale_version() {
    let p = pipeline(None);
    let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
    list(&mut scope, vec![pod("a", "x", "1", "keep")]);
    let synced = p.store.revision();
    let mut deep = json!("leaf");
    for _ in 0..300 {
        deep = json!({ "d": deep });
    }
    let mut update = pod("a", "x", "2", "keep");
    update.object.json_mut()["spec"]["deep"] = deep;
    scope.handle(watcher::Event::Apply(update));
    assert_eq!(
        changes(&p.store, synced),
        vec![(ChangeKind::Deleted, "a/x".to_string())]
    );
    assert_eq!(scope.counters.refused, 1);
}

#[test]
fn an_object_listed_without_kind_equals_the_same_object_watched_with_it() {
    let p = pipeline(None);
    let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
    list(&mut scope, vec![pod("a", "x", "1", "keep")]);
    let synced = p.store.revision();
    let mut watched = pod("a", "x", "1", "keep");
    watched.object.json_mut()["apiVersion"] = json!("v1");
    watched.object.json_mut()["kind"] = json!("Pod");
    scope.handle(watcher::Event::Apply(watched));
    assert!(changes(&p.store, synced).is_empty());
    let stored = p
        .store
        .get(&ObjectKey::new(Some("a"), "x"))
        .expect("stored");
    assert_eq!(stored.as_json()["kind"], "Pod");
    assert_eq!(stored.as_json()["apiVersion"], "v1");
}

#[test]
fn a_filter_sees_the_fields_its_transform_removes() {
    // Objects are decoded with the transform applied only when no filter needs to see them
    // whole: this filter reads the containers that the controller profile drops.
    let mut p = pipeline(Some("object.spec.containers.exists(c, c.name == 'app')"));
    p.transform = Transform::controller();
    assert!(p.decoding().is_none());
    let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
    let decode = |name: &str, container: &str| -> Projected {
        let _decoding = Decoding::enter(p.decoding());
        let text = json!({"metadata": {"namespace": "a", "name": name, "resourceVersion": "1",
                                       "managedFields": [{"manager": "m"}]},
                          "spec": {"nodeName": "n", "containers": [{"name": container}]}});
        serde_json::from_value(text).expect("decodes")
    };
    list(&mut scope, vec![decode("x", "app"), decode("y", "sidecar")]);
    let stored = p
        .store
        .get(&ObjectKey::new(Some("a"), "x"))
        .expect("x kept");
    assert_eq!(stored.as_json()["spec"], json!({"nodeName": "n"}));
    assert!(stored.as_json()["metadata"].get("managedFields").is_none());
    assert!(p.store.get(&ObjectKey::new(Some("a"), "y")).is_none());

    let unfiltered = pipeline(None);
    assert!(
        unfiltered.decoding().is_none(),
        "identity: nothing to remove"
    );
    let mut projected = pipeline(None);
    projected.transform = Transform::controller();
    assert!(projected.decoding().is_some());
}

#[test]
fn an_object_decoded_onto_a_tape_is_stored_as_the_same_object_decoded_whole() {
    let mut p = pipeline(None);
    p.transform = Transform::controller();
    let text = |kind: bool, rv: &str| {
        let mut pod = json!({"metadata": {"namespace": "a", "name": "x", "resourceVersion": rv,
                                          "labels": {"z": "1", "a": "2"},
                                          "managedFields": [{"manager": "m"}]},
                             "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
                             "status": {"phase": "Running", "hostIP": "10.0.0.1"}});
        if kind {
            // As a watch event carries them, in the apiserver's order (kind first).
            pod["kind"] = json!("Pod");
            pod["apiVersion"] = json!("v1");
        }
        pod.to_string()
    };
    let decode = |text: &str| -> Projected {
        let _decoding = Decoding::enter(p.decoding());
        crate::fleet::decode::object(text).expect("decodes")
    };
    let listed = decode(&text(false, "1"));
    assert!(matches!(listed.object, Decoded::Tape(_)));
    let mut scope = ScopeIngest::new(p.clone(), Some("a".into()));
    list(&mut scope, vec![listed]);
    let key = ObjectKey::new(Some("a"), "x");
    let mut expected: Value = serde_json::from_str(&text(true, "1")).unwrap();
    Transform::controller().apply(&mut expected);
    assert_eq!(p.store.get(&key).expect("stored").to_json_value(), expected);

    // The same object watched (with kind and apiVersion), or whole as JSON: no change.
    let synced = p.store.revision();
    scope.handle(watcher::Event::Apply(decode(&text(true, "1"))));
    scope.handle(watcher::Event::Apply(Projected::from_value(
        expected.clone(),
    )));
    assert!(changes(&p.store, synced).is_empty());
    // A new version from a tape replaces it.
    scope.handle(watcher::Event::Apply(decode(&text(true, "2"))));
    assert_eq!(
        changes(&p.store, synced),
        [(ChangeKind::Modified, "a/x".to_string())]
    );
    expected["metadata"]["resourceVersion"] = json!("2");
    assert_eq!(p.store.get(&key).expect("stored").to_json_value(), expected);
}

/// A scope's first list into a store that holds none of its objects keeps no set of the keys
/// listed (nothing can have vanished); a relist keeps one, and deletes what it did not list.
#[test]
fn only_a_list_over_objects_already_held_keeps_the_keys_it_saw() {
    let p = pipeline(None);
    let mut a = ScopeIngest::new(p.clone(), Some("a".into()));
    a.handle(watcher::Event::Init);
    assert!(a.listing.as_ref().is_some_and(|l| l.seen.is_none()));
    for o in x_and_y() {
        a.handle(watcher::Event::InitApply(o));
    }
    assert_eq!(a.handle(watcher::Event::InitDone), Progress::Synced);
    assert_eq!(p.store.keys(Some("a")).len(), 2);
    // Another namespace's first list, the store holding a's objects: none of its own.
    let mut b = ScopeIngest::new(p.clone(), Some("b".into()));
    b.handle(watcher::Event::Init);
    assert!(b.listing.as_ref().is_some_and(|l| l.seen.is_none()));
    // a's relist: its objects are held, so the keys are kept and y, not listed, goes.
    a.handle(watcher::Event::Init);
    assert!(a.listing.as_ref().is_some_and(|l| l.seen.is_some()));
    a.handle(watcher::Event::InitApply(pod("a", "x", "1", "keep")));
    a.handle(watcher::Event::InitDone);
    assert_eq!(p.store.keys(Some("a")).len(), 1);
}
