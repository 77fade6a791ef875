//! Secondary indexes follow updates and deletes.

use serde_json::json;

use super::*;

#[test]
fn indexes_follow_updates_and_deletes() {
    let store = Writer::new(node_index());
    store.apply(pod("ns", "a", "n1", 1)).unwrap();
    store.apply(pod("ns", "b", "n1", 2)).unwrap();
    store.apply(pod("other", "a", "n2", 3)).unwrap();
    let names = |node: &str| -> Vec<String> {
        let (_, items) = store.list_by_index("node", node).unwrap();
        items.iter().map(|o| o.key().to_string()).collect()
    };
    assert_eq!(names("n1"), ["ns/a", "ns/b"]);
    assert_eq!(names("n2"), ["other/a"]);
    store.apply(pod("ns", "a", "n2", 4)).unwrap();
    assert_eq!(names("n1"), ["ns/b"]);
    assert_eq!(names("n2"), ["ns/a", "other/a"]);
    store.delete(&key("ns", "b"));
    assert!(names("n1").is_empty());
    let mut no_node = pod("ns", "a", "n2", 5);
    no_node["spec"] = json!({});
    store.apply(no_node).unwrap();
    assert_eq!(names("n2"), ["other/a"]);
    let (rev, _) = store.list_by_index("node", "n2").unwrap();
    assert_eq!(rev, store.revision());
    {
        let st = store.shared.read();
        assert_eq!(
            st.indexes[0].values.len(),
            1,
            "empty index values are dropped"
        );
    }
    assert!(matches!(
        store.list_by_index("zone", "a"),
        Err(StoreError::UnknownIndex { name, known }) if name == "zone" && known == "node"
    ));
}

#[test]
fn a_value_shared_by_many_objects_keeps_every_one_as_they_come_and_go() {
    let store = Writer::new(node_index());
    let names = |node: &str| -> Vec<String> {
        let (_, items) = store.list_by_index("node", node).unwrap();
        let mut names: Vec<String> = items.iter().map(|o| o.key().to_string()).collect();
        names.sort();
        names
    };
    let want = |range: std::ops::Range<u64>| -> Vec<String> {
        let mut names: Vec<String> = range.map(|i| format!("ns/p{i:03}")).collect();
        names.sort();
        names
    };
    // Past the few a value keeps in a vector, and back under them.
    for i in 0..100 {
        store
            .apply(pod("ns", &format!("p{i:03}"), "n1", i + 1))
            .unwrap();
    }
    assert_eq!(names("n1"), want(0..100));
    for i in 0..95 {
        store.delete(&key("ns", &format!("p{i:03}")));
    }
    assert_eq!(names("n1"), want(95..100));
    for i in 95..100 {
        store.delete(&key("ns", &format!("p{i:03}")));
    }
    assert!(names("n1").is_empty());
    assert!(store.shared.read().indexes[0].values.is_empty());
}
