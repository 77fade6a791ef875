//! Owner mapping: the key of an object's controller owner of a given kind, read from
//! `metadata.ownerReferences` as controller-runtime's `EnqueueRequestForOwner` with
//! `OnlyControllerOwner` does (kind and API group compared, version ignored); and whether a
//! resource's transform keeps what that needs.

use serde_json::{json, Value};

use crate::transform::Transform;

/// Which owners name keys, and whether objects keep their own key too.
#[derive(Clone, Debug)]
pub struct Owners {
    kind: String,
    /// `None`: any group.
    group: Option<String>,
    pub and_self: bool,
}

impl Owners {
    /// `api_version` is the owner's group by one of its versions (`apps/v1`), or empty.
    pub fn new(kind: &str, api_version: &str, and_self: bool) -> Owners {
        Owners {
            kind: kind.to_string(),
            group: (!api_version.is_empty()).then(|| group_of(api_version).to_string()),
            and_self,
        }
    }

    /// The owners' kind, as their keys name it.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The name of the object's controller owner of this kind, if it has one.
    pub fn owner_of<'a>(&self, object: &'a Value) -> Option<&'a str> {
        let refs = object.pointer("/metadata/ownerReferences")?.as_array()?;
        let owner = refs
            .iter()
            .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
        let field = |f: &str| owner.get(f).and_then(Value::as_str);
        if field("kind")? != self.kind {
            return None;
        }
        if let Some(group) = &self.group {
            if group_of(field("apiVersion").unwrap_or_default()) != group {
                return None;
            }
        }
        field("name")
    }
}

/// `apps/v1` → `apps`; `v1` → `` (the core group).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Whether objects stored through `transform` keep the controller owner reference's kind,
/// apiVersion, name and controller flag: tried on an object that has them.
pub fn keeps_owner_references(transform: &Transform) -> bool {
    let reference = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
        "controller": true,
    });
    let mut probe = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "ownerReferences": [reference.clone()]},
    });
    transform.apply(&mut probe);
    let kept = probe.pointer("/metadata/ownerReferences/0");
    ["apiVersion", "kind", "name", "controller"]
        .iter()
        .all(|f| kept.and_then(|k| k.get(*f)) == reference.get(*f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(owner: Value) -> Value {
        json!({"metadata": {"name": "p", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ReplicaSet", "name": "not-controller"},
            owner,
        ]}})
    }

    #[test]
    fn the_controller_reference_of_the_kind_and_group_names_the_owner() {
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                        "controller": true});
        assert_eq!(
            Owners::new("ReplicaSet", "", false).owner_of(&pod(rs.clone())),
            Some("web")
        );
        assert_eq!(
            Owners::new("ReplicaSet", "apps/v2", false).owner_of(&pod(rs.clone())),
            Some("web"),
            "the version is not compared"
        );
        assert_eq!(
            Owners::new("ReplicaSet", "other.io/v1", false).owner_of(&pod(rs.clone())),
            None
        );
        assert_eq!(Owners::new("Job", "", false).owner_of(&pod(rs)), None);
        let not_controller = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x"});
        assert_eq!(
            Owners::new("ReplicaSet", "", false).owner_of(&pod(not_controller)),
            None
        );
    }

    #[test]
    fn transforms_that_strip_owner_references_are_told_apart() {
        assert!(keeps_owner_references(&Transform::identity()));
        assert!(keeps_owner_references(&Transform::controller()));
        let stripped = Transform::new(&["metadata.ownerReferences"], &[] as &[&str]).unwrap();
        assert!(!keeps_owner_references(&stripped));
        let kept_elsewhere = Transform::new(&[] as &[&str], &["status"]).unwrap();
        assert!(!keeps_owner_references(&kept_elsewhere));
    }
}
