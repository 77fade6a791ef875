//! Reads: keys and lists by namespace, revision subscriptions, readers beside a writer.

use std::sync::Arc;

use serde_json::json;

use super::*;

#[test]
fn keys_and_lists_by_namespace() {
    let store = Writer::new(StoreOptions::default());
    for ns in ["a", "b"] {
        for i in 0..3 {
            store.apply(pod(ns, &format!("p{i}"), "n", 1)).unwrap();
        }
    }
    store
        .apply(json!({"kind": "Namespace", "metadata": {"name": "a"}}))
        .unwrap();
    let mut keys = store.keys(Some("a"));
    keys.sort();
    assert_eq!(keys, vec![key("a", "p0"), key("a", "p1"), key("a", "p2")]);
    assert_eq!(store.keys(None).len(), 7);
    assert!(store.keys(Some("zzz")).is_empty());
    let (rev, items) = store.list(Some("b"));
    assert_eq!(rev, 7);
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|o| o.key().namespace() == Some("b")));
    let (_, all) = store.list(None);
    assert_eq!(
        all[0].key(),
        &ObjectKey::new(None, "a"),
        "sorted, cluster-scoped first"
    );
    for k in store.keys(Some("a")) {
        store.delete(&k);
    }
    assert_eq!(store.keys(Some("a")).len(), 0);
    assert_eq!(store.len(), 4);
}

#[tokio::test]
async fn subscribers_see_new_revisions() {
    let store = Arc::new(Writer::new(StoreOptions::default()));
    let mut rx = store.subscribe();
    assert_eq!(*rx.borrow(), 0);
    let writer = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || {
            for i in 0..5 {
                store.apply(pod("ns", &format!("p{i}"), "n", 1)).unwrap();
            }
        })
    };
    while *rx.borrow_and_update() < 5 {
        rx.changed().await.unwrap();
    }
    writer.await.unwrap();
    assert_eq!(store.revision(), 5);
}

#[test]
fn concurrent_readers_and_writer() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
    assert_send_sync::<Writer>();
    assert_send_sync::<StoredObject>();
    assert_send_sync::<Change>();
    let store = Arc::new(Writer::new(node_index()));
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..2_000u64 {
                store
                    .apply(pod(
                        "ns",
                        &format!("p{}", i % 50),
                        &format!("n{}", i % 7),
                        i + 1,
                    ))
                    .unwrap();
                if i % 10 == 0 {
                    store.delete(&key("ns", &format!("p{}", (i / 10) % 50)));
                }
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..200 {
                    let (rev, items) = store.list(None);
                    assert!(rev <= store.revision());
                    for o in items.iter().take(5) {
                        let v = o.to_json_value();
                        assert_eq!(v["metadata"]["name"].as_str(), Some(o.key().name()));
                    }
                }
            });
        }
    });
    let (_, items) = store.list(None);
    for o in &items {
        assert_eq!(
            o.to_json_value()["metadata"]["resourceVersion"],
            o.resource_version()
        );
    }
}
