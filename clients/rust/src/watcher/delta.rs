//! What a [`super::watcher()`] of a [`crate::Api::delta_resume`] handle has delivered, so that
//! when its token is refused it resumes by delta ([`crate::Start::Held`]) instead of relisting:
//! each object's key hash, resourceVersion hash and key, kept from the events it yields.

use std::collections::HashMap;

use crate::held::{fnv1a64, key_hash, Held};

/// The delivered objects: (resourceVersion hash, `namespace/name` or `name`) by key hash.
#[derive(Default)]
pub(super) struct Holdings(HashMap<u64, (u64, Box<str>)>);

impl Holdings {
    /// Forgets everything: a new `Init`..`InitDone` cycle delivers it all again.
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// An object delivered (`InitApply`, `Apply`) at `resource_version`.
    pub(super) fn applied(&mut self, namespace: Option<&str>, name: &str, resource_version: &str) {
        let key = match namespace.filter(|ns| !ns.is_empty()) {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        };
        let rv = fnv1a64(resource_version.as_bytes());
        self.0
            .insert(key_hash(namespace, name), (rv, key.into_boxed_str()));
    }

    /// An object deleted (`Delete`).
    pub(super) fn deleted(&mut self, namespace: Option<&str>, name: &str) {
        self.0.remove(&key_hash(namespace, name));
    }

    /// What a delta resume sends.
    pub(super) fn held(&self) -> Held {
        let mut held = Held::new();
        for (key, (rv, _)) in &self.0 {
            held.insert_hashes(*key, *rv);
        }
        held
    }

    /// The held objects a delta resume says are gone, forgotten here: (namespace, name) each
    /// (namespace empty for a cluster-scoped object).
    pub(super) fn take_gone(&mut self, gone: &[u64]) -> Vec<(String, String)> {
        gone.iter()
            .filter_map(|hash| self.0.remove(hash))
            .map(|(_, key)| match key.split_once('/') {
                Some((ns, name)) => (ns.to_string(), name.to_string()),
                None => (String::new(), key.into_string()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_delivered_is_held_and_gone_keys_come_back() {
        let mut h = Holdings::default();
        h.applied(Some("ns"), "a", "1");
        h.applied(Some("ns"), "b", "2");
        h.applied(None, "node", "3");
        h.deleted(Some("ns"), "b");
        h.applied(Some("ns"), "a", "4");
        let mut want = Held::new();
        want.insert(Some("ns"), "a", "4");
        want.insert(None, "node", "3");
        assert_eq!(h.held().len(), 2);
        let mut got = h
            .held()
            .into_proto()
            .entries
            .chunks(16)
            .map(<[u8]>::to_vec)
            .collect::<Vec<_>>();
        let mut expected = want
            .into_proto()
            .entries
            .chunks(16)
            .map(<[u8]>::to_vec)
            .collect::<Vec<_>>();
        got.sort();
        expected.sort();
        assert_eq!(got, expected);
        let gone = h.take_gone(&[key_hash(None, "node"), key_hash(Some("ns"), "zzz")]);
        assert_eq!(gone, vec![(String::new(), "node".to_string())]);
        assert_eq!(h.held().len(), 1);
    }
}
