//! The change log replays exactly and expires by count and by bytes.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::*;

#[test]
fn changes_since_replays_exactly_and_expires_by_count() {
    let store = Writer::new(StoreOptions {
        log_max_events: 5,
        ..StoreOptions::default()
    });
    for i in 0..8u64 {
        store
            .apply(pod("ns", &format!("p{}", i % 3), "n", 100 + i))
            .unwrap();
    }
    store.delete(&key("ns", "p0"));
    assert_eq!(store.revision(), 9);
    for since in 4..=9 {
        let changes = store.changes_since(since).unwrap();
        let revs: Vec<u64> = changes.iter().map(|c| c.revision).collect();
        assert_eq!(revs, ((since + 1)..=9).collect::<Vec<_>>());
    }
    let last = store.changes_since(8).unwrap();
    assert_eq!(
        (last[0].kind, last[0].key.clone()),
        (ChangeKind::Deleted, key("ns", "p0"))
    );
    assert_eq!(
        store.changes_since(3).unwrap_err(),
        StoreError::Expired {
            requested: 3,
            oldest_available: 4
        }
    );
    assert_eq!(
        store.changes_since(10).unwrap_err(),
        StoreError::FutureRevision {
            requested: 10,
            current: 9
        }
    );
    assert_eq!(store.stats().log_entries, 5);
}

#[test]
fn changes_since_expires_by_bytes() {
    // 2,000 bytes that do not compress (the store keeps large strings compressed, and the
    // budget is on the memory the log keeps alive).
    let big = |i: u64| {
        let mut p = pod("ns", "a", "n", i);
        let mut x = i;
        let noise: String = (0..2_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                char::from(b'a' + (x >> 59) as u8 % 26)
            })
            .collect();
        p["spec"]["payload"] = json!(noise);
        p
    };
    let store = Writer::new(StoreOptions {
        log_max_events: 1_000,
        log_max_bytes: 5_000,
        ..StoreOptions::default()
    });
    for i in 1..=10u64 {
        store.apply(big(i)).unwrap();
    }
    let stats = store.stats();
    assert!(stats.log_bytes <= 5_000, "{stats:?}");
    assert!(
        stats.log_entries < 10 && stats.log_entries >= 1,
        "{stats:?}"
    );
    let oldest = 10 - stats.log_entries as u64;
    assert!(matches!(
        store.changes_since(0),
        Err(StoreError::Expired { requested: 0, oldest_available }) if oldest_available == oldest
    ));
    let replay = store.changes_since(oldest).unwrap();
    assert_eq!(replay.len(), stats.log_entries);
    for c in &replay {
        assert_eq!(c.object.to_json_value(), big(c.revision));
        assert_eq!(
            c.previous.as_ref().unwrap().to_json_value(),
            big(c.revision - 1)
        );
    }
}

/// What each revision made: kind, key, object and (for a modification) the replaced one.
type Made = Vec<(ChangeKind, ObjectKey, Value, Option<Value>)>;

/// Applies a pod, and notes what it made.
fn apply_noted(
    store: &Writer,
    made: &mut Made,
    current: &mut HashMap<String, Value>,
    (name, node, rv): (&str, &str, u64),
) {
    let p = pod("ns", name, node, rv);
    let c = store.apply(p.clone()).unwrap().unwrap();
    let previous = current.insert(name.to_owned(), p.clone());
    made.push((c.kind, key("ns", name), p, previous));
}

/// Every logged change carries the state it made, and a modification the state it replaced,
/// whatever happened to the object and its slot since: modified again, deleted (also with a
/// resourceVersion of its own), its slot taken by another object, added again.
#[test]
fn each_change_carries_the_states_of_its_revision() {
    let store = Writer::new(StoreOptions::default());
    let (mut made, mut current) = (Made::new(), HashMap::new());
    for step in [
        ("a", "n1", 1),
        ("b", "n1", 2),
        ("a", "n2", 3),
        ("a", "n3", 4),
    ] {
        apply_noted(&store, &mut made, &mut current, step);
    }
    store.delete(&key("ns", "a")).unwrap();
    let last_a = current.remove("a").unwrap();
    made.push((ChangeKind::Deleted, key("ns", "a"), last_a, None));
    // Another object takes the freed slot, then "a" comes back and "b" goes at its own version.
    for step in [("c", "n1", 5), ("a", "n4", 6), ("c", "n2", 7)] {
        apply_noted(&store, &mut made, &mut current, step);
    }
    store.delete_at(&key("ns", "b"), Some("8")).unwrap();
    let mut last_b = current.remove("b").unwrap();
    last_b["metadata"]["resourceVersion"] = json!("8");
    made.push((ChangeKind::Deleted, key("ns", "b"), last_b, None));

    for since in 0..made.len() as u64 {
        let changes = store.changes_since(since).unwrap();
        assert_eq!(changes.len(), made.len() - since as usize);
        for (c, (kind, k, object, previous)) in changes.iter().zip(&made[since as usize..]) {
            assert_eq!((&c.kind, &c.key), (kind, k), "revision {}", c.revision);
            assert_eq!(&c.object.to_json_value(), object, "revision {}", c.revision);
            let expected_previous = previous.as_ref().filter(|_| *kind == ChangeKind::Modified);
            assert_eq!(
                c.previous
                    .as_ref()
                    .map(StoredObject::to_json_value)
                    .as_ref(),
                expected_previous,
                "revision {}",
                c.revision
            );
        }
    }
}
