//! The change log replays exactly and expires by count and by bytes.

use serde_json::json;

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
