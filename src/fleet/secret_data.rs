//! Secrets safe by default. A controller that caches Secrets usually reads their metadata (to
//! find the ones it owns) and whether their content changed (to roll what mounts them), seldom
//! the values; yet a cache that holds the values hands them to every process that reads it, and
//! a heap dump of any of them exposes every Secret cached. So a core/v1 Secret is stored
//! without `data` and `stringData` unless the resource's `transform.keep` names them, and always
//! with the annotation [`DATA_HASH_ANNOTATION`]: the SHA-256 of its data, so that a controller
//! can still tell that the content changed (compare the annotation, as Helm's
//! `checksum/secret` annotations and config reloaders do).
//!
//! Decision: the hash is unkeyed SHA-256 over the canonical JSON of `{"data": ..,
//! "stringData": ..}` (keys sorted): the same content gives the same hash across restarts, warm
//! or cold, and across sidecars, so a relist does not make every Secret look changed. A hash
//! does not hide a value that can be guessed (a short password can be found by trying
//! candidates): what the cache withholds is the values themselves; a client that may read a
//! Secret can read its values from the apiserver anyway (docs/authorization.md).
//!
//! Decision: explicit means a `keep` path whose first field is `data` or `stringData`
//! (`keep: [metadata, type, data]`, or one key: `data["tls.crt"]`). A resource with no
//! transform, or one that only drops, loses the values: the opt-in is `keep`, as written in
//! the configuration, not the absence of a `drop`.

use std::collections::BTreeMap;

use ring::digest::{digest, SHA256};
use serde_json::{Map, Value};

use crate::config::ResourceConfig;
use crate::vocab::path::Segment;

/// The annotation holding `sha256:HEX` of a cached Secret's data (an absent or empty field
/// counts as `{}`).
pub const DATA_HASH_ANNOTATION: &str = "informerd.io/data-hash";

/// The fields of a Secret that hold its values.
const VALUE_FIELDS: [&str; 2] = ["data", "stringData"];

/// What a resource's pipeline does with the values of the objects it stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretData {
    /// Not core/v1 Secrets: objects are stored as the transform leaves them.
    NotSecrets,
    /// Secrets whose `transform.keep` names their values: kept (and hashed).
    Kept,
    /// Secrets stored without their values, with the hash of them.
    Withheld,
}

impl SecretData {
    /// What `rc` does with Secret values.
    pub fn of(rc: &ResourceConfig) -> SecretData {
        if !(rc.group.is_empty() && rc.kind == "Secret") {
            return SecretData::NotSecrets;
        }
        let kept = rc.transform.keep_paths().iter().any(|path| {
            matches!(path.segments().first(), Some(Segment::Field(f)) if VALUE_FIELDS.contains(&f.as_str()))
        });
        if kept {
            SecretData::Kept
        } else {
            SecretData::Withheld
        }
    }

    /// Whether objects must reach the pipeline whole (not transformed while decoding): the
    /// hash is of the values the transform may remove.
    pub fn needs_whole_objects(self) -> bool {
        self != SecretData::NotSecrets
    }

    /// Before the transform: the hash of `object`'s values (`None` for other kinds), and the
    /// values removed when they are withheld.
    pub fn take(self, object: &mut Value) -> Option<String> {
        if self == SecretData::NotSecrets {
            return None;
        }
        let hash = data_hash(object);
        if self == SecretData::Withheld {
            if let Some(fields) = object.as_object_mut() {
                for field in VALUE_FIELDS {
                    fields.remove(field);
                }
            }
        }
        Some(hash)
    }

    /// After the transform: `object` carries `hash` (from [`SecretData::take`]) as
    /// [`DATA_HASH_ANNOTATION`], whatever the transform kept of its annotations.
    pub fn annotate(object: &mut Value, hash: String) {
        let Some(fields) = object.as_object_mut() else {
            return;
        };
        let metadata = fields
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(metadata) = metadata.as_object_mut() else {
            return;
        };
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !annotations.is_object() {
            *annotations = Value::Object(Map::new());
        }
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(DATA_HASH_ANNOTATION.to_string(), Value::String(hash));
        }
    }
}

/// `sha256:HEX` of `{"data": .., "stringData": ..}` as canonical JSON: keys sorted (here, not
/// by serde_json's map, whose order a dependency's `preserve_order` feature would change); an
/// absent field is `null`.
fn data_hash(object: &Value) -> String {
    let canonical: BTreeMap<&str, BTreeMap<&str, &Value>> = VALUE_FIELDS
        .iter()
        .map(|field| {
            let values = object
                .get(*field)
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
                .unwrap_or_default();
            (*field, values)
        })
        .collect();
    let text = serde_json::to_vec(&canonical).unwrap_or_default();
    let sum = digest(&SHA256, &text);
    let hex: String = sum.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::parse;

    fn resource(entry: &str) -> ResourceConfig {
        let text = format!("apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n{entry}");
        parse("t.yaml", &text).expect("valid").resources.remove(0)
    }

    fn secret(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": "s", "namespace": "ns", "labels": {"a": "b"}},
               "data": data})
    }

    #[test]
    fn secrets_withhold_their_values_unless_keep_names_them() {
        let plain = "- {apiVersion: v1, kind: Secret, allowSecrets: true}\n";
        assert_eq!(SecretData::of(&resource(plain)), SecretData::Withheld);
        let dropping = "- {apiVersion: v1, kind: Secret, allowSecrets: true, transform: {drop: [metadata.managedFields]}}\n";
        assert_eq!(SecretData::of(&resource(dropping)), SecretData::Withheld);
        let keeping = "- {apiVersion: v1, kind: Secret, allowSecrets: true, transform: {keep: [metadata, data]}}\n";
        assert_eq!(SecretData::of(&resource(keeping)), SecretData::Kept);
        let one_key = "- {apiVersion: v1, kind: Secret, allowSecrets: true, transform: {keep: ['data[\"tls.crt\"]']}}\n";
        assert_eq!(SecretData::of(&resource(one_key)), SecretData::Kept);
        let config_maps = "- {apiVersion: v1, kind: ConfigMap}\n";
        assert_eq!(
            SecretData::of(&resource(config_maps)),
            SecretData::NotSecrets
        );
    }

    #[test]
    fn the_hash_follows_the_values_and_survives_the_transform() {
        let mut a = secret(json!({"password": "aGVsbG8="}));
        let hash_a = SecretData::Withheld.take(&mut a).expect("a secret");
        assert!(a.get("data").is_none(), "{a}");
        assert_eq!(a["metadata"]["labels"]["a"], "b");
        let mut same = secret(json!({"password": "aGVsbG8="}));
        assert_eq!(SecretData::Kept.take(&mut same), Some(hash_a.clone()));
        assert_eq!(same["data"]["password"], "aGVsbG8=", "kept when asked");
        let mut other = secret(json!({"password": "d29ybGQ="}));
        let hash_other = SecretData::Withheld.take(&mut other).expect("a secret");
        assert_ne!(hash_a, hash_other);
        assert!(
            hash_a.starts_with("sha256:") && hash_a.len() == 7 + 64,
            "{hash_a}"
        );
        // A transform that kept no annotations: the hash is set after it.
        let mut bare = json!({"metadata": {"name": "s"}});
        SecretData::annotate(&mut bare, hash_a.clone());
        assert_eq!(
            bare["metadata"]["annotations"][DATA_HASH_ANNOTATION],
            hash_a
        );
        let mut config_map = json!({"data": {"k": "v"}});
        assert_eq!(SecretData::NotSecrets.take(&mut config_map), None);
        assert_eq!(config_map["data"]["k"], "v");
    }
}
