//! Which encoding a store's blobs and atoms are in, as a fingerprint: a snapshot keeps them
//! as they are (see `snapshot`), so a build may restore only those written in its own layout.
//!
//! Decision: the fingerprint is computed, not only declared. It hashes [`LAYOUT`] with what
//! this build's codec makes of a canary object that holds every kind of value the codec has a
//! form for (timestamps with and without fractions, UUIDs, IPv4 addresses and CIDRs, digests
//! (a container's and a bare one), generated and derived names, an owner's name, a StatefulSet
//! pod's ordinal, a ReplicaSet pod's hash, a CronJob's Job with its owner reference, counters,
//! numbers, constant and templated arrays, a string long enough to be compressed). A change to
//! the encoding changes what the canary encodes to, so an older snapshot is refused even if
//! nobody remembered to bump [`LAYOUT`]; bump it for a change of what existing bytes mean that
//! the canary's encoding would not show.

use std::sync::OnceLock;

use serde_json::{json, Value};

use super::{StoreOptions, Writer};

/// Bumped by hand when the meaning of encoded bytes changes without the canary's encoding
/// changing.
const LAYOUT: u32 = 5;

/// The fingerprint of this build's encoding: equal for two builds only if both encode alike.
pub fn layout() -> &'static str {
    static FINGERPRINT: OnceLock<String> = OnceLock::new();
    FINGERPRINT.get_or_init(fingerprint)
}

/// Computes [`layout`]: the canary stored in a store of its own, hashed with [`LAYOUT`].
fn fingerprint() -> String {
    let store = Writer::new(StoreOptions::default());
    for object in canary() {
        store
            .apply(object)
            .expect("the canary objects are storable");
    }
    let image = store.image();
    let mut crc = crc32c::crc32c(&LAYOUT.to_le_bytes());
    for (id, bytes) in image.atoms() {
        crc = crc32c::crc32c_append(crc, &id.to_le_bytes());
        crc = crc32c::crc32c_append(crc, bytes);
    }
    for blob in image.objects() {
        crc = crc32c::crc32c_append(crc, blob);
    }
    format!("{LAYOUT}-{crc:08x}")
}

/// A StatefulSet's pod and a CronJob's Job's pod: the values relative to their names.
fn other_owners() -> [Value; 2] {
    let job_uid = "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f";
    [
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "db-3", "namespace": "canary", "resourceVersion": "123457",
                            "uid": "3d4e5f6a-7b8c-4d9e-8f0a-1b2c3d4e5f6a",
                            "labels": {"apps.kubernetes.io/pod-index": "3",
                                       "statefulset.kubernetes.io/pod-name": "db-3"},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                "name": "db", "uid": "4e5f6a7b-8c9d-4e0f-9a1b-2c3d4e5f6a7b"}]}}),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "backup-29075927-bcdfg", "namespace": "canary",
                            "generateName": "backup-29075927-", "resourceVersion": "123458",
                            "labels": {"job-name": "backup-29075927", "controller-uid": job_uid},
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                "name": "backup-29075927", "uid": job_uid, "controller": true}]}}),
    ]
}

/// Two pods of one owner, with every kind of value the codec encodes in a form of its own, and
/// the pods of [`other_owners`].
fn canary() -> Vec<Value> {
    let applied = format!(
        "{{\"note\":\"{}\"}}",
        "the same words again and ".repeat(20)
    );
    let pod = |name: &str, uid: &str, ip: &str, started: &str| {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "generateName": "web-7d4b9c8f6d-",
                "namespace": "canary",
                "uid": uid,
                "resourceVersion": "123456",
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied,
                                "checksum/config": "9e1f3c5a7b2d4f6e8a0c1b3d5f7e9a2c4b6d8f0e1a3c5b7d9f2e4a6c8b0d1f3e"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web-7d4b9c8f6d", "uid": "6f1c1f3e-2b8a-4c1e-9f0d-3a5b7c9d1e2f",
                    "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {
                "nodeName": "node-1",
                "priority": -5,
                "overhead": {"ratio": 1.5},
                "volumes": [{"name": format!("data-{name}"), "persistentVolumeClaim": {"claimName": format!("data-{name}-0")}}],
                "tolerations": [],
                "large": 18_446_744_073_709_551_615u64,
                "none": null,
                "hostNetwork": false,
                "enableServiceLinks": true,
            },
            "status": {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "hostCIDR": "10.1.0.0/16",
                "startTime": started,
                "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": started},
                    {"type": "PodScheduled", "status": "True",
                     "lastTransitionTime": "2026-01-02T03:04:06.123456Z"},
                ],
                "containerStatuses": [{
                    "name": "web",
                    "restartCount": 3,
                    "imageID": "docker.io/library/nginx@sha256:0f3a6b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8",
                    "containerID": "containerd://4c3b2a1908f7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b",
                }],
            },
        })
    };
    let mut pods = vec![
        pod(
            "web-7d4b9c8f6d-x7k2p",
            "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            "10.1.2.3",
            "2026-01-02T03:04:07Z",
        ),
        pod(
            "web-7d4b9c8f6d-q9m4z",
            "1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e",
            "10.1.2.4",
            "2026-01-03T03:04:07Z",
        ),
    ];
    pods.extend(other_owners());
    pods
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_does_not_depend_on_the_store_it_is_computed_in() {
        // Each store hashes with keys of its own (as each process does): the atoms' ids and the
        // bytes must not depend on them, or a restarted informerd would refuse its snapshot.
        let fingerprints: Vec<String> = (0..4).map(|_| fingerprint()).collect();
        assert!(
            fingerprints.iter().all(|f| f == layout()),
            "{fingerprints:?}"
        );
    }

    #[test]
    fn the_canary_round_trips() {
        let store = Writer::new(StoreOptions::default());
        for object in canary() {
            let key = super::super::ObjectKey::new(
                Some("canary"),
                object["metadata"]["name"].as_str().expect("a name"),
            );
            store.apply(object.clone()).expect("apply");
            let stored = store.get(&key).expect("stored");
            assert_eq!(stored.to_json_value(), object);
        }
    }
}
