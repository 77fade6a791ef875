//! Resume tokens: a Watch's `since` is an (epoch, revision) pair; after the epoch check, the
//! revision is served from the store's change log (`Store::changes_since`). Input: any
//! revision, against stores with generated histories and small logs. Properties: a revision
//! ahead of the store is `FutureRevision`, one the log no longer reaches back to is `Expired`
//! (both naming the bounds), and any other gives exactly the changes after it, contiguous,
//! whose last state per object is what the store holds now.

use std::collections::BTreeMap;

use informerd::store::{ChangeKind, ObjectKey, StoreError, StoreOptions, Writer};
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::json;

use crate::corpus;

/// One write of a history: apply (name, generation) or delete (name).
#[derive(Clone, Debug)]
enum Write {
    Apply(u8, u8),
    Delete(u8),
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        3 => (0u8..6, any::<u8>()).prop_map(|(n, g)| Write::Apply(n, g)),
        1 => (0u8..6).prop_map(Write::Delete),
    ]
}

fn key(n: u8) -> ObjectKey {
    ObjectKey::new(Some("ns"), &format!("o-{n}"))
}

fn check(writes: &[Write], log_max_events: usize, revision: u64) {
    let writer = Writer::new(StoreOptions {
        log_max_events,
        ..StoreOptions::default()
    });
    for w in writes {
        match *w {
            Write::Apply(n, g) => {
                let object = json!({"metadata": {"name": format!("o-{n}"), "namespace": "ns",
                                    "resourceVersion": g.to_string()}, "spec": {"g": g}});
                writer.apply(object).expect("a valid object");
            }
            Write::Delete(n) => {
                writer.delete(&key(n));
            }
        }
    }
    let store = writer.as_reader();
    let current = store.revision();
    match store.changes_since(revision) {
        Err(StoreError::FutureRevision {
            requested,
            current: at,
        }) => {
            assert_eq!((requested, at), (revision, current));
            assert!(revision > current);
        }
        Err(StoreError::Expired {
            requested,
            oldest_available,
        }) => {
            assert_eq!(requested, revision);
            assert!(revision < oldest_available && oldest_available <= current);
            assert!(current - oldest_available <= log_max_events as u64);
        }
        Err(e) => panic!("since {revision}: {e}"),
        Ok(changes) => {
            assert!(revision <= current);
            let revisions: Vec<u64> = changes.iter().map(|c| c.revision).collect();
            assert_eq!(revisions, (revision + 1..=current).collect::<Vec<_>>());
            let mut last = BTreeMap::new();
            for change in &changes {
                last.insert(change.key.clone(), change);
            }
            for (key, change) in last {
                match change.kind {
                    ChangeKind::Deleted => assert!(store.get(&key).is_none(), "{key}"),
                    _ => assert_eq!(
                        store.get(&key).map(|o| o.to_json_value()),
                        Some(change.object.to_json_value())
                    ),
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(corpus::config("proptest-regressions/fuzz/tokens.txt"))]

    #[test]
    fn any_revision_resumes_or_says_why(
        writes in vec(write(), 0..40), log_max_events in 1usize..16,
        revision in prop_oneof![0u64..48, any::<u64>()],
    ) {
        check(&writes, log_max_events, revision);
    }
}

#[test]
fn extreme_revisions_are_refused() {
    let writes = [Write::Apply(1, 1), Write::Apply(1, 2), Write::Delete(1)];
    for revision in [0, 1, 3, 4, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
        check(&writes, 2, revision);
        check(&[], 2, revision);
    }
}
